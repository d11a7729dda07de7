/*
 * list_merge.c - see list_merge.h.
 *
 * Entries are merged in a json-c object keyed by queue name (a hash), then
 * sorted by name once.  Listings are bounded by their limit (100,000 at
 * most), so this is an administrator's call, not a hot path.
 */
#include "http/list_merge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/parse_jsonc.h"

/* The counts of an entry that add up, and those inside "drops". */
static const char *const sums[] = {"depth", "leased", "waiting", "bytes",
                                   "partitions"};
static const char *const drop_sums[] = {"bounds", "ttl", "retry"};

/* queues - o's "queues" array when every entry has a string "queue". */
static struct json_object *
queues(struct json_object *o)
{
    struct json_object *l, *name;

    if (!json_object_object_get_ex(o, "queues", &l) ||
        !json_object_is_type(l, json_type_array))
        return NULL;
    for (size_t i = 0; i < json_object_array_length(l); i++)
        if (!json_object_object_get_ex(json_object_array_get_idx(l, i), "queue",
                                       &name) ||
            !json_object_is_type(name, json_type_string))
            return NULL;
    return l;
}

/* http_list_answer_ok - see list_merge.h. */
int
http_list_answer_ok(unsigned status, const char *body, size_t len,
                    const char *node)
{
    struct json_object *o, *v;
    int ok;

    if (status != 200 || (o = http_jsonc_object(body, len)) == NULL)
        return 0;
    ok = json_object_object_get_ex(o, "node", &v) &&
         json_object_is_type(v, json_type_string) &&
         strcmp(json_object_get_string(v), node) == 0 && queues(o) != NULL;
    json_object_put(o);
    return ok;
}

/* add - m[key] += n (m[key] a number; set when absent).  0/-ENOMEM. */
static int
add(struct json_object *m, const char *key, uint64_t n)
{
    struct json_object *v;

    if (json_object_object_get_ex(m, key, &v) &&
        json_object_is_type(v, json_type_int)) {
        json_object_set_uint64(v, json_object_get_uint64(v) + n);
        return 0;
    }
    return http_jsonc_set(m, key, json_object_new_uint64(n));
}

/* declared - e's tier is "declared". */
static int
declared(struct json_object *e)
{
    struct json_object *v;

    return json_object_object_get_ex(e, "tier", &v) &&
           json_object_is_type(v, json_type_string) &&
           strcmp(json_object_get_string(v), "declared") == 0;
}

/* fold - add entry e (another node's) into merged entry m.  0/-ENOMEM. */
static int
fold(struct json_object *m, struct json_object *e)
{
    struct json_object *d, *md, *v;
    int rc = 0;

    for (size_t k = 0; k < sizeof(sums) / sizeof(sums[0]); k++)
        rc |= add(m, sums[k], http_jsonc_count(e, sums[k]));
    if (http_jsonc_count(e, "groups") > http_jsonc_count(m, "groups"))
        rc |= http_jsonc_set(
            m, "groups", json_object_new_uint64(http_jsonc_count(e, "groups")));
    if (json_object_object_get_ex(e, "drops", &d) &&
        json_object_object_get_ex(m, "drops", &md) &&
        json_object_is_type(md, json_type_object))
        for (size_t k = 0; k < sizeof(drop_sums) / sizeof(drop_sums[0]); k++)
            rc |= add(md, drop_sums[k], http_jsonc_count(d, drop_sums[k]));
    if (declared(e) && !declared(m)) {
        rc |= http_jsonc_set(m, "tier", json_object_new_string("declared"));
        if (json_object_object_get_ex(e, "options", &v))
            rc |= http_jsonc_set(m, "options", json_object_get(v));
    }
    return rc ? -ENOMEM : 0;
}

/* by_name - qsort order of merged entries: their queue names. */
static int
by_name(const void *a, const void *b)
{
    struct json_object *const *x = a, *const *y = b, *nx, *ny;

    json_object_object_get_ex(*x, "queue", &nx);
    json_object_object_get_ex(*y, "queue", &ny);
    return strcmp(json_object_get_string(nx), json_object_get_string(ny));
}

/* http_list_merge - see list_merge.h. */
int
http_list_merge(const struct http_shares *s, uint32_t limit,
                struct http_buf *out)
{
    struct json_object *acc = json_object_new_object(), *first = NULL, *l, *m;
    struct json_object **sorted = NULL;
    size_t n = 0;
    int rc = acc ? 0 : -ENOMEM, cut = 0;

    for (int i = 0; i < s->n && rc == 0; i++) {
        struct json_object *o = http_jsonc_object(s->body[i], s->len[i]), *t;
        if (o == NULL || (l = queues(o)) == NULL) {
            json_object_put(o);
            rc = -EINVAL;
            break;
        }
        cut |= json_object_object_get_ex(o, "truncated", &t) &&
               json_object_get_boolean(t);
        for (size_t k = 0; k < json_object_array_length(l); k++) {
            struct json_object *e = json_object_array_get_idx(l, k), *name;
            json_object_object_get_ex(e, "queue", &name);
            if (json_object_object_get_ex(acc, json_object_get_string(name),
                                          &m))
                rc = fold(m, e);
            else
                rc = http_jsonc_set(acc, json_object_get_string(name),
                                    json_object_get(e));
            if (rc != 0)
                break;
        }
        if (first == NULL)
            first = o;
        else
            json_object_put(o);
    }
    if (rc == 0 && (sorted = calloc((size_t)json_object_object_length(acc) + 1,
                                    sizeof(*sorted))) == NULL)
        rc = -ENOMEM;
    if (rc == 0) {
        json_object_object_foreach(acc, name, e)
        {
            (void)name;
            sorted[n++] = e;
        }
        qsort(sorted, n, sizeof(*sorted), by_name);
        cut |= n > limit;
        if (n > limit)
            n = limit;
        http_buf_append_str(out, "{\"node\":");
        http_buf_append_json_str(out, s->node, strlen(s->node));
        http_buf_printf(
            out,
            ",\"scope\":\"cluster\",\"count\":%zu,\"cellBytes\":%llu"
            ",\"queues\":[",
            n, (unsigned long long)http_jsonc_count(first, "cellBytes"));
        for (size_t i = 0; i < n && rc == 0; i++) {
            const char *js = json_object_to_json_string_ext(
                sorted[i],
                JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
            http_buf_append_str(out, i ? "," : "");
            if (js == NULL)
                rc = -ENOMEM;
            else
                http_buf_append_str(out, js);
        }
        http_buf_append_str(out, "],\"truncated\":");
        http_buf_append_str(out, cut && n > 0 ? "true" : "false");
        if (cut && n > 0) {
            struct json_object *last;
            json_object_object_get_ex(sorted[n - 1], "queue", &last);
            http_buf_append_str(out, ",\"next\":");
            http_buf_append_json_str(out, json_object_get_string(last),
                                     (size_t)json_object_get_string_len(last));
        }
        if (rc == 0)
            rc = http_shares_close(s, out);
    }
    free(sorted);
    json_object_put(first);
    json_object_put(acc);
    return rc;
}
