/*
 * pop.c - GET /api/v1/ephemeral/pop, and the life of a parked pop.
 *
 * A pop takes what it can at once; with wait=true and nothing there it parks
 * (shm_pop set this worker's waiter bit under the partition lock, so no push
 * in between is missed) until a push wakes it, its timeout passes, or its
 * client hangs up.  Each pop owns a struct pop_call, freed when the request
 * ends; if the reply carried leased messages and did not go out whole, the
 * leases are released at once without counting an attempt.
 */
#include "worker/pop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/ids.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/catalog.h"
#include "shm/log.h"
#include "shm/queue_admin.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/conn.h"
#include "worker/forward.h"
#include "worker/pop_cluster.h"
#include "worker/worker_int.h"

#define SINK_MIN 2048 /* a small pop's answer; bigger ones grow as needed */
#define SINK_MAX (16 * 1024 * 1024)

struct pop_call {
    struct worker *w;
    struct http_request *req;
    struct park park; /* park.pop holds the request's parameters */
    int parked;
    int leased;           /* the reply carries leases: release if unsent */
    struct shm_sink sink; /* what the answer carries */
    /* windowBuffer (a declared option): hold what came until target
     * messages, or window_ms after the first, or the pop's own timeout. */
    uint32_t target;   /* 0: no window, answer as soon as one came */
    int ack_on_answer; /* autoAck with a window: held leased till sent */
    uint32_t window_ms;
    struct shm_sink more; /* scratch a windowed take lands in first */
    /* A pop with no partition in a cluster reads what any node holds: */
    int anywhere;                 /* no partition, and peers are live */
    int watch;                    /* a peer's watch: take nothing, say ready */
    int ready;                    /* the watch's peek found something */
    struct pop_cluster *cluster;  /* passed on to the peers (pop_cluster.h) */
    const struct pop_waiter *how; /* a wait on an inbox: not a pop */
    void *how_arg;
    int hung_up;
    int revoked; /* its token was revoked while it waited (SPEC §10) */
};

/* sink_reserve - make the sink hold at least want bytes.  0 or -ENOMEM. */
static int
sink_reserve(struct shm_sink *s, size_t want)
{
    if (s->cap >= want)
        return 0;
    unsigned char *b = realloc(s->buf, want);
    if (b == NULL)
        return -ENOMEM;
    s->buf = b;
    s->cap = want;
    return 0;
}

/* pop_into - one shm_pop into sink, growing it when even one message
 * would not fit.  Returns the count or -errno. */
static int
pop_into(struct pop_call *c, struct shm_sink *sink, uint32_t batch, int park)
{
    struct shm_pop_req r = c->park.pop;
    int rc;

    r.park = park;
    r.batch = batch;
    for (;;) {
        rc = shm_pop(c->w->seg, c->w->set.slot, &r, shm_now_ms(), sink);
        if (rc != -ENOMEM)
            return rc;
        if (sink->need > SINK_MAX || sink_reserve(sink, sink->need))
            return -ENOMEM;
    }
}

/* append - add what scratch holds to the answer.  0 or -ENOMEM (those
 * stay leased: their leases expire and they come back). */
static int
append(struct pop_call *c)
{
    if (sink_reserve(&c->sink, c->sink.used + c->more.used) != 0)
        return -ENOMEM;
    memcpy(c->sink.buf + c->sink.used, c->more.buf, c->more.used);
    c->sink.used += c->more.used;
    c->sink.count += c->more.count;
    return 0;
}

/*
 * take - what the pop may take now, up to its batch (or its window's
 * target).  The first shm_pop goes straight into the answer; more rounds,
 * through scratch, follow only while the answer's buffer was what stopped
 * a round (big payloads) or a window still waits for more.  A windowed
 * round that finds nothing sets the waiter bit again (park), so the next
 * push wakes us.  Returns how many the call holds, or -errno.
 */
