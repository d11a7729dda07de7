/*
 * bench.c - see bench.h.
 *
 * One run: --conns keep-alive connections (the engine's epoll threads,
 * one a core at most) drive MODE against the first node of --url for
 * --duration seconds, then the queues it used are deleted.
 *   push     pushes of --batch messages of --size bytes to --queue over 8
 *            partitions (a reset every ~5,000 messages keeps it under its
 *            bound)
 *   pop      first fills one queue a connection (--queue-N, at most 10,000
 *            messages and 64 MiB in all), then pops --batch and acks each
 *            batch until the window ends or the queues are empty
 *   request  --conns requesters send the request verb (SPEC §9) with a
 *            --size payload, --conns responders answer --batch at a time
 *            inside their acks; a round trip is one message
 *   stream   --conns tail streams (SPEC §11, a connection each) on one
 *            partition of --queue; one push of one --size message at a
 *            time, each timed until every stream has it (rounds until
 *            --duration ends; per round: p50 and p99 over the streams and
 *            the time to all; printed: their medians over the rounds)
 * Latency is per HTTP request (push, pop), per round trip (request) or
 * from the push written to each stream's arrival (stream).
 * Plain HTTP only: the engine's TLS does not verify the node.
 */
#include "ops/cli/bench.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/bench/bench.h"
#include "ops/cli/cmd.h"

/* The engine's options (main.c of mayfly-bench defines them there). */
struct bench_opts bench_opt;

#define FILL_MAX_MSGS  10000
#define FILL_MAX_BYTES (64L << 20)

struct bench_args {
    const char *mode;
    const char *queue;
    long conns;
    long size;
    long batch;
    double secs;
    int port;
};

/* bench_target - point the engine at the host and port of url (the first
 * of a comma-separated list); 0, or -1 after saying why. */
static int
bench_target(const char *url, struct bench_args *a)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM},
                    *res = NULL;
    char host[256];
    const char *p = url, *end;
    size_t hl;

    if (strncmp(p, "http://", 7) != 0)
        return cli_cmd_usage_error("bench",
                                   "only plain http:// URLs can be "
                                   "benchmarked (got %s)",
                                   url),
               -1;
    p += 7;
    end = p + strcspn(p, ":/,");
    hl = (size_t)(end - p);
    if (hl == 0 || hl >= sizeof(host))
        return cli_cmd_usage_error("bench", "no host in %s", url), -1;
    memcpy(host, p, hl);
    host[hl] = '\0';
    a->port = 80;
    if (*end == ':') {
        char *e;
        long port = strtol(end + 1, &e, 10);
        if (port < 1 || port > 65535 || (*e && *e != '/' && *e != ','))
            return cli_cmd_usage_error("bench", "bad port in %s", url), -1;
        a->port = (int)port;
    }
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL) {
        fprintf(stderr, "mayfly: bench: cannot resolve %s\n", host);
        return -1;
    }
    bench_host = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
    return 0;
}

/* bench_msgs - [{"payload":"aaa..."}] x n, each payload size letters. */
static void
bench_msgs(struct bench_buf *out, const char *payload, long n)
{
    bench_buf_str(out, "[");
    for (long i = 0; i < n; i++)
        bench_buf_printf(out, "%s{\"payload\":\"%s\"}", i ? "," : "", payload);
    bench_buf_str(out, "]");
}

/* bench_delete - drop a queue the run used (what it left is no load).
 * Requests the run had sent when it stopped may still land after a delete
 * (the node reads them from connections being closed), so it is deleted
 * again until a delete finds nothing, 2 s at most. */
static void
bench_delete(struct cli_conn *c, const char *queue)
{
    struct cli_answer ans;
    char *path = cli_cmd_path("/api/v1/ephemeral/queue/%s", queue);
    int again = 1;

    for (int i = 0; i < 20 && again; i++) {
        if (i > 0)
            bench_sleep_ns(100000000);
        cli_call(c, "DELETE", path, NULL, 10000, &ans);
        again = cli_answer_ok(&ans) && ans.body != NULL &&
                strstr(ans.body, "\"deleted\":true") != NULL;
        cli_answer_free(&ans);
    }
    free(path);
}

/* bench_new_run - a run over the engine's threads with conns connections
 * of role; NULL after saying why one could not connect. */
