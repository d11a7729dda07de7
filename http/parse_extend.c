/*
 * parse_extend.c - the extend body: {"queue", "group"?, "messages":
 * [{"id", "attempts"?, "seconds"}, ...]}.  json-c, strict.  No locking.
 * Errors: 0, -EINVAL, -ENOMEM with err filled.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/errors.h"
#include "http/parse.h"
#include "http/parse_jsonc.h"

/* extend_entry - one {"id", "attempts"?, "seconds"} at messages[i]. */
static int
extend_entry(struct json_object *o, size_t i, struct http_pool *pool,
             struct http_extend_entry *e, struct http_error *err)
{
    struct json_object *v = NULL;
    char field[64];
    uint64_t x;
    int have, rc;

    if (!json_object_is_type(o, json_type_object)) {
        http_error_set(err, 400, "ephemeral_bad_request",
                       "field 'messages[%zu]' must be an object", i);
        return -EINVAL;
    }
    snprintf(field, sizeof(field), "messages[%zu].id", i);
    if ((rc = http_jsonc_str(o, "id", field, 1, pool, &e->id, &have, err)))
        return rc;
    if (json_object_object_get_ex(o, "attempts", &v) && v != NULL) {
        snprintf(field, sizeof(field), "messages[%zu].attempts", i);
        if ((rc = http_jsonc_uint(v, field, UINT32_MAX, "ephemeral_bad_request",
                                  &x, err)))
            return rc;
        e->has_attempts = 1;
        e->attempts = (uint32_t)x;
    }
    snprintf(field, sizeof(field), "messages[%zu].seconds", i);
    if (!json_object_object_get_ex(o, "seconds", &v) || v == NULL) {
        http_error_set(err, 400, "ephemeral_bad_request",
                       "field '%s' is required", field);
        return -EINVAL;
    }
    if ((rc = http_jsonc_uint(v, field, HTTP_LEASE_MAX_S,
                              "ephemeral_bad_request", &x, err)))
        return rc;
    e->seconds = (uint32_t)x;
    return 0;
}

/* http_parse_extend - see parse.h. */
int
http_parse_extend(const char *body, size_t len, struct http_extend *out,
                  struct http_error *err)
{
    struct json_object *root, *arr = NULL;
    struct http_pool pool;
    size_t i, n;
    int have, rc;

    memset(out, 0, sizeof(*out));
    if ((rc = http_jsonc_parse(body, len, &root, &pool, err)) != 0)
        return rc;
    out->mem = pool.mem;
    rc = http_jsonc_str(root, "queue", "queue", 1, &pool, &out->queue, &have,
                        err);
    if (rc == 0)
        rc = http_jsonc_str(root, "group", "group", 0, &pool, &out->group,
                            &out->has_group, err);
    if (rc == 0)
        rc = http_jsonc_array(root, "messages", "messages", &arr, err);
    if (rc != 0)
        goto out;
    n = json_object_array_length(arr);
    out->entries = calloc(n ? n : 1, sizeof(*out->entries));
    if (out->entries == NULL) {
        http_error_set(err, 500, "internal", "out of memory");
        rc = -ENOMEM;
        goto out;
    }
    for (i = 0; i < n && rc == 0; i++) {
        rc = extend_entry(json_object_array_get_idx(arr, i), i, &pool,
                          &out->entries[i], err);
        out->n += rc == 0;
    }
out:
    json_object_put(root);
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
