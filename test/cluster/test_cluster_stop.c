/*
 * test_cluster_stop.c - a stop that the clients of the other nodes never see
 * (issue 30 item 5), on three real nodes.
 *
 * Node x, the raft leader, owns partition p of a queue.  Clients of the
 * two other nodes push to p, long-poll p (group g, wait=true,
 * timeout=5000), long-poll the queue with no partition (group h), ack what
 * they got and configure a queue, each in a loop, while x gets SIGTERM and
 * drains.  Every answer is counted: none may be a 503 (the nodes that
 * forwarded to x retry at p's next owner when x answered 503 draining or
 * refused the connection: nothing was applied there), no long poll may come
 * back empty before its full timeout (one parked at x is parked again at
 * the next owner for the time it has left), and after the stop both groups
 * read every message whose push was answered 201, and group g never reads
 * again a message whose ack answered "acked".
 *
 * And x closes its client port the moment its drain starts: once no process
 * holds the listening socket, a new connection is refused at once (a bounded
 * connect), never held unanswered.
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

#define QUEUE    "stop-q"
#define CFGQ     "stop-cfg"
#define POLL_MS  5000 /* the long polls' timeout */
#define EARLY_MS 4900 /* an empty answer before this came early */
#define MAXPAY   200000
#define PUSHERS  3
#define THREADS  (PUSHERS + 4) /* and three pollers, a configurer */
#define NODE_OPT "lease_s=5"

static struct cl c;

CL_SUITE(cluster_stop, &c, NODE_OPT, CL_SUITE_STARTED, .timeout = 300);

/* What every client thread shares. */
struct load {
    int x, y, z; /* x stops; clients use y and z */
    char p[16];
    _Atomic int stop;
    _Atomic int accepted[MAXPAY]; /* push answered 201 */
    _Atomic int next;             /* the next payload to push */
    _Atomic int seen_g[MAXPAY], seen_h[MAXPAY];
    _Atomic int acked_g[MAXPAY]; /* an ack of g answered "acked" */
    _Atomic int reread_g;        /* read again after "acked" */
    _Atomic int ops, fails, early, configs, pops_back, pushers;
    _Atomic int failed[5]; /* by kind: push, pop, pop (any), ack, configure */
    pthread_mutex_t lock;
    char first_fail[512]; /* the first failure, for the report */
};

enum kind { PUSH, POP, POP_ANY, ACK, CONFIGURE };

/* fail - count a failure of kind, and keep the first one's description. */
static void
fail(struct load *l, enum kind k, const char *what, int node,
     const struct itest_resp *r)
{
    l->fails++;
    l->failed[k]++;
    pthread_mutex_lock(&l->lock);
    if (l->first_fail[0] == '\0')
        snprintf(
            l->first_fail, sizeof(l->first_fail),
            "%s through node %d: status %ld (curl %d) after %.2f s: %.300s",
            what, node, r->status, r->curl_code, r->seconds, r->body);
    pthread_mutex_unlock(&l->lock);
}

/* other - the client node that is not n (y or z). */
static int
other(const struct load *l, int n)
{
    return n == l->y ? l->z : l->y;
}

/* pusher - one payload a push to p, through y and z in turn (PUSHERS of
 * them, starting on either). */
static void *
pusher(void *arg)
{
    struct load *l = arg;
    int node = l->pushers++ % 2 ? l->z : l->y;

    while (!l->stop) {
        struct itest_resp r;
        char body[160];
        int k = l->next++;

        if (k >= MAXPAY)
            break;
        snprintf(body, sizeof(body),
                 "{\"queue\":\"" QUEUE "\",\"partition\":\"%s\","
                 "\"messages\":[{\"payload\":%d}]}",
                 l->p, k);
        itest_req(&c.node[node], "POST", "/api/v1/ephemeral/push", body, &r);
        l->ops++;
        if (r.status == 201)
            l->accepted[k] = 1;
        else
            fail(l, PUSH, "push", node, &r);
        itest_resp_free(&r);
        node = other(l, node);
        itest_sleep_ms(2);
    }
    itest_req_thread_end();
    return NULL;
}

/* ack - ack the n ids (JSON strings, comma-separated in ids) for group
 * through node; marks acked[] by payload when the outcome is "acked". */
