/*
 * batch.c - see batch.h.
 *
 * The decoder walks a cursor that knows how many bytes are left, and
 * every read asks it first: a length is compared with what is left
 * before anything is taken, so no input makes it read past the end.
 */
#include "http/batch.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NO_AUTHZ 0xffffffffu /* alen of an entry without Authorization */

/* put_u16 / put_u32 - big-endian. */
static void
put_u16(unsigned char *o, unsigned v)
{
    o[0] = (unsigned char)(v >> 8);
    o[1] = (unsigned char)v;
}

static void
put_u32(unsigned char *o, uint32_t v)
{
    o[0] = (unsigned char)(v >> 24);
    o[1] = (unsigned char)(v >> 16);
    o[2] = (unsigned char)(v >> 8);
    o[3] = (unsigned char)v;
}

static uint32_t
get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* method_ok - upper-case letters, 1 to HTTP_BATCH_METHOD_MAX. */
static int
method_ok(const char *p, size_t n)
{
    if (n == 0 || n > HTTP_BATCH_METHOD_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 'A' || p[i] > 'Z')
            return 0;
    return 1;
}

/* target_ok - what a request line's target may hold: from '/', visible
 * ASCII, no space. */
static int
target_ok(const char *p, size_t n)
{
    if (n == 0 || n > HTTP_BATCH_TARGET_MAX || p[0] != '/')
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f)
            return 0;
    return 1;
}

/* value_ok - a header value: no control byte (a CR or LF would end it,
 * a NUL cut it), tabs and bytes past ASCII allowed. */
