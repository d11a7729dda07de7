/*
 * parse_jsonc.c - json-c helpers for the control-body parsers.
 *
 * json-c builds a tree; control bodies are small, so its cost does not
 * matter there (push bodies use json_scan.c instead).  No locking.
 * Errors: 0, -EINVAL or -ENOMEM, with err filled.
 */
#include "http/parse_jsonc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/buf.h"
#include "http/json_scan.h"
#include "http/parse.h"
#include "http/parse_error.h"

/* strict_parse - body parsed strictly (UTF-8 validated) as one JSON text;
 * *e and *end say how it went (*end SIZE_MAX: no memory for the parser).
 * NULL on failure. */
static struct json_object *
strict_parse(const char *body, size_t len, enum json_tokener_error *e,
             size_t *end)
{
    struct json_tokener *tok = json_tokener_new_ex(HTTP_JSON_MAX_DEPTH);
    struct json_object *o;

    if (tok == NULL) {
        *e = json_tokener_continue;
        *end = SIZE_MAX;
        return NULL;
    }
    json_tokener_set_flags(tok,
                           JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    o = json_tokener_parse_ex(tok, body, (int)len);
    *e = json_tokener_get_error(tok);
    *end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    return o;
}

/* http_jsonc_object - see parse_jsonc.h. */
struct json_object *
http_jsonc_object(const char *body, size_t len)
{
    enum json_tokener_error e;
    size_t end;
    struct json_object *o =
        len > INT32_MAX ? NULL : strict_parse(body, len, &e, &end);

    if (o != NULL && (e != json_tokener_success || end != len ||
                      !json_object_is_type(o, json_type_object))) {
        json_object_put(o);
        o = NULL;
    }
    return o;
}

/* http_jsonc_set - see parse_jsonc.h. */
int
http_jsonc_set(struct json_object *obj, const char *key, struct json_object *v)
{
    if (v == NULL)
        return -ENOMEM;
    if (json_object_object_add(obj, key, v) != 0) {
        json_object_put(v);
        return -ENOMEM;
    }
    return 0;
}

/* http_jsonc_count - see parse_jsonc.h. */
uint64_t
http_jsonc_count(struct json_object *obj, const char *key)
{
    struct json_object *v;

    if (!json_object_object_get_ex(obj, key, &v) ||
        !json_object_is_type(v, json_type_int))
        return 0;
    return json_object_get_uint64(v);
}

/* hex4 - the value of four hex digits at p (n bytes left), or -1. */
static long
hex4(const char *p, size_t n)
{
    long v = 0;

    if (n < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        int d = http_hex_value(p[i]);
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/*
 * http_jsonc_lone_surrogate - the offset of the first \u escape of a surrogate that
 * is not half of a pair, or SIZE_MAX.  json-c reads one as U+FFFD, so two
 * different names would read as one; the bodies json-c parses (configure,
 * extend, reset) carry names and no payloads, so one is refused whole.
 */
size_t
http_jsonc_lone_surrogate(const char *b, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (b[i] != '\\')
            continue;
        if (b[i + 1] != 'u') {
            i++; /* \\, \", ...: the next byte is taken */
            continue;
        }
        long hi = hex4(b + i + 2, len - i - 2);
        if (hi >= 0xdc00 && hi <= 0xdfff)
            return i;
        if (hi >= 0xd800 && hi <= 0xdbff) {
            long lo = i + 8 < len && b[i + 6] == '\\' && b[i + 7] == 'u'
                          ? hex4(b + i + 8, len - i - 8)
                          : -1;
            if (lo < 0xdc00 || lo > 0xdfff)
                return i;
            i += 6; /* the pair's low half */
        }
    }
    return SIZE_MAX;
}

/*
 * rfc_json - body is RFC 8259 JSON as the push scanner reads it: json-c's
 * strict mode lets overlong and surrogate UTF-8, raw control characters and
 * numbers such as "1." through, and names read from them would be echoed
 * in answers as invalid UTF-8.  1, or 0 with err filled (400).
 */
static int
rfc_json(const char *body, size_t len, struct http_error *err)
{
    struct http_json j;

    http_json_init(&j, body, len);
    if (http_json_value(&j) == 0 && http_json_end(&j) == 0)
        return 1;
    http_parse_syntax(&j, err);
    return 0;
}

/*
 * parse_object - the strict parse of http_jsonc_read() into *root, which
 * must be an object, and pool->mem allocated.  On failure *root is NULL and
 * nothing is allocated.
 */
static int
parse_object(const char *body, size_t len, struct json_object **root,
             struct http_pool *pool, struct http_error *err)
{
    enum json_tokener_error e;
    size_t end;
    int rc;

    *root = NULL;
    memset(pool, 0, sizeof(*pool));
    if ((rc = http_parse_length(len, err)) != 0)
        return rc;
    *root = strict_parse(body, len, &e, &end);
    if (end == SIZE_MAX)
        return http_parse_oom(err);
    if (e != json_tokener_success || end != len)
        rc = http_parse_bad(
            err, "malformed JSON at byte %zu: %s", end,
            e == json_tokener_success    ? "unexpected data after the JSON text"
            : e == json_tokener_continue ? "unexpected end of data"
                                         : json_tokener_error_desc(e));
    else if (!json_object_is_type(*root, json_type_object))
        rc = http_parse_bad(err, "the body must be a JSON object");
    else if (!rfc_json(body, len, err))
        rc = -EINVAL;
    else if ((end = http_jsonc_lone_surrogate(body, len)) != SIZE_MAX)
        rc = http_parse_bad(err,
                            "malformed JSON at byte %zu: a lone UTF-16 "
                            "surrogate escape is no character",
                            end);
    else if ((pool->mem = malloc(len + 1)) == NULL)
        rc = http_parse_oom(err);
    if (rc != 0) {
        json_object_put(*root);
        *root = NULL;
        return rc;
    }
    pool->cap = len + 1;
    return 0;
}

/* http_jsonc_read - parse, the queue, then what rest reads. */
int
http_jsonc_read(const char *body, size_t len, struct http_str *queue,
                char **mem,
                int (*rest)(struct json_object *root, struct http_pool *pool,
                            void *out, struct http_error *err),
                void *out, struct http_error *err)
{
    struct json_object *root;
    struct http_pool pool;
    int have, rc;

    rc = parse_object(body, len, &root, &pool, err);
    *mem = pool.mem;
    if (rc == 0)
        rc =
            http_jsonc_str(root, "queue", "queue", 1, &pool, queue, &have, err);
    if (rc == 0 && rest != NULL)
        rc = rest(root, &pool, out, err);
    json_object_put(root);
    return rc;
}

/* http_jsonc_copy - bump-allocate the string and its NUL. */
int
http_jsonc_copy(struct json_object *s, struct http_pool *pool,
                struct http_str *out, struct http_error *err)
{
    size_t n = (size_t)json_object_get_string_len(s);
    char *p;

    if (n + 1 > pool->cap - pool->used)
        return http_parse_oom(err);
    p = pool->mem + pool->used;
    memcpy(p, json_object_get_string(s), n);
    p[n] = '\0';
    pool->used += n + 1;
    out->ptr = p;
    out->len = n;
    return 0;
}

/* http_jsonc_member - a member of one type, required or not. */
int
http_jsonc_member(struct json_object *obj, const char *key, const char *field,
                  enum json_type t, const char *what, int required,
                  struct json_object **out, struct http_error *err)
{
    *out = NULL;
    if (!json_object_object_get_ex(obj, key, out) || *out == NULL) {
        *out = NULL;
        return required ? http_parse_bad(err, "field '%s' is required", field)
                        : 0;
    }
    if (!json_object_is_type(*out, t))
        return http_parse_bad(err, "field '%s' must be %s", field, what);
    return 0;
}

/* http_jsonc_str - an optional or required string member. */
int
http_jsonc_str(struct json_object *obj, const char *key, const char *field,
               int required, struct http_pool *pool, struct http_str *out,
               int *have, struct http_error *err)
{
    struct json_object *v;
    int rc = http_jsonc_member(obj, key, field, json_type_string, "a string",
                               required, &v, err);

    *have = v != NULL && rc == 0;
    return *have ? http_jsonc_copy(v, pool, out, err) : rc;
}

/* http_jsonc_uint - json-c keeps integers as int64 or uint64; both are
 * read through int64 (a uint64 past INT64_MAX reads as INT64_MAX). */
int
http_jsonc_uint(struct json_object *obj, const char *key, const char *field,
                int required, uint64_t max, uint64_t *out, int *have,
                struct http_error *err)
{
    struct json_object *v = NULL;
    int64_t x;

    *have = 0;
    *out = 0;
    if (!json_object_object_get_ex(obj, key, &v) || v == NULL)
        return required ? http_parse_bad(err, "field '%s' is required", field)
                        : 0;
    if (!json_object_is_type(v, json_type_int) ||
        (x = json_object_get_int64(v)) < 0 || (uint64_t)x > max)
        return http_parse_bad(err,
                              "field '%s' must be an integer from 0 to %llu",
                              field, (unsigned long long)max);
    *have = 1;
    *out = (uint64_t)x;
    return 0;
}

/* http_jsonc_array - a required array member of bounded length. */
int
http_jsonc_array(struct json_object *obj, const char *key, const char *field,
                 struct json_object **out, struct http_error *err)
{
    int rc = http_jsonc_member(obj, key, field, json_type_array, "an array", 1,
                               out, err);

    if (rc == 0 && json_object_array_length(*out) > HTTP_BATCH_MAX)
        return http_parse_bad(err, "field '%s' holds more than %d entries",
                              field, HTTP_BATCH_MAX);
    return rc;
}
