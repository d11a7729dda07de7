/*
 * parse_push.c - the push body in one validating pass (json_scan.h), no
 * tree: {"queue", "partition"?, "messages": [{"payload": any JSON, "key"?,
 * "delayMs"?, "ttlSeconds"?}, ...]} (SPEC §13 for the last three: a key is
 * kept unescaped in mem, the numbers are integers; the ceilings are the
 * caller's).
 *
 * out->mem (body length + 1 bytes) receives the unescaped names: every
 * string kept is a disjoint span of the body with its two quotes, so the
 * unescaped text and its NUL always fit.  Keys are unescaped into the free
 * tail of mem as scratch.  No locking.  Errors: 0, -EINVAL, -ENOMEM, with
 * err filled.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/json_scan.h"
#include "http/parse.h"
#include "http/parse_error.h"

/* What the last occurrence of a field held: json-c keeps the last value
 * of a repeated key, so a shape error is only final at the end. */
enum push_field { PUSH_ABSENT, PUSH_OK, PUSH_BAD };

enum push_msg_error {
    PUSH_MSG_NONE,
    PUSH_MSG_NOT_ARRAY,
    PUSH_MSG_NOT_OBJECT, /* messages[at] */
    PUSH_MSG_NO_PAYLOAD, /* messages[at].payload */
    PUSH_MSG_TOO_MANY,
    PUSH_MSG_BAD_KEY,   /* messages[at].key */
    PUSH_MSG_BAD_DELAY, /* messages[at].delayMs */
    PUSH_MSG_BAD_TTL,   /* messages[at].ttlSeconds */
};

struct push_parse {
    struct http_json j;
    struct http_push *out;
    char *free;    /* next free byte of out->mem */
    uint32_t cap;  /* room in out->payloads */
    uint32_t ecap; /* room in out->extras */
    enum push_field queue, partition, messages;
    enum push_msg_error msg_error;
    uint32_t msg_error_at;
    struct http_error *err;
};

/* syntax_error - the scanner failed: say where and why. */
static int
syntax_error(struct push_parse *pp)
{
    return http_parse_syntax(&pp->j, pp->err);
}

/*
 * read_name - the value of field "queue" or "partition": a string kept in
 * mem, null (absent), or anything else (a shape error unless repeated).
 */
static int
read_name(struct push_parse *pp, const char *field, struct http_str *s,
          enum push_field *st)
{
    size_t n;

    if (http_json_peek(&pp->j) != '"') {
        *st = http_json_peek(&pp->j) == 'n' ? PUSH_ABSENT : PUSH_BAD;
        return http_json_value(&pp->j) == 0 ? 0 : syntax_error(pp);
    }
    if (http_json_string(&pp->j, pp->free, &n) != 0)
        return http_parse_syntax_in(&pp->j, field, pp->err);
    s->ptr = pp->free;
    s->len = n;
    pp->free[n] = '\0';
    pp->free += n + 1;
    *st = PUSH_OK;
    return 0;
}

/* grow_extras - room for n entries in out->extras, the new ones zeroed
 * (made at the first message that carries an extra).  0 or -ENOMEM. */
static int
grow_extras(struct push_parse *pp, uint32_t n)
{
    struct http_push *out = pp->out;
    struct http_push_extra *e;

    if (out->extras != NULL && n <= pp->ecap)
        return 0;
    uint32_t cap = pp->cap > n ? pp->cap : n;
    if ((e = realloc(out->extras, cap * sizeof(*e))) == NULL)
        return -ENOMEM;
    memset(e + pp->ecap, 0, (cap - pp->ecap) * sizeof(*e));
    out->extras = e;
    pp->ecap = cap;
    return 0;
}

/* add_payload - append one span to out->payloads, growing it (from 128:
 * a typical batch of 100 takes one allocation, not four). */
