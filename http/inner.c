/*
 * inner.c - see inner.h.
 *
 * What waits is on its server's list of inner requests (server->inners)
 * from its handler's return until its reply is due: then it leaves the
 * list and on_reply runs.  A request aborted (nothing aborts one today:
 * it has no socket to lose) is answered 503, so its batch still gets an
 * answer for every entry.
 */
#include "http/inner.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/access.h"
#include "http/batch.h"
#include "http/errors.h"
#include "http/node_call.h"
#include "http/reply.h"
#include "http/request-t.h"
#include "http/request.h"
#include "http/server-t.h"
#include "shm/log.h"

/* add_header - name: value[0..n) into inner's list, its value at *at. */
static void
add_header(struct http_inner *in, char **at, const char *name,
           const char *value, size_t n)
{
    memcpy(*at, value, n);
    (*at)[n] = '\0';
    in->names[in->nh] = name;
    in->values[in->nh++] = *at;
    *at += n + 1;
}

/* http_inner_new - see inner.h. */
struct http_request *
http_inner_new(struct http_request *outer, const struct http_batch_call *c,
               http_inner_fn *on_reply, void *arg)
{
    const char *around = http_request_header(outer, HTTP_NODE_AROUND);
    size_t alen = around != NULL ? strlen(around) : 0;
    struct http_request *req = calloc(1, sizeof(*req));
    struct http_inner *in =
        calloc(1, sizeof(*in) + c->method_len + 1 + 2 +
                      (c->authz != NULL ? c->authz_len + 1 : 0) + alen + 1);
    char *at;

    if (req == NULL || in == NULL ||
        (req->uri = strndup(c->target, c->target_len)) == NULL ||
        (c->body_len > 0 &&
         http_buf_append(&req->body, c->body, c->body_len) != 0)) {
        if (req != NULL) {
            free(req->uri);
            http_buf_free(&req->body);
        }
        free(req);
        free(in);
        return NULL;
    }
    at = in->store;
    memcpy(at, c->method, c->method_len);
    at[c->method_len] = '\0';
    req->method = at;
    at += c->method_len + 1;
    add_header(in, &at, HTTP_NODE_FORWARDED, "1", 1);
    if (c->authz != NULL)
        add_header(in, &at, "Authorization", c->authz, c->authz_len);
    if (around != NULL)
        add_header(in, &at, HTTP_NODE_AROUND, around, alen);
    in->on_reply = on_reply;
    in->arg = arg;
    req->inner = in;
    req->server = outer->server;
    req->server->requests++;
    req->body_seen = c->body_len;
    req->state = HTTP_REQ_BODY;
    (void)http_access_route(req);
    req->state = HTTP_REQ_HANDLED;
    return req;
}

/* due - whether req's reply is there to take; sets one when it can have
 * none (aborted, or its handler set none and left it running). */
static int
due(struct http_request *req)
{
    if (req->aborted) {
        http_reply_error(req, 503, "ephemeral_unavailable",
                         "the request was dropped before its answer: retry");
        req->aborted = 0;
        req->held = 0;
        return 1;
    }
    if (req->has_reply && req->held &&
        (int)(req->server->round - req->hold_until) < 0)
        return 0; /* held (request.h) */
    if (req->has_reply)
        return 1;
    if (req->suspended)
        return 0;
    log_error(0, "handler for %s (inner) set no reply",
              http_route_name(req->route));
    http_reply_error(req, 500, "internal", "the request got no answer");
    return 1;
}

/* list / unlist - on and off the server's list of those that wait. */
static void
list(struct http_request *req)
{
    struct http_server *s = req->server;
    struct http_inner *in = req->inner;

    in->prev = NULL;
    in->next = s->inners;
    if (s->inners != NULL)
        s->inners->inner->prev = req;
    s->inners = req;
    in->listed = 1;
}

static void
unlist(struct http_request *req)
{
    struct http_inner *in = req->inner;

    if (!in->listed)
        return;
    if (in->prev != NULL)
        in->prev->inner->next = in->next;
    else
        req->server->inners = in->next;
    if (in->next != NULL)
        in->next->inner->prev = in->prev;
    in->prev = in->next = NULL;
    in->listed = 0;
}

/* http_inner_run - see inner.h. */
int
http_inner_run(struct http_request *req)
{
    struct http_server *s = req->server;

    if (!req->has_reply)
        s->handler(s->ctx, req);
    if (due(req))
        return 1;
    list(req);
    if (!req->suspended)
        s->resume_pending = 1; /* held: the runs follow at once */
    return 0;
}

/* http_inner_poll - see inner.h.  on_reply only marks the batch's own
 * request (a reply, a resume), so the walk's next stays listed. */
void
http_inner_poll(struct http_server *s)
{
    struct http_request *req = s->inners, *next;

    for (; req != NULL; req = next) {
        next = req->inner->next;
        if (req->suspended)
            continue;
        if (!due(req)) {
            s->resume_pending = 1;
            continue;
        }
        unlist(req);
        req->inner->on_reply(req->inner->arg, req);
    }
}

/* http_inner_reply - see inner.h. */
unsigned
http_inner_reply(struct http_request *req, unsigned *retry_after_s,
                 struct http_buf *body)
{
    struct http_header *h;

    *retry_after_s = http_status_retryable(req->status) ? 1 : 0;
    for (h = req->headers; h != NULL; h = h->next)
        if (strcasecmp(h->name, "Retry-After") == 0)
            *retry_after_s = (unsigned)strtoul(h->value, NULL, 10);
    *body = req->reply;
    http_buf_init(&req->reply);
    return req->status;
}

/* http_inner_end - see inner.h. */
void
http_inner_end(struct http_request *req, int sent_ok)
{
    unlist(req);
    if (req->done_fn != NULL)
        req->done_fn(req->done_arg, sent_ok);
    http_access_free(req);
}
