/*
 * shares.c - see shares.h.
 */
#include "http/shares.h"

#include <errno.h>

/* http_shares_close - see shares.h. */
int
http_shares_close(const struct http_shares *s, struct http_buf *out)
{
    http_buf_append_str(out, ",\"nodes\":");
    http_buf_append_json_strs(out, s->nodes, s->nnodes);
    http_buf_append_str(out, ",\"missing\":");
    http_buf_append_json_strs(out, s->missing, s->nmissing);
    http_buf_append_str(out, "}");
    return out->oom ? -ENOMEM : 0;
}
