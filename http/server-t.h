/*
 * server-t.h - the layouts of struct http_server and of a connection's
 * record (struct http_conn), for http/ only.  Single-threaded, no locking.
 */
#ifndef MAYFLY_HTTP_SERVER_T_H
#define MAYFLY_HTTP_SERVER_T_H

#include <stddef.h>
#include <stdint.h>

#include "http/server.h"

struct MHD_Daemon;
struct http_request;

/* Connections that owe a request head, oldest first (edge_wait.c). */
struct http_conn_queue {
    struct http_conn *first, *last;
    unsigned window_s; /* each may owe it this long; 0: no limit */
};

struct http_server {
    struct MHD_Daemon *daemon;
    int listen_fd; /* -1 once quiesced (closed) */
    struct http_server_opts opts;
    http_handler_fn *handler;
    void *ctx;
    struct http_request *suspended; /* list of suspended requests */
    struct http_request *inners;    /* inner requests awaiting their
                                       replies (inner.c) */
    int resume_pending;             /* a resume awaits http_server_run() */
    int closed;        /* a connection closed in the last run: see run() */
    unsigned round;    /* http_server_run()s begun (request.h: hold) */
    unsigned requests; /* requests begun and not yet freed */
    unsigned fresh;    /* connections accepted, no request begun yet */
    unsigned open;     /* connections open (MHD's count, kept here) */
    size_t unsent;     /* bytes of replies queued and not ended (access.c) */
    struct http_conn_queue heads; /* accepted, or a request line in */
    struct http_conn_queue idles; /* kept alive between requests */
    unsigned cutting;             /* cut, not yet closed (edge_wait.c) */
    struct http_conn **pokes;     /* hang-ups to show MHD after its run
                                 (edge_conn.c); NULL entries: closed since */
    size_t npokes, pokes_cap;
    void (*on_close)(void *ctx, int fd); /* see http_server_on_close() */
    void *on_close_ctx;
    void (*on_open)(void *ctx, int fd, struct http_conn *c); /* on_open() */
    void *on_open_ctx;
};

/* What a connection carries as MHD's socket context (server.h): made as
 * MHD accepts it (access.c), freed as it closes. */
struct http_conn {
    struct http_server *server;
    int fd;
    unsigned char fresh;  /* no request line yet */
    unsigned char over;   /* accepted past max_connections */
    unsigned char peer;   /* client certificate: 0 unchecked, 1 good,
                              2 refused (servers with a CA only) */
    unsigned char poked;  /* its hang-up was shown to MHD, or waits in
                             server->pokes to be (edge_conn.c) */
    unsigned char looked; /* its first bytes were judged (edge_conn.c) */
    unsigned char cut;    /* cut, MHD has not closed it yet (edge_wait.c) */
    struct http_tls *tls; /* the server's credentials, or NULL */
    struct http_conn_queue *queue; /* heads or idles while it owes a
                                      head, else NULL (edge_wait.c) */
    struct http_conn *prev, *next; /* its neighbours there */
    uint64_t since_ms;             /* when it joined it (monotonic) */
};

#endif
