/*
 * presence.c - the presence rows of `make bench` (SPEC §12, issue 27):
 *
 * - churn: on one node holding 10,000 call members in 100 channels (100
 *   each), 16 connections leave and enter them again by call, each
 *   channel's events watched by a stream of its own (100 streams); the
 *   rate is enters and leaves a second, each one event delivered.  Against
 *   NATS doing the same fan-out of events: the event published to the
 *   channel's subject (100 subjects, a subscriber each), in pairs with
 *   mayfly's samples (main.c).
 * - list and count: a channel of 10,000 members (presence_max_members)
 *   listed whole, page after page of the default 1,000, and counted
 *   (count=true), on one connection.
 * - memory: mayfly_memory_used_bytes and the server's PSS around entering
 *   10,000 members as the churn's are, on a mayflyd of its own (node.c).
 *
 * Both churns hold their senders back while the watchers are more than
 * WINDOW events a watcher behind, so what is measured is events that
 * reach their watchers, not buffers filling (a stream past
 * stream_buffer_bytes is ended, a NATS subscriber past its pending limit
 * is cut off).  The watchers are a reader set (rset.c), as the stream
 * rows' are; both systems go through the same reader.
 * Locking: the engine's loops and the NATS publisher threads share only
 * the atomics of struct churn and of the reader set.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/bench/bench.h"

#define CHANNELS 100   /* the churn's channels, a watcher each */
#define MEMBERS  10000 /* the churn's members, MEMBERS / CHANNELS a channel */
#define CONNS    16    /* the churn's calling connections */
#define LISTED   10000 /* members of the listed channel */
#define WINDOW   10    /* events a watcher may be behind, on average */
#define TTL_S    3600  /* a call member's ttlSeconds: the whole run */

#define PRES_PATH "/api/v1/presence/"
#define SUB_PATH  "/api/v1/ephemeral/subscribe?presence_events="

static int tag; /* sets this run's channel names apart */

/* A fill (every member entered once: k claims member k) or a churn. */
struct churn {
    char prefix[32]; /* channel k is prefix and k */
    int nchan;       /* member j is in channel j % nchan */
    long total;      /* members */
    atomic_long next;
    long cursor[CONNS];     /* churn: connection i's member, in its share */
    struct bench_rset *set; /* the watchers */
    long base;              /* set->events when the sample began */
    atomic_long evented;    /* calls answered that made an event */
    atomic_long quiet;      /* answered without one (a renew, a leave of
                                a member not there) */
    atomic_int stop;        /* NATS: the publishers stop */
    struct bench_buf pub[CHANNELS]; /* NATS: the PUB of an event a subject */
    atomic_long published;
};

/* The churn's members (entered once, by bench_presence_all or the first
 * churn sample) and its channels' prefix. */
static struct churn *pop;

static void
tag_init(void)
{
    bench_payload_init();
    if (tag == 0)
        tag = (int)(bench_now_ns() / 1000 % 1000000) + 1;
}

/* call_req - an enter (or a leave) of member j of sc into out. */
static void
call_req(struct bench_buf *out, const struct churn *sc, long j, int enter)
{
    char body[256];
    int n;

    if (enter)
        n = snprintf(body, sizeof(body),
                     "{\"channel\":\"%s%ld\",\"member\":\"u%ld\",\"data\":{"
                     "\"name\":\"user-%05ld\"},\"ttlSeconds\":%d}",
                     sc->prefix, j % sc->nchan, j, j, TTL_S);
    else
        n = snprintf(body, sizeof(body),
                     "{\"channel\":\"%s%ld\",\"member\":\"u%ld\"}", sc->prefix,
                     j % sc->nchan, j);
    bench_http_request(out, "POST",
                       enter ? PRES_PATH "enter" : PRES_PATH "leave", body,
                       (size_t)n);
}

/* ---- fill ----------------------------------------------------------- */

/* Claim the next member and enter it; 1 when none is left. */
static int
fill_start(struct bench_conn *c)
{
    struct churn *sc = c->ud;
    long k = atomic_fetch_add(&sc->next, 1);

    if (k >= sc->total)
        return 1;
    c->t0 = bench_now_ns();
    call_req(&c->out, sc, k, 1);
    return 0;
}

