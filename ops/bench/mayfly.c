/*
 * mayfly.c - the mayfly side of mayfly-bench: the HTTP floor (against wrk),
 * push, drain, rpc, wake, inboxes and parked, plus the memory a held
 * message, an idle inbox and a parked pop cost, each read on a mayflyd of
 * its own (node.c).  The push, fill, drain and rpc request sequences are
 * roles.c's, which the cluster rows share.
 *
 * Scenario data behind conn->ud is written before a run starts and only
 * read by the loops, except the atomic counters that hand out work.
 * Errors: a scenario that cannot run becomes a row with a note.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/bench/bench.h"

#define WAIT_PATH "/api/v1/ephemeral/pop?"

static int run_tag;

/* The payloads (roles.c), and a tag that sets this run's names apart. */
static void
payload_init(void)
{
    bench_payload_init();
    if (run_tag == 0)
        run_tag = (int)(bench_now_ns() / 1000 % 1000000) + 1;
}

/* A blocking call on a fresh connection; 0 or -errno. The body of the
 * answer is copied to ans (if not NULL). */
static int
call_once(int port, const char *method, const char *path, const char *body,
          int *status, struct bench_buf *ans)
{
    struct bench_buf in = {0}, chunk = {0};
    struct bench_reply r = {0};
    int fd = bench_tcp_connect(port), rc;

    if (fd < 0)
        return fd;
    rc = bench_http_call(fd, &in, &chunk, method, path, body, &r);
    if (rc == 0) {
        *status = r.status;
        if (ans != NULL) {
            ans->len = 0;
            bench_buf_add(ans, r.body, r.len);
        }
    }
    close(fd);
    bench_buf_free(&in);
    bench_buf_free(&chunk);
    return rc;
}

/* bench_call - see bench.h. */
int
bench_call(int port, const char *method, const char *path, const char *body,
           int *status)
{
    return call_once(port, method, path, body, status, NULL);
}

/* Sum of every sample of metric name in GET /metrics; 0 or -errno
 * (-ENOENT when the server does not export it). */
int
bench_metric(int port, const char *name, double *val)
{
    struct bench_buf ans = {0};
    size_t nl = strlen(name);
    const char *p, *end, *v;
    int status = 0, found = 0, rc;

    rc = call_once(port, "GET", "/metrics", NULL, &status, &ans);
    if (rc == 0 && status != 200)
        rc = -EPROTO;
    *val = 0;
    for (p = ans.p; rc == 0 && p != NULL && p < ans.p + ans.len; p = end) {
        end = strchr(p, '\n');
        end = end ? end + 1 : ans.p + ans.len;
        if (strncmp(p, name, nl) != 0 || (p[nl] != ' ' && p[nl] != '{'))
            continue;
        v = p + nl;
        if (*v == '{')
            v = strchr(v, '}');
        if (v == NULL)
            continue;
        *val += strtod(v + 1, NULL);
        found = 1;
    }
    bench_buf_free(&ans);
    if (rc == 0 && !found)
        rc = -ENOENT;
    return rc;
}

/* GET path again and again (the HTTP floor). ud: the request bytes. */
static int
get_start(struct bench_conn *c)
{
    const struct bench_buf *req = c->ud;

    c->t0 = bench_now_ns();
    bench_send(c, req->p, req->len);
    return 0;
}

/* A GET answered: count it and send the next. */
static int
get_reply(struct bench_conn *c, const struct bench_reply *r)
{
    if (r->status != 200) {
        bench_fail(c, "GET answered %d", r->status);
        return -1;
    }
    bench_record(c, c->t0, 1);
    return get_start(c);
}

static const struct bench_role role_get = {get_start, get_reply};

/* Run wrk with the same threads and connections; rate and percentiles. */
static int
wrk_run(int port, const char *path, int conns, double secs, double *rate,
        double *p50, double *p99)
{
    char cmd[256], line[256], unit[8];
    double v;
    FILE *f;
    int got = 0;

    snprintf(cmd, sizeof(cmd),
             "wrk -t%d -c%d -d%ds --latency http://127.0.0.1:%d%s 2>&1",
             bench_opt.threads, conns, (int)(secs + 0.5), port, path);
    f = popen(cmd, "r");
    if (f == NULL)
        return -errno;
    *p50 = *p99 = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, " Requests/sec: %lf", rate) == 1)
            got = 1;
        if (sscanf(line, " 50%% %lf%7s", &v, unit) == 2)
            *p50 = strcmp(unit, "ms") == 0  ? v * 1000
                   : strcmp(unit, "s") == 0 ? v * 1e6
                                            : v;
        if (sscanf(line, " 99%% %lf%7s", &v, unit) == 2)
            *p99 = strcmp(unit, "ms") == 0  ? v * 1000
                   : strcmp(unit, "s") == 0 ? v * 1e6
                                            : v;
    }
    pclose(f);
    return got ? 0 : -EPROTO;
}

/* The generator alone against GET path, 16 connections; fills row. */
static void
http_gen(int port, const char *path, struct bench_row *row)
{
    struct bench_buf req = {0};
    struct bench_run *run = bench_run_new(bench_opt.threads);
    int ok = 1;

    bench_http_request(&req, "GET", path, NULL, 0);
    for (int i = 0; i < 16 && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, port, &role_get, &req) != NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    bench_row_from_run(row, run, bench_run_secs(run), "req/s");
    bench_row_cost(row, &run->sys_begin, &run->sys_end, bench_run_secs(run),
                   "request");
    bench_run_free(run);
    bench_buf_free(&req);
}

/* The generator and wrk in turn against one trivial endpoint, 16
 * connections each, one round (quick) or three (gen-wrk, wrk-gen,
 * gen-wrk); each keeps its best. */
void
bench_mayfly_http(const char *key, int port, const char *path,
                  const char *label)
{
    struct bench_row row = {0}, wrow = {0}, try;
    double rate = 0, p50 = 0, p99 = 0;
    int rounds = bench_opt.quick ? 1 : 3;

    /* 2 * rounds turns, gen and wrk alternating, each side first in turn */
    for (int t = 0; t < 2 * rounds; t++) {
        if ((t + t / 2) % 2 == 0) {
            memset(&try, 0, sizeof(try));
            http_gen(port, path, &try);
            if ((try.ok && try.rate > row.rate) || (t == 0 && !try.ok))
                row = try;
        } else if (wrk_run(port, path, 16, bench_opt.warm + bench_opt.secs,
                           &rate, &p50, &p99) == 0 &&
                   rate > wrow.rate) {
            wrow.ok = 1;
            wrow.rate = rate;
            wrow.p50_us = p50;
            wrow.p99_us = p99;
        }
    }
    snprintf(row.key, sizeof(row.key), "%s", key);
    snprintf(row.scenario, sizeof(row.scenario), "http");
    snprintf(row.system, sizeof(row.system), "mayfly-bench");
    snprintf(row.variant, sizeof(row.variant), "GET %s (%s), 16 conns", path,
             label);
    bench_row_add(&row);
    snprintf(wrow.key, sizeof(wrow.key), "%s-wrk", key);
    snprintf(wrow.scenario, sizeof(wrow.scenario), "http");
    snprintf(wrow.system, sizeof(wrow.system), "wrk");
    snprintf(wrow.variant, sizeof(wrow.variant), "GET %s (%s), 16 conns", path,
             label);
    snprintf(wrow.unit, sizeof(wrow.unit), "req/s");
    snprintf(wrow.ref, sizeof(wrow.ref), "%s", key);
    snprintf(wrow.note, sizeof(wrow.note),
             wrow.ok ? "ratio = mayfly-bench / wrk (must be >= 0.80); best "
                       "of %d alternating runs each"
                     : "wrk did not run",
             rounds);
    bench_row_add(&wrow);
}

