/*
 * conn.h - the worker's table of client connections, by socket fd.
 *
 * A client socket joins the loop's epoll (EPOLLRDHUP, edge-triggered) when a
 * long poll first waits on it, parked here (pop.c) or forwarded to the
 * partition's owner (forward.c), and stays until MHD closes it, so waiting
 * again costs no epoll_ctl.  The record says who waits on it now; the loop
 * (worker.c) hands a hang-up to that one.  Process memory only.
 */
#ifndef MAYFLY_WORKER_CONN_H
#define MAYFLY_WORKER_CONN_H

#include <stdint.h>

struct worker;
struct park;
struct forward;

/* The loop's epoll tag of a watched client socket: WORKER_TAG_CONN | fd. */
#define WORKER_TAG_CONN ((uint64_t)1 << 62)

/* A client socket the loop watches for hang-ups. */
struct worker_conn {
    struct park *park;    /* the pop parked on it now, or NULL */
    struct forward *fwd;  /* its request forwarded, waiting on the owner */
    unsigned watched : 1; /* in the loop's epoll */
    unsigned hup : 1;     /* the client shut its side (or reset) */
};

/* worker_conn_watch - put socket fd in the loop's epoll for hang-ups unless
 * it is there already (EPOLLRDHUP, edge-triggered: a hang-up is reported
 * once, so one seen while nothing waited is kept in hup).  0 with *out,
 * -EPIPE when the client has already shut its side, or -errno. */
int worker_conn_watch(struct worker *w, int fd, struct worker_conn **out);

/* worker_conn_hangup - the client of socket fd shut its side (EPOLLRDHUP,
 * or an error): noted in its record, which is returned so the loop can
 * tell whoever waits on it; NULL when fd has none. */
struct worker_conn *worker_conn_hangup(struct worker *w, int fd);

/* worker_conn_closed - MHD is closing socket fd (http_server_on_close, w
 * is the worker): the epoll forgets it with the close, and so does the
 * table. */
void worker_conn_closed(void *w, int fd);

#endif
