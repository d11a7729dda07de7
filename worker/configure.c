/*
 * configure.c - POST /api/v1/ephemeral/configure.
 *
 * A declaration must commit through the raft log the master runs before it
 * is answered (SPEC §5).  Until this node's master can commit, the request
 * is refused as SPEC §2 says for a node that cannot reach a leader, after
 * validating the body, so a client learns about a bad option first.
 */
#include "http/errors.h"
#include "http/parse.h"
#include "http/reply.h"
#include "http/request.h"
#include "worker/worker_int.h"

void
worker_configure(struct worker *w, struct http_request *req)
{
    struct http_configure c;
    struct http_error err;
    size_t len;
    const char *body = http_request_body(req, &len);

    (void)w;
    if (http_parse_configure(body, len, &c, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if (worker_name_ok(req, "queue", c.queue.ptr, c.queue.len))
        http_reply_error(req, 503, "no_leader",
                         "configure of queue '%.*s' needs the consensus log, "
                         "which this node does not run yet",
                         (int)(c.queue.len > 200 ? 200 : c.queue.len),
                         c.queue.ptr);
    http_configure_free(&c);
}