static int
take(struct pop_call *c, int park)
{
    uint32_t want = c->target ? c->target : c->park.pop.batch;
    int rc;

    if (c->watch) { /* a peek: nothing taken, so nothing marked read */
        struct shm_pop_req r = c->park.pop;
        r.park = park;
        rc = shm_peek(c->w->seg, c->w->set.slot, &r, shm_now_ms());
        c->ready = rc > 0;
        return rc;
    }
    /* From the first message on, what the call holds is leased to it. */
    c->leased = !c->park.pop.auto_ack;
    if (c->sink.count == 0) {
        rc = pop_into(c, &c->sink, want, park);
        if (rc <= 0)
            return rc;
    }
    while (c->sink.count < want && c->sink.used < SINK_MAX &&
           (c->target || c->sink.used > c->sink.cap / 2)) {
        if (sink_reserve(&c->more, c->sink.cap) != 0)
            break;
        rc = pop_into(c, &c->more, want - c->sink.count, c->target && park);
        if (rc <= 0 || append(c) != 0)
            break;
    }
    return (int)c->sink.count;
}

/* window_open - a windowed pop got its first messages: answer by
 * window_ms from now at the latest (or its timeout, if sooner). */
static void
window_open(struct pop_call *c)
{
    uint64_t until = shm_now_ms() + c->window_ms;

    if (c->window_ms != 0 && until < c->park.deadline)
        park_update_deadline(&c->w->parks, &c->park, until);
}

/*
 * format - the pop answer for whatever the sink holds.  A first walk over
 * the sink sizes the reply so it is reserved once; the second writes it
 * through a raw pointer.  Consecutive messages of one partition (the usual
 * batch) share the id prefix and the escaped partition name: both are
 * escaped once per run and copied from the previous message's id.
 */
static void
format(struct pop_call *c, struct http_buf *b)
{
    static const char id_key[] = "{\"id\":", part_key[] = ",\"partition\":\"",
                      payload_key[] = "\",\"payload\":",
                      attempts_key[] = ",\"attempts\":",
                      reply_key[] = ",\"replyTo\":\"";
    const size_t fixed = sizeof(id_key) + sizeof(part_key) +
                         sizeof(payload_key) + sizeof(attempts_key) +
                         HTTP_ID_SEQ_MAX + HTTP_PUT_U64_MAX + 1;
    const struct shm_popped *m = NULL;
    const char *run_part = NULL, *prev_id = NULL;
    size_t need, esc_len = 0, prefix_len = 0, run_len = 0;
    char *o;

    struct shm_name shown = worker_client_name(c->park.pop.queue);

    need = sizeof("{\"queue\":,\"messages\":[]}") + 2 +
           http_json_esc_len(shown.ptr, shown.len);
    while ((m = shm_popped_next(&c->sink, m)) != NULL) {
        const char *part = (const char *)(m + 1);

        if (run_part == NULL || m->part_len != run_len ||
            memcmp(part, run_part, run_len) != 0) {
            run_part = part;
            run_len = m->part_len;
            esc_len = http_json_esc_len(part, run_len);
        }
        need += fixed + HTTP_ID_PREFIX_LEN(esc_len) + esc_len + m->len;
        if (m->reply_len > 0) { /* a request: its inbox beside the payload */
            struct shm_name to = worker_client_name(
                (struct shm_name){part + m->part_len, m->reply_len});
            need += sizeof(reply_key) + 1 + http_json_esc_len(to.ptr, to.len);
        }
    }
    if (http_buf_reserve(b, need) != 0)
        return; /* oom: http_reply answers 500 */
    o = http_buf_tail(b);
    memcpy(o, "{\"queue\":\"", 10);
    o = http_put_json_esc(o + 10, shown.ptr, shown.len);
    memcpy(o, "\",\"messages\":[", 14);
    o += 14;
    run_part = NULL;
    while ((m = shm_popped_next(&c->sink, m)) != NULL) {
        const char *part = (const char *)(m + 1);
        const char *payload = part + m->part_len;
        char *id;

        if (prev_id != NULL)
            *o++ = ',';
        memcpy(o, id_key, sizeof(id_key) - 1);
        o += sizeof(id_key) - 1;
        id = o;
        if (run_part == NULL || m->part_len != run_len ||
            memcmp(part, run_part, run_len) != 0) {
            run_part = part;
            run_len = m->part_len;
            o = http_id_put_prefix(o, c->w->incarnation, part, run_len);
            prefix_len = (size_t)(o - id);
        } else {
            memcpy(o, prev_id, prefix_len);
            o += prefix_len;
        }
        prev_id = id;
        o = http_id_put_seq(o, m->seq);
        memcpy(o, part_key, sizeof(part_key) - 1);
        o += sizeof(part_key) - 1;
        /* the escaped partition, as the id's prefix holds it */
        memcpy(o, prev_id + HTTP_ID_PREFIX_HEAD,
               prefix_len - HTTP_ID_PREFIX_LEN(0));
        o += prefix_len - HTTP_ID_PREFIX_LEN(0);
        memcpy(o, payload_key, sizeof(payload_key) - 1);
        o += sizeof(payload_key) - 1;
        memcpy(o, payload + m->reply_len, m->len - m->reply_len);
        o += m->len - m->reply_len;
        if (m->reply_len > 0) { /* as its requester's tenant knows it */
            struct shm_name to =
                worker_client_name((struct shm_name){payload, m->reply_len});
            memcpy(o, reply_key, sizeof(reply_key) - 1);
            o = http_put_json_esc(o + sizeof(reply_key) - 1, to.ptr, to.len);
            *o++ = '"';
        }
        memcpy(o, attempts_key, sizeof(attempts_key) - 1);
        o = http_put_u64(o + sizeof(attempts_key) - 1, m->attempts);
        *o++ = '}';
    }
    *o++ = ']';
    *o++ = '}';
    http_buf_commit(b, o);
}