static int
value_ok(const char *p, size_t n)
{
    if (n > HTTP_BATCH_AUTHZ_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

/* count_one - the entries b's head counts, one more. */
static int
count_one(struct http_buf *b)
{
    uint32_t n;

    if (b->len < HTTP_BATCH_HEAD)
        return -EINVAL;
    n = get_u32((unsigned char *)b->data + 4);
    if (n >= HTTP_BATCH_ENTRIES_MAX)
        return -EINVAL;
    put_u32((unsigned char *)b->data + 4, n + 1);
    return 0;
}

/* http_batch_begin - see batch.h. */
int
http_batch_begin(struct http_buf *b)
{
    unsigned char h[HTTP_BATCH_HEAD];

    b->len = 0;
    put_u32(h, HTTP_BATCH_VERSION);
    put_u32(h + 4, 0);
    return http_buf_append(b, h, sizeof(h)) == 0 ? 0 : -ENOMEM;
}

/* http_batch_call_size - see batch.h. */
size_t
http_batch_call_size(const struct http_batch_call *c)
{
    return 1 + c->method_len + 4 + c->target_len + 4 +
           (c->authz != NULL ? c->authz_len : 0) + 4 + c->body_len;
}

/* append_len - a u32 length, then its bytes. */
static int
append_len(struct http_buf *b, const char *p, size_t n)
{
    unsigned char l[4];

    put_u32(l, (uint32_t)n);
    if (http_buf_append(b, l, 4) != 0 || (n > 0 && http_buf_append(b, p, n)))
        return -ENOMEM;
    return 0;
}

/* http_batch_call_ok - see batch.h. */
int
http_batch_call_ok(const struct http_batch_call *c)
{
    return method_ok(c->method, c->method_len) &&
           target_ok(c->target, c->target_len) &&
           (c->authz == NULL || value_ok(c->authz, c->authz_len)) &&
           c->body_len < NO_AUTHZ && (c->body_len == 0 || c->body != NULL);
}

/* http_batch_add_call - see batch.h. */
int
http_batch_add_call(struct http_buf *b, const struct http_batch_call *c)
{
    unsigned char m = (unsigned char)c->method_len, l[4];

    if (!http_batch_call_ok(c))
        return -EINVAL;
    if (b->len < HTTP_BATCH_HEAD ||
        get_u32((unsigned char *)b->data + 4) >= HTTP_BATCH_ENTRIES_MAX)
        return -EINVAL;
    put_u32(l, NO_AUTHZ);
    if (http_buf_append(b, &m, 1) != 0 ||
        http_buf_append(b, c->method, c->method_len) != 0 ||
        append_len(b, c->target, c->target_len) != 0 ||
        (c->authz != NULL ? append_len(b, c->authz, c->authz_len)
                          : http_buf_append(b, l, 4)) != 0 ||
        append_len(b, c->body, c->body_len) != 0)
        return -ENOMEM;
    return count_one(b);
}

/* http_batch_add_answer - see batch.h. */
int
http_batch_add_answer(struct http_buf *b, const struct http_batch_answer *a)
{
    unsigned char h[6];

    if (a->status < 100 || a->status > 599 || a->body_len >= NO_AUTHZ ||
        (a->body_len > 0 && a->body == NULL))
        return -EINVAL;
    if (b->len < HTTP_BATCH_HEAD ||
        get_u32((unsigned char *)b->data + 4) >= HTTP_BATCH_ENTRIES_MAX)
        return -EINVAL;
    put_u16(h, a->status);
    put_u32(h + 2, a->retry_after_s);
    if (http_buf_append(b, h, sizeof(h)) != 0 ||
        append_len(b, a->body, a->body_len) != 0)
        return -ENOMEM;
    return count_one(b);
}

/* What is left to decode. */
struct cur {
    const unsigned char *p;
    size_t left;
};

/* take - n bytes, or NULL when fewer are left. */
static const char *
take(struct cur *c, size_t n)
{
    const unsigned char *at = c->p;

    if (n > c->left)
        return NULL;
    c->p += n;
    c->left -= n;
    return (const char *)at;
}

/* take_u32 - 0, or -1 when fewer than 4 bytes are left. */
static int
take_u32(struct cur *c, uint32_t *v)
{
    const char *p = take(c, 4);

    if (p == NULL)
        return -1;
    *v = get_u32((const unsigned char *)p);
    return 0;
}

/* take_bytes - a u32 length and its bytes. */
static int
take_bytes(struct cur *c, const char **p, size_t *n)
{
    uint32_t l;

    if (take_u32(c, &l) != 0 || (*p = take(c, l)) == NULL)
        return -1;
    *n = l;
    return 0;
}

/* head - the version and the count, checked against max. */
static int
head(struct cur *c, size_t max, size_t *n, char *why, size_t whylen)
{
    uint32_t v, k;

    if (take_u32(c, &v) != 0 || take_u32(c, &k) != 0) {
        snprintf(why, whylen,
                 "a batch body begins with 8 bytes: its "
                 "version and its count");
        return -EPROTO;
    }
    if (v != HTTP_BATCH_VERSION) {
        snprintf(why, whylen, "batch format version %u (this node reads %u)", v,
                 HTTP_BATCH_VERSION);
        return -EPROTONOSUPPORT;
    }
    if (k > max) {
        snprintf(why, whylen, "a batch of %u entries (at most %zu)", k, max);
        return -E2BIG;
    }
    *n = k;
    return 0;
}

/* bad - the -EPROTO of entry i. */
static int
bad(char *why, size_t whylen, size_t i, const char *what)
{
    snprintf(why, whylen, "batch entry %zu: %s", i, what);
    return -EPROTO;
}

/* call - one call entry. */
static int
call(struct cur *c, struct http_batch_call *e, char *why, size_t whylen,
     size_t i)
{
    const char *m;
    uint32_t alen;

    if ((m = take(c, 1)) == NULL)
        return bad(why, whylen, i, "cut before its method");
    e->method_len = (unsigned char)m[0];
    if ((e->method = take(c, e->method_len)) == NULL ||
        !method_ok(e->method, e->method_len))
        return bad(why, whylen, i, "a bad or cut method");
    if (take_bytes(c, &e->target, &e->target_len) != 0 ||
        !target_ok(e->target, e->target_len))
        return bad(why, whylen, i, "a bad or cut target");
    if (take_u32(c, &alen) != 0)
        return bad(why, whylen, i, "cut before its Authorization");
    e->authz = NULL;
    e->authz_len = 0;
    if (alen != NO_AUTHZ) {
        if ((e->authz = take(c, alen)) == NULL || !value_ok(e->authz, alen))
            return bad(why, whylen, i, "a bad or cut Authorization");
        e->authz_len = alen;
    }
    if (take_bytes(c, &e->body, &e->body_len) != 0)
        return bad(why, whylen, i, "a cut body");
    return 0;
}

/* trailing - 0 when c is at the end; else -EPROTO and no entries. */
static int
trailing(const struct cur *c, size_t *n, char *why, size_t whylen)
{
    if (c->left == 0)
        return 0;
    snprintf(why, whylen, "%zu bytes after the last batch entry", c->left);
    *n = 0;
    return -EPROTO;
}

/* http_batch_calls - see batch.h. */
int
http_batch_calls(const char *p, size_t len, struct http_batch_call *out,
                 size_t max, size_t *n, char *why, size_t whylen)
{
    struct cur c = {(const unsigned char *)p, len};
    int rc;

    *n = 0;
    if ((rc = head(&c, max, n, why, whylen)) != 0)
        return rc;
    for (size_t i = 0; i < *n; i++)
        if ((rc = call(&c, &out[i], why, whylen, i)) != 0) {
            *n = 0;
            return rc;
        }
    return trailing(&c, n, why, whylen);
}

/* http_batch_answers - see batch.h. */
int
http_batch_answers(const char *p, size_t len, struct http_batch_answer *out,
                   size_t max, size_t *n, char *why, size_t whylen)
{
    struct cur c = {(const unsigned char *)p, len};
    int rc;

    *n = 0;
    if ((rc = head(&c, max, n, why, whylen)) != 0)
        return rc;
    for (size_t i = 0; i < *n; i++) {
        struct http_batch_answer *a = &out[i];
        const char *s = take(&c, 2);
        uint32_t ra = 0;

        if (s == NULL || take_u32(&c, &ra) != 0)
            rc = bad(why, whylen, i, "cut before its body");
        else if ((a->status = (unsigned)(unsigned char)s[0] << 8 |
                              (unsigned char)s[1]) < 100 ||
                 a->status > 599)
            rc = bad(why, whylen, i, "a status out of 100..599");
        else if (take_bytes(&c, &a->body, &a->body_len) != 0)
            rc = bad(why, whylen, i, "a cut body");
        if (rc != 0) {
            *n = 0;
            return rc;
        }
        a->retry_after_s = ra;
    }
    return trailing(&c, n, why, whylen);
}
