/*
 * cluster.c - the cluster rows of mayfly-bench (`make bench CLUSTER=1`):
 * push, drain and rpc against three nodes n0, n1, n2 on 127.0.0.1-3, each
 * run with every request sent to the node that owns what it names (n0),
 * and in turn with every request sent to n1, which owns none of it and
 * forwards each request once to n0 (owner_vs_hop). The second row's ratio
 * (first / second) is what a hop costs, under the load both runs shared.
 *
 * Who owns a (queue, partition) is computed here with the owner rule the
 * nodes use (shm/owner.c, highest random weight over the live members'
 * node ids, which run.sh sets to n0-n2), and checked once against the nodes
 * (cluster_check: a push through n1, then depth scope=node on each node).
 * Queue, partition and inbox names are picked until n0 owns them. Pops name
 * partition Default, so a pop through n1 is one forward too (a pop with no
 * partition may ask several nodes: SPEC §5).
 *
 * Scenario data behind conn->ud is written before a run and only read by
 * the loops, but for the atomic counters. Errors: a row with a note.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/bench/bench.h"
#include "shm/owner.h"

#define OWNER   0 /* n0 owns every name the rows use */
#define VIA     1 /* n1 forwards */
#define PAYLOAD 256
#define BATCH   100
#define PARTS   8
#define POP     "/api/v1/ephemeral/pop?"
#define PUSH    "/api/v1/ephemeral/push"

static struct shm_owners owners;
static int tag;
static char payload[PAYLOAD + 1];
static struct bench_buf msgs100;

/* The node (0-2) that owns (queue, part) when n0-n2 are all live. */
static int
owner_of(const char *queue, const char *part)
{
    int m = shm_owner_pick(&owners, (struct shm_name){queue, strlen(queue)},
                           (struct shm_name){part, strlen(part)});

    return m < 0 ? -1 : owners.m[m].id[1] - '0';
}

/* Write into out the first of prefix0, prefix1, ... that n0 owns: as a
 * partition of queue, or (queue NULL) as a queue, partition Default.
 * About one name in three is n0's. */
static void
owned_name(char *out, size_t len, const char *prefix, const char *queue)
{
    for (int k = 0;; k++) {
        snprintf(out, len, "%s%d", prefix, k);
        if (owner_of(queue ? queue : out, queue ? out : "Default") == OWNER)
            return;
    }
}

/* The engine's address of node k. */
static int
node(int k)
{
    return BENCH_AT(k, bench_opt.cluster[k]);
}

/* A blocking request to node k on a fresh connection; the status, or
 * -errno. The answer's body is copied to ans when not NULL. */
static int
call(int k, const char *method, const char *path, const char *body,
     struct bench_buf *ans)
{
    struct bench_buf in = {0}, chunk = {0};
    struct bench_reply r = {0};
    int fd = bench_tcp_connect(node(k)), rc;

    if (fd < 0)
        return fd;
    rc = bench_http_call(fd, &in, &chunk, method, path, body, &r);
    if (rc == 0 && ans != NULL) {
        ans->len = 0;
        bench_buf_add(ans, r.body, r.len);
        bench_buf_add(ans, "", 1);
    }
    close(fd);
    bench_buf_free(&in);
    bench_buf_free(&chunk);
    return rc == 0 ? r.status : rc;
}

/* Wait (at most 60 s) until every node answers /health with three live
 * members; 0 or -ETIMEDOUT. */
static int
cluster_ready(void)
{
    uint64_t until = bench_now_ns() + 60000000000ull;
    struct bench_buf ans = {0};
    int ready = 0;

    while (!ready && bench_now_ns() < until) {
        ready = 1;
        for (int k = 0; k < BENCH_NODES && ready; k++) {
            const char *p = NULL;
            int live = 0;

            if (call(k, "GET", "/health", NULL, &ans) == 200)
                for (p = ans.p; (p = strstr(p, "\"state\":\"live\"")); p++)
                    live++;
            ready = live == BENCH_NODES;
        }
        if (!ready)
            bench_sleep_ns(200000000);
    }
    bench_buf_free(&ans);
    return ready ? 0 : -ETIMEDOUT;
}

/* Check the owner rule against the nodes: a message pushed through n1 to
 * a partition the rule gives n0 is n0's share (depth scope=node) and no
 * other node's; 0, or -EPROTO with why in err. */
