/*
 * main.c - mayfly-bench's entry: arguments, the rows of the result table,
 * and its three outputs (table on stdout, JSON, markdown). Also two small
 * helpers run.sh needs: a spare port, and a trivial HTTP server (libmicro-
 * httpd answering "ok") that gives the HTTP floor and the wrk comparison a
 * target that is not mayfly.
 *
 * Single-threaded apart from the runs the scenarios start and join.
 * Errors: exit status 2 on bad arguments, 1 when an output cannot be
 * written; a failed scenario is a row with a note, not an exit status.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "ops/bench/bench.h"

#define MAX_ROWS 64

struct bench_opts bench_opt;
static struct bench_row rows[MAX_ROWS];
static int nrows;

/* cmp_double - qsort order of doubles. */
static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* median - of v[0..n) (sorted in place); 0 when n is 0. */
static double
median(double *v, int n)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* take_sample - r's measurement as one more sample of row (same key):
 * rate and percentiles become the samples' medians, a failed sample
 * fails the row. */
static void
take_sample(struct bench_row *row, const struct bench_row *r)
{
    double rate[BENCH_PAIRS_MAX], p50[BENCH_PAIRS_MAX], p99[BENCH_PAIRS_MAX];
    int n;

    if (row->nsamples < BENCH_PAIRS_MAX)
        row->sample[row->nsamples++] =
            (struct bench_sample){r->rate, r->p50_us, r->p99_us};
    n = row->nsamples;
    for (int i = 0; i < n; i++) {
        rate[i] = row->sample[i].rate;
        p50[i] = row->sample[i].p50_us;
        p99[i] = row->sample[i].p99_us;
    }
    row->rate = median(rate, n);
    row->p50_us = median(p50, n);
    row->p99_us = median(p99, n);
    if (row->ok && !r->ok) {
        row->ok = 0;
        snprintf(row->note, sizeof(row->note), "%s", r->note);
    }
}

/* Keep a row (a row of a key already kept: one more sample of it) and
 * show it at once on stderr (the table comes at the end). */
void
bench_row_add(const struct bench_row *r)
{
    struct bench_row *kept = (struct bench_row *)bench_row_find(r->key);

    if (kept != NULL) {
        take_sample(kept, r);
    } else if (nrows < MAX_ROWS) {
        rows[nrows] = *r;
        rows[nrows].nsamples = 1;
        rows[nrows++].sample[0] =
            (struct bench_sample){r->rate, r->p50_us, r->p99_us};
    }
    fprintf(stderr, "  %-8s %-12s %-52s %12.0f %-9s p50 %8.1f p99 %9.1f %s\n",
            r->scenario, r->system, r->variant, r->rate, r->unit, r->p50_us,
            r->p99_us, r->ok ? r->note : "FAILED");
    if (!r->ok)
        fprintf(stderr, "           %s\n", r->note);
}

/* Fill rate, percentiles and verdict of row from a finished run. */
void
bench_row_from_run(struct bench_row *row, const struct bench_run *run,
                   double secs, const char *unit)
{
    snprintf(row->unit, sizeof(row->unit), "%s", unit);
    row->rate = secs > 0 ? (double)run->msgs / secs : 0;
    row->p50_us = bench_hist_pct_us(&run->hist, 50);
    row->p99_us = bench_hist_pct_us(&run->hist, 99);
    row->ok = run->ops > 0 && run->errors == 0;
    if (run->errors > 0)
        snprintf(row->note, sizeof(row->note), "%llu errors, first: %s",
                 (unsigned long long)run->errors, run->err);
    else if (run->ops == 0)
        snprintf(row->note, sizeof(row->note), "nothing completed%s%s",
                 run->err[0] ? ": " : "", run->err);
}

/* bench_row_cost - machine CPU, the load generator's share of it, TCP
 * segments and (a mayfly row) mayflyd's own CPU per operation of row
 * between two readings secs apart (needs row->rate), added to its note;
 * per names the operation. */
