/*
 * parse_pop.c - the body of POST /api/v1/ephemeral/pop (SPEC §14): the
 * pop's parameters as GET takes them in its query ("queue", "partition"?,
 * "group"?, "batch", "wait", "timeout", "autoAck" or "commitOnDelivery",
 * "from") and the acks to apply first ("acks", as the ack route's).
 *
 * The queue, the group and the acks are the ack parser's
 * (http_parse_pop_acks, which validates the whole body first); a second
 * pass of the strict scanner over the top-level members reads the rest.
 * Numbers are clamped as the query's are (batch to 1-10000, timeout to the
 * node's max_wait_ms); a wrong type is a 400 naming the field.  A repeated
 * key keeps its last value, as everywhere.  No locking.  Errors: 0,
 * -EINVAL, -ENOMEM with err filled.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/errors.h"
#include "http/json_scan.h"
#include "http/parse.h"
#include "http/parse_error.h"
#include "http/parse_object.h"

/* Where each member's last value starts (NULL: absent). */
struct pop_members {
    const char *partition, *batch, *wait, *timeout, *auto_ack, *alias, *from;
};

/* member - note where a pop's member's value starts (http_member_fn); the
 * object is valid (http_parse_pop_acks read it first). */
static int
member(struct http_json *j, const char *key, size_t n, void *arg,
       struct http_error *err)
{
    struct pop_members *m = arg;
    const char **at = NULL;

    (void)err;
    n = strnlen(key, n); /* json-c's view of the key */
    if (http_json_key_is(key, n, "partition"))
        at = &m->partition;
    else if (http_json_key_is(key, n, "batch"))
        at = &m->batch;
    else if (http_json_key_is(key, n, "wait"))
        at = &m->wait;
    else if (http_json_key_is(key, n, "timeout"))
        at = &m->timeout;
    else if (http_json_key_is(key, n, "autoAck"))
        at = &m->auto_ack;
    else if (http_json_key_is(key, n, "commitOnDelivery"))
        at = &m->alias;
    else if (http_json_key_is(key, n, "from"))
        at = &m->from;
    http_json_ws(j);
    if (at != NULL)
        *at = j->p;
    http_json_value(j);
    return 0;
}

/* members - note the pop's members of the (valid) object at body; the
 * walk cannot fail on it. */
static void
members(const char *body, size_t len, char *scratch, struct pop_members *m)
{
    struct http_error none;

    http_parse_object(body, len, &scratch, member, m, &none);
}

/* absent - the value at p (absent: NULL) counts as absent. */
static int
absent(const char *p)
{
    return p == NULL || *p == 'n';
}

/* count - the integer at p (validated JSON) into *out, clamped to lo..hi
 * as the query's numbers are (a negative one too); a fraction or an
 * exponent is refused. */
static int
count(const char *p, const char *field, uint64_t lo, uint64_t hi, uint64_t *out,
      struct http_error *err)
{
    uint64_t v = 0;
    int neg = *p == '-';

    p += neg;
    if (*p < '0' || *p > '9')
        return http_parse_bad(err, "field '%s' must be a whole number", field);
    for (; *p >= '0' && *p <= '9'; p++)
        v = v > hi ? v : v * 10 + (uint64_t)(*p - '0'); /* saturates */
    if (*p == '.' || *p == 'e' || *p == 'E')
        return http_parse_bad(err, "field '%s' must be a whole number", field);
    *out = neg || v < lo ? lo : v > hi ? hi : v;
    return 0;
}

/* flag - the boolean at p into *out (absent: unchanged). */
static int
flag(const char *p, const char *field, int *out, struct http_error *err)
{
    if (absent(p))
        return 0;
    if (*p != 't' && *p != 'f')
        return http_parse_bad(err, "field '%s' must be a boolean", field);
    *out = *p == 't';
    return 0;
}

/* text - the string at p unescaped into dst (NUL-terminated), *n its
 * length; 0, or -EINVAL naming field. */
static int
text(const char *p, const char *end, const char *field, char *dst, size_t *n,
     struct http_error *err)
{
    struct http_json j;

    if (*p != '"')
        return http_parse_bad(err, "field '%s' must be a string", field);
    http_json_init(&j, p, (size_t)(end - p));
    http_json_string(&j, dst, n);
    dst[*n] = '\0';
    return 0;
}

/* fields - what m notes into out; mem (len + 1 bytes) takes the
 * partition, scratch the "from". */
static int
fields(const struct pop_members *m, const char *end, uint32_t max_wait_ms,
       char *mem, char *scratch, struct http_pop *out, struct http_error *err)
{
    uint64_t v;
    size_t n;
    int rc, alias = 0;

    if (!absent(m->partition)) {
        if ((rc = text(m->partition, end, "partition", mem, &n, err)) != 0)
            return rc;
        out->partition = (struct http_str){mem, n};
        out->has_partition = 1;
    }
    out->batch = 1;
    if (!absent(m->batch)) {
        if ((rc = count(m->batch, "batch", 1, HTTP_BATCH_MAX, &v, err)) != 0)
            return rc;
        out->batch = (uint32_t)v;
    }
    out->timeout = 30000 < max_wait_ms ? 30000 : max_wait_ms;
    if (!absent(m->timeout)) {
        if ((rc = count(m->timeout, "timeout", 0, max_wait_ms, &v, err)) != 0)
            return rc;
        out->timeout = (uint32_t)v;
    }
    if ((rc = flag(m->wait, "wait", &out->wait, err)) != 0 ||
        (rc = flag(m->auto_ack, "autoAck", &out->auto_ack, err)) != 0 ||
        (rc = flag(m->alias, "commitOnDelivery", &alias, err)) != 0)
        return rc;
    out->auto_ack |= alias;
    out->from = HTTP_POP_FROM_ALL;
    if (!absent(m->from)) {
        if ((rc = text(m->from, end, "from", scratch, &n, err)) != 0)
            return rc;
        if (strcmp(scratch, "new") == 0)
            out->from = HTTP_POP_FROM_NEW;
        else if (strcmp(scratch, "last") == 0)
            out->from = HTTP_POP_FROM_LAST;
        else if (strcmp(scratch, "all") != 0)
            return http_parse_bad(err, "field 'from' must be all, new or last");
    }
    return 0;
}

/* http_parse_pop - see parse.h. */
int
http_parse_pop(const char *body, size_t len, uint32_t max_wait_ms,
               struct http_pop *out, struct http_error *err)
{
    struct pop_members m = {0};
    char *scratch;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = http_parse_pop_acks(body, len, &out->ack, err)) != 0)
        return rc;
    out->mem = malloc(2 * (len + 1));
    if (out->mem == NULL) {
        http_pop_free(out);
        return http_parse_oom(err);
    }
    scratch = out->mem + len + 1;
    members(body, len, scratch, &m);
    rc = fields(&m, body + len, max_wait_ms, out->mem, scratch, out, err);
    if (rc != 0)
        http_pop_free(out);
    return rc;
}

/* http_pop_free - release what a parse holds. */
void
http_pop_free(struct http_pop *p)
{
    http_ack_free(&p->ack);
    free(p->mem);
    memset(p, 0, sizeof(*p));
}
