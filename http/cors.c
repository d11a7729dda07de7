/*
 * cors.c - the cors_origins list (see cors.h): parsed once, matched per
 * answer that carries an Origin.  No state; no locking.
 */
#include "http/cors.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* origin_host - host[:port] after the scheme: a name or an IPv4 address
 * ([A-Za-z0-9.-]), or a bracketed IPv6 address; a port 1-65535. */
static int
origin_host(const char *p, size_t n)
{
    size_t i = 0;

    if (n > 0 && p[0] == '[') {
        for (i = 1; i < n && p[i] != ']'; i++)
            if (!isxdigit((unsigned char)p[i]) && p[i] != ':' && p[i] != '.')
                return 0;
        if (i == n || i == 1)
            return 0;
        i++;
    } else {
        while (i < n &&
               (isalnum((unsigned char)p[i]) || p[i] == '.' || p[i] == '-'))
            i++;
        if (i == 0)
            return 0;
    }
    if (i == n)
        return 1;
    if (p[i] != ':' || n - i < 2 || n - i > 6)
        return 0;
    long port = 0;
    for (size_t j = i + 1; j < n; j++) {
        if (!isdigit((unsigned char)p[j]))
            return 0;
        port = port * 10 + (p[j] - '0');
    }
    return port >= 1 && port <= 65535;
}

/* origin_valid - p[0..n) is "*" or an origin a browser sends. */
static int
origin_valid(const char *p, size_t n, const char **why)
{
    size_t skip;

    if (n == 1 && p[0] == '*')
        return 1;
    if (n > 7 && strncasecmp(p, "http://", 7) == 0)
        skip = 7;
    else if (n > 8 && strncasecmp(p, "https://", 8) == 0)
        skip = 8;
    else {
        *why = "an origin is * or starts with http:// or https://";
        return 0;
    }
    if (!origin_host(p + skip, n - skip)) {
        *why = "an origin is scheme://host[:port], with nothing after "
               "(no path, no trailing /)";
        return 0;
    }
    return 1;
}

/* http_cors_parse - see cors.h. */
int
http_cors_parse(const char *list, struct http_cors *c, const char **why)
{
    size_t used = 0;
    const char *p = list;

    memset(c, 0, sizeof(*c));
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0')
        return 0; /* none */
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        while (n > 0 && isspace((unsigned char)*p)) {
            p++;
            n--;
        }
        while (n > 0 && isspace((unsigned char)p[n - 1]))
            n--;
        if (n == 0) {
            *why = "an entry of the list is empty";
            goto fail;
        }
        if (!origin_valid(p, n, why))
            goto fail;
        if (used + n + 2 > sizeof(c->origins)) {
            *why = "the list is too long";
            goto fail;
        }
        memcpy(c->origins + used, p, n);
        used += n;
        c->origins[used++] = '\0';
        c->any |= n == 1 && p[0] == '*';
        c->n++;
        if (end == NULL)
            break;
        p = end + 1;
    }
    c->origins[used] = '\0';
    return 0;
fail:
    memset(c, 0, sizeof(*c));
    return -1;
}

/* http_cors_allows - see cors.h.  Schemes and hosts are case-insensitive;
 * browsers send them in lower case. */
int
http_cors_allows(const struct http_cors *c, const char *origin)
{
    if (c == NULL || c->n == 0 || origin == NULL || origin[0] == '\0')
        return 0;
    if (c->any)
        return 1;
    for (const char *o = c->origins; *o != '\0'; o += strlen(o) + 1)
        if (strcasecmp(o, origin) == 0)
            return 1;
    return 0;
}
