/*
 * test_delivery.c - SPEC §3 on one node: leases and their expiry, failed and
 * retry acks, the retry limit, autoAck, fencing of stale acks, from=
 * all|new|last, fan-out groups vs competing consumers vs queue mode, extend.
 * Nodes run with lease_s=1 where a lease must run out within the test.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/drain.h"
#include "test/integration/node.h"

#define POP "/api/v1/ephemeral/pop"
#define ACK "/api/v1/ephemeral/ack"
#define EXT "/api/v1/ephemeral/extend"

static void
push_ok(const struct itest_node *n, const char *queue, const char *payloads)
{
    struct itest_resp r;

    itest_push(n, &r, queue, NULL, payloads);
    cr_assert_eq(r.status, 201, "push %s: %ld %s", payloads, r.status, r.body);
    itest_resp_free(&r);
}

/* Ack one entry (JSON text) for queue q, group g; returns the outcome. */
static const char *
ack1(const struct itest_node *n, struct itest_resp *r, const char *q,
     const char *g, const char *entry)
{
    itest_post(n, r, ACK, "{\"queue\":\"%s\",\"group\":\"%s\",\"acks\":[%s]}",
               q, g, entry);
    cr_assert_eq(r->status, 200, "ack %s: %ld %s", entry, r->status, r->body);
    cr_assert_eq(itest_jlen(r->json, "results"), 1, "%s", r->body);
    return itest_jstr(r->json, "results.0.outcome");
}

static int64_t
leased(const struct itest_node *n, const char *queue)
{
    return itest_listing_int(n, queue, "leased", -1);
}

/* A metric's value, 0 when the series has not been written yet. */
static double
metric(const struct itest_node *n, const char *series)
{
    double v = 0;

    return itest_metric(n, series, &v) == 0 ? v : 0;
}

Test(lease, expiry_redelivers_the_same_id_with_attempts_plus_one, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256], e[512];
    int64_t t0;

    itest_node_start(&n, "lease_s=1");
    push_ok(&n, "lq", "[\"m\"]");
    t0 = itest_now_ms();
    cr_assert_eq(itest_pop(&n, &r, "queue=lq&group=g"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1, "%s", r.body);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=lq&group=g"), 0,
                 "a leased message was delivered twice at once: %s", r.body);
    itest_resp_free(&r);
    itest_pop_until_one(&n, &r, "queue=lq&group=g", 15000);
    cr_assert(itest_now_ms() - t0 >= 900,
              "redelivered %lld ms after the pop, before the 1 s lease ran out",
              (long long)(itest_now_ms() - t0));
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.id"), id, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 2, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "m", "%s",
                     r.body);
    itest_resp_free(&r);
    snprintf(e, sizeof(e), "{\"id\":\"%s\",\"attempts\":2}", id);
    cr_assert_str_eq(ack1(&n, &r, "lq", "g", e), "acked", "%s", r.body);
    itest_resp_free(&r);
}

Test(ack, failed_and_retry_redeliver_before_newer_messages, .timeout = 60)
{
    static const char *status[] = {"failed", "retry", "no-such-status"};
    struct itest_node n;
    struct itest_resp r;
    char id[256], e[512];

    itest_node_start(&n, NULL);
    push_ok(&n, "fq", "[\"m1\",\"m2\"]");
    cr_assert_eq(itest_pop(&n, &r, "queue=fq&group=g"), 1);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        snprintf(e, sizeof(e), "{\"id\":\"%s\",\"status\":\"%s\"}", id,
                 status[i]);
        cr_assert_str_eq(ack1(&n, &r, "fq", "g", e), "redelivered",
                         "status %s: %s", status[i], r.body);
        cr_assert_eq(itest_jget(r.json, "results.0.dropped") == NULL ||
                         itest_jbool(r.json, "results.0.dropped") == 0,
                     1, "%s", r.body);
        itest_resp_free(&r);
        cr_assert_eq(itest_pop(&n, &r, "queue=fq&group=g"), 1);
        cr_assert_str_eq(itest_jstr(r.json, "messages.0.id"), id,
                         "after %s the newer message came first: %s", status[i],
                         r.body);
        cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), i + 2, "%s",
                     r.body);
        itest_resp_free(&r);
    }
    snprintf(e, sizeof(e), "\"%s\"", id);
    cr_assert_str_eq(ack1(&n, &r, "fq", "g", e), "acked", "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=fq&group=g"), 1);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "m2", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1, "%s", r.body);
    itest_resp_free(&r);
}

