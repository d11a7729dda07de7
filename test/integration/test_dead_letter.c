/*
 * test_dead_letter.c - SPEC §13's dead letters on one node: the deadLetter
 * and deadLetterExpired options (configure's answer, the listing, the
 * errors that name them), a message failed retryLimit times, one whose
 * last lease ran out and one past its ttl each pushed to the dead-letter
 * queue with its origin, the counters, and redrive bringing them back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define POP    "/api/v1/ephemeral/pop"
#define ACK    "/api/v1/ephemeral/ack"
#define CONF   "/api/v1/ephemeral/configure"
#define REDRIV "/api/v1/ephemeral/redrive"
#define PUSH   "/api/v1/ephemeral/push"

/* configure q with options (JSON object text); asserts 201. */
static void
configure(const struct itest_node *n, const char *q, const char *options)
{
    struct itest_resp r;

    itest_post(n, &r, CONF, "{\"queue\":\"%s\",\"options\":%s}", q, options);
    cr_assert_eq(r.status, 201, "configure %s %s: %ld %s", q, options, r.status,
                 r.body);
    itest_resp_free(&r);
}

/* Pop (no wait) with query q every 20 ms until one message comes (r holds
 * it); aborts after ms. */
static void
pop_one(const struct itest_node *n, struct itest_resp *r, const char *q, int ms)
{
    int64_t deadline = itest_now_ms() + ms;

    for (;;) {
        itest_get(n, r, POP "?%s", q);
        cr_assert_eq(r->status, 200, "pop %s: %ld %s", q, r->status, r->body);
        if (itest_jlen(r->json, "messages") > 0)
            return;
        itest_resp_free(r);
        cr_assert(itest_now_ms() < deadline, "pop %s: nothing in %d ms", q, ms);
        itest_sleep_ms(20);
    }
}

/* A metric's value, 0 when the series has not been written yet. */
static double
metric(const struct itest_node *n, const char *series)
{
    double v = 0;

    return itest_metric(n, series, &v) == 0 ? v : 0;
}

/* Fail the one message of q (group g) retry times, asserting each
 * outcome; returns its id (malloc'd). */
static char *
fail_to_the_limit(const struct itest_node *n, const char *q, const char *g,
                  int limit)
{
    char query[256], *id = NULL;

    snprintf(query, sizeof(query), "queue=%s&group=%s", q, g);
    for (int a = 1; a <= limit; a++) {
        struct itest_resp r, k;

        pop_one(n, &r, query, 5000);
        cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), a, "%s",
                     r.body);
        if (id == NULL)
            id = strdup(itest_jstr(r.json, "messages.0.id"));
        cr_assert_str_eq(itest_jstr(r.json, "messages.0.id"), id);
        itest_post(
            n, &k, ACK,
            "{\"queue\":\"%s\",\"group\":\"%s\",\"acks\":[{\"id\":\"%s\","
            "\"status\":\"failed\"}]}",
            q, g, id);
        cr_assert_eq(k.status, 200, "%s", k.body);
        cr_assert_str_eq(itest_jstr(k.json, "results.0.outcome"),
                         a < limit ? "redelivered" : "acked", "%s", k.body);
        itest_resp_free(&k);
        itest_resp_free(&r);
    }
    return id;
}

Test(dead_letter, options_show_in_configure_and_listing_and_bad_ones_are_named,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    itest_post(&n, &r, CONF,
               "{\"queue\":\"jobs\",\"options\":{\"deadLetter\":\"jobs.dead\","
               "\"deadLetterExpired\":true}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "options.deadLetter"), "jobs.dead");
    cr_assert_eq(itest_jbool(r.json, "options.deadLetterExpired"), 1);
    itest_resp_free(&r);

    itest_get(&n, &r, "/api/v1/ephemeral/queues?prefix=jobs");
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.options.deadLetter"),
                     "jobs.dead", "%s", r.body);
    cr_assert_eq(itest_jbool(r.json, "queues.0.options.deadLetterExpired"), 1);
    itest_resp_free(&r);

    /* Without it: null and false. */
    configure(&n, "plain", "{\"retryLimit\":3}");
    itest_get(&n, &r, "/api/v1/ephemeral/queues?prefix=plain");
    cr_assert(strstr(r.body, "\"deadLetter\":null,\"deadLetterExpired\":false"),
              "%s", r.body);
    itest_resp_free(&r);

    static const char *const bad[] = {
        "{\"deadLetter\":\"jobs\"}",      /* itself */
        "{\"deadLetter\":\"a\\u0001b\"}", /* not a name */
        "{\"deadLetter\":\"\"}",          /* empty */
        "{\"deadLetter\":7}",             /* not a string */
        "{\"deadLetterExpired\":true}",   /* nowhere to send them */
        "{\"deadLetter\":\"d\",\"deadLetterExpired\":1}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        itest_post(&n, &r, CONF, "{\"queue\":\"jobs\",\"options\":%s}", bad[i]);
        cr_assert_eq(r.status, 400, "%s: %ld %s", bad[i], r.status, r.body);
        cr_assert_str_eq(itest_jstr(r.json, "code"), "invalid_option", "%s",
                         r.body);
        cr_assert(strstr(itest_jstr(r.json, "error"), "deadLetter") != NULL,
                  "%s: %s", bad[i], r.body);
        itest_resp_free(&r);
    }
    /* What failed changed nothing. */
    itest_get(&n, &r, "/api/v1/ephemeral/queues?prefix=jobs");
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.options.deadLetter"),
                     "jobs.dead", "%s", r.body);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

