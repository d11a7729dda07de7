/*
 * parse_error.h - the answers the body parsers of parse.h (parse_*.c,
 * parse_jsonc.c) give when a body will not do, so each sentence and code
 * is written once.  For http/ only.  No state, no locking.
 */
#ifndef MAYFLY_HTTP_PARSE_ERROR_H
#define MAYFLY_HTTP_PARSE_ERROR_H

#include <stddef.h>

struct http_error;
struct http_json;

/* http_parse_bad - 400 ephemeral_bad_request with the sentence (one that
 * names the field).  Returns -EINVAL. */
int http_parse_bad(struct http_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* http_parse_syntax - 400 ephemeral_bad_request "malformed JSON at byte
 * N: why" for the scanner's last failure.  Returns -EINVAL. */
int http_parse_syntax(const struct http_json *j, struct http_error *err);

/* http_parse_syntax_in - the same for a failure inside the string value of
 * field ("... : invalid UTF-8 in field 'queue'"): a body that is not JSON
 * stays ephemeral_bad_request, and the sentence names the field (SPEC
 * §2).  Returns -EINVAL. */
int http_parse_syntax_in(const struct http_json *j, const char *field,
                         struct http_error *err);

/* http_parse_oom - 500 internal "out of memory".  Returns -ENOMEM. */
int http_parse_oom(struct http_error *err);

/*
 * http_parse_length - 0, or -EINVAL (413 payload_too_large) for a body past
 * INT32_MAX bytes: json-c takes an int length, and the ack scanner answers
 * as json-c did.
 */
int http_parse_length(size_t len, struct http_error *err);

#endif
