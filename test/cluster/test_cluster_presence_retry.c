/*
 * test_cluster_presence_retry.c - a join's presence hand-over that the
 * channel's owner misses (SPEC §12, DESIGN §5): the node that holds the
 * copy sends it again, with a backoff, until the owner takes it, then
 * lets it go; and should the channel come back to that node before the
 * copy moved, a member whose stream ended on a third node meanwhile
 * leaves there one grace later (no ghost).
 *
 * The fault is real: the owner's processes stopped (SIGSTOP) for longer
 * than the three scans of a change, or killed.  For the holder's first
 * try to meet an owner that cannot answer (rather than one that answers
 * in the instant it says ready), the holder's master is stopped while the
 * owner starts, the owner is stopped (or killed) once ready and settled,
 * and the holder's master resumed: it reads the beats in which the owner
 * said ready (its kernel kept them), sees the owner live, and posts its
 * copy to a node that cannot answer.  The fault's own durations are
 * sleeps; everything else waits on a condition.
 */
#include <sys/types.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/cluster/suite.h"
#include "test/integration/presence_list.h"
#include "test/integration/sse.h"

#define PRES "/api/v1/presence"
/* member_ttl_ms: a stopped node stays live 30 s, and its workers refuse
 * what needs the members' view after 15 s (master/view.c) */
#define TTL     30000
#define STOP    12000 /* the owner's stop: past the change's tries (10 s) */
#define GRACE   10000 /* presence_grace_ms */
#define OPTS    "member_ttl_ms=30000 presence_grace_ms=10000"
#define BEAT_MS 500 /* min(member_ttl_ms / 4, 500): DESIGN §3, membership */

static struct cl c;

CL_SUITE(presence_retry, &c, OPTS, CL_SUITE_VIEW, .timeout = 180);

