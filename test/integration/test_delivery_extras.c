/*
 * test_delivery_extras.c - SPEC §13 on one node: idempotent push (key and
 * dedupeSeconds), delayed delivery (delayMs), retry with a delay (an ack's
 * delayMs, the queue's retryDelayMs), a message's own ttlSeconds, and the
 * new options in configure's answer and the listing.  Times are measured
 * with CLOCK_MONOTONIC (itest_now_ms) and asserted as lower bounds, with an
 * upper bound only where "on time" is the point (the due heap's wake-up).
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/drain.h"
#include "test/integration/node.h"

#define POP  "/api/v1/ephemeral/pop"
#define ACK  "/api/v1/ephemeral/ack"
#define PUSH "/api/v1/ephemeral/push"
#define CONF "/api/v1/ephemeral/configure"

static struct itest_node n;

static void
up(void)
{
    itest_node_start(&n, NULL);
}

static void
down(void)
{
    itest_node_stop(&n, 30000);
}

TestSuite(extras, .init = up, .fini = down, .timeout = 120);

/* configure - declare queue with options (a JSON object's members). */
static void
configure(const char *queue, const char *options)
{
    struct itest_resp r;

    itest_post(&n, &r, CONF, "{\"queue\":\"%s\",\"options\":{%s}}", queue,
               options);
    cr_assert_eq(r.status, 201, "configure %s: %ld %s", options, r.status,
                 r.body);
    itest_resp_free(&r);
}

static double
metric(const char *series)
{
    double v = 0;

    return itest_metric(&n, series, &v) == 0 ? v : 0;
}

Test(extras, a_key_pushed_twice_in_the_window_is_stored_once)
{
    struct itest_resp r;
    char first[256];

    configure("dd", "\"dedupeSeconds\":1");
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"dd\",\"messages\":[{\"payload\":1,\"key\":\"k1\"},"
               "{\"payload\":2,\"key\":\"k2\"}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "duplicates"), 0, "%s", r.body);
    snprintf(first, sizeof(first), "%s", itest_jstr(r.json, "ids.0"));
    itest_resp_free(&r);
    int64_t t0 = itest_now_ms();

    /* again, beside a new key and a repeat within the batch */
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"dd\",\"messages\":[{\"payload\":3,\"key\":\"k3\"},"
               "{\"payload\":1,\"key\":\"k1\"},{\"payload\":4,\"key\":\"k3\"}"
               "]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "duplicates"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "pushed"), 1, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "ids"), 3, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "ids.1"), first, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "ids.2"), itest_jstr(r.json, "ids.0"),
                     "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "dd", NULL), 3);
    cr_assert_geq(metric("mayfly_duplicates_total"), 2);

    /* after the window (1 s) the key is new again */
    for (;;) {
        itest_post(&n, &r, PUSH,
                   "{\"queue\":\"dd\",\"messages\":[{\"payload\":1,"
                   "\"key\":\"k1\"}]}");
        cr_assert_eq(r.status, 201, "%s", r.body);
        int dup = (int)itest_jint(r.json, "duplicates");
        if (dup == 0) {
            cr_assert_str_neq(itest_jstr(r.json, "ids.0"), first);
            itest_resp_free(&r);
            break;
        }
        cr_assert_str_eq(itest_jstr(r.json, "ids.0"), first, "%s", r.body);
        itest_resp_free(&r);
        cr_assert_lt(itest_now_ms() - t0, 10000, "the window never ended");
        itest_sleep_ms(50);
    }
    cr_assert_geq(itest_now_ms() - t0, 900, "the window ended early");
    cr_assert_eq(itest_depth_pending(&n, "dd", NULL), 4);
}

Test(extras, keys_count_only_on_a_queue_with_a_window)
{
    struct itest_resp r;

    itest_post(
        &n, &r, PUSH,
        "{\"queue\":\"nodd\",\"messages\":[{\"payload\":1,\"key\":\"k\"},"
        "{\"payload\":1,\"key\":\"k\"}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "duplicates"), 0, "%s", r.body);
    cr_assert_str_neq(itest_jstr(r.json, "ids.0"), itest_jstr(r.json, "ids.1"));
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "nodd", NULL), 2);
}

