/*
 * test_presence_channels.c - a stream that names several channels with
 * repeated presence_events= parameters (SPEC §12 "several allowed") on one
 * node: each channel's events come, from=last syncs each, a resume with
 * Last-Event-ID resumes each (one it cannot is named as the channel in
 * `recovered`), and each counts toward stream_max_subs; an
 * empty or invalid channel, one named twice or one past the bound is a
 * 400 naming the parameter and the channel.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"
#include "test/integration/sse.h"

#define PRES "/api/v1/presence"
#define SUB  "/api/v1/ephemeral/subscribe"

TestSuite(presence_channels, .timeout = 120);

/* enter - a call member of channel, present for a minute. */
static void
enter(const struct itest_node *n, const char *channel, const char *member)
{
    struct itest_resp r = {0};
    char body[256];

    snprintf(body, sizeof(body),
             "{\"channel\":\"%s\",\"member\":\"%s\",\"ttlSeconds\":60}",
             channel, member);
    cr_assert_eq(itest_req(n, "POST", PRES "/enter", body, &r), 200, "%s",
                 r.body);
    itest_resp_free(&r);
}

/* has - c holds a presence event of channel with action and member (NULL:
 * any; a sync: one of its members).  How many. */
static int
has(const struct sse_client *c, const char *channel, const char *action,
    const char *member)
{
    int n = 0;

    for (size_t i = 0; i < c->nev; i++) {
        struct json_object *o, *m;
        if (strcmp(c->ev[i].event, "presence") != 0 ||
            (o = json_tokener_parse(c->ev[i].data)) == NULL)
            continue;
        int hit = strcmp(itest_jstr(o, "channel"), channel) == 0 &&
                  strcmp(itest_jstr(o, "action"), action) == 0;
        if (hit && member != NULL && strcmp(action, "sync") == 0) {
            hit = 0;
            m = itest_jget(o, "members");
            for (int k = 0; m != NULL && k < itest_jlen(o, "members"); k++)
                hit |= strcmp(json_object_get_string(json_object_object_get(
                                  json_object_array_get_idx(m, (size_t)k),
                                  "member")),
                              member) == 0;
        } else if (hit && member != NULL)
            hit = strcmp(itest_jstr(o, "member"), member) == 0;
        n += hit;
        json_object_put(o);
    }
    return n;
}

/* wait_has - pump c until has() says so, 5 s; 1 when it came. */
static int
wait_has(struct sse_client *c, const char *channel, const char *action,
         const char *member)
{
    int64_t end = itest_now_ms() + 5000;

    while (!has(c, channel, action, member) && itest_now_ms() < end)
        sse_wait_events(c, c->nev + 1, 50);
    return has(c, channel, action, member) > 0;
}

/* open_stream - a stream on path (with header, or NULL), its open event
 * read and saying subs subscriptions. */
static struct sse_client *
open_stream(const struct itest_node *n, const char *path, const char *header,
            int subs)
{
    struct sse_client *c = calloc(1, sizeof(*c));
    const char *const headers[] = {header, NULL};
    char want[32];

    cr_assert_not_null(c);
    sse_open(c, n, path, header != NULL ? headers : NULL);
    size_t o = header != NULL; /* a resume says `recovered` first (§11) */

    cr_assert_geq(sse_wait_events(c, o + 1, 5000), o + 1, "%s: no open event",
                  path);
    cr_assert_eq(c->status, 200, "%s: %d", path, c->status);
    if (o)
        cr_assert_str_eq(c->ev[0].event, "recovered");
    cr_assert_str_eq(c->ev[o].event, "open");
    snprintf(want, sizeof(want), "{\"subs\":%d}", subs);
    cr_assert_str_eq(c->ev[o].data, want, "%s", path);
    return c;
}

#define TWO SUB "?presence_events=roomA&presence_events=roomB"

Test(presence_channels, every_channel_is_followed_synced_and_resumed)
{
    struct itest_node n;
    struct sse_client *c;
    char last[700];

    itest_node_start(&n, "workers=2");
    enter(&n, "roomA", "ann");
    enter(&n, "roomB", "bob");
    /* from=last: one sync a channel, each with its own member */
    c = open_stream(&n, TWO "&from=last", NULL, 2);
    cr_assert(wait_has(c, "roomA", "sync", "ann"), "roomA's sync");
    cr_assert(wait_has(c, "roomB", "sync", "bob"), "roomB's sync");
    cr_assert_eq(has(c, "roomA", "sync", "bob"), 0, "bob is not in roomA");
    cr_assert_eq(has(c, "roomB", "sync", "ann"), 0, "ann is not in roomB");
    /* then each channel's events */
    enter(&n, "roomA", "cy");
    enter(&n, "roomB", "dee");
    cr_assert(wait_has(c, "roomA", "enter", "cy"), "roomA's enter");
    cr_assert(wait_has(c, "roomB", "enter", "dee"), "roomB's enter");
    cr_assert_eq(has(c, "roomA", "enter", NULL), 1);
    cr_assert_eq(has(c, "roomB", "enter", NULL), 1);
    snprintf(last, sizeof(last), "Last-Event-ID: %s", c->last_id);
    cr_assert_neq(c->last_id[0], '\0', "the enters carry a cursor");
    sse_close(c);
    /* while the page is away, both channels change */
    enter(&n, "roomA", "eve");
    enter(&n, "roomB", "fay");
    /* the resume takes up both after the cursor: only what it missed */
    c = open_stream(&n, TWO, last, 2);
    cr_assert(wait_has(c, "roomA", "enter", "eve"), "roomA resumed");
    cr_assert(wait_has(c, "roomB", "enter", "fay"), "roomB resumed");
    cr_assert_eq(has(c, "roomA", "enter", "cy"), 0, "cy came before");
    cr_assert_eq(has(c, "roomB", "enter", "dee"), 0, "dee came before");
    cr_assert_eq(sse_count(c, "recovered"), 1);
    for (size_t i = 0; i < c->nev; i++)
        if (strcmp(c->ev[i].event, "recovered") == 0)
            cr_assert(strstr(c->ev[i].data, "\"missed\":[]") != NULL,
                      "nothing missed: %s", c->ev[i].data);
    sse_close(c);
    /* and a resume with from=last starts from both whole sets again */
    c = open_stream(&n, TWO "&from=last", last, 2);
    cr_assert(wait_has(c, "roomA", "sync", "eve"), "roomA's sync");
    cr_assert(wait_has(c, "roomB", "sync", "fay"), "roomB's sync");
    sse_close(c);
    itest_node_stop(&n, 10000);
}

