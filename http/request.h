/*
 * request.h - one HTTP request as a handler sees it, and its life cycle.
 *
 * http/access.c creates a request per HTTP request, reads the whole body,
 * and calls the handler exactly once.  Before returning, the handler either
 * sets a reply (http/reply.h) or suspends the request.  A suspended request
 * (a parked pop, a forward) is answered later from the same process: set the
 * reply, then http_request_resume(); the reply goes out on the next
 * http_server_run().  The request is freed after the response is sent or the
 * connection dies; the on_done callback (if any) runs just before, and the
 * handler must forget the pointer then.
 *
 * Single-threaded: all of this runs in the worker's loop.  Strings returned
 * stay valid until the request is freed.
 */
#ifndef MAYFLY_HTTP_REQUEST_H
#define MAYFLY_HTTP_REQUEST_H

#include <stddef.h>

#include "http/route.h"

struct http_request;
struct http_query;

/* http_request_route - the matched route (never HTTP_ROUTE_NONE). */
enum http_route http_request_route(const struct http_request *req);

/*
 * http_request_param - the path parameter ({q}), percent-decoded and
 * NUL-terminated, with its length in *len (it may hold NULs: validate with
 * http_name_valid()).  NULL for routes without one.
 */
const char *http_request_param(const struct http_request *req, size_t *len);

/* http_request_method - "GET", "POST", ... */
const char *http_request_method(const struct http_request *req);

/* http_request_uri - the request URI as it came (path and query, still
 * percent-encoded): what a forward sends on unchanged. */
const char *http_request_uri(const struct http_request *req);

/* http_request_args - the decoded query string (http/query.h look-ups). */
const struct http_query *http_request_args(const struct http_request *req);

/* http_request_header - a request header by name (case-insensitive), or
 * NULL. */
const char *http_request_header(const struct http_request *req,
                                const char *name);

/*
 * http_request_headers - the request's headers whose names start with
 * prefix (ASCII, case-insensitive), in the order they came, each one as
 * often as it came: the first max into names[] and values[].  Returns how
 * many there are, which may be more than max.
 */
size_t http_request_headers(const struct http_request *req, const char *prefix,
                            const char **names, const char **values,
                            size_t max);

/* http_request_body - the whole body (NUL-terminated; *len without it). */
const char *http_request_body(const struct http_request *req, size_t *len);

/* http_request_fd - the client socket, to watch EPOLLRDHUP while parked;
 * -1 if MHD cannot tell.  Never read, write or close it. */
int http_request_fd(const struct http_request *req);

/*
 * http_request_suspend - park the request (MHD_suspend_connection): nothing
 * is sent and the connection does not time out until it is resumed.  Call
 * at most once, from the handler, before returning without a reply.
 */
void http_request_suspend(struct http_request *req);

/*
 * http_request_resume - resume a suspended request after setting its reply;
 * the reply is queued on the next http_server_run().  A request resumed
 * without a reply answers 500 internal.  No-op if not suspended.
 */
void http_request_resume(struct http_request *req);

/*
 * http_request_hold - send req's reply (set already) only after the next
 * http_server_run() has ended: a handler that woke a suspended request
 * here (a push a parked pop waited for) lets that request's reply go
 * first.  MHD 0.9.75 sends a reply in the round that read its request and
 * takes a resumed request up only in its next round, so without the hold
 * the waker's answer always goes first.  Costs the held reply one or two
 * more rounds (an epoll_wait(0) each) after the one that sends the other.
 */
void http_request_hold(struct http_request *req);

/* http_request_replied - whether req has its reply set (a handler run
 * again on a suspended request, forward.h, tells by it whether to resume
 * it or whether the handler kept it waiting). */
int http_request_replied(const struct http_request *req);

/*
 * http_request_abort - close the connection without a reply (the client is
 * gone, e.g. EPOLLRDHUP on a parked request).  Resumes it if suspended; the
 * connection closes on the next http_server_run() and on_done reports
 * sent_ok 0.  Any reply already set is discarded.
 */
void http_request_abort(struct http_request *req);

/* http_request_is_inner - whether req is an entry of a batch call between
 * nodes (inner.h): no connection of its own (http_request_fd is -1), its
 * signature checked on the call that carried it. */
int http_request_is_inner(const struct http_request *req);

/*
 * http_request_on_done - call fn(arg, sent_ok) once when the request ends:
 * sent_ok is 1 only if the whole response was sent (the worker releases
 * leases of a reply that did not go out).  Replaces an earlier callback.
 * After fn returns the request is freed.
 */
void http_request_on_done(struct http_request *req,
                          void (*fn)(void *arg, int sent_ok), void *arg);

#endif
