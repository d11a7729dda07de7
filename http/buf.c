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

#include "http/names.h"

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

/*
 * JSON escaping (RFC 8259 section 7): '"', '\\' and U+0000..U+001F must be
 * escaped; DEL is escaped too (some parsers and terminals mind it).  esc[c]
 * is 0 for a byte copied as it is, the letter after the backslash for a
 * short escape, or 'u' for \u00XX.  Bytes >= 0x80 go as they are when
 * they form well-formed UTF-8; a byte that does not (a stray continuation,
 * a surrogate's three-byte form decoded from a lone "\udc00") goes as
 * \ufffd, so every answer is UTF-8 whatever bytes it echoes.
 */
static const char esc[256] = {
    ['\0'] = 'u', [0x01] = 'u', [0x02] = 'u', [0x03] = 'u',  [0x04] = 'u',
    [0x05] = 'u', [0x06] = 'u', [0x07] = 'u', ['\b'] = 'b',  ['\t'] = 't',
    ['\n'] = 'n', [0x0b] = 'u', ['\f'] = 'f', ['\r'] = 'r',  [0x0e] = 'u',
    [0x0f] = 'u', [0x10] = 'u', [0x11] = 'u', [0x12] = 'u',  [0x13] = 'u',
    [0x14] = 'u', [0x15] = 'u', [0x16] = 'u', [0x17] = 'u',  [0x18] = 'u',
    [0x19] = 'u', [0x1a] = 'u', [0x1b] = 'u', [0x1c] = 'u',  [0x1d] = 'u',
    [0x1e] = 'u', [0x1f] = 'u', ['"'] = '"',  ['\\'] = '\\', [0x7f] = 'u',
};

static const char hex_digits[16] = "0123456789abcdef";

/* http_hex_value - see buf.h. */
int
http_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The two-digit pairs "00" to "99", for formatting two digits per step. */
static const char pairs[200] = "00010203040506070809"
                               "10111213141516171819"
                               "20212223242526272829"
                               "30313233343536373839"
                               "40414243444546474849"
                               "50515253545556575859"
                               "60616263646566676869"
                               "70717273747576777879"
                               "80818283848586878889"
                               "90919293949596979899";

/* The escape that replaces a byte that is not part of well-formed UTF-8. */
static const char replacement[] = "\\ufffd";

/* utf8_run - the length of the well-formed UTF-8 sequence at p[0..n)
 * (p[0] >= 0x80), or 0. */
static size_t
utf8_run(const char *p, size_t n)
{
    uint32_t cp;

    return http_utf8_next((const unsigned char *)p, n, &cp);
}

/* Sixteen bytes as one vector (GCC's generic vectors: SSE2 on x86-64). */
typedef signed char esc_v16 __attribute__((vector_size(16)));

/*
 * plain_len - how many bytes from p on go out as they are, counted 16 at a
 * time while no byte of a block needs a look: as signed bytes, the controls
 * and every byte >= 0x80 compare below 0x20, so four compares (with '"',
 * '\\' and DEL) test a block.  Ids and names are all such bytes.
 */
static size_t
plain_len(const char *p, size_t n)
{
    size_t i = 0;

    for (; n - i >= 16; i += 16) {
        esc_v16 x, m;
        uint64_t w[2];

        memcpy(&x, p + i, sizeof(x));
        m = (x == '"') | (x == '\\') | (x < 0x20) | (x == 0x7f);
        memcpy(w, &m, sizeof(w));
        if ((w[0] | w[1]) != 0)
            break;
    }
    while (i < n && esc[(unsigned char)p[i]] == 0 && (unsigned char)p[i] < 0x80)
        i++;
    return i;
}

/* http_json_esc_len - the escaped length, from the same table. */
size_t
http_json_esc_len(const char *p, size_t n)
{
    size_t i, k, len = n;

    for (i = plain_len(p, n); i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        char e = esc[c];

        if (c >= 0x80) {
            if ((k = utf8_run(p + i, n - i)) == 0)
                len += sizeof(replacement) - 2;
            else
                i += k - 1;
        } else if (e != 0) {
            len += e == 'u' ? 5 : 1;
        }
    }
    return len;
}

/* http_put_json_esc - the plain run copied at once, then one table lookup
 * per ASCII byte; a byte >= 0x80 starts a UTF-8 check (names.c). */
char *
http_put_json_esc(char *o, const char *p, size_t n)
{
    size_t i = plain_len(p, n);

    if (i > 0) { /* p may be NULL when n is 0 */
        memcpy(o, p, i);
        o += i;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        char e = esc[c];
        size_t k;

        if (c >= 0x80) {
            if ((k = utf8_run(p + i, n - i)) == 0) {
                memcpy(o, replacement, sizeof(replacement) - 1);
                o += sizeof(replacement) - 1;
                continue;
            }
            memcpy(o, p + i, k);
            o += k;
            i += k - 1;
            continue;
        }
        if (e == 0) {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        *o++ = e;
        if (e == 'u') {
            o[0] = '0';
            o[1] = '0';
            o[2] = hex_digits[c >> 4];
            o[3] = hex_digits[c & 15];
            o += 4;
        }
    }
    return o;
}

/* http_buf_append_json_str - the escaped bytes between quotes. */
int
http_buf_append_json_str(struct http_buf *b, const char *p, size_t n)
{
    char *o;

    if (http_buf_reserve(b, http_json_esc_len(p, n) + 2) != 0)
        return -ENOMEM;
    o = http_buf_tail(b);
    *o++ = '"';
    o = http_put_json_esc(o, p, n);
    *o++ = '"';
    http_buf_commit(b, o);
    return 0;
}

/* http_put_u64 - its digits counted first, then written from the last
 * one back, two per division, straight into o (a copy of a variable length
 * would be a call to memcpy: this runs for every id of every answer). */
char *
http_put_u64(char *o, uint64_t v)
{
    size_t n = 1;
    char *t;

    for (uint64_t p = 10; n < 20 && v >= p; p *= 10)
        n++;
    t = o + n;
    while (v >= 100) {
        uint64_t r = v % 100;

        v /= 100;
        t -= 2;
        t[0] = pairs[2 * r];
        t[1] = pairs[2 * r + 1];
    }
    if (v >= 10) {
        t[-2] = pairs[2 * v];
        t[-1] = pairs[2 * v + 1];
    } else {
        t[-1] = (char)('0' + v);
    }
    return o + n;
}

/* http_put_hex16 - fixed width, most significant nibble first. */
char *
http_put_hex16(char *o, uint64_t v)
{
    int i;

    for (i = 15; i >= 0; i--) {
        o[i] = hex_digits[v & 15];
        v >>= 4;
    }
    return o + 16;
}

/* http_buf_append_u64 - decimal, without printf's overhead. */
int
http_buf_append_u64(struct http_buf *b, uint64_t v)
{
    if (http_buf_reserve(b, HTTP_PUT_U64_MAX) != 0)
        return -ENOMEM;
    http_buf_commit(b, http_put_u64(http_buf_tail(b), v));
    return 0;
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

/* http_buf_append_json_strs - see buf.h. */
int
http_buf_append_json_strs(struct http_buf *b, const char *const *s, int n)
{
    http_buf_append_str(b, "[");
    for (int i = 0; i < n; i++) {
        http_buf_append_str(b, i ? "," : "");
        http_buf_append_json_str(b, s[i], strlen(s[i]));
    }
    return http_buf_append_str(b, "]");
}
