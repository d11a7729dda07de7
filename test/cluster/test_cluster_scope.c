/*
 * test_cluster_scope.c - depth and the queue listing with scope=cluster on
 * three real nodes (127.0.0.1-3): the sum of every live node's share,
 * merged by partition, group or queue, naming the nodes in the sum and
 * those that did not answer.
 *
 * The owner of each (queue, partition) holds it (SPEC §5): a push through
 * any node lands there.  So a queue is spread over the nodes by its
 * partitions (p0..p11: with three nodes each owns some; cl_owner() says
 * which), and each node's share is its scope=node depth.  member_ttl_ms is
 * long here: a node whose workers are stopped stays a live member for the
 * whole test.  Every test first waits until each node sees the other two
 * live (their masters have heard each other, client addresses included).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

static struct cl c;

CL_SUITE(cluster_scope, &c, "member_ttl_ms=60000", CL_SUITE_STARTED,
         .timeout = 120);

/* push - n messages to queue/partition on node i. */
static void
push(int i, const char *queue, const char *partition, int n)
{
    struct itest_resp r;
    char msgs[512] = "";

    for (int k = 0; k < n; k++)
        strcat(msgs, k ? ",{\"payload\":1}" : "{\"payload\":1}");
    long st = itest_post(&c.node[i], &r, "/api/v1/ephemeral/push",
                         "{\"queue\":\"%s\",\"partition\":\"%s\","
                         "\"messages\":[%s]}",
                         queue, partition, msgs);
    cr_assert_eq(st, 201, "push on node %d: %ld %s", i, st, r.body);
    itest_resp_free(&r);
}

/* cluster_depth - GET depth?scope=cluster[&group=] of queue on node i,
 * retried (up to 20 s) until it is a 200 with every node's share in it
 * and none missing; the last answer. */
static long
cluster_depth(int i, const char *queue, const char *query, struct itest_resp *r)
{
    int64_t deadline = itest_now_ms() + 20000;
    long st;

    for (;;) {
        st = itest_get(&c.node[i], r,
                       "/api/v1/ephemeral/queues/%s/depth?scope=cluster%s",
                       queue, query);
        if ((st == 200 && itest_jlen(r->json, "nodes") == CL_NODES &&
             itest_jlen(r->json, "missing") == 0) ||
            itest_now_ms() > deadline)
            return st;
        itest_resp_free(r);
        itest_sleep_ms(100);
    }
}

/* partition_field - field of the entry of partition p in r's list. */
static int64_t
partition_field(struct itest_resp *r, const char *p, const char *field)
{
    struct json_object *parts = itest_jget(r->json, "partitions");

    for (int k = 0; parts && k < (int)json_object_array_length(parts); k++) {
        struct json_object *e = json_object_array_get_idx(parts, k);
        if (strcmp(itest_jstr(e, "partition"), p) == 0)
            return itest_jint(e, field);
    }
    return INT64_MIN;
}

/* listed - r's array at key holds the string id. */
static int
listed(struct itest_resp *r, const char *key, const char *id)
{
    struct json_object *l = itest_jget(r->json, key);

    for (int k = 0; l && k < (int)json_object_array_length(l); k++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(l, k)),
                   id) == 0)
            return 1;
    return 0;
}

#define NPARTS 12

/* node_pending - "pending" of queue's scope=node depth on node i; 0 when
 * the node holds none of it (404). */
static int64_t
node_pending(int i, const char *queue)
{
    struct itest_resp r;
    long st = itest_get(&c.node[i], &r,
                        "/api/v1/ephemeral/queues/%s/depth?scope=node", queue);
    int64_t p = st == 404 ? 0 : itest_jint(r.json, "pending");

    cr_assert(st == 200 || st == 404, "depth on node %d: %ld %s", i, st,
              r.body);
    itest_resp_free(&r);
    return p;
}

/* spread - push k + 1 messages to partition pk of queue for k < NPARTS,
 * through the nodes in turn; each node's expected share into share[]
 * (the partitions it owns), and the total returned.  Asserts that every
 * node owns some of them. */
