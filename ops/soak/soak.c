/*
 * soak.c - mayfly-soak: the load and the bookkeeping of `make soak`
 * (ops/soak/soak.sh starts the nodes and injects the faults).
 *
 * Against each node: a pusher for an ack-mode queue and one for an autoAck
 * queue (10 messages a request, paced to the offered rate), two
 * long-polling consumers that ack what they get, one with autoAck, and an
 * rpc requester and responder (a request names a fresh inbox the requester
 * then long-polls, the Queen inbox pattern).  Threads with one keep-alive
 * libcurl handle each: the load is a few dozen connections, far below what
 * needs an event loop, and a thread blocked on a stopped node holds up only
 * its own traffic.  Every message carries a unique id and its push time.
 *
 * Every 10 s a CSV row: pushed, delivered, e2e p50/p99, push p99, errors by
 * code, each node's memory (PSS of master and workers) and accounted bytes.  At the
 * end, after draining: loss and duplicates by id, a summary in summary.md,
 * and exit 1 if an ack-mode message was lost that no node killed with
 * kill -9 had accepted before its kill.  For that, each accepted ack-mode
 * push is recorded with the incarnation that holds it (the owner's, in the
 * ids it answers) and when it was sent (charge.h says why that time);
 * faults.log, which soak.sh writes, names each killed incarnation and
 * when it was killed.
 */
#include <sys/types.h>

#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "ops/soak/charge.h"

#define NODES_MAX 3
#define BATCH     10
#define WINDOW_S  10
#define HBUCKETS  (40 * 16)
#define INC_MAX   254 /* incarnations told apart; 255: unknown */
#define KILLS_MAX 256

enum { QACK, QAUTO, NQ };
static const char *qname[NQ] = {"soak-ack", "soak-auto"};
enum { E_NET, E_429, E_503, E_OTHER, NERR };
static const char *ename[NERR] = {"err_conn", "err_429", "err_503",
                                  "err_other"};

/* A latency histogram of one window: log2 buckets of microseconds, 16
 * sub-buckets each. */
struct hist {
    _Atomic uint64_t b[HBUCKETS];
};

struct window {
    _Atomic uint64_t pushed, delivered[NQ], rpc_ok, err[NERR];
    struct hist e2e, push;
};

static struct {
    char url[NODES_MAX][64];
    int nodes;
    double rate; /* msg/s offered, all nodes and both queues */
    int seconds, drain_s;
    const char *dir;
    atomic_int stop_load, stop;
    _Atomic uint64_t next_id[NQ];
    uint64_t max_id;
    _Atomic uint8_t *accepted[NQ], *delivered[NQ];
    /* Per push of queue q (BATCH ids from a multiple of BATCH): the index +
     * 1 in inc[] of the incarnation that accepted it, when it was sent and
     * when its answer came (ms since t0), the node it was pushed to (index
     * in url[]) and its partition (the N of "pN", as the request named
     * it). */
    uint8_t *acc_by[NQ], *acc_node[NQ], *acc_part[NQ];
    uint32_t *acc_ms[NQ], *sent_ms[NQ];
    uint64_t inc[INC_MAX], t0_us;
    int64_t real_off_us; /* the wall clock less the boot-time one, at t0 */
    int ninc;
    /* Each node's incarnations as its /health said them, each with when
     * it was first seen (ms since t0): whose is an id's incarnation. */
    struct {
        uint64_t inc;
        int node;
        int64_t seen_ms;
    } seen[INC_MAX];
    int nseen;
    pthread_mutex_t inc_lock;
    struct window w[2]; /* current and previous, flipped by the reporter */
    atomic_int cur;
    _Atomic uint64_t rpc_calls, rpc_replies;
} S;

/* Boot-time clock in microseconds: soak.sh stamps faults from
 * /proc/uptime, the same clock. */
static uint64_t
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void
hist_add(struct hist *h, uint64_t us)
{
    int lg = 63 - __builtin_clzll(us | 1);
    int sub = lg >= 4 ? (int)((us >> (lg - 4)) & 15) : (int)(us & 15);
    int i = lg * 16 + sub;

    atomic_fetch_add(&h->b[i < HBUCKETS ? i : HBUCKETS - 1], 1);
}

/* Quantile q of h in ms (0 when empty). */
static double
hist_q(struct hist *h, double q)
{
    uint64_t n = 0, seen = 0;

    for (int i = 0; i < HBUCKETS; i++)
        n += h->b[i];
    if (n == 0)
        return 0;
    for (int i = 0; i < HBUCKETS; i++) {
        seen += h->b[i];
        if (seen >= (uint64_t)(q * (double)n) && seen > 0) {
            int lg = i / 16, sub = i % 16;
            uint64_t us =
                lg >= 4 ? (uint64_t)(16 + sub) << (lg - 4) : (uint64_t)sub;
            return (double)us / 1000.0;
        }
    }
    return 0;
}

