/*
 * test_cluster_groups.c - groups are the cluster's, and moves keep every
 * group's place and a partition's order (SPEC §5), on three real nodes.
 *
 * - A group that popped on one node is known on the others, so a message
 *   another group completes there waits for it.
 * - A fan-out group and a competing group, with consumers on every node,
 *   read every message as on one node through a rolling restart (SIGTERM,
 *   restart) of all three nodes under load: no message missed, none read
 *   again after its group completed it (duplicates only from acks answered
 *   stale or not at all, whose leases ran out or moved).  The figures are
 *   printed, and what a missed payload went through.
 * - A message pushed after a group's first pop anywhere waits for it,
 *   however soon another group completes it on another node: the first
 *   pop tells every node before it is answered.
 * - A pop with no partition keeps the queue's windowBuffer, on its own
 *   node and on a peer it is passed to.
 * - An ack of a live node's id on a queue that does not exist answers
 *   unknown, as on one node.
 * - A push through a node that is starting (its port open, its peers not
 *   heard yet) waits for every group all the same.
 * - A leased message moved by SIGTERM comes back with attempts + 1 even
 *   when its group read that partition on the next owner, and the
 *   partition's order holds across the move while pushes go on.
 *
 * Owners are computed here as every node computes them (cl_owner).  Every
 * wait polls a condition, within generous bounds.
 */
#include <sys/wait.h>

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

#define WAIT_MS  30000
#define STOP_MS  60000
#define NODE_OPT "lease_s=300"

static struct cl c;

CL_SUITE(cluster_groups, &c, NODE_OPT, CL_SUITE_STARTED, .timeout = 400);

/* live - the nodes running now, as a set. */
static unsigned
live(void)
{
    unsigned s = 0;

    for (int i = 0; i < CL_NODES; i++)
        if (c.node[i].pid > 0)
            s |= 1u << i;
    return s;
}

/* push_at - payloads first..first+n-1 to queue/p through node i, once;
 * the status. */
static long
push_at(int i, const char *queue, const char *p, int first, int n)
{
    struct itest_resp r;
    char body[4096];
    int len = snprintf(body, sizeof(body),
                       "{\"queue\":\"%s\",\"partition\":\"%s\","
                       "\"messages\":[",
                       queue, p);

    for (int k = 0; k < n; k++)
        len += snprintf(body + len, sizeof(body) - (size_t)len,
                        "%s{\"payload\":%d}", k ? "," : "", first + k);
    snprintf(body + len, sizeof(body) - (size_t)len, "]}");
    long st = itest_req(&c.node[i], "POST", "/api/v1/ephemeral/push", body, &r);
    itest_resp_free(&r);
    return st;
}

/* push_ok - push_at, again while it answers 503, up to WAIT_MS. */
static void
push_ok(int i, const char *queue, const char *p, int first, int n)
{
    int64_t deadline = itest_now_ms() + WAIT_MS;
    long st;

    while ((st = push_at(i, queue, p, first, n)) == 503 &&
           itest_now_ms() < deadline)
        itest_sleep_ms(50);
    cr_assert_eq(st, 201, "push %s/%s through node %d: %ld", queue, p, i, st);
}

/* A popped message. */
struct msg {
    char id[128];
    int64_t payload, attempts;
};

/* pop - up to max messages of queue (partition p, NULL: any held by the
 * node) for group g through node i, no wait; how many (-1: not 200). */
static int
pop(int i, const char *queue, const char *p, const char *g, struct msg *m,
    int max)
{
    struct itest_resp r;
    char path[256];
    int n;

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s%s%s&group=%s&batch=%d", queue,
             p ? "&partition=" : "", p ? p : "", g, max);
    long st = itest_req(&c.node[i], "GET", path, NULL, &r);
    if (st != 200) {
        itest_resp_free(&r);
        return -1;
    }
    n = itest_jlen(r.json, "messages");
    for (int k = 0; k < n && k < max; k++) {
        char key[64];
        snprintf(key, sizeof(key), "messages.%d.id", k);
        snprintf(m[k].id, sizeof(m[k].id), "%s", itest_jstr(r.json, key));
        snprintf(key, sizeof(key), "messages.%d.payload", k);
        m[k].payload = itest_jint(r.json, key);
        snprintf(key, sizeof(key), "messages.%d.attempts", k);
        m[k].attempts = itest_jint(r.json, key);
    }
    itest_resp_free(&r);
    return n < max ? n : max;
}

/* ack - ack m[0..n) (each with the attempts it came with) for group g
 * through node i, again while the answer is 503; each outcome into out[]
 * ("" when no answer came). */
