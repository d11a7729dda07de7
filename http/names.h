/*
 * names.h - what a queue, partition, group or node id may be (SPEC §1).
 * Pure functions, no locking.
 */
#ifndef MAYFLY_HTTP_NAMES_H
#define MAYFLY_HTTP_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_NAME_MAX 512
/* What a name must be, for the sentence of 400 invalid_name. */
#define HTTP_NAME_RULE   "1-512 bytes of UTF-8 without control characters"
#define HTTP_NODE_ID_MAX 64

/*
 * http_name_valid - 1 if p[0..len) is 1-512 bytes of valid UTF-8 (shortest
 * form, no surrogates, at most U+10FFFF) without control characters (C0,
 * DEL, C1); else 0.
 */
int http_name_valid(const char *p, size_t len);

/*
 * http_utf8_next - decode one UTF-8 sequence at p[0..n) (n > 0) in shortest
 * form.  Returns its length and sets *cp, or 0 for an invalid sequence
 * (overlong, surrogate, above U+10FFFF, truncated, stray continuation).
 */
size_t http_utf8_next(const unsigned char *p, size_t n, uint32_t *cp);

/*
 * http_utf8_cut - how many bytes of the NUL-ended s to keep so that at most
 * max are kept and no UTF-8 sequence is cut: for "%.*s" in a sentence that
 * names something a client sent (the sentence must stay valid UTF-8).
 */
int http_utf8_cut(const char *s, size_t max);

/* http_node_id_valid - 1 if p[0..len) is 1-64 bytes of [A-Za-z0-9._-]. */
int http_node_id_valid(const char *p, size_t len);

#endif
