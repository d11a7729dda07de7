/*
 * parse_extend.c - the extend body: {"queue", "group"?, "messages":
 * [{"id", "attempts"?, "seconds"}, ...]}.  json-c, strict.  No locking.
 * Errors: 0, -EINVAL, -ENOMEM with err filled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/parse.h"
#include "http/parse_error.h"
#include "http/parse_jsonc.h"

/* extend_entry - one {"id", "attempts"?, "seconds"} at messages[i]. */
static int
extend_entry(struct json_object *o, size_t i, struct http_pool *pool,
             struct http_extend_entry *e, struct http_error *err)
{
    char field[64];
    uint64_t x;
    int have, rc;

    if (!json_object_is_type(o, json_type_object))
        return http_parse_bad(err, "field 'messages[%zu]' must be an object",
                              i);
    snprintf(field, sizeof(field), "messages[%zu].id", i);
    if ((rc = http_jsonc_str(o, "id", field, 1, pool, &e->id, &have, err)))
        return rc;
    snprintf(field, sizeof(field), "messages[%zu].attempts", i);
    if ((rc = http_jsonc_uint(o, "attempts", field, 0, UINT32_MAX, &x,
                              &e->has_attempts, err)))
        return rc;
    e->attempts = (uint32_t)x;
    snprintf(field, sizeof(field), "messages[%zu].seconds", i);
    if ((rc = http_jsonc_uint(o, "seconds", field, 1, HTTP_LEASE_MAX_S, &x,
                              &have, err)))
        return rc;
    e->seconds = (uint32_t)x;
    return 0;
}

/* read_members - the members after "queue": "group"? and "messages", of
 * root into out (a struct http_extend), the strings into pool. */
static int
read_members(struct json_object *root, struct http_pool *pool, void *out,
             struct http_error *err)
{
    struct http_extend *e = out;
    struct json_object *arr;
    size_t i, n;
    int rc;

    if ((rc = http_jsonc_str(root, "group", "group", 0, pool, &e->group,
                             &e->has_group, err)) != 0 ||
        (rc = http_jsonc_array(root, "messages", "messages", &arr, err)) != 0)
        return rc;
    n = json_object_array_length(arr);
    e->entries = calloc(n ? n : 1, sizeof(*e->entries));
    if (e->entries == NULL)
        return http_parse_oom(err);
    for (i = 0; i < n; i++) {
        rc = extend_entry(json_object_array_get_idx(arr, i), i, pool,
                          &e->entries[i], err);
        if (rc != 0)
            return rc;
        e->n++;
    }
    return 0;
}

/* http_parse_extend - see parse.h. */
int
http_parse_extend(const char *body, size_t len, struct http_extend *out,
                  struct http_error *err)
{
    int rc;

    memset(out, 0, sizeof(*out));
    rc = http_jsonc_read(body, len, &out->queue, &out->mem, read_members, out,
                         err);
    if (rc != 0)
        http_extend_free(out);
    return rc;
}

/* http_extend_free - release entries and strings. */
void
http_extend_free(struct http_extend *e)
{
    free(e->entries);
    free(e->mem);
    memset(e, 0, sizeof(*e));
}
