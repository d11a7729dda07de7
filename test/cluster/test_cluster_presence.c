/*
 * test_cluster_presence.c - presence across three real nodes (SPEC §12):
 * a channel lives on its HRW owner (the owner of its presence name and
 * Default, as every node computes it) and every call works through any
 * node: enter, leave, list, count; the members sit on the owner alone;
 * events of calls made through other nodes reach a stream on the owner.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/cluster/cluster.h"
#include "test/integration/sse.h"

#define PRES "/api/v1/presence"

static struct cl c;

static void
up(void)
{
    cl_up(&c, "member_ttl_ms=60000");
}

static void
down(void)
{
    cl_kill_all(&c);
}

TestSuite(cluster_presence, .init = up, .fini = down, .timeout = 180);

/* members_on - node i's mayfly_presence_members. */
static double
members_on(int i)
{
    double v = -1;

    cr_assert_eq(itest_metric(&c.node[i], "mayfly_presence_members", &v), 0);
    return v;
}

Test(cluster_presence, every_call_works_through_any_node)
{
    static const char *const who[CL_NODES] = {"ada", "bob", "cy"};
    struct itest_resp r = {0};
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    char body[256];

    cr_assert_geq(owner, 0);
    /* a stream on the owner hears what the calls through the others do */
    struct sse_client *w = calloc(1, sizeof(*w));
    cr_assert_not_null(w);
    sse_open(w, &c.node[owner],
             "/api/v1/ephemeral/subscribe"
             "?presence_events=room&from=last",
             NULL);
    cr_assert_geq(sse_wait_events(w, 2, 10000), 2, "open and sync");
    for (int i = 0; i < CL_NODES; i++) {
        snprintf(body, sizeof(body),
                 "{\"channel\":\"room\",\"member\":\"%s\",\"data\":%d,"
                 "\"ttlSeconds\":60}",
                 who[i], i);
        cr_assert_eq(itest_req(&c.node[i], "POST", PRES "/enter", body, &r),
                     200, "enter through node %d: %s", i, r.body);
        cr_assert_str_eq(itest_jstr(r.json, "action"), "enter");
        itest_resp_free(&r);
    }
    for (int i = 0; i < CL_NODES; i++) {
        cr_assert_eq(itest_get(&c.node[i], &r, PRES "/room"), 200);
        cr_assert_eq(itest_jint(r.json, "count"), 3, "node %d: %s", i, r.body);
        for (int k = 0; k < CL_NODES; k++) {
            char p[32];
            snprintf(p, sizeof(p), "members.%d.member", k);
            cr_assert_str_eq(itest_jstr(r.json, p), who[k]);
        }
        itest_resp_free(&r);
        cr_assert_eq(itest_get(&c.node[i], &r, PRES "/room?count=true"), 200);
        cr_assert_eq(itest_jint(r.json, "count"), 3);
        itest_resp_free(&r);
        cr_assert_eq(members_on(i), i == owner ? 3 : 0,
                     "the members live on the owner (node %d) alone", owner);
    }
    cr_assert_geq(sse_wait_events(w, 5, 10000), 5, "three enters");
    int other = (owner + 1) % CL_NODES;
    cr_assert_eq(itest_post(&c.node[other], &r, PRES "/leave",
                            "{\"channel\":\"room\",\"member\":\"bob\"}"),
                 200);
    cr_assert_eq(itest_jbool(r.json, "left"), 1);
    itest_resp_free(&r);
    cr_assert_geq(sse_wait_events(w, 6, 10000), 6, "the leave");
    struct json_object *o = json_tokener_parse(w->ev[5].data);
    cr_assert_str_eq(w->ev[5].event, "presence");
    cr_assert_str_eq(itest_jstr(o, "action"), "leave");
    cr_assert_str_eq(itest_jstr(o, "member"), "bob");
    json_object_put(o);
    cr_assert_eq(
        itest_get(&c.node[(owner + 2) % CL_NODES], &r, PRES "/room?count=true"),
        200);
    cr_assert_eq(itest_jint(r.json, "count"), 2);
    itest_resp_free(&r);
    sse_close(w);
}

