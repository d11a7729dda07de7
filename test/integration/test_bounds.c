/*
 * test_bounds.c - SPEC §4 bounds on nodes started with small settings:
 * 413 payload_too_large (max_body_bytes), 413 message_too_large (a message
 * over the queue's maxBytes), 429 queue_full (maxLength, maxBytes) with
 * Retry-After, 503 ephemeral_unavailable at the node cap (max_bytes) with
 * Retry-After; each refusal keeps nothing of the batch and is counted.
 * A batch no wait could make room for is 413 payload_too_large, or under
 * dropOldest keeps its newest messages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"

#define PUSH "/api/v1/ephemeral/push"

/* A push body of count messages whose payload is a string of size bytes. */
static char *
big_push(const char *queue, int count, size_t size)
{
    size_t cap = 64 + strlen(queue) + (size_t)count * (size + 24);
    char *b = malloc(cap), *p;

    cr_assert(b);
    p = b + sprintf(b, "{\"queue\":\"%s\",\"messages\":[", queue);
    for (int i = 0; i < count; i++) {
        p += sprintf(p, "%s{\"payload\":\"", i ? "," : "");
        memset(p, 'x', size);
        p += size;
        p += sprintf(p, "\"}");
    }
    sprintf(p, "]}");
    return b;
}

/* Retry-After must be a positive number of seconds. */
static void
assert_retry_after(const struct itest_resp *r, const char *what)
{
    char *end;
    long v = strtol(r->retry_after, &end, 10);

    cr_assert(*r->retry_after && *end == '\0' && v >= 1,
              "%s: Retry-After \"%s\" is not a positive number of seconds",
              what, r->retry_after);
}

/* A metric's value, 0 when the series has not been written yet. */
static double
metric(const struct itest_node *n, const char *series)
{
    double v = 0;
    int rc = itest_metric(n, series, &v);

    cr_assert(rc == 0 || rc == -ENOENT, "GET /metrics failed");
    return rc == 0 ? v : 0;
}

Test(bounds, body_over_max_body_bytes_is_413_payload_too_large, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *body;

    itest_node_start(&n, "max_body_bytes=4K");
    body = big_push("big", 1, 6000);
    itest_req(&n, "POST", PUSH, body, &r);
    itest_assert_error(&r, 413, "payload_too_large", NULL, "6 KB body");
    itest_resp_free(&r);
    free(body);
    cr_assert_eq(itest_depth_pending(&n, "big", NULL) <= 0, 1,
                 "the refused body was stored");
    body = big_push("big", 1, 3000);
    itest_req(&n, "POST", PUSH, body, &r);
    cr_assert_eq(r.status, 201, "a 3 KB body: %ld %s", r.status, r.body);
    itest_resp_free(&r);
    free(body);
    cr_assert_eq(itest_depth_pending(&n, "big", NULL), 1);
}

/* A chunked body announces no length: it outgrows the limit while it
 * arrives, and still gets the 413 (it used to get a closed connection). */
Test(bounds, chunked_body_over_max_body_bytes_is_413_too, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *body, head[256];
    int fd;

    itest_node_start(&n, "max_body_bytes=4K");
    body = big_push("chunky", 1, 6000);
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    snprintf(head, sizeof(head),
             "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
             "\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n",
             PUSH, strlen(body));
    cr_assert_eq(itest_raw_send(fd, head), 0);
    cr_assert_eq(itest_raw_send(fd, body), 0);
    cr_assert_eq(itest_raw_send(fd, "\r\n0\r\n\r\n"), 0);
    itest_raw_response(fd, &r);
    itest_assert_error(&r, 413, "payload_too_large", NULL, "6 KB chunked");
    itest_resp_free(&r);
    close(fd);
    free(body);
    cr_assert_eq(itest_depth_pending(&n, "chunky", NULL) <= 0, 1,
                 "the refused body was stored");
}

