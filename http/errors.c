/*
 * errors.c - the one table from -errno results to status and error code.
 *
 * Handlers return -errno (STYLE: -ENOSPC full, -ENOBUFS node cap, ...);
 * this file alone decides what a client sees for each.  No state.
 */
#include "http/errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct errno_row {
    int neg_errno;
    unsigned status;
    const char *code;
    const char *reason;
};

static const struct errno_row errno_table[] = {
    {-ENOSPC, 429, "queue_full", "the queue is full"},
    {-ENOBUFS, 503, "ephemeral_unavailable",
     "the node's ephemeral memory is full"},
    {-EMSGSIZE, 413, "message_too_large",
     "a message is larger than the queue's maxBytes"},
    {-EFBIG, 413, "payload_too_large",
     "the batch is larger than the queue or the node can ever hold"},
    {-ENOENT, 404, "ephemeral_queue_not_found", "no such queue"},
    {-EOVERFLOW, 503, "ephemeral_unavailable",
     "the node's queue tables are full"},
    {-EINVAL, 400, "ephemeral_bad_request", "invalid request"},
    {-E2BIG, 413, "payload_too_large",
     "the request body is larger than max_body_bytes"},
    {-ESHUTDOWN, 503, "draining", "the node is draining"},
};

/* http_error_vset - printf into err->msg; when cut, drop a trailing
 * incomplete UTF-8 sequence. */
void
http_error_vset(struct http_error *err, unsigned status, const char *code,
                const char *fmt, va_list ap)
{
    size_t n, lead;
    int len;

    if (err == NULL)
        return;
    err->status = status;
    err->code = code;
    len = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    if (len < 0) {
        err->msg[0] = '\0';
        return;
    }
    n = strlen(err->msg);
    if ((size_t)len == n)
        return;
    for (lead = n;
         lead > 0 && ((unsigned char)err->msg[lead - 1] & 0xc0) == 0x80; lead--)
        ;
    if (lead > 0 && (unsigned char)err->msg[lead - 1] >= 0xc0) {
        unsigned char c = (unsigned char)err->msg[lead - 1];
        size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

        if (n - (lead - 1) < want)
            err->msg[lead - 1] = '\0';
    }
}

/* http_error_set - the variadic form. */
void
http_error_set(struct http_error *err, unsigned status, const char *code,
               const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    http_error_vset(err, status, code, fmt, ap);
    va_end(ap);
}

/* http_error_from_errno - look neg_errno up; unknown ones are 500. */
void
http_error_from_errno(struct http_error *err, int neg_errno, const char *what)
{
    const struct errno_row *row = NULL;
    size_t i;

    for (i = 0; i < sizeof(errno_table) / sizeof(errno_table[0]); i++) {
        if (errno_table[i].neg_errno == neg_errno) {
            row = &errno_table[i];
            break;
        }
    }
    if (row == NULL) {
        http_error_set(err, 500, "internal", "%s%sinternal error (errno %d)",
                       what ? what : "", what ? ": " : "", -neg_errno);
        return;
    }
    http_error_set(err, row->status, row->code, "%s%s%s", what ? what : "",
                   what ? ": " : "", row->reason);
}

/* http_status_retryable - SPEC §2: every 429 and 503 has Retry-After. */
int
http_status_retryable(unsigned status)
{
    return status == 429 || status == 503;
}