/* has_presence - c holds a presence event whose data has needle. */
static int
has_presence(const struct sse_client *w, const char *needle)
{
    for (size_t i = 0; i < w->nev; i++)
        if (strcmp(w->ev[i].event, "presence") == 0 &&
            strstr(w->ev[i].data, needle) != NULL)
            return 1;
    return 0;
}

/* wait_presence - pump w until it holds a presence event with needle. */
static int
wait_presence(struct sse_client *w, const char *needle, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    while (!has_presence(w, needle) && itest_now_ms() < end)
        sse_wait_events(w, w->nev + 1, 50);
    return has_presence(w, needle);
}

Test(cluster_presence, events_reach_streams_on_every_node)
{
    struct itest_resp r = {0};
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    struct sse_client *w[CL_NODES];

    cr_assert_eq(itest_req(&c.node[owner], "POST", PRES "/enter",
                           "{\"channel\":\"room\",\"member\":\"early\","
                           "\"ttlSeconds\":60}",
                           &r),
                 200);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++) {
        cr_assert_not_null(w[i] = calloc(1, sizeof(*w[i])));
        sse_open(w[i], &c.node[i],
                 "/api/v1/ephemeral/subscribe?presence_events=room&from=last",
                 NULL);
        cr_assert(wait_presence(w[i], "\"sync\"", 10000), "node %d: no sync",
                  i);
        cr_assert(has_presence(w[i], "\"member\":\"early\""),
                  "node %d: the sync has the member", i);
    }
    int other = (owner + 1) % CL_NODES;
    cr_assert_eq(itest_req(&c.node[other], "POST", PRES "/enter",
                           "{\"channel\":\"room\",\"member\":\"late\","
                           "\"ttlSeconds\":60}",
                           &r),
                 200);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++) {
        cr_assert(wait_presence(
                      w[i], "\"action\":\"enter\",\"member\":\"late\"", 10000),
                  "node %d: no enter", i);
        sse_close(w[i]);
    }
}

/* conns_of - member's connections in the channel's listing through node
 * i; -1 when it is not listed, -2 when the node did not answer 200. */
static int64_t
conns_of(int i, const char *member)
{
    struct itest_resp r = {0};
    int64_t n = -1;

    if (itest_get(&c.node[i], &r, PRES "/room") != 200) {
        itest_resp_free(&r); /* owners changing: 503, asked again */
        return -2;
    }
    for (int k = 0; k < itest_jlen(r.json, "members"); k++) {
        char p[64];
        snprintf(p, sizeof(p), "members.%d.member", k);
        if (strcmp(itest_jstr(r.json, p), member) == 0) {
            snprintf(p, sizeof(p), "members.%d.connections", k);
            n = itest_jint(r.json, p);
        }
    }
    itest_resp_free(&r);
    return n;
}

/* wait_conns - until member has want connections through node i. */
static void
wait_conns(int i, const char *member, int64_t want, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    while (conns_of(i, member) != want && itest_now_ms() < end)
        itest_sleep_ms(20);
    cr_assert_eq(conns_of(i, member), want, "%s through node %d", member, i);
}

Test(cluster_presence, two_streams_through_two_nodes_are_one_member)
{
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int a = (owner + 1) % CL_NODES, b = (owner + 2) % CL_NODES;
    struct sse_client *s1 = calloc(1, sizeof(*s1)),
                      *s2 = calloc(1, sizeof(*s2));
    const char *path = "/api/v1/ephemeral/subscribe?presence=room&member=ada";

    sse_open(s1, &c.node[a], path, NULL);
    sse_open(s2, &c.node[b], path, NULL);
    cr_assert_geq(sse_wait_events(s1, 1, 10000), 1);
    cr_assert_geq(sse_wait_events(s2, 1, 10000), 1);
    for (int i = 0; i < CL_NODES; i++)
        wait_conns(i, "ada", 2, 10000);
    struct itest_resp r = {0};
    cr_assert_eq(itest_get(&c.node[owner], &r, PRES "/room?count=true"), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 1, "one member");
    itest_resp_free(&r);
    sse_close(s1);
    wait_conns(owner, "ada", 1, 10000);
    sse_close(s2);
    wait_conns(owner, "ada", 0, 10000);
}

