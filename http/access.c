/*
 * access.c - what MHD calls back as connections and requests come and go:
 * the connection notice (a connection counts fresh until its first request
 * line; its end goes to the on_close hook), the URI log (the request is
 * created with its raw URI), the access handler (routing, the body, the
 * handler call, queueing the reply) and the completion (on_done, free).
 *
 * A request goes NEW -> BODY -> HANDLED -> QUEUED (request-t.h).  The
 * access handler never queues a response in its first call for a request:
 * MHD 0.9.75 then closes the connection (edge.h, D1).  The one exception is
 * a Content-Length over max_body_bytes: the body will not be read, so the
 * connection must close anyway, and answering at once spares the client
 * the "100 Continue" that would invite the body.  MHD 0.9.75 refuses a
 * response while a body is still arriving, so a body that outgrows the
 * limit without announcing it (chunked) is read on and dropped, and
 * answered 413 once it ends: up to as much again as the limit, past which
 * the connection closes rather than read an unbounded body (D2).  What
 * else MHD gets wrong is met by the edge (edge.h), which this file calls.
 *
 * Single-threaded (inside http_server_run()), no locking.  Errors become
 * replies (4xx/5xx) or a closed connection; they are logged via shm/log.h.
 */
#include "http/access.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "http/edge_answer.h"
#include "http/edge_conn.h"
#include "http/edge_head.h"
#include "http/edge_wait.h"
#include "http/errors.h"
#include "http/reply.h"
#include "http/request-t.h"
#include "http/request.h"
#include "http/server-t.h"
#include "http/tls.h"
#include "shm/log.h"

/* Bytes reserved up front from Content-Length; larger bodies grow. */
#define HTTP_BODY_PREALLOC (1u << 20)

/* conn_ctx_of - conn's context, or NULL (out of memory at its start). */
static struct http_conn *
conn_ctx_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci != NULL ? ci->socket_context : NULL;
}

/* http_access_conn_notify - MHD's word on a connection's start or end.  A
 * new one is counted fresh until its first request line (a drain must not
 * close it with that request unread), owes its head (edge_wait.h), is over
 * when it opened beyond max_connections and no connection made room for
 * it (MHD's own limit is higher, edge_conn.h), meets the edge (bytes that
 * cannot begin a request, or plain HTTP on a TLS port, refused) and goes
 * to the on_open hook; an ending one is reported to the on_close hook while its
 * socket is still open. */
void
http_access_conn_notify(void *cls, struct MHD_Connection *conn,
                        void **socket_ctx,
                        enum MHD_ConnectionNotificationCode code)
{
    struct http_server *s = cls;
    const union MHD_ConnectionInfo *ci;
    struct http_conn *c = *socket_ctx;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        s->open++;
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci != NULL && (c = calloc(1, sizeof(*c))) != NULL) {
            c->server = s;
            c->fd = ci->connect_fd;
            c->fresh = 1;
            c->tls = s->opts.tls;
            s->fresh++;
            c->over = http_edge_wait_opened(c);
            if (!http_edge_conn_started(conn, c) && s->on_open != NULL)
                s->on_open(s->on_open_ctx, c->fd, c);
        }
        *socket_ctx = c;
        return;
    }
    s->open--;
    if (c != NULL && c->fresh)
        s->fresh--;
    if (c != NULL) {
        http_edge_wait_closed(c);
        http_edge_conn_closed(c);
    }
    free(c);
    *socket_ctx = NULL;
    s->closed = 1;
    if (s->on_close == NULL)
        return;
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL)
        s->on_close(s->on_close_ctx, ci->connect_fd);
}

/* conn_began - conn's request line is in: if it is the connection's first,
 * the connection is no longer counted fresh; the rest of its head has its
 * time (edge_wait.h). */
static void
conn_began(struct http_server *s, struct MHD_Connection *conn)
{
    struct http_conn *c = conn_ctx_of(conn);

    if (c == NULL)
        return;
    if (c->fresh) {
        c->fresh = 0;
        s->fresh--;
    }
    http_edge_wait_line(c);
}

/* http_access_cert - see access.h.  MHD 0.9.75 makes the connection the
 * TLS session's pointer (daemon.c, new_connection_prepare_; edge.h, D18),
 * and the
 * connection's socket context says which server, and so which
 * credentials, it belongs to. */
