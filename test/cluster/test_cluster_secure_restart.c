/*
 * test_cluster_secure_restart.c - a rolling restart of three nodes with
 * tokens, tenants and TLS on both ports, under load (SPEC §8, §10).
 *
 * Two tenants use the same queue name.  Each has a pusher that pushes
 * unique numbers to several partitions through one node after another,
 * and a consumer that pops them with leases and acks them through other
 * nodes, so that most calls are forwarded to the partition's owner with
 * the client's token.  Meanwhile each node in turn is stopped with
 * SIGTERM (its partitions handed over to the others over the cluster
 * port's mutual TLS, signed), started again and waited for until every
 * node sees all three live (its partitions come back to it the same way).
 * Then everything is drained and checked by number: every push answered
 * 201 was delivered to its tenant, no tenant ever received a message of
 * the other, a message delivered again had an earlier delivery whose ack
 * did not answer "acked" (a lease that ran out or moved with its
 * partition), never one that did; no call was refused 401 or 403 and no
 * forward between nodes broke on TLS; and every hand-over was adopted
 * (each stop's log line counts nothing lost; none dropped or refused 401;
 * one the receiver could not take yet, starting or draining itself, is
 * shipped again).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/auth.h"
#include "test/cluster/cluster.h"
#include "test/integration/certs.h"

#define API      "/api/v1/ephemeral"
#define PER_NODE 2 /* partitions of each tenant each node owns */
#define NPARTS   (PER_NODE * CL_NODES)
#define PER      8      /* messages a push carries */
#define MAXN     400000 /* numbers a tenant may push */
#define DRAIN_MS 90000

static struct cl c;
static char opts[2400];

static const char *const tenant[2] = {"alpha", "beta"};
static const char *const token[2] = {"alpha-token", "beta-token"};

/* What the threads record, each tenant's by its own pusher and consumer. */
struct tally {
    int t;                        /* tenant index */
    unsigned char *accepted;      /* by number: its push was answered 201 */
    int *delivered;               /* by number: times popped */
    unsigned char *acked;         /* by number: an ack answered "acked" */
    atomic_int next;              /* numbers used so far */
    atomic_int pushes_failed;     /* pushes not answered 201 */
    atomic_int foreign;           /* popped messages not of this tenant */
    atomic_int dup_fresh;         /* repeats popped with attempts 1 */
    atomic_int after_ack;         /* popped again once acked */
    atomic_int dups;              /* deliveries beyond the first */
    atomic_int nacked, ack_other; /* ack outcomes: acked, anything else */
    atomic_int pops_failed;       /* pops not answered 200 */
    atomic_int refused;           /* calls answered 401 or 403 */
    atomic_int failed_by[600];    /* calls not answered 2xx, by status */
};

static struct tally tally[2];
/* tenant t's partitions: PER_NODE owned by each node while all are live,
 * so every stop hands some of each tenant's over */
static char part[2][NPARTS][16];
static atomic_int pushing, consuming;

/* up - the cluster's CA and certificate, the two tenants' tokens, and three
 * nodes with both on, asked on https://. */
static void
up(void)
{
    char dir[300], tls[1700], tokens_path[400], hash[AUTH_HASH_TEXT];
    FILE *f;

    cl_init_tls(&c, dir, sizeof(dir), tls, sizeof(tls));
    snprintf(tokens_path, sizeof(tokens_path), "%s/tokens", dir);
    f = fopen(tokens_path, "w");
    cr_assert_not_null(f);
    for (int t = 0; t < 2; t++) {
        auth_hash_text(token[t], strlen(token[t]), hash);
        fprintf(f, "%s tenant=%s push=* pop=* admin=* read=*\n", hash,
                tenant[t]);
    }
    cr_assert_eq(fclose(f), 0);
    /* short leases: a delivery whose ack was lost comes back soon */
    snprintf(opts, sizeof(opts),
             "member_ttl_ms=60000 lease_s=3 auth_file=%s %s", tokens_path, tls);
    cl_start_all(&c, opts);
    cl_wait_view(&c, CL_ALL);
    for (int t = 0; t < 2; t++) {
        char internal[64];
        int have[CL_NODES] = {0}, n = 0;
        /* the owner hashes the tenant's name, not the client's */
        snprintf(internal, sizeof(internal), "%s\x1fjobs", tenant[t]);
        for (int k = 0; k < 256 && n < NPARTS; k++) {
            char p[16];
            snprintf(p, sizeof(p), "p%d", k);
            int o = cl_owner(internal, p, CL_ALL);
            if (have[o] < PER_NODE) {
                have[o]++;
                memcpy(part[t][n++], p, sizeof(p));
            }
        }
        cr_assert_eq(n, NPARTS, "tenant %s's partitions", tenant[t]);
    }
}

