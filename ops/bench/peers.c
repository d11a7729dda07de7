/*
 * peers.c - the same workloads against Redis (RESP on the epoll engine,
 * hiredis for the blocking wake) and NATS (libnats), so every mayfly figure
 * has a peer measured in the same run on the same machine.
 *
 * NATS callbacks run on libnats' threads: each requester connection's
 * counters are touched only by its own subscription's callback; the run's
 * window and stop flag are atomics.
 * Errors: a workload that fails becomes a row with a note.
 */
#include <hiredis/hiredis.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/bench/bench.h"

#define PAYLOAD 256
#define BATCH   100
#define PARTS   8
#define RPC_PAD 64

static char value[PAYLOAD + 1];
static char pad[RPC_PAD + 1];
static int tag;

/* Fill the values exactly as mayfly.c fills its payloads. */
static void
values_init(void)
{
    for (int i = 0; i < PAYLOAD; i++)
        value[i] = (char)('a' + i % 26);
    for (int i = 0; i < RPC_PAD; i++)
        pad[i] = (char)('A' + i % 26);
    tag = (int)(bench_now_ns() / 1000 % 1000000);
}

/* Append one RESP argument. */
static void
resp_arg(struct bench_buf *b, const char *s, size_t n)
{
    bench_buf_printf(b, "$%zu\r\n", n);
    bench_buf_add(b, s, n);
    bench_buf_str(b, "\r\n");
}

/* Append RPUSH key with 100 values. */
static void
resp_rpush100(struct bench_buf *b, const char *key)
{
    bench_buf_printf(b, "*%d\r\n", BATCH + 2);
    resp_arg(b, "RPUSH", 5);
    resp_arg(b, key, strlen(key));
    for (int i = 0; i < BATCH; i++)
        resp_arg(b, value, PAYLOAD);
}

/* Append a command of two or three plain arguments. */
static void
resp_cmd(struct bench_buf *b, const char *a0, const char *a1, const char *a2)
{
    bench_buf_printf(b, "*%d\r\n", a2 ? 3 : 2);
    resp_arg(b, a0, strlen(a0));
    resp_arg(b, a1, strlen(a1));
    if (a2 != NULL)
        resp_arg(b, a2, strlen(a2));
}

/* Whether a reply is an error (and the connection should fail). */
static int
resp_error(struct bench_conn *c, const struct bench_reply *r)
{
    if (r->rr->type != REDIS_REPLY_ERROR)
        return 0;
    bench_fail(c, "redis: %s", r->rr->str);
    return 1;
}

/* RPUSH of 100 values, depth commands in flight per connection; every
 * 20th command of a connection is followed by DEL of its key, which
 * bounds the lists as the periodic reset bounds mayfly's queue. */
struct rpush_sc {
    struct bench_buf cmd[PARTS];
    struct bench_buf del[PARTS];
    int depth;
};

/* Queue one RPUSH (and the periodic DEL). */
static void
rpush_one(struct bench_conn *c)
{
    const struct rpush_sc *sc = c->ud;
    int k = c->id % PARTS;

    c->ring[c->rh++ % BENCH_RING] = bench_now_ns();
    bench_send(c, sc->cmd[k].p, sc->cmd[k].len);
    if (++c->seq % 20 == 0) {
        c->ring[c->rh++ % BENCH_RING] = 0;
        bench_send(c, sc->del[k].p, sc->del[k].len);
    }
}

/* Fill the pipeline. */
static int
rpush_start(struct bench_conn *c)
{
    const struct rpush_sc *sc = c->ud;

    for (int i = 0; i < sc->depth; i++)
        rpush_one(c);
    return 0;
}

/* One reply: an RPUSH is counted and replaced, a DEL is not. */
static int
rpush_reply(struct bench_conn *c, const struct bench_reply *r)
{
    uint64_t t0 = c->ring[c->rt++ % BENCH_RING];

    if (resp_error(c, r))
        return -1;
    if (t0 == 0)
        return 0;
    bench_record(c, t0, BATCH);
    rpush_one(c);
    return 0;
}

