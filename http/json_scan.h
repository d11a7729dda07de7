/*
 * json_scan.h - a strict RFC 8259 scanner that validates JSON text in one
 * pass without building a tree (json-c builds one: a 28 KB push of 100
 * messages cost about 70 us in it, and json-c 0.16 has no event API).  It
 * finds where values begin and end, so stored payloads are byte spans of
 * the request body that are known to be valid JSON.
 *
 * Strict means: UTF-8 checked everywhere (no overlongs, no surrogates
 * encoded as UTF-8, nothing past U+10FFFF), no raw control characters in
 * strings, only the RFC's escapes, numbers per the RFC grammar, literals
 * true/false/null only, nesting at most HTTP_JSON_MAX_DEPTH.  A \u escape of
 * a lone surrogate is grammatical JSON and is accepted, as json-c does.
 * json-c's JSON_TOKENER_STRICT is laxer in a few places, all rejected here
 * (stored payloads go back out verbatim to parsers that follow the RFC):
 * raw control characters in strings, overlong or surrogate or >U+10FFFF
 * UTF-8, NaN/Infinity, and numbers like "1.", "-.5", "-01", "00".
 * test/http/test_json_scan.c checks the scanner against json-c as the
 * oracle, and checks each of those differences independently.
 *
 * No allocation, no state beyond struct http_json, no locking.  Functions
 * return 0 or -EINVAL; on -EINVAL j->why names the problem and j->p points
 * at the offending byte.
 */
#ifndef MAYFLY_HTTP_JSON_SCAN_H
#define MAYFLY_HTTP_JSON_SCAN_H

#include <stddef.h>
#include <string.h>

/*
 * Deepest nesting, counted as json-c counts it: a value (scalar or
 * container) inside k arrays or objects sits at depth k + 1, at most this.
 */
#define HTTP_JSON_MAX_DEPTH 64

struct http_json {
    const char *start; /* first byte of the document */
    const char *p;     /* next byte to read */
    const char *end;   /* one past the last byte */
    unsigned depth;    /* containers open around p */
    const char *why;   /* static reason of the last failure */
};

/* http_json_init - scan buf[0..n) from its start, depth 0.  Cannot fail. */
void http_json_init(struct http_json *j, const char *buf, size_t n);

/* http_json_ws - skip JSON whitespace (space, tab, LF, CR; no \v, \f).
 * Cannot fail.  Inline, as are peek and the walkers below: the scanner
 * calls it before every token, and most calls find a token at once (every
 * whitespace byte is <= ' ', so one compare ends them). */
static inline void
http_json_ws(struct http_json *j)
{
    const char *p = j->p;

    while (p < j->end && (unsigned char)*p <= ' ' &&
           (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    j->p = p;
}

/* http_json_peek - the byte at p after whitespace, or -1 at the end. */
static inline int
http_json_peek(struct http_json *j)
{
    http_json_ws(j);
    return j->p < j->end ? (unsigned char)*j->p : -1;
}

/* http_json_eat - skip whitespace and consume the byte c.  0 or -EINVAL. */
int http_json_eat(struct http_json *j, char c);

/*
 * http_json_value - skip whitespace, then validate and skip one value of
 * any type.  j->depth is the number of containers around it (a caller that
 * walks containers itself counts them there).  0 or -EINVAL.
 */
int http_json_value(struct http_json *j);

/*
 * http_json_string - skip whitespace, then validate and skip one string.
 * With dst (room for as many bytes as the string's text, quotes excluded),
 * also write its unescaped UTF-8 into dst and its length into *dst_len; a
 * \u escape of a lone surrogate is written as U+FFFD, as json-c does, so
 * a name reads the same through json-c and through the scanner.  0 or -EINVAL
 * (not a string, or invalid).
 */
int http_json_string(struct http_json *j, char *dst, size_t *dst_len);

/*
 * http_json_key - skip whitespace, then one member's key and the ':' after
 * it.  With dst, the key is unescaped into it as http_json_string() writes
 * a string.  0 or -EINVAL.
 */
int http_json_key(struct http_json *j, char *dst, size_t *dst_len);

/* http_json_key_is - the unescaped key[0..n) is want.  Inline: want is a
 * literal, whose length the compiler knows. */
static inline int
http_json_key_is(const char *key, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(key, want, n) == 0;
}

/*
 * Walking a container whose opening byte the caller has peeked:
 *
 *     more = http_json_enter(j);
 *     while (more > 0) {
 *         ... one value (an object's: http_json_key() first) ...
 *         more = http_json_next(j, '}');
 *     }
 *     if (more < 0) ... j->why says what was found instead ...
 *
 * The two are inline: push and ack walk one container a message.
 *
 * http_json_enter - step over the '[' or '{' at j->p into the container:
 * 1 if an element follows, 0 if it was empty (and has been left).  Cannot
 * fail.
 */
static inline int
http_json_enter(struct http_json *j)
{
    int close = *j->p == '{' ? '}' : ']';

    j->p++;
    j->depth++;
    if (http_json_peek(j) != close)
        return 1;
    j->p++;
    j->depth--;
    return 0;
}

/*
 * http_json_next - after an element of the container whose closing byte is
 * close: 1 past a ',' (another element follows), 0 past close (the
 * container has been left), else -EINVAL ("expected ',' or ']'", or '}'
 * for an object).
 */
static inline int
http_json_next(struct http_json *j, char close)
{
    int c = http_json_peek(j);

    if (c == ',') {
        j->p++;
        return 1;
    }
    if (c != close)
        return http_json_eat(j, close); /* fails, naming what was expected */
    j->p++;
    j->depth--;
    return 0;
}

/* http_json_end - only whitespace is left: 0, else -EINVAL at the first
 * byte after the JSON text. */
int http_json_end(struct http_json *j);

/* http_json_valid - 1 if buf[0..n) is one JSON text (ws value ws), else 0. */
int http_json_valid(const char *buf, size_t n);

#endif
