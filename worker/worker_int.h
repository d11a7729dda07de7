/*
 * worker_int.h - one worker process's state, shared by worker/ files.
 *
 * Process memory only.  The loop (worker.c) owns it; the route handlers
 * read it and use its scratch space.  Each file's functions are declared in
 * its own header.
 */
#ifndef MAYFLY_WORKER_WORKER_INT_H
#define MAYFLY_WORKER_WORKER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "http/auth.h"
#include "http/jwt.h"
#include "shm/broker.h"
#include "shm/owner.h"
#include "worker/park.h"
#include "worker/worker.h"

struct http_client;
struct http_request;
struct http_server;
struct stream_set;
struct worker_conn;

struct worker {
    struct shm_seg *seg;
    struct worker_settings set;
    uint64_t incarnation;
    struct http_server *http;
    struct http_client *client; /* every outgoing call: to peers, and
                                   configure to this node's master */
    int ep;                     /* the loop's epoll */
    int sfd;                    /* signalfd: TERM, INT, HUP, USR1 */
    struct park_set parks;
    int draining;
    uint64_t drain_since;    /* when SIGTERM came */
    struct shm_msg_in *msgs; /* push scratch: one per message of a request */
    uint32_t msgs_cap;
    struct worker_conn *conns; /* by fd; grown as fds come (conn.h) */
    size_t nconns;
    struct shm_owners owners; /* who owns what (view.h) */
    uint64_t parks_sig;       /* owners.sig parked and forwarded pops were
                                 checked at */
    int stale;                /* the master's view was stale at the last
                                 look (view_stale) */
    int auth_on;              /* an auth_file or jwt_secret_file is set
                                 (authz.h) */
    struct auth_table auth;   /* the auth_file's tokens */
    struct http_jwt_key jwt;  /* the secret of signed tokens (len 0: none) */
    struct auth_token signed_caller; /* the request being dispatched's
                                        signed token, as verified */
    const struct auth_token *caller; /* the request being dispatched's
                                        token (in auth or signed_caller);
                                        NULL: none (auth off) */
    struct stream_set *streams;      /* open streams (stream_int.h), or NULL */
    /* a request's route handler, run again for one a forward gave back
     * (forward.h); worker.c's, set at start */
    void (*redispatch)(struct worker *w, struct http_request *req);
};

#endif