/* server_note - append "mayflyd N ns CPU a message" to row's note for ns
 * of mayflyd's CPU over msgs messages (nothing when either is 0). */
static void
server_note(struct bench_row *row, uint64_t ns, uint64_t msgs)
{
    size_t n = strlen(row->note);

    if (ns > 0 && msgs > 0)
        snprintf(row->note + n, sizeof(row->note) - n,
                 "%smayflyd %.0f ns CPU a message", n ? "; " : "",
                 (double)ns / (double)msgs);
}

/* Timed pushes to queue with conns connections, over TLS with the token
 * to the TLS + auth node when tls is set, each message with a key of its
 * own when keyed; fills row. */
static void
push_timed(struct bench_row *row, const char *queue, int conns, int tls,
           int keyed)
{
    struct bench_push_sc *sc = calloc(1, sizeof(*sc));
    struct bench_run *run = bench_run_new(bench_opt.threads);
    const char *token = tls ? bench_opt.ttoken : NULL;
    char part[16], body[96];
    int ok = 1;

    for (int i = 0; i < BENCH_PARTS; i++) {
        snprintf(part, sizeof(part), "p%d", i);
        bench_push_req(&sc->req[i], token, queue, part,
                       keyed ? &bench_msgs100_keyed : &bench_msgs100);
    }
    sc->keyed = keyed;
    snprintf(body, sizeof(body), "{\"queue\":\"%s\"}", queue);
    bench_http_request_auth(&sc->reset, token, "POST",
                            "/api/v1/ephemeral/reset", body, strlen(body));
    for (int i = 0; i < conns && ok; i++)
        ok = bench_run_add(run, tls ? BENCH_HTTPS : BENCH_HTTP,
                           tls ? bench_opt.tport : bench_opt.mport,
                           &bench_role_push, sc) != NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    bench_row_from_run(row, run, bench_run_secs(run), "msg/s");
    if (row->ok && atomic_load(&sc->full) > 0)
        snprintf(row->note, sizeof(row->note),
                 "%ld pushes found the queue full (429) before a reset landed",
                 atomic_load(&sc->full));
    if (row->ok && !tls) /* resets included; --mayfly-pid is the plain node */
        server_note(row, run->sys_end.server_ns - run->sys_begin.server_ns,
                    (uint64_t)(row->rate * bench_run_secs(run)));
    bench_run_free(run);
    for (int i = 0; i < BENCH_PARTS; i++)
        bench_buf_free(&sc->req[i]);
    bench_buf_free(&sc->reset);
    free(sc);
}

/* Scenario push: 16 connections, 100 x 256 B per request, 8 partitions;
 * with tls, the same to the node whose client port speaks HTTPS and that
 * wants a token (its ratio: the plain row's rate over this one's). */
static void
mayfly_push(int tls)
{
    struct bench_row row = {0};
    char queue[40];

    snprintf(queue, sizeof(queue), "push%d%s", run_tag, tls ? "tls" : "");
    snprintf(row.key, sizeof(row.key), tls ? "push-tls-auth" : "push");
    snprintf(row.scenario, sizeof(row.scenario), "push");
    snprintf(row.system, sizeof(row.system), "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "100 x 256 B per request, 8 partitions, 16 conns%s",
             tls ? ", TLS + auth" : "");
    if (tls)
        snprintf(row.ref, sizeof(row.ref), "push");
    push_timed(&row, queue, 16, tls, 0);
    bench_row_add(&row);
}

/* Scenario push-keyed: what dedupe keys cost a push (SPEC §13).  The push
 * row's pushes (16 conns, 100 x 256 B, 8 partitions) into a queue declared
 * with dedupeSeconds, without keys (push-nokey) and with a key of its own
 * on every message (push-keyed, ratio to push-nokey), pair after pair as
 * the compared rows run (three, one with --quick).  Every key is new, so
 * each is stored, and each partition's window fills to its maxLength
 * (10,000 keys, trimmed oldest first): the push looks each key up in it. */
static void
mayfly_push_keyed(void)
{
    int pairs = bench_opt.quick ? 1 : 3, status = 0;
    char queue[40], body[160];

    snprintf(queue, sizeof(queue), "pushkeyed%d", run_tag);
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"options\":{\"dedupeSeconds\":600}}", queue);
    if (call_once(bench_opt.mport, "POST", "/api/v1/ephemeral/configure", body,
                  &status, NULL) != 0 ||
        status != 201) {
        bench_row_fail("push-keyed", "push", "mayfly",
                       "100 x 256 B, a key each, dedupeSeconds",
                       "configure of the queue failed");
        return;
    }
    for (int p = 0; p < pairs; p++)
        for (int keyed = 0; keyed <= 1; keyed++) {
            struct bench_row row = {0};
            snprintf(row.key, sizeof(row.key),
                     keyed ? "push-keyed" : "push-nokey");
            snprintf(row.scenario, sizeof(row.scenario), "push");
            snprintf(row.system, sizeof(row.system), "mayfly");
            snprintf(row.variant, sizeof(row.variant),
                     "100 x 256 B, 8 partitions, 16 conns, dedupeSeconds%s",
                     keyed ? ", a new key each" : ", no key");
            if (keyed)
                snprintf(row.ref, sizeof(row.ref), "push-nokey");
            push_timed(&row, queue, 16, 0, keyed);
            bench_row_add(&row);
        }
}

/*
 * Scenario backlog: pushes as in push (16 conns, 100 x 256 B, 8 partitions)
 * that nothing takes, into queues of 10,000 messages each, until 400,000
 * (QUICK 200,000) are held: the arena hands out cells it never handed out
 * before, on pages of the segment no process has touched.  Rate over the
 * whole fill.  Then the queues are reset and the same fill runs again
 * into the cells just freed (pages resident), for a ratio inside one run.
 */
