/*
 * test_cluster_conflate.c - SPEC §13's conflation across three real nodes:
 * pushes through a node that does not own the partition conflate at its
 * owner (the option went through raft to every node), and a pop through
 * another non-owner gets each key's newest; a SIGTERM of the owner hands
 * the partition over with its messages' keys, so a push of a key at the
 * next owner replaces the message that came over; and what a group that
 * is away skips (values another group leased, then replaced) stays
 * skipped at the next owner, for both groups.  Every wait polls a
 * condition.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

#define WAIT_MS 30000
#define STOP_MS 60000
#define PUSH    "/api/v1/ephemeral/push"

static struct cl c;

CL_SUITE(cluster_conflate, &c, NULL, CL_SUITE_STARTED, .timeout = 300);

/* retry - a request again while it answers 503 (membership settling), up
 * to WAIT_MS; its status. */
static long
retry(int i, const char *method, const char *path, const char *body,
      struct itest_resp *r)
{
    return cl_call(&c, i, method, path, body, WAIT_MS, 100, r);
}

/* declare - a queue that conflates, through node 0, then until every node
 * lists it (its maxLength, 777, says the entry is there). */
static void
declare(const char *queue)
{
    struct itest_resp r;
    char body[256];
    int64_t deadline = itest_now_ms() + WAIT_MS;

    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"options\":{\"conflate\":true,"
             "\"maxLength\":777}}",
             queue);
    cr_assert_eq(retry(0, "POST", "/api/v1/ephemeral/configure", body, &r), 201,
                 "%s", r.body);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++)
        while (cl_declared_length(&c, i, queue) != 777) {
            cr_assert_lt(itest_now_ms(), deadline, "node %d", i);
            itest_sleep_ms(100);
        }
}

/* push_keys - n messages {"k", "v": v + j} with keys "k<(k0 + j) % 10>"
 * to queue/part through node i; the answer's conflated. */
static int
push_keys(int i, const char *queue, const char *part, int k0, int n, int v)
{
    struct itest_resp r;
    char body[4096];
    size_t o;

    o = (size_t)snprintf(body, sizeof(body),
                         "{\"queue\":\"%s\",\"partition\":\"%s\","
                         "\"messages\":[",
                         queue, part);
    for (int j = 0; j < n; j++)
        o +=
            (size_t)snprintf(body + o, sizeof(body) - o,
                             "%s{\"payload\":{\"k\":%d,\"v\":%d},"
                             "\"key\":\"k%d\"}",
                             j ? "," : "", (k0 + j) % 10, v + j, (k0 + j) % 10);
    snprintf(body + o, sizeof(body) - o, "]}");
    long st = retry(i, "POST", PUSH, body, &r);
    cr_assert_eq(st, 201, "push through node %d: %ld %s", i, st, r.body);
    cr_assert_eq(itest_jint(r.json, "pushed"), n, "%s", r.body);
    int conflated = (int)itest_jint(r.json, "conflated");
    itest_resp_free(&r);
    return conflated;
}

/* pop_as - one pop of up to 100 through node i for group (autoAck or a
 * lease): how many came; each key's v into v[key] (-1: none; a key twice
 * fails). */
static int
pop_as(int i, const char *queue, const char *part, const char *group,
       int auto_ack, int *v)
{
    struct itest_resp r;
    char path[256];

    for (int k = 0; k < 10; k++)
        v[k] = -1;
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s&partition=%s&group=%s&batch=100&"
             "autoAck=%s",
             queue, part, group, auto_ack ? "true" : "false");
    long st = retry(i, "GET", path, NULL, &r);
    cr_assert_eq(st, 200, "pop: %ld %s", st, r.body);
    int got = itest_jlen(r.json, "messages");
    for (int j = 0; j < got; j++) {
        char p[64];
        snprintf(p, sizeof(p), "messages.%d.payload.k", j);
        int k = (int)itest_jint(r.json, p);
        cr_assert(k >= 0 && k < 10 && v[k] == -1, "key %d: %s", k, r.body);
        snprintf(p, sizeof(p), "messages.%d.payload.v", j);
        v[k] = (int)itest_jint(r.json, p);
    }
    itest_resp_free(&r);
    return got;
}

/* pop_all - pop_as for group g with autoAck. */
static int
pop_all(int i, const char *queue, const char *part, int *v)
{
    return pop_as(i, queue, part, "g", 1, v);
}

Test(cluster_conflate, pushes_through_a_non_owner_conflate_at_the_owner)
{
    const char *queue = "cc-sig";
    char part[32];
    int conflated = 0, v[10];

    cl_wait_view(&c, CL_ALL);
    declare(queue);
    cl_part_owned_by(queue, 2, 64, part, sizeof(part));
    /* 100 pushes of 10 messages through node 0, 1,000 over 10 keys */
    for (int b = 0; b < 100; b++)
        conflated += push_keys(0, queue, part, b % 7, 10, b * 10);
    cr_assert_eq(conflated, 990);
    cr_assert_eq(itest_depth_pending(&c.node[2], queue, NULL), 10);
    cr_assert_eq(pop_all(1, queue, part, v), 10, "through node 1");
    for (int k = 0; k < 10; k++) {
        /* the last batch (b = 99, k0 = 1) holds every key: v 990 + j */
        int j = (k - 1 + 10) % 10;
        cr_assert_eq(v[k], 990 + j, "key %d", k);
    }
}

Test(cluster_conflate, a_sigterm_hands_over_the_keys)
{
    const char *queue = "cc-ho";
    char part[32];
    int v[10], x = 1;

    cl_wait_view(&c, CL_ALL);
    declare(queue);
    cl_part_owned_by(queue, x, 64, part, sizeof(part));
    cr_assert_eq(push_keys(0, queue, part, 0, 5, 100), 0);
    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    cl_wait_view(&c, CL_ALL & ~(1u << x));
    /* the keys came along: each replaces the message that came over */
    cr_assert_eq(push_keys(2, queue, part, 0, 5, 200), 5);
    cr_assert_eq(pop_all(0, queue, part, v), 5);
    for (int k = 0; k < 5; k++)
        cr_assert_eq(v[k], 200 + k, "key %d", k);
}

Test(cluster_conflate, what_a_group_away_skips_stays_skipped_after_a_sigterm)
{
    const char *queue = "cc-two";
    char part[32];
    int v[10], x = 1;

    cl_wait_view(&c, CL_ALL);
    declare(queue);
    cl_part_owned_by(queue, x, 64, part, sizeof(part));
    cr_assert_eq(pop_as(0, queue, part, "back", 1, v), 0); /* known, away */
    cr_assert_eq(push_keys(0, queue, part, 0, 5, 100), 0);
    cr_assert_eq(pop_as(2, queue, part, "active", 0, v), 5, "leased");
    /* each replaced for back, while active holds the old value leased */
    cr_assert_eq(push_keys(0, queue, part, 0, 5, 200), 5);
    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    cl_wait_view(&c, CL_ALL & ~(1u << x));
    cr_assert_eq(pop_as(0, queue, part, "back", 1, v), 5, "each key once");
    for (int k = 0; k < 5; k++)
        cr_assert_eq(v[k], 200 + k, "back: key %d", k);
    cr_assert_eq(pop_as(2, queue, part, "active", 1, v), 5);
    for (int k = 0; k < 5; k++)
        cr_assert_eq(v[k], 200 + k, "active: key %d, not the old again", k);
}
