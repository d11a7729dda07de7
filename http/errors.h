/*
 * errors.h - the one table from -errno results to HTTP status and error code,
 * and struct http_error, which parsers fill for the caller to send back.
 *
 * Error bodies are {"error": "<sentence naming the field>", "code": CODE}
 * (SPEC §2).  No state, no locking.
 */
#ifndef MAYFLY_HTTP_ERRORS_H
#define MAYFLY_HTTP_ERRORS_H

#include <stdarg.h>

#define HTTP_ERROR_MSG_MAX 256

/* One failure, ready to be sent: status, a static code and a sentence. */
struct http_error {
    unsigned status;              /* 400, 404, ... */
    const char *code;             /* "ephemeral_bad_request", static */
    char msg[HTTP_ERROR_MSG_MAX]; /* human sentence, truncated if long */
};

/*
 * http_error_set - fill err (if not NULL).  Cannot fail: a long sentence is
 * cut, never inside a UTF-8 sequence (it goes into a JSON string).
 */
void http_error_set(struct http_error *err, unsigned status, const char *code,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void http_error_vset(struct http_error *err, unsigned status, const char *code,
                     const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/*
 * http_error_from_errno - fill err from a -errno result, through the table:
 *   -ENOSPC     429 queue_full
 *   -ENOBUFS    503 ephemeral_unavailable
 *   -EMSGSIZE   413 message_too_large
 *   -EFBIG      413 payload_too_large (more than a bound can ever hold)
 *   -ENOENT     404 ephemeral_queue_not_found
 *   -EOVERFLOW  503 ephemeral_unavailable
 *   -EINVAL     400 ephemeral_bad_request
 *   -E2BIG      413 payload_too_large
 *   -ESHUTDOWN  503 draining
 *   anything else  500 internal
 * The sentence is "<what>: <reason>" (what may be NULL: reason alone).
 */
void http_error_from_errno(struct http_error *err, int neg_errno,
                           const char *what);

/* http_status_retryable - 1 if the status carries Retry-After (429, 503). */
int http_status_retryable(unsigned status);

#endif