void
bench_row_cost(struct bench_row *row, const struct bench_sys *begin,
               const struct bench_sys *end, double secs, const char *per)
{
    double ops = row->rate * secs;
    long hz = sysconf(_SC_CLK_TCK);
    size_t n;

    if (!row->ok || ops <= 0 || hz <= 0 || end->busy_ticks == 0)
        return;
    row->cpu_us =
        (double)(end->busy_ticks - begin->busy_ticks) * 1e6 / (double)hz / ops;
    row->client_us = (double)(end->self_us - begin->self_us) / ops;
    row->segs = (double)(end->segs - begin->segs) / ops;
    n = strlen(row->note);
    snprintf(row->note + n, sizeof(row->note) - n,
             "%s%.1f TCP segments, %.1f context switches, %.0f us CPU (whole "
             "machine) a %s, %.0f us of it the client's",
             n ? "; " : "", row->segs, (double)(end->ctxt - begin->ctxt) / ops,
             row->cpu_us, per, row->client_us);
    n = strlen(row->note);
    if (strcmp(row->system, "mayfly") == 0 && end->server_ns > begin->server_ns)
        snprintf(row->note + n, sizeof(row->note) - n, "; mayflyd %.0f us",
                 (double)(end->server_ns - begin->server_ns) / 1e3 / ops);
}

/* A row for a scenario that could not run. */
void
bench_row_fail(const char *key, const char *scenario, const char *system,
               const char *variant, const char *note)
{
    struct bench_row r = {0};

    snprintf(r.key, sizeof(r.key), "%s", key);
    snprintf(r.scenario, sizeof(r.scenario), "%s", scenario);
    snprintf(r.system, sizeof(r.system), "%s", system);
    snprintf(r.variant, sizeof(r.variant), "%s", variant);
    snprintf(r.note, sizeof(r.note), "%s", note);
    bench_row_add(&r);
}

