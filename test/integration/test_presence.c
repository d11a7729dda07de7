/*
 * test_presence.c - presence on one node (SPEC §12): enter, update, renew
 * and leave by call; a call member's ttl; listing paged and counted;
 * every malformed call refused naming its field; the bounds (members a
 * channel, the 10,001st at the default; data); the presence and read
 * permissions, and tenants that keep channels apart.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"
#include "test/integration/presence_list.h"
#include "test/integration/sse.h"
#include "test/integration/tokens.h"

#define PRES "/api/v1/presence"

TestSuite(presence, .timeout = 120);

/* enter - POST enter of member to channel with data (JSON text or NULL)
 * and ttl; the status. */
static long
enter(const struct itest_node *n, const char *channel, const char *member,
      const char *data, int ttl, struct itest_resp *r)
{
    char body[2048];

    snprintf(body, sizeof(body),
             "{\"channel\":\"%s\",\"member\":\"%s\"%s%s,\"ttlSeconds\":%d}",
             channel, member, data ? ",\"data\":" : "", data ? data : "", ttl);
    return itest_req(n, "POST", PRES "/enter", body, r);
}

/* count - the channel's count through ?count=true. */
static int64_t
count(const struct itest_node *n, const char *channel)
{
    struct itest_resp r = {0};
    char esc[256];
    int64_t c;

    cr_assert_eq(itest_get(n, &r, PRES "/%s?count=true",
                           itest_esc(channel, esc, sizeof(esc))),
                 200, "%s", r.body);
    c = itest_jint(r.json, "count");
    cr_assert_eq(itest_jlen(r.json, "members"), -1, "count alone: %s", r.body);
    itest_resp_free(&r);
    return c;
}

