/*
 * server.c - the libmicrohttpd daemon of a worker: options, the callbacks
 * that drive each request (URI log, access handler, completion), body
 * accumulation, built-in 404/405/413 answers, and queueing replies.
 *
 * A request goes NEW -> BODY -> HANDLED -> QUEUED (request-t.h).  The
 * access handler never queues a response in its first call for a request:
 * MHD 0.9.75 then closes the connection (DESIGN §4).  The one exception is
 * a Content-Length over max_body_bytes: the body will not be read, so the
 * connection must close anyway, and answering at once spares the client
 * the "100 Continue" that would invite the body.
 *
 * Single-threaded (MHD runs inside http_server_run()).  Errors are logged
 * through shm/log.h; MHD's own messages too.
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/errors.h"
#include "http/reply.h"
#include "http/request-t.h"
#include "http/request.h"
#include "http/server-t.h"
#include "shm/log.h"

/* Bytes reserved up front from Content-Length; larger bodies grow. */
#define HTTP_BODY_PREALLOC (1u << 20)

/* mhd_log - MHD's error log into ours, without its trailing newline; at
 * info, since an aborted request is reported as an application error. */
static void __attribute__((format(printf, 2, 0)))
mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    size_t n;

    (void)cls;
    vsnprintf(line, sizeof(line), fmt, ap);
    n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    log_info(0, "libmicrohttpd: %s", line);
}

/* uri_cb - MHD's first word on a request: allocate it, keep the raw URI
 * (MHD decodes the path it hands the access handler, losing "%2F"). */
static void *
uri_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct http_request *req = calloc(1, sizeof(*req));

    (void)conn;
    if (req == NULL)
        return NULL;
    req->server = cls;
    req->uri = strdup(uri);
    if (req->uri == NULL) {
        free(req);
        return NULL;
    }
    return req;
}

/* request_free - everything a request owns. */
static void
request_free(struct http_request *req)
{
    struct http_header *h, *next;

    for (h = req->headers; h != NULL; h = next) {
        next = h->next;
        free(h);
    }
    http_buf_free(&req->reply);
    http_buf_free(&req->body);
    http_query_free(&req->args);
    free(req->param);
    free(req->uri);
    free(req);
}

/* completed_cb - the request is over: tell the handler whether the
 * response went out whole, then free it. */
static void
completed_cb(void *cls, struct MHD_Connection *conn, void **req_cls,
             enum MHD_RequestTerminationCode toe)
{
    struct http_request *req = *req_cls;