static void
ack(int i, const char *queue, const char *g, const struct msg *m, int n,
    char out[][16])
{
    static char body[64 * 1024];
    struct itest_resp r;
    int len;
    long st;

    len = snprintf(body, sizeof(body),
                   "{\"queue\":\"%s\",\"group\":\"%s\",\"acks\":[", queue, g);
    for (int k = 0; k < n; k++)
        len += snprintf(body + len, sizeof(body) - (size_t)len,
                        "%s{\"id\":\"%s\",\"attempts\":%lld}", k ? "," : "",
                        m[k].id, (long long)m[k].attempts);
    snprintf(body + len, sizeof(body) - (size_t)len, "]}");
    st = cl_call(&c, i, "POST", "/api/v1/ephemeral/ack", body, WAIT_MS, 50, &r);
    for (int k = 0; k < n; k++) {
        char key[64];
        snprintf(key, sizeof(key), "results.%d.outcome", k);
        snprintf(out[k], 16, "%s",
                 st == 200 && itest_jstr(r.json, key) ? itest_jstr(r.json, key)
                                                      : "");
    }
    itest_resp_free(&r);
}

/* node_knows - whether node i's own depth of queue lists group g. */
static int
node_knows(int i, const char *queue, const char *g)
{
    struct itest_resp r;
    int found = 0;
    long st = itest_get(&c.node[i], &r,
                        "/api/v1/ephemeral/queues/%s/depth?scope=node", queue);

    struct json_object *gs = st == 200 ? itest_jget(r.json, "groups") : NULL;
    for (int k = 0; gs && k < (int)json_object_array_length(gs); k++)
        found |= strcmp(itest_jstr(json_object_array_get_idx(gs, k), "group"),
                        g) == 0;
    itest_resp_free(&r);
    return found;
}

Test(cluster_groups, a_group_that_popped_one_node_holds_messages_on_the_others)
{
    char pa[16], pb[16];
    struct msg m[4];
    char out[4][16];

    cl_wait_view(&c, CL_ALL);
    cl_part_owned_by("grp-one", 0, 64, pa, sizeof(pa));
    cl_part_owned_by("grp-one", 1, 64, pb, sizeof(pb));
    /* A message on node 1, then "late" pops node 0's partition only: known
     * there at once, and on node 1, which holds the queue, a heartbeat
     * later (node 2, which does not, makes the queue for it a beat after). */
    push_ok(1, "grp-one", pb, 7, 1);
    cr_assert_eq(pop(0, "grp-one", pa, "late", m, 1), 0);
    int64_t deadline = itest_now_ms() + 10000, t0 = itest_now_ms();
    while (!node_knows(1, "grp-one", "late")) {
        cr_assert_lt(itest_now_ms(), deadline, "group 'late' not on node 1");
        itest_sleep_ms(20);
    }
    printf("group known on the node holding the queue after %lld ms\n",
           (long long)(itest_now_ms() - t0));
    while (!node_knows(2, "grp-one", "late")) {
        cr_assert_lt(itest_now_ms(), deadline, "group 'late' not on node 2");
        itest_sleep_ms(20);
    }
    printf("... and on the node not holding it after %lld ms\n",
           (long long)(itest_now_ms() - t0));
    /* "early" reads and completes the message on node 1: it stays for
     * "late", which never read there. */
    cr_assert_eq(pop(1, "grp-one", pb, "early", m, 1), 1);
    ack(1, "grp-one", "early", m, 1, out);
    cr_assert_str_eq(out[0], "acked");
    cr_assert_eq(pop(2, "grp-one", pb, "late", m, 1), 1,
                 "the message waited for 'late'");
    cr_expect_eq(m[0].payload, 7);
    cr_expect_eq(m[0].attempts, 1);
}

/*
 * Group "a" pops first through node 0, its own partition (nothing there);
 * at once a message is pushed through node 1 to a partition node 2 owns,
 * and group "b" reads and completes it through node 2: it waits for "a",
 * which reads it through any node.  Five queues, each its own first pop: a
 * heartbeat that happened to carry "a" in time would not hide the window
 * five times over.
 */
Test(cluster_groups, a_message_pushed_after_a_groups_first_pop_waits_for_it)
{
    struct msg m[4];
    char out[4][16];

    cl_wait_view(&c, CL_ALL);
    for (int k = 0; k < 5; k++) {
        char q[32], p0[16], p2[16];
        snprintf(q, sizeof(q), "grp-first-%d", k);
        cl_part_owned_by(q, 0, 64, p0, sizeof(p0));
        cl_part_owned_by(q, 2, 64, p2, sizeof(p2));
        cr_assert_eq(pop(0, q, p0, "a", m, 1), 0);
        push_ok(1, q, p2, 100 + k, 1);
        cr_assert_eq(pop(2, q, p2, "b", m, 1), 1, "%s: b's pop", q);
        ack(2, q, "b", m, 1, out);
        cr_assert_str_eq(out[0], "acked", "%s: b's ack", q);
        cr_assert_eq(pop(k % CL_NODES, q, p2, "a", m, 1), 1,
                     "%s: the message did not wait for 'a', whose first pop "
                     "was answered before it was pushed",
                     q);
        cr_expect_eq(m[0].payload, 100 + k);
        cr_expect_eq(m[0].attempts, 1);
    }
}

