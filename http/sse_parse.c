/*
 * sse_parse.c - the Server-Sent Events reader of sse_parse.h.
 *
 * A feed walks its bytes line by line.  A line wholly inside the feed is
 * read where it lies; only a line cut by the feed's end is copied, into
 * p->line, and finished by the next feed.  The BOM and a CR LF may be cut
 * the same way, so their progress lives in p->bom and p->cr.
 *
 * Pure, no locking.  Errors: 0 or -errno (sticky in p->err).
 */
#include "http/sse_parse.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static const unsigned char sse_bom[3] = {0xef, 0xbb, 0xbf};

/* sse_clear - b empty, its memory kept. */
static void
sse_clear(struct http_buf *b)
{
    b->len = 0;
    if (b->data != NULL)
        b->data[0] = '\0';
}

/* sse_set - b holds p[0..n) and a NUL.  0 or -ENOMEM. */
static int
sse_set(struct http_buf *b, const char *p, size_t n)
{
    sse_clear(b);
    if (http_buf_reserve(b, n) != 0)
        return -ENOMEM;
    memcpy(b->data, p, n);
    b->len = n;
    b->data[n] = '\0';
    return 0;
}

/* sse_add - append p[0..n) to b.  0 or -ENOMEM. */
static int
sse_add(struct http_buf *b, const char *p, size_t n)
{
    if (n == 0)
        return 0;
    return http_buf_append(b, p, n) == 0 ? 0 : -ENOMEM;
}

void
http_sse_parse_init(struct http_sse_parser *p, size_t max)
{
    memset(p, 0, sizeof(*p));
    p->max = max;
    p->retry_ms = -1;
}

/* sse_retry - a retry value: ASCII digits only, at least one; saturates
 * rather than wrap.  Anything else leaves the time as it was. */
static void
sse_retry(struct http_sse_parser *p, const char *v, size_t n)
{
    int64_t ms = 0;

    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return;
        ms = ms > (INT64_MAX - 9) / 10 ? INT64_MAX : ms * 10 + (v[i] - '0');
    }
    p->retry_ms = ms;
}

/* sse_dispatch - a blank line: commit the id, then deliver the gathered
 * event, if it has data, to fn.  0 or what fn returned. */
static int
sse_dispatch(struct http_sse_parser *p, http_sse_parse_fn *fn, void *arg)
{
    struct http_sse_parsed ev;
    int rc;

    if (p->id_set) {
        /* Swap: the old string's memory becomes the next id buffer, which
         * only an id field (replacing all of it) fills. */
        struct http_buf t = p->last_id;

        p->last_id = p->id;
        p->id = t;
        p->id_set = 0;
    }
    if (p->data.len == 0) {
        sse_clear(&p->type);
        return 0;
    }
    p->data.data[--p->data.len] = '\0'; /* its last LF */
    ev.type = p->type.len > 0 ? p->type.data : "message";
    ev.type_len = p->type.len > 0 ? p->type.len : strlen("message");
    ev.data = p->data.data;
    ev.data_len = p->data.len;
    ev.id = p->last_id.len > 0 ? p->last_id.data : "";
    ev.id_len = p->last_id.len;
    ev.retry_ms = p->retry_ms;
    rc = fn(arg, &ev);
    sse_clear(&p->data);
    sse_clear(&p->type);
    return rc;
}

/* sse_field - one field line: name[0..n) and its value. */
static int
sse_field(struct http_sse_parser *p, const char *name, size_t n, const char *v,
          size_t vn)
{
#define SSE_IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
    if (SSE_IS("data")) {
        if (vn + 1 > p->max - p->data.len) /* data.len <= max always */
            return -EMSGSIZE;
        if (sse_add(&p->data, v, vn) != 0 || sse_add(&p->data, "\n", 1) != 0)
            return -ENOMEM;
        return 0;
    }
    if (SSE_IS("event"))
        return sse_set(&p->type, v, vn);
    if (SSE_IS("id")) {
        if (memchr(v, '\0', vn) != NULL)
            return 0;
        p->id_set = 1;
        return sse_set(&p->id, v, vn);
    }
    if (SSE_IS("retry"))
        sse_retry(p, v, vn);
    return 0;
#undef SSE_IS
}

