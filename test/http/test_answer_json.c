/*
 * test_answer_json.c - http/answer_json.h: the /health body and a queue's
 * options, written byte for byte as a worker and its master answer them.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "http/answer_json.h"
#include "http/buf.h"

/* text - b's bytes as a C string (for the comparisons). */
static const char *
text(struct http_buf *b)
{
    http_buf_append(b, "", 1);
    cr_assert_not(b->oom);
    return b->data;
}

Test(answer_json, health_of_a_ready_node_with_members)
{
    static const struct http_health_member mm[] = {
        {"a", 1, "live", 1, 0},
        {"b\"", 2, "leaving", 0, 1},
    };
    struct http_health h = {
        .status = "ok",
        .ready = 1,
        .node = "a",
        .incarnation = 0xabc,
        .role = "leader",
        .term = 7,
        .leader = "a",
        .members = mm,
        .nmembers = 2,
    };
    struct http_buf b = {0};

    cr_assert_eq(http_health_json(&b, &h), 200);
    cr_assert_str_eq(text(&b),
                     "{\"status\":\"ok\",\"node\":\"a\",\"incarnation\":"
                     "\"0000000000000abc\",\"ready\":true,\"role\":\"leader\","
                     "\"term\":7,\"leader\":\"a\",\"members\":["
                     "{\"node\":\"a\",\"state\":\"live\",\"self\":true},"
                     "{\"node\":\"b\\\"\",\"state\":\"leaving\",\"self\":"
                     "false,\"suspect\":true}]}");
    http_buf_free(&b);
}

Test(answer_json, health_of_a_draining_node_without_leader_is_503)
{
    struct http_health h = {
        .status = "draining",
        .node = "n",
        .role = "follower",
        .leader = "",
    };
    struct http_buf b = {0};

    cr_assert_eq(http_health_json(&b, &h), 503);
    cr_assert_str_eq(text(&b),
                     "{\"status\":\"draining\",\"node\":\"n\",\"incarnation\":"
                     "\"0000000000000000\",\"ready\":false,\"role\":"
                     "\"follower\",\"term\":0,\"leader\":null,\"members\":[]}");
    http_buf_free(&b);
}

Test(answer_json, options_every_one)
{
    struct http_qopts o = {10, 1 << 20, 1,   50,   8, 60, 30,
                           5,  120,     500, NULL, 0, 0,  0};
    struct http_buf b = {0};

    http_options_json(&b, &o);
    cr_assert_str_eq(text(&b),
                     "{\"maxLength\":10,\"maxBytes\":1048576,\"policy\":"
                     "\"dropOldest\",\"windowBuffer\":{\"ms\":50,\"count\":8},"
                     "\"ttlSeconds\":60,\"leaseSeconds\":30,\"retryLimit\":5,"
                     "\"dedupeSeconds\":120,\"retryDelayMs\":500,"
                     "\"deadLetter\":null,\"deadLetterExpired\":false,"
                     "\"conflate\":false}");
    b.len = 0;
    o.drop_oldest = 0;
    http_options_json(&b, &o);
    cr_assert(strstr(text(&b), "\"policy\":\"reject\"") != NULL, "%s", b.data);
    b.len = 0;
    o.dead_letter = "dl \"x\"";
    o.dl_len = 6;
    o.dl_expired = 1;
    o.conflate = 1;
    http_options_json(&b, &o);
    cr_assert(strstr(text(&b), "\"deadLetter\":\"dl \\\"x\\\"\","
                               "\"deadLetterExpired\":true,"
                               "\"conflate\":true}") != NULL,
              "%s", b.data);
    http_buf_free(&b);
}