static int
spread(const char *queue, int share[CL_NODES])
{
    int total = 0;

    for (int i = 0; i < CL_NODES; i++)
        share[i] = 0;
    for (int k = 0; k < NPARTS; k++) {
        char p[16];
        snprintf(p, sizeof(p), "p%d", k);
        push(k % CL_NODES, queue, p, k + 1);
        share[cl_owner(queue, p, CL_ALL)] += k + 1;
        total += k + 1;
    }
    for (int i = 0; i < CL_NODES; i++)
        cr_assert_gt(share[i], 0, "node %d owns no partition of %s", i, queue);
    return total;
}

Test(cluster_scope, sums_every_live_node_merging_partitions)
{
    struct itest_resp r;
    int share[CL_NODES], total, sum = 0;

    cl_wait_view(&c, CL_ALL);
    total = spread("cd-sum", share);

    /* scope=node answers each node's own share: what it owns. */
    for (int i = 0; i < CL_NODES; i++) {
        cr_expect_eq(node_pending(i, "cd-sum"), share[i], "node %d", i);
        sum += (int)node_pending(i, "cd-sum");
    }
    cr_expect_eq(sum, total);
    cr_assert_eq(
        itest_get(&c.node[2], &r, "/api/v1/ephemeral/queues/cd-sum/depth"),
        200);
    /* with peers, the default is the cluster's sum */
    cr_expect_eq(itest_jint(r.json, "pending"), total, "%s", r.body);
    cr_expect_eq(itest_jlen(r.json, "nodes"), CL_NODES, "%s", r.body);
    itest_resp_free(&r);

    cr_assert_eq(cluster_depth(2, "cd-sum", "", &r), 200, "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "scope"), "cluster");
    cr_expect_str_eq(itest_jstr(r.json, "node"), "n2");
    cr_expect_eq(itest_jint(r.json, "pending"), total, "%s", r.body);
    cr_expect_eq(itest_jint(r.json, "partitionsPending"), NPARTS, "%s", r.body);
    cr_expect_eq(itest_jlen(r.json, "partitions"), NPARTS, "%s", r.body);
    for (int k = 0; k < NPARTS; k++) {
        char p[16];
        snprintf(p, sizeof(p), "p%d", k);
        cr_expect_eq(partition_field(&r, p, "pending"), k + 1, "%s: %s", p,
                     r.body);
    }
    cr_expect_eq(itest_jlen(r.json, "nodes"), 3, "%s", r.body);
    cr_expect_eq(itest_jlen(r.json, "missing"), 0, "%s", r.body);
    itest_resp_free(&r);
}

Test(cluster_scope, a_group_is_summed_and_a_node_without_the_queue_counts)
{
    struct itest_resp r;

    cl_wait_view(&c, CL_ALL);
    push(0, "cd-group", "Default", 4);
    push(1, "cd-group", "Default", 2);
    /* group g takes one message on node 0 (leased: no longer pending). */
    cr_assert_eq(itest_get(&c.node[0], &r,
                           "/api/v1/ephemeral/pop?queue=cd-group&group=g"),
                 200);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    itest_resp_free(&r);

    /* Node 2 holds nothing of cd-group: it is in "nodes", not "missing". */
    cr_assert_eq(cluster_depth(2, "cd-group", "&group=g", &r), 200, "%s",
                 r.body);
    cr_expect_str_eq(itest_jstr(r.json, "group"), "g", "%s", r.body);
    cr_expect_eq(itest_jint(r.json, "pending"), 5, "%s", r.body);
    cr_expect_eq(partition_field(&r, "Default", "leased"), 1, "%s", r.body);
    cr_expect(listed(&r, "nodes", "n2"), "%s", r.body);
    itest_resp_free(&r);
}

Test(cluster_scope, names_that_need_encoding_reach_the_peers_intact)
{
    struct itest_resp r;

    cl_wait_view(&c, CL_ALL);
    /* "." and ".." are names too: libcurl must not squash them. */
    push(0, "..", "a/b c", 2);
    push(1, "..", "a/b c", 1);
    push(1, "in box/7+x", "p", 3);
    cr_assert_eq(cluster_depth(2, "%2E%2E", "&group=g%201", &r), 200, "%s",
                 r.body);
    cr_expect_str_eq(itest_jstr(r.json, "queue"), "..", "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "group"), "g 1", "%s", r.body);
    cr_expect_eq(partition_field(&r, "a/b c", "pending"), 3, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(cluster_depth(0, "in%20box%2F7%2Bx", "", &r), 200, "%s",
                 r.body);
    cr_expect_eq(itest_jint(r.json, "pending"), 3, "%s", r.body);
    itest_resp_free(&r);
}

Test(cluster_scope, a_delayed_message_shows_as_delayed_in_the_sum)
{
    struct itest_resp r;
    int owner, other;

    cl_wait_view(&c, CL_ALL);
    owner = cl_owner("cd-dly", "P", CL_ALL);
    other = (owner + 1) % CL_NODES;
    /* pushed through a node that does not own P: forwarded to the owner */
    long st = itest_post(&c.node[other], &r, "/api/v1/ephemeral/push",
                         "{\"queue\":\"cd-dly\",\"partition\":\"P\","
                         "\"messages\":[{\"payload\":1,\"delayMs\":60000}]}");
    cr_assert_eq(st, 201, "%ld %s", st, r.body);
    itest_resp_free(&r);

    /* SPEC §13: until it is due it counts, and depth shows it as delayed;
     * §5: the default scope is the cluster's */
    cr_assert_eq(
        itest_get(&c.node[other], &r, "/api/v1/ephemeral/queues/cd-dly/depth"),
        200, "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "scope"), "cluster", "%s", r.body);
    cr_expect_eq(itest_jint(r.json, "pending"), 0, "%s", r.body);
    cr_expect_eq(itest_jint(r.json, "delayed"), 1, "%s", r.body);
    cr_expect_eq(partition_field(&r, "P", "delayed"), 1, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_get(&c.node[owner], &r,
                           "/api/v1/ephemeral/queues/cd-dly/depth?scope=node"),
                 200, "%s", r.body);
    cr_expect_eq(itest_jint(r.json, "delayed"), 1, "%s", r.body);
    cr_expect_eq(partition_field(&r, "P", "delayed"), 1, "%s", r.body);
    itest_resp_free(&r);
}

Test(cluster_scope, a_queue_no_node_holds_is_404)
{
    struct itest_resp r;

    cl_wait_view(&c, CL_ALL);
    cr_assert_eq(itest_get(&c.node[1], &r,
                           "/api/v1/ephemeral/queues/cd-nowhere/depth"
                           "?scope=cluster"),
                 404, "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "code"), "ephemeral_queue_not_found");
    cr_expect(strstr(itest_jstr(r.json, "error"), "any node") != NULL, "%s",
              r.body);
    itest_resp_free(&r);
}

Test(cluster_scope, a_live_node_that_does_not_answer_is_named_missing)
{
    struct itest_resp r;
    pid_t w[ITEST_NODE_MAX_WORKERS];
    int nw, share[CL_NODES], total;

    cl_wait_view(&c, CL_ALL);
    total = spread("cd-missing", share);
    cr_assert_eq(cluster_depth(0, "cd-missing", "", &r), 200);
    cr_assert_eq(itest_jint(r.json, "pending"), total, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(node_pending(1, "cd-missing"), share[1]);

    /* Node 1's workers stop answering; its master still heartbeats. */
    nw = itest_node_workers(&c.node[1], w, ITEST_NODE_MAX_WORKERS);
    cr_assert_gt(nw, 0);
    for (int k = 0; k < nw; k++)
        kill(w[k], SIGSTOP);
    long st = itest_get(&c.node[0], &r,
                        "/api/v1/ephemeral/queues/cd-missing/depth"
                        "?scope=cluster");
    for (int k = 0; k < nw; k++)
        kill(w[k], SIGCONT);
    cr_assert_eq(st, 200, "%s", r.body);
    cr_expect_eq(itest_jint(r.json, "pending"), total - share[1], "%s", r.body);
    cr_expect(listed(&r, "missing", "n1"), "%s", r.body);
    cr_expect(listed(&r, "nodes", "n0"), "%s", r.body);
    cr_expect(listed(&r, "nodes", "n2"), "%s", r.body);
    cr_expect(!listed(&r, "nodes", "n1"), "%s", r.body);
    itest_resp_free(&r);
}

/* A member whose advertised address leads to another node (here node 2
 * advertising node 0's client port) is never counted as that node's share:
 * node 0 does not call its own address, node 1 sees node 0 answer.  What
 * node 2 owns cannot be reached: those pushes fail (node 0 will not call
 * itself; node 1's forward reaches node 0, which does not own them). */
Test(cluster_scope, an_address_that_leads_elsewhere_is_missing_not_counted)
{
    struct itest_resp r;
    char opt[64], p[16];
    int accepted = 0, first = -1, k;

    cl_kill(&c, 2);
    snprintf(opt, sizeof(opt), "member_ttl_ms=60000 advertise=127.0.0.1:%d",
             c.node[0].port);
    cl_start(&c, 2, opt);
    cl_wait_view(&c, CL_ALL);

    /* One partition node 0 owns, so that the queue exists... */
    for (k = 0; k < NPARTS && first < 0; k++) {
        snprintf(p, sizeof(p), "p%d", k);
        if (cl_owner("cd-alias", p, CL_ALL) == 0)
            first = k;
    }
    cr_assert_geq(first, 0, "node 0 owns no partition of cd-alias");
    snprintf(p, sizeof(p), "p%d", first);
    push(0, "cd-alias", p, 1);
    accepted = 1;
    /* ...then until nodes 0 and 1 have heard node 2's new address. */
    for (int i = 0; i < 2; i++) {
        int64_t deadline = itest_now_ms() + 20000;
        do {
            cr_assert_eq(itest_get(&c.node[i], &r,
                                   "/api/v1/ephemeral/queues/cd-alias/depth"
                                   "?scope=cluster"),
                         200, "%s", r.body);
            int seen = listed(&r, "missing", "n2");
            itest_resp_free(&r);
            if (seen)
                break;
            cr_assert_lt(itest_now_ms(), deadline,
                         "node %d never finds n2 missing", i);
            itest_sleep_ms(100);
        } while (1);
    }

    int owned2 = 0;
    for (k = 0; k < NPARTS; k++) {
        snprintf(p, sizeof(p), "p%d", k);
        int o = cl_owner("cd-alias", p, CL_ALL);
        for (int i = 0; i < 2; i++) {
            long st = itest_push(&c.node[i], &r, "cd-alias", p, "[1]");
            if (o == 2) {
                cr_expect_eq(st, 503, "%s through node %d: %s", p, i, r.body);
            } else {
                cr_expect_eq(st, 201, "%s through node %d: %s", p, i, r.body);
            }
            accepted += st == 201;
            itest_resp_free(&r);
        }
        owned2 += o == 2;
    }
    cr_assert_gt(owned2, 0, "node 2 owns no partition of cd-alias");

    for (int i = 0; i < 2; i++) {
        cr_assert_eq(itest_get(&c.node[i], &r,
                               "/api/v1/ephemeral/queues/cd-alias/depth"
                               "?scope=cluster"),
                     200, "%s", r.body);
        cr_expect(listed(&r, "missing", "n2"), "node %d: %s", i, r.body);
        cr_expect(!listed(&r, "nodes", "n2"), "node %d: %s", i, r.body);
        cr_expect_eq(itest_jint(r.json, "pending"), accepted, "node %d: %s", i,
                     r.body);
        itest_resp_free(&r);
    }
    cr_expect_eq(node_pending(0, "cd-alias") + node_pending(1, "cd-alias"),
                 accepted);
}

/* queue_at - the listing's entry k, its field (a number). */
static int64_t
queue_at(struct itest_resp *r, int k, const char *field)
{
    char path[64];

    snprintf(path, sizeof(path), "queues.%d.%s", k, field);
    return itest_jint(r->json, path);
}

static const char *
queue_name(struct itest_resp *r, int k)
{
    char path[64];

    snprintf(path, sizeof(path), "queues.%d.queue", k);
    return itest_jstr(r->json, path);
}

Test(cluster_scope, the_listing_sums_every_node_by_queue)
{
    struct itest_resp r;
    int64_t deadline;

    cl_wait_view(&c, CL_ALL);
    push(0, "cl-a", "p1", 2);
    push(1, "cl-a", "p2", 3);
    push(2, "cl-b", "Default", 1);
    /* a configure may time out while raft is slow (503): clients retry */
    deadline = itest_now_ms() + 30000;
    for (;;) {
        long st = itest_post(&c.node[0], &r, "/api/v1/ephemeral/configure",
                             "{\"queue\":\"cl-d\",\"options\":"
                             "{\"maxLength\":7}}");
        if (st != 503 || itest_now_ms() > deadline) {
            cr_assert_eq(st, 201, "%s", r.body);
            break;
        }
        itest_resp_free(&r);
        itest_sleep_ms(200);
    }
    itest_resp_free(&r);

    deadline = itest_now_ms() + 20000;
    for (;;) { /* until every node's listing is in and cl-d applied */
        cr_assert_eq(itest_get(&c.node[1], &r,
                               "/api/v1/ephemeral/queues?scope=cluster&"
                               "prefix=cl-"),
                     200, "%s", r.body);
        if ((itest_jlen(r.json, "nodes") == CL_NODES &&
             itest_jint(r.json, "count") == 3) ||
            itest_now_ms() > deadline)
            break;
        itest_resp_free(&r);
        itest_sleep_ms(100);
    }
    cr_expect_str_eq(itest_jstr(r.json, "scope"), "cluster", "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "count"), 3, "%s", r.body);
    cr_expect_str_eq(queue_name(&r, 0), "cl-a");
    cr_expect_eq(queue_at(&r, 0, "depth"), 5, "%s", r.body);
    cr_expect_eq(queue_at(&r, 0, "partitions"), 2, "%s", r.body);
    cr_expect_str_eq(queue_name(&r, 1), "cl-b");
    cr_expect_eq(queue_at(&r, 1, "depth"), 1, "%s", r.body);
    cr_expect_str_eq(queue_name(&r, 2), "cl-d");
    cr_expect_str_eq(itest_jstr(r.json, "queues.2.tier"), "declared");
    cr_expect_eq(queue_at(&r, 2, "options.maxLength"), 7, "%s", r.body);
    cr_expect_eq(itest_jlen(r.json, "missing"), 0, "%s", r.body);
    itest_resp_free(&r);

    /* limit cuts the merged list, not each node's sums. */
    deadline = itest_now_ms() + 20000;
    for (;;) { /* a peer slower than the gather's 2 s is missing: retry */
        cr_assert_eq(itest_get(&c.node[2], &r,
                               "/api/v1/ephemeral/queues?scope=cluster&"
                               "prefix=cl-&limit=1"),
                     200, "%s", r.body);
        if ((itest_jlen(r.json, "nodes") == CL_NODES &&
             itest_jlen(r.json, "missing") == 0) ||
            itest_now_ms() > deadline)
            break;
        itest_resp_free(&r);
        itest_sleep_ms(100);
    }
    cr_expect_eq(itest_jint(r.json, "count"), 1, "%s", r.body);
    cr_expect_str_eq(queue_name(&r, 0), "cl-a");
    cr_expect_eq(queue_at(&r, 0, "depth"), 5, "%s", r.body);
    itest_resp_free(&r);

    /* a larger page is cut to 1000 (and would say where to go on) */
    cr_assert_eq(itest_get(&c.node[2], &r,
                           "/api/v1/ephemeral/queues?scope=cluster&limit=1001"
                           "&prefix=cl-"),
                 200, "%s", r.body);
    cr_expect_eq(itest_jint(r.json, "count"), 3, "%s", r.body);
    cr_expect_eq(itest_jbool(r.json, "truncated"), 0, "%s", r.body);
    itest_resp_free(&r);

    cr_assert_eq(
        itest_get(&c.node[2], &r, "/api/v1/ephemeral/queues?scope=everywhere"),
        400, "%s", r.body);
    cr_expect(strstr(itest_jstr(r.json, "error"), "scope") != NULL);
    itest_resp_free(&r);
}
