/*
 * names.c - the one place a worker checks a name a client sent.
 */
#include "http/names.h"

#include "http/reply.h"
#include "worker/worker_int.h"

int
worker_name_ok(struct http_request *req, const char *field, const char *p,
               size_t len)
{
    if (http_name_valid(p, len))
        return 1;
    http_reply_error(req, 400, "invalid_name",
                     "field '%s' must be 1-512 bytes of UTF-8 without control "
                     "characters",
                     field);
    return 0;
}
