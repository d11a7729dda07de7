/*
 * test_cluster_coalesce.c - forwards to one owner that go together
 * (worker/coalesce.h, worker/node_batch.h) on three real nodes: requests
 * sent at once through a node that does not own their partition go to the
 * owner in batch calls (its /metrics counts them), and each client still
 * gets the answer it would have had alone: its own ids, its own token's
 * verdict, its own 400, every message read once and acked once; a batch
 * call that is not signed is refused and applies nothing; and an owner
 * that stops while batches are in flight loses nothing a client was told
 * was stored.
 *
 * Node 1 owns the partitions used; clients go through node 0.  Many
 * requests at once are CONNS connections of one curl multi (or threads,
 * where each needs its own token).
 */
#include <sys/wait.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/auth.h"
#include "http/batch.h"
#include "test/cluster/suite.h"

#define CONNS  32 /* requests in flight at once */
#define ROUNDS 4

static struct cl c;

CL_SUITE(cluster_coalesce, &c, "member_ttl_ms=60000", CL_SUITE_VIEW,
         .timeout = 240);

/* batch_metric - node i's mayfly_forward_batch_<what>_total. */
static double
batch_metric(struct cl *cl, int i, const char *what)
{
    char series[96];
    double v = 0;
    int rc;

    snprintf(series, sizeof(series), "mayfly_forward_batch_%s_total", what);
    rc = itest_metric(&cl->node[i], series, &v);
    cr_assert_eq(rc, 0, "%s on node %d: %d", series, i, rc);
    return v;
}

/* pop_body_payloads - mark the payloads of pop answer r in seen (counting
 * repeats in *dups); the ids into ids[payload] when ids is not NULL.  How
 * many messages it held. */
static int
pop_body_payloads(const struct itest_resp *r, int *seen, int max, int *dups,
                  char (*ids)[128])
{
    int n = itest_jlen(r->json, "messages");

    for (int k = 0; k < n; k++) {
        char path[48];
        int64_t p;
        snprintf(path, sizeof(path), "messages.%d.payload", k);
        p = itest_jint(r->json, path);
        cr_assert(p >= 0 && p < max, "payload %lld", (long long)p);
        if (seen[p]++ > 0)
            (*dups)++;
        if (ids != NULL) {
            snprintf(path, sizeof(path), "messages.%d.id", k);
            snprintf(ids[p], 128, "%s", itest_jstr(r->json, path));
        }
    }
    return n;
}

Test(cluster_coalesce, pushes_at_once_each_answered_as_if_alone)
{
    char p[16], body[256], path[160];
    static char ids[ROUNDS * CONNS][128];
    static int seen[ROUNDS * CONNS];
    double before = batch_metric(&c, 0, "calls");
    double carried = batch_metric(&c, 0, "requests");
    int total = 0, dups = 0;

    cl_part_owned_by("co-push", 1, 64, p, sizeof(p));
    for (int round = 0; round < ROUNDS; round++) {
        struct itest_multi *m = itest_multi_new();
        for (int k = 0; k < CONNS; k++) {
            snprintf(body, sizeof(body),
                     "{\"queue\":\"co-push\",\"partition\":\"%s\","
                     "\"messages\":[{\"payload\":%d}]}",
                     p, round * CONNS + k);
            itest_multi_add(m, &c.node[0], "POST", "/api/v1/ephemeral/push",
                            body);
        }
        cr_assert_eq(itest_multi_run(m, 30000), 0, "pushes still running");
        for (int k = 0; k < CONNS; k++) {
            struct itest_resp *r = itest_multi_resp(m, k);
            int n = round * CONNS + k;
            cr_assert_eq(r->status, 201, "push %d: %ld %s", n, r->status,
                         r->body);
            cr_assert_eq(itest_jlen(r->json, "ids"), 1, "%s", r->body);
            snprintf(ids[n], sizeof(ids[n]), "%s",
                     itest_jstr(r->json, "ids.0"));
            for (int j = 0; j < n; j++)
                cr_assert(strcmp(ids[j], ids[n]) != 0,
                          "pushes %d and %d answered the same id %s", j, n,
                          ids[n]);
        }
        itest_multi_free(m);
    }
    cr_assert_gt(batch_metric(&c, 0, "calls"), before,
                 "no batch call: %d pushes at once each went alone", CONNS);
    cr_log_info("%d pushes through node 0: %.0f batch calls carried %.0f",
                ROUNDS * CONNS, batch_metric(&c, 0, "calls") - before,
                batch_metric(&c, 0, "requests") - carried);
    /* every message at the owner, once */
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=co-push&partition=%s&batch=100", p);
    for (int64_t end = itest_now_ms() + 20000; total < ROUNDS * CONNS;) {
        struct itest_resp r;
        cr_assert_lt(itest_now_ms(), end, "only %d of %d messages read", total,
                     ROUNDS * CONNS);
        cr_assert_eq(itest_req(&c.node[1], "GET", path, NULL, &r), 200, "%s",
                     r.body);
        total += pop_body_payloads(&r, seen, ROUNDS * CONNS, &dups, NULL);
        itest_resp_free(&r);
    }
    cr_assert_eq(dups, 0, "%d messages stored twice", dups);
    cr_assert_eq(total, ROUNDS * CONNS);
}

