/*
 * test_cluster_reads.c - the cluster reads as one broker (SPEC §2, §5),
 * on three real nodes (127.0.0.1-3): depth and the listing through any node
 * give the whole cluster's figures by default, 404 means no node has the
 * queue, the listing pages, a pop with no partition reaches messages held
 * on other nodes (at once and as a parked long poll), an ack id that is not
 * a mayfly id is that entry's unknown, and configures of one queue racing
 * through every node are each answered once their own entry applied.
 *
 * Owners follow shm/owner.h (cl_owner): a push through any node lands on
 * the partition's owner, so a node "holds nothing" of a queue when none of
 * the queue's pushed partitions hash to it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

static struct cl c;

CL_SUITE(cluster_reads, &c, "member_ttl_ms=60000", CL_SUITE_VIEW,
         .timeout = 240);

#define DEPTH "/api/v1/ephemeral/queues/%s/depth"

/* pending_through - the default depth's pending of queue through node i,
 * retried (10 s) until it is a 200 whose shares came from every node. */
static int64_t
pending_through(int i, const char *queue)
{
    int64_t deadline = itest_now_ms() + 10000, p;
    struct itest_resp r;

    for (;;) {
        long st = itest_get(&c.node[i], &r, DEPTH, queue);
        p = st == 200 ? itest_jint(r.json, "pending") : -1;
        int whole = st == 200 && itest_jlen(r.json, "missing") == 0;
        itest_resp_free(&r);
        if (whole || itest_now_ms() > deadline)
            return p;
        itest_sleep_ms(100);
    }
}

/* part_of - the first partition "p<k>" of queue owned by node o. */
static void
part_of(const char *queue, int o, char *out, size_t len)
{
    cl_part_owned_by(queue, o, 64, out, len);
}

Test(cluster_reads, depth_and_listing_give_the_same_totals_through_every_node)
{
    struct itest_resp r;
    int total = 0;

    for (int k = 0; k < 9; k++) {
        char p[16];
        snprintf(p, sizeof(p), "p%d", k);
        char payloads[64] = "[";
        for (int m = 0; m <= k; m++)
            strcat(payloads, m ? ",1" : "1");
        strcat(payloads, "]");
        itest_push_ok(&c.node[k % CL_NODES], &r, "totals", p, payloads, k + 1);
        itest_resp_free(&r);
        total += k + 1;
    }
    for (int i = 0; i < CL_NODES; i++) {
        cr_expect_eq(pending_through(i, "totals"), total,
                     "depth through node %d", i);
        long st =
            itest_get(&c.node[i], &r, "/api/v1/ephemeral/queues?prefix=totals");
        cr_assert_eq(st, 200, "%s", r.body);
        cr_expect_eq(itest_jlen(r.json, "queues"), 1, "%s", r.body);
        cr_expect_eq(itest_jint(r.json, "queues.0.depth"), total,
                     "listing through node %d: %s", i, r.body);
        itest_resp_free(&r);
        /* scope=node keeps the node's own share */
        st = itest_get(&c.node[i], &r, DEPTH "?scope=node", "totals");
        cr_expect(st == 404 || itest_jint(r.json, "pending") < total,
                  "node %d's share: %s", i, r.body);
        itest_resp_free(&r);
    }
}

Test(cluster_reads, not_found_only_for_a_queue_that_no_node_has)
{
    struct itest_resp r;
    char p[16];

    part_of("held-once", 2, p, sizeof(p));
    itest_push_ok(&c.node[0], &r, "held-once", p, "[1]", 1);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++) {
        cr_expect_eq(pending_through(i, "held-once"), 1, "node %d", i);
        long st = itest_get(&c.node[i], &r, DEPTH, "held-nowhere");
        cr_expect_eq(st, 404, "node %d: %s", i, r.body);
        cr_expect_str_eq(itest_jstr(r.json, "code"),
                         "ephemeral_queue_not_found");
        itest_resp_free(&r);
    }
}

#define PAGED 2500