/* members_on - node i's mayfly_presence_members. */
static double
members_on(int i)
{
    double v = -1;

    cr_assert_eq(itest_metric(&c.node[i], "mayfly_presence_members", &v), 0);
    return v;
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

/* count_through - the channel's count through node i; -1 when it did
 * not answer 200. */
static int64_t
count_through(int i)
{
    return itest_presence_count(&c.node[i], "room");
}

/* wait_count - until the count through node i is want, timeout_ms at
 * most; the last count seen. */
static int64_t
wait_count(int i, int64_t want, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms, n;

    while ((n = count_through(i)) != want && itest_now_ms() < end)
        itest_sleep_ms(50);
    return n;
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
    int64_t end = itest_now_ms() + timeout_ms, n;

    while ((n = conns_of(i, member)) != want && itest_now_ms() < end)
        itest_sleep_ms(50);
    cr_assert_eq(n, want, "%s through node %d: %lld connections, not %lld",
                 member, i, (long long)n, (long long)want);
}

/* log_count - how many lines of node i's log hold needle. */
static int
log_count(int i, const char *needle)
{
    FILE *f = fopen(c.node[i].log, "r");
    char line[4096];
    int n = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* wait_log - until node i's log holds more than after lines with needle,
 * timeout_ms at most. */
static int
wait_log(int i, const char *needle, int after, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    while (log_count(i, needle) <= after && itest_now_ms() < end)
        itest_sleep_ms(50);
    return log_count(i, needle) > after;
}

/* holder_tries - the holder's master, resumed, sees the owner live (the
 * beats in which it said ready, kept by the holder's kernel while it was
 * stopped) and tries to move its copy there: a try fails (a line more
 * than tried in its log). */
static void
holder_tries(int holder, int owner, int tried)
{
    char st[32] = "", id[8];
    int64_t end = itest_now_ms() + 5000;

    snprintf(id, sizeof(id), "n%d", owner);
    while (strcmp(st, "live") != 0 && itest_now_ms() < end) {
        cl_member_state(&c, holder, id, st, sizeof(st));
        itest_sleep_ms(20);
    }
    cr_assert_str_eq(st, "live", "the holder sees the owner live");
    cr_assert(wait_log(holder, "did not take", tried, 12000),
              "the holder's first try met an owner that cannot answer");
}

/* signal_node - sig to node i's master and each of its workers. */
static void
signal_node(int i, int sig)
{
    pid_t w[64];
    int n = itest_node_workers(&c.node[i], w, 64);

    cr_assert_eq(kill(c.node[i].pid, sig), 0);
    for (int k = 0; k < n; k++)
        kill(w[k], sig);
}

/* has_socket - process pid holds socket inode. */
static int
has_socket(pid_t pid, unsigned long inode)
{
    char dir[64], path[400], link[64], want[64];
    struct dirent *e;
    DIR *d;
    int found = 0;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    if ((d = opendir(dir)) == NULL)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        ssize_t n;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if ((n = readlink(path, link, sizeof(link) - 1)) > 0) {
            link[n] = '\0';
            found = strcmp(link, want) == 0;
        }
    }
    closedir(d);
    return found;
}

/*
 * call_out - node from's master has a call open to node to's cluster port
 * whose bytes are in node to's kernel (its end of the connection has
 * them unread): a beat or a raft message, which says node from's state.
 * A master keeps one beat in flight a peer and gives it up (closing its
 * connection) after two beat periods; a stopped node's kernel keeps what
 * came on a connection still open, and its master reads it once it runs
 * again.
 */
static int
call_out(int from, int to)
{
    char line[512], rem[32], loc[32][32];
    unsigned a, b, cc, d;
    int nloc = 0, found = 0;
    FILE *f;

    cr_assert_eq(sscanf(c.addr[to], "%u.%u.%u.%u", &a, &b, &cc, &d), 4);
    snprintf(rem, sizeof(rem), "%02X%02X%02X%02X:%04X", d, cc, b, a,
             (unsigned)c.cport[to]);
    /* node from's master's ends of connections to node to's port */
    cr_assert_not_null(f = fopen("/proc/net/tcp", "r"));
    while (nloc < 32 && fgets(line, sizeof(line), f) != NULL) {
        char l[32], r[32], st[8];
        unsigned long inode;
        if (sscanf(line, " %*s %31s %31s %7s %*s %*s %*s %*s %*s %lu", l, r, st,
                   &inode) == 4 &&
            strcmp(r, rem) == 0 && strcmp(st, "01") == 0 &&
            has_socket(c.node[from].pid, inode))
            snprintf(loc[nloc++], sizeof(loc[0]), "%s", l);
    }
    fclose(f);
    /* node to's ends of those, with bytes in */
    cr_assert_not_null(f = fopen("/proc/net/tcp", "r"));
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        char l[32], r[32], st[8];
        unsigned long tx, rx;
        if (sscanf(line, " %*s %31s %31s %7s %lx:%lx", l, r, st, &tx, &rx) !=
                5 ||
            strcmp(l, rem) != 0 || rx == 0)
            continue;
        for (int k = 0; k < nloc && !found; k++)
            found = strcmp(r, loc[k]) == 0;
    }
    fclose(f);
    return found;
}

/* stop_with_a_call_out - stop node o (master and workers) at a moment
 * its master has a call open to node h, which is stopped: h reads it
 * once resumed, and so hears o as it was then.  ready_at: when o was seen
 * ready; a call is looked for only two beat periods (and a margin) later,
 * when every call o had open before is given up, so the one h reads says
 * ready, not starting. */
static void
stop_with_a_call_out(int o, int h, int64_t ready_at)
{
    while (itest_now_ms() < ready_at + 2 * BEAT_MS + 200)
        itest_sleep_ms(50); /* the clock is the condition */
    for (int k = 0; k < 100; k++) {
        signal_node(o, SIGSTOP);
        if (call_out(o, h))
            return;
        signal_node(o, SIGCONT);
        itest_sleep_ms(30);
    }
    cr_assert_fail("node %d never had a call open to node %d", o, h);
}

/* stream - a member stream on node i, open (its first event in). */
static struct sse_client *
stream(int i, const char *member)
{
    struct sse_client *s = calloc(1, sizeof(*s));
    char path[128];

    cr_assert_not_null(s);
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/subscribe?presence=room&member=%s", member);
    sse_open(s, &c.node[i], path, NULL);
    cr_assert_geq(sse_wait_events(s, 1, 10000), 1, "%s on node %d", member, i);
    return s;
}