static void
down(void)
{
    cl_kill_all(&c);
    itest_ca_file[0] = '\0';
}

TestSuite(cluster_secure_restart, .init = up, .fini = down, .timeout = 300);

/* req - method path body on node i as tenant t; the status. */
static long
req(int i, int t, const char *method, const char *path, const char *body,
    struct itest_resp *r)
{
    char h[128];
    const char *hdrs[] = {h, NULL};

    snprintf(h, sizeof(h), "Authorization: Bearer %s", token[t]);
    return itest_req_with(&c.node[i], method, path, body, hdrs, r);
}

/* call - req() as tenant y->t, a refusal (401, 403: credentials or
 * tenant lost on the way) counted; the status. */
static long
call(struct tally *y, int i, const char *method, const char *path,
     const char *body, struct itest_resp *r)
{
    long st = req(i, y->t, method, path, body, r);

    if ((st < 200 || st > 299) && st >= 0 && st < 600)
        atomic_fetch_add(&y->failed_by[st], 1);
    if (st == 401 || st == 403) {
        if (atomic_fetch_add(&y->refused, 1) == 0)
            fprintf(stderr, "secure_restart: %s %s on node %d: %ld %s\n",
                    method, path, i, st, r->body);
    }
    return st;
}

/* pusher - tenant's numbers, PER a push, to partition after partition
 * through node after node, until pushing ends.  A push not answered 201
 * is not retried: its numbers are never used again (it may still have
 * gone in, and is then delivered without having been accepted). */
static void *
pusher(void *arg)
{
    struct tally *y = arg;
    char body[1024];
    struct itest_resp r;

    for (int k = 0; atomic_load(&pushing); k++) {
        int first = atomic_fetch_add(&y->next, PER);
        if (first + PER > MAXN)
            break;
        int used = snprintf(body, sizeof(body),
                            "{\"queue\":\"jobs\",\"partition\":\"%s\","
                            "\"messages\":[",
                            part[y->t][k % NPARTS]);
        for (int m = 0; m < PER; m++)
            used += snprintf(body + used, sizeof(body) - used,
                             "%s{\"payload\":\"%s:%d\"}", m ? "," : "",
                             tenant[y->t], first + m);
        snprintf(body + used, sizeof(body) - used, "]}");
        /* the node turns every NPARTS pushes, so each partition is
         * pushed through every node */
        if (call(y, (k / NPARTS) % CL_NODES, "POST", API "/push", body, &r) ==
            201) {
            for (int m = 0; m < PER; m++)
                y->accepted[first + m] = 1;
        } else {
            atomic_fetch_add(&y->pushes_failed, 1);
        }
        itest_resp_free(&r);
    }
    itest_req_thread_end();
    return NULL;
}

/* take - one popped message: its number counted, unless it is not of
 * this tenant's; the number, or -1. */
static long
take(struct tally *y, struct json_object *msg)
{
    const char *payload = itest_jstr(msg, "payload");
    size_t tl = strlen(tenant[y->t]);
    char *end;

    if (strncmp(payload, tenant[y->t], tl) != 0 || payload[tl] != ':') {
        atomic_fetch_add(&y->foreign, 1);
        return -1;
    }
    long n = strtol(payload + tl + 1, &end, 10);
    if (*end != '\0' || n < 0 || n >= MAXN) {
        atomic_fetch_add(&y->foreign, 1);
        return -1;
    }
    /* only this consumer writes it; the test's thread reads it */
    if (__atomic_fetch_add(&y->delivered[n], 1, __ATOMIC_RELAXED) > 0) {
        atomic_fetch_add(&y->dups, 1);
        if (itest_jint(msg, "attempts") <= 1)
            atomic_fetch_add(&y->dup_fresh, 1);
        if (y->acked[n])
            atomic_fetch_add(&y->after_ack, 1);
    }
    return n;
}

