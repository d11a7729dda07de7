/*
 * test_cluster_request.c - SPEC §9 across three real nodes: the requester
 * asks node 0, the request's partition is node 1's, the responder polls
 * and acks through node 2.  The inbox is minted on node 0, the store goes
 * to node 1 once, the reply goes from node 1 (where the ack lands) to node
 * 0 in one hop: every requester gets its own reply.  And a SIGTERM of the
 * owner while requests wait there: each requester gets a reply or a 503,
 * none past its timeout (each call is timed).  A request that times out is
 * withdrawn at its owner even when the owner's answer to the store never
 * came (its workers stalled), and even when a peer's watch saw it.  A
 * request nobody listens for gets the owner's 503 no_responders, counted
 * on the requester's node.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/cluster/suite.h"

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

/* find_part - the partition of svc the tests use, owned by OWNER. */
static void
find_part(void)
{
    cl_part_owned_by("svc", OWNER, 64, part, sizeof(part));
}

CL_SUITE_THEN(cluster_request, &c, "member_ttl_ms=60000", CL_SUITE_VIEW,
              find_part, .timeout = 180);

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

/* A request nobody listens for, sent on to the owner of its partition: the
 * owner's 503 no_responders reaches the requester as the owner wrote it,
 * and is counted where the requester waited (which reads the owner's
 * answer, http/peer_answer.h). */
Test(cluster_request, no_responders_at_the_owner_is_relayed_and_counted)
{
    static const char series[] =
        "mayfly_requests_total{result=\"no_responders\"}";
    struct itest_resp r;
    char p[32], body[200];
    double before = -1, after = -1;

    cl_part_owned_by("nobody", OWNER, 64, p, sizeof(p));
    cr_assert_eq(itest_metric(&c.node[REQUESTER], series, &before), 0);
    snprintf(body, sizeof(body),
             "{\"queue\":\"nobody\",\"partition\":\"%s\",\"payload\":1}", p);
    itest_req(&c.node[REQUESTER], "POST", REQ, body, &r);
    itest_assert_error(&r, 503, "no_responders", NULL,
                       "a request nobody listens for");
    itest_resp_free(&r);
    cr_assert_eq(itest_metric(&c.node[REQUESTER], series, &after), 0);
    cr_assert_eq(after, before + 1, "%s went from %g to %g", series, before,
                 after);
}

/* pop_none - a pop of the partition in group workers through node i, with
 * the parameters more, must find nothing (why says what it would mean). */
static void
pop_none(int i, const char *more, const char *why)
{
    struct itest_resp r;

    itest_get(&c.node[i], &r,
              "/api/v1/ephemeral/pop?queue=svc&partition=%s&group=workers&%s",
              part, more);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s: %s", why, r.body);
    itest_resp_free(&r);
}

/* listen_once - one pop through node RESPONDER that finds nothing: the
 * partition has a listener for responders_idle_ms, and nobody answers. */
static void
listen_once(void)
{
    pop_none(RESPONDER, "timeout=0", "nothing was pushed yet");
}

