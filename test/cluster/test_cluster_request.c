/*
 * test_cluster_request.c - SPEC §9 across three real nodes: the requester
 * asks node 0, the request's partition is node 1's, the responder polls
 * and acks through node 2.  The inbox is minted on node 0, the store goes
 * to node 1 once, the reply goes from node 1 (where the ack lands) to node
 * 0 in one hop: every requester gets its own reply.  And a SIGTERM of the
 * owner while requests wait there: each requester gets a reply or a 503,
 * none past its timeout (each call is timed).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/cluster/cluster.h"

#define REQ "/api/v1/ephemeral/request"
#define ACK "/api/v1/ephemeral/ack"

#define REQUESTERS 20
#define RESPONDERS 2
#define TIMEOUT_MS 10000
#define REQUESTER  0 /* the node the requesters ask */
#define OWNER      1 /* owns the partition */
#define RESPONDER  2 /* the node the responders poll */

static struct cl c;
static char part[32];

static void
up(void)
{
    cl_up(&c, "member_ttl_ms=60000");
    cl_wait_view(&c, CL_ALL);
    cl_part_owned_by("svc", OWNER, 64, part, sizeof(part));
}

static void
down(void)
{
    cl_kill_all(&c);
}

TestSuite(cluster_request, .init = up, .fini = down, .timeout = 180);

struct run {
    atomic_int stop;
    atomic_int ok;      /* own reply */
    atomic_int refused; /* 503 */
    atomic_int bad;     /* anything else, or too late */
    atomic_int unsent;  /* ack entries that did not say replied */
    char first_bad[512];
};

/* responder - pop a batch through node RESPONDER, answer each in the ack,
 * until told to stop. */
static void *
responder(void *arg)
{
    struct run *b = arg;
    CURL *h = itest_handle();
    char path[256];

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=svc&partition=%s&group=workers"
             "&batch=10&wait=true&timeout=300",
             part);
    while (!atomic_load(&b->stop)) {
        struct itest_resp r, a;
        char body[16384];
        size_t o = 0;

        itest_req_on(h, &c.node[RESPONDER], "GET", path, NULL, &r);
        int k = itest_jlen(r.json, "messages");
        if (k <= 0) {
            itest_resp_free(&r);
            if (r.status != 200)
                itest_sleep_ms(50); /* a node is stopping */
            continue;
        }
        o += (size_t)snprintf(body + o, sizeof(body) - o,
                              "{\"queue\":\"svc\",\"group\":\"workers\","
                              "\"acks\":[");
        for (int i = 0; i < k; i++) {
            struct json_object *m = json_object_array_get_idx(
                itest_jget(r.json, "messages"), (size_t)i);
            o += (size_t)snprintf(body + o, sizeof(body) - o,
                                  "%s{\"id\":\"%s\",\"reply\":{\"echo\":"
                                  "%lld}}",
                                  i ? "," : "", itest_jstr(m, "id"),
                                  (long long)itest_jint(m, "payload.n"));
        }
        snprintf(body + o, sizeof(body) - o, "]}");
        itest_req_on(h, &c.node[RESPONDER], "POST", ACK, body, &a);
        for (int i = 0; i < k; i++) {
            char p[64];
            snprintf(p, sizeof(p), "results.%d.replied", i);
            if (a.status != 200 || !itest_jbool(a.json, p))
                atomic_fetch_add(&b->unsent, 1);
        }
        itest_resp_free(&a);
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

struct requester {
    struct run *b;
    int n;
    int64_t ms; /* how long its call took */
};

/* requester - one request through node REQUESTER; its reply must be its
 * own, or a 503, within its timeout. */
static void *
requester(void *arg)
{
    struct requester *q = arg;
    struct itest_resp r;
    char body[160];
    int64_t t0 = itest_now_ms();

    snprintf(body, sizeof(body),
             "{\"queue\":\"svc\",\"partition\":\"%s\",\"payload\":{\"n\":%d},"
             "\"timeout\":%d}",
             part, q->n, TIMEOUT_MS);
    itest_req(&c.node[REQUESTER], "POST", REQ, body, &r);
    q->ms = itest_now_ms() - t0;
    if (r.status == 200 && itest_jint(r.json, "reply.echo") == q->n &&
        itest_jstr(r.json, "id") != NULL && q->ms < TIMEOUT_MS + 1000)
        atomic_fetch_add(&q->b->ok, 1);
    else if (r.status == 503 && q->ms < TIMEOUT_MS + 1000)
        atomic_fetch_add(&q->b->refused, 1);
    else if (atomic_fetch_add(&q->b->bad, 1) == 0)
        snprintf(q->b->first_bad, sizeof(q->b->first_bad),
                 "request %d: %ld after %lld ms: %.300s", q->n, r.status,
                 (long long)q->ms, r.body);
    itest_resp_free(&r);
    return NULL;
}

/* wait_metric - until series on node i reaches want (generous bound). */
static void
wait_metric(int i, const char *series, double want)
{
    int64_t deadline = itest_now_ms() + 30000;
    double v = -1;

    while (itest_metric(&c.node[i], series, &v) != 0 || v < want) {
        cr_assert(itest_now_ms() < deadline, "%s on node %d is %g, want %g",
                  series, i, v, want);
        itest_sleep_ms(20);
    }
}

/* start_requesters - REQUESTERS threads through node REQUESTER. */
static void
start_requesters(struct run *b, pthread_t *t, struct requester *q)
{
    for (int i = 0; i < REQUESTERS; i++) {
        q[i] = (struct requester){b, i, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, requester, &q[i]), 0);
    }
}

