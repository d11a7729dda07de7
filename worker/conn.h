/*
 * conn.h - the worker's table of client connections, by socket fd.
 *
 * A client socket joins the loop's epoll (edge-triggered) as MHD accepts
 * it, for its first bytes (EPOLLIN: a TLS ClientHello is answered at once,
 * http_conn_first_bytes) and then for its end only (EPOLLRDHUP), until MHD
 * closes it.  The record says who waits on it now, a long poll parked here
 * (pop.c) or forwarded to the partition's owner (forward.c); the loop
 * (worker.c) hands a hang-up to that one.  A hang-up nobody waits on goes
 * to the HTTP server (worker_conn_poke_later), which shows it to MHD
 * (libmicrohttpd misses some, http/edge.h).  A client whose network went
 * silent sends no hang-up: its connection ends once bytes sent to it wait
 * 2 x stream_keepalive_s unacknowledged (TCP_USER_TIMEOUT; a stream's
 * keepalive makes sure some do).  Process memory only.
 */
#ifndef MAYFLY_WORKER_CONN_H
#define MAYFLY_WORKER_CONN_H

#include <stdint.h>

struct worker;
struct park;
struct forward;
struct http_conn;

/* The loop's epoll tag of a watched client socket: WORKER_TAG_CONN | fd. */
#define WORKER_TAG_CONN ((uint64_t)1 << 62)

/* A client socket the loop watches for hang-ups. */
struct worker_conn {
    struct park *park;      /* the pop parked on it now, or NULL */
    struct forward *fwd;    /* its request forwarded, waiting on the owner */
    struct http_conn *http; /* MHD's connection (server.h), or NULL */
    unsigned watched : 1;   /* in the loop's epoll */
    unsigned first : 1;     /* watched for its first bytes (EPOLLIN) */
    unsigned hup : 1;       /* the client shut its side (or reset) */
};

/* worker_conn_watch - put socket fd in the loop's epoll for hang-ups unless
 * it is there already (EPOLLRDHUP, edge-triggered: a hang-up is reported
 * once, so one seen while nothing waited is kept in hup).  0 with *out,
 * -EPIPE when the client has already shut its side, or -errno. */
int worker_conn_watch(struct worker *w, int fd, struct worker_conn **out);

/* worker_conn_opened - MHD accepted socket fd, connection c
 * (http_server_on_open, w is the worker): its TCP_USER_TIMEOUT set to
 * 2 x stream_keepalive_s (a client gone silent is ended), watched for its
 * first bytes and its end. */
void worker_conn_opened(void *w, int fd, struct http_conn *c);

/* worker_conn_event - epoll events on socket fd: its first bytes are
 * looked at (then only its end is watched); on a hang-up (EPOLLRDHUP, or
 * an error) it is noted in the record, which is returned so the loop can
 * tell whoever waits on it; otherwise, or when fd has none, NULL. */
struct worker_conn *worker_conn_event(struct worker *w, int fd,
                                      uint32_t events);

/* worker_conn_poke_later - nothing waits on socket fd, whose client hung
 * up: the HTTP server shows MHD the end after its next run
 * (http_conn_hangup). */
void worker_conn_poke_later(struct worker *w, int fd);

/* worker_conn_closed - MHD is closing socket fd (http_server_on_close, w
 * is the worker): the epoll forgets it with the close, and so does the
 * table. */
void worker_conn_closed(void *w, int fd);

#endif