static struct window *
win(void)
{
    return &S.w[atomic_load(&S.cur)];
}

/* A response body, growable. */
struct body {
    char *p;
    size_t len, cap;
};

static size_t
body_write(char *d, size_t sz, size_t n, void *arg)
{
    struct body *b = arg;
    size_t k = sz * n;

    if (b->len + k + 1 > b->cap) {
        b->cap = (b->len + k + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL)
            abort();
    }
    memcpy(b->p + b->len, d, k);
    b->len += k;
    b->p[b->len] = 0;
    return k;
}

/* One request on h; the status (0: transport failure), body in b. */
static long
req(CURL *h, const char *method, const char *url, const char *data,
    struct body *b, long timeout_ms)
{
    long status = 0;

    b->len = 0;
    if (b->p)
        b->p[0] = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(h, CURLOPT_HTTPGET, data == NULL ? 1L : 0L);
    if (data == NULL)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 201 && status != 204) {
        int e = status == 0     ? E_NET
                : status == 429 ? E_429
                : status == 503 ? E_503
                                : E_OTHER;
        atomic_fetch_add(&win()->err[e], 1);
    }
    return status;
}

static CURL *
handle(void)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hd =
        curl_slist_append(NULL, "Content-Type: application/json");

    if (h == NULL || hd == NULL)
        abort();
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd); /* kept for the run */
    return h;
}

static void
sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

    nanosleep(&ts, NULL);
}

struct role {
    int node, q;
};

/* The incarnation in the first id of push answer b, as an index + 1 in
 * S.inc (255 when it cannot be read or told apart). */
static uint8_t
accepted_by(const char *b)
{
    static const char key[] = "\"ids\":[\"e:";
    const char *p = b ? strstr(b, key) : NULL;
    char *end;
    uint8_t idx = 255;

    if (p == NULL)
        return idx;
    p += sizeof(key) - 1;
    uint64_t inc = strtoull(p, &end, 16);
    if (end != p + 16 || *end != ':')
        return idx;
    pthread_mutex_lock(&S.inc_lock);
    for (int i = 0; i < S.ninc && idx == 255; i++)
        if (S.inc[i] == inc)
            idx = (uint8_t)(i + 1);
    if (idx == 255 && S.ninc < INC_MAX) {
        S.inc[S.ninc++] = inc;
        idx = (uint8_t)S.ninc;
    }
    pthread_mutex_unlock(&S.inc_lock);
    return idx;
}

/* Push BATCH fresh ids at a time to node r->node's queue r->q, paced. */
static void *
pusher(void *arg)
{
    struct role *r = arg;
    CURL *h = handle();
    struct body b = {0};
    char url[128], data[4096];
    double per = S.rate / (2.0 * S.nodes); /* msg/s of this pusher */
    uint64_t gap = (uint64_t)(1e6 * BATCH / (per > 1 ? per : 1)),
             next = now_us();

    snprintf(url, sizeof(url), "%s/api/v1/ephemeral/push", S.url[r->node]);
    for (int k = 0; !atomic_load(&S.stop_load); k++) {
        uint64_t t = now_us();
        if (t < next)
            sleep_us(next - t);
        next += gap;
        if (now_us() > next + 1000000)
            next = now_us(); /* fell behind by 1 s: do not burst */
        uint64_t first = atomic_fetch_add(&S.next_id[r->q], BATCH);
        if (first + BATCH > S.max_id)
            break;
        int part = (k * 7 + r->node) % 16;
        int o = snprintf(data, sizeof(data),
                         "{\"queue\":\"%s\",\"partition\":\"p%d\","
                         "\"messages\":[",
                         qname[r->q], part);
        uint64_t t0 = now_us();
        for (int i = 0; i < BATCH; i++)
            o += snprintf(data + o, sizeof(data) - (size_t)o,
                          "%s{\"payload\":{\"id\":%llu,\"t\":%llu,\"pad\":"
                          "\"%0200d\"}}",
                          i ? "," : "", (unsigned long long)(first + i),
                          (unsigned long long)t0, 0);
        snprintf(data + o, sizeof(data) - (size_t)o, "]}");
        long st = req(h, "POST", url, data, &b, 10000);
        hist_add(&win()->push, now_us() - t0);
        if (st == 201) {
            S.acc_by[r->q][first / BATCH] = accepted_by(b.p);
            S.acc_ms[r->q][first / BATCH] =
                (uint32_t)((now_us() - S.t0_us) / 1000);
            S.sent_ms[r->q][first / BATCH] = (uint32_t)((t0 - S.t0_us) / 1000);
            S.acc_node[r->q][first / BATCH] = (uint8_t)r->node;
            S.acc_part[r->q][first / BATCH] = (uint8_t)part;
            for (int i = 0; i < BATCH; i++)
                atomic_store(&S.accepted[r->q][first + i], 1);
            atomic_fetch_add(&win()->pushed, BATCH);
        }
    }
    free(b.p);
    curl_easy_cleanup(h);
    return NULL;
}