Test(retry_limit, failed_ack_at_the_limit_drops_and_counts, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256], e[512];
    double before, after;
    struct json_object *q;
    int64_t deadline;

    itest_node_start(&n, "retry_limit=2");
    before = metric(&n, "mayfly_dropped_total{reason=\"retry_limit\"}");
    push_ok(&n, "rl", "[\"doomed\",\"next\"]");
    cr_assert_eq(itest_pop(&n, &r, "queue=rl&group=g"), 1);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    snprintf(e, sizeof(e), "{\"id\":\"%s\",\"status\":\"failed\"}", id);
    cr_assert_str_eq(ack1(&n, &r, "rl", "g", e), "redelivered", "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=rl&group=g"), 1);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 2, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_str_eq(ack1(&n, &r, "rl", "g", e), "acked",
                     "a failed ack at the limit: %s", r.body);
    cr_assert_eq(itest_jbool(r.json, "results.0.dropped"), 1, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=rl&group=g&batch=10"), 1);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "next",
                     "the dropped message came back: %s", r.body);
    itest_resp_free(&r);
    deadline = itest_now_ms() + 10000;
    while (
        (after = metric(&n, "mayfly_dropped_total{reason=\"retry_limit\"}")) <
        before + 1) {
        cr_assert(itest_now_ms() < deadline,
                  "mayfly_dropped_total{reason=\"retry_limit\"} %g -> %g",
                  before, after);
        itest_sleep_ms(50);
    }
    cr_assert_eq(after, before + 1);
    q = itest_listing_find(&n, "rl");
    cr_assert(q, "queue rl is not listed");
    cr_assert_eq(itest_jint(q, "drops.retry"), 1, "%s",
                 json_object_to_json_string(q));
    json_object_put(q);
}

Test(retry_limit, lease_expiry_at_the_limit_drops_and_counts, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    double before, after;
    int64_t deadline;

    itest_node_start(&n, "lease_s=1 retry_limit=2");
    before = metric(&n, "mayfly_dropped_total{reason=\"retry_limit\"}");
    push_ok(&n, "rle", "[\"doomed\"]");
    cr_assert_eq(itest_pop(&n, &r, "queue=rle&group=g"), 1);
    itest_resp_free(&r);
    itest_pop_until_one(&n, &r, "queue=rle&group=g", 15000);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 2, "%s", r.body);
    itest_resp_free(&r);
    deadline = itest_now_ms() + 15000;
    while (
        (after = metric(&n, "mayfly_dropped_total{reason=\"retry_limit\"}")) <
        before + 1) {
        cr_assert_eq(itest_pop(&n, &r, "queue=rle&group=g"), 0,
                     "delivered past the retry limit: %s", r.body);
        itest_resp_free(&r);
        cr_assert(itest_now_ms() < deadline,
                  "the second lease ran out but nothing was dropped");
        itest_sleep_ms(50);
    }
    cr_assert_eq(itest_pop(&n, &r, "queue=rle&group=g"), 0, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(leased(&n, "rle") <= 0, 1);
}