Test(cluster_request, sigterm_of_the_owner_answers_every_waiting_requester)
{
    struct run b = {0};
    pthread_t resp[RESPONDERS], req[REQUESTERS];
    struct requester q[REQUESTERS];

    listen_once(); /* requests wait: nobody answers yet */
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

/* signal_workers - sig to every worker of node i (its master runs on, so
 * its peers still count it live). */
static void
signal_workers(int i, int sig)
{
    pid_t w[ITEST_NODE_MAX_WORKERS];
    int nw = itest_node_workers(&c.node[i], w, ITEST_NODE_MAX_WORKERS);

    cr_assert_gt(nw, 0);
    for (int k = 0; k < nw; k++)
        cr_assert_eq(kill(w[k], sig), 0);
}

/* request_times_out - one request through node REQUESTER with timeout
 * 1000 ms nobody answers: 504 request_timeout, in time. */
static void
request_times_out(void)
{
    struct itest_resp r;
    char body[200];
    int64_t t0 = itest_now_ms(), took;

    snprintf(body, sizeof(body),
             "{\"queue\":\"svc\",\"partition\":\"%s\",\"payload\":"
             "{\"n\":7},\"timeout\":1000}",
             part);
    itest_req(&c.node[REQUESTER], "POST", REQ, body, &r);
    took = itest_now_ms() - t0;
    itest_assert_error(&r, 504, "request_timeout", NULL, "the request");
    cr_expect_lt(took, 6000, "answered after %lld ms", (long long)took);
    itest_resp_free(&r);
}

/* assert_nothing_delivered - a responder polling the owner's partition
 * (long enough for a stalled worker to catch up) gets nothing. */
static void
assert_nothing_delivered(void)
{
    pop_none(OWNER, "wait=true&timeout=3000",
             "a withdrawn request was delivered");
}

/* The owner's workers stall (SIGSTOP) with the store of a request in their
 * socket: the requester's node gives up at the request's timeout (504).
 * Resumed, the owner reads a store whose sender has hung up: it must not
 * be delivered to a responder. */
Test(cluster_request, a_store_the_owner_answers_too_late_is_withdrawn)
{
    double v = 0;

    listen_once();
    signal_workers(OWNER, SIGSTOP);
    request_times_out();
    signal_workers(OWNER, SIGCONT);
    assert_nothing_delivered();
    cr_assert_eq(itest_metric(&c.node[REQUESTER],
                              "mayfly_requests_total{result=\"timeout\"}", &v),
                 0);
    cr_expect_eq(v, 1);
}

/* watcher - a pop with no partition through node RESPONDER: it leaves a
 * watch at every peer, the owner among them. */
static void *
watcher(void *arg)
{
    struct itest_resp *r = arg;

    itest_get(&c.node[RESPONDER], r,
              "/api/v1/ephemeral/pop?queue=svc&group=workers&wait=true"
              "&timeout=8000");
    return NULL;
}

/* A peer's watch parked at the owner sees the request come (its node's
 * workers are stalled, so it does not come for it): the request, still
 * unread, is withdrawn when it times out, and nobody gets it afterwards,
 * the watching pop included. */
Test(cluster_request, a_request_a_peer_watched_is_still_withdrawn)
{
    struct itest_resp w;
    pthread_t t;

    cr_assert_eq(pthread_create(&t, NULL, watcher, &w), 0);
    wait_metric(OWNER, "mayfly_parked_pops", 1); /* the watch */
    signal_workers(RESPONDER, SIGSTOP);
    request_times_out();
    assert_nothing_delivered();
    signal_workers(RESPONDER, SIGCONT);
    pthread_join(t, NULL);
    cr_assert_eq(w.status, 200, "%s", w.body);
    cr_assert_eq(itest_jlen(w.json, "messages"), 0,
                 "a withdrawn request was delivered: %s", w.body);
    itest_resp_free(&w);
}

/* SPEC §9: a request withdrawn at its owner (another node) while still
 * unread is dropped there, not merely passed over: the owner's depth of the
 * partition goes back to 0 without any pop past it, and nobody gets it. */
Test(cluster_request, a_request_withdrawn_at_its_owner_leaves_its_depth)
{
    struct itest_resp r;
    char p[32], body[200];
    int64_t deadline, pending = -1;

    cl_part_owned_by("rpcw", OWNER, 64, p, sizeof(p));
    itest_get(&c.node[RESPONDER], &r,
              "/api/v1/ephemeral/pop?queue=rpcw&partition=%s&group=w"
              "&timeout=0",
              p);
    cr_assert_eq(r.status, 200, "%s", r.body);
    itest_resp_free(&r);
    snprintf(body, sizeof(body),
             "{\"queue\":\"rpcw\",\"partition\":\"%s\",\"payload\":1,"
             "\"timeout\":500}",
             p);
    itest_req(&c.node[REQUESTER], "POST", REQ, body, &r);
    itest_assert_error(&r, 504, "request_timeout", NULL, "the request");
    itest_resp_free(&r);
    /* the withdrawal is a call of its own, sent as the 504 is */
    deadline = itest_now_ms() + 5000;
    while ((pending = itest_depth_pending(&c.node[OWNER], "rpcw", NULL)) != 0 &&
           itest_now_ms() < deadline)
        itest_sleep_ms(20);
    cr_assert_eq(pending, 0, "the owner still holds the withdrawn request");
    itest_get(&c.node[RESPONDER], &r,
              "/api/v1/ephemeral/pop?queue=rpcw&partition=%s&group=w"
              "&timeout=0",
              p);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
}
