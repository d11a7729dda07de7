/*
 * push_peek.c - see push_peek.h.
 *
 * A cursor walks the members; values it does not keep are skipped by
 * where they end, not checked: a string by memchr for its closing quote
 * (one preceded by an even run of backslashes), a container by counting
 * brackets outside strings, a scalar up to the next delimiter.  Every
 * failure is the same -EINVAL: the caller does not say why, it parses.
 */
#include "http/push_peek.h"

#include <errno.h>
#include <string.h>

struct peek {
    const char *p, *end;
};

/* ws - skip JSON whitespace (every such byte is <= ' ': one compare
 * ends the common case, a token). */
static inline void
ws(struct peek *k)
{
    while (k->p < k->end && (unsigned char)*k->p <= ' ' &&
           (*k->p == ' ' || *k->p == '\n' || *k->p == '\r' || *k->p == '\t'))
        k->p++;
}

/* eat - whitespace, then the byte c.  0 or -1. */
static int
eat(struct peek *k, char c)
{
    ws(k);
    if (k->p == k->end || *k->p != c)
        return -1;
    k->p++;
    return 0;
}

/* string_end - p is just past a string's opening quote: one past its
 * closing quote, or NULL when it has none. */
static const char *
string_end(const char *p, const char *end)
{
    const char *start = p, *q, *b;

    while ((q = memchr(p, '"', (size_t)(end - p))) != NULL) {
        for (b = q; b > start && b[-1] == '\\'; b--)
            ;
        if ((q - b) % 2 == 0)
            return q + 1;
        p = q + 1; /* an escaped quote */
    }
    return NULL;
}

/* raw_string - a string with no escapes at k->p: its bytes in (*s, *n).
 * 0, or -1 for anything else (an escape included). */
static int
raw_string(struct peek *k, const char **s, size_t *n)
{
    const char *q;

    if (eat(k, '"') != 0 ||
        (q = memchr(k->p, '"', (size_t)(k->end - k->p))) == NULL ||
        memchr(k->p, '\\', (size_t)(q - k->p)) != NULL)
        return -1;
    *s = k->p;
    *n = (size_t)(q - k->p);
    k->p = q + 1;
    return 0;
}

/* skip_container - k->p is at '{' or '[': past its matching close. */
static int
skip_container(struct peek *k)
{
    unsigned depth = 0;

    for (const char *p = k->p; p < k->end; p++) {
        switch (*p) {
        case '"':
            if ((p = string_end(p + 1, k->end)) == NULL)
                return -1;
            p--; /* the loop steps past the closing quote */
            break;
        case '{':
        case '[':
            depth++;
            break;
        case '}':
        case ']':
            if (--depth == 0) {
                k->p = p + 1;
                return 0;
            }
            break;
        default:
            break;
        }
    }
    return -1;
}

/* skip_value - past one value (whitespace first).  0 or -1. */
static int
skip_value(struct peek *k)
{
    const char *start;

    ws(k);
    if (k->p == k->end)
        return -1;
    if (*k->p == '"') {
        k->p = string_end(k->p + 1, k->end);
        return k->p != NULL ? 0 : -1;
    }
    if (*k->p == '{' || *k->p == '[')
        return skip_container(k);
    start = k->p;
    while (k->p < k->end && strchr(",:}]{[\" \t\r\n", *k->p) == NULL)
        k->p++;
    return k->p > start ? 0 : -1;
}

/* key_is - the member key (s, n) is lit, byte for byte. */
static int
key_is(const char *s, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* skip_messages - [{"payload": any}, ...], nothing else in a message. */
static int
skip_messages(struct peek *k)
{
    if (eat(k, '[') != 0)
        return -1;
    ws(k);
    if (k->p < k->end && *k->p == ']') {
        k->p++;
        return 0;
    }
    for (;;) {
        /* the key as clients send it, compared without a scan */
        if (eat(k, '{') != 0)
            return -1;
        ws(k);
        if (k->end - k->p < 9 || memcmp(k->p, "\"payload\"", 9) != 0)
            return -1;
        k->p += 9;
        if (eat(k, ':') != 0 || skip_value(k) != 0 || eat(k, '}') != 0)
            return -1;
        ws(k);
        if (k->p == k->end)
            return -1;
        if (*k->p++ == ']')
            return 0;
        if (k->p[-1] != ',')
            return -1;
    }
}

/* peek - http_push_peek, or with head http_push_peek_head. */
static int
peek(const char *body, size_t len, int head, struct http_push_peek *out)
{
    struct peek k = {body, body + len};
    int queue = 0, part = 0, messages = 0;
    const char *key;
    size_t n;

    memset(out, 0, sizeof(*out));
    if (body == NULL || eat(&k, '{') != 0)
        return -EINVAL;
    for (;;) {
        if (raw_string(&k, &key, &n) != 0 || eat(&k, ':') != 0)
            return -EINVAL;
        if (key_is(key, n, "queue") && !queue++) {
            if (raw_string(&k, &out->queue, &out->queue_len) != 0)
                return -EINVAL;
        } else if (key_is(key, n, "partition") && !part++) {
            if (raw_string(&k, &out->partition, &out->partition_len) != 0)
                return -EINVAL;
        } else if (key_is(key, n, "messages") && !messages++) {
            if (head)
                return queue ? 0 : -EINVAL;
            if (skip_messages(&k) != 0)
                return -EINVAL;
        } else {
            return -EINVAL; /* another member, or one named twice */
        }
        ws(&k);
        if (k.p == k.end)
            return -EINVAL;
        if (*k.p++ == '}')
            break;
        if (k.p[-1] != ',')
            return -EINVAL;
    }
    ws(&k);
    return k.p == k.end && queue && messages ? 0 : -EINVAL;
}

/* http_push_peek - see push_peek.h. */
int
http_push_peek(const char *body, size_t len, struct http_push_peek *out)
{
    return peek(body, len, 0, out);
}

/* http_push_peek_head - see push_peek.h. */
int
http_push_peek_head(const char *body, size_t len, struct http_push_peek *out)
{
    return peek(body, len, 1, out);
}