/* The value after "key": in s from p on (a number), or -1. */
static long long
num_after(const char *p, const char *key, const char **end)
{
    const char *k = strstr(p, key);

    if (k == NULL)
        return -1;
    k += strlen(key);
    *end = k;
    return strtoll(k, NULL, 10);
}

/* Count each delivered id in body b of queue q; fills ids for an ack. */
static int
count_delivered(int q, const char *b, char *ack, size_t acklen)
{
    const char *p = b, *e;
    int n = 0, o = 0;
    uint64_t now = now_us();

    /* Each message: {"id":"<id>","partition":..,"payload":{"id":X,"t":T,
     * "pad":".."},"attempts":N} (SPEC's order). */
    while ((p = strstr(p, "\"id\":\"")) != NULL) {
        const char *idb = p + 6, *ide = strchr(idb, '"');
        if (ide == NULL)
            break;
        long long id = num_after(ide, "\"payload\":{\"id\":", &e);
        long long t = id < 0 ? -1 : num_after(e, "\"t\":", &e);
        long long att = t < 0 ? -1 : num_after(e, "\"attempts\":", &e);
        if (att < 0)
            break;
        if ((uint64_t)id < S.max_id)
            atomic_fetch_add(&S.delivered[q][id], 1);
        hist_add(&win()->e2e, now > (uint64_t)t ? now - (uint64_t)t : 0);
        if (ack && o < (int)acklen - 200)
            o += snprintf(ack + o, acklen - (size_t)o,
                          "%s{\"id\":\"%.*s\",\"attempts\":%lld}", n ? "," : "",
                          (int)(ide - idb), idb, att);
        n++;
        p = e;
    }
    atomic_fetch_add(&win()->delivered[q], (uint64_t)n);
    return n;
}

/* Long-poll node r->node's queue r->q; ack (QACK) or autoAck (QAUTO). */
static void *
consumer(void *arg)
{
    struct role *r = arg;
    CURL *h = handle();
    struct body b = {0}, a = {0};
    char url[256], aurl[128], *ack = malloc(1 << 16), *acks = malloc(1 << 16);

    snprintf(url, sizeof(url),
             "%s/api/v1/ephemeral/pop?queue=%s&group=g&batch=50&wait=true"
             "&timeout=1000%s",
             S.url[r->node], qname[r->q], r->q == QAUTO ? "&autoAck=true" : "");
    snprintf(aurl, sizeof(aurl), "%s/api/v1/ephemeral/ack", S.url[r->node]);
    while (!atomic_load(&S.stop)) {
        long st = req(h, "GET", url, NULL, &b, 8000);
        if (st != 200) {
            sleep_us(100000);
            continue;
        }
        int n = count_delivered(r->q, b.p, r->q == QACK ? ack : NULL, 1 << 16);
        if (n > 0 && r->q == QACK) {
            snprintf(acks, 1 << 16,
                     "{\"queue\":\"%s\",\"group\":\"g\","
                     "\"acks\":[%s]}",
                     qname[r->q], ack);
            req(h, "POST", aurl, acks, &a, 8000);
        }
    }
    free(ack), free(acks), free(b.p), free(a.p);
    curl_easy_cleanup(h);
    return NULL;
}

/* rpc responder: pop requests (autoAck), push each reply to its inbox. */
static void *
responder(void *arg)
{
    struct role *r = arg;
    CURL *h = handle();
    struct body b = {0}, p = {0};
    char url[256], purl[128], data[512];

    snprintf(url, sizeof(url),
             "%s/api/v1/ephemeral/pop?queue=soak-rpc&group=srv&batch=10"
             "&wait=true&timeout=1000&autoAck=true",
             S.url[r->node]);
    snprintf(purl, sizeof(purl), "%s/api/v1/ephemeral/push", S.url[r->node]);
    while (!atomic_load(&S.stop)) {
        if (req(h, "GET", url, NULL, &b, 8000) != 200) {
            sleep_us(100000);
            continue;
        }
        for (const char *s = b.p; (s = strstr(s, "\"replyTo\":\"")) != NULL;) {
            const char *nb = s + 11, *ne = strchr(nb, '"');
            if (ne == NULL)
                break;
            snprintf(data, sizeof(data),
                     "{\"queue\":\"%.*s\",\"messages\":[{\"payload\":1}]}",
                     (int)(ne - nb), nb);
            req(h, "POST", purl, data, &p, 8000);
            s = ne;
        }
    }
    free(b.p), free(p.p);
    curl_easy_cleanup(h);
    return NULL;
}