static const struct bench_role role_rpush = {rpush_start, rpush_reply};

/* Timed RPUSH with depth commands in flight, 16 connections. */
static void
redis_push(const char *key, int depth, const char *variant)
{
    struct rpush_sc *sc = calloc(1, sizeof(*sc));
    struct bench_run *run = bench_run_new(bench_opt.threads);
    struct bench_row row = {0};
    char k[48];
    int ok = 1;

    sc->depth = depth;
    for (int i = 0; i < PARTS; i++) {
        snprintf(k, sizeof(k), "bench:push:%d:p%d", tag, i);
        resp_rpush100(&sc->cmd[i], k);
        resp_cmd(&sc->del[i], "DEL", k, NULL);
    }
    for (int i = 0; i < 16 && ok; i++)
        ok = bench_run_add(run, BENCH_RESP, bench_opt.rport, &role_rpush, sc) !=
             NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    snprintf(row.key, sizeof(row.key), "%s", key);
    snprintf(row.scenario, sizeof(row.scenario), "push");
    snprintf(row.system, sizeof(row.system), "redis");
    snprintf(row.variant, sizeof(row.variant), "%s", variant);
    snprintf(row.ref, sizeof(row.ref), "push");
    bench_row_from_run(&row, run, bench_run_secs(run), "msg/s");
    bench_row_add(&row);
    bench_run_free(run);
    for (int i = 0; i < PARTS; i++) {
        bench_buf_free(&sc->cmd[i]);
        bench_buf_free(&sc->del[i]);
    }
    free(sc);
}

/* Fill lists prefix<k/100> with RPUSH of 100 values, one in flight. */
struct rfill_sc {
    char prefix[40];
    long total;
    atomic_long next;
};

/* Claim the next fill command; 1 when none is left. */
static int
rfill_start(struct bench_conn *c)
{
    struct rfill_sc *sc = c->ud;
    long k = atomic_fetch_add(&sc->next, 1);
    char key[64];

    if (k >= sc->total)
        return 1;
    snprintf(key, sizeof(key), "%s%ld", sc->prefix, k / 100);
    resp_rpush100(&c->out, key);
    return 0;
}

/* A fill command answered. */
static int
rfill_reply(struct bench_conn *c, const struct bench_reply *r)
{
    if (resp_error(c, r))
        return -1;
    return rfill_start(c);
}

static const struct bench_role role_rfill = {rfill_start, rfill_reply};

/* Drain: connection i empties lists i, i+8, ... with LPOP key 100. */
struct lpop_sc {
    char prefix[40];
    int nq;
};

/* Send LPOP of 100 for the connection's current list. */
static void
lpop_send(struct bench_conn *c)
{
    const struct lpop_sc *sc = c->ud;
    char key[64];

    snprintf(key, sizeof(key), "%s%ld", sc->prefix, c->a);
    c->t0 = bench_now_ns();
    resp_cmd(&c->out, "LPOP", key, "100");
}

/* Start at list id. */
static int
lpop_start(struct bench_conn *c)
{
    const struct lpop_sc *sc = c->ud;

    c->a = c->id;
    if (c->a >= sc->nq)
        return 1;
    lpop_send(c);
    return 0;
}

/* An LPOP answered: count, or move on when the list is empty. */
static int
lpop_reply(struct bench_conn *c, const struct bench_reply *r)
{
    const struct lpop_sc *sc = c->ud;

    if (resp_error(c, r))
        return -1;
    if (r->rr->type == REDIS_REPLY_ARRAY && r->rr->elements > 0) {
        bench_record(c, c->t0, r->rr->elements);
        lpop_send(c);
        return 0;
    }
    c->a += 8;
    if (c->a >= sc->nq)
        return 1;
    lpop_send(c);
    return 0;
}

static const struct bench_role role_lpop = {lpop_start, lpop_reply};

/* Run a set of connections with role to its end; the run (caller frees).
 */
