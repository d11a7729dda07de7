/*
 * test_order.c - order within a partition (SPEC §3): 10,000 messages pushed
 * into one partition by four concurrent keep-alive connections, two held by
 * each worker process, come out of one group in push order: each
 * connection's messages in the order it pushed them, each with the id its
 * push answered, none lost or repeated.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define PUSHERS 4
#define PER     2500
#define BATCH   25

struct pusher {
    const struct itest_node *n;
    CURL *h;
    pid_t worker;    /* the worker holding h's connection */
    int t;           /* payload {"t": t, "i": i} */
    char (*ids)[64]; /* ids[i]: the id the push answered for i */
    int errors;
    int fresh_connections; /* pushes that did not reuse the connection */
    char error[512];
};

static void *
push_all(void *arg)
{
    struct pusher *p = arg;

    for (int i = 0; i < PER && !p->errors; i += BATCH) {
        char body[BATCH * 40 + 128];
        size_t o = 0;
        struct itest_resp r;
        long connects = 0;

        o += (size_t)snprintf(body, sizeof(body),
                              "{\"queue\":\"ord\",\"partition\":\"one\","
                              "\"messages\":[");
        for (int j = 0; j < BATCH; j++)
            o += (size_t)snprintf(body + o, sizeof(body) - o,
                                  "%s{\"payload\":{\"t\":%d,\"i\":%d}}",
                                  j ? "," : "", p->t, i + j);
        snprintf(body + o, sizeof(body) - o, "]}");
        itest_req_on(p->h, p->n, "POST", "/api/v1/ephemeral/push", body, &r);
        curl_easy_getinfo(p->h, CURLINFO_NUM_CONNECTS, &connects);
        p->fresh_connections += connects > 0;
        if (r.status != 201 || itest_jlen(r.json, "ids") != BATCH) {
            p->errors++;
            snprintf(p->error, sizeof(p->error), "push: %ld %.300s", r.status,
                     r.body);
        } else {
            for (int j = 0; j < BATCH; j++) {
                char key[32];

                snprintf(key, sizeof(key), "ids.%d", j);
                snprintf(p->ids[i + j], sizeof(p->ids[i + j]), "%s",
                         itest_jstr(r.json, key));
            }
        }
        itest_resp_free(&r);
    }
    return NULL;
}

Test(order, ten_thousand_messages_through_two_workers_pop_in_push_order,
     .timeout = 180)
{
    /* Static: threads may outlive a failed assertion of this function. */
    static struct itest_node n;
    static struct pusher p[PUSHERS];
    pthread_t th[PUSHERS];
    pid_t w[ITEST_NODE_MAX_WORKERS];
    int next[PUSHERS] = {0}, total = 0, fresh = 0;

    itest_node_start(&n, "workers=2");
    cr_assert_eq(itest_node_workers(&n, w, ITEST_NODE_MAX_WORKERS), 2);
    for (int t = 0; t < PUSHERS; t++) {
        p[t] = (struct pusher){.n = &n, .t = t};
        p[t].h = itest_handle_on_worker(&n, w[t % 2], &p[t].worker);
        p[t].ids = calloc(PER, sizeof(*p[t].ids));
        cr_assert(p[t].ids);
    }
    for (int t = 0; t < PUSHERS; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, push_all, &p[t]), 0);
    for (int t = 0; t < PUSHERS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < PUSHERS; t++) {
        cr_assert_eq(p[t].errors, 0, "pusher %d: %s", t, p[t].error);
        fresh += p[t].fresh_connections;
    }
    cr_assert(fresh < PUSHERS * PER / BATCH / 2,
              "%d of %d pushes needed a new connection: the pushes did not "
              "stay on the connections pinned to each worker",
              fresh, PUSHERS * PER / BATCH);
    while (total < PUSHERS * PER) {
        struct itest_resp r;
        int k;

        itest_get(&n, &r,
                  "/api/v1/ephemeral/pop?queue=ord&partition=one&group=r"
                  "&batch=1000&autoAck=true");
        cr_assert_eq(r.status, 200, "%ld %.300s", r.status, r.body);
        k = itest_jlen(r.json, "messages");
        cr_assert(k > 0, "only %d of %d messages came out", total,
                  PUSHERS * PER);
        for (int j = 0; j < k; j++) {
            struct json_object *m = json_object_array_get_idx(
                itest_jget(r.json, "messages"), (size_t)j);
            int64_t t = itest_jint(m, "payload.t");
            int64_t i = itest_jint(m, "payload.i");

            cr_assert(t >= 0 && t < PUSHERS, "%s",
                      json_object_to_json_string(m));
            cr_assert_eq(i, next[t],
                         "pusher %lld: message %lld came out where %d was due "
                         "(message %d overall)",
                         (long long)t, (long long)i, next[t], total + j);
            cr_assert_str_eq(itest_jstr(m, "id"), p[t].ids[i],
                             "the popped id is not the one the push answered");
            cr_assert_eq(itest_jint(m, "attempts"), 1);
            next[t]++;
        }
        total += k;
        itest_resp_free(&r);
    }
    cr_assert_eq(total, PUSHERS * PER);
    for (int t = 0; t < PUSHERS; t++) {
        curl_easy_cleanup(p[t].h);
        free(p[t].ids);
    }
}