/* An enter answered: it must have entered (each member is new). */
static int
fill_reply(struct bench_conn *c, const struct bench_reply *r)
{
    if (r->status != 200 ||
        memmem(r->body, r->len, "\"action\":\"enter\"", 16) == NULL) {
        bench_fail(c, "enter answered %d: %.*s", r->status,
                   (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    bench_record(c, c->t0, 1);
    return fill_start(c);
}

static const struct bench_role role_fill = {fill_start, fill_reply};

/* fill - enter every member of sc on the node at port with CONNS
 * connections (120 s at most); 0, or -EIO with why in err. */
static int
fill(struct churn *sc, int port, char *err, size_t errlen)
{
    struct bench_run *run = bench_run_new(bench_opt.threads);
    int ok = 1, rc = 0;

    atomic_store(&sc->next, 0);
    atomic_store(&run->deadline, bench_now_ns() + 120000000000ull);
    for (int i = 0; i < CONNS && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, port, &role_fill, sc) != NULL;
    if (ok && bench_run_start(run) == 0)
        bench_run_join(run);
    if (!ok || run->errors > 0 || run->ops != (uint64_t)sc->total) {
        snprintf(err, errlen, "fill: %llu of %ld entered%s%.150s",
                 (unsigned long long)run->ops, sc->total,
                 run->err[0] ? ": " : "", run->err);
        rc = -EIO;
    }
    bench_run_free(run);
    return rc;
}

/* population - the churn's members, entered once; NULL with err set. */
static struct churn *
population(char *err, size_t errlen)
{
    if (pop != NULL)
        return pop;
    tag_init();
    pop = calloc(1, sizeof(*pop));
    if (pop == NULL)
        exit(1);
    snprintf(pop->prefix, sizeof(pop->prefix), "pch%d-", tag);
    pop->nchan = CHANNELS;
    pop->total = MEMBERS;
    if (fill(pop, bench_opt.mport, err, errlen) != 0) {
        free(pop);
        pop = NULL;
    }
    return pop;
}

/* ---- churn ---------------------------------------------------------- */

/* credit - wait (in the caller's thread) until the watchers are within
 * WINDOW events a watcher of what was sent (sent: events made so far), or
 * stop is set. */
static void
credit(struct churn *sc, atomic_long *sent, atomic_int *stop)
{
    while (!atomic_load(stop) &&
           atomic_load(sent) - (atomic_load(&sc->set->events) - sc->base) >
               (long)WINDOW * sc->set->n)
        bench_sleep_ns(50000);
}

/* The connection's next call: c->state 1 enters its member, 0 leaves the
 * next one.  A connection has the members j with j % CONNS == its id; a
 * sample starts with an enter of its member, which mends a leave the
 * sample before stopped after. */
static int
churn_send(struct bench_conn *c)
{
    struct churn *sc = c->ud;
    long share = sc->total / CONNS, j;

    credit(sc, &sc->evented, &c->loop->run->stop);
    if (c->state == 0)
        sc->cursor[c->id] = (sc->cursor[c->id] + 1) % share;
    j = c->id + (long)CONNS * sc->cursor[c->id];
    c->t0 = bench_now_ns();
    call_req(&c->out, sc, j, c->state);
    return 0;
}

static int
churn_start(struct bench_conn *c)
{
    c->state = 1;
    return churn_send(c);
}

/* A call answered: counted when it made an event (an enter, a leave of a
 * member that was there); then the other call. */
static int
churn_reply(struct bench_conn *c, const struct bench_reply *r)
{
    struct churn *sc = c->ud;
    int made;

    if (r->status != 200) {
        bench_fail(c, "%s answered %d: %.*s", c->state ? "enter" : "leave",
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    made = c->state ? memmem(r->body, r->len, "\"action\":\"enter\"", 16) != 0
                    : memmem(r->body, r->len, "\"left\":true", 11) != 0;
    if (made) {
        atomic_fetch_add(&sc->evented, 1);
        bench_record(c, c->t0, 1);
    } else {
        atomic_fetch_add(&sc->quiet, 1);
    }
    c->state = !c->state;
    return churn_send(c);
}

static const struct bench_role role_churn = {churn_start, churn_reply};

/* watchers - CHANNELS sockets to port, socket k sent req(k), counting
 * marker after ready; NULL with err set when not all are ready. */
static struct bench_rset *
watchers(int port, void (*req)(struct bench_buf *, int), const char *ready,
         const char *marker, char *err, size_t errlen)
{
    struct bench_buf b[CHANNELS] = {{0}};
    const char *p[CHANNELS];
    size_t len[CHANNELS];
    struct bench_rset *s;

    for (int k = 0; k < CHANNELS; k++) {
        req(&b[k], k);
        p[k] = b[k].p;
        len[k] = b[k].len;
    }
    s = bench_rset_open_each(CHANNELS, port, p, len, CHANNELS, err, errlen);
    for (int k = 0; k < CHANNELS; k++)
        bench_buf_free(&b[k]);
    s->ready = ready;
    s->marker = marker;
    if (err[0] == '\0' && bench_rset_start(s) != 0)
        snprintf(err, errlen, "no reader threads");
    if (err[0] == '\0' && bench_rset_wait_ready(s, 30) < CHANNELS)
        snprintf(err, errlen, "only %d of %d watchers ready",
                 atomic_load(&s->nready), CHANNELS);
    if (err[0] != '\0') {
        bench_rset_close(s);
        return NULL;
    }
    return s;
}

/* mayfly_watch - the stream watching channel k's events. */
static void
mayfly_watch(struct bench_buf *out, int k)
{
    char path[128];

    snprintf(path, sizeof(path), SUB_PATH "%s%d", pop->prefix, k);
    bench_http_request(out, "GET", path, NULL, 0);
}

/* nats_watch - the subscription to channel k's subject. */
static void
nats_watch(struct bench_buf *out, int k)
{
    bench_buf_printf(out,
                     "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n"
                     "SUB pres.%d.%d 1\r\nPING\r\n",
                     tag, k);
}

/* churn_row - the row's names. */
static void
churn_row(struct bench_row *row, int nats)
{
    snprintf(row->key, sizeof(row->key),
             nats ? "presence-churn-nats" : "presence-churn");
    snprintf(row->scenario, sizeof(row->scenario), "presence");
    snprintf(row->system, sizeof(row->system), nats ? "nats" : "mayfly");
    snprintf(row->unit, sizeof(row->unit), "op/s");
    if (nats) {
        snprintf(row->variant, sizeof(row->variant),
                 "publish of each event, %d subjects, a subscriber each, %d "
                 "conns",
                 CHANNELS, bench_opt.threads);
        snprintf(row->ref, sizeof(row->ref), "presence-churn");
    } else {
        snprintf(row->variant, sizeof(row->variant),
                 "leave + enter by call, %d members in %d channels, %d conns",
                 MEMBERS, CHANNELS, CONNS);
    }
}

/* mayfly_churn - one sample of the mayfly row. */
static void
mayfly_churn(void)
{
    struct bench_row row = {0};
    struct bench_run *run;
    struct churn *sc;
    char err[200] = "";
    long e0, e1, q;
    int ok = 1;

    churn_row(&row, 0);
    if ((sc = population(err, sizeof(err))) == NULL ||
        (sc->set = watchers(bench_opt.mport, mayfly_watch, "event: open",
                            "event: presence", err, sizeof(err))) == NULL) {
        bench_row_fail(row.key, row.scenario, row.system, row.variant, err);
        return;
    }
    sc->base = atomic_load(&sc->set->events);
    atomic_store(&sc->evented, 0);
    atomic_store(&sc->quiet, 0);
    run = bench_run_new(bench_opt.threads);
    for (int i = 0; i < CONNS && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, bench_opt.mport, &role_churn, sc) !=
             NULL;
    atomic_store(&run->t_begin, UINT64_MAX);
    if (ok && bench_run_start(run) == 0) {
        bench_sleep_ns((uint64_t)(bench_opt.warm * 1e9));
        atomic_store(&run->t_end, UINT64_MAX);
        bench_sys_read(&run->sys_begin);
        e0 = atomic_load(&sc->set->events);
        atomic_store(&run->t_begin, bench_now_ns());
        bench_sleep_ns((uint64_t)(bench_opt.secs * 1e9));
        atomic_store(&run->t_end, bench_now_ns());
        e1 = atomic_load(&sc->set->events);
        bench_sys_read(&run->sys_end);
        atomic_store(&run->stop, 1);
        bench_run_join(run);
        bench_row_from_run(&row, run, bench_run_secs(run), "op/s");
        q = atomic_load(&sc->quiet);
        if (row.ok)
            snprintf(row.note, sizeof(row.note),
                     "events delivered %.0f/s, a watching stream a channel; "
                     "%ld streams overflowed; %ld calls made no event",
                     (double)(e1 - e0) / bench_run_secs(run),
                     atomic_load(&sc->set->overflows), q);
        bench_row_cost(&row, &run->sys_begin, &run->sys_end,
                       bench_run_secs(run), "call");
    } else {
        snprintf(row.note, sizeof(row.note), "callers not started: %s",
                 run->err);
    }
    bench_row_add(&row);
    bench_run_free(run);
    bench_rset_close(sc->set);
    sc->set = NULL;
}

/* nats_connect - a publishing connection, its CONNECT answered; -1 if
 * not. */
static int
nats_connect(void)
{
    static const char hello[] =
        "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nPING\r\n";
    char buf[512];
    size_t got = 0;
    int fd = bench_tcp_connect(bench_opt.nport);

    if (fd < 0)
        return -1;
    if (write(fd, hello, sizeof(hello) - 1) != (ssize_t)sizeof(hello) - 1) {
        close(fd);
        return -1;
    }
    /* the INFO line, then PONG: keep the tail of what came */
    while (memmem(buf, got, "PONG", 4) == NULL) {
        ssize_t k = read(fd, buf + got, sizeof(buf) - got);
        if (k <= 0) {
            close(fd);
            return -1;
        }
        got += (size_t)k;
        if (got > sizeof(buf) - 8) {
            memmove(buf, buf + got - 8, 8);
            got = 8;
        }
    }
    return fd;
}

/* A NATS publisher: its connection and the churn. */
struct publisher {
    struct churn *sc;
    int fd;
    int first; /* the subject it starts at */
    pthread_t th;
};

/* publisher_main - publish an event at a time, a write each, to the
 * subjects in turn, held back by credit. */
static void *
publisher_main(void *arg)
{
    struct publisher *p = arg;
    struct churn *sc = p->sc;

    for (long k = p->first; !atomic_load(&sc->stop); k++) {
        const struct bench_buf *b = &sc->pub[k % CHANNELS];
        credit(sc, &sc->published, &sc->stop);
        if (atomic_load(&sc->stop) ||
            write(p->fd, b->p, b->len) != (ssize_t)b->len)
            break;
        atomic_fetch_add(&sc->published, 1);
    }
    return NULL;
}

/* nats_churn - one sample of the NATS row: the events mayfly's churn
 * makes ({"channel", "action", "member", "data"}, about the size of
 * mayfly's), published by bench_opt.threads connections. */
static void
nats_churn(void)
{
    struct churn *sc = calloc(1, sizeof(*sc));
    struct publisher p[4];
    struct bench_sys s0, s1;
    struct bench_row row = {0};
    char err[200] = "", ev[160];
    int np = bench_opt.threads < 4 ? bench_opt.threads : 4, started = 0;
    long e0 = 0, e1 = 0, p0 = 0, p1 = 0;
    uint64_t t0 = 0, t1 = 1;

    tag_init();
    churn_row(&row, 1);
    if (sc == NULL)
        exit(1);
    for (int k = 0; k < CHANNELS; k++) {
        int n = snprintf(ev, sizeof(ev),
                         "{\"channel\":\"pch%d-%d\",\"action\":\"enter\","
                         "\"member\":\"u%05d\",\"data\":{\"name\":\"user-"
                         "%05d\"}}",
                         tag, k, k, k);
        bench_buf_printf(&sc->pub[k], "PUB pres.%d.%d %d\r\n", tag, k, n);
        bench_buf_add(&sc->pub[k], ev, (size_t)n);
        bench_buf_str(&sc->pub[k], "\r\n");
    }
    sc->set = watchers(bench_opt.nport, nats_watch, "PONG\r\n", "MSG ", err,
                       sizeof(err));
    if (sc->set != NULL) {
        sc->set->ping = "PING\r\n";
        sc->set->pong = "PONG\r\n";
        sc->base = atomic_load(&sc->set->events);
    }
    for (int i = 0; i < np && sc->set != NULL && err[0] == '\0'; i++) {
        p[i] = (struct publisher){
            .sc = sc, .fd = nats_connect(), .first = i * CHANNELS / np};
        if (p[i].fd < 0)
            snprintf(err, sizeof(err), "publisher %d not connected", i);
        else if (pthread_create(&p[i].th, NULL, publisher_main, &p[i]) != 0)
            snprintf(err, sizeof(err), "no publisher thread");
        else
            started++;
        if (err[0] != '\0' && p[i].fd >= 0)
            close(p[i].fd);
    }
    if (err[0] == '\0') {
        bench_sleep_ns((uint64_t)(bench_opt.warm * 1e9));
        bench_sys_read(&s0);
        e0 = atomic_load(&sc->set->events);
        p0 = atomic_load(&sc->published);
        t0 = bench_now_ns();
        bench_sleep_ns((uint64_t)(bench_opt.secs * 1e9));
        e1 = atomic_load(&sc->set->events);
        p1 = atomic_load(&sc->published);
        t1 = bench_now_ns();
        bench_sys_read(&s1);
    }
    atomic_store(&sc->stop, 1);
    for (int i = 0; i < started; i++) {
        pthread_join(p[i].th, NULL);
        close(p[i].fd);
    }
    if (err[0] == '\0') {
        double secs = (double)(t1 - t0) / 1e9;
        int cut = 0;
        for (int i = 0; i < sc->set->n; i++)
            cut += sc->set->c[i].ended;
        row.ok = e1 > e0;
        row.rate = (double)(e1 - e0) / secs;
        snprintf(row.note, sizeof(row.note),
                 "rate: messages delivered; published %.0f/s, a write each; "
                 "%ld subscribers cut off",
                 (double)(p1 - p0) / secs, (long)cut);
        bench_row_cost(&row, &s0, &s1, secs, "message");
        bench_row_add(&row);
    } else {
        bench_row_fail(row.key, row.scenario, row.system, row.variant, err);
    }
    bench_rset_close(sc->set);
    for (int k = 0; k < CHANNELS; k++)
        bench_buf_free(&sc->pub[k]);
    free(sc);
}

/* bench_presence_churn - see bench.h. */
void
bench_presence_churn(int nats)
{
    if (nats)
        nats_churn();
    else
        mayfly_churn();
}

/* ---- list and count ------------------------------------------------- */

/* The listed channel; c->a counts a listing's pages, c->b its members,
 * c->w1 holds the path of the next page. */
struct listing {
    char channel[40];
    int count; /* count=true instead of the pages */
};

/* The first page of a listing (or a count). */
static int
list_start(struct bench_conn *c)
{
    const struct listing *l = c->ud;

    c->a = c->b = 0;
    c->t0 = bench_now_ns();
    c->w1.len = 0;
    bench_buf_printf(&c->w1, PRES_PATH "%s%s", l->channel,
                     l->count ? "?count=true" : "");
    bench_buf_add(&c->w1, "", 1);
    bench_http_request(&c->out, "GET", c->w1.p, NULL, 0);
    return 0;
}

/* A page (or the count) answered: the next page after its last member,
 * or, at the last, the whole listing counted and the next begun. */
static int
list_reply(struct bench_conn *c, const struct bench_reply *r)
{
    const struct listing *l = c->ud;
    const char *next;
    size_t pos = 0, nlen;

    if (r->status != 200) {
        bench_fail(c, "listing answered %d: %.*s", r->status,
                   (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (l->count) {
        char want[32];
        snprintf(want, sizeof(want), "\"count\":%d}", LISTED);
        if (memmem(r->body, r->len, want, strlen(want)) == NULL) {
            bench_fail(c, "count: %.*s", (int)(r->len > 120 ? 120 : r->len),
                       r->body);
            return -1;
        }
        bench_record(c, c->t0, 1);
        return list_start(c);
    }
    c->a++;
    c->b += bench_json_count(r->body, r->len, "member");
    if (memmem(r->body, r->len, "\"truncated\":true", 16) != NULL &&
        bench_json_str(r->body, r->len, &pos, "next", &next, &nlen) == 0) {
        c->w1.len = 0;
        bench_buf_printf(&c->w1, PRES_PATH "%s?after=%.*s", l->channel,
                         (int)nlen, next);
        bench_buf_add(&c->w1, "", 1);
        bench_http_request(&c->out, "GET", c->w1.p, NULL, 0);
        return 0;
    }
    if (c->b != LISTED) {
        bench_fail(c, "a listing of %ld members in %ld pages, not %d", c->b,
                   c->a, LISTED);
        return -1;
    }
    bench_record(c, c->t0, 1);
    return list_start(c);
}

static const struct bench_role role_list = {list_start, list_reply};

/* list_rows - fill a channel to LISTED members, then time its listing
 * and its count on one connection each. */
static void
list_rows(void)
{
    struct churn *sc = calloc(1, sizeof(*sc));
    struct listing l = {0};
    char err[200] = "";

    if (sc == NULL)
        exit(1);
    snprintf(sc->prefix, sizeof(sc->prefix), "plist%d-", tag);
    sc->nchan = 1;
    sc->total = LISTED;
    snprintf(l.channel, sizeof(l.channel), "%s0", sc->prefix);
    fill(sc, bench_opt.mport, err, sizeof(err));
    for (l.count = 0; l.count < 2; l.count++) {
        struct bench_row row = {0};
        struct bench_run *run = bench_run_new(1);

        snprintf(row.key, sizeof(row.key),
                 l.count ? "presence-count" : "presence-list");
        snprintf(row.scenario, sizeof(row.scenario), "presence");
        snprintf(row.system, sizeof(row.system), "mayfly");
        snprintf(row.variant, sizeof(row.variant),
                 l.count ? "count=true of a %d-member channel, 1 conn"
                         : "list a %d-member channel, all pages of 1000, 1 "
                           "conn",
                 LISTED);
        if (err[0] != '\0') {
            bench_row_fail(row.key, row.scenario, row.system, row.variant, err);
            bench_run_free(run);
            continue;
        }
        if (bench_run_add(run, BENCH_HTTP, bench_opt.mport, &role_list, &l) !=
            NULL)
            bench_run_timed(run, bench_opt.warm, bench_opt.secs);
        bench_row_from_run(&row, run, bench_run_secs(run),
                           l.count ? "count/s" : "list/s");
        if (row.ok)
            snprintf(row.note, sizeof(row.note),
                     l.count ? "p50/p99: one count"
                             : "p50/p99: one whole listing (%d requests)",
                     LISTED / 1000);
        bench_row_add(&row);
        bench_run_free(run);
    }
    free(sc);
}

/* ---- memory --------------------------------------------------------- */

/* bench_presence_mem - see bench.h: accounted bytes (the rate) and the
 * PSS around entering members as the churn's are, on a node of its own
 * (node.c). */
void
bench_presence_mem(void)
{
    struct churn *sc = calloc(1, sizeof(*sc));
    struct bench_node node;
    struct bench_mem m0, m1;
    struct bench_row row = {0};
    char err[200] = "no memory";

    tag_init();
    snprintf(row.key, sizeof(row.key), "presence-memory");
    snprintf(row.scenario, sizeof(row.scenario), "memory");
    snprintf(row.system, sizeof(row.system), "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "presence member by call (%d in %d channels, 21 B data)", MEMBERS,
             CHANNELS);
    snprintf(row.unit, sizeof(row.unit), "B/item");
    if (sc == NULL ||
        bench_node_start(&node, "mem-presence", err, sizeof(err)) != 0) {
        bench_row_fail(row.key, row.scenario, row.system, row.variant, err);
        free(sc);
        return;
    }
    snprintf(sc->prefix, sizeof(sc->prefix), "pmem%d-", tag);
    sc->nchan = CHANNELS;
    sc->total = MEMBERS;
    bench_mem_settle(&node, &m0);
    if (fill(sc, node.port, err, sizeof(err)) != 0) {
        bench_row_fail(row.key, row.scenario, row.system, row.variant, err);
        bench_node_stop(&node);
        free(sc);
        return;
    }
    bench_mem_settle(&node, &m1);
    bench_node_stop(&node);
    free(sc);
    row.ok = m0.acct_ok && m1.acct_ok;
    row.rate = (m1.acct - m0.acct) / MEMBERS;
    snprintf(row.note, sizeof(row.note),
             "accounted (mayfly_memory_used_bytes; with each channel's "
             "events queue, its last 64 kept 60 s); kernel PSS of a fresh "
             "mayflyd: %.0f B/item",
             (m1.pss - m0.pss) / MEMBERS);
    if (!row.ok)
        snprintf(row.note, sizeof(row.note),
                 "mayfly_memory_used_bytes not served");
    bench_row_add(&row);
}

/* bench_presence_all - see bench.h: the churn's members entered first,
 * so that the listing runs beside them as the churn does. */
void
bench_presence_all(void)
{
    char err[200];

    tag_init();
    if (population(err, sizeof(err)) == NULL)
        fprintf(stderr, "mayfly-bench: presence members: %s\n", err);
    list_rows();
}