static int
add_payload(struct push_parse *pp, const char *p, size_t n)
{
    struct http_push *out = pp->out;

    if (out->n == pp->cap) {
        uint32_t cap = pp->cap ? pp->cap * 2 : 128;
        struct http_str *a;

        if (cap > HTTP_BATCH_MAX)
            cap = HTTP_BATCH_MAX;
        a = realloc(out->payloads, cap * sizeof(*a));
        if (a == NULL)
            return http_parse_oom(pp->err);
        out->payloads = a;
        pp->cap = cap;
    }
    if (out->extras != NULL && grow_extras(pp, out->n + 1) != 0)
        return http_parse_oom(pp->err);
    out->payloads[out->n].ptr = p;
    out->payloads[out->n].len = n;
    out->n++;
    return 0;
}

/* msg_error - remember the first shape error of this "messages". */
static void
msg_error(struct push_parse *pp, enum push_msg_error e, uint32_t at)
{
    if (pp->msg_error == PUSH_MSG_NONE) {
        pp->msg_error = e;
        pp->msg_error_at = at;
    }
}

/* The field of a message besides its payload that a key names. */
enum push_extra_field { EXTRA_NONE, EXTRA_KEY, EXTRA_DELAY, EXTRA_TTL };

/* uint_value - the integer token of (p, end): digits alone (no sign,
 * fraction or exponent), at most max.  0 or -1. */
static int
uint_value(const char *p, const char *end, uint64_t max, uint32_t *out)
{
    uint64_t v = 0;

    if (p == end)
        return -1;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > max)
            return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* read_extra - the value at j->p of field f of message i (its last one
 * counts): kept in e, or a shape error; null is absent. */
static int
read_extra(struct push_parse *pp, uint32_t i, enum push_extra_field f,
           struct http_push_extra *e)
{
    struct http_json *j = &pp->j;
    const char *start = j->p;
    size_t n;

    if (f == EXTRA_KEY && http_json_peek(j) == '"') {
        if (http_json_string(j, pp->free, &n) != 0)
            return syntax_error(pp);
        if (n == 0 || n > HTTP_KEY_MAX) {
            msg_error(pp, PUSH_MSG_BAD_KEY, i);
            return 0;
        }
        e->key = (struct http_str){pp->free, n};
        e->has_key = 1;
        pp->free[n] = '\0';
        pp->free += n + 1;
        return 0;
    }
    if (http_json_value(j) != 0)
        return syntax_error(pp);
    if (*start == 'n') { /* null: absent */
        if (f == EXTRA_KEY)
            e->has_key = 0;
        else if (f == EXTRA_DELAY)
            e->delay_ms = 0;
        else
            e->has_ttl = 0;
        return 0;
    }
    if (f == EXTRA_KEY)
        msg_error(pp, PUSH_MSG_BAD_KEY, i);
    else if (f == EXTRA_DELAY &&
             uint_value(start, j->p, HTTP_MSG_DELAY_MAX, &e->delay_ms) != 0)
        msg_error(pp, PUSH_MSG_BAD_DELAY, i);
    else if (f == EXTRA_TTL) {
        if (uint_value(start, j->p, HTTP_MSG_TTL_MAX, &e->ttl_s) != 0)
            msg_error(pp, PUSH_MSG_BAD_TTL, i);
        else
            e->has_ttl = 1;
    }
    return 0;
}

/* extra_field - which extra field key (n bytes, unescaped) names. */
static enum push_extra_field
extra_field(const char *key, size_t n)
{
    if (http_json_key_is(key, n, "key"))
        return EXTRA_KEY;
    if (http_json_key_is(key, n, "delayMs"))
        return EXTRA_DELAY;
    if (http_json_key_is(key, n, "ttlSeconds"))
        return EXTRA_TTL;
    return EXTRA_NONE;
}

