/*
 * parse_ack.c - the ack body: {"queue", "group"?, "acks": [entry, ...]},
 * "messages" taken for "acks" when "acks" is absent (SPEC §2).  An entry is
 * a bare id string, or an object with "id", "status"? and "attempts"?, and
 * anything else a popped message carries.
 *
 * Acks come with every drained batch, so the body goes through the strict
 * scanner of json_scan.h instead of a json-c tree (json_scan.h): one pass
 * validates the whole body and notes where the last value of each member
 * starts (json-c keeps the last of a repeated key) and how long the arrays
 * are; a second pass reads the chosen array.  The checks run in the order
 * json-c's tree was read in before, so every bad body keeps its status,
 * code and sentence: syntax first, then queue, group, the array, then each
 * entry in order (id, status, attempts).  Keys compare as json-c stores
 * them, up to a first NUL.
 *
 * out->mem (body length + 1 bytes) receives the unescaped strings: each is
 * a disjoint span of the body with its quotes, so the text and its NUL fit;
 * keys and statuses are unescaped into the free tail as scratch.  No
 * locking.  Errors: 0, -EINVAL, -ENOMEM with err filled.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/json_scan.h"
#include "http/parse.h"
#include "http/parse_error.h"

struct ack_parse {
    struct http_json j;
    char *free;        /* next free byte of mem */
    const char *queue; /* first byte of the member's last value, or NULL */
    const char *group;
    const char *acks;
    const char *messages;
    uint32_t acks_n;     /* entries of the last "acks" array (capped) */
    uint32_t messages_n; /* entries of the last "messages" array (capped) */
    struct http_error *err;
};

/* syntax_error - the scanner failed: say where and why. */
static int
syntax_error(struct ack_parse *ap)
{
    return http_parse_syntax(&ap->j, ap->err);
}

/* key - unescape the key at j->p into the scratch tail and consume the
 * ':' after it; *n is its length up to a first NUL (json-c's view). */
static int
key(struct ack_parse *ap, size_t *n)
{
    if (http_json_key(&ap->j, ap->free, n) != 0)
        return syntax_error(ap);
    *n = strnlen(ap->free, *n);
    return 0;
}

/* key_is - the key just read is want. */
static int
key_is(const struct ack_parse *ap, size_t n, const char *want)
{
    return http_json_key_is(ap->free, n, want);
}

/*
 * array_value - validate the array at j->p and count its entries (counting
 * stops past HTTP_BATCH_MAX: more is refused whatever the number).
 */
static int
array_value(struct ack_parse *ap, uint32_t *count)
{
    struct http_json *j = &ap->j;
    uint32_t n = 0;
    int more = http_json_enter(j);

    while (more > 0) {
        if (http_json_value(j) != 0)
            return syntax_error(ap);
        n += n <= HTTP_BATCH_MAX;
        more = http_json_next(j, ']');
    }
    if (more < 0)
        return syntax_error(ap);
    *count = n;
    return 0;
}

/* member - one top-level "key": value, its place noted if it is ours. */
static int
member(struct ack_parse *ap)
{
    struct http_json *j = &ap->j;
    const char **at = NULL;
    uint32_t *count = NULL;
    size_t n;
    int rc;

    if ((rc = key(ap, &n)) != 0)
        return rc;
    if (key_is(ap, n, "queue")) {
        at = &ap->queue;
    } else if (key_is(ap, n, "group")) {
        at = &ap->group;
    } else if (key_is(ap, n, "acks")) {
        at = &ap->acks;
        count = &ap->acks_n;
    } else if (key_is(ap, n, "messages")) {
        at = &ap->messages;
        count = &ap->messages_n;
    }
    if (at != NULL) {
        http_json_ws(j);
        *at = j->p;
    }
    if (count != NULL && http_json_peek(j) == '[')
        return array_value(ap, count);
    return http_json_value(j) == 0 ? 0 : syntax_error(ap);
}

/* body - '{' members '}' and nothing after but whitespace; a valid body
 * that is not an object is refused after the syntax check, as json-c. */
static int
body(struct ack_parse *ap)
{
    struct http_json *j = &ap->j;
    int more, rc;

    if (http_json_peek(j) != '{') {
        if (http_json_value(j) != 0 || http_json_end(j) != 0)
            return syntax_error(ap);
        return http_parse_bad(ap->err, "the body must be a JSON object");
    }
    more = http_json_enter(j);
    while (more > 0) {
        if ((rc = member(ap)) != 0)
            return rc;
        more = http_json_next(j, '}');
    }
    return more < 0 || http_json_end(j) != 0 ? syntax_error(ap) : 0;
}

/* at - a scanner on the (already validated) value starting at p. */
static void
at(struct ack_parse *ap, const char *p)
{
    ap->j.p = p;
    ap->j.depth = 1;
}

/* keep - unescape the string at p into mem as *out (NUL-terminated). */
static void
keep(struct ack_parse *ap, const char *p, struct http_str *out)
{
    size_t n = 0;

    at(ap, p);
    http_json_string(&ap->j, ap->free, &n);
    ap->free[n] = '\0';
    out->ptr = ap->free;
    out->len = n;
    ap->free += n + 1;
}

