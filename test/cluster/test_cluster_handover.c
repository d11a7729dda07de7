/*
 * test_cluster_handover.c - partitions moving between three real nodes
 * (SPEC §5): a graceful stop hands every partition it holds to its next
 * owner, messages and group positions with it; a node that comes back gets
 * its partitions back; a killed node's share is lost and served again,
 * empty, by the others.
 *
 * Who owns a partition is computed here as every node computes it
 * (shm/owner.h over the live members n0..n2), and checked against what each
 * node says it holds (depth, scope=node).  Nodes lease for 300 s
 * (lease_s), so a lease never runs out while a test runs: a redelivery seen
 * here comes from a hand-over.  Every wait polls a condition.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "shm/owner.h"
#include "test/cluster/suite.h"
#include "test/integration/sse.h"

#define NPARTS   12 /* partitions of the test queue */
#define WAIT_MS  30000
#define STOP_MS  60000 /* a drain: workers, hand-over (15 s), raft */
#define NODE_OPT "lease_s=300"
/* member_ttl_ms (4 s) and slack, well below leave_exclude_s (30 s) */
#define ACK_GONE_MS 15000

static struct cl c;

CL_SUITE(cluster_handover, &c, NODE_OPT, CL_SUITE_STARTED, .timeout = 300);

/* part - the name of test partition k. */
static const char *
part(int k)
{
    static char names[NPARTS][8];

    snprintf(names[k], sizeof(names[k]), "p%02d", k);
    return names[k];
}

/* busiest - the node that owns the most test partitions of queue. */
static int
busiest(const char *queue)
{
    int n[CL_NODES] = {0}, best = 0;

    for (int k = 0; k < NPARTS; k++)
        n[cl_owner(queue, part(k), CL_ALL)]++;
    for (int i = 1; i < CL_NODES; i++)
        if (n[i] > n[best])
            best = i;
    cr_assert_gt(n[best], 0);
    return best;
}

/* push - n messages (payloads first, first+1, ...) to queue/p through
 * node i; asserts 201. */
static void
push(int i, const char *queue, const char *p, int first, int n)
{
    struct itest_resp r;
    char body[1024];
    int len;

    len = snprintf(body, sizeof(body),
                   "{\"queue\":\"%s\",\"partition\":\"%s\",\"messages\":[",
                   queue, p);
    for (int k = 0; k < n; k++)
        len += snprintf(body + len, sizeof(body) - (size_t)len,
                        "%s{\"payload\":%d}", k ? "," : "", first + k);
    snprintf(body + len, sizeof(body) - (size_t)len, "]}");
    long st = cl_call(&c, i, "POST", "/api/v1/ephemeral/push", body, WAIT_MS,
                      100, &r);
    cr_assert_eq(st, 201, "push %s/%s on node %d: %ld %s", queue, p, i, st,
                 r.body);
    itest_resp_free(&r);
}

/* A popped message. */
struct msg {
    char id[128];
    int64_t payload, attempts;
};

/* pop1 - pop one message of queue/p for group g through node i (no
 * autoAck, no wait); 1 with *m filled, 0 when there was none. */
static int
pop1(int i, const char *queue, const char *p, const char *g, struct msg *m)
{
    struct itest_resp r;
    char path[256];
    int n;

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s&partition=%s&group=%s&batch=1",
             queue, p, g);
    long st = cl_call(&c, i, "GET", path, NULL, WAIT_MS, 100, &r);
    cr_assert_eq(st, 200, "pop %s/%s on node %d: %ld %s", queue, p, i, st,
                 r.body);
    n = itest_jlen(r.json, "messages");
    cr_assert(n == 0 || n == 1, "%s", r.body);
    if (n == 1) {
        snprintf(m->id, sizeof(m->id), "%s",
                 itest_jstr(r.json, "messages.0.id"));
        m->payload = itest_jint(r.json, "messages.0.payload");
        m->attempts = itest_jint(r.json, "messages.0.attempts");
    }
    itest_resp_free(&r);
    return n;
}

/* ack - ack id for group g through node i; the outcome (static). */
static const char *
ack(int i, const char *queue, const char *g, const char *id)
{
    static char outcome[32];
    struct itest_resp r;
    char body[512];

    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"group\":\"%s\",\"acks\":[{\"id\":\"%s\"}]}",
             queue, g, id);
    long st =
        cl_call(&c, i, "POST", "/api/v1/ephemeral/ack", body, WAIT_MS, 100, &r);
    cr_assert_eq(st, 200, "ack %s on node %d: %ld %s", id, i, st, r.body);
    snprintf(outcome, sizeof(outcome), "%s",
             itest_jstr(r.json, "results.0.outcome"));
    itest_resp_free(&r);
    return outcome;
}

/* held - field of partition p in node i's own depth of queue (group g,
 * NULL for none); -1 when node i does not hold p. */