/* ack_held - complete what a windowed autoAck pop holds: it was taken
 * leased, so a client that left while it waited could give it back. */
static void
ack_held(struct pop_call *c)
{
    const struct shm_popped *m = NULL;

    while ((m = shm_popped_next(&c->sink, m)) != NULL) {
        struct shm_ack a = {.seq = m->seq,
                            .attempts = m->attempts,
                            .status = SHM_ACK_COMPLETED};
        shm_ack(c->w->seg, c->w->set.slot, c->park.pop.queue,
                (struct shm_name){(const char *)(m + 1), m->part_len},
                c->park.pop.group, &a, 1, shm_now_ms());
    }
    c->leased = 0;
}

/* watch_answer - a watch's reply: "ready" says whether a pop would find
 * something.  The watch only peeked, so a request it saw is still unread:
 * its requester giving up withdraws it (shm_withdraw). */
static void
watch_answer(struct pop_call *c)
{
    struct http_buf b = {0};

    struct shm_name shown = worker_client_name(c->park.pop.queue);
    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, shown.ptr, shown.len);
    http_buf_append_str(&b, c->ready ? ",\"messages\":[],\"ready\":true}"
                                     : ",\"messages\":[],\"ready\":false}");
    http_reply(c->req, 200, &b);
}

/* answer - reply with the sink's contents (possibly none); a wait on an
 * inbox says why it ended instead. */
static void
answer(struct pop_call *c)
{
    struct http_buf b = {0};

    pop_cluster_stop(c->cluster); /* no peer takes for an answered pop */
    if (c->how != NULL) {
        const struct shm_popped *m = shm_popped_next(&c->sink, NULL);
        enum pop_wait_end why = m != NULL        ? POP_WAIT_GOT
                                : c->revoked     ? POP_WAIT_REVOKED
                                : c->hung_up     ? POP_WAIT_HANGUP
                                : c->w->draining ? POP_WAIT_DRAIN
                                                 : POP_WAIT_TIMEOUT;
        c->how->end(c->how_arg, c->req, m, why);
        return;
    }
    if (c->watch) {
        watch_answer(c);
        return;
    }
    if (c->ack_on_answer)
        ack_held(c);
    c->leased = c->leased && c->sink.count > 0;
    format(c, &b);
    http_reply(c->req, 200, &b);
}

/* unpark - forget a parked pop: indexes, waiter bit, its socket's entry
 * (the socket stays in the epoll for the connection's next park). */
