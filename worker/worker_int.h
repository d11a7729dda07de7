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
#include "shm/owner.h"
#include "worker/park.h"
#include "worker/worker.h"

struct http_request;
struct http_client;

/* A client socket the loop watches for hang-ups: it joins the loop's epoll
 * (EPOLLRDHUP, edge-triggered) at its first parked pop and stays until MHD
 * closes it, so parking again costs no epoll_ctl. */
struct forward;
struct worker_conn {
    struct park *park;    /* the pop parked on it now, or NULL */
    struct forward *fwd;  /* its request forwarded, waiting on the owner */
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
    struct shm_owners owners; /* who owns what (forward.c) */
    uint64_t parks_sig;       /* owners.sig parked and forwarded pops were
                                 checked at */
    int stale;                /* the master's view was stale at the last
                                 look (view_stale) */
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

/* worker_conn_of - the loop's record of client socket fd (grown as fds
 * come); NULL when out of memory. */
struct worker_conn *worker_conn_of(struct worker *w, int fd);

/* worker_conn_watch - put socket fd in the loop's epoll for hang-ups unless
 * it is there already (EPOLLRDHUP, edge-triggered: a hang-up is reported
 * once, so one seen while nothing waited is kept in hup).  0 with *out,
 * -EPIPE when the client has already shut its side, or -errno. */
int worker_conn_watch(struct worker *w, int fd, struct worker_conn **out);

/* worker_forward_hangup - the client of a forwarded request left: drop
 * the call to the owner (its parked pop then leases nothing) and the
 * request (forward.c). */
void worker_forward_hangup(struct forward *f);

/* worker_forward_drain - the worker stops: the long polls it forwarded
 * are answered 503 draining at once, as its parked pops are answered. */
void worker_forward_drain(struct worker *w);
void worker_pop_answer_all(struct worker *w);
/* worker_pop_moved - after the owners changed (w->owners refreshed): answer
 * the pops parked on a partition another node owns now, or on a queue of
 * which this node owns no partition and not Default (with what they hold,
 * usually nothing), so their clients ask again and reach the owner. */
void worker_pop_moved(struct worker *w);

/* worker_pop_let_go_all - every parked pop answered as worker_pop_moved()
 * answers a moved one: the view they were placed by no longer holds. */
void worker_pop_let_go_all(struct worker *w);

/* worker_forward_moved - after the owners changed (w->owners refreshed):
 * the long polls forwarded to a node that is no longer a live member
 * (dead, hung, leaving) are answered as worker_pop_moved() answers a
 * parked pop, empty, and their calls to that node dropped (forward.c).  A
 * live node lets its own parked pop go; a hung one cannot. */
void worker_forward_moved(struct worker *w);

/* worker_every_node - whether req (reset, delete) must also reach every
 * other live member: a cluster, and req was not sent by one (admin.c). */
int worker_every_node(struct worker *w, struct http_request *req);

/* A member's answer to a reset or delete, and the delete's merged answer
 * (admin.c; struct gather in gather.h). */
struct gather;
struct http_client_resp;
enum gather_share worker_applied_classify(struct gather *g,
                                          const struct http_client_resp *r,
                                          const char *node);
void worker_delete_finish(struct gather *g);

#endif
