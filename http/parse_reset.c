/*
 * parse_reset.c - the reset body: {"queue"}.  json-c, strict.  No locking.
 * Errors: 0, -EINVAL, -ENOMEM with err filled.
 */
#include <stdlib.h>
#include <string.h>

#include "http/parse.h"
#include "http/parse_jsonc.h"

/* http_parse_reset - see parse.h. */
int
http_parse_reset(const char *body, size_t len, struct http_reset *out,
                 struct http_error *err)
{
    int rc;

    memset(out, 0, sizeof(*out));
    rc = http_jsonc_read(body, len, &out->queue, &out->mem, NULL, NULL, err);
    if (rc != 0)
        http_reset_free(out);
    return rc;
}

/* http_reset_free - release the strings. */
void
http_reset_free(struct http_reset *r)
{
    free(r->mem);
    memset(r, 0, sizeof(*r));
}