/* Whether --only (a comma-separated list of scenarios) selects scenario. */
int
bench_want(const char *scenario)
{
    size_t n = strlen(scenario);
    const char *p = bench_opt.only;

    if (p == NULL)
        return 1;
    for (; p != NULL; p = strchr(p, ','), p = p ? p + 1 : NULL)
        if (strncmp(p, scenario, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

/* bench_row_find - see bench.h. */
const struct bench_row *
bench_row_find(const char *key)
{
    for (int i = 0; i < nrows; i++)
        if (strcmp(rows[i].key, key) == 0)
            return &rows[i];
    return NULL;
}

/* A row's ratio over its pairs. */
struct ratio {
    double median, min, max;
    int pairs;
};

/* sample_ratio - the row named in ref (m) / this row (r), sample i of
 * each (rate, or p50 for latency); 0 when either is missing. */
static double
sample_ratio(const struct bench_row *m, const struct bench_row *r, int i)
{
    if (m->by_p50)
        return r->sample[i].p50_us > 0
                   ? m->sample[i].p50_us / r->sample[i].p50_us
                   : 0;
    return r->sample[i].rate > 0 ? m->sample[i].rate / r->sample[i].rate : 0;
}

/* vs_ratio - sample i of r / the best of sample i of the rows r->vs
 * names (rate; p50 for latency); 0 when none has it. */
static double
vs_ratio(const struct bench_row *r, int i)
{
    char keys[sizeof(r->vs)], *save = NULL;
    double best = 0;

    snprintf(keys, sizeof(keys), "%s", r->vs);
    for (char *k = strtok_r(keys, ",", &save); k != NULL;
         k = strtok_r(NULL, ",", &save)) {
        const struct bench_row *p = bench_row_find(k);
        if (p == NULL || !p->ok || i >= p->nsamples)
            continue;
        double v = r->by_p50 ? p->sample[i].p50_us : p->sample[i].rate;
        if (v > 0 && (best == 0 || (r->by_p50 ? v < best : v > best)))
            best = v;
    }
    if (best == 0)
        return 0;
    return r->by_p50
               ? (r->sample[i].p50_us > 0 ? best / r->sample[i].p50_us : 0)
               : r->sample[i].rate / best;
}

/* row_ratio - the median of the ratios of r's pairs (sample i of the row
 * named in ref, measured just before sample i of r; or, for a row with
 * vs, sample i of r against the best of its vs rows' sample i), with
 * their min and max; all 0 when a side is missing.  A row measured once
 * beside a ref measured in pairs (the TLS rows) pairs with its first. */
static struct ratio
row_ratio(const struct bench_row *r)
{
    const struct bench_row *m = r->ref[0] ? bench_row_find(r->ref) : NULL;
    struct ratio out = {0};
    double v[BENCH_PAIRS_MAX];
    int n = 0;

    if (!r->ok || (r->vs[0] == 0 && (m == NULL || !m->ok)))
        return out;
    for (int i = 0; i < r->nsamples; i++) {
        if (r->vs[0])
            v[n] = vs_ratio(r, i);
        else if (i < m->nsamples)
            v[n] = sample_ratio(m, r, i);
        else
            break;
        if (v[n] > 0)
            n++;
    }
    if (n == 0)
        return out;
    out.pairs = n;
    out.median = median(v, n);
    out.min = v[0];
    out.max = v[n - 1];
    return out;
}

/* fmt_ratio - "1.23", or "1.23 (1.10-1.40)" over several pairs; "-" when
 * there is none. */
static void
fmt_ratio(char *out, size_t len, struct ratio q)
{
    if (q.pairs == 0)
        snprintf(out, len, "-");
    else if (q.pairs == 1)
        snprintf(out, len, "%.2f", q.median);
    else
        snprintf(out, len, "%.2f (%.2f-%.2f)", q.median, q.min, q.max);
}

/* The machine in one line: CPU model, CPUs, memory, kernel. */
static void
machine(char *out, size_t len)
{
    char line[256], model[128] = "unknown CPU";
    struct utsname u;
    long mem_kb = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");

    while (f != NULL && fgets(line, sizeof(line), f))
        if (strncmp(line, "model name", 10) == 0) {
            snprintf(model, sizeof(model), "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    if (f != NULL)
        fclose(f);
    f = fopen("/proc/meminfo", "r");
    while (f != NULL && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemTotal: %ld", &mem_kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    uname(&u);
    snprintf(out, len, "%s, %ld CPUs, %.1f GiB RAM, Linux %s", model,
             sysconf(_SC_NPROCESSORS_ONLN), (double)mem_kb / 1048576.0,
             u.release);
}

/* The 1-minute load average, or -1 when /proc cannot tell. */
static double
loadavg(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double v = -1;

    if (f != NULL) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static double load_start;
static double load_end;

/* A number for the table: blank when zero. */
static void
fmt_num(char *out, size_t len, double v, int decimals)
{
    if (v == 0)
        snprintf(out, len, "-");
    else
        snprintf(out, len, "%.*f", decimals, v);
}

/* in_order - the i-th row of the table: rows grouped by scenario, the
 * scenarios in the order they first came (the compared rows, measured in
 * pairs after the others, join their scenario's). */
static const struct bench_row *
in_order(int i)
{
    static int order[MAX_ROWS], n = -1;

    if (n != nrows) {
        n = 0;
        for (int a = 0; a < nrows; a++) {
            int seen = 0;
            for (int b = 0; b < a && !seen; b++)
                seen = strcmp(rows[a].scenario, rows[b].scenario) == 0;
            for (int b = a; b < nrows && !seen; b++)
                if (strcmp(rows[a].scenario, rows[b].scenario) == 0)
                    order[n++] = b;
        }
    }
    return &rows[order[i]];
}

/* Print the table (markdown when md) to f. */
static void
print_table(FILE *f, int md)
{
    char rate[24], p50[24], p99[24], ratio[40];
    const struct bench_row *r;

    if (md) {
        fprintf(f, "| scenario | system | workload | rate | unit | p50 µs "
                   "| p99 µs | ratio (min-max) | notes |\n");
        fprintf(f, "|---|---|---|---:|---|---:|---:|---:|---|\n");
    } else {
        fprintf(f, "%-8s %-12s %-54s %12s %-9s %9s %9s %17s  %s\n", "scenario",
                "system", "workload", "rate", "unit", "p50 us", "p99 us",
                "ratio (min-max)", "notes");
    }
    for (int i = 0; i < nrows; i++) {
        r = in_order(i);
        fmt_num(rate, sizeof(rate), r->ok ? r->rate : 0, 0);
        fmt_num(p50, sizeof(p50), r->ok ? r->p50_us : 0, 1);
        fmt_num(p99, sizeof(p99), r->ok ? r->p99_us : 0, 1);
        fmt_ratio(ratio, sizeof(ratio), row_ratio(r));
        if (md)
            fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s%s |\n",
                    r->scenario, r->system, r->variant, rate, r->unit, p50, p99,
                    ratio, r->ok ? "" : "**failed**: ", r->note);
        else
            fprintf(f, "%-8s %-12s %-54s %12s %-9s %9s %9s %17s  %s%s\n",
                    r->scenario, r->system, r->variant, rate, r->unit, p50, p99,
                    ratio, r->ok ? "" : "FAILED: ", r->note);
    }
}

/* Write s as a JSON string. */
static void
json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* Write every row as JSON to path; 0 or -errno. */
static int
write_json(const char *path, const char *mach)
{
    FILE *f = fopen(path, "w");
    const struct bench_row *r;

    if (f == NULL)
        return -errno;
    fprintf(f, "{\"machine\":");
    json_str(f, mach);
    fprintf(f, ",\"label\":");
    json_str(f, bench_opt.label ? bench_opt.label : "");
    fprintf(f,
            ",\"quick\":%s,\"time\":%lld,\"load_start\":%.2f,"
            "\"load_end\":%.2f,\"rows\":[",
            bench_opt.quick ? "true" : "false", (long long)time(NULL),
            load_start, load_end);
    for (int i = 0; i < nrows; i++) {
        struct ratio q;
        r = in_order(i);
        q = row_ratio(r);
        fprintf(f, "%s\n{\"key\":", i ? "," : "");
        json_str(f, r->key);
        fprintf(f, ",\"scenario\":");
        json_str(f, r->scenario);
        fprintf(f, ",\"system\":");
        json_str(f, r->system);
        fprintf(f, ",\"workload\":");
        json_str(f, r->variant);
        fprintf(f,
                ",\"ok\":%s,\"rate\":%.1f,\"unit\":", r->ok ? "true" : "false",
                r->rate);
        json_str(f, r->unit);
        fprintf(f,
                ",\"p50_us\":%.1f,\"p99_us\":%.1f,\"samples\":%d,"
                "\"ratio\":%.3f,\"ratio_min\":%.3f,\"ratio_max\":%.3f,"
                "\"pairs\":%d,\"ref\":",
                r->p50_us, r->p99_us, r->nsamples, q.median, q.min, q.max,
                q.pairs);
        json_str(f, r->ref);
        fprintf(f,
                ",\"cpu_us_per_op\":%.1f,\"client_cpu_us_per_op\":%.1f,"
                "\"tcp_segs_per_op\":%.2f",
                r->cpu_us, r->client_us, r->segs);
        fprintf(f, ",\"note\":");
        json_str(f, r->note);
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    return fclose(f) == 0 ? 0 : -errno;
}

/* Write the markdown table (with the machine) to path; 0 or -errno. */
static int
write_md(const char *path, const char *mach)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        return -errno;
    fprintf(f,
            "Machine: %s. Mode: %s (%s a compared scenario). %s%s1-minute "
            "load average: %.2f before the run, %.2f after it.\n\n",
            mach, bench_opt.quick ? "QUICK=1" : "full",
            bench_opt.quick ? "1 pair" : "3 pairs",
            bench_opt.label ? bench_opt.label : "", bench_opt.label ? ". " : "",
            load_start, load_end);
    print_table(f, 1);
    return fclose(f) == 0 ? 0 : -errno;
}

/* Raise the open-file limit as far as allowed (parked needs ~10k). */
static void
raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (rl.rlim_max < 65536) {
        struct rlimit big = {65536, 65536};

        if (setrlimit(RLIMIT_NOFILE, &big) == 0)
            return;
    }
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* Print a port nothing listens on (bind to 0, read it back). */
static int
free_port(void)
{
    int port = bench_free_port();

    if (port < 0) {
        fprintf(stderr, "mayfly-bench: free-port: %s\n", strerror(-port));
        return 1;
    }
    printf("%d\n", port);
    return 0;
}

/* What an "ok" request's req_cls points at. */
static int ok_seen;

/* libmicrohttpd handler: "ok" to everything, answered on the second call
 * (once the request is complete), or MHD closes the connection after it. */
static enum MHD_Result
ok_handler(void *cls, struct MHD_Connection *conn, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_size, void **req_cls)
{
    struct MHD_Response *resp = cls;

    (void)method;
    (void)version;
    if (strncmp(url, BENCH_FLOOR_PREFIX, strlen(BENCH_FLOOR_PREFIX)) == 0)
        return (enum MHD_Result)bench_floor_handler(conn, url, upload,
                                                    upload_size, req_cls);
    if (*req_cls == NULL) {
        *req_cls = &ok_seen;
        return MHD_YES;
    }
    *upload_size = 0;
    return MHD_queue_response(conn, MHD_HTTP_OK, resp);
}

/* libmicrohttpd: a request is done; free the floor server's state. */
static void
ok_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
             enum MHD_RequestTerminationCode why)
{
    (void)cls;
    (void)conn;
    (void)why;
    if (*req_cls != &ok_seen)
        bench_floor_completed(req_cls);
}

/* Serve "ok" on 127.0.0.1:port with two epoll threads until signalled,
 * and the rpc floor (floor.c) under BENCH_FLOOR_PREFIX. */
static int
serve_ok(int port)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        3, (void *)"ok\n", MHD_RESPMEM_PERSISTENT);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d;
    struct timespec tick = {0, 50000000};
    sigset_t set;

    raise_nofile();
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
            MHD_ALLOW_SUSPEND_RESUME,
        (uint16_t)port, NULL, NULL, ok_handler, resp, MHD_OPTION_SOCK_ADDR, &sa,
        MHD_OPTION_THREAD_POOL_SIZE, 2u, MHD_OPTION_CONNECTION_LIMIT, 20000u,
        MHD_OPTION_CONNECTION_TIMEOUT, 0u, MHD_OPTION_NOTIFY_COMPLETED,
        ok_completed, NULL, MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "mayfly-bench: cannot serve on port %d\n", port);
        return 1;
    }
    /* Every 50 ms, answer the floor's long polls whose timeout passed. */
    while (sigtimedwait(&set, NULL, &tick) == -1)
        bench_floor_expire(0);
    bench_floor_expire(1);
    MHD_stop_daemon(d);
    MHD_destroy_response(resp);
    return 0;
}

/* Print usage and return 2. */
static int
usage(void)
{
    fprintf(stderr,
            "usage: mayfly-bench free-port\n"
            "       mayfly-bench serve-ok PORT\n"
            "       mayfly-bench run [--quick] [--mayfly PORT] [--mayfly-pid "
            "PID]\n"
            "                    [--redis PORT] [--nats PORT] [--ok PORT]\n"
            "                    [--mayfly-tls PORT (the node with TLS and "
            "auth)]\n"
            "                    [--mayfly-tls-token FILE (its bearer "
            "token)]\n"
            "                    [--mayflyd BINARY (started for each memory "
            "row)]\n"
            "                    [--run-dir DIR (their data and logs)]\n"
            "                    [--json FILE] [--md FILE] [--only "
            "http,push,drain,rpc,rpc1,rpc32,wake,inboxes,parked,stream,\n"
            "                    presence,memory]\n"
            "                    [--parked N (10000)] [--label TEXT] "
            "[--pipeline]\n"
            "                    [--cluster PORT0,PORT1,PORT2 (nodes n0-n2 "
            "on 127.0.0.1-3)]\n");
    return 2;
}

/* The token in the first line of path (its line end dropped), for
 * --mayfly-tls-token; NULL, said on stderr, when it cannot be read. */
static const char *
read_token(const char *path)
{
    static char tok[256];
    FILE *f = fopen(path, "r");

    if (f == NULL || fgets(tok, sizeof(tok), f) == NULL) {
        fprintf(stderr, "mayfly-bench: no token in %s\n", path);
        if (f != NULL)
            fclose(f);
        return NULL;
    }
    fclose(f);
    tok[strcspn(tok, "\r\n")] = '\0';
    return tok;
}

/* Parse the options of `run`; 0 or 2. */
static int
parse_run(int argc, char **argv)
{
    bench_opt.threads = 2;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--quick") == 0) {
            bench_opt.quick = 1;
            continue;
        }
        if (strcmp(a, "--pipeline") == 0) {
            bench_opt.pipeline = 1;
            continue;
        }
        if (v == NULL)
            return usage();
        i++;
        if (strcmp(a, "--mayfly") == 0)
            bench_opt.mport = atoi(v);
        else if (strcmp(a, "--mayfly-pid") == 0)
            bench_opt.mpid = (pid_t)atoi(v);
        else if (strcmp(a, "--redis") == 0)
            bench_opt.rport = atoi(v);
        else if (strcmp(a, "--nats") == 0)
            bench_opt.nport = atoi(v);
        else if (strcmp(a, "--ok") == 0)
            bench_opt.okport = atoi(v);
        else if (strcmp(a, "--mayfly-tls") == 0)
            bench_opt.tport = atoi(v);
        else if (strcmp(a, "--mayfly-tls-token") == 0) {
            if ((bench_opt.ttoken = read_token(v)) == NULL)
                return usage();
        } else if (strcmp(a, "--mayflyd") == 0)
            bench_opt.mayflyd = v;
        else if (strcmp(a, "--run-dir") == 0)
            bench_opt.rundir = v;
        else if (strcmp(a, "--json") == 0)
            bench_opt.json = v;
        else if (strcmp(a, "--md") == 0)
            bench_opt.md = v;
        else if (strcmp(a, "--only") == 0)
            bench_opt.only = v;
        else if (strcmp(a, "--label") == 0)
            bench_opt.label = v;
        else if (strcmp(a, "--parked") == 0)
            bench_opt.parked = atoi(v);
        else if (strcmp(a, "--cluster") == 0)
            sscanf(v, "%d,%d,%d", &bench_opt.cluster[0], &bench_opt.cluster[1],
                   &bench_opt.cluster[2]);
        else
            return usage();
    }
    bench_opt.warm = bench_opt.quick ? 0.2 : 1.0;
    bench_opt.secs = bench_opt.quick ? 1.0 : 4.0;
    bench_opt.inboxes = bench_opt.quick ? 10000 : 100000;
    if (bench_opt.parked <= 0)
        bench_opt.parked = 10000;
    return 0;
}

