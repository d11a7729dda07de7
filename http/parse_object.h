/*
 * parse_object.h - the walk of a body's top-level JSON object, member by
 * member, for the parsers that read their bodies with the strict scanner
 * (json_scan.h) and keep no tree: presence and rpc (parse_presence.c,
 * parse_rpc.c), and the second pass of a pop's (parse_pop.c).  The walk
 * is this file's, and the reading of a string member; what a member
 * means, its type, and what the body lacks at the end are the caller's.
 * (The json-c bodies, redrive's among them, share http_jsonc_read() in
 * parse_jsonc.c instead.)  For http/ only.  No state, no locking.
 */
#ifndef MAYFLY_HTTP_PARSE_OBJECT_H
#define MAYFLY_HTTP_PARSE_OBJECT_H

#include <stddef.h>

struct http_error;
struct http_json;
struct http_str;

/*
 * http_member_fn - the member whose unescaped key is key[0..n): read its
 * value at j (one not taken is skipped with http_json_value()).  0, or
 * -EINVAL / -ENOMEM with err filled, which ends the walk with that answer.
 */
typedef int http_member_fn(struct http_json *j, const char *key, size_t n,
                           void *arg, struct http_error *err);

/*
 * http_parse_object - body[0..len) as one JSON object: each member's key is
 * unescaped into *keys (room for len bytes; the pointer is read again for
 * every member, so a reader may move it past bytes it keeps), then
 * member(arg) reads the value.  0; or -EINVAL with err filled (400
 * ephemeral_bad_request): "malformed JSON at byte N: ..." (not JSON, or
 * data after it), "the body must be a JSON object" (JSON of another
 * type), or member()'s answer.
 */
int http_parse_object(const char *body, size_t len, char *const *keys,
                      http_member_fn *member, void *arg,
                      struct http_error *err);

/* What a walk that unescapes its strings as it reads hands each member's
 * reader: where the next string goes (a key too: a value read overwrites
 * its key), and the caller's fields. */
struct http_walk {
    char *at;
    void *out;
};

/*
 * http_parse_members - http_parse_object() over a body whose strings are
 * kept: its length checked first (http_parse_length: 413), then *mem
 * allocated (len + 8 bytes: unescaped text is never longer than its JSON,
 * and a NUL each), where a struct http_walk {*mem, out} given to member()
 * starts.  0, or -EINVAL / -ENOMEM with err filled; *mem is the caller's
 * to free whatever the result (NULL when not allocated).
 */
int http_parse_members(const char *body, size_t len, char **mem,
                       http_member_fn *member, void *out,
                       struct http_error *err);

/*
 * http_parse_string - a member's value at j as a string: unescaped into
 * *at (NUL-terminated; *at moves past it) as *s, 1.  With null_ok a null
 * is 0 (*s untouched).  Another value: -EINVAL with err filled ("field
 * '<field>' must be a string", or the syntax error of a value that is not
 * JSON).
 */
int http_parse_string(struct http_json *j, char **at, struct http_str *s,
                      int null_ok, const char *field, struct http_error *err);

#endif