static struct bench_run *
run_to_end(const struct bench_role *role, void *ud, int conns)
{
    struct bench_run *run = bench_run_new(bench_opt.threads);

    atomic_store(&run->deadline, bench_now_ns() + 60000000000ull);
    for (int i = 0; i < conns; i++)
        if (bench_run_add(run, BENCH_RESP, bench_opt.rport, role, ud) == NULL)
            break;
    if (bench_run_start(run) == 0)
        bench_run_join(run);
    return run;
}

/* Scenario drain against Redis: rounds of fill then LPOP 100. */
static void
redis_drain(void)
{
    struct bench_row row = {0};
    struct bench_hist *hist = calloc(1, sizeof(*hist));
    struct rfill_sc *fsc;
    struct lpop_sc lsc;
    struct bench_run *run;
    int nq = bench_opt.quick ? 16 : 32, rounds = bench_opt.quick ? 1 : 4;
    uint64_t msgs = 0, ns = 0, errors = 0;
    char err[200] = "";

    for (int r = 0; r < rounds && errors == 0; r++) {
        fsc = calloc(1, sizeof(*fsc));
        snprintf(fsc->prefix, sizeof(fsc->prefix), "bench:drain:%d:%d:", tag,
                 r);
        fsc->total = (long)nq * 100;
        run = run_to_end(&role_rfill, fsc, 8);
        errors += run->errors;
        if (run->errors)
            snprintf(err, sizeof(err), "fill: %.180s", run->err);
        bench_run_free(run);
        memcpy(lsc.prefix, fsc->prefix, sizeof(lsc.prefix));
        lsc.nq = nq;
        free(fsc);
        if (errors)
            break;
        run = run_to_end(&role_lpop, &lsc, 8);
        msgs += run->msgs;
        ns += run->t_last > run->t_start ? run->t_last - run->t_start : 0;
        errors += run->errors;
        if (run->errors)
            snprintf(err, sizeof(err), "%s", run->err);
        bench_hist_merge(hist, &run->hist);
        bench_run_free(run);
    }
    snprintf(row.key, sizeof(row.key), "drain-redis");
    snprintf(row.scenario, sizeof(row.scenario), "drain");
    snprintf(row.system, sizeof(row.system), "redis");
    snprintf(row.variant, sizeof(row.variant),
             "LPOP key 100, %d lists x 10000, 8 conns", nq);
    snprintf(row.unit, sizeof(row.unit), "msg/s");
    snprintf(row.ref, sizeof(row.ref), "drain-auto");
    row.ok = errors == 0 && ns > 0;
    row.rate = ns ? (double)msgs / ((double)ns / 1e9) : 0;
    row.p50_us = bench_hist_pct_us(hist, 50);
    row.p99_us = bench_hist_pct_us(hist, 99);
    snprintf(row.note, sizeof(row.note), "%s",
             row.ok ? "vs mayfly autoAck (Redis has no ack)" : err);
    bench_row_add(&row);
    free(hist);
}

/* Request/reply over lists: the request list's name. */
struct rrpc_sc {
    char list[40];
};

/* Requester: LPUSH the request naming a fresh reply list (with --pipeline,
 * and the BRPOP of that list in the same write). */
static int
rrq_start(struct bench_conn *c)
{
    const struct rrpc_sc *sc = c->ud;
    char key[64];

    c->seq++;
    c->w2.len = 0;
    bench_buf_printf(&c->w2, "bench:reply:%d:%d:%ld", tag, c->id, c->seq);
    c->w1.len = 0;
    bench_buf_printf(&c->w1, "%s|%s", c->w2.p, pad);
    snprintf(key, sizeof(key), "%s", sc->list);
    c->state = 0;
    c->t0 = bench_now_ns();
    resp_cmd(&c->out, "LPUSH", key, c->w1.p);
    if (bench_opt.pipeline)
        resp_cmd(&c->out, "BRPOP", c->w2.p, "5");
    return 0;
}

/* Requester: pushed, so BRPOP the reply list (with --pipeline the BRPOP
 * went out with the LPUSH); answered, so count it. */