Test(autoack, pop_leases_nothing_and_ack_after_is_unknown, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char e[512];

    itest_node_start(&n, "lease_s=1");
    push_ok(&n, "aa", "[\"m1\",\"m2\",\"m3\"]");
    cr_assert_eq(itest_pop(&n, &r, "queue=aa&group=g&autoAck=true"), 1);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1, "%s", r.body);
    snprintf(e, sizeof(e), "\"%s\"", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    cr_assert_eq(leased(&n, "aa"), 0, "autoAck leased the message");
    cr_assert_str_eq(ack1(&n, &r, "aa", "g", e), "unknown", "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=aa&group=g&commitOnDelivery=true"),
                 1);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "m2", "%s",
                     r.body);
    itest_resp_free(&r);
    cr_assert_eq(leased(&n, "aa"), 0, "commitOnDelivery leased the message");
    cr_assert_eq(itest_depth_pending(&n, "aa", "g"), 1);
    cr_assert_eq(itest_pop(&n, &r, "queue=aa&group=g&autoAck=true&batch=5"), 1);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "m3", "%s",
                     r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_pop(&n, &r, "queue=aa&group=g&batch=5"), 0, "%s",
                 r.body);
    itest_resp_free(&r);
}

Test(fencing, stale_ack_leaves_the_newer_delivery_alone, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256], first[1024], e[512];

    itest_node_start(&n, "lease_s=1");
    push_ok(&n, "fence", "[{\"k\":1}]");
    cr_assert_eq(itest_pop(&n, &r, "queue=fence&group=g"), 1);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    snprintf(first, sizeof(first), "%s",
             json_object_to_json_string_ext(itest_jget(r.json, "messages.0"),
                                            JSON_C_TO_STRING_PLAIN));
    itest_resp_free(&r);
    itest_pop_until_one(&n, &r, "queue=fence&group=g", 15000);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 2, "%s", r.body);
    itest_resp_free(&r);
    /* Keep the second delivery leased for the rest of the test. */
    itest_post(&n, &r, EXT,
               "{\"queue\":\"fence\",\"group\":\"g\",\"messages\":[{\"id\":"
               "\"%s\",\"attempts\":2,\"seconds\":120}]}",
               id);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "extended", "%s",
                     r.body);
    itest_resp_free(&r);
    cr_assert_str_eq(ack1(&n, &r, "fence", "g", first), "stale",
                     "the first delivery sent back as popped: %s", r.body);
    itest_resp_free(&r);
    snprintf(e, sizeof(e),
             "{\"id\":\"%s\",\"attempts\":1,\"status\":\"failed\"}", id);
    cr_assert_str_eq(ack1(&n, &r, "fence", "g", e), "stale", "%s", r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, EXT,
               "{\"queue\":\"fence\",\"group\":\"g\",\"messages\":[{\"id\":"
               "\"%s\",\"attempts\":1,\"seconds\":1}]}",
               id);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "stale", "%s",
                     r.body);
    itest_resp_free(&r);
    cr_assert_eq(leased(&n, "fence"), 1, "a stale ack touched the delivery");
    cr_assert_eq(itest_pop(&n, &r, "queue=fence&group=g"), 0,
                 "a stale ack released the delivery: %s", r.body);
    itest_resp_free(&r);
    snprintf(e, sizeof(e), "{\"id\":\"%s\",\"attempts\":2}", id);
    cr_assert_str_eq(ack1(&n, &r, "fence", "g", e), "acked", "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(leased(&n, "fence"), 0);
}

Test(fencing, id_of_another_incarnation_is_stale, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256], inc[64], part[64], seq[64], other[512];

    itest_node_start(&n, NULL);
    push_ok(&n, "inc", "[1]");
    cr_assert_eq(itest_pop(&n, &r, "queue=inc&group=g"), 1);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    cr_assert_eq(itest_id_parse(id, inc, sizeof(inc), part, sizeof(part), seq,
                                sizeof(seq)),
                 0, "%s", id);
    inc[0] = inc[0] == '1' ? '2' : '1';
    snprintf(other, sizeof(other), "\"e:%s:%s:%s\"", inc, part, seq);
    cr_assert_str_eq(ack1(&n, &r, "inc", "g", other), "stale", "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(leased(&n, "inc"), 1, "another incarnation's id acked ours");
    snprintf(other, sizeof(other), "\"%s\"", id);
    cr_assert_str_eq(ack1(&n, &r, "inc", "g", other), "acked", "%s", r.body);
    itest_resp_free(&r);
}

