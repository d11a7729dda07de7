/*
 * reply.c - setting a request's response: status, body, extra headers.
 *
 * The reply is only stored here; http/server.c turns it into an MHD
 * response when MHD next calls the access handler for the request (at
 * once for a reply set by the handler, after resume for a parked one).
 * Every reply passes set_reply(), so the CORS headers of SPEC §11 are set
 * there, on every answer to a page of a listed origin, errors included.
 * Single-threaded, no locking.
 */
#include "http/reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/buf.h"
#include "http/cors.h"
#include "http/errors.h"
#include "http/names.h"
#include "http/request-t.h"
#include "http/request.h"
#include "http/server-t.h"
#include "shm/log.h"

/* take_body - move b's bytes into the reply; b is left empty. */
static void
take_body(struct http_request *req, struct http_buf *b)
{
    http_buf_free(&req->reply);
    if (b != NULL) {
        req->reply = *b;
        http_buf_init(b);
    }
}

/*
 * cors_headers - a request with an Origin (a page's) on a node with
 * cors_origins: the answer varies with the origin, and a listed origin's
 * page may read it, with the headers a client of SPEC §2 looks at.  An
 * answer to a request without Origin is left as it is.
 */
static void
cors_headers(struct http_request *req)
{
    const struct http_cors *c = req->server->opts.cors;
    const char *origin;

    if (c == NULL || c->n == 0 ||
        (origin = http_request_header(req, "Origin")) == NULL)
        return;
    http_reply_header(req, "Vary", "Origin");
    if (!http_cors_allows(c, origin))
        return;
    http_reply_header(req, "Access-Control-Allow-Origin", origin);
    http_reply_header(req, "Access-Control-Expose-Headers",
                      HTTP_CORS_EXPOSE_HEADERS);
}

/*
 * set_reply - the common part of every reply.  An oom body becomes a
 * 500 internal with a fixed sentence, which needs no allocation to build
 * beyond a small buffer.
 */
static void
set_reply(struct http_request *req, unsigned status, const char *ctype,
          struct http_buf *body)
{
    take_body(req, body);
    req->status = status;
    req->has_reply = 1;
    if (req->reply.oom) {
        log_error(0, "reply to %s: out of memory building the body",
                  http_route_name(req->route));
        http_buf_free(&req->reply);
        req->status = 500;
        http_buf_append_str(&req->reply, "{\"error\": \"out of memory\", "
                                         "\"code\": \"internal\"}");
        ctype = "application/json";
    }
    req->ctype = ctype;
    cors_headers(req);
}

/* http_reply - JSON answer. */
void
http_reply(struct http_request *req, unsigned status, struct http_buf *body)
{
    set_reply(req, status, "application/json", body);
}

/* http_reply_text - another content type. */
void
http_reply_text(struct http_request *req, unsigned status,
                const char *content_type, struct http_buf *body)
{
    set_reply(req, status, content_type, body);
}

/* http_reply_header - replace a header of the same name, else add one;
 * name and value are copied into the node's own allocation. */
void
http_reply_header(struct http_request *req, const char *name, const char *value)
{
    size_t nl = strlen(name) + 1, vl = strlen(value) + 1;
    struct http_header **pp, *h;

    for (pp = &req->headers; *pp != NULL; pp = &(*pp)->next) {
        if (strcasecmp((*pp)->name, name) == 0) {
            h = *pp;
            *pp = h->next;
            free(h);
            break;
        }
    }
    h = malloc(sizeof(*h) + nl + vl);
    if (h == NULL) {
        log_error(0, "reply header %s: out of memory", name);
        return;
    }
    h->name = memcpy((char *)(h + 1), name, nl);
    h->value = memcpy((char *)(h + 1) + nl, value, vl);
    h->next = req->headers;
    req->headers = h;
}

/* http_reply_error - {"error": sentence, "code": code}. */
void
http_reply_error(struct http_request *req, unsigned status, const char *code,
                 const char *fmt, ...)
{
    struct http_error err;
    va_list ap;

    va_start(ap, fmt);
    http_error_vset(&err, status, code, fmt, ap);
    va_end(ap);
    http_reply_http_error(req, &err);
}

/* http_reply_draining - see reply.h. */
void
http_reply_draining(struct http_request *req)
{
    http_reply_error(req, 503, "draining", "this node is stopping");
    http_reply_header(req, "Connection", "close");
}

/* http_reply_preflight - see reply.h.  Allow-Methods is what the path
 * takes: a browser refuses the call itself for any other. */
int
http_reply_preflight(struct http_request *req)
{
    const char *allow, *origin;
    int cut;

    if (strcmp(http_request_method(req), "OPTIONS") != 0)
        return 0;
    allow = http_route_allow(req->route);
    origin = http_request_header(req, "Origin");
    if (origin == NULL ||
        http_request_header(req, "Access-Control-Request-Method") == NULL) {
        http_reply_header(req, "Allow", allow); /* not a preflight */
        http_reply_error(req, 405, "method_not_allowed",
                         "this path takes %s only", allow);
        return 1;
    }
    if (!http_cors_allows(req->server->opts.cors, origin)) {
        cut = strlen(origin) > 200 ? 200 : (int)strlen(origin);
        http_reply_error(req, 403, "forbidden",
                         "origin '%.*s' is not in this node's cors_origins: "
                         "its pages may not call it",
                         cut, origin);
        return 1;
    }
    http_reply(req, 204, NULL);
    http_reply_header(req, "Access-Control-Allow-Methods", allow);
    http_reply_header(req, "Access-Control-Allow-Headers",
                      HTTP_CORS_ALLOW_HEADERS);
    http_reply_header(req, "Access-Control-Max-Age", HTTP_CORS_MAX_AGE);
    return 1;
}

/* http_reply_http_error - the one place error bodies are built. */
void
http_reply_http_error(struct http_request *req, const struct http_error *err)
{
    struct http_buf b;

    http_buf_init(&b);
    http_buf_append_str(&b, "{\"error\": ");
    http_buf_append_json_str(&b, err->msg, strlen(err->msg));
    http_buf_append_str(&b, ", \"code\": ");
    http_buf_append_json_str(&b, err->code, strlen(err->code));
    http_buf_append_str(&b, "}");
    http_reply(req, err->status, &b);
}

/* http_reply_errno - through the table of errors.c. */
void
http_reply_errno(struct http_request *req, int neg_errno, const char *what)
{
    struct http_error err;

    http_error_from_errno(&err, neg_errno, what);
    if (err.status == 500)
        log_error(-neg_errno, "%s: answering 500", what ? what : "request");
    http_reply_http_error(req, &err);
}

/* http_reply_name_ok - see reply.h. */
int
http_reply_name_ok(struct http_request *req, const char *field, const char *p,
                   size_t len)
{
    if (http_name_valid(p, len))
        return 1;
    http_reply_error(req, 400, "invalid_name", "field '%s' must be %s", field,
                     HTTP_NAME_RULE);
    return 0;
}

/* http_reply_qname_ok - see reply.h. */
int
http_reply_qname_ok(struct http_request *req, const char *field, const char *p,
                    size_t len)
{
    if (http_qname_valid(p, len))
        return 1;
    return http_reply_name_ok(req, field, p, len);
}