Test(dead_letter, failed_to_the_retry_limit_lands_with_its_origin,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *id;

    itest_node_start(&n, NULL);
    configure(&n, "jobs", "{\"retryLimit\":3,\"deadLetter\":\"jobs.dead\"}");
    itest_push(&n, &r, "jobs", "p-7", "[{\"task\":\"resize\",\"n\":7}]");
    cr_assert_eq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
    id = fail_to_the_limit(&n, "jobs", "workers", 3);

    pop_one(&n, &r, "queue=jobs.dead&autoAck=true", 5000);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.partition"), "p-7");
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.queue"), "jobs");
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.partition"), "p-7");
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.id"), id, "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.attempts"), 3);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.reason"),
                     "retry_limit");
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.payload.task"),
                     "resize", "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(
        metric(&n, "mayfly_dead_letters_total{reason=\"retry_limit\"}"), 1);
    cr_assert_eq(metric(&n, "mayfly_dropped_total{reason=\"retry_limit\"}"), 1);
    cr_assert_eq(metric(&n, "mayfly_dead_letters_lost_total"), 0);
    free(id);
    itest_node_stop(&n, 10000);
}

Test(dead_letter, a_last_lease_run_out_and_a_ttl_land_too, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    int64_t deadline;

    itest_node_start(&n, "lease_s=1");
    configure(&n, "slow",
              "{\"retryLimit\":1,\"leaseSeconds\":1,\"deadLetter\":\"dl\"}");
    itest_push(&n, &r, "slow", NULL, "[\"late\"]");
    itest_resp_free(&r);
    pop_one(&n, &r, "queue=slow&group=g", 5000);
    itest_resp_free(&r);
    /* No ack: the lease runs out at the limit, in the master's upkeep. */
    pop_one(&n, &r, "queue=dl&autoAck=true", 10000);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.reason"),
                     "retry_limit");
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.payload"), "late");
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.attempts"), 1);
    itest_resp_free(&r);

    /* ttl: only with deadLetterExpired; an unread message and one that a
     * group holds leased both go, with the attempts of their delivery. */
    configure(&n, "brief",
              "{\"ttlSeconds\":1,\"deadLetter\":\"dl\",\"deadLetterExpired\":"
              "true}");
    configure(&n, "brief2", "{\"ttlSeconds\":1,\"deadLetter\":\"dl\"}");
    itest_push(&n, &r, "brief", NULL, "[\"a\",\"b\"]");
    itest_resp_free(&r);
    itest_push(&n, &r, "brief2", NULL, "[\"c\"]");
    itest_resp_free(&r);
    itest_get(&n, &r, POP "?queue=brief&group=g&batch=1");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    itest_resp_free(&r);
    int seen = 0;
    deadline = itest_now_ms() + 10000;
    while (seen < 2 && itest_now_ms() < deadline) {
        itest_get(&n, &r, POP "?queue=dl&autoAck=true&batch=10");
        for (int i = 0; i < itest_jlen(r.json, "messages"); i++) {
            char path[64];
            snprintf(path, sizeof(path), "messages.%d.payload.reason", i);
            cr_assert_str_eq(itest_jstr(r.json, path), "ttl", "%s", r.body);
            snprintf(path, sizeof(path), "messages.%d.payload.queue", i);
            cr_assert_str_eq(itest_jstr(r.json, path), "brief", "%s", r.body);
            snprintf(path, sizeof(path), "messages.%d.payload.attempts", i);
            cr_assert_eq(itest_jint(r.json, path), seen == 0 && i == 0, "%s",
                         r.body);
            seen++;
        }
        itest_resp_free(&r);
        if (seen < 2)
            itest_sleep_ms(50);
    }
    cr_assert_eq(seen, 2);
    cr_assert_eq(metric(&n, "mayfly_dead_letters_total{reason=\"ttl\"}"), 2);
    /* brief2's expired message vanished as before. */
    cr_assert_eq(metric(&n, "mayfly_dropped_total{reason=\"ttl\"}"), 3);
    itest_node_stop(&n, 10000);
}

