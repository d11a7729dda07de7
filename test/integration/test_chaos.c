/*
 * test_chaos.c - one node with four workers under mixed load while a
 * random worker is SIGKILLed every 1 to 3 s for CHAOS_S seconds (60 unless
 * MAYFLY_CHAOS_S says): pushes to an ack-mode queue and an autoAck one,
 * long-polling consumers of each (acking the first), and request/reply
 * calls through per-call inboxes (the Queen inbox pattern).  After each
 * kill, once the master has reaped and replaced the worker, the segment is
 * checked by the operator's tool (`mayflyd --check-segment PID`).  Every
 * message carries a unique id; at the end, with the consumers drained,
 * each accepted ack-mode id must have been delivered (lost = 0); autoAck
 * loss (an answer cut off by the kill) and duplicates are counted and
 * printed, as are accepted, delivered and kills.  Last, the test keeps the
 * segment mapped while the node stops, so that once no process of the node
 * is left it can run the quiet (whole-segment) check on what the kills and
 * their repairs left: no leak, no run in flight, caches and accounting exact.
 *
 * Threads never call cr_assert: they count, and the main thread asserts.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "shm/check.h"
#include "test/integration/node.h"

#define WORKERS  4
#define MAX_ID   (1 << 22)
#define PARTS    4
#define BATCH    10
#define ACKERS   3
#define RPC_REQS 2
#define RPC_RESP 2

enum { ACKQ, AUTOQ, NQ };
static const char *qname[NQ] = {"chaos-ack", "chaos-auto"};

struct chaos {
    const struct itest_node *n;
    atomic_int stop_push; /* pushers and requesters stop */
    atomic_int stop;      /* everyone stops */
    atomic_uint next_id[NQ];
    _Atomic uint8_t accepted[NQ][MAX_ID];
    _Atomic uint32_t delivered[NQ][MAX_ID]; /* duplicates may be many */
    atomic_long last_delivery_ms;
    atomic_long rpc_calls, rpc_replies, rpc_failed, push_failed;
};

static struct chaos ch;

