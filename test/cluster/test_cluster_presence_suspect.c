/*
 * test_cluster_presence_suspect.c - presence while a node suspects the
 * channel's owner (SPEC §12, DESIGN §3 "Gray failures" and §5): the
 * owner stays a live member, but one node cannot open a connection to
 * it, so that node routes partitions around it.  A channel is never
 * served in another's stead: the calls through that node answer 503
 * owner_moved with Retry-After, its streams' members are held and said
 * to the owner once it can be reached, an events stream through it
 * relays the owner's events alone, and no table but the owner's ever
 * holds the channel's members.  Before, the suspecting node served the
 * channel itself when the placement without the owner named it: a
 * second, partial set of the members, kept there after the suspicion
 * ended (ghosts there, gaps at the owner).
 *
 * Three nodes in network namespaces of their own (ns_cluster.h).  The
 * fault is real: the SYNs from node a (the one the placement without the
 * owner names) to the owner are dropped, and a's worker is killed so that
 * it keeps no connection opened before; the masters' beats go on on
 * theirs, so the membership does not change.  A push through a that its
 * owner's partition forwards finds no connection within 1 s: a suspects
 * the owner (/health says so).  The fault's own duration is a sleep;
 * everything else waits on a condition.  Skipped, saying so, only where
 * the machine refuses a network namespace.
 */
#include <sys/types.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/cluster.h"
#include "test/cluster/ns_cluster.h"
#include "test/integration/presence_list.h"
#include "test/integration/sse.h"

#define PRES  "/api/v1/presence"
#define SUB   "/api/v1/ephemeral/subscribe"
#define GRACE 1000 /* presence_grace_ms */
#define FAULT 4000 /* the suspicion's length at least: past SHM_SUSPECT_MS */

static struct nsc C;

static void
fini(void)
{
    nsc_stop_all(&C);
}

TestSuite(presence_suspect, .fini = fini, .timeout = 120);

/* suspects - whether node i's /health names node j suspect. */
static int
suspects(int i, int j)
{
    struct itest_resp r;
    int found = 0;
    char id[8];

    snprintf(id, sizeof(id), "n%d", j);
    if (itest_get(&C.node[i], &r, "/health") > 0 && r.json != NULL)
        for (int k = 0; k < itest_jlen(r.json, "members"); k++) {
            char idp[40], sp[40];
            snprintf(idp, sizeof(idp), "members.%d.node", k);
            snprintf(sp, sizeof(sp), "members.%d.suspect", k);
            if (strcmp(itest_jstr(r.json, idp), id) == 0)
                found = itest_jbool(r.json, sp) == 1;
        }
    itest_resp_free(&r);
    return found;
}

/* wait_suspects - until node i's suspicion of node j is on (want 1) or
 * off (want 0). */
static void
wait_suspects(int i, int j, int want, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    while (suspects(i, j) != want) {
        cr_assert_lt(itest_now_ms(), end,
                     "node %d %s node %d suspect after %d ms", i,
                     want ? "does not name" : "still names", j, timeout_ms);
        itest_sleep_ms(50);
    }
}

/* members_on - node i's mayfly_presence_members: what its own table
 * holds, of every channel. */
static double
members_on(int i)
{
    double v = -1;

    cr_assert_eq(itest_metric(&C.node[i], "mayfly_presence_members", &v), 0);
    return v;
}

/* opened - a stream at node i on path, its answer's head in (200). */
static struct sse_client *
opened(int i, const char *path)
{
    struct sse_client *s = calloc(1, sizeof(*s));
    int64_t end = itest_now_ms() + 10000;

    cr_assert_not_null(s);
    sse_open(s, &C.node[i], path, NULL);
    while (s->status == 0 && !s->closed && itest_now_ms() < end)
        if (!sse_pump(s))
            itest_sleep_ms(20);
    cr_assert_eq(s->status, 200, "%s through node %d: %d", path, i, s->status);
    return s;
}

/* member_stream - a stream of member at node i, which enters it. */
static struct sse_client *
member_stream(int i, const char *channel, const char *member)
{
    char path[256];

    snprintf(path, sizeof(path), SUB "?presence=%s&member=%s", channel, member);
    return opened(i, path);
}

/* said - how many presence events ev holds of member's action. */
static int
said(const struct sse_client *ev, const char *action, const char *member)
{
    char needle[96];
    int n = 0;

    snprintf(needle, sizeof(needle), "\"action\":\"%s\",\"member\":\"%s\"",
             action, member);
    for (size_t k = 0; k < ev->nev; k++)
        n += strcmp(ev->ev[k].event, "presence") == 0 &&
             strstr(ev->ev[k].data, needle) != NULL;
    return n;
}

/* call - POST path through node i with body; its status, and (when 503)
 * that it says owner_moved with a Retry-After. */