static int64_t
held(int i, const char *queue, const char *p, const char *g, const char *field)
{
    struct itest_resp r;
    int64_t v = -1;
    long st = itest_get(&c.node[i], &r,
                        "/api/v1/ephemeral/queues/%s/depth?scope=node%s%s",
                        queue, g ? "&group=" : "", g ? g : "");

    cr_assert(st == 200 || st == 404, "depth on node %d: %ld %s", i, st,
              r.body);
    struct json_object *parts = itest_jget(r.json, "partitions");
    for (int k = 0; parts && k < (int)json_object_array_length(parts); k++) {
        struct json_object *e = json_object_array_get_idx(parts, k);
        if (strcmp(itest_jstr(e, "partition"), p) == 0)
            v = itest_jint(e, field);
    }
    itest_resp_free(&r);
    return v;
}

/* cluster_pending - "pending" of depth?scope=cluster&group=g on node i once
 * every node in alive answered (up to WAIT_MS). */
static int64_t
cluster_pending(int i, const char *queue, const char *g, unsigned alive)
{
    int64_t deadline = itest_now_ms() + WAIT_MS, v;
    int want = __builtin_popcount(alive);
    struct itest_resp r;

    for (;;) {
        long st = itest_get(&c.node[i], &r,
                            "/api/v1/ephemeral/queues/%s/depth?scope=cluster"
                            "&group=%s",
                            queue, g);
        if (st == 200 && itest_jlen(r.json, "nodes") == want &&
            itest_jlen(r.json, "missing") == 0)
            break;
        cr_assert_lt(itest_now_ms(), deadline, "cluster depth: %ld %s", st,
                     r.body);
        itest_resp_free(&r);
        itest_sleep_ms(100);
    }
    v = itest_jint(r.json, "pending");
    itest_resp_free(&r);
    return v;
}

/* metric - the sum of series over the nodes in set. */
static double
metric(unsigned set, const char *series)
{
    double sum = 0;

    for (int i = 0; i < CL_NODES; i++) {
        double v;
        if ((set & (1u << i)) && itest_metric(&c.node[i], series, &v) == 0)
            sum += v;
    }
    return sum;
}

/* log_has - node i's log holds the text. */
static int
log_has(int i, const char *text)
{
    return itest_node_log_contains(&c.node[i], text);
}

/* expect_drain_log - node i's drain logged its hand-over: rings delivered
 * and lost, and the messages in them. */
static void
expect_drain_log(int i, int delivered, int lost, int msgs_delivered,
                 int msgs_lost)
{
    char text[200];

    snprintf(text, sizeof(text),
             "shutdown: ephemeral rings handed over rings=%d delivered=%d "
             "lost=%d (messages delivered=%d lost=%d)",
             delivered + lost, delivered, lost, msgs_delivered, msgs_lost);
    cr_expect(log_has(i, text), "node %d's log lacks \"%s\"", i, text);
}

/*
 * The scene of the graceful-stop tests: NPARTS partitions of queue hold
 * payloads 0, 1, 2 (pushed through node 0); group g acked 0 and holds 1
 * leased (leased[k] is its delivery) in every partition.  Then node x, the
 * one owning the most of them, gets SIGTERM, hands its partitions (2
 * messages each: the acked one is gone) over and exits 0.
 */
struct scene {
    const char *queue;
    int x;             /* the stopped node */
    int client;        /* a survivor the test talks to */
    unsigned left;     /* the survivors */
    int moved[NPARTS]; /* 1: x owned it */
    int nmoved;        /* how many */
    struct msg leased[NPARTS];
};

static void
scene(struct scene *s, const char *queue)
{
    struct msg m;

    memset(s, 0, sizeof(*s));
    s->queue = queue;
    cl_wait_view(&c, CL_ALL);
    for (int k = 0; k < NPARTS; k++)
        push(0, queue, part(k), 0, 3);
    for (int k = 0; k < NPARTS; k++) {
        cr_assert_eq(pop1(0, queue, part(k), "g", &m), 1);
        cr_assert_eq(m.payload, 0, "%s", part(k));
        cr_assert_str_eq(ack(0, queue, "g", m.id), "acked", "%s", m.id);
        cr_assert_eq(pop1(0, queue, part(k), "g", &s->leased[k]), 1);
        cr_assert_eq(s->leased[k].payload, 1);
        cr_assert_eq(s->leased[k].attempts, 1);
    }
    s->x = busiest(queue);
    s->client = s->x == 0 ? 1 : 0;
    s->left = CL_ALL & ~(1u << s->x);
    for (int k = 0; k < NPARTS; k++) {
        s->moved[k] = cl_owner(queue, part(k), CL_ALL) == s->x;
        s->nmoved += s->moved[k];
        /* each node holds what it owns, and only that */
        for (int i = 0; i < CL_NODES; i++)
            cr_assert_eq(held(i, queue, part(k), "g", "leased"),
                         cl_owner(queue, part(k), CL_ALL) == i ? 1 : -1,
                         "node %d, partition %s", i, part(k));
    }

    cr_assert_eq(cl_stop(&c, s->x, STOP_MS), 0, "node %d's exit", s->x);
    expect_drain_log(s->x, s->nmoved, 0, 2 * s->nmoved, 0);
    cl_wait_view(&c, s->left);
}

