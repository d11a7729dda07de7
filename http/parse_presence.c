/*
 * parse_presence.c - see parse_presence.h.
 */
#include "http/parse_presence.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/json_scan.h"
#include "http/parse_error.h"
#include "http/parse_object.h"

/* read_string - a string field into mem (*at): 0, or -EINVAL with err
 * filled (null and other types are refused: the fields are required). */
static int
read_string(struct http_json *j, char **at, struct http_str *s,
            const char *field, struct http_error *err)
{
    int rc = http_parse_string(j, at, s, 0, field, err);

    return rc < 0 ? rc : 0;
}

/* read_ttl - ttlSeconds: an integer from 1 to HTTP_PRESENCE_TTL_MAX. */
static int
read_ttl(struct http_json *j, uint32_t *out, struct http_error *err)
{
    const char *start;
    uint64_t v = 0;

    http_json_ws(j);
    start = j->p;
    if (http_json_value(j) != 0)
        return http_parse_syntax(j, err);
    for (const char *p = start; p < j->p && v <= HTTP_PRESENCE_TTL_MAX; p++) {
        if (*p < '0' || *p > '9') {
            v = 0;
            break;
        }
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < 1 || v > HTTP_PRESENCE_TTL_MAX)
        return http_parse_bad(err,
                              "field 'ttlSeconds' must be an integer from 1 "
                              "to %d",
                              HTTP_PRESENCE_TTL_MAX);
    *out = (uint32_t)v;
    return 0;
}

/* member - one member of the top-level object (http_member_fn). */
static int
member(struct http_json *j, const char *key, size_t n, void *arg,
       struct http_error *err)
{
    struct http_walk *w = arg;
    struct http_presence *out = w->out;
    char **at = &w->at;

    if (http_json_key_is(key, n, "channel"))
        return read_string(j, at, &out->channel, "channel", err);
    if (http_json_key_is(key, n, "member"))
        return read_string(j, at, &out->member, "member", err);
    if (http_json_key_is(key, n, "ttlSeconds"))
        return read_ttl(j, &out->ttl_s, err);
    if (http_json_key_is(key, n, "node"))
        return read_string(j, at, &out->node, "node", err);
    if (http_json_key_is(key, n, "connections")) {
        uint32_t v = 0;
        http_json_ws(j);
        const char *start = j->p;
        if (http_json_value(j) != 0)
            return http_parse_syntax(j, err);
        for (const char *p = start; p < j->p; p++) {
            if (*p < '0' || *p > '9' || v > 100000000)
                return http_parse_bad(err, "field 'connections' must be a "
                                           "non-negative integer");
            v = v * 10 + (uint32_t)(*p - '0');
        }
        if (j->p == start)
            return http_parse_bad(err, "field 'connections' must be a "
                                       "non-negative integer");
        out->connections = v;
        out->has_connections = 1;
        return 0;
    }
    if (http_json_key_is(key, n, "data")) {
        http_json_ws(j);
        const char *start = j->p;
        if (http_json_value(j) != 0)
            return http_parse_syntax(j, err);
        out->data = (struct http_str){start, (size_t)(j->p - start)};
        out->has_data = !(out->data.len == 4 && memcmp(start, "null", 4) == 0);
        return 0;
    }
    return http_json_value(j) != 0 ? http_parse_syntax(j, err) : 0;
}

/* http_parse_presence - see parse_presence.h. */
int
http_parse_presence(const char *body, size_t len, int enter,
                    struct http_presence *out, struct http_error *err)
{
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = http_parse_members(body, len, &out->mem, member, out, err)) != 0)
        goto fail;
    if (out->channel.ptr == NULL)
        rc = http_parse_bad(err, "field 'channel' is required");
    else if (out->member.ptr == NULL)
        rc = http_parse_bad(err, "field 'member' is required");
    else if (out->has_connections && out->node.ptr == NULL)
        rc = http_parse_bad(err, "field 'node' goes with 'connections'");
    else if (enter && out->ttl_s == 0 && !out->has_connections)
        rc = http_parse_bad(err, "field 'ttlSeconds' is required: a member "
                                 "entered by call leaves when it passes "
                                 "without another enter");
    if (rc == 0)
        return 0;
fail:
    http_presence_free(out);
    return rc;
}

/* http_presence_free - see parse_presence.h. */
void
http_presence_free(struct http_presence *p)
{
    free(p->mem);
    p->mem = NULL;
}