static void
unpark(struct pop_call *c)
{
    struct worker *w = c->w;

    if (!c->parked)
        return;
    c->parked = 0;
    if (park_remove(&w->parks, &c->park))
        shm_unpark(w->seg, w->set.slot, c->park.handle);
    shm_park_count(w->seg, w->set.slot, c->park.handle, -1);
    if (c->park.fd >= 0 && w->conns[c->park.fd].park == &c->park)
        w->conns[c->park.fd].park = NULL;
    shm_parked_add(w->seg, w->set.slot, -1);
}

/* watch - c's socket watched for hang-ups while it is parked. */
static int
watch(struct pop_call *c)
{
    struct worker_conn *k;
    int rc = worker_conn_watch(c->w, c->park.fd, &k);

    if (rc == 0)
        k->park = &c->park;
    return rc;
}

/* on_done - the request ended: release unsent leases, free the call. */
static void
on_done(void *arg, int sent_ok)
{
    struct pop_call *c = arg;

    unpark(c);
    pop_cluster_free(c->cluster);
    if (c->leased && !sent_ok)
        shm_release(c->w->seg, c->w->set.slot, c->park.pop.queue,
                    c->park.pop.group, &c->sink, shm_now_ms());
    if (c->how != NULL)
        c->how->done(c->how_arg);
    free(c->sink.buf);
    free(c->more.buf);
    free(c->park.names);
    free(c);
}

/* park - suspend c until a push, its deadline or a hang-up.  -EPIPE: the
 * client has shut its side already, so it is answered now instead. */
static int
park(struct pop_call *c, uint32_t timeout_ms)
{
    struct worker *w = c->w;
    struct shm_pop_req *r = &c->park.pop;
    int rc;

    c->park.handle = shm_pop_handle(w->seg, r->queue, r->part);
    c->park.deadline = shm_now_ms() + timeout_ms;
    if (c->sink.count > 0 && c->window_ms != 0 && c->window_ms < timeout_ms)
        c->park.deadline = shm_now_ms() + c->window_ms;
    c->park.fd = http_request_fd(c->req);
    if (c->park.fd >= 0 && (rc = watch(c)) != 0) {
        if (rc == -EPIPE)
            return rc;
        c->park.fd = -1;
    }
    if (park_add(&w->parks, &c->park) != 0) {
        if (c->park.fd >= 0)
            w->conns[c->park.fd].park = NULL;
        return -ENOMEM;
    }
    c->parked = 1;
    shm_parked_add(w->seg, w->set.slot, 1);
    shm_park_count(w->seg, w->set.slot, c->park.handle, 1);
    http_request_suspend(c->req); /* no-op when the cluster pop did */
    return 0;
}

/* copy_names - give the call its own copies of the names it keeps. */
static int
copy_names(struct pop_call *c, const char *q, size_t ql, const char *p,
           size_t pl, const char *g, size_t gl)
{
    char *n = malloc(ql + pl + gl + 3);
    if (n == NULL)
        return -ENOMEM;
    c->park.names = n;
    memcpy(n, q, ql);
    c->park.pop.queue = (struct shm_name){n, ql};
    n += ql + 1;
    memcpy(n, p, pl);
    c->park.pop.part = (struct shm_name){n, pl};
    n += pl + 1;
    memcpy(n, g, gl);
    c->park.pop.group = (struct shm_name){n, gl};
    return 0;
}

/* parse_from - "all", "new", "last". */
static int
parse_from(const struct http_query *q, enum shm_from *out,
           struct http_error *err)
{
    size_t len;
    const char *v = http_query_get(q, "from", &len);

    *out = SHM_FROM_ALL;
    if (v == NULL || strcmp(v, "all") == 0)
        return 0;
    if (strcmp(v, "new") == 0) {
        *out = SHM_FROM_NEW;
        return 0;
    }
    if (strcmp(v, "last") == 0) {
        *out = SHM_FROM_LAST;
        return 0;
    }
    http_error_set(err, 400, "ephemeral_bad_request",
                   "query parameter 'from' must be all, new or last");
    return -EINVAL;
}

