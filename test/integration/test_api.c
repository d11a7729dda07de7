/*
 * test_api.c - every route of SPEC §2 but configure, answered as the spec
 * says on a fresh node: push, pop, ack, extend, reset, DELETE (both paths),
 * the queue listing, depth, /health.  Errors are in test_api_errors.c and
 * test_bounds.c, delivery semantics in test_delivery.c.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define PUSH "/api/v1/ephemeral/push"
#define POP  "/api/v1/ephemeral/pop"
#define ACK  "/api/v1/ephemeral/ack"

/* Pop with query q and assert 200. */
static void
pop_ok(const struct itest_node *n, struct itest_resp *r, const char *q)
{
    itest_get(n, r, POP "?%s", q);
    cr_assert_eq(r->status, 200, "pop %s: %ld %s", q, r->status, r->body);
    cr_assert_eq(itest_jlen(r->json, "messages") >= 0, 1,
                 "pop %s: no messages array: %s", q, r->body);
}

/* Push payloads and assert 201 with one id each. */
static void
push_ok(const struct itest_node *n, struct itest_resp *r, const char *queue,
        const char *partition, const char *payloads, int count)
{
    itest_push_ok(n, r, queue, partition, payloads, count);
    cr_assert_eq(itest_jlen(r->json, "ids"), count, "%s", r->body);
}

Test(push, answers_201_with_ids_in_push_order, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, p;
    char inc[64], part[64], seq[64], inc0[64] = "";

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "orders", NULL, "[1,2,3]", 3);
    for (int i = 0; i < 3; i++) {
        const char *id =
            itest_jstr(r.json, (const char *[]){"ids.0", "ids.1", "ids.2"}[i]);

        cr_assert_eq(itest_id_parse(id, inc, sizeof(inc), part, sizeof(part),
                                    seq, sizeof(seq)),
                     0, "id %s is not e:<hex>:<partition>:<seq>", id);
        cr_assert_str_eq(part, "Default", "id %s", id);
        if (i == 0)
            strcpy(inc0, inc);
        cr_assert_str_eq(inc, inc0, "one node, one incarnation: %s", r.body);
    }
    cr_assert_str_neq(itest_jstr(r.json, "ids.0"), itest_jstr(r.json, "ids.1"));
    cr_assert_str_neq(itest_jstr(r.json, "ids.1"), itest_jstr(r.json, "ids.2"));
    pop_ok(&n, &p, "queue=orders&batch=10&autoAck=true");
    cr_assert_eq(itest_jlen(p.json, "messages"), 3, "%s", p.body);
    for (int i = 0; i < 3; i++) {
        char key[32], idk[32];

        snprintf(key, sizeof(key), "messages.%d.payload", i);
        snprintf(idk, sizeof(idk), "messages.%d.id", i);
        cr_assert_eq(itest_jint(p.json, key), i + 1, "order: %s", p.body);
        snprintf(key, sizeof(key), "ids.%d", i);
        cr_assert_str_eq(itest_jstr(p.json, idk), itest_jstr(r.json, key),
                         "push ids are the popped ids in order: %s / %s",
                         r.body, p.body);
    }
    itest_resp_free(&r);
    itest_resp_free(&p);
}

Test(push, empty_list_answers_201_with_no_ids, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    itest_post(&n, &r, PUSH, "{\"queue\":\"empty\",\"messages\":[]}");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    cr_assert_eq(itest_jint(r.json, "pushed"), 0, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "ids"), 0, "%s", r.body);
    itest_resp_free(&r);
}

Test(push, any_json_payload_comes_back_unchanged, .timeout = 60)
{
    static const char payloads[] =
        "[0,-17,3.25,1e300,\"\",\"caf\\u00e9 \\\"q\\\" \\\\ \\n\\t\\u0001\","
        "\"\xf0\x9f\x99\x82\",null,true,false,[],{},"
        "{\"a\":[1,{\"b\":null}],\"c\":\"d\"},[[[[\"deep\"]]]]]";
    struct itest_node n;
    struct itest_resp r;
    struct json_object *want = json_tokener_parse(payloads);
    int k = (int)json_object_array_length(want);

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "shapes", NULL, payloads, k);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=shapes&batch=100&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), k, "%s", r.body);
    for (int i = 0; i < k; i++) {
        char key[32];

        snprintf(key, sizeof(key), "messages.%d.payload", i);
        cr_assert(json_object_equal(itest_jget(r.json, key),
                                    json_object_array_get_idx(want, (size_t)i)),
                  "payload %d changed: sent %s, got %s", i,
                  json_object_to_json_string(
                      json_object_array_get_idx(want, (size_t)i)),
                  json_object_to_json_string(itest_jget(r.json, key)));
    }
    json_object_put(want);
    itest_resp_free(&r);
}