Test(extras, a_delayed_message_wakes_a_parked_pop_on_time)
{
    struct itest_resp r;
    struct itest_multi *m = itest_multi_new();

    cr_assert_not_null(m);
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"dl\",\"messages\":[{\"payload\":\"late\","
               "\"delayMs\":700}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    /* not visible: depth says delayed, and the gauge counts it */
    itest_get(&n, &r, "/api/v1/ephemeral/queues/dl/depth?scope=node");
    cr_assert_eq(itest_jint(r.json, "partitions.0.delayed"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "partitions.0.pending"), 0, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(metric("mayfly_delayed_messages"), 1);
    cr_assert_eq(itest_multi_add(m, &n, "GET",
                                 POP "?queue=dl&group=g&wait=true&"
                                     "timeout=10000",
                                 NULL),
                 0);
    cr_assert_eq(itest_multi_run(m, 15000), 0);
    int64_t took = itest_now_ms() - t0;
    struct itest_resp *a = itest_multi_resp(m, 0);
    cr_assert_eq(a->status, 200, "%s", a->body);
    cr_assert_eq(itest_jlen(a->json, "messages"), 1, "%s", a->body);
    cr_assert_str_eq(itest_jstr(a->json, "messages.0.payload"), "late");
    cr_assert_eq(itest_jint(a->json, "messages.0.attempts"), 1);
    cr_assert_geq(took, 700, "visible after %lld ms", (long long)took);
    cr_assert_lt(took, 3000, "the parked pop waited %lld ms", (long long)took);
    itest_multi_free(m);
    cr_assert_eq(metric("mayfly_delayed_messages"), 0);
}

Test(extras, a_delayed_message_does_not_hold_up_the_ones_behind_it)
{
    struct itest_resp r;

    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"dh\",\"messages\":[{\"payload\":1,\"delayMs\":"
               "600},{\"payload\":2}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=dh&group=g&batch=10"), 1, "%s",
                 r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 2, "%s", r.body);
    itest_resp_free(&r);
    itest_pop_until_one(&n, &r, "queue=dh&group=g&batch=10", 10000);
    cr_assert_geq(itest_now_ms() - t0, 600);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 1, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=dh&group=g&batch=10"), 0, "%s",
                 r.body);
    itest_resp_free(&r);
}

/* An ack entry's retry with delayMs: the next message at once, the retried
 * one not before the delay, with attempts + 1. */
Test(extras, a_retry_with_a_delay_does_not_hold_up_the_next_message)
{
    struct itest_resp r;
    char id[256];

    itest_post(&n, &r, PUSH,
               "{\"queue\":\"rd\",\"messages\":[{\"payload\":1},"
               "{\"payload\":2}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=rd&group=g"), 1, "%s", r.body);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, ACK,
               "{\"queue\":\"rd\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
               "\"status\":\"retry\",\"delayMs\":500}]}",
               id);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "redelivered");
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=rd&group=g"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 2, "%s", r.body);
    itest_resp_free(&r);
    itest_pop_until_one(&n, &r, "queue=rd&group=g", 10000);
    int64_t took = itest_now_ms() - t0;
    cr_assert_geq(took, 500, "redelivered after %lld ms", (long long)took);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.id"), id);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 2);
    itest_resp_free(&r);
}

Test(extras, retry_delay_ms_is_the_default_delay_of_a_retry)
{
    struct itest_resp r;
    char id[256];

    configure("rq", "\"retryDelayMs\":400");
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"rq\",\"messages\":[{\"payload\":1}]}");
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=rq&group=g"), 1, "%s", r.body);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, ACK,
               "{\"queue\":\"rq\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
               "\"status\":\"retry\"}]}",
               id);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "redelivered");
    itest_resp_free(&r);
    itest_pop_until_one(&n, &r, "queue=rq&group=g", 10000);
    cr_assert_geq(itest_now_ms() - t0, 400);
    itest_resp_free(&r);
    /* delayMs 0 overrides the default: at once */
    itest_get(&n, &r, POP "?queue=rq&group=g");
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "leased: %s", r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, ACK,
               "{\"queue\":\"rq\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
               "\"status\":\"retry\",\"delayMs\":0}]}",
               id);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=rq&group=g"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 3);
    itest_resp_free(&r);
}

Test(extras, a_message_ttl_above_the_queues_is_a_400_naming_it)
{
    struct itest_resp r;

    configure("tq", "\"ttlSeconds\":60");
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"tq\",\"messages\":[{\"payload\":1},{\"payload\":"
               "2,\"ttlSeconds\":61}]}");
    itest_assert_error(&r, 400, "ephemeral_bad_request",
                       "messages[1].ttlSeconds", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "tq", NULL), 0, "all or nothing");
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"tq\",\"messages\":[{\"payload\":1,\"delayMs\":"
               "3600001}]}");
    itest_assert_error(&r, 400, "ephemeral_bad_request", "messages[0].delayMs",
                       r.body);
    itest_resp_free(&r);
    itest_post(
        &n, &r, PUSH,
        "{\"queue\":\"tq\",\"messages\":[{\"payload\":1,\"key\":\"\"}]}");
    itest_assert_error(&r, 400, "ephemeral_bad_request", "messages[0].key",
                       r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"tq\",\"messages\":[{\"payload\":1,\"key\":7}]}");
    itest_assert_error(&r, 400, "ephemeral_bad_request", "messages[0].key",
                       r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"tq\",\"messages\":[{\"payload\":1,\"delayMs\":"
               "-1}]}");
    itest_assert_error(&r, 400, "ephemeral_bad_request", "messages[0].delayMs",
                       r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, ACK,
               "{\"queue\":\"tq\",\"acks\":[{\"id\":\"e:1:Default:1\","
               "\"status\":\"retry\",\"delayMs\":3600001}]}");
    itest_assert_error(&r, 400, "ephemeral_bad_request", "acks[0].delayMs",
                       r.body);
    itest_resp_free(&r);
    /* within the queue's: taken */
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"tq\",\"messages\":[{\"payload\":1,\"ttlSeconds\":"
               "60}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
}