/* is_null - the value at p (absent: NULL) counts as absent. */
static int
is_null(const char *p)
{
    return p == NULL || *p == 'n';
}

/*
 * name - "queue" or "group" at p: required or optional, a string kept in
 * mem.  0, or -EINVAL naming the field.
 */
static int
name(struct ack_parse *ap, const char *p, const char *field, int required,
     struct http_str *out, int *have)
{
    *have = 0;
    if (is_null(p))
        return required
                   ? http_parse_bad(ap->err, "field '%s' is required", field)
                   : 0;
    if (*p != '"')
        return http_parse_bad(ap->err, "field '%s' must be a string", field);
    keep(ap, p, out);
    *have = 1;
    return 0;
}

/* ack_status - SPEC §2: absent and four words complete, "retry" retries,
 * any other string fails.  s is read up to a first NUL, as json-c's C
 * string was. */
static enum http_ack_status
ack_status(const char *s)
{
    static const char *const completed[] = {"completed", "success", "acked",
                                            "ok"};
    size_t i;

    for (i = 0; i < sizeof(completed) / sizeof(completed[0]); i++)
        if (strcmp(s, completed[i]) == 0)
            return HTTP_ACK_COMPLETED;
    return strcmp(s, "retry") == 0 ? HTTP_ACK_RETRY : HTTP_ACK_FAILED;
}

/*
 * attempts - the number at p as json-c typed it: an integer token (no
 * fraction, no exponent) from 0 to UINT32_MAX ("-0" is 0).  0 or -EINVAL.
 */
static int
attempts(const char *p, const char *end, uint32_t *out)
{
    uint64_t v = 0;
    int neg = *p == '-';

    if (neg)
        p++;
    if (p == end || *p < '0' || *p > '9')
        return -EINVAL;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > UINT32_MAX)
            return -EINVAL;
    }
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
        return -EINVAL;
    if (neg && v != 0)
        return -EINVAL;
    *out = (uint32_t)v;
    return 0;
}

/*
 * entry_upto - the "upTo" at p of entry i (SPEC §14): true makes the entry
 * cumulative, which completes (any other status contradicts it) and
 * carries no reply (the reply answers one request); false is no upTo.
 */
static int
entry_upto(struct ack_parse *ap, const char *p, const char *where, size_t i,
           struct http_ack_entry *e)
{
    if (*p != 't' && *p != 'f')
        return http_parse_bad(ap->err, "field '%s[%zu].upTo' must be a boolean",
                              where, i);
    e->upto = *p == 't';
    if (e->upto && e->status != HTTP_ACK_COMPLETED)
        return http_parse_bad(ap->err,
                              "field '%s[%zu].upTo' completes messages: it "
                              "cannot go with a failed or retry status",
                              where, i);
    if (e->upto && e->has_reply)
        return http_parse_bad(ap->err,
                              "field '%s[%zu].upTo' cannot go with a reply, "
                              "which answers one request",
                              where, i);
    return 0;
}

/*
 * entry_object - {"id", "status"?, "attempts"?, "upTo"?, ...} at p, entry i of the
 * array where; the scanner is left after the object.
 */
static int
entry_object(struct ack_parse *ap, const char *p, const char *where, size_t i,
             struct http_ack_entry *e)
{
    struct http_json *j = &ap->j;
    const char *id = NULL, *status = NULL, *tries = NULL, *upto = NULL;
    const char *delay = NULL, *after;
    size_t n;
    int more, rc;

    at(ap, p);
    for (more = http_json_enter(j); more > 0; more = http_json_next(j, '}')) {
        if (key(ap, &n) != 0)
            return -EINVAL;
        http_json_ws(j);
        if (key_is(ap, n, "id"))
            id = j->p;
        else if (key_is(ap, n, "status"))
            status = j->p;
        else if (key_is(ap, n, "attempts"))
            tries = j->p;
        else if (key_is(ap, n, "delayMs"))
            delay = j->p;
        else if (key_is(ap, n, "upTo"))
            upto = j->p;
        else if (key_is(ap, n, "reply"))
            e->reply.ptr = j->p;
        http_json_value(j);
        if (e->reply.ptr != NULL && !e->has_reply) {
            e->reply.len = (size_t)(j->p - e->reply.ptr);
            e->has_reply = 1;
        }
    }
    after = j->p;
    if (e->has_reply && is_null(e->reply.ptr))
        e->has_reply = 0; /* "reply": null is no reply */
    if (is_null(id))
        return http_parse_bad(ap->err, "field '%s[%zu].id' is required", where,
                              i);
    if (*id != '"')
        return http_parse_bad(ap->err, "field '%s[%zu].id' must be a string",
                              where, i);
    keep(ap, id, &e->id);
    if (!is_null(status)) {
        if (*status != '"')
            return http_parse_bad(
                ap->err, "field '%s[%zu].status' must be a string", where, i);
        at(ap, status);
        http_json_string(j, ap->free, &n);
        ap->free[n] = '\0';
        e->status = ack_status(ap->free);
    }
    /* A reply completes the request it answers (SPEC §9); with a failed or
     * retry status it would be answered and delivered again at once. */
    if (e->has_reply && e->status != HTTP_ACK_COMPLETED)
        return http_parse_bad(ap->err,
                              "field '%s[%zu].reply' completes the request "
                              "it answers: it cannot go with a failed or "
                              "retry status",
                              where, i);
    if (!is_null(upto) && (rc = entry_upto(ap, upto, where, i, e)) != 0)
        return rc;
    if (!is_null(tries)) {
        if ((*tries != '-' && (*tries < '0' || *tries > '9')) ||
            attempts(tries, j->end, &e->attempts) != 0)
            return http_parse_bad(
                ap->err,
                "field '%s[%zu].attempts' must be an integer from 0 to %llu",
                where, i, (unsigned long long)UINT32_MAX);
        e->has_attempts = 1;
    }
    /* A retry's delay (SPEC §13), an hour at most. */
    if (!is_null(delay)) {
        if (*delay == '-' || attempts(delay, j->end, &e->delay_ms) != 0 ||
            e->delay_ms > HTTP_RETRY_DELAY_MAX)
            return http_parse_bad(
                ap->err,
                "field '%s[%zu].delayMs' must be an integer from 0 to %d",
                where, i, HTTP_RETRY_DELAY_MAX);
        e->has_delay = 1;
    }
    at(ap, after);
    return 0;
}