/* read_message - one {"payload": any, ...} at index i of "messages". */
static int
read_message(struct push_parse *pp, uint32_t i)
{
    struct http_json *j = &pp->j;
    struct http_push_extra e = {0};
    const char *payload = NULL, *start;
    size_t payload_len = 0, n;
    int more = http_json_enter(j), extra = 0, rc;

    while (more > 0) {
        int is_payload;
        enum push_extra_field f = EXTRA_NONE;

        /* The key as clients send it needs no unescaping to compare. */
        http_json_ws(j);
        if (j->end - j->p >= 9 && memcmp(j->p, "\"payload\"", 9) == 0) {
            j->p += 9;
            is_payload = 1;
        } else {
            if (http_json_string(j, pp->free, &n) != 0)
                return syntax_error(pp);
            is_payload = http_json_key_is(pp->free, n, "payload");
            f = extra_field(pp->free, n);
        }
        if (http_json_eat(j, ':') != 0)
            return syntax_error(pp);
        http_json_ws(j);
        if (f != EXTRA_NONE) {
            if ((rc = read_extra(pp, i, f, &e)) != 0)
                return rc;
            extra = 1;
            more = http_json_next(j, '}');
            continue;
        }
        start = j->p;
        if (http_json_value(j) != 0)
            return syntax_error(pp);
        if (is_payload) {
            payload = start;
            payload_len = (size_t)(j->p - start);
        }
        more = http_json_next(j, '}');
    }
    if (more < 0)
        return syntax_error(pp);
    if (payload == NULL) {
        msg_error(pp, PUSH_MSG_NO_PAYLOAD, i);
        return 0;
    }
    if (pp->msg_error != PUSH_MSG_NONE)
        return 0; /* the rest is only validated */
    if ((e.has_key || e.delay_ms || e.has_ttl) && grow_extras(pp, i + 1) != 0)
        return http_parse_oom(pp->err);
    if ((rc = add_payload(pp, payload, payload_len)) != 0)
        return rc;
    if (extra && pp->out->extras != NULL)
        pp->out->extras[i] = e;
    return 0;
}

/* read_entry - element i of "messages"; after a shape error the rest of
 * the array is only validated. */
static int
read_entry(struct push_parse *pp, uint32_t i)
{
    if (pp->msg_error == PUSH_MSG_NONE && i == HTTP_BATCH_MAX)
        msg_error(pp, PUSH_MSG_TOO_MANY, i);
    if (pp->msg_error == PUSH_MSG_NONE && http_json_peek(&pp->j) != '{')
        msg_error(pp, PUSH_MSG_NOT_OBJECT, i);
    if (pp->msg_error != PUSH_MSG_NONE)
        return http_json_value(&pp->j) == 0 ? 0 : syntax_error(pp);
    return read_message(pp, i);
}

/* read_messages - the array (null: absent); a repeat starts over. */
static int
read_messages(struct push_parse *pp)
{
    struct http_json *j = &pp->j;
    uint32_t i;
    int more, rc;

    pp->out->n = 0;
    pp->msg_error = PUSH_MSG_NONE;
    if (http_json_peek(j) != '[') {
        pp->messages = http_json_peek(j) == 'n' ? PUSH_ABSENT : PUSH_BAD;
        msg_error(pp, PUSH_MSG_NOT_ARRAY, 0);
        return http_json_value(j) == 0 ? 0 : syntax_error(pp);
    }
    more = http_json_enter(j);
    for (i = 0; more > 0; i++) {
        if ((rc = read_entry(pp, i)) != 0)
            return rc;
        more = http_json_next(j, ']');
    }
    if (more < 0)
        return syntax_error(pp);
    pp->messages = pp->msg_error == PUSH_MSG_NONE ? PUSH_OK : PUSH_BAD;
    return 0;
}

/* read_member - one top-level "key": value. */
static int
read_member(struct push_parse *pp)
{
    struct http_json *j = &pp->j;
    size_t n;

    if (http_json_key(j, pp->free, &n) != 0)
        return syntax_error(pp);
    if (http_json_key_is(pp->free, n, "queue"))
        return read_name(pp, "queue", &pp->out->queue, &pp->queue);
    if (http_json_key_is(pp->free, n, "partition"))
        return read_name(pp, "partition", &pp->out->partition, &pp->partition);
    if (http_json_key_is(pp->free, n, "messages"))
        return read_messages(pp);
    return http_json_value(j) == 0 ? 0 : syntax_error(pp);
}

