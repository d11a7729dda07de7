/*
 * parse_reset.c - the reset body: {"queue"}.  json-c, strict.  No locking.
 * Errors: 0, -EINVAL, -ENOMEM with err filled.
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/parse.h"
#include "http/parse_jsonc.h"

/* http_parse_reset - see parse.h. */
int
http_parse_reset(const char *body, size_t len, struct http_reset *out,
                 struct http_error *err)
{
    struct json_object *root;
    struct http_pool pool;
    int have, rc;

    memset(out, 0, sizeof(*out));
    if ((rc = http_jsonc_parse(body, len, &root, &pool, err)) != 0)
        return rc;
    out->mem = pool.mem;
    rc = http_jsonc_str(root, "queue", "queue", 1, &pool, &out->queue, &have,
                        err);
    json_object_put(root);
    return rc;
}

/* http_reset_free - release the strings. */
void
http_reset_free(struct http_reset *r)
{
    free(r->mem);
    memset(r, 0, sizeof(*r));
}