/* parse - the pop's query into c; answers the request on error. */
static int
parse(struct worker *w, struct http_request *req, struct pop_call *c, int *wait,
      uint32_t *timeout)
{
    const struct http_query *q = http_request_args(req);
    struct http_error err;
    size_t ql = 0, pl = 0, gl = 0;
    const char *qn = http_query_get(q, "queue", &ql);
    const char *pn = http_query_get(q, "partition", &pl);
    const char *gn = http_query_get(q, "group", &gl);
    struct shm_pop_req *r = &c->park.pop;
    struct worker_qname in;
    int auto_ack, alias, watch;

    if (qn == NULL) {
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "query parameter 'queue' is required");
        return -EINVAL;
    }
    if (!http_reply_name_ok(req, "queue", qn, ql) ||
        (pn && !http_reply_name_ok(req, "partition", pn, pl)) ||
        (gn && !http_reply_name_ok(req, "group", gn, gl)))
        return -EINVAL;
    if (!worker_authz(w, req, AUTH_POP, "queue", (struct shm_name){qn, ql},
                      &in))
        return -EACCES;
    if (http_query_u32(q, "batch", 1, 1, 10000, &r->batch, &err) ||
        http_query_bool(q, "wait", 0, wait, &err) ||
        http_query_u32(q, "timeout", 30000, 0, w->set.max_wait_ms, timeout,
                       &err) ||
        http_query_bool(q, "autoAck", 0, &auto_ack, &err) ||
        http_query_bool(q, "commitOnDelivery", 0, &alias, &err) ||
        parse_from(q, &r->from, &err) ||
        http_query_bool(q, "watch", 0, &watch, &err)) {
        http_reply_http_error(req, &err);
        return -EINVAL;
    }
    r->auto_ack = auto_ack || alias;
    /* A watch is a peer's (pop_cluster.h): it peeks, taking nothing. */
    c->watch =
        watch && pn == NULL && http_request_header(req, FORWARD_HEADER) != NULL;
    if (copy_names(c, in.name.ptr, in.name.len, pn ? pn : "", pn ? pl : 0,
                   gn ? gn : "", gn ? gl : 0) != 0) {
        http_reply_errno(req, -ENOMEM, "pop");
        return -ENOMEM;
    }
    return 0;
}

/* served_here - a partition of the queue this node owns, or still holds
 * messages of (a move on its way): an any-partition pop serves it here. */
static int
served_here(void *arg, struct shm_name part, uint64_t held)
{
    struct pop_call *c = arg;

    return held > 0 || shm_owner_here(&c->w->owners, c->park.pop.queue, part);
}

/*
 * route - pop at the partition's owner.  A pop naming no partition starts
 * here, with what this node holds (c->anywhere: in a cluster, the peers
 * come next, pop_cluster.h); one a peer passed on reads this node's alone.
 * 1: pop here.
 */
static int
route(struct worker *w, struct http_request *req, struct pop_call *c,
      uint32_t wait_ms)
{
    const struct shm_pop_req *r = &c->park.pop;

    if (worker_serves_all(w))
        return 1;
    if (r->part.len > 0)
        return worker_route(w, req, r->queue, r->part, wait_ms);
    c->anywhere = 1;
    return 1;
}

/* cluster_park - pop_cluster_ops.park: take here, or park here (not
 * once draining: worker_pop_answer_all has run, so it answers now). */
static int
cluster_park(void *arg, uint64_t deadline)
{
    struct pop_call *c = arg;
    uint64_t now = shm_now_ms();
    int may_park = deadline > now && !c->w->draining;
    int rc = take(c, may_park);

    if (rc == 0 && may_park && park(c, (uint32_t)(deadline - now)) == 0)
        return 0;
    if (rc < 0)
        http_reply_errno(c->req, rc, "pop");
    else
        answer(c);
    return 1;
}

/* cluster_unpark - pop_cluster_ops.unpark. */
static void
cluster_unpark(void *arg)
{
    unpark(arg);
}

