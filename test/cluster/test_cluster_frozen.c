/*
 * test_cluster_frozen.c - a node whose master is stopped (SIGSTOP) while
 * its workers run, on three real nodes (127.0.0.1-3).
 *
 * The master keeps the node's view of the cluster: who is live, so who
 * owns what.  Frozen, it stops heartbeating, and after member_ttl_ms its
 * peers count the node dead and serve its partitions themselves.  Its
 * workers must stop serving what needs that view before then (503
 * owner_moved, /health not 200), or two nodes take pushes for one
 * partition; once the master runs again the node serves again.  A node
 * without peers has nobody to disagree with and keeps serving.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

#define QUEUE "frozen"

static struct cl c;

CL_SUITE(cluster_frozen, &c, NULL, CL_SUITE_STARTED, .timeout = 180);

/* member_state - the state node i's /health gives node "n<k>". */
static void
member_state(int i, int k, char *out, size_t len)
{
    char id[8];

    snprintf(id, sizeof(id), "n%d", k);
    cl_member_state(&c, i, id, out, len);
}

/* push - one message to (QUEUE, part) through node i; the status. */
static long
push(int i, const char *part, struct itest_resp *r)
{
    return itest_push(&c.node[i], r, QUEUE, part, "[1]");
}

/* assert_refused - r is the answer of a node whose master is frozen. */
static void
assert_refused(const struct itest_resp *r, const char *what)
{
    itest_assert_error(r, 503, "owner_moved", NULL, what);
    cr_assert_str_neq(r->retry_after, "", "%s: Retry-After", what);
}

/*
 * watch_freeze - from SIGSTOP of node v's master: poll v (a push to p,
 * which v owns) and peer o (its view of v, and a push to q, which o owns)
 * until o counts v dead.  v must refuse before that: a push v takes after
 * o counts it dead is one two nodes take for one partition.  Returns the
 * ms from the stop to v's first refusal.
 */
static int64_t
watch_freeze(int v, int o, const char *p, const char *q, int64_t stopped)
{
    int64_t refused = -1;
    char st_o[16];

    for (;;) {
        struct itest_resp r;
        int64_t t = itest_now_ms() - stopped;
        long st = push(v, p, &r);

        member_state(o, v, st_o, sizeof(st_o));
        if (st == 201)
            cr_assert_str_neq(st_o, "dead",
                              "%lld ms after its master stopped, node %d "
                              "took a push for %s while node %d counts it "
                              "dead (and owns %s)",
                              (long long)t, v, p, o, p);
        else
            assert_refused(&r, "a push to the frozen node");
        if (st != 201 && refused < 0)
            refused = t;
        itest_resp_free(&r);
        cr_assert_eq(push(o, q, &r), 201, "node %d keeps serving: %s", o,
                     r.body);
        itest_resp_free(&r);
        if (strcmp(st_o, "dead") == 0)
            return refused;
        cr_assert_lt(t, 20000, "node %d counts node %d dead within 20 s", o, v);
        itest_sleep_ms(50);
    }
}

/* wait_serving - after SIGCONT: until node v answers /health 200 and takes
 * a push to p; the ms it took.  Peer o must not count v live before v
 * serves: o would send it requests that v refuses. */
static int64_t
wait_serving(int v, int o, const char *p, int64_t from)
{
    for (;;) {
        struct itest_resp r;
        struct itest_resp h;
        char st_o[16];

        member_state(o, v, st_o, sizeof(st_o));
        long st = push(v, p, &r);
        long hs = itest_req(&c.node[v], "GET", "/health", NULL, &h);
        if (strcmp(st_o, "live") == 0)
            cr_assert_eq(st, 201,
                         "node %d counts node %d live, which refuses a push: "
                         "%s",
                         o, v, r.body);

        itest_resp_free(&r);
        itest_resp_free(&h);
        if (st == 201 && hs == 200)
            return itest_now_ms() - from;
        cr_assert_lt(itest_now_ms() - from, 20000,
                     "node %d serves again within 20 s (push %ld, health "
                     "%ld)",
                     v, st, hs);
        itest_sleep_ms(50);
    }
}

Test(cluster_frozen,
     a_node_with_a_stopped_master_stops_serving_before_peers_take_over)
{
    int l = cl_leader(&c, 20000);
    char p[16], q[16];
    struct itest_resp r;

    cr_assert(l >= 0, "no leader agreed on within 20 s");
    int v = (l + 1) % CL_NODES, o = (l + 2) % CL_NODES;
    cl_part_owned_by(QUEUE, v, 200, p, sizeof(p));
    cl_part_owned_by(QUEUE, o, 200, q, sizeof(q));
    cl_wait_view(&c, CL_ALL);
    cr_assert_eq(push(v, p, &r), 201, "%s", r.body);
    itest_resp_free(&r);

    cr_assert_eq(kill(c.node[v].pid, SIGSTOP), 0);
    int64_t stopped = itest_now_ms();
    int64_t refused = watch_freeze(v, o, p, q, stopped);
    fprintf(stderr,
            "cluster_frozen: node %d refused %lld ms after its master "
            "stopped; node %d counted it dead after %lld ms\n",
            v, (long long)refused, o, (long long)(itest_now_ms() - stopped));
    cr_assert_geq(refused, 0);

    /* Everything that needs the view is refused, and /health says so. */
    cr_assert_eq(itest_get(&c.node[v], &r,
                           "/api/v1/ephemeral/pop?queue=" QUEUE "&partition=%s",
                           p),
                 503);
    assert_refused(&r, "a pop on the frozen node");
    itest_resp_free(&r);
    cr_assert_eq(itest_req(&c.node[v], "GET", "/health", NULL, &r), 503);
    cr_assert_eq(itest_jbool(r.json, "ready"), 0);
    itest_resp_free(&r);
    /* The peers serve its partitions meanwhile. */
    cr_assert_eq(push(o, p, &r), 201, "%s", r.body);
    itest_resp_free(&r);

    cr_assert_eq(kill(c.node[v].pid, SIGCONT), 0);
    int64_t back = wait_serving(v, o, p, itest_now_ms());
    fprintf(stderr,
            "cluster_frozen: node %d served again %lld ms after "
            "SIGCONT\n",
            v, (long long)back);
}

