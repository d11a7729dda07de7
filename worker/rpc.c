/*
 * rpc.c - POST /api/v1/ephemeral/request (SPEC §9).
 *
 * One call, one inbox: the worker mints an inbox name that carries this
 * node's id (shm/inbox.h), makes the inbox by popping it once (so a reply
 * that comes before we wait finds it), pushes the payload with the inbox
 * as its replyTo, and waits on the inbox as a parked pop waits
 * (worker_pop_wait): a reply pushed there, by an ack entry with "reply" or
 * a plain push, wakes it.  However the wait ends, the inbox is deleted at
 * once, so a late reply finds nothing (shm_push never makes an inbox) and
 * nothing waits for idle collection; a request that ends without a reply
 * is withdrawn (passed over by every group if nobody read it yet).
 *
 * Before anything is stored, a partition nobody listens on (no pop parked
 * there, no group active within responders_idle_ms) answers 503
 * no_responders at once.
 */
#include "worker/rpc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/ids.h"
#include "http/parse_rpc.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/inbox.h"
#include "shm/queue_admin.h"
#include "shm/stats.h"
#include "worker/forward.h"
#include "worker/pop.h"
#include "worker/worker_int.h"

#define DEFAULT_TIMEOUT_MS 5000
#define INBOX_MAX          (SHM_INBOX_PREFIX_LEN + 64 + 64)

/* One request waiting for its reply. */
struct rpc_call {
    struct worker *w;
    uint64_t start_us;
    uint64_t seq; /* the request's sequence in its partition */
    uint32_t timeout_ms;
    char *names; /* queue and partition, copied */
    struct shm_name queue, part;
    size_t inbox_len;
    char inbox[INBOX_MAX];
};

/* now_us - a monotonic clock in microseconds. */
static uint64_t
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* mint - a name no other request of any node or incarnation ever had. */
static void
mint(struct rpc_call *c)
{
    static uint64_t serial;
    int n = snprintf(c->inbox, sizeof(c->inbox),
                     SHM_INBOX_PREFIX "%s/%" PRIx64 ".%d.%" PRIx64,
                     c->w->set.node_id, c->w->incarnation, c->w->set.slot,
                     ++serial);

    c->inbox_len = (size_t)n < sizeof(c->inbox) ? (size_t)n : 0;
}

/* inbox_name - c's inbox as a name. */
static struct shm_name
inbox_name(const struct rpc_call *c)
{
    return (struct shm_name){c->inbox, c->inbox_len};
}

/* ended - count a request that ended with result counter k. */
static void
ended(struct rpc_call *c, enum shm_counter k)
{
    struct worker *w = c->w;

    shm_count(w->seg, w->set.slot, k, 1);
    shm_request_observe(w->seg, w->set.slot, now_us() - c->start_us);
}

/* reply_ok - 200 {"reply", "id", "ms"}. */
static void
reply_ok(struct rpc_call *c, struct http_request *req, const char *reply,
         size_t len)
{
    struct http_buf b = {0};
    size_t esc = http_json_esc_len(c->part.ptr, c->part.len);
    uint64_t ms = (now_us() - c->start_us) / 1000;

    if (http_buf_reserve(&b, len + HTTP_ID_PREFIX_LEN(esc) + HTTP_ID_SEQ_MAX +
                                 HTTP_PUT_U64_MAX + 32) == 0) {
        char *o = http_buf_tail(&b);
        memcpy(o, "{\"reply\":", 9);
        memcpy(o + 9, reply, len);
        o += 9 + len;
        memcpy(o, ",\"id\":", 6);
        o = http_id_put_prefix(o + 6, c->w->incarnation, c->part.ptr,
                               c->part.len);
        o = http_id_put_seq(o, c->seq);
        memcpy(o, ",\"ms\":", 6);
        o = http_put_u64(o + 6, ms);
        *o++ = '}';
        http_buf_commit(&b, o);
    }
    http_reply(req, 200, &b);
}

/* end - the wait on the inbox is over (pop.h): answer, withdraw what
 * went unanswered, and delete the inbox. */
static void
end(void *arg, struct http_request *req, const struct shm_popped *m,
    enum pop_wait_end why)
{
    struct rpc_call *c = arg;
    struct worker *w = c->w;
    uint64_t now = shm_now_ms();

    shm_queue_delete(w->seg, w->set.slot, inbox_name(c), now);
    if (why == POP_WAIT_GOT) {
        const char *data = (const char *)(m + 1) + m->part_len;
        ended(c, SHM_C_REQUEST_REPLIED);
        /* a reply pushed by a request of its own would lead with its inbox */
        reply_ok(c, req, data + m->reply_len, m->len - m->reply_len);
        return;
    }
    shm_withdraw(w->seg, w->set.slot, c->queue, c->part, c->seq, now);
    if (why == POP_WAIT_TIMEOUT) {
        ended(c, SHM_C_REQUEST_TIMEOUT);
        http_reply_error(req, 504, "request_timeout",
                         "no reply came within the request's 'timeout' of "
                         "%" PRIu32 " ms",
                         c->timeout_ms);
        return;
    }
    ended(c, SHM_C_REQUEST_WITHDRAWN);
    if (why == POP_WAIT_DRAIN)
        http_reply_draining(req);
    else
        http_reply_error(req, 504, "request_timeout",
                         "the requester hung up before a reply came");
}