/* entries - read the n entries of the array at p into a->entries. */
static int
entries(struct ack_parse *ap, const char *p, const char *where, uint32_t n,
        struct http_ack *a)
{
    struct http_json *j = &ap->j;
    int rc;

    a->entries = calloc(n ? n : 1, sizeof(*a->entries));
    if (a->entries == NULL)
        return http_parse_oom(ap->err);
    /* keep() and entry_object() leave the scanner after the entry */
    at(ap, p);
    http_json_enter(j); /* validated and counted by array_value */
    for (uint32_t i = 0; i < n; i++) {
        struct http_ack_entry *e = &a->entries[i];
        const char *v;

        if (i > 0)
            http_json_next(j, ']');
        http_json_ws(j);
        v = j->p;
        e->status = HTTP_ACK_COMPLETED;
        if (*v == '"') {
            keep(ap, v, &e->id);
        } else if (*v == '{') {
            if ((rc = entry_object(ap, v, where, i, e)) != 0)
                return rc;
        } else {
            return http_parse_bad(
                ap->err, "field '%s[%u]' must be an id string or an object",
                where, i);
        }
        a->n++;
    }
    return 0;
}

/* parse - http_parse_ack without the release on failure; a pop's (pop
 * set) may have no "acks", and "messages" does not stand for them. */
static int
parse(const char *body_text, size_t len, int pop, struct http_ack *out,
      struct http_error *err)
{
    struct ack_parse ap;
    const char *key_name = "acks", *arr;
    uint32_t n;
    int have, rc;

    memset(out, 0, sizeof(*out));
    memset(&ap, 0, sizeof(ap));
    ap.err = err;
    if ((rc = http_parse_length(len, err)) != 0)
        return rc;
    out->mem = malloc(len + 1);
    if (out->mem == NULL)
        return http_parse_oom(err);
    ap.free = out->mem;
    http_json_init(&ap.j, body_text, len);
    if ((rc = body(&ap)) != 0)
        return rc;
    if ((rc = name(&ap, ap.queue, "queue", 1, &out->queue, &have)) != 0 ||
        (rc = name(&ap, ap.group, "group", 0, &out->group, &out->has_group)) !=
            0)
        return rc;
    arr = ap.acks;
    n = ap.acks_n;
    if (pop && is_null(arr))
        return 0;
    if (is_null(ap.acks) && !is_null(ap.messages)) {
        key_name = "messages";
        arr = ap.messages;
        n = ap.messages_n;
    }
    if (is_null(arr))
        return http_parse_bad(ap.err, "field '%s' is required", key_name);
    if (*arr != '[')
        return http_parse_bad(ap.err, "field '%s' must be an array", key_name);
    if (n > HTTP_BATCH_MAX)
        return http_parse_bad(ap.err, "field '%s' holds more than %d entries",
                              key_name, HTTP_BATCH_MAX);
    return entries(&ap, arr, key_name, n, out);
}

/* http_parse_ack - see parse.h. */
int
http_parse_ack(const char *body_text, size_t len, struct http_ack *out,
               struct http_error *err)
{
    int rc = parse(body_text, len, 0, out, err);

    if (rc != 0)
        http_ack_free(out);
    return rc;
}

/* http_parse_pop_acks - see parse.h. */
int
http_parse_pop_acks(const char *body_text, size_t len, struct http_ack *out,
                    struct http_error *err)
{
    int rc = parse(body_text, len, 1, out, err);

    if (rc != 0)
        http_ack_free(out);
    return rc;
}

/* http_ack_free - release entries and strings. */
void
http_ack_free(struct http_ack *a)
{
    free(a->entries);
    free(a->mem);
    memset(a, 0, sizeof(*a));
}