Test(cluster_handover, sigterm_hands_every_partition_to_its_next_owner)
{
    struct scene s;
    struct msg m;

    scene(&s, "ho-term");
    /* Group g: in a moved partition, the leased message (now pending
     * again) and the unread one; elsewhere the unread one. */
    cr_expect_eq(cluster_pending(s.client, s.queue, "g", s.left),
                 2 * s.nmoved + (NPARTS - s.nmoved));
    for (int k = 0; k < NPARTS; k++) {
        int o = cl_owner(s.queue, part(k), s.left);

        if (s.moved[k]) {
            char inc_old[32], inc_new[32], p[32], q[32];

            cr_expect_eq(held(o, s.queue, part(k), "g", "pending"), 2,
                         "partition %s on node %d", part(k), o);
            cr_assert_eq(pop1(s.client, s.queue, part(k), "g", &m), 1,
                         "partition %s", part(k));
            cr_expect_eq(m.payload, 1, "partition %s: the leased first",
                         part(k));
            cr_expect_eq(m.attempts, 2, "partition %s", part(k));
            /* a new id, of the new owner's incarnation */
            cr_assert_eq(itest_id_parse(s.leased[k].id, inc_old,
                                        sizeof(inc_old), p, sizeof(p), q,
                                        sizeof(q)),
                         0);
            cr_assert_eq(itest_id_parse(m.id, inc_new, sizeof(inc_new), p,
                                        sizeof(p), q, sizeof(q)),
                         0);
            cr_expect_str_neq(inc_old, inc_new, "%s", m.id);
        } else {
            cr_expect_eq(held(o, s.queue, part(k), "g", "leased"), 1,
                         "partition %s on node %d", part(k), o);
        }
        cr_assert_eq(pop1(s.client, s.queue, part(k), "g", &m), 1,
                     "partition %s", part(k));
        cr_expect_eq(m.payload, 2, "partition %s", part(k));
        cr_expect_eq(m.attempts, 1, "partition %s", part(k));
        /* never the acked one, nor anything else */
        cr_expect_eq(pop1(s.client, s.queue, part(k), "g", &m), 0,
                     "partition %s gave payload %lld", part(k),
                     (long long)m.payload);
    }
    cr_expect_geq(metric(s.left, "mayfly_handover_total{direction=\"in\","
                                 "result=\"ok\"}"),
                  s.nmoved);
    cr_expect_eq(metric(s.left, "mayfly_handover_total{direction=\"in\","
                                "result=\"failed\"}"),
                 0);
    cr_expect_eq(metric(s.left, "mayfly_wipes_total"), 0);
}

Test(cluster_handover, an_ack_of_an_id_the_stopped_node_delivered_is_stale)
{
    struct scene s;
    struct msg m;
    int k = 0;
    int64_t start;

    scene(&s, "ho-stale");
    while (!s.moved[k])
        k++;
    /* Until the others find the stopped node gone (member_ttl_ms, 4 s) an
     * ack of its ids may be sent after it and answer 503: ack() retries,
     * as a client does, but not for long. */
    start = itest_now_ms();
    cr_expect_str_eq(ack(s.client, s.queue, "g", s.leased[k].id), "stale", "%s",
                     s.leased[k].id);
    cr_expect_lt(itest_now_ms() - start, ACK_GONE_MS,
                 "the ack answered stale only after %lld ms",
                 (long long)(itest_now_ms() - start));
    /* the stale ack touched nothing: the message comes again, and its new
     * id acks */
    cr_assert_eq(pop1(s.client, s.queue, part(k), "g", &m), 1);
    cr_expect_eq(m.payload, 1);
    cr_expect_eq(m.attempts, 2);
    cr_expect_str_eq(ack(s.client, s.queue, "g", m.id), "acked", "%s", m.id);
    cr_expect_str_eq(ack(s.client, s.queue, "g", s.leased[k].id), "stale", "%s",
                     s.leased[k].id);
}

