/*
 * number.c - see number.h.
 */
#include "http/number.h"

#include <ctype.h>

/* http_parse_number - see number.h. */
int
http_parse_number(const char *v, int suffix, uint64_t *out, const char **why)
{
    uint64_t n = 0, mult = 1;
    const char *p = v;

    if (!isdigit((unsigned char)*p)) {
        *why = suffix ? "expected bytes, optionally with a K, M or G suffix"
                      : "expected a whole number";
        return -1;
    }
    for (; isdigit((unsigned char)*p); p++) {
        if (n > (UINT64_MAX - 9) / 10) {
            *why = "number too large";
            return -1;
        }
        n = n * 10 + (uint64_t)(*p - '0');
    }
    if (suffix && *p != '\0' && p[1] == '\0') {
        switch (toupper((unsigned char)*p)) {
        case 'K':
            mult = 1024ULL;
            p++;
            break;
        case 'M':
            mult = 1024ULL * 1024;
            p++;
            break;
        case 'G':
            mult = 1024ULL * 1024 * 1024;
            p++;
            break;
        }
    }
    if (*p != '\0') {
        *why = suffix ? "expected bytes, optionally with a K, M or G suffix"
                      : "expected a whole number";
        return -1;
    }
    if (n > UINT64_MAX / mult) {
        *why = "number too large";
        return -1;
    }
    *out = n * mult;
    return 0;
}