/* node_listed - the number at path in node i's own listing (scope=node)
 * of queue; -1 when it lists no such queue. */
static int64_t
node_listed(int i, const char *queue, const char *path)
{
    struct itest_resp r;
    int64_t v = -1;
    long st = itest_get(&c.node[i], &r,
                        "/api/v1/ephemeral/queues?prefix=%s&scope=node", queue);

    for (int k = 0; st == 200 && k < itest_jlen(r.json, "queues"); k++) {
        struct json_object *e =
            json_object_array_get_idx(itest_jget(r.json, "queues"), (size_t)k);
        if (strcmp(itest_jstr(e, "queue"), queue) == 0)
            v = itest_jint(e, path);
    }
    itest_resp_free(&r);
    return v;
}

/* declare_window - queue with windowBuffer {ms, count} through node 0,
 * until every node lists it. */
static void
declare_window(const char *queue, int ms, int count)
{
    struct itest_resp r;
    int64_t deadline = itest_now_ms() + WAIT_MS;

    for (;;) {
        itest_post(&c.node[0], &r, "/api/v1/ephemeral/configure",
                   "{\"queue\":\"%s\",\"options\":{\"windowBuffer\":"
                   "{\"ms\":%d,\"count\":%d}}}",
                   queue, ms, count);
        if (r.status != 503 || itest_now_ms() > deadline)
            break;
        itest_resp_free(&r);
        itest_sleep_ms(100);
    }
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++)
        while (node_listed(i, queue, "options.windowBuffer.count") != count) {
            cr_assert_lt(itest_now_ms(), deadline, "node %d's declaration", i);
            itest_sleep_ms(20);
        }
}

/* window_holds - push three messages one by one through node o to
 * partition p of queue while m's pop (no partition, through node 0)
 * waits: it answers only with all three (the window's count), holding the
 * first two leased on node o meanwhile. */
static void
window_holds(struct itest_multi *m, const char *queue, int o, const char *p)
{
    for (int k = 1; k <= 3; k++) {
        int64_t deadline = itest_now_ms() + WAIT_MS, got = -1;
        push_ok(o, queue, p, k, 1);
        while (k < 3) {
            itest_multi_run(m, 20);
            cr_assert(!itest_multi_done(m, 0),
                      "the windowed pop answered after %d of its 3 messages "
                      "(node %d's partition): %s",
                      k, o, itest_multi_resp(m, 0)->body);
            if (got == k)
                break; /* held, and still not answered after */
            got = node_listed(o, queue, "leased");
            cr_assert_lt(itest_now_ms(), deadline, "%lld leased, not %d",
                         (long long)got, k);
        }
    }
    cr_assert_eq(itest_multi_run(m, WAIT_MS), 0, "the pop never answered");
    struct itest_resp *a = itest_multi_resp(m, 0);
    cr_assert_eq(a->status, 200, "%ld %s", a->status, a->body);
    cr_assert_eq(itest_jlen(a->json, "messages"), 3, "%s", a->body);
}

Test(cluster_groups, a_pop_with_no_partition_keeps_the_window_on_every_node)
{
    static const char *const q = "grp-win";

    cl_wait_view(&c, CL_ALL);
    declare_window(q, 60000, 3);
    /* The messages on a peer the pop is passed to (node 1, then node 2),
     * then on node 0 itself; with autoAck on node 2 and node 0: what the
     * window held leased is completed as it answers. */
    for (int k = 1; k <= CL_NODES; k++) {
        int o = k % CL_NODES, auto_ack = o != 1;
        char p[16], path[256];
        struct itest_multi *m = itest_multi_new();
        cl_part_owned_by(q, o, 64, p, sizeof(p));
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=%s&group=w&batch=10&wait=true"
                 "&timeout=30000&autoAck=%s",
                 q, auto_ack ? "true" : "false");
        itest_multi_add(m, &c.node[0], "GET", path, NULL);
        itest_multi_until_parked(&c.node[0], m, WAIT_MS);
        window_holds(m, q, o, p);
        itest_multi_free(m);
        cr_expect_eq(node_listed(o, q, "leased"), auto_ack ? 0 : 3,
                     "node %d's leases after the answer (autoAck %d)", o,
                     auto_ack);
    }
}