#define NMSG 256

Test(cluster_coalesce, pops_and_acks_at_once_lose_and_repeat_nothing)
{
    static char ids[NMSG][128];
    static int seen[NMSG];
    char p[16], path[200];
    double before = batch_metric(&c, 0, "calls");
    int total = 0, dups = 0, acked = 0;
    struct itest_multi *m;

    cl_part_owned_by("co-pop", 1, 64, p, sizeof(p));
    /* NMSG messages stored at the owner, 32 a push */
    for (int k = 0; k < NMSG; k += 32) {
        char body[32 * 20 + 128];
        size_t used = (size_t)snprintf(body, sizeof(body),
                                       "{\"queue\":\"co-pop\",\"partition\":"
                                       "\"%s\",\"messages\":[",
                                       p);
        struct itest_resp r;
        for (int j = 0; j < 32; j++)
            used += (size_t)snprintf(body + used, sizeof(body) - used,
                                     "%s{\"payload\":%d}", j ? "," : "", k + j);
        snprintf(body + used, sizeof(body) - used, "]}");
        cr_assert_eq(
            itest_req(&c.node[1], "POST", "/api/v1/ephemeral/push", body, &r),
            201, "%s", r.body);
        itest_resp_free(&r);
    }
    /* CONNS pops at once through node 0 until every one is read */
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=co-pop&partition=%s&group=g&batch=4",
             p);
    for (int round = 0; total < NMSG; round++) {
        cr_assert_lt(round, 20, "only %d of %d messages read", total, NMSG);
        m = itest_multi_new();
        for (int k = 0; k < CONNS; k++)
            itest_multi_add(m, &c.node[0], "GET", path, NULL);
        cr_assert_eq(itest_multi_run(m, 30000), 0, "pops still running");
        for (int k = 0; k < CONNS; k++) {
            struct itest_resp *r = itest_multi_resp(m, k);
            cr_assert_eq(r->status, 200, "pop: %ld %s", r->status, r->body);
            total += pop_body_payloads(r, seen, NMSG, &dups, ids);
        }
        itest_multi_free(m);
    }
    cr_assert_eq(dups, 0, "%d messages read twice", dups);
    cr_assert_eq(total, NMSG);
    /* CONNS acks at once through node 0, NMSG / CONNS ids each */
    m = itest_multi_new();
    for (int k = 0; k < CONNS; k++) {
        char body[NMSG / CONNS * 140 + 128];
        size_t used = (size_t)snprintf(
            body, sizeof(body),
            "{\"queue\":\"co-pop\",\"group\":\"g\",\"acks\":[");
        for (int j = 0; j < NMSG / CONNS; j++)
            used +=
                (size_t)snprintf(body + used, sizeof(body) - used, "%s\"%s\"",
                                 j ? "," : "", ids[k * (NMSG / CONNS) + j]);
        snprintf(body + used, sizeof(body) - used, "]}");
        itest_multi_add(m, &c.node[0], "POST", "/api/v1/ephemeral/ack", body);
    }
    cr_assert_eq(itest_multi_run(m, 30000), 0, "acks still running");
    for (int k = 0; k < CONNS; k++) {
        struct itest_resp *r = itest_multi_resp(m, k);
        cr_assert_eq(r->status, 200, "ack: %ld %s", r->status, r->body);
        cr_assert_eq(itest_jlen(r->json, "results"), NMSG / CONNS, "%s",
                     r->body);
        for (int j = 0; j < NMSG / CONNS; j++) {
            char f[48];
            snprintf(f, sizeof(f), "results.%d.outcome", j);
            cr_assert_str_eq(itest_jstr(r->json, f), "acked", "%s", r->body);
            acked++;
        }
    }
    itest_multi_free(m);
    cr_assert_eq(acked, NMSG);
    cr_assert_gt(batch_metric(&c, 0, "calls"), before,
                 "no batch call: %d pops and acks at once each went alone",
                 CONNS);
    /* nothing left for g at the owner, leased or not */
    cr_assert_eq(cl_part_depth(&c, 1, "co-pop", p, "pending"), 0);
    cr_assert_eq(cl_part_depth(&c, 1, "co-pop", p, "leased"), 0);
}

