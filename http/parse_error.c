/*
 * parse_error.c - the error answers of the body parsers (parse_error.h).
 * No state, no locking.
 */
#include "http/parse_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>

#include "http/errors.h"
#include "http/json_scan.h"

/* http_parse_bad - see parse_error.h. */
int
http_parse_bad(struct http_error *err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    http_error_vset(err, 400, "ephemeral_bad_request", fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* http_parse_syntax - the byte is counted from the start of the body. */
int
http_parse_syntax(const struct http_json *j, struct http_error *err)
{
    return http_parse_bad(err, "malformed JSON at byte %zu: %s",
                          (size_t)(j->p - j->start), j->why);
}

/* http_parse_syntax_in - see parse_error.h. */
int
http_parse_syntax_in(const struct http_json *j, const char *field,
                     struct http_error *err)
{
    return http_parse_bad(err, "malformed JSON at byte %zu: %s in field '%s'",
                          (size_t)(j->p - j->start), j->why, field);
}

/* http_parse_oom - see parse_error.h. */
int
http_parse_oom(struct http_error *err)
{
    http_error_set(err, 500, "internal", "out of memory");
    return -ENOMEM;
}

/* http_parse_length - see parse_error.h. */
int
http_parse_length(size_t len, struct http_error *err)
{
    if (len <= INT32_MAX)
        return 0;
    http_error_set(err, 413, "payload_too_large", "the body is too large");
    return -EINVAL;
}