Test(cluster_groups, an_ack_on_a_queue_that_does_not_exist_is_unknown)
{
    char out[4][16];
    struct msg m[2];

    cl_wait_view(&c, CL_ALL);
    /* An id each node could have delivered, of a partition another node
     * owns, on a queue no node holds: acked through every node. */
    for (int i = 0; i < CL_NODES; i++) {
        struct itest_resp r;
        char p[16];
        cr_assert_eq(itest_get(&c.node[i], &r, "/health"), 200);
        cl_part_owned_by("grp-none", (i + 1) % CL_NODES, 64, p, sizeof(p));
        snprintf(m[0].id, sizeof(m[0].id), "e:%s:%s:3",
                 itest_jstr(r.json, "incarnation"), p);
        m[0].attempts = 1;
        itest_resp_free(&r);
        for (int via = 0; via < CL_NODES; via++) {
            ack(via, "grp-none", "g", m, 1, out);
            cr_expect_str_eq(out[0], "unknown",
                             "node %d's id acked through node %d: %s", i, via,
                             out[0]);
        }
    }
}

/* up_idle - the cluster with groups forgotten after 3 idle seconds. */
static void
up_idle(void)
{
    cl_up(&c, NODE_OPT " implicit_idle_s=3");
}

Test(cluster_groups, a_group_idle_everywhere_is_forgotten_everywhere,
     .init = up_idle)
{
    char pa[16], pb[16];
    struct msg m[4];

    cl_wait_view(&c, CL_ALL);
    cl_part_owned_by("grp-idle", 0, 64, pa, sizeof(pa));
    cl_part_owned_by("grp-idle", 1, 64, pb, sizeof(pb));
    /* The queue is held on node 1 (a message waits there); "gone" pops
     * only node 0's partition, once, and then never again. */
    push_ok(1, "grp-idle", pb, 1, 1);
    cr_assert_eq(pop(0, "grp-idle", pa, "gone", m, 1), 0);
    int64_t deadline = itest_now_ms() + 10000;
    while (!node_knows(1, "grp-idle", "gone")) {
        cr_assert_lt(itest_now_ms(), deadline, "group 'gone' not on node 1");
        itest_sleep_ms(20);
    }
    /* Idle everywhere for implicit_idle_s: every node forgets it. */
    deadline = itest_now_ms() + 30000;
    for (int i = 0; i < CL_NODES; i++)
        while (node_knows(i, "grp-idle", "gone")) {
            cr_assert_lt(itest_now_ms(), deadline,
                         "node %d still lists the group idle for 3 s", i);
            itest_sleep_ms(100);
        }
    /* Forgotten, it does not come back from a peer's heartbeat. */
    itest_sleep_ms(1500);
    for (int i = 0; i < CL_NODES; i++)
        cr_assert(!node_knows(i, "grp-idle", "gone"),
                  "node %d learned the forgotten group again", i);
}

/* ---- the rolling restart --------------------------------------------- */

#define ROLL_Q     "grp-roll"
#define ROLL_PARTS 6
#define ROLL_MAX   200000 /* payloads the test may push */
#define ROLL_BATCH 5
#define ROLL_NG    2

static const char *const roll_group[ROLL_NG] = {"fan", "comp"};

/* What the test saw of each payload, per group. */
struct roll {
    int accepted[ROLL_MAX];         /* 1: a push of it answered 201 */
    int done[ROLL_NG][ROLL_MAX];    /* its group completed it (acked) */
    int seen[ROLL_NG][ROLL_MAX];    /* deliveries */
    int unacked[ROLL_NG][ROLL_MAX]; /* deliveries not answered acked */
    int stale[ROLL_NG][ROLL_MAX];   /* of which answered stale */
    long dup_stale[ROLL_NG];        /* again after a stale ack */
    long dup_unacked[ROLL_NG];      /* again after an ack with no answer
                                        (lease moved or ran out) */
    long reread[ROLL_NG];           /* again after it was completed */
    long delivered[ROLL_NG];        /* distinct payloads delivered */
    int next;                       /* next payload */
    int64_t first_reread_payload[ROLL_NG];
    /* What a missed payload's report says: where and when each batch was
     * pushed, and each group's first delivery of each payload. */
    int64_t t0;
    int8_t push_node[ROLL_MAX / ROLL_BATCH];
    int32_t push_ms[ROLL_MAX / ROLL_BATCH];
    int8_t got_node[ROLL_NG][ROLL_MAX];
    int32_t got_ms[ROLL_NG][ROLL_MAX];
    char got_id[ROLL_NG][ROLL_MAX / ROLL_BATCH][48]; /* a batch's first */
    char events[2048];                               /* the restarts, when */
};

static struct roll R;

