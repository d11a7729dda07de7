/*
 * test_presence.c - presence on one node (SPEC §12): enter, update, renew
 * and leave by call; a call member's ttl; listing paged and counted;
 * every malformed call refused naming its field; the bounds (members a
 * channel, the 10,001st at the default; data); the presence and read
 * permissions, and tenants that keep channels apart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "http/auth.h"
#include "test/integration/node.h"

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
    char dir[256], file[300], opts[400], hash[AUTH_HASH_TEXT];
    FILE *f;

    itest_test_dir(dir, sizeof(dir));
    snprintf(file, sizeof(file), "%s/tokens", dir);
    cr_assert_not_null(f = fopen(file, "w"));
    for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++) {
        auth_hash_text(toks[i][0], strlen(toks[i][0]), hash);
        fprintf(f, "%s %s\n", hash, toks[i][1]);
    }
    fclose(f);
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

Test(presence, members_count_in_the_nodes_memory)
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
    itest_node_stop(&n, 10000);
}
