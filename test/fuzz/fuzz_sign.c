/*
 * fuzz_sign.c - the signature of calls between nodes and their X-Mayfly-
 * headers (http/sign.c), as the cluster port and a worker check them
 * (http/node_call.c).  The input is a call: its method on the first line,
 * its target on the second, then header lines ("Name: value") up to an
 * empty line, then its body; its first byte and its length pick a change
 * made on the way.
 *
 * Checked as it came: no crash, a known verdict, a sentence for a refusal,
 * and no OK without a signature made with the key.  Then signed as a node
 * signs it (its X-Mayfly- lines among what is signed, for node n1) and
 * received as the receiver splits headers: OK; with the names' case and
 * the order of the headers changed, or a header of another family added:
 * OK still; with one X-Mayfly- value changed, the nonce changed to
 * another that parses, one such header added or dropped, or the body
 * (one byte changed, or one more) or method changed: BAD.
 */
#include <inttypes.h>
#include <strings.h>

#include "http/sign.h"
#include "test/fuzz/fuzz.h"

#define KEY  "fuzz-cluster-secret"
#define INC  UINT64_C(0x0123456789abcdef)
#define MAXH 40

static const struct http_sign_self self = {
    "n1", INC, {"10.0.0.1:6633", "10.0.0.1:6632"}, 0};

/* A call: its text cut into fields. */
struct call {
    char *method, *target;
    char *line[MAXH];
    size_t nlines;
    const char *body;
    size_t len;
};

/* parse - text (NUL-terminated, size bytes: the body may hold NULs) into
 * c; 0, or -1 when there is no target line. */
