/*
 * parse_object.h - the walk of a body's top-level JSON object, member by
 * member, for the parsers that read their bodies with the strict scanner
 * (json_scan.h) and keep no tree: presence and rpc (parse_presence.c,
 * parse_rpc.c), and the second pass of a pop's (parse_pop.c).  The walk
 * is this file's; what a member means, its type, and what the body lacks
 * at the end are the caller's.  For http/ only.  No state, no locking.
 */
#ifndef MAYFLY_HTTP_PARSE_OBJECT_H
#define MAYFLY_HTTP_PARSE_OBJECT_H

#include <stddef.h>

struct http_error;
struct http_json;

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

#endif
