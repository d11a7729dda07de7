/*
 * parse_jsonc.h - json-c helpers shared by the control-body parsers of
 * parse.h (extend, reset, configure) and the decoders and merges of other
 * nodes' answers (peer_answer.c, depth_merge.c, list_merge.c).  For http/
 * only: json-c objects never leave http/.
 *
 * Strings are copied into a bump pool sized from the body, so the structs
 * handed to the worker own their bytes.  No locking.  Errors: 0, -EINVAL
 * (err: 400 ephemeral_bad_request naming the field), -ENOMEM (err: 500).
 */
#ifndef MAYFLY_HTTP_PARSE_JSONC_H
#define MAYFLY_HTTP_PARSE_JSONC_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json_types.h>

struct json_object;
struct http_error;
struct http_str;

/* Where copied strings go: mem[0..cap), used bytes taken. */
struct http_pool {
    char *mem;
    size_t used;
    size_t cap;
};

/*
 * http_jsonc_read - read a control body, every one of which is an object
 * naming its "queue": parse it strictly (JSON_TOKENER_STRICT, UTF-8
 * validated, depth HTTP_JSON_MAX_DEPTH, no lone surrogate escape), copy the
 * required string "queue" as *queue, then let rest (NULL: nothing more)
 * read the other members of root into out.  The pool holds every string of
 * the body (len + 1 bytes); *mem receives it whatever the result, for the
 * caller to free.  The tree is put before returning.
 */
int http_jsonc_read(const char *body, size_t len, struct http_str *queue,
                    char **mem,
                    int (*rest)(struct json_object *root,
                                struct http_pool *pool, void *out,
                                struct http_error *err),
                    void *out, struct http_error *err);

/* http_jsonc_lone_surrogate - the offset in b[0..len) of the first \u
 * escape of a surrogate that is not half of a pair, or SIZE_MAX. */
size_t http_jsonc_lone_surrogate(const char *b, size_t len);

/* http_jsonc_object - body parsed as http_jsonc_read() parses it, for
 * answers from other nodes: the object, or NULL for anything else (no error
 * said). */
struct json_object *http_jsonc_object(const char *body, size_t len);

/* http_jsonc_set - obj[key] = v, taking v (NULL: an allocation failed).
 * 0, or -ENOMEM (v put). */
int http_jsonc_set(struct json_object *obj, const char *key,
                   struct json_object *v);

/* http_jsonc_count - obj[key] as an unsigned count; 0 when absent or not an
 * integer. */
uint64_t http_jsonc_count(struct json_object *obj, const char *key);

/*
 * http_jsonc_member - obj[key] as *out when it has type t.  Absent or null:
 * *out NULL, and -EINVAL (err: "field '<field>' is required") when
 * required, else 0.  Another type: -EINVAL (err: "field '<field>' must be
 * <what>").
 */
int http_jsonc_member(struct json_object *obj, const char *key,
                      const char *field, enum json_type t, const char *what,
                      int required, struct json_object **out,
                      struct http_error *err);

/*
 * http_jsonc_str - the string at key of obj copied into pool as *out.
 * Absent or null: *have = 0 and -EINVAL (err: "field 'name' is required")
 * when required, else 0.  A non-string is -EINVAL naming field.
 */
int http_jsonc_str(struct json_object *obj, const char *key, const char *field,
                   int required, struct http_pool *pool, struct http_str *out,
                   int *have, struct http_error *err);

/* http_jsonc_copy - copy a json string value into the pool.  0/-ENOMEM. */
int http_jsonc_copy(struct json_object *s, struct http_pool *pool,
                    struct http_str *out, struct http_error *err);

/*
 * http_jsonc_uint - the integer at key of obj, from 0 to max, as *out.
 * Absent or null: *have = 0, *out = 0, and -EINVAL (err: "field '<field>'
 * is required") when required, else 0.  Anything else is -EINVAL (err:
 * "field '<field>' must be an integer from 0 to <max>").
 */
int http_jsonc_uint(struct json_object *obj, const char *key, const char *field,
                    int required, uint64_t max, uint64_t *out, int *have,
                    struct http_error *err);

/*
 * http_jsonc_array - obj[key] as an array of at most HTTP_BATCH_MAX
 * entries; -EINVAL naming field when absent, null, not an array or longer.
 */
int http_jsonc_array(struct json_object *obj, const char *key,
                     const char *field, struct json_object **out,
                     struct http_error *err);

#endif
