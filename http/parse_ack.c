/*
 * parse_ack.c - the ack body: {"queue", "group"?, "acks": [entry, ...]},
 * "messages" taken for "acks" when "acks" is absent (SPEC §2).  An entry is
 * a bare id string, or an object with "id", "status"? and "attempts"?, and
 * anything else a popped message carries.  json-c, strict.  No locking.
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

/* ack_status - SPEC §2: absent and four words complete, "retry" retries,
 * any other string fails. */
static enum http_ack_status
ack_status(const char *s)
{
    static const char *const completed[] = {"completed", "success", "acked",
                                            "ok"};
    size_t i;

    for (i = 0; i < sizeof(completed) / sizeof(completed[0]); i++)
        if (strcmp(s, completed[i]) == 0)
            return HTTP_ACK_COMPLETED;
    return strcmp(s, "retry") == 0 ? HTTP_ACK_RETRY : HTTP_ACK_FAILED;
}

/* ack_entry_object - {"id", "status"?, "attempts"?, ...}. */
static int
ack_entry_object(struct json_object *o, const char *where,
                 struct http_pool *pool, struct http_ack_entry *e,
                 struct http_error *err)
{
    struct json_object *v = NULL;
    char field[64];
    uint64_t x;
    int have, rc;

    snprintf(field, sizeof(field), "%s.id", where);
    rc = http_jsonc_str(o, "id", field, 1, pool, &e->id, &have, err);
    if (rc != 0)
        return rc;
    if (json_object_object_get_ex(o, "status", &v) && v != NULL) {
        if (!json_object_is_type(v, json_type_string)) {
            http_error_set(err, 400, "ephemeral_bad_request",
                           "field '%s.status' must be a string", where);
            return -EINVAL;
        }
        e->status = ack_status(json_object_get_string(v));
    }
    if (json_object_object_get_ex(o, "attempts", &v) && v != NULL) {
        snprintf(field, sizeof(field), "%s.attempts", where);
        if ((rc = http_jsonc_uint(v, field, UINT32_MAX, "ephemeral_bad_request",
                                  &x, err)) != 0)
            return rc;
        e->has_attempts = 1;
        e->attempts = (uint32_t)x;
    }
    return 0;
}

/* ack_entries - fill a->entries from the array named key. */
static int
ack_entries(struct json_object *arr, const char *key, struct http_pool *pool,
            struct http_ack *a, struct http_error *err)
{
    size_t i, n = json_object_array_length(arr);
    char where[48];
    int rc;

    a->entries = calloc(n ? n : 1, sizeof(*a->entries));
    if (a->entries == NULL) {
        http_error_set(err, 500, "internal", "out of memory");
        return -ENOMEM;
    }
    for (i = 0; i < n; i++) {
        struct json_object *o = json_object_array_get_idx(arr, i);
        struct http_ack_entry *e = &a->entries[i];

        snprintf(where, sizeof(where), "%s[%zu]", key, i);
        e->status = HTTP_ACK_COMPLETED;
        if (json_object_is_type(o, json_type_string))
            rc = http_jsonc_copy(o, pool, &e->id, err);
        else if (json_object_is_type(o, json_type_object))
            rc = ack_entry_object(o, where, pool, e, err);
        else {
            http_error_set(err, 400, "ephemeral_bad_request",
                           "field '%s' must be an id string or an object",
                           where);
            rc = -EINVAL;
        }
        if (rc != 0)
            return rc;
        a->n++;
    }
    return 0;
}

/* http_parse_ack - see parse.h. */
int
http_parse_ack(const char *body, size_t len, struct http_ack *out,
               struct http_error *err)
{
    struct json_object *root, *arr;
    struct http_pool pool;
    const char *key = "acks";
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
    if (rc == 0) {
        if ((!json_object_object_get_ex(root, "acks", &arr) || arr == NULL) &&
            json_object_object_get_ex(root, "messages", &arr) && arr != NULL)
            key = "messages";
        rc = http_jsonc_array(root, key, key, &arr, err);
    }
    if (rc == 0)
        rc = ack_entries(arr, key, &pool, out, err);
    json_object_put(root);
    return rc;
}

/* http_ack_free - release entries and strings. */
void
http_ack_free(struct http_ack *a)
{
    free(a->entries);
    free(a->mem);
    memset(a, 0, sizeof(*a));
}
