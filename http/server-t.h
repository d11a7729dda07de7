/*
 * server-t.h - the layout of struct http_server, for http/ only.
 * Single-threaded, no locking.
 */
#ifndef MAYFLY_HTTP_SERVER_T_H
#define MAYFLY_HTTP_SERVER_T_H

#include "http/server.h"

struct MHD_Daemon;
struct http_request;

struct http_server {
    struct MHD_Daemon *daemon;
    int listen_fd; /* -1 once quiesced (closed) */
    struct http_server_opts opts;
    http_handler_fn *handler;
    void *ctx;
    struct http_request *suspended; /* list of suspended requests */
    int resume_pending;             /* a resume awaits http_server_run() */
    int closed;        /* a connection closed in the last run: see run() */
    unsigned requests; /* requests begun and not yet freed */
    unsigned fresh;    /* connections accepted, no request begun yet */
    unsigned open;     /* connections open (MHD's count, kept here) */
    void (*on_close)(void *ctx, int fd); /* see http_server_on_close() */
    void *on_close_ctx;
    void (*on_open)(void *ctx, int fd, struct http_conn *c); /* on_open() */
    void *on_open_ctx;
};

#endif
