/*
 * push.c - POST /api/v1/ephemeral/push: all or nothing, ids in push order.
 *
 * The body is scanned once (http_parse_push finds each payload's span
 * without building a tree); the payload bytes go into the segment as sent.
 * A message's key, delayMs and ttlSeconds (SPEC §13) are checked against
 * their ceilings here, on whichever node the push reached (the queue's
 * options are the catalog's, the same everywhere), before it is forwarded;
 * a push with any of them goes through shm_push_keyed and, with a key,
 * answers "duplicates" and "conflated" (what its keys replaced on a queue
 * that conflates).
 */
#include "worker/push.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/ids.h"
#include "http/parse.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/catalog.h"
#include "shm/dir.h"
#include "shm/queue_admin.h"
#include "shm/ring.h"
#include "shm/wake.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/push_route.h"
#include "worker/worker_int.h"

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
 * reply_ids - 201 {"pushed": n, "ids": [...]}: consecutive ids of one
 * partition (http_id_put_run); the reply is reserved once at its largest
 * size.
 */
static void
reply_ids(struct worker *w, struct http_request *req, struct shm_name part,
          uint32_t n, uint64_t first)
{
    static const char head[] = "{\"pushed\":", mid[] = ",\"ids\":[";
    size_t plen = HTTP_ID_PREFIX_LEN(http_json_esc_len(part.ptr, part.len));
    struct http_buf b = {0};
    char *o;

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
    if (n > 0)
        o = http_id_put_run(o, w->incarnation, part.ptr, part.len, first, n);
    *o++ = ']';
    *o++ = '}';
    http_buf_commit(&b, o);
    http_reply(req, 201, &b);
}

#define KEY_SEED 0x64656475706bULL /* dedupe keys' hash seed */

/*
 * reply_keyed - 201 {"pushed": stored, "ids": [...], "duplicates": dups,
 * "conflated": replaced}: a duplicate's id names the message its key was
 * first seen with, on whichever incarnation answered it then (a hand-over
 * keeps it); every message of a conflating push is stored, and replaced
 * counts the older ones they replaced (an earlier one of the batch too).
 */
static void
reply_keyed(struct http_request *req, struct shm_name part,
            const struct shm_push_id *ids, uint32_t n, uint32_t dups,
            uint32_t replaced)
{
    size_t plen = HTTP_ID_PREFIX_LEN(http_json_esc_len(part.ptr, part.len));
    struct http_buf b = {0};

    if (http_buf_reserve(&b, 64 + (size_t)n * (plen + HTTP_ID_SEQ_MAX + 1)) !=
        0) {
        http_reply(req, 201, &b); /* oom: answered 500 */
        return;
    }
    char *o = http_buf_tail(&b);
    o += sprintf(o, "{\"pushed\":%u,\"ids\":[", n - dups);
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0)
            *o++ = ',';
        o = http_id_put_prefix(o, ids[i].inc, part.ptr, part.len);
        o = http_id_put_seq(o, ids[i].seq);
    }
    o += sprintf(o, "],\"duplicates\":%u,\"conflated\":%u}", dups, replaced);
    http_buf_commit(&b, o);
    http_reply(req, 201, &b);
}

/* extras_check - each message's delayMs within max_delay_ms and
 * ttlSeconds within the queue's (and what an id's packing holds): 1, or
 * 0 answered 400 naming the field. */
static int
extras_check(struct worker *w, struct http_request *req, struct shm_name queue,
             const struct http_push *p)
{
    struct shm_qopts o = shm_params_of(w->seg)->defaults;
    uint32_t ttl_max;

    shm_catalog_lookup(w->seg->catalog, queue.ptr, queue.len, &o);
    ttl_max =
        o.ttl_s != 0 && o.ttl_s < SHM_MSG_TTL_MAX ? o.ttl_s : SHM_MSG_TTL_MAX;
    for (uint32_t i = 0; i < p->n; i++) {
        const struct http_push_extra *e = &p->extras[i];
        if (e->delay_ms > w->set.max_delay_ms) {
            http_reply_error(req, 400, "ephemeral_bad_request",
                             "field 'messages[%u].delayMs' must be at most "
                             "%u (max_delay_ms)",
                             i, w->set.max_delay_ms);
            return 0;
        }
        if (e->has_ttl && (e->ttl_s == 0 || e->ttl_s > ttl_max)) {
            http_reply_error(req, 400, "ephemeral_bad_request",
                             "field 'messages[%u].ttlSeconds' must be from 1 "
                             "to %u (%s)",
                             i, ttl_max,
                             o.ttl_s != 0 ? "the queue's ttlSeconds"
                                          : "the longest a message may say");
            return 0;
        }
    }
    return 1;
}