static void
backlog_round(int round, long total, uint64_t *msgs, uint64_t *ns,
              uint64_t *server_ns, struct bench_hist *hist, char *err,
              size_t errlen)
{
    struct bench_fill_sc *sc = calloc(1, sizeof(*sc));
    struct bench_run *run = bench_run_new(bench_opt.threads);
    int ok = sc != NULL, status;
    char body[96];

    if (ok) {
        snprintf(sc->prefix, sizeof(sc->prefix), "grow%d-%d-", run_tag, round);
        sc->per_q = 10000 / BENCH_BATCH;
        sc->parts = BENCH_PARTS;
        sc->total = total;
    }
    atomic_store(&run->deadline, bench_now_ns() + 60000000000ull);
    for (int i = 0; i < 16 && ok; i++)
        ok = bench_run_add(run, BENCH_HTTP, bench_opt.mport, &bench_role_fill,
                           sc) != NULL;
    *server_ns = bench_server_ns();
    if (ok && bench_run_start(run) == 0)
        bench_run_join(run);
    *server_ns = bench_server_ns() - *server_ns;
    if (!ok || run->errors > 0)
        snprintf(err, errlen, "fill: %s", run->err);
    else {
        *msgs = run->msgs;
        *ns = run->t_last > run->t_start ? run->t_last - run->t_start : 0;
        bench_hist_merge(hist, &run->hist);
    }
    bench_run_free(run);
    for (long q = 0; sc != NULL && q * sc->per_q < total; q++) {
        snprintf(body, sizeof(body), "{\"queue\":\"%s%ld\"}", sc->prefix, q);
        call_once(bench_opt.mport, "POST", "/api/v1/ephemeral/reset", body,
                  &status, NULL);
    }
    free(sc);
}

/* One backlog row: round 0 into fresh cells, round 1 into reused ones. */
static void
backlog_row(int round, long total)
{
    struct bench_row row = {0};
    struct bench_hist *hist = calloc(1, sizeof(*hist));
    uint64_t msgs = 0, ns = 0, server_ns = 0;
    char err[240] = "";

    snprintf(row.key, sizeof(row.key), round ? "backlog-reused" : "backlog");
    snprintf(row.scenario, sizeof(row.scenario), "push");
    snprintf(row.system, sizeof(row.system), "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "100 x 256 B, 8 partitions, 16 conns, no reset, %ldk %s",
             total * BENCH_BATCH / 1000,
             round ? "reused cells" : "fresh cells");
    if (hist != NULL)
        backlog_round(round, total, &msgs, &ns, &server_ns, hist, err,
                      sizeof(err));
    row.ok = hist != NULL && err[0] == '\0' && ns > 0;
    row.rate = ns ? (double)msgs / ((double)ns / 1e9) : 0;
    row.p50_us = row.ok ? bench_hist_pct_us(hist, 50) : 0;
    row.p99_us = row.ok ? bench_hist_pct_us(hist, 99) : 0;
    snprintf(row.unit, sizeof(row.unit), "msg/s");
    snprintf(row.note, sizeof(row.note), "%s%s", row.ok ? "" : "failed: ",
             row.ok ? "rate over the whole fill; queues reset after" : err);
    if (row.ok)
        server_note(&row, server_ns, msgs);
    bench_row_add(&row);
    free(hist);
}

/* backlog_total - the backlog's pushes of BENCH_BATCH. */
static long
backlog_total(void)
{
    return bench_opt.quick ? 2000 : 4000;
}

/* Scenario backlog: fresh cells, then the same pushes into reused ones. */
static void
mayfly_backlog(void)
{
    backlog_row(0, backlog_total());
    backlog_row(1, backlog_total());
}

/* bench_mayfly_mem_msg - see bench.h: the backlog's first fill (16 conns,
 * 100 x 256 B, 8 partitions, queues of 10,000) into a node of its own,
 * memory before and after: what a message held costs in cells and pages
 * nothing used before. */
void
bench_mayfly_mem_msg(void)
{
    static const char what[] = "256 B messages held (backlog fill)";
    struct bench_fill_sc *sc = calloc(1, sizeof(*sc));
    struct bench_node node;
    struct bench_mem m0, m1;
    char err[240] = "no memory";

    payload_init();
    if (sc == NULL ||
        bench_node_start(&node, "mem-msg", err, sizeof(err)) != 0) {
        bench_row_fail("mem-msg", "memory", "mayfly", what, err);
        free(sc);
        return;
    }
    snprintf(sc->prefix, sizeof(sc->prefix), "memmsg%d-", run_tag);
    sc->per_q = 10000 / BENCH_BATCH;
    sc->parts = BENCH_PARTS;
    sc->total = backlog_total();
    bench_mem_settle(&node, &m0);
    if (bench_fill_run(sc, node.port, 16, err, sizeof(err)) == 0) {
        bench_mem_settle(&node, &m1);
        bench_mem_row_acct("mem-msg", what, &m0, &m1,
                           (double)sc->total * BENCH_BATCH, BENCH_PAYLOAD);
    } else {
        bench_row_fail("mem-msg", "memory", "mayfly", what, err);
    }
    bench_node_stop(&node);
    free(sc);
}

/* The drain variants: at most once, a pop then an ack, the ack carried
 * by the next pop (SPEC §14). */
enum drain_mode { DRAIN_ACK, DRAIN_AUTO, DRAIN_ACK_ONE };

