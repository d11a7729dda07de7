/*
 * cursor.c - see cursor.h: a stream's cursor, binary fields in base64url.
 */
#include "http/cursor.h"

#include <errno.h>
#include <string.h>

#define VERSION    '1'
#define BIN_MAX    ((HTTP_CURSOR_MAX - 1) * 6 / 8) /* bytes the text holds */
#define VARINT_MAX 10                              /* a u64 in LEB128 */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* http_cursor_hash - see cursor.h. */
uint32_t
http_cursor_hash(uint32_t h, const void *p, size_t n)
{
    const unsigned char *u = p;

    for (size_t i = 0; i < n; i++) {
        h ^= u[i];
        h *= 16777619u;
    }
    return h;
}

/* put_varint - v in LEB128 at o; returns the end. */
static unsigned char *
put_varint(unsigned char *o, uint64_t v)
{
    while (v >= 0x80) {
        *o++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *o++ = (unsigned char)v;
    return o;
}

/* get_varint - a shortest-form LEB128 u64 from *p (before end) into *v,
 * moving *p past it.  0 or -EINVAL. */
static int
get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    uint64_t r = 0;

    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char b = *(*p)++;
        if (shift == 63 && b > 1)
            return -EINVAL; /* past 64 bits */
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (b == 0 && shift != 0)
                return -EINVAL; /* a longer form than needed */
            *v = r;
            return 0;
        }
    }
    return -EINVAL;
}

/* to_binary - c's binary form into bin (BIN_MAX + a varint's room).
 * Returns its length, or -EINVAL, -ENOSPC. */
static int
to_binary(const struct http_cursor *c, unsigned char *bin)
{
    unsigned char *o = bin;

    if (c->nowners > HTTP_CURSOR_OWNERS || c->nparts > HTTP_CURSOR_PARTS)
        return -EINVAL;
    for (int i = 3; i >= 0; i--)
        *o++ = (unsigned char)(c->hash >> (8 * i));
    *o++ = (unsigned char)c->nowners;
    for (unsigned k = 0; k < c->nowners; k++) {
        if (o - bin > BIN_MAX)
            return -ENOSPC;
        for (int i = 7; i >= 0; i--)
            *o++ = (unsigned char)(c->inc[k] >> (8 * i));
        o = put_varint(o, c->w[k]);
    }
    if (o - bin > BIN_MAX)
        return -ENOSPC;
    o = put_varint(o, c->nparts);
    if ((size_t)(o - bin) + (c->nparts + 1) / 2 > BIN_MAX)
        return -ENOSPC;
    for (unsigned i = 0; i < c->nparts; i += 2) {
        unsigned hi = c->owner[i];
        unsigned lo = i + 1 < c->nparts ? c->owner[i + 1] : HTTP_CURSOR_NONE;
        if ((hi != HTTP_CURSOR_NONE && hi >= c->nowners) ||
            (lo != HTTP_CURSOR_NONE && lo >= c->nowners))
            return -EINVAL;
        *o++ = (unsigned char)(hi << 4 | lo);
    }
    return (int)(o - bin);
}

/* http_cursor_encode - see cursor.h. */
int
http_cursor_encode(const struct http_cursor *c, char *out)
{
    unsigned char bin[BIN_MAX + VARINT_MAX + 8];
    int n = to_binary(c, bin);
    char *o = out;
    uint32_t acc = 0;
    int bits = 0;

    if (n < 0)
        return n;
    *o++ = VERSION;
    for (int i = 0; i < n; i++) {
        acc = acc << 8 | bin[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            *o++ = b64[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        *o++ = b64[(acc << (6 - bits)) & 63];
    *o = '\0';
    return (int)(o - out);
}

/* b64_value - the 6 bits character ch stands for, or -1. */
static int
b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '-')
        return 62;
    if (ch == '_')
        return 63;
    return -1;
}

/* from_text - the base64url text s[0..len) into bin; its length, or
 * -EINVAL (a stray character, a length no encoding gives, bits left set
 * after the last byte). */
static int
from_text(const char *s, size_t len, unsigned char *bin)
{
    uint32_t acc = 0;
    int bits = 0, n = 0;

    if (len % 4 == 1)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(s[i]);
        if (v < 0)
            return -EINVAL;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            bin[n++] = (unsigned char)(acc >> bits);
        }
    }
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
        return -EINVAL;
    return n;
}

/* http_cursor_decode - see cursor.h. */
int
http_cursor_decode(const char *s, size_t len, struct http_cursor *c)
{
    unsigned char bin[BIN_MAX + 1];
    const unsigned char *p = bin, *end;
    uint64_t v;
    int n;

    if (len < 2 || len > HTTP_CURSOR_MAX || s[0] != VERSION)
        return -EINVAL;
    if ((n = from_text(s + 1, len - 1, bin)) < 5)
        return -EINVAL;
    end = bin + n;
    memset(c, 0, sizeof(*c));
    c->hash = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
              (uint32_t)p[2] << 8 | p[3];
    c->nowners = p[4];
    p += 5;
    if (c->nowners > HTTP_CURSOR_OWNERS)
        return -EINVAL;
    for (unsigned k = 0; k < c->nowners; k++) {
        if (end - p < 8)
            return -EINVAL;
        for (int i = 0; i < 8; i++)
            c->inc[k] = c->inc[k] << 8 | *p++;
        if (get_varint(&p, end, &c->w[k]) != 0)
            return -EINVAL;
    }
    if (get_varint(&p, end, &v) != 0 || v > HTTP_CURSOR_PARTS ||
        (size_t)(end - p) != (v + 1) / 2)
        return -EINVAL;
    c->nparts = (unsigned)v;
    for (unsigned i = 0; i < c->nparts; i++) {
        unsigned o = i % 2 == 0 ? p[i / 2] >> 4 : p[i / 2] & 15;
        if (o != HTTP_CURSOR_NONE && o >= c->nowners)
            return -EINVAL;
        c->owner[i] = (uint8_t)o;
    }
    if (c->nparts % 2 == 1 && (p[c->nparts / 2] & 15) != HTTP_CURSOR_NONE)
        return -EINVAL;
    return 0;
}
