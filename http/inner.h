/*
 * inner.h - inner requests: each entry of a batch call between nodes
 * (batch.h) served as a request of its own, with no connection.
 *
 * The node that owns a partition gets, in one signed call, several
 * requests another node forwarded to it (worker/coalesce.h).  Each one
 * becomes a struct http_request like those MHD brings, routed the same
 * way, and goes through the server's handler: the same checks, the same
 * handlers, which cannot tell it from a forward that came alone.  Its
 * headers are its client's Authorization, X-Mayfly-Forwarded: 1 (it was
 * forwarded), and the batch call's X-Mayfly-Around; its signature is the
 * batch call's, checked already (http_request_is_inner).  Suspending,
 * resuming, holding and aborting it work as for any request, without
 * MHD: a request that waits (a pop held through a hand-over, a reply held
 * a round) is looked at in each run of the server until its reply is
 * there, and then on_reply runs.
 *
 * An inner request lives until http_inner_end, which runs its on_done
 * (http_request_on_done) as MHD's completion would: its handler frees
 * what it kept there.  Single-threaded, no locking.
 */
#ifndef MAYFLY_HTTP_INNER_H
#define MAYFLY_HTTP_INNER_H

#include "http/buf.h"

struct http_batch_call;
struct http_request;
struct http_server;

/* Called once when inner's reply is there (http_inner_run said 0). */
typedef void http_inner_fn(void *arg, struct http_request *inner);

/*
 * http_inner_new - the request entry c of the batch call outer (method,
 * target, Authorization and body copied), routed: when its method or
 * path is not served, or its query is bad, its reply is set already (404,
 * 405, 400).  NULL when out of memory.
 */
struct http_request *http_inner_new(struct http_request *outer,
                                    const struct http_batch_call *c,
                                    http_inner_fn *on_reply, void *arg);

/* http_inner_run - the server's handler on inner, unless its reply is
 * set.  1 when the reply is there now; 0 when inner waits: on_reply
 * runs from a later http_server_run. */
int http_inner_run(struct http_request *inner);

/* http_inner_reply - inner's reply: its status, its Retry-After (or 1
 * for a status that asks for a retry, as access.c adds; 0: none) and its
 * body, taken into *body. */
unsigned http_inner_reply(struct http_request *inner, unsigned *retry_after_s,
                          struct http_buf *body);

/* http_inner_end - inner is over: its on_done runs with sent_ok (0 when
 * its batch's answer did not go out whole, or it never got its reply),
 * and it is freed. */
void http_inner_end(struct http_request *inner, int sent_ok);

/* http_inner_poll - server.c, in each run: the inner requests resumed or
 * held since get their on_reply once their replies are due. */
void http_inner_poll(struct http_server *s);

#endif