/* One push of ROLL_BATCH payloads through node i, to the next partition. */
static void
roll_push(int i)
{
    static int k;
    char p[16];

    if (R.next + ROLL_BATCH > ROLL_MAX)
        return;
    snprintf(p, sizeof(p), "r%d", k++ % ROLL_PARTS);
    R.push_node[R.next / ROLL_BATCH] = (int8_t)i;
    R.push_ms[R.next / ROLL_BATCH] = (int32_t)(itest_now_ms() - R.t0);
    if (push_at(i, ROLL_Q, p, R.next, ROLL_BATCH) == 201)
        for (int j = 0; j < ROLL_BATCH; j++)
            R.accepted[R.next + j] = 1;
    R.next += ROLL_BATCH;
}

/* One consumer's turn: group gi pops what node i holds and acks it there. */
static int
roll_consume(int i, int gi)
{
    struct msg m[32];
    char out[32][16];
    int n = pop(i, ROLL_Q, NULL, roll_group[gi], m, 32);

    if (n <= 0)
        return 0;
    ack(i, ROLL_Q, roll_group[gi], m, n, out);
    for (int k = 0; k < n; k++) {
        int64_t v = m[k].payload;
        cr_assert(v >= 0 && v < ROLL_MAX, "payload %lld", (long long)v);
        if (R.seen[gi][v] > 0) {
            if (R.done[gi][v]) {
                if (R.reread[gi]++ == 0)
                    R.first_reread_payload[gi] = v;
            } else if (R.stale[gi][v] > 0)
                R.dup_stale[gi]++;
            else
                R.dup_unacked[gi]++;
        } else {
            R.delivered[gi]++;
            R.got_node[gi][v] = (int8_t)i;
            R.got_ms[gi][v] = (int32_t)(itest_now_ms() - R.t0);
            if (v % ROLL_BATCH == 0)
                snprintf(R.got_id[gi][v / ROLL_BATCH], 48, "%.47s", m[k].id);
        }
        R.seen[gi][v]++;
        if (strcmp(out[k], "acked") == 0)
            R.done[gi][v] = 1;
        else {
            R.unacked[gi][v]++;
            R.stale[gi][v] += strcmp(out[k], "stale") == 0;
        }
    }
    return n;
}

/* One round of load: a push through some live node, then every group
 * consumes through every live node. */
static void
roll_round(void)
{
    static int rr;
    unsigned s = live();

    for (int t = 0; t < CL_NODES; t++) {
        int i = (rr + t) % CL_NODES;
        if (s & (1u << i)) {
            roll_push(i);
            break;
        }
    }
    rr++;
    for (int i = 0; i < CL_NODES; i++)
        for (int gi = 0; gi < ROLL_NG && (s & (1u << i)); gi++)
            roll_consume(i, gi);
}

/* Rounds of load for ms. */
static void
roll_for(int ms)
{
    int64_t until = itest_now_ms() + ms;

    while (itest_now_ms() < until)
        roll_round();
}

/* missing - accepted payloads group gi has not had yet, pushed before
 * upto. */
static int
missing(int gi, int upto)
{
    int n = 0;

    for (int v = 0; v < upto; v++)
        n += R.accepted[v] && R.seen[gi][v] == 0;
    return n;
}

/* event - note what happened to the cluster when, for the report. */
static void __attribute__((format(printf, 1, 2))) event(const char *fmt, ...)
{
    size_t used = strlen(R.events);
    va_list ap;

    used += (size_t)snprintf(R.events + used, sizeof(R.events) - used,
                             "%s%lld ms: ", used ? "; " : "",
                             (long long)(itest_now_ms() - R.t0));
    va_start(ap, fmt);
    if (used < sizeof(R.events))
        vsnprintf(R.events + used, sizeof(R.events) - used, fmt, ap);
    va_end(ap);
}

/* report_missed - where missed payload v was pushed, and how the other
 * group got it. */
static void
report_missed(int gi, int v)
{
    int b = v / ROLL_BATCH, o = 1 - gi;

    printf("    missed payload %d (partition r%d): pushed through node %d at "
           "%d ms",
           v, b % ROLL_PARTS, R.push_node[b], R.push_ms[b]);
    if (R.seen[o][v])
        printf("; group %s had it through node %d at %d ms (batch's first "
               "id %s)",
               roll_group[o], R.got_node[o][v], R.got_ms[o][v],
               R.got_id[o][b][0] ? R.got_id[o][b] : "?");
    printf("\n");
}

/* segments_sound - every running node's segment passes the live check
 * (shm/check.h): holds, adopted group positions and owed deliveries
 * included. */