static void
up_short(void)
{
    cl_up(&c, "member_ttl_ms=2000 presence_grace_ms=1000");
}

/* kill -9 of the channel's owner: the members whose streams are on the
 * other two nodes are whole again on the new owner within member_ttl_ms
 * and one grace (their nodes announce them every second). */
Test(cluster_presence, after_the_owners_crash_the_set_is_rebuilt,
     .init = up_short)
{
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int a = (owner + 1) % CL_NODES, b = (owner + 2) % CL_NODES;
    struct sse_client *s[4];
    const char *who[4] = {"ada", "ada", "bob", "cy"};
    int on[4] = {a, b, a, b};
    char path[128];

    for (int i = 0; i < 4; i++) {
        cr_assert_not_null(s[i] = calloc(1, sizeof(*s[i])));
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/subscribe?presence=room&member=%s", who[i]);
        sse_open(s[i], &c.node[on[i]], path, NULL);
        cr_assert_geq(sse_wait_events(s[i], 1, 10000), 1);
    }
    wait_conns(a, "ada", 2, 10000);
    wait_conns(a, "bob", 1, 10000);
    wait_conns(a, "cy", 1, 10000);
    cl_kill(&c, owner);
    int64_t t0 = itest_now_ms();
    /* the survivors see the owner dead after member_ttl_ms, then the new
     * owner hears the announcements */
    wait_conns(a, "ada", 2, 2000 + 1000 + 3000);
    wait_conns(b, "bob", 1, 3000);
    wait_conns(b, "cy", 1, 3000);
    int64_t took = itest_now_ms() - t0;
    cr_assert_leq(took, 2000 + 1000 + 3000, "whole again after %lld ms",
                  (long long)took);
    struct itest_resp r = {0};
    cr_assert_eq(itest_get(&c.node[b], &r, PRES "/room?count=true"), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 3, "no ghost, none missing");
    itest_resp_free(&r);
    for (int i = 0; i < 4; i++)
        sse_close(s[i]);
}

/* kill -9 of a node that holds a member's only stream: the owner drops
 * that node's connections once it is dead, and the member leaves one
 * grace later (no ghost); a member with a stream elsewhere stays. */
Test(cluster_presence, a_dead_nodes_members_leave_after_the_grace,
     .init = up_short)
{
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int a = (owner + 1) % CL_NODES, b = (owner + 2) % CL_NODES;
    struct sse_client *s1 = calloc(1, sizeof(*s1)),
                      *s2 = calloc(1, sizeof(*s2)),
                      *s3 = calloc(1, sizeof(*s3));

    sse_open(s1, &c.node[a],
             "/api/v1/ephemeral/subscribe?presence=room&member=gone", NULL);
    sse_open(s2, &c.node[a],
             "/api/v1/ephemeral/subscribe?presence=room&member=stays", NULL);
    sse_open(s3, &c.node[b],
             "/api/v1/ephemeral/subscribe?presence=room&member=stays", NULL);
    cr_assert_geq(sse_wait_events(s1, 1, 10000), 1);
    cr_assert_geq(sse_wait_events(s2, 1, 10000), 1);
    cr_assert_geq(sse_wait_events(s3, 1, 10000), 1);
    wait_conns(owner, "gone", 1, 10000);
    wait_conns(owner, "stays", 2, 10000);
    cl_kill(&c, a);
    wait_conns(owner, "gone", -1, 2000 + 1000 + 3000);
    wait_conns(owner, "stays", 1, 1000);
    sse_close(s1);
    sse_close(s2);
    sse_close(s3);
}
