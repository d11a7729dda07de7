/*
 * parse_object.c - see parse_object.h.
 */
#include "http/parse_object.h"

#include "http/json_scan.h"
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