/* Pop for a group with from=f and autoAck; the payloads joined by ','. */
static void
pop_payloads(const struct itest_node *n, const char *group, const char *from,
             char *out, size_t len)
{
    struct itest_resp r;
    char q[256];
    int k;
    size_t o = 0;

    snprintf(q, sizeof(q), "queue=from&group=%s&batch=100&autoAck=true%s%s",
             group, from ? "&from=" : "", from ? from : "");
    k = itest_pop(n, &r, q);
    out[0] = '\0';
    for (int i = 0; i < k; i++) {
        char key[64];

        snprintf(key, sizeof(key), "messages.%d.payload", i);
        o += (size_t)snprintf(out + o, len - o, "%s%s", i ? "," : "",
                              itest_jstr(r.json, key));
    }
    itest_resp_free(&r);
}

Test(from, all_new_and_last_pick_where_a_new_group_starts, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char got[256];

    itest_node_start(&n, NULL);
    push_ok(&n, "from", "[\"m1\",\"m2\",\"m3\"]");
    /* A group that leases m1 and reads no further keeps m1-m4 held. */
    cr_assert_eq(itest_pop(&n, &r, "queue=from&group=holder"), 1);
    itest_resp_free(&r);
    pop_payloads(&n, "last", "last", got, sizeof(got));
    cr_assert_str_eq(got, "m3", "from=last");
    pop_payloads(&n, "new", "new", got, sizeof(got));
    cr_assert_str_eq(got, "", "from=new");
    pop_payloads(&n, "all", "all", got, sizeof(got));
    cr_assert_str_eq(got, "m1,m2,m3", "from=all");
    push_ok(&n, "from", "[\"m4\"]");
    pop_payloads(&n, "new", "new", got, sizeof(got));
    cr_assert_str_eq(got, "m4", "from=new after a push");
    pop_payloads(&n, "last", "last", got, sizeof(got));
    cr_assert_str_eq(got, "m4", "from=last after a push");
    pop_payloads(&n, "all", "new", got, sizeof(got));
    cr_assert_str_eq(got, "m4", "from only places a new group");
    pop_payloads(&n, "default", NULL, got, sizeof(got));
    cr_assert_str_eq(got, "m1,m2,m3,m4", "the default is from=all");
}

/* The payloads (integers 0-9) of a pop as a bit mask. */
static unsigned
pop_mask(const struct itest_node *n, const char *q, int want)
{
    struct itest_resp r;
    unsigned mask = 0;
    int k = itest_pop(n, &r, q);

    cr_assert_eq(k, want, "pop %s: %s", q, r.body);
    for (int i = 0; i < k; i++) {
        char key[64];
        int64_t v;

        snprintf(key, sizeof(key), "messages.%d.payload", i);
        v = itest_jint(r.json, key);
        cr_assert(v >= 0 && v < 10 && !(mask & (1u << v)), "%s", r.body);
        mask |= 1u << v;
    }
    itest_resp_free(&r);
    return mask;
}

Test(groups, fan_out_competing_consumers_and_queue_mode, .timeout = 60)
{
    struct itest_node n;
    unsigned a, b;

    itest_node_start(&n, NULL);
    push_ok(&n, "fan", "[0,1,2,3,4,5,6,7,8,9]");
    cr_assert_eq(pop_mask(&n, "queue=fan&group=sub1&batch=100", 10), 0x3ff);
    cr_assert_eq(pop_mask(&n, "queue=fan&group=sub2&batch=100", 10), 0x3ff,
                 "a second group sees every message");
    a = pop_mask(&n, "queue=fan&group=workers&batch=4", 4);
    b = pop_mask(&n, "queue=fan&group=workers&batch=100", 6);
    cr_assert_eq(a & b, 0, "competing consumers got the same message");
    cr_assert_eq(a | b, 0x3ff);
    pop_mask(&n, "queue=fan&group=workers&batch=100", 0);
    a = pop_mask(&n, "queue=fan&batch=3", 3);
    b = pop_mask(&n, "queue=fan&batch=100", 7);
    cr_assert_eq(a & b, 0, "queue-mode consumers got the same message");
    cr_assert_eq(a | b, 0x3ff, "queue mode sees every message");
    pop_mask(&n, "queue=fan&batch=100", 0);
    cr_assert_eq(pop_mask(&n, "queue=fan&group=sub3&batch=100", 10), 0x3ff,
                 "a group that came late still sees the held messages");
}

