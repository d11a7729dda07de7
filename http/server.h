/*
 * server.h - the libmicrohttpd daemon of one worker process.
 *
 * MHD runs without a thread of its own (MHD_USE_EPOLL |
 * MHD_ALLOW_SUSPEND_RESUME): the worker puts http_server_fd() into its own
 * epoll and calls http_server_run() after each wake, waiting no longer than
 * http_server_timeout_ms().  All workers accept on the one listening socket
 * the master made and they inherited.
 *
 * Per request the server reads the whole body (413 payload_too_large past
 * max_body_bytes, without buffering the excess), answers unknown paths (404
 * not_found) and wrong methods (405 method_not_allowed with Allow) itself,
 * and calls the handler exactly once for the rest.  It never queues a
 * response in the first access-handler call of a request, which would cost
 * keep-alive in MHD 0.9.75 (edge.h) -- except the 413 for a
 * Content-Length over the limit, where the connection closes anyway.  A
 * body that outgrows the limit without a Content-Length (chunked) closes
 * the connection: MHD 0.9.75 cannot answer before a body is read.
 *
 * Single-threaded: every function runs in the worker's loop.  Errors are
 * logged with shm/log.h.
 */
#ifndef MAYFLY_HTTP_SERVER_H
#define MAYFLY_HTTP_SERVER_H

#include <stddef.h>

struct http_cors;
struct http_server;
struct http_request;
struct http_tls;

struct http_server_opts {
    unsigned max_connections;      /* > 0; parked pops count: set it high
                                      and raise RLIMIT_NOFILE to match.
                                      Past it the connection that has
                                      owed a request head the longest is
                                      cut to make room (edge_wait.h); with
                                      none, a request gets 503 and the
                                      connection closes, /health excepted
                                      (MHD's own limit is a reserve above
                                      it, edge_conn.h) */
    size_t max_body_bytes;         /* larger bodies: 413 payload_too_large */
    unsigned connection_timeout_s; /* idle connections close; 0 = never
                                      (a request head has 30 s at most,
                                      edge_wait.h) */
    int cluster;                   /* serve the cluster port's routes */
    int discard_bodies;            /* read request bodies and drop them:
                                      the handler answers without one */
    struct http_tls *tls;          /* HTTPS with these credentials (tls.h;
                                      kept by the caller, who reloads
                                      them); with a CA, a request from a
                                      client without a certificate that
                                      chains to it is answered 401 and
                                      the connection closes.  NULL: plain
                                      HTTP */
    size_t max_unsent_bytes;       /* the reply bytes the server may hold
                                      for clients that have not read them
                                      whole; past it, a pop is refused
                                      503 (/health and the rest are
                                      served).  0: no bound */
    void (*on_refused)(void *ctx); /* a request on a connection opened
                                      past max_connections was refused
                                      (503); ctx is the handler's; may be
                                      NULL */
    const struct http_cors *cors;  /* the origins whose pages may read
                                      the answers (cors.h; kept by the
                                      caller); NULL: none */
};

/* The handler: called once per routed request with its whole body. */
typedef void http_handler_fn(void *ctx, struct http_request *req);

/*
 * http_server_start - serve HTTP on listen_fd (a bound, listening socket; it
 * is made non-blocking).  NULL on failure (logged), a libmicrohttpd other
 * than the one the edge was built and tested for included (edge.h).  The
 * server owns listen_fd from then on.
 */
struct http_server *http_server_start(int listen_fd,
                                      const struct http_server_opts *o,
                                      http_handler_fn *handler, void *ctx);

/* http_server_fd - MHD's epoll fd, to add (EPOLLIN) to the worker's epoll. */
int http_server_fd(const struct http_server *s);

/* http_server_run - do whatever MHD has to do now; never blocks.  Calls
 * the handler and on_done callbacks from inside. */
void http_server_run(struct http_server *s);

/* http_server_resume_pending - a request was resumed since the last
 * http_server_run(): its answer goes out on the next one. */
int http_server_resume_pending(const struct http_server *s);

/*
 * http_server_on_close - call fn(ctx, fd) as each client connection ends,
 * before MHD closes its socket fd (the worker forgets what it kept about
 * that fd, so a later connection that reuses the number starts clean).
 */
void http_server_on_close(struct http_server *s, void (*fn)(void *ctx, int fd),
                          void *ctx);

/* A client connection, opaque outside http/: handed to the on_open hook,
 * valid until the on_close hook is called for its fd. */
struct http_conn;

/* http_server_on_open - call fn(ctx, fd, c) as each client connection
 * starts (the worker watches its socket for its first bytes and its end). */
void http_server_on_open(struct http_server *s,
                         void (*fn)(void *ctx, int fd, struct http_conn *c),
                         void *ctx);

/* http_conn_first_bytes - the first bytes have come on c: while it has
 * sent no request line, bytes that cannot begin one (a TLS record, a NUL,
 * a space) are answered 400 and the connection closed (MHD would wait for
 * a line end until the head timeout, or close without a word); on a TLS
 * port, bytes that do not begin a TLS record (plain HTTP) are answered
 * 400 in plain HTTP (a handshake would only fail).  1 when refused. */
int http_conn_first_bytes(struct http_conn *c);

/* http_conn_hangup - c's client shut its side (or reset) and nothing of
 * the caller's waits on c: after MHD's next run its socket is shut for
 * reading (once), which wakes MHD to read it again and see the end (MHD
 * misses a FIN that came with the last bytes of half a request, edge.h).
 * A request still arriving is then dropped and the connection closed;
 * one MHD holds whole is answered as before. */
void http_conn_hangup(struct http_conn *c);

/* http_server_timeout_ms - how long the loop may sleep before the next
 * http_server_run() (-1: no MHD timer pending). */
int http_server_timeout_ms(struct http_server *s);

/*
 * http_server_quiesce - stop accepting (drain): MHD_quiesce_daemon(), then
 * close this process's copy of the listening socket.  Open connections,
 * suspended ones included, keep being served.
 */
void http_server_quiesce(struct http_server *s);

/*
 * http_server_refuse_new - have the kernel open no new connection on the
 * listening socket (their SYNs are dropped, so their clients are refused
 * once it closes) while those already queued are still accepted: the last
 * step of a drain before the socket closes.  0 or -errno (logged).
 */
int http_server_refuse_new(struct http_server *s);

/* http_server_busy - requests begun (request line read) and not yet ended,
 * plus connections accepted whose first request has not begun: zero means
 * every open connection is idle between requests. */
unsigned http_server_busy(const struct http_server *s);

/* http_server_accept_pending - whether connections wait in the listening
 * socket's accept queue (0 once quiesced). */
int http_server_accept_pending(const struct http_server *s);

/* http_server_connections - open connections, suspended ones included. */
unsigned http_server_connections(struct http_server *s);

/*
 * http_server_stop - resume every suspended request (each one's on_done
 * reports sent_ok 0), close all connections, free s.  NULL is a no-op.
 */
void http_server_stop(struct http_server *s);

#endif