/* One drain variant: rounds of fill then drain; rate over drain time. */
static void
mayfly_drain(enum drain_mode mode)
{
    static const char *const key[] = {"drain-ack", "drain-auto",
                                      "drain-ack-one"};
    static const char *const how[] = {" + ack", " autoAck",
                                      " + upTo ack in next POST pop"};
    struct bench_row row = {0};
    struct bench_drain_sc dsc = {.autoack = mode == DRAIN_AUTO,
                                 .one = mode == DRAIN_ACK_ONE};
    struct bench_fill_sc *fsc;
    struct bench_run *run;
    struct bench_hist *hist = calloc(1, sizeof(*hist));
    int nq = bench_opt.quick ? 16 : 32, rounds = bench_opt.quick ? 1 : 4;
    uint64_t msgs = 0, ns = 0, errors = 0, server_ns = 0;
    char err[240] = "";

    snprintf(row.key, sizeof(row.key), "%s", key[mode]);
    if (mode == DRAIN_ACK_ONE) /* its target is against Redis's LPOP 100 */
        snprintf(row.vs, sizeof(row.vs), "drain-redis");
    snprintf(row.scenario, sizeof(row.scenario), "drain");
    snprintf(row.system, sizeof(row.system), "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "pop batch 100%s, %d queues x 10000, 8 conns", how[mode], nq);
    for (int r = 0; r < rounds && errors == 0; r++) {
        fsc = calloc(1, sizeof(*fsc));
        snprintf(fsc->prefix, sizeof(fsc->prefix), "drain%d-%c%d-", run_tag,
                 "kao"[mode], r);
        fsc->per_q = 10000 / BENCH_BATCH;
        fsc->total = (long)nq * fsc->per_q;
        if (bench_fill_run(fsc, bench_opt.mport, 8, err, sizeof(err)) != 0) {
            errors++;
            free(fsc);
            break;
        }
        memcpy(dsc.prefix, fsc->prefix, sizeof(dsc.prefix));
        free(fsc);
        dsc.nq = nq;
        dsc.step = 8;
        run = bench_run_new(bench_opt.threads);
        atomic_store(&run->deadline, bench_now_ns() + 60000000000ull);
        for (int i = 0; i < 8; i++)
            if (bench_run_add(run, BENCH_HTTP, bench_opt.mport,
                              &bench_role_drain, &dsc) == NULL)
                break;
        server_ns -= bench_server_ns();
        if (bench_run_start(run) == 0)
            bench_run_join(run);
        server_ns += bench_server_ns();
        msgs += run->msgs;
        ns += run->t_last > run->t_start ? run->t_last - run->t_start : 0;
        errors += run->errors;
        bench_hist_merge(hist, &run->hist);
        if (run->errors)
            snprintf(err, sizeof(err), "%s", run->err);
        bench_run_free(run);
    }
    row.ok = errors == 0 && ns > 0;
    row.rate = ns ? (double)msgs / ((double)ns / 1e9) : 0;
    row.p50_us = bench_hist_pct_us(hist, 50);
    row.p99_us = bench_hist_pct_us(hist, 99);
    snprintf(row.unit, sizeof(row.unit), "msg/s");
    snprintf(row.note, sizeof(row.note), "%s%s", row.ok ? "" : "failed: ",
             row.ok ? "latency is per pop request" : err);
    if (row.ok)
        server_note(&row, server_ns, msgs);
    bench_row_add(&row);
    free(hist);
}

/* The CPU a round trip would cost if mayfly were a server that does
 * nothing but answer, as the trivial endpoint of the http row does: this
 * row's client CPU plus per_trip times that server's CPU a request (the
 * http row's machine CPU less its client's). The rest of this row's CPU
 * is what the broker adds; the peers' rows give what theirs cost whole. */
static void
rpc_floor(struct bench_row *row, double per_trip)
{
    const struct bench_row *ok = bench_row_find("http-ok");
    size_t n = strlen(row->note);

    if (ok == NULL || !ok->ok || ok->cpu_us <= 0 || row->cpu_us <= 0)
        return;
    snprintf(row->note + n, sizeof(row->note) - n,
             "; with a do-nothing server %.0f us",
             row->client_us + per_trip * (ok->cpu_us - ok->client_us));
}

static int placed_connect(int k);
static void placement_note(struct bench_row *row, struct bench_run *run,
                           const struct bench_role *responder);

/* Scenario rpc with nreq requesters and nresp responders, against mayfly
 * or, with floor set, against the floor server (floor.c) on the trivial
 * endpoint's port: the same requests, a server doing nothing else; or,
 * with tls set, against the node whose client port speaks HTTPS and that
 * wants a token (TLS + auth). */
static void
mayfly_rpc(int nreq, int nresp, int floor, int tls)
{
    static int tag;
    struct bench_row row = {0};
    struct bench_rpc_sc sc = {.tag = ++tag};
    struct bench_run *run = bench_run_new(bench_opt.threads);
    int port = floor ? bench_opt.okport
               : tls ? bench_opt.tport
                     : bench_opt.mport;
    enum bench_proto proto = tls ? BENCH_HTTPS : BENCH_HTTP;
    int ok = 1;

    snprintf(sc.queue, sizeof(sc.queue), "rpc%d-req-%d", run_tag, tag);
    snprintf(row.key, sizeof(row.key), "rpc-%d%s", nreq,
             floor ? "-floor"
             : tls ? "-tls-auth"
                   : "");
    snprintf(row.scenario, sizeof(row.scenario), "rpc");
    snprintf(row.system, sizeof(row.system), floor ? "floor" : "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "%d requesters, %d responders, inbox per request%s%s", nreq, nresp,
             bench_opt.pipeline ? ", pipelined" : "",
             tls ? ", TLS + auth" : "");
    if (floor || tls)
        snprintf(row.ref, sizeof(row.ref), "rpc-%d", nreq);
    for (int i = 0; i < nresp && ok; i++)
        ok = bench_run_add(run, proto, port, &bench_role_rpcs, &sc) != NULL;
    for (int i = 0; i < nreq && ok; i++)
        ok = bench_run_add(run, proto, port, &bench_role_rpcq, &sc) != NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    bench_row_from_run(&row, run, bench_run_secs(run), "rt/s");
    /* What bounds it: each round trip is several HTTP requests, each two
     * TCP segments; the peers' rows say what their round trips cost. */
    long trips = atomic_load(&sc.trips);
    double per_trip = trips > 0 ? (double)atomic_load(&sc.requests) / trips : 0;
    if (row.ok && trips > 0)
        snprintf(row.note, sizeof(row.note),
                 "%s%.2f HTTP requests a round trip",
                 floor ? "libmicrohttpd doing only this; " : "", per_trip);
    if (tls) /* --mayfly-pid is the plain node: no mayflyd CPU to say */
        run->sys_end.server_ns = run->sys_begin.server_ns;
    bench_row_cost(&row, &run->sys_begin, &run->sys_end, bench_run_secs(run),
                   "round trip");
    if (!floor && !tls) {
        rpc_floor(&row, per_trip);
        placement_note(&row, run, &bench_role_rpcs);
    }
    bench_row_add(&row);
    bench_run_free(run);
}

/* Scenario rpc through the request verb: nreq requesters, nresp
 * responders that long-poll a batch and reply inside their acks.  Where
 * the connections lie decides what a round trip costs (placement_note):
 * split 0 puts them all on mayflyd's first worker, 1 alternates them over
 * two, responders first (half the round trips cross workers; with 1 / 1,
 * every one), -1 leaves it to the kernel (the workers cannot be told). */
static void
mayfly_rpc_verb(int nreq, int nresp, int split)
{
    static int tag = 1000;
    struct bench_row row = {0};
    struct bench_rpc_sc sc = {.tag = ++tag};
    struct bench_run *run = bench_run_new(bench_opt.threads);
    int ok = 1, port = bench_opt.mport;

    snprintf(sc.queue, sizeof(sc.queue), "rpcv%d-req-%d", run_tag, tag);
    snprintf(row.key, sizeof(row.key), "rpc-request-%d%s", nreq,
             split == 1 ? "-2w" : "");
    snprintf(row.vs, sizeof(row.vs), "rpc-redis-%d,rpc-nats-%d", nreq, nreq);
    snprintf(row.scenario, sizeof(row.scenario), "rpc");
    snprintf(row.system, sizeof(row.system), "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "rpc-request: %d requesters, %d responders%s%s", nreq, nresp,
             split == 0   ? ", one worker"
             : split == 1 ? ", two workers"
                          : ", replies in acks",
             bench_opt.pipeline ? ", pipelined" : "");
    for (int i = 0; i < nresp && ok; i++)
        ok = bench_run_add_fd(run,
                              split < 0 ? bench_tcp_connect(port)
                                        : placed_connect(split ? i % 2 : 0),
                              BENCH_HTTP, port, &bench_role_reqvs, &sc) != NULL;
    for (int i = 0; i < nreq && ok; i++)
        ok = bench_run_add_fd(run,
                              split < 0
                                  ? bench_tcp_connect(port)
                                  : placed_connect(split ? (nresp + i) % 2 : 0),
                              BENCH_HTTP, port, &bench_role_reqv, &sc) != NULL;
    if (ok)
        bench_run_timed(run, bench_opt.warm, bench_opt.secs);
    bench_row_from_run(&row, run, bench_run_secs(run), "rt/s");
    long trips = atomic_load(&sc.trips);
    double per_trip = trips > 0 ? (double)atomic_load(&sc.requests) / trips : 0;
    if (row.ok && trips > 0)
        snprintf(row.note, sizeof(row.note), "%.2f HTTP requests a round trip",
                 per_trip);
    bench_row_cost(&row, &run->sys_begin, &run->sys_end, bench_run_secs(run),
                   "round trip");
    rpc_floor(&row, per_trip);
    placement_note(&row, run, &bench_role_reqvs);
    bench_row_add(&row);
    bench_run_free(run);
}

/* One pair's mayfly side of rpc with nreq requesters (main.c pairs it
 * with the peers): the inbox pattern, its floor, and the request verb,
 * each when ONLY wants it (the verb alone: request1 or request32). */
static void
mayfly_rpc_compared(int nreq, int nresp)
{
    char rpc[8], verb[16];

    snprintf(rpc, sizeof(rpc), "rpc%d", nreq);
    snprintf(verb, sizeof(verb), "request%d", nreq);
    if (bench_want("rpc") || bench_want(rpc)) {
        mayfly_rpc(nreq, nresp, 0, 0);
        if (bench_opt.okport > 0)
            mayfly_rpc(nreq, nresp, 1, 0);
    }
    if (bench_want("rpc") || bench_want(rpc) || bench_want(verb)) {
        int told = bench_opt.mpid > 0;
        mayfly_rpc_verb(nreq, nresp, told ? 0 : -1);
        if (told)
            mayfly_rpc_verb(nreq, nresp, 1);
    }
}

/* The inode of the server's end of the loopback connection fd (mayfly's
 * client port, our local port), from /proc/net/tcp; 0 when not found. */
static unsigned long
server_inode(int fd)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    char line[512], want[64];
    unsigned long inode = 0;
    FILE *f;

    if (getsockname(fd, (struct sockaddr *)&sa, &sl) == -1)
        return 0;
    snprintf(want, sizeof(want), "0100007F:%04X 0100007F:%04X",
             (unsigned)bench_opt.mport, (unsigned)ntohs(sa.sin_port));
    if ((f = fopen("/proc/net/tcp", "r")) == NULL)
        return 0;
    while (inode == 0 && fgets(line, sizeof(line), f)) {
        char *at = strstr(line, want);
        if (at != NULL &&
            sscanf(at + strlen(want), " %*x %*x:%*x %*x:%*x %*x %*u %*u %lu",
                   &inode) != 1)
            inode = 0;
    }
    fclose(f);
    return inode;
}

