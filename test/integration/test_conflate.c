/*
 * test_conflate.c - SPEC §13's conflation on one node: on a queue declared
 * with conflate, a message with a key replaces the older message of its
 * key that no group has read (the push answers "conflated"), so 1,000
 * pushes over 10 keys while nobody reads leave 10 messages, each key's
 * newest; with two groups, one that reads every value as it comes and one
 * that is away, the one that comes back reads each key's newest once, and
 * a lease the first holds on a replaced message acks as it did but is
 * never delivered again; a message one group alone read stays; one
 * without a key never goes;
 * mayfly_conflated_total counts; configure refuses a conflate that is not
 * a boolean, or beside dedupeSeconds, naming it; the option shows in
 * configure's answer and the listing; the live segment check passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define POP  "/api/v1/ephemeral/pop"
#define PUSH "/api/v1/ephemeral/push"
#define CONF "/api/v1/ephemeral/configure"

static struct itest_node n;

static void
up(void)
{
    itest_node_start(&n, NULL);
}

static void
down(void)
{
    itest_node_stop(&n, 30000);
}

TestSuite(conflate, .init = up, .fini = down, .timeout = 180);

/* configure - declare queue with options (a JSON object's members). */
static void
configure(const char *queue, const char *options)
{
    struct itest_resp r;

    itest_post(&n, &r, CONF, "{\"queue\":\"%s\",\"options\":{%s}}", queue,
               options);
    cr_assert_eq(r.status, 201, "configure %s: %ld %s", options, r.status,
                 r.body);
    itest_resp_free(&r);
}

/* push_key - one message {"k": key, "v": v} with key "k<key>" (key < 0:
 * none) to queue; returns the answer's conflated (0 when absent). */
static int
push_key(const char *queue, int key, int v)
{
    struct itest_resp r;
    char k[32] = "";

    if (key >= 0)
        snprintf(k, sizeof(k), ",\"key\":\"k%d\"", key);
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"%s\",\"messages\":[{\"payload\":{\"k\":%d,"
               "\"v\":%d}%s}]}",
               queue, key, v, k);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "pushed"), 1, "%s", r.body);
    int c = key >= 0 ? (int)itest_jint(r.json, "conflated") : 0;
    itest_resp_free(&r);
    return c;
}

/* pop - a pop with query q; asserts 200, returns how many came. */
static int
pop(struct itest_resp *r, const char *q)
{
    itest_get(&n, r, POP "?%s", q);
    cr_assert_eq(r->status, 200, "pop %s: %ld %s", q, r->status, r->body);
    return itest_jlen(r->json, "messages");
}

static double
metric(const char *series)
{
    double v = 0;

    return itest_metric(&n, series, &v) == 0 ? v : 0;
}

/* segment_sound - mayflyd --check-segment on the live node passes. */
static void
segment_sound(void)
{
    char out[4096];

    cr_assert_eq(itest_check_segment(&n, out, sizeof(out)), 0, "%s", out);
}

Test(conflate, a_thousand_pushes_over_ten_keys_leave_each_keys_newest)
{
    struct itest_resp r;
    int newest[10], conflated = 0;
    char path[64];

    configure("sig", "\"conflate\":true");
    for (int i = 0; i < 1000; i++) {
        int k = (i * 7 + (i / 10) * 3) % 10; /* keys in no fixed order */
        newest[k] = i;
        conflated += push_key("sig", k, i);
    }
    cr_assert_eq(conflated, 990);
    cr_assert_geq(metric("mayfly_conflated_total"), 990);
    cr_assert_eq(itest_depth_pending(&n, "sig", NULL), 10);
    segment_sound();
    snprintf(path, sizeof(path), "queue=sig&batch=100");
    cr_assert_eq(pop(&r, path), 10, "%s", r.body);
    int seen[10] = {0};
    for (int i = 0; i < 10; i++) {
        char p[64];
        snprintf(p, sizeof(p), "messages.%d.payload.k", i);
        int k = (int)itest_jint(r.json, p);
        cr_assert(k >= 0 && k < 10 && !seen[k], "key %d: %s", k, r.body);
        seen[k] = 1;
        snprintf(p, sizeof(p), "messages.%d.payload.v", i);
        cr_assert_eq(itest_jint(r.json, p), newest[k], "key %d's newest", k);
    }
    itest_resp_free(&r);
}

Test(conflate, a_key_a_group_read_is_not_replaced)
{
    struct itest_resp r;

    configure("read", "\"conflate\":true");
    cr_assert_eq(push_key("read", 1, 1), 0);
    cr_assert_eq(pop(&r, "queue=read&group=g"), 1); /* leased to g */
    itest_resp_free(&r);
    cr_assert_eq(push_key("read", 1, 2), 0, "g has read the first");
    cr_assert_eq(pop(&r, "queue=read&group=g&batch=10"), 1);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.v"), 2, "%s", r.body);
    itest_resp_free(&r);
    /* unread again: the next replaces it */
    cr_assert_eq(push_key("read", 1, 3), 0);
    cr_assert_eq(push_key("read", 1, 4), 1);
    cr_assert_eq(pop(&r, "queue=read&group=g&batch=10"), 1);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.v"), 4, "%s", r.body);
    itest_resp_free(&r);
    segment_sound();
}