Test(cluster_handover, a_returning_node_gets_its_partitions_back)
{
    struct scene s;
    struct msg m;
    int k0 = 0, back;
    int64_t deadline;

    scene(&s, "ho-back");
    /* One moved partition has its redelivery out again, leased. */
    while (!s.moved[k0])
        k0++;
    cr_assert_eq(pop1(s.client, s.queue, part(k0), "g", &m), 1);
    cr_assert_eq(m.payload, 1);
    cr_assert_eq(m.attempts, 2);
    for (int k = 0; k < NPARTS; k++)
        if (s.moved[k])
            cr_assert_eq(held(cl_owner(s.queue, part(k), s.left), s.queue,
                              part(k), "g", "pending"),
                         k == k0 ? 1 : 2, "partition %s", part(k));

    cl_start(&c, s.x, NODE_OPT);
    cl_wait_view(&c, CL_ALL);
    deadline = itest_now_ms() + WAIT_MS;
    do {
        back = 0;
        for (int k = 0; k < NPARTS; k++)
            back +=
                s.moved[k] && held(s.x, s.queue, part(k), "g", "pending") == 2;
        if (back == s.nmoved)
            break;
        itest_sleep_ms(200);
    } while (itest_now_ms() < deadline);
    cr_assert_eq(back, s.nmoved, "node %d holds %d of its %d partitions", s.x,
                 back, s.nmoved);
    /* The lease that was out went back with its partition, under a new id:
     * the id it was delivered under is stale now, not unknown (SPEC §2),
     * through either node. */
    cr_expect_str_eq(ack(s.client, s.queue, "g", m.id), "stale", "%s", m.id);
    cr_expect_str_eq(ack(s.x, s.queue, "g", m.id), "stale", "%s", m.id);
    /* and nobody else holds anything of them (a node may keep listing a
     * partition it emptied, with nothing in it) */
    for (int k = 0; k < NPARTS; k++)
        for (int i = 0; i < CL_NODES; i++)
            if (cl_owner(s.queue, part(k), CL_ALL) != i) {
                cr_expect_leq(held(i, s.queue, part(k), "g", "pending"), 0,
                              "partition %s on node %d", part(k), i);
                cr_expect_leq(held(i, s.queue, part(k), "g", "leased"), 0,
                              "partition %s on node %d", part(k), i);
            }
    cr_expect_eq(cluster_pending(s.client, s.queue, "g", CL_ALL),
                 2 * s.nmoved + (NPARTS - s.nmoved));
    /* the lease out when it moved back is a redelivery again */
    cr_expect_geq(metric(s.left, "mayfly_redelivery_total{reason="
                                 "\"handover\"}"),
                  1);
    cr_expect_geq(metric(s.left, "mayfly_handover_total{direction=\"out\","
                                 "result=\"ok\"}"),
                  s.nmoved);
    cr_expect_geq(metric(1u << s.x, "mayfly_handover_total{direction=\"in\","
                                    "result=\"ok\"}"),
                  s.nmoved);
    for (int k = 0; k < NPARTS; k++) {
        if (!s.moved[k])
            continue;
        cr_assert_eq(pop1(s.client, s.queue, part(k), "g", &m), 1);
        cr_expect_eq(m.payload, 1, "partition %s", part(k));
        cr_expect_eq(m.attempts, k == k0 ? 3 : 2, "partition %s", part(k));
        cr_assert_eq(pop1(s.client, s.queue, part(k), "g", &m), 1);
        cr_expect_eq(m.payload, 2, "partition %s", part(k));
        cr_expect_eq(m.attempts, 1, "partition %s", part(k));
        cr_expect_eq(pop1(s.client, s.queue, part(k), "g", &m), 0,
                     "partition %s", part(k));
    }
}

Test(cluster_handover, a_killed_node_loses_its_share_and_only_that)
{
    const char *queue = "ho-kill";
    int x, client, lost = 0;
    unsigned left;
    struct msg m;

    cl_wait_view(&c, CL_ALL);
    for (int k = 0; k < NPARTS; k++)
        push(0, queue, part(k), 0, 3);
    x = busiest(queue);
    client = x == 0 ? 1 : 0;
    left = CL_ALL & ~(1u << x);
    cl_kill(&c, x);
    cl_wait_view(&c, left);
    for (int k = 0; k < NPARTS; k++) {
        int was = cl_owner(queue, part(k), CL_ALL),
            o = cl_owner(queue, part(k), left);

        if (was == x) {
            lost++;
            cr_expect_eq(held(o, queue, part(k), NULL, "pending"), -1,
                         "partition %s on node %d", part(k), o);
            /* served again, empty */
            push(client, queue, part(k), 100, 1);
            cr_assert_eq(pop1(client, queue, part(k), "g", &m), 1);
            cr_expect_eq(m.payload, 100, "partition %s", part(k));
            cr_expect_eq(m.attempts, 1);
            cr_expect_eq(held(o, queue, part(k), "g", "leased"), 1,
                         "partition %s on node %d", part(k), o);
        } else {
            cr_expect_eq(held(o, queue, part(k), NULL, "pending"), 3,
                         "partition %s on node %d", part(k), o);
            for (int n = 0; n < 3; n++) {
                cr_assert_eq(pop1(client, queue, part(k), "g", &m), 1);
                cr_expect_eq(m.payload, n, "partition %s", part(k));
            }
        }
        cr_expect_eq(pop1(client, queue, part(k), "g", &m), 0, "partition %s",
                     part(k));
    }
    cr_assert_gt(lost, 0);
}