/* The mayflyd worker (a child of --mayfly-pid) holding the server's end of
 * fd; 0 when it cannot be told. */
static pid_t
conn_worker(int fd)
{
    unsigned long inode = server_inode(fd);
    char path[96], link[64], want[40];
    pid_t found = 0;
    long child;
    FILE *f;

    if (inode == 0 || bench_opt.mpid <= 0)
        return 0;
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children",
             (int)bench_opt.mpid, (int)bench_opt.mpid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (found == 0 && fscanf(f, "%ld", &child) == 1) {
        DIR *d;
        struct dirent *e;

        snprintf(path, sizeof(path), "/proc/%ld/fd", child);
        if ((d = opendir(path)) == NULL)
            continue;
        while (found == 0 && (e = readdir(d)) != NULL) {
            char fdpath[sizeof(path) + sizeof(e->d_name) + 2];
            ssize_t n;

            snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
            n = readlink(fdpath, link, sizeof(link) - 1);
            if (n > 0 && (link[n] = '\0', strcmp(link, want) == 0))
                found = (pid_t)child;
        }
        closedir(d);
    }
    fclose(f);
    return found;
}

/* Where an rpc row's connections landed: mayflyd's workers accept from one
 * socket, so which worker takes each connection is a race the kernel
 * decides per run.  All on one worker, a round trip never crosses
 * workers; spread over two, every request and reply does (a wake through
 * shared memory, the partition locks shared, a worker that polls while the
 * other serves), and the row's rate and CPU differ by up to 2x (BENCHMARKS.md,
 * rpc-request).  The note says which: requesters and responders per worker,
 * in order of first appearance.  Nothing when the workers cannot be told. */
static void
placement_note(struct bench_row *row, struct bench_run *run,
               const struct bench_role *responder)
{
    pid_t pid[4] = {0};
    int req[4] = {0}, resp[4] = {0}, nw = 0;
    size_t n = strlen(row->note);

    for (int i = 0; i < run->nloops; i++)
        for (int j = 0; j < run->loops[i].n; j++) {
            const struct bench_conn *c = run->loops[i].conns[j];
            pid_t p = c->dead ? 0 : conn_worker(c->fd);
            int k = 0;

            if (p <= 0)
                return;
            while (k < nw && pid[k] != p)
                k++;
            if (k == nw) {
                if (nw == 4)
                    return;
                pid[nw++] = p;
            }
            if (c->role == responder)
                resp[k]++;
            else
                req[k]++;
        }
    if (nw == 0)
        return;
    n += (size_t)snprintf(row->note + n, sizeof(row->note) - n,
                          "; %s: requesters",
                          nw == 1 ? "one worker" : "workers");
    for (int k = 0; k < nw && n < sizeof(row->note); k++)
        n += (size_t)snprintf(row->note + n, sizeof(row->note) - n, "%s%d",
                              k ? "/" : " ", req[k]);
    if (n < sizeof(row->note))
        n += (size_t)snprintf(row->note + n, sizeof(row->note) - n,
                              ", responders");
    for (int k = 0; k < nw && n < sizeof(row->note); k++)
        n += (size_t)snprintf(row->note + n, sizeof(row->note) - n, "%s%d",
                              k ? "/" : " ", resp[k]);
}

