/*
 * buf.c - the growable byte buffer of buf.h.
 *
 * Growth doubles the capacity (at least 256 bytes) so appends are amortized
 * O(1).  The sticky oom flag lets builders check once.  No locking.
 * Errors: 0 or -ENOMEM.
 */
#include "http/buf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* http_buf_init - an empty buffer. */
void
http_buf_init(struct http_buf *b)
{
    memset(b, 0, sizeof(*b));
}

/* http_buf_free - release the bytes, leave b empty. */
void
http_buf_free(struct http_buf *b)
{
    free(b->data);
    http_buf_init(b);
}

/* http_buf_reserve - room for extra bytes plus the terminating NUL. */
int
http_buf_reserve(struct http_buf *b, size_t extra)
{
    size_t need, cap;
    char *p;

    if (b->oom)
        return -ENOMEM;
    if (extra > SIZE_MAX - b->len - 1)
        goto oom;
    need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    cap = b->cap < 256 ? 256 : b->cap;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    p = realloc(b->data, cap);
    if (p == NULL)
        goto oom;
    b->data = p;
    b->cap = cap;
    return 0;
oom:
    b->oom = 1;
    return -ENOMEM;
}

/* http_buf_append - copy n bytes at the end, keep the NUL after them. */
int
http_buf_append(struct http_buf *b, const void *p, size_t n)
{
    if (http_buf_reserve(b, n) != 0)
        return -ENOMEM;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

/* http_buf_append_str - a C string, raw. */
int
http_buf_append_str(struct http_buf *b, const char *s)
{
    return http_buf_append(b, s, strlen(s));
}

/* The escape of byte c inside a JSON string, or NULL when c goes as is. */
static const char *
json_escape_of(unsigned char c)
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        return NULL;
    }
}

/* http_buf_append_json_esc - escape; runs of plain bytes are copied in one
 * memcpy. */
int
http_buf_append_json_esc(struct http_buf *b, const char *p, size_t n)
{
    size_t i, run = 0;
    char hex[8];

    if (http_buf_reserve(b, n) != 0)
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        const char *esc;

        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        http_buf_append(b, p + run, i - run);
        run = i + 1;
        esc = json_escape_of(c);
        if (esc != NULL) {
            http_buf_append_str(b, esc);
        } else {
            snprintf(hex, sizeof(hex), "\\u%04x", c);
            http_buf_append(b, hex, 6);
        }
    }
    return http_buf_append(b, p + run, n - run);
}

/* http_buf_append_json_str - the escaped bytes between quotes. */
int
http_buf_append_json_str(struct http_buf *b, const char *p, size_t n)
{
    if (http_buf_reserve(b, n + 2) != 0)
        return -ENOMEM;
    http_buf_append(b, "\"", 1);
    http_buf_append_json_esc(b, p, n);
    return http_buf_append(b, "\"", 1);
}

/* http_buf_append_u64 - decimal, without printf's overhead. */
int
http_buf_append_u64(struct http_buf *b, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof(tmp);

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return http_buf_append(b, tmp + i, sizeof(tmp) - i);
}

/* http_buf_append_i64 - decimal with a '-' for negatives (INT64_MIN too). */
int
http_buf_append_i64(struct http_buf *b, int64_t v)
{
    if (v >= 0)
        return http_buf_append_u64(b, (uint64_t)v);
    if (http_buf_append(b, "-", 1) != 0)
        return -ENOMEM;
    return http_buf_append_u64(b, (uint64_t)0 - (uint64_t)v);
}

/* http_buf_printf - format into the spare room, growing once if short. */
int
http_buf_printf(struct http_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (http_buf_reserve(b, 64) != 0)
        return -ENOMEM;
    va_start(ap, fmt);
    n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= b->cap - b->len) {
        if (http_buf_reserve(b, (size_t)n) != 0)
            return -ENOMEM;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
    return 0;
}
