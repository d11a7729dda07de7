/*
 * test_raft_cluster.c - declared queues through the raft log on three real
 * nodes (127.0.0.1-3): configure anywhere, visible everywhere; leader loss
 * and hand-over; restarts; catch-up by snapshot; the cluster secret.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/cluster.h"

static struct cl c;

static void
up(void)
{
    cl_init(&c);
    for (int i = 0; i < CL_NODES; i++)
        cl_start(&c, i, NULL);
}

static void
down(void)
{
    for (int i = 0; i < CL_NODES; i++)
        cl_kill(&c, i);
}

/* configure - POST a configure of queue with maxLength on node i. */
static long
configure(int i, const char *queue, int max_length, struct itest_resp *r)
{
    return itest_post(&c.node[i], r, "/api/v1/ephemeral/configure",
                      "{\"queue\":\"%s\",\"options\":{\"maxLength\":%d}}",
                      queue, max_length);
}

/* declared_length - maxLength node i lists for queue, -1 if not declared. */
static int64_t
declared_length(int i, const char *queue)
{
    struct json_object *q = itest_listing_find(&c.node[i], queue);
    int64_t v = -1;

    if (q && strcmp(itest_jstr(q, "tier"), "declared") == 0)
        v = itest_jint(q, "options.maxLength");
    if (q)
        json_object_put(q);
    return v;
}

/* wait_declared - poll until node i lists queue with max_length. */
static int
wait_declared(int i, const char *queue, int max_length, int timeout_ms)
{
    int64_t deadline = itest_now_ms() + timeout_ms;

    while (declared_length(i, queue) != max_length) {
        if (itest_now_ms() > deadline)
            return 0;
        itest_sleep_ms(50);
    }
    return 1;
}

/* configure_until - retry a configure on node i until 201 (clients retry
 * 503s); returns the ms it took, or -1 past timeout_ms. */
static int64_t
configure_until(int i, const char *queue, int max_length, int timeout_ms)
{
    int64_t start = itest_now_ms();

    while (itest_now_ms() - start < timeout_ms) {
        struct itest_resp r;
        long st = configure(i, queue, max_length, &r);
        itest_resp_free(&r);
        if (st == 201)
            return itest_now_ms() - start;
        itest_sleep_ms(20);
    }
    return -1;
}

TestSuite(raft_cluster, .init = up, .fini = down, .timeout = 180);

Test(raft_cluster, configure_on_a_follower_is_visible_on_every_node)
{
    struct itest_resp r;
    int l = cl_leader(&c, 20000);
    cr_assert(l >= 0, "no leader agreed on within 20 s");
    int f = (l + 1) % CL_NODES;

    cr_assert_eq(configure(f, "presence", 1000, &r), 201, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "options.maxLength"), 1000);
    cr_assert(itest_jbool(r.json, "declared"));
    itest_resp_free(&r);
    cr_assert_eq(declared_length(f, "presence"), 1000,
                 "the answering node has applied it when it answers");
    for (int i = 0; i < CL_NODES; i++)
        cr_assert(wait_declared(i, "presence", 1000, 10000),
                  "node %d does not list the declaration", i);
}

Test(raft_cluster, a_killed_leader_is_replaced_and_configure_works_again)
{
    int l = cl_leader(&c, 20000);
    cr_assert(l >= 0);
    int f = (l + 1) % CL_NODES;

    cl_kill(&c, l);
    int64_t took = configure_until(f, "after-kill", 7, 20000);
    cr_assert(took >= 0, "no configure succeeded within 20 s of the kill");
    fprintf(stderr,
            "raft_cluster: configure answered %lld ms after the "
            "leader was killed\n",
            (long long)took);
    /* Default timeouts elect within 2 x election_ms; a loaded machine gets
     * generous slack beyond the 3 s the design aims at. */
    cr_assert_lt(took, 10000);
    int nl = cl_leader(&c, 10000);
    cr_assert(nl >= 0 && nl != l);
    /* The survivors see the killed node dead, and each other live. */
    char dead[8];
    snprintf(dead, sizeof(dead), "n%d", l);
    int64_t deadline = itest_now_ms() + 15000;
    for (;;) {
        struct itest_resp r;
        int live = 0, gone = 0;
        itest_get(&c.node[f], &r, "/health");
        for (int k = 0; k < itest_jlen(r.json, "members"); k++) {
            char key[64];
            snprintf(key, sizeof(key), "members.%d.node", k);
            const char *id = itest_jstr(r.json, key);
            snprintf(key, sizeof(key), "members.%d.state", k);
            const char *st = itest_jstr(r.json, key);
            if (id && st && strcmp(id, dead) == 0)
                gone = strcmp(st, "dead") == 0;
            else if (st)
                live += strcmp(st, "live") == 0;
        }
        itest_resp_free(&r);
        if (gone && live == CL_NODES - 1)
            break;
        cr_assert_lt(itest_now_ms(), deadline,
                     "members never showed n%d dead and the others live", l);
        itest_sleep_ms(100);
    }
}

