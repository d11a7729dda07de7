/*
 * stream.c - the stream rows of `make bench` (SPEC §11, issue 26):
 * fan-out (N tail streams on one partition, a connection each as browsers
 * have, one push of one 256 B message: the time until every stream has
 * it), against NATS with N subscriptions on one subject (a connection
 * each, the same reader) receiving one publish; stream throughput (100
 * streams on 10 partitions while 8 connections push); and the memory an
 * idle stream costs, on a mayflyd of its own (node.c).
 *
 * Streams never end, so they are not read by the engine's request loop:
 * a reader set (rset.c) holds N sockets over two epoll threads and counts,
 * per socket, a marker string in what arrives (mayfly: "event: message",
 * NATS: "MSG "), after a ready marker ("event: open", the PONG that
 * follows the SUB).  Both systems go through the same reader.
 * A fan-out sample opens its set, runs its rounds and closes it, so that
 * mayfly's and NATS's sets alternate (main.c pairs them).
 * Locking: the reader threads share atomics with the main thread, and
 * their round histograms, which it clears before a round's message goes
 * out and reads once every socket has it (and 20 ms more).
 */
#include <sys/epoll.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/bench/bench.h"

#define SUB_PATH "/api/v1/ephemeral/subscribe?"

/* ---- fan-out -------------------------------------------------------- */

/* A fan-out sample's set and sending connection. */
struct fan {
    struct bench_rset *set;
    int fd; /* the pushing or publishing connection */
    struct bench_buf in, chunk, req;
    char err[200];
};

static struct fan mfan = {.fd = -1}, nfan = {.fd = -1};
static int fan_tag;

/* fan_n - streams and subscriptions of the fan-out row. */
static int
fan_n(void)
{
    return bench_opt.quick ? 2000 : bench_opt.parked;
}

/* mayfly_push1 - the fan-out's one push (arg: struct fan); 0 or -1. */
static int
mayfly_push1(void *arg)
{
    struct fan *f = arg;
    struct bench_reply r;

    if (write(f->fd, f->req.p, f->req.len) != (ssize_t)f->req.len ||
        bench_http_recv(f->fd, &f->in, &f->chunk, &r) != 0 || r.status != 201)
        return -1;
    return 0;
}

/* nats_pub1 - the fan-out's one publish (arg: struct fan); 0 or -1. */
static int
nats_pub1(void *arg)
{
    struct fan *f = arg;

    return write(f->fd, f->req.p, f->req.len) == (ssize_t)f->req.len ? 0 : -1;
}

/* streams_wait - until the server on port counts want streams open
 * (mayfly_streams), 10 s at most. */
static void
streams_wait(int port, int want)
{
    double open = -1;

    for (int i = 0; i < 200 && open != want; i++) {
        if (bench_metric(port, "mayfly_streams", &open) != 0)
            return;
        if (open != want)
            bench_sleep_ns(50000000);
    }
}

/* bench_stream_mem - see bench.h: the node's PSS before and after n idle
 * tail streams open (one partition), on a mayflyd of its own (node.c). */
void
bench_stream_mem(void)
{
    struct bench_buf req = {0};
    struct bench_mem m0, m1;
    struct bench_node node;
    struct bench_rset *s;
    char path[160], what[72], err[200] = "";
    int n = fan_n();

    snprintf(what, sizeof(what), "idle tail stream (%d open, one partition)",
             n);
    if (bench_node_start(&node, "mem-stream", err, sizeof(err)) != 0) {
        bench_row_fail("stream-mem", "memory", "mayfly", what, err);
        return;
    }
    snprintf(path, sizeof(path), SUB_PATH "queue=idle%d&partition=p0",
             (int)(bench_now_ns() / 1000 % 1000000));
    bench_http_request(&req, "GET", path, NULL, 0);
    bench_mem_settle(&node, &m0);
    s = bench_rset_open(n, node.port, req.p, req.len, err, sizeof(err));
    s->ready = "event: open";
    s->marker = "event: message";
    if (err[0] == '\0' && bench_rset_start(s) != 0)
        snprintf(err, sizeof(err), "no reader threads");
    if (err[0] == '\0' && bench_rset_wait_ready(s, 60) < n)
        snprintf(err, sizeof(err), "only %d of %d streams opened",
                 atomic_load(&s->nready), n);
    if (err[0] == '\0') {
        streams_wait(node.port, n);
        bench_mem_settle(&node, &m1);
        bench_mem_row_pss("stream-mem", what, &m0, &m1, n, "<= 16384");
    } else {
        bench_row_fail("stream-mem", "memory", "mayfly", what, err);
    }
    bench_node_stop(&node);
    bench_rset_close(s);
    bench_buf_free(&req);
}

