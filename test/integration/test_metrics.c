/*
 * test_metrics.c - SPEC §7 and the memory side of §4: `promtool check
 * metrics` accepts /metrics, the spec's series are there and move with the
 * node's state, one inbox per request adds no series, an idle implicit queue
 * is collected with the memory gauge back where it was, and an idle group is
 * forgotten and stops holding messages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

static char *
fetch_metrics(const struct itest_node *n)
{
    struct itest_resp r;
    char *text;

    itest_get(n, &r, "/metrics");
    cr_assert_eq(r.status, 200, "/metrics: %ld %s", r.status, r.body);
    text = strdup(r.body);
    cr_assert(text);
    itest_resp_free(&r);
    return text;
}

/* 1 if the exposition has a sample or a # TYPE line for name. */
static int
has_family(const char *text, const char *name)
{
    char type[256];
    double v;

    snprintf(type, sizeof(type), "# TYPE %s ", name);
    return itest_metrics_match(text, name, &v) > 0 || strstr(text, type);
}

static double
value(const struct itest_node *n, const char *series)
{
    double v = 0;

    cr_assert_eq(itest_metric(n, series, &v), 0, "no %s in /metrics", series);
    return v;
}

/* Poll until series reads want (gauges may be refreshed by the master). */
static void
wait_value(const struct itest_node *n, const char *series, double want)
{
    int64_t deadline = itest_now_ms() + 10000;
    double v = -1;

    while (itest_metric(n, series, &v) != 0 || v != want) {
        cr_assert(itest_now_ms() < deadline, "%s is %g, want %g", series, v,
                  want);
        itest_sleep_ms(50);
    }
}

