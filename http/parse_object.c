/*
 * parse_object.c - see parse_object.h.
 */
#include "http/parse_object.h"

#include <stdlib.h>

#include "http/json_scan.h"
#include "http/parse.h"
#include "http/parse_error.h"

/* http_parse_object - see parse_object.h. */
int
http_parse_object(const char *body, size_t len, char *const *keys,
                  http_member_fn *member, void *arg, struct http_error *err)
{
    struct http_json j;
    size_t n;
    int rc, more;

    http_json_init(&j, body, len);
    if (http_json_peek(&j) != '{')
        return http_json_value(&j) != 0
                   ? http_parse_syntax(&j, err)
                   : http_parse_bad(err, "the body must be a JSON object");
    more = http_json_enter(&j);
    while (more > 0) {
        char *key = *keys;

        if (http_json_key(&j, key, &n) != 0)
            return http_parse_syntax(&j, err);
        if ((rc = member(&j, key, n, arg, err)) != 0)
            return rc;
        more = http_json_next(&j, '}');
    }
    http_json_ws(&j);
    if (more < 0 || j.p != j.end) {
        if (more >= 0)
            j.why = "unexpected data after the JSON value";
        return http_parse_syntax(&j, err);
    }
    return 0;
}

/* http_parse_members - see parse_object.h. */
int
http_parse_members(const char *body, size_t len, char **mem,
                   http_member_fn *member, void *out, struct http_error *err)
{
    struct http_walk w = {.out = out};
    int rc;

    *mem = NULL;
    if ((rc = http_parse_length(len, err)) != 0)
        return rc;
    if ((*mem = w.at = malloc(len + 8)) == NULL)
        return http_parse_oom(err);
    return http_parse_object(body, len, &w.at, member, &w, err);
}

/* http_parse_string - see parse_object.h. */
int
http_parse_string(struct http_json *j, char **at, struct http_str *s,
                  int null_ok, const char *field, struct http_error *err)
{
    size_t n;

    if (null_ok && http_json_peek(j) == 'n') {
        if (http_json_value(j) != 0)
            return http_parse_syntax(j, err);
        return 0;
    }
    if (http_json_peek(j) != '"') {
        if (http_json_value(j) != 0)
            return http_parse_syntax(j, err);
        return http_parse_bad(err, "field '%s' must be a string", field);
    }
    if (http_json_string(j, *at, &n) != 0)
        return http_parse_syntax_in(j, field, err);
    s->ptr = *at;
    s->len = n;
    (*at)[n] = '\0';
    *at += n + 1;
    return 1;
}