/* mayfly_fan_open - n tail streams on one partition, and the pushing
 * connection. */
static int
mayfly_fan_open(void)
{
    struct bench_buf req = {0};
    char path[160];
    int n = fan_n();

    fan_tag = (int)(bench_now_ns() / 1000 % 1000000) + 1;
    snprintf(path, sizeof(path), SUB_PATH "queue=fan%d&partition=p0", fan_tag);
    bench_http_request(&req, "GET", path, NULL, 0);
    /* those the rows before left count against stream_max */
    streams_wait(bench_opt.mport, 0);
    mfan.set = bench_rset_open(n, bench_opt.mport, req.p, req.len, mfan.err,
                               sizeof(mfan.err));
    bench_buf_free(&req);
    mfan.set->ready = "event: open";
    mfan.set->marker = "event: message";
    if (bench_rset_start(mfan.set) != 0 || mfan.err[0] != '\0')
        return -1;
    if (bench_rset_wait_ready(mfan.set, 60) < mfan.set->n) {
        snprintf(mfan.err, sizeof(mfan.err), "only %d of %d streams opened",
                 atomic_load(&mfan.set->nready), mfan.set->n);
        return -1;
    }
    streams_wait(bench_opt.mport, n);
    mfan.fd = bench_tcp_connect(bench_opt.mport);
    if (mfan.fd < 0) {
        snprintf(mfan.err, sizeof(mfan.err), "push connection refused");
        return -1;
    }
    snprintf(path, sizeof(path), "fan%d", fan_tag);
    bench_push_req(&mfan.req, NULL, path, "p0", &bench_msgs1);
    return 0;
}

/* nats_fan_open - n subscriptions to one subject, a connection each, and
 * the publishing connection, over NATS's text protocol. */
static int
nats_fan_open(void)
{
    char req[200];
    int n = fan_n(), len;
    char line[64];

    len = snprintf(req, sizeof(req),
                   "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n"
                   "SUB fan.%d 1\r\nPING\r\n",
                   fan_tag);
    nfan.set = bench_rset_open(n, bench_opt.nport, req, (size_t)len, nfan.err,
                               sizeof(nfan.err));
    nfan.set->ready = "PONG\r\n";
    nfan.set->marker = "MSG ";
    nfan.set->ping = "PING\r\n";
    nfan.set->pong = "PONG\r\n";
    if (bench_rset_start(nfan.set) != 0 || nfan.err[0] != '\0')
        return -1;
    if (bench_rset_wait_ready(nfan.set, 60) < nfan.set->n) {
        snprintf(nfan.err, sizeof(nfan.err),
                 "only %d of %d subscriptions confirmed",
                 atomic_load(&nfan.set->nready), nfan.set->n);
        return -1;
    }
    /* the publisher: its CONNECT answered (PONG) before the first PUB */
    len = snprintf(req, sizeof(req),
                   "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n"
                   "PING\r\n");
    nfan.fd = bench_tcp_connect(bench_opt.nport);
    if (nfan.fd < 0 || write(nfan.fd, req, (size_t)len) != len) {
        snprintf(nfan.err, sizeof(nfan.err), "publisher not connected");
        return -1;
    }
    for (size_t got = 0; memmem(req, got, "PONG", 4) == NULL;) {
        ssize_t k = read(nfan.fd, req + got, sizeof(req) - 1 - got);
        if (k <= 0) {
            snprintf(nfan.err, sizeof(nfan.err), "publisher not answered");
            return -1;
        }
        got += (size_t)k;
        if (got > sizeof(req) - 8) { /* the INFO line: keep its tail */
            memmove(req, req + got - 8, 8);
            got = 8;
        }
    }
    snprintf(line, sizeof(line), "PUB fan.%d %d\r\n", fan_tag, BENCH_PAYLOAD);
    bench_buf_str(&nfan.req, line);
    bench_buf_add(&nfan.req, bench_payload, BENCH_PAYLOAD);
    bench_buf_str(&nfan.req, "\r\n");
    return 0;
}

/* fan_close - a fan-out set and its sending connection, closed (the
 * client's descriptors cannot hold two sets of 10,000 at once). */
static void
fan_close(struct fan *f)
{
    bench_rset_close(f->set);
    f->set = NULL;
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    bench_buf_free(&f->in);
    bench_buf_free(&f->chunk);
    bench_buf_free(&f->req);
    f->err[0] = '\0';
}

/* cmp_round - qsort order of rounds by time to all. */
static int
cmp_round(const void *a, const void *b)
{
    double x = ((const struct bench_round *)a)->ms_all,
           y = ((const struct bench_round *)b)->ms_all;

    return x < y ? -1 : x > y;
}