Test(bounds, message_over_queue_max_bytes_is_413_and_keeps_no_part,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *body, *big;
    double before, after;
    size_t len;

    itest_node_start(&n, "queue_max_bytes=64K");
    itest_push(&n, &r, "mtl", NULL, "[\"first\"]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    before = metric(&n, "mayfly_push_total{result=\"rejected_too_large\"}");
    /* One small message, then one of 100 KB: the batch goes whole or not. */
    big = big_push("x", 1, 100 * 1024);
    len = strlen(big);
    body = malloc(len + 64);
    cr_assert(body);
    sprintf(body, "{\"queue\":\"mtl\",\"messages\":[{\"payload\":\"small\"},%s",
            strstr(big, "{\"payload\""));
    free(big);
    itest_req(&n, "POST", PUSH, body, &r);
    itest_assert_error(&r, 413, "message_too_large", "maxBytes",
                       "a 100 KB message in a 64 KB queue");
    /* SPEC §2: the sentence names the message (its index), the queue and
     * the limit */
    cr_expect(strstr(itest_jstr(r.json, "error"), "push: message 1 takes ") ==
                  itest_jstr(r.json, "error"),
              "%s", r.body);
    cr_expect(strstr(itest_jstr(r.json, "error"),
                     "than queue 'mtl' holds at most (maxBytes 65536)") != NULL,
              "%s", r.body);
    itest_resp_free(&r);
    free(body);
    cr_assert_eq(itest_depth_pending(&n, "mtl", NULL), 1,
                 "part of a refused batch was stored");
    after = metric(&n, "mayfly_push_total{result=\"rejected_too_large\"}");
    cr_assert(after > before, "rejected_too_large %g -> %g", before, after);
    /* Refused, it changes nothing: no queue is made for it either. */
    big = big_push("fresh", 1, 100 * 1024);
    itest_req(&n, "POST", PUSH, big, &r);
    free(big);
    itest_assert_error(&r, 413, "message_too_large", "maxBytes",
                       "to a new queue");
    cr_expect(strstr(itest_jstr(r.json, "error"), "push: message 0 takes ") !=
                      NULL &&
                  strstr(itest_jstr(r.json, "error"), "queue 'fresh'") != NULL,
              "%s", r.body);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues/fresh/depth");
    cr_assert_eq(r.status, 404, "a refused push made the queue: %s", r.body);
    itest_resp_free(&r);
}

Test(bounds, push_past_queue_max_length_is_429_queue_full, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    double before, after;

    itest_node_start(&n, "queue_max_length=5");
    before = metric(&n, "mayfly_push_total{result=\"rejected_full\"}");
    itest_push(&n, &r, "full", NULL, "[1,2,3]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    itest_push(&n, &r, "full", NULL, "[4,5,6]");
    itest_assert_error(&r, 429, "queue_full", "maxLength",
                       "3 + 3 messages into 5");
    /* SPEC §2: the sentence names the queue and the bound, with its value */
    cr_expect_str_eq(itest_jstr(r.json, "error"),
                     "push: queue 'full' is full: it holds 3 messages, and 3 "
                     "more would pass its maxLength 5",
                     "%s", r.body);
    assert_retry_after(&r, "429");
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "full", NULL), 3,
                 "a refused batch was stored in part");
    itest_push(&n, &r, "full", NULL, "[4,5]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    itest_push(&n, &r, "full", NULL, "[6]");
    itest_assert_error(&r, 429, "queue_full", "maxLength", "a sixth message");
    assert_retry_after(&r, "429");
    itest_resp_free(&r);
    after = metric(&n, "mayfly_push_total{result=\"rejected_full\"}");
    cr_assert(after > before, "rejected_full %g -> %g", before, after);
    /* Consumed messages make room again. */
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=full&batch=2&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 2, "%s", r.body);
    itest_resp_free(&r);
    itest_push(&n, &r, "full", NULL, "[6,7]");
    cr_assert_eq(r.status, 201, "after 2 pops: %ld %s", r.status, r.body);
    itest_resp_free(&r);
    itest_push(&n, &r, "other", NULL, "[1,2,3,4,5]");
    cr_assert_eq(r.status, 201, "the bound is per queue: %ld %s", r.status,
                 r.body);
    itest_resp_free(&r);
}

