/*
 * test_ack_one.c - SPEC §14 on one node: the cumulative ack (upTo) and the
 * POST pop that carries the acks of the batch before (as a long poll too);
 * a cumulative ack after the leases ran out completes them all the same;
 * bad bodies answer 400 naming the field and change nothing; a drain of
 * 10,000 messages in ack mode, one exchange a batch, loses nothing and
 * repeats nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/drain.h"
#include "test/integration/node.h"

#define POP "/api/v1/ephemeral/pop"
#define ACK "/api/v1/ephemeral/ack"

Test(ack_one, upto_completes_the_groups_leases_up_to_the_id_and_no_others,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id3[256], id5[256], e[512];

    itest_node_start(&n, NULL);
    itest_push_seq(&n, "u", NULL, 1, 5);
    itest_get(&n, &r, POP "?queue=u&group=g&batch=3");
    cr_assert_eq(itest_jlen(r.json, "messages"), 3, "%s", r.body);
    itest_last_id(&r, id3, sizeof(id3));
    itest_resp_free(&r);
    itest_get(&n, &r, POP "?queue=u&group=h&batch=5");
    cr_assert_eq(itest_jlen(r.json, "messages"), 5, "%s", r.body);
    itest_last_id(&r, id5, sizeof(id5));
    itest_resp_free(&r);

    /* attempts would fence a plain ack: not a cumulative one */
    snprintf(e, sizeof(e), "{\"id\":\"%s\",\"upTo\":true,\"attempts\":9}", id3);
    itest_post(&n, &r, ACK, "{\"queue\":\"u\",\"group\":\"g\",\"acks\":[%s]}",
               e);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 3, "%s", r.body);
    itest_resp_free(&r);
    /* h still holds its five: g's ack left them alone */
    cr_assert_eq(itest_listing_int(&n, "u", "leased", -1), 5);
    /* and g's next pop starts at 4: 1-3 are done */
    itest_get(&n, &r, POP "?queue=u&group=g&batch=5");
    cr_assert_eq(itest_jlen(r.json, "messages"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 4, "%s", r.body);
    itest_resp_free(&r);
    /* again: nothing of g's is leased up to 3 any more */
    itest_post(&n, &r, ACK,
               "{\"queue\":\"u\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
               "\"upTo\":true}]}",
               id3);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "unknown", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 0, "%s", r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, ACK,
               "{\"queue\":\"u\",\"group\":\"h\",\"acks\":[{\"id\":\"%s\","
               "\"upTo\":true}]}",
               id5);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 5, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_listing_int(&n, "u", "leased", -1), 2); /* g's 4, 5 */
}

/* A cumulative ack a little late (the leases ran out, nobody popped since)
 * completes the messages waiting for their redelivery as plain acks of
 * them would, counted: not unknown, and the batch is not sent again. */
Test(ack_one, upto_after_the_leases_ran_out_completes_them, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id1[256], id3[256];
    int64_t deadline;

    itest_node_start(&n, NULL);
    itest_post(&n, &r, "/api/v1/ephemeral/configure",
               "{\"queue\":\"up2\",\"options\":{\"leaseSeconds\":1}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    itest_push_seq(&n, "up2", NULL, 1, 4);
    itest_get(&n, &r, POP "?queue=up2&group=g&batch=1");
    itest_last_id(&r, id1, sizeof(id1));
    itest_resp_free(&r);
    itest_get(&n, &r, POP "?queue=up2&group=g&batch=2");
    cr_assert_eq(itest_jlen(r.json, "messages"), 2, "%s", r.body);
    itest_last_id(&r, id3, sizeof(id3));
    itest_resp_free(&r);
    /* the master's upkeep ends the three leases: none is leased then */
    deadline = itest_now_ms() + 10000;
    while (itest_listing_int(&n, "up2", "leased", -1) != 0 &&
           itest_now_ms() < deadline)
        itest_sleep_ms(50);
    cr_assert_eq(itest_listing_int(&n, "up2", "leased", -1), 0);

    itest_post(&n, &r, ACK,
               "{\"queue\":\"up2\",\"group\":\"g\",\"acks\":[\"%s\"]}", id1);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, ACK,
               "{\"queue\":\"up2\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
               "\"upTo\":true}]}",
               id3);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 2, "%s", r.body);
    itest_resp_free(&r);
    /* 1-3 are done: the next pop has the 4th alone, a first delivery */
    itest_get(&n, &r, POP "?queue=up2&group=g&batch=10");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 4, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1, "%s", r.body);
    itest_resp_free(&r);
    /* and again: nothing up to 3 is held now */
    itest_post(&n, &r, ACK,
               "{\"queue\":\"up2\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
               "\"upTo\":true}]}",
               id3);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "unknown", "%s",
                     r.body);
    itest_resp_free(&r);
}