static void
segments_sound(void)
{
    char out[1024];

    for (int i = 0; i < CL_NODES; i++)
        if (c.node[i].pid > 0)
            cr_expect_eq(itest_check_segment(&c.node[i], out, sizeof(out)), 0,
                         "node %d's segment: %s", i, out);
}

/* healthy - node i answers /health 200. */
static int
healthy(int i)
{
    struct itest_resp r;
    long st = itest_req(&c.node[i], "GET", "/health", NULL, &r);

    itest_resp_free(&r);
    return st == 200;
}

Test(cluster_groups, two_groups_read_everything_once_through_a_rolling_restart,
     .timeout = 600)
{
    cl_wait_view(&c, CL_ALL);
    memset(&R, 0, sizeof(R));
    R.t0 = itest_now_ms();
    /* Both groups known everywhere before the first message (they are
     * known elsewhere within a second or so of their first pop). */
    for (int i = 0; i < CL_NODES; i++)
        for (int gi = 0; gi < ROLL_NG; gi++)
            roll_consume(i, gi);
    int64_t known_by = itest_now_ms() + 10000;
    for (int i = 0; i < CL_NODES; i++)
        for (int gi = 0; gi < ROLL_NG; gi++)
            while (!node_knows(i, ROLL_Q, roll_group[gi])) {
                cr_assert_lt(itest_now_ms(), known_by, "node %d, group %s", i,
                             roll_group[gi]);
                itest_sleep_ms(50);
            }
    roll_for(2000);
    printf("before the restarts: %d pushed, missing fan=%d comp=%d\n", R.next,
           missing(0, R.next - 50), missing(1, R.next - 50));
    for (int x = 0; x < CL_NODES; x++) {
        int status;
        /* SIGTERM under load: the drain runs while the others push and
         * read. */
        kill(c.node[x].pid, SIGTERM);
        event("TERM node %d", x);
        int64_t deadline = itest_now_ms() + STOP_MS;
        while (waitpid(c.node[x].pid, &status, WNOHANG) != c.node[x].pid) {
            cr_assert_lt(itest_now_ms(), deadline, "node %d's drain", x);
            for (int i = 0; i < CL_NODES; i++)
                if (i != x)
                    for (int gi = 0; gi < ROLL_NG; gi++)
                        roll_consume(i, gi);
            roll_push(x == 0 ? 1 : 0);
        }
        c.node[x].pid = 0;
        event("node %d exited", x);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "node %d's drain exit: %d", x, status);
        roll_for(1000);
        /* Back, under load. */
        cl_spawn(&c, x, NODE_OPT);
        event("node %d started", x);
        deadline = itest_now_ms() + WAIT_MS;
        while (!healthy(x)) {
            cr_assert_lt(itest_now_ms(), deadline, "node %d's start", x);
            roll_round();
        }
        event("node %d healthy", x);
        roll_for(3000);
        printf("after node %d's restart: %d pushed, missing fan=%d comp=%d\n",
               x, R.next, missing(0, R.next - 50), missing(1, R.next - 50));
    }
    /* No more pushes: read what is left until both groups have had every
     * accepted message (leases of unanswered acks run out at 300 s, moved
     * ones came back already). */
    int64_t deadline = itest_now_ms() + 60000;
    long accepted = 0;
    for (int v = 0; v < R.next; v++)
        accepted += R.accepted[v];
    for (;;) {
        int got = 0, missing = 0;
        for (int i = 0; i < CL_NODES; i++)
            for (int gi = 0; gi < ROLL_NG; gi++)
                got += roll_consume(i, gi);
        for (int gi = 0; gi < ROLL_NG; gi++)
            for (int v = 0; v < R.next; v++)
                missing += R.accepted[v] && R.seen[gi][v] == 0;
        if (missing == 0 || itest_now_ms() > deadline)
            break;
        if (got == 0)
            itest_sleep_ms(100);
    }
    printf("rolling restart of 3 nodes: accepted=%ld (of %d pushed)\n",
           accepted, R.next);
    for (int gi = 0; gi < ROLL_NG; gi++) {
        long lost = 0, extra = 0;
        for (int v = 0; v < R.next; v++) {
            lost += R.accepted[v] && R.seen[gi][v] == 0;
            extra += !R.accepted[v] && R.seen[gi][v] > 0;
        }
        printf("  group %-4s delivered=%ld lost=%ld duplicates: "
               "after-stale-ack=%ld after-unanswered-ack=%ld "
               "re-read-after-completed=%ld (refused pushes seen: %ld)\n",
               roll_group[gi], R.delivered[gi], lost, R.dup_stale[gi],
               R.dup_unacked[gi], R.reread[gi], extra);
        for (int v = 0, k = 0; v < R.next && k < 10; v++)
            if (R.accepted[v] && R.seen[gi][v] == 0 && ++k)
                report_missed(gi, v);
        if (lost > 0)
            printf("    the restarts: %s\n", R.events);
        for (int i = 0; i < CL_NODES && lost > 0; i++) {
            struct itest_resp r;
            itest_get(&c.node[i], &r,
                      "/api/v1/ephemeral/queues/%s/depth?scope=node&group=%s",
                      ROLL_Q, roll_group[gi]);
            printf("    node %d: %s\n", i, r.body);
            itest_resp_free(&r);
        }
        cr_expect_eq(lost, 0, "group %s missed %ld accepted messages",
                     roll_group[gi], lost);
        cr_expect_eq(R.reread[gi], 0,
                     "group %s read %ld messages again after completing "
                     "them (first: payload %lld)",
                     roll_group[gi], R.reread[gi],
                     (long long)R.first_reread_payload[gi]);
    }
    fflush(stdout);
    segments_sound();
}