/* ack_all - ack the popped messages msgs (their numbers num[], -1: not
 * this tenant's) through node i; outcomes counted, numbers acked marked. */
static void
ack_all(struct tally *y, int i, struct json_object *msgs, const long *num)
{
    struct itest_resp a;
    size_t cap = 64 + 256 * json_object_array_length(msgs), used;
    char *body = malloc(cap);

    if (body == NULL)
        return;
    used = (size_t)snprintf(body, cap, "{\"queue\":\"jobs\",\"acks\":[");
    for (size_t m = 0; m < json_object_array_length(msgs); m++)
        used += (size_t)snprintf(
            body + used, cap - used, "%s\"%s\"", m ? "," : "",
            itest_jstr(json_object_array_get_idx(msgs, m), "id"));
    snprintf(body + used, cap - used, "]}");
    if (call(y, i, "POST", API "/ack", body, &a) == 200) {
        for (int m = 0; m < itest_jlen(a.json, "results"); m++) {
            char path[40];
            snprintf(path, sizeof(path), "results.%d.outcome", m);
            int ok = strcmp(itest_jstr(a.json, path), "acked") == 0;
            atomic_fetch_add(ok ? &y->nacked : &y->ack_other, 1);
            if (ok && m < (int)json_object_array_length(msgs) && num[m] >= 0)
                y->acked[num[m]] = 1;
        }
    } else {
        atomic_fetch_add(&y->ack_other, (int)json_object_array_length(msgs));
    }
    itest_resp_free(&a);
    free(body);
}

/* consumer - pop (leased) and ack the tenant's partitions in turn, each
 * through another node than the one its pusher uses at that moment,
 * until consuming ends; a round that finds nothing pauses a moment.  While
 * pushes go on it takes fewer a pop than a push brings, so the partitions
 * hold a backlog when their node stops. */
static void *
consumer(void *arg)
{
    struct tally *y = arg;
    char path[128];
    struct itest_resp r;
    int empty = 0;

    for (int k = 0; atomic_load(&consuming); k++) {
        int i = (k / NPARTS + 1 + y->t) % CL_NODES, got = 0;
        snprintf(path, sizeof(path),
                 API "/pop?queue=jobs&partition=%s&batch=%d",
                 part[y->t][k % NPARTS], atomic_load(&pushing) ? 4 : 100);
        if (call(y, i, "GET", path, NULL, &r) == 200) {
            struct json_object *msgs = itest_jget(r.json, "messages");
            if (strcmp(itest_jstr(r.json, "queue"), "jobs") != 0)
                atomic_fetch_add(&y->foreign, 1);
            got = msgs ? (int)json_object_array_length(msgs) : 0;
            long num[100];
            for (int m = 0; m < got && m < 100; m++)
                num[m] = take(y, json_object_array_get_idx(msgs, m));
            if (got > 0 && got <= 100)
                ack_all(y, i, msgs, num);
        } else {
            atomic_fetch_add(&y->pops_failed, 1);
        }
        itest_resp_free(&r);
        empty = got ? 0 : empty + 1;
        if (empty >= NPARTS) {
            empty = 0;
            itest_sleep_ms(50);
        }
    }
    itest_req_thread_end();
    return NULL;
}

/* handover_line - from node i's log, the last stop's hand-over figures:
 * rings delivered and lost, messages delivered and lost; 0 when it has no
 * such line. */
static int
handover_line(int i, unsigned *rings, unsigned *rlost, unsigned long long *msgs,
              unsigned long long *mlost)
{
    FILE *f = fopen(c.node[i].log, "r");
    char line[1024];
    int found = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "ephemeral rings handed over");
        unsigned all;
        if (p && sscanf(p,
                        "ephemeral rings handed over rings=%u delivered=%u "
                        "lost=%u (messages delivered=%llu lost=%llu)",
                        &all, rings, rlost, msgs, mlost) == 5)
            found = 1;
    }
    fclose(f);
    return found;
}