Test(cluster_handover, two_stops_in_a_row_leave_everything_on_the_last_node)
{
    const char *queue = "ho-two";
    int a, b, last, na = 0, nb = 0;
    struct msg m;

    cl_wait_view(&c, CL_ALL);
    for (int k = 0; k < NPARTS; k++)
        push(0, queue, part(k), 0, 3);
    a = busiest(queue);
    b = (a + 1) % CL_NODES;
    last = (a + 2) % CL_NODES;

    cr_assert_eq(cl_stop(&c, a, STOP_MS), 0, "node %d's exit", a);
    cl_wait_view(&c, CL_ALL & ~(1u << a));
    cr_assert_eq(cl_stop(&c, b, STOP_MS), 0, "node %d's exit", b);
    cl_wait_view(&c, 1u << last);
    for (int k = 0; k < NPARTS; k++) {
        na += cl_owner(queue, part(k), CL_ALL) == a;
        nb += cl_owner(queue, part(k), CL_ALL & ~(1u << a)) == b;
    }
    expect_drain_log(a, na, 0, 3 * na, 0);
    expect_drain_log(b, nb, 0, 3 * nb, 0);

    cr_expect_eq(itest_depth_pending(&c.node[last], queue, NULL), 3 * NPARTS);
    for (int k = 0; k < NPARTS; k++) {
        cr_expect_eq(held(last, queue, part(k), NULL, "pending"), 3,
                     "partition %s", part(k));
        for (int n = 0; n < 3; n++) {
            cr_assert_eq(pop1(last, queue, part(k), "g", &m), 1);
            cr_expect_eq(m.payload, n, "partition %s", part(k));
            cr_expect_eq(m.attempts, 1, "partition %s", part(k));
        }
        cr_expect_eq(pop1(last, queue, part(k), "g", &m), 0);
    }
    /* The last node has nobody to hand over to: its log says how much
     * ends with it, the leased messages included. */
    cr_assert_eq(cl_stop(&c, last, STOP_MS), 0, "node %d's exit", last);
    expect_drain_log(last, 0, NPARTS, 0, 3 * NPARTS);
}

Test(cluster_handover, a_declared_bound_holds_on_the_new_owner)
{
    const char *queue = "ho-bound";
    int x = -1, pa = -1, pb = -1, s = -1;
    struct itest_resp r;
    struct msg m;
    int64_t deadline;

    cl_wait_view(&c, CL_ALL);
    /* a configure may time out while raft is slow (503): clients retry */
    char body[128];
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"options\":{\"maxLength\":5}}", queue);
    cr_assert_eq(cl_call(&c, 0, "POST", "/api/v1/ephemeral/configure", body,
                         WAIT_MS, 100, &r),
                 201, "%s", r.body);
    itest_resp_free(&r);
    deadline = itest_now_ms() + WAIT_MS;
    for (int i = 0; i < CL_NODES; i++) {
        for (;;) { /* until node i applied the declaration */
            struct json_object *e = itest_listing_find(&c.node[i], queue);
            int ok = e && itest_jint(e, "options.maxLength") == 5;
            json_object_put(e);
            if (ok)
                break;
            cr_assert_lt(itest_now_ms(), deadline, "node %d", i);
            itest_sleep_ms(100);
        }
    }
    /* pa: x owns it, s next; pb: s owns it, before and after */
    for (int k = 0; k < NPARTS && pb < 0; k++)
        for (int j = 0; j < NPARTS && pb < 0; j++) {
            int xa = cl_owner(queue, part(k), CL_ALL);
            int sa = cl_owner(queue, part(k), CL_ALL & ~(1u << xa));
            if (j != k && cl_owner(queue, part(j), CL_ALL) == sa) {
                x = xa;
                s = sa;
                pa = k;
                pb = j;
            }
        }
    cr_assert_geq(pb, 0);
    push(0, queue, part(pa), 0, 4);
    push(0, queue, part(pb), 0, 4);
    cr_assert_eq(held(x, queue, part(pa), NULL, "pending"), 4);
    cr_assert_eq(held(s, queue, part(pb), NULL, "pending"), 4);

    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    cr_expect(log_has(x, "lost=0"), "node %d", x);
    cl_wait_view(&c, CL_ALL & ~(1u << x));
    /* the hand-over carried all 4, past the bound */
    cr_expect_eq(held(s, queue, part(pa), NULL, "pending"), 4);
    cr_expect_eq(itest_depth_pending(&c.node[s], queue, NULL), 8);
    /* new pushes meet it */
    for (int k = 0; k < 2; k++) {
        const char *p = part(k ? pb : pa);
        long st = itest_post(&c.node[s], &r, "/api/v1/ephemeral/push",
                             "{\"queue\":\"%s\",\"partition\":\"%s\","
                             "\"messages\":[{\"payload\":9}]}",
                             queue, p);
        cr_expect_eq(st, 429, "push to %s: %s", p, r.body);
        cr_expect_str_eq(itest_jstr(r.json, "code"), "queue_full", "%s",
                         r.body);
        itest_resp_free(&r);
    }
    struct json_object *e = itest_listing_find(&c.node[s], queue);
    cr_expect_eq(itest_jint(e, "options.maxLength"), 5);
    json_object_put(e);
    for (int n = 0; n < 4; n++) {
        cr_assert_eq(pop1(s, queue, part(pa), "g", &m), 1);
        cr_expect_eq(m.payload, n);
    }
}