/* placed_connect - a connection to mayfly's client port that mayflyd's
 * k-th worker (0 or 1, by pid order) holds: workers accept from one
 * socket, so connect until one lands there.  The fd, or a negative errno
 * (-EAGAIN after 256 tries, or when the workers cannot be told). */
static int
placed_connect(int k)
{
    pid_t w[2] = {0};
    char path[64];
    long child;
    int n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children",
             (int)bench_opt.mpid, (int)bench_opt.mpid);
    if ((f = fopen(path, "r")) == NULL)
        return -EAGAIN;
    while (n < 2 && fscanf(f, "%ld", &child) == 1)
        w[n++] = (pid_t)child;
    fclose(f);
    if (n < 2 || k < 0 || k > 1)
        return -EAGAIN;
    if (w[0] > w[1]) {
        pid_t t = w[0];
        w[0] = w[1];
        w[1] = t;
    }
    for (int i = 0; i < 256; i++) {
        int fd = bench_tcp_connect(bench_opt.mport);
        pid_t at = 0;

        if (fd < 0)
            return fd;
        for (int t = 0; t < 200 && at == 0; t++) { /* until accepted */
            if ((at = conn_worker(fd)) == 0)
                bench_sleep_ns(500000);
        }
        if (at == w[k])
            return fd;
        close(fd);
    }
    return -EAGAIN;
}

/* Open the wake scenario's two connections (*a for the pop, *b for the
 * push) so that one worker holds both (split 0) or two do (split 1): the
 * wake costs differ (BENCHMARKS.md, wake); split -1 takes the first pair.
 * 0, or -EAGAIN when 64 tries gave no such pair (or the workers cannot be
 * told apart). */
static int
wake_pair(int split, int *a, int *b)
{
    for (int i = 0; i < 64; i++) {
        pid_t wa, wb;

        *a = bench_tcp_connect(bench_opt.mport);
        *b = bench_tcp_connect(bench_opt.mport);
        bench_sleep_ns(20000000); /* both accepted */
        if (split < 0)
            return *a >= 0 && *b >= 0 ? 0 : -ECONNREFUSED;
        wa = *a >= 0 ? conn_worker(*a) : 0;
        wb = *b >= 0 ? conn_worker(*b) : 0;
        if (wa > 0 && wb > 0 && (wa != wb) == split)
            return 0;
        if (*a >= 0)
            close(*a);
        if (*b >= 0)
            close(*b);
    }
    *a = *b = -1;
    return -EAGAIN;
}

/* Scenario wake: a parked pop, then one push; push sent -> pop answered;
 * with the pop's and the push's connections on one worker (split 0), on
 * two (1), or wherever they land (-1: the workers cannot be told). */
static void
mayfly_wake(int split)
{
    struct bench_buf in = {0}, chunk = {0}, in2 = {0}, chunk2 = {0}, pop = {0},
                     push = {0};
    struct bench_hist *h = calloc(1, sizeof(*h));
    struct bench_reply r;
    struct bench_row row = {0};
    int a, b, n = bench_opt.quick ? 300 : 2000;
    int rc = wake_pair(split, &a, &b);
    uint64_t t0;
    char path[160], queue[40];

    snprintf(queue, sizeof(queue), "wake%d", run_tag);
    snprintf(path, sizeof(path),
             WAIT_PATH "queue=%s&wait=true&timeout=5000&autoAck=true", queue);
    bench_http_request(&pop, "GET", path, NULL, 0);
    bench_push_req(&push, NULL, queue, NULL, &bench_msgs1);
    snprintf(row.key, sizeof(row.key), split > 0 ? "wake-split" : "wake");
    snprintf(row.scenario, sizeof(row.scenario), "wake");
    snprintf(row.system, sizeof(row.system), "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "parked pop, one 256 B push, %s; %d samples",
             split < 0   ? "placement unknown"
             : split > 0 ? "on two workers"
                         : "on one worker",
             n);
    snprintf(row.unit, sizeof(row.unit), "wakes/s");
    for (int i = 0; i < n && a >= 0 && b >= 0 && rc == 0; i++) {
        if (write(a, pop.p, pop.len) != (ssize_t)pop.len) {
            rc = -EIO;
            break;
        }
        bench_sleep_ns(300000);
        t0 = bench_now_ns();
        if (write(b, push.p, push.len) != (ssize_t)push.len) {
            rc = -EIO;
            break;
        }
        rc = bench_http_recv(a, &in, &chunk, &r);
        if (rc == 0 &&
            (r.status != 200 || bench_json_count(r.body, r.len, "id") != 1))
            rc = -EPROTO;
        if (rc == 0)
            bench_hist_add(h, bench_now_ns() - t0);
        if (rc == 0)
            rc = bench_http_recv(b, &in2, &chunk2, &r);
        if (rc == 0 && r.status != 201)
            rc = -EPROTO;
    }
    row.ok = rc == 0 && a >= 0 && b >= 0;
    row.p50_us = bench_hist_pct_us(h, 50);
    row.p99_us = bench_hist_pct_us(h, 99);
    row.by_p50 = 1;
    snprintf(row.note, sizeof(row.note), "%s",
             row.ok          ? "rate column empty: latency only"
             : rc == -EAGAIN ? "no such pair of connections in 64 tries"
                             : "a wake failed (no answer, or not "
                               "exactly 1 message)");
    bench_row_add(&row);
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    bench_buf_free(&in);
    bench_buf_free(&chunk);
    bench_buf_free(&in2);
    bench_buf_free(&chunk2);
    bench_buf_free(&pop);
    bench_buf_free(&push);
    free(h);
}

/* One-shot inboxes: claim k, push one message to inbox k, pop it. */
struct inbox_sc {
    atomic_long next;
    long total;
};

/* Claim an inbox and push into it; 1 when all are taken. */
static int
inbox_start(struct bench_conn *c)
{
    struct inbox_sc *sc = c->ud;
    char queue[48];

    c->a = atomic_fetch_add(&sc->next, 1);
    if (c->a >= sc->total)
        return 1;
    snprintf(queue, sizeof(queue), "ibx%d-%ld", run_tag, c->a);
    c->state = 0;
    c->t0 = bench_now_ns();
    bench_push_req(&c->out, NULL, queue, NULL, &bench_msgs1);
    return 0;
}

/* Pushed: pop it back with autoAck; popped: next inbox. */
static int
inbox_reply(struct bench_conn *c, const struct bench_reply *r)
{
    char path[128];

    if (r->status != (c->state == 0 ? 201 : 200) ||
        (c->state == 1 && bench_json_count(r->body, r->len, "id") != 1)) {
        bench_fail(c, "inbox %s answered %d: %.*s", c->state ? "pop" : "push",
                   r->status, (int)(r->len > 120 ? 120 : r->len), r->body);
        return -1;
    }
    if (c->state == 0) {
        snprintf(path, sizeof(path), WAIT_PATH "queue=ibx%d-%ld&autoAck=true",
                 run_tag, c->a);
        c->state = 1;
        bench_http_request(&c->out, "GET", path, NULL, 0);
        return 0;
    }
    bench_record(c, c->t0, 1);
    return inbox_start(c);
}