Test(ack_one, post_pop_applies_its_acks_then_pops, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256], e[512];

    itest_node_start(&n, NULL);
    itest_push_seq(&n, "p", NULL, 1, 4);
    cr_assert_eq(itest_pop_post(&n, &r, "p", NULL, "g", 2, ""), 2);
    cr_assert_eq(itest_jlen(r.json, "results"), 0, "%s", r.body);
    itest_last_id(&r, id, sizeof(id));
    itest_resp_free(&r);
    snprintf(e, sizeof(e), "{\"id\":\"%s\",\"upTo\":true}", id);
    cr_assert_eq(itest_pop_post(&n, &r, "p", NULL, "g", 2, e), 2);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.id"), id, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 3, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.1.payload"), 4, "%s", r.body);
    itest_last_id(&r, id, sizeof(id));
    itest_resp_free(&r);
    /* a plain entry (the id as a string) works as on the ack route */
    snprintf(e, sizeof(e), "\"%s\"", id);
    cr_assert_eq(itest_pop_post(&n, &r, "p", NULL, "g", 2, e), 0);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    cr_assert_null(itest_jget(r.json, "results.0.count"), "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_listing_int(&n, "p", "leased", -1), 1); /* 3 */
}

/* The usual one-exchange batch: fail one message, ack the rest up to the
 * last, in the next POST pop.  The failed one comes back (attempts 2);
 * the cumulative ack completes only the others. */
