/*
 * test_declared_options.c - what each configure option does to push and
 * pop on one real node, and every way configure refuses a body.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

static struct itest_node n;

static void
up(void)
{
    itest_node_start(&n, "implicit_idle_s=60");
}

static void
down(void)
{
    itest_node_stop(&n, 30000);
}

TestSuite(declared_options, .init = up, .fini = down, .timeout = 120);

/* declare - configure queue with the options object text; asserts 201. */
static void
declare(const char *queue, const char *options)
{
    struct itest_resp r;
    long st = itest_post(&n, &r, "/api/v1/ephemeral/configure",
                         "{\"queue\":\"%s\",\"options\":%s}", queue, options);
    cr_assert_eq(st, 201, "configure %s %s: %ld %s", queue, options, st,
                 r.body);
    itest_resp_free(&r);
}

/* pop - one pop of up to batch from queue (group g, autoAck a). */
static struct itest_resp
pop(const char *queue, int batch, int auto_ack)
{
    struct itest_resp r;
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=%s&batch=%d&autoAck=%s",
              queue, batch, auto_ack ? "true" : "false");
    return r;
}

Test(declared_options, max_length_with_reject_answers_429)
{
    struct itest_resp r;

    declare("bounded", "{\"maxLength\":3}");
    cr_assert_eq(itest_push(&n, &r, "bounded", NULL, "[1,2,3]"), 201);
    itest_resp_free(&r);
    cr_assert_eq(itest_push(&n, &r, "bounded", NULL, "[4]"), 429);
    cr_assert_str_eq(itest_jstr(r.json, "code"), "queue_full");
    cr_assert_str_neq(r.retry_after, "");
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "bounded", NULL), 3);
}

Test(declared_options, drop_oldest_evicts_the_oldest_first)
{
    struct itest_resp r;

    declare("rolling", "{\"maxLength\":3,\"policy\":\"dropOldest\"}");
    cr_assert_eq(itest_push(&n, &r, "rolling", NULL, "[1,2,3]"), 201);
    itest_resp_free(&r);
    cr_assert_eq(itest_push(&n, &r, "rolling", NULL, "[4,5]"), 201);
    itest_resp_free(&r);
    r = pop("rolling", 10, 1);
    cr_assert_eq(itest_jlen(r.json, "messages"), 3);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 3);
    cr_assert_eq(itest_jint(r.json, "messages.2.payload"), 5);
    itest_resp_free(&r);
    double dropped;
    cr_assert_eq(itest_metric(&n,
                              "mayfly_dropped_total{reason=\"drop_oldest\"}",
                              &dropped),
                 0);
    cr_assert_eq(dropped, 2);
}

Test(declared_options, max_bytes_refuses_a_message_larger_than_the_queue)
{
    struct itest_resp r;
    char big[600];

    declare("small", "{\"maxBytes\":256}");
    memset(big, 'x', sizeof(big) - 3);
    big[0] = '[';
    big[1] = '"';
    big[sizeof(big) - 3] = '"';
    big[sizeof(big) - 2] = ']';
    big[sizeof(big) - 1] = '\0';
    cr_assert_eq(itest_push(&n, &r, "small", NULL, big), 413);
    cr_assert_str_eq(itest_jstr(r.json, "code"), "message_too_large");
    itest_resp_free(&r);
    cr_assert_eq(itest_push(&n, &r, "small", NULL, "[1]"), 201);
    itest_resp_free(&r);
}

Test(declared_options, ttl_drops_pending_and_leased_messages)
{
    struct itest_resp r;

    declare("fleeting", "{\"ttlSeconds\":1}");
    cr_assert_eq(itest_push(&n, &r, "fleeting", NULL, "[1,2]"), 201);
    itest_resp_free(&r);
    r = pop("fleeting", 1, 0); /* one leased, one pending */
    cr_assert_eq(itest_jlen(r.json, "messages"), 1);
    itest_resp_free(&r);
    int64_t deadline = itest_now_ms() + 15000;
    double ttl = 0;
    while (
        itest_now_ms() < deadline &&
        (itest_metric(&n, "mayfly_dropped_total{reason=\"ttl\"}", &ttl) != 0 ||
         ttl < 2))
        itest_sleep_ms(100);
    cr_assert_eq(ttl, 2, "both the pending and the leased one expire");
    cr_assert_eq(itest_depth_pending(&n, "fleeting", NULL), 0);
    r = pop("fleeting", 10, 1);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0);
    itest_resp_free(&r);
}