/* enter - call member through node i, with ttlSeconds 120. */
static void
enter(int i, const char *member)
{
    struct itest_resp r = {0};
    char body[160];

    snprintf(body, sizeof(body),
             "{\"channel\":\"room\",\"member\":\"%s\",\"ttlSeconds\":120}",
             member);
    cr_assert_eq(itest_post(&c.node[i], &r, PRES "/enter", "%s", body), 200,
                 "%s", r.body);
    itest_resp_free(&r);
}

/*
 * copy_meets_a_stopped_owner - the owner stops (its set goes to the
 * holder), comes back, and once ready is stopped for 12 s while the
 * holder, which saw it ready, tries to move the set back: the first tries
 * time out (the three scans of the change, and their tries, are over
 * before the owner runs again).  The copy is sent again until it lands:
 * the holder lets its copy go, the owner has every member (the stream
 * members on the holder, whose workers held their counts back until the
 * copy moved, with their connection; call members), the member whose
 * stream ended during the fault leaves one grace later, and no node made
 * an enter or a leave for any other member.
 */
static void
copy_meets_a_stopped_owner(void)
{
    enum { NS = 10 };
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int holder = cl_owner("\x1eroom", "Default", CL_ALL & ~(1u << owner));
    int on = holder;
    struct sse_client *s[NS], *gone;
    char name[16];

    for (int k = 0; k < NS; k++) {
        snprintf(name, sizeof(name), "s%02d", k);
        s[k] = stream(on, name);
    }
    gone = stream(on, "gone");
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof(name), "bot%d", k);
        enter(k % CL_NODES, name);
    }
    cr_assert_eq(wait_count(owner, NS + 5, 10000), NS + 5);
    wait_conns(owner, "s00", 1, 10000);

    /* the owner stops: its set goes to the holder */
    cr_assert_eq(cl_stop(&c, owner, 30000), 0, "a clean stop");
    cr_assert_eq(wait_count(holder, NS + 5, 10000), NS + 5);
    cr_assert_eq(members_on(holder), NS + 5, "the holder has the set");
    double enters[CL_NODES], leaves[CL_NODES];
    for (int i = 0; i < CL_NODES; i++)
        if (i != owner) {
            enters[i] = events_on(i, "enter");
            leaves[i] = events_on(i, "leave");
        }

    /* the owner back, ready and settled while the holder's master is
     * stopped (it does not hear it yet), then stopped itself */
    int settled = log_count(owner, "presence: settled");
    int tried = log_count(holder, "did not take");
    cr_assert_eq(kill(c.node[holder].pid, SIGSTOP), 0);
    cl_start(&c, owner, OPTS);
    cr_assert(wait_log(owner, "presence: settled", settled, 10000),
              "the owner settled");
    stop_with_a_call_out(owner, holder, itest_now_ms());
    int64_t stopped = itest_now_ms();
    cr_assert_eq(kill(c.node[holder].pid, SIGCONT), 0);

    /* the holder sees it live and tries: no answer */
    holder_tries(holder, owner, tried);
    sse_close(gone); /* said to the owner once the copy moved */
    free(gone);
    /* the fault's length: past the last of the change's tries (posted at
     * 5 s, given up at 10 s), within the owner's workers' stale bound
     * (member_ttl_ms / 2: they serve at once when it runs again) */
    while (itest_now_ms() < stopped + STOP)
        itest_sleep_ms(100);
    signal_node(owner, SIGCONT);

    /* sent again until it landed: the holder lets its copy go */
    int64_t end = itest_now_ms() + 20000;
    while (members_on(holder) != 0 && itest_now_ms() < end)
        itest_sleep_ms(100);
    cr_assert_eq(members_on(holder), 0, "the holder's copy went");
    cr_assert(itest_node_log_contains(&c.node[holder],
                                      "moved presence to its owner"));

    /* every member at the owner, the streams' with their connection */
    for (int k = 0; k < NS; k++) {
        snprintf(name, sizeof(name), "s%02d", k);
        wait_conns(owner, name, 1, 5000);
    }
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof(name), "bot%d", k);
        wait_conns(owner, name, 0, 1000);
    }
    /* the ended stream's member leaves one grace after the move */
    cr_assert_eq(wait_count(owner, NS + 4, GRACE + 5000), NS + 4, "gone left");
    cr_assert_eq(members_on(owner), NS + 4);
    for (int i = 0; i < CL_NODES; i++)
        cr_assert_eq(count_through(i), NS + 4, "no ghost through node %d", i);
    /* and no storm: the owner (its counters began at its restart) made
     * the leave of gone alone, the others nothing */
    cr_assert_eq(events_on(owner, "enter"), 0, "no enter on the owner");
    cr_assert_eq(events_on(owner, "leave"), 1, "gone's leave alone");
    for (int i = 0; i < CL_NODES; i++)
        if (i != owner) {
            cr_assert_eq(events_on(i, "enter"), enters[i], "node %d", i);
            cr_assert_eq(events_on(i, "leave"), leaves[i], "node %d", i);
        }
    for (int k = 0; k < NS; k++) {
        sse_close(s[k]);
        free(s[k]);
    }
}

