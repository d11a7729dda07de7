/*
 * test_replies.c - the hand-built answers of push, pop and ack (written
 * through raw pointers into one reservation, ids sharing a prefix) are
 * strict JSON and say the right thing when partition names need escaping,
 * when one pop answer spans partitions, and when an ack echoes such ids.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "http/ids.h"
#include "http/json_scan.h"
#include "test/integration/node.h"

#define POP "/api/v1/ephemeral/pop"
#define ACK "/api/v1/ephemeral/ack"

/* Partition names whose JSON form needs escapes ('"', '\\'), and others. */
static const char *const parts[] = {"a\"b", "c\\d", "Default", "e/f:\xc3\xa9"};
#define NPARTS (sizeof(parts) / sizeof(parts[0]))

/* strict - the answer is RFC 8259 JSON, as the scanner sees it. */
static void
strict(const struct itest_resp *r)
{
    cr_assert(http_json_valid(r->body, r->len), "not strict JSON: %s", r->body);
}

/* id_is - id names partition part, sequence seq (when seq_out is NULL),
 * and incarnation *inc (set by the first id looked at, *inc_set). */
static void
id_is(const char *id, const char *part, uint64_t *inc, int *inc_set,
      uint64_t *seq_out)
{
    uint64_t i, s;
    const char *p;
    size_t plen;

    cr_assert_eq(http_id_parse(id, strlen(id), &i, &p, &plen, &s), 0,
                 "not an id: %s", id);
    cr_assert_eq(plen, strlen(part), "id %s vs partition %s", id, part);
    cr_assert(memcmp(p, part, plen) == 0, "id %s vs partition %s", id, part);
    cr_assert_eq(strspn(id + 2, "0123456789abcdef"), 16,
                 "head not 16 lower-case hex digits: %s", id);
    if (*inc_set)
        cr_assert_eq(i, *inc, "two incarnations: %s", id);
    *inc = i;
    *inc_set = 1;
    *seq_out = s;
}

Test(replies, push_ids_carry_escaped_partitions_in_push_order, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    uint64_t inc = 0, seq, first = 0;
    int inc_set = 0;

    itest_node_start(&n, NULL);
    for (size_t k = 0; k < NPARTS; k++) {
        cr_assert_eq(itest_push(&n, &r, "esc", parts[k], "[1,2,3,4,5,6,7]"),
                     201, "%s", r.body);
        strict(&r);
        cr_assert_eq(itest_jint(r.json, "pushed"), 7, "%s", r.body);
        cr_assert_eq(itest_jlen(r.json, "ids"), 7, "%s", r.body);
        for (int i = 0; i < 7; i++) {
            char path[16];

            snprintf(path, sizeof(path), "ids.%d", i);
            id_is(itest_jstr(r.json, path), parts[k], &inc, &inc_set, &seq);
            if (i == 0)
                first = seq;
            cr_assert_eq(seq, first + (uint64_t)i, "%s", r.body);
        }
        itest_resp_free(&r);
    }
}

/* One pop without a partition takes from every partition: each message's
 * id names its own partition, escaped as its "partition" is. */
Test(replies, one_pop_across_partitions_names_each_message_partition,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, a;
    char body[8192];
    size_t o;
    uint64_t inc = 0, seq;
    int inc_set = 0, seen[NPARTS] = {0};

    itest_node_start(&n, NULL);
    for (size_t k = 0; k < NPARTS; k++) {
        char payloads[64];

        snprintf(payloads, sizeof(payloads), "[{\"k\":%zu},{\"k\":%zu}]", k, k);
        cr_assert_eq(itest_push(&n, &r, "span", parts[k], payloads), 201, "%s",
                     r.body);
        itest_resp_free(&r);
    }
    itest_get(&n, &r, POP "?queue=span&group=g&batch=100");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    strict(&r);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "span", "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), 2 * (int)NPARTS, "%s", r.body);
    o = (size_t)snprintf(body, sizeof(body),
                         "{\"queue\":\"span\",\"group\":\"g\",\"acks\":[");
    for (int i = 0; i < 2 * (int)NPARTS; i++) {
        char path[32];
        const char *part;
        size_t k;

        snprintf(path, sizeof(path), "messages.%d.partition", i);
        part = itest_jstr(r.json, path);
        for (k = 0; k < NPARTS && strcmp(part, parts[k]) != 0; k++)
            ;
        cr_assert_lt(k, NPARTS, "unknown partition '%s': %s", part, r.body);
        seen[k]++;
        snprintf(path, sizeof(path), "messages.%d.payload.k", i);
        cr_assert_eq(itest_jint(r.json, path), (int64_t)k, "%s", r.body);
        snprintf(path, sizeof(path), "messages.%d.attempts", i);
        cr_assert_eq(itest_jint(r.json, path), 1, "%s", r.body);
        snprintf(path, sizeof(path), "messages.%d.id", i);
        id_is(itest_jstr(r.json, path), part, &inc, &inc_set, &seq);
        /* the popped object goes back as it is */
        snprintf(path, sizeof(path), "messages.%d", i);
        o += (size_t)snprintf(
            body + o, sizeof(body) - o, "%s%s", i ? "," : "",
            json_object_to_json_string_ext(itest_jget(r.json, path),
                                           JSON_C_TO_STRING_PLAIN));
    }
    for (size_t k = 0; k < NPARTS; k++)
        cr_assert_eq(seen[k], 2, "partition '%s' %d times: %s", parts[k],
                     seen[k], r.body);
    snprintf(body + o, sizeof(body) - o, "]}");
    /* the ack answer echoes each id, escaped again, in request order */
    itest_req(&n, "POST", ACK, body, &a);
    cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
    strict(&a);
    cr_assert_eq(itest_jlen(a.json, "results"), 2 * (int)NPARTS, "%s", a.body);
    for (int i = 0; i < 2 * (int)NPARTS; i++) {
        char path[32], want[32];

        snprintf(path, sizeof(path), "results.%d.id", i);
        snprintf(want, sizeof(want), "messages.%d.id", i);
        cr_assert_str_eq(itest_jstr(a.json, path), itest_jstr(r.json, want),
                         "%s", a.body);
        snprintf(path, sizeof(path), "results.%d.outcome", i);
        cr_assert_str_eq(itest_jstr(a.json, path), "acked", "%s", a.body);
    }
    itest_resp_free(&a);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "span", "g"), 0);
}

/* An ack of ids no delivery made still echoes them byte for byte, escapes
 * and all, with the dropped flag only where a drop happened. */
Test(replies, ack_echoes_ids_that_need_escaping, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp a;

    itest_node_start(&n, NULL);
    itest_req(&n, "POST", ACK,
              "{\"queue\":\"echo\",\"acks\":[\"e:1:q\\\"x:1\","
              "\"e:1:q\\\\y:2\",\"e:1:q\\u00e9:3\"]}",
              &a);
    cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
    strict(&a);
    cr_assert_str_eq(itest_jstr(a.json, "results.0.id"), "e:1:q\"x:1", "%s",
                     a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.1.id"), "e:1:q\\y:2", "%s",
                     a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.2.id"), "e:1:q\xc3\xa9:3",
                     "%s", a.body);
    cr_assert(strstr(a.body, "dropped") == NULL, "%s", a.body);
    itest_resp_free(&a);
}
