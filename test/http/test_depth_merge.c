/*
 * test_depth_merge.c - http_depth_merge(): several nodes' depth answers
 * summed into the scope=cluster answer.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "http/depth_merge.h"

static const char a[] =
    "{\"queue\":\"q\",\"node\":\"a\",\"group\":null,\"tier\":\"implicit\","
    "\"pending\":5,\"partitionsPending\":2,\"bytes\":500,\"partitions\":["
    "{\"partition\":\"p1\",\"pending\":3,\"leased\":1,\"waiting\":0,"
    "\"bytes\":300,\"oldestAgeMs\":70},"
    "{\"partition\":\"p2\",\"pending\":2,\"leased\":0,\"waiting\":1,"
    "\"bytes\":200,\"oldestAgeMs\":10}],"
    "\"groups\":[{\"group\":\"g\",\"pending\":4,\"skipped\":0}]}";
static const char b[] =
    "{\"queue\":\"q\",\"node\":\"b\",\"group\":null,\"tier\":\"declared\","
    "\"pending\":1,\"partitionsPending\":1,\"bytes\":100,\"partitions\":["
    "{\"partition\":\"p1\",\"pending\":1,\"leased\":2,\"waiting\":3,"
    "\"bytes\":100,\"oldestAgeMs\":900},"
    "{\"partition\":\"p3\",\"pending\":0,\"leased\":0,\"waiting\":2,"
    "\"bytes\":0,\"oldestAgeMs\":0}],"
    "\"groups\":[{\"group\":\"g\",\"pending\":1,\"skipped\":2},"
    "{\"group\":\"h\",\"pending\":7,\"skipped\":0}]}";

static const char *const nodes[] = {"a", "b", "c"};
static const char *const missing[] = {"d"};

/* merge - a and b (and c: holds nothing) merged, answered by "a". */
static struct json_object *
merge(const char *x, const char *y)
{
    const char *body[] = {x, y};
    size_t len[] = {strlen(x), strlen(y)};
    struct http_shares s = {"a", body, len, 2, nodes, 3, missing, 1};
    struct http_buf out = {0};

    cr_assert_eq(http_depth_merge(&s, &out), 0);
    struct json_object *o = json_tokener_parse(out.data);
    cr_assert_not_null(o, "not JSON: %s", out.data);
    http_buf_free(&out);
    return o;
}

static int64_t
num(struct json_object *o, const char *key)
{
    struct json_object *v;

    cr_assert(json_object_object_get_ex(o, key, &v), "no %s", key);
    return json_object_get_int64(v);
}

static const char *
str(struct json_object *o, const char *key)
{
    struct json_object *v;

    cr_assert(json_object_object_get_ex(o, key, &v), "no %s", key);
    return json_object_get_string(v);
}

static struct json_object *
entry(struct json_object *o, const char *list, size_t i)
{
    struct json_object *l;

    cr_assert(json_object_object_get_ex(o, list, &l));
    cr_assert_lt(i, json_object_array_length(l));
    return json_object_array_get_idx(l, i);
}

Test(depth_merge, counts_add_and_names_merge_in_first_seen_order)
{
    struct json_object *o = merge(a, b), *l;

    cr_expect_str_eq(str(o, "queue"), "q");
    cr_expect_str_eq(str(o, "node"), "a");
    cr_expect_str_eq(str(o, "scope"), "cluster");
    cr_expect_eq(num(o, "pending"), 6);
    cr_expect_eq(num(o, "bytes"), 600);
    /* p1 and p2 pending, p3 not. */
    cr_expect_eq(num(o, "partitionsPending"), 2);
    json_object_object_get_ex(o, "partitions", &l);
    cr_assert_eq(json_object_array_length(l), 3);
    struct json_object *p1 = entry(o, "partitions", 0);
    cr_expect_str_eq(str(p1, "partition"), "p1");
    cr_expect_eq(num(p1, "pending"), 4);
    cr_expect_eq(num(p1, "leased"), 3);
    cr_expect_eq(num(p1, "waiting"), 3);
    cr_expect_eq(num(p1, "bytes"), 400);
    cr_expect_eq(num(p1, "oldestAgeMs"), 900, "the oldest of the two");
    cr_expect_str_eq(str(entry(o, "partitions", 1), "partition"), "p2");
    cr_expect_str_eq(str(entry(o, "partitions", 2), "partition"), "p3");
    struct json_object *g = entry(o, "groups", 0);
    cr_expect_str_eq(str(g, "group"), "g");
    cr_expect_eq(num(g, "pending"), 5);
    cr_expect_eq(num(g, "skipped"), 2);
    cr_expect_str_eq(str(entry(o, "groups", 1), "group"), "h");
    json_object_put(o);
}

