/*
 * json_scan.c - the strict, tree-less JSON scanner of json_scan.h.
 *
 * Recursive descent over the grammar of RFC 8259 with a depth bound, so the
 * C stack holds at most HTTP_JSON_MAX_DEPTH frames.  The string loop skips
 * plain ASCII bytes in a tight loop: push bodies are mostly string bytes.
 * No allocation, no locking.  Errors: -EINVAL with j->why and j->p set.
 */
#include "http/json_scan.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

static int scan_value(struct http_json *j);

/* fail - record why at p, return -EINVAL. */
static int
fail(struct http_json *j, const char *p, const char *why)
{
    j->p = p;
    j->why = why;
    return -EINVAL;
}

/* http_json_init - a fresh scanner over buf[0..n). */
void
http_json_init(struct http_json *j, const char *buf, size_t n)
{
    j->start = buf;
    j->p = buf;
    j->end = buf + n;
    j->depth = 0;
    j->why = NULL;
}

/* http_json_eat - consume c after whitespace. */
int
http_json_eat(struct http_json *j, char c)
{
    if (http_json_peek(j) == (unsigned char)c) {
        j->p++;
        return 0;
    }
    switch (c) {
    case ':':
        return fail(j, j->p, "expected ':'");
    case '}':
        return fail(j, j->p, "expected ',' or '}'");
    case ']':
        return fail(j, j->p, "expected ',' or ']'");
    default:
        return fail(j, j->p, "unexpected character");
    }
}

/*
 * utf8_len - length of the well-formed UTF-8 sequence at p (Unicode Table
 * 3-7: shortest form, no surrogates, at most U+10FFFF), or 0.
 */
static size_t
utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0], lo = 0x80, hi = 0xbf;
    size_t n, i;

    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
        return 0;
    for (i = 2; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* hex4 - the value of four hex digits at p, or -1. */
static long
hex4(const char *p)
{
    long v = 0;
    int i;

    for (i = 0; i < 4; i++) {
        char c = p[i];

        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

/* put_utf8 - write code point cp (<= U+10FFFF) at o; returns bytes. */
static size_t
put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/*
 * scan_u_escape - p at the 'u' of "\uXXXX": validate it (and a following
 * low surrogate escape that pairs with a high one), write the code point to
 * *o when o is set.  A lone surrogate is written in its three-byte form,
 * which is not UTF-8: a name holding one is refused (http_name_valid)
 * rather than quietly becoming U+FFFD and another name's twin.  Returns
 * the bytes consumed after the backslash, or 0 for bad hex digits.
 */
static size_t
scan_u_escape(const char *p, const char *end, char **o)
{
    long hi, lo;
    uint32_t cp;

    if (end - p < 5 || (hi = hex4(p + 1)) < 0)
        return 0;
    cp = (uint32_t)hi;
    if (hi >= 0xd800 && hi <= 0xdbff && end - p >= 11 && p[5] == '\\' &&
        p[6] == 'u' && (lo = hex4(p + 7)) >= 0xdc00 && lo <= 0xdfff) {
        if (o != NULL)
            *o += put_utf8(*o, 0x10000 + (((uint32_t)hi - 0xd800) << 10) +
                                   ((uint32_t)lo - 0xdc00));
        return 11;
    }
    if (o != NULL)
        *o += put_utf8(*o, cp);
    return 5;
}

/* scan_escape - p after a backslash; 0 if the escape is not one of the
 * RFC's.  Writes the unescaped bytes at *o when o is set. */
static size_t
scan_escape(const char *p, const char *end, char **o)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    size_t i;

    if (p == end)
        return 0;
    if (*p == 'u')
        return scan_u_escape(p, end, o);
    for (i = 0; i < sizeof(from) - 1; i++) {
        if (*p == from[i]) {
            if (o != NULL)
                *(*o)++ = to[i];
            return 1;
        }
    }
    return 0;
}

#ifdef __SSE2__
/* special16 - a bit per byte of the 16 at p that a string cannot hold as
 * it is: '"', '\\', and, as signed bytes, both the controls and every
 * byte >= 0x80 (they compare below 0x20). */
static inline unsigned
special16(const unsigned char *p)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i m =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                  _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                     _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));

    return (unsigned)_mm_movemask_epi8(m);
}

/*
 * plain_run - skip the bytes a string holds as they are (0x20..0x7f but
 * '"' and '\\'): 32 bytes a step while none needs a look, then the exact
 * stop from the mask's lowest bit, so no byte is looked at twice.  Payload
 * bodies are mostly such bytes, and this loop is most of a push's parse.
 */
static const unsigned char *
plain_run(const unsigned char *p, const unsigned char *end)
{
    unsigned m;

    while (end - p >= 32) {
        m = special16(p) | special16(p + 16) << 16;
        if (m != 0)
            return p + __builtin_ctz(m);
        p += 32;
    }
    if (end - p >= 16) {
        if ((m = special16(p)) != 0)
            return p + __builtin_ctz(m);
        p += 16;
    }
    while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
        p++;
    return p;
}
#else
/* Sixteen bytes as one vector (GCC's generic vectors: NEON on arm64, plain
 * words elsewhere). */
typedef signed char json_v16 __attribute__((vector_size(16)));

/*
 * plain_run - skip the bytes a string holds as they are (0x20..0x7f but
 * '"' and '\\'), 16 at a time while no byte of the block needs a look:
 * as signed bytes, both the controls and every byte >= 0x80 compare below
 * 0x20, so three compares test a block.  The byte loop then finds the
 * exact stop inside the block that has one.
 */