/* fan_row - one sample of a fan-out row: rounds pushes, the median. */
static void
fan_row(struct fan *f, int (*open)(void), int (*send)(void *), int nats)
{
    struct bench_row row = {0};
    struct bench_round r[9];
    int rounds = bench_opt.quick ? 3 : 5, ok = 0, n = fan_n();

    snprintf(row.key, sizeof(row.key), nats ? "fanout-nats" : "fanout");
    snprintf(row.scenario, sizeof(row.scenario), "stream");
    snprintf(row.system, sizeof(row.system), nats ? "nats" : "mayfly");
    snprintf(row.unit, sizeof(row.unit), "ms to all");
    if (nats) {
        snprintf(
            row.variant, sizeof(row.variant),
            "%d subscriptions (a conn each), 1 subject, 1 publish of 256 B", n);
        snprintf(row.ref, sizeof(row.ref), "fanout");
    } else {
        snprintf(row.variant, sizeof(row.variant),
                 "%d tail streams (a conn each), 1 partition, 1 push of "
                 "256 B",
                 n);
    }
    if (open() != 0 || f->err[0] != '\0') {
        bench_row_fail(row.key, row.scenario, row.system, row.variant,
                       f->err[0] ? f->err : "could not open");
        fan_close(f);
        return;
    }
    for (int i = 0; i < rounds; i++) {
        r[ok] = bench_rset_round(f->set, send, f, bench_opt.quick ? 5 : 20);
        if (r[ok].ms_all > 0)
            ok++;
        bench_sleep_ns(50000000);
    }
    if (ok == 0) {
        snprintf(row.note, sizeof(row.note),
                 "no round reached all %d (the last: %ld)", f->set->n,
                 r[0].arrived);
        bench_row_add(&row);
        fan_close(f);
        return;
    }
    fan_close(f);
    qsort(r, (size_t)ok, sizeof(r[0]), cmp_round);
    row.ok = 1;
    row.rate = r[ok / 2].ms_all;
    row.p50_us = r[ok / 2].p50;
    row.p99_us = r[ok / 2].p99;
    snprintf(row.note, sizeof(row.note),
             "median of %d rounds (%d reached all); p50/p99 per %s from the "
             "%s; ratio: mayfly's / NATS's time to all",
             rounds, ok, nats ? "subscription" : "stream",
             nats ? "publish written" : "push written");
    bench_row_add(&row);
}

/* bench_stream_fanout - see bench.h. */
void
bench_stream_fanout(int nats)
{
    bench_payload_init();
    if (nats)
        fan_row(&nfan, nats_fan_open, nats_pub1, 1);
    else
        fan_row(&mfan, mayfly_fan_open, mayfly_push1, 0);
}

/* ---- throughput ----------------------------------------------------- */

/* The throughput's pushes: bench_role_push (sc first, as its ud) held
 * back while the streams are more than BACKLOG events a stream behind,
 * so that what is measured is delivery, not stream_buffer_bytes
 * overflowing under pushes no stream can take as fast. */
#define BACKLOG 500

struct tput_sc {
    struct bench_push_sc push;
    struct bench_rset *set;
    long base; /* set->events when the pushes began */
};

/* tput_credit - wait (in the loop's thread) until the streams are within
 * BACKLOG events of the pushes answered, or the run stops. */
static void
tput_credit(struct bench_conn *c)
{
    struct tput_sc *t = c->ud;
    long n = t->set->n;

    while (!atomic_load(&c->loop->run->stop) &&
           atomic_load(&t->push.pushed) * n -
                   (atomic_load(&t->set->events) - t->base) >
               BACKLOG * n)
        bench_sleep_ns(50000);
}

static int
tput_start(struct bench_conn *c)
{
    tput_credit(c);
    return bench_role_push.start(c);
}

static int
tput_reply(struct bench_conn *c, const struct bench_reply *r)
{
    tput_credit(c);
    return bench_role_push.reply(c, r);
}

static const struct bench_role role_tput = {tput_start, tput_reply};

/* bench_stream_all - see bench.h: throughput: 100 streams, each on partitions p0-p9
 * of one queue (policy dropOldest: no reset, which would drop what a
 * round has not read yet), while 8 connections push one 256 B message at
 * a time to p0-p7 of it, held back BACKLOG events a stream ahead; events
 * the streams received a second.  One message a push: a push of 100 is 10,000 events
 * at once, and streams pass stream_buffer_bytes (overflow) faster than
 * any reader drains them. */