int
http_access_cert(gnutls_session_t session, const gnutls_datum_t *req_ca_dn,
                 int nreqs, const gnutls_pk_algorithm_t *pk_algos,
                 int pk_algos_length, gnutls_pcert_st **pcert,
                 unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
    struct MHD_Connection *conn = gnutls_session_get_ptr(session);
    struct http_conn *c = conn != NULL ? conn_ctx_of(conn) : NULL;
    void *certs, *key;

    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    if (c == NULL || c->tls == NULL)
        return -1; /* out of memory at its start: no handshake */
    http_tls_current(c->tls, &certs, pcert_length, &key);
    *pcert = certs;
    *privkey = key;
    return 0;
}

/* peer_refused - on a port that wants client certificates (its
 * credentials carry a CA), whether the connection's client showed none
 * that chains to it: then the request is answered 401, and the
 * connection closes.  Checked once per connection. */
static int
peer_refused(struct http_request *req)
{
    struct http_conn *c = conn_ctx_of(req->conn);
    const struct http_tls *t = req->server->opts.tls;
    const union MHD_ConnectionInfo *ci;
    char why[160];

    if (t == NULL || http_tls_ca_pem(t) == NULL)
        return 0;
    if (c != NULL && c->peer == 0) {
        ci = MHD_get_connection_info(req->conn,
                                     MHD_CONNECTION_INFO_GNUTLS_SESSION);
        c->peer = ci != NULL && http_tls_peer_ok(c->tls, ci->tls_session, why,
                                                 sizeof(why))
                      ? 1
                      : 2;
        if (ci == NULL)
            snprintf(why, sizeof(why), "no TLS session");
        if (c->peer == 2)
            log_info(0, "refused a cluster call: %s", why);
    }
    if (c != NULL && c->peer == 1)
        return 0;
    http_reply_error(req, 401, "unauthorized",
                     "this port wants a client certificate signed by the "
                     "cluster's CA");
    http_reply_header(req, "Connection", "close");
    return 1;
}

/*
 * http_access_uri - MHD's first word on a request: allocate it, keep the raw
 * URI (MHD decodes the path it hands the access handler, losing "%2F").
 * The query is ours to parse (query.c), so MHD's own parse is cut short
 * once it is copied (http_edge_head_uri).
 */
void *
http_access_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct http_request *req = calloc(1, sizeof(*req));

    conn_began(cls, conn);
    if (req == NULL)
        return NULL;
    req->server = cls;
    req->conn = conn;
    req->uri_at = uri;
    req->uri = strdup(uri);
    if (req->uri == NULL) {
        free(req);
        return NULL;
    }
    http_edge_head_uri(uri);
    req->server->requests++;
    return req;
}

/* http_access_free - see access.h: everything a request owns. */
void
http_access_free(struct http_request *req)
{
    struct http_header *h, *next;

    for (h = req->headers; h != NULL; h = next) {
        next = h->next;
        free(h);
    }
    if (req->resp != NULL)
        MHD_destroy_response(req->resp);
    http_buf_free(&req->reply);
    http_buf_free(&req->body);
    http_query_free(&req->args);
    free(req->param);
    free(req->uri);
    free(req->inner);
    req->server->requests--;
    free(req);
}

/* http_access_completed - the request is over: tell the handler whether the
 * response went out whole, then free it. */
void
http_access_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct http_request *req = *req_cls;
    struct http_conn *c = conn_ctx_of(conn);

    (void)cls;
    if (c != NULL)
        http_edge_wait_idle(c); /* owes its next head, if it stays open */
    if (req == NULL)
        return;
    *req_cls = NULL;
    req->server->unsent -= req->queued_len;
    http_request_unlist(req);
    if (req->done_fn != NULL)
        req->done_fn(req->done_arg, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    http_access_free(req);
}

/* queue_reply - hand the stored reply to MHD; its bytes go without a
 * copy (MHD frees them).  MHD_NO closes the connection. */
static enum MHD_Result
queue_reply(struct http_request *req)
{
    struct MHD_Response *resp;
    struct http_header *h;
    enum MHD_Result ret;
    int retry_after = 0;

    if (req->resp != NULL) /* its body made as it goes (stream_body.h) */
        resp = req->resp, req->resp = NULL;
    else if (req->reply.len == 0)
        resp = MHD_create_response_from_buffer(0, (void *)"",
                                               MHD_RESPMEM_PERSISTENT);
    else
        resp = MHD_create_response_from_buffer(req->reply.len, req->reply.data,
                                               MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        log_error(ENOMEM, "MHD_create_response_from_buffer(%zu) failed",
                  req->reply.len);
        return MHD_NO;
    }
    req->queued_len = req->reply.len;
    req->server->unsent += req->queued_len;
    if (req->reply.len != 0)
        http_buf_init(&req->reply);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, req->ctype);
    for (h = req->headers; h != NULL; h = h->next) {
        MHD_add_response_header(resp, h->name, h->value);
        retry_after |= strcasecmp(h->name, "Retry-After") == 0;
    }
    if (!retry_after && http_status_retryable(req->status))
        MHD_add_response_header(resp, "Retry-After", "1");
    ret = http_edge_answer_queue(req->conn, req->status, resp);
    MHD_destroy_response(resp);
    req->state = HTTP_REQ_QUEUED;
    return ret;
}

