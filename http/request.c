/*
 * request.c - what a handler can read from a request, and its life cycle
 * calls (suspend, resume, abort, on_done).
 *
 * Suspended requests sit on their server's list so http_server_stop() can
 * resume them before MHD_stop_daemon() (MHD panics on suspended ones).
 * An inner request (inner.h) has no connection: its headers are its own
 * short list, and suspending or resuming it only marks it, for inner.c
 * to look at in the server's next run.  Single-threaded, no locking.
 */
#include "http/request.h"

#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "http/request-t.h"
#include "http/server-t.h"

/* http_request_route - never HTTP_ROUTE_NONE for a handler. */
enum http_route
http_request_route(const struct http_request *req)
{
    return req->route;
}

/* http_request_param - the decoded path parameter. */
const char *
http_request_param(const struct http_request *req, size_t *len)
{
    if (len != NULL)
        *len = req->param_len;
    return req->param;
}

/* http_request_method - MHD's copy of the method. */
const char *
http_request_method(const struct http_request *req)
{
    return req->method;
}

/* http_request_uri - the raw URI, as the client sent it. */
const char *
http_request_uri(const struct http_request *req)
{
    return req->uri;
}

/* http_request_args - the decoded query. */
const struct http_query *
http_request_args(const struct http_request *req)
{
    return &req->args;
}

/* http_request_header - MHD keeps request headers for the request's life. */
const char *
http_request_header(const struct http_request *req, const char *name)
{
    if (req->inner != NULL) {
        for (size_t i = 0; i < req->inner->nh; i++)
            if (strcasecmp(req->inner->names[i], name) == 0)
                return req->inner->values[i];
        return NULL;
    }
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* The walk of http_request_headers. */
struct header_walk {
    const char *prefix;
    size_t plen;
    const char **names, **values;
    size_t max, n;
};

/* header_each - MHD's iterator: keep one header of the prefix. */
static enum MHD_Result
header_each(void *cls, enum MHD_ValueKind kind, const char *key,
            const char *value)
{
    struct header_walk *w = cls;

    (void)kind;
    if (key == NULL || strncasecmp(key, w->prefix, w->plen) != 0)
        return MHD_YES;
    if (w->n < w->max) {
        w->names[w->n] = key;
        w->values[w->n] = value != NULL ? value : "";
    }
    w->n++;
    return MHD_YES;
}

/* http_request_headers - every header MHD kept, duplicates included. */
size_t
http_request_headers(const struct http_request *req, const char *prefix,
                     const char **names, const char **values, size_t max)
{
    struct header_walk w = {prefix, strlen(prefix), names, values, max, 0};

    if (req->inner != NULL) {
        for (size_t i = 0; i < req->inner->nh; i++)
            header_each(&w, MHD_HEADER_KIND, req->inner->names[i],
                        req->inner->values[i]);
        return w.n;
    }
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, header_each, &w);
    return w.n;
}

/* http_request_body - "" for an empty body. */
const char *
http_request_body(const struct http_request *req, size_t *len)
{
    if (len != NULL)
        *len = req->body.len;
    return req->body.data != NULL ? req->body.data : "";
}

/* http_request_fd - the client socket, for EPOLLRDHUP. */
int
http_request_fd(const struct http_request *req)
{
    const union MHD_ConnectionInfo *ci;

    if (req->inner != NULL)
        return -1;
    ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci != NULL ? ci->connect_fd : -1;
}

/* http_request_suspend - park the connection; listed for server stop.  A
 * body made as it goes suspends from its reader too (stream_body.c). */
void
http_request_suspend(struct http_request *req)
{
    struct http_server *s = req->server;

    if (req->suspended || req->state < HTTP_REQ_HANDLED)
        return;
    if (req->inner != NULL) {
        req->suspended = 1; /* inner.c lists it once its handler returns */
        return;
    }
    MHD_suspend_connection(req->conn);
    req->suspended = 1;
    req->prev = NULL;
    req->next = s->suspended;
    if (s->suspended != NULL)
        s->suspended->prev = req;
    s->suspended = req;
}

/* http_request_unlist - off the suspended list. */
void
http_request_unlist(struct http_request *req)
{
    struct http_server *s = req->server;

    if (!req->suspended)
        return;
    if (req->prev != NULL)
        req->prev->next = req->next;
    else
        s->suspended = req->next;
    if (req->next != NULL)
        req->next->prev = req->prev;
    req->prev = req->next = NULL;
    req->suspended = 0;
}

/* http_request_resume - unlist and let MHD call the access handler again. */
void
http_request_resume(struct http_request *req)
{
    if (!req->suspended)
        return;
    if (req->inner != NULL) {
        req->suspended = 0; /* inner.c looks at it in the next run */
        req->server->resume_pending = 1;
        return;
    }
    http_request_unlist(req);
    req->server->resume_pending = 1;
    MHD_resume_connection(req->conn);
}

/* http_request_hold - see request.h.  Inside run N (or after it) the
 * round is N: run N + 1 still holds the reply, run N + 2 queues it.  MHD
 * keeps a request that has no response yet in its ready list and asks
 * the handler again each round (access.c: finish), and says so by a
 * timeout of 0, so the runs follow at once. */
void
http_request_hold(struct http_request *req)
{
    req->held = 1;
    req->hold_until = req->server->round + 2;
}

/* http_request_replied - see request.h. */
int
http_request_replied(const struct http_request *req)
{
    return req->has_reply;
}

/* http_request_abort - the access handler will return MHD_NO; an inner
 * request is answered as dropped (inner.c). */
void
http_request_abort(struct http_request *req)
{
    req->aborted = 1;
    http_request_resume(req);
}

/* http_request_is_inner - see request.h. */
int
http_request_is_inner(const struct http_request *req)
{
    return req->inner != NULL;
}

/* http_request_on_done - remember the completion callback. */
void
http_request_on_done(struct http_request *req,
                     void (*fn)(void *arg, int sent_ok), void *arg)
{
    req->done_fn = fn;
    req->done_arg = arg;
}
