/*
 * request-t.h - the layout of struct http_request and its reply, for
 * http/server.c, request.c and reply.c only (handlers see request.h).
 *
 * A request is created by the URI-log callback of MHD (the first thing MHD
 * tells us about a request, with the raw URI), lives in MHD's *req_cls, and
 * is freed in the completion callback; an inner request (inner.h) is made
 * and freed by inner.c.  Single-threaded, no locking.
 */
#ifndef MAYFLY_HTTP_REQUEST_T_H
#define MAYFLY_HTTP_REQUEST_T_H

#include <stddef.h>

#include "http/buf.h"
#include "http/query.h"
#include "http/route.h"

struct MHD_Connection;
struct MHD_Response;
struct http_server;
struct http_request;

/* The headers an inner request carries (inner.h): Authorization,
 * X-Mayfly-Forwarded and X-Mayfly-Around. */
#define HTTP_INNER_HEADERS 3

/* What makes a request inner (inner.h): one entry of a batch call, with
 * no MHD connection.  Its headers are these, and MHD's calls are not
 * made (request.c); its reply goes to on_reply instead of a socket. */
struct http_inner {
    const char *names[HTTP_INNER_HEADERS];
    const char *values[HTTP_INNER_HEADERS]; /* in store */
    size_t nh;
    void (*on_reply)(void *arg, struct http_request *req);
    void *arg;
    struct http_request *prev, *next; /* server->inners while listed */
    unsigned listed : 1; /* waits for its reply (suspended, or held) */
    char store[];        /* the method and the header values */
};

/* One extra response header; name and value live right after it. */
struct http_header {
    struct http_header *next;
    const char *name;
    const char *value;
};

enum http_req_state {
    HTTP_REQ_NEW,     /* URI seen, access handler not called yet */
    HTTP_REQ_BODY,    /* reading the body */
    HTTP_REQ_HANDLED, /* the handler ran; waiting for a reply or resume */
    HTTP_REQ_QUEUED,  /* the response is queued in MHD */
};

struct http_request {
    struct http_server *server;
    struct MHD_Connection *conn;
    enum http_req_state state;
    char *uri;          /* raw request URI (path and query), owned */
    const char *uri_at; /* where MHD held it, beside the method and version
                           (edge_head.c); valid until the first call only */
    const char *method; /* MHD's copy, valid for the request */
    enum http_route route;
    char *param; /* decoded {q}, owned; NULL when none */
    size_t param_len;
    struct http_query args;
    struct http_buf body;
    size_t body_seen; /* body bytes received, kept or not */
    unsigned suspended : 1;
    unsigned aborted : 1;
    unsigned discard : 1; /* drop the body: a reply is set before it was
                             read, or the server discards bodies */
    /* the reply */
    unsigned has_reply : 1;
    unsigned held : 1;   /* queue the reply only from round hold_until */
    unsigned hold_until; /* the server's round (server->round) */
    unsigned status;
    const char *ctype; /* static: the reply's Content-Type */
    struct http_buf reply;
    size_t queued_len;           /* the reply's bytes MHD holds until it ends
                          (server->unsent) */
    struct http_header *headers; /* owned list, in insertion order reversed */
    struct MHD_Response *resp;   /* a body made as it goes (stream_body.h) */
    /* completion */
    void (*done_fn)(void *arg, int sent_ok);
    void *done_arg;
    struct http_inner *inner; /* owned; NULL: MHD's request */
    /* the server's list of suspended requests */
    struct http_request *prev;
    struct http_request *next;
};

/* http_request_unlist - drop req from its server's suspended list (the
 * completion callback, for a request MHD ends while it is listed). */
void http_request_unlist(struct http_request *req);

#endif