/* A lone node: its view cannot go stale against anyone's. */
static struct itest_node lone;

static void
lone_up(void)
{
    itest_node_start(&lone, NULL);
}

static void
lone_down(void)
{
    if (lone.pid > 0)
        kill(lone.pid, SIGCONT);
    itest_node_stop(&lone, 30000);
}

TestSuite(frozen_single, .init = lone_up, .fini = lone_down, .timeout = 60);

Test(frozen_single, a_node_without_peers_serves_while_its_master_is_stopped)
{
    struct itest_resp r;

    cr_assert_eq(kill(lone.pid, SIGSTOP), 0);
    int64_t stopped = itest_now_ms();
    /* member_ttl_ms (4000) and then some */
    while (itest_now_ms() - stopped < 5000) {
        cr_assert_eq(itest_push(&lone, &r, QUEUE, NULL, "[1]"), 201,
                     "%lld ms after its master stopped: %s",
                     (long long)(itest_now_ms() - stopped), r.body);
        itest_resp_free(&r);
        cr_assert_eq(itest_req(&lone, "GET", "/health", NULL, &r), 200);
        itest_resp_free(&r);
        itest_sleep_ms(100);
    }
    cr_assert_eq(kill(lone.pid, SIGCONT), 0);
}

/* A pop parked on the frozen node when its master stopped would wait out
 * its timeout for nothing: the peers soon serve its partition and take the
 * pushes.  It is let go (200, empty) once the view is stale, and asked
 * again it meets 503 owner_moved. */
Test(cluster_frozen, a_pop_parked_on_a_node_whose_master_stops_is_let_go)
{
    int l = cl_leader(&c, 20000);
    char p[16], path[200];
    struct itest_multi *m;
    struct itest_resp *r, again;

    cr_assert(l >= 0, "no leader agreed on within 20 s");
    int v = (l + 1) % CL_NODES;
    cl_part_owned_by(QUEUE, v, 200, p, sizeof(p));
    cl_wait_view(&c, CL_ALL);
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=" QUEUE
             "&partition=%s&wait=true&timeout=30000",
             p);
    m = itest_multi_new();
    itest_multi_add(m, &c.node[v], "GET", path, NULL);
    itest_multi_until_parked(&c.node[v], m, 8000);

    cr_assert_eq(kill(c.node[v].pid, SIGSTOP), 0);
    int64_t stopped = itest_now_ms();
    itest_multi_run(m, 20000);
    int64_t took = itest_now_ms() - stopped;
    cr_assert(itest_multi_done(m, 0),
              "the pop parked on node %d is still waiting %lld ms after its "
              "master stopped",
              v, (long long)took);
    r = itest_multi_resp(m, 0);
    cr_expect_eq(r->status, 200, "%s", r->body);
    cr_expect_eq(itest_jlen(r->json, "messages"), 0, "%s", r->body);
    cr_expect_lt(took, 15000, "let go %lld ms after the master stopped",
                 (long long)took);
    itest_multi_free(m);
    cr_assert_eq(itest_get(&c.node[v], &again, "%s", path), 503);
    assert_refused(&again, "the pop asked again");
    itest_resp_free(&again);
    cr_assert_eq(kill(c.node[v].pid, SIGCONT), 0);
}

/* A short member_ttl_ms: the master beats the board once a tick
 * (100 ms), so a bound of ttl/2 under three ticks read a healthy master as
 * stopped now and then, and the node refused requests at random.  Below
 * that the check is off (and the start says so). */
CL_SUITE(frozen_short_ttl, &c, "member_ttl_ms=180", CL_SUITE_STARTED,
         .timeout = 120);

Test(frozen_short_ttl, a_running_master_is_never_taken_for_a_stopped_one)
{
    struct itest_resp r;

    cr_assert(cl_leader(&c, 20000) >= 0, "no leader agreed on within 20 s");
    for (int k = 0; k < 600; k++) {
        int i = k % CL_NODES;
        itest_req(&c.node[i], "GET", "/health", NULL, &r);
        cr_assert(r.json == NULL ||
                      strcmp(itest_jstr(r.json, "status"), "stale") != 0,
                  "check %d: node %d says its view is stale while its "
                  "master runs: %s",
                  k, i, r.body);
        itest_resp_free(&r);
        itest_sleep_ms(10);
    }
    cr_assert(itest_node_log_contains(&c.node[0], "member_ttl_ms 180 is below"),
              "the start warns that the check is off");
}
