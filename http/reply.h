/*
 * reply.h - setting a request's response.
 *
 * A reply may be set while the handler runs (sent at once) or later for a
 * suspended request (sent after http_request_resume()).  Setting a second
 * reply replaces the first.  Every 429 and 503 gets "Retry-After: 1" unless
 * the caller set Retry-After itself.  Single-threaded, no locking.
 */
#ifndef MAYFLY_HTTP_REPLY_H
#define MAYFLY_HTTP_REPLY_H

#include <stddef.h>

struct http_request;
struct http_buf;
struct http_error;

/*
 * http_reply - answer status with body as application/json.  Takes the
 * bytes of body (NULL: empty body); *body is left empty and reusable.  A
 * body whose oom flag is set answers 500 internal instead.
 */
void http_reply(struct http_request *req, unsigned status,
                struct http_buf *body);

/* http_reply_text - like http_reply with another Content-Type (/metrics);
 * content_type must outlive the request (a string literal). */
void http_reply_text(struct http_request *req, unsigned status,
                     const char *content_type, struct http_buf *body);

/* http_reply_header - add a response header (copied), set before or after
 * the reply; "Retry-After" replaces the default one. */
void http_reply_header(struct http_request *req, const char *name,
                       const char *value);

/* http_reply_name_ok - 1 if p[0..len) is a valid name (http/names.h);
 * else answers 400 invalid_name naming field and returns 0. */
int http_reply_name_ok(struct http_request *req, const char *field,
                       const char *p, size_t len);

/* http_reply_qname_ok - the same for a name that may be a tenant's
 * internal name (http_qname_valid): what peers and workers send the
 * cluster port. */
int http_reply_qname_ok(struct http_request *req, const char *field,
                        const char *p, size_t len);

/*
 * http_reply_error - answer {"error": sentence, "code": code} with status;
 * the sentence is printf-formatted and JSON-escaped.
 */
void http_reply_error(struct http_request *req, unsigned status,
                      const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* http_reply_draining - 503 draining (with Retry-After), and the
 * connection closes after it: the node is stopping, and a client that
 * kept the connection would send its next request into the close. */
void http_reply_draining(struct http_request *req);

/*
 * http_reply_preflight - if req is an OPTIONS (route.h lets it through on
 * every client path), answer it and return 1: a browser's CORS preflight
 * (Origin and Access-Control-Request-Method) from a listed origin is 204
 * with Access-Control-Allow-Methods, -Allow-Headers and -Max-Age; from
 * another, 403 forbidden naming the origin (no Allow-Origin); any other
 * OPTIONS 405 method_not_allowed, as before there was CORS.  0 for other
 * methods (req untouched).  Needs no token: a browser sends none.
 */
int http_reply_preflight(struct http_request *req);

/* http_reply_http_error - answer what a parser put in err. */
void http_reply_http_error(struct http_request *req,
                           const struct http_error *err);

/*
 * http_reply_errno - answer a -errno result through the one table of
 * http/errors.h; what ("push to queue 'q'") starts the sentence, may be NULL.
 */
void http_reply_errno(struct http_request *req, int neg_errno,
                      const char *what);

#endif
