/*
 * worker_int.h - one worker process's state, shared by worker/ files.
 *
 * Process memory only.  The loop (worker.c) owns it; handlers (push.c,
 * pop.c, ack.c, admin.c, status.c) read it and use its scratch space.
 */
#ifndef MAYFLY_WORKER_WORKER_INT_H
#define MAYFLY_WORKER_WORKER_INT_H

#include <stdint.h>

#include "shm/broker.h"
#include "worker/park.h"
#include "worker/worker.h"

struct http_request;
struct http_client;

/* A client socket the loop watches for hang-ups: it joins the loop's epoll
 * (EPOLLRDHUP, edge-triggered) at its first parked pop and stays until MHD
 * closes it, so parking again costs no epoll_ctl. */
struct worker_conn {
    struct park *park;    /* the pop parked on it now, or NULL */
    unsigned watched : 1; /* in the loop's epoll */
    unsigned hup : 1;     /* the client shut its side (or reset) */
};

struct worker {
    struct shm_seg *seg;
    struct worker_settings set;
    uint64_t incarnation;
    struct http_server *http;
    struct http_client *client; /* calls to this node's master */
    int ep;                     /* the loop's epoll */
    int sfd;                    /* signalfd: TERM, HUP */
    struct park_set parks;
    int draining;
    uint64_t drain_since;    /* when SIGTERM came */
    struct shm_msg_in *msgs; /* push scratch: one per message of a request */
    uint32_t msgs_cap;
    struct worker_conn *conns; /* by fd; grown as fds come */
    size_t nconns;
};

/* Route handlers: each answers (or parks) req before returning. */
void worker_push(struct worker *w, struct http_request *req);
void worker_pop(struct worker *w, struct http_request *req);
void worker_ack(struct worker *w, struct http_request *req);
void worker_extend(struct worker *w, struct http_request *req);
void worker_reset(struct worker *w, struct http_request *req);
void worker_delete(struct worker *w, struct http_request *req);
void worker_list(struct worker *w, struct http_request *req);
void worker_depth(struct worker *w, struct http_request *req);
void worker_health(struct worker *w, struct http_request *req);
void worker_metrics(struct worker *w, struct http_request *req);
void worker_configure(struct worker *w, struct http_request *req);

/* Parked pops (pop.c), driven by the loop.  Client sockets are in the
 * loop's epoll under WORKER_TAG_CONN | fd. */
#define WORKER_TAG_CONN ((uint64_t)1 << 62)
void worker_pop_wake(struct worker *w, uint64_t handle);
void worker_pop_wake_all(struct worker *w);
void worker_pop_expire(struct worker *w, uint64_t now);
void worker_pop_conn_hangup(struct worker *w, int fd);
void worker_pop_conn_closed(void *w, int fd);
void worker_pop_answer_all(struct worker *w);

/* worker_name_ok - validate a name; else answer 400 invalid_name naming
 * field and return 0. */
int worker_name_ok(struct http_request *req, const char *field, const char *p,
                   size_t len);

#endif