/* A stopping node whose next owner dies just before the hand-over (no time
 * to be seen dead) keeps trying as the members change, and hands what it
 * holds to the one left, losing nothing. */
Test(cluster_handover, a_next_owner_that_dies_meanwhile_is_passed_over)
{
    const char *queue = "ho-dies";
    int x, y, z, nx = 0, ny = 0;

    cl_wait_view(&c, CL_ALL);
    for (int k = 0; k < NPARTS; k++)
        push(0, queue, part(k), 0, 3);
    x = busiest(queue);
    /* y: the node most of x's partitions would go to */
    int to[CL_NODES] = {0};
    for (int k = 0; k < NPARTS; k++)
        if (cl_owner(queue, part(k), CL_ALL) == x)
            to[cl_owner(queue, part(k), CL_ALL & ~(1u << x))]++;
    y = (x + 1) % CL_NODES;
    z = (x + 2) % CL_NODES;
    if (to[z] > to[y]) {
        int t = y;
        y = z;
        z = t;
    }
    cr_assert_gt(to[y], 0, "no partition of node %d would go to another", x);
    for (int k = 0; k < NPARTS; k++) {
        nx += cl_owner(queue, part(k), CL_ALL) == x;
        ny += cl_owner(queue, part(k), CL_ALL) == y;
    }

    cl_kill(&c, y); /* its share is lost: it crashed */
    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    expect_drain_log(x, nx, 0, 3 * nx, 0);
    cl_wait_view(&c, 1u << z);
    cr_expect_eq(itest_depth_pending(&c.node[z], queue, NULL),
                 3 * (NPARTS - ny), "node %d holds all but node %d's share", z,
                 y);
}

/* A drain whose workers do not stop (here: stopped by SIGSTOP) is cut at
 * its deadline, and the hand-over still runs on what the killed workers
 * left: nothing is lost. */
Test(cluster_handover, a_drain_cut_at_its_deadline_still_hands_over)
{
    const char *queue = "ho-stuck";
    pid_t w[ITEST_NODE_MAX_WORKERS];
    int x, nx = 0, nw;

    cl_wait_view(&c, CL_ALL);
    for (int k = 0; k < NPARTS; k++)
        push(0, queue, part(k), 0, 3);
    x = busiest(queue);
    for (int k = 0; k < NPARTS; k++)
        nx += cl_owner(queue, part(k), CL_ALL) == x;
    nw = itest_node_workers(&c.node[x], w, ITEST_NODE_MAX_WORKERS);
    cr_assert_gt(nw, 0);
    for (int k = 0; k < nw; k++)
        kill(w[k], SIGSTOP);

    /* the drain's deadline is 30 s; hand-over and raft follow */
    cr_assert_eq(cl_stop(&c, x, 120000), 0, "node %d's exit", x);
    cr_expect(log_has(x, "drain took longer than"),
              "node %d's drain was not cut", x);
    expect_drain_log(x, nx, 0, 3 * nx, 0);
    cl_wait_view(&c, CL_ALL & ~(1u << x));
    int64_t sum = 0;
    for (int i = 0; i < CL_NODES; i++)
        if (i != x)
            sum += itest_depth_pending(&c.node[i], queue, NULL);
    cr_expect_eq(sum, 3 * NPARTS, "the survivors hold every message");
}

/* A stop that hands over more partitions than go out at once (32): every
 * one arrives. */