static int
rrq_reply(struct bench_conn *c, const struct bench_reply *r)
{
    if (resp_error(c, r))
        return -1;
    if (c->state == 0) {
        c->state = 1;
        if (!bench_opt.pipeline)
            resp_cmd(&c->out, "BRPOP", c->w2.p, "5");
        return 0;
    }
    if (r->rr->type != REDIS_REPLY_ARRAY) {
        bench_fail(c, "no reply within 5 s");
        return -1;
    }
    bench_record(c, c->t0, 1);
    return rrq_start(c);
}

static const struct bench_role role_rrq = {rrq_start, rrq_reply};

/* Responder: BRPOP the request list. */
static int
rrs_start(struct bench_conn *c)
{
    const struct rrpc_sc *sc = c->ud;

    c->state = 0;
    resp_cmd(&c->out, "BRPOP", sc->list, "1");
    return 0;
}

/* Responder: a request came, so LPUSH the reply; replied, so BRPOP again.
 * With --pipeline the LPUSH and the next BRPOP go out in one write, and
 * the LPUSH's answer only moves on. */
static int
rrs_reply(struct bench_conn *c, const struct bench_reply *r)
{
    const char *v, *bar;

    if (resp_error(c, r))
        return -1;
    if (c->state == 1 && bench_opt.pipeline) {
        c->state = 0;
        return 0;
    }
    if (c->state == 1 || r->rr->type != REDIS_REPLY_ARRAY ||
        r->rr->elements != 2)
        return rrs_start(c);
    v = r->rr->element[1]->str;
    bar = strchr(v, '|');
    c->w2.len = 0;
    bench_buf_add(&c->w2, v, bar ? (size_t)(bar - v) : strlen(v));
    c->state = 1;
    resp_cmd(&c->out, "LPUSH", c->w2.p, pad);
    if (bench_opt.pipeline)
        resp_cmd(&c->out, "BRPOP", ((const struct rrpc_sc *)c->ud)->list, "1");
    return 0;
}

static const struct bench_role role_rrs = {rrs_start, rrs_reply};

/* Scenario rpc against Redis lists. */
static void
redis_rpc(int nreq, int nresp)
{
    struct rrpc_sc sc;
    struct bench_row row = {0};
    struct bench_run *run = bench_run_new(bench_opt.threads);
    int ok = 1;

    snprintf(sc.list, sizeof(sc.list), "bench:rpc:%d:%d", tag, nreq);
    for (int i = 0; i < nresp && ok; i++)
        ok = bench_run_add(run, BENCH_RESP, bench_opt.rport, &role_rrs, &sc) !=
             NULL;
    for (int i = 0; i < nreq && ok; i++)
        ok = bench_run_add(run, BENCH_RESP, bench_opt.rport, &role_rrq, &sc) !=
             NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    snprintf(row.key, sizeof(row.key), "rpc-redis-%d", nreq);
    snprintf(row.scenario, sizeof(row.scenario), "rpc");
    snprintf(row.system, sizeof(row.system), "redis");
    snprintf(row.variant, sizeof(row.variant),
             "%d requesters, %d responders, LPUSH + BRPOP reply list%s", nreq,
             nresp, bench_opt.pipeline ? ", pipelined" : "");
    snprintf(row.ref, sizeof(row.ref), "rpc-%d", nreq);
    bench_row_from_run(&row, run, bench_run_secs(run), "rt/s");
    bench_row_cost(&row, &run->sys_begin, &run->sys_end, bench_run_secs(run),
                   "round trip");
    bench_row_add(&row);
    bench_run_free(run);
}

/* Fill a latency-only row from a histogram. */
static void
wake_row(const char *key, const char *system, const char *variant,
         const struct bench_hist *h, int ok, const char *note)
{
    struct bench_row row = {0};

    snprintf(row.key, sizeof(row.key), "%s", key);
    snprintf(row.scenario, sizeof(row.scenario), "wake");
    snprintf(row.system, sizeof(row.system), "%s", system);
    snprintf(row.variant, sizeof(row.variant), "%s", variant);
    snprintf(row.unit, sizeof(row.unit), "wakes/s");
    snprintf(row.ref, sizeof(row.ref), "wake");
    snprintf(row.note, sizeof(row.note), "%s", note);
    row.ok = ok && h->count > 0;
    row.p50_us = bench_hist_pct_us(h, 50);
    row.p99_us = bench_hist_pct_us(h, 99);
    bench_row_add(&row);
}