/* msg_cost - the bytes message i of p takes in the queue's bounds, as the
 * broker counts them (a key is stored beside the payload). */
static uint64_t
msg_cost(const struct http_push *p, uint32_t i)
{
    int keyed = p->extras != NULL && p->extras[i].has_key;

    return shm_ring_msg_cost(p->payloads[i].len +
                             (keyed ? SHM_MSG_KEY_BYTES : 0));
}

/* too_large - 413 payload_too_large for p (rc -EFBIG): a batch no wait
 * can make room for, naming the bound it passes (SPEC §2): the queue's
 * maxLength or maxBytes under policy reject, else the node's memory. */
static void
too_large(struct worker *w, struct http_request *req, struct shm_name shown,
          const struct shm_qopts *o, const struct http_push *p)
{
    int qlen = (int)(shown.len > 200 ? 200 : shown.len);
    uint64_t cost = 0;

    for (uint32_t i = 0; i < p->n; i++)
        cost += msg_cost(p, i);
    if (o->policy != SHM_POLICY_DROP_OLDEST && p->n > o->max_length)
        http_reply_error(req, 413, "payload_too_large",
                         "push: %u messages are more than queue '%.*s' may "
                         "ever hold (maxLength %llu, policy reject): push at "
                         "most %llu at a time",
                         p->n, qlen, shown.ptr,
                         (unsigned long long)o->max_length,
                         (unsigned long long)o->max_length);
    else if (o->policy != SHM_POLICY_DROP_OLDEST && cost > o->max_bytes)
        http_reply_error(req, 413, "payload_too_large",
                         "push: %u messages of %llu bytes are more than "
                         "queue '%.*s' may ever hold (maxBytes %llu, policy "
                         "reject): push them in smaller batches",
                         p->n, (unsigned long long)cost, qlen, shown.ptr,
                         (unsigned long long)o->max_bytes);
    else
        http_reply_error(req, 413, "payload_too_large",
                         "push: %u messages of %llu bytes are more than this "
                         "node holds of pushes (%llu of its max_bytes %llu): "
                         "push them in smaller batches",
                         p->n, (unsigned long long)cost,
                         (unsigned long long)shm_push_cap(w->seg),
                         (unsigned long long)shm_params_of(w->seg)->max_bytes);
}

/*
 * refused - answer a push the queue's bounds refused (rc -EMSGSIZE,
 * -EFBIG or -ENOSPC; anything else through the errno table), naming what
 * failed (SPEC §2): the queue, the message (its index in the batch) or the
 * bound, and the limit.  The bound is read again here, after the refusal:
 * a push racing this one may have changed what the queue holds, so the
 * sentence names maxLength when the count alone is past it, else maxBytes.
 */
static void
refused(struct worker *w, struct http_request *req, struct shm_name queue,
        const struct http_push *p, int rc)
{
    struct shm_name shown = worker_client_name(queue);
    struct shm_queue_info q;
    int qlen = (int)(shown.len > 200 ? 200 : shown.len);

    if (rc != -EMSGSIZE && rc != -ENOSPC && rc != -EFBIG) {
        http_reply_errno(req, rc, "push");
        return;
    }
    if (shm_queue_depth(w->seg, queue, NULL, shm_now_ms(), &q, NULL, NULL,
                        NULL) != 0) {
        memset(&q, 0, sizeof(q)); /* none held yet: the catalog's bounds */
        q.opts = shm_params_of(w->seg)->defaults;
        shm_catalog_lookup(w->seg->catalog, queue.ptr, queue.len, &q.opts);
    }
    if (rc == -EFBIG) {
        too_large(w, req, shown, &q.opts, p);
        return;
    }
    if (rc == -EMSGSIZE) {
        for (uint32_t i = 0; i < p->n; i++) {
            uint64_t c = msg_cost(p, i);
            if (c > q.opts.max_bytes) {
                http_reply_error(req, 413, "message_too_large",
                                 "push: message %u takes %llu bytes, more "
                                 "than queue '%.*s' holds at most (maxBytes "
                                 "%llu)",
                                 i, (unsigned long long)c, qlen, shown.ptr,
                                 (unsigned long long)q.opts.max_bytes);
                return;
            }
        }
        http_reply_errno(req, rc, "push"); /* its bounds changed since */
        return;
    }
    uint64_t cost = 0;
    for (uint32_t i = 0; i < p->n; i++)
        cost += msg_cost(p, i);
    if (q.depth + p->n > q.opts.max_length)
        http_reply_error(req, 429, "queue_full",
                         "push: queue '%.*s' is full: it holds %llu messages, "
                         "and %u more would pass its maxLength %llu",
                         qlen, shown.ptr, (unsigned long long)q.depth, p->n,
                         (unsigned long long)q.opts.max_length);
    else
        http_reply_error(req, 429, "queue_full",
                         "push: queue '%.*s' is full: %u message%s of %llu "
                         "bytes would pass its maxBytes %llu",
                         qlen, shown.ptr, p->n, p->n == 1 ? "" : "s",
                         (unsigned long long)cost,
                         (unsigned long long)q.opts.max_bytes);
}