/* rpc requester: a request naming a fresh inbox, then a long poll on it. */
static void *
requester(void *arg)
{
    struct role *r = arg;
    CURL *h = handle();
    struct body b = {0};
    char url[256], purl[128], data[512], inbox[64];

    snprintf(purl, sizeof(purl), "%s/api/v1/ephemeral/push", S.url[r->node]);
    for (long k = 0; !atomic_load(&S.stop_load); k++) {
        snprintf(inbox, sizeof(inbox), "soak-inbox-%d-%ld", r->node, k);
        snprintf(data, sizeof(data),
                 "{\"queue\":\"soak-rpc\",\"messages\":[{\"payload\":"
                 "{\"replyTo\":\"%s\"}}]}",
                 inbox);
        atomic_fetch_add(&S.rpc_calls, 1);
        if (req(h, "POST", purl, data, &b, 8000) != 201) {
            sleep_us(100000);
            continue;
        }
        snprintf(url, sizeof(url),
                 "%s/api/v1/ephemeral/pop?queue=%s&wait=true&timeout=5000"
                 "&autoAck=true",
                 S.url[r->node], inbox);
        if (req(h, "GET", url, NULL, &b, 10000) == 200 &&
            strstr(b.p, "\"payload\":1") != NULL) {
            atomic_fetch_add(&S.rpc_replies, 1);
            atomic_fetch_add(&win()->rpc_ok, 1);
        }
    }
    free(b.p);
    curl_easy_cleanup(h);
    return NULL;
}

/* A node's memory in kB: the proportional set size (smaps_rollup's Pss)
 * of its master and workers, summed.  Each page the processes share (the
 * segment, the code) counts once in the sum, where their VmRSS would count
 * it once a process. */
static long
node_pss_kb(int node)
{
    char path[512], line[256];
    long pid = 0, kb = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/n%d.pid", S.dir, node + 1);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (pid > 0 && d && (e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        long me = atol(e->d_name), pp = -1, pss = 0;
        snprintf(path, sizeof(path), "/proc/%ld/status", me);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        while (fgets(line, sizeof(line), f))
            sscanf(line, "PPid: %ld", &pp);
        fclose(f);
        if (me != pid && pp != pid)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/smaps_rollup", me);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "Pss: %ld", &pss) == 1)
                break;
        fclose(f);
        kb += pss;
    }
    if (d)
        closedir(d);
    return kb;
}

/* A node's mayfly_memory_used_bytes (-1 when it does not answer). */
static long long
node_accounted(CURL *h, int node, struct body *b)
{
    char url[128];
    const char *e;

    snprintf(url, sizeof(url), "%s/metrics", S.url[node]);
    if (req(h, "GET", url, NULL, b, 2000) != 200)
        return -1;
    const char *p = strstr(b->p, "\nmayfly_memory_used_bytes ");
    return p ? num_after(p, "mayfly_memory_used_bytes ", &e) : -1;
}

/* Node node's incarnation from its /health, noted in S.seen when new. */
static void
note_incarnation(CURL *h, int node, struct body *b)
{
    static const char key[] = "\"incarnation\":\"";
    char url[128], *end;
    const char *p;

    /* Not req(): a 503 of a starting node is no error of the load. */
    snprintf(url, sizeof(url), "%s/health", S.url[node]);
    b->len = 0;
    if (b->p)
        b->p[0] = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 300L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(h) != CURLE_OK || b->p == NULL ||
        (p = strstr(b->p, key)) == NULL)
        return;
    p += sizeof(key) - 1;
    uint64_t inc = strtoull(p, &end, 16);
    if (end != p + 16)
        return;
    pthread_mutex_lock(&S.inc_lock);
    int i = 0;
    while (i < S.nseen && S.seen[i].inc != inc)
        i++;
    if (i == S.nseen && S.nseen < INC_MAX)
        S.seen[S.nseen++] = (__typeof__(S.seen[0])){
            inc, node, (int64_t)((now_us() - S.t0_us) / 1000)};
    pthread_mutex_unlock(&S.inc_lock);
}

