/*
 * rset.c - a reader set: N sockets to one server, each sent one request
 * (a stream's subscribe, a NATS SUB) and read by BENCH_RSET_THREADS epoll
 * threads that count, per socket, a marker string in what arrives after a
 * ready marker; and a round: one message every socket should get, timed
 * from the send to each socket's arrival.  The stream rows of `make bench`
 * (stream.c) and `mayfly bench stream` (ops/cli/bench.c) share it.
 *
 * Streams never end, so they are not read by the engine's request loop.
 * Locking: the reader threads share atomics with the main thread, and
 * their round histograms, which it clears before a round's message goes
 * out and reads once every socket has it (and 20 ms more).
 */
#include <sys/epoll.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/bench/bench.h"

/* count - occurrences of m in p[0..n). */
static long
count(const char *p, size_t n, const char *m)
{
    size_t ml = strlen(m);
    const char *q = p, *end = p + n;
    long k = 0;

    while ((q = memmem(q, (size_t)(end - q), m, ml)) != NULL) {
        k++;
        q += ml;
    }
    return k;
}

/* take - what one read of socket i brought. */
static void
take(struct bench_rthread *t, struct bench_sconn *c, size_t n)
{
    struct bench_rset *s = t->set;
    char *p = t->buf;
    size_t all = c->ncarry + n, keep;
    long k;

    if (!c->ready) {
        const char *r = memmem(p, all, s->ready, strlen(s->ready));
        if (r == NULL)
            goto carry;
        c->ready = 1;
        atomic_fetch_add(&s->nready, 1);
        r += strlen(s->ready);
        all -= (size_t)(r - p);
        p = (char *)r;
    }
    if (s->ping != NULL && memmem(p, all, s->ping, strlen(s->ping)) != NULL &&
        write(c->fd, s->pong, strlen(s->pong)) < 0)
        c->ended = 1;
    if (memmem(p, all, "event: overflow", 15) != NULL) {
        atomic_fetch_add(&s->overflows, 1);
        c->ended = 1;
    }
    k = count(p, all, s->marker);
    if (k > 0) {
        long before = atomic_fetch_add(&c->seen, k);
        long want = atomic_load(&s->round);
        atomic_fetch_add(&s->events, k);
        if (want > 0 && before < want && before + k >= want) {
            uint64_t now = bench_now_ns(), t0 = atomic_load(&s->t0);
            bench_hist_add(&t->hist, now > t0 ? now - t0 : 0);
            atomic_store(&s->t_last, now); /* near enough: the max below */
            atomic_fetch_add(&s->arrived, 1);
        }
    }
carry:
    keep = all < BENCH_RSET_CARRY - 1 ? all : BENCH_RSET_CARRY - 1;
    memmove(c->carry, p + all - keep, keep);
    c->ncarry = keep;
}

/* A reader thread's loop until the set stops. */
static void *
rthread_main(void *arg)
{
    struct bench_rthread *t = arg;
    struct bench_rset *s = t->set;
    struct epoll_event ev[256];

    while (!atomic_load(&s->stop)) {
        int n = epoll_wait(t->ep, ev, 256, 50);
        for (int i = 0; i < n; i++) {
            struct bench_sconn *c = &s->c[ev[i].data.u32];
            ssize_t got;

            /* the carry, then what is read after it */
            memcpy(t->buf, c->carry, c->ncarry);
            got = read(c->fd, t->buf + c->ncarry, BENCH_RSET_CHUNK);
            if (got > 0) {
                take(t, c, (size_t)got);
            } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                epoll_ctl(t->ep, EPOLL_CTL_DEL, c->fd, NULL);
                c->ended = 1;
            }
        }
    }
    return NULL;
}

/* bench_rset_open - n sockets to port, each sent req (reqlen bytes), read by
 * two threads; with err set when a socket cannot be had. */
struct bench_rset *
bench_rset_open(int n, int port, const char *req, size_t reqlen, char *err,
                size_t errlen)
{
    return bench_rset_open_each(n, port, &req, &reqlen, 1, err, errlen);
}