/* A message's own ttlSeconds (SPEC §13) on a queue without one: with
 * deadLetterExpired it lands as a ttl dead letter too, found at the head
 * by the master's upkeep. */
Test(dead_letter, a_message_past_its_own_ttl_lands, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    configure(&n, "own", "{\"deadLetter\":\"dl\",\"deadLetterExpired\":true}");
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"own\",\"messages\":[{\"payload\":\"m\","
               "\"ttlSeconds\":1}]}");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    pop_one(&n, &r, "queue=dl&autoAck=true", 10000);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.reason"), "ttl",
                     "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.queue"), "own");
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload.payload"), "m");
    itest_resp_free(&r);
    cr_assert_eq(metric(&n, "mayfly_dead_letters_total{reason=\"ttl\"}"), 1);
    itest_node_stop(&n, 10000);
}

/* redrive q (max 0: none given); asserts 200, returns redriven. */
static int64_t
redrive(const struct itest_node *n, const char *q, int max)
{
    struct itest_resp r;
    int64_t got;

    if (max > 0)
        itest_post(n, &r, REDRIV, "{\"queue\":\"%s\",\"max\":%d}", q, max);
    else
        itest_post(n, &r, REDRIV, "{\"queue\":\"%s\"}", q);
    cr_assert_eq(r.status, 200, "redrive %s: %ld %s", q, r.status, r.body);
    got = itest_jint(r.json, "redriven");
    itest_resp_free(&r);
    return got;
}

Test(redrive, brings_dead_letters_back_to_their_partition_at_most_max,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *ids[3];

    itest_node_start(&n, NULL);
    configure(&n, "jobs", "{\"retryLimit\":2,\"deadLetter\":\"jobs.dead\"}");
    for (int i = 0; i < 3; i++) {
        char payload[64];
        snprintf(payload, sizeof(payload), "[{\"n\":%d}]", i);
        itest_push(&n, &r, "jobs", "p-1", payload);
        itest_resp_free(&r);
        ids[i] = fail_to_the_limit(&n, "jobs", "w", 2);
    }
    cr_assert_eq(itest_listing_int(&n, "jobs.dead", "depth", -1), 3);

    cr_assert_eq(redrive(&n, "jobs.dead", 2), 2);
    cr_assert_eq(itest_listing_int(&n, "jobs.dead", "depth", -1), 1);
    cr_assert_eq(redrive(&n, "jobs.dead", 0), 1);
    cr_assert_eq(redrive(&n, "jobs.dead", 0), 0);
    cr_assert_eq(redrive(&n, "nothing.here", 5), 0);

    /* Back on their partition, first deliveries again, and a consumer
     * completes them: nothing comes back to the dead-letter queue. */
    for (int i = 0; i < 3; i++) {
        pop_one(&n, &r, "queue=jobs&group=w", 5000);
        cr_assert_str_eq(itest_jstr(r.json, "messages.0.partition"), "p-1");
        cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1, "%s",
                     r.body);
        cr_assert_eq(itest_jint(r.json, "messages.0.payload.n"), i, "%s",
                     r.body);
        struct itest_resp k;
        itest_post(
            &n, &k, ACK,
            "{\"queue\":\"jobs\",\"group\":\"w\",\"acks\":[{\"id\":\"%s\"}]}",
            itest_jstr(r.json, "messages.0.id"));
        cr_assert_str_eq(itest_jstr(k.json, "results.0.outcome"), "acked");
        itest_resp_free(&k);
        itest_resp_free(&r);
        free(ids[i]);
    }
    itest_get(&n, &r, POP "?queue=jobs.dead");
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);

    static const char *const bad[] = {"{\"queue\":\"d\",\"max\":0}",
                                      "{\"queue\":\"d\",\"max\":\"1\"}",
                                      "{\"max\":1}", "{\"queue\":\"\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        itest_post(&n, &r, REDRIV, "%s", bad[i]);
        cr_assert_eq(r.status, 400, "%s: %ld %s", bad[i], r.status, r.body);
        itest_resp_free(&r);
    }
    itest_node_stop(&n, 10000);
}
