/*
 * names.c - validation of queue, partition and group names and node ids
 * (SPEC §1).  Pure functions, no state.
 */
#include "http/names.h"

#include <stdint.h>
#include <string.h>

/* http_utf8_next - see names.h. */
size_t
http_utf8_next(const unsigned char *p, size_t n, uint32_t *cp)
{
    uint32_t c = p[0];
    size_t len, i;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, c &= 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, c &= 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, c &= 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) || c > 0x10ffff ||
        (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

/* http_name_valid - UTF-8 walk rejecting C0, DEL and C1 code points. */
int
http_name_valid(const char *p, size_t len)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0, k;
    uint32_t cp;

    if (len == 0 || len > HTTP_NAME_MAX)
        return 0;
    while (i < len) {
        k = http_utf8_next(s + i, len - i, &cp);
        if (k == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
            return 0;
        i += k;
    }
    return 1;
}

/* http_node_id_valid - [A-Za-z0-9._-]{1,64}. */
int
http_node_id_valid(const char *p, size_t len)
{
    size_t i;

    if (len == 0 || len > HTTP_NODE_ID_MAX)
        return 0;
    for (i = 0; i < len; i++) {
        char c = p[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int
http_utf8_cut(const char *s, size_t max)
{
    size_t n = strnlen(s, max);

    /* Cut inside a sequence when the first byte left out continues it. */
    while (n == max && n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        max = --n;
    return (int)n;
}