Test(declared_options, lease_seconds_sets_when_a_message_comes_back)
{
    struct itest_resp r;

    declare("quick", "{\"leaseSeconds\":1}");
    cr_assert_eq(itest_push(&n, &r, "quick", NULL, "[\"job\"]"), 201);
    itest_resp_free(&r);
    r = pop("quick", 1, 0);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1);
    itest_resp_free(&r);
    int64_t start = itest_now_ms();
    for (;;) {
        itest_get(&n, &r,
                  "/api/v1/ephemeral/pop?queue=quick&wait=true&timeout=1000");
        if (itest_jlen(r.json, "messages") == 1)
            break;
        itest_resp_free(&r);
        cr_assert_lt(itest_now_ms() - start, 15000, "never redelivered");
    }
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 2);
    itest_resp_free(&r);
    cr_assert_geq(itest_now_ms() - start, 900, "not before the lease ran out");
}

Test(declared_options, retry_limit_drops_after_that_many_attempts)
{
    struct itest_resp r;

    declare("fragile", "{\"retryLimit\":2}");
    cr_assert_eq(itest_push(&n, &r, "fragile", NULL, "[1]"), 201);
    itest_resp_free(&r);
    for (int attempt = 1; attempt <= 2; attempt++) {
        r = pop("fragile", 1, 0);
        cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), attempt);
        char id[256];
        snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
        itest_resp_free(&r);
        itest_post(&n, &r, "/api/v1/ephemeral/ack",
                   "{\"queue\":\"fragile\",\"acks\":[{\"id\":\"%s\","
                   "\"status\":\"failed\"}]}",
                   id);
        cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"),
                         attempt == 1 ? "redelivered" : "acked");
        if (attempt == 2)
            cr_assert(itest_jbool(r.json, "results.0.dropped"));
        itest_resp_free(&r);
    }
    r = pop("fragile", 1, 0);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0);
    itest_resp_free(&r);
}

Test(declared_options, configure_refuses_bad_bodies_and_changes_nothing)
{
    static const struct {
        const char *body, *code, *names;
    } bad[] = {
        {"{\"queue\":\"c\",\"options\":{\"maxLenght\":5}}", "unknown_option",
         "maxLenght"},
        {"{\"queue\":\"c\",\"options\":{\"maxLength\":\"5\"}}",
         "invalid_option", "maxLength"},
        {"{\"queue\":\"c\",\"options\":{\"maxLength\":100001}}",
         "invalid_option", "maxLength"},
        {"{\"queue\":\"c\",\"options\":{\"maxBytes\":99999999999}}",
         "invalid_option", "maxBytes"},
        {"{\"queue\":\"c\",\"options\":{\"policy\":\"dropNewest\"}}",
         "invalid_option", "policy"},
        {"{\"queue\":\"c\",\"options\":{\"windowBuffer\":{\"ms\":60001}}}",
         "invalid_option", "windowBuffer.ms"},
        {"{\"queue\":\"c\",\"options\":{\"leaseSeconds\":-1}}",
         "invalid_option", "leaseSeconds"},
        {"{\"queue\":\"\\u0001\",\"options\":{}}", "invalid_name", "queue"},
        {"{\"options\":{}}", "ephemeral_bad_request", "queue"},
        {"{\"queue\":\"c\",", "ephemeral_bad_request", ""},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct itest_resp r;
        long st = itest_req(&n, "POST", "/api/v1/ephemeral/configure",
                            bad[i].body, &r);
        cr_assert_eq(st, 400, "%s: %ld", bad[i].body, st);
        cr_assert_str_eq(itest_jstr(r.json, "code"), bad[i].code, "%s",
                         bad[i].body);
        cr_assert(strstr(itest_jstr(r.json, "error"), bad[i].names), "%s: %s",
                  bad[i].body, r.body);
        itest_resp_free(&r);
    }
    struct itest_resp r;
    cr_assert_eq(itest_get(&n, &r, "/api/v1/ephemeral/queues/c/depth"), 404,
                 "nothing was declared");
    itest_resp_free(&r);
}