Test(push, partition_with_colons_is_named_in_the_id, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char inc[64], part[64], seq[64];

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "colons", "a:b:c", "[\"x\"]", 1);
    cr_assert_eq(itest_id_parse(itest_jstr(r.json, "ids.0"), inc, sizeof(inc),
                                part, sizeof(part), seq, sizeof(seq)),
                 0, "%s", r.body);
    cr_assert_str_eq(part, "a:b:c", "%s", r.body);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=colons&partition=a%3Ab%3Ac");
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.partition"), "a:b:c", "%s",
                     r.body);
    itest_resp_free(&r);
}

Test(push, ids_are_not_reused_when_a_queue_is_created_again, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, d;
    char first[256];

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "again", NULL, "[1]", 1);
    snprintf(first, sizeof(first), "%s", itest_jstr(r.json, "ids.0"));
    itest_resp_free(&r);
    itest_req(&n, "DELETE", "/api/v1/ephemeral/queue/again", NULL, &d);
    cr_assert_eq(d.status, 200, "%ld %s", d.status, d.body);
    itest_resp_free(&d);
    push_ok(&n, &r, "again", NULL, "[1]", 1);
    cr_assert_str_neq(itest_jstr(r.json, "ids.0"), first,
                      "an id came back after the queue was re-created");
    itest_resp_free(&r);
}

Test(pop, answers_queue_and_messages_with_id_partition_payload_attempts,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    pop_ok(&n, &r, "queue=fields");
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "fields", "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
    push_ok(&n, &r, "fields", "p1", "[{\"k\":1}]", 1);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=fields&partition=p1&group=g");
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "fields", "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert(*itest_jstr(r.json, "messages.0.id"), "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.partition"), "p1", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.k"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1, "%s", r.body);
    itest_resp_free(&r);
}

Test(pop, takes_at_most_batch_messages_and_clamps_batch, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "batch", NULL, "[1,2,3,4,5,6,7]", 7);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=batch&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "default batch 1: %s",
                 r.body);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=batch&batch=0&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "batch 0 is 1: %s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 2, "%s", r.body);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=batch&batch=3&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 3, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 3, "%s", r.body);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=batch&batch=1000000&autoAck=true");
    cr_assert_eq(itest_jlen(r.json, "messages"), 2, "%s", r.body);
    itest_resp_free(&r);
}

Test(pop, wait_answers_an_empty_list_after_the_timeout, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    pop_ok(&n, &r, "queue=idle&wait=true&timeout=400");
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    cr_assert(r.seconds >= 0.35, "answered after %.3f s, before the timeout",
              r.seconds);
    cr_assert(r.seconds < 10, "answered after %.3f s", r.seconds);
    itest_resp_free(&r);
}

Test(pop, timeout_is_clamped_to_max_wait_ms, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, "max_wait_ms=500");
    pop_ok(&n, &r, "queue=clamp&wait=true&timeout=60000");
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    cr_assert(r.seconds >= 0.45 && r.seconds < 10,
              "a 60 s wait clamped to 500 ms took %.3f s", r.seconds);
    itest_resp_free(&r);
}

Test(pop, wait_returns_as_soon_as_a_message_is_pushed, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, *got;
    struct itest_multi *m = itest_multi_new();
    int64_t t0;

    itest_node_start(&n, NULL);
    itest_multi_add(m, &n, "GET", POP "?queue=wake&wait=true&timeout=30000",
                    NULL);
    /* Drive the pop until the listing counts it as waiting. */
    t0 = itest_now_ms();
    for (;;) {
        struct json_object *q;
        int waiting;

        itest_multi_run(m, 20);
        q = itest_listing_find(&n, "wake");
        waiting = q ? (int)itest_jint(q, "waiting") : 0;
        json_object_put(q);
        if (waiting == 1)
            break;
        cr_assert(!itest_multi_done(m, 0), "the pop answered before a push");
        cr_assert(itest_now_ms() - t0 < 20000, "the pop never parked");
    }
    push_ok(&n, &r, "wake", NULL, "[\"now\"]", 1);
    itest_resp_free(&r);
    t0 = itest_now_ms();
    cr_assert_eq(itest_multi_run(m, 10000), 0, "parked pop not woken in 10 s");
    got = itest_multi_resp(m, 0);
    cr_assert_eq(got->status, 200, "%ld %s", got->status, got->body);
    cr_assert_eq(itest_jlen(got->json, "messages"), 1, "%s", got->body);
    cr_assert_str_eq(itest_jstr(got->json, "messages.0.payload"), "now", "%s",
                     got->body);
    cr_assert(itest_now_ms() - t0 < 5000, "woken after %lld ms",
              (long long)(itest_now_ms() - t0));
    itest_multi_free(m);
}

