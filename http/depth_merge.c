/*
 * depth_merge.c - see depth_merge.h.
 *
 * The shares are small (one entry per partition and group of one queue on
 * one node), so they are parsed with json-c and merged in json-c objects
 * keyed by name, which keep insertion order: the merged lists come out in
 * the order the names were first seen.
 */
#include "http/depth_merge.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "http/parse_jsonc.h"

/* The counters of a partition entry and of a group entry that add up. */
static const char *const part_sums[] = {"pending", "leased", "waiting", "bytes",
                                        "delayed"};
static const char *const group_sums[] = {"pending", "skipped"};

/*
 * fold - add the entries of list (an array of objects named by name_key)
 * into acc (name -> merged entry): the sums add, "oldestAgeMs" keeps the
 * largest.  -EINVAL for an entry without a string name, -ENOMEM.
 */
static int
fold(struct json_object *acc, struct json_object *list, const char *name_key,
     const char *const *sums, size_t nsums)
{
    size_t n = json_object_is_type(list, json_type_array)
                   ? json_object_array_length(list)
                   : 0;

    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(list, i), *name, *m;
        if (!json_object_object_get_ex(e, name_key, &name) ||
            !json_object_is_type(name, json_type_string))
            return -EINVAL;
        const char *key = json_object_get_string(name);
        if (!json_object_object_get_ex(acc, key, &m)) {
            int rc = http_jsonc_set(acc, key, m = json_object_new_object());
            if (rc == 0)
                rc = http_jsonc_set(m, name_key, json_object_get(name));
            for (size_t k = 0; k < nsums && rc == 0; k++)
                rc = http_jsonc_set(m, sums[k], json_object_new_uint64(0));
            if (rc != 0)
                return rc;
        }
        for (size_t k = 0; k < nsums; k++) {
            struct json_object *v;
            json_object_object_get_ex(m, sums[k], &v);
            json_object_set_uint64(v, json_object_get_uint64(v) +
                                          http_jsonc_count(e, sums[k]));
        }
        if (json_object_object_get_ex(e, "oldestAgeMs", NULL)) {
            uint64_t age = http_jsonc_count(e, "oldestAgeMs");
            struct json_object *v;
            if (!json_object_object_get_ex(m, "oldestAgeMs", &v)) {
                if (http_jsonc_set(m, "oldestAgeMs",
                                   json_object_new_uint64(age)) != 0)
                    return -ENOMEM;
            } else if (age > json_object_get_uint64(v))
                json_object_set_uint64(v, age);
        }
    }
    return 0;
}

/* named_list - obj[key] is absent or an array of objects each with a string
 * at name_key (what fold() takes). */
static int
named_list(struct json_object *obj, const char *key, const char *name_key)
{
    struct json_object *l, *e, *name;

    if (!json_object_object_get_ex(obj, key, &l))
        return 1;
    if (!json_object_is_type(l, json_type_array))
        return 0;
    for (size_t i = 0; i < json_object_array_length(l); i++) {
        e = json_object_array_get_idx(l, i);
        if (!json_object_object_get_ex(e, name_key, &name) ||
            !json_object_is_type(name, json_type_string))
            return 0;
    }
    return 1;
}

/* str_is - obj[key] is a string of s[0..n). */
static int
str_is(struct json_object *obj, const char *key, const char *s, size_t n)
{
    struct json_object *v;

    return json_object_object_get_ex(obj, key, &v) &&
           json_object_is_type(v, json_type_string) &&
           (size_t)json_object_get_string_len(v) == n &&
           memcmp(json_object_get_string(v), s, n) == 0;
}

/* http_depth_answer - see depth_merge.h. */
enum http_depth_answer
http_depth_answer(unsigned status, const char *body, size_t len,
                  const char *queue, size_t qlen, const char *node)
{
    struct json_object *o, *v;
    enum http_depth_answer a = HTTP_DEPTH_BAD;

    if ((status != 200 && status != 404) ||
        (o = http_jsonc_object(body, len)) == NULL)
        return HTTP_DEPTH_BAD;
    if (status == 404 && str_is(o, "code", "ephemeral_queue_not_found",
                                strlen("ephemeral_queue_not_found")))
        a = HTTP_DEPTH_NONE;
    else if (status == 200 && str_is(o, "queue", queue, qlen) &&
             str_is(o, "node", node, strlen(node)) &&
             json_object_object_get_ex(o, "pending", &v) &&
             json_object_is_type(v, json_type_int) &&
             named_list(o, "partitions", "partition") &&
             named_list(o, "groups", "group"))
        a = HTTP_DEPTH_SHARE;
    json_object_put(o);
    return a;
}