Test(extras, a_message_past_its_own_ttl_is_not_delivered)
{
    struct itest_resp r;

    configure("mt", "\"ttlSeconds\":60");
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"mt\",\"messages\":[{\"payload\":1,\"ttlSeconds\":"
               "1},{\"payload\":2}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    while (itest_now_ms() - t0 < 1100) /* the clock is the condition */
        itest_sleep_ms(50);
    cr_assert_eq(itest_pop(&n, &r, "queue=mt&group=g&batch=10"), 1, "%s",
                 r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 2, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_geq(metric("mayfly_dropped_total{reason=\"ttl\"}"), 1);
}

/* The queue's ttl (SPEC §4) holds behind a message pushed with a delay:
 * the one pushed after it, past the ttl, is never delivered, and the
 * upkeep drops it while the delayed head still waits. */
Test(extras, the_queues_ttl_holds_behind_a_delayed_head)
{
    struct itest_resp r;

    configure("td", "\"ttlSeconds\":1");
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"td\",\"messages\":[{\"payload\":1,\"delayMs\":"
               "60000},{\"payload\":2}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    while (itest_now_ms() - t0 < 1100) /* the clock is the condition */
        itest_sleep_ms(50);
    cr_assert_eq(itest_pop(&n, &r, "queue=td&group=g&batch=10"), 0, "%s",
                 r.body);
    itest_resp_free(&r);
    while (metric("mayfly_dropped_total{reason=\"ttl\"}") < 1) {
        cr_assert_lt(itest_now_ms() - t0, 10000, "message 2 is still held");
        itest_sleep_ms(50);
    }
}

/* Expired messages behind a delayed head are reclaimed before a push is
 * refused (SPEC §4): they do not fill maxLength. */
Test(extras, expired_messages_behind_a_delayed_head_make_room)
{
    struct itest_resp r;

    configure("tr", "\"ttlSeconds\":1,\"maxLength\":2");
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"tr\",\"messages\":[{\"payload\":1,\"delayMs\":"
               "60000},{\"payload\":2}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    while (itest_now_ms() - t0 < 1100) /* the clock is the condition */
        itest_sleep_ms(50);
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"tr\",\"messages\":[{\"payload\":3}]}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=tr&group=g&batch=10"), 1, "%s",
                 r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 3, "%s", r.body);
    itest_resp_free(&r);
}

Test(extras, the_options_show_in_configures_answer_and_the_listing)
{
    struct itest_resp r;

    itest_post(&n, &r, CONF,
               "{\"queue\":\"op\",\"options\":{\"dedupeSeconds\":30,"
               "\"retryDelayMs\":250}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "options.dedupeSeconds"), 30, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "options.retryDelayMs"), 250, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_listing_int(&n, "op", "options.dedupeSeconds", -1), 30);
    cr_assert_eq(itest_listing_int(&n, "op", "options.retryDelayMs", -1), 250);
    itest_post(&n, &r, CONF,
               "{\"queue\":\"op\",\"options\":{\"dedupeSeconds\":3601}}");
    itest_assert_error(&r, 400, "invalid_option", "dedupeSeconds", r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, CONF,
               "{\"queue\":\"op\",\"options\":{\"retryDelayMs\":3600001}}");
    itest_assert_error(&r, 400, "invalid_option", "retryDelayMs", r.body);
    itest_resp_free(&r);
    /* a queue that sets neither shows both off */
    cr_assert_eq(itest_listing_int(&n, "nodd", "options.dedupeSeconds", 0), 0);
}

/* The due heap wakes a pop parked while a retry waits out its delay. */
Test(extras, a_delayed_retry_wakes_a_parked_pop_on_time)
{
    struct itest_resp r;
    struct itest_multi *m = itest_multi_new();
    char id[256];

    cr_assert_not_null(m);
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"rw\",\"messages\":[{\"payload\":1}]}");
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=rw&group=g"), 1, "%s", r.body);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, ACK,
               "{\"queue\":\"rw\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
               "\"status\":\"retry\",\"delayMs\":600}]}",
               id);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "redelivered");
    itest_resp_free(&r);
    cr_assert_eq(itest_multi_add(m, &n, "GET",
                                 POP "?queue=rw&group=g&wait=true&"
                                     "timeout=10000",
                                 NULL),
                 0);
    cr_assert_eq(itest_multi_run(m, 15000), 0);
    int64_t took = itest_now_ms() - t0;
    struct itest_resp *a = itest_multi_resp(m, 0);
    cr_assert_eq(itest_jlen(a->json, "messages"), 1, "%s", a->body);
    cr_assert_eq(itest_jint(a->json, "messages.0.attempts"), 2, "%s", a->body);
    cr_assert_geq(took, 600, "redelivered after %lld ms", (long long)took);
    cr_assert_lt(took, 3000, "the parked pop waited %lld ms", (long long)took);
    itest_multi_free(m);
}