Test(pop, without_partition_serves_partitions_in_turn, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    int seen_a = 0, seen_b = 0;

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "fair", "a", "[1,2,3,4]", 4);
    itest_resp_free(&r);
    push_ok(&n, &r, "fair", "b", "[5,6,7,8]", 4);
    itest_resp_free(&r);
    for (int i = 0; i < 4; i++) {
        const char *p;

        pop_ok(&n, &r, "queue=fair&autoAck=true");
        cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
        p = itest_jstr(r.json, "messages.0.partition");
        seen_a += strcmp(p, "a") == 0;
        seen_b += strcmp(p, "b") == 0;
        itest_resp_free(&r);
    }
    cr_assert(seen_a > 0 && seen_b > 0,
              "4 pops without partition served a %d times and b %d times",
              seen_a, seen_b);
}

Test(pop, names_with_slash_space_multibyte_and_512_bytes_work, .timeout = 60)
{
    char long_name[513], esc[2048], q[8192];
    const char *names[] = {"inbox/7", "room 7", "caf\xc3\xa9-\xe6\x97\xa5",
                           long_name};
    struct itest_node n;
    struct itest_resp r;

    memset(long_name, 'q', 512);
    long_name[512] = '\0';
    itest_node_start(&n, NULL);
    for (int i = 0; i < 4; i++) {
        push_ok(&n, &r, names[i], names[i], "[\"n\"]", 1);
        itest_resp_free(&r);
        itest_esc(names[i], esc, sizeof(esc));
        snprintf(q, sizeof(q), "queue=%s&partition=%s&group=%s&autoAck=true",
                 esc, esc, esc);
        pop_ok(&n, &r, q);
        cr_assert_eq(itest_jlen(r.json, "messages"), 1, "name %d: %s", i,
                     r.body);
        cr_assert_str_eq(itest_jstr(r.json, "queue"), names[i], "%s", r.body);
        cr_assert_str_eq(itest_jstr(r.json, "messages.0.partition"), names[i],
                         "%s", r.body);
        itest_resp_free(&r);
        itest_get(&n, &r, "/api/v1/ephemeral/queues/%s/depth", esc);
        cr_assert_eq(r.status, 200, "depth of %s: %ld %s", names[i], r.status,
                     r.body);
        cr_assert_str_eq(itest_jstr(r.json, "queue"), names[i], "%s", r.body);
        itest_resp_free(&r);
    }
}

Test(ack, completed_answers_acked_and_frees_the_hold, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256];

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "acks", NULL, "[1]", 1);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=acks&group=g");
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    itest_post(&n, &r, ACK,
               "{\"queue\":\"acks\",\"group\":\"g\",\"acks\":"
               "[{\"id\":\"%s\",\"status\":\"completed\"}]}",
               id);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_eq(itest_jlen(r.json, "results"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.id"), id, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                     r.body);
    itest_resp_free(&r);
    itest_post(
        &n, &r, ACK,
        "{\"queue\":\"acks\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\"}]}", id);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "unknown",
                     "a second ack: %s", r.body);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues/acks/depth?group=g");
    cr_assert_eq(itest_jint(r.json, "partitions.0.leased"), 0, "%s", r.body);
    itest_resp_free(&r);
}

Test(ack, every_completed_alias_acks, .timeout = 60)
{
    const char *statuses[] = {"", ",\"status\":\"completed\"",
                              ",\"status\":\"success\"",
                              ",\"status\":\"acked\"", ",\"status\":\"ok\""};
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "alias", NULL, "[1,2,3,4,5]", 5);
    itest_resp_free(&r);
    for (int i = 0; i < 5; i++) {
        char id[256];

        pop_ok(&n, &r, "queue=alias&group=g");
        snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
        itest_resp_free(&r);
        itest_post(&n, &r, ACK,
                   "{\"queue\":\"alias\",\"group\":\"g\",\"acks\":"
                   "[{\"id\":\"%s\"%s}]}",
                   id, statuses[i]);
        cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked",
                         "status [%s]: %s", statuses[i], r.body);
        itest_resp_free(&r);
    }
    cr_assert_eq(itest_depth_pending(&n, "alias", "g"), 0);
}

