/*
 * test_cluster_extras.c - SPEC §13 across three real nodes: a key pushed
 * through two different nodes is stored once (the window lives with the
 * partition, at its owner); a SIGTERM of the owner hands over its delayed
 * messages, its delayed retries and its dedupe window: after the move the
 * delayed ones come once, when due, and a key it saw is not stored again;
 * the window goes too when every message was consumed.
 * Times are CLOCK_MONOTONIC lower bounds; every wait polls a condition.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

#define WAIT_MS 30000
#define STOP_MS 60000
#define PUSH    "/api/v1/ephemeral/push"

static struct cl c;

CL_SUITE(cluster_extras, &c, "lease_s=300", CL_SUITE_STARTED, .timeout = 300);

/* declare - queue with options through node 0, then until every node
 * lists its dedupeSeconds as dd. */
static void
declare(const char *queue, const char *options, int dd)
{
    struct itest_resp r;
    char body[256];
    int64_t deadline = itest_now_ms() + WAIT_MS;

    snprintf(body, sizeof(body), "{\"queue\":\"%s\",\"options\":{%s}}", queue,
             options);
    cr_assert_eq(cl_call(&c, 0, "POST", "/api/v1/ephemeral/configure", body,
                         WAIT_MS, 100, &r),
                 201, "%s", r.body);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++)
        while (itest_listing_int(&c.node[i], queue, "options.dedupeSeconds",
                                 -1) != dd) {
            cr_assert_lt(itest_now_ms(), deadline, "node %d", i);
            itest_sleep_ms(100);
        }
}

/* push_key - one message (payload, key, delayMs: 0 none) to queue/part
 * through node i; *dups gets the answer's duplicates, id its first id. */
static void
push_key(int i, const char *queue, const char *part, int payload,
         const char *key, int delay_ms, int *dups, char *id, size_t idlen)
{
    struct itest_resp r;
    char body[512];

    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"partition\":\"%s\",\"messages\":[{"
             "\"payload\":%d,\"key\":\"%s\",\"delayMs\":%d}]}",
             queue, part, payload, key, delay_ms);
    long st = cl_call(&c, i, "POST", PUSH, body, WAIT_MS, 100, &r);
    cr_assert_eq(st, 201, "push through node %d: %ld %s", i, st, r.body);
    *dups = (int)itest_jint(r.json, "duplicates");
    if (id != NULL)
        snprintf(id, idlen, "%s", itest_jstr(r.json, "ids.0"));
    itest_resp_free(&r);
}

Test(cluster_extras, a_key_pushed_through_two_nodes_is_stored_once)
{
    const char *queue = "cx-dd";
    char part[32], id0[256], id1[256];
    int dups;

    cl_wait_view(&c, CL_ALL);
    declare(queue, "\"dedupeSeconds\":60", 60);
    cl_part_owned_by(queue, 2, 64, part, sizeof(part));
    push_key(0, queue, part, 1, "order-17", 0, &dups, id0, sizeof(id0));
    cr_assert_eq(dups, 0);
    push_key(1, queue, part, 1, "order-17", 0, &dups, id1, sizeof(id1));
    cr_assert_eq(dups, 1, "the second push through node 1");
    cr_assert_str_eq(id1, id0, "the second answer names the first id");
    push_key(2, queue, part, 1, "order-17", 0, &dups, id1, sizeof(id1));
    cr_assert_eq(dups, 1, "and through the owner itself");
    cr_assert_eq(itest_depth_pending(&c.node[2], queue, NULL), 1);
}

/* One message popped through node i: 1 and its payload, attempts and id,
 * or 0 when a wait of wait_ms found none. */
static int
pop_wait(int i, const char *queue, const char *part, int wait_ms,
         int64_t *payload, int64_t *attempts, char *id, size_t idlen)
{
    struct itest_resp r;
    char path[256];

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s&partition=%s&group=g&wait=true&"
             "timeout=%d",
             queue, part, wait_ms);
    long st = cl_call(&c, i, "GET", path, NULL, WAIT_MS, 100, &r);
    cr_assert_eq(st, 200, "pop: %ld %s", st, r.body);
    int got = itest_jlen(r.json, "messages");
    if (got > 0) {
        *payload = itest_jint(r.json, "messages.0.payload");
        *attempts = itest_jint(r.json, "messages.0.attempts");
        if (id != NULL)
            snprintf(id, idlen, "%s", itest_jstr(r.json, "messages.0.id"));
    }
    itest_resp_free(&r);
    return got > 0;
}