/* Raw bytes to a node's client port. */
struct raw {
    char *data;
    size_t len;
};

static size_t
raw_write(char *p, size_t size, size_t n, void *arg)
{
    struct raw *b = arg;
    char *d = realloc(b->data, b->len + size * n + 1);

    cr_assert_not_null(d);
    memcpy(d + b->len, p, size * n);
    b->data = d;
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* post_raw_within - POST body[0..len) to node i's path with header lines
 * hdrs (NULL-terminated), giving up after ms; the status (0: none came),
 * the answer in out (free it). */
static long
post_raw_within(int i, const char *path, const char *body, size_t len,
                const char *const *hdrs, long ms, struct raw *out)
{
    CURL *h = curl_easy_init();
    struct curl_slist *l = NULL;
    char url[256];
    long status = 0;

    cr_assert_not_null(h);
    *out = (struct raw){0};
    snprintf(url, sizeof(url), "%s%s", c.node[i].base, path);
    for (; hdrs != NULL && *hdrs != NULL; hdrs++)
        l = curl_slist_append(l, *hdrs);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, raw_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(l);
    curl_easy_cleanup(h);
    if (out->data == NULL)
        out->data = strdup("");
    return status;
}

/* post_raw - post_raw_within 10 s, which must bring an answer. */
static long
post_raw(int i, const char *path, const char *body, size_t len,
         const char *const *hdrs, struct raw *out)
{
    long st = post_raw_within(i, path, body, len, hdrs, 10000, out);

    cr_assert_neq(st, 0, "no answer from node %d", i);
    return st;
}

/* add_call - method target body (no Authorization) into batch b. */
static void
add_call(struct http_buf *b, const char *method, const char *target,
         const char *body)
{
    struct http_batch_call e = {method,         strlen(method), target,
                                strlen(target), NULL,           0,
                                body,           strlen(body)};

    cr_assert_eq(http_batch_add_call(b, &e), 0);
}

Test(cluster_coalesce, a_batch_call_takes_signed_calls_only)
{
    static const char bad[] = "{\"queue\":\"co-sig\",\"partition\":\"%s\","
                              "\"messages\":[{\"bogus\":2}]}";
    char p[16], push[160], badpush[160], addr[64];
    const char *fwd[] = {"X-Mayfly-Forwarded: 1", NULL};
    const char *hdrs[16];
    struct http_buf b = {0};
    struct http_batch_answer a[3];
    struct http_sign_lines sl;
    struct itest_resp alone;
    struct raw out;
    size_t n;
    char why[160];

    cl_part_owned_by("co-sig", 1, 64, p, sizeof(p));
    snprintf(push, sizeof(push),
             "{\"queue\":\"co-sig\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":1}]}",
             p);
    snprintf(badpush, sizeof(badpush), bad, p);
    cr_assert_eq(http_batch_begin(&b), 0);
    add_call(&b, "POST", "/api/v1/ephemeral/push", push);
    add_call(&b, "GET", "/health", "");
    add_call(&b, "POST", "/api/v1/ephemeral/push", badpush);

    /* unsigned, and unsigned with a node's header: refused, nothing
     * stored */
    cr_assert_eq(post_raw(1, "/api/v1/node/batch", b.data, b.len, NULL, &out),
                 401, "%s", out.data);
    cr_assert(strstr(out.data, "signed") != NULL, "%s", out.data);
    free(out.data);
    cr_assert_eq(post_raw(1, "/api/v1/node/batch", b.data, b.len, fwd, &out),
                 401, "%s", out.data);
    free(out.data);
    cr_assert_eq(cl_part_depth(&c, 1, "co-sig", p, "pending"), 0,
                 "an unsigned batch call stored a message");

    /* signed: each entry answered as if alone */
    cl_addr(&c, 1, CL_CLIENT_PORT, addr, sizeof(addr));
    struct http_sign_req sr = {
        .method = "POST",
        .target = "/api/v1/node/batch",
        .body = b.data,
        .len = b.len,
        .to = {addr, NULL, 0},
    };
    cl_sign_req(&c, &sr, &sl);
    cr_assert_eq(post_raw(1, "/api/v1/node/batch", b.data, b.len,
                          cl_headers(NULL, &sl, hdrs, 16), &out),
                 200, "%s", out.data);
    cr_assert_eq(
        http_batch_answers(out.data, out.len, a, 3, &n, why, sizeof(why)), 0,
        "%s", why);
    cr_assert_eq(n, 3);
    cr_assert_eq(a[0].status, 201, "%.*s", (int)a[0].body_len, a[0].body);
    cr_assert_eq(a[1].status, 400, "%.*s", (int)a[1].body_len, a[1].body);
    cr_assert(memmem(a[1].body, a[1].body_len, "GET /health", 11) != NULL,
              "%.*s", (int)a[1].body_len, a[1].body);
    /* the bad push's 400 as the owner gives it to its own client */
    cr_assert_eq(itest_req(&c.node[1], "POST", "/api/v1/ephemeral/push",
                           badpush, &alone),
                 400, "%s", alone.body);
    cr_assert_eq(a[2].status, 400);
    cr_assert(a[2].body_len == alone.len &&
                  memcmp(a[2].body, alone.body, alone.len) == 0,
              "in a batch: %.*s; alone: %s", (int)a[2].body_len, a[2].body,
              alone.body);
    itest_resp_free(&alone);
    free(out.data);
    http_buf_free(&b);
    cr_assert_eq(cl_part_depth(&c, 1, "co-sig", p, "pending"), 1);
}