Test(ack, takes_messages_bare_ids_and_popped_objects_in_request_order,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, a;
    char body[4096];

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "forms", NULL, "[1,2]", 2);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=forms&group=g&batch=2");
    cr_assert_eq(itest_jlen(r.json, "messages"), 2, "%s", r.body);
    /* messages: [second popped object as is, an unknown id, first bare id] */
    snprintf(body, sizeof(body),
             "{\"queue\":\"forms\",\"group\":\"g\",\"messages\":[%s,"
             "\"e:0:Default:999999\",\"%s\"]}",
             json_object_to_json_string_ext(itest_jget(r.json, "messages.1"),
                                            JSON_C_TO_STRING_PLAIN),
             itest_jstr(r.json, "messages.0.id"));
    itest_req(&n, "POST", ACK, body, &a);
    cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
    cr_assert_eq(itest_jlen(a.json, "results"), 3, "%s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.0.id"),
                     itest_jstr(r.json, "messages.1.id"), "%s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.0.outcome"), "acked", "%s",
                     a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.1.id"), "e:0:Default:999999",
                     "%s", a.body);
    cr_assert(strcmp(itest_jstr(a.json, "results.1.outcome"), "unknown") == 0 ||
                  strcmp(itest_jstr(a.json, "results.1.outcome"), "stale") == 0,
              "an id no delivery made: %s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.2.id"),
                     itest_jstr(r.json, "messages.0.id"), "%s", a.body);
    cr_assert_str_eq(itest_jstr(a.json, "results.2.outcome"), "acked", "%s",
                     a.body);
    itest_resp_free(&a);
    itest_resp_free(&r);
}

Test(ack, unknown_queue_or_group_answers_unknown, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256];

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "known", NULL, "[1]", 1);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "ids.0"));
    itest_resp_free(&r);
    itest_post(&n, &r, ACK, "{\"queue\":\"nosuch\",\"acks\":[\"%s\"]}", id);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "unknown", "%s",
                     r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, ACK,
               "{\"queue\":\"known\",\"group\":\"nobody\",\"acks\":[\"%s\"]}",
               id);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "unknown", "%s",
                     r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&n, "known", NULL), 1);
}

Test(extend, answers_extended_and_unknown, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, e;
    char id[256], inc[64], part[64], seq[64];

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "ext", NULL, "[1]", 1);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=ext&group=g");
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    cr_assert_eq(itest_id_parse(id, inc, sizeof(inc), part, sizeof(part), seq,
                                sizeof(seq)),
                 0, "%s", id);
    /* The real delivery, then a sequence this incarnation never used. */
    itest_post(&n, &e, "/api/v1/ephemeral/extend",
               "{\"queue\":\"ext\",\"group\":\"g\",\"messages\":["
               "{\"id\":\"%s\",\"attempts\":1,\"seconds\":60},"
               "{\"id\":\"e:%s:Default:%s4242\",\"seconds\":60}]}",
               id, inc, seq);
    cr_assert_eq(e.status, 200, "%ld %s", e.status, e.body);
    cr_assert_eq(itest_jlen(e.json, "results"), 2, "%s", e.body);
    cr_assert_str_eq(itest_jstr(e.json, "results.0.id"), id, "%s", e.body);
    cr_assert_str_eq(itest_jstr(e.json, "results.0.outcome"), "extended", "%s",
                     e.body);
    cr_assert_str_eq(itest_jstr(e.json, "results.1.outcome"), "unknown", "%s",
                     e.body);
    itest_resp_free(&e);
    itest_post(&n, &e, ACK,
               "{\"queue\":\"ext\",\"group\":\"g\",\"acks\":[\"%s\"]}", id);
    cr_assert_str_eq(itest_jstr(e.json, "results.0.outcome"), "acked", "%s",
                     e.body);
    itest_resp_free(&e);
    itest_post(&n, &e, "/api/v1/ephemeral/extend",
               "{\"queue\":\"ext\",\"group\":\"g\",\"messages\":["
               "{\"id\":\"%s\",\"seconds\":5}]}",
               id);
    cr_assert_str_eq(itest_jstr(e.json, "results.0.outcome"), "unknown",
                     "extend after the ack: %s", e.body);
    itest_resp_free(&e);
}

