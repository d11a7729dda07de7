/*
 * test_errors.c - http/errors.c: the one -errno table and error sentences.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/errors.h"

Test(http_errors, one_table_maps_errno_to_status_and_code)
{
    static const struct {
        int e;
        unsigned status;
        const char *code;
    } rows[] = {
        {-ENOSPC, 429, "queue_full"},
        {-ENOBUFS, 503, "ephemeral_unavailable"},
        {-EMSGSIZE, 413, "message_too_large"},
        {-EFBIG, 413, "payload_too_large"},
        {-ENOENT, 404, "ephemeral_queue_not_found"},
        {-EOVERFLOW, 503, "ephemeral_unavailable"},
        {-EINVAL, 400, "ephemeral_bad_request"},
        {-E2BIG, 413, "payload_too_large"},
        {-ESHUTDOWN, 503, "draining"},
        {-EIO, 500, "internal"},
        {-ENOMEM, 500, "internal"},
    };
    struct http_error err;
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        http_error_from_errno(&err, rows[i].e, "push to queue 'q'");
        cr_assert_eq(err.status, rows[i].status, "errno %d", -rows[i].e);
        cr_assert_str_eq(err.code, rows[i].code);
        cr_assert(strncmp(err.msg, "push to queue 'q': ", 19) == 0, "%s",
                  err.msg);
        cr_assert_eq(http_status_retryable(err.status),
                     err.status == 429 || err.status == 503);
    }
}

Test(http_errors, sentences_are_cut_on_a_utf8_boundary)
{
    struct http_error err;
    char long_name[400];
    size_t i, n;

    for (i = 0; i + 2 < sizeof(long_name); i += 2)
        memcpy(long_name + i, "\xc3\xa9", 2);
    long_name[i] = '\0';
    for (i = 0; i < 2; i++) {
        http_error_set(&err, 400, "invalid_name", "%.*sname %s", (int)i, "x",
                       long_name);
        n = strlen(err.msg);
        cr_assert_lt(n, HTTP_ERROR_MSG_MAX);
        cr_assert_neq((unsigned char)err.msg[n - 1], 0xc3, "cut inside é");
    }
}