/* done - the request is over. */
static void
done(void *arg)
{
    struct rpc_call *c = arg;

    free(c->names);
    free(c);
}

static const struct pop_waiter waiter = {end, done};

/* copy_names - c keeps its own copies of queue and partition. */
static int
copy_names(struct rpc_call *c, struct shm_name q, struct shm_name p)
{
    if ((c->names = malloc(q.len + p.len + 2)) == NULL)
        return -ENOMEM;
    memcpy(c->names, q.ptr, q.len);
    memcpy(c->names + q.len + 1, p.ptr, p.len);
    c->queue = (struct shm_name){c->names, q.len};
    c->part = (struct shm_name){c->names + q.len + 1, p.len};
    return 0;
}

/* make_inbox - the inbox exists before the request is stored: pop it
 * once (it is empty), which makes it. */
static int
make_inbox(struct rpc_call *c)
{
    unsigned char buf[256];
    struct shm_sink sink = {.buf = buf, .cap = sizeof(buf)};
    struct shm_pop_req r = {.queue = inbox_name(c),
                            .part = {"Default", 7},
                            .batch = 1,
                            .auto_ack = 1};
    int rc = shm_pop(c->w->seg, c->w->set.slot, &r, shm_now_ms(), &sink);

    return rc < 0 ? rc : 0;
}

/* store - push the request with c's inbox as its replyTo. */
static int
store(struct rpc_call *c, const struct http_rpc *p)
{
    size_t n = c->inbox_len + p->payload.len;
    char *data = malloc(n);
    int rc;

    if (data == NULL)
        return -ENOMEM;
    memcpy(data, c->inbox, c->inbox_len);
    memcpy(data + c->inbox_len, p->payload.ptr, p->payload.len);
    struct shm_msg_in m = {data, (uint32_t)n};
    rc = shm_push_request(c->w->seg, c->w->set.slot, c->queue, c->part, &m,
                          (uint32_t)c->inbox_len, shm_now_ms(), &c->seq);
    free(data);
    return rc;
}

/* worker_request - see rpc.h. */
void
worker_request(struct worker *w, struct http_request *req)
{
    struct http_rpc p;
    struct http_error err;
    size_t len;
    const char *body = http_request_body(req, &len);
    struct rpc_call *c = NULL;
    int rc;

    uint64_t start = now_us();
    if (http_parse_rpc(body, len, &p, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    struct shm_name queue = {p.queue.ptr, p.queue.len};
    struct shm_name part = {"Default", 7};
    if (p.has_partition)
        part = (struct shm_name){p.partition.ptr, p.partition.len};
    if (!http_reply_name_ok(req, "queue", queue.ptr, queue.len) ||
        !http_reply_name_ok(req, "partition", part.ptr, part.len))
        goto out;
    if (shm_inbox_named(queue)) {
        http_reply_error(req, 400, "invalid_name",
                         "field 'queue' names a request's inbox");
        goto out;
    }
    uint64_t timeout = p.has_timeout ? p.timeout_ms : DEFAULT_TIMEOUT_MS;
    if (timeout > w->set.max_wait_ms)
        timeout = w->set.max_wait_ms;
    if (!worker_route(w, req, queue, part, (unsigned)timeout))
        goto out;
    if (!shm_responders(w->seg, w->set.slot, queue, part, shm_now_ms(),
                        w->set.responders_idle_ms)) {
        shm_count(w->seg, w->set.slot, SHM_C_REQUEST_NO_RESPONDERS, 1);
        shm_request_observe(w->seg, w->set.slot, now_us() - start);
        http_reply_error(req, 503, "no_responders",
                         "nobody listens on partition '%.*s' of queue "
                         "'%.*s': no pop is waiting there and none came "
                         "within %" PRIu32 " ms",
                         (int)part.len, part.ptr, (int)queue.len, queue.ptr,
                         w->set.responders_idle_ms);
        goto out;
    }
    if ((c = calloc(1, sizeof(*c))) == NULL ||
        copy_names(c, queue, part) != 0) {
        free(c);
        http_reply_errno(req, -ENOMEM, "request");
        goto out;
    }
    c->w = w;
    c->start_us = start;
    c->timeout_ms = (uint32_t)timeout;
    mint(c);
    if ((rc = make_inbox(c)) != 0 || (rc = store(c, &p)) != 0) {
        shm_queue_delete(w->seg, w->set.slot, inbox_name(c), shm_now_ms());
        done(c);
        http_reply_errno(req, rc, "request");
        goto out;
    }
    worker_pop_wait(w, req, inbox_name(c), c->timeout_ms, &waiter, c);
out:
    http_rpc_free(&p);
}
