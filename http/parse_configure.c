/*
 * parse_configure.c - the configure body: {"queue", "options": {...}} with
 * the closed option list of SPEC §4 ("options" is required, SPEC §2: a
 * configure that names no option is a mistake, not a declaration).  A misspelled option must not give a
 * queue that looks configured and behaves like the default, so an unknown
 * one is 400 unknown_option naming it; a wrong type or a negative number is
 * 400 invalid_option naming it.  Ceilings are the caller's (node settings).
 * json-c, strict.  No locking.  Errors: 0, -EINVAL, -ENOMEM, err filled.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <json-c/json_object_iterator.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/json_scan.h"
#include "http/names.h"
#include "http/parse.h"
#include "http/parse_jsonc.h"

/* The integer options: name, presence bit, field of struct http_configure. */
static const struct int_option {
    const char *name;
    unsigned bit;
    size_t off;
} int_options[] = {
    {"maxLength", HTTP_OPT_MAX_LENGTH,
     offsetof(struct http_configure, max_length)},
    {"maxBytes", HTTP_OPT_MAX_BYTES,
     offsetof(struct http_configure, max_bytes)},
    {"ttlSeconds", HTTP_OPT_TTL_SECONDS,
     offsetof(struct http_configure, ttl_seconds)},
    {"leaseSeconds", HTTP_OPT_LEASE_SECONDS,
     offsetof(struct http_configure, lease_seconds)},
    {"retryLimit", HTTP_OPT_RETRY_LIMIT,
     offsetof(struct http_configure, retry_limit)},
    {"dedupeSeconds", HTTP_OPT_DEDUPE_S,
     offsetof(struct http_configure, dedupe_s)},
    {"retryDelayMs", HTTP_OPT_RETRY_DELAY,
     offsetof(struct http_configure, retry_delay_ms)},
};

/* unknown - 400 unknown_option naming it. */
static int
unknown(const char *name, struct http_error *err)
{
    http_error_set(err, 400, "unknown_option", "unknown option '%.*s'",
                   http_utf8_cut(name, 80), name);
    return -EINVAL;
}

/* invalid - 400 invalid_option naming it and what it must be. */
static int
invalid(const char *name, const char *must, struct http_error *err)
{
    http_error_set(err, 400, "invalid_option", "option '%s' must be %s", name,
                   must);
    return -EINVAL;
}

/* opt_uint - a non-negative integer option. */
static int
opt_uint(struct json_object *v, const char *name, uint64_t *out,
         struct http_error *err)
{
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
        return invalid(name, "a non-negative integer", err);
    *out = (uint64_t)json_object_get_int64(v);
    return 0;
}

/* opt_window - windowBuffer {"ms"?, "count"?}, its own closed list. */
static int
opt_window(struct json_object *v, struct http_configure *c,
           struct http_error *err)
{
    struct json_object_iterator it, end;
    char name[80];

    if (!json_object_is_type(v, json_type_object))
        return invalid("windowBuffer", "an object {\"ms\", \"count\"}", err);
    it = json_object_iter_begin(v);
    end = json_object_iter_end(v);
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
        const char *key = json_object_iter_peek_name(&it);
        struct json_object *x = json_object_iter_peek_value(&it);
        uint64_t *slot;

        snprintf(name, sizeof(name), "windowBuffer.%.*s",
                 http_utf8_cut(key, 60), key);
        if (strcmp(key, "ms") == 0)
            slot = &c->window_ms;
        else if (strcmp(key, "count") == 0)
            slot = &c->window_count;
        else
            return unknown(name, err);
        if (opt_uint(x, name, slot, err) != 0)
            return -EINVAL;
    }
    c->present |= HTTP_OPT_WINDOW_BUFFER;
    return 0;
}

/* opt_policy - "reject" or "dropOldest". */
static int
opt_policy(struct json_object *v, struct http_configure *c,
           struct http_error *err)
{
    const char *s = json_object_get_string(v);

    if (!json_object_is_type(v, json_type_string))
        return invalid("policy", "\"reject\" or \"dropOldest\"", err);
    if (strcmp(s, "reject") == 0)
        c->policy = HTTP_POLICY_REJECT;
    else if (strcmp(s, "dropOldest") == 0)
        c->policy = HTTP_POLICY_DROP_OLDEST;
    else
        return invalid("policy", "\"reject\" or \"dropOldest\"", err);
    c->present |= HTTP_OPT_POLICY;
    return 0;
}

/* opt_dead_letter - deadLetter: a queue's name (validated by the caller,
 * which knows the queue it must not name). */
static int
opt_dead_letter(struct json_object *v, struct http_configure *c,
                struct http_error *err)
{
    int len;

    if (!json_object_is_type(v, json_type_string) ||
        (len = json_object_get_string_len(v)) <= 0)
        return invalid("deadLetter", "a queue's name", err);
    free(c->dl_mem);
    if ((c->dl_mem = malloc((size_t)len)) == NULL) {
        http_error_set(err, 500, "internal", "out of memory");
        return -ENOMEM;
    }
    memcpy(c->dl_mem, json_object_get_string(v), (size_t)len);
    c->dead_letter = (struct http_str){c->dl_mem, (size_t)len};
    c->present |= HTTP_OPT_DEAD_LETTER;
    return 0;
}

