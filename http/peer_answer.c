/*
 * peer_answer.c - see peer_answer.h.
 */
#include "http/peer_answer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/parse_jsonc.h"

/* object_of - body as one JSON object, or NULL (an empty answer has no
 * body at all). */
static struct json_object *
object_of(const char *body, size_t len)
{
    return body != NULL ? http_jsonc_object(body, len) : NULL;
}

/* dup_or_null - a copy of s (NULL stays NULL); -ENOMEM in *rc when the
 * copy fails. */
static char *
dup_or_null(const char *s, int *rc)
{
    char *d = s != NULL ? strdup(s) : NULL;

    if (s != NULL && d == NULL)
        *rc = -ENOMEM;
    return d;
}

/* take_ack - entry e of the results into a (zeroed, replied -1). */
static int
take_ack(struct json_object *e, struct http_peer_ack *a)
{
    struct json_object *v;
    int rc = 0;

    if (json_object_object_get_ex(e, "outcome", &v))
        a->outcome = dup_or_null(json_object_get_string(v), &rc);
    a->dropped = json_object_object_get_ex(e, "dropped", &v) &&
                 json_object_get_boolean(v);
    if (json_object_object_get_ex(e, "count", &v) &&
        json_object_is_type(v, json_type_int) && json_object_get_int64(v) > 0)
        a->count = (uint32_t)json_object_get_int64(v);
    if (!json_object_object_get_ex(e, "replied", &v))
        return rc;
    a->replied = json_object_get_boolean(v) ? 1 : 0;
    if (a->replied == 0)
        a->reason = dup_or_null(
            json_object_object_get_ex(e, "reason", &v)
                ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN)
                : "null",
            &rc);
    return rc;
}

/* http_peer_acks - see peer_answer.h. */
int
http_peer_acks(const char *body, size_t len, uint32_t n,
               struct http_peer_acks *out)
{
    struct json_object *root = object_of(body, len), *list;
    int rc = -EINVAL;

    *out = (struct http_peer_acks){0};
    if (root == NULL || !json_object_object_get_ex(root, "results", &list) ||
        !json_object_is_type(list, json_type_array) ||
        json_object_array_length(list) != n)
        goto done;
    rc = -ENOMEM;
    if ((out->e = calloc(n ? n : 1, sizeof(*out->e))) == NULL)
        goto done;
    out->n = n;
    rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        out->e[i].replied = -1;
        rc = take_ack(json_object_array_get_idx(list, i), &out->e[i]);
    }
    if (rc != 0)
        http_peer_acks_free(out);
done:
    json_object_put(root);
    return rc;
}

/* http_peer_acks_free - see peer_answer.h. */
void
http_peer_acks_free(struct http_peer_acks *a)
{
    for (uint32_t i = 0; a->e != NULL && i < a->n; i++) {
        free(a->e[i].outcome);
        free(a->e[i].reason);
    }
    free(a->e);
    *a = (struct http_peer_acks){0};
}

/* http_peer_applied - see peer_answer.h. */
int
http_peer_applied(const char *body, size_t len, const char *key,
                  struct http_peer_applied *out)
{
    struct json_object *root = object_of(body, len), *v;
    const char *q;

    *out = (struct http_peer_applied){0};
    if (root == NULL)
        return -EINVAL;
    out->count = http_jsonc_count(root, key);
    out->flag =
        json_object_object_get_ex(root, key, &v) && json_object_get_boolean(v);
    if (json_object_object_get_ex(root, "queue", &v) &&
        (q = json_object_get_string(v)) != NULL) {
        out->has_queue = 1;
        snprintf(out->queue, sizeof(out->queue), "%s", q);
    }
    json_object_put(root);
    return 0;
}

/* http_peer_id - see peer_answer.h. */
char *
http_peer_id(const char *body, size_t len)
{
    struct json_object *root = object_of(body, len), *v;
    const char *s = NULL;
    char *out;

    if (root != NULL && json_object_object_get_ex(root, "id", &v))
        s = json_object_get_string(v);
    out = s != NULL ? strdup(s) : NULL;
    json_object_put(root);
    return out;
}

/* http_peer_error_is - see peer_answer.h. */
int
http_peer_error_is(const char *body, size_t len, const char *code)
{
    struct json_object *root = object_of(body, len), *v;
    const char *s;
    int is = root != NULL && json_object_object_get_ex(root, "code", &v) &&
             json_object_is_type(v, json_type_string) &&
             (s = json_object_get_string(v)) != NULL && strcmp(s, code) == 0;

    json_object_put(root);
    return is;
}

/* http_peer_configured - see peer_answer.h. */
void
http_peer_configured(const char *body, size_t len,
                     struct http_peer_configured *out)
{
    struct json_object *root = object_of(body, len), *v;

    *out = (struct http_peer_configured){0};
    if (root == NULL)
        return;
    out->index = http_jsonc_count(root, "index");
    if (json_object_object_get_ex(root, "options", &v) &&
        json_object_is_type(v, json_type_object))
        out->options =
            strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    json_object_put(root);
}