Test(cluster_reads, a_listing_read_page_by_page_gives_each_queue_once)
{
    struct itest_resp r;
    char *seen = calloc(PAGED, 1), after[64] = "", name[64];
    int pages = 0, total = 0;

    for (int k = 0; k < PAGED; k++) {
        snprintf(name, sizeof(name), "pg-%04d", k);
        itest_push_ok(&c.node[k % CL_NODES], &r, name, NULL, "[1]", 1);
        itest_resp_free(&r);
    }
    for (;;) {
        long st =
            itest_get(&c.node[1], &r,
                      "/api/v1/ephemeral/queues?prefix=pg-&limit=1000%s%s",
                      after[0] ? "&after=" : "", after);
        cr_assert_eq(st, 200, "%s", r.body);
        cr_assert_eq(itest_jlen(r.json, "missing"), 0, "%s", r.body);
        int n = itest_jlen(r.json, "queues");
        for (int k = 0; k < n; k++) {
            char path[32];
            snprintf(path, sizeof(path), "queues.%d.queue", k);
            int idx = atoi(itest_jstr(r.json, path) + 3);
            cr_assert(idx >= 0 && idx < PAGED && !seen[idx],
                      "queue %s listed twice", itest_jstr(r.json, path));
            seen[idx] = 1;
            total++;
            snprintf(path, sizeof(path), "queues.%d.depth", k);
            cr_expect_eq(itest_jint(r.json, path), 1);
        }
        pages++;
        int cut = itest_jbool(r.json, "truncated");
        if (cut == 1)
            snprintf(after, sizeof(after), "%s", itest_jstr(r.json, "next"));
        itest_resp_free(&r);
        if (cut != 1)
            break;
        cr_assert(pages < 10);
    }
    cr_expect_eq(total, PAGED);
    cr_expect_eq(pages, 3);
    free(seen);
}

/* A node that owns none of p1's and p2's partitions of queue: index. */
static int
bystander(const char *queue, const char *pa, const char *pb)
{
    for (int i = 0; i < CL_NODES; i++)
        if (cl_owner(queue, pa, CL_ALL) != i &&
            cl_owner(queue, pb, CL_ALL) != i)
            return i;
    return -1;
}

Test(cluster_reads, a_pop_with_no_partition_reaches_messages_on_other_nodes)
{
    struct itest_resp r;
    char pa[16], pb[16];

    part_of("anywhere", 0, pa, sizeof(pa));
    part_of("anywhere", 1, pb, sizeof(pb));
    int by = bystander("anywhere", pa, pb);
    cr_assert_eq(by, 2);
    itest_push_ok(&c.node[0], &r, "anywhere", pa, "[\"a\"]", 1);
    itest_resp_free(&r);
    itest_push_ok(&c.node[1], &r, "anywhere", pb, "[\"b\"]", 1);
    itest_resp_free(&r);
    int got = 0;
    for (int k = 0; k < 2; k++) {
        long st = itest_get(&c.node[by], &r,
                            "/api/v1/ephemeral/pop?queue=anywhere&group=g"
                            "&autoAck=true");
        cr_assert_eq(st, 200, "%s", r.body);
        cr_expect_eq(itest_jlen(r.json, "messages"), 1, "pop %d: %s", k,
                     r.body);
        got += itest_jlen(r.json, "messages") == 1;
        itest_resp_free(&r);
    }
    cr_expect_eq(got, 2);
    itest_get(&c.node[by], &r,
              "/api/v1/ephemeral/pop?queue=anywhere&group=g&autoAck=true");
    cr_expect_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
}

struct parked {
    int node;
    const char *query;
    struct itest_resp r;
    int64_t took_ms;
};

static void *
park_pop(void *arg)
{
    struct parked *p = arg;
    int64_t t0 = itest_now_ms();
    CURL *h = itest_handle(); /* its own: a thread's would outlive it */
    char path[256];

    snprintf(path, sizeof(path), "/api/v1/ephemeral/pop?%s", p->query);
    itest_req_on(h, &c.node[p->node], "GET", path, NULL, &p->r);
    p->took_ms = itest_now_ms() - t0;
    curl_easy_cleanup(h);
    return NULL;
}

