/*
 * test_cluster_presence_channels.c - a stream naming two channels with
 * repeated presence_events= (SPEC §12 "several allowed") whose owners are
 * two other nodes of three: the stream's node opens a watch on each
 * owner, each channel's from=last sync and events come through them, and
 * a resume with Last-Event-ID through another node (one owner: one
 * channel read there, one by a watch) takes up both after the cursor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/cluster/suite.h"
#include "test/integration/sse.h"

#define PRES "/api/v1/presence"

static struct cl c;

CL_SUITE(cluster_presence_channels, &c, "member_ttl_ms=60000", CL_SUITE_VIEW,
         .timeout = 180);

/* enter - a call member of channel through node i. */
static void
enter(int i, const char *channel, const char *member)
{
    struct itest_resp r = {0};
    char body[256];

    snprintf(body, sizeof(body),
             "{\"channel\":\"%s\",\"member\":\"%s\",\"ttlSeconds\":60}",
             channel, member);
    cr_assert_eq(itest_req(&c.node[i], "POST", PRES "/enter", body, &r), 200,
                 "enter %s/%s through node %d: %s", channel, member, i, r.body);
    itest_resp_free(&r);
}

/* has - w holds a presence event whose data has both needles. */
static int
has(const struct sse_client *w, const char *a, const char *b)
{
    for (size_t i = 0; i < w->nev; i++)
        if (strcmp(w->ev[i].event, "presence") == 0 &&
            strstr(w->ev[i].data, a) != NULL &&
            strstr(w->ev[i].data, b) != NULL)
            return 1;
    return 0;
}

/* wait_has - pump w until has() says so, 10 s. */
static int
wait_has(struct sse_client *w, const char *a, const char *b)
{
    int64_t end = itest_now_ms() + 10000;

    while (!has(w, a, b) && itest_now_ms() < end)
        sse_wait_events(w, w->nev + 1, 50);
    return has(w, a, b);
}

/* open_on - a stream on node i (with header, or NULL), its open read. */
static struct sse_client *
open_on(int i, const char *path, const char *header)
{
    struct sse_client *w = calloc(1, sizeof(*w));
    const char *const headers[] = {header, NULL};

    cr_assert_not_null(w);
    sse_open(w, &c.node[i], path, header != NULL ? headers : NULL);
    size_t o = header != NULL; /* a resume says `recovered` first (§11) */

    cr_assert_geq(sse_wait_events(w, o + 1, 10000), o + 1, "node %d: no open",
                  i);
    cr_assert_eq(w->status, 200, "node %d: %d", i, w->status);
    if (o)
        cr_assert_str_eq(w->ev[0].event, "recovered");
    cr_assert_str_eq(w->ev[o].event, "open");
    cr_assert_str_eq(w->ev[o].data, "{\"subs\":2}");
    return w;
}

Test(cluster_presence_channels, two_channels_on_two_owners)
{
    char a[16], b[16], path[256], last[700];
    int oa = -1, ob = -1;

    /* two channels that two different nodes own */
    for (int k = 0; k < 64 && ob < 0; k++) {
        char name[16], pres[20];
        snprintf(name, sizeof(name), "room%d", k);
        snprintf(pres, sizeof(pres), "\x1e%s", name);
        int o = cl_owner(pres, "Default", CL_ALL);
        if (oa < 0) {
            oa = o;
            memcpy(a, name, sizeof(a));
        } else if (o != oa) {
            ob = o;
            memcpy(b, name, sizeof(b));
        }
    }
    cr_assert(oa >= 0 && ob >= 0, "two owners");
    int s = 3 - oa - ob; /* owns neither: both are watched */
    enter(s, a, "ann");
    enter(s, b, "bob");
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/subscribe?presence_events=%s"
             "&presence_events=%s",
             a, b);
    char synced[300];
    snprintf(synced, sizeof(synced), "%s&from=last", path);
    struct sse_client *w = open_on(s, synced, NULL);
    char ca[64], cb[64];
    snprintf(ca, sizeof(ca), "\"channel\":\"%s\",\"action\":\"sync\"", a);
    snprintf(cb, sizeof(cb), "\"channel\":\"%s\",\"action\":\"sync\"", b);
    cr_assert(wait_has(w, ca, "\"member\":\"ann\""), "%s's sync", a);
    cr_assert(wait_has(w, cb, "\"member\":\"bob\""), "%s's sync", b);
    cr_assert_not(has(w, ca, "\"member\":\"bob\""));
    /* events of calls through each owner, for the other's channel */
    enter(ob, a, "cy");
    enter(oa, b, "dee");
    char ea[96], eb[96];
    snprintf(ea, sizeof(ea), "\"channel\":\"%s\",\"action\":\"enter\"", a);
    snprintf(eb, sizeof(eb), "\"channel\":\"%s\",\"action\":\"enter\"", b);
    cr_assert(wait_has(w, ea, "\"member\":\"cy\""), "%s's enter", a);
    cr_assert(wait_has(w, eb, "\"member\":\"dee\""), "%s's enter", b);
    cr_assert_neq(w->last_id[0], '\0');
    snprintf(last, sizeof(last), "Last-Event-ID: %s", w->last_id);
    sse_close(w);
    enter(s, a, "eve");
    enter(s, b, "fay");
    /* resumed through a's owner: a read there, b by a watch */
    w = open_on(oa, path, last);
    cr_assert(wait_has(w, ea, "\"member\":\"eve\""), "%s resumed", a);
    cr_assert(wait_has(w, eb, "\"member\":\"fay\""), "%s resumed", b);
    cr_assert_not(has(w, ea, "\"member\":\"cy\""), "cy came before");
    cr_assert_not(has(w, eb, "\"member\":\"dee\""), "dee came before");
    cr_assert_eq(sse_count(w, "recovered"), 1);
    for (size_t i = 0; i < w->nev; i++)
        if (strcmp(w->ev[i].event, "recovered") == 0)
            cr_assert(strstr(w->ev[i].data, "\"missed\":[]") != NULL,
                      "nothing missed: %s", w->ev[i].data);
    sse_close(w);
}
