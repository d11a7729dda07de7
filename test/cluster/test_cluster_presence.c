/*
 * test_cluster_presence.c - presence across three real nodes (SPEC §12):
 * a channel lives on its HRW owner (the owner of its presence name and
 * Default, as every node computes it) and every call works through any
 * node: enter, leave, list, count; the members sit on the owner alone;
 * events of calls made through other nodes reach a stream on the owner.
 * The owner's SIGTERM hands its set over (no enter or leave for it); its
 * kill -9 leaves the set to be rebuilt from the streams' announcements;
 * when it comes back, the node that held the set meanwhile moves it back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/cluster/suite.h"
#include "test/integration/presence_list.h"
#include "test/integration/sse.h"

#define PRES "/api/v1/presence"

static struct cl c;

CL_SUITE(cluster_presence, &c, "member_ttl_ms=60000", CL_SUITE_STARTED,
         .timeout = 180);

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

/* open_synced - an events stream of room through node i, with from=last,
 * until its sync is in.  A stream the node ends with retry: (its watch of
 * the owner could not connect, as on a loaded machine) is opened again,
 * as EventSource does. */
static int
open_synced(struct sse_client *w, int i, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    for (;;) {
        sse_open(w, &c.node[i],
                 "/api/v1/ephemeral/subscribe?presence_events=room&from=last",
                 NULL);
        while (!has_presence(w, "\"sync\"") && !w->closed &&
               itest_now_ms() < end)
            sse_wait_events(w, w->nev + 1, 50);
        if (has_presence(w, "\"sync\"") || itest_now_ms() >= end)
            return has_presence(w, "\"sync\"");
        sse_close(w);
        itest_sleep_ms(100);
    }
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
        cr_assert(open_synced(w[i], i, 10000), "node %d: no sync", i);
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

/* conns_of - member's connections in room's listing through node i
 * (itest_member_conns). */
static int64_t
conns_of(int i, const char *member)
{
    return itest_member_conns(&c.node[i], "room", member);
}

/* wait_conns - until member has want connections through node i. */
static void
wait_conns(int i, const char *member, int64_t want, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    int64_t n;

    while ((n = conns_of(i, member)) != want && itest_now_ms() < end)
        itest_sleep_ms(20);
    cr_assert_eq(n, want, "%s through node %d: %lld connections, not %lld",
                 member, i, (long long)n, (long long)want);
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

/* MANY member streams m000.. on the two nodes a and b (even on a, odd
 * on b; every tenth has one on each: one member, two connections), each
 * open (its first event in) on return. */
#define MANY 100
static struct sse_client many[MANY + MANY / 10];

static void
open_many(int a, int b)
{
    char path[128];
    int k = 0;

    for (int i = 0; i < MANY; i++) {
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/subscribe?presence=room&member=m%03d", i);
        sse_open(&many[k++], &c.node[i % 2 ? b : a], path, NULL);
        if (i % 10 == 0)
            sse_open(&many[k++], &c.node[i % 2 ? a : b], path, NULL);
    }
    for (int i = 0; i < k; i++)
        cr_assert_geq(sse_wait_events(&many[i], 1, 10000), 1, "stream %d", i);
}

static void
close_many(void)
{
    for (size_t i = 0; i < sizeof(many) / sizeof(many[0]); i++)
        sse_close(&many[i]);
}

/* count_through - the channel's count through node i; -1 when it did
 * not answer 200 (owners changing: asked again). */
static int64_t
count_through(int i)
{
    return itest_presence_count(&c.node[i], "room");
}

/* wait_count - until the count through node i is want; how long it took
 * (ms), or -1 past timeout_ms. */
static int64_t
wait_count(int i, int64_t want, int timeout_ms)
{
    int64_t t0 = itest_now_ms();

    while (count_through(i) != want)
        if (itest_now_ms() - t0 > timeout_ms)
            return -1;
        else
            itest_sleep_ms(20);
    return itest_now_ms() - t0;
}

/* kill -9 of the channel's owner: the members whose streams are on the
 * other two nodes (MANY and a few more) are whole again on the new owner
 * within member_ttl_ms and one grace (their nodes announce them every
 * second), with no ghost. */
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
    open_many(a, b);
    wait_conns(a, "ada", 2, 10000);
    wait_conns(a, "bob", 1, 10000);
    wait_conns(a, "cy", 1, 10000);
    wait_conns(a, "m000", 2, 10000);
    cr_assert_geq(wait_count(a, 3 + MANY, 10000), 0, "all in before");
    cl_kill(&c, owner);
    int64_t t0 = itest_now_ms();
    /* the survivors see the owner dead after member_ttl_ms, then the new
     * owner hears the announcements */
    wait_conns(a, "ada", 2, 2000 + 1000 + 3000);
    wait_conns(b, "bob", 1, 3000);
    wait_conns(b, "cy", 1, 3000);
    cr_assert_geq(wait_count(b, 3 + MANY, 3000), 0, "%lld members",
                  (long long)count_through(b));
    int64_t took = itest_now_ms() - t0;
    cr_assert_leq(took, 2000 + 1000 + 3000, "whole again after %lld ms",
                  (long long)took);
    wait_conns(a, "m000", 2, 1000);
    wait_conns(b, "m099", 1, 1000);
    cr_assert_eq(count_through(a), 3 + MANY, "no ghost, none missing");
    for (int i = 0; i < 4; i++)
        sse_close(s[i]);
    close_many();
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

static void
up_drain(void)
{
    cl_up(&c, "member_ttl_ms=2000 presence_grace_ms=5000");
}

/* members_json - the members of the channel's listing through node i as
 * JSON text (malloc'd), or NULL when it did not answer 200. */
static char *
members_json(int i)
{
    struct itest_resp r = {0};
    char *out = NULL;

    if (itest_get(&c.node[i], &r, PRES "/room") == 200)
        out = strdup(json_object_to_json_string_ext(
            itest_jget(r.json, "members"), JSON_C_TO_STRING_PLAIN));
    itest_resp_free(&r);
    return out;
}

/* wait_members - the listing through node i once it answers 200 (5 s at
 * most: owners changing). */
static char *
wait_members(int i)
{
    int64_t end = itest_now_ms() + 5000;
    char *m;

    while ((m = members_json(i)) == NULL && itest_now_ms() < end)
        itest_sleep_ms(20);
    cr_assert_not_null(m, "node %d does not list the channel", i);
    return m;
}

/* A stream watching the channel's events, reopened where it left off
 * (Last-Event-ID) when the node ends it (its owner moved: retry). */
struct watcher {
    struct sse_client s;
    int node;
    int reopened;
    int storm; /* enter or leave events of members other than the
                  markers */
    char last[600];
    char why[256];
    int retry_ms;      /* the last retry: the node said */
    int64_t reopen_at; /* ended: reopened then, as a browser would */
};

static void
watcher_open(struct watcher *w)
{
    char hdr[700];
    const char *hdrs[] = {hdr, NULL};

    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", w->last);
    sse_open(&w->s, &c.node[w->node],
             "/api/v1/ephemeral/subscribe?presence_events=room",
             w->last[0] ? hdrs : NULL);
}

/* watcher_pump - read what came; note a storm; reopen a stream ended. */
static void
watcher_pump(struct watcher *w)
{
    if (w->reopen_at != 0) {
        if (itest_now_ms() < w->reopen_at)
            return;
        w->reopen_at = 0;
        watcher_open(w);
        w->reopened++;
    }
    sse_pump(&w->s);
    for (size_t i = 0; i < w->s.nev; i++) {
        const char *d = w->s.ev[i].data;
        if (strcmp(w->s.ev[i].event, "retry") == 0)
            w->retry_ms = atoi(d);
        if (strcmp(w->s.ev[i].event, "presence") == 0 &&
            (strstr(d, "\"action\":\"enter\"") ||
             strstr(d, "\"action\":\"leave\"")) &&
            !strstr(d, "\"member\":\"aa-marker\"") &&
            !strstr(d, "\"member\":\"zz-marker\"") && !w->storm) {
            w->storm = 1;
            snprintf(w->why, sizeof(w->why), "%.200s", d);
        }
    }
    if (w->s.last_id[0])
        snprintf(w->last, sizeof(w->last), "%s", w->s.last_id);
    if (w->s.closed) {
        sse_close(&w->s);
        w->reopen_at = itest_now_ms() + w->retry_ms;
    }
}

/* watcher_has - w's events hold needle (events kept until closed: the
 * marker's is looked for right after it is sent). */
static int
watcher_has(struct watcher *w, const char *needle, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    for (;;) {
        for (size_t i = 0; i < w->s.nev; i++)
            if (strstr(w->s.ev[i].data, needle) != NULL)
                return 1;
        if (itest_now_ms() >= end)
            return 0;
        watcher_pump(w);
        itest_sleep_ms(10);
    }
}

/* events_on - node i's mayfly_presence_events_total for action. */
static double
events_on(int i, const char *action)
{
    char series[96];
    double v = 0;

    snprintf(series, sizeof(series),
             "mayfly_presence_events_total{action=\"%s\"}", action);
    cr_assert_eq(itest_metric(&c.node[i], series, &v), 0, "%s", series);
    return v;
}

/* no_enter_storm - after a move: through two rounds of the nodes'
 * announcements (a set rebuilt from them would show as enters by then),
 * then until a marker entered through node b reaches both watchers, no
 * watcher saw an enter storm. */
static void
no_enter_storm(int b, struct watcher w[2])
{
    struct itest_resp r = {0};
    int64_t until = itest_now_ms() + 2500;

    while (itest_now_ms() < until) {
        for (int i = 0; i < 2; i++)
            watcher_pump(&w[i]);
        itest_sleep_ms(20);
    }
    cr_assert_eq(itest_post(&c.node[b], &r, PRES "/enter",
                            "{\"channel\":\"room\",\"member\":\"zz-marker\","
                            "\"ttlSeconds\":60}"),
                 200);
    itest_resp_free(&r);
    for (int i = 0; i < 2; i++) {
        cr_assert(watcher_has(&w[i], "\"member\":\"zz-marker\"", 15000),
                  "watcher %d (reopened %d times)", i, w[i].reopened);
        cr_assert_not(w[i].storm, "watcher %d got %s", i, w[i].why);
    }
}

/* members_and_watchers - the set the hand-over tests move: MANY stream
 * members on nodes a and b (open_many), six call members entered
 * through every node, and a watcher of the channel's events on a and on
 * b, live once a marker's enter reached both. */
static void
members_and_watchers(int a, int b, struct watcher w[2])
{
    struct itest_resp r = {0};
    char body[256];

    open_many(a, b);
    for (int i = 0; i < 6; i++) { /* call members, through every node */
        snprintf(
            body, sizeof(body),
            "{\"channel\":\"room\",\"member\":\"bot%d\",\"data\":{\"n\":%d},"
            "\"ttlSeconds\":60}",
            i, i);
        cr_assert_eq(
            itest_req(&c.node[i % CL_NODES], "POST", PRES "/enter", body, &r),
            200, "%s", r.body);
        itest_resp_free(&r);
    }
    cr_assert_geq(wait_count(a, MANY + 6, 10000), 0, "%lld members",
                  (long long)count_through(a));
    wait_conns(a, "m000", 2, 10000);
    wait_conns(a, "m010", 2, 10000);
    for (int i = 0; i < 2; i++) {
        w[i].node = i ? b : a;
        watcher_open(&w[i]);
        /* open comes once the watch on the owner says where it starts */
        cr_assert_geq(sse_wait_events(&w[i].s, 1, 10000), 1);
        cr_assert_str_eq(w[i].s.ev[0].event, "open");
    }
    /* the watchers are live: a marker's enter reaches both */
    cr_assert_eq(itest_post(&c.node[a], &r, PRES "/enter",
                            "{\"channel\":\"room\",\"member\":\"aa-marker\","
                            "\"ttlSeconds\":60}"),
                 200);
    itest_resp_free(&r);
    for (int i = 0; i < 2; i++)
        cr_assert(watcher_has(&w[i], "\"member\":\"aa-marker\"", 10000),
                  "watcher %d: status %d, %zu events, first %s: %.300s", i,
                  w[i].s.status, w[i].s.nev,
                  w[i].s.nev ? w[i].s.ev[0].event : "-",
                  w[i].s.nev ? w[i].s.ev[0].data : w[i].s.head);
}

/* SIGTERM of the channel's owner with MANY members whose streams are on
 * the other two nodes, and call members: the next owner has the same set
 * at once (since, data, connections), and no stream watching the
 * channel's events gets an enter or a leave for any of them. */
Test(cluster_presence, a_sigterm_hands_the_set_over_with_no_event,
     .init = up_drain)
{
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int a = (owner + 1) % CL_NODES, b = (owner + 2) % CL_NODES;
    static struct watcher w[2];

    members_and_watchers(a, b, w);
    char *before = wait_members(a);
    double enters = events_on(a, "enter") + events_on(b, "enter");
    double leaves = events_on(a, "leave") + events_on(b, "leave");

    cr_assert_eq(cl_stop(&c, owner, 30000), 0, "a clean stop");
    cr_expect(
        itest_node_log_contains(&c.node[owner], "handed presence over to node"),
        "the owner says it handed the channel over");
    for (int i = 0; i < 2; i++) {
        char *after = wait_members(i ? b : a);
        cr_expect_str_eq(after, before, "the set through node %d", i ? b : a);
        free(after);
    }
    no_enter_storm(b, w);
    /* and none was made: a watcher that came back after the move may
     * have been resumed past what its partition's move lost */
    cr_assert_eq(events_on(a, "enter") + events_on(b, "enter"), enters + 1,
                 "the next owner's enters: zz-marker's alone");
    cr_assert_eq(events_on(a, "leave") + events_on(b, "leave"), leaves);
    cr_assert_eq(count_through(a), MANY + 6 + 2, "the markers joined");
    free(before);
    for (int i = 0; i < 2; i++)
        sse_close(&w[i].s);
    close_many();
}

/* channels_on - node i's mayfly_presence_channels. */
static double
channels_on(int i)
{
    double v = -1;

    cr_assert_eq(itest_metric(&c.node[i], "mayfly_presence_channels", &v), 0);
    return v;
}

/* wait_same - until the listing through node i is want (JSON text),
 * timeout_ms at most. */
static void
wait_same(int i, const char *want, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;
    char *m = wait_members(i);

    while (strcmp(m, want) != 0 && itest_now_ms() < end) {
        free(m);
        itest_sleep_ms(50);
        m = wait_members(i);
    }
    cr_expect_str_eq(m, want, "the set through node %d", i);
    free(m);
}

/* A rolling restart: SIGTERM of the channel's owner (its set handed over
 * to the next owner), then the owner back, ready and the HRW owner again:
 * the next owner moves the set back (a join's hand-over), so the listing
 * through every node is the same as before (stream members and call
 * members with ttlSeconds, which no announcement brings back), no
 * watcher got an enter or a leave for any of them, and the node that held
 * the set meanwhile holds it no longer (its metrics fall back). */
Test(cluster_presence, a_rolling_restart_moves_the_set_back_with_no_event,
     .init = up_drain)
{
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int a = (owner + 1) % CL_NODES, b = (owner + 2) % CL_NODES;
    int holder = cl_owner("\x1eroom", "Default", CL_ALL & ~(1u << owner));
    static struct watcher w[2];

    members_and_watchers(a, b, w);
    char *before = wait_members(a);
    double enters = events_on(a, "enter") + events_on(b, "enter");
    double leaves = events_on(a, "leave") + events_on(b, "leave");
    double held_members = members_on(holder), held_channels;

    /* the owner stops: its set goes to the holder */
    cr_assert_eq(cl_stop(&c, owner, 30000), 0, "a clean stop");
    cr_assert_geq(wait_count(a, MANY + 7, 10000), 0);
    cr_assert_eq(members_on(holder), held_members + MANY + 7,
                 "the holder has the set");
    held_channels = channels_on(holder);

    /* and comes back: ready, and the owner again as every node sees it */
    cl_start(&c, owner, "member_ttl_ms=2000 presence_grace_ms=5000");
    cl_wait_view(&c, CL_ALL);
    cr_assert_geq(wait_count(owner, MANY + 7, 10000), 0, "%lld members",
                  (long long)count_through(owner));
    /* the holder lets its copy go once the owner took it */
    int64_t end = itest_now_ms() + 10000;
    while (members_on(holder) != held_members && itest_now_ms() < end) {
        for (int i = 0; i < 2; i++)
            watcher_pump(&w[i]);
        itest_sleep_ms(50);
    }
    cr_assert_eq(members_on(holder), held_members, "the holder's copy went");
    /* the owner took no announcement of a member before the copies */
    for (end = itest_now_ms() + 5000;
         !itest_node_log_contains(&c.node[owner], "presence: settled with") &&
         itest_now_ms() < end;)
        itest_sleep_ms(50);
    cr_assert(itest_node_log_contains(&c.node[owner],
                                      "presence: settled with every live "
                                      "peer's copy"));
    cr_assert_eq(channels_on(holder), held_channels - 1);
    cr_assert_eq(members_on(owner), MANY + 7, "the owner holds the set");
    for (int i = 0; i < CL_NODES; i++) /* the holder's own streams' counts
                                          come from its workers (a second) */
        wait_same(i, before, 5000);
    no_enter_storm(b, w);
    /* and none was made: the owner's counters began at its restart */
    cr_assert_eq(events_on(a, "enter") + events_on(b, "enter") +
                     events_on(owner, "enter"),
                 enters + 1,
                 "the enters since: zz-marker's alone (%g before on %d and "
                 "%d; now %g, %g, owner %d: %g)",
                 enters, a, b, events_on(a, "enter"), events_on(b, "enter"),
                 owner, events_on(owner, "enter"));
    cr_assert_eq(events_on(a, "leave") + events_on(b, "leave") +
                     events_on(owner, "leave"),
                 leaves);
    cr_assert_eq(count_through(b), MANY + 6 + 2, "the markers joined");
    free(before);
    for (int i = 0; i < 2; i++)
        sse_close(&w[i].s);
    close_many();
}

/* A stream that opened on a node while it owned the channel (the owner
 * was stopped), and that ends after the owner came back and took the set:
 * its end reaches the owner, so its member leaves one grace later, with
 * one leave event and no enter (no ghost of it on the owner). */
Test(cluster_presence, a_stream_that_opened_on_the_older_owner_leaves_the_new,
     .init = up_drain)
{
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int holder = cl_owner("\x1eroom", "Default", CL_ALL & ~(1u << owner));
    struct sse_client *s = calloc(1, sizeof(*s));

    cr_assert_not_null(s);
    cr_assert_eq(cl_stop(&c, owner, 30000), 0, "a clean stop");
    cr_assert_geq(wait_count(holder, 0, 10000), 0, "the holder serves");
    sse_open(s, &c.node[holder],
             "/api/v1/ephemeral/subscribe?presence=room&member=once", NULL);
    cr_assert_geq(sse_wait_events(s, 1, 10000), 1);
    wait_conns(holder, "once", 1, 10000);
    cr_assert_eq(members_on(holder), 1, "attached on the holder");

    /* the owner back: the holder moves the member to it and lets it go */
    cl_start(&c, owner, "member_ttl_ms=2000 presence_grace_ms=5000");
    cl_wait_view(&c, CL_ALL);
    int64_t end = itest_now_ms() + 10000;
    while ((members_on(holder) != 0 || members_on(owner) != 1) &&
           itest_now_ms() < end)
        itest_sleep_ms(50);
    cr_assert_eq(members_on(holder), 0, "the holder's copy went");
    cr_assert_eq(members_on(owner), 1, "the owner holds the member");
    wait_conns(owner, "once", 1, 5000);

    /* the stream ends on the holder: its end goes to the owner */
    sse_close(s);
    free(s);
    wait_conns(owner, "once", 0, 5000);
    wait_conns(owner, "once", -1, 5000 + 3000);
    for (int i = 0; i < CL_NODES; i++)
        cr_assert_eq(count_through(i), 0, "no ghost through node %d", i);
    cr_assert_eq(events_on(owner, "leave"), 1, "its leave");
    cr_assert_eq(events_on(owner, "enter"), 0, "moved with no enter");
}