/* waiting - the cluster's parked pops on queue, through node i. */
static int64_t
waiting(int i, const char *queue)
{
    struct itest_resp r;
    int64_t w = 0;

    if (itest_get(&c.node[i], &r, "/api/v1/ephemeral/queues?prefix=%s",
                  queue) == 200)
        w = itest_jint(r.json, "queues.0.waiting");
    itest_resp_free(&r);
    return w;
}

Test(cluster_reads, a_parked_pop_with_no_partition_wakes_for_a_push_anywhere)
{
    struct itest_resp r;
    char pa[16];

    part_of("parked-any", 1, pa, sizeof(pa));
    /* Node 0 holds nothing of the queue; the push lands on node 1. */
    struct parked p = {.node = 0,
                       .query = "queue=parked-any&group=g&wait=true"
                                "&timeout=20000"};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, park_pop, &p), 0);
    /* parked here and watched on both peers */
    int64_t deadline = itest_now_ms() + 10000;
    while (waiting(0, "parked-any") < 3 && itest_now_ms() < deadline)
        itest_sleep_ms(50);
    cr_assert_geq(waiting(0, "parked-any"), 3);
    itest_push_ok(&c.node[2], &r, "parked-any", pa, "[\"x\"]", 1);
    itest_resp_free(&r);
    pthread_join(t, NULL);
    cr_assert_eq(p.r.status, 200, "%s", p.r.body);
    cr_expect_eq(itest_jlen(p.r.json, "messages"), 1, "%s", p.r.body);
    cr_expect_str_eq(itest_jstr(p.r.json, "messages.0.payload"), "x");
    cr_expect_lt(p.took_ms, 15000, "answered by the push, not the timeout");
    itest_resp_free(&p.r);
    /* the message was taken once: the queue has none left for g */
    itest_get(&c.node[1], &r, "/api/v1/ephemeral/pop?queue=parked-any&group=g");
    cr_expect_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
}

/* Queen's own client, through a node that does not own the queue. */
Test(cluster_reads,
     queen_client_depth_buffered_push_and_pop_through_a_non_owner)
{
    struct itest_resp r;
    int owner = cl_owner("queen-q", "Default", CL_ALL), other = (owner + 1) % 3;
    char pb[16];

    /* a buffered push (no partition) lands on Default's owner */
    itest_push_ok(&c.node[other], &r, "queen-q", NULL, "[1,2,3]", 3);
    itest_resp_free(&r);
    cr_expect_eq(pending_through(other, "queen-q"), 3);
    /* a pop with no partition through a node holding another partition */
    part_of("queen-q", other, pb, sizeof(pb));
    itest_push_ok(&c.node[other], &r, "queen-q", pb, "[9]", 1);
    itest_resp_free(&r);
    itest_get(&c.node[other], &r,
              "/api/v1/ephemeral/pop?queue=queen-q&partition=%s&autoAck=true",
              pb);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    itest_resp_free(&r);
    long st = itest_get(&c.node[other], &r,
                        "/api/v1/ephemeral/pop?queue=queen-q&batch=10");
    cr_assert_eq(st, 200, "%s", r.body);
    cr_expect_eq(itest_jlen(r.json, "messages"), 3, "%s", r.body);
    /* an ack with an id that is not mayfly's: that entry unknown, the rest
     * applied */
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"queue\":\"queen-q\",\"acks\":[\"%s\",\"not-an-id\","
             "{\"id\":\"e:zz:Default:1\"},\"%s\"]}",
             itest_jstr(r.json, "messages.0.id"),
             itest_jstr(r.json, "messages.1.id"));
    itest_resp_free(&r);
    st = itest_req(&c.node[owner], "POST", "/api/v1/ephemeral/ack", body, &r);
    cr_assert_eq(st, 200, "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked");
    cr_expect_str_eq(itest_jstr(r.json, "results.1.outcome"), "unknown");
    cr_expect_str_eq(itest_jstr(r.json, "results.1.id"), "not-an-id");
    cr_expect_str_eq(itest_jstr(r.json, "results.2.outcome"), "unknown");
    cr_expect_str_eq(itest_jstr(r.json, "results.3.outcome"), "acked");
    itest_resp_free(&r);
}