/* sse_line - one whole line (its end cut off). */
static int
sse_line(struct http_sse_parser *p, const char *s, size_t n,
         http_sse_parse_fn *fn, void *arg)
{
    const char *colon;
    size_t vn;

    if (n == 0)
        return sse_dispatch(p, fn, arg);
    if (s[0] == ':')
        return 0;
    colon = memchr(s, ':', n);
    if (colon == NULL)
        return sse_field(p, s, n, "", 0);
    vn = n - (size_t)(colon + 1 - s);
    if (vn > 0 && colon[1] == ' ')
        return sse_field(p, s, (size_t)(colon - s), colon + 2, vn - 1);
    return sse_field(p, s, (size_t)(colon - s), colon + 1, vn);
}

/* sse_eol - the first CR or LF in [s, end), or NULL. */
static const char *
sse_eol(const char *s, const char *end)
{
    for (; s < end; s++)
        if (*s == '\n' || *s == '\r')
            return s;
    return NULL;
}

/* sse_lines - the bytes after the BOM: whole lines go to sse_line, a cut
 * one to p->line. */
static int
sse_lines(struct http_sse_parser *p, const char *s, const char *end,
          http_sse_parse_fn *fn, void *arg)
{
    if (p->cr && s < end) {
        p->cr = 0;
        if (*s == '\n')
            s++;
    }
    while (s < end) {
        const char *eol = sse_eol(s, end), *line = s;
        size_t n = (size_t)((eol != NULL ? eol : end) - s);
        int rc;

        if (p->line.len > p->max || n > p->max - p->line.len)
            return -EMSGSIZE;
        if (eol == NULL)
            return sse_add(&p->line, s, n);
        if (p->line.len > 0) {
            if (sse_add(&p->line, s, n) != 0)
                return -ENOMEM;
            line = p->line.data;
            n = p->line.len;
        }
        s = eol + 1;
        if (*eol == '\r') {
            if (s == end)
                p->cr = 1;
            else if (*s == '\n')
                s++;
        }
        rc = sse_line(p, line, n, fn, arg);
        sse_clear(&p->line);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* http_sse_parse_feed - the BOM's bytes first, while the stream may still start
 * with one; bytes that only began one belong to the first line. */
int
http_sse_parse_feed(struct http_sse_parser *p, const void *buf, size_t len,
                    http_sse_parse_fn *fn, void *arg)
{
    const char *s = buf, *end;

    if (p->err != 0 || len == 0)
        return p->err;
    end = s + len;
    while (p->bom < sizeof(sse_bom) && s < end) {
        if ((unsigned char)*s == sse_bom[p->bom]) {
            p->bom++;
            s++;
            continue;
        }
        if (p->bom > 0 &&
            sse_add(&p->line, (const char *)sse_bom, p->bom) != 0) {
            p->err = -ENOMEM;
            return p->err;
        }
        p->bom = sizeof(sse_bom);
    }
    p->err = sse_lines(p, s, end, fn, arg);
    return p->err;
}

const char *
http_sse_parse_last_id(const struct http_sse_parser *p, size_t *len)
{
    if (len != NULL)
        *len = p->last_id.len;
    return p->last_id.len > 0 ? p->last_id.data : "";
}

int64_t
http_sse_parse_retry_ms(const struct http_sse_parser *p)
{
    return p->retry_ms;
}

void
http_sse_parse_free(struct http_sse_parser *p)
{
    http_buf_free(&p->line);
    http_buf_free(&p->data);
    http_buf_free(&p->type);
    http_buf_free(&p->id);
    http_buf_free(&p->last_id);
}