Test(bounds, push_past_queue_max_bytes_is_429_queue_full, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *body = big_push("bytes", 1, 10 * 1024);
    int accepted = 0;

    itest_node_start(&n, "queue_max_bytes=64K");
    for (;;) {
        itest_req(&n, "POST", PUSH, body, &r);
        if (r.status != 201)
            break;
        itest_resp_free(&r);
        accepted++;
        cr_assert(accepted <= 6, "7 messages of 10 KB fit in 64 KB");
    }
    itest_assert_error(&r, 429, "queue_full", "maxBytes", "10 KB past 64 KB");
    cr_expect(strstr(itest_jstr(r.json, "error"),
                     "push: queue 'bytes' is full: 1 message of ") != NULL &&
                  strstr(itest_jstr(r.json, "error"),
                         " bytes would pass its maxBytes 65536") != NULL,
              "%s", r.body);
    assert_retry_after(&r, "429");
    itest_resp_free(&r);
    cr_assert(accepted >= 1, "no 10 KB message fit in a 64 KB queue");
    cr_assert_eq(itest_depth_pending(&n, "bytes", NULL), accepted);
    free(body);
}

/*
 * Two queues, each allowed more than half the node cap, fill the node
 * together: the node cap (503) comes before either queue's bound (429).
 */
Test(bounds, node_cap_is_503_ephemeral_unavailable_until_memory_is_freed,
     .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    char *body[2] = {big_push("capa", 1, 64 * 1024),
                     big_push("capb", 1, 64 * 1024)};
    int accepted[2] = {0, 0}, i = 0;
    int64_t pending;
    double before, after;

    itest_node_start(&n, "max_bytes=1M queue_max_bytes=700K");
    before = metric(&n, "mayfly_push_total{result=\"unavailable\"}");
    for (;; i = !i) {
        itest_req(&n, "POST", PUSH, body[i], &r);
        if (r.status != 201)
            break;
        itest_resp_free(&r);
        accepted[i]++;
        cr_assert(accepted[0] + accepted[1] <= 16,
                  "17 messages of 64 KB fit in 1 MiB");
    }
    itest_assert_error(&r, 503, "ephemeral_unavailable", NULL,
                       "64 KB past the node cap");
    assert_retry_after(&r, "503");
    itest_resp_free(&r);
    pending = itest_depth_pending(&n, i ? "capb" : "capa", NULL);
    cr_assert_eq(pending, accepted[i], "refused push stored: %lld vs %d",
                 (long long)pending, accepted[i]);
    after = metric(&n, "mayfly_push_total{result=\"unavailable\"}");
    cr_assert(after > before, "unavailable %g -> %g", before, after);
    itest_req(&n, "DELETE", "/api/v1/ephemeral/queue/capa", NULL, &r);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    for (int k = 0; k < accepted[0]; k++) {
        itest_req(&n, "POST", PUSH, body[0], &r);
        cr_assert_eq(r.status, 201,
                     "push %d of %d after the delete freed the memory: %ld %s",
                     k + 1, accepted[0], r.status, r.body);
        itest_resp_free(&r);
    }
    free(body[0]);
    free(body[1]);
}

/* One inbox per request, past the size of the queue table (max_bytes / 512
 * records: 4096 here): empty inboxes idle for a second make room, so a
 * client that mints inboxes keeps being answered
 * (a 503 the table is full for a moment is retried as Retry-After says). */