/* content_length - the declared body size, or -1 when absent or odd
 * (MHD itself rejects malformed values). */
static long long
content_length(struct MHD_Connection *conn)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end;
    long long n;

    if (v == NULL)
        return -1;
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno != 0 || end == v || n < 0)
        return -1;
    return n;
}

/* too_large - the 413 of SPEC §2. */
static void
too_large(struct http_request *req)
{
    http_buf_free(&req->body);
    req->discard = 1;
    http_reply_error(req, 413, "payload_too_large",
                     "the request body is larger than max_body_bytes (%zu)",
                     req->server->opts.max_body_bytes);
}

/* over_limit - a connection opened past max_connections gets 503 with
 * Retry-After (queue_reply adds it) and is closed; /health is spared, so
 * that a full node can still be asked how it is. */
static int
over_limit(struct http_request *req)
{
    struct http_conn *c;
    struct http_server *s = req->server;

    if (req->conn == NULL)
        return 0; /* an inner request: its batch call was let in */
    c = conn_ctx_of(req->conn);
    if (c == NULL || !c->over)
        return 0;
    http_reply_error(req, 503, "ephemeral_unavailable",
                     "this worker is at max_connections (%u): retry later",
                     s->opts.max_connections);
    http_reply_header(req, "Connection", "close");
    if (s->opts.on_refused != NULL)
        s->opts.on_refused(s->ctx);
    return 1;
}

/* unsent_full - a pop gets 503 with Retry-After while the server holds
 * max_unsent_bytes of replies its clients have not read whole: each pop
 * answered to a client that never reads would hold its messages' copy in
 * the worker for as long as the connection lasts. */
static int
unsent_full(struct http_request *req)
{
    struct http_server *s = req->server;

    if (s->opts.max_unsent_bytes == 0 || s->unsent < s->opts.max_unsent_bytes)
        return 0;
    http_reply_error(req, 503, "ephemeral_unavailable",
                     "this worker holds %zu bytes of answers its clients "
                     "have not read (at most %zu): retry later",
                     s->unsent, s->opts.max_unsent_bytes);
    return 1;
}

/* http_access_route - see access.h: route, decode the parameter and the
 * query; any failure becomes the reply (and the body is then read and
 * dropped).  Returns 1 when the reply must go at once (a refusal past
 * max_connections). */
int
http_access_route(struct http_request *req)
{
    const char *q = strchr(req->uri, '?');
    size_t plen = q ? (size_t)(q - req->uri) : strlen(req->uri);
    struct http_route_match m;
    struct http_error err;
    long n;
    int rc;

    http_route_match(req->method, req->uri, plen, req->server->opts.cluster,
                     &m);
    if (m.route != HTTP_ROUTE_HEALTH && over_limit(req)) {
        req->discard = 1;
        return 1;
    }
    if (m.route == HTTP_ROUTE_NONE) {
        http_reply_error(req, 404, "not_found", "no such route");
        goto discard;
    }
    if (!m.method_ok) {
        http_reply_header(req, "Allow", m.allow);
        http_reply_error(req, 405, "method_not_allowed",
                         "this path takes %s only", m.allow);
        goto discard;
    }
    req->route = m.route;
    if (m.route == HTTP_ROUTE_POP && unsent_full(req))
        goto discard;
    if (m.param != NULL) {
        req->param = malloc(m.param_len + 1);
        if (req->param == NULL)
            goto oom;
        n = http_pct_decode(req->param, m.param, m.param_len, 0);
        if (n < 0) {
            http_reply_error(req, 400, "ephemeral_bad_request",
                             "the path has a bad percent-escape");
            goto discard;
        }
        req->param_len = (size_t)n;
    }
    rc = q ? http_query_parse(&req->args, q + 1, strlen(q + 1)) : 0;
    if (rc == -ENOMEM)
        goto oom;
    if (rc != 0) {
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "the query string has a bad percent-escape");
        goto discard;
    }
    if (http_query_check(&req->args, &err) != 0) {
        http_reply_http_error(req, &err);
        goto discard;
    }
    return 0;