/* ---- a node starting into the cluster ------------------------------- */

#define START_Q   "grp-start"
#define START_MAX 20000

/*
 * From the moment a restarted node's port accepts until it says ready,
 * pushes go through it and group "early" pops and acks through it all the
 * while; "late", known everywhere before the restart, reads nothing until
 * the end.  Every push answered 201 must reach "late": a node that served
 * the queue itself before hearing its peers kept such a push, and freed it
 * once "early" completed it, before it learned of "late" (the batch the
 * rolling restart lost in 2 of 8 runs).
 */
Test(cluster_groups, a_push_through_a_starting_node_waits_for_every_group)
{
    static int accepted[START_MAX], seen[START_MAX];
    struct msg m[32];
    char out[32][16];
    int next = 0, before = 0;

    cl_wait_view(&c, CL_ALL);
    cr_assert_eq(pop(1, START_Q, NULL, "late", m, 1), 0);
    cr_assert_eq(pop(1, START_Q, NULL, "early", m, 1), 0);
    int64_t deadline = itest_now_ms() + 10000;
    for (int i = 0; i < CL_NODES; i++)
        while (!node_knows(i, START_Q, "late")) {
            cr_assert_lt(itest_now_ms(), deadline, "late unknown on %d", i);
            itest_sleep_ms(20);
        }
    cr_assert_eq(cl_stop(&c, 0, STOP_MS), 0);
    cl_spawn(&c, 0, NODE_OPT);
    deadline = itest_now_ms() + WAIT_MS;
    while (!healthy(0)) {
        cr_assert_lt(itest_now_ms(), deadline, "node 0's start");
        if (next < START_MAX) {
            char p[16];
            snprintf(p, sizeof(p), "s%d", next % 4);
            if (push_at(0, START_Q, p, next, 1) == 201) {
                accepted[next] = 1;
                before++;
            }
            next++;
        }
        int n = pop(0, START_Q, NULL, "early", m, 32);
        if (n > 0)
            ack(0, START_Q, "early", m, n, out);
    }
    printf("pushes through a starting node before it said ready: %d, %d "
           "accepted\n",
           next, before);
    /* "late" reads everything accepted, through any node. */
    int missing = before;
    deadline = itest_now_ms() + WAIT_MS;
    while (missing > 0 && itest_now_ms() < deadline) {
        int got = 0;
        for (int i = 0; i < CL_NODES; i++) {
            int n = pop(i, START_Q, NULL, "late", m, 32);
            for (int k = 0; k < n; k++) {
                int64_t v = m[k].payload;
                cr_assert(v >= 0 && v < next, "payload %lld", (long long)v);
                missing -= accepted[v] && seen[v]++ == 0;
            }
            if (n > 0)
                ack(i, START_Q, "late", m, n, out);
            got += n > 0 ? n : 0;
        }
        if (got == 0)
            itest_sleep_ms(50);
    }
    for (int v = 0, k = 0; v < next && k < 10; v++)
        if (accepted[v] && !seen[v] && ++k)
            printf("  'late' missed payload %d (partition s%d)\n", v, v % 4);
    cr_expect_eq(missing, 0,
                 "'late' missed %d of the %d pushes a starting node accepted",
                 missing, before);
}

/* ---- a move by SIGTERM, with pushes going on ------------------------- */

/*
 * The scene: partition p of queue is owned by node x; y is its owner once
 * x is out.  Group g has read p on y before (x was out then, and p came
 * back to it: an emptied partition stays where its group state is), then
 * read p on x: message 0 completed, message 1 leased.  x gets SIGTERM
 * while pushes to p go on through the third node; g pops p through y
 * meanwhile (and group h, to have a state there).  s->pushed is the
 * payload after the last one pushed.
 */
struct move {
    const char *queue;
    char p[16];
    int x, y, z;
    struct msg leased;
    int pushed; /* payloads 0..pushed-1 were pushed, in order */
};