Test(bounds, one_inbox_per_request_outlives_the_queue_table, .timeout = 180)
{
    struct itest_node n;
    struct itest_resp r;
    int retried = 0;

    itest_node_start(&n, "max_bytes=2M");
    for (int i = 0; i < 10000; i++) {
        int64_t deadline = itest_now_ms() + 10000;
        for (;;) {
            itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=inbox-%d", i);
            if (r.status != 503)
                break;
            assert_retry_after(&r, "503");
            itest_resp_free(&r);
            retried++;
            cr_assert(itest_now_ms() < deadline,
                      "inbox %d: still 503 after 10 s", i);
            itest_sleep_ms(100);
        }
        cr_assert_eq(r.status, 200, "inbox %d: %ld %s", i, r.status, r.body);
        cr_assert_eq(itest_jlen(r.json, "messages"), 0);
        itest_resp_free(&r);
    }
    cr_assert(itest_node_log_contains(&n, "empty queues before their idle "
                                          "time"),
              "no relief logged (%d retries)", retried);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* One message larger than a pop's answer is bounded to (16 MiB) but within
 * max_body_bytes and the queue's maxBytes is delivered whole, alone, and
 * the queue goes on: it must not block its partition until its ttl. */
Test(bounds, message_over_the_pop_answer_bound_is_delivered_whole,
     .timeout = 120)
{
    const size_t size = 20 * 1024 * 1024;
    struct itest_node n;
    struct itest_resp r;
    char *body = malloc(size + 64), *p;
    const char *got;

    cr_assert(body);
    itest_node_start(&n, "queue_max_bytes=64M");
    p = body +
        sprintf(body, "{\"queue\":\"huge\",\"messages\":[{\"payload\":\"");
    for (size_t i = 0; i < size; i++)
        *p++ = (char)('a' + i % 26);
    sprintf(p, "\"}]}");
    itest_req(&n, "POST", PUSH, body, &r);
    cr_assert_eq(r.status, 201, "%ld %.200s", r.status, r.body);
    itest_resp_free(&r);
    itest_push(&n, &r, "huge", NULL, "[\"small\"]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);

    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=huge&batch=10&autoAck=true");
    cr_assert_eq(r.status, 200, "%ld %.200s", r.status, r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%.200s", r.body);
    got = itest_jstr(r.json, "messages.0.payload");
    cr_assert_eq(strlen(got), size, "the big payload came back cut");
    cr_assert(memcmp(got,
                     body + strlen("{\"queue\":\"huge\",\"messages\":"
                                   "[{\"payload\":\""),
                     size) == 0,
              "the big payload's bytes changed");
    itest_resp_free(&r);
    free(body);

    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=huge&autoAck=true");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "small", "%s",
                     r.body);
    itest_resp_free(&r);
}

/*
 * A batch no wait could make room for (SPEC §2: every 429 and 503 carries
 * Retry-After, a promise that a later try can work): under policy reject
 * a batch past the queue's bounds on its own is 413 payload_too_large with
 * no Retry-After, naming the bound; under dropOldest it is taken and
 * keeps its newest messages (SPEC §4: the oldest go first, the batch's
 * own oldest too); past the node's memory for pushes it is 413 as well.
 */

/* numbered_push - a push body of count messages to queue (partition NULL:
 * the default) whose payloads are "<from + i>:" and x's, size bytes. */
static char *
numbered_push(const char *queue, const char *partition, int from, int count,
              size_t size)
{
    size_t cap = 128 + strlen(queue) + (size_t)count * (size + 48);
    char *b = malloc(cap), *p;

    cr_assert(b);
    p = b + sprintf(b, "{\"queue\":\"%s\",", queue);
    if (partition != NULL)
        p += sprintf(p, "\"partition\":\"%s\",", partition);
    p += sprintf(p, "\"messages\":[");
    for (int i = 0; i < count; i++) {
        size_t head = (size_t)snprintf(NULL, 0, "%d:", from + i);
        p += sprintf(p, "%s{\"payload\":\"%d:", i ? "," : "", from + i);
        memset(p, 'x', size > head ? size - head : 0);
        p += size > head ? size - head : 0;
        p += sprintf(p, "\"}");
    }
    sprintf(p, "]}");
    return b;
}

/* payload_no - the number a numbered_push payload starts with. */
static int
payload_no(const char *payload)
{
    return atoi(payload);
}

/* declare_drop_oldest - configure queue with policy dropOldest (and
 * maxLength max_length when > 0) and wait until the listing shows it. */
static void
declare_drop_oldest(const struct itest_node *n, const char *queue,
                    int max_length)
{
    struct itest_resp r;
    struct json_object *e;
    int64_t deadline = itest_now_ms() + 10000;
    char len[40] = "";

    if (max_length > 0)
        snprintf(len, sizeof(len), ",\"maxLength\":%d", max_length);
    itest_post(n, &r, "/api/v1/ephemeral/configure",
               "{\"queue\":\"%s\",\"options\":{\"policy\":\"dropOldest\"%s}}",
               queue, len);
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    for (;;) {
        e = itest_listing_find(n, queue);
        int shown = e != NULL &&
                    strcmp(itest_jstr(e, "options.policy"), "dropOldest") == 0;
        if (e != NULL)
            json_object_put(e);
        if (shown)
            break;
        cr_assert(itest_now_ms() < deadline, "the declaration never showed");
        itest_sleep_ms(20);
    }
}

Test(bounds, a_batch_past_max_length_under_reject_is_413_for_good,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    double before, after;

    itest_node_start(&n, "queue_max_length=5");
    before = metric(&n, "mayfly_push_total{result=\"rejected_too_large\"}");
    for (int round = 0; round < 2; round++) {
        itest_push(&n, &r, "six", NULL, "[1,2,3,4,5,6]");
        itest_assert_error(&r, 413, "payload_too_large", "maxLength",
                           "6 messages into a queue of 5");
        cr_expect_str_eq(itest_jstr(r.json, "error"),
                         "push: 6 messages are more than queue 'six' may "
                         "ever hold (maxLength 5, policy reject): push at "
                         "most 5 at a time",
                         "%s", r.body);
        cr_assert_str_eq(r.retry_after, "",
                         "a refusal no wait can change has no Retry-After");
        itest_resp_free(&r);
        /* the queue empty (none made yet), then holding two */
        cr_assert_eq(itest_depth_pending(&n, "six", NULL), round ? 2 : -1,
                     "round %d: the refused batch changed the queue", round);
        if (round == 0)
            itest_push_ok(&n, &r, "six", NULL, "[1,2]", 2);
        itest_resp_free(&r);
    }
    after = metric(&n, "mayfly_push_total{result=\"rejected_too_large\"}");
    cr_assert_eq(after, before + 2, "rejected_too_large %g -> %g", before,
                 after);
    cr_assert_eq(metric(&n, "mayfly_push_total{result=\"rejected_full\"}"), 0);
    itest_push_ok(&n, &r, "six", NULL, "[3,4,5]", 3);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "six", NULL), 5);
}