static struct bench_run *
bench_new_run(const struct bench_args *a, const struct bench_role *role,
              void *ud, long conns, struct bench_run *run)
{
    if (run == NULL)
        run = bench_run_new(bench_opt.threads);
    for (long i = 0; i < conns; i++)
        if (bench_run_add(run, BENCH_HTTP, a->port, role, ud) == NULL) {
            fprintf(stderr, "mayfly: bench: %s\n", run->err);
            bench_run_free(run);
            return NULL;
        }
    return run;
}

/* bench_report - print the run's table (or JSON); the exit status. */
static int
bench_report(const struct bench_args *a, const struct bench_run *run,
             double secs, const char *unit, int json)
{
    const struct bench_hist *h = &run->hist;
    double ops = secs > 0 ? (double)run->ops / secs : 0;
    double msgs = secs > 0 ? (double)run->msgs / secs : 0;

    if (run->ops == 0 || run->errors > 0) {
        fprintf(stderr, "mayfly: bench: %s: %llu errors%s%s\n", a->mode,
                (unsigned long long)run->errors, run->err[0] ? ", first: " : "",
                run->err[0] ? run->err : "nothing completed");
        return CLI_EXIT_REFUSED;
    }
    if (json) {
        printf("{\"mode\":\"%s\",\"conns\":%ld,\"size\":%ld,\"batch\":%ld,"
               "\"seconds\":%.3f,\"requests\":%llu,\"messages\":%llu,"
               "\"requestsPerSec\":%.1f,\"messagesPerSec\":%.1f,"
               "\"latencyUs\":{\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,"
               "\"max\":%.1f}}\n",
               a->mode, a->conns, a->size, a->batch, secs,
               (unsigned long long)run->ops, (unsigned long long)run->msgs, ops,
               msgs, bench_hist_pct_us(h, 50), bench_hist_pct_us(h, 90),
               bench_hist_pct_us(h, 99), (double)h->max / 1e3);
        return CLI_EXIT_OK;
    }
    printf("%-8s %5s %7s %5s %7s %12s %12s %9s %9s %9s %9s\n", "mode", "conns",
           "size", "batch", "secs", "requests/s", unit, "p50 ms", "p90 ms",
           "p99 ms", "max ms");
    printf("%-8s %5ld %7ld %5ld %7.2f %12.0f %12.0f %9.3f %9.3f %9.3f %9.3f\n",
           a->mode, a->conns, a->size, a->batch, secs, ops, msgs,
           bench_hist_pct_us(h, 50) / 1e3, bench_hist_pct_us(h, 90) / 1e3,
           bench_hist_pct_us(h, 99) / 1e3, (double)h->max / 1e6);
    return CLI_EXIT_OK;
}

/* bench_warm - the unmeasured start of a window of secs. */
static double
bench_warm(double secs)
{
    return secs >= 10 ? 1 : secs / 10;
}

/* bench_push - see the file comment. */
static int
bench_push(const struct bench_args *a, const char *payload, int json,
           struct cli_conn *c)
{
    struct bench_push_sc *sc = calloc(1, sizeof(*sc));
    struct bench_buf msgs = {0};
    struct bench_run *run;
    char part[16], body[160];
    int rc = CLI_EXIT_REFUSED;

    if (sc == NULL)
        exit(1);
    sc->batch = (int)a->batch;
    bench_msgs(&msgs, payload, a->batch);
    for (int i = 0; i < BENCH_PARTS; i++) {
        snprintf(part, sizeof(part), "p%d", i);
        bench_push_req(&sc->req[i], NULL, a->queue, part, &msgs);
    }
    snprintf(body, sizeof(body), "{\"queue\":\"%s\"}", a->queue);
    bench_http_request(&sc->reset, "POST", "/api/v1/ephemeral/reset", body,
                       strlen(body));
    /* a reset every ~5,000 messages (pushes are counted over all the
     * connections) keeps the queue under its bound; a push that still
     * finds it full (429) is followed by a reset and not counted */
    sc->reset_every = (int)(5000 / a->batch) + 1;
    run = bench_new_run(a, &bench_role_push, sc, a->conns, NULL);
    if (run != NULL) {
        bench_run_timed(run, bench_warm(a->secs), a->secs);
        rc = bench_report(a, run, bench_run_secs(run), "msgs/s", json);
        bench_run_free(run);
    }
    bench_delete(c, a->queue);
    for (int i = 0; i < BENCH_PARTS; i++)
        bench_buf_free(&sc->req[i]);
    bench_buf_free(&sc->reset);
    bench_buf_free(&msgs);
    free(sc);
    return rc;
}