static int
parse(char *text, size_t size, struct call *c)
{
    char *p = text, *end = text + size, *nl;

    memset(c, 0, sizeof(*c));
    c->method = p;
    if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
        return -1;
    *nl = '\0';
    c->target = p = nl + 1;
    if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
        return -1;
    *nl = '\0';
    p = nl + 1;
    while (p < end && *p != '\n' && c->nlines < MAXH &&
           (nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        *nl = '\0';
        c->line[c->nlines++] = p;
        p = nl + 1;
    }
    if (p < end && *p == '\n')
        p++;
    c->body = p;
    c->len = (size_t)(end - p);
    return 0;
}

/* split - a "Name: value" line into h as the receiver sees it: the value's
 * surrounding spaces and tabs left out; into buf (cap bytes).  0 or -1. */
static int
split(const char *line, char *buf, size_t cap, struct http_sign_header *h)
{
    size_t n = strlen(line);
    char *colon, *v, *e;

    if (n >= cap)
        return -1;
    memcpy(buf, line, n + 1);
    if ((colon = strchr(buf, ':')) == NULL || colon == buf)
        return -1;
    *colon = '\0';
    for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
        ;
    for (e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t'); e--)
        ;
    *e = '\0';
    h->name = buf;
    h->value = v;
    return 0;
}

/* The received side of a call. */
struct rx {
    char buf[MAXH + 8][600];
    struct http_sign_header h[MAXH + 8];
    struct http_sign_call c;
};

/* receive - lines (n) into x as headers; 0, or -1 when one cannot be a
 * header. */
static int
receive(struct rx *x, const struct call *c, const char *const *lines, size_t n)
{
    x->c =
        (struct http_sign_call){c->method, c->target, c->body, c->len, x->h, 0};
    for (size_t i = 0; i < n; i++) {
        if (split(lines[i], x->buf[i], sizeof(x->buf[i]), &x->h[i]) != 0)
            return -1;
        x->c.nh++;
    }
    return 0;
}

/* verdict - http_sign_check on x at now, its outcome checked for form. */
static enum http_sign_verdict
verdict(const struct rx *x, int64_t now)
{
    struct http_sign_seen seen = {0};
    char why[320] = "";
    enum http_sign_verdict v =
        http_sign_check(&x->c, KEY, &self, now, &seen, why, sizeof(why));

    FUZZ_CHECK(v >= HTTP_SIGN_ABSENT && v <= HTTP_SIGN_ELSEWHERE, "%d", v);
    FUZZ_CHECK(v == HTTP_SIGN_OK || v == HTTP_SIGN_ABSENT || why[0] != '\0',
               "a refusal without a sentence (%d)", v);
    FUZZ_CHECK(memchr(why, '\0', sizeof(why)) != NULL, "why");
    return v;
}

/* is_ours - an X-Mayfly- header name. */
static int
is_ours(const char *name)
{
    return strncasecmp(name, HTTP_SIGN_PREFIX, sizeof(HTTP_SIGN_PREFIX) - 1) ==
           0;
}

/* flip_case - the names of x's headers in another case, order reversed. */
static void
flip_case(struct rx *x)
{
    for (size_t i = 0; i < x->c.nh; i++)
        for (char *p = (char *)x->h[i].name; *p; p++)
            if ((*p | 32) >= 'a' && (*p | 32) <= 'z')
                *p ^= 32;
    for (size_t i = 0; i < x->c.nh / 2; i++) {
        struct http_sign_header t = x->h[i];
        x->h[i] = x->h[x->c.nh - 1 - i];
        x->h[x->c.nh - 1 - i] = t;
    }
}

/* round_trip - c signed for n1 and received: OK, and each change made on
 * the way (pick chooses) has the verdict it must. */
static void
round_trip(const struct call *c, unsigned char pick)
{
    static struct rx x;
    struct http_sign_lines l;
    const char *lines[MAXH + 8];
    size_t n = 0;
    int64_t now = http_sign_now_ms();
    struct http_sign_req r = {
        .method = c->method,
        .target = c->target,
        .body = c->body,
        .len = c->len,
        .lines = (const char *const *)c->line,
        .nlines = c->nlines,
        .to = {"10.0.0.1:6633", "n1", INC},
        .sender = 0xfeed,
        .seq = 1,
        .now_ms = now,
        .deadline_ms = now + 1000,
    };

    if (http_sign_lines(KEY, &r, &l) != 0)
        return; /* a line the signer refuses: nothing sent */
    for (size_t i = 0; i < c->nlines; i++)
        lines[n++] = c->line[i];
    lines[n++] = l.sig;
    lines[n++] = l.time;
    lines[n++] = l.nonce;
    lines[n++] = l.to;
    lines[n++] = l.deadline;
    if (receive(&x, c, lines, n) != 0)
        return; /* not a header the receiver would see */
    FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_OK, "a call as signed");

    switch (pick % 7) {
    case 0: /* case and order: nothing */
        flip_case(&x);
        FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_OK, "case and order");
        break;
    case 1: /* a header of another family: nothing */
        x.h[x.c.nh++] = (struct http_sign_header){"X-Other", "1"};
        FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_OK, "another family");
        break;
    case 2: { /* one X-Mayfly- value changed */
        size_t k = (size_t)(pick / 6) % x.c.nh;
        while (!is_ours(x.h[k].name) ||
               strcasecmp(x.h[k].name, HTTP_SIGN_HEADER) == 0)
            k = (k + 1) % x.c.nh;
        char *v = (char *)x.h[k].value;
        if (v[0] == '\0' || v[0] == ' ' || v[0] == '\t')
            x.h[k].value = "x";
        else
            v[0] = v[0] == 'x' ? 'y' : 'x';
        FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_BAD, "%s changed",
                   x.h[k].name);
        break;
    }
    case 3: /* one X-Mayfly- header added */
        x.h[x.c.nh++] = (struct http_sign_header){"X-Mayfly-Added", "1"};
        FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_BAD, "a header added");
        break;
    case 4: { /* the destination dropped */
        for (size_t k = 0; k < x.c.nh; k++)
            if (strcasecmp(x.h[k].name, HTTP_SIGN_TO) == 0)
                x.h[k].name = "X-Dropped";
        FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_BAD, "To dropped");
        break;
    }
    case 5: /* another nonce, well formed: the body's MAC takes it */
        for (size_t k = 0; k < x.c.nh; k++)
            if (strcasecmp(x.h[k].name, HTTP_SIGN_NONCE) == 0)
                x.h[k].value =
                    (pick & 8) ? "000000000000feed-2" : "000000000000feee-1";
        FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_BAD, "nonce changed");
        break;
    default: /* the body or the method */
        if ((pick & 64) && (pick & 128) && c->len > 0) {
            /* one byte changed: the text is ours (fuzz_cstr's copy) */
            char *b = (char *)c->body + (size_t)pick * 31 % c->len;
            *b ^= 1;
            FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_BAD, "a body byte");
            *b ^= 1;
        } else if (pick & 64) {
            x.c.len++; /* one byte more: the NUL parse() left after it */
            FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_BAD, "body");
        } else {
            x.c.method = strcmp(c->method, "PUT") ? "PUT" : "POST";
            FUZZ_CHECK(verdict(&x, now) == HTTP_SIGN_BAD, "method");
        }
        break;
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct rx x;
    char *text = fuzz_cstr(data, size);
    struct call c;

    if (parse(text, size, &c) == 0) {
        /* as it came: nothing forged passes without the key */
        if (receive(&x, &c, (const char *const *)c.line, c.nlines) == 0)
            FUZZ_CHECK(verdict(&x, http_sign_now_ms()) != HTTP_SIGN_OK,
                       "a call nobody signed passed");
        round_trip(&c, (unsigned char)(data[0] + size * 7));
    }
    free(text);
    return 0;
}
