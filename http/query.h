/*
 * query.h - percent-decoding and the query string: parse once per request,
 * then typed look-ups that fill struct http_error with a sentence naming the
 * parameter (400 ephemeral_bad_request).
 *
 * The query is parsed from the raw request URI (http/access.c keeps MHD from
 * decoding it), so values keep embedded NULs and every value has a length.
 * '+' decodes to a space in the query, not in the path.  No locking.
 */
#ifndef MAYFLY_HTTP_QUERY_H
#define MAYFLY_HTTP_QUERY_H

#include <stddef.h>
#include <stdint.h>

struct http_error;

struct http_query_arg {
    const char *key; /* decoded, NUL-terminated (may hold inner NULs) */
    size_t key_len;
    const char *val; /* decoded, NUL-terminated; "" for "?k" */
    size_t val_len;
};

struct http_query {
    struct http_query_arg *args; /* owned */
    unsigned n;
    char *mem; /* decoded keys and values; owned */
};

/*
 * http_pct_decode - percent-decode src[0..n) into dst (room for n + 1
 * bytes; dst may equal src), '+' to ' ' when plus_space.  NUL-terminates.
 * Returns the decoded length, or -EINVAL for a bad escape ("%G1", "%4").
 */
long http_pct_decode(char *dst, const char *src, size_t n, int plus_space);

/*
 * http_query_parse - split and decode raw "a=1&b=%20" (no '?', n bytes).
 * Empty pieces are skipped; a repeated key is in q->args as often as it
 * was given, in order (http_query_get reads the first).  On error
 * (-EINVAL bad escape, -ENOMEM) q is left empty; free it either way.
 */
int http_query_parse(struct http_query *q, const char *raw, size_t n);

/*
 * http_query_check - every parameter of q free of NUL bytes ("%00"): no
 * name or value of the API holds one, and one cut there would read as
 * something the client did not send.  0, or -EINVAL with err set to 400
 * ephemeral_bad_request naming the parameter.  Names (queue, group,
 * partition) are skipped: their check answers 400 invalid_name.
 */
int http_query_check(const struct http_query *q, struct http_error *err);

/* http_query_free - release q's memory; q is empty after. */
void http_query_free(struct http_query *q);

/* http_query_get - the decoded value of key's first occurrence (and its
 * length), or NULL. */
const char *http_query_get(const struct http_query *q, const char *key,
                           size_t *len);

/*
 * http_query_u32 - key as a decimal integer clamped into [min, max]; def
 * (not clamped) when absent.  A value that is not a plain decimal number
 * (empty, a sign, anything but digits) is -EINVAL with err set to 400
 * ephemeral_bad_request naming the parameter.  0 or -EINVAL.
 */
int http_query_u32(const struct http_query *q, const char *key, uint32_t def,
                   uint32_t min, uint32_t max, uint32_t *out,
                   struct http_error *err);

/*
 * http_query_bool - key as true/false/1/0 (case-insensitive words); def when
 * absent.  Anything else: -EINVAL and err (400 naming it).  0 or -EINVAL.
 */
int http_query_bool(const struct http_query *q, const char *key, int def,
                    int *out, struct http_error *err);

#endif