static void
ack(struct load *l, int node, const char *group, const char *ids,
    const int *pay, int n, _Atomic int *acked)
{
    struct itest_resp r;
    char *body = malloc(strlen(ids) + 128);

    cr_assert(body);
    sprintf(body, "{\"queue\":\"" QUEUE "\",\"group\":\"%s\",\"acks\":[%s]}",
            group, ids);
    itest_req(&c.node[node], "POST", "/api/v1/ephemeral/ack", body, &r);
    l->ops++;
    if (r.status != 200 || itest_jlen(r.json, "results") != n) {
        fail(l, ACK, "ack", node, &r);
    } else if (acked != NULL) {
        for (int i = 0; i < n; i++) {
            char path[40];
            snprintf(path, sizeof(path), "results.%d.outcome", i);
            if (strcmp(itest_jstr(r.json, path), "acked") == 0)
                acked[pay[i]] = 1;
        }
    }
    itest_resp_free(&r);
    free(body);
}

/*
 * take - the messages of pop answer r: each payload marked seen (and
 * counted as read again when acked already), then acked through node.
 * How many it held.
 */
static int
take(struct load *l, int node, const char *group, struct itest_resp *r,
     _Atomic int *seen, _Atomic int *acked)
{
    int n = itest_jlen(r->json, "messages");
    char *ids = calloc((size_t)(n > 0 ? n : 1), 160);
    int *pay = calloc((size_t)(n > 0 ? n : 1), sizeof(*pay));
    size_t used = 0;

    cr_assert(ids && pay);
    for (int i = 0; i < n; i++) {
        char path[40];
        snprintf(path, sizeof(path), "messages.%d.payload", i);
        pay[i] = (int)itest_jint(r->json, path);
        if (pay[i] < 0 || pay[i] >= MAXPAY)
            pay[i] = 0;
        if (acked != NULL && acked[pay[i]])
            l->reread_g++;
        seen[pay[i]] = 1;
        snprintf(path, sizeof(path), "messages.%d.id", i);
        used += (size_t)snprintf(ids + used, 160, "%s\"%s\"", i ? "," : "",
                                 itest_jstr(r->json, path));
    }
    if (n > 0)
        ack(l, node, group, ids, pay, n, acked);
    free(ids);
    free(pay);
    return n;
}

/* A long-polling client: group g on partition p, or h on no partition. */
struct poller {
    struct load *l;
    int node;
    int any; /* no partition: group h */
};

static void *
poller(void *arg)
{
    struct poller *pl = arg;
    struct load *l = pl->l;
    char path[256];

    if (pl->any)
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=" QUEUE "&group=h&batch=20"
                 "&wait=true&timeout=%d",
                 POLL_MS);
    else
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=" QUEUE "&partition=%s&group=g"
                 "&batch=20&wait=true&timeout=%d",
                 l->p, POLL_MS);
    while (!l->stop) {
        struct itest_resp r;
        int64_t t0 = itest_now_ms();

        itest_req(&c.node[pl->node], "GET", path, NULL, &r);
        int64_t took = itest_now_ms() - t0;
        l->ops++;
        l->pops_back++;
        if (r.status != 200) {
            fail(l, pl->any ? POP_ANY : POP, pl->any ? "pop (any)" : "pop",
                 pl->node, &r);
        } else if (take(l, pl->node, pl->any ? "h" : "g", &r,
                        pl->any ? l->seen_h : l->seen_g,
                        pl->any ? NULL : l->acked_g) == 0 &&
                   took < EARLY_MS) {
            l->early++;
            fail(l, pl->any ? POP_ANY : POP,
                 pl->any ? "empty early (any)" : "empty early", pl->node, &r);
        }
        itest_resp_free(&r);
    }
    itest_req_thread_end();
    return NULL;
}

/* configurer - configure CFGQ again and again through y and z. */
static void *
configurer(void *arg)
{
    struct load *l = arg;
    int node = l->z;

    for (int k = 0; !l->stop; k++) {
        struct itest_resp r;
        char body[128];

        snprintf(body, sizeof(body),
                 "{\"queue\":\"" CFGQ "\",\"options\":{\"maxLength\":%d}}",
                 1000 + k % 1000);
        itest_req(&c.node[node], "POST", "/api/v1/ephemeral/configure", body,
                  &r);
        l->ops++;
        if (r.status == 201)
            l->configs++;
        else
            fail(l, CONFIGURE, "configure", node, &r);
        itest_resp_free(&r);
        node = other(l, node);
        itest_sleep_ms(20);
    }
    itest_req_thread_end();
    return NULL;
}

/*
 * warm_up - payload 0 pushed and read by both groups where p lives, so
 * that x knows both before the load (a group is known on the other nodes
 * only a heartbeat after its first pop: DESIGN §6, not this test's).
 */
