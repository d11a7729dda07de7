/*
 * test_cluster_dead_letter.c - dead letters across three real nodes (SPEC
 * §13): messages failed at the retry limit through a node that owns none
 * of their partitions land in the dead-letter queue with their origin ids;
 * a SIGTERM of a node holding dead letters hands them over with nothing
 * lost (by id); redrive through a node that holds none of them brings each
 * back to its partition, through its owner, and a consumer completes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

#define NPARTS   10
#define PER_PART 2
#define TOTAL    (NPARTS * PER_PART)
#define WAIT_MS  30000
#define STOP_MS  60000
#define NODE_OPT "lease_s=300"

static struct cl c;

CL_SUITE(cluster_dead_letter, &c, NODE_OPT, CL_SUITE_STARTED, .timeout = 300);

/* Collect: ids and payload numbers seen, by number. */
struct seen {
    char id[TOTAL][160];
    int got[TOTAL];
    int n;
};

Test(cluster_dead_letter, sigterm_loses_none_and_redrive_through_any_node)
{
    struct itest_resp r;
    char ids[TOTAL][160], body[512];
    int holder[CL_NODES] = {0}, x = 0, via;
    struct seen dl = {0}, back = {0};
    int64_t deadline;

    cl_wait_view(&c, CL_ALL);
    snprintf(body, sizeof(body),
             "{\"queue\":\"jobs\",\"options\":{\"retryLimit\":1,"
             "\"deadLetter\":\"jobs.dead\"}}");
    cr_assert_eq(cl_call(&c, 0, "POST", "/api/v1/ephemeral/configure", body,
                         WAIT_MS, 100, &r),
                 201, "%s", r.body);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++) {
        deadline = itest_now_ms() + WAIT_MS;
        for (;;) {
            struct json_object *e = itest_listing_find(&c.node[i], "jobs");
            const char *d = e ? itest_jstr(e, "options.deadLetter") : NULL;
            int ok = d != NULL && strcmp(d, "jobs.dead") == 0;
            json_object_put(e);
            if (ok)
                break;
            cr_assert_lt(itest_now_ms(), deadline, "node %d", i);
            itest_sleep_ms(100);
        }
    }

    /* Push and fail each message through the node after its partition's
     * owner: pushes, pops and acks all go one hop. */
    for (int k = 0; k < NPARTS; k++) {
        char part[16], q[128];
        snprintf(part, sizeof(part), "p%02d", k);
        int o = cl_owner("jobs", part, CL_ALL);
        via = (o + 1) % CL_NODES;
        holder[o] += PER_PART;
        for (int j = 0; j < PER_PART; j++) {
            char payload[64];
            snprintf(payload, sizeof(payload), "[{\"n\":%d}]",
                     k * PER_PART + j);
            cr_assert_eq(itest_push(&c.node[via], &r, "jobs", part, payload),
                         201, "%s", r.body);
            snprintf(ids[k * PER_PART + j], sizeof(ids[0]), "%s",
                     itest_jstr(r.json, "ids.0"));
            itest_resp_free(&r);
        }
        snprintf(q, sizeof(q),
                 "/api/v1/ephemeral/pop?queue=jobs&partition=%s&group=g&"
                 "batch=%d",
                 part, PER_PART);
        cr_assert_eq(itest_get(&c.node[via], &r, "%s", q), 200);
        cr_assert_eq(itest_jlen(r.json, "messages"), PER_PART, "%s", r.body);
        for (int j = 0; j < PER_PART; j++) {
            struct itest_resp k2;
            char path[32];
            snprintf(path, sizeof(path), "messages.%d.id", j);
            snprintf(body, sizeof(body),
                     "{\"queue\":\"jobs\",\"group\":\"g\",\"acks\":[{\"id\":"
                     "\"%s\",\"status\":\"failed\"}]}",
                     itest_jstr(r.json, path));
            cr_assert_eq(itest_req(&c.node[via], "POST",
                                   "/api/v1/ephemeral/ack", body, &k2),
                         200);
            cr_assert_str_eq(itest_jstr(k2.json, "results.0.outcome"), "acked",
                             "%s", k2.body);
            itest_resp_free(&k2);
        }
        itest_resp_free(&r);
    }
    /* Every dead letter sits where its message was dropped (depth may
     * answer 503 while a view settles: asked again). */
    for (int i = 0; i < CL_NODES; i++) {
        int64_t d;
        deadline = itest_now_ms() + WAIT_MS;
        /* none held there: no such queue there (404, -1) */
        while ((d = itest_depth_pending(&c.node[i], "jobs.dead", NULL)) !=
                   holder[i] &&
               !(d < 0 && holder[i] == 0)) {
            cr_assert_lt(itest_now_ms(), deadline, "node %d: %lld, not %d", i,
                         (long long)d, holder[i]);
            itest_sleep_ms(50);
        }
        if (holder[i] > holder[x])
            x = i;
    }

    /* SIGTERM the node holding the most: its dead letters move on. */
    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    cl_wait_view(&c, CL_ALL & ~(1u << x));
    via = (x + 1) % CL_NODES;

    /* Read them all through one node with a group of its own (the
     * dead-letter queue is a queue): every origin id once.  Leased, not
     * completed: a message every group the queue knows completed is
     * freed, and redrive reads in queue mode, a group not known yet. */
    deadline = itest_now_ms() + WAIT_MS;
    while (dl.n < TOTAL) {
        cr_assert_lt(itest_now_ms(), deadline, "%d of %d dead letters", dl.n,
                     TOTAL);
        cr_assert_eq(itest_get(&c.node[via], &r,
                               "/api/v1/ephemeral/pop?queue=jobs.dead&"
                               "group=audit&batch=100"),
                     200);
        for (int i = 0; i < itest_jlen(r.json, "messages"); i++) {
            char path[64];
            snprintf(path, sizeof(path), "messages.%d.payload.payload.n", i);
            int n = (int)itest_jint(r.json, path);
            cr_assert(n >= 0 && n < TOTAL && !dl.got[n], "%s", r.body);
            dl.got[n] = 1;
            snprintf(path, sizeof(path), "messages.%d.payload.id", i);
            cr_assert_str_eq(itest_jstr(r.json, path), ids[n], "%s", r.body);
            snprintf(path, sizeof(path), "messages.%d.payload.reason", i);
            cr_assert_str_eq(itest_jstr(r.json, path), "retry_limit");
            dl.n++;
        }
        itest_resp_free(&r);
        if (dl.n < TOTAL)
            itest_sleep_ms(50);
    }

    /* Redrive through each live node in turn, at most 7 a call: the
     * calls' sum is every one, and none comes twice. */
    int redriven = 0;
    deadline = itest_now_ms() + WAIT_MS;
    for (int i = 0; redriven < TOTAL; i++) {
        int n = (x + 1 + i % 2) % CL_NODES; /* the two live nodes */
        cr_assert_lt(itest_now_ms(), deadline, "%d redriven", redriven);
        cr_assert_eq(cl_call(&c, n, "POST", "/api/v1/ephemeral/redrive",
                             "{\"queue\":\"jobs.dead\",\"max\":7}", WAIT_MS,
                             100, &r),
                     200, "%s", r.body);
        int64_t got = itest_jint(r.json, "redriven");
        cr_assert(got >= 0 && got <= 7, "%s", r.body);
        redriven += (int)got;
        itest_resp_free(&r);
    }
    cr_assert_eq(redriven, TOTAL);
    cr_assert_eq(cl_call(&c, via, "POST", "/api/v1/ephemeral/redrive",
                         "{\"queue\":\"jobs.dead\"}", WAIT_MS, 100, &r),
                 200);
    cr_assert_eq(itest_jint(r.json, "redriven"), 0, "%s", r.body);
    itest_resp_free(&r);

    /* Back on their partitions: a consumer completes each once. */
    deadline = itest_now_ms() + WAIT_MS;
    while (back.n < TOTAL) {
        cr_assert_lt(itest_now_ms(), deadline, "%d of %d back", back.n, TOTAL);
        cr_assert_eq(itest_get(&c.node[via], &r,
                               "/api/v1/ephemeral/pop?queue=jobs&group=g&"
                               "autoAck=true&batch=100"),
                     200);
        for (int i = 0; i < itest_jlen(r.json, "messages"); i++) {
            char path[64];
            snprintf(path, sizeof(path), "messages.%d.payload.n", i);
            int n = (int)itest_jint(r.json, path);
            cr_assert(n >= 0 && n < TOTAL && !back.got[n], "%s", r.body);
            back.got[n] = 1;
            snprintf(path, sizeof(path), "messages.%d.partition", i);
            char part[16];
            snprintf(part, sizeof(part), "p%02d", n / PER_PART);
            cr_assert_str_eq(itest_jstr(r.json, path), part, "%s", r.body);
            back.n++;
        }
        itest_resp_free(&r);
        if (back.n < TOTAL)
            itest_sleep_ms(50);
    }
}
