/*
 * push_route.c - see push_route.h.
 */
#include "worker/push_route.h"

#include "http/names.h"
#include "http/push_peek.h"
#include "http/request.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/worker_int.h"

/* place - where the push pk names goes: -1 when the full path must
 * answer it (a name it refuses, a token that may not push there), 1 when
 * this node serves it, 0 when another does (*in and *part name it
 * then). */
static int
place(struct worker *w, struct http_request *req,
      const struct http_push_peek *pk, struct worker_qname *in,
      struct shm_name *part)
{
    struct shm_name queue = {pk->queue, pk->queue_len};

    *part = WORKER_PUSH_DEFAULT_PART;
    if (pk->partition != NULL)
        *part = (struct shm_name){pk->partition, pk->partition_len};
    /* worker_authz's 403 and its 400 for a name too long in the tenant are
     * the full path's to give, after the body's 400: checked quietly first,
     * worker_authz then cannot refuse, so answers nothing */
    if (!http_name_valid(queue.ptr, queue.len) ||
        !http_name_valid(part->ptr, part->len) ||
        !worker_authz_quiet(w, AUTH_PUSH, queue) ||
        !worker_authz(w, req, AUTH_PUSH, "queue", queue, in))
        return -1;
    return shm_owner_here(&w->owners, in->name, *part) ? 1 : 0;
}

/* worker_push_route - see push_route.h.  The owner of a push parses it in
 * full, so what it reads first is only the head (http_push_peek_head):
 * when that names a partition here, the peek of the whole body is spared;
 * otherwise the whole body is peeked, as a forward needs. */
int
worker_push_route(struct worker *w, struct http_request *req)
{
    struct http_push_peek pk;
    struct worker_qname in;
    struct shm_name part;
    size_t len;
    const char *body;

    /* A forwarded push is the owner's to parse; a node alone owns all. */
    if (worker_serves_all(w) ||
        http_request_header(req, FORWARD_HEADER) != NULL)
        return 1;
    body = http_request_body(req, &len);
    if (http_push_peek_head(body, len, &pk) == 0 &&
        place(w, req, &pk, &in, &part) != 0)
        return 1;
    if (http_push_peek(body, len, &pk) != 0 ||
        place(w, req, &pk, &in, &part) != 0)
        return 1;
    return worker_route(w, req, in.name, part, 0);
}