/* bench_pop - see the file comment. */
static int
bench_pop(const struct bench_args *a, const char *payload, int json,
          struct cli_conn *c)
{
    struct bench_fill_sc fill = {.parts = 0, .batch = (int)a->batch};
    struct bench_drain_sc drain = {
        .nq = (int)a->conns, .step = (int)a->conns, .batch = (int)a->batch};
    struct bench_buf msgs = {0};
    struct bench_run *run;
    long per_q = FILL_MAX_BYTES / (a->conns * (a->size + 16));
    char err[256], queue[80];
    int rc = CLI_EXIT_REFUSED;
    double secs;

    if (per_q > FILL_MAX_MSGS)
        per_q = FILL_MAX_MSGS;
    fill.per_q = (int)(per_q / a->batch > 0 ? per_q / a->batch : 1);
    fill.total = (long)fill.per_q * a->conns;
    fill.msgs = &msgs;
    snprintf(fill.prefix, sizeof(fill.prefix), "%s-", a->queue);
    snprintf(drain.prefix, sizeof(drain.prefix), "%s-", a->queue);
    bench_msgs(&msgs, payload, a->batch);
    if (bench_fill_run(&fill, a->port, (int)a->conns, err, sizeof(err)) != 0)
        fprintf(stderr, "mayfly: bench: %s\n", err);
    else if ((run = bench_new_run(a, &bench_role_drain, &drain, a->conns,
                                  NULL)) != NULL) {
        bench_run_timed(run, 0, a->secs);
        /* the queues may run dry before the window ends */
        secs = bench_run_secs(run);
        if (run->t_last > atomic_load(&run->t_begin) &&
            atomic_load(&run->active) == 0)
            secs = (double)(run->t_last - atomic_load(&run->t_begin)) / 1e9;
        rc = bench_report(a, run, secs, "msgs/s", json);
        bench_run_free(run);
    }
    for (long i = 0; i < a->conns; i++) {
        snprintf(queue, sizeof(queue), "%s-%ld", a->queue, i);
        bench_delete(c, queue);
    }
    bench_buf_free(&msgs);
    return rc;
}

/* bench_request - see the file comment. */
static int
bench_request(const struct bench_args *a, const char *payload, int json,
              struct cli_conn *c)
{
    struct bench_rpc_sc *sc = calloc(1, sizeof(*sc));
    struct bench_run *run;
    int rc = CLI_EXIT_REFUSED;

    if (sc == NULL)
        exit(1);
    snprintf(sc->queue, sizeof(sc->queue), "%s", a->queue);
    sc->pad = payload;
    sc->batch = (int)a->batch;
    /* responders first, so that they park before the first request */
    run = bench_new_run(a, &bench_role_reqvs, sc, a->conns, NULL);
    if (run != NULL)
        run = bench_new_run(a, &bench_role_reqv, sc, a->conns, run);
    if (run != NULL) {
        bench_run_timed(run, bench_warm(a->secs), a->secs);
        rc = bench_report(a, run, bench_run_secs(run), "trips/s", json);
        bench_run_free(run);
    }
    bench_delete(c, a->queue);
    free(sc);
    return rc;
}

/* The stream mode's pushing connection. */
struct bench_pusher {
    int fd;
    struct bench_buf in, chunk, req;
};

/* bench_push1 - a stream round's one push (arg: struct bench_pusher); 0
 * or -1. */
static int
bench_push1(void *arg)
{
    struct bench_pusher *p = arg;
    struct bench_reply r;

    if (write(p->fd, p->req.p, p->req.len) != (ssize_t)p->req.len ||
        bench_http_recv(p->fd, &p->in, &p->chunk, &r) != 0 || r.status != 201)
        return -1;
    return 0;
}

/* bench_cmp - qsort order of doubles. */
static int
bench_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

/* bench_median - of v[0..n), which it sorts. */
static double
bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp);
    return v[n / 2];
}

#define STREAM_ROUNDS_MAX 10000

/* bench_stream_probe - open one stream with req and read its head (5 s at
 * most): a refusal (403 for a token without subscribe) is said at once,
 * where the reader set would only wait for streams that never open.  0,
 * or -1 after saying why. */