static int
cluster_check(char *err, size_t len)
{
    struct bench_buf ans = {0};
    char prefix[24], queue[48], path[128], body[160];
    int rc = 0, st;

    snprintf(prefix, sizeof(prefix), "clcheck%d-", tag);
    owned_name(queue, sizeof(queue), prefix, NULL);
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"messages\":[{\"payload\":\"x\"}]}", queue);
    st = call(VIA, "POST", PUSH, body, NULL);
    if (st != 201) {
        snprintf(err, len, "check push through n1 answered %d", st);
        return -EPROTO;
    }
    snprintf(path, sizeof(path), "/api/v1/ephemeral/queues/%s/depth?scope=node",
             queue);
    for (int k = 0; k < BENCH_NODES && rc == 0; k++) {
        st = call(k, "GET", path, NULL, &ans);
        int holds = st == 200 && strstr(ans.p, "\"pending\":1,") != NULL;
        if (holds != (k == OWNER)) {
            snprintf(err, len,
                     "the owner rule says n%d holds %s, but n%d %s it "
                     "(depth scope=node answered %d)",
                     OWNER, queue, k, holds ? "holds" : "does not hold", st);
            rc = -EPROTO;
        }
    }
    bench_buf_free(&ans);
    return rc;
}

/* Fill row's name fields: scenario, system (node it is sent to), key. */
static void
row_names(struct bench_row *row, const char *scenario, const char *key, int via)
{
    snprintf(row->scenario, sizeof(row->scenario), "%s", scenario);
    snprintf(row->key, sizeof(row->key), "cl-%s-%s", key, via ? "fwd" : "own");
    snprintf(row->system, sizeof(row->system), "%s",
             via ? "mayfly n1->n0" : "mayfly n0");
    if (via)
        snprintf(row->ref, sizeof(row->ref), "cl-%s-own", key);
}

/* Finish row from run (measured over secs, between the readings b0 and
 * b1): rate, percentiles, verdict, and the cost of an operation (per names
 * it) ahead of the note already there. */
static void
row_done(struct bench_row *row, const struct bench_run *run, double secs,
         const char *per, const struct bench_sys *b0,
         const struct bench_sys *b1)
{
    char note[sizeof(row->note)], unit[sizeof(row->unit)];

    snprintf(note, sizeof(note), "%s", row->note);
    snprintf(unit, sizeof(unit), "%s", row->unit);
    bench_row_from_run(row, run, secs, unit);
    if (!row->ok)
        return;
    row->note[0] = '\0';
    bench_row_cost(row, b0, b1, secs, per);
    if (note[0] != '\0') {
        size_t n = strlen(row->note);
        snprintf(row->note + n, sizeof(row->note) - n, "%s%s", n ? "; " : "",
                 note);
    }
}

/* Push: request i % PARTS of req (partitions n0 owns), and a reset of the
 * queue after every 20th push, which keeps it under its 10,000 messages. */
struct push_sc {
    struct bench_buf req[PARTS];
    struct bench_buf reset;
    atomic_long pushed;
};

/* Send the connection's next push. */
static int
push_start(struct bench_conn *c)
{
    const struct push_sc *sc = c->ud;

    c->state = 0;
    c->t0 = bench_now_ns();
    bench_send(c, sc->req[c->id % PARTS].p, sc->req[c->id % PARTS].len);
    return 0;
}

/* A push (201, or 429 when a reset was slow to land) or a reset (200)
 * answered. */