static void
warm_up(struct load *l)
{
    struct itest_resp r[2];
    char body[160], path[256];

    snprintf(body, sizeof(body),
             "{\"queue\":\"" QUEUE "\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":0}]}",
             l->p);
    cr_assert_eq(
        itest_req(&c.node[l->y], "POST", "/api/v1/ephemeral/push", body, &r[0]),
        201, "%s", r[0].body);
    itest_resp_free(&r[0]);
    l->accepted[0] = 1;
    l->next = 1;
    /* both read it before either acks it: the first ack would free it
     * while x knows no other group */
    for (int any = 0; any < 2; any++) {
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=" QUEUE "%s%s&group=%s"
                 "&wait=true&timeout=5000",
                 any ? "" : "&partition=", any ? "" : l->p, any ? "h" : "g");
        cr_assert_eq(
            itest_req(&c.node[any ? l->z : l->y], "GET", path, NULL, &r[any]),
            200, "%s", r[any].body);
        cr_assert_eq(itest_jlen(r[any].json, "messages"), 1, "%s", r[any].body);
    }
    for (int any = 0; any < 2; any++) {
        take(l, any ? l->z : l->y, any ? "h" : "g", &r[any],
             any ? l->seen_h : l->seen_g, any ? NULL : l->acked_g);
        itest_resp_free(&r[any]);
    }
    cr_assert_eq(l->fails, 0, "%s", l->first_fail);
}

/* A push of the stopping node's own client. */
static const char own_body[] = "{\"queue\":\"stop-own\",\"messages\":"
                               "[{\"payload\":1}]}";

/* What stop_owner saw: why it failed ("" when it did not), and when. */
struct stop_figures {
    char why[256];
    int64_t closed_ms, refused_ms, drained_ms;
    int during; /* answers counted when the held push went on */
};

/*
 * stop_owner - x got SIGTERM at t0 with the push on socket held in flight:
 * its listening socket goes at the start of the drain, so once no process
 * holds it (while x still drains, its push unanswered) a new connection is
 * refused at once; the load goes on a while, then the push is answered
 * and x exits 0.  No assertion
 * here: the client threads still run (the caller stops them first).
 */
static void
stop_owner(struct load *l, int held, int64_t t0, struct stop_figures *f)
{
    struct itest_resp own = {0};
    int status = 0, rc, x = l->x;
    int64_t took = 0;

    while (itest_port_listening(&c.node[x])) {
        if (itest_now_ms() > t0 + 10000) {
            snprintf(f->why, sizeof(f->why),
                     "node %d still listens 10 s after SIGTERM", x);
            return;
        }
        itest_sleep_ms(2);
    }
    f->closed_ms = itest_now_ms() - t0;
    rc = itest_connect_within(c.addr[x], c.node[x].port, 2000, &took);
    f->refused_ms = took;
    if (waitpid(c.node[x].pid, &status, WNOHANG) != 0) {
        c.node[x].pid = 0;
        snprintf(f->why, sizeof(f->why),
                 "node %d exited before its port was seen closed", x);
        return;
    }
    if (rc != -ECONNREFUSED || took >= 1000) {
        snprintf(f->why, sizeof(f->why),
                 "a new connection to the stopping node: %s after %lld ms",
                 rc == 0 ? "opened" : strerror(-rc), (long long)took);
        return;
    }
    /* The load goes on against the draining node a while. */
    for (int ops = l->ops, k = 0; l->ops < ops + 150 && k < 300; k++)
        itest_sleep_ms(10);
    f->during = l->ops;
    if (itest_raw_send(held, own_body + 10) == 0)
        itest_raw_response(held, &own);
    if (own.status != 201 && own.status != 503)
        snprintf(f->why, sizeof(f->why), "the push in flight: %ld %s",
                 own.status, own.body ? own.body : "");
    itest_resp_free(&own);
    close(held);
    while (waitpid(c.node[x].pid, &status, WNOHANG) != c.node[x].pid) {
        if (itest_now_ms() > t0 + 60000) {
            snprintf(f->why, sizeof(f->why), "node %d's drain", x);
            return;
        }
        itest_sleep_ms(20);
    }
    c.node[x].pid = 0;
    f->drained_ms = itest_now_ms() - t0;
    if (f->why[0] == '\0' && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        snprintf(f->why, sizeof(f->why), "node %d's exit status %d", x, status);
}

/* read_rest - read what is left of QUEUE for group (partition p for g, any
 * for h) through node y until every accepted payload was seen (30 s). */
static void
read_rest(struct load *l, const char *group, _Atomic int *seen,
          _Atomic int *acked, int total)
{
    int64_t deadline = itest_now_ms() + 30000;
    char path[256];

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=" QUEUE "%s%s&group=%s&batch=200",
             acked ? "&partition=" : "", acked ? l->p : "", group);
    for (;;) {
        struct itest_resp r;
        int missing = 0, first = -1;

        for (int k = 0; k < total; k++)
            if (l->accepted[k] && !seen[k] && missing++ == 0)
                first = k;
        if (missing == 0)
            return;
        if (itest_now_ms() > deadline)
            cr_assert_fail("group %s never read %d accepted messages "
                           "(payload %d first)",
                           group, missing, first);
        itest_req(&c.node[l->y], "GET", path, NULL, &r);
        if (r.status != 200 || take(l, l->y, group, &r, seen, acked) == 0)
            itest_sleep_ms(200); /* leases of stale acks run out */
        itest_resp_free(&r);
    }
}

