/*
 * test_depth.c - GET depth of a queue with partitions and a group (SPEC §2):
 * the totals agree with the partitions and the group's own count.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define POP "/api/v1/ephemeral/pop"

static void
pop_ok(const struct itest_node *n, struct itest_resp *r, const char *q)
{
    itest_get(n, r, POP "?%s", q);
    cr_assert_eq(r->status, 200, "pop %s: %ld %s", q, r->status, r->body);
}

Test(depth, shows_pending_per_partition_and_group, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    itest_push_ok(&n, &r, "dq", "p1", "[1,2,3]", 3);
    itest_resp_free(&r);
    itest_push_ok(&n, &r, "dq", "p2", "[4]", 1);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=dq&partition=p1&group=g");
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues/dq/depth?group=g");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "dq", "%s", r.body);
    cr_assert(*itest_jstr(r.json, "node"), "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "group"), "g", "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "tier"), "implicit", "%s", r.body);
    /* 4 held, 1 of them leased to g: 3 wait for g, 2 in p1 and 1 in p2. */
    cr_assert_eq(itest_jint(r.json, "pending"), 3,
                 "pending is not the sum of the partitions' pending: %s",
                 r.body);
    cr_assert_eq(itest_jint(r.json, "partitionsPending"), 2, "%s", r.body);
    cr_assert(itest_jint(r.json, "bytes") > 0, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "partitions"), 2, "%s", r.body);
    for (int i = 0; i < 2; i++) {
        char k[64];
        const char *p;

        snprintf(k, sizeof(k), "partitions.%d.partition", i);
        p = itest_jstr(r.json, k);
        snprintf(k, sizeof(k), "partitions.%d.pending", i);
        cr_assert_eq(itest_jint(r.json, k), strcmp(p, "p1") == 0 ? 2 : 1, "%s",
                     r.body);
        snprintf(k, sizeof(k), "partitions.%d.leased", i);
        cr_assert_eq(itest_jint(r.json, k), strcmp(p, "p1") == 0 ? 1 : 0, "%s",
                     r.body);
        snprintf(k, sizeof(k), "partitions.%d.waiting", i);
        cr_assert_eq(itest_jint(r.json, k), 0, "%s", r.body);
        snprintf(k, sizeof(k), "partitions.%d.bytes", i);
        cr_assert(itest_jint(r.json, k) > 0, "%s", r.body);
        snprintf(k, sizeof(k), "partitions.%d.oldestAgeMs", i);
        cr_assert(itest_jint(r.json, k) >= 0, "%s", r.body);
    }
    cr_assert_eq(itest_jlen(r.json, "groups"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "groups.0.group"), "g", "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "groups.0.pending"), 3, "%s", r.body);
    cr_assert(itest_jint(r.json, "groups.0.skipped") >= 0, "%s", r.body);
    itest_resp_free(&r);
}
