/*
 * sse.c - see sse.h.
 *
 * Bytes are gathered into p->line until a line end, then the line is
 * read; a CR at the end of one feed may have its LF at the start of the
 * next, which p->cr remembers.
 */
#include "ops/cli/sse.h"

#include <stdlib.h>
#include <string.h>

/* cli_sse_grow - room for n more bytes and a NUL in *b; -1 out of memory
 * or past CLI_SSE_MAX. */
static int
cli_sse_grow(char **b, size_t *cap, size_t len, size_t n)
{
    size_t want = *cap ? *cap : 256;
    char *g;

    if (n > CLI_SSE_MAX - len)
        return -1;
    if (len + n + 1 <= *cap)
        return 0;
    while (want < len + n + 1)
        want *= 2;
    if ((g = realloc(*b, want)) == NULL)
        return -1;
    *b = g;
    *cap = want;
    return 0;
}

/* cli_sse_init - see sse.h. */
void
cli_sse_init(struct cli_sse *p)
{
    memset(p, 0, sizeof(*p));
    p->retry_ms = -1;
}

/* cli_sse_restart - see sse.h. */
void
cli_sse_restart(struct cli_sse *p)
{
    p->len = p->dlen = 0;
    p->event[0] = '\0';
    p->id_set = 0;
    p->cr = 0;
}

/* cli_sse_dispatch - a blank line. */
static int
cli_sse_dispatch(struct cli_sse *p, cli_sse_fn *fn, void *arg)
{
    int rc = 0;

    if (p->id_set)
        memcpy(p->last_id, p->id, sizeof(p->id));
    p->id_set = 0;
    if (p->dlen > 0) {
        p->data[--p->dlen] = '\0'; /* its last LF */
        rc = fn(arg, p->event[0] ? p->event : "message", p->data, p->dlen);
    }
    p->dlen = 0;
    p->event[0] = '\0';
    return rc;
}

/* cli_sse_field - one field: name[0..n) with value v[0..vn). */
static int
cli_sse_field(struct cli_sse *p, const char *name, size_t n, const char *v,
              size_t vn)
{
    if (n == 4 && memcmp(name, "data", 4) == 0) {
        if (cli_sse_grow(&p->data, &p->dcap, p->dlen, vn + 1) != 0)
            return -1;
        memcpy(p->data + p->dlen, v, vn);
        p->dlen += vn;
        p->data[p->dlen++] = '\n';
        p->data[p->dlen] = '\0';
    } else if (n == 5 && memcmp(name, "event", 5) == 0) {
        if (vn >= sizeof(p->event))
            v = "?", vn = 1; /* no event of ours is that long */
        memcpy(p->event, v, vn);
        p->event[vn] = '\0';
    } else if (n == 2 && memcmp(name, "id", 2) == 0) {
        if (vn <= CLI_SSE_ID_MAX && memchr(v, '\0', vn) == NULL) {
            memcpy(p->id, v, vn);
            p->id[vn] = '\0';
            p->id_set = 1;
        }
    } else if (n == 5 && memcmp(name, "retry", 5) == 0 && vn > 0 &&
               strspn(v, "0123456789") >= vn) {
        long ms = 0;
        for (size_t i = 0; i < vn; i++)
            ms = ms > 100000000 ? ms : ms * 10 + (v[i] - '0');
        p->retry_ms = ms;
    }
    return 0;
}

/* cli_sse_line - one whole line, NUL-terminated at s[n]. */
static int
cli_sse_line(struct cli_sse *p, const char *s, size_t n, cli_sse_fn *fn,
             void *arg)
{
    const char *colon = memchr(s, ':', n);
    size_t vn;

    if (n == 0)
        return cli_sse_dispatch(p, fn, arg);
    if (s[0] == ':')
        return 0;
    if (colon == NULL)
        return cli_sse_field(p, s, n, "", 0);
    vn = n - (size_t)(colon + 1 - s);
    if (vn > 0 && colon[1] == ' ')
        return cli_sse_field(p, s, (size_t)(colon - s), colon + 2, vn - 1);
    return cli_sse_field(p, s, (size_t)(colon - s), colon + 1, vn);
}

/* cli_sse_feed - see sse.h. */
int
cli_sse_feed(struct cli_sse *p, const char *buf, size_t n, cli_sse_fn *fn,
             void *arg)
{
    const char *s = buf, *end = buf + n;

    if (p->cr && s < end) {
        p->cr = 0;
        s += *s == '\n';
    }
    while (s < end) {
        const char *eol = s;
        size_t run;
        int rc;

        while (eol < end && *eol != '\r' && *eol != '\n')
            eol++;
        run = (size_t)(eol - s);
        if (cli_sse_grow(&p->line, &p->cap, p->len, run) != 0)
            return -1;
        memcpy(p->line + p->len, s, run);
        p->len += run;
        p->line[p->len] = '\0';
        if (eol == end)
            return 0;
        s = eol + 1;
        if (*eol == '\r') {
            if (s == end)
                p->cr = 1;
            else
                s += *s == '\n';
        }
        rc = cli_sse_line(p, p->line, p->len, fn, arg);
        p->len = 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* cli_sse_free - see sse.h. */
void
cli_sse_free(struct cli_sse *p)
{
    free(p->line);
    free(p->data);
    cli_sse_init(p);
}