/* one_option - dispatch one member of "options" by name. */
static int
one_option(const char *key, struct json_object *v, struct http_configure *c,
           struct http_error *err)
{
    size_t i;

    for (i = 0; i < sizeof(int_options) / sizeof(int_options[0]); i++) {
        const struct int_option *o = &int_options[i];

        if (strcmp(key, o->name) == 0) {
            if (opt_uint(v, o->name, (uint64_t *)((char *)c + o->off), err))
                return -EINVAL;
            c->present |= o->bit;
            return 0;
        }
    }
    if (strcmp(key, "policy") == 0)
        return opt_policy(v, c, err);
    if (strcmp(key, "windowBuffer") == 0)
        return opt_window(v, c, err);
    if (strcmp(key, "deadLetter") == 0)
        return opt_dead_letter(v, c, err);
    if (strcmp(key, "deadLetterExpired") == 0) {
        if (!json_object_is_type(v, json_type_boolean))
            return invalid("deadLetterExpired", "true or false", err);
        c->dl_expired = json_object_get_boolean(v);
        c->present |= HTTP_OPT_DL_EXPIRED;
        return 0;
    }
    if (strcmp(key, "conflate") == 0) {
        if (!json_object_is_type(v, json_type_boolean))
            return invalid("conflate", "true or false", err);
        c->conflate = json_object_get_boolean(v);
        c->present |= HTTP_OPT_CONFLATE;
        return 0;
    }
    return unknown(key, err);
}

/* read_options - every member of "options" (required; it may be empty),
 * in body order, into out (a struct http_configure; the queue is its only
 * string, so pool is unused). */
static int
read_options(struct json_object *root, struct http_pool *pool, void *out,
             struct http_error *err)
{
    struct http_configure *c = out;
    struct json_object *opts;
    struct json_object_iterator it, end;

    (void)pool;
    if (http_jsonc_member(root, "options", "options", json_type_object,
                          "an object", 1, &opts, err) != 0)
        return -EINVAL;
    it = json_object_iter_begin(opts);
    end = json_object_iter_end(opts);
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it))
        if (one_option(json_object_iter_peek_name(&it),
                       json_object_iter_peek_value(&it), c, err) != 0)
            return -EINVAL;
    return 0;
}

/*
 * queue_surrogate - 1 when the top-level "queue" string of body holds a
 * lone surrogate escape: json-c would read it as U+FFFD, a name the client
 * did not send, so it is refused as push refuses it (400 invalid_name
 * naming the field), not as malformed JSON.  A body the scanner cannot
 * walk is json-c's to refuse.
 */
static int
queue_surrogate(const char *body, size_t len)
{
    struct http_json j;
    char *key = malloc(len + 1);
    size_t klen;
    int more, found = 0;

    if (key == NULL)
        return 0;
    http_json_init(&j, body, len);
    more = http_json_peek(&j) == '{' ? http_json_enter(&j) : 0;
    while (more > 0 && !found) {
        const char *v;

        if (http_json_key(&j, key, &klen) != 0)
            break;
        http_json_ws(&j);
        v = j.p;
        if (http_json_value(&j) != 0)
            break;
        found = http_json_key_is(key, klen, "queue") && *v == '"' &&
                http_jsonc_lone_surrogate(v, (size_t)(j.p - v)) != SIZE_MAX;
        more = http_json_next(&j, '}');
    }
    free(key);
    return found;
}

/* http_parse_configure - see parse.h. */
int
http_parse_configure(const char *body, size_t len, struct http_configure *out,
                     struct http_error *err)
{
    int rc;

    memset(out, 0, sizeof(*out));
    if (queue_surrogate(body, len)) {
        http_error_set(err, 400, "invalid_name", "field 'queue' must be %s",
                       HTTP_NAME_RULE);
        return -EINVAL;
    }
    rc = http_jsonc_read(body, len, &out->queue, &out->mem, read_options, out,
                         err);
    if (rc != 0)
        http_configure_free(out);
    return rc;
}

/* http_configure_free - release the strings. */
void
http_configure_free(struct http_configure *c)
{
    free(c->mem);
    free(c->dl_mem);
    memset(c, 0, sizeof(*c));
}

/* http_configure_renamed - see parse.h. */
int
http_configure_renamed(const char *body, size_t blen, const char *name,
                       size_t len, struct http_buf *out)
{
    struct json_object *o = http_jsonc_object(body, blen);
    const char *text;
    int rc = -ENOMEM;

    if (o != NULL &&
        http_jsonc_set(o, "queue",
                       json_object_new_string_len(name, (int)len)) == 0 &&
        (text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) !=
            NULL &&
        http_buf_append_str(out, text) == 0 && !out->oom)
        rc = 0;
    json_object_put(o);
    return rc;
}