/* Send what a blocking hiredis context has queued; 0 or -1. */
static int
redis_flush(redisContext *ctx)
{
    int done = 0;

    while (!done)
        if (redisBufferWrite(ctx, &done) != REDIS_OK)
            return -1;
    return 0;
}

/* Scenario wake against Redis: a parked BRPOP, then LPUSH. */
static void
redis_wake(void)
{
    struct bench_hist *h = calloc(1, sizeof(*h));
    redisContext *a = redisConnect("127.0.0.1", bench_opt.rport);
    redisContext *b = redisConnect("127.0.0.1", bench_opt.rport);
    int n = bench_opt.quick ? 300 : 2000, ok = a && b && !a->err && !b->err;
    redisReply *ra, *rb;
    char key[48], variant[72];
    uint64_t t0;

    snprintf(key, sizeof(key), "bench:wake:%d", tag);
    for (int i = 0; i < n && ok; i++) {
        redisAppendCommand(a, "BRPOP %s 5", key);
        ok = redis_flush(a) == 0;
        bench_sleep_ns(300000);
        t0 = bench_now_ns();
        redisAppendCommand(b, "LPUSH %s %b", key, value, (size_t)PAYLOAD);
        ok = ok && redis_flush(b) == 0;
        ra = rb = NULL;
        ok = ok && redisGetReply(a, (void **)&ra) == REDIS_OK && ra &&
             ra->type == REDIS_REPLY_ARRAY;
        if (ok)
            bench_hist_add(h, bench_now_ns() - t0);
        ok = ok && redisGetReply(b, (void **)&rb) == REDIS_OK;
        if (ra)
            freeReplyObject(ra);
        if (rb)
            freeReplyObject(rb);
    }
    snprintf(variant, sizeof(variant),
             "parked BRPOP, one 256 B LPUSH; %d samples", n);
    wake_row("wake-redis", "redis", variant, h, ok, "");
    if (a)
        redisFree(a);
    if (b)
        redisFree(b);
    free(h);
}

/* bench_redis_compared - see bench.h. */
void
bench_redis_compared(const char *scenario)
{
    if (tag == 0)
        values_init();
    if (strcmp(scenario, "push") == 0) {
        redis_push("push-redis", 1,
                   "RPUSH 100 x 256 B, 1 command per round trip, 16 conns");
        redis_push("push-redis-pipe", 16,
                   "RPUSH 100 x 256 B, 16 commands in flight, 16 conns");
    } else if (strcmp(scenario, "drain") == 0) {
        redis_drain();
    } else if (strcmp(scenario, "rpc1") == 0) {
        redis_rpc(1, 1);
    } else if (strcmp(scenario, "rpc32") == 0) {
        redis_rpc(32, 8);
    } else if (strcmp(scenario, "wake") == 0) {
        redis_wake();
    }
}

/* NATS request/reply: one requester connection carries slots
 * outstanding requests, each answered on a fresh reply subject. */
struct nreq {
    natsConnection *nc;
    natsSubscription *sub;
    struct nrpc *rpc;
    int id;
    int slots;
    uint64_t seq;
    uint64_t t0[64];
    struct bench_hist hist;
    uint64_t ops;
    uint64_t errors;
};

/* One NATS rpc run. */
struct nrpc {
    atomic_int stop;
    _Atomic uint64_t t_begin;
    _Atomic uint64_t t_end;
};

/* Publish request slot of requester q with a fresh reply subject. */
static natsStatus
nreq_send(struct nreq *q, int slot)
{
    char reply[64];

    snprintf(reply, sizeof(reply), "bench.r.%d.%d.%d.%llu", tag, q->id, slot,
             (unsigned long long)++q->seq);
    q->t0[slot] = bench_now_ns();
    return natsConnection_PublishRequest(q->nc, "bench.rpc", reply, pad,
                                         RPC_PAD);
}