/* Some traffic of every kind, so that labelled series exist. */
static void
traffic(const struct itest_node *n)
{
    struct itest_resp r;
    char body[512];

    itest_push(n, &r, "traffic", NULL, "[1,2,3]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    itest_get(n, &r, "/api/v1/ephemeral/pop?queue=traffic&group=g&batch=2");
    cr_assert_eq(itest_jlen(r.json, "messages"), 2, "%s", r.body);
    snprintf(body, sizeof(body),
             "{\"queue\":\"traffic\",\"group\":\"g\",\"acks\":[\"%s\","
             "{\"id\":\"%s\",\"status\":\"failed\"}]}",
             itest_jstr(r.json, "messages.0.id"),
             itest_jstr(r.json, "messages.1.id"));
    itest_resp_free(&r);
    itest_req(n, "POST", "/api/v1/ephemeral/ack", body, &r);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    /* a request nobody serves: the request series and histogram move */
    itest_post(n, &r, "/api/v1/ephemeral/request",
               "{\"queue\":\"nobody\",\"payload\":1}");
    cr_assert_eq(r.status, 503, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
}

Test(metrics, promtool_check_metrics_accepts_the_exposition, .timeout = 60)
{
    struct itest_node n;
    char *text, path[400], cmd[600], out[8192];
    FILE *f, *p;
    size_t k;
    int st;

    cr_assert_eq(system("command -v promtool >/dev/null 2>&1"), 0,
                 "promtool is not in PATH: install the Debian package "
                 "prometheus (ops/install-deps.sh test does)");
    itest_node_start(&n, NULL);
    traffic(&n);
    text = fetch_metrics(&n);
    snprintf(path, sizeof(path), "%s/metrics.txt", n.dir);
    f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
    p = popen(cmd, "r");
    cr_assert(p);
    k = fread(out, 1, sizeof(out) - 1, p);
    out[k] = '\0';
    st = pclose(p);
    cr_assert_eq(st, 0,
                 "promtool check metrics failed:\n%s\n--- exposition "
                 "(%s):\n%.4000s",
                 out, path, text);
    free(text);
}

Test(metrics, spec_series_are_present, .timeout = 60)
{
    static const char *names[] = {
        "mayfly_messages{state=\"pending\"}",
        "mayfly_messages{state=\"leased\"}",
        "mayfly_memory_used_bytes",
        "mayfly_memory_limit_bytes",
        "mayfly_push_total{result=\"accepted\"}",
        "mayfly_push_total{result=\"rejected_full\"}",
        "mayfly_push_total{result=\"rejected_too_large\"}",
        "mayfly_push_total{result=\"unavailable\"}",
        "mayfly_pop_total",
        "mayfly_ack_total",
        "mayfly_redelivery_total{reason=\"lease_expired\"}",
        "mayfly_redelivery_total{reason=\"failed\"}",
        "mayfly_redelivery_total{reason=\"handover\"}",
        "mayfly_dropped_total{reason=\"retry_limit\"}",
        "mayfly_dropped_total{reason=\"ttl\"}",
        "mayfly_dropped_total{reason=\"drop_oldest\"}",
        "mayfly_dropped_total{reason=\"deleted\"}",
        "mayfly_requests_total{result=\"replied\"}",
        "mayfly_requests_total{result=\"timeout\"}",
        "mayfly_requests_total{result=\"no_responders\"}",
        "mayfly_requests_total{result=\"withdrawn\"}",
        "mayfly_request_duration_seconds_count",
        "mayfly_request_duration_seconds_bucket{le=\"+Inf\"}",
        "mayfly_queues{kind=\"implicit\"}",
        "mayfly_queues{kind=\"declared\"}",
        "mayfly_parked_pops",
        "mayfly_oldest_message_age_seconds",
        "mayfly_worker_restarts_total",
    };
    static const char *families[] = {
        "mayfly_forward_total",     "mayfly_handover_total",
        "mayfly_wipes_total",       "mayfly_raft_term",
        "mayfly_raft_commit_index", "mayfly_raft_leader",
        "mayfly_members",
    };
    struct itest_node n;
    char *text, missing[2048] = "";
    size_t o = 0;

    itest_node_start(&n, NULL);
    traffic(&n);
    text = fetch_metrics(&n);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        double v;

        if (itest_metrics_match(text, names[i], &v) == 0)
            o += (size_t)snprintf(missing + o, sizeof(missing) - o, " %s",
                                  names[i]);
    }
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if (!has_family(text, families[i]))
            o += (size_t)snprintf(missing + o, sizeof(missing) - o, " %s",
                                  families[i]);
    cr_assert_eq(o, 0, "missing from /metrics:%s", missing);
    free(text);
}

Test(metrics, gauges_follow_messages_leases_parked_pops_and_the_cap,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    struct itest_multi *m = itest_multi_new();
    double accepted0, pops0;

    itest_node_start(&n, "max_bytes=64M");
    cr_assert_eq(value(&n, "mayfly_memory_limit_bytes"), 64.0 * 1024 * 1024);
    accepted0 = value(&n, "mayfly_push_total{result=\"accepted\"}");
    pops0 = value(&n, "mayfly_pop_total");
    itest_push(&n, &r, "g1", NULL, "[1,2,3]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=g1&group=g");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    itest_resp_free(&r);
    wait_value(&n, "mayfly_messages{state=\"pending\"}", 2);
    wait_value(&n, "mayfly_messages{state=\"leased\"}", 1);
    cr_assert(value(&n, "mayfly_push_total{result=\"accepted\"}") > accepted0);
    cr_assert(value(&n, "mayfly_pop_total") > pops0);
    cr_assert(value(&n, "mayfly_memory_used_bytes") > 0);
    wait_value(&n, "mayfly_queues{kind=\"implicit\"}", 1);
    itest_multi_add(m, &n, "GET",
                    "/api/v1/ephemeral/pop?queue=g2&wait=true&timeout=30000",
                    NULL);
    {
        int64_t deadline = itest_now_ms() + 20000;
        double v = 0;

        while (itest_multi_run(m, 20),
               itest_metric(&n, "mayfly_parked_pops", &v) != 0 || v != 1)
            cr_assert(itest_now_ms() < deadline, "mayfly_parked_pops is %g", v);
    }
    itest_push(&n, &r, "g2", NULL, "[1]");
    cr_assert_eq(r.status, 201);
    itest_resp_free(&r);
    cr_assert_eq(itest_multi_run(m, 10000), 0);
    wait_value(&n, "mayfly_parked_pops", 0);
    itest_multi_free(m);
}

Test(metrics, inbox_per_request_adds_no_series, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char *before, *after, q[64];
    int lines_before = 0, lines_after = 0;

    itest_node_start(&n, NULL);
    traffic(&n);
    before = fetch_metrics(&n);
    for (int i = 0; i < 50; i++) {
        snprintf(q, sizeof(q), "inbox-zz-%d", i);
        itest_push(&n, &r, q, NULL, "[{\"reply\":1}]");
        cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
        itest_resp_free(&r);
    }
    after = fetch_metrics(&n);
    cr_assert(!strstr(after, "inbox-zz-"),
              "an implicit queue got its own series");
    for (const char *p = before; (p = strchr(p, '\n')); p++)
        lines_before++;
    for (const char *p = after; (p = strchr(p, '\n')); p++)
        lines_after++;
    cr_assert_eq(lines_after, lines_before,
                 "50 implicit queues changed the number of lines of /metrics "
                 "from %d to %d",
                 lines_before, lines_after);
    free(before);
    free(after);
}

Test(collect, idle_implicit_queue_is_collected_and_memory_returns,
     .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r, r2;
    char last_id[256];
    double base, held;
    int64_t deadline;
    char payloads[8192];
    size_t o = 0;

    itest_node_start(&n, "implicit_idle_s=1");
    base = value(&n, "mayfly_memory_used_bytes");
    o += (size_t)snprintf(payloads, sizeof(payloads), "[");
    for (int i = 0; i < 10; i++)
        o += (size_t)snprintf(payloads + o, sizeof(payloads) - o,
                              "%s\"%0500d\"", i ? "," : "", i);
    snprintf(payloads + o, sizeof(payloads) - o, "]");
    itest_push(&n, &r, "tmp-q", NULL, payloads);
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    snprintf(last_id, sizeof(last_id), "%s", itest_jstr(r.json, "ids.9"));
    itest_resp_free(&r);
    held = value(&n, "mayfly_memory_used_bytes");
    cr_assert(held >= base + 5000,
              "10 messages of 500 bytes moved the gauge from %g to %g", base,
              held);
    itest_get(&n, &r,
              "/api/v1/ephemeral/pop?queue=tmp-q&batch=10&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 10, "%s", r.body);
    itest_resp_free(&r);
    deadline = itest_now_ms() + 30000;
    for (;;) {
        struct json_object *q = itest_listing_find(&n, "tmp-q");

        json_object_put(q);
        if (!q)
            break;
        cr_assert(itest_now_ms() < deadline,
                  "an empty implicit queue idle for 1 s is still listed "
                  "after 30 s");
        itest_sleep_ms(100);
    }
    itest_get(&n, &r, "/api/v1/ephemeral/queues/tmp-q/depth");
    itest_assert_error(&r, 404, "ephemeral_queue_not_found", NULL,
                       "depth of a collected queue");
    itest_resp_free(&r);
    wait_value(&n, "mayfly_memory_used_bytes", base);
    wait_value(&n, "mayfly_queues{kind=\"implicit\"}", 0);
    /* Created again, the queue does not reuse an id of its first life. */
    itest_push(&n, &r, "tmp-q", NULL, "[1]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    cr_assert_str_neq(itest_jstr(r.json, "ids.0"), last_id,
                      "an id came back after the queue was collected");
    itest_get(&n, &r2, "/api/v1/ephemeral/pop?queue=tmp-q&autoAck=true");
    cr_assert_str_eq(itest_jstr(r2.json, "messages.0.id"),
                     itest_jstr(r.json, "ids.0"), "%s", r2.body);
    itest_resp_free(&r2);
    itest_resp_free(&r);
}

Test(collect, idle_group_is_forgotten_and_stops_holding, .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    struct json_object *q;
    int64_t deadline;
    int groups = -1;
    int64_t held;
    char ack[512];

    itest_node_start(&n, "implicit_idle_s=1");
    itest_push(&n, &r, "gq", NULL, "[\"m1\"]");
    itest_resp_free(&r);
    /* a leases m1 so that b, coming second, still finds it: both known. */
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=gq&group=a");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    snprintf(ack, sizeof(ack),
             "{\"queue\":\"gq\",\"group\":\"a\",\"acks\":[\"%s\"]}",
             itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=gq&group=b&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    itest_resp_free(&r);
    itest_req(&n, "POST", "/api/v1/ephemeral/ack", ack, &r);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    itest_resp_free(&r);
    itest_push(&n, &r, "gq", NULL, "[\"m2\"]");
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/pop?queue=gq&group=a&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    itest_resp_free(&r);
    q = itest_listing_find(&n, "gq");
    cr_assert(q);
    cr_assert_eq(itest_jint(q, "groups"), 2, "%s",
                 json_object_to_json_string(q));
    held = itest_jint(q, "bytes");
    json_object_put(q);
    /* Group a keeps polling; group b stays idle and is forgotten. */
    deadline = itest_now_ms() + 30000;
    for (;;) {
        itest_get(&n, &r,
                  "/api/v1/ephemeral/pop?queue=gq&group=a&autoAck=true");
        cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
        itest_resp_free(&r);
        q = itest_listing_find(&n, "gq");
        cr_assert(q, "the polled queue was collected");
        groups = (int)itest_jint(q, "groups");
        if (groups == 1 && itest_jint(q, "bytes") < held) {
            json_object_put(q);
            break;
        }
        cr_assert(itest_now_ms() < deadline,
                  "30 s on, the idle group still holds: %s",
                  json_object_to_json_string(q));
        json_object_put(q);
        itest_sleep_ms(200);
    }
}