/* read_body - '{' members '}' and nothing after but whitespace. */
static int
read_body(struct push_parse *pp)
{
    struct http_json *j = &pp->j;
    int more, rc;

    if (http_json_peek(j) != '{') {
        if (http_json_value(j) != 0)
            return syntax_error(pp);
        return http_parse_bad(pp->err, "the body must be a JSON object");
    }
    more = http_json_enter(j);
    while (more > 0) {
        if ((rc = read_member(pp)) != 0)
            return rc;
        more = http_json_next(j, '}');
    }
    return more < 0 || http_json_end(j) != 0 ? syntax_error(pp) : 0;
}

/* shape_error - the final shape of the body, checked field by field. */
static int
shape_error(struct push_parse *pp)
{
    uint32_t at = pp->msg_error_at;

    if (pp->queue != PUSH_OK)
        return http_parse_bad(pp->err, pp->queue == PUSH_ABSENT
                                           ? "field 'queue' is required"
                                           : "field 'queue' must be a string");
    if (pp->partition == PUSH_BAD)
        return http_parse_bad(pp->err, "field 'partition' must be a string");
    pp->out->has_partition = pp->partition == PUSH_OK;
    switch (pp->messages == PUSH_ABSENT ? PUSH_MSG_NONE : pp->msg_error) {
    case PUSH_MSG_NONE:
        return pp->messages == PUSH_OK
                   ? 0
                   : http_parse_bad(pp->err, "field 'messages' is required");
    case PUSH_MSG_NOT_ARRAY:
        return http_parse_bad(pp->err, "field 'messages' must be an array");
    case PUSH_MSG_NOT_OBJECT:
        return http_parse_bad(pp->err, "field 'messages[%u]' must be an object",
                              at);
    case PUSH_MSG_NO_PAYLOAD:
        return http_parse_bad(pp->err,
                              "field 'messages[%u].payload' is required", at);
    case PUSH_MSG_BAD_KEY:
        return http_parse_bad(pp->err,
                              "field 'messages[%u].key' must be a string of "
                              "1 to %d bytes",
                              at, HTTP_KEY_MAX);
    case PUSH_MSG_BAD_DELAY:
        return http_parse_bad(pp->err,
                              "field 'messages[%u].delayMs' must be a "
                              "non-negative integer",
                              at);
    case PUSH_MSG_BAD_TTL:
        return http_parse_bad(pp->err,
                              "field 'messages[%u].ttlSeconds' must be a "
                              "non-negative integer",
                              at);
    case PUSH_MSG_TOO_MANY:
        break;
    }
    return http_parse_bad(pp->err,
                          "field 'messages' holds more than %d messages",
                          HTTP_BATCH_MAX);
}

/* parse - http_parse_push without the release on failure. */
static int
parse(const char *body, size_t len, struct http_push *out,
      struct http_error *err)
{
    struct push_parse pp;
    int rc;

    memset(out, 0, sizeof(*out));
    memset(&pp, 0, sizeof(pp));
    pp.out = out;
    pp.err = err;
    out->mem = malloc(len + 1);
    if (out->mem == NULL)
        return http_parse_oom(err);
    pp.free = out->mem;
    http_json_init(&pp.j, body, len);
    if ((rc = read_body(&pp)) != 0)
        return rc;
    return shape_error(&pp);
}

/* http_parse_push - see parse.h. */
int
http_parse_push(const char *body, size_t len, struct http_push *out,
                struct http_error *err)
{
    int rc = parse(body, len, out, err);

    if (rc != 0)
        http_push_free(out);
    return rc;
}

/* http_push_free - release what a parse allocated, success or not. */
void
http_push_free(struct http_push *p)
{
    free(p->payloads);
    free(p->extras);
    free(p->mem);
    memset(p, 0, sizeof(*p));
}