/* cluster_answer_empty - pop_cluster_ops.answer_empty. */
static void
cluster_answer_empty(void *arg)
{
    answer(arg);
}

static const struct pop_cluster_ops cluster_ops = {cluster_park, cluster_unpark,
                                                   cluster_answer_empty};

/* from_peers - a pop with no partition that found nothing here: the
 * peers serve it.  0, or -ENOMEM (req not answered). */
static int
from_peers(struct pop_call *c, int wait, uint32_t timeout)
{
    c->cluster =
        pop_cluster_start(c->w, c->req, &c->park.pop, wait && !c->w->draining,
                          shm_now_ms() + timeout, &cluster_ops, c);
    return c->cluster ? 0 : -ENOMEM;
}

/* worker_pop - see pop.h. */
void
worker_pop(struct worker *w, struct http_request *req)
{
    struct pop_call *c = calloc(1, sizeof(*c));
    int wait, rc;
    uint32_t timeout;

    if (c == NULL) {
        http_reply_errno(req, -ENOMEM, "pop");
        return;
    }
    c->w = w;
    c->req = req;
    c->park.fd = -1;
    if (parse(w, req, c, &wait, &timeout) != 0 ||
        !route(w, req, c, wait ? timeout : 0)) {
        free(c->park.names);
        free(c);
        return;
    }
    http_request_on_done(req, on_done, c);
    /* A pop with no partition reads this node's share first, then asks
     * the peers (a peer's own pass reads its share alone). */
    int to_peers =
        c->anywhere && http_request_header(req, FORWARD_HEADER) == NULL;
    int may_park = wait && timeout > 0 && !w->draining && !to_peers;
    struct shm_qopts o;
    if (may_park && !c->watch &&
        shm_catalog_lookup(w->seg->catalog, c->park.pop.queue.ptr,
                           c->park.pop.queue.len, &o) &&
        (o.window_ms || o.window_count)) {
        c->window_ms = o.window_ms;
        c->ack_on_answer = c->park.pop.auto_ack;
        c->park.pop.auto_ack = 0;
        c->target = o.window_count && o.window_count < c->park.pop.batch
                        ? o.window_count
                        : c->park.pop.batch;
    }
    size_t want = (size_t)c->park.pop.batch * 320 + SINK_MIN;
    if (sink_reserve(&c->sink, want < SINK_MAX ? want : SINK_MAX) != 0) {
        http_reply_errno(req, -ENOMEM, "pop");
        return;
    }
    rc = to_peers && !shm_queue_part_each(w->seg, c->park.pop.queue,
                                          shm_now_ms(), served_here, c)
             ? 0 /* nothing of it here: no queue made here either */
             : take(c, may_park);
    if (rc == 0 && to_peers && from_peers(c, wait, timeout) == 0)
        return;
    if (rc < 0) {
        http_reply_errno(req, rc, "pop");
        return;
    }
    if ((rc == 0 || (uint32_t)rc < c->target) && may_park &&
        park(c, timeout) == 0)
        return;
    answer(c);
}

/* worker_pop_wait - see pop.h. */
int
worker_pop_wait(struct worker *w, struct http_request *req,
                struct shm_name inbox, uint32_t timeout_ms,
                const struct pop_waiter *how, void *arg)
{
    struct pop_call *c = calloc(1, sizeof(*c));

    if (c == NULL ||
        copy_names(c, inbox.ptr, inbox.len, "Default", 7, "", 0) != 0 ||
        sink_reserve(&c->sink, SINK_MIN) != 0) {
        if (c != NULL) {
            free(c->park.names);
            free(c);
        }
        how->done(arg);
        http_reply_errno(req, -ENOMEM, "request");
        http_request_resume(req); /* a wait begun after a suspension */
        return -ENOMEM;
    }
    c->w = w;
    c->req = req;
    c->park.fd = -1;
    c->park.pop.batch = 1;
    c->park.pop.auto_ack = 1;
    c->how = how;
    c->how_arg = arg;
    http_request_on_done(req, on_done, c);
    int rc = take(c, timeout_ms > 0 && !w->draining);
    if (rc < 0)
        http_reply_errno(req, rc, "request");
    else if (rc > 0 || timeout_ms == 0 || w->draining)
        answer(c);
    else if ((rc = park(c, timeout_ms)) == 0)
        return 0; /* parked: suspended */
    else {
        c->hung_up = rc == -EPIPE;
        answer(c);
    }
    /* Answered now; a wait begun after its request was suspended (its
     * store went to another node first) goes out with a resume. */
    http_request_resume(req);
    return 0;
}