Test(presence, enter_update_renew_list_and_leave)
{
    struct itest_node n;
    struct itest_resp r = {0};

    itest_node_start(&n, "workers=2");
    cr_assert_eq(enter(&n, "room 7", "ada", "{\"typing\":false}", 60, &r), 200,
                 "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "action"), "enter");
    cr_assert_str_eq(itest_jstr(r.json, "channel"), "room 7");
    itest_resp_free(&r);
    cr_assert_eq(enter(&n, "room 7", "ada", "{\"typing\":false}", 60, &r), 200);
    cr_assert_str_eq(itest_jstr(r.json, "action"), "renew");
    itest_resp_free(&r);
    cr_assert_eq(enter(&n, "room 7", "ada", "{\"typing\":true}", 60, &r), 200);
    cr_assert_str_eq(itest_jstr(r.json, "action"), "update");
    itest_resp_free(&r);
    cr_assert_eq(enter(&n, "room 7", "bob", NULL, 60, &r), 200);
    itest_resp_free(&r);
    cr_assert_eq(itest_get(&n, &r, PRES "/room%%207"), 200, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "count"), 2);
    cr_assert_eq(itest_jlen(r.json, "members"), 2);
    cr_assert_str_eq(itest_jstr(r.json, "members.0.member"), "ada");
    cr_assert_eq(itest_jbool(r.json, "members.0.data.typing"), 1);
    cr_assert_eq(itest_jint(r.json, "members.0.connections"), 0);
    cr_assert_gt(itest_jint(r.json, "members.0.since"), 1600000000000LL);
    cr_assert_str_eq(itest_jstr(r.json, "members.1.member"), "bob");
    cr_assert_null(itest_jget(r.json, "members.1.data"));
    cr_assert_eq(itest_jbool(r.json, "truncated"), 0);
    itest_resp_free(&r);
    cr_assert_eq(count(&n, "room 7"), 2);
    cr_assert_eq(itest_post(&n, &r, PRES "/leave",
                            "{\"channel\":\"room 7\",\"member\":\"ada\"}"),
                 200);
    cr_assert_eq(itest_jbool(r.json, "left"), 1);
    itest_resp_free(&r);
    cr_assert_eq(itest_post(&n, &r, PRES "/leave",
                            "{\"channel\":\"room 7\",\"member\":\"ada\"}"),
                 200);
    cr_assert_eq(itest_jbool(r.json, "left"), 0);
    itest_resp_free(&r);
    cr_assert_eq(count(&n, "room 7"), 1);
    cr_assert_eq(count(&n, "empty"), 0);
    /* the channel's events queue is no client's queue */
    cr_assert_eq(itest_get(&n, &r, "/api/v1/ephemeral/queues"), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 0, "%s", r.body);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

Test(presence, a_call_member_leaves_when_its_ttl_passes)
{
    struct itest_node n;
    struct itest_resp r = {0};
    int64_t t0, left = -1;

    itest_node_start(&n, "workers=1");
    cr_assert_eq(enter(&n, "room", "bot", "1", 1, &r), 200);
    itest_resp_free(&r);
    t0 = itest_now_ms();
    cr_assert_eq(count(&n, "room"), 1);
    while (itest_now_ms() - t0 < 5000 && count(&n, "room") == 1)
        itest_sleep_ms(20);
    left = itest_now_ms() - t0;
    cr_assert_eq(count(&n, "room"), 0);
    cr_assert_geq(left, 900, "left after %lld ms", (long long)left);
    itest_node_stop(&n, 10000);
}

Test(presence, the_listing_is_sorted_and_paged)
{
    struct itest_node n;
    struct itest_resp r = {0};
    char m[16];

    itest_node_start(&n, "workers=1");
    for (int i = 9; i >= 0; i--) {
        snprintf(m, sizeof(m), "m%d", i);
        cr_assert_eq(enter(&n, "c", m, NULL, 60, &r), 200);
        itest_resp_free(&r);
    }
    cr_assert_eq(itest_get(&n, &r, PRES "/c?limit=4"), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 10);
    cr_assert_eq(itest_jlen(r.json, "members"), 4);
    cr_assert_str_eq(itest_jstr(r.json, "members.0.member"), "m0");
    cr_assert_str_eq(itest_jstr(r.json, "members.3.member"), "m3");
    cr_assert_eq(itest_jbool(r.json, "truncated"), 1);
    cr_assert_str_eq(itest_jstr(r.json, "next"), "m3");
    itest_resp_free(&r);
    cr_assert_eq(itest_get(&n, &r, PRES "/c?limit=4&after=m7"), 200);
    cr_assert_eq(itest_jlen(r.json, "members"), 2);
    cr_assert_str_eq(itest_jstr(r.json, "members.0.member"), "m8");
    cr_assert_eq(itest_jbool(r.json, "truncated"), 0);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

Test(presence, malformed_calls_are_refused_naming_the_field)
{
    static const struct {
        const char *path, *body, *code, *field;
        long status;
    } bad[] = {
        {PRES "/enter", "{\"member\":\"a\",\"ttlSeconds\":5}",
         "ephemeral_bad_request", "channel", 400},
        {PRES "/enter", "{\"channel\":\"c\",\"ttlSeconds\":5}",
         "ephemeral_bad_request", "member", 400},
        {PRES "/enter", "{\"channel\":\"c\",\"member\":\"a\"}",
         "ephemeral_bad_request", "ttlSeconds", 400},
        {PRES "/enter", "{\"channel\":\"c\",\"member\":\"a\",\"ttlSeconds\":0}",
         "ephemeral_bad_request", "ttlSeconds", 400},
        {PRES "/enter",
         "{\"channel\":\"c\",\"member\":\"a\",\"ttlSeconds\":\"5\"}",
         "ephemeral_bad_request", "ttlSeconds", 400},
        {PRES "/enter", "{\"channel\":5,\"member\":\"a\",\"ttlSeconds\":5}",
         "ephemeral_bad_request", "channel", 400},
        {PRES "/enter", "{\"channel\":\"\",\"member\":\"a\",\"ttlSeconds\":5}",
         "invalid_name", "channel", 400},
        {PRES "/enter",
         "{\"channel\":\"c\",\"member\":\"a\\u0001\",\"ttlSeconds\":5}",
         "invalid_name", "member", 400},
        {PRES "/enter",
         "{\"channel\":\"c\",\"member\":\"a\",\"ttlSeconds\":5,"
         "\"data\":\"0123456789abcdef\"}",
         "presence_data_too_large", "data", 413},
        {PRES "/enter", "[1]", "ephemeral_bad_request", NULL, 400},
        {PRES "/leave", "{\"channel\":\"c\"}", "ephemeral_bad_request",
         "member", 400},
    };
    struct itest_node n;
    struct itest_resp r = {0};

    itest_node_start(&n, "workers=1 presence_max_data=16");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        itest_req(&n, "POST", bad[i].path, bad[i].body, &r);
        itest_assert_error(&r, bad[i].status, bad[i].code, bad[i].field,
                           bad[i].body);
        itest_resp_free(&r);
    }
    cr_assert_eq(itest_get(&n, &r, PRES "/c?limit=x"), 400);
    itest_resp_free(&r);
    cr_assert_eq(itest_get(&n, &r, PRES "/c?count=maybe"), 400);
    itest_resp_free(&r);
    /* 16 bytes of data fit */
    cr_assert_eq(enter(&n, "c", "a", "\"0123456789abcd\"", 5, &r), 200, "%s",
                 r.body);
    itest_resp_free(&r);
    cr_assert_eq(count(&n, "c"), 1, "nothing else entered");
    itest_node_stop(&n, 10000);
}

Test(presence, a_full_channel_answers_presence_full)
{
    struct itest_node n;
    struct itest_resp r = {0};
    char m[16];

    itest_node_start(&n, "workers=2 presence_max_members=5");
    for (int i = 0; i < 5; i++) {
        snprintf(m, sizeof(m), "m%d", i);
        cr_assert_eq(enter(&n, "c", m, NULL, 60, &r), 200);
        itest_resp_free(&r);
    }
    enter(&n, "c", "m5", NULL, 60, &r);
    itest_assert_error(&r, 429, "presence_full", "presence_max_members",
                       "the sixth");
    cr_assert_str_neq(r.retry_after, "");
    itest_resp_free(&r);
    cr_assert_eq(enter(&n, "c", "m0", "2", 60, &r), 200, "a member in updates");
    itest_resp_free(&r);
    cr_assert_eq(enter(&n, "other", "m5", NULL, 60, &r), 200);
    itest_resp_free(&r);
    cr_assert_eq(count(&n, "c"), 5);
    itest_node_stop(&n, 10000);
}

/* The default bound: 10,000 members enter one channel, the 10,001st is
 * refused. */
Test(presence, the_10001st_member_at_the_default_is_refused)
{
    struct itest_node n;
    struct itest_resp r = {0};
    char m[16];

    itest_node_start(&n, "workers=1");
    for (int i = 0; i < 10000; i++) {
        snprintf(m, sizeof(m), "m%05d", i);
        cr_assert_eq(enter(&n, "big", m, NULL, 600, &r), 200, "%d: %s", i,
                     r.body);
        itest_resp_free(&r);
    }
    enter(&n, "big", "one-more", NULL, 600, &r);
    itest_assert_error(&r, 429, "presence_full", "10000", "10,001st");
    itest_resp_free(&r);
    cr_assert_eq(count(&n, "big"), 10000);
    cr_assert_eq(itest_get(&n, &r, PRES "/big"), 200);
    cr_assert_eq(itest_jlen(r.json, "members"), 1000);
    cr_assert_eq(itest_jbool(r.json, "truncated"), 1);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

/* tok_req - method path body with a bearer token. */
static long
tok_req(const struct itest_node *n, const char *tok, const char *method,
        const char *path, const char *body, struct itest_resp *r)
{
    char h[256];
    const char *hdrs[] = {h, NULL};

    snprintf(h, sizeof(h), "Authorization: Bearer %s", tok);
    return itest_req_with(n, method, path, body, hdrs, r);
}

Test(presence, permissions_and_tenants)
{
    static const char *const toks[][2] = {
        {"a-all", "tenant=a presence=room.* read=room.*"},
        {"a-read", "tenant=a read=room.*"},
        {"a-pres", "tenant=a presence=room.*"},
        {"b-all", "tenant=b presence=* read=*"},
    };
    struct itest_node n;
    struct itest_resp r = {0};
    char dir[256], file[300], opts[400];

    itest_test_dir(dir, sizeof(dir));
    itest_token_file(dir, toks, sizeof(toks) / sizeof(toks[0]), ~0u, file,
                     sizeof(file));
    snprintf(opts, sizeof(opts), "workers=1 auth_file=%s", file);
    itest_node_start(&n, opts);
    const char *in = "{\"channel\":\"room.1\",\"member\":\"ada\","
                     "\"ttlSeconds\":60}";
    cr_assert_eq(itest_req(&n, "POST", PRES "/enter", in, &r), 401);
    itest_resp_free(&r);
    tok_req(&n, "a-read", "POST", PRES "/enter", in, &r);
    itest_assert_error(&r, 403, "forbidden", "presence", "enter without it");
    itest_resp_free(&r);
    tok_req(&n, "a-all", "POST", PRES "/enter",
            "{\"channel\":\"hall\",\"member\":\"ada\",\"ttlSeconds\":60}", &r);
    itest_assert_error(&r, 403, "forbidden", "hall", "outside the glob");
    itest_resp_free(&r);
    cr_assert_eq(tok_req(&n, "a-pres", "POST", PRES "/enter", in, &r), 200,
                 "%s", r.body);
    itest_resp_free(&r);
    tok_req(&n, "a-pres", "GET", PRES "/room.1", NULL, &r);
    itest_assert_error(&r, 403, "forbidden", "read", "list without read");
    itest_resp_free(&r);
    cr_assert_eq(tok_req(&n, "a-read", "GET", PRES "/room.1", NULL, &r), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 1);
    cr_assert_str_eq(itest_jstr(r.json, "channel"), "room.1");
    itest_resp_free(&r);
    /* tenant b's room.1 is another channel */
    cr_assert_eq(tok_req(&n, "b-all", "GET", PRES "/room.1", NULL, &r), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 0);
    itest_resp_free(&r);
    cr_assert_eq(tok_req(&n, "b-all", "POST", PRES "/enter",
                         "{\"channel\":\"room.1\",\"member\":\"bea\","
                         "\"ttlSeconds\":60}",
                         &r),
                 200);
    itest_resp_free(&r);
    cr_assert_eq(tok_req(&n, "a-read", "GET", PRES "/room.1", NULL, &r), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 1);
    cr_assert_str_eq(itest_jstr(r.json, "members.0.member"), "ada");
    itest_resp_free(&r);
    /* the access_token parameter a page uses works here too */
    cr_assert_eq(itest_get(&n, &r, PRES "/room.1?access_token=b-all"), 200);
    cr_assert_str_eq(itest_jstr(r.json, "members.0.member"), "bea");
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

Test(presence, members_count_in_the_nodes_memory_and_the_metrics)
{
    struct itest_node n;
    struct itest_resp r = {0};
    double before, after;

    itest_node_start(&n, "workers=1");
    cr_assert_eq(itest_metric(&n, "mayfly_memory_used_bytes", &before), 0);
    cr_assert_eq(enter(&n, "c", "a", NULL, 60, &r), 200);
    itest_resp_free(&r);
    cr_assert_eq(itest_metric(&n, "mayfly_memory_used_bytes", &after), 0);
    cr_assert_geq(after - before, 1024 + 512, "a member's record counts");
    cr_assert_eq(enter(&n, "c", "b", "1", 60, &r), 200);
    itest_resp_free(&r);
    cr_assert_eq(enter(&n, "c", "b", "2", 60, &r), 200);
    itest_resp_free(&r);
    cr_assert_eq(enter(&n, "d", "a", NULL, 60, &r), 200);
    itest_resp_free(&r);
    cr_assert_eq(itest_post(&n, &r, PRES "/leave",
                            "{\"channel\":\"d\",\"member\":\"a\"}"),
                 200);
    itest_resp_free(&r);
    cr_assert_eq(itest_metric(&n, "mayfly_presence_members", &after), 0);
    cr_assert_eq(after, 2);
    cr_assert_eq(itest_metric(&n, "mayfly_presence_channels", &after), 0);
    cr_assert_eq(after, 1);
    cr_assert_eq(itest_metric(&n,
                              "mayfly_presence_events_total{action=\"enter\"}",
                              &after),
                 0);
    cr_assert_eq(after, 3);
    cr_assert_eq(itest_metric(&n,
                              "mayfly_presence_events_total{action=\"update\"}",
                              &after),
                 0);
    cr_assert_eq(after, 1);
    cr_assert_eq(itest_metric(&n,
                              "mayfly_presence_events_total{action=\"leave\"}",
                              &after),
                 0);
    cr_assert_eq(after, 1);
    itest_node_stop(&n, 10000);
}

/* ---- streams (stage 2) ---------------------------------------------- */

#define SUB "/api/v1/ephemeral/subscribe"

/* presence_events - the presence events c holds with action (NULL:
 * any) and member (NULL: any). */
static int
presence_events(const struct sse_client *c, const char *action,
                const char *member)
{
    int n = 0;

    for (size_t i = 0; i < c->nev; i++) {
        struct json_object *o;
        if (strcmp(c->ev[i].event, "presence") != 0 ||
            (o = json_tokener_parse(c->ev[i].data)) == NULL)
            continue;
        n += (action == NULL || strcmp(itest_jstr(o, "action"), action) == 0) &&
             (member == NULL || strcmp(itest_jstr(o, "member"), member) == 0);
        json_object_put(o);
    }
    return n;
}

static int
never(void *arg)
{
    (void)arg;
    return 0;
}

/* wait_event - pump c until it holds an event with action and member, or
 * timeout_ms pass; 1 when it came. */
static int
wait_event(struct sse_client *c, const char *action, const char *member,
           int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    while (presence_events(c, action, member) == 0 && itest_now_ms() < end) {
        struct sse_client *cs[] = {c};
        sse_poll(cs, 1, 20, never, NULL);
    }
    return presence_events(c, action, member) > 0;
}

/* wait_conns - until member has want connections (-1: gone), 5 s. */
static void
wait_conns(const struct itest_node *n, const char *channel, const char *member,
           int64_t want)
{
    int64_t end = itest_now_ms() + 5000;

    while (itest_member_conns(n, channel, member) != want &&
           itest_now_ms() < end)
        itest_sleep_ms(10);
    cr_assert_eq(itest_member_conns(n, channel, member), want, "%s in %s",
                 member, channel);
}

/* open_stream - a stream on path, its open event read. */
static struct sse_client *
open_stream(const struct itest_node *n, const char *path)
{
    struct sse_client *c = calloc(1, sizeof(*c));

    cr_assert_not_null(c);
    sse_open(c, n, path, NULL);
    cr_assert_geq(sse_wait_events(c, 1, 5000), 1, "%s: no open event", path);
    cr_assert_eq(c->status, 200, "%s: %d", path, c->status);
    cr_assert_str_eq(c->ev[0].event, "open");
    return c;
}

Test(presence, a_reconnect_within_the_grace_is_no_event_and_one_leave_after)
{
    struct itest_node n;
    struct sse_client *w, *a;
    int64_t closed, left;

    itest_node_start(&n, "workers=2 presence_grace_ms=1500");
    w = open_stream(&n, SUB "?presence_events=room&from=last");
    cr_assert(wait_event(w, "sync", NULL, 5000), "the sync comes first");
    cr_assert_str_eq(w->ev[1].event, "presence");
    a = open_stream(&n, SUB "?presence=room&member=ada&data=%7B%22t%22%3A1%7D");
    cr_assert(wait_event(w, "enter", "ada", 5000));
    wait_conns(&n, "room", "ada", 1);
    /* a reload: the stream drops and comes back at once */
    sse_close(a);
    a = open_stream(&n, SUB "?presence=room&member=ada");
    wait_conns(&n, "room", "ada", 1);
    /* past the grace of the first stream's close: nothing happened */
    cr_assert_not(wait_event(w, "leave", NULL, 2500));
    cr_assert_eq(presence_events(w, "enter", NULL), 1);
    cr_assert_eq(presence_events(w, NULL, NULL), 2, "sync and one enter");
    /* the last stream goes: one leave, after the grace */
    sse_close(a);
    closed = itest_now_ms();
    wait_conns(&n, "room", "ada", 0);
    cr_assert(wait_event(w, "leave", "ada", 5000));
    left = itest_now_ms() - closed;
    cr_assert_geq(left, 1400, "left %lld ms after the close", (long long)left);
    wait_conns(&n, "room", "ada", -1);
    cr_assert_not(wait_event(w, "enter", NULL, 300) &&
                  presence_events(w, "enter", NULL) > 1);
    cr_assert_eq(presence_events(w, "leave", NULL), 1, "exactly one leave");
    sse_close(w);
    itest_node_stop(&n, 10000);
}

Test(presence, two_streams_of_one_member_are_one_member)
{
    struct itest_node n;
    struct sse_client *w, *a1, *a2;
    struct itest_resp r = {0};

    itest_node_start(&n, "workers=2 presence_grace_ms=60000");
    w = open_stream(&n, SUB "?presence_events=room");
    a1 = open_stream(&n, SUB "?presence=room&member=ada");
    a2 = open_stream(&n, SUB "?presence=room&member=ada&presence_events=room");
    wait_conns(&n, "room", "ada", 2);
    cr_assert_eq(count(&n, "room"), 1);
    sse_close(a1);
    wait_conns(&n, "room", "ada", 1);
    /* an update by call reaches both watchers */
    cr_assert_eq(enter(&n, "room", "ada", "{\"typing\":true}", 60, &r), 200);
    cr_assert_str_eq(itest_jstr(r.json, "action"), "update");
    itest_resp_free(&r);
    cr_assert(wait_event(w, "update", "ada", 5000));
    cr_assert(wait_event(a2, "update", "ada", 5000));
    cr_assert_eq(presence_events(w, "enter", "ada"), 1);
    cr_assert_eq(presence_events(w, "leave", NULL), 0);
    /* leave by call: the stream's member goes at once */
    cr_assert_eq(itest_post(&n, &r, PRES "/leave",
                            "{\"channel\":\"room\",\"member\":\"ada\"}"),
                 200);
    itest_resp_free(&r);
    cr_assert(wait_event(w, "leave", "ada", 5000));
    sse_close(a2);
    sse_close(w);
    itest_node_stop(&n, 10000);
}

Test(presence, streams_need_the_presence_and_read_permissions)
{
    static const char *const toks[][2] = {
        {"sub-read", "tenant=a subscribe=* read=room"},
        {"sub-pres", "tenant=a subscribe=* presence=room"},
    };
    struct itest_node n;
    struct itest_resp r = {0};
    char dir[256], file[300], opts[400];

    itest_test_dir(dir, sizeof(dir));
    itest_token_file(dir, toks, sizeof(toks) / sizeof(toks[0]), ~0u, file,
                     sizeof(file));
    snprintf(opts, sizeof(opts), "workers=1 auth_file=%s", file);
    itest_node_start(&n, opts);
    itest_get(&n, &r, SUB "?presence=room&member=ada&access_token=sub-read");
    itest_assert_error(&r, 403, "forbidden", "presence", "a member stream");
    itest_resp_free(&r);
    itest_get(&n, &r, SUB "?presence_events=room&access_token=sub-pres");
    itest_assert_error(&r, 403, "forbidden", "read", "an events stream");
    itest_resp_free(&r);
    cr_assert_eq(tok_req(&n, "sub-read", "GET", PRES "/room", NULL, &r), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 0, "a refusal changes nothing");
    itest_resp_free(&r);
    struct sse_client *c =
        open_stream(&n, SUB "?presence=room&member=ada&access_token=sub-pres");
    cr_assert_eq(tok_req(&n, "sub-read", "GET", PRES "/room", NULL, &r), 200);
    cr_assert_eq(itest_jint(r.json, "count"), 1);
    itest_resp_free(&r);
    sse_close(c);
    itest_node_stop(&n, 10000);
}

Test(presence, a_killed_workers_streams_leave_after_the_grace)
{
    struct itest_node n;
    struct sse_client *a;
    pid_t wk[4];

    itest_node_start(&n, "workers=1 presence_grace_ms=300");
    a = open_stream(&n, SUB "?presence=room&member=ada");
    wait_conns(&n, "room", "ada", 1);
    cr_assert_eq(itest_node_workers(&n, wk, 4), 1);
    cr_assert_eq(kill(wk[0], SIGKILL), 0);
    cr_assert(sse_wait_closed(a, 5000), "the stream ends with its worker");
    /* the master drops the dead worker's connections: the grace, then the
     * member leaves; no ghost */
    wait_conns(&n, "room", "ada", -1);
    sse_close(a);
    itest_node_stop(&n, 10000);
}