/* parked - node 1's mayfly_parked_pops. */
static double
parked(void)
{
    double v = -1;

    cr_assert_eq(itest_metric(&c.node[1], "mayfly_parked_pops", &v), 0);
    return v;
}

/* A batch entry has no connection of its own to watch for its caller
 * leaving, nor pages to give back while it waits: a long poll inside a
 * batch call (the forwarder sends none; a peer's might) is answered at
 * once, as with wait=false, instead of parking.  Parked, it took down its
 * worker after 100 ms (http_edge_pool_trim read a NULL connection). */
Test(cluster_coalesce, a_long_poll_in_a_batch_is_answered_at_once)
{
    char p[16], pop[200], push[160], addr[64], why[160];
    const char *hdrs[16];
    struct http_buf b = {0};
    struct http_batch_answer a[1];
    struct http_sign_lines sl;
    struct itest_resp r;
    struct raw out;
    size_t n;
    int64_t t0;
    pid_t was[ITEST_NODE_MAX_WORKERS], now[ITEST_NODE_MAX_WORKERS];
    int nw = itest_node_workers(&c.node[1], was, ITEST_NODE_MAX_WORKERS);

    cl_part_owned_by("co-left", 1, 64, p, sizeof(p));
    snprintf(pop, sizeof(pop),
             "/api/v1/ephemeral/pop?queue=co-left&partition=%s&wait=true"
             "&timeout=20000",
             p);
    cr_assert_eq(http_batch_begin(&b), 0);
    add_call(&b, "GET", pop, "");
    cl_addr(&c, 1, CL_CLIENT_PORT, addr, sizeof(addr));
    struct http_sign_req sr = {
        .method = "POST",
        .target = "/api/v1/node/batch",
        .body = b.data,
        .len = b.len,
        .to = {addr, NULL, 0},
    };
    cl_sign_req(&c, &sr, &sl);
    t0 = itest_now_ms();
    cr_assert_eq(post_raw(1, "/api/v1/node/batch", b.data, b.len,
                          cl_headers(NULL, &sl, hdrs, 16), &out),
                 200, "%s", out.data);
    cr_assert_lt(itest_now_ms() - t0, 5000,
                 "the batch's long poll waited (20 s asked)");
    cr_assert_eq(
        http_batch_answers(out.data, out.len, a, 1, &n, why, sizeof(why)), 0,
        "%s", why);
    cr_assert_eq(n, 1);
    cr_assert_eq(a[0].status, 200, "%.*s", (int)a[0].body_len, a[0].body);
    cr_assert(
        memmem(a[0].body, a[0].body_len, "\"messages\": []", 14) != NULL ||
            memmem(a[0].body, a[0].body_len, "\"messages\":[]", 13) != NULL,
        "%.*s", (int)a[0].body_len, a[0].body);
    free(out.data);
    http_buf_free(&b);
    cr_assert_eq(parked(), 0);
    /* past the 100 ms after which a parked pop's pages are trimmed: the
     * owner's worker is the one it was */
    itest_sleep_ms(300);
    cr_assert_eq(itest_node_workers(&c.node[1], now, ITEST_NODE_MAX_WORKERS),
                 nw);
    cr_assert(memcmp(was, now, (size_t)nw * sizeof(was[0])) == 0,
              "a worker of node 1 died under the batch's long poll");
    /* and a message pushed now goes to a pop that asks */
    snprintf(push, sizeof(push),
             "{\"queue\":\"co-left\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":7}]}",
             p);
    cr_assert_eq(
        itest_req(&c.node[1], "POST", "/api/v1/ephemeral/push", push, &r), 201,
        "%s", r.body);
    itest_resp_free(&r);
    snprintf(pop, sizeof(pop),
             "/api/v1/ephemeral/pop?queue=co-left&partition=%s&batch=10", p);
    cr_assert_eq(itest_req(&c.node[1], "GET", pop, NULL, &r), 200, "%s",
                 r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    itest_resp_free(&r);
}

