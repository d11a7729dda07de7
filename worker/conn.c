/*
 * conn.c - see conn.h.
 */
#include "worker/conn.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>

#include "http/server.h"
#include "worker/worker_int.h"

/* conn_of - the loop's record of client socket fd (grown as fds come);
 * NULL when out of memory. */
static struct worker_conn *
conn_of(struct worker *w, int fd)
{
    if ((size_t)fd >= w->nconns) {
        size_t n = w->nconns ? w->nconns : 1024;
        while (n <= (size_t)fd)
            n *= 2;
        struct worker_conn *t = realloc(w->conns, n * sizeof(*t));
        if (t == NULL)
            return NULL;
        memset(t + w->nconns, 0, (n - w->nconns) * sizeof(*t));
        w->conns = t;
        w->nconns = n;
    }
    return &w->conns[fd];
}

/* worker_conn_watch - see conn.h. */
int
worker_conn_watch(struct worker *w, int fd, struct worker_conn **out)
{
    struct worker_conn *k = conn_of(w, fd);

    if (k == NULL)
        return -ENOMEM;
    if (k->hup)
        return -EPIPE;
    if (!k->watched) {
        struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET,
                                 .data.u64 = WORKER_TAG_CONN | (uint64_t)fd};
        if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) == -1)
            return -errno;
        k->watched = 1;
    }
    *out = k;
    return 0;
}

/* user_timeout_ms - how long bytes sent to a client may wait unacknowledged
 * before its connection is ended: twice stream_keepalive_s, so a client
 * gone silent is noticed within three keepalives (one to send, two to
 * wait), and a live one on a slow path keeps tens of seconds. */
static unsigned
user_timeout_ms(const struct worker *w)
{
    return 2 * w->set.stream_keepalive_s * 1000u;
}

/* worker_conn_opened - see conn.h.  A client whose network went silent
 * never sends a reset nor a FIN: the kernel retransmits what it holds
 * for ~15 minutes (tcp_retries2), and a presence member stays that long.
 * TCP_USER_TIMEOUT ends the connection once bytes sent wait unacknowledged
 * that long (ETIMEDOUT: EPOLLERR and EPOLLHUP, a hang-up below); a stream's
 * keepalive makes sure it holds some.  Only unacknowledged bytes count: a
 * long poll that waits with nothing sent, or a slow client that acks, is
 * never cut. */
void
worker_conn_opened(void *arg, int fd, struct http_conn *c)
{
    struct worker *w = arg;
    struct worker_conn *k = conn_of(w, fd);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                             .data.u64 = WORKER_TAG_CONN | (uint64_t)fd};
    unsigned ut = user_timeout_ms(w);

    /* not TCP (a test's socket pair): nothing to bound */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
    if (k == NULL)
        return;
    k->http = c;
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) == -1)
        return; /* watched later, if a long poll waits on it */
    k->watched = 1;
    k->first = 1;
}

/* worker_conn_event - see conn.h.  Its first bytes seen, the socket is
 * watched for its end only, so that requests do not wake the loop twice. */
struct worker_conn *
worker_conn_event(struct worker *w, int fd, uint32_t events)
{
    struct worker_conn *k = (size_t)fd < w->nconns ? &w->conns[fd] : NULL;

    if (k == NULL)
        return NULL;
    if (k->first && (events & EPOLLIN)) {
        struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET,
                                 .data.u64 = WORKER_TAG_CONN | (uint64_t)fd};

        k->first = 0;
        if (http_conn_first_bytes(k->http))
            return NULL; /* refused: MHD closes it */
        epoll_ctl(w->ep, EPOLL_CTL_MOD, fd, &ev);
    }
    if (!(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        return NULL;
    k->hup = 1;
    return k;
}

/* worker_conn_poke_later - see conn.h. */
void
worker_conn_poke_later(struct worker *w, int fd)
{
    struct worker_conn *k = &w->conns[fd];

    if (k->http != NULL)
        http_conn_hangup(k->http); /* else MHD's idle timeout closes it */
}

/* worker_conn_closed - see conn.h. */
void
worker_conn_closed(void *arg, int fd)
{
    struct worker *w = arg;

    if (fd >= 0 && (size_t)fd < w->nconns)
        w->conns[fd] = (struct worker_conn){0};
}
