/*
 * parse_push.c - the push body in one validating pass (json_scan.h), no
 * tree: {"queue", "partition"?, "messages": [{"payload": any JSON}, ...]}.
 *
 * out->mem (body length + 1 bytes) receives the unescaped names: every
 * string kept is a disjoint span of the body with its two quotes, so the
 * unescaped text and its NUL always fit.  Keys are unescaped into the free
 * tail of mem as scratch.  No locking.  Errors: 0, -EINVAL, -ENOMEM, with
 * err filled.
 */
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
};

struct push_parse {
    struct http_json j;
    struct http_push *out;
    char *free;   /* next free byte of out->mem */
    uint32_t cap; /* room in out->payloads */
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
 * read_name - the value of "queue" or "partition": a string kept in mem,
 * null (absent), or anything else (a shape error unless repeated).
 */
static int
read_name(struct push_parse *pp, struct http_str *s, enum push_field *st)
{
    size_t n;

    if (http_json_peek(&pp->j) != '"') {
        *st = http_json_peek(&pp->j) == 'n' ? PUSH_ABSENT : PUSH_BAD;
        return http_json_value(&pp->j) == 0 ? 0 : syntax_error(pp);
    }
    if (http_json_string(&pp->j, pp->free, &n) != 0)
        return syntax_error(pp);
    s->ptr = pp->free;
    s->len = n;
    pp->free[n] = '\0';
    pp->free += n + 1;
    *st = PUSH_OK;
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

/* read_message - one {"payload": any, ...} at index i of "messages". */
static int
read_message(struct push_parse *pp, uint32_t i)
{
    struct http_json *j = &pp->j;
    const char *payload = NULL, *start;
    size_t payload_len = 0, n;
    int more = http_json_enter(j);

    while (more > 0) {
        int is_payload;

        /* The key as clients send it needs no unescaping to compare. */
        http_json_ws(j);
        if (j->end - j->p >= 9 && memcmp(j->p, "\"payload\"", 9) == 0) {
            j->p += 9;
            is_payload = 1;
        } else {
            if (http_json_string(j, pp->free, &n) != 0)
                return syntax_error(pp);
            is_payload = http_json_key_is(pp->free, n, "payload");
        }
        if (http_json_eat(j, ':') != 0)
            return syntax_error(pp);
        http_json_ws(j);
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
    return add_payload(pp, payload, payload_len);
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
        return read_name(pp, &pp->out->queue, &pp->queue);
    if (http_json_key_is(pp->free, n, "partition"))
        return read_name(pp, &pp->out->partition, &pp->partition);
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
    free(p->mem);
    memset(p, 0, sizeof(*p));
}