Test(extend, keeps_a_lease_past_its_first_expiry, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256];
    int64_t t0;

    itest_node_start(&n, "lease_s=1");
    push_ok(&n, "ex", "[\"m\"]");
    t0 = itest_now_ms();
    cr_assert_eq(itest_pop(&n, &r, "queue=ex&group=g"), 1);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    itest_post(&n, &r, EXT,
               "{\"queue\":\"ex\",\"group\":\"g\",\"messages\":[{\"id\":\"%s\","
               "\"attempts\":1,\"seconds\":4}]}",
               id);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "extended", "%s",
                     r.body);
    itest_resp_free(&r);
    /* Past the 1 s lease, the extended one still holds. */
    while (itest_now_ms() - t0 < 2500) {
        cr_assert_eq(itest_pop(&n, &r, "queue=ex&group=g"), 0,
                     "redelivered %lld ms after the pop despite the extend",
                     (long long)(itest_now_ms() - t0));
        itest_resp_free(&r);
        itest_sleep_ms(100);
    }
    itest_pop_until_one(&n, &r, "queue=ex&group=g", 15000);
    cr_assert(itest_now_ms() - t0 >= 3500, "redelivered after %lld ms",
              (long long)(itest_now_ms() - t0));
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.id"), id, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 2, "%s", r.body);
    itest_resp_free(&r);
}

static int64_t
queue_bytes(const struct itest_node *n, const char *queue)
{
    return itest_listing_int(n, queue, "bytes", 0);
}

Test(groups, a_message_is_held_once_until_every_group_completes, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char payload[16 * 1024], ids[5][256];
    int64_t one = 0, five, deadline;

    itest_node_start(&n, NULL);
    memset(payload, 'x', sizeof(payload) - 5);
    memcpy(payload, "[\"", 2);
    strcpy(payload + sizeof(payload) - 5, "\"]");
    push_ok(&n, "once", payload);
    for (int g = 0; g < 5; g++) {
        char q[64];

        snprintf(q, sizeof(q), "queue=once&group=g%d", g);
        cr_assert_eq(itest_pop(&n, &r, q), 1, "group g%d", g);
        snprintf(ids[g], sizeof(ids[g]), "\"%s\"",
                 itest_jstr(r.json, "messages.0.id"));
        itest_resp_free(&r);
        if (g == 0)
            one = queue_bytes(&n, "once");
    }
    five = queue_bytes(&n, "once");
    cr_assert(one >= 16 * 1024 - 16, "bytes %lld for a 16 KB message",
              (long long)one);
    cr_assert(five < one + 8 * 1024,
              "five groups reading one 16 KB message hold %lld bytes, one "
              "group %lld: the message is not held once",
              (long long)five, (long long)one);
    for (int g = 0; g < 4; g++) {
        char gr[16];

        snprintf(gr, sizeof(gr), "g%d", g);
        cr_assert_str_eq(ack1(&n, &r, "once", gr, ids[g]), "acked", "%s",
                         r.body);
        itest_resp_free(&r);
        cr_assert(queue_bytes(&n, "once") >= one - 1024,
                  "the message was freed while group g4 still holds it");
    }
    cr_assert_str_eq(ack1(&n, &r, "once", "g4", ids[4]), "acked", "%s", r.body);
    itest_resp_free(&r);
    deadline = itest_now_ms() + 10000;
    while (queue_bytes(&n, "once") >= one - 8 * 1024) {
        cr_assert(itest_now_ms() < deadline,
                  "every group completed but the message is still held "
                  "(%lld bytes)",
                  (long long)queue_bytes(&n, "once"));
        itest_sleep_ms(20);
    }
}