Test(cluster_extras, a_sigterm_hands_over_delays_retries_and_the_window)
{
    const char *queue = "cx-ho";
    char part[32], id[256], body[512];
    int64_t payload, attempts, seen[3] = {0};
    struct itest_resp r;
    int dups, x = 1;

    cl_wait_view(&c, CL_ALL);
    declare(queue, "\"dedupeSeconds\":60", 60);
    cl_part_owned_by(queue, x, 64, part, sizeof(part));
    /* 1: keyed, popped and retried with a delay; 2: keyed, delayed */
    push_key(0, queue, part, 1, "a", 0, &dups, NULL, 0);
    int64_t t_push = itest_now_ms();
    push_key(0, queue, part, 2, "b", 5000, &dups, NULL, 0);
    cr_assert_eq(
        pop_wait(0, queue, part, 0, &payload, &attempts, id, sizeof(id)), 1);
    cr_assert_eq(payload, 1);
    int64_t t_retry = itest_now_ms();
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
             "\"status\":\"retry\",\"delayMs\":4000}]}",
             queue, id);
    cr_assert_eq(
        cl_call(&c, 0, "POST", "/api/v1/ephemeral/ack", body, WAIT_MS, 100, &r),
        200, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "redelivered",
                     "%s", r.body);
    itest_resp_free(&r);

    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    cl_wait_view(&c, CL_ALL & ~(1u << x));
    /* the window moved with the partition: neither key is stored again */
    push_key(0, queue, part, 1, "a", 0, &dups, NULL, 0);
    cr_assert_eq(dups, 1, "key a after the hand-over");
    push_key(2, queue, part, 2, "b", 0, &dups, NULL, 0);
    cr_assert_eq(dups, 1, "key b after the hand-over");
    /* each comes once, when due */
    int64_t deadline = itest_now_ms() + WAIT_MS;
    while (seen[1] == 0 || seen[2] == 0) {
        cr_assert_lt(itest_now_ms(), deadline, "seen 1: %lld, 2: %lld",
                     (long long)seen[1], (long long)seen[2]);
        if (!pop_wait(0, queue, part, 2000, &payload, &attempts, NULL, 0))
            continue;
        cr_assert(payload == 1 || payload == 2, "payload %lld",
                  (long long)payload);
        cr_assert_eq(seen[payload], 0, "payload %lld twice",
                     (long long)payload);
        seen[payload] = itest_now_ms();
        if (payload == 1) {
            cr_assert_geq(seen[1] - t_retry, 4000, "the retry came early");
            /* delivered once, retried, handed over: attempts 2 at least */
            cr_assert_geq(attempts, 2);
        } else {
            cr_assert_geq(seen[2] - t_push, 5000, "the delayed came early");
            cr_assert_eq(attempts, 1);
        }
    }
    cr_assert_eq(pop_wait(0, queue, part, 500, &payload, &attempts, NULL, 0), 0,
                 "payload %lld again", (long long)payload);
}

/* A partition whose every message was consumed still holds its window:
 * a SIGTERM of its owner hands the window over though no message goes,
 * and the keys pushed again through another node are duplicates. */
Test(cluster_extras, a_sigterm_hands_over_the_window_of_an_emptied_partition)
{
    const char *queue = "cx-empty";
    const char *keys[] = {"k1", "k2", "k3"};
    char part[32], path[256];
    struct itest_resp r;
    int dups, x = 1;

    cl_wait_view(&c, CL_ALL);
    declare(queue, "\"dedupeSeconds\":60", 60);
    cl_part_owned_by(queue, x, 64, part, sizeof(part));
    for (int k = 0; k < 3; k++) {
        push_key(0, queue, part, k, keys[k], 0, &dups, NULL, 0);
        cr_assert_eq(dups, 0);
    }
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s&partition=%s&group=g&batch=10&"
             "autoAck=true",
             queue, part);
    cr_assert_eq(cl_call(&c, 2, "GET", path, NULL, WAIT_MS, 100, &r), 200, "%s",
                 r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), 3, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&c.node[x], queue, NULL), 0);
    push_key(2, queue, part, 9, "k1", 0, &dups, NULL, 0);
    cr_assert_eq(dups, 1, "the window before the stop");

    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    cl_wait_view(&c, CL_ALL & ~(1u << x));
    for (int k = 0; k < 3; k++) {
        push_key(k % 2 == 0 ? 2 : 0, queue, part, 9, keys[k], 0, &dups, NULL,
                 0);
        cr_assert_eq(dups, 1, "key %s after the hand-over", keys[k]);
    }
    cr_assert_eq(itest_depth_pending(&c.node[0], queue, NULL) +
                     itest_depth_pending(&c.node[2], queue, NULL),
                 0, "nothing stored twice");
}