Test(cluster_reads, queen_client_listing_says_when_it_is_cut)
{
    struct itest_resp r;
    const char *names[] = {"cut-a", "cut-b", "cut-c"};

    for (int k = 0; k < 3; k++) {
        itest_push_ok(&c.node[k], &r, names[k], NULL, "[1]", 1);
        itest_resp_free(&r);
    }
    for (int i = 0; i < CL_NODES; i++) {
        itest_get(&c.node[i], &r,
                  "/api/v1/ephemeral/queues?prefix=cut-&limit=2");
        cr_expect_eq(itest_jint(r.json, "count"), 2, "%s", r.body);
        cr_expect_eq(itest_jbool(r.json, "truncated"), 1, "%s", r.body);
        cr_expect_str_eq(itest_jstr(r.json, "next"), "cut-b");
        itest_resp_free(&r);
        itest_get(&c.node[i], &r,
                  "/api/v1/ephemeral/queues?prefix=cut-&limit=2&after=cut-b");
        cr_expect_eq(itest_jint(r.json, "count"), 1, "%s", r.body);
        cr_expect_str_eq(itest_jstr(r.json, "queues.0.queue"), "cut-c");
        cr_expect_eq(itest_jbool(r.json, "truncated"), 0, "%s", r.body);
        itest_resp_free(&r);
    }
}

struct conf {
    int node, length;
    long status;
    int64_t took_ms;
    char body[512];
};

static void *
configure(void *arg)
{
    struct conf *k = arg;
    struct itest_resp r;
    int64_t t0 = itest_now_ms();
    CURL *h = itest_handle(); /* its own: a thread's would outlive it */
    char body[128];

    snprintf(body, sizeof(body),
             "{\"queue\":\"raced\",\"options\":{\"maxLength\":%d}}", k->length);
    k->status = itest_req_on(h, &c.node[k->node], "POST",
                             "/api/v1/ephemeral/configure", body, &r);
    k->took_ms = itest_now_ms() - t0;
    curl_easy_cleanup(h);
    snprintf(k->body, sizeof(k->body), "%s", r.body);
    itest_resp_free(&r);
    return NULL;
}

/* node_length - maxLength node i declares for raced (its own listing). */
static int64_t
node_length(int i)
{
    struct itest_resp r;
    int64_t v = -1;

    if (itest_get(&c.node[i], &r,
                  "/api/v1/ephemeral/queues?prefix=raced&scope=node") == 200)
        v = itest_jint(r.json, "queues.0.options.maxLength");
    itest_resp_free(&r);
    return v;
}

Test(cluster_reads, configures_racing_through_every_node_are_each_answered)
{
    for (int round = 0; round < 20; round++) {
        struct conf k[CL_NODES];
        pthread_t t[CL_NODES];

        for (int i = 0; i < CL_NODES; i++) {
            k[i] = (struct conf){.node = i, .length = 100 + round * 3 + i};
            cr_assert_eq(pthread_create(&t[i], NULL, configure, &k[i]), 0);
        }
        for (int i = 0; i < CL_NODES; i++)
            pthread_join(t[i], NULL);
        for (int i = 0; i < CL_NODES; i++) {
            cr_assert_eq(k[i].status, 201, "round %d node %d: %s", round, i,
                         k[i].body);
            cr_expect_lt(k[i].took_ms, 4000, "round %d node %d: %lld ms", round,
                         i, (long long)k[i].took_ms);
        }
        /* every node ends with the same options, one of those sent */
        int64_t deadline = itest_now_ms() + 5000, v0;
        while ((v0 = node_length(0)) != node_length(1) ||
               v0 != node_length(2)) {
            cr_assert_lt(itest_now_ms(), deadline, "round %d: nodes differ",
                         round);
            itest_sleep_ms(50);
        }
        cr_expect(v0 >= 100 + round * 3 && v0 < 100 + round * 3 + CL_NODES,
                  "round %d: %lld", round, (long long)v0);
    }
}