static long
call(int i, const char *path, const char *body)
{
    struct itest_resp r = {0};
    long st = itest_req(&C.node[i], "POST", path, body, &r);

    if (st == 503) {
        cr_expect_str_eq(itest_jstr(r.json, "code"), "owner_moved", "%s: %s",
                         path, r.body);
        cr_expect_neq(r.retry_after[0], '\0', "%s: 503 with no Retry-After",
                      path);
    } else {
        cr_expect_eq(st, 200, "%s through node %d: %ld %s", path, i, st,
                     r.body);
    }
    itest_resp_free(&r);
    return st;
}

/* call_until - a client's retry of what was answered 503: POST through
 * node i until 200. */
static void
call_until(int i, const char *path, const char *body, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;
    long st;

    while ((st = call(i, path, body)) == 503) {
        cr_assert_lt(itest_now_ms(), end, "%s through node %d: still 503", path,
                     i);
        itest_sleep_ms(100);
    }
    cr_assert_eq(st, 200);
}

/* settled - the channel's listing through node i names exactly the
 * members in want (each with want_conns connections, -1: any), and no
 * node but the owner holds a member in its table. */
static int
settled(int owner, int i, const char *channel, const char *const *want, int n,
        const int *want_conns, char *why, size_t len)
{
    int64_t count = itest_presence_count(&C.node[i], channel);

    if (count != n) {
        snprintf(why, len, "the count through node %d is %lld, not %d", i,
                 (long long)count, n);
        return 0;
    }
    for (int k = 0; k < n; k++) {
        int64_t c = itest_member_conns(&C.node[i], channel, want[k]);
        if (c < 0 || (want_conns[k] >= 0 && c != want_conns[k])) {
            snprintf(why, len, "%s through node %d: %lld connections", want[k],
                     i, (long long)c);
            return 0;
        }
    }
    for (int k = 0; k < NSC_NODES; k++) {
        double m = members_on(k);
        if (m != (k == owner ? n : 0)) {
            snprintf(why, len,
                     "node %d's table holds %.0f members (owner: node %d)", k,
                     m, owner);
            return 0;
        }
    }
    return 1;
}

/* wait_settled - settled() through every node within timeout_ms. */
static void
wait_settled(int owner, const char *channel, const char *const *want, int n,
             const int *conns, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;
    char why[200] = "";

    for (;;) {
        int ok = 1;
        for (int i = 0; i < NSC_NODES && ok; i++)
            ok = settled(owner, i, channel, want, n, conns, why, sizeof(why));
        if (ok)
            return;
        cr_assert_lt(itest_now_ms(), end, "not settled after %d ms: %s",
                     timeout_ms, why);
        itest_sleep_ms(100);
    }
}

/*
 * The owner of the channel suspect at node a, which the placement without
 * it names: through a, streams' members enter (one leaves again) and call
 * members enter and leave while a suspects the owner.  The calls answer
 * 503 owner_moved with a Retry-After (the client retries them after the
 * heal); the list too.  After the heal every member is at the owner
 * exactly once, with its connections, no other node's table holds any,
 * and once the streams close their members leave: no ghost anywhere.
 */