/* Every WINDOW_S: one CSV row from the window just closed. */
static void *
reporter(void *arg)
{
    FILE *csv = arg;
    CURL *h = handle();
    struct body b = {0};
    uint64_t t0 = now_us(), next = t0;

    fprintf(csv, "t_s,boot_s,pushed,delivered_ack,delivered_auto,rpc_ok,"
                 "e2e_p50_ms,e2e_p99_ms,push_p99_ms");
    for (int e = 0; e < NERR; e++)
        fprintf(csv, ",%s", ename[e]);
    for (int i = 0; i < S.nodes; i++)
        fprintf(csv, ",pss_mb_%d,accounted_mb_%d", i + 1, i + 1);
    fprintf(csv, "\n");
    while (!atomic_load(&S.stop)) {
        next += WINDOW_S * 1000000ULL;
        /* Each second, a restarted node's incarnation is seen soon: while
         * more than a second of the window is left, which the asks (300 ms
         * at most each) cannot overrun. */
        for (uint64_t at = now_us(); at < next && !atomic_load(&S.stop);
             at = now_us()) {
            if (next - at > 1000000)
                for (int i = 0; i < S.nodes; i++)
                    note_incarnation(h, i, &b);
            at = now_us();
            if (at < next)
                sleep_us(next - at < 1000000 ? next - at : 1000000);
        }
        int c = atomic_load(&S.cur);
        memset(&S.w[!c], 0, sizeof(S.w[!c]));
        atomic_store(&S.cur, !c);
        sleep_us(50000); /* let the requests that read cur finish */
        struct window *w = &S.w[c];
        fprintf(csv, "%.0f,%.1f,%llu,%llu,%llu,%llu,%.2f,%.2f,%.2f",
                (double)(now_us() - t0) / 1e6, (double)now_us() / 1e6,
                (unsigned long long)w->pushed,
                (unsigned long long)w->delivered[QACK],
                (unsigned long long)w->delivered[QAUTO],
                (unsigned long long)w->rpc_ok, hist_q(&w->e2e, 0.5),
                hist_q(&w->e2e, 0.99), hist_q(&w->push, 0.99));
        for (int e = 0; e < NERR; e++)
            fprintf(csv, ",%llu", (unsigned long long)w->err[e]);
        for (int i = 0; i < S.nodes; i++)
            fprintf(csv, ",%.1f,%.1f", node_pss_kb(i) / 1024.0,
                    node_accounted(h, i, &b) / 1048576.0);
        fprintf(csv, "\n");
        fflush(csv);
    }
    free(b.p);
    curl_easy_cleanup(h);
    return NULL;
}

static int
cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* A kill -9 of a node, as faults.log says: the incarnation killed (index
 * + 1 in S.inc, 0 when it accepted nothing), by when it was over (ms since
 * t0: kill_by_ms), and what the node held when sampled just before. */
struct kill {
    int node;
    uint8_t by;
    long long held;
    int64_t ms, sample_ms;
    uint64_t lost, accepted, accepted_since; /* ids */
};

/* Boot-time seconds t as ms since the driver's t0. */
static int64_t
since_t0_ms(double t)
{
    return (int64_t)(t * 1000.0) - (int64_t)(S.t0_us / 1000);
}

/* By when a kill was over, as ms since t0: its stamp, taken after the
 * kill, by the wall clock's seconds real when given (the driver converts
 * with the offset it took at t0: the clocks drift apart only by what NTP
 * slews in a run, well under a ms a minute), else boot-time seconds t
 * (/proc/uptime's, truncated to 10 ms); the next ms, or the end of those
 * 10 ms. */
static int64_t
kill_by_ms(double t, double real)
{
    if (real > 0)
        return ((int64_t)(real * 1e6) - S.real_off_us - (int64_t)S.t0_us) /
                   1000 +
               1;
    return since_t0_ms(t) + SOAK_UPTIME_MS;
}

/* The index + 1 in S.inc of incarnation hex (0: none of its pushes). */
static uint8_t
known_incarnation(const char *hex)
{
    char *end;
    uint64_t inc = strtoull(hex, &end, 16);

    if (end != hex + 16)
        return 0;
    for (int i = 0; i < S.ninc; i++)
        if (S.inc[i] == inc)
            return (uint8_t)(i + 1);
    return 0;
}

/* A fault as faults.log says: when (ms since t0), its kind and node. */
struct fault {
    int64_t ms;
    char kind[64];
    int node;
};

/* The node whose /health named incarnation index + 1 by (0: unknown), and
 * when it was first seen there (ms since t0) in *ms. */
static int
incarnation_node(uint8_t by, int64_t *ms)
{
    *ms = -1;
    if (by == 0 || by > S.ninc)
        return 0;
    for (int i = 0; i < S.nseen; i++)
        if (S.seen[i].inc == S.inc[by - 1]) {
            *ms = S.seen[i].seen_ms;
            return S.seen[i].node + 1;
        }
    return 0;
}