Test(conflate, a_group_away_reads_each_keys_newest_once)
{
    struct itest_resp r;

    configure("two", "\"conflate\":true");
    cr_assert_eq(pop(&r, "queue=two&group=back&autoAck=true"), 0);
    itest_resp_free(&r); /* back is known, and away */
    for (int v = 1; v <= 3; v++) {
        cr_assert_eq(push_key("two", 1, v), v > 1,
                     "v %d replaces what back has not read", v);
        cr_assert_eq(push_key("two", 2, 10 + v), v > 1);
        cr_assert_eq(pop(&r, "queue=two&group=active&autoAck=true&batch=10"), 2,
                     "active reads every value: %s", r.body);
        itest_resp_free(&r);
    }
    cr_assert_eq(itest_depth_pending(&n, "two", "back"), 2);
    cr_assert_eq(pop(&r, "queue=two&group=back&autoAck=true&batch=10"), 2,
                 "each key's newest once: %s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.k"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.v"), 3, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.1.payload.k"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.1.payload.v"), 13, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "two", NULL), 0, "both are done");
    segment_sound();
}

Test(conflate, a_lease_on_a_replaced_message_acks_and_never_comes_back)
{
    struct itest_resp r, a;
    char id[256];

    configure("lease", "\"conflate\":true");
    cr_assert_eq(pop(&r, "queue=lease&group=back"), 0);
    itest_resp_free(&r);
    cr_assert_eq(push_key("lease", 1, 1), 0);
    cr_assert_eq(pop(&r, "queue=lease&group=active"), 1); /* leased */
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    cr_assert_eq(push_key("lease", 1, 2), 1, "replaced for back");
    cr_assert_eq(pop(&r, "queue=lease&group=back&autoAck=true&batch=10"), 1);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.v"), 2, "%s", r.body);
    itest_resp_free(&r);
    /* active's retry: the message will not come back, and it says so */
    itest_post(&n, &a, "/api/v1/ephemeral/ack",
               "{\"queue\":\"lease\",\"group\":\"active\",\"acks\":[{"
               "\"id\":\"%s\",\"attempts\":1,\"status\":\"retry\"}]}",
               id);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.0.outcome"), "acked", "%s",
                     a.body);
    cr_assert_eq(itest_jbool(a.json, "results.0.dropped"), 1, "%s", a.body);
    itest_resp_free(&a);
    cr_assert_eq(pop(&r, "queue=lease&group=active&batch=10"), 1);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.v"), 2,
                 "the new value, not the old again: %s", r.body);
    itest_resp_free(&r);
    segment_sound();
}

Test(conflate, messages_without_a_key_are_never_conflated)
{
    struct itest_resp r;

    configure("nokey", "\"conflate\":true");
    for (int i = 0; i < 5; i++)
        push_key("nokey", -1, i);
    cr_assert_eq(push_key("nokey", 1, 5), 0);
    cr_assert_eq(push_key("nokey", -1, 6), 0);
    cr_assert_eq(itest_depth_pending(&n, "nokey", NULL), 7);
    cr_assert_eq(pop(&r, "queue=nokey&batch=100"), 7, "%s", r.body);
    itest_resp_free(&r);
}

Test(conflate, a_batch_replaces_its_own_older_messages)
{
    struct itest_resp r;

    configure("batch", "\"conflate\":true,\"maxLength\":2");
    itest_post(&n, &r, PUSH,
               "{\"queue\":\"batch\",\"messages\":[{\"payload\":1,\"key\":"
               "\"a\"},{\"payload\":2,\"key\":\"b\"},{\"payload\":3,\"key\":"
               "\"a\"},{\"payload\":4,\"key\":\"a\"}]}");
    cr_assert_eq(r.status, 201, "four over a bound of 2 leave 2: %s", r.body);
    cr_assert_eq(itest_jint(r.json, "pushed"), 4, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "ids"), 4, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "conflated"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "duplicates"), 0, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(pop(&r, "queue=batch&batch=10"), 2, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 2);
    cr_assert_eq(itest_jint(r.json, "messages.1.payload"), 4);
    itest_resp_free(&r);
}

Test(conflate, configure_refuses_a_wrong_conflate_naming_it)
{
    static const char *bad[] = {
        "{\"conflate\":\"yes\"}",
        "{\"conflate\":1}",
        "{\"conflate\":true,\"dedupeSeconds\":10}",
    };
    struct itest_resp r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        itest_post(&n, &r, CONF, "{\"queue\":\"bad\",\"options\":%s}", bad[i]);
        itest_assert_error(&r, 400, "invalid_option", "conflate", bad[i]);
        itest_resp_free(&r);
    }
    /* false beside a window is no conflation: fine */
    configure("bad", "\"conflate\":false,\"dedupeSeconds\":10");
}

Test(conflate, the_option_shows_in_configures_answer_and_the_listing)
{
    struct itest_resp r;

    itest_post(&n, &r, CONF,
               "{\"queue\":\"shown\",\"options\":{\"conflate\":true}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_eq(itest_jbool(r.json, "options.conflate"), 1, "%s", r.body);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues?prefix=shown");
    cr_assert_eq(itest_jbool(r.json, "queues.0.options.conflate"), 1, "%s",
                 r.body);
    itest_resp_free(&r);
    configure("plain", "\"retryLimit\":3");
    itest_get(&n, &r, "/api/v1/ephemeral/queues?prefix=plain");
    cr_assert_eq(itest_jbool(r.json, "queues.0.options.conflate"), 0, "%s",
                 r.body);
    itest_resp_free(&r);
    /* an implicit queue does not conflate: both keyed messages stay */
    cr_assert_eq(push_key("implicit", 1, 1), 0);
    cr_assert_eq(push_key("implicit", 1, 2), 0);
    cr_assert_eq(itest_depth_pending(&n, "implicit", NULL), 2);
}
