/*
 * parse_rpc.c - see parse_rpc.h.
 */
#include "http/parse_rpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/json_scan.h"
#include "http/parse_error.h"
#include "http/parse_object.h"

/* read_uint - a non-negative integer, or null: 1 set, 0 null, -EINVAL with
 * err filled; what names the field and its unit in an error. */
static int
read_uint(struct http_json *j, uint64_t *out, const char *what,
          struct http_error *err)
{
    const char *start;
    uint64_t v = 0;

    http_json_ws(j);
    start = j->p;
    if (http_json_value(j) != 0)
        return http_parse_syntax(j, err);
    if (j->p - start == 4 && memcmp(start, "null", 4) == 0)
        return 0;
    for (const char *p = start; p < j->p; p++) {
        if (*p < '0' || *p > '9' || v > UINT64_MAX / 10 - 1)
            return http_parse_bad(err, "field %s", what);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return 1;
}

/* read_timeout - a non-negative integer of ms, or null: as read_uint. */
static int
read_timeout(struct http_json *j, uint64_t *ms, struct http_error *err)
{
    return read_uint(j, ms,
                     "'timeout' must be a non-negative integer of "
                     "milliseconds",
                     err);
}

/* read_gather - {"max": a positive integer, "quietMs"?: ms}, or null: as
 * read_uint; another member is named in a 400. */
static int
read_gather(struct http_json *j, char **at, struct http_rpc *out,
            struct http_error *err)
{
    int more, rc, have_max = 0;
    char *key = *at;
    size_t n;

    if (http_json_peek(j) == 'n') {
        if (http_json_value(j) != 0)
            return http_parse_syntax(j, err);
        return 0;
    }
    if (http_json_peek(j) != '{') {
        if (http_json_value(j) != 0)
            return http_parse_syntax(j, err);
        return http_parse_bad(err, "field 'gather' must be an object "
                                   "{\"max\", \"quietMs\"}");
    }
    more = http_json_enter(j);
    while (more > 0) {
        if (http_json_key(j, key, &n) != 0)
            return http_parse_syntax(j, err);
        if (http_json_key_is(key, n, "max")) {
            rc = read_uint(j, &out->gather_max,
                           "'gather.max' must be a positive integer", err);
            if (rc < 0)
                return rc;
            have_max = rc > 0;
        } else if (http_json_key_is(key, n, "quietMs")) {
            rc = read_uint(j, &out->gather_quiet,
                           "'gather.quietMs' must be a non-negative integer "
                           "of milliseconds",
                           err);
            if (rc < 0)
                return rc;
        } else {
            /* Not echoed: an escaped lone surrogate unescapes to bytes
             * that are not UTF-8, and the sentence goes into JSON. */
            return http_parse_bad(err, "field 'gather' has an unknown member "
                                       "(gather takes max and quietMs)");
        }
        more = http_json_next(j, '}');
    }
    if (more < 0)
        return http_parse_syntax(j, err);
    if (!have_max || out->gather_max == 0 || out->gather_max > 10000)
        return http_parse_bad(err, "field 'gather.max' must be an integer "
                                   "from 1 to 10000");
    return 1;
}

/* member - one member of the top-level object (http_member_fn). */
static int
member(struct http_json *j, const char *key, size_t n, void *arg,
       struct http_error *err)
{
    struct http_walk *w = arg;
    struct http_rpc *out = w->out;
    char **at = &w->at;
    int rc = 0;

    if (http_json_key_is(key, n, "queue")) {
        rc = http_parse_string(j, at, &out->queue, 1, "queue", err);
        out->queue.len = rc > 0 ? out->queue.len : 0;
        out->queue.ptr = rc > 0 ? out->queue.ptr : NULL;
    } else if (http_json_key_is(key, n, "partition")) {
        rc = http_parse_string(j, at, &out->partition, 1, "partition", err);
        out->has_partition = rc > 0;
    } else if (http_json_key_is(key, n, "replyTo")) {
        rc = http_parse_string(j, at, &out->reply_to, 1, "replyTo", err);
        out->has_reply_to = rc > 0;
    } else if (http_json_key_is(key, n, "timeout")) {
        rc = read_timeout(j, &out->timeout_ms, err);
        out->has_timeout = rc > 0;
    } else if (http_json_key_is(key, n, "gather")) {
        rc = read_gather(j, at, out, err);
        out->has_gather = rc > 0;
    } else if (http_json_key_is(key, n, "payload")) {
        http_json_ws(j);
        const char *start = j->p;
        if (http_json_value(j) != 0)
            return http_parse_syntax(j, err);
        out->payload = (struct http_str){start, (size_t)(j->p - start)};
    } else if (http_json_value(j) != 0) {
        return http_parse_syntax(j, err);
    }
    return rc < 0 ? rc : 0;
}

/* http_parse_rpc - see parse_rpc.h. */
int
http_parse_rpc(const char *body, size_t len, struct http_rpc *out,
               struct http_error *err)
{
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = http_parse_members(body, len, &out->mem, member, out, err)) != 0)
        goto fail;
    if (out->queue.ptr == NULL)
        rc = http_parse_bad(err, "field 'queue' is required");
    else if (out->payload.ptr == NULL)
        rc = http_parse_bad(err, "field 'payload' is required");
    if (rc == 0)
        return 0;
fail:
    http_rpc_free(out);
    return rc;
}

/* http_rpc_free - see parse_rpc.h. */
void
http_rpc_free(struct http_rpc *r)
{
    free(r->mem);
    r->mem = NULL;
}