Test(reset, drops_messages_voids_leases_and_rewinds_groups, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256];

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "rs", NULL, "[1,2,3,4,5]", 5);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=rs&group=g&batch=2");
    cr_assert_eq(itest_jlen(r.json, "messages"), 2, "%s", r.body);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    itest_post(&n, &r, "/api/v1/ephemeral/reset", "{\"queue\":\"rs\"}");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "rs", "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "dropped"), 5, "%s", r.body);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=rs&group=g&batch=10");
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
    itest_post(&n, &r, ACK,
               "{\"queue\":\"rs\",\"group\":\"g\",\"acks\":[\"%s\"]}", id);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "unknown",
                     "the lease survived the reset: %s", r.body);
    itest_resp_free(&r);
    push_ok(&n, &r, "rs", NULL, "[6]", 1);
    itest_resp_free(&r);
    pop_ok(&n, &r, "queue=rs&group=g&batch=10");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload"), 6, "%s", r.body);
    itest_resp_free(&r);
}

Test(reset, of_an_unknown_queue_drops_nothing, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    itest_post(&n, &r, "/api/v1/ephemeral/reset", "{\"queue\":\"ghost\"}");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "ghost", "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "dropped"), 0, "%s", r.body);
    itest_resp_free(&r);
}

/* Push to queue, DELETE it at path, check the answer and that it is gone. */
static void
delete_and_check(const struct itest_node *n, const char *queue,
                 const char *path)
{
    struct itest_resp r;

    push_ok(n, &r, queue, NULL, "[1,2,3]", 3);
    itest_resp_free(&r);
    itest_req(n, "DELETE", path, NULL, &r);
    cr_assert_eq(r.status, 200, "DELETE %s: %ld %s", path, r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), queue, "%s", r.body);
    cr_assert_eq(itest_jbool(r.json, "deleted"), 1, "%s", r.body);
    cr_assert_eq(itest_jbool(r.json, "declared"), 0, "%s", r.body);
    itest_resp_free(&r);
    itest_get(n, &r, "/api/v1/ephemeral/queues/%s/depth",
              strrchr(path, '/') + 1);
    itest_assert_error(&r, 404, "ephemeral_queue_not_found", NULL,
                       "depth after DELETE");
    itest_resp_free(&r);
    itest_req(n, "DELETE", path, NULL, &r);
    cr_assert_eq(r.status, 200, "second DELETE %s: %ld %s", path, r.status,
                 r.body);
    cr_assert_eq(itest_jbool(r.json, "deleted"), 0, "%s", r.body);
    itest_resp_free(&r);
}

Test(delete, queue_path_drops_the_contents, .timeout = 60)
{
    struct itest_node n;

    itest_node_start(&n, NULL);
    delete_and_check(&n, "gone", "/api/v1/ephemeral/queue/gone");
}

Test(delete, queues_path_drops_the_contents, .timeout = 60)
{
    struct itest_node n;

    itest_node_start(&n, NULL);
    delete_and_check(&n, "gone2", "/api/v1/ephemeral/queues/gone2");
}

Test(delete, percent_encoded_name_in_the_path, .timeout = 60)
{
    struct itest_node n;

    itest_node_start(&n, NULL);
    delete_and_check(&n, "inbox/7 x", "/api/v1/ephemeral/queue/inbox%2F7%20x");
}