static int
push_reply(struct bench_conn *c, const struct bench_reply *r)
{
    struct push_sc *sc = c->ud;
    int full = c->state == 0 && r->status == 429;

    if (!full && r->status != (c->state == 0 ? 201 : 200)) {
        bench_fail(c, "%s answered %d: %.*s", c->state ? "reset" : "push",
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state == 1)
        return push_start(c);
    if (!full) {
        bench_record(c, c->t0, BATCH);
        if ((atomic_fetch_add(&sc->pushed, 1) + 1) % 20 != 0)
            return push_start(c);
    }
    c->state = 1;
    bench_send(c, sc->reset.p, sc->reset.len);
    return 0;
}

static const struct bench_role role_push = {push_start, push_reply};

/* Scenario push through node via (n0 itself, or n1): 16 conns, 100 x
 * 256 B a request, 8 partitions of one queue, all owned by n0. */
static void
cl_push(int via, int unused, struct bench_row *out)
{
    struct push_sc *sc = calloc(1, sizeof(*sc));
    struct bench_run *run = bench_run_new(bench_opt.threads);
    struct bench_row row = {0};
    char queue[48], part[48], body[96];
    int ok = 1;

    (void)unused;
    snprintf(queue, sizeof(queue), "clpush%d-%d", ++tag, via);
    for (int i = 0; i < PARTS; i++) {
        struct bench_buf msg = {0};
        char prefix[16];

        snprintf(prefix, sizeof(prefix), "p%d-", i);
        owned_name(part, sizeof(part), prefix, queue);
        bench_buf_printf(&msg,
                         "{\"queue\":\"%s\",\"partition\":\"%s\","
                         "\"messages\":",
                         queue, part);
        bench_buf_add(&msg, msgs100.p, msgs100.len);
        bench_buf_str(&msg, "}");
        bench_http_request(&sc->req[i], "POST", PUSH, msg.p, msg.len);
        bench_buf_free(&msg);
    }
    snprintf(body, sizeof(body), "{\"queue\":\"%s\"}", queue);
    bench_http_request(&sc->reset, "POST", "/api/v1/ephemeral/reset", body,
                       strlen(body));
    row_names(&row, "push", "push", via);
    snprintf(row.variant, sizeof(row.variant),
             "100 x 256 B a request, 8 partitions, 16 conns");
    for (int i = 0; i < 16 && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, node(via), &role_push, sc) != NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    snprintf(row.unit, sizeof(row.unit), "msg/s");
    row_done(&row, run, bench_run_secs(run), "message", &run->sys_begin,
             &run->sys_end);
    *out = row;
    bench_run_free(run);
    for (int i = 0; i < PARTS; i++)
        bench_buf_free(&sc->req[i]);
    bench_buf_free(&sc->reset);
    free(sc);
}

/* Drain: a fill (pushes of 100 to queue k / 100, through n0, not
 * measured), then connection i empties queues i, i + 8, ... with pops of
 * 100 and an ack of their ids each. */
struct drain_sc {
    char queue[32][64];
    int nq;
    long total; /* fill pushes */
    atomic_long next;
    int via;
};

/* Fill: claim the next push and send it; 1 when none is left. */
static int
fill_start(struct bench_conn *c)
{
    struct drain_sc *sc = c->ud;
    struct bench_buf body = {0};
    long k = atomic_fetch_add(&sc->next, 1);

    if (k >= sc->total)
        return 1;
    bench_buf_printf(&body,
                     "{\"queue\":\"%s\",\"messages\":", sc->queue[k / BATCH]);
    bench_buf_add(&body, msgs100.p, msgs100.len);
    bench_buf_str(&body, "}");
    bench_http_request(&c->out, "POST", PUSH, body.p, body.len);
    bench_buf_free(&body);
    return 0;
}

/* Fill: a push answered. */
static int
fill_reply(struct bench_conn *c, const struct bench_reply *r)
{
    if (r->status != 201) {
        bench_fail(c, "fill push answered %d: %.*s", r->status,
                   (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    bench_record(c, bench_now_ns(), BATCH);
    return fill_start(c);
}

static const struct bench_role role_fill = {fill_start, fill_reply};

/* Drain: pop 100 of queue c->a, partition Default. */
static void
drain_pop(struct bench_conn *c)
{
    const struct drain_sc *sc = c->ud;
    char path[160];

    snprintf(path, sizeof(path), POP "queue=%s&partition=Default&batch=%d",
             sc->queue[c->a], BATCH);
    c->state = 0;
    c->t0 = bench_now_ns();
    bench_http_request(&c->out, "GET", path, NULL, 0);
}

/* Drain: start at queue c->id; 1 when there is none. */
static int
drain_start(struct bench_conn *c)
{
    const struct drain_sc *sc = c->ud;

    c->a = c->id;
    if (c->a >= sc->nq)
        return 1;
    drain_pop(c);
    return 0;
}

/* Drain: a pop answered (ack its ids, or go to the next queue when it was
 * empty) or an ack answered (pop again). */
static int
drain_reply(struct bench_conn *c, const struct bench_reply *r)
{
    const struct drain_sc *sc = c->ud;
    size_t pos = 0, sl;
    const char *s;
    long n = 0;

    if (r->status != 200) {
        bench_fail(c, "%s answered %d: %.*s", c->state ? "ack" : "pop",
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state == 1) {
        drain_pop(c);
        return 0;
    }
    c->w1.len = 0;
    bench_buf_printf(&c->w1, "{\"queue\":\"%s\",\"acks\":[", sc->queue[c->a]);
    for (; bench_json_str(r->body, r->len, &pos, "id", &s, &sl) == 0; n++)
        bench_buf_printf(&c->w1, "%s\"%.*s\"", n ? "," : "", (int)sl, s);
    bench_buf_str(&c->w1, "]}");
    if (n == 0) {
        c->a += 8;
        if (c->a >= sc->nq)
            return 1;
        drain_pop(c);
        return 0;
    }
    bench_record(c, c->t0, (uint64_t)n);
    c->state = 1;
    bench_http_request(&c->out, "POST", "/api/v1/ephemeral/ack", c->w1.p,
                       c->w1.len);
    return 0;
}

static const struct bench_role role_drain = {drain_start, drain_reply};

/* Run role with conns connections on node k to its end (at most 120 s);
 * the run, for the caller to read and free. */
static struct bench_run *
run_through(int k, const struct bench_role *role, void *ud, int conns)
{
    struct bench_run *run = bench_run_new(bench_opt.threads);
    int ok = 1;

    atomic_store(&run->deadline, bench_now_ns() + 120000000000ull);
    for (int i = 0; i < conns && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, node(k), role, ud) != NULL;
    if (ok && bench_run_start(run) == 0)
        bench_run_join(run);
    if (!ok)
        run->errors++;
    return run;
}

/* Scenario drain through node via: 8 (QUICK) or 16 queues of 10,000
 * messages that n0 owns, emptied by 8 conns with pop batch 100 + ack;
 * the rate over the emptying time. */
static void
cl_drain(int via, int unused, struct bench_row *out)
{
    struct drain_sc *sc = calloc(1, sizeof(*sc));
    struct bench_row row = {0};
    struct bench_run *run;
    struct bench_sys b0, b1;
    char prefix[48];
    double secs;

    (void)unused;
    tag++;
    sc->nq = bench_opt.quick ? 8 : 16;
    sc->total = (long)sc->nq * (10000 / BATCH);
    sc->via = via;
    for (int q = 0; q < sc->nq; q++) {
        snprintf(prefix, sizeof(prefix), "cldrain%d-%d-%d-", tag, via, q);
        owned_name(sc->queue[q], sizeof(sc->queue[q]), prefix, NULL);
    }
    row_names(&row, "drain", "drain", via);
    snprintf(row.variant, sizeof(row.variant),
             "pop batch 100 + ack, %d queues x 10000, 8 conns", sc->nq);
    snprintf(row.unit, sizeof(row.unit), "msg/s");
    run = run_through(OWNER, &role_fill, sc, 8);
    if (run->errors > 0) {
        snprintf(row.note, sizeof(row.note), "fill: %s", run->err);
        *out = row;
        bench_run_free(run);
        free(sc);
        return;
    }
    bench_run_free(run);
    bench_sys_read(&b0);
    run = run_through(via, &role_drain, sc, 8);
    bench_sys_read(&b1);
    secs = (double)(run->t_last - run->t_start) / 1e9;
    if (run->msgs != (uint64_t)sc->total * BATCH)
        snprintf(row.note, sizeof(row.note), "drained %llu of %ld messages",
                 (unsigned long long)run->msgs, sc->total * BATCH);
    else
        snprintf(row.note, sizeof(row.note), "latency is per pop request");
    /* the rate over the emptying time; the CPU over the run (connects too) */
    row_done(&row, run, secs > 0 ? secs : 1, "message", &b0, &b1);
    *out = row;
    bench_run_free(run);
    free(sc);
}

/* Request/reply as Queen's clients do it: the requester pushes a request
 * whose payload.replyTo names an inbox it minted (one that n0 owns) and
 * long-polls that inbox; responders long-poll the request queue in group
 * workers, push each reply to its replyTo and ack the batch. */
struct rpc_sc {
    char queue[64];
};

/* Requester: mint an inbox n0 owns (into w2), push the request naming it. */
static int
rpcq_start(struct bench_conn *c)
{
    const struct rpc_sc *sc = c->ud;
    char prefix[64];

    c->seq++;
    snprintf(prefix, sizeof(prefix), "clbox%d-%d-%ld-", tag, c->id, c->seq);
    bench_buf_reserve(&c->w2, 96);
    owned_name(c->w2.p, 96, prefix, NULL);
    c->w1.len = 0;
    bench_buf_printf(&c->w1,
                     "{\"queue\":\"%s\",\"messages\":[{\"payload\":"
                     "{\"replyTo\":\"%s\",\"body\":\"%.64s\"}}]}",
                     sc->queue, c->w2.p, payload);
    c->state = 0;
    c->t0 = bench_now_ns();
    bench_http_request(&c->out, "POST", PUSH, c->w1.p, c->w1.len);
    return 0;
}

/* Requester: pushed, so long-poll the inbox; answered, so count it. */
static int
rpcq_reply(struct bench_conn *c, const struct bench_reply *r)
{
    char path[192];

    if (r->status != (c->state == 0 ? 201 : 200)) {
        bench_fail(c, "requester %s answered %d: %.*s",
                   c->state ? "pop" : "push", r->status,
                   (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state == 0) {
        snprintf(path, sizeof(path),
                 POP "queue=%s&partition=Default&wait=true&timeout=5000&"
                     "autoAck=true",
                 c->w2.p);
        c->state = 1;
        bench_http_request(&c->out, "GET", path, NULL, 0);
        return 0;
    }
    if (bench_json_count(r->body, r->len, "id") != 1) {
        bench_fail(c, "no reply within 5 s");
        return -1;
    }
    bench_record(c, c->t0, 1);
    return rpcq_start(c);
}

static const struct bench_role role_rpcq = {rpcq_start, rpcq_reply};

/* Responder: long-poll the request queue (state 0). */
static int
rpcs_start(struct bench_conn *c)
{
    const struct rpc_sc *sc = c->ud;
    char path[192];

    snprintf(path, sizeof(path),
             POP "queue=%s&partition=Default&group=workers&batch=16&"
                 "wait=true&timeout=1000",
             sc->queue);
    c->state = 0;
    bench_http_request(&c->out, "GET", path, NULL, 0);
    return 0;
}

/* Responder: push the reply to the next replyTo of w2 (NUL-separated,
 * from w2.off on), state 1; or, when none is left, ack the batch (the
 * body in w1), state 2. */
static void
rpcs_next(struct bench_conn *c)
{
    char body[192];

    if (c->w2.off < c->w2.len) {
        snprintf(body, sizeof(body),
                 "{\"queue\":\"%s\",\"messages\":[{\"payload\":"
                 "{\"body\":\"%.64s\"}}]}",
                 c->w2.p + c->w2.off, payload);
        c->w2.off += strlen(c->w2.p + c->w2.off) + 1;
        c->state = 1;
        bench_http_request(&c->out, "POST", PUSH, body, strlen(body));
        return;
    }
    c->state = 2;
    bench_http_request(&c->out, "POST", "/api/v1/ephemeral/ack", c->w1.p,
                       c->w1.len);
}

/* Responder: a pop answered (collect the ids into the ack in w1 and the
 * replyTo of each into w2), a reply pushed, or the ack answered. */
static int
rpcs_reply(struct bench_conn *c, const struct bench_reply *r)
{
    const struct rpc_sc *sc = c->ud;
    size_t pos = 0, sl;
    const char *s;
    long n = 0;

    if (r->status != (c->state == 1 ? 201 : 200)) {
        bench_fail(c, "responder step %d answered %d: %.*s", c->state,
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state != 0) {
        if (c->state == 1)
            rpcs_next(c);
        else
            rpcs_start(c);
        return 0;
    }
    c->w1.len = c->w2.len = c->w2.off = 0;
    bench_buf_printf(&c->w1,
                     "{\"queue\":\"%s\",\"group\":\"workers\",\"acks\":[",
                     sc->queue);
    for (; bench_json_str(r->body, r->len, &pos, "id", &s, &sl) == 0; n++) {
        bench_buf_printf(&c->w1, "%s\"%.*s\"", n ? "," : "", (int)sl, s);
        if (bench_json_str(r->body, r->len, &pos, "replyTo", &s, &sl) != 0) {
            bench_fail(c, "a request without payload.replyTo");
            return -1;
        }
        bench_buf_add(&c->w2, s, sl);
        bench_buf_add(&c->w2, "", 1);
    }
    bench_buf_str(&c->w1, "]}");
    if (n == 0)
        return rpcs_start(c);
    rpcs_next(c);
    return 0;
}

static const struct bench_role role_rpcs = {rpcs_start, rpcs_reply};

/* Scenario rpc through node via with nreq requesters and nresp
 * responders; the request queue and every inbox are n0's. */
static void
cl_rpc(int via, int nreq, struct bench_row *out)
{
    int nresp = nreq > 1 ? 8 : 1;
    struct rpc_sc sc;
    struct bench_row row = {0};
    struct bench_run *run = bench_run_new(bench_opt.threads);
    char prefix[40], key[16];
    int ok = 1;

    snprintf(prefix, sizeof(prefix), "clrpc%d-%d-%d-", ++tag, via, nreq);
    owned_name(sc.queue, sizeof(sc.queue), prefix, NULL);
    snprintf(key, sizeof(key), "rpc-%d", nreq);
    row_names(&row, "rpc", key, via);
    snprintf(row.variant, sizeof(row.variant),
             "%d requesters, %d responders, payload.replyTo inbox", nreq,
             nresp);
    for (int i = 0; i < nresp && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, node(via), &role_rpcs, &sc) != NULL;
    for (int i = 0; i < nreq && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, node(via), &role_rpcq, &sc) != NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    snprintf(row.unit, sizeof(row.unit), "rt/s");
    row_done(&row, run, bench_run_secs(run), "round trip", &run->sys_begin,
             &run->sys_end);
    *out = row;
    bench_run_free(run);
}

/* A scenario: fills row for requests sent through node via (0: n0, the
 * owner; 1: n1, which forwards them). */
typedef void (*cl_scenario)(int via, int arg, struct bench_row *row);

/* Run fn to the owner and through n1 in turn (QUICK: once each; else
 * owner, n1, n1, owner, keeping each side's best rate, so that load
 * moving on the machine weighs on both) and add both rows. */
static void
owner_vs_hop(cl_scenario fn, int arg)
{
    struct bench_row best[2], r;
    int rounds = bench_opt.quick ? 1 : 2;
    size_t n;

    for (int t = 0; t < 2 * rounds; t++) {
        int via = (t + t / 2) % 2;

        memset(&r, 0, sizeof(r));
        fn(via, arg, &r);
        if (t < 2 || (r.ok && (!best[via].ok || r.rate > best[via].rate)))
            best[via] = r;
    }
    if (best[0].ok && best[1].ok) {
        char note[sizeof(best[1].note)];

        memcpy(note, best[1].note, sizeof(note));
        n = (size_t)snprintf(best[1].note, sizeof(best[1].note),
                             "a hop adds %.0f us to p50",
                             best[1].p50_us - best[0].p50_us);
        if (n < sizeof(best[1].note))
            snprintf(best[1].note + n, sizeof(best[1].note) - n, "; %s", note);
    }
    if (rounds > 1)
        for (int via = 0; via <= 1; via++) {
            n = strlen(best[via].note);
            snprintf(best[via].note + n, sizeof(best[via].note) - n,
                     "; best of %d", rounds);
        }
    bench_row_add(&best[0]);
    bench_row_add(&best[1]);
}

/* The whole cluster set, in table order. */
void
bench_cluster_all(void)
{
    struct shm_status_view v = {0};
    char err[240] = "";

    for (int k = 0; k < BENCH_NODES; k++) {
        snprintf(v.members[k].id, sizeof(v.members[k].id), "n%d", k);
        v.members[k].state = SHM_MEMBER_LIVE;
    }
    v.nmembers = BENCH_NODES;
    shm_owners_init(&owners);
    shm_owners_from_view(&owners, &v);
    tag = (int)(bench_now_ns() / 1000 % 1000000);
    for (int i = 0; i < PAYLOAD; i++)
        payload[i] = (char)('a' + i % 26);
    bench_buf_str(&msgs100, "[");
    for (int i = 0; i < BATCH; i++)
        bench_buf_printf(&msgs100, "%s{\"payload\":\"%s\"}", i ? "," : "",
                         payload);
    bench_buf_str(&msgs100, "]");
    if (cluster_ready() != 0) {
        bench_row_fail("cl", "cluster", "mayfly", "every cluster row",
                       "the three nodes did not all show three live members "
                       "within 60 s");
        return;
    }
    if (cluster_check(err, sizeof(err)) != 0) {
        bench_row_fail("cl", "cluster", "mayfly", "every cluster row", err);
        return;
    }
    if (bench_want("push"))
        owner_vs_hop(cl_push, 0);
    if (bench_want("drain"))
        owner_vs_hop(cl_drain, 0);
    if (bench_want("rpc") || bench_want("rpc1"))
        owner_vs_hop(cl_rpc, 1);
    if (bench_want("rpc") || bench_want("rpc32"))
        owner_vs_hop(cl_rpc, 32);
    bench_buf_free(&msgs100);
}