Test(raft_cluster, a_terminated_leader_hands_leadership_over_first)
{
    int l = cl_leader(&c, 20000);
    cr_assert(l >= 0);
    int f = (l + 1) % CL_NODES;
    struct itest_resp r;

    int code = cl_stop(&c, l, 30000);
    if (code != 0)
        itest_node_log_tail(&c.node[l], 30);
    cr_assert_eq(code, 0, "graceful stop exits 0, not %d", code);
    cr_assert(
        itest_node_log_contains(&c.node[l], "handing raft leadership over"));
    int64_t start = itest_now_ms();
    long st = configure(f, "after-term", 9, &r);
    int64_t took = itest_now_ms() - start;
    cr_assert_eq(st, 201,
                 "a configure right after the stop commits (%ld after %lld ms: "
                 "%s)",
                 st, (long long)took, r.body);
    itest_resp_free(&r);
    fprintf(stderr, "raft_cluster: configure after SIGTERM took %lld ms\n",
            (long long)took);
    cr_assert_lt(took, 5000);
}

Test(raft_cluster, declared_queues_come_back_after_every_node_restarts)
{
    struct itest_resp r;
    int l = cl_leader(&c, 20000);
    cr_assert(l >= 0);

    cr_assert_eq(configure(l, "keep-a", 11, &r), 201);
    itest_resp_free(&r);
    cr_assert_eq(configure((l + 1) % CL_NODES, "keep-b", 12, &r), 201);
    itest_resp_free(&r);
    cr_assert_eq(itest_push(&c.node[l], &r, "keep-a", "p", "[1,2,3]"), 201);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++)
        cr_assert_eq(cl_stop(&c, i, 30000), 0);
    for (int i = 0; i < CL_NODES; i++)
        cl_start(&c, i, NULL);
    for (int i = 0; i < CL_NODES; i++) {
        cr_assert(wait_declared(i, "keep-a", 11, 20000), "node %d", i);
        cr_assert(wait_declared(i, "keep-b", 12, 20000), "node %d", i);
        cr_assert_eq(itest_depth_pending(&c.node[i], "keep-a", NULL), 0,
                     "declared queues come back empty");
    }
}

Test(raft_cluster, a_node_behind_a_compacted_log_catches_up_by_snapshot)
{
    int l = cl_leader(&c, 20000);
    cr_assert(l >= 0);
    int lag = (l + 1) % CL_NODES, other = (l + 2) % CL_NODES;
    char name[32];

    cr_assert_eq(cl_stop(&c, lag, 30000), 0);
    /* Past the compaction threshold (1024 applied entries). */
    for (int k = 0; k < 1100; k++) {
        snprintf(name, sizeof(name), "q%d", k % 50);
        cr_assert(configure_until(k % 2 ? l : other, name, 1 + k, 20000) >= 0,
                  "configure %d", k);
    }
    cl_start(&c, lag, NULL);
    for (int k = 1050; k < 1100; k++) {
        snprintf(name, sizeof(name), "q%d", k % 50);
        cr_assert(wait_declared(lag, name, 1 + k, 30000),
                  "restarted node has %s", name);
    }
}

Test(raft_cluster, the_cluster_port_refuses_a_request_without_the_secret)
{
    struct itest_node port = c.node[0];
    struct itest_resp r;

    snprintf(port.base, sizeof(port.base), "http://%s:%d", c.addr[0],
             c.cport[0]);
    cr_assert_eq(itest_req(&port, "POST", "/cluster/v1/configure",
                           "{\"queue\":\"sneaky\"}", &r),
                 401);
    cr_assert_str_eq(itest_jstr(r.json, "code"), "unauthorized");
    itest_resp_free(&r);
    cr_assert_eq(declared_length(0, "sneaky"), -1, "nothing was declared");
}