oom:
    http_reply_error(req, 500, "internal", "out of memory");
discard:
    req->discard = 1;
    return 0;
}

/*
 * first_call - the request line and headers are in: check the head, route
 * it and size the body.  Returns MHD_YES, or the result of queueing an
 * answer that closes the connection (a bad head, a refusal past
 * max_connections, an early 413).
 */
static enum MHD_Result
first_call(struct http_request *req, struct MHD_Connection *conn,
           const char *method, const char *version)
{
    size_t max = req->server->opts.max_body_bytes;
    struct http_conn *c = conn_ctx_of(conn);
    long long cl;

    if (c != NULL)
        http_edge_wait_done(c); /* its head is in */
    req->conn = conn;
    req->method = method;
    req->state = HTTP_REQ_BODY;
    if (http_edge_head_check(req, method, version) != 0)
        return queue_reply(req);
    if (http_access_route(req))
        return queue_reply(req); /* refused: closes, body unread */
    if (req->server->opts.discard_bodies)
        req->discard = 1;
    cl = content_length(conn);
    if (cl > 0 && (unsigned long long)cl > max) {
        too_large(req);
        return queue_reply(req);
    }
    if (cl > 0 && !req->discard &&
        http_buf_reserve(&req->body, (size_t)cl < HTTP_BODY_PREALLOC
                                         ? (size_t)cl
                                         : HTTP_BODY_PREALLOC) != 0) {
        http_reply_error(req, 500, "internal", "out of memory");
        req->discard = 1;
    }
    return MHD_YES;
}

/* body_chunk - keep n more body bytes, or drop them once a reply is set;
 * past max_body_bytes the reply is 413, sent when the body ends (MHD
 * cannot answer before), and past twice the limit the connection closes. */
static enum MHD_Result
body_chunk(struct http_request *req, const char *data, size_t n)
{
    size_t max = req->server->opts.max_body_bytes;

    req->body_seen += n;
    if (req->body_seen > max && req->body_seen - n <= max && !req->has_reply)
        too_large(req);
    else if (req->body_seen > max)
        req->discard = 1; /* the reply already set (404, 405, ...) stands */
    if (req->body_seen > max && req->body_seen - max > max) {
        log_info(0, "request body over twice max_body_bytes (%zu): closing",
                 max);
        return MHD_NO;
    }
    if (req->discard)
        return MHD_YES;
    if (http_buf_append(&req->body, data, n) != 0) {
        http_buf_free(&req->body);
        http_reply_error(req, 500, "internal", "out of memory");
        req->discard = 1;
    }
    return MHD_YES;
}

/* finish - after the handler ran or the request was resumed: queue the
 * reply, hold it a round (http_request_hold), stay parked, close (abort),
 * or answer a missing reply with 500. */
static enum MHD_Result
finish(struct http_request *req)
{
    if (req->aborted)
        return MHD_NO;
    if (req->has_reply && req->held &&
        (int)(req->server->round - req->hold_until) < 0)
        return MHD_YES; /* held (request.h): asked again next round */
    if (req->has_reply)
        return queue_reply(req);
    if (req->suspended)
        return MHD_YES;
    log_error(0, "handler for %s set no reply", http_route_name(req->route));
    http_reply_error(req, 500, "internal", "the request got no answer");
    return queue_reply(req);
}

/* http_access_handler - MHD's access handler, called several times per request.
 */
enum MHD_Result
http_access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                    const char *method, const char *version,
                    const char *upload_data, size_t *upload_data_size,
                    void **req_cls)
{
    struct http_server *s = cls;
    struct http_request *req = *req_cls;
    size_t n = *upload_data_size;

    (void)url;
    if (req == NULL)
        return MHD_NO;
    switch (req->state) {
    case HTTP_REQ_NEW:
        return first_call(req, conn, method, version);
    case HTTP_REQ_BODY:
        if (n != 0) {
            *upload_data_size = 0;
            return body_chunk(req, upload_data, n);
        }
        req->state = HTTP_REQ_HANDLED;
        if (!req->has_reply && !peer_refused(req))
            s->handler(s->ctx, req);
        return finish(req);
    case HTTP_REQ_HANDLED:
        return finish(req);
    case HTTP_REQ_QUEUED:
        break;
    }
    return MHD_YES;
}