Test(cluster_handover, many_partitions_all_arrive)
{
    const char *queue = "ho-many";
    int x, nx = 0, n = 240;
    char p[16];

    cl_wait_view(&c, CL_ALL);
    for (int k = 0; k < n; k++) {
        snprintf(p, sizeof(p), "m%03d", k);
        push(k % CL_NODES, queue, p, k, 1);
        nx += cl_owner(queue, p, CL_ALL) == 1;
    }
    x = 1;
    cr_assert_gt(nx, 32, "node %d owns only %d partitions", x, nx);
    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    expect_drain_log(x, nx, 0, nx, 0);
    cl_wait_view(&c, CL_ALL & ~(1u << x));
    cr_expect_eq(itest_depth_pending(&c.node[0], queue, NULL) +
                     itest_depth_pending(&c.node[2], queue, NULL),
                 n, "the survivors hold every message");
}

/* A stopping node whose next owner hangs (SIGSTOP: it takes connections,
 * answers nothing, and is not dead before member_ttl_ms) hands what it
 * holds to the node left once the hung one is declared dead: what it had
 * sent there, and what waited behind the 32 shipments out at once.
 * Nothing is dropped. */
Test(cluster_handover, a_next_owner_that_hangs_is_passed_over_once_dead)
{
    const char *queue = "ho-hung";
    pid_t w[ITEST_NODE_MAX_WORKERS];
    int x = 1, y = 2, z = 0, nx = 0, ny = 0, nw;
    char names[200][16];
    struct msg m;

    cl_wait_view(&c, CL_ALL);
    /* x's partitions until 48 of them (more than go out at once) would go
     * to y */
    for (int k = 0; ny < 48; k++) {
        char p[16];
        cr_assert_lt(k, 2000);
        snprintf(p, sizeof(p), "h%03d", k);
        if (cl_owner(queue, p, CL_ALL) != x)
            continue;
        cr_assert_lt(nx, 200);
        ny += cl_owner(queue, p, CL_ALL & ~(1u << x)) == y;
        snprintf(names[nx], sizeof(names[nx]), "%s", p);
        push(x, queue, p, k, 1);
        nx++;
    }
    cr_assert_eq(itest_depth_pending(&c.node[x], queue, NULL), nx);

    nw = itest_node_workers(&c.node[y], w, ITEST_NODE_MAX_WORKERS);
    cr_assert_gt(nw, 0);
    for (int k = 0; k < nw; k++)
        kill(w[k], SIGSTOP);
    kill(c.node[y].pid, SIGSTOP);
    cr_assert_eq(cl_stop(&c, x, STOP_MS), 0, "node %d's exit", x);
    expect_drain_log(x, nx, 0, nx, 0);
    cr_expect(log_has(x, "is dead (unheard for"),
              "node %d's log does not say it passed the hung node over", x);
    cr_expect(!log_has(x, "hand-over failed"), "node %d dropped some", x);

    /* every message is on the node left, and reads there */
    cl_wait_view(&c, 1u << z);
    cr_expect_eq(itest_depth_pending(&c.node[z], queue, NULL), nx);
    for (int k = 0; k < nx; k++) {
        cr_assert_eq(pop1(z, queue, names[k], "g", &m), 1, "partition %s",
                     names[k]);
        cr_expect_eq(m.payload, atoi(names[k] + 1), "partition %s", names[k]);
    }
    cr_expect_eq(metric(1u << z, "mayfly_wipes_total"), 0);
}

/* ---- a join keeps each partition's order ------------------------------ */

#define JOIN_AFTER_MS 3000 /* pushes go on this long once the joiner is live */

/* join_live - whether node i sees node j live. */
static int
join_live(int i, int j)
{
    char id[8], state[32];

    snprintf(id, sizeof(id), "n%d", j);
    cl_member_state(&c, i, id, state, sizeof(state));
    return strcmp(state, "live") == 0;
}

/* join_read - read partition p of queue for group g through node i, with
 * autoAck, until n messages came (WAIT_MS at most): each must be the next
 * payload, 0 first (push order, nothing lost or twice); then nothing more. */
static void
join_read(int i, const char *queue, const char *p, const char *g, int n)
{
    int64_t deadline = itest_now_ms() + WAIT_MS;
    int next = 0;

    while (next < n) {
        struct itest_resp r;
        char path[256];
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=%s&partition=%s&group=%s"
                 "&batch=100&autoAck=true",
                 queue, p, g);
        long st = cl_call(&c, i, "GET", path, NULL, WAIT_MS, 50, &r);
        cr_assert_eq(st, 200, "pop %s/%s on node %d: %ld %s", queue, p, i, st,
                     r.body);
        int got = itest_jlen(r.json, "messages");
        for (int k = 0; k < got; k++) {
            char key[32];
            snprintf(key, sizeof(key), "messages.%d.payload", k);
            int64_t v = itest_jint(r.json, key);
            cr_assert_eq(v, next,
                         "partition %s, group %s on node %d: payload %lld "
                         "where %d was next (of %d pushed)",
                         p, g, i, (long long)v, next, n);
            next++;
        }
        itest_resp_free(&r);
        if (got == 0) {
            cr_assert_lt(itest_now_ms(), deadline,
                         "partition %s, group %s: %d of %d read", p, g, next,
                         n);
            itest_sleep_ms(50);
        }
    }
    struct itest_resp r;
    char path[256];
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s&partition=%s&group=%s"
             "&batch=100&autoAck=true",
             queue, p, g);
    cr_assert_eq(cl_call(&c, i, "GET", path, NULL, WAIT_MS, 50, &r), 200);
    cr_expect_eq(itest_jlen(r.json, "messages"), 0,
                 "partition %s, group %s: more than the %d pushed: %s", p, g, n,
                 r.body);
    itest_resp_free(&r);
}