/* signal_workers - send sig (SIGSTOP, SIGCONT) to every worker of node o. */
static void
signal_workers(int o, int sig)
{
    pid_t w[ITEST_NODE_MAX_WORKERS];
    int nw = itest_node_workers(&c.node[o], w, ITEST_NODE_MAX_WORKERS);

    cr_assert_gt(nw, 0);
    for (int k = 0; k < nw; k++)
        kill(w[k], sig);
}

/* A forward whose owner does not answer in time may have been stored
 * there (a stopped worker reads it once resumed): a push whose messages
 * all carry keys is sent once more, and the owner's window stores it
 * once.  (No relay answer comes in between: the client sees one 201.) */
Test(cluster_extras, a_keyed_push_that_timed_out_is_sent_once_more)
{
    const char *queue = "cx-slow";
    struct itest_multi *m = itest_multi_new();
    char part[32], body[256], id[256];
    int o = 2, a = 0, dups;

    cl_wait_view(&c, CL_ALL);
    declare(queue, "\"dedupeSeconds\":60", 60);
    cl_part_owned_by(queue, o, 64, part, sizeof(part));
    signal_workers(o, SIGSTOP);
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"partition\":\"%s\",\"messages\":[{"
             "\"payload\":1,\"key\":\"k1\"}]}",
             queue, part);
    cr_assert_eq(itest_multi_add(m, &c.node[a], "POST", PUSH, body), 0);
    int64_t deadline = itest_now_ms() + WAIT_MS;
    while (!itest_node_log_contains(&c.node[a], "is sent once more")) {
        itest_multi_run(m, 100);
        if (itest_now_ms() > deadline)
            signal_workers(o, SIGCONT);
        cr_assert_lt(itest_now_ms(), deadline, "no second send");
    }
    signal_workers(o, SIGCONT);
    cr_assert_eq(itest_multi_run(m, WAIT_MS), 0);
    struct itest_resp *r = itest_multi_resp(m, 0);
    cr_assert_eq(r->status, 201, "%s", r->body);
    snprintf(id, sizeof(id), "%s", itest_jstr(r->json, "ids.0"));
    itest_multi_free(m);
    /* the key is in the window, under the id the push was answered */
    char again[256];
    push_key(a, queue, part, 1, "k1", 0, &dups, again, sizeof(again));
    cr_assert_eq(dups, 1);
    cr_assert_str_eq(again, id);
    cr_assert_eq(itest_depth_pending(&c.node[o], queue, NULL), 1);
}

/* A push with a message without a key is not sent again: it fails. */
Test(cluster_extras, a_push_not_all_keyed_is_not_sent_again)
{
    const char *queue = "cx-slow2";
    struct itest_resp r;
    char part[32], body[256];
    int o = 2, a = 0;

    cl_wait_view(&c, CL_ALL);
    declare(queue, "\"dedupeSeconds\":60", 60);
    cl_part_owned_by(queue, o, 64, part, sizeof(part));
    signal_workers(o, SIGSTOP);
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"partition\":\"%s\",\"messages\":[{"
             "\"payload\":1,\"key\":\"k1\"},{\"payload\":2}]}",
             queue, part);
    long st = itest_req(&c.node[a], "POST", PUSH, body, &r);
    signal_workers(o, SIGCONT);
    cr_assert_eq(st, 503, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "code"), "ephemeral_forward_failed");
    itest_resp_free(&r);
    cr_assert(!itest_node_log_contains(&c.node[a], "is sent once more"));
}