static const unsigned char *
plain_run(const unsigned char *p, const unsigned char *end)
{
    while (end - p >= 16) {
        json_v16 x, m;
        uint64_t w[2];

        memcpy(&x, p, sizeof(x));
        m = (x == '"') | (x == '\\') | (x < 0x20);
        memcpy(w, &m, sizeof(w));
        if ((w[0] | w[1]) != 0)
            break;
        p += 16;
    }
    while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
        p++;
    return p;
}
#endif

/* http_json_string - see json_scan.h; o == NULL skips the copying. */
int
http_json_string(struct http_json *j, char *dst, size_t *dst_len)
{
    const unsigned char *p, *end = (const unsigned char *)j->end;
    char *o = dst;
    size_t k;

    if (http_json_peek(j) != '"')
        return fail(j, j->p, "expected a string");
    p = (const unsigned char *)j->p + 1;
    for (;;) {
        const unsigned char *run = p;

        p = plain_run(p, end);
        if (o != NULL && p > run) {
            memcpy(o, run, (size_t)(p - run));
            o += p - run;
        }
        if (p == end)
            return fail(j, (const char *)p, "unterminated string");
        if (*p == '"')
            break;
        if (*p < 0x20)
            return fail(j, (const char *)p, "control character in string");
        if (*p == '\\') {
            k = scan_escape((const char *)p + 1, j->end, o ? &o : NULL);
            if (k == 0)
                return fail(j, (const char *)p, "invalid escape in string");
            p += 1 + k;
            continue;
        }
        k = utf8_len(p, end);
        if (k == 0)
            return fail(j, (const char *)p, "invalid UTF-8");
        if (o != NULL) {
            for (size_t i = 0; i < k; i++)
                *o++ = (char)p[i];
        }
        p += k;
    }
    j->p = (const char *)p + 1;
    if (dst_len != NULL)
        *dst_len = (size_t)(o - dst);
    return 0;
}

/* is_digit - '0'..'9'. */
static int
is_digit(const char *p, const char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

/*
 * scan_number - -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and no
 * number-like byte right after it ("01", "1.", "1e5."), else -EINVAL with
 * j->p at the number's first byte.
 */
static int
scan_number(struct http_json *j)
{
    const char *start = j->p, *p = j->p, *end = j->end;

    if (p < end && *p == '-')
        p++;
    if (!is_digit(p, end))
        return fail(j, start, "invalid number");
    if (*p++ != '0')
        while (is_digit(p, end))
            p++;
    if (p < end && *p == '.') {
        if (!is_digit(++p, end))
            return fail(j, start, "invalid number");
        while (is_digit(p, end))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (!is_digit(p, end))
            return fail(j, start, "invalid number");
        while (is_digit(p, end))
            p++;
    }
    if (p < end && (is_digit(p, end) || *p == '.' || *p == 'e' || *p == 'E' ||
                    *p == '+' || *p == '-'))
        return fail(j, start, "invalid number");
    j->p = p;
    return 0;
}

/* scan_literal - exactly word (true, false, null), not followed by a
 * letter or digit. */
static int
scan_literal(struct http_json *j, const char *word, size_t n)
{
    const char *p = j->p;
    size_t i;

    for (i = 0; i < n; i++)
        if (p + i == j->end || p[i] != word[i])
            return fail(j, p, "invalid literal");
    p += n;
    if (p < j->end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                       (*p >= '0' && *p <= '9')))
        return fail(j, j->p, "invalid literal");
    j->p = p;
    return 0;
}

/* http_json_key - a string and the ':' after it. */
int
http_json_key(struct http_json *j, char *dst, size_t *dst_len)
{
    if (http_json_string(j, dst, dst_len) != 0)
        return -EINVAL;
    return http_json_eat(j, ':');
}

/* http_json_end - trailing whitespace only. */
int
http_json_end(struct http_json *j)
{
    if (http_json_peek(j) == -1)
        return 0;
    return fail(j, j->p, "unexpected data after the JSON text");
}

/* scan_array - '[' (value (',' value)*)? ']' */
static int
scan_array(struct http_json *j)
{
    int more = http_json_enter(j);

    while (more > 0) {
        if (scan_value(j) != 0)
            return -EINVAL;
        more = http_json_next(j, ']');
    }
    return more;
}

/* scan_object - '{' (string ':' value (',' string ':' value)*)? '}' */
static int
scan_object(struct http_json *j)
{
    int more = http_json_enter(j);

    while (more > 0) {
        if (http_json_key(j, NULL, NULL) != 0 || scan_value(j) != 0)
            return -EINVAL;
        more = http_json_next(j, '}');
    }
    return more;
}

/* scan_value - dispatch on the first byte, after whitespace.  The value
 * sits at depth j->depth + 1, which HTTP_JSON_MAX_DEPTH bounds. */
static int
scan_value(struct http_json *j)
{
    int c = http_json_peek(j);

    if (j->depth >= HTTP_JSON_MAX_DEPTH && c != -1)
        return fail(j, j->p, "nesting too deep");
    switch (c) {
    case '{':
        return scan_object(j);
    case '[':
        return scan_array(j);
    case '"':
        return http_json_string(j, NULL, NULL);
    case 't':
        return scan_literal(j, "true", 4);
    case 'f':
        return scan_literal(j, "false", 5);
    case 'n':
        return scan_literal(j, "null", 4);
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return scan_number(j);
    case -1:
        return fail(j, j->p, "unexpected end of data");
    default:
        return fail(j, j->p, "expected a value");
    }
}

/* http_json_value - one value of any type. */
int
http_json_value(struct http_json *j)
{
    return scan_value(j);
}

/* http_json_valid - a whole document. */
int
http_json_valid(const char *buf, size_t n)
{
    struct http_json j;

    http_json_init(&j, buf, n);
    return scan_value(&j) == 0 && http_json_end(&j) == 0;
}
