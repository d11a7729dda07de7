/*
 * test_cluster_ack_one.c - SPEC §14 through a node that does not own the
 * partition: a cumulative ack (upTo) reaches the node that delivered the
 * id and completes only its group's leases; a POST pop carrying acks goes
 * to the owner whole (also as a long poll) and answers results beside the
 * next batch; one naming no partition applies its acks at the node that
 * delivered them first; a drain of 10,000 messages in ack mode, one
 * exchange a batch, loses nothing and repeats nothing.  Node 0 is the
 * client's node, node 1 the owner of every partition used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"
#include "test/integration/drain.h"

#define POP "/api/v1/ephemeral/pop"
#define ACK "/api/v1/ephemeral/ack"

static struct cl c;

CL_SUITE(cluster_ack_one, &c, "member_ttl_ms=60000", CL_SUITE_VIEW,
         .timeout = 240);

Test(cluster_ack_one, upto_through_a_non_owner_completes_its_groups_leases)
{
    struct itest_resp r;
    char part[32], id3[256], id5[256];

    cl_part_owned_by("cu", 1, 32, part, sizeof(part));
    itest_push_seq(&c.node[0], "cu", part, 1, 5);
    itest_get(&c.node[0], &r, POP "?queue=cu&partition=%s&group=g&batch=3",
              part);
    cr_assert_eq(itest_jlen(r.json, "messages"), 3, "%s", r.body);
    itest_last_id(&r, id3, sizeof(id3));
    itest_resp_free(&r);
    itest_get(&c.node[0], &r, POP "?queue=cu&partition=%s&group=h&batch=5",
              part);
    itest_last_id(&r, id5, sizeof(id5));
    itest_resp_free(&r);
    itest_post(&c.node[0], &r, ACK,
               "{\"queue\":\"cu\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
               "\"upTo\":true}]}",
               id3);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 3, "%s", r.body);
    itest_resp_free(&r);
    /* h's five are still leased at the owner: its own upTo takes them */
    itest_post(&c.node[2], &r, ACK,
               "{\"queue\":\"cu\",\"group\":\"h\",\"acks\":[{\"id\":\"%s\","
               "\"upTo\":true}]}",
               id5);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 5, "%s", r.body);
    itest_resp_free(&r);
}

Test(cluster_ack_one, post_pop_through_a_non_owner_acks_then_pops)
{
    struct itest_resp r, *got;
    struct itest_multi *m = itest_multi_new();
    char part[32], id[256], e[512], body[1024];

    cl_part_owned_by("cp", 1, 32, part, sizeof(part));
    itest_push_seq(&c.node[0], "cp", part, 1, 4);
    cr_assert_eq(itest_pop_post(&c.node[0], &r, "cp", part, "g", 2, ""), 2);
    itest_last_id(&r, id, sizeof(id));
    itest_resp_free(&r);
    snprintf(e, sizeof(e), "{\"id\":\"%s\",\"upTo\":true}", id);
    cr_assert_eq(itest_pop_post(&c.node[0], &r, "cp", part, "g", 2, e), 2);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 3, "%s", r.body);
    itest_last_id(&r, id, sizeof(id));
    itest_resp_free(&r);

    /* a long poll, forwarded to the owner and parked, its acks applied */
    snprintf(body, sizeof(body),
             "{\"queue\":\"cp\",\"partition\":\"%s\",\"group\":\"g\","
             "\"batch\":5,\"wait\":true,\"timeout\":30000,\"acks\":[{\"id\":"
             "\"%s\",\"upTo\":true}]}",
             part, id);
    itest_multi_add(m, &c.node[0], "POST", POP, body);
    itest_multi_until_parked(&c.node[0], m, 30000);
    itest_push_seq(&c.node[2], "cp", part, 5, 1);
    cr_assert_eq(itest_multi_run(m, 30000), 0,
                 "the parked POST pop did not "
                 "answer after a push");
    got = itest_multi_resp(m, 0);
    cr_assert_eq(got->status, 200, "%s", got->body);
    cr_assert_eq(itest_jint(got->json, "results.0.count"), 2, "%s", got->body);
    cr_assert_eq(itest_jint(got->json, "messages.0.payload"), 5, "%s",
                 got->body);
    itest_multi_free(m);

    /* a bad body is refused where it lands, before any forward */
    itest_req(&c.node[0], "POST", POP,
              "{\"queue\":\"cp\",\"group\":\"g\",\"batch\":-1.5}", &r);
    itest_assert_error(&r, 400, "ephemeral_bad_request", "batch", "batch");
    itest_resp_free(&r);
}

/* A pop naming no partition is served by the node it reached (from its
 * peers): its acks go first to the node that delivered their ids. */
Test(cluster_ack_one, post_pop_without_partition_acks_at_the_delivering_node)
{
    struct itest_resp r;
    char part[32], id[256], e[512];

    cl_part_owned_by("cn", 1, 32, part, sizeof(part));
    itest_push_seq(&c.node[1], "cn", part, 1, 3);
    cr_assert_eq(itest_pop_post(&c.node[0], &r, "cn", NULL, "g", 2, ""), 2);
    itest_last_id(&r, id, sizeof(id));
    itest_resp_free(&r);
    snprintf(e, sizeof(e), "{\"id\":\"%s\",\"upTo\":true}", id);
    cr_assert_eq(itest_pop_post(&c.node[0], &r, "cn", NULL, "g", 5, e), 1);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 3, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_listing_int(&c.node[1], "cn", "leased", -1), 1);
}

Test(cluster_ack_one, drain_of_10000_through_a_non_owner_is_exact)
{
    enum { N = 10000 };
    struct itest_resp r;
    char part[32], acks[512] = "";
    char *seen = calloc(N + 1, 1);
    int got = 0, calls = 0;

    cr_assert_not_null(seen);
    cl_part_owned_by("cd", 1, 32, part, sizeof(part));
    for (int i = 0; i < N; i += 1000)
        itest_push_seq(&c.node[2], "cd", part, i + 1, 1000);
    while (got < N) {
        char id[256];
        int k = itest_pop_post(&c.node[0], &r, "cd", part, "g", 100, acks);

        cr_assert(++calls < N, "the drain does not end (%d of %d)", got, N);
        if (acks[0] != '\0')
            cr_assert_eq(itest_jint(r.json, "results.0.count"), 100, "%s",
                         r.body);
        got += itest_mark_payloads(&r, seen, N);
        if (k > 0) {
            itest_last_id(&r, id, sizeof(id));
            snprintf(acks, sizeof(acks), "{\"id\":\"%s\",\"upTo\":true}", id);
        }
        itest_resp_free(&r);
    }
    itest_post(&c.node[0], &r, ACK,
               "{\"queue\":\"cd\",\"group\":\"g\",\"acks\":[%s]}", acks);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 100, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(calls, N / 100);
    cr_assert_eq(itest_listing_int(&c.node[1], "cd", "leased", -1), 0);
    free(seen);
}