/* wiped - node i's partitions whose contents a failed hand-over dropped
 * (or an unrepairable crash), since it started; -1 when it does not
 * answer. */
static double
wiped(int i)
{
    double n = 0;

    return itest_metric(&c.node[i], "mayfly_wipes_total", &n) == 0 ? n : -1;
}

/* log_count - lines of node i's log (every run of it) holding needle. */
static int
log_count(int i, const char *needle)
{
    FILE *f = fopen(c.node[i].log, "r");
    char line[2048];
    int n = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* drained - every number tenant t pushed with a 201 has been delivered. */
static int
drained(const struct tally *y)
{
    int n = atomic_load(&y->next);

    for (int k = 0; k < n && k < MAXN; k++)
        if (y->accepted[k] &&
            __atomic_load_n(&y->delivered[k], __ATOMIC_RELAXED) == 0)
            return 0;
    return 1;
}

/* cluster_held - tenant t's jobs pending and leased on every node
 * (scope=cluster, every node answering), or -1. */
static int64_t
cluster_held(int t)
{
    struct itest_resp r;
    int64_t n = -1;

    if (req(0, t, "GET", API "/queues/jobs/depth?scope=cluster", NULL, &r) ==
            200 &&
        itest_jlen(r.json, "missing") <= 0) {
        n = itest_jint(r.json, "pending");
        for (int k = 0; k < itest_jlen(r.json, "partitions"); k++) {
            char path[48];
            snprintf(path, sizeof(path), "partitions.%d.leased", k);
            n += itest_jint(r.json, path);
        }
    }
    itest_resp_free(&r);
    return n;
}

Test(cluster_secure_restart,
     a_rolling_restart_under_load_loses_nothing_and_keeps_tenants)
{
    pthread_t push_th[2], pop_th[2];

    for (int t = 0; t < 2; t++) {
        tally[t].t = t;
        tally[t].accepted = calloc(MAXN, 1);
        tally[t].delivered = calloc(MAXN, sizeof(int));
        tally[t].acked = calloc(MAXN, 1);
        cr_assert(tally[t].accepted && tally[t].delivered && tally[t].acked);
    }
    atomic_store(&pushing, 1);
    atomic_store(&consuming, 1);
    for (int t = 0; t < 2; t++) {
        cr_assert_eq(pthread_create(&push_th[t], NULL, pusher, &tally[t]), 0);
        cr_assert_eq(pthread_create(&pop_th[t], NULL, consumer, &tally[t]), 0);
    }
    /* load before the first stop */
    int64_t deadline = itest_now_ms() + 30000;
    while ((atomic_load(&tally[0].next) < 200 ||
            atomic_load(&tally[1].next) < 200) &&
           itest_now_ms() < deadline)
        itest_sleep_ms(50);

    for (int i = 0; i < CL_NODES; i++) {
        unsigned rings = 0, rlost = 1;
        unsigned long long msgs = 0, mlost = 1;

        cr_expect_eq(wiped(i), 0, "node %d dropped no partition", i);
        cr_assert_eq(cl_stop(&c, i, 60000), 0, "node %d stops cleanly", i);
        cr_assert(handover_line(i, &rings, &rlost, &msgs, &mlost),
                  "node %d logged its hand-over", i);
        cr_expect_eq(rlost, 0, "node %d lost no partition", i);
        cr_expect_eq(mlost, 0, "node %d lost no message", i);
        fprintf(stderr,
                "secure_restart: node %d stopped, handed over %u partitions "
                "with %llu messages\n",
                i, rings, msgs);
        cl_start(&c, i, opts);
        cl_wait_view(&c, CL_ALL);
        /* load goes on with the node back before the next one stops */
        int before[2] = {atomic_load(&tally[0].next),
                         atomic_load(&tally[1].next)};
        deadline = itest_now_ms() + 30000;
        while ((atomic_load(&tally[0].next) < before[0] + 100 ||
                atomic_load(&tally[1].next) < before[1] + 100) &&
               itest_now_ms() < deadline)
            itest_sleep_ms(50);
    }

    atomic_store(&pushing, 0);
    for (int t = 0; t < 2; t++)
        pthread_join(push_th[t], NULL);
    deadline = itest_now_ms() + DRAIN_MS;
    while (!(drained(&tally[0]) && drained(&tally[1]) && cluster_held(0) == 0 &&
             cluster_held(1) == 0) &&
           itest_now_ms() < deadline)
        itest_sleep_ms(200);
    atomic_store(&consuming, 0);
    for (int t = 0; t < 2; t++)
        pthread_join(pop_th[t], NULL);

    for (int t = 0; t < 2; t++) {
        struct tally *y = &tally[t];
        int n = atomic_load(&y->next), accepted = 0, lost = 0, unaccepted = 0;
        for (int k = 0; k < n && k < MAXN; k++) {
            accepted += y->accepted[k];
            lost += y->accepted[k] && y->delivered[k] == 0;
            unaccepted += !y->accepted[k] && y->delivered[k] > 0;
        }
        fprintf(stderr,
                "secure_restart: tenant %s: pushed %d, accepted %d, lost %d, "
                "duplicates %d (with attempts 1: %d), delivered without a "
                "201 %d, pushes failed %d, pops failed %d, acks acked %d "
                "other %d\n",
                tenant[t], n, accepted, lost, atomic_load(&y->dups),
                atomic_load(&y->dup_fresh), unaccepted,
                atomic_load(&y->pushes_failed), atomic_load(&y->pops_failed),
                atomic_load(&y->nacked), atomic_load(&y->ack_other));
        cr_expect_gt(accepted, 0, "tenant %s pushed", tenant[t]);
        cr_expect_eq(lost, 0, "tenant %s: accepted messages never delivered",
                     tenant[t]);
        cr_expect_eq(atomic_load(&y->refused), 0,
                     "tenant %s: calls refused 401/403 under load", tenant[t]);
        cr_expect_eq(atomic_load(&y->foreign), 0,
                     "tenant %s received another tenant's messages", tenant[t]);
        /* a repeat comes from a delivery whose ack did not answer acked
         * (a lease that ran out, or moved with its partition; after a move
         * onto a node where the group already read, DESIGN.md §3 (hand-over) says it
         * comes as attempts 1), never from one that was acked */
        cr_expect_eq(atomic_load(&y->after_ack), 0,
                     "tenant %s: a message delivered again after its ack "
                     "answered acked",
                     tenant[t]);
        cr_expect_leq(atomic_load(&y->dups), atomic_load(&y->ack_other),
                      "tenant %s: more repeats than acks not answered acked",
                      tenant[t]);
        cr_expect_eq(cluster_held(t), 0, "tenant %s's jobs are empty",
                     tenant[t]);
        free(y->accepted);
        free(y->delivered);
        free(y->acked);
    }
    /* A shipment the receiver could not take yet (503: it was starting
     * or draining itself) is kept and shipped again: counted, not a
     * failure.  One refused for its credentials (401), or that no node
     * adopted, is. */
    int again = 0;
    for (int i = 0; i < CL_NODES; i++) {
        again += log_count(i, "kept here, to be shipped again");
        cr_expect_eq(wiped(i), 0, "node %d dropped no partition", i);
        cr_expect_eq(log_count(i, "contents are dropped"), 0,
                     "node %d dropped a partition's contents", i);
        cr_expect_eq(log_count(i, "status 401:"), 0,
                     "node %d had a hand-over refused 401", i);
        cr_expect_eq(log_count(i, "cannot adopt"), 0,
                     "node %d refused a hand-over", i);
    }
    int tls_broken = 0;
    for (int i = 0; i < CL_NODES; i++)
        tls_broken += log_count(i, "wrong version number");
    fprintf(stderr,
            "secure_restart: hand-overs shipped again: %d; forwards broken "
            "by plain bytes in TLS: %d\n",
            again, tls_broken);
    /* a node answering plain bytes inside a TLS connection (a watched
     * connection judged plain once handshaken) broke forwards between
     * live nodes */
    cr_expect_eq(tls_broken, 0, "forwards failed: TLS broken by the node");
    for (int t = 0; t < 2; t++)
        for (int st = 0; st < 600; st++)
            if (atomic_load(&tally[t].failed_by[st]) > 0)
                fprintf(stderr, "secure_restart: tenant %s: %d calls: %d\n",
                        tenant[t], st, atomic_load(&tally[t].failed_by[st]));
}
