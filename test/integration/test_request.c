/*
 * test_request.c - SPEC §9 on one node: POST /api/v1/ephemeral/request
 * answers with the reply a responder gives in its ack, 504 when none comes
 * (and withdraws the request), 503 no_responders at once when nobody
 * listens; a requester that hangs up withdraws its request; a late reply
 * is dropped, said and counted; an ack entry with a reply for a message
 * that is no request says so while the rest of its batch applies.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"

#define REQ "/api/v1/ephemeral/request"
#define ACK "/api/v1/ephemeral/ack"

#define REQUESTERS 50
#define RESPONDERS 3

struct bench {
    const struct itest_node *n;
    atomic_int stop;
    atomic_int ok;
    atomic_int bad;
    char first_bad[512];
};

/* responder - pop a batch, answer each in the ack, until told to stop. */
static void *
responder(void *arg)
{
    struct bench *b = arg;
    CURL *h = itest_handle();

    while (!atomic_load(&b->stop)) {
        struct itest_resp r, a;
        char body[16384];
        size_t o = 0;

        itest_req_on(h, b->n, "GET",
                     "/api/v1/ephemeral/pop?queue=svc&group=workers"
                     "&batch=10&wait=true&timeout=300",
                     NULL, &r);
        int k = itest_jlen(r.json, "messages");
        if (k <= 0) {
            itest_resp_free(&r);
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
        itest_req_on(h, b->n, "POST", ACK, body, &a);
        for (int i = 0; i < k; i++) {
            char path[64];
            snprintf(path, sizeof(path), "results.%d.replied", i);
            if (a.status != 200 || !itest_jbool(a.json, path))
                atomic_fetch_add(&b->bad, 1);
        }
        itest_resp_free(&a);
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

struct requester {
    struct bench *b;
    int n;
};

/* requester - one request; its reply must be its own. */
static void *
requester(void *arg)
{
    struct requester *q = arg;
    struct itest_resp r;
    char body[128];

    snprintf(body, sizeof(body),
             "{\"queue\":\"svc\",\"payload\":{\"n\":%d},\"timeout\":20000}",
             q->n);
    itest_req(q->b->n, "POST", REQ, body, &r);
    if (r.status == 200 && itest_jint(r.json, "reply.echo") == q->n &&
        itest_jstr(r.json, "id") != NULL)
        atomic_fetch_add(&q->b->ok, 1);
    else if (atomic_fetch_add(&q->b->bad, 1) == 0)
        snprintf(q->b->first_bad, sizeof(q->b->first_bad),
                 "request %d: %ld %.300s", q->n, r.status, r.body);
    itest_resp_free(&r);
    return NULL;
}

/* wait_metric - until series reaches want (generous bound). */
static void
wait_metric(const struct itest_node *n, const char *series, double want)
{
    int64_t deadline = itest_now_ms() + 20000;
    double v = -1;

    while (itest_metric(n, series, &v) != 0 || v < want) {
        cr_assert(itest_now_ms() < deadline, "%s is %g, want %g", series, v,
                  want);
        itest_sleep_ms(20);
    }
}

Test(request, fifty_requesters_three_responders_every_reply_is_its_own,
     .timeout = 120)
{
    struct itest_node n;
    struct bench b = {0};
    pthread_t resp[RESPONDERS], req[REQUESTERS];
    struct requester q[REQUESTERS];

    itest_node_start(&n, NULL);
    b.n = &n;
    for (int i = 0; i < RESPONDERS; i++)
        cr_assert_eq(pthread_create(&resp[i], NULL, responder, &b), 0);
    wait_metric(&n, "mayfly_parked_pops", 1);
    for (int i = 0; i < REQUESTERS; i++) {
        q[i] = (struct requester){&b, i};
        cr_assert_eq(pthread_create(&req[i], NULL, requester, &q[i]), 0);
    }
    for (int i = 0; i < REQUESTERS; i++)
        pthread_join(req[i], NULL);
    atomic_store(&b.stop, 1);
    for (int i = 0; i < RESPONDERS; i++)
        pthread_join(resp[i], NULL);
    cr_assert_eq(atomic_load(&b.bad), 0, "%s", b.first_bad);
    cr_assert_eq(atomic_load(&b.ok), REQUESTERS);
    double replied;
    cr_assert_eq(
        itest_metric(&n, "mayfly_requests_total{result=\"replied\"}", &replied),
        0);
    cr_assert_eq(replied, REQUESTERS);
    /* one call, one inbox, nothing left: only the served queue is listed */
    struct itest_resp r;
    itest_get(&n, &r, "/api/v1/ephemeral/queues");
    cr_assert_eq(itest_jint(r.json, "count"), 1, "%s", r.body);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

/* listen_once - a pop that finds nothing: the group counts as listening
 * for responders_idle_ms. */
static void
listen_once(const struct itest_node *n, const char *queue)
{
    struct itest_resp r;

    itest_get(n, &r, "/api/v1/ephemeral/pop?queue=%s&timeout=0", queue);
    cr_assert_eq(r.status, 200, "%s", r.body);
    itest_resp_free(&r);
}

Test(request, a_timeout_answers_504_and_withdraws_the_request, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    int64_t t0;

    itest_node_start(&n, NULL);
    listen_once(&n, "slow");
    t0 = itest_now_ms();
    itest_post(&n, &r, REQ,
               "{\"queue\":\"slow\",\"payload\":\"q\",\"timeout\":300}");
    cr_assert_eq(r.status, 504, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "code"), "request_timeout");
    cr_assert(itest_now_ms() - t0 >= 250, "answered before its timeout");
    itest_resp_free(&r);
    /* a responder popping after it gets nothing */
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=slow&timeout=0");
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

Test(request, a_requester_that_hangs_up_withdraws_its_request, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char raw[512];
    const char *body = "{\"queue\":\"gone\",\"payload\":1,\"timeout\":30000}";

    itest_node_start(&n, NULL);
    listen_once(&n, "gone");
    int fd = itest_raw_connect(&n);
    snprintf(raw, sizeof(raw),
             "POST " REQ " HTTP/1.1\r\nHost: x\r\nContent-Type: "
             "application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    itest_raw_send(fd, raw);
    wait_metric(&n, "mayfly_memory_used_bytes", 1);
    /* stored, and waiting on its inbox as a parked pop waits */
    wait_metric(&n, "mayfly_parked_pops", 1);
    close(fd);
    wait_metric(&n, "mayfly_requests_total{result=\"withdrawn\"}", 1);
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=gone&timeout=0");
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

struct late {
    const struct itest_node *n;
    long status;
};

/* late_request - a request that gives up after 300 ms. */
static void *
late_request(void *arg)
{
    struct late *l = arg;
    struct itest_resp r;

    itest_post(l->n, &r, REQ,
               "{\"queue\":\"late\",\"payload\":7,\"timeout\":300}");
    l->status = r.status;
    itest_resp_free(&r);
    return NULL;
}

Test(request, a_late_reply_answers_replied_false_and_is_counted, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, a;
    struct late l = {0};
    pthread_t t;
    double dropped = -1;

    itest_node_start(&n, NULL);
    listen_once(&n, "late");
    l.n = &n;
    cr_assert_eq(pthread_create(&t, NULL, late_request, &l), 0);
    itest_get(&n, &r,
              "/api/v1/ephemeral/pop?queue=late&wait=true&timeout=10000");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_not_null(itest_jstr(r.json, "messages.0.replyTo"), "%s", r.body);
    pthread_join(t, NULL);
    cr_assert_eq(l.status, 504);
    itest_post(&n, &a, ACK,
               "{\"queue\":\"late\",\"acks\":[{\"id\":\"%s\",\"reply\":1}]}",
               itest_jstr(r.json, "messages.0.id"));
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_eq(itest_jbool(a.json, "results.0.replied"), 0, "%s", a.body);
    cr_assert_not_null(itest_jstr(a.json, "results.0.reason"), "%s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.0.outcome"), "acked");
    cr_assert_eq(itest_metric(&n, "mayfly_replies_dropped_total", &dropped), 0);
    cr_assert_eq(dropped, 1);
    itest_resp_free(&a);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

/* parked_pop - a responder parked on queue "busy" for 3 s. */
static void *
parked_pop(void *arg)
{
    struct itest_resp r;

    itest_get(arg, &r,
              "/api/v1/ephemeral/pop?queue=busy&wait=true&timeout=3000");
    itest_resp_free(&r);
    return NULL;
}

Test(request, no_responders_at_once_only_when_nobody_listens, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    pthread_t t;
    int64_t t0;

    itest_node_start(&n, "responders_idle_ms=5000");
    t0 = itest_now_ms();
    itest_post(&n, &r, REQ, "{\"queue\":\"nobody\",\"payload\":1}");
    cr_assert_eq(r.status, 503, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "code"), "no_responders");
    cr_assert(itest_now_ms() - t0 < 2000, "not at once");
    itest_resp_free(&r);
    /* storing nothing: no queue was made */
    itest_get(&n, &r, "/api/v1/ephemeral/queues");
    cr_assert_eq(itest_jint(r.json, "count"), 0, "%s", r.body);
    itest_resp_free(&r);
    /* a responder parked: the request is stored and waits */
    cr_assert_eq(pthread_create(&t, NULL, parked_pop, &n), 0);
    wait_metric(&n, "mayfly_parked_pops", 1);
    itest_post(&n, &r, REQ,
               "{\"queue\":\"busy\",\"payload\":1,\"timeout\":200}");
    cr_assert_eq(r.status, 504, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    pthread_join(t, NULL);
    /* it popped within responders_idle_ms: still listening */
    itest_post(&n, &r, REQ,
               "{\"queue\":\"busy\",\"payload\":1,\"timeout\":100}");
    cr_assert_eq(r.status, 504, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

/* ask - a request on "mixed" that waits for its reply. */
static void *
ask(void *arg)
{
    struct late *l = arg;
    struct itest_resp r;

    itest_post(l->n, &r, REQ,
               "{\"queue\":\"mixed\",\"payload\":\"q\",\"timeout\":20000}");
    l->status =
        r.status == 200 && itest_jint(r.json, "reply") == 5 ? 200 : -r.status;
    itest_resp_free(&r);
    return NULL;
}

Test(request,
     a_reply_to_a_message_without_replyto_says_why_and_the_batch_applies,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, a;
    struct late l = {0};
    pthread_t t;

    itest_node_start(&n, NULL);
    listen_once(&n,
                "mixed"); /* before the plain message, which it would take */
    itest_push_ok(&n, &r, "mixed", NULL, "[\"plain\"]", 1);
    itest_resp_free(&r);
    l.n = &n;
    cr_assert_eq(pthread_create(&t, NULL, ask, &l), 0);
    wait_metric(&n, "mayfly_parked_pops", 1); /* the requester's inbox */
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=mixed&batch=2");
    cr_assert_eq(itest_jlen(r.json, "messages"), 2, "%s", r.body);
    itest_post(&n, &a, ACK,
               "{\"queue\":\"mixed\",\"acks\":[{\"id\":\"%s\",\"reply\":4},"
               "{\"id\":\"%s\",\"reply\":5}]}",
               itest_jstr(r.json, "messages.0.id"),
               itest_jstr(r.json, "messages.1.id"));
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_eq(itest_jbool(a.json, "results.0.replied"), 0, "%s", a.body);
    cr_assert_not_null(itest_jstr(a.json, "results.0.reason"), "%s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.0.outcome"), "acked");
    cr_assert_eq(itest_jbool(a.json, "results.1.replied"), 1, "%s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.1.outcome"), "acked");
    pthread_join(t, NULL);
    cr_assert_eq(l.status, 200, "requester got %ld", l.status);
    itest_resp_free(&a);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

struct waiting {
    const struct itest_node *n;
    struct itest_resp r;
    int64_t ms;
};

/* wait_request - one request on "stop" with a long timeout, timed. */
static void *
wait_request(void *arg)
{
    struct waiting *q = arg;
    int64_t t0 = itest_now_ms();

    itest_req(q->n, "POST", REQ,
              "{\"queue\":\"stop\",\"payload\":1,\"timeout\":30000}", &q->r);
    q->ms = itest_now_ms() - t0;
    return NULL;
}

Test(request, sigterm_answers_a_waiting_request_503_draining, .timeout = 60)
{
    struct itest_node n;
    struct waiting q = {0};
    pthread_t t;

    itest_node_start(&n, NULL);
    listen_once(&n, "stop");
    q.n = &n;
    cr_assert_eq(pthread_create(&t, NULL, wait_request, &q), 0);
    wait_metric(&n, "mayfly_parked_pops", 1); /* it waits on its inbox */
    cr_assert_eq(itest_node_stop(&n, 20000), 0);
    pthread_join(t, NULL);
    cr_assert_eq(q.r.status, 503, "%ld %s", q.r.status, q.r.body);
    cr_assert_str_eq(itest_jstr(q.r.json, "code"), "draining");
    cr_assert(q.ms < 20000, "answered after %lld ms", (long long)q.ms);
    itest_resp_free(&q.r);
}

struct respawn_req {
    const struct itest_node *n;
    int payload;
    struct itest_resp r;
};

/* respawn_request - one request on queue "re" carrying payload. */
static void *
respawn_request(void *arg)
{
    struct respawn_req *q = arg;
    char body[96];

    snprintf(body, sizeof(body),
             "{\"queue\":\"re\",\"payload\":%d,\"timeout\":20000}", q->payload);
    itest_req(q->n, "POST", REQ, body, &q->r);
    return NULL;
}

/* pop_request - wait for the one request on queue "re". */
static void
pop_request(const struct itest_node *n, struct itest_resp *r)
{
    itest_get(n, r, "/api/v1/ephemeral/pop?queue=re&wait=true&timeout=15000");
    cr_assert_eq(itest_jlen(r->json, "messages"), 1, "%s", r->body);
}

Test(request, a_worker_respawned_in_the_same_slot_mints_new_inboxes,
     .timeout = 90)
{
    struct itest_node n;
    struct respawn_req a = {0}, b = {0};
    struct itest_resp ra, rb, x;
    pthread_t ta, tb;
    pid_t w0 = 0, w1 = 0;

    itest_node_start(&n, "workers=1");
    listen_once(&n, "re");
    a = (struct respawn_req){.n = &n, .payload = 1};
    cr_assert_eq(pthread_create(&ta, NULL, respawn_request, &a), 0);
    pop_request(&n, &ra);
    cr_assert_eq(itest_node_workers(&n, &w0, 1), 1);
    cr_assert_eq(kill(w0, SIGKILL), 0);
    pthread_join(ta, NULL);
    itest_resp_free(&a.r);
    int64_t deadline = itest_now_ms() + 20000;
    while (itest_node_workers(&n, &w1, 1) != 1 || w1 == w0 ||
           itest_workers_listening(&n) != 1) {
        cr_assert(itest_now_ms() < deadline, "no worker came back");
        itest_sleep_ms(50);
    }
    listen_once(&n, "re");
    b = (struct respawn_req){.n = &n, .payload = 2};
    cr_assert_eq(pthread_create(&tb, NULL, respawn_request, &b), 0);
    pop_request(&n, &rb);
    cr_assert_str_neq(itest_jstr(ra.json, "messages.0.replyTo"),
                      itest_jstr(rb.json, "messages.0.replyTo"));
    /* the dead worker's request gets its late reply: not b's answer */
    itest_post(
        &n, &x, ACK,
        "{\"queue\":\"re\",\"acks\":[{\"id\":\"%s\",\"reply\":\"old\"}]}",
        itest_jstr(ra.json, "messages.0.id"));
    itest_resp_free(&x);
    itest_post(
        &n, &x, ACK,
        "{\"queue\":\"re\",\"acks\":[{\"id\":\"%s\",\"reply\":\"new\"}]}",
        itest_jstr(rb.json, "messages.0.id"));
    itest_resp_free(&x);
    pthread_join(tb, NULL);
    cr_assert_eq(b.r.status, 200, "%ld %s", b.r.status, b.r.body);
    cr_assert_str_eq(itest_jstr(b.r.json, "reply"), "new", "%s", b.r.body);
    itest_resp_free(&b.r);
    itest_resp_free(&ra);
    itest_resp_free(&rb);
    itest_node_stop(&n, 10000);
}

/* stale_request - a request on "fence" that waits for its reply. */
static void *
stale_request(void *arg)
{
    struct respawn_req *q = arg;

    itest_req(q->n, "POST", REQ,
              "{\"queue\":\"fence\",\"payload\":1,\"timeout\":20000}", &q->r);
    return NULL;
}

Test(request, a_stale_ack_delivers_no_reply, .timeout = 60)
{
    struct itest_node n;
    struct respawn_req q = {0};
    struct itest_resp r, a;
    pthread_t t;

    itest_node_start(&n, NULL);
    listen_once(&n, "fence");
    q.n = &n;
    cr_assert_eq(pthread_create(&t, NULL, stale_request, &q), 0);
    itest_get(&n, &r,
              "/api/v1/ephemeral/pop?queue=fence&wait=true&timeout=15000");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1, "%s", r.body);
    /* fenced at a delivery that is not the current one: stale */
    itest_post(&n, &a, ACK,
               "{\"queue\":\"fence\",\"acks\":[{\"id\":\"%s\",\"attempts\":2,"
               "\"reply\":\"stale\"}]}",
               itest_jstr(r.json, "messages.0.id"));
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.0.outcome"), "stale", "%s",
                     a.body);
    cr_assert_eq(itest_jbool(a.json, "results.0.replied"), 0, "%s", a.body);
    cr_assert_not_null(itest_jstr(a.json, "results.0.reason"), "%s", a.body);
    itest_resp_free(&a);
    itest_post(&n, &a, ACK,
               "{\"queue\":\"fence\",\"acks\":[{\"id\":\"%s\",\"attempts\":1,"
               "\"reply\":\"fresh\"}]}",
               itest_jstr(r.json, "messages.0.id"));
    cr_assert_eq(itest_jbool(a.json, "results.0.replied"), 1, "%s", a.body);
    itest_resp_free(&a);
    pthread_join(t, NULL);
    cr_assert_eq(q.r.status, 200, "%ld %s", q.r.status, q.r.body);
    cr_assert_str_eq(itest_jstr(q.r.json, "reply"), "fresh", "%s", q.r.body);
    itest_resp_free(&q.r);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

/* parked_on_p1 - a responder parked on partition p1 of "parts" for 3 s. */
static void *
parked_on_p1(void *arg)
{
    struct itest_resp r;

    itest_get(arg, &r,
              "/api/v1/ephemeral/pop?queue=parts&partition=p1&wait=true"
              "&timeout=3000");
    itest_resp_free(&r);
    return NULL;
}

Test(request, a_pop_of_another_partition_is_no_responder, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    pthread_t t;
    int64_t t0;

    itest_node_start(&n, "responders_idle_ms=5000");
    cr_assert_eq(pthread_create(&t, NULL, parked_on_p1, &n), 0);
    wait_metric(&n, "mayfly_parked_pops", 1);
    /* p2 and Default have nobody, though p1 has a pop parked */
    const char *to[] = {"\"partition\":\"p2\",", ""};
    for (int i = 0; i < 2; i++) {
        t0 = itest_now_ms();
        itest_post(&n, &r, REQ,
                   "{\"queue\":\"parts\",%s\"payload\":1,\"timeout\":4000}",
                   to[i]);
        cr_assert_eq(r.status, 503, "%s: %ld %s", to[i], r.status, r.body);
        cr_assert_str_eq(itest_jstr(r.json, "code"), "no_responders");
        cr_assert(itest_now_ms() - t0 < 2000, "not at once");
        itest_resp_free(&r);
    }
    /* p1 has: the request is stored, the pop takes it, nobody replies */
    itest_post(&n, &r, REQ,
               "{\"queue\":\"parts\",\"partition\":\"p1\",\"payload\":1,"
               "\"timeout\":300}");
    cr_assert_eq(r.status, 504, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    pthread_join(t, NULL);
    itest_node_stop(&n, 10000);
}

Test(request, a_reply_with_a_failed_status_is_refused_and_changes_nothing,
     .timeout = 60)
{
    struct itest_node n;
    struct respawn_req q = {0};
    struct itest_resp r, a;
    pthread_t t;

    itest_node_start(&n, NULL);
    listen_once(&n, "fence");
    q.n = &n;
    cr_assert_eq(pthread_create(&t, NULL, stale_request, &q), 0);
    itest_get(&n, &r,
              "/api/v1/ephemeral/pop?queue=fence&wait=true&timeout=15000");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    const char *st[] = {"failed", "retry"};
    for (int i = 0; i < 2; i++) {
        itest_post(&n, &a, ACK,
                   "{\"queue\":\"fence\",\"acks\":[{\"id\":\"%s\","
                   "\"status\":\"%s\",\"reply\":\"no\"}]}",
                   itest_jstr(r.json, "messages.0.id"), st[i]);
        cr_assert_eq(a.status, 400, "%s: %ld %s", st[i], a.status, a.body);
        cr_assert_str_eq(itest_jstr(a.json, "code"), "ephemeral_bad_request");
        cr_assert_not_null(strstr(itest_jstr(a.json, "error"), "acks[0].reply"),
                           "%s", a.body);
        itest_resp_free(&a);
    }
    /* nothing changed: still leased, so not delivered again */
    itest_get(&n, &a, "/api/v1/ephemeral/pop?queue=fence&timeout=0");
    cr_assert_eq(itest_jlen(a.json, "messages"), 0, "%s", a.body);
    itest_resp_free(&a);
    /* and the same delivery still takes its reply */
    itest_post(&n, &a, ACK,
               "{\"queue\":\"fence\",\"acks\":[{\"id\":\"%s\","
               "\"reply\":\"yes\"}]}",
               itest_jstr(r.json, "messages.0.id"));
    cr_assert_eq(itest_jbool(a.json, "results.0.replied"), 1, "%s", a.body);
    itest_resp_free(&a);
    pthread_join(t, NULL);
    cr_assert_eq(q.r.status, 200, "%ld %s", q.r.status, q.r.body);
    cr_assert_str_eq(itest_jstr(q.r.json, "reply"), "yes", "%s", q.r.body);
    itest_resp_free(&q.r);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

/* request_504 - a request of queue with timeout ms nobody answers. */
static void
request_504(const struct itest_node *n, const char *queue, int timeout)
{
    struct itest_resp r;

    itest_post(n, &r, REQ, "{\"queue\":\"%s\",\"payload\":1,\"timeout\":%d}",
               queue, timeout);
    itest_assert_error(&r, 504, "request_timeout", NULL, "the request");
    itest_resp_free(&r);
}

/* SPEC §9 and §4: a request withdrawn unread is dropped there and then.
 * Two timed out requests filled a queue of maxLength 2: at once after the
 * 504s the queue's depth (its group's too), the listing, its bytes and
 * mayfly_messages show nothing of them, a push is taken without any pop,
 * and the group that was there pops only that push. */
Test(request, a_withdrawn_request_leaves_depth_and_bounds_at_once,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    double v = -1;

    itest_node_start(&n, NULL);
    itest_post(&n, &r, "/api/v1/ephemeral/configure",
               "{\"queue\":\"rpcz\",\"options\":{\"maxLength\":2}}");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    /* a responder that took what there was: it counts as listening, and
     * the bytes the queue and its partition take of their own are known */
    itest_push_ok(&n, &r, "rpcz", NULL, "[\"warm\"]", 1);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=rpcz&group=w&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_listing_int(&n, "rpcz", "depth", -1), 0);
    int64_t bytes = itest_listing_int(&n, "rpcz", "bytes", -1);
    cr_assert_gt(bytes, 0);
    request_504(&n, "rpcz", 200);
    request_504(&n, "rpcz", 200);
    itest_get(&n, &r, "/api/v1/ephemeral/queues/rpcz/depth?scope=node");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_eq(itest_jint(r.json, "pending"), 0, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "bytes"), bytes, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "groups.0.pending"), 0, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_listing_int(&n, "rpcz", "depth", -1), 0);
    cr_assert_eq(itest_listing_int(&n, "rpcz", "bytes", -1), bytes);
    cr_assert_eq(itest_metric(&n, "mayfly_messages", &v), 0);
    cr_assert_eq(v, 0, "mayfly_messages is %g", v);
    itest_push(&n, &r, "rpcz", NULL, "[\"real\"]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=rpcz&group=w&batch=10");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "real", "%s",
                     r.body);
    itest_resp_free(&r);
    wait_metric(&n, "mayfly_requests_total{result=\"timeout\"}", 2);
    itest_node_stop(&n, 10000);
}
