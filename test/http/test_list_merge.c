/*
 * test_list_merge.c - http_list_merge(): several nodes' queue listings
 * merged into the scope=cluster listing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "http/list_merge.h"

static const char a[] =
    "{\"node\":\"a\",\"count\":2,\"cellBytes\":64,\"queues\":["
    "{\"queue\":\"q2\",\"tier\":\"implicit\",\"depth\":1,\"leased\":0,"
    "\"waiting\":1,\"bytes\":10,\"partitions\":1,\"groups\":1,"
    "\"drops\":{\"bounds\":1,\"ttl\":0,\"retry\":0},\"options\":{}},"
    "{\"queue\":\"q3\",\"tier\":\"implicit\",\"depth\":4,\"leased\":0,"
    "\"waiting\":0,\"bytes\":40,\"partitions\":1,\"groups\":0,"
    "\"drops\":{\"bounds\":0,\"ttl\":0,\"retry\":0},\"options\":{}}]}";
static const char b[] =
    "{\"node\":\"b\",\"count\":2,\"cellBytes\":64,\"queues\":["
    "{\"queue\":\"q1\",\"tier\":\"implicit\",\"depth\":7,\"leased\":0,"
    "\"waiting\":0,\"bytes\":70,\"partitions\":1,\"groups\":0,"
    "\"drops\":{\"bounds\":0,\"ttl\":0,\"retry\":0},\"options\":{}},"
    "{\"queue\":\"q2\",\"tier\":\"declared\",\"depth\":2,\"leased\":3,"
    "\"waiting\":0,\"bytes\":20,\"partitions\":2,\"groups\":3,"
    "\"drops\":{\"bounds\":0,\"ttl\":5,\"retry\":0},"
    "\"options\":{\"maxLength\":9}}]}";

static const char *const nodes[] = {"a", "b"};

static struct json_object *
merge(uint32_t limit)
{
    const char *body[] = {a, b};
    size_t len[] = {strlen(a), strlen(b)};
    struct http_shares s = {"a", body, len, 2, nodes, 2, NULL, 0};
    struct http_buf out = {0};

    cr_assert_eq(http_list_merge(&s, limit, &out), 0);
    struct json_object *o = json_tokener_parse(out.data);
    cr_assert_not_null(o, "not JSON: %s", out.data);
    http_buf_free(&out);
    return o;
}

static int64_t
num(struct json_object *o, const char *path)
{
    struct json_object *v = o;
    char buf[128], *save, *t;

    snprintf(buf, sizeof(buf), "%s", path);
    for (t = strtok_r(buf, ".", &save); t; t = strtok_r(NULL, ".", &save))
        if (json_object_is_type(v, json_type_array))
            v = json_object_array_get_idx(v, (size_t)atoi(t));
        else
            cr_assert(json_object_object_get_ex(v, t, &v), "no %s", path);
    return json_object_get_int64(v);
}

static const char *
name(struct json_object *o, int k)
{
    struct json_object *l, *v;

    json_object_object_get_ex(o, "queues", &l);
    json_object_object_get_ex(json_object_array_get_idx(l, (size_t)k), "queue",
                              &v);
    return json_object_get_string(v);
}

Test(list_merge, queues_of_one_name_merge_sorted_by_name)
{
    struct json_object *o = merge(1000), *l, *v;

    cr_expect_eq(num(o, "count"), 3);
    cr_expect_str_eq(name(o, 0), "q1");
    cr_expect_str_eq(name(o, 1), "q2");
    cr_expect_str_eq(name(o, 2), "q3");
    cr_expect_eq(num(o, "queues.1.depth"), 3);
    cr_expect_eq(num(o, "queues.1.leased"), 3);
    cr_expect_eq(num(o, "queues.1.waiting"), 1);
    cr_expect_eq(num(o, "queues.1.bytes"), 30);
    cr_expect_eq(num(o, "queues.1.partitions"), 3);
    cr_expect_eq(num(o, "queues.1.groups"), 3, "the most any node has");
    cr_expect_eq(num(o, "queues.1.drops.bounds"), 1);
    cr_expect_eq(num(o, "queues.1.drops.ttl"), 5);
    cr_expect_eq(num(o, "queues.1.options.maxLength"), 9,
                 "the declared entry's options");
    json_object_object_get_ex(o, "queues", &l);
    json_object_object_get_ex(json_object_array_get_idx(l, 1), "tier", &v);
    cr_expect_str_eq(json_object_get_string(v), "declared");
    json_object_put(o);
}

Test(list_merge, limit_cuts_the_merged_list)
{
    struct json_object *o = merge(2);

    cr_expect_eq(num(o, "count"), 2);
    cr_expect_str_eq(name(o, 0), "q1");
    cr_expect_str_eq(name(o, 1), "q2");
    json_object_put(o);
}

Test(list_merge, only_a_listing_from_the_asked_node_is_taken)
{
    cr_expect(http_list_answer_ok(200, a, strlen(a), "a"));
    cr_expect(!http_list_answer_ok(200, a, strlen(a), "b"));
    cr_expect(!http_list_answer_ok(503, a, strlen(a), "a"));
    cr_expect(!http_list_answer_ok(200, "{\"node\":\"a\"}", 12, "a"));
    cr_expect(!http_list_answer_ok(
        200, "{\"node\":\"a\",\"queues\":[{\"depth\":1}]}", 35, "a"));

    const char *body[] = {a, "[]"};
    size_t len[] = {strlen(a), 2};
    struct http_shares s = {"a", body, len, 2, nodes, 2, NULL, 0};
    struct http_buf out = {0};
    cr_expect_eq(http_list_merge(&s, 10, &out), -EINVAL);
    cr_expect_eq(out.len, 0);
    http_buf_free(&out);
}