/* The owner stops under pushes that go together. */
#define STOP_PUSHERS 24
#define STOP_MAX     100000

struct stop_load {
    char p[16];
    _Atomic int stop, next, answered, fails;
    _Atomic int status[STOP_MAX]; /* each push's answer */
    pthread_mutex_t lock;
    char first_fail[400];
};

static void *
stop_pusher(void *arg)
{
    struct stop_load *l = arg;

    while (!l->stop) {
        struct itest_resp r;
        char body[160];
        int k = l->next++;

        if (k >= STOP_MAX)
            break;
        snprintf(body, sizeof(body),
                 "{\"queue\":\"co-stop\",\"partition\":\"%s\","
                 "\"messages\":[{\"payload\":%d}]}",
                 l->p, k);
        itest_req(&c.node[0], "POST", "/api/v1/ephemeral/push", body, &r);
        l->status[k] = (int)r.status;
        l->answered++;
        if (r.status != 201) {
            l->fails++;
            pthread_mutex_lock(&l->lock);
            if (l->first_fail[0] == '\0')
                snprintf(l->first_fail, sizeof(l->first_fail),
                         "push %d: %ld (curl %d) %.300s", k, r.status,
                         r.curl_code, r.body);
            pthread_mutex_unlock(&l->lock);
        }
        itest_resp_free(&r);
    }
    itest_req_thread_end();
    return NULL;
}