/* bench_rset_open_each - see bench.h. */
struct bench_rset *
bench_rset_open_each(int n, int port, const char *const *reqs,
                     const size_t *lens, int nreqs, char *err, size_t errlen)
{
    struct bench_rset *s = calloc(1, sizeof(*s));
    int i;

    s->c = calloc((size_t)n, sizeof(*s->c));
    for (int k = 0; k < BENCH_RSET_THREADS; k++) {
        s->t[k].set = s;
        s->t[k].ep = epoll_create1(EPOLL_CLOEXEC);
    }
    for (i = 0; i < n; i++) {
        struct bench_rthread *t = &s->t[i % BENCH_RSET_THREADS];
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        int fd = bench_tcp_connect(port);

        if (fd < 0) {
            snprintf(err, errlen, "%d of %d connections: %s", i, n,
                     strerror(-fd));
            break;
        }
        s->c[i].fd = fd;
        if (write(fd, reqs[i % nreqs], lens[i % nreqs]) !=
            (ssize_t)lens[i % nreqs]) {
            snprintf(err, errlen, "request %d not sent: %s", i,
                     strerror(errno));
            close(fd);
            break;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &ev);
    }
    s->n = i;
    return s;
}

/* bench_rset_start - the reader threads; 0 or -errno. */
int
bench_rset_start(struct bench_rset *s)
{
    for (int k = 0; k < BENCH_RSET_THREADS; k++)
        if (pthread_create(&s->t[k].th, NULL, rthread_main, &s->t[k]) != 0)
            return -EAGAIN;
    return 0;
}

/* bench_rset_wait_ready - until every socket is ready, at most secs; how many
 * are. */
int
bench_rset_wait_ready(struct bench_rset *s, double secs)
{
    uint64_t until = bench_now_ns() + (uint64_t)(secs * 1e9);

    while (atomic_load(&s->nready) < s->n && bench_now_ns() < until)
        bench_sleep_ns(20000000);
    return atomic_load(&s->nready);
}

/* bench_rset_close - stop the threads, close every socket. */
void
bench_rset_close(struct bench_rset *s)
{
    if (s == NULL)
        return;
    atomic_store(&s->stop, 1);
    for (int k = 0; k < BENCH_RSET_THREADS; k++) {
        if (s->t[k].th)
            pthread_join(s->t[k].th, NULL);
        close(s->t[k].ep);
    }
    for (int i = 0; i < s->n; i++)
        close(s->c[i].fd);
    free(s->c);
    free(s);
}

/* bench_rset_round - send (fn, with arg) one message all sockets should get,
 * wait until every ready socket has it (at most secs); its figures. */
struct bench_round
bench_rset_round(struct bench_rset *s, int (*fn)(void *), void *arg,
                 double secs)
{
    struct bench_hist h = {0};
    struct bench_round out = {0};
    uint64_t until;
    long want = atomic_load(&s->round) + 1;
    int live = 0;

    for (int i = 0; i < s->n; i++)
        live += s->c[i].ready && !s->c[i].ended;
    for (int k = 0; k < BENCH_RSET_THREADS; k++)
        memset(&s->t[k].hist, 0, sizeof(s->t[k].hist));
    atomic_store(&s->arrived, 0);
    atomic_store(&s->t_last, 0);
    atomic_store(&s->round, want);
    atomic_store(&s->t0, bench_now_ns());
    if (fn(arg) != 0)
        return out;
    until = bench_now_ns() + (uint64_t)(secs * 1e9);
    while (atomic_load(&s->arrived) < live && bench_now_ns() < until)
        bench_sleep_ns(1000000);
    /* the readers may still add to their histograms: let them settle */
    bench_sleep_ns(20000000);
    for (int k = 0; k < BENCH_RSET_THREADS; k++)
        bench_hist_merge(&h, &s->t[k].hist);
    out.arrived = atomic_load(&s->arrived);
    out.p50 = bench_hist_pct_us(&h, 50);
    out.p99 = bench_hist_pct_us(&h, 99);
    if (out.arrived >= live && live > 0)
        out.ms_all = (double)h.max / 1e6;
    /* sockets that fell behind catch up on the count before the next */
    for (int i = 0; i < s->n; i++)
        if (atomic_load(&s->c[i].seen) < want)
            atomic_store(&s->c[i].seen, want);
    return out;
}