/* A lost push batch b of queue q, for the list: its first id, the node it
 * was pushed to, the incarnation that accepted it and the partition. */
static void
lost_batch(FILE *out, int q, uint64_t b, const struct kill *killed)
{
    uint8_t by = S.acc_by[q][b];
    int64_t seen_ms;
    int owner = incarnation_node(by, &seen_ms);

    fprintf(out,
            "  - first id %" PRIu64 ": pushed to node %d, partition p%u, "
            "sent %.3f s in, accepted (answered) %.3f s in by incarnation "
            "#%u %016" PRIx64,
            b * BATCH, S.acc_node[q][b] + 1, S.acc_part[q][b],
            (double)S.sent_ms[q][b] / 1000.0, (double)S.acc_ms[q][b] / 1000.0,
            by, by != 0 && by <= S.ninc ? S.inc[by - 1] : 0);
    if (owner != 0)
        fprintf(out, " (node %d's, seen from %.1f s)", owner,
                (double)seen_ms / 1000.0);
    if (killed != NULL)
        fprintf(out, "; charged to the kill -9 of node %d at %.3f s",
                killed->node, (double)killed->ms / 1000.0);
    fprintf(out, "\n");
}

/* Loss by id in queue q: each lost id is charged to the kill -9 of the
 * incarnation that accepted it, when it accepted it before that kill, or
 * else counted as lost while its node lived.  In ack mode that is a
 * failure; in autoAck mode (at most once) a message whose pop answer never
 * reached its consumer is lost by contract.  Both list the ids lost while
 * their node lived by the first fault after they were accepted, and the
 * first 20 lost push batches.  Writes the account to out; returns the ids
 * lost while their node lived. */
static uint64_t
loss(FILE *out, int q, struct kill *k, int nk, const struct fault *f, int nf)
{
    uint64_t lost = 0, live_lost = 0, end = atomic_load(&S.next_id[q]);
    uint64_t before[KILLS_MAX + 1] = {0};
    long long first_live = -1;
    uint64_t batches[20], last_b = UINT64_MAX;
    int killed[20], nb = 0; /* the kill charged, or -1 */

    for (int j = 0; j < nk; j++)
        k[j].lost = k[j].accepted = k[j].accepted_since = 0;
    for (uint64_t i = 0; i < end && i < S.max_id; i++) {
        if (!S.accepted[q][i] || S.delivered[q][i])
            continue;
        lost++;
        uint64_t b = i / BATCH;
        int64_t at = (int64_t)S.acc_ms[q][b];
        int j = 0;
        while (j < nk &&
               !soak_charged(S.acc_by[q][b], S.sent_ms[q][b], k[j].by, k[j].ms))
            j++;
        if (b != last_b && nb < 20) {
            batches[nb] = b;
            killed[nb++] = j < nk ? j : -1;
        }
        last_b = b;
        if (j < nk) {
            k[j].lost++;
            continue;
        }
        if (live_lost++ == 0)
            first_live = (long long)i;
        int e = 0;
        while (e < nf && f[e].ms < at)
            e++;
        before[e]++;
    }
    for (int j = 0; j < nk; j++)
        for (uint64_t b = 0; b * BATCH < end && b * BATCH < S.max_id; b++)
            if (k[j].by != 0 && S.acc_by[q][b] == k[j].by) {
                k[j].accepted += BATCH;
                if ((int64_t)S.acc_ms[q][b] > k[j].sample_ms &&
                    (int64_t)S.sent_ms[q][b] < k[j].ms)
                    k[j].accepted_since += BATCH;
            }
    fprintf(out,
            "\n%s loss by id: %" PRIu64 " lost, %" PRIu64
            " accepted by a node before it was killed with kill -9, %" PRIu64
            " accepted by a node that lived (first id %lld)",
            q == QACK ? "Ack-mode" : "AutoAck", lost, lost - live_lost,
            live_lost, first_live);
    if (q == QACK)
        fprintf(out, ": %s.\n",
                live_lost == 0 ? "nothing lost that a live node held"
                               : "LOST while their node lived");
    else
        fprintf(out, " (autoAck is at most once: a pop answer cut by a "
                     "fault loses what it carried).\n");
    for (int j = 0; j < nk; j++) {
        fprintf(out,
                "- node %d, killed %.3f s in: lost %" PRIu64 " of the %" PRIu64
                " ids it accepted",
                k[j].node, (double)k[j].ms / 1000.0, k[j].lost, k[j].accepted);
        if (q == QACK)
            fprintf(out,
                    "; it held %lld when sampled %.1f s earlier and accepted "
                    "%" PRIu64 " more before the kill",
                    k[j].held, (double)(k[j].ms - k[j].sample_ms) / 1000.0,
                    k[j].accepted_since);
        fprintf(out, "\n");
    }
    for (int e = 0; e <= nf; e++)
        if (before[e] != 0 && e < nf)
            fprintf(out,
                    "- %" PRIu64 " accepted by a live node before the "
                    "%s of node %d at %.1f s\n",
                    before[e], f[e].kind, f[e].node, (double)f[e].ms / 1000.0);
        else if (before[e] != 0)
            fprintf(out, "- %" PRIu64 " accepted after the last fault\n",
                    before[e]);
    if (nb > 0)
        fprintf(out, "- the lost push batches%s:\n",
                nb == 20 ? " (the first 20)" : "");
    for (int i = 0; i < nb; i++)
        lost_batch(out, q, batches[i], killed[i] >= 0 ? &k[killed[i]] : NULL);
    return live_lost;
}