/* put_list - acc's merged entries as a JSON array into out. */
static void
put_list(struct http_buf *out, struct json_object *acc)
{
    int first = 1;

    http_buf_append_str(out, "[");
    json_object_object_foreach(acc, key, e)
    {
        (void)key;
        const char *j = json_object_to_json_string_ext(
            e, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        http_buf_append_str(out, first ? "" : ",");
        if (j == NULL)
            out->oom = 1; /* what a failed append would say */
        else
            http_buf_append_str(out, j);
        first = 0;
    }
    http_buf_append_str(out, "]");
}

/* put_str - obj[key] (a string, or null) as JSON into out. */
static void
put_str(struct http_buf *out, struct json_object *obj, const char *key)
{
    struct json_object *v;

    if (json_object_object_get_ex(obj, key, &v) &&
        json_object_is_type(v, json_type_string))
        http_buf_append_json_str(out, json_object_get_string(v),
                                 (size_t)json_object_get_string_len(v));
    else
        http_buf_append_str(out, "null");
}

int
http_depth_merge(const struct http_shares *s, struct http_buf *out)
{
    struct json_object *first = NULL, *parts = json_object_new_object(),
                       *groups = json_object_new_object(), *v;
    uint64_t pending = 0, delayed = 0, bytes = 0, pp = 0;
    int declared = 0, rc = parts && groups ? 0 : -ENOMEM;

    for (int i = 0; i < s->n && rc == 0; i++) {
        struct json_object *o = http_jsonc_object(s->body[i], s->len[i]);
        if (o == NULL) {
            rc = -EINVAL;
            break;
        }
        pending += http_jsonc_count(o, "pending");
        delayed += http_jsonc_count(o, "delayed");
        bytes += http_jsonc_count(o, "bytes");
        declared |= json_object_object_get_ex(o, "tier", &v) &&
                    json_object_is_type(v, json_type_string) &&
                    strcmp(json_object_get_string(v), "declared") == 0;
        if (json_object_object_get_ex(o, "partitions", &v))
            rc = fold(parts, v, "partition", part_sums,
                      sizeof(part_sums) / sizeof(part_sums[0]));
        if (rc == 0 && json_object_object_get_ex(o, "groups", &v))
            rc = fold(groups, v, "group", group_sums,
                      sizeof(group_sums) / sizeof(group_sums[0]));
        if (first == NULL)
            first = o;
        else
            json_object_put(o);
    }
    if (rc == 0) {
        json_object_object_foreach(parts, name, e)
        {
            (void)name;
            pp += http_jsonc_count(e, "pending") > 0;
        }
        http_buf_append_str(out, "{\"queue\":");
        put_str(out, first, "queue");
        http_buf_append_str(out, ",\"node\":");
        http_buf_append_json_str(out, s->node, strlen(s->node));
        http_buf_append_str(out, ",\"scope\":\"cluster\",\"group\":");
        put_str(out, first, "group");
        http_buf_printf(out,
                        ",\"tier\":\"%s\",\"pending\":%llu,"
                        "\"delayed\":%llu,\"partitionsPending\":%llu,"
                        "\"bytes\":%llu,\"partitions\":",
                        declared ? "declared" : "implicit",
                        (unsigned long long)pending,
                        (unsigned long long)delayed, (unsigned long long)pp,
                        (unsigned long long)bytes);
        put_list(out, parts);
        http_buf_append_str(out, ",\"groups\":");
        put_list(out, groups);
        rc = http_shares_close(s, out);
    }
    json_object_put(first);
    json_object_put(parts);
    json_object_put(groups);
    return rc;
}