Test(depth_merge, declared_anywhere_is_declared_and_nodes_are_listed)
{
    struct json_object *o = merge(a, b), *v;

    cr_expect_str_eq(str(o, "tier"), "declared");
    cr_expect(json_object_object_get_ex(o, "group", &v) && v == NULL,
              "group null as in the shares");
    cr_expect_str_eq(json_object_get_string(entry(o, "nodes", 2)), "c");
    cr_expect_str_eq(json_object_get_string(entry(o, "missing", 0)), "d");
    json_object_put(o);
    o = merge(a, a);
    cr_expect_str_eq(str(o, "tier"), "implicit");
    json_object_put(o);
}

Test(depth_merge, a_body_that_is_not_a_depth_answer_is_refused)
{
    const char *bad[] = {"{\"partitions\":[{\"pending\":1}]}", "[1,2]",
                         "{\"pending\":", "not json"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *body[] = {a, bad[i]};
        size_t len[] = {strlen(a), strlen(bad[i])};
        struct http_shares s = {"a", body, len, 2, nodes, 1, NULL, 0};
        struct http_buf out = {0};
        cr_expect_eq(http_depth_merge(&s, &out), -EINVAL, "%s", bad[i]);
        cr_expect_eq(out.len, 0, "nothing written for %s", bad[i]);
        http_buf_free(&out);
    }
}

Test(depth_merge, a_null_tier_is_not_declared)
{
    const char *x = "{\"queue\":\"q\",\"tier\":null,\"pending\":1}";
    struct json_object *o = merge(x, x);

    cr_expect_str_eq(str(o, "tier"), "implicit");
    cr_expect_eq(num(o, "pending"), 2);
    json_object_put(o);
}

Test(depth_merge, only_the_asked_nodes_share_of_the_queue_is_a_share)
{
    static const char none[] = "{\"error\":\"queue 'q' is not held\",\"code\":"
                               "\"ephemeral_queue_not_found\"}";

    cr_expect_eq(http_depth_answer(200, a, strlen(a), "q", 1, "a"),
                 HTTP_DEPTH_SHARE);
    cr_expect_eq(http_depth_answer(200, a, strlen(a), "q", 1, "b"),
                 HTTP_DEPTH_BAD, "another node answered");
    cr_expect_eq(http_depth_answer(200, a, strlen(a), "qq", 2, "a"),
                 HTTP_DEPTH_BAD, "another queue");
    cr_expect_eq(http_depth_answer(404, none, strlen(none), "q", 1, "a"),
                 HTTP_DEPTH_NONE);
    cr_expect_eq(
        http_depth_answer(404, "{\"code\":\"not_found\"}", 20, "q", 1, "a"),
        HTTP_DEPTH_BAD, "a route 404 is no answer");
    cr_expect_eq(http_depth_answer(503, none, strlen(none), "q", 1, "a"),
                 HTTP_DEPTH_BAD);
    cr_expect_eq(http_depth_answer(200, "<html>", 6, "q", 1, "a"),
                 HTTP_DEPTH_BAD);
    cr_expect_eq(
        http_depth_answer(200,
                          "{\"queue\":\"q\",\"node\":\"a\",\"pending\":1,"
                          "\"partitions\":[{\"pending\":1}]}",
                          65, "q", 1, "a"),
        HTTP_DEPTH_BAD, "a partition without a name");
}

Test(depth_merge, delayed_messages_add_up_per_partition_and_in_all)
{
    static const char x[] =
        "{\"queue\":\"q\",\"node\":\"a\",\"group\":null,\"tier\":\"implicit\","
        "\"pending\":0,\"delayed\":2,\"partitionsPending\":0,\"bytes\":20,"
        "\"partitions\":[{\"partition\":\"P\",\"pending\":0,\"leased\":0,"
        "\"waiting\":0,\"bytes\":20,\"oldestAgeMs\":0,\"delayed\":2}],"
        "\"groups\":[]}";
    static const char y[] =
        "{\"queue\":\"q\",\"node\":\"b\",\"group\":null,\"tier\":\"implicit\","
        "\"pending\":1,\"delayed\":1,\"partitionsPending\":1,\"bytes\":20,"
        "\"partitions\":[{\"partition\":\"P\",\"pending\":1,\"leased\":0,"
        "\"waiting\":0,\"bytes\":20,\"oldestAgeMs\":5,\"delayed\":1}],"
        "\"groups\":[]}";
    struct json_object *o = merge(x, y);

    /* SPEC §13: a delayed message shows in depth as "delayed" */
    cr_expect_eq(num(o, "delayed"), 3);
    cr_expect_eq(num(entry(o, "partitions", 0), "delayed"), 3);
    cr_expect_eq(num(o, "pending"), 1);
    json_object_put(o);
}