static int
bench_stream_probe(int port, const struct bench_buf *req)
{
    struct timeval tv = {.tv_sec = 5};
    char head[2048];
    size_t n = 0;
    ssize_t got = 1;
    int fd = bench_tcp_connect(port), status = 0;

    if (fd < 0) {
        fprintf(stderr, "mayfly: bench: stream: connect: %s\n", strerror(-fd));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (write(fd, req->p, req->len) == (ssize_t)req->len)
        while (n < sizeof(head) - 1 && got > 0 &&
               memmem(head, n, "\r\n\r\n", 4) == NULL) {
            got = read(fd, head + n, sizeof(head) - 1 - n);
            n += got > 0 ? (size_t)got : 0;
        }
    close(fd);
    head[n] = '\0';
    if (sscanf(head, "HTTP/1.%*d %d", &status) == 1 && status == 200)
        return 0;
    /* what came after the head: the node's JSON sentence, if it came */
    const char *body = strstr(head, "\r\n\r\n");
    fprintf(stderr, "mayfly: bench: stream: subscribe answered %d%s%s\n",
            status, body && body[4] ? ": " : "", body ? body + 4 : "");
    return -1;
}

/* bench_stream - see the file comment. */
static int
bench_stream(const struct bench_args *a, const char *payload, int json,
             struct cli_conn *c)
{
    struct bench_pusher p = {.fd = -1};
    struct bench_buf req = {0}, msg = {0};
    struct bench_rset *s;
    struct bench_round r;
    double *all = calloc(STREAM_ROUNDS_MAX, sizeof(double)),
           *p50 = calloc(STREAM_ROUNDS_MAX, sizeof(double)),
           *p99 = calloc(STREAM_ROUNDS_MAX, sizeof(double)), secs, worst = 0;
    char path[160], err[200] = "";
    int ok = 0, rounds = 0, rc = CLI_EXIT_REFUSED;
    uint64_t t0, until;

    if (all == NULL || p50 == NULL || p99 == NULL)
        exit(1);
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/subscribe?queue=%s&partition=p0", a->queue);
    bench_http_request(&req, "GET", path, NULL, 0);
    if (bench_stream_probe(a->port, &req) != 0) {
        bench_buf_free(&req);
        free(all);
        free(p50);
        free(p99);
        return CLI_EXIT_REFUSED;
    }
    s = bench_rset_open((int)a->conns, a->port, req.p, req.len, err,
                        sizeof(err));
    s->ready = "event: open";
    s->marker = "event: message";
    if (err[0] == '\0' && bench_rset_start(s) != 0)
        snprintf(err, sizeof(err), "no reader threads");
    if (err[0] == '\0' && bench_rset_wait_ready(s, 30) < s->n)
        snprintf(err, sizeof(err), "only %d of %d streams opened",
                 atomic_load(&s->nready), s->n);
    if (err[0] == '\0' && (p.fd = bench_tcp_connect(a->port)) < 0)
        snprintf(err, sizeof(err), "push connection: %s", strerror(-p.fd));
    bench_buf_printf(&msg, "[{\"payload\":\"%s\"}]", payload);
    bench_push_req(&p.req, NULL, a->queue, "p0", &msg);
    t0 = bench_now_ns();
    until = t0 + (uint64_t)(a->secs * 1e9);
    while (err[0] == '\0' && rounds < STREAM_ROUNDS_MAX &&
           (rounds == 0 || bench_now_ns() < until)) {
        r = bench_rset_round(s, bench_push1, &p, 10);
        rounds++;
        if (r.ms_all <= 0)
            continue;
        all[ok] = r.ms_all;
        p50[ok] = r.p50 / 1e3;
        p99[ok] = r.p99 / 1e3;
        worst = r.ms_all > worst ? r.ms_all : worst;
        ok++;
    }
    secs = (double)(bench_now_ns() - t0) / 1e9;
    if (err[0] == '\0' && ok == 0)
        snprintf(err, sizeof(err), "no round reached all %d streams", s->n);
    if (err[0] != '\0') {
        fprintf(stderr, "mayfly: bench: stream: %s\n", err);
    } else if (json) {
        printf("{\"mode\":\"stream\",\"conns\":%ld,\"size\":%ld,"
               "\"rounds\":%d,\"reachedAll\":%d,\"seconds\":%.3f,"
               "\"latencyMs\":{\"p50\":%.3f,\"p99\":%.3f,\"all\":%.3f,"
               "\"allMax\":%.3f}}\n",
               a->conns, a->size, rounds, ok, secs, bench_median(p50, ok),
               bench_median(p99, ok), bench_median(all, ok), worst);
        rc = CLI_EXIT_OK;
    } else {
        printf("%-8s %5s %7s %6s %7s %9s %9s %9s %9s\n", "mode", "conns",
               "size", "rounds", "secs", "p50 ms", "p99 ms", "all ms",
               "max all");
        printf("%-8s %5ld %7ld %6d %7.2f %9.3f %9.3f %9.3f %9.3f\n", "stream",
               a->conns, a->size, rounds, secs, bench_median(p50, ok),
               bench_median(p99, ok), bench_median(all, ok), worst);
        if (ok < rounds)
            printf("(%d of %d rounds did not reach every stream within 10 "
                   "s)\n",
                   rounds - ok, rounds);
        rc = CLI_EXIT_OK;
    }
    bench_rset_close(s);
    if (p.fd >= 0)
        close(p.fd);
    bench_delete(c, a->queue);
    bench_buf_free(&p.in);
    bench_buf_free(&p.chunk);
    bench_buf_free(&p.req);
    bench_buf_free(&req);
    bench_buf_free(&msg);
    free(all);
    free(p50);
    free(p99);
    return rc;
}

/* bench_secs - --duration as seconds in (0, 3600]; -1 when it is not. */
static double
bench_secs(const char *s)
{
    char *end;
    double v = strtod(s, &end);

    if (end == s || *end != '\0' || !(v > 0) || v > 3600)
        return -1;
    return v;
}

/* cli_bench - see bench.h. */
int
cli_bench(int argc, char **argv, struct cli_globals *g)
{
    const char *conns = "4", *size = "256", *batch = NULL, *duration = "5",
               *queue = "mayfly-bench";
    const struct cli_opt opts[] = {
        {"conns", NULL, &conns}, {"size", NULL, &size},
        {"batch", NULL, &batch}, {"duration", NULL, &duration},
        {"queue", NULL, &queue}, {NULL, NULL, NULL},
    };
    struct bench_args a = {0};
    struct cli_operands ops;
    struct cli_conn c;
    char *payload;
    int rc = cli_cmd_start("bench", argc, argv, opts, g, &ops, 1, 1, &c);
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (rc >= 0)
        return rc;
    a.mode = ops.v[0];
    a.queue = queue;
    if (strcmp(a.mode, "push") != 0 && strcmp(a.mode, "pop") != 0 &&
        strcmp(a.mode, "request") != 0 && strcmp(a.mode, "stream") != 0)
        rc = cli_cmd_usage_error("bench",
                                 "unknown mode '%s' (push, pop, request or "
                                 "stream)",
                                 a.mode);
    else if (strcmp(a.mode, "stream") == 0 && batch != NULL)
        rc = cli_cmd_usage_error("bench", "--batch does not apply to stream "
                                          "(one message a round)");
    else if (cli_args_long("conns", conns, 1, 1000, &a.conns) != 0 ||
             cli_args_long("size", size, 1, 1 << 20, &a.size) != 0 ||
             cli_args_long("batch",
                           batch                            ? batch
                           : strcmp(a.mode, "request") == 0 ? "16"
                                                            : "100",
                           1, 1000, &a.batch) != 0)
        rc = CLI_EXIT_USAGE; /* cli_args_long said which and why */
    else if ((a.secs = bench_secs(duration)) < 0)
        rc = cli_cmd_usage_error("bench",
                                 "--duration takes seconds in (0, 3600], "
                                 "not '%s'",
                                 duration);
    else if (queue[0] == '\0' || strlen(queue) > 40 ||
             strspn(queue, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX"
                           "YZ0123456789._-") != strlen(queue))
        rc = cli_cmd_usage_error("bench",
                                 "--queue takes 1 to 40 letters, digits, "
                                 "'.', '_' or '-'");
    else if (bench_target(cli_conn_base(&c), &a) != 0)
        rc = CLI_EXIT_USAGE;
    if (rc >= 0) {
        cli_conn_close(&c);
        return rc;
    }
    bench_token = g->token;
    bench_opt.threads = (int)(n < 1 ? 1 : n < a.conns ? n : a.conns);
    payload = malloc((size_t)a.size + 1);
    if (payload == NULL)
        exit(1);
    for (long i = 0; i < a.size; i++)
        payload[i] = (char)('a' + i % 26);
    payload[a.size] = '\0';
    bench_payload_init();
    if (strcmp(a.mode, "push") == 0)
        rc = bench_push(&a, payload, g->json, &c);
    else if (strcmp(a.mode, "pop") == 0)
        rc = bench_pop(&a, payload, g->json, &c);
    else if (strcmp(a.mode, "request") == 0)
        rc = bench_request(&a, payload, g->json, &c);
    else
        rc = bench_stream(&a, payload, g->json, &c);
    free(payload);
    cli_conn_close(&c);
    return rc;
}