Test(ack_one, a_failed_message_before_an_upto_comes_back, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char first[256], last[256], e[1024];

    itest_node_start(&n, NULL);
    itest_push_seq(&n, "f", NULL, 1, 3);
    cr_assert_eq(itest_pop_post(&n, &r, "f", NULL, "g", 3, ""), 3);
    snprintf(first, sizeof(first), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_last_id(&r, last, sizeof(last));
    itest_resp_free(&r);
    snprintf(e, sizeof(e),
             "{\"id\":\"%s\",\"status\":\"failed\"},{\"id\":\"%s\","
             "\"upTo\":true}",
             first, last);
    cr_assert_eq(itest_pop_post(&n, &r, "f", NULL, "g", 3, e), 1);
    cr_assert_eq(itest_jint(r.json, "results.1.count"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 2, "%s", r.body);
    itest_resp_free(&r);
    itest_node_stop(&n, 30000);
}

Test(ack_one, post_pop_parks_as_a_long_poll_with_its_acks_applied,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, *got;
    struct itest_multi *m = itest_multi_new();
    char id[256], body[1024];

    itest_node_start(&n, NULL);
    itest_push_seq(&n, "lp", NULL, 1, 2);
    itest_get(&n, &r, POP "?queue=lp&group=g&batch=2");
    itest_last_id(&r, id, sizeof(id));
    itest_resp_free(&r);
    snprintf(body, sizeof(body),
             "{\"queue\":\"lp\",\"group\":\"g\",\"batch\":10,\"wait\":true,"
             "\"timeout\":20000,\"acks\":[{\"id\":\"%s\",\"upTo\":true}]}",
             id);
    itest_multi_add(m, &n, "POST", POP, body);
    itest_multi_until_parked(&n, m, 20000);
    /* the acks applied before the pop parked */
    cr_assert_eq(itest_listing_int(&n, "lp", "leased", -1), 0);
    itest_push_seq(&n, "lp", NULL, 3, 1);
    cr_assert_eq(itest_multi_run(m, 20000), 0,
                 "the parked POST pop did not "
                 "answer after a push");
    got = itest_multi_resp(m, 0);
    cr_assert_eq(got->status, 200, "%s", got->body);
    cr_assert_eq(itest_jlen(got->json, "messages"), 1, "%s", got->body);
    cr_assert_eq(itest_jint(got->json, "messages.0.payload"), 3, "%s",
                 got->body);
    cr_assert_eq(itest_jint(got->json, "results.0.count"), 2, "%s", got->body);
    itest_multi_free(m);
}

Test(ack_one, bad_bodies_answer_400_naming_the_field_and_change_nothing,
     .timeout = 60)
{
    static const struct {
        const char *body, *field;
    } c[] = {
        /* each ends 400 ephemeral_bad_request; the empty partition, an
         * invalid name, 400 invalid_name */
        {"{\"queue\":\"b\",\"group\":\"g\",\"batch\":\"2\",@}", "batch"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"batch\":1.5,@}", "batch"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"wait\":1,@}", "wait"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"timeout\":true,@}", "timeout"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"from\":\"now\",@}", "from"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"partition\":7,@}", "partition"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"autoAck\":\"y\",@}", "autoAck"},
        {"{\"queue\":\"b\",\"group\":7,@}", "group"},
        {"{\"group\":\"g\",@}", "queue"},
        {"{\"queue\":\"b\",\"group\":\"g\",@,\"partition\":\"\"}", "partition"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"acks\":{}}", "acks"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"acks\":[@,7]}", "acks[1]"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"acks\":[@,{\"id\":\"x\","
         "\"upTo\":\"yes\"}]}",
         "acks[1].upTo"},
        {"{\"queue\":\"b\",\"group\":\"g\",\"acks\":[@,{\"id\":\"x\","
         "\"upTo\":true,\"status\":\"retry\"}]}",
         "acks[1].upTo"},
    };
    struct itest_node n;
    struct itest_resp r;
    char id[256], good[512], body[1024];

    itest_node_start(&n, NULL);
    itest_push_seq(&n, "b", NULL, 1, 3);
    itest_get(&n, &r, POP "?queue=b&group=g&batch=2");
    itest_last_id(&r, id, sizeof(id));
    itest_resp_free(&r);
    snprintf(good, sizeof(good), "{\"id\":\"%s\",\"upTo\":true}", id);
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char acks[600];
        snprintf(acks, sizeof(acks), "\"acks\":[%s]", good);
        /* the bodies that write acks themselves take the entry alone */
        const char *at = strchr(c[i].body, '@');
        if (at == NULL)
            at = c[i].body + strlen(c[i].body) - 1; /* no '@': as it is */
        snprintf(body, sizeof(body), "%.*s%s%s", (int)(at - c[i].body),
                 c[i].body,
                 *at != '@'                      ? ""
                 : strstr(c[i].body, "\"acks\"") ? good
                                                 : acks,
                 *at == '@' ? at + 1 : at);
        itest_req(&n, "POST", POP, body, &r);
        itest_assert_error(&r, 400,
                           strcmp(c[i].field, "partition") == 0 &&
                                   strstr(body, "\"\"")
                               ? "invalid_name"
                               : "ephemeral_bad_request",
                           c[i].field, body);
        itest_resp_free(&r);
    }
    itest_req(&n, "POST", POP, "{\"queue\":\"b\",", &r);
    itest_assert_error(&r, 400, "ephemeral_bad_request", NULL, "truncated");
    itest_resp_free(&r);
    /* nothing acked, nothing more leased */
    cr_assert_eq(itest_listing_int(&n, "b", "leased", -1), 2);
    cr_assert_eq(itest_depth_pending(&n, "b", "g"), 1);
}

/*
 * A drain in ack mode, one exchange a batch: each POST pop acks the batch
 * before with one cumulative entry; every message comes exactly once.
 */
Test(ack_one, drain_of_10000_with_upto_loses_nothing_and_repeats_nothing,
     .timeout = 180)
{
    enum { N = 10000 };
    struct itest_node n;
    struct itest_resp r;
    char *seen = calloc(N + 1, 1), acks[512] = "";
    int got = 0, calls = 0;

    cr_assert_not_null(seen);
    itest_node_start(&n, NULL);
    for (int i = 0; i < N; i += 1000)
        itest_push_seq(&n, "d", NULL, i + 1, 1000);
    while (got < N) {
        char id[256];
        int k = itest_pop_post(&n, &r, "d", NULL, "g", 100, acks);

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
    itest_post(&n, &r, ACK, "{\"queue\":\"d\",\"group\":\"g\",\"acks\":[%s]}",
               acks);
    cr_assert_eq(itest_jint(r.json, "results.0.count"), 100, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(calls, N / 100);
    cr_assert_eq(itest_listing_int(&n, "d", "leased", -1), 0);
    cr_assert_eq(itest_depth_pending(&n, "d", "g"), 0);
    free(seen);
}