Test(bounds, a_batch_past_max_bytes_under_reject_is_413_for_good, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *body = numbered_push("bulk", NULL, 0, 8, 10 * 1024);

    itest_node_start(&n, "queue_max_bytes=64K");
    itest_req(&n, "POST", PUSH, body, &r);
    itest_assert_error(&r, 413, "payload_too_large", "maxBytes",
                       "80 KB into a queue of 64 KB");
    cr_expect(strstr(itest_jstr(r.json, "error"), "push: 8 messages of ") !=
                      NULL &&
                  strstr(itest_jstr(r.json, "error"),
                         "bytes are more than queue 'bulk' may ever hold "
                         "(maxBytes 65536, policy reject)") != NULL,
              "%s", r.body);
    cr_assert_str_eq(r.retry_after, "", "%s", r.body);
    itest_resp_free(&r);
    free(body);
    cr_assert_eq(itest_depth_pending(&n, "bulk", NULL), -1,
                 "the refused batch made the queue");
    body = numbered_push("bulk", NULL, 0, 4, 10 * 1024);
    itest_req(&n, "POST", PUSH, body, &r);
    cr_assert_eq(r.status, 201, "4 x 10 KB: %ld %s", r.status, r.body);
    itest_resp_free(&r);
    free(body);
}

Test(bounds, a_batch_past_max_length_under_drop_oldest_keeps_its_newest,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char ids[8][128];
    double dropped;

    itest_node_start(&n, "");
    declare_drop_oldest(&n, "recent", 5);
    itest_push_ok(&n, &r, "recent", "p1", "[1,2,3]", 3);
    itest_resp_free(&r);
    itest_push_ok(&n, &r, "recent", "p2", "[4]", 1);
    itest_resp_free(&r);
    /* 8 into 5: the 4 held go, then the batch's own 3 oldest */
    itest_push(&n, &r, "recent", "p1", "[11,12,13,14,15,16,17,18]");
    cr_assert_eq(r.status, 201,
                 "8 messages into a dropOldest queue of 5: "
                 "%ld %s",
                 r.status, r.body);
    cr_assert_eq(itest_jint(r.json, "pushed"), 8, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "ids"), 8, "%s", r.body);
    for (int i = 0; i < 8; i++) {
        char k[16];
        snprintf(k, sizeof(k), "ids.%d", i);
        snprintf(ids[i], sizeof(ids[i]), "%s", itest_jstr(r.json, k));
    }
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "recent", NULL), 5);
    cr_assert_eq(itest_listing_int(&n, "recent", "drops.bounds", -1), 7);
    dropped = metric(&n, "mayfly_dropped_total{reason=\"drop_oldest\"}");
    cr_assert_eq(dropped, 7, "drop_oldest %g", dropped);
    cr_assert_eq(metric(&n, "mayfly_push_total{result=\"accepted\"}"), 12);
    itest_get(&n, &r,
              "/api/v1/ephemeral/pop?queue=recent&batch=10&"
              "autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 5, "%s", r.body);
    for (int i = 0; i < 5; i++) {
        char k[32];
        snprintf(k, sizeof(k), "messages.%d.payload", i);
        cr_assert_eq(itest_jint(r.json, k), 14 + i, "%s", r.body);
        snprintf(k, sizeof(k), "messages.%d.id", i);
        cr_assert_str_eq(itest_jstr(r.json, k), ids[3 + i],
                         "the newest five keep the ids the push answered");
    }
    itest_resp_free(&r);
    /* and again, on the queue it left full */
    itest_push_ok(&n, &r, "recent", "p2", "[21,22,23,24,25,26,27,28]", 8);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "recent", NULL), 5);
    cr_assert_eq(metric(&n, "mayfly_push_total{result=\"rejected_full\"}") +
                     metric(&n, "mayfly_push_total{result=\"rejected_too_"
                                "large\"}"),
                 0);
}