    (void)cls;
    (void)conn;
    if (req == NULL)
        return;
    *req_cls = NULL;
    http_request_unlist(req);
    if (req->done_fn != NULL)
        req->done_fn(req->done_arg, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    request_free(req);
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

    if (req->reply.len == 0)
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
    if (req->reply.len != 0)
        http_buf_init(&req->reply);
    for (h = req->headers; h != NULL; h = h->next) {
        MHD_add_response_header(resp, h->name, h->value);
        retry_after |= strcasecmp(h->name, "Retry-After") == 0;
    }
    if (!retry_after && http_status_retryable(req->status))
        MHD_add_response_header(resp, "Retry-After", "1");
    ret = MHD_queue_response(req->conn, req->status, resp);
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

/* route_request - route, decode the parameter and the query; any failure
 * becomes the reply (and the body is then read and dropped). */
static void
route_request(struct http_request *req)
{
    const char *q = strchr(req->uri, '?');
    size_t plen = q ? (size_t)(q - req->uri) : strlen(req->uri);
    struct http_route_match m;
    long n;
    int rc;

    http_route_match(req->method, req->uri, plen, req->server->opts.cluster,
                     &m);
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
    return;
oom:
    http_reply_error(req, 500, "internal", "out of memory");
discard:
    req->discard = 1;
}

/*
 * first_call - the request line and headers are in: route it and size the
 * body.  Returns MHD_YES, or the result of queueing an early 413.
 */
static enum MHD_Result
first_call(struct http_request *req, struct MHD_Connection *conn,
           const char *method)
{
    size_t max = req->server->opts.max_body_bytes;
    long long cl;

    req->conn = conn;
    req->method = method;
    req->state = HTTP_REQ_BODY;
    route_request(req);
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
 * past max_body_bytes the connection closes (MHD cannot answer before the
 * body is read, and reading an unbounded body to say so is no better). */
static enum MHD_Result
body_chunk(struct http_request *req, const char *data, size_t n)
{
    size_t max = req->server->opts.max_body_bytes;

    req->body_seen += n;
    if (req->body_seen > max) {
        log_info(0, "request body over max_body_bytes (%zu): closing", max);
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
 * reply, stay parked, close (abort), or answer a missing reply with 500. */
static enum MHD_Result
finish(struct http_request *req)
{
    if (req->aborted)
        return MHD_NO;
    if (req->has_reply)
        return queue_reply(req);
    if (req->suspended)
        return MHD_YES;
    log_error(0, "handler for %s set no reply", http_route_name(req->route));
    http_reply_error(req, 500, "internal", "the request got no answer");
    return queue_reply(req);
}

/* access_cb - MHD's access handler, called several times per request. */
static enum MHD_Result
access_cb(void *cls, struct MHD_Connection *conn, const char *url,
          const char *method, const char *version, const char *upload_data,
          size_t *upload_data_size, void **req_cls)
{
    struct http_server *s = cls;
    struct http_request *req = *req_cls;
    size_t n = *upload_data_size;

    (void)url;
    (void)version;
    if (req == NULL)
        return MHD_NO;
    switch (req->state) {
    case HTTP_REQ_NEW:
        return first_call(req, conn, method);
    case HTTP_REQ_BODY:
        if (n != 0) {
            *upload_data_size = 0;
            return body_chunk(req, upload_data, n);
        }
        req->state = HTTP_REQ_HANDLED;
        if (!req->has_reply)
            s->handler(s->ctx, req);
        return finish(req);
    case HTTP_REQ_HANDLED:
        return finish(req);
    case HTTP_REQ_QUEUED:
        break;
    }
    return MHD_YES;
}

/* http_server_start - one daemon on the inherited listening socket. */
struct http_server *
http_server_start(int listen_fd, const struct http_server_opts *o,
                  http_handler_fn *handler, void *ctx)
{
    struct http_server *s = calloc(1, sizeof(*s));
    int fl;

    if (s == NULL) {
        log_error(ENOMEM, "http_server_start");
        return NULL;
    }
    fl = fcntl(listen_fd, F_GETFL);
    if (fl == -1 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) == -1) {
        log_error(errno, "fcntl(%d, O_NONBLOCK) failed", listen_fd);
        free(s);
        return NULL;
    }
    s->listen_fd = listen_fd;
    s->opts = *o;
    s->handler = handler;
    s->ctx = ctx;
    s->daemon = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL,
        NULL, access_cb, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)o->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)o->connection_timeout_s, MHD_OPTION_URI_LOG_CALLBACK, uri_cb,
        s, MHD_OPTION_NOTIFY_COMPLETED, completed_cb, s, MHD_OPTION_END);
    if (s->daemon == NULL) {
        log_error(0, "MHD_start_daemon(listen fd %d) failed", listen_fd);
        free(s);
        return NULL;
    }
    return s;
}

/* http_server_fd - MHD's epoll fd. */
int
http_server_fd(const struct http_server *s)
{
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);

    return di != NULL ? di->epoll_fd : -1;
}

/* http_server_run - one non-blocking MHD round. */
void
http_server_run(struct http_server *s)
{
    s->resume_pending = 0;
    if (MHD_run(s->daemon) != MHD_YES)
        log_warn(0, "MHD_run failed");
}

/* http_server_timeout_ms - 0 while a resumed request waits for a run. */
int
http_server_timeout_ms(struct http_server *s)
{
    MHD_UNSIGNED_LONG_LONG t;

    if (s->resume_pending)
        return 0;
    if (MHD_get_timeout(s->daemon, &t) != MHD_YES)
        return -1;
    return t > INT_MAX ? INT_MAX : (int)t;
}

/* http_server_quiesce - stop accepting; close our copy of the socket. */
void
http_server_quiesce(struct http_server *s)
{
    MHD_socket fd;

    if (s->listen_fd == -1)
        return;
    fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET && close(fd) == -1)
        log_warn(errno, "close(listen fd %d) failed", fd);
    s->listen_fd = -1;
}

/* http_server_connections - MHD's count, parked ones included. */
unsigned
http_server_connections(struct http_server *s)
{
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

    return di != NULL ? di->num_connections : 0;
}

/* http_server_stop - resume the parked (they end unsent), then stop. */
void
http_server_stop(struct http_server *s)
{
    if (s == NULL)
        return;
    while (s->suspended != NULL)
        http_request_abort(s->suspended);
    MHD_stop_daemon(s->daemon);
    free(s);
}