Test(presence_retry, the_copy_meets_an_owner_that_cannot_answer)
{
    copy_meets_a_stopped_owner();
}

/*
 * the_channel_comes_back_before_its_copy_moved - as above, but the owner
 * is killed instead of resumed: the channel is the holder's again (once
 * the owner is dead, member_ttl_ms on) with its copy never moved.  A
 * member whose only stream, on the third node, ended while the owner ran
 * (that node said so to the owner, which took it) is no ghost there: it
 * leaves one grace after the channel came back; the members whose
 * streams are open (on the third node, on the holder) and a call member
 * stay, with no enter.
 */
Test(presence_retry, the_channel_comes_back_before_its_copy_moved)
{
    int owner = cl_owner("\x1eroom", "Default", CL_ALL);
    int holder = cl_owner("\x1eroom", "Default", CL_ALL & ~(1u << owner));
    int third = CL_NODES - owner - holder;
    struct sse_client *xgone = stream(third, "xgone");
    struct sse_client *xstays = stream(third, "xstays");
    struct sse_client *hstays = stream(holder, "hstays");

    enter(third, "bot");
    cr_assert_eq(wait_count(owner, 4, 10000), 4);
    wait_conns(owner, "xgone", 1, 10000);

    cr_assert_eq(cl_stop(&c, owner, 30000), 0, "a clean stop");
    cr_assert_eq(wait_count(holder, 4, 10000), 4);
    double enters = events_on(holder, "enter");
    double leaves = events_on(holder, "leave");

    /* the owner back and settled while the holder's master is stopped:
     * the third node's streams say their members to it */
    int settled = log_count(owner, "presence: settled");
    int tried = log_count(holder, "did not take");
    cr_assert_eq(kill(c.node[holder].pid, SIGSTOP), 0);
    cl_start(&c, owner, OPTS);
    cr_assert(wait_log(owner, "presence: settled", settled, 10000));
    int64_t ready_at = itest_now_ms();
    wait_conns(owner, "xgone", 1, 5000);
    /* xgone's stream ends: the owner takes that (the third node forgets
     * it), while the holder's copy still says it is open */
    sse_close(xgone);
    free(xgone);
    wait_conns(owner, "xgone", 0, 5000);

    /* the owner stops; the holder, resumed, sees it live a while (the
     * beats its kernel kept), fails to move the copy to it; the owner is
     * killed, and once dead (member_ttl_ms) the channel is the holder's
     * again, its copy never moved */
    stop_with_a_call_out(owner, holder, ready_at);
    cr_assert_eq(kill(c.node[holder].pid, SIGCONT), 0);
    holder_tries(holder, owner, tried);
    cl_kill(&c, owner);
    /* xgone leaves one grace after that: nobody says its stream again */
    wait_conns(holder, "xgone", -1, TTL + GRACE + 5000);
    wait_conns(holder, "xstays", 1, 3000);
    wait_conns(holder, "hstays", 1, 3000);
    wait_conns(holder, "bot", 0, 1000);
    cr_assert_eq(count_through(holder), 3);
    cr_assert_eq(count_through(third), 3);
    cr_assert_eq(events_on(holder, "enter"), enters, "no enter");
    cr_assert_eq(events_on(holder, "leave"), leaves + 1, "xgone's alone");
    sse_close(xstays);
    sse_close(hstays);
    free(xstays);
    free(hstays);
}
