/*
 * query.c - percent-decoding, the query string, and typed look-ups.
 *
 * http_query_parse() copies the raw query once into q->mem, decoding each
 * key and value in place, and indexes them in q->args.  No locking.
 * Errors: 0, -EINVAL (bad escape or value), -ENOMEM.
 */
#include "http/query.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/buf.h"
#include "http/errors.h"

/* http_pct_decode - %XX escapes (and '+' in queries); writes never run
 * ahead of reads, so dst may be src. */
long
http_pct_decode(char *dst, const char *src, size_t n, int plus_space)
{
    size_t i, o = 0;

    for (i = 0; i < n; i++) {
        if (src[i] == '%') {
            int hi, lo;

            if (n - i < 3)
                return -EINVAL;
            hi = http_hex_value(src[i + 1]);
            lo = http_hex_value(src[i + 2]);
            if (hi < 0 || lo < 0)
                return -EINVAL;
            dst[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (plus_space && src[i] == '+') {
            dst[o++] = ' ';
        } else {
            dst[o++] = src[i];
        }
    }
    dst[o] = '\0';
    return (long)o;
}

/* query_count - an upper bound on the pieces of raw. */
static unsigned
query_count(const char *raw, size_t n)
{
    unsigned c = 1;
    size_t i;

    for (i = 0; i < n; i++)
        c += raw[i] == '&';
    return c;
}

/* query_add - decode one "k=v" piece at mem[0..n) in place, index it
 * unless empty.  A repeated key is indexed again, after the first: a
 * look-up reads the first, and a parameter that may be given several
 * times (presence_events) walks q->args. */
static int
query_add(struct http_query *q, char *mem, size_t n)
{
    char *eq = memchr(mem, '=', n);
    size_t kn = eq ? (size_t)(eq - mem) : n;
    long k, v;

    if (n == 0)
        return 0;
    /* the value goes first: decoding the key writes its NUL over '=' */
    v = eq ? http_pct_decode(eq + 1, eq + 1, n - kn - 1, 1) : 0;
    k = http_pct_decode(mem, mem, kn, 1);
    if (k < 0 || v < 0)
        return -EINVAL;
    q->args[q->n].key = mem;
    q->args[q->n].key_len = (size_t)k;
    q->args[q->n].val = eq ? eq + 1 : mem + k;
    q->args[q->n].val_len = (size_t)v;
    q->n++;
    return 0;
}

/* http_query_parse - one copy of raw, split at '&', decoded in place. */
int
http_query_parse(struct http_query *q, const char *raw, size_t n)
{
    size_t start = 0, i;
    int rc;

    memset(q, 0, sizeof(*q));
    if (n == 0)
        return 0;
    q->mem = malloc(n + 1);
    q->args = calloc(query_count(raw, n), sizeof(*q->args));
    if (q->mem == NULL || q->args == NULL) {
        rc = -ENOMEM;
        goto fail;
    }
    memcpy(q->mem, raw, n);
    q->mem[n] = '\0';
    for (i = 0; i <= n; i++) {
        if (i < n && q->mem[i] != '&')
            continue;
        q->mem[i] = '\0';
        rc = query_add(q, q->mem + start, i - start);
        if (rc != 0)
            goto fail;
        start = i + 1;
    }
    return 0;
fail:
    http_query_free(q);
    return rc;
}

/* http_query_check - see query.h.  The parameter is named up to its
 * first NUL, escaped as JSON by the error reply.  Names (queue, group,
 * partition) are left to the name check, which answers invalid_name. */
int
http_query_check(const struct http_query *q, struct http_error *err)
{
    unsigned i;

    for (i = 0; i < q->n; i++) {
        const struct http_query_arg *a = &q->args[i];

        if (strcmp(a->key, "queue") == 0 || strcmp(a->key, "group") == 0 ||
            strcmp(a->key, "partition") == 0)
            continue;
        if (memchr(a->key, '\0', a->key_len) != NULL ||
            memchr(a->val, '\0', a->val_len) != NULL) {
            http_error_set(err, 400, "ephemeral_bad_request",
                           "query parameter '%s' holds a NUL byte (%%00)",
                           a->key);
            return -EINVAL;
        }
    }
    return 0;
}

/* http_query_free - release and empty q. */
void
http_query_free(struct http_query *q)
{
    free(q->args);
    free(q->mem);
    memset(q, 0, sizeof(*q));
}

/* http_query_get - linear search: queries hold a handful of keys. */
const char *
http_query_get(const struct http_query *q, const char *key, size_t *len)
{
    size_t kn = strlen(key);
    unsigned i;

    for (i = 0; i < q->n; i++) {
        if (q->args[i].key_len == kn && memcmp(q->args[i].key, key, kn) == 0) {
            if (len != NULL)
                *len = q->args[i].val_len;
            return q->args[i].val;
        }
    }
    return NULL;
}

/* http_query_u32 - a decimal integer, clamped to [min, max] (a negative
 * one, or one past max however many digits, is still a number: it clamps). */
int
http_query_u32(const struct http_query *q, const char *key, uint32_t def,
               uint32_t min, uint32_t max, uint32_t *out,
               struct http_error *err)
{
    size_t n, i;
    const char *v = http_query_get(q, key, &n);
    uint64_t x = 0;
    int neg;

    if (v == NULL) {
        *out = def;
        return 0;
    }
    neg = n > 0 && v[0] == '-';
    for (i = (size_t)neg; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            goto bad;
        if (x <= (UINT64_MAX - 9) / 10)
            x = x * 10 + (uint64_t)(v[i] - '0');
        else
            x = UINT64_MAX;
    }
    if (n == (size_t)neg)
        goto bad;
    if (neg)
        x = 0;
    *out = x < min ? min : x > max ? max : (uint32_t)x;
    return 0;
bad:
    http_error_set(err, 400, "ephemeral_bad_request",
                   "query parameter '%s' must be an integer", key);
    return -EINVAL;
}

/* http_query_bool - true/false/1/0. */
int
http_query_bool(const struct http_query *q, const char *key, int def, int *out,
                struct http_error *err)
{
    size_t n;
    const char *v = http_query_get(q, key, &n);

    if (v == NULL) {
        *out = def;
        return 0;
    }
    if ((n == 4 && strncasecmp(v, "true", 4) == 0) || (n == 1 && v[0] == '1'))
        *out = 1;
    else if ((n == 5 && strncasecmp(v, "false", 5) == 0) ||
             (n == 1 && v[0] == '0'))
        *out = 0;
    else {
        http_error_set(err, 400, "ephemeral_bad_request",
                       "query parameter '%s' must be true or false", key);
        return -EINVAL;
    }
    return 0;
}