/* retry - a parked pop's partition got something: try again.  Returns 1
 * when it found nothing (it stays parked), else 0. */
static int
retry(struct pop_call *c)
{
    uint32_t held = c->sink.count;
    int rc = take(c, 1);

    if (rc == 0)
        return 1; /* someone else took it; still parked, bit set again */
    if (rc > 0 && (uint32_t)rc < c->target) {
        if (held == 0)
            window_open(c); /* the first ones: the window starts */
        return 0;
    }
    unpark(c);
    if (rc < 0) {
        pop_cluster_stop(c->cluster);
        http_reply_errno(c->req, rc, "pop");
    } else {
        answer(c);
    }
    http_request_resume(c->req);
    return 0;
}

#define CALL_OF(p)                                                             \
    ((struct pop_call *)((char *)(p)-offsetof(struct pop_call, park)))

/* name_eq - the same name. */
static int
name_eq(struct shm_name a, struct shm_name b)
{
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* same_take - a and b would find the same messages (what batch and
 * autoAck change is how many are taken and how, not whether any are). */
static int
same_take(const struct shm_pop_req *a, const struct shm_pop_req *b)
{
    return a->from == b->from && name_eq(a->queue, b->queue) &&
           name_eq(a->part, b->part) && name_eq(a->group, b->group);
}

/*
 * worker_pop_wake - retry the pops parked on handle.  Once one found
 * nothing, the others asking for the same (responders long-polling one
 * queue in one group) would find nothing too: they stay parked without a
 * try, and the waiter bit the empty try set again wakes them all next time.
 */
void
worker_pop_wake(struct worker *w, uint64_t handle)
{
    struct park *p = park_chain(&w->parks, handle);
    const struct shm_pop_req *empty = NULL;

    while (p != NULL) {
        struct park *next = park_chain_next(p);
        struct pop_call *c = CALL_OF(p);

        if ((empty == NULL || !same_take(empty, &c->park.pop)) && retry(c))
            empty = &c->park.pop; /* still parked: the pointer stays good */
        p = next;
    }
}

/*
 * worker_pop_wake_all - the wake queue overflowed: retry every parked pop.
 * retry() may unpark the one it is given and no other, so walking a copy
 * of the heap is safe; without memory for the copy, the pops answer at
 * their deadlines (or the next wake of their own partition).
 */
void
worker_pop_wake_all(struct worker *w)
{
    size_t n = park_count(&w->parks);
    struct pop_call **all = malloc(n * sizeof(*all) + 1);

    if (all == NULL) {
        log_error(ENOMEM,
                  "cannot retry %zu parked pops after a wake-queue "
                  "overflow",
                  n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        all[i] = CALL_OF(w->parks.heap[i]);
    for (size_t i = 0; i < n; i++)
        retry(all[i]);
    free(all);
}

/* give_up - answer a parked pop with what is there now, possibly nothing. */
static void
give_up(struct pop_call *c)
{
    unpark(c);
    int rc = take(c, 0);
    if (rc < 0) {
        pop_cluster_stop(c->cluster);
        http_reply_errno(c->req, rc, "pop");
    } else {
        answer(c);
    }
    http_request_resume(c->req);
}

/* let_go - answer c with what it holds, taking nothing more here: what
 * is left on a moved partition is on its way to the new owner. */
static void
let_go(struct pop_call *c)
{
    unpark(c);
    answer(c);
    http_request_resume(c->req);
}

/* worker_pop_moved - see pop.h. */
void
worker_pop_moved(struct worker *w)
{
    size_t n = park_count(&w->parks), k = 0;
    struct pop_call **moved;

    if (n == 0)
        return;
    if ((moved = malloc(n * sizeof(*moved))) == NULL)
        return; /* they answer at their timeout instead */
    for (size_t i = 0; i < n; i++) {
        struct pop_call *c = CALL_OF(w->parks.heap[i]);
        const struct shm_pop_req *r = &c->park.pop;
        /* One with no partition watches the members it started with: a
         * new one is watched when its client asks again. */
        if (r->part.len > 0 ? !shm_owner_here(&w->owners, r->queue, r->part)
                            : c->cluster != NULL)
            moved[k++] = c;
    }
    for (size_t i = 0; i < k; i++)
        let_go(moved[i]);
    free(moved);
}

/* worker_pop_let_go_all - see pop.h.  A request's wait on its inbox
 * stays: the inbox is this node's, and its reply can still come. */
void
worker_pop_let_go_all(struct worker *w)
{
    size_t n = park_count(&w->parks), k = 0;
    struct pop_call **pops = malloc(n * sizeof(*pops) + 1);

    if (pops == NULL)
        return; /* they answer at their timeout instead */
    for (size_t i = 0; i < n; i++) {
        struct pop_call *c = CALL_OF(w->parks.heap[i]);
        if (c->how == NULL)
            pops[k++] = c;
    }
    for (size_t i = 0; i < k; i++)
        let_go(pops[i]);
    free(pops);
}

/* worker_pop_expire - see pop.h. */
void
worker_pop_expire(struct worker *w, uint64_t now)
{
    struct park *p;

    while ((p = park_first(&w->parks)) != NULL && p->deadline <= now)
        give_up(CALL_OF(p));
}

/* worker_pop_revoked - see pop.h.  What a windowed pop holds goes back
 * at once (no attempt counted): its client is not served.  A request's
 * wait on its inbox ends through its waiter, which withdraws the request. */
void
worker_pop_revoked(struct worker *w)
{
    size_t n = park_count(&w->parks), k = 0;
    struct pop_call **gone = malloc(n * sizeof(*gone) + 1);

    if (gone == NULL)
        return; /* they answer at their timeout instead */
    for (size_t i = 0; i < n; i++) {
        struct pop_call *c = CALL_OF(w->parks.heap[i]);
        if (!worker_auth_valid(w, c->req))
            gone[k++] = c;
    }
    for (size_t i = 0; i < k; i++) {
        struct pop_call *c = gone[i];
        unpark(c);
        if (c->how != NULL) {
            c->revoked = 1;
            answer(c);
            http_request_resume(c->req);
            continue;
        }
        pop_cluster_stop(c->cluster);
        if (c->leased && c->sink.count > 0)
            shm_release(w->seg, w->set.slot, c->park.pop.queue,
                        c->park.pop.group, &c->sink, shm_now_ms());
        c->leased = 0;
        worker_auth_refuse(c->req, "the bearer token was revoked while "
                                   "this pop waited");
        http_request_resume(c->req);
    }
    if (k > 0)
        log_info(0, "%zu parked pops of revoked tokens answered 401", k);
    free(gone);
}

/* worker_pop_answer_all - see pop.h. */
void
worker_pop_answer_all(struct worker *w)
{
    struct park *p;

    /* give_up() unparks: the heap empties without any allocation. */
    while ((p = park_first(&w->parks)) != NULL)
        give_up(CALL_OF(p));
}

/*
 * worker_pop_hangup - see pop.h.  The client may only have half-closed, so
 * it gets an answer, empty, since nothing is taken for a client that may be
 * gone; a windowed pop holding leased messages gives them back instead (the
 * connection closes).
 */
void
worker_pop_hangup(struct park *p)
{
    struct pop_call *c = CALL_OF(p);

    unpark(c);
    c->hung_up = 1;
    pop_cluster_stop(c->cluster);
    if (c->sink.count > 0 && c->how == NULL) {
        http_request_abort(c->req); /* on_done releases the leases */
        return;
    }
    answer(c);
    http_request_resume(c->req);
}
