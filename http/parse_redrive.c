/*
 * parse_redrive.c - the redrive body {"queue", "max"?} (SPEC §13), and the
 * dead letters it reads back: {"queue", "partition", "id", "attempts",
 * "reason", "payload"} as shm/dead.c writes them.  json-c, strict.  No
 * locking.  Errors: 0, -EINVAL, -ENOMEM (err filled for the body).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/errors.h"
#include "http/parse.h"
#include "http/parse_jsonc.h"

/* read_max - "max": absent, null or a positive integer. */
static int
read_max(struct json_object *root, struct http_pool *pool, void *out,
         struct http_error *err)
{
    struct http_redrive *r = out;
    struct json_object *v;

    (void)pool;
    if (http_jsonc_member(root, "max", "max", json_type_int,
                          "a positive integer", 0, &v, err) != 0)
        return -EINVAL;
    if (v == NULL)
        return 0;
    if (json_object_get_int64(v) <= 0) {
        http_error_set(err, 400, "ephemeral_bad_request",
                       "field 'max' must be a positive integer");
        return -EINVAL;
    }
    r->max = (uint64_t)json_object_get_int64(v);
    return 0;
}

/* http_parse_redrive - see parse.h. */
int
http_parse_redrive(const char *body, size_t len, struct http_redrive *out,
                   struct http_error *err)
{
    int rc;

    memset(out, 0, sizeof(*out));
    rc = http_jsonc_read(body, len, &out->queue, &out->mem, read_max, out, err);
    if (rc != 0)
        http_redrive_free(out);
    return rc;
}

/* http_redrive_free - release the strings. */
void
http_redrive_free(struct http_redrive *r)
{
    free(r->mem);
    memset(r, 0, sizeof(*r));
}

/* dup_str - o[key] when a non-empty string: a copy in *out. */
static int
dup_str(struct json_object *o, const char *key, char **out, size_t *len)
{
    struct json_object *v;

    if (!json_object_object_get_ex(o, key, &v) ||
        !json_object_is_type(v, json_type_string) ||
        json_object_get_string_len(v) <= 0)
        return -EINVAL;
    *len = (size_t)json_object_get_string_len(v);
    if ((*out = malloc(*len + 1)) == NULL)
        return -ENOMEM;
    memcpy(*out, json_object_get_string(v), *len + 1);
    return 0;
}

/* http_dead_letter_parse - see parse.h. */
int
http_dead_letter_parse(const char *msg, size_t len,
                       struct http_dead_letter *out)
{
    struct json_object *o = http_jsonc_object(msg, len), *p;
    const char *text;
    int rc;

    memset(out, 0, sizeof(*out));
    if (o == NULL)
        return -EINVAL;
    rc = dup_str(o, "queue", &out->queue, &out->queue_len);
    if (rc == 0)
        rc = dup_str(o, "partition", &out->partition, &out->partition_len);
    if (rc == 0 && !json_object_object_get_ex(o, "payload", &p))
        rc = -EINVAL;
    if (rc == 0) {
        text = json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN);
        out->payload_len = text != NULL ? strlen(text) : 0;
        if (text == NULL || (out->payload = strdup(text)) == NULL)
            rc = -ENOMEM;
    }
    json_object_put(o);
    return rc;
}

/* http_dead_letter_free - release what the parse copied. */
void
http_dead_letter_free(struct http_dead_letter *d)
{
    free(d->queue);
    free(d->partition);
    free(d->payload);
    memset(d, 0, sizeof(*d));
}