/* Wait for mayfly to answer GET /health with 200, at most 30 s. */
static int
mayfly_ready(void)
{
    uint64_t until = bench_now_ns() + 30000000000ull;
    struct bench_buf in = {0}, chunk = {0};
    struct bench_reply r;
    int fd, rc = -ETIMEDOUT;

    while (bench_now_ns() < until && rc != 0) {
        fd = bench_tcp_connect(bench_opt.mport);
        if (fd >= 0) {
            if (bench_http_call(fd, &in, &chunk, "GET", "/health", NULL, &r) ==
                    0 &&
                r.status == 200)
                rc = 0;
            close(fd);
        }
        if (rc != 0)
            bench_sleep_ns(100000000);
    }
    bench_buf_free(&in);
    bench_buf_free(&chunk);
    return rc;
}

/*
 * compared_pairs - each scenario mayfly is compared in runs mayfly's rows
 * and its peers' back to back, pair after pair (A B A B ...: three pairs,
 * one with --quick), so that a ratio compares two figures taken under the
 * same load; the table gives the median of the pairs' ratios and their
 * spread (row_ratio).  m: mayfly answers.
 */
static void
compared_pairs(int m)
{
    static const char *const compared[] = {"push", "drain",  "rpc1",    "rpc32",
                                           "wake", "stream", "presence"};
    int pairs = bench_opt.quick ? 1 : 3;
    int redis =
        bench_opt.rport > 0 && bench_wait_port(bench_opt.rport, 10) == 0;
    int nats = bench_opt.nport > 0 && bench_wait_port(bench_opt.nport, 10) == 0;

    for (size_t k = 0; k < sizeof(compared) / sizeof(compared[0]); k++) {
        const char *s = compared[k];
        /* rpc1 and rpc32 carry the request verb's rows (request1, 32) */
        char verb[16];
        snprintf(verb, sizeof(verb), "request%s", s + 3);
        if (!bench_want(s) && !(strncmp(s, "rpc", 3) == 0 &&
                                (bench_want("rpc") || bench_want(verb))))
            continue;
        for (int p = 0; p < pairs; p++) {
            /* stream: the fan-out row (stream.c), presence: the churn
             * (presence.c), both against NATS only */
            int pres = strcmp(s, "presence") == 0;
            if (m && strcmp(s, "stream") == 0)
                bench_stream_fanout(0);
            else if (m && pres)
                bench_presence_churn(0);
            else if (m)
                bench_mayfly_compared(s);
            if (redis && strcmp(s, "stream") != 0 && !pres)
                bench_redis_compared(s);
            if (nats && strcmp(s, "stream") == 0)
                bench_stream_fanout(1);
            else if (nats && pres)
                bench_presence_churn(1);
            else if (nats)
                bench_nats_compared(s);
        }
    }
    if (nats)
        bench_nats_close();
}