Test(presence_suspect,
     members_entered_through_a_suspecting_node_land_at_the_owner)
{
    const char *channel = "room";
    char part[16], opts[64], body[200];
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int a = cl_owner("\x1eroom", "Default", CL_ALL & ~(1u << owner));
    pid_t old[8], now[8];

    snprintf(opts, sizeof(opts), "presence_grace_ms=%d", GRACE);
    int rc = nsc_start(&C, opts);
    NSC_SKIP_UNLESS(rc);
    nsc_wait_settled(&C, 30000);
    cl_part_owned_by("ps-q", owner, 64, part, sizeof(part));
    /* the channel's events, where they are made */
    struct sse_client *ev = opened(owner, SUB "?presence_events=room");

    /* a cannot open a connection to the owner; its worker starts anew */
    netns_oneway(a, owner, 1);
    int nold = itest_node_workers(&C.node[a], old, 8);
    cr_assert_gt(nold, 0);
    kill(old[0], SIGKILL);
    int64_t deadline = itest_now_ms() + 10000;
    while (itest_node_workers(&C.node[a], now, 8) < 1 || now[0] == old[0]) {
        cr_assert_lt(itest_now_ms(), deadline, "no new worker");
        itest_sleep_ms(50);
    }
    /* a member entered at the owner before a suspects it */
    snprintf(body, sizeof(body),
             "{\"channel\":\"%s\",\"member\":\"c-old\",\"ttlSeconds\":60}",
             channel);
    cr_assert_eq(call(owner, PRES "/enter", body), 200);
    /* a forward of a's to the owner finds no connection: suspect */
    struct itest_resp r = {0};
    long st = itest_push(&C.node[a], &r, "ps-q", part, "[1]");
    itest_resp_free(&r);
    fprintf(stderr, "a push through node %d to node %d's partition: %ld\n", a,
            owner, st);
    wait_suspects(a, owner, 1, 10000);
    cr_assert(nsc_sees(&C, a, NSC_ALL), "node %d sees every member live", a);
    int64_t t0 = itest_now_ms();
    /* the channel's events through a: a watch of the owner's, which a
     * cannot open; never the events of a table of a's own */
    struct sse_client *eva = opened(a, SUB "?presence_events=room");

    /* through a, meanwhile: three streams' members enter, one leaves */
    struct sse_client *s1 = member_stream(a, channel, "s1");
    struct sse_client *s2 = member_stream(a, channel, "s2");
    struct sse_client *s3 = member_stream(a, channel, "s3");
    /* a call member enters, the one entered before leaves */
    snprintf(body, sizeof(body),
             "{\"channel\":\"%s\",\"member\":\"c1\",\"ttlSeconds\":60}",
             channel);
    long enter = call(a, PRES "/enter", body);
    snprintf(body, sizeof(body), "{\"channel\":\"%s\",\"member\":\"c-old\"}",
             channel);
    long leave = call(a, PRES "/leave", body);
    cr_expect(suspects(a, owner), "node %d still suspects node %d", a, owner);
    cr_expect_eq(enter, 503,
                 "an enter through node %d while it suspects the "
                 "owner is not served there",
                 a);
    cr_expect_eq(leave, 503,
                 "a leave through node %d while it suspects the "
                 "owner is not served there",
                 a);
    {
        struct itest_resp l = {0};
        long ls = itest_get(&C.node[a], &l, PRES "/%s", channel);
        cr_expect_eq(ls, 503, "the list through node %d: %ld %s", a, ls,
                     l.body);
        itest_resp_free(&l);
    }
    sse_close(s3);
    for (int k = 0; k < NSC_NODES; k++) {
        double m = members_on(k);
        cr_expect_eq(m, k == owner ? 1 : 0,
                     "during the fault node %d's table holds %.0f members", k,
                     m);
    }
    /* the fault lasts: the streams' ticks meet the suspect owner */
    while (itest_now_ms() - t0 < FAULT) {
        sse_pump(s1);
        sse_pump(s2);
        sse_pump(ev);
        sse_pump(eva);
        itest_sleep_ms(100);
    }
    cr_expect_eq(sse_count(eva, "presence"), 0,
                 "the events stream through node %d relayed %zu presence "
                 "events while it could not reach the owner: a table of its "
                 "own",
                 a, sse_count(eva, "presence"));
    fprintf(stderr, "the events stream through node %d: %s\n", a,
            eva->closed ? "ended" : "open");
    netns_heal_all();
    wait_suspects(a, owner, 0, 10000);
    sse_close(eva);

    /* what was answered 503 the client sends again */
    snprintf(body, sizeof(body),
             "{\"channel\":\"%s\",\"member\":\"c1\",\"ttlSeconds\":60}",
             channel);
    if (enter != 200)
        call_until(a, PRES "/enter", body, 10000);
    snprintf(body, sizeof(body), "{\"channel\":\"%s\",\"member\":\"c-old\"}",
             channel);
    if (leave != 200)
        call_until(a, PRES "/leave", body, 10000);
    static const char *const want[] = {"c1", "s1", "s2"};
    static const int conns[] = {-1, 1, 1};
    wait_settled(owner, channel, want, 3, conns, 10000 + GRACE);
    fprintf(stderr,
            "presence while node %d suspected the owner, node %d: every "
            "member at the owner %lld ms after the fault began\n",
            a, owner, (long long)(itest_now_ms() - t0));

    /* the streams end: their members leave, one grace later, and the
     * call member leaves: nothing is left anywhere */
    sse_close(s1);
    sse_close(s2);
    snprintf(body, sizeof(body), "{\"channel\":\"%s\",\"member\":\"c1\"}",
             channel);
    cr_assert_eq(call(a, PRES "/leave", body), 200);
    wait_settled(owner, channel, NULL, 0, NULL, 10000 + GRACE);

    /* the owner said each enter and each leave once */
    static const char *const all[] = {"c1", "s1", "s2"};
    int64_t end = itest_now_ms() + 5000;
    for (;;) {
        int got = said(ev, "leave", "c-old");
        for (int k = 0; k < 3; k++)
            got += said(ev, "leave", all[k]);
        if (got >= 4 || itest_now_ms() >= end)
            break;
        sse_wait_events(ev, ev->nev + 1, 100);
    }
    for (int k = 0; k < 3; k++) {
        cr_expect_eq(said(ev, "enter", all[k]), 1, "%s entered %d times",
                     all[k], said(ev, "enter", all[k]));
        cr_expect_eq(said(ev, "leave", all[k]), 1, "%s left %d times", all[k],
                     said(ev, "leave", all[k]));
    }
    cr_expect_eq(said(ev, "leave", "c-old"), 1, "c-old left %d times",
                 said(ev, "leave", "c-old"));
    cr_expect_eq(said(ev, "enter", "s3"), said(ev, "leave", "s3"),
                 "s3 entered %d times, left %d", said(ev, "enter", "s3"),
                 said(ev, "leave", "s3"));
    sse_close(ev);
}