Test(cluster_coalesce, an_owner_that_stops_under_batches_loses_nothing)
{
    static struct stop_load l;
    static int seen[STOP_MAX];
    pthread_t t[STOP_PUSHERS];
    double before = batch_metric(&c, 0, "calls");
    int rc, total, missing, dups = 0;
    char path[200];

    memset(&l, 0, sizeof(l));
    pthread_mutex_init(&l.lock, NULL);
    cl_part_owned_by("co-stop", 1, 64, l.p, sizeof(l.p));
    for (int i = 0; i < STOP_PUSHERS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, stop_pusher, &l), 0);
    /* under way, and going together */
    for (int64_t end = itest_now_ms() + 30000;
         l.answered < 300 || batch_metric(&c, 0, "calls") == before;) {
        cr_assert_lt(itest_now_ms(), end,
                     "the load does not start (%d answered; no batch call?)",
                     (int)l.answered);
        itest_sleep_ms(20);
    }
    rc = cl_stop(&c, 1, 20000);
    cr_assert_eq(rc, 0, "node 1's exit: %d", rc);
    /* more pushes once it is gone: they go to the next owner */
    for (int64_t end = itest_now_ms() + 10000, a = l.answered;
         l.answered < a + 300;)
        if (itest_now_ms() > end)
            break;
        else
            itest_sleep_ms(20);
    l.stop = 1;
    for (int i = 0; i < STOP_PUSHERS; i++)
        pthread_join(t[i], NULL);
    total = l.next < STOP_MAX ? l.next : STOP_MAX;
    cr_log_info("owner stop under batches: %d pushes answered, %d not 201",
                (int)l.answered, (int)l.fails);
    cr_assert_eq(l.fails, 0, "%d of %d pushes not stored; the first: %s",
                 (int)l.fails, (int)l.answered, l.first_fail);
    /* every push answered 201 is read, once, at the next owner */
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=co-stop&partition=%s&group=r"
             "&batch=500",
             l.p);
    for (int64_t end = itest_now_ms() + 30000;;) {
        struct itest_resp r;
        int first = -1;
        missing = 0;
        for (int k = 0; k < total; k++)
            if (l.status[k] == 201 && !seen[k] && missing++ == 0)
                first = k;
        if (missing == 0)
            break;
        cr_assert_lt(itest_now_ms(), end,
                     "%d messages answered 201 never read (payload %d first)",
                     missing, first);
        if (itest_req(&c.node[0], "GET", path, NULL, &r) != 200 ||
            pop_body_payloads(&r, seen, STOP_MAX, &dups, NULL) == 0)
            itest_sleep_ms(100);
        itest_resp_free(&r);
    }
    cr_assert_eq(dups, 0, "%d messages read twice", dups);
}

/* With tokens: requests of several clients in one batch, each judged by
 * its own token at the owner.  The tokens are valid at node 0, which
 * forwards them; node 1, the owner, read the auth file again after two of
 * them changed, so it alone refuses them: 403 for one that may no longer
 * push, 401 for one it no longer knows. */
static struct cl ca;
static char tokens_path[300];

/* write_tokens - the auth file: every token pushes (before), or only
 * co-writer does, co-fading may pop, co-gone is gone (after). */
static void
write_tokens(int after)
{
    char hash[AUTH_HASH_TEXT];
    FILE *f = fopen(tokens_path, "w");

    cr_assert_not_null(f);
    auth_hash_text("co-writer", 9, hash);
    fprintf(f, "%s push=* pop=* read=*\n", hash);
    auth_hash_text("co-fading", 9, hash);
    fprintf(f, "%s %s\n", hash, after ? "pop=* read=*" : "push=* pop=* read=*");
    auth_hash_text("co-gone", 7, hash);
    if (!after)
        fprintf(f, "%s push=* pop=* read=*\n", hash);
    cr_assert_eq(fclose(f), 0);
}

static void
auth_up(void)
{
    char dir[256], opts[400];

    itest_test_dir(dir, sizeof(dir));
    snprintf(tokens_path, sizeof(tokens_path), "%s/tokens", dir);
    write_tokens(0);
    snprintf(opts, sizeof(opts), "member_ttl_ms=60000 auth_file=%s",
             tokens_path);
    cl_up(&ca, opts);
    cl_wait_view(&ca, CL_ALL);
}

static void
auth_down(void)
{
    cl_kill_all(&ca);
}

TestSuite(cluster_coalesce_auth, .init = auth_up, .fini = auth_down,
          .timeout = 180);

enum who { WRITER, FADING, GONE, BAD_BODY, WHO_N };

static const char *const who_token[WHO_N] = {"co-writer", "co-fading",
                                             "co-gone", "co-writer"};

#define AUTH_THREADS 32
#define AUTH_EACH    6

struct auth_client {
    enum who who;
    const char *p;
    const char *bad_alone; /* the owner's own answer to the bad body */
    pthread_barrier_t *go;
    int wrong;
    char first[400];
};

/* push_as - a push of body to node i of ca as token tok; the status. */
static long
push_as(int i, const char *tok, const char *body, struct itest_resp *r)
{
    char h[96];
    const char *hdrs[] = {h, NULL};

    snprintf(h, sizeof(h), "Authorization: Bearer %s", tok);
    return itest_req_with(&ca.node[i], "POST", "/api/v1/ephemeral/push", body,
                          hdrs, r);
}

