/*
 * worker.h - the contract between the master and the worker processes it
 * forks (the one header master/ includes from worker/).
 *
 * A worker inherits the segment mapping, the workers' eventfds and the
 * listening socket over fork() (master_spawn closes the master's other
 * descriptors in it); it serves client HTTP in one epoll loop until SIGTERM
 * (drain: stop accepting, answer parked pops, finish in-flight requests,
 * exit 0) or until the master dies (PR_SET_PDEATHSIG).  SIGHUP reopens the
 * log, takes the published log level and reads the TLS certificate again,
 * SIGUSR1 reopens the log.  Exit
 * status: 0 after a drain, 1 on a fatal error.
 */
#ifndef MAYFLY_WORKER_WORKER_H
#define MAYFLY_WORKER_WORKER_H

#include <stdint.h>
#include <stdnoreturn.h>

#include "http/client.h"
#include "http/cors.h"
#include "http/jwt.h"

struct auth_table;
struct http_health;
struct http_health_member;
struct http_qopts;
struct http_tls;
struct shm_qopts;
struct shm_seg;
struct shm_board_view;

struct worker_settings {
    int slot;      /* 0..workers-1: index of its shm slot */
    int listen_fd; /* client port, shared by all workers */
    uint32_t max_connections;
    uint64_t max_body_bytes;
    uint32_t max_wait_ms;         /* ceiling of a pop's timeout */
    uint32_t max_delay_ms;        /* ceiling of a message's delayMs */
    uint32_t responders_idle_ms;  /* a request's no-responders (SPEC §9) */
    uint32_t busy_poll_us;        /* polled before sleeping (worker_main) */
    uint32_t stream_max;          /* streams a node holds (SPEC §11) */
    uint32_t stream_max_subs;     /* subscriptions a stream */
    uint64_t stream_buffer_bytes; /* a stream's unsent events, at most */
    uint32_t stream_keepalive_s;  /* a comment after this long idle */
    uint32_t presence_grace_ms;   /* a member leaves this long after its
                                     last stream closed (SPEC §12) */
    char node_id[65];
    char cluster_addr[256]; /* this node's master, for configure/delete */
    char auth_file[1024];   /* "": no client authentication (SPEC §10) */
    int metrics_auth;       /* /metrics wants a token too */
    const struct auth_table *auth; /* the master's tokens, as forked */
    char jwt_secret_file[1024];    /* "": no signed tokens (SPEC §11) */
    struct http_jwt_key jwt;       /* its secret, as the master read it;
                                      each worker reads it again on HUP */
    struct http_cors cors;         /* cors_origins (SPEC §11) */
    char secret[129]; /* the cluster secret: signs calls (sign.h) */
    struct http_client_peers peers; /* how calls to nodes go (strings in
                                       the master's config, inherited) */
    struct http_tls *tls; /* the client port's certificate (NULL: plain
                               HTTP): the master's, inherited; each worker
                               reads the files again on HUP */
};

/* worker_main - run a worker until it drains; never returns. */
noreturn void worker_main(struct shm_seg *seg, const struct worker_settings *s);

/* What overrides the view's readiness in /health. */
enum worker_health_why {
    WORKER_HEALTH_VIEW,     /* as the view says */
    WORKER_HEALTH_DRAINING, /* this process is stopping */
    WORKER_HEALTH_STALE,    /* the master's view is stale (shm_board_stale) */
};

/*
 * worker_health_view - what GET /health shows (http/answer_json.h writes
 * it) of node node_id of this incarnation, as the board view v
 * shows it, unless why says this process is stopping or the view is stale
 * (then "status" says which, and it is not ready).  Its members are put in
 * mm (SHM_BOARD_MEMBERS of them) and its strings point into v and
 * node_id.
 */
void worker_health_view(struct http_health *h, struct http_health_member *mm,
                        const char *node_id, uint64_t incarnation,
                        enum worker_health_why why,
                        const struct shm_board_view *v);

/* worker_options_view - a queue's effective options o as the listing and
 * configure's answer show them (http_options_json() writes them).  Shared
 * with the master, which answers configure. */
struct http_qopts worker_options_view(const struct shm_qopts *o);

#endif
