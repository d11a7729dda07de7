/*
 * roles.c - the request sequences the one-node rows (mayfly.c), the
 * cluster rows (cluster.c) and `mayfly bench` (ops/cli/bench.c) share:
 * push (with its resets), fill, drain (pop and ack), and request/reply by
 * inbox and by the request verb (requester and responder), each a struct
 * bench_role over its scenario data (bench.h), and the payloads they send.
 * A caller that must name what it touches (the cluster rows pick names one
 * node owns) sets the names; otherwise they are made from a prefix.
 *
 * Scenario data behind conn->ud is written before a run starts and only
 * read by the loops, but for the atomic counters.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/bench/bench.h"

#define POP_PATH "/api/v1/ephemeral/pop?"

char bench_payload[BENCH_PAYLOAD + 1];
char bench_rpc_pad[BENCH_RPC_PAD + 1];
struct bench_buf bench_msgs100;
struct bench_buf bench_msgs1;
struct bench_buf bench_msgs100_keyed;

/* bench_payload_init - letters only, so no JSON escaping anywhere; once. */
void
bench_payload_init(void)
{
    if (bench_msgs100.len > 0)
        return;
    for (int i = 0; i < BENCH_PAYLOAD; i++)
        bench_payload[i] = (char)('a' + i % 26);
    for (int i = 0; i < BENCH_RPC_PAD; i++)
        bench_rpc_pad[i] = (char)('A' + i % 26);
    bench_buf_str(&bench_msgs100, "[");
    for (int i = 0; i < BENCH_BATCH; i++)
        bench_buf_printf(&bench_msgs100, "%s{\"payload\":\"%s\"}", i ? "," : "",
                         bench_payload);
    bench_buf_str(&bench_msgs100, "]");
    bench_buf_printf(&bench_msgs1, "[{\"payload\":\"%s\"}]", bench_payload);
    bench_buf_str(&bench_msgs100_keyed, "[");
    for (int i = 0; i < BENCH_BATCH; i++)
        bench_buf_printf(&bench_msgs100_keyed,
                         "%s{\"payload\":\"%s\",\"key\":"
                         "\"0000000000000000-%02d\"}",
                         i ? "," : "", bench_payload, i);
    bench_buf_str(&bench_msgs100_keyed, "]");
}

/* bench_push_req - a push of msgs to queue (and partition part, if any)
 * appended to out, with token (if not NULL) as its bearer token. */
void
bench_push_req(struct bench_buf *out, const char *token, const char *queue,
               const char *part, const struct bench_buf *msgs)
{
    struct bench_buf body = {0};

    if (part != NULL)
        bench_buf_printf(&body, "{\"queue\":\"%s\",\"partition\":\"%s\",",
                         queue, part);
    else
        bench_buf_printf(&body, "{\"queue\":\"%s\",", queue);
    bench_buf_str(&body, "\"messages\":");
    bench_buf_add(&body, msgs->p, msgs->len);
    bench_buf_str(&body, "}");
    bench_http_request_auth(out, token, "POST", "/api/v1/ephemeral/push",
                            body.p, body.len);
    bench_buf_free(&body);
}

/* ---- push ---------------------------------------------------------- */

/* keyed_next - a keyed push's next request: the connection's copy of req
 * (in w1, made at its first push; a: where the first key starts, b: how
 * far apart the keys are, every message being as long) with the first 16
 * characters of each key made new, the connection's id and its count in
 * hex, so that no key repeats in a run. */
static const struct bench_buf *
keyed_next(struct bench_conn *c, const struct bench_buf *req)
{
    static const char mark[] = "\"key\":\"";
    char hex[17];

    if (c->w1.len == 0) {
        bench_buf_add(&c->w1, req->p, req->len);
        const char *k1 = memmem(c->w1.p, c->w1.len, mark, sizeof(mark) - 1);
        const char *k2 = memmem(k1 + 1, c->w1.len - (size_t)(k1 + 1 - c->w1.p),
                                mark, sizeof(mark) - 1);
        c->a = (long)(k1 - c->w1.p) + (long)sizeof(mark) - 1;
        c->b = (long)(k2 - k1);
    }
    snprintf(hex, sizeof(hex), "%016llx",
             (unsigned long long)c->id << 44 | (unsigned long long)c->seq++);
    for (int i = 0; i < BENCH_BATCH; i++)
        memcpy(c->w1.p + c->a + (long)i * c->b, hex, 16);
    return &c->w1;
}