static const struct bench_role role_inbox = {inbox_start, inbox_reply};

/* inbox_run - sc->total one-shot inboxes on port over 16 connections;
 * the run, joined (the caller frees it). */
static struct bench_run *
inbox_run(struct inbox_sc *sc, int port)
{
    struct bench_run *run = bench_run_new(bench_opt.threads);

    atomic_store(&run->deadline, bench_now_ns() + 120000000000ull);
    for (int i = 0; i < 16; i++)
        if (bench_run_add(run, BENCH_HTTP, port, &role_inbox, sc) == NULL)
            break;
    if (bench_run_start(run) == 0)
        bench_run_join(run);
    return run;
}

/* Scenario inboxes: rate of one-shot inboxes (their memory:
 * bench_mayfly_mem_inbox). */
static void
mayfly_inboxes(void)
{
    struct inbox_sc sc = {.total = bench_opt.inboxes};
    struct bench_row row = {0};
    struct bench_run *run;
    double secs;

    snprintf(row.key, sizeof(row.key), "inboxes");
    snprintf(row.scenario, sizeof(row.scenario), "inboxes");
    snprintf(row.system, sizeof(row.system), "mayfly");
    snprintf(row.variant, sizeof(row.variant),
             "%ld one-shot inboxes (push 1, pop autoAck), 16 conns", sc.total);
    run = inbox_run(&sc, bench_opt.mport);
    secs = (double)(run->t_last - run->t_start) / 1e9;
    bench_row_from_run(&row, run, secs > 0 ? secs : 1, "inbox/s");
    bench_row_add(&row);
    bench_run_free(run);
}

/* bench_mayfly_mem_inbox - see bench.h: the inboxes scenario's inboxes
 * on a node of its own, memory before and after. */
void
bench_mayfly_mem_inbox(void)
{
    static const char what[] = "idle empty inbox, before collection";
    struct inbox_sc sc = {.total = bench_opt.inboxes};
    struct bench_node node;
    struct bench_mem m0, m1;
    struct bench_run *run;
    char err[240];

    payload_init();
    if (bench_node_start(&node, "mem-inbox", err, sizeof(err)) != 0) {
        bench_row_fail("mem-inbox", "memory", "mayfly", what, err);
        return;
    }
    bench_mem_settle(&node, &m0);
    run = inbox_run(&sc, node.port);
    /* at once: idle inboxes are collected after a while */
    bench_mem_sample(&node, &m1);
    if (run->errors == 0 && run->ops == (uint64_t)sc.total)
        bench_mem_row_acct("mem-inbox", what, &m0, &m1, (double)sc.total, 0);
    else
        bench_row_fail("mem-inbox", "memory", "mayfly", what,
                       run->err[0] ? run->err : "not every inbox made");
    bench_run_free(run);
    bench_node_stop(&node);
}

/* Parked pops: connection i waits on partition p(i % parts) of queue. */
struct park_sc {
    char queue[40];
    int parts;
    _Atomic uint64_t wake_t0;
};

/* Park one pop, as a long-poll loop does: on a connection that has
 * served a request before (GET /health first), so that libmicrohttpd
 * has reset its memory once, as it does after every request. */
static int
park_start(struct bench_conn *c)
{
    c->state = 0;
    bench_http_request(&c->out, "GET", "/health", NULL, 0);
    return 0;
}

/* The pop parked after /health; woken: the time since the first wake
 * push went out. */
static int
park_reply(struct bench_conn *c, const struct bench_reply *r)
{
    struct park_sc *sc = c->ud;
    char path[192];

    if (c->state == 0) {
        if (r->status != 200) {
            bench_fail(c, "GET /health answered %d", r->status);
            return -1;
        }
        c->state = 1;
        snprintf(path, sizeof(path),
                 WAIT_PATH "queue=%s&partition=p%d&wait=true&timeout=120000&"
                           "autoAck=true",
                 sc->queue, c->id % sc->parts);
        bench_http_request(&c->out, "GET", path, NULL, 0);
        return 0;
    }
    if (r->status != 200 || bench_json_count(r->body, r->len, "id") != 1) {
        bench_fail(c, "parked pop answered %d with %ld messages", r->status,
                   bench_json_count(r->body, r->len, "id"));
        return -1;
    }
    bench_record(c, atomic_load(&sc->wake_t0), 1);
    return 1;
}

static const struct bench_role role_park = {park_start, park_reply};

/* Wait until the server on port reports want parked pops, or its figure
 * has held still for 2 s (some builds count workers with parked pops
 * rather than pops); the figure it reports. */
static double
park_wait(int port, int want)
{
    uint64_t until = bench_now_ns() + 60000000000ull, still = 0;
    double v = 0, last = -1;

    while (bench_now_ns() < until) {
        if (bench_metric(port, "mayfly_parked_pops", &v) == 0 && v >= want)
            return v;
        if (v != last) {
            last = v;
            still = bench_now_ns();
        } else if (v > 0 && bench_now_ns() - still > 2000000000ull) {
            return v;
        }
        bench_sleep_ns(50000000);
    }
    return v;
}

/* park_open - n connections to port (not started) that will each park a
 * pop of queue q on one of n / BENCH_BATCH partitions; *made: how many
 * could connect (err says why when fewer). */
static struct bench_run *
park_open(struct park_sc *sc, const char *q, int port, int n, int *made,
          char *err, size_t errlen)
{
    struct bench_run *parkers = bench_run_new(1);

    snprintf(sc->queue, sizeof(sc->queue), "%s%d", q, run_tag);
    sc->parts = n / BENCH_BATCH > 0 ? n / BENCH_BATCH : 1;
    atomic_store(&sc->wake_t0, UINT64_MAX);
    atomic_store(&parkers->deadline, bench_now_ns() + 300000000000ull);
    for (*made = 0; *made < n; (*made)++)
        if (bench_run_add(parkers, BENCH_HTTP, port, &role_park, sc) == NULL)
            break;
    if (*made < n)
        snprintf(err, errlen, "%d of %d connections: %s", *made, n,
                 parkers->err);
    return parkers;
}

/* bench_mayfly_mem_parked - see bench.h: what parking adds over an open
 * connection, on a node of its own: PSS with the connections open, then
 * with a pop parked on each (after a GET /health). */