Test(listing, shows_every_field_sorted_by_name_with_prefix_and_limit,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    const char *names[] = {"lst-c", "lst-a", "lst-b", "other"};
    struct json_object *q;

    itest_node_start(&n, NULL);
    for (int i = 0; i < 4; i++) {
        push_ok(&n, &r, names[i], i == 0 ? "p2" : NULL, "[1,2]", 2);
        itest_resp_free(&r);
    }
    pop_ok(&n, &r, "queue=lst-a&group=g");
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert(*itest_jstr(r.json, "node"), "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "count"), 4, "%s", r.body);
    cr_assert(itest_jint(r.json, "cellBytes") > 0, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "queues"), 4, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.queue"), "lst-a", "%s",
                     r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.1.queue"), "lst-b", "%s",
                     r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.2.queue"), "lst-c", "%s",
                     r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.3.queue"), "other", "%s",
                     r.body);
    q = itest_jget(r.json, "queues.0");
    cr_assert_str_eq(itest_jstr(q, "tier"), "implicit", "%s", r.body);
    /* The spec leaves open whether depth counts the leased message. */
    cr_assert(itest_jint(q, "depth") == 1 || itest_jint(q, "depth") == 2,
              "2 pushed, 1 leased: %s", r.body);
    cr_assert_eq(itest_jint(q, "leased"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(q, "waiting"), 0, "%s", r.body);
    cr_assert(itest_jint(q, "bytes") > 0, "%s", r.body);
    cr_assert_eq(itest_jint(q, "partitions"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(q, "groups"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(q, "drops.bounds"), 0, "%s", r.body);
    cr_assert_eq(itest_jint(q, "drops.ttl"), 0, "%s", r.body);
    cr_assert_eq(itest_jint(q, "drops.retry"), 0, "%s", r.body);
    cr_assert(json_object_is_type(itest_jget(q, "options"), json_type_object),
              "%s", r.body);
    /* every option, as configure answers them: windowBuffer (off) too */
    cr_assert_eq(itest_jint(q, "options.windowBuffer.ms"), 0, "%s", r.body);
    cr_assert_eq(itest_jint(q, "options.windowBuffer.count"), 0, "%s", r.body);
    cr_assert(json_object_is_type(itest_jget(q, "options.windowBuffer"),
                                  json_type_object),
              "%s", r.body);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues?prefix=lst-&limit=2");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_eq(itest_jlen(r.json, "queues"), 2, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.queue"), "lst-a", "%s",
                     r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.1.queue"), "lst-b", "%s",
                     r.body);
    itest_resp_free(&r);
}

Test(depth, scope_cluster_on_one_node_counts_what_the_node_holds, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    push_ok(&n, &r, "sc", NULL, "[1,2,3]", 3);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues/sc/depth?scope=cluster");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "sc", "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "pending"), 3, "%s", r.body);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues/sc/depth?scope=node");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_eq(itest_jint(r.json, "pending"), 3, "%s", r.body);
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues/none/depth?scope=cluster");
    itest_assert_error(&r, 404, "ephemeral_queue_not_found", NULL,
                       "depth?scope=cluster of an unknown queue");
    itest_resp_free(&r);
}

Test(depth, of_an_unknown_queue_answers_404_ephemeral_queue_not_found,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    itest_get(&n, &r, "/api/v1/ephemeral/queues/never-seen/depth");
    itest_assert_error(&r, 404, "ephemeral_queue_not_found", NULL,
                       "depth of an unknown queue");
    itest_resp_free(&r);
    itest_get(&n, &r, "/api/v1/ephemeral/queues");
    cr_assert_eq(itest_jint(r.json, "count"), 0, "depth created a queue: %s",
                 r.body);
    itest_resp_free(&r);
}

Test(health, answers_200_ready_with_node_and_incarnation, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r, p;
    char inc[64], part[64], seq[64];

    itest_node_start(&n, NULL);
    itest_get(&n, &r, "/health");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert(*itest_jstr(r.json, "status"), "%s", r.body);
    cr_assert(*itest_jstr(r.json, "node"), "%s", r.body);
    cr_assert_eq(itest_jbool(r.json, "ready"), 1, "%s", r.body);
    cr_assert(*itest_jstr(r.json, "role"), "%s", r.body);
    /* term and leader are there, leader null until one is elected. */
    cr_assert(json_object_object_get_ex(r.json, "term", NULL), "%s", r.body);
    cr_assert(json_object_object_get_ex(r.json, "leader", NULL), "%s", r.body);
    cr_assert(itest_jlen(r.json, "members") >= 1, "%s", r.body);
    cr_assert(itest_jget(r.json, "incarnation") != NULL, "%s", r.body);
    push_ok(&n, &p, "inc", NULL, "[1]", 1);
    cr_assert_eq(itest_id_parse(itest_jstr(p.json, "ids.0"), inc, sizeof(inc),
                                part, sizeof(part), seq, sizeof(seq)),
                 0);
    if (json_object_is_type(itest_jget(r.json, "incarnation"),
                            json_type_string))
        cr_assert(strcasestr(itest_jstr(r.json, "incarnation"), inc) ||
                      strcasestr(inc, itest_jstr(r.json, "incarnation")),
                  "ids name incarnation %s, /health says %s", inc, r.body);
    itest_resp_free(&p);
    itest_resp_free(&r);
}

Test(metrics, answers_prometheus_text, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    itest_get(&n, &r, "/metrics");
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert(strncmp(r.content_type, "text/plain", 10) == 0, "Content-Type %s",
              r.content_type);
    cr_assert(strstr(r.body, "# TYPE mayfly_"), "%s", r.body);
    itest_resp_free(&r);
}