Test(cluster_request, requester_owner_and_responder_on_three_nodes)
{
    struct run b = {0};
    pthread_t resp[RESPONDERS], req[REQUESTERS];
    struct requester q[REQUESTERS];

    cr_assert_eq(cl_owner("svc", part, CL_ALL), OWNER);
    for (int i = 0; i < RESPONDERS; i++)
        cr_assert_eq(pthread_create(&resp[i], NULL, responder, &b), 0);
    /* the responders' long polls, forwarded by node 2, park at node 1 */
    wait_metric(OWNER, "mayfly_parked_pops", 1);
    start_requesters(&b, req, q);
    for (int i = 0; i < REQUESTERS; i++)
        pthread_join(req[i], NULL);
    atomic_store(&b.stop, 1);
    for (int i = 0; i < RESPONDERS; i++)
        pthread_join(resp[i], NULL);
    cr_assert_eq(atomic_load(&b.bad) + atomic_load(&b.refused), 0, "%s",
                 b.first_bad);
    cr_assert_eq(atomic_load(&b.ok), REQUESTERS);
    cr_assert_eq(atomic_load(&b.unsent), 0, "ack entries without replied");
    /* counted where the requesters waited; no inbox left anywhere */
    double v = 0;
    cr_assert_eq(itest_metric(&c.node[REQUESTER],
                              "mayfly_requests_total{result=\"replied\"}", &v),
                 0);
    cr_assert_eq(v, REQUESTERS);
    for (int i = 0; i < CL_NODES; i++) {
        struct itest_resp r;
        itest_get(&c.node[i], &r, "/api/v1/ephemeral/queues?scope=node");
        for (int k = 0; k < itest_jlen(r.json, "queues"); k++) {
            struct json_object *e =
                json_object_array_get_idx(itest_jget(r.json, "queues"), k);
            cr_assert(strncmp(itest_jstr(e, "queue"), "mayfly.inbox/", 13),
                      "node %d still holds %s", i, itest_jstr(e, "queue"));
        }
        itest_resp_free(&r);
    }
}

Test(cluster_request, sigterm_of_the_owner_answers_every_waiting_requester)
{
    struct run b = {0};
    pthread_t resp[RESPONDERS], req[REQUESTERS];
    struct requester q[REQUESTERS];
    struct itest_resp r;

    /* one pop that finds nothing: the partition has a listener (for
     * responders_idle_ms) but nobody answers yet, so requests wait */
    itest_get(&c.node[RESPONDER], &r,
              "/api/v1/ephemeral/pop?queue=svc&partition=%s&group=workers"
              "&timeout=0",
              part);
    cr_assert_eq(r.status, 200, "%s", r.body);
    itest_resp_free(&r);
    start_requesters(&b, req, q);
    /* each stored at the owner and waiting on its inbox at node 0 */
    wait_metric(REQUESTER, "mayfly_parked_pops", REQUESTERS);
    /* the owner drains and hands the waiting requests over */
    cr_assert_eq(cl_stop(&c, OWNER, 30000), 0);
    for (int i = 0; i < RESPONDERS; i++)
        cr_assert_eq(pthread_create(&resp[i], NULL, responder, &b), 0);
    for (int i = 0; i < REQUESTERS; i++)
        pthread_join(req[i], NULL);
    atomic_store(&b.stop, 1);
    for (int i = 0; i < RESPONDERS; i++)
        pthread_join(resp[i], NULL);
    cr_assert_eq(atomic_load(&b.bad), 0, "%s", b.first_bad);
    cr_assert_eq(atomic_load(&b.ok) + atomic_load(&b.refused), REQUESTERS);
    cr_log_info("owner stopped: %d replies, %d refused", atomic_load(&b.ok),
                atomic_load(&b.refused));
}