void
bench_mayfly_mem_parked(void)
{
    struct park_sc *sc = calloc(1, sizeof(*sc));
    struct bench_run *parkers;
    struct bench_node node;
    struct bench_mem m0, m1;
    int n = bench_opt.parked, made = 0;
    double parked;
    char err[240] = "", what[72];

    payload_init();
    snprintf(what, sizeof(what),
             "parked long poll (%d, each its connection's 2nd request)", n);
    if (sc == NULL)
        exit(1);
    if (bench_node_start(&node, "mem-parked", err, sizeof(err)) != 0) {
        bench_row_fail("parked-mem", "memory", "mayfly", what, err);
        free(sc);
        return;
    }
    parkers = park_open(sc, "memparked", node.port, n, &made, err, sizeof(err));
    bench_mem_settle(&node, &m0);
    bench_run_start(parkers);
    parked = park_wait(node.port, made);
    bench_sleep_ns(200000000);
    bench_mem_sample(&node, &m1);
    if (err[0] == '\0' && parked < made)
        snprintf(err, sizeof(err), "mayfly_parked_pops said %.0f of %d", parked,
                 made);
    if (err[0] == '\0')
        bench_mem_row_pss("parked-mem", what, &m0, &m1, made, NULL);
    else
        bench_row_fail("parked-mem", "memory", "mayfly", what, err);
    /* the node first: it need not answer the pops */
    bench_node_stop(&node);
    atomic_store(&parkers->stop, 1);
    bench_run_join(parkers);
    bench_run_free(parkers);
    free(sc);
}

/* Scenario parked: many parked pops, pushes meanwhile, then wake all
 * (their memory: bench_mayfly_mem_parked). */
static void
mayfly_parked(void)
{
    struct park_sc *sc = calloc(1, sizeof(*sc));
    struct bench_fill_sc *wake = calloc(1, sizeof(*wake));
    struct bench_row prow = {0}, wrow = {0};
    struct bench_run *parkers;
    int n = bench_opt.parked, made = 0;
    double parked;
    char err[240] = "", queue[40];

    snprintf(prow.key, sizeof(prow.key), "parked-push");
    snprintf(prow.scenario, sizeof(prow.scenario), "parked");
    snprintf(prow.system, sizeof(prow.system), "mayfly");
    snprintf(wrow.key, sizeof(wrow.key), "parked-wake");
    snprintf(wrow.scenario, sizeof(wrow.scenario), "parked");
    snprintf(wrow.system, sizeof(wrow.system), "mayfly");
    parkers =
        park_open(sc, "parked", bench_opt.mport, n, &made, err, sizeof(err));
    bench_run_start(parkers);
    parked = park_wait(bench_opt.mport, made);
    snprintf(prow.variant, sizeof(prow.variant),
             "push 100 x 256 B, 8 conns, while %d pops are parked", made);
    snprintf(queue, sizeof(queue), "parkpush%d", run_tag);
    push_timed(&prow, queue, 8, 0, 0);
    if (err[0] != '\0')
        snprintf(prow.note, sizeof(prow.note), "%s", err);
    else if (prow.ok)
        snprintf(prow.note, sizeof(prow.note),
                 "mayfly_parked_pops said %.0f when the pushes began", parked);
    bench_row_add(&prow);
    snprintf(wake->prefix, sizeof(wake->prefix), "%s", sc->queue);
    wake->parts = sc->parts;
    wake->total = sc->parts;
    atomic_store(&sc->wake_t0, bench_now_ns());
    atomic_store(&parkers->deadline,
                 bench_now_ns() + (bench_opt.quick ? 5 : 60) * 1000000000ull);
    bench_fill_run(wake, bench_opt.mport, 4, err, sizeof(err));
    bench_run_join(parkers);
    snprintf(wrow.variant, sizeof(wrow.variant),
             "%d parked pops on %d partitions, woken by %d pushes of 100", n,
             sc->parts, sc->parts);
    wrow.ok = parkers->ops > 0;
    wrow.rate =
        parkers->t_last > atomic_load(&sc->wake_t0)
            ? (double)(parkers->t_last - atomic_load(&sc->wake_t0)) / 1e6
            : 0;
    snprintf(wrow.unit, sizeof(wrow.unit), "ms to all");
    wrow.p50_us = bench_hist_pct_us(&parkers->hist, 50);
    wrow.p99_us = bench_hist_pct_us(&parkers->hist, 99);
    if (parkers->ops == (uint64_t)n)
        snprintf(wrow.note, sizeof(wrow.note),
                 "all %d woken; p50/p99 per pop, from the first wake push", n);
    else
        snprintf(wrow.note, sizeof(wrow.note),
                 "only %llu of %d woken within %d s (rate: time to the last "
                 "one woken)%s%.100s",
                 (unsigned long long)parkers->ops, n, bench_opt.quick ? 5 : 60,
                 parkers->err[0] ? ": " : "", parkers->err);
    bench_row_add(&wrow);
    bench_run_free(parkers);
    free(wake);
    free(sc);
}

/* bench_mayfly_compared - see bench.h. */
void
bench_mayfly_compared(const char *scenario)
{
    payload_init();
    if (strcmp(scenario, "push") == 0)
        mayfly_push(0);
    else if (strcmp(scenario, "drain") == 0) {
        mayfly_drain(DRAIN_AUTO);
        mayfly_drain(DRAIN_ACK_ONE);
    } else if (strcmp(scenario, "rpc1") == 0)
        mayfly_rpc_compared(1, 1);
    else if (strcmp(scenario, "rpc32") == 0)
        mayfly_rpc_compared(32, 8);
    else if (strcmp(scenario, "wake") == 0)
        mayfly_wake(bench_opt.mpid > 0 ? 0 : -1);
}

/* bench_mayfly_all - see bench.h: after the compared rows. */
void
bench_mayfly_all(void)
{
    payload_init();
    /* the TLS node started beside the first: it may still be starting */
    if (bench_opt.tport > 0)
        bench_wait_port(bench_opt.tport, 30);
    if (bench_want("http"))
        bench_mayfly_http("http-mayfly", bench_opt.mport, "/health",
                          "mayfly /health");
    if (bench_want("push") && bench_opt.tport > 0)
        mayfly_push(1);
    if (bench_want("push") || bench_want("backlog"))
        mayfly_backlog();
    if (bench_want("push") || bench_want("push-keyed"))
        mayfly_push_keyed();
    if (bench_want("drain"))
        mayfly_drain(DRAIN_ACK);
    if ((bench_want("rpc") || bench_want("rpc1")) && bench_opt.tport > 0)
        mayfly_rpc(1, 1, 0, 1);
    if ((bench_want("rpc") || bench_want("rpc32")) && bench_opt.tport > 0)
        mayfly_rpc(32, 8, 0, 1);
    if (bench_want("wake") && bench_opt.mpid > 0)
        mayfly_wake(1);
    if (bench_want("inboxes"))
        mayfly_inboxes();
    if (bench_want("parked"))
        mayfly_parked();
}
