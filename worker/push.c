/*
 * push.c - POST /api/v1/ephemeral/push: all or nothing, ids in push order.
 *
 * The body is scanned once (http_parse_push finds each payload's span
 * without building a tree); the payload bytes go into the segment as sent.
 */
#include "worker/push.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/ids.h"
#include "http/parse.h"
#include "http/reply.h"
#include "http/request.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/worker_int.h"

static const char default_partition[] = "Default";

/* scratch - room for n message descriptors in the worker's scratch. */
static int
scratch(struct worker *w, uint32_t n)
{
    if (n <= w->msgs_cap)
        return 0;
    struct shm_msg_in *m = realloc(w->msgs, n * sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    w->msgs = m;
    w->msgs_cap = n;
    return 0;
}

/*
 * reply_ids - 201 {"pushed": n, "ids": [...]}.  Every id shares the prefix
 * '"e:<incarnation>:<partition>:', so the prefix is written once and
 * copied; the reply is reserved once at its largest size.
 */
static void
reply_ids(struct worker *w, struct http_request *req, struct shm_name part,
          uint32_t n, uint64_t first)
{
    static const char head[] = "{\"pushed\":", mid[] = ",\"ids\":[";
    size_t plen = HTTP_ID_PREFIX_LEN(http_json_esc_len(part.ptr, part.len));
    struct http_buf b = {0};
    char *o, *prefix;

    if (http_buf_reserve(&b, sizeof(head) + HTTP_PUT_U64_MAX + sizeof(mid) +
                                 (size_t)n * (plen + HTTP_ID_SEQ_MAX + 1) +
                                 2) != 0) {
        http_reply(req, 201, &b); /* oom: answered 500 */
        return;
    }
    o = http_buf_tail(&b);
    memcpy(o, head, sizeof(head) - 1);
    o = http_put_u64(o + sizeof(head) - 1, n);
    memcpy(o, mid, sizeof(mid) - 1);
    o += sizeof(mid) - 1;
    prefix = o;
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0) {
            o = http_id_put_prefix(o, w->incarnation, part.ptr, part.len);
        } else {
            *o++ = ',';
            memcpy(o, prefix, plen);
            o += plen;
        }
        o = http_id_put_seq(o, first + i);
    }
    *o++ = ']';
    *o++ = '}';
    http_buf_commit(&b, o);
    http_reply(req, 201, &b);
}

/* worker_push - see push.h. */
void
worker_push(struct worker *w, struct http_request *req)
{
    struct http_push p;
    struct http_error err;
    size_t len;
    const char *body = http_request_body(req, &len);
    uint64_t first = 0;
    int rc;

    if (http_parse_push(body, len, &p, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    struct shm_name queue = {p.queue.ptr, p.queue.len};
    struct shm_name part = {default_partition, sizeof(default_partition) - 1};
    struct worker_qname in;
    if (p.has_partition)
        part = (struct shm_name){p.partition.ptr, p.partition.len};
    if (!http_reply_name_ok(req, "queue", queue.ptr, queue.len) ||
        !http_reply_name_ok(req, "partition", part.ptr, part.len) ||
        !worker_authz(w, req, AUTH_PUSH, "queue", queue, &in) ||
        !worker_route(w, req, in.name, part, 0))
        goto out;
    queue = in.name;
    if (scratch(w, p.n) != 0) {
        http_reply_errno(req, -ENOMEM, "push");
        goto out;
    }
    for (uint32_t i = 0; i < p.n; i++)
        w->msgs[i] =
            (struct shm_msg_in){p.payloads[i].ptr, (uint32_t)p.payloads[i].len};
    if (!worker_tenant_admit(w, req, w->msgs, p.n))
        goto out; /* 429 rate_limited, 503 ephemeral_unavailable */
    rc = shm_push(w->seg, w->set.slot, queue, part, w->msgs, p.n, shm_now_ms(),
                  &first);
    if (rc != 0) {
        worker_tenant_refund(w, p.n); /* a refusal changes nothing */
        http_reply_errno(req, rc, "push");
        goto out;
    }
    reply_ids(w, req, part, p.n, first);
out:
    http_push_free(&p);
}