static void
move_scene(struct move *s, const char *queue)
{
    struct msg m[8];
    char out[8][16];

    memset(s, 0, sizeof(*s));
    s->queue = queue;
    cl_wait_view(&c, CL_ALL);
    s->x = 0;
    cl_part_owned_by(queue, s->x, 64, s->p, sizeof(s->p));
    s->y = cl_owner(queue, s->p, CL_ALL & ~(1u << s->x));
    s->z = CL_NODES - s->x - s->y;
    /* g reads p on y while x is out. */
    cr_assert_eq(cl_stop(&c, s->x, STOP_MS), 0);
    cl_wait_view(&c, CL_ALL & ~(1u << s->x));
    push_ok(s->z, queue, s->p, 1000, 1);
    cr_assert_eq(pop(s->y, queue, s->p, "g", m, 1), 1);
    cr_assert_eq(m[0].payload, 1000);
    ack(s->y, queue, "g", m, 1, out);
    cr_assert_str_eq(out[0], "acked");
    cl_start(&c, s->x, NODE_OPT);
    cl_wait_view(&c, CL_ALL);
    /* Then on x: 0 completed, 1 leased, 2 and 3 unread. */
    push_ok(s->z, queue, s->p, 0, 4);
    s->pushed = 4;
    cr_assert_eq(pop(s->z, queue, s->p, "g", m, 1), 1);
    cr_assert_eq(m[0].payload, 0);
    ack(s->z, queue, "g", m, 1, out);
    cr_assert_str_eq(out[0], "acked");
    cr_assert_eq(pop(s->z, queue, s->p, "g", &s->leased, 1), 1);
    cr_assert_eq(s->leased.payload, 1);
    cr_assert_eq(s->leased.attempts, 1);
    /* SIGTERM; pushes go on through z, and g polls p through y. */
    kill(c.node[s->x].pid, SIGTERM);
    int64_t deadline = itest_now_ms() + STOP_MS;
    int status;
    while (waitpid(c.node[s->x].pid, &status, WNOHANG) != c.node[s->x].pid) {
        cr_assert_lt(itest_now_ms(), deadline, "node %d's drain", s->x);
        if (push_at(s->z, queue, s->p, s->pushed, 1) == 201)
            s->pushed++;
        else
            itest_sleep_ms(20);
        (void)pop(s->y, queue, s->p, "h", m, 0 + 1); /* another group */
    }
    c.node[s->x].pid = 0;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* A little more after. */
    for (int k = 0; k < 20; k++)
        push_ok(s->z, queue, s->p, s->pushed++, 1);
}

Test(cluster_groups, a_moved_lease_comes_back_with_attempts_plus_one)
{
    struct move s;
    struct msg m[1];

    move_scene(&s, "grp-lease");
    int64_t deadline = itest_now_ms() + WAIT_MS;
    int n;
    while ((n = pop(s.y, s.queue, s.p, "g", m, 1)) != 1) {
        cr_assert_lt(itest_now_ms(), deadline, "nothing for g on node %d", s.y);
        itest_sleep_ms(50);
    }
    cr_expect_eq(m[0].payload, 1, "the leased message comes first");
    cr_expect_eq(m[0].attempts, 2, "attempts + 1");
}

Test(cluster_groups, order_holds_across_a_sigterm_hand_over_with_pushes_on)
{
    struct move s;
    struct msg m[64];
    char out[64][16];
    int64_t last = -1, deadline;
    int got = 0;

    move_scene(&s, "grp-order");
    /* g: the redelivery of 1 first, then 2, 3, 4, ... in push order. */
    deadline = itest_now_ms() + WAIT_MS;
    while (last < s.pushed - 1) {
        int n = pop(s.y, s.queue, s.p, "g", m, 64);
        cr_assert_lt(itest_now_ms(), deadline, "g stopped at %lld of %d",
                     (long long)last, s.pushed - 1);
        if (n <= 0) {
            itest_sleep_ms(50);
            continue;
        }
        ack(s.y, s.queue, "g", m, n, out);
        for (int k = 0; k < n; k++, got++) {
            if (last < 0) {
                cr_expect_eq(m[k].payload, 1, "the redelivery first");
                last = 1;
                continue;
            }
            cr_assert_eq(m[k].payload, last + 1,
                         "after %lld came %lld (attempts %lld)",
                         (long long)last, (long long)m[k].payload,
                         (long long)m[k].attempts);
            last = m[k].payload;
        }
    }
    /* Group h read nothing while the hand-over was on its way, then all of
     * it in order too. */
    printf("order across a SIGTERM hand-over: %d messages pushed, %d read "
           "in order\n",
           s.pushed, got);
    segments_sound();
}
