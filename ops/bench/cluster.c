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
 * partition may ask several nodes: SPEC §5). The requests themselves are
 * the one-node rows' (roles.c), given those names.
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

#define OWNER       0 /* n0 owns every name the rows use */
#define VIA         1 /* n1 forwards */
#define PUSH        "/api/v1/ephemeral/push"
#define DEFAULT_ARG "&partition=Default" /* pops name the owned partition */

static struct shm_owners owners;
static int tag;

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

/* Scenario push through node via (n0 itself, or n1): 16 conns, 100 x
 * 256 B a request, 8 partitions of one queue, all owned by n0, and a reset
 * of the queue after every 20th push (bench_role_push). */
static void
cl_push(int via, int unused, struct bench_row *out)
{
    struct bench_push_sc *sc = calloc(1, sizeof(*sc));
    struct bench_run *run = bench_run_new(bench_opt.threads);
    struct bench_row row = {0};
    char queue[48], part[48], body[96];
    int ok = 1;

    (void)unused;
    snprintf(queue, sizeof(queue), "clpush%d-%d", ++tag, via);
    for (int i = 0; i < BENCH_PARTS; i++) {
        char prefix[16];

        snprintf(prefix, sizeof(prefix), "p%d-", i);
        owned_name(part, sizeof(part), prefix, queue);
        bench_push_req(&sc->req[i], NULL, queue, part, &bench_msgs100);
    }
    snprintf(body, sizeof(body), "{\"queue\":\"%s\"}", queue);
    bench_http_request(&sc->reset, "POST", "/api/v1/ephemeral/reset", body,
                       strlen(body));
    row_names(&row, "push", "push", via);
    snprintf(row.variant, sizeof(row.variant),
             "100 x 256 B a request, 8 partitions, 16 conns");
    for (int i = 0; i < 16 && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, node(via), &bench_role_push, sc) !=
             NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    snprintf(row.unit, sizeof(row.unit), "msg/s");
    if (atomic_load(&sc->full) > 0)
        snprintf(row.note, sizeof(row.note),
                 "%ld pushes found the queue full (429) before a reset landed",
                 atomic_load(&sc->full));
    row_done(&row, run, bench_run_secs(run), "message", &run->sys_begin,
             &run->sys_end);
    *out = row;
    bench_run_free(run);
    for (int i = 0; i < BENCH_PARTS; i++)
        bench_buf_free(&sc->req[i]);
    bench_buf_free(&sc->reset);
    free(sc);
}

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

/* Scenario drain through node via: a fill through n0 (not measured) of 8
 * (QUICK) or 16 queues of 10,000 messages that n0 owns, then 8 conns
 * empty them with pop batch 100 + ack (bench_role_drain; connection i
 * queues i, i + 8, ...); the rate over the emptying time. */
static void
cl_drain(int via, int unused, struct bench_row *out)
{
    struct bench_fill_sc *fill = calloc(1, sizeof(*fill));
    struct bench_drain_sc sc = {.pop_arg = DEFAULT_ARG, .step = 8};
    char(*names)[64] = calloc(16, sizeof(*names));
    struct bench_row row = {0};
    struct bench_run *run;
    struct bench_sys b0, b1;
    char prefix[48];
    double secs;

    (void)unused;
    tag++;
    sc.nq = bench_opt.quick ? 8 : 16;
    sc.name = fill->name = names;
    fill->per_q = 10000 / BENCH_BATCH;
    fill->total = (long)sc.nq * fill->per_q;
    for (int q = 0; q < sc.nq; q++) {
        snprintf(prefix, sizeof(prefix), "cldrain%d-%d-%d-", tag, via, q);
        owned_name(names[q], sizeof(names[q]), prefix, NULL);
    }
    row_names(&row, "drain", "drain", via);
    snprintf(row.variant, sizeof(row.variant),
             "pop batch 100 + ack, %d queues x 10000, 8 conns", sc.nq);
    snprintf(row.unit, sizeof(row.unit), "msg/s");
    if (bench_fill_run(fill, node(OWNER), 8, row.note, sizeof(row.note)) != 0) {
        *out = row;
        free(fill);
        free(names);
        return;
    }
    bench_sys_read(&b0);
    run = run_through(via, &bench_role_drain, &sc, 8);
    bench_sys_read(&b1);
    secs = (double)(run->t_last - run->t_start) / 1e9;
    if (run->msgs != (uint64_t)fill->total * BENCH_BATCH)
        snprintf(row.note, sizeof(row.note), "drained %llu of %ld messages",
                 (unsigned long long)run->msgs, fill->total * BENCH_BATCH);
    else
        snprintf(row.note, sizeof(row.note), "latency is per pop request");
    /* the rate over the emptying time; the CPU over the run (connects too) */
    row_done(&row, run, secs > 0 ? secs : 1, "message", &b0, &b1);
    *out = row;
    bench_run_free(run);
    free(fill);
    free(names);
}

/* cl_inbox - the inbox a requester names: the first of base-0, base-1,
 * ... that n0 owns. */
static void
cl_inbox(char *out, size_t len, const char *base)
{
    char prefix[80];

    snprintf(prefix, sizeof(prefix), "%s-", base);
    owned_name(out, len, prefix, NULL);
}

/* Scenario rpc through node via with nreq requesters and nresp responders
 * (bench_role_rpcq, bench_role_rpcs); the request queue and every inbox
 * are n0's. */
static void
cl_rpc(int via, int nreq, struct bench_row *out)
{
    int nresp = nreq > 1 ? 8 : 1;
    struct bench_rpc_sc sc = {.pop_arg = DEFAULT_ARG, .inbox = cl_inbox};
    struct bench_row row = {0};
    struct bench_run *run = bench_run_new(bench_opt.threads);
    char prefix[40], key[16];
    int ok = 1;

    sc.tag = ++tag;
    snprintf(prefix, sizeof(prefix), "clrpc%d-%d-%d-", tag, via, nreq);
    owned_name(sc.queue, sizeof(sc.queue), prefix, NULL);
    snprintf(key, sizeof(key), "rpc-%d", nreq);
    row_names(&row, "rpc", key, via);
    snprintf(row.variant, sizeof(row.variant),
             "%d requesters, %d responders, inbox per request%s", nreq, nresp,
             bench_opt.pipeline ? ", pipelined" : "");
    for (int i = 0; i < nresp && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, node(via), &bench_role_rpcs, &sc) !=
             NULL;
    for (int i = 0; i < nreq && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, node(via), &bench_role_rpcq, &sc) !=
             NULL;
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
    struct shm_board_view v = {0};
    char err[240] = "";

    for (int k = 0; k < BENCH_NODES; k++) {
        snprintf(v.members[k].id, sizeof(v.members[k].id), "n%d", k);
        v.members[k].state = SHM_MEMBER_LIVE;
    }
    v.nmembers = BENCH_NODES;
    shm_owners_init(&owners);
    shm_owners_from_view(&owners, &v);
    tag = (int)(bench_now_ns() / 1000 % 1000000);
    bench_payload_init();
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
}