/* all_keyed - whether every message of p carries a key and queue has a
 * dedupe window: then a forward that times out may be sent again. */
static int
all_keyed(struct worker *w, struct shm_name queue, const struct http_push *p)
{
    struct shm_qopts o = shm_params_of(w->seg)->defaults;

    if (p->extras == NULL || p->n == 0)
        return 0;
    for (uint32_t i = 0; i < p->n; i++)
        if (!p->extras[i].has_key)
            return 0;
    shm_catalog_lookup(w->seg->catalog, queue.ptr, queue.len, &o);
    return o.dedupe_s > 0;
}

/* after_wakes - a push answers after the calls parked on this worker
 * that are to be woken: whenever this worker's wake queue holds a handle
 * (this push's, or any other's still pending), the push is held so those
 * calls answer first; the parked pop's reply is the one a consumer waits
 * on (http_request_hold; http/edge.h D22). */
static void
after_wakes(struct worker *w, struct http_request *req)
{
    if (shm_wake_pending(w->seg, w->set.slot))
        http_request_hold(req);
}

/* push_keyed - the push of messages that carry extras (p->extras). */
static void
push_keyed(struct worker *w, struct http_request *req, struct shm_name queue,
           struct shm_name part, const struct http_push *p)
{
    struct shm_msg_extra *ex = calloc(p->n ? p->n : 1, sizeof(*ex));
    struct shm_push_id *ids = calloc(p->n ? p->n : 1, sizeof(*ids));
    uint32_t dups = 0, replaced = 0;
    int keyed = 0, rc;

    if (ex == NULL || ids == NULL) {
        http_reply_errno(req, -ENOMEM, "push");
        goto out;
    }
    for (uint32_t i = 0; i < p->n; i++) {
        const struct http_push_extra *e = &p->extras[i];
        struct shm_name key = {e->key.ptr, e->key.len};
        ex[i] = (struct shm_msg_extra){
            .delay_ms = e->delay_ms,
            .ttl_s = e->has_ttl ? e->ttl_s : 0,
            .key_hash = e->has_key ? shm_dir_name_hash(key, KEY_SEED) : 0,
            .has_key = e->has_key};
        keyed |= e->has_key;
    }
    rc = shm_push_keyed(w->seg, w->set.slot, queue, part, w->msgs, ex, p->n,
                        shm_now_ms(), ids, &dups, &replaced);
    if (rc != 0) {
        worker_tenant_refund(w, p->n); /* a refusal changes nothing */
        refused(w, req, queue, p, rc);
        goto out;
    }
    if (keyed)
        reply_keyed(req, part, ids, p->n, dups, replaced);
    else
        reply_ids(w, req, part, p->n, ids[0].seq);
    after_wakes(w, req);
out:
    free(ex);
    free(ids);
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

    if (!worker_push_route(w, req))
        return; /* another node's partition: forwarded unparsed */
    if (http_parse_push(body, len, &p, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    struct shm_name queue = {p.queue.ptr, p.queue.len};
    struct shm_name part = WORKER_PUSH_DEFAULT_PART;
    struct worker_qname in;
    if (p.has_partition)
        part = (struct shm_name){p.partition.ptr, p.partition.len};
    if (!http_reply_name_ok(req, "queue", queue.ptr, queue.len) ||
        !http_reply_name_ok(req, "partition", part.ptr, part.len) ||
        !worker_authz(w, req, AUTH_PUSH, "queue", queue, &in) ||
        (p.extras != NULL && !extras_check(w, req, in.name, &p)) ||
        !(all_keyed(w, in.name, &p) ? worker_route_keyed(w, req, in.name, part)
                                    : worker_route(w, req, in.name, part, 0)))
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
    if (p.extras != NULL) {
        push_keyed(w, req, queue, part, &p);
        goto out;
    }
    rc = shm_push(w->seg, w->set.slot, queue, part, w->msgs, p.n, shm_now_ms(),
                  &first);
    if (rc != 0) {
        worker_tenant_refund(w, p.n); /* a refusal changes nothing */
        refused(w, req, queue, &p, rc);
        goto out;
    }
    reply_ids(w, req, part, p.n, first);
    after_wakes(w, req);
out:
    http_push_free(&p);
}
