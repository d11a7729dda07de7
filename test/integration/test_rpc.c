/*
 * test_rpc.c - request/reply as reference/queen-ephemeral-queues.md shows
 * it: responders in one group long-poll a requests queue and push each
 * answer into the inbox the request names; each requester mints its own
 * inbox per request, pushes, and parks on the inbox with a 5 s timeout and
 * autoAck.  Many requesters at once; every reply must come within the
 * timeout, and the inboxes are collected afterwards (implicit_idle_s=1).
 *
 * Threads never call cr_assert (it cannot unwind another thread): they count
 * what went wrong and the main thread asserts.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define REQUESTERS 50
#define PER_REQ    10
#define RESPONDERS 4

struct rpc {
    const struct itest_node *n;
    atomic_int stop;
    atomic_int replies;
    atomic_int errors;
    atomic_int served;
    atomic_long worst_ms;
    char first_error[512];
    pthread_mutex_t lock;
};

struct requester {
    struct rpc *rpc;
    int id;
};

static void
rpc_error(struct rpc *rpc, const char *what, const struct itest_resp *r)
{
    atomic_fetch_add(&rpc->errors, 1);
    pthread_mutex_lock(&rpc->lock);
    if (!rpc->first_error[0])
        snprintf(rpc->first_error, sizeof(rpc->first_error),
                 "%s: status %ld curl %d: %.300s", what, r->status,
                 r->curl_code, r->body ? r->body : "");
    pthread_mutex_unlock(&rpc->lock);
}

/* Serve requests until told to stop: pop, reply to each, ack the batch. */
static void *
responder(void *arg)
{
    struct rpc *rpc = arg;
    CURL *h = itest_handle();

    while (!atomic_load(&rpc->stop)) {
        struct itest_resp r, a;
        struct json_object *msgs;
        int k;

        itest_req_on(h, rpc->n, "GET",
                     "/api/v1/ephemeral/pop?queue=rpc-requests&group=workers"
                     "&batch=10&wait=true&timeout=500",
                     NULL, &r);
        k = itest_jlen(r.json, "messages");
        if (r.status != 200 || k < 0) {
            rpc_error(rpc, "responder pop", &r);
            itest_resp_free(&r);
            continue;
        }
        msgs = itest_jget(r.json, "messages");
        for (int i = 0; i < k; i++) {
            struct json_object *m = json_object_array_get_idx(msgs, (size_t)i);
            int64_t x = itest_jint(m, "payload.n");
            char body[512];
            struct itest_resp p;

            snprintf(body, sizeof(body),
                     "{\"queue\":\"%s\",\"messages\":[{\"payload\":"
                     "{\"squared\":%lld}}]}",
                     itest_jstr(m, "payload.replyTo"), (long long)(x * x));
            itest_req_on(h, rpc->n, "POST", "/api/v1/ephemeral/push", body, &p);
            if (p.status != 201)
                rpc_error(rpc, "reply push", &p);
            itest_resp_free(&p);
        }
        if (k > 0) {
            char *body = NULL;

            if (asprintf(&body,
                         "{\"queue\":\"rpc-requests\",\"group\":"
                         "\"workers\",\"messages\":%s}",
                         json_object_to_json_string_ext(
                             msgs, JSON_C_TO_STRING_PLAIN)) < 0)
                abort();
            itest_req_on(h, rpc->n, "POST", "/api/v1/ephemeral/ack", body, &a);
            if (a.status != 200 || itest_jlen(a.json, "results") != k)
                rpc_error(rpc, "responder ack", &a);
            itest_resp_free(&a);
            free(body);
            atomic_fetch_add(&rpc->served, k);
        }
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* Make PER_REQ calls, each with a fresh inbox. */
static void *
requester(void *arg)
{
    struct requester *q = arg;
    struct rpc *rpc = q->rpc;
    CURL *h = itest_handle();

    for (int k = 0; k < PER_REQ; k++) {
        struct itest_resp r;
        char inbox[128], body[512], path[512];
        int n = q->id * 100 + k;
        int64_t t0 = itest_now_ms(), ms;

        snprintf(inbox, sizeof(inbox), "rpc-inbox-%d-%d-%lld", q->id, k,
                 (long long)t0);
        snprintf(body, sizeof(body),
                 "{\"queue\":\"rpc-requests\",\"messages\":[{\"payload\":"
                 "{\"n\":%d,\"replyTo\":\"%s\"}}]}",
                 n, inbox);
        itest_req_on(h, rpc->n, "POST", "/api/v1/ephemeral/push", body, &r);
        if (r.status != 201) {
            rpc_error(rpc, "request push", &r);
            itest_resp_free(&r);
            continue;
        }
        itest_resp_free(&r);
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=%s&wait=true&timeout=5000"
                 "&autoAck=true",
                 inbox);
        itest_req_on(h, rpc->n, "GET", path, NULL, &r);
        ms = itest_now_ms() - t0;
        if (r.status != 200 || itest_jlen(r.json, "messages") != 1 ||
            itest_jint(r.json, "messages.0.payload.squared") !=
                (int64_t)n * n) {
            rpc_error(rpc, "no reply within 5 s, or a wrong one", &r);
        } else {
            atomic_fetch_add(&rpc->replies, 1);
            if (ms > atomic_load(&rpc->worst_ms))
                atomic_store(&rpc->worst_ms, ms);
        }
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

Test(rpc, many_requesters_each_get_their_reply_within_the_timeout,
     .timeout = 180)
{
    /* Static: threads may outlive a failed assertion of this function. */
    static struct itest_node n;
    static struct rpc rpc = {.n = &n, .lock = PTHREAD_MUTEX_INITIALIZER};
    static struct requester q[REQUESTERS];
    pthread_t resp[RESPONDERS], req[REQUESTERS];
    struct itest_resp r;
    int64_t deadline;

    itest_raise_nofile(4096);
    itest_node_start(&n, "implicit_idle_s=1");
    for (int i = 0; i < RESPONDERS; i++)
        cr_assert_eq(pthread_create(&resp[i], NULL, responder, &rpc), 0);
    for (int i = 0; i < REQUESTERS; i++) {
        q[i] = (struct requester){&rpc, i};
        cr_assert_eq(pthread_create(&req[i], NULL, requester, &q[i]), 0);
    }
    for (int i = 0; i < REQUESTERS; i++)
        pthread_join(req[i], NULL);
    atomic_store(&rpc.stop, 1);
    for (int i = 0; i < RESPONDERS; i++)
        pthread_join(resp[i], NULL);
    cr_assert_eq(atomic_load(&rpc.errors), 0, "%d errors; first: %s",
                 atomic_load(&rpc.errors), rpc.first_error);
    cr_assert_eq(atomic_load(&rpc.replies), REQUESTERS * PER_REQ);
    cr_assert_eq(atomic_load(&rpc.served), REQUESTERS * PER_REQ,
                 "requests served more than once: %d",
                 atomic_load(&rpc.served));
    cr_log_info("rpc: %d calls, slowest %ld ms", REQUESTERS * PER_REQ,
                atomic_load(&rpc.worst_ms));
    /* One inbox per request leaves nothing behind. */
    deadline = itest_now_ms() + 30000;
    for (;;) {
        int64_t left;

        itest_get(&n, &r, "/api/v1/ephemeral/queues?prefix=rpc-inbox-");
        cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
        left = itest_jlen(r.json, "queues");
        itest_resp_free(&r);
        if (left == 0)
            break;
        cr_assert(itest_now_ms() < deadline,
                  "%lld inboxes still listed 30 s after the last call",
                  (long long)left);
        itest_sleep_ms(100);
    }
    cr_assert_eq(itest_depth_pending(&n, "rpc-requests", "workers") <= 0, 1,
                 "requests left unserved");
}