/* The summary: steady windows from the CSV, the faults, loss by id. */
static int
summarize(const char *csvpath)
{
    char path[512], line[1024];
    double p50[100000], p99[100000], pp99[100000];
    int total = 0, steady = 0, nk = 0;
    static struct kill kills[KILLS_MAX];
    static struct fault faults[KILLS_MAX];
    int nf = 0;
    FILE *f = fopen(csvpath, "r"), *out;

    if (f == NULL)
        return 1;
    if (fgets(line, sizeof(line), f) == NULL)
        line[0] = 0;
    while (fgets(line, sizeof(line), f) && total < 100000) {
        double v[9 + NERR];
        char *p = line;
        for (int i = 0; i < 9 + NERR; i++) {
            v[i] = strtod(p, &p);
            if (*p == ',')
                p++;
        }
        total++;
        double errs = 0;
        for (int e = 0; e < NERR; e++)
            errs += v[9 + e];
        if (errs == 0 && v[7] < 1000 && v[2] > 0) {
            p50[steady] = v[6];
            p99[steady] = v[7];
            pp99[steady] = v[8];
            steady++;
        }
    }
    fclose(f);
    qsort(p50, (size_t)steady, sizeof(double), cmp_d);
    qsort(p99, (size_t)steady, sizeof(double), cmp_d);
    qsort(pp99, (size_t)steady, sizeof(double), cmp_d);
    snprintf(path, sizeof(path), "%s/summary.md", S.dir);
    if ((out = fopen(path, "w")) == NULL)
        return 1;
    fprintf(out,
            "| Length | Offered | Steady windows | e2e p50 / p99 | Push p99 "
            "|\n|---|---|---|---|---|\n| %d min | %.0f msg/s | %d of %d | "
            "%.1f / %.1f ms | %.1f ms |\n\nFaults (boot-time s, kind, node, "
            "ack-mode messages it held when killed):\n\n",
            S.seconds / 60, S.rate, steady, total, steady ? p50[steady / 2] : 0,
            steady ? p99[steady / 2] : 0, steady ? pp99[steady / 2] : 0);
    snprintf(path, sizeof(path), "%s/faults.log", S.dir);
    if ((f = fopen(path, "r")) != NULL) {
        while (fgets(line, sizeof(line), f)) {
            long long held = -1;
            char kind[64], inc[64] = "-";
            double t, ts = 0;
            int node;
            double real = 0;
            int n = sscanf(line, "%lf %63s %d %lld %63s %lf %lf", &t, kind,
                           &node, &held, inc, &ts, &real);
            if (n < 3)
                continue;
            fprintf(out, "- %.1f %s node %d", t, kind, node);
            if (nf < KILLS_MAX) {
                faults[nf] = (struct fault){.ms = since_t0_ms(t), .node = node};
                snprintf(faults[nf++].kind, sizeof(faults[0].kind), "%s", kind);
            }
            if (n >= 6 && nk < KILLS_MAX) {
                fprintf(out, ", incarnation %s, held %lld", inc, held);
                kills[nk++] =
                    (struct kill){.node = node,
                                  .by = known_incarnation(inc),
                                  .held = held,
                                  .ms = kill_by_ms(t, n == 7 ? real : 0),
                                  .sample_ms = since_t0_ms(ts)};
            }
            fprintf(out, "\n");
        }
        fclose(f);
    }
    fprintf(out, "\n| Queue | Accepted | Delivered | Lost | Duplicates "
                 "|\n|---|---|---|---|---|\n");
    for (int q = 0; q < NQ; q++) {
        uint64_t acc = 0, del = 0, lost = 0, dup = 0,
                 end = atomic_load(&S.next_id[q]);
        for (uint64_t i = 0; i < end && i < S.max_id; i++) {
            uint8_t d = S.delivered[q][i];
            acc += S.accepted[q][i];
            del += d != 0;
            dup += d > 1 ? d - 1u : 0;
            lost += S.accepted[q][i] && d == 0;
        }
        fprintf(out, "| %s | %llu | %llu | %llu | %llu |\n", qname[q],
                (unsigned long long)acc, (unsigned long long)del,
                (unsigned long long)lost, (unsigned long long)dup);
    }
    fprintf(out, "\nrpc: %llu calls, %llu replies.\n",
            (unsigned long long)S.rpc_calls, (unsigned long long)S.rpc_replies);
    int ok = loss(out, QACK, kills, nk, faults, nf) == 0;
    loss(out, QAUTO, kills, nk, faults, nf);
    fclose(out);
    return ok ? 0 : 1;
}