/* Send the connection's next push. */
static int
push_start(struct bench_conn *c)
{
    const struct bench_push_sc *sc = c->ud;
    const struct bench_buf *req = &sc->req[c->id % BENCH_PARTS];

    if (sc->keyed)
        req = keyed_next(c, req);
    c->state = 0;
    c->t0 = bench_now_ns();
    bench_send(c, req->p, req->len);
    return 0;
}

/* A push answered (201, or 429), or the reset after one (200). */
static int
push_reply(struct bench_conn *c, const struct bench_reply *r)
{
    struct bench_push_sc *sc = c->ud;

    if (c->state == 0 && r->status == 429) {
        atomic_fetch_add(&sc->full, 1);
        c->state = 1;
        bench_send(c, sc->reset.p, sc->reset.len);
        return 0;
    }
    if (r->status != (c->state == 0 ? 201 : 200)) {
        bench_fail(c, "%s answered %d: %.*s", c->state ? "reset" : "push",
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state == 1)
        return push_start(c);
    bench_record(c, c->t0, (uint64_t)(sc->batch ? sc->batch : BENCH_BATCH));
    if ((atomic_fetch_add(&sc->pushed, 1) + 1) %
            (sc->reset_every ? sc->reset_every : 20) !=
        0)
        return push_start(c);
    c->state = 1;
    bench_send(c, sc->reset.p, sc->reset.len);
    return 0;
}

const struct bench_role bench_role_push = {push_start, push_reply};

/* ---- fill ---------------------------------------------------------- */

/* fill_queue - the queue of fill item k into out. */
static void
fill_queue(const struct bench_fill_sc *sc, long k, char *out, size_t len)
{
    if (sc->name != NULL)
        snprintf(out, len, "%s", sc->name[k / sc->per_q]);
    else if (sc->per_q > 0)
        snprintf(out, len, "%s%ld", sc->prefix, k / sc->per_q);
    else
        snprintf(out, len, "%s", sc->prefix);
}

/* Claim the next fill item and send it; 1 when none is left. */
static int
fill_start(struct bench_conn *c)
{
    struct bench_fill_sc *sc = c->ud;
    char queue[64], part[16];
    long k = atomic_fetch_add(&sc->next, 1);

    if (k >= sc->total)
        return 1;
    fill_queue(sc, k, queue, sizeof(queue));
    snprintf(part, sizeof(part), "p%ld", sc->parts ? k % sc->parts : 0);
    c->t0 = bench_now_ns();
    bench_push_req(&c->out, NULL, queue, sc->parts ? part : NULL,
                   sc->msgs ? sc->msgs : &bench_msgs100);
    return 0;
}

/* A fill push answered. */
static int
fill_reply(struct bench_conn *c, const struct bench_reply *r)
{
    const struct bench_fill_sc *sc = c->ud;

    if (r->status != 201) {
        bench_fail(c, "fill push answered %d: %.*s", r->status,
                   (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    bench_record(c, c->t0, (uint64_t)(sc->batch ? sc->batch : BENCH_BATCH));
    return fill_start(c);
}

const struct bench_role bench_role_fill = {fill_start, fill_reply};

/* bench_fill_run - see bench.h. */
int
bench_fill_run(struct bench_fill_sc *sc, int port, int conns, char *err,
               size_t errlen)
{
    struct bench_run *run = bench_run_new(bench_opt.threads);
    int ok = 1, rc = 0;

    atomic_store(&run->deadline, bench_now_ns() + 60000000000ull);
    for (int i = 0; i < conns && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, port, &bench_role_fill, sc) != NULL;
    if (ok && bench_run_start(run) == 0)
        bench_run_join(run);
    if (!ok || run->errors > 0) {
        snprintf(err, errlen, "fill: %s", run->err);
        rc = -EIO;
    }
    bench_run_free(run);
    return rc;
}

/* ---- drain --------------------------------------------------------- */

/* drain_queue - the queue the connection empties now into out. */
static void
drain_queue(const struct bench_conn *c, char *out, size_t len)
{
    const struct bench_drain_sc *sc = c->ud;

    if (sc->name != NULL)
        snprintf(out, len, "%s", sc->name[c->a]);
    else
        snprintf(out, len, "%s%ld", sc->prefix, c->a);
}

/* Send a pop for the connection's current queue; in one exchange, a POST
 * carrying the cumulative ack of the batch before (its last id in w2,
 * empty at a queue's first pop). */
static void
drain_pop(struct bench_conn *c)
{
    const struct bench_drain_sc *sc = c->ud;
    char path[192], queue[64];

    drain_queue(c, queue, sizeof(queue));
    if (sc->one) {
        c->w1.len = 0;
        bench_buf_printf(&c->w1, "{\"queue\":\"%s\",\"batch\":%d,\"acks\":[",
                         queue, sc->batch ? sc->batch : BENCH_BATCH);
        if (c->w2.len > 0) {
            bench_buf_str(&c->w1, "{\"id\":\"");
            bench_buf_add(&c->w1, c->w2.p, c->w2.len);
            bench_buf_str(&c->w1, "\",\"upTo\":true}");
        }
        bench_buf_str(&c->w1, "]}");
        c->state = 0;
        c->t0 = bench_now_ns();
        bench_http_request(&c->out, "POST", "/api/v1/ephemeral/pop", c->w1.p,
                           c->w1.len);
        return;
    }
    snprintf(path, sizeof(path), POP_PATH "queue=%s%s&batch=%d%s", queue,
             sc->pop_arg ? sc->pop_arg : "",
             sc->batch ? sc->batch : BENCH_BATCH,
             sc->autoack ? "&autoAck=true" : "");
    c->state = 0;
    c->t0 = bench_now_ns();
    bench_http_request(&c->out, "GET", path, NULL, 0);
}

/* Start at queue id. */
static int
drain_start(struct bench_conn *c)
{
    const struct bench_drain_sc *sc = c->ud;

    c->a = c->id;
    if (c->a >= sc->nq)
        return 1;
    drain_pop(c);
    return 0;
}

/* Build the ack for the ids of a pop answer into w1; how many. */
static long
drain_ack_body(struct bench_conn *c, const struct bench_reply *r)
{
    size_t pos = 0, sl;
    const char *s;
    char queue[64];
    long n = 0;

    drain_queue(c, queue, sizeof(queue));
    c->w1.len = 0;
    bench_buf_printf(&c->w1, "{\"queue\":\"%s\",\"acks\":[", queue);
    while (bench_json_str(r->body, r->len, &pos, "id", &s, &sl) == 0) {
        bench_buf_str(&c->w1, n ? ",\"" : "\"");
        bench_buf_add(&c->w1, s, sl);
        bench_buf_str(&c->w1, "\"");
        n++;
    }
    bench_buf_str(&c->w1, "]}");
    return n;
}

/* The messages of a POST pop's answer (the "id"s before its "results"),
 * the last one's id into w2 when there are some; how many. */
static long
drain_one_count(struct bench_conn *c, const struct bench_reply *r)
{
    const char *end = memmem(r->body, r->len, "\"results\"", 9), *s;
    size_t len = end ? (size_t)(end - r->body) : r->len, pos = 0, sl;
    long n = 0;

    while (bench_json_str(r->body, len, &pos, "id", &s, &sl) == 0) {
        c->w2.len = 0;
        bench_buf_add(&c->w2, s, sl);
        n++;
    }
    return n;
}

/* A pop or an ack answered. */
static int
drain_reply(struct bench_conn *c, const struct bench_reply *r)
{
    const struct bench_drain_sc *sc = c->ud;
    long n;

    if (r->status != 200) {
        bench_fail(c, "%s answered %d: %.*s", c->state ? "ack" : "pop",
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state == 1) {
        drain_pop(c);
        return 0;
    }
    n = sc->one       ? drain_one_count(c, r)
        : sc->autoack ? bench_json_count(r->body, r->len, "id")
                      : drain_ack_body(c, r);
    if (n == 0) {
        c->w2.len = 0; /* the last batch's ack went with this pop */
        c->a += sc->step;
        if (c->a >= sc->nq)
            return 1;
        drain_pop(c);
        return 0;
    }
    bench_record(c, c->t0, (uint64_t)n);
    if (sc->autoack || sc->one) {
        drain_pop(c);
        return 0;
    }
    c->state = 1;
    bench_http_request(&c->out, "POST", "/api/v1/ephemeral/ack", c->w1.p,
                       c->w1.len);
    return 0;
}

const struct bench_role bench_role_drain = {drain_start, drain_reply};

/* ---- request/reply by inbox ---------------------------------------- */

/* bench_rpc_request - see bench.h. */
void
bench_rpc_request(struct bench_conn *c, const char *method, const char *path,
                  const char *body, size_t len)
{
    struct bench_rpc_sc *sc = c->ud;
    const char *token = c->proto == BENCH_HTTPS ? bench_opt.ttoken : NULL;

    atomic_fetch_add_explicit(&sc->requests, 1, memory_order_relaxed);
    bench_http_request_auth(&c->out, token, method, path, body, len);
}

/* Requester: long-poll the inbox named in w2. */
static void
rpcq_poll(struct bench_conn *c)
{
    const struct bench_rpc_sc *sc = c->ud;
    char path[192];

    snprintf(path, sizeof(path),
             POP_PATH "queue=%s%s&wait=true&timeout=5000&autoAck=true", c->w2.p,
             sc->pop_arg ? sc->pop_arg : "");
    bench_rpc_request(c, "GET", path, NULL, 0);
}

/* Requester: mint an inbox (into w2), push the request naming it (with
 * --pipeline, and the long-poll of the inbox in the same write). */
static int
rpcq_start(struct bench_conn *c)
{
    const struct bench_rpc_sc *sc = c->ud;
    struct bench_buf body = {0};
    char base[64];

    c->seq++;
    snprintf(base, sizeof(base), "rpcbox-%d-%d-%ld", sc->tag, c->id, c->seq);
    c->w2.len = 0;
    bench_buf_reserve(&c->w2, 96);
    if (sc->inbox != NULL)
        sc->inbox(c->w2.p, 96, base);
    else
        snprintf(c->w2.p, 96, "%s", base);
    c->w2.len = strlen(c->w2.p);
    bench_buf_printf(&body,
                     "{\"queue\":\"%s\",\"messages\":[{\"payload\":\"%s|%s\"}"
                     "]}",
                     sc->queue, c->w2.p, bench_rpc_pad);
    c->state = 0;
    c->t0 = bench_now_ns();
    bench_rpc_request(c, "POST", "/api/v1/ephemeral/push", body.p, body.len);
    bench_buf_free(&body);
    if (bench_opt.pipeline)
        rpcq_poll(c);
    return 0;
}

/* Requester: pushed, so park on the inbox (with --pipeline the long-poll
 * went out with the push, and the push's answer only moves on); answered,
 * so count it. */
static int
rpcq_reply(struct bench_conn *c, const struct bench_reply *r)
{
    if (r->status != (c->state == 0 ? 201 : 200)) {
        bench_fail(c, "requester %s answered %d: %.*s",
                   c->state ? "pop" : "push", r->status,
                   (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state == 0) {
        c->state = 1;
        if (!bench_opt.pipeline)
            rpcq_poll(c);
        return 0;
    }
    if (bench_json_count(r->body, r->len, "id") != 1) {
        bench_fail(c, "no reply within 5 s");
        return -1;
    }
    bench_record(c, c->t0, 1);
    atomic_fetch_add_explicit(&((struct bench_rpc_sc *)c->ud)->trips, 1,
                              memory_order_relaxed);
    return rpcq_start(c);
}

const struct bench_role bench_role_rpcq = {rpcq_start, rpcq_reply};

/* bench_rpcs_start - see bench.h. */
int
bench_rpcs_start(struct bench_conn *c)
{
    const struct bench_rpc_sc *sc = c->ud;
    char path[192];

    snprintf(path, sizeof(path),
             POP_PATH "queue=%s%s&group=workers&batch=%d&wait=true&"
                      "timeout=1000",
             sc->queue, sc->pop_arg ? sc->pop_arg : "",
             sc->batch ? sc->batch : 16);
    c->state = 0;
    bench_rpc_request(c, "GET", path, NULL, 0);
    return 0;
}

/* Responder: push the reply for request b (inboxes sit in w2, NUL
 * separated, from offset w2.off). */
static void
rpcs_push_reply(struct bench_conn *c)
{
    struct bench_buf body = {0};
    const char *inbox = c->w2.p + c->w2.off;

    bench_buf_printf(&body,
                     "{\"queue\":\"%s\",\"messages\":[{\"payload\":\"%s\"}]}",
                     inbox, bench_rpc_pad);
    c->w2.off += strlen(inbox) + 1;
    c->b++;
    bench_rpc_request(c, "POST", "/api/v1/ephemeral/push", body.p, body.len);
    bench_buf_free(&body);
}

/* Responder: collect the ids (into the ack in w1) and inboxes (into w2) of
 * a pop answer; how many requests it held. */
static long
rpcs_collect(struct bench_conn *c, const struct bench_reply *r)
{
    const struct bench_rpc_sc *sc = c->ud;
    size_t pos = 0, ppos, sl, il;
    const char *s, *bar;
    long n = 0;

    c->w1.len = 0;
    c->w2.len = c->w2.off = 0;
    bench_buf_printf(&c->w1,
                     "{\"queue\":\"%s\",\"group\":\"workers\","
                     "\"acks\":[",
                     sc->queue);
    while (bench_json_str(r->body, r->len, &pos, "id", &s, &sl) == 0) {
        bench_buf_str(&c->w1, n ? ",\"" : "\"");
        bench_buf_add(&c->w1, s, sl);
        bench_buf_str(&c->w1, "\"");
        ppos = pos;
        if (bench_json_str(r->body, r->len, &ppos, "payload", &s, &sl) != 0)
            break;
        bar = memchr(s, '|', sl);
        il = bar ? (size_t)(bar - s) : sl;
        bench_buf_add(&c->w2, s, il);
        bench_buf_add(&c->w2, "", 1);
        n++;
    }
    bench_buf_str(&c->w1, "]}");
    return n;
}

/* Responder: a pop, a reply push or the ack answered. With --pipeline a
 * pop's answer sends every reply push, the ack and the next pop in one
 * write; their answers come back in that order. */
static int
rpcs_reply(struct bench_conn *c, const struct bench_reply *r)
{
    int want = c->state == 1 ? 201 : 200;

    if (r->status != want) {
        bench_fail(c, "responder step %d answered %d: %.*s", c->state,
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state == 0) {
        c->a = rpcs_collect(c, r);
        c->b = 0;
        if (c->a == 0)
            return bench_rpcs_start(c);
        c->state = 1;
        if (!bench_opt.pipeline) {
            rpcs_push_reply(c);
            return 0;
        }
        while (c->b < c->a)
            rpcs_push_reply(c);
        bench_rpc_request(c, "POST", "/api/v1/ephemeral/ack", c->w1.p,
                          c->w1.len);
        bench_rpcs_start(c);
        c->state = 1;
        c->b = 0;
        return 0;
    }
    if (bench_opt.pipeline) {
        /* Answers of the pushes (state 1, b counts them), then the ack. */
        if (c->state == 1 && ++c->b < c->a)
            return 0;
        c->state = c->state == 1 ? 2 : 0;
        return 0;
    }
    if (c->state == 1 && c->b < c->a) {
        rpcs_push_reply(c);
        return 0;
    }
    if (c->state == 1) {
        c->state = 2;
        bench_rpc_request(c, "POST", "/api/v1/ephemeral/ack", c->w1.p,
                          c->w1.len);
        return 0;
    }
    return bench_rpcs_start(c);
}

const struct bench_role bench_role_rpcs = {bench_rpcs_start, rpcs_reply};

/* ---- request/reply by the request verb (SPEC §9) ------------------ */

/* Request verb, requester: one POST /api/v1/ephemeral/request a round
 * trip; the node mints the inbox and waits on it. */
static int
rpcv_start(struct bench_conn *c)
{
    const struct bench_rpc_sc *sc = c->ud;
    struct bench_buf body = {0};

    bench_buf_printf(&body,
                     "{\"queue\":\"%s\",\"payload\":\"%s\",\"timeout\":5000}",
                     sc->queue, sc->pad ? sc->pad : bench_rpc_pad);
    c->t0 = bench_now_ns();
    bench_rpc_request(c, "POST", "/api/v1/ephemeral/request", body.p, body.len);
    bench_buf_free(&body);
    return 0;
}

/* Request verb, requester: the reply came; count it and ask again. */
static int
rpcv_reply(struct bench_conn *c, const struct bench_reply *r)
{
    /* before the responders' first long polls park: asked again */
    if (r->status == 503 && r->len > 0 &&
        memmem(r->body, r->len, "no_responders", 13) != NULL)
        return rpcv_start(c);
    if (r->status != 200) {
        bench_fail(c, "request answered %d: %.*s", r->status,
                   (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    bench_record(c, c->t0, 1);
    atomic_fetch_add_explicit(&((struct bench_rpc_sc *)c->ud)->trips, 1,
                              memory_order_relaxed);
    return rpcv_start(c);
}

const struct bench_role bench_role_reqv = {rpcv_start, rpcv_reply};

/* Request verb, responder: a pop's requests each answered in one ack
 * entry carrying the reply (with --pipeline the next pop goes with it). */
static int
rpcvs_reply(struct bench_conn *c, const struct bench_reply *r)
{
    const struct bench_rpc_sc *sc = c->ud;
    size_t pos = 0, sl;
    const char *s;
    long n = 0;

    if (r->status != 200) {
        bench_fail(c, "responder step %d answered %d: %.*s", c->state,
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state != 0) /* the ack's answer */
        return bench_opt.pipeline ? (c->state = 0) : bench_rpcs_start(c);
    c->w1.len = 0;
    bench_buf_printf(&c->w1,
                     "{\"queue\":\"%s\",\"group\":\"workers\","
                     "\"acks\":[",
                     sc->queue);
    while (bench_json_str(r->body, r->len, &pos, "id", &s, &sl) == 0) {
        bench_buf_str(&c->w1, n++ ? ",{\"id\":\"" : "{\"id\":\"");
        bench_buf_add(&c->w1, s, sl);
        bench_buf_printf(&c->w1, "\",\"reply\":\"%s\"}",
                         sc->pad ? sc->pad : bench_rpc_pad);
    }
    bench_buf_str(&c->w1, "]}");
    if (n == 0)
        return bench_rpcs_start(c);
    bench_rpc_request(c, "POST", "/api/v1/ephemeral/ack", c->w1.p, c->w1.len);
    c->state = 1;
    if (bench_opt.pipeline) {
        bench_rpcs_start(c);
        c->state = 1;
    }
    return 0;
}

const struct bench_role bench_role_reqvs = {bench_rpcs_start, rpcvs_reply};