/* A reply arrived: count it and send that slot's next request. */
static void
nreq_on_reply(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
              void *closure)
{
    struct nreq *q = closure;
    const char *subj = natsMsg_GetSubject(msg);
    uint64_t now = bench_now_ns();
    int slot = 0;

    (void)nc;
    (void)sub;
    sscanf(subj, "bench.r.%*d.%*d.%d", &slot);
    natsMsg_Destroy(msg);
    if (slot < 0 || slot >= q->slots)
        return;
    if (now >= atomic_load(&q->rpc->t_begin) &&
        now <= atomic_load(&q->rpc->t_end)) {
        bench_hist_add(&q->hist, now - q->t0[slot]);
        q->ops++;
    }
    if (!atomic_load(&q->rpc->stop) && nreq_send(q, slot) != NATS_OK)
        q->errors++;
}

/* A request arrived at a responder: answer on its reply subject. */
static void
nresp_on_request(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
                 void *closure)
{
    (void)sub;
    (void)closure;
    if (natsMsg_GetReply(msg) != NULL)
        natsConnection_Publish(nc, natsMsg_GetReply(msg), pad, RPC_PAD);
    natsMsg_Destroy(msg);
}

/* A connection to the bench's NATS server that sends at once. */
static natsStatus
nats_open(natsConnection **nc)
{
    natsOptions *o = NULL;
    char url[64];
    natsStatus s;

    snprintf(url, sizeof(url), "nats://127.0.0.1:%d", bench_opt.nport);
    s = natsOptions_Create(&o);
    if (s == NATS_OK)
        s = natsOptions_SetURL(o, url);
    if (s == NATS_OK)
        s = natsOptions_SetSendAsap(o, true);
    if (s == NATS_OK)
        s = natsOptions_UseGlobalMessageDelivery(o, true);
    if (s == NATS_OK)
        s = natsConnection_Connect(nc, o);
    natsOptions_Destroy(o);
    return s;
}

/* Scenario rpc against NATS: nresp queue subscribers in group workers,
 * nreq outstanding requests over at most two requester connections. */
static void
nats_rpc(int nreq, int nresp)
{
    natsConnection *rc[16] = {0};
    natsSubscription *rs[16] = {0};
    struct nreq *q = calloc(2, sizeof(*q));
    struct nrpc rpc;
    struct bench_sys sys_begin = {0}, sys_end = {0};
    struct bench_row row = {0};
    struct bench_hist *h = calloc(1, sizeof(*h));
    int nq = nreq > 1 ? 2 : 1;
    uint64_t ops = 0, errors = 0;
    natsStatus s = NATS_OK;
    double secs;

    atomic_store(&rpc.stop, 0);
    atomic_store(&rpc.t_begin, UINT64_MAX);
    atomic_store(&rpc.t_end, UINT64_MAX);
    for (int i = 0; i < nresp && s == NATS_OK; i++) {
        s = nats_open(&rc[i]);
        if (s == NATS_OK)
            s = natsConnection_QueueSubscribe(
                &rs[i], rc[i], "bench.rpc", "workers", nresp_on_request, NULL);
        if (s == NATS_OK)
            s = natsConnection_Flush(rc[i]);
    }
    for (int i = 0; i < nq && s == NATS_OK; i++) {
        char subj[64];

        q[i].rpc = &rpc;
        q[i].id = i;
        q[i].slots = nreq / nq;
        snprintf(subj, sizeof(subj), "bench.r.%d.%d.>", tag, i);
        s = nats_open(&q[i].nc);
        if (s == NATS_OK)
            s = natsConnection_Subscribe(&q[i].sub, q[i].nc, subj,
                                         nreq_on_reply, &q[i]);
        if (s == NATS_OK)
            s = natsConnection_Flush(q[i].nc);
    }
    for (int i = 0; i < nq && s == NATS_OK; i++)
        for (int j = 0; j < q[i].slots && s == NATS_OK; j++)
            s = nreq_send(&q[i], j);
    if (s == NATS_OK) {
        bench_sleep_ns((uint64_t)(bench_opt.warm * 1e9));
        bench_sys_read(&sys_begin);
        atomic_store(&rpc.t_begin, bench_now_ns());
        bench_sleep_ns((uint64_t)(bench_opt.secs * 1e9));
        atomic_store(&rpc.t_end, bench_now_ns());
        bench_sys_read(&sys_end);
    }
    atomic_store(&rpc.stop, 1);
    for (int i = 0; i < nq; i++) {
        if (q[i].sub)
            natsSubscription_Unsubscribe(q[i].sub);
        natsSubscription_Destroy(q[i].sub);
        natsConnection_Destroy(q[i].nc);
        bench_hist_merge(h, &q[i].hist);
        ops += q[i].ops;
        errors += q[i].errors;
    }
    for (int i = 0; i < nresp; i++) {
        natsSubscription_Destroy(rs[i]);
        natsConnection_Destroy(rc[i]);
    }
    secs = (double)(atomic_load(&rpc.t_end) - atomic_load(&rpc.t_begin)) / 1e9;
    snprintf(row.key, sizeof(row.key), "rpc-nats-%d", nreq);
    snprintf(row.scenario, sizeof(row.scenario), "rpc");
    snprintf(row.system, sizeof(row.system), "nats");
    snprintf(row.variant, sizeof(row.variant),
             "%d requests in flight, %d queue subscribers", nreq, nresp);
    snprintf(row.unit, sizeof(row.unit), "rt/s");
    snprintf(row.ref, sizeof(row.ref), "rpc-%d", nreq);
    row.ok = s == NATS_OK && ops > 0 && errors == 0;
    row.rate = row.ok ? (double)ops / secs : 0;
    row.p50_us = bench_hist_pct_us(h, 50);
    row.p99_us = bench_hist_pct_us(h, 99);
    snprintf(row.note, sizeof(row.note), "%s",
             s != NATS_OK ? natsStatus_GetText(s)
             : errors     ? "a publish failed"
                          : "reply subject per request, 2 conns carry them");
    bench_row_cost(&row, &sys_begin, &sys_end, secs, "round trip");
    bench_row_add(&row);
    free(q);
    free(h);
}