/* A resume the node cannot take up (its previous life's cursor) names a
 * channel it missed as the channel, never by its internal events queue
 * (SPEC §12: a channel is no queue), beside a queue's partition named as
 * always; with from=last the channel's whole set follows in its sync. */
Test(presence_channels, a_missed_channel_is_named_as_the_channel)
{
    struct itest_node n, m;
    struct sse_client *c;
    char last[700];
    struct json_object *o;

    itest_node_start(&n, "workers=1");
    enter(&n, "hall", "ann");
    c = open_stream(&n,
                    SUB "?queue=pq&partition=p&presence_events=hall"
                        "&from=last",
                    NULL, 2);
    cr_assert(wait_has(c, "hall", "sync", "ann"), "hall's sync");
    enter(&n, "hall", "bob");
    cr_assert(wait_has(c, "hall", "enter", "bob"), "hall's enter");
    cr_assert_neq(c->last_id[0], '\0', "the enter carries a cursor");
    snprintf(last, sizeof(last), "Last-Event-ID: %s", c->last_id);
    sse_close(c);
    free(c);
    cr_assert_eq(kill(n.pid, SIGKILL), 0);
    itest_node_wait_exit(&n, 10000);

    itest_node_start(&m, "workers=1"); /* another incarnation */
    enter(&m, "hall", "cy");
    c = open_stream(&m,
                    SUB "?queue=pq&partition=p&presence_events=hall"
                        "&from=last",
                    last, 2);
    cr_assert(strstr(c->ev[0].data, "\\u001e") == NULL &&
                  strchr(c->ev[0].data, '\x1e') == NULL,
              "no internal name: %s", c->ev[0].data);
    o = json_tokener_parse(c->ev[0].data);
    cr_assert_not_null(o, "%s", c->ev[0].data);
    cr_assert_eq(itest_jlen(o, "missed"), 2, "%s", c->ev[0].data);
    cr_assert_str_eq(itest_jstr(o, "missed.0.queue"), "pq", "%s",
                     c->ev[0].data);
    cr_assert_str_eq(itest_jstr(o, "missed.0.partition"), "p", "%s",
                     c->ev[0].data);
    cr_assert_str_eq(itest_jstr(o, "missed.1.channel"), "hall", "%s",
                     c->ev[0].data);
    cr_assert_null(itest_jget(o, "missed.1.queue"), "%s", c->ev[0].data);
    json_object_put(o);
    cr_assert(wait_has(c, "hall", "sync", "cy"), "hall's sync after it");
    sse_close(c);
    free(c);
    itest_node_stop(&m, 10000);
}

Test(presence_channels, channels_with_a_queue_count_toward_stream_max_subs)
{
    struct itest_node n;
    struct itest_resp r = {0};
    struct sse_client *c;

    itest_node_start(&n, "workers=1 stream_max_subs=3");
    c = open_stream(&n, SUB "?queue=q&presence_events=a&presence_events=b",
                    NULL, 3);
    enter(&n, "b", "bob");
    cr_assert(wait_has(c, "b", "enter", "bob"));
    sse_close(c);
    itest_get(&n, &r,
              SUB "?queue=q&presence_events=a&presence_events=b"
                  "&presence_events=cc");
    itest_assert_error(&r, 400, "ephemeral_bad_request", "presence_events",
                       "a fourth subscription");
    cr_assert(strstr(r.body, "'cc'") != NULL && strstr(r.body, "3") != NULL,
              "names the channel past the bound: %s", r.body);
    itest_resp_free(&r);
    itest_get(&n, &r,
              SUB "?presence_events=a&presence_events=b&presence_events=cc"
                  "&presence_events=dd");
    itest_assert_error(&r, 400, "ephemeral_bad_request", "presence_events",
                       "four channels");
    cr_assert(strstr(r.body, "'dd'") != NULL, "%s", r.body);
    itest_resp_free(&r);
    itest_node_stop(&n, 10000);
}

Test(presence_channels, a_bad_channel_is_refused_naming_it)
{
    static const struct {
        const char *query, *code, *names;
    } bad[] = {
        {"presence_events=roomA&presence_events=", "invalid_name", "''"},
        {"presence_events=&presence_events=roomA", "invalid_name", "''"},
        {"presence_events=roomA&presence_events=x%01y", "invalid_name",
         "'x\\u0001y'"},
        {"presence_events=roomA&presence_events=roomB&presence_events=roomA",
         "ephemeral_bad_request", "'roomA' twice"},
    };
    struct itest_node n;
    struct itest_resp r = {0};

    itest_node_start(&n, "workers=1");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        itest_get(&n, &r, SUB "?%s", bad[i].query);
        itest_assert_error(&r, 400, bad[i].code, "presence_events",
                           bad[i].query);
        cr_assert(strstr(r.body, bad[i].names) != NULL, "%s: %s", bad[i].query,
                  r.body);
        itest_resp_free(&r);
    }
    itest_node_stop(&n, 10000);
}