static void *
auth_client(void *arg)
{
    struct auth_client *a = arg;
    static const long want[WHO_N] = {201, 403, 401, 400};
    char body[200];

    snprintf(body, sizeof(body),
             a->who == BAD_BODY ? "{\"queue\":\"co-auth\",\"partition\":\"%s\","
                                  "\"messages\":[{\"bogus\":2}]}"
                                : "{\"queue\":\"co-auth\",\"partition\":\"%s\","
                                  "\"messages\":[{\"payload\":1}]}",
             a->p);
    pthread_barrier_wait(a->go);
    for (int k = 0; k < AUTH_EACH; k++) {
        struct itest_resp r;
        long st = push_as(0, who_token[a->who], body, &r);
        int ok = st == want[a->who] &&
                 (a->who != BAD_BODY || strcmp(r.body, a->bad_alone) == 0) &&
                 (a->who != GONE || strcmp(r.www_authenticate, "Bearer") == 0);
        if (!ok && a->wrong++ == 0)
            snprintf(a->first, sizeof(a->first), "token %s: %ld %.300s",
                     who_token[a->who], st, r.body);
        itest_resp_free(&r);
    }
    itest_req_thread_end();
    return NULL;
}

Test(cluster_coalesce_auth, each_request_in_a_batch_has_its_own_token)
{
    static struct auth_client a[AUTH_THREADS];
    pthread_t t[AUTH_THREADS];
    pthread_barrier_t go;
    char p[16], bad[200];
    struct itest_resp alone, r;
    double before = batch_metric(&ca, 0, "calls");
    int writers = 0;

    cl_part_owned_by("co-auth", 1, 64, p, sizeof(p));
    snprintf(bad, sizeof(bad),
             "{\"queue\":\"co-auth\",\"partition\":\"%s\","
             "\"messages\":[{\"bogus\":2}]}",
             p);
    /* the owner alone reads the tokens again */
    write_tokens(1);
    cr_assert_eq(kill(ca.node[1].pid, SIGHUP), 0);
    for (int64_t end = itest_now_ms() + 10000;;) {
        /* a read: the probe stores nothing */
        char h[64];
        const char *hdrs[] = {h, NULL};
        snprintf(h, sizeof(h), "Authorization: Bearer co-gone");
        long st = itest_req_with(&ca.node[1], "GET", "/api/v1/ephemeral/queues",
                                 NULL, hdrs, &r);
        itest_resp_free(&r);
        if (st == 401)
            break;
        cr_assert_lt(itest_now_ms(), end, "node 1 still knows co-gone (%ld)",
                     st);
        itest_sleep_ms(50);
    }
    cr_assert_eq(push_as(1, "co-writer", bad, &alone), 400, "%s", alone.body);
    pthread_barrier_init(&go, NULL, AUTH_THREADS);
    for (int i = 0; i < AUTH_THREADS; i++) {
        a[i] = (struct auth_client){.who = (enum who)(i % WHO_N),
                                    .p = p,
                                    .bad_alone = alone.body,
                                    .go = &go};
        writers += a[i].who == WRITER;
        cr_assert_eq(pthread_create(&t[i], NULL, auth_client, &a[i]), 0);
    }
    for (int i = 0; i < AUTH_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < AUTH_THREADS; i++)
        cr_expect_eq(a[i].wrong, 0,
                     "client %d: %d wrong answers; the first: %s", i,
                     a[i].wrong, a[i].first);
    itest_resp_free(&alone);
    cr_assert_gt(batch_metric(&ca, 0, "calls"), before,
                 "no batch call: %d clients at once each went alone",
                 AUTH_THREADS);
    /* the writers' pushes stored, nobody else's */
    {
        char path[160], h[64];
        const char *hdrs[] = {h, NULL};
        snprintf(h, sizeof(h), "Authorization: Bearer co-writer");
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=co-auth&partition=%s&batch=1000",
                 p);
        cr_assert_eq(itest_req_with(&ca.node[1], "GET", path, NULL, hdrs, &r),
                     200, "%s", r.body);
        cr_assert_eq(itest_jlen(r.json, "messages"), writers * AUTH_EACH, "%s",
                     r.body);
        itest_resp_free(&r);
    }
}
