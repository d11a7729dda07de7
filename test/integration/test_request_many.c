/*
 * test_request_many.c - SPEC §13's request-many on one node: a request
 * with "gather" reaches every group of its queue and answers
 * {"replies", "id", "ms"} once max replies came, quietMs after the last
 * one, or at its timeout with what came (200); nobody listening is 503
 * no_responders, as for one reply; a bad gather is a 400 naming it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"

#define REQ "/api/v1/ephemeral/request"
#define ACK "/api/v1/ephemeral/ack"

struct group {
    const struct itest_node *n;
    char name[16];
    int answer; /* 0: reads and never replies */
    atomic_int stop;
};

/* responder - group g long-polls svc and replies to each request with its
 * name, until told to stop. */
static void *
responder(void *arg)
{
    struct group *g = arg;
    CURL *h = itest_handle();
    char path[256], body[1024];

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=svc&group=%s&wait=true&timeout=200",
             g->name);
    while (!atomic_load(&g->stop)) {
        struct itest_resp r, a;

        itest_req_on(h, g->n, "GET", path, NULL, &r);
        if (itest_jlen(r.json, "messages") > 0 && g->answer) {
            snprintf(body, sizeof(body),
                     "{\"queue\":\"svc\",\"group\":\"%s\",\"acks\":[{\"id\":"
                     "\"%s\",\"reply\":{\"from\":\"%s\"}}]}",
                     g->name, itest_jstr(r.json, "messages.0.id"), g->name);
            itest_req_on(h, g->n, "POST", ACK, body, &a);
            itest_resp_free(&a);
        }
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* groups_up - start k responder groups (answer[i]: whether group i
 * replies) and wait until the queue shows them parked. */
static void
groups_up(const struct itest_node *n, struct group *g, pthread_t *t, int k,
          const int *answer)
{
    for (int i = 0; i < k; i++) {
        g[i].n = n;
        snprintf(g[i].name, sizeof(g[i].name), "g%d", i);
        g[i].answer = answer[i];
        atomic_store(&g[i].stop, 0);
        cr_assert_eq(pthread_create(&t[i], NULL, responder, &g[i]), 0);
    }
    int64_t deadline = itest_now_ms() + 10000;
    while (itest_listing_int(n, "svc", "groups", -1) < k) {
        cr_assert_lt(itest_now_ms(), deadline, "the groups never showed");
        itest_sleep_ms(20);
    }
}

static void
groups_down(struct group *g, pthread_t *t, int k)
{
    for (int i = 0; i < k; i++)
        atomic_store(&g[i].stop, 1);
    for (int i = 0; i < k; i++)
        pthread_join(t[i], NULL);
}

/* has_from - whether replies holds one from group name. */
static int
has_from(struct json_object *o, const char *name)
{
    for (int i = 0; i < itest_jlen(o, "replies"); i++) {
        char path[64];
        snprintf(path, sizeof(path), "replies.%d.from", i);
        if (strcmp(itest_jstr(o, path), name) == 0)
            return 1;
    }
    return 0;
}

Test(request_many, three_groups_three_replies, .timeout = 60)
{
    struct itest_node n;
    struct group g[3];
    pthread_t t[3];
    struct itest_resp r;
    const int answer[3] = {1, 1, 1};

    itest_node_start(&n, NULL);
    groups_up(&n, g, t, 3, answer);
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, REQ,
               "{\"queue\":\"svc\",\"payload\":{\"q\":1},\"timeout\":20000,"
               "\"gather\":{\"max\":3}}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "replies"), 3, "%s", r.body);
    for (int i = 0; i < 3; i++)
        cr_assert(has_from(r.json, g[i].name), "%s: %s", g[i].name, r.body);
    cr_assert(itest_jstr(r.json, "id") != NULL, "%s", r.body);
    cr_assert(itest_jint(r.json, "ms") >= 0, "%s", r.body);
    /* max came: it did not wait out its timeout */
    cr_assert_lt(itest_now_ms() - t0, 10000);
    itest_resp_free(&r);

    /* max 2 of 3: answered at two. */
    itest_post(&n, &r, REQ,
               "{\"queue\":\"svc\",\"payload\":2,\"timeout\":20000,"
               "\"gather\":{\"max\":2}}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "replies"), 2, "%s", r.body);
    itest_resp_free(&r);
    groups_down(g, t, 3);
    itest_node_stop(&n, 10000);
}

Test(request_many, quiet_ms_and_the_timeout_answer_with_what_came,
     .timeout = 60)
{
    struct itest_node n;
    struct group g[3];
    pthread_t t[3];
    struct itest_resp r;
    const int answer[3] = {1, 1, 0}; /* g2 reads and never replies */

    itest_node_start(&n, NULL);
    groups_up(&n, g, t, 3, answer);
    int64_t t0 = itest_now_ms();
    itest_post(&n, &r, REQ,
               "{\"queue\":\"svc\",\"payload\":1,\"timeout\":30000,"
               "\"gather\":{\"max\":3,\"quietMs\":500}}");
    int64_t took = itest_now_ms() - t0;
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "replies"), 2, "%s", r.body);
    cr_assert(has_from(r.json, "g0") && has_from(r.json, "g1"), "%s", r.body);
    /* quietMs after the last reply, long before the timeout */
    cr_assert_geq(took, 500, "%lld ms", (long long)took);
    cr_assert_lt(took, 20000, "%lld ms", (long long)took);
    itest_resp_free(&r);

    /* No quietMs: the timeout ends it, 200 with what came. */
    t0 = itest_now_ms();
    itest_post(&n, &r, REQ,
               "{\"queue\":\"svc\",\"payload\":1,\"timeout\":1500,"
               "\"gather\":{\"max\":3}}");
    took = itest_now_ms() - t0;
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "replies"), 2, "%s", r.body);
    cr_assert_geq(took, 1400, "%lld ms", (long long)took);
    itest_resp_free(&r);
    groups_down(g, t, 3);
    itest_node_stop(&n, 10000);
}

Test(request_many, no_responders_and_bad_gathers, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    static const char *const bad[] = {"{\"max\":0}",
                                      "{\"max\":10001}",
                                      "{}",
                                      "{\"max\":2,\"size\":1}",
                                      "{\"max\":\"2\"}",
                                      "3",
                                      "{\"max\":2,\"quietMs\":-1}"};

    itest_node_start(&n, NULL);
    itest_post(&n, &r, REQ,
               "{\"queue\":\"nobody\",\"payload\":1,\"gather\":{\"max\":3}}");
    cr_assert_eq(r.status, 503, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "code"), "no_responders");
    itest_resp_free(&r);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        itest_post(&n, &r, REQ,
                   "{\"queue\":\"svc\",\"payload\":1,\"gather\":%s}", bad[i]);
        cr_assert_eq(r.status, 400, "%s: %ld %s", bad[i], r.status, r.body);
        cr_assert(strstr(itest_jstr(r.json, "error"), "gather") != NULL,
                  "%s: %s", bad[i], r.body);
        itest_resp_free(&r);
    }
    itest_node_stop(&n, 10000);
}