void
bench_stream_all(void)
{
    struct tput_sc *t = calloc(1, sizeof(*t));
    struct bench_push_sc *sc = &t->push;
    struct bench_run *run = bench_run_new(bench_opt.threads);
    struct bench_buf req = {0};
    struct bench_row row = {0};
    struct bench_rset *s;
    char queue[40], part[16], body[96], err[200] = "", path[1024];
    long e0, e1, pushed;
    uint64_t t0, t1;
    int nstreams = 100, ok = 1, n, status = 0;

    bench_payload_init();
    snprintf(queue, sizeof(queue), "stput%d",
             (int)(bench_now_ns() / 1000 % 1000000));
    snprintf(row.key, sizeof(row.key), "stream-tput");
    snprintf(row.scenario, sizeof(row.scenario), "stream");
    snprintf(row.system, sizeof(row.system), "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "%d streams on 10 partitions, 8 conns push 1 x 256 B", nstreams);
    snprintf(row.unit, sizeof(row.unit), "events/s");
    /* subs=[["q","p0"],...], URL-encoded */
    n = snprintf(path, sizeof(path), SUB_PATH "subs=%%5B");
    for (int i = 0; i < 10; i++)
        n += snprintf(path + n, sizeof(path) - (size_t)n,
                      "%s%%5B%%22%s%%22%%2C%%22p%d%%22%%5D", i ? "%2C" : "",
                      queue, i);
    snprintf(path + n, sizeof(path) - (size_t)n, "%%5D");
    bench_http_request(&req, "GET", path, NULL, 0);
    s = bench_rset_open(nstreams, bench_opt.mport, req.p, req.len, err,
                        sizeof(err));
    s->ready = "event: open";
    s->marker = "event: message";
    if (err[0] == '\0' && bench_rset_start(s) != 0)
        snprintf(err, sizeof(err), "no reader threads");
    if (err[0] == '\0' && bench_rset_wait_ready(s, 30) < nstreams)
        snprintf(err, sizeof(err), "only %d of %d streams opened",
                 atomic_load(&s->nready), nstreams);
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"options\":{\"policy\":\"dropOldest\"}}",
             queue);
    if (err[0] == '\0' &&
        (bench_call(bench_opt.mport, "POST", "/api/v1/ephemeral/configure",
                    body, &status) != 0 ||
         status != 201))
        snprintf(err, sizeof(err), "configure answered %d", status);
    t->set = s;
    t->base = atomic_load(&s->events);
    for (int i = 0; i < BENCH_PARTS; i++) {
        snprintf(part, sizeof(part), "p%d", i);
        bench_push_req(&sc->req[i], NULL, queue, part, &bench_msgs1);
    }
    /* no reset (it would drop what a round has not read yet): the queue
     * drops its oldest past its bound, long delivered (BACKLOG) */
    sc->reset_every = INT_MAX;
    snprintf(body, sizeof(body), "{\"queue\":\"%s\"}", queue);
    bench_http_request(&sc->reset, "POST", "/api/v1/ephemeral/reset", body,
                       strlen(body));
    for (int i = 0; i < 8 && ok && err[0] == '\0'; i++)
        ok = bench_run_add(run, BENCH_HTTP, bench_opt.mport, &role_tput, t) !=
             NULL;
    if (err[0] == '\0' && ok && bench_run_start(run) == 0) {
        bench_sleep_ns((uint64_t)(bench_opt.warm * 1e9));
        e0 = atomic_load(&s->events);
        pushed = atomic_load(&sc->pushed);
        t0 = bench_now_ns();
        bench_sleep_ns((uint64_t)(bench_opt.secs * 1e9));
        e1 = atomic_load(&s->events);
        pushed = atomic_load(&sc->pushed) - pushed;
        t1 = bench_now_ns();
        atomic_store(&run->stop, 1);
        bench_run_join(run);
        row.ok = e1 > e0 && run->errors == 0;
        row.rate = (double)(e1 - e0) * 1e9 / (double)(t1 - t0);
        snprintf(row.note, sizeof(row.note),
                 "pushes meanwhile: %.0f msg/s (each to every stream); %ld "
                 "streams overflowed (stream_buffer_bytes)%s%.60s",
                 (double)pushed * 1e9 / (double)(t1 - t0),
                 atomic_load(&s->overflows), run->errors ? "; push: " : "",
                 run->errors ? run->err : "");
    } else {
        snprintf(row.note, sizeof(row.note), "%s",
                 err[0] ? err : "pushers not started");
    }
    bench_row_add(&row);
    bench_rset_close(s);
    bench_run_free(run);
    for (int i = 0; i < BENCH_PARTS; i++)
        bench_buf_free(&sc->req[i]);
    bench_buf_free(&sc->reset);
    bench_buf_free(&req);
    free(t);
}