int
main(int argc, char **argv)
{
    pthread_t t[64];
    struct role roles[64];
    int nt = 0, nr = 0;
    char csvpath[512];

    S.rate = 20000;
    S.seconds = 120;
    S.drain_s = 30;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--nodes") == 0) {
            char *save = NULL, *copy = strdup(argv[i + 1]);
            for (char *u = strtok_r(copy, ",", &save); u && S.nodes < NODES_MAX;
                 u = strtok_r(NULL, ",", &save))
                snprintf(S.url[S.nodes++], sizeof(S.url[0]), "%s", u);
            free(copy);
        } else if (strcmp(argv[i], "--rate") == 0)
            S.rate = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            S.seconds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--drain") == 0)
            S.drain_s = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--dir") == 0)
            S.dir = argv[i + 1];
    }
    if (S.nodes == 0 || S.dir == NULL || S.rate <= 0 || S.seconds <= 0) {
        fprintf(stderr, "usage: mayfly-soak --nodes URL,... --dir DIR "
                        "[--rate MSG_S] [--seconds S] [--drain S]\n");
        return 2;
    }
    S.max_id = (uint64_t)(S.rate * S.seconds * 1.5) + 100000;
    pthread_mutex_init(&S.inc_lock, NULL);
    S.t0_us = now_us();
    {
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        S.real_off_us = (int64_t)rt.tv_sec * 1000000 + rt.tv_nsec / 1000 -
                        (int64_t)now_us();
    }
    for (int q = 0; q < NQ; q++) {
        S.accepted[q] = calloc(S.max_id, 1);
        S.delivered[q] = calloc(S.max_id, 1);
        S.acc_by[q] = calloc(S.max_id / BATCH + 1, 1);
        S.acc_ms[q] = calloc(S.max_id / BATCH + 1, sizeof(uint32_t));
        S.sent_ms[q] = calloc(S.max_id / BATCH + 1, sizeof(uint32_t));
        S.acc_node[q] = calloc(S.max_id / BATCH + 1, 1);
        S.acc_part[q] = calloc(S.max_id / BATCH + 1, 1);
        if (!S.accepted[q] || !S.delivered[q] || !S.acc_by[q] || !S.acc_ms[q] ||
            !S.sent_ms[q] || !S.acc_node[q] || !S.acc_part[q])
            return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(csvpath, sizeof(csvpath), "%s/soak.csv", S.dir);
    FILE *csv = fopen(csvpath, "w");
    if (csv == NULL)
        return 2;
    pthread_create(&t[nt++], NULL, reporter, csv);
    for (int n = 0; n < S.nodes; n++) {
        void *(*fn[])(void *) = {pusher,   pusher,    consumer, consumer,
                                 consumer, responder, requester};
        int qs[] = {QACK, QAUTO, QACK, QACK, QAUTO, 0, 0};
        for (int k = 0; k < 7; k++) {
            roles[nr] = (struct role){n, qs[k]};
            pthread_create(&t[nt++], NULL, fn[k], &roles[nr++]);
        }
    }
    sleep_us((uint64_t)S.seconds * 1000000);
    atomic_store(&S.stop_load, 1);
    /* Drain: redeliveries after a lease, the nodes' hand-overs. */
    uint64_t last = 0, quiet_since = now_us();
    for (int i = 0; i < S.drain_s * 10; i++) {
        sleep_us(100000);
        uint64_t d = 0;
        for (int q = 0; q < NQ; q++)
            d += win()->delivered[q];
        if (d != last)
            quiet_since = now_us();
        last = d;
        if (now_us() - quiet_since > 8000000)
            break;
    }
    atomic_store(&S.stop, 1);
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    fclose(csv);
    int rc = summarize(csvpath);
    char path[512];
    snprintf(path, sizeof(path), "%s/summary.md", S.dir);
    FILE *f = fopen(path, "r");
    for (int c; f && (c = fgetc(f)) != EOF;)
        putchar(c);
    if (f)
        fclose(f);
    return rc;
}