Test(bounds, a_batch_past_max_bytes_under_drop_oldest_keeps_its_newest,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *body = numbered_push("recentb", NULL, 0, 10, 10 * 1024);
    int kept;

    itest_node_start(&n, "queue_max_bytes=64K");
    declare_drop_oldest(&n, "recentb", 0);
    itest_push_ok(&n, &r, "recentb", NULL, "[\"old\"]", 1);
    itest_resp_free(&r);
    itest_req(&n, "POST", PUSH, body, &r);
    cr_assert_eq(r.status, 201,
                 "100 KB into a dropOldest queue of 64 KB: "
                 "%ld %.200s",
                 r.status, r.body);
    cr_assert_eq(itest_jint(r.json, "pushed"), 10, "%.200s", r.body);
    itest_resp_free(&r);
    free(body);
    kept = (int)itest_depth_pending(&n, "recentb", NULL);
    cr_assert(kept >= 1 && kept <= 6, "kept %d of 10 KB in 64 KB", kept);
    cr_assert_leq(itest_listing_int(&n, "recentb", "bytes", -1), 65536 + 4096,
                  "the queue holds past its maxBytes");
    cr_assert_eq(itest_listing_int(&n, "recentb", "drops.bounds", -1),
                 1 + 10 - kept);
    itest_get(&n, &r,
              "/api/v1/ephemeral/pop?queue=recentb&batch=20&"
              "autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), kept, "%.200s", r.body);
    for (int i = 0; i < kept; i++) {
        char k[32];
        snprintf(k, sizeof(k), "messages.%d.payload", i);
        cr_assert_eq(payload_no(itest_jstr(r.json, k)), 10 - kept + i,
                     "message %d of the %d kept", i, kept);
    }
    itest_resp_free(&r);
}

Test(bounds, a_batch_past_the_node_cap_is_413_not_503, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *body = big_push("capped", 20, 64 * 1024);
    double before, unavailable;

    itest_node_start(&n, "max_bytes=1M");
    before = metric(&n, "mayfly_push_total{result=\"rejected_too_large\"}");
    unavailable = metric(&n, "mayfly_push_total{result=\"unavailable\"}");
    itest_req(&n, "POST", PUSH, body, &r);
    itest_assert_error(&r, 413, "payload_too_large", "max_bytes",
                       "1.3 MB on an empty node of 1 MiB");
    cr_expect(
        strstr(itest_jstr(r.json, "error"), "push: 20 messages of ") != NULL &&
            strstr(itest_jstr(r.json, "error"), "of its max_bytes 1048576") !=
                NULL,
        "%s", r.body);
    cr_assert_str_eq(r.retry_after, "", "%s", r.body);
    itest_resp_free(&r);
    free(body);
    cr_assert_eq(itest_depth_pending(&n, "capped", NULL), -1);
    cr_assert_eq(metric(&n, "mayfly_push_total{result=\"rejected_too_large\"}"),
                 before + 1);
    cr_assert_eq(metric(&n, "mayfly_push_total{result=\"unavailable\"}"),
                 unavailable);
    body = big_push("capped", 4, 64 * 1024);
    itest_req(&n, "POST", PUSH, body, &r);
    cr_assert_eq(r.status, 201, "256 KB: %ld %s", r.status, r.body);
    itest_resp_free(&r);
    free(body);
}