/*
 * memory_rows - every memory row, each on a mayflyd of its own that has
 * served nothing before (node.c): on the node that ran the other rows,
 * heap they freed moves its PSS either way.  With a scenario's rows (the
 * held message with push, backlog or drain), or all of them alone with
 * --only memory.  Before the other rows, while the machine is quiet.
 */
static void
memory_rows(void)
{
    int all = bench_want("memory");

    if (all || bench_want("stream"))
        bench_stream_mem();
    if (all || bench_want("push") || bench_want("backlog") ||
        bench_want("drain"))
        bench_mayfly_mem_msg();
    if (all || bench_want("inboxes"))
        bench_mayfly_mem_inbox();
    if (all || bench_want("parked"))
        bench_mayfly_mem_parked();
    if (all || bench_want("presence"))
        bench_presence_mem();
}

/* The whole benchmark. */
static int
run_all(void)
{
    char mach[256];
    int rc = 0;

    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    machine(mach, sizeof(mach));
    load_start = loadavg();
    fprintf(stderr, "mayfly-bench: %s, load average %.2f\n", mach, load_start);
    if (bench_opt.okport > 0 && bench_want("http") &&
        bench_wait_port(bench_opt.okport, 10) == 0)
        bench_mayfly_http("http-ok", bench_opt.okport, "/",
                          "libmicrohttpd answering ok");
    if (bench_opt.cluster[0] > 0)
        bench_cluster_all();
    int m = bench_opt.mport > 0 && mayfly_ready() == 0;
    if (m)
        memory_rows();
    if (m && bench_want("stream"))
        bench_stream_all();
    if (m)
        bench_mayfly_all();
    if (m && bench_want("presence"))
        bench_presence_all();
    if (!m && bench_opt.cluster[0] == 0)
        bench_row_fail("push", "all", "mayfly", "every mayfly scenario",
                       "mayflyd did not answer GET /health with 200");
    compared_pairs(m);
    load_end = loadavg();
    printf("\n%s; load average %.2f before, %.2f after\n", mach, load_start,
           load_end);
    print_table(stdout, 0);
    printf("\nratio: the row named in ref (mayfly, or mayfly-bench for "
           "wrk%s) / this row; for wake it compares p50 latency; a mayfly "
           "row with a ratio of its own (rpc-request, drain-ack-one) is "
           "that row / the better peer row of the same pair. A compared "
           "scenario runs mayfly and its peers back to back, %d pair%s: the "
           "median of the pairs' ratios (min-max); rates and percentiles are "
           "the samples' medians.\n",
           bench_opt.cluster[0] ? "; for n1->n0, n0 alone" : "",
           bench_opt.quick ? 1 : 3, bench_opt.quick ? "" : "s");
    if (bench_opt.json && write_json(bench_opt.json, mach) != 0) {
        perror("mayfly-bench: json");
        rc = 1;
    }
    if (bench_opt.md && write_md(bench_opt.md, mach) != 0) {
        perror("mayfly-bench: md");
        rc = 1;
    }
    return rc;
}

int
main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "free-port") == 0)
        return free_port();
    if (argc == 3 && strcmp(argv[1], "serve-ok") == 0)
        return serve_ok(atoi(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "run") == 0) {
        if (parse_run(argc, argv) != 0)
            return 2;
        return run_all();
    }
    return usage();
}