/* Scenario wake against NATS: a subscriber waiting, one publish. */
static void
nats_wake(void)
{
    natsConnection *pub = NULL, *subc = NULL;
    natsSubscription *sub = NULL;
    natsMsg *msg = NULL;
    struct bench_hist *h = calloc(1, sizeof(*h));
    int n = bench_opt.quick ? 300 : 2000;
    natsStatus s = nats_open(&pub);
    char variant[72];
    uint64_t t0;

    if (s == NATS_OK)
        s = nats_open(&subc);
    if (s == NATS_OK)
        s = natsConnection_SubscribeSync(&sub, subc, "bench.wake");
    if (s == NATS_OK)
        s = natsConnection_Flush(subc);
    for (int i = 0; i < n && s == NATS_OK; i++) {
        bench_sleep_ns(300000);
        t0 = bench_now_ns();
        s = natsConnection_Publish(pub, "bench.wake", value, PAYLOAD);
        if (s == NATS_OK)
            s = natsSubscription_NextMsg(&msg, sub, 5000);
        if (s == NATS_OK) {
            bench_hist_add(h, bench_now_ns() - t0);
            natsMsg_Destroy(msg);
        }
    }
    snprintf(variant, sizeof(variant),
             "subscriber waiting, one 256 B publish; %d samples", n);
    wake_row("wake-nats", "nats", variant, h, s == NATS_OK,
             s == NATS_OK ? "" : natsStatus_GetText(s));
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(subc);
    natsConnection_Destroy(pub);
    free(h);
}

/* bench_nats_compared - see bench.h. */
void
bench_nats_compared(const char *scenario)
{
    if (tag == 0)
        values_init();
    if (strcmp(scenario, "rpc1") == 0)
        nats_rpc(1, 1);
    else if (strcmp(scenario, "rpc32") == 0)
        nats_rpc(32, 8);
    else if (strcmp(scenario, "wake") == 0)
        nats_wake();
}

/* bench_nats_close - see bench.h. */
void
bench_nats_close(void)
{
    nats_Close();
}