/* join_stream - a stream through node i on partition p of queue from its
 * oldest message: its n messages come in push order (SPEC §11: a tail
 * sends in the owner's number order). */
static void
join_stream(int i, const char *queue, const char *p, int n)
{
    int64_t deadline = itest_now_ms() + WAIT_MS;
    struct sse_client s;
    char path[256];
    int next = 0;

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/subscribe?queue=%s&partition=%s&from=all",
             queue, p);
    sse_open(&s, &c.node[i], path, NULL);
    while (sse_count(&s, "message") < (size_t)n && !s.closed &&
           itest_now_ms() < deadline)
        sse_wait_events(&s, s.nev + 1, 1000);
    for (size_t k = 0; k < s.nev; k++) {
        if (strcmp(s.ev[k].event, "message") != 0)
            continue;
        struct json_object *o = json_tokener_parse(s.ev[k].data);
        cr_assert_not_null(o, "%s", s.ev[k].data);
        int64_t v = itest_jint(o, "payload");
        json_object_put(o);
        cr_assert_eq(v, next,
                     "stream on partition %s through node %d: payload %lld "
                     "where %d was next (of %d pushed)",
                     p, i, (long long)v, next, n);
        next++;
    }
    cr_assert_eq(next, n, "stream on partition %s: %d of %d", p, next, n);
    sse_close(&s);
}

/*
 * A join keeps each partition's order (SPEC §5: a graceful move keeps
 * order; join or return).  Node j, the one owning the most test
 * partitions, is out; a steady pusher goes through node a (which stays),
 * round robin over every partition, each push one payload: that
 * partition's next counter.  j starts mid-stream and the pushes go on
 * JOIN_AFTER_MS once a and b see it live, so pushes reach j while the
 * other two are shipping it what they held.  Then a stream on each
 * partition j gained sees it in push order, and every group reads each
 * partition, through each node, in push order, nothing lost or twice.
 */
Test(cluster_handover, a_join_keeps_each_partitions_order_with_pushes_on)
{
    const char *queue = "ho-join";
    int pushed[NPARTS] = {0}, j, a, b, rounds = 0, gained = 0;
    int64_t live_at = 0, deadline;

    cl_wait_view(&c, CL_ALL);
    j = busiest(queue);
    a = (j + 1) % CL_NODES;
    b = (j + 2) % CL_NODES;
    cr_assert_eq(cl_stop(&c, j, STOP_MS), 0, "node %d's exit", j);
    cl_wait_view(&c, CL_ALL & ~(1u << j));
    /* Both groups known from the start: what one completes waits for the
     * other (SPEC §3). */
    join_read(a, queue, "none", "g", 0);
    join_read(a, queue, "none", "h", 0);
    /* Some history first, held by a and b. */
    for (int r = 0; r < 20; r++)
        for (int k = 0; k < NPARTS; k++)
            push(a, queue, part(k), pushed[k]++, 1);
    cl_spawn(&c, j, NODE_OPT);
    deadline = itest_now_ms() + WAIT_MS + STOP_MS;
    while (live_at == 0 || itest_now_ms() < live_at + JOIN_AFTER_MS) {
        cr_assert_lt(itest_now_ms(), deadline, "node %d never became live", j);
        for (int k = 0; k < NPARTS; k++)
            push(a, queue, part(k), pushed[k]++, 1);
        if (live_at == 0 && ++rounds % 4 == 0 && join_live(a, j) &&
            join_live(b, j))
            live_at = itest_now_ms();
    }
    cl_wait_view(&c, CL_ALL);
    for (int k = 0; k < NPARTS; k++)
        gained += cl_owner(queue, part(k), CL_ALL) == j;
    cr_assert_gt(gained, 0);
    printf("join with pushes on: %d rounds of %d partitions, %d gained by "
           "node %d\n",
           pushed[0], NPARTS, gained, j);
    for (int k = 0; k < NPARTS; k++)
        if (cl_owner(queue, part(k), CL_ALL) == j)
            join_stream(j, queue, part(k), pushed[k]);
    for (int k = 0; k < NPARTS; k++) {
        join_read(a, queue, part(k), "g", pushed[k]);
        join_read(j, queue, part(k), "h", pushed[k]);
    }
}