Test(cluster_stop, clients_of_the_other_nodes_never_see_an_owner_stop)
{
    static struct load l;
    struct poller pl[3];
    pthread_t t[THREADS];
    struct stop_figures f = {0};
    int64_t t0;
    int total, ops_before;

    memset(&l, 0, sizeof(l));
    pthread_mutex_init(&l.lock, NULL);
    cl_wait_view(&c, CL_ALL);
    l.x = cl_leader(&c, 30000);
    cr_assert(l.x >= 0, "no leader");
    l.y = (l.x + 1) % CL_NODES;
    l.z = (l.x + 2) % CL_NODES;
    cl_part_owned_by(QUEUE, l.x, 64, l.p, sizeof(l.p));
    pl[0] = (struct poller){&l, l.y, 0};
    pl[1] = (struct poller){&l, l.z, 0};
    pl[2] = (struct poller){&l, l.z, 1};
    warm_up(&l);
    for (int i = 0; i < PUSHERS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, pusher, &l), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&t[PUSHERS + i], NULL, poller, &pl[i]), 0);
    cr_assert_eq(pthread_create(&t[PUSHERS + 3], NULL, configurer, &l), 0);
    /* Under way: pushes stored, messages read and configures committed. */
    for (int64_t end = itest_now_ms() + 30000;
         l.next < 50 || l.configs < 5 || l.pops_back < 10;) {
        cr_assert_lt(itest_now_ms(), end, "the load does not start");
        itest_sleep_ms(20);
    }
    ops_before = l.ops;
    /* A push of x's own client in flight keeps x draining for a while. */
    int held = cl_held_push(&c, l.x, own_body);
    t0 = itest_now_ms();
    cr_assert_eq(kill(c.node[l.x].pid, SIGTERM), 0);
    stop_owner(&l, held, t0, &f);
    /* Some more load once it is gone (or failed), then the clients end. */
    for (int64_t end = itest_now_ms() + 10000, ops = l.ops;
         l.ops < ops + 20 || itest_now_ms() < t0 + f.drained_ms + 1000;) {
        if (itest_now_ms() > end)
            break;
        itest_sleep_ms(20);
    }
    l.stop = 1;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_assert(f.why[0] == '\0', "%s", f.why);
    cr_assert_gt(f.during, ops_before + 20,
                 "the load stopped during the drain");

    cr_log_info("owner stop: %d answers counted (%d from SIGTERM to the end "
                "of the drain's held push), %d pushes, %d configures; "
                "listener closed %lld ms after SIGTERM, connect refused in "
                "%lld ms; drained in %lld ms",
                (int)l.ops, f.during - ops_before, (int)l.next, (int)l.configs,
                (long long)f.closed_ms, (long long)f.refused_ms,
                (long long)f.drained_ms);
    cr_assert_eq(l.fails, 0,
                 "%d of %d answers failed (pushes %d, pops %d, pops of any "
                 "partition %d, acks %d, configures %d; %d long polls empty "
                 "early); the first: %s",
                 (int)l.fails, (int)l.ops, (int)l.failed[PUSH],
                 (int)l.failed[POP], (int)l.failed[POP_ANY], (int)l.failed[ACK],
                 (int)l.failed[CONFIGURE], (int)l.early, l.first_fail);
    total = l.next < MAXPAY ? l.next : MAXPAY;
    read_rest(&l, "g", l.seen_g, l.acked_g, total);
    read_rest(&l, "h", l.seen_h, NULL, total);
    cr_assert_eq(l.reread_g, 0,
                 "group g read %d messages again after their acks answered "
                 "acked",
                 (int)l.reread_g);
    cr_assert_eq(l.fails, 0, "reading the rest: %s", l.first_fail);
}