/* Push batches of fresh ids to queue q until told to stop. */
static void *
pusher(void *arg)
{
    int q = (int)(intptr_t)arg;
    CURL *h = itest_handle();
    char body[2048];

    for (int k = 0; !atomic_load(&ch.stop_push); k++) {
        uint32_t first = atomic_fetch_add(&ch.next_id[q], BATCH);
        if (first + BATCH > MAX_ID)
            break;
        int o = snprintf(body, sizeof(body),
                         "{\"queue\":\"%s\",\"partition\":\"p%d\","
                         "\"messages\":[",
                         qname[q], k % PARTS);
        for (int i = 0; i < BATCH; i++)
            o += snprintf(body + o, sizeof(body) - (size_t)o,
                          "%s{\"payload\":{\"id\":%u,\"pad\":\"%048d\"}}",
                          i ? "," : "", first + i, 0);
        snprintf(body + o, sizeof(body) - (size_t)o, "]}");
        struct itest_resp r;
        itest_req_on(h, ch.n, "POST", "/api/v1/ephemeral/push", body, &r);
        if (r.status == 201)
            for (int i = 0; i < BATCH; i++)
                atomic_store(&ch.accepted[q][first + i], 1);
        else
            atomic_fetch_add(&ch.push_failed, 1);
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* Long-poll queue q (autoAck for AUTOQ, else ack every batch), counting
 * each delivered id. */
static void *
consumer(void *arg)
{
    int q = (int)(intptr_t)arg;
    CURL *h = itest_handle();
    char path[256];

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s&group=g&batch=20&wait=true"
             "&timeout=1000%s",
             qname[q], q == AUTOQ ? "&autoAck=true" : "");
    while (!atomic_load(&ch.stop)) {
        struct itest_resp r, a;
        itest_req_on(h, ch.n, "GET", path, NULL, &r);
        int k = r.status == 200 ? itest_jlen(r.json, "messages") : -1;
        struct json_object *msgs = k > 0 ? itest_jget(r.json, "messages") : 0;
        for (int i = 0; i < k; i++) {
            struct json_object *m = json_object_array_get_idx(msgs, (size_t)i);
            int64_t id = itest_jint(m, "payload.id");
            if (id >= 0 && id < MAX_ID)
                atomic_fetch_add(&ch.delivered[q][id], 1);
        }
        if (k > 0)
            atomic_store(&ch.last_delivery_ms, (long)itest_now_ms());
        if (k > 0 && q == ACKQ) {
            char *body = NULL;
            if (asprintf(&body,
                         "{\"queue\":\"%s\",\"group\":\"g\",\"messages\":%s}",
                         qname[q],
                         json_object_to_json_string_ext(
                             msgs, JSON_C_TO_STRING_PLAIN)) < 0)
                abort();
            itest_req_on(h, ch.n, "POST", "/api/v1/ephemeral/ack", body, &a);
            itest_resp_free(&a);
            free(body);
        }
        itest_resp_free(&r);
        if (k < 0)
            itest_sleep_ms(20); /* the worker died under us: reconnect */
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* Serve rpc requests: pop with autoAck, answer into the named inbox. */
static void *
responder(void *arg)
{
    CURL *h = itest_handle();

    (void)arg;
    while (!atomic_load(&ch.stop)) {
        struct itest_resp r, p;
        itest_req_on(h, ch.n, "GET",
                     "/api/v1/ephemeral/pop?queue=chaos-rpc&group=srv"
                     "&batch=10&wait=true&timeout=500&autoAck=true",
                     NULL, &r);
        int k = r.status == 200 ? itest_jlen(r.json, "messages") : 0;
        for (int i = 0; i < k; i++) {
            struct json_object *m = json_object_array_get_idx(
                itest_jget(r.json, "messages"), (size_t)i);
            char body[512];
            snprintf(body, sizeof(body),
                     "{\"queue\":\"%s\",\"messages\":[{\"payload\":"
                     "{\"n\":%lld}}]}",
                     itest_jstr(m, "payload.replyTo"),
                     (long long)itest_jint(m, "payload.n"));
            itest_req_on(h, ch.n, "POST", "/api/v1/ephemeral/push", body, &p);
            itest_resp_free(&p);
        }
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* Call: push a request naming a fresh inbox, park on the inbox 5 s. */
static void *
requester(void *arg)
{
    int who = (int)(intptr_t)arg;
    CURL *h = itest_handle();

    for (long k = 0; !atomic_load(&ch.stop_push); k++) {
        struct itest_resp r;
        char inbox[96], body[512], path[256];
        snprintf(inbox, sizeof(inbox), "chaos-inbox-%d-%ld", who, k);
        snprintf(body, sizeof(body),
                 "{\"queue\":\"chaos-rpc\",\"messages\":[{\"payload\":"
                 "{\"n\":%ld,\"replyTo\":\"%s\"}}]}",
                 k, inbox);
        atomic_fetch_add(&ch.rpc_calls, 1);
        itest_req_on(h, ch.n, "POST", "/api/v1/ephemeral/push", body, &r);
        int sent = r.status == 201;
        itest_resp_free(&r);
        if (!sent) {
            atomic_fetch_add(&ch.rpc_failed, 1);
            continue;
        }
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=%s&wait=true&timeout=5000"
                 "&autoAck=true",
                 inbox);
        itest_req_on(h, ch.n, "GET", path, NULL, &r);
        if (r.status == 200 && itest_jlen(r.json, "messages") == 1 &&
            itest_jint(r.json, "messages.0.payload.n") == k)
            atomic_fetch_add(&ch.rpc_replies, 1);
        else
            atomic_fetch_add(&ch.rpc_failed, 1);
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* Has process pid exited (gone, or a zombie: its mappings are gone)? */
static int
process_gone(pid_t pid)
{
    char path[64], stat[256];

    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 1;
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = 0;
    char *p = strrchr(stat, ')');
    return p != NULL && p[1] == ' ' && p[2] == 'Z';
}

/* Stop node n while this process keeps its segment mapped; once none of its
 * processes is left, check the segment quietly (nothing else can change it
 * now): the whole-segment accounting the live check cannot hold a running
 * node to. */
static void
stop_and_check_quietly(struct itest_node *n)
{
    struct shm_seg seg;
    struct shm_check_report r;
    pid_t w[ITEST_NODE_MAX_WORKERS];

    cr_assert_eq(shm_check_attach(n->pid, &seg), 0,
                 "the node's segment could not be mapped");
    int k = itest_node_workers(n, w, ITEST_NODE_MAX_WORKERS);
    cr_assert_eq(itest_node_stop(n, 30000), 0, "the node did not stop cleanly");
    int64_t deadline = itest_now_ms() + 30000;
    for (int i = 0; i < k; i++)
        while (!process_gone(w[i])) {
            cr_assert(itest_now_ms() < deadline,
                      "worker %d outlived its master by 30 s", (int)w[i]);
            itest_sleep_ms(50);
        }
    int64_t rc = shm_check(&seg, SHM_CHECK_QUIET, &r);
    shm_check_detach(&seg);
    cr_assert_eq(rc, 0,
                 "the stopped node's segment: %lld problems, the first: %s",
                 (long long)rc, r.first);
    fprintf(stderr,
            "chaos: stopped node's segment sound by the quiet check: %llu "
            "messages, %llu linked cells, %llu cached\n",
            (unsigned long long)r.messages, (unsigned long long)r.linked_cells,
            (unsigned long long)r.cached_cells);
}

/* Wait until the node runs WORKERS workers again, none of them dead. */
static void
wait_workers_back(const struct itest_node *n, pid_t dead)
{
    int64_t deadline = itest_now_ms() + 30000;
    pid_t w[ITEST_NODE_MAX_WORKERS];

    for (;;) {
        int k = itest_node_workers(n, w, ITEST_NODE_MAX_WORKERS), back = 1;
        for (int i = 0; i < k; i++)
            back &= w[i] != dead;
        if (k == WORKERS && back)
            return;
        cr_assert(itest_now_ms() < deadline,
                  "the killed worker was not replaced within 30 s");
        itest_sleep_ms(50);
    }
}

/* Sum what the ids show for queue q. */
static void
tally(int q, uint64_t *acc, uint64_t *del, uint64_t *lost, uint64_t *dup,
      long *first_lost)
{
    uint32_t end = atomic_load(&ch.next_id[q]);

    *acc = *del = *lost = *dup = 0;
    *first_lost = -1;
    for (uint32_t i = 0; i < end && i < MAX_ID; i++) {
        uint32_t d = atomic_load(&ch.delivered[q][i]);
        *acc += atomic_load(&ch.accepted[q][i]);
        *del += d != 0;
        *dup += d > 1 ? d - 1u : 0;
        if (atomic_load(&ch.accepted[q][i]) && d == 0) {
            if (*first_lost < 0)
                *first_lost = (long)i;
            (*lost)++;
        }
    }
}

Test(chaos, workers_killed_under_mixed_load_lose_no_acked_message,
     .timeout = 600)
{
    static struct itest_node n;
    pthread_t t[16];
    int nt = 0, kills = 0, seconds = 60;
    char out[1024], opts[128];
    const char *env = getenv("MAYFLY_CHAOS_S");

    if (env && atoi(env) > 0)
        seconds = atoi(env);
    srand((unsigned)itest_now_ms());
    itest_raise_nofile(4096);
    snprintf(opts, sizeof(opts), "workers=%d lease_s=2 implicit_idle_s=2",
             WORKERS);
    itest_node_start(&n, opts);
    ch.n = &n;
    for (int q = 0; q < NQ; q++) {
        pthread_create(&t[nt++], NULL, pusher, (void *)(intptr_t)q);
        pthread_create(&t[nt++], NULL, consumer, (void *)(intptr_t)q);
    }
    for (int i = 1; i < ACKERS; i++)
        pthread_create(&t[nt++], NULL, consumer, (void *)(intptr_t)ACKQ);
    for (int i = 0; i < RPC_RESP; i++)
        pthread_create(&t[nt++], NULL, responder, NULL);
    int first_requester = nt;
    for (int i = 0; i < RPC_REQS; i++)
        pthread_create(&t[nt++], NULL, requester, (void *)(intptr_t)i);

    int64_t end = itest_now_ms() + seconds * 1000LL;
    while (itest_now_ms() < end) {
        pid_t w[ITEST_NODE_MAX_WORKERS];
        itest_sleep_ms(1000 + rand() % 2000);
        int k = itest_node_workers(&n, w, ITEST_NODE_MAX_WORKERS);
        cr_assert_gt(k, 0, "the node has no workers");
        pid_t victim = w[rand() % k];
        cr_assert_eq(kill(victim, SIGKILL), 0);
        kills++;
        wait_workers_back(&n, victim);
        int rc = itest_check_segment(&n, out, sizeof(out));
        cr_assert_eq(rc, 0, "after kill %d: %s", kills, out);
    }
    /* Stop the load, then drain: lease_s=2, so what a killed worker had
     * leased comes again within seconds. */
    atomic_store(&ch.stop_push, 1);
    for (int i = 0; i < 2 * NQ; i += 2)
        pthread_join(t[i], NULL);
    for (int i = first_requester; i < nt; i++)
        pthread_join(t[i], NULL);
    int64_t deadline = itest_now_ms() + 60000;
    while (itest_now_ms() < deadline &&
           (itest_depth_pending(&n, qname[ACKQ], "g") > 0 ||
            itest_now_ms() - atomic_load(&ch.last_delivery_ms) < 3000))
        itest_sleep_ms(200);
    atomic_store(&ch.stop, 1);
    for (int i = 0; i < first_requester; i++)
        if (i % 2 == 1 || i >= 2 * NQ)
            pthread_join(t[i], NULL);
    cr_assert_eq(itest_check_segment(&n, out, sizeof(out)), 0, "at the end: %s",
                 out);

    uint64_t acc, del, lost, dup, aacc, adel, alost, adup;
    long first, afirst;
    tally(ACKQ, &acc, &del, &lost, &dup, &first);
    tally(AUTOQ, &aacc, &adel, &alost, &adup, &afirst);
    fprintf(stderr,
            "chaos: %d s, %d worker kills, segment checked after each: %s"
            "chaos: ack mode: accepted %llu, delivered %llu, lost %llu, "
            "duplicates %llu\n"
            "chaos: autoAck: accepted %llu, delivered %llu, lost %llu, "
            "duplicates %llu\n"
            "chaos: rpc: %ld calls, %ld replies, %ld failed; pushes refused "
            "or cut %ld\n",
            seconds, kills, out, (unsigned long long)acc,
            (unsigned long long)del, (unsigned long long)lost,
            (unsigned long long)dup, (unsigned long long)aacc,
            (unsigned long long)adel, (unsigned long long)alost,
            (unsigned long long)adup, atomic_load(&ch.rpc_calls),
            atomic_load(&ch.rpc_replies), atomic_load(&ch.rpc_failed),
            atomic_load(&ch.push_failed));
    cr_assert_gt(kills, 0);
    cr_assert_gt(acc, 0, "no ack-mode push was accepted");
    cr_assert_eq(lost, 0,
                 "%llu accepted ack-mode messages never delivered (first id "
                 "%ld)",
                 (unsigned long long)lost, first);
    cr_assert_gt(atomic_load(&ch.rpc_replies), 0, "no rpc call was answered");
    stop_and_check_quietly(&n);
}

/* `--check-segment` without its pid, or with more, is a usage error (exit
 * 2) that says what it takes, not an unknown option. */
Test(chaos, check_segment_wants_exactly_one_pid)
{
    static const char *bad[] = {"--check-segment", "--check-segment 1 2",
                                "-d --check-segment 1"};
    char cmd[512], out[1024];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(cmd, sizeof(cmd), "%s %s 2>&1", getenv("MAYFLYD"), bad[i]);
        FILE *f = popen(cmd, "r");
        cr_assert_not_null(f);
        size_t got = fread(out, 1, sizeof(out) - 1, f);
        out[got] = 0;
        int st = pclose(f);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2,
                  "mayflyd %s: status %d, said: %s", bad[i], st, out);
        cr_assert(strstr(out, "takes one argument, a master's pid") != NULL,
                  "mayflyd %s said: %s", bad[i], out);
    }
}
