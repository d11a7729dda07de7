/*
 * test_cluster_calls.c - the cluster port without TLS against an attacker
 * on the network who sees every call between nodes and holds no secret
 * (SPEC §10, issue 31): each kind of node call (declare, delete, raft,
 * heartbeat, hand-over, forward) replayed to the node it was for and to
 * the two others, or altered on its way (a body, a sender's header, a
 * forward's Authorization), is
 * refused 401 and changes nothing: a queue deleted stays deleted, one
 * declared again stays declared, membership stays as it is, nothing goes
 * to the attacker's listener.  And a call that comes after its deadline is
 * refused (503 timeout), as is a configure whose caller's deadline leaves
 * no time to commit it.
 *
 * What the attacker sees is made as a node makes it (cl_sign_req: the
 * signer the nodes use, with the cluster's secret), addressed as nodes
 * address each other once they have heard from one another: by node id and
 * incarnation.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"

#define NPARTS 12

static struct cl c;
static uint64_t inc[CL_NODES]; /* each node's incarnation */

/* incarnations - each node's, into inc. */
static void
incarnations(void)
{
    struct itest_resp r;

    for (int i = 0; i < CL_NODES; i++) {
        cr_assert_eq(itest_get(&c.node[i], &r, "/health"), 200);
        inc[i] = strtoull(itest_jstr(r.json, "incarnation"), NULL, 16);
        cr_assert_neq(inc[i], 0);
        itest_resp_free(&r);
    }
}

CL_SUITE_THEN(cluster_calls, &c, "member_ttl_ms=60000", CL_SUITE_VIEW,
              incarnations, .timeout = 240);

/* A call between nodes as seen on the wire: where it went, what it said. */
struct call {
    const char *kind;
    enum cl_port port;
    int to; /* the node it was for */
    const char *method;
    char path[200];
    char body[400];
    const char *lines[8]; /* the sender's own X-Mayfly- lines, NULL-ended */
    struct http_sign_lines l;
};

/* mk - a POST of kind to node to's port at path with body. */
static struct call
mk(const char *kind, enum cl_port port, int to, const char *path,
   const char *body)
{
    struct call k = {.kind = kind, .port = port, .to = to, .method = "POST"};

    snprintf(k.path, sizeof(k.path), "%s", path);
    snprintf(k.body, sizeof(k.body), "%s", body);
    return k;
}

/* sign - k signed for node k->to (its id and incarnation), with a
 * deadline 10 s away. */
static void
sign(struct call *k)
{
    char addr[64], id[8];
    size_t n = 0;

    while (k->lines[n] != NULL)
        n++;
    cl_addr(&c, k->to, k->port, addr, sizeof(addr));
    snprintf(id, sizeof(id), "n%d", k->to);
    struct http_sign_req r = {
        .method = k->method,
        .target = k->path,
        .body = k->body,
        .len = strlen(k->body),
        .lines = k->lines,
        .nlines = n,
        .to = {addr, id, inc[k->to]},
        .deadline_ms = http_sign_now_ms() + 10000,
    };
    cl_sign_req(&c, &r, &k->l);
}

/* send_to - k as it is (body: body, or k's own when NULL) to node i's
 * port; its status, the answer in r. */
static long
send_to(const struct call *k, int i, const char *body, struct itest_resp *r)
{
    struct itest_node n = c.node[i];
    const char *h[24];

    if (k->port == CL_CLUSTER_PORT)
        snprintf(n.base, sizeof(n.base), "http://%s:%d", c.addr[i], c.cport[i]);
    cl_headers(k->lines, &k->l, h, 24);
    return itest_req_with(&n, k->method, k->path, body ? body : k->body, h, r);
}

/* deliver - k to the node it is for, answered want (admitted). */
static void
deliver(const struct call *k, long want)
{
    struct itest_resp r;
    long st = send_to(k, k->to, NULL, &r);

    cr_assert_eq(st, want, "%s delivered to node %d: %ld %s", k->kind, k->to,
                 st, r.body);
    itest_resp_free(&r);
}

/* refused - k (body, or its own) sent to node i is refused 401. */
static void
refused(const struct call *k, int i, const char *body, const char *how)
{
    struct itest_resp r;
    long st = send_to(k, i, body, &r);

    cr_expect_eq(st, 401, "%s %s to node %d: %ld %s", k->kind, how, i, st,
                 r.body);
    cr_expect_str_eq(itest_jstr(r.json, "code"), "unauthorized", "%s", r.body);
    itest_resp_free(&r);
}

/* replayed - k, delivered once, sent again to every node. */
static void
replayed(const struct call *k)
{
    for (int i = 0; i < CL_NODES; i++)
        refused(k, i, NULL, i == k->to ? "replayed" : "replayed elsewhere");
}

/* master_lines - what a master says of itself on every call: node j's. */
static void
master_lines(struct call *k, int j, char store[4][128])
{
    snprintf(store[0], 128, "X-Mayfly-Node: n%d", j);
    snprintf(store[1], 128, "X-Mayfly-Client: %s:%d", c.addr[j],
             c.node[j].port);
    snprintf(store[2], 128, "X-Mayfly-Incarnation: %016" PRIx64, inc[j]);
    snprintf(store[3], 128, "X-Mayfly-State: ready");
    for (int i = 0; i < 4; i++)
        k->lines[i] = store[i];
    k->lines[4] = "X-Mayfly-Forwarded: 1";
    k->lines[5] = NULL;
}

/* declared_on - queue's tier on node i ("declared", "implicit"), or ""
 * when the node does not list it; its maxLength in *max_length. */
static const char *
declared_on(int i, const char *queue, int64_t *max_length)
{
    static char tier[32];
    struct itest_resp r;
    long st = itest_get(&c.node[i], &r,
                        "/api/v1/ephemeral/queues?prefix=%s&scope=node", queue);

    cr_assert_eq(st, 200, "%s", r.body);
    tier[0] = '\0';
    *max_length = -1;
    for (int k = 0; k < itest_jlen(r.json, "queues"); k++) {
        struct json_object *q =
            json_object_array_get_idx(itest_jget(r.json, "queues"), k);
        if (strcmp(itest_jstr(q, "queue"), queue) != 0)
            continue;
        snprintf(tier, sizeof(tier), "%s", itest_jstr(q, "tier"));
        *max_length = itest_jint(q, "options.maxLength");
    }
    itest_resp_free(&r);
    return tier;
}

/* wait_declared - until queue is declared (max_length >= 0: with that
 * maxLength) on every node, or (max_length < 0) on none. */
static void
wait_declared(const char *queue, int64_t max_length)
{
    int64_t deadline = itest_now_ms() + 20000, ml;

    for (int i = 0; i < CL_NODES; i++) {
        for (;;) {
            int is = strcmp(declared_on(i, queue, &ml), "declared") == 0;
            if (max_length < 0 ? !is : is && ml == max_length)
                break;
            cr_assert_lt(itest_now_ms(), deadline,
                         "%s on node %d: declared %d, maxLength %lld", queue, i,
                         is, (long long)ml);
            itest_sleep_ms(50);
        }
    }
}

/* api - a client's call through node 0, answered want. */
static void
api(const char *method, const char *path, const char *body, long want)
{
    struct itest_resp r;
    long st = itest_req(&c.node[0], method, path, body, &r);

    cr_assert_eq(st, want, "%s %s: %ld %s", method, path, st, r.body);
    itest_resp_free(&r);
}

Test(cluster_calls, a_declare_replayed_or_altered_is_refused)
{
    struct call k =
        mk("declare", CL_CLUSTER_PORT, 0, "/cluster/v1/configure", "");
    struct call alt = k;
    int64_t ml;

    snprintf(k.body, sizeof(k.body),
             "{\"queue\":\"sec-decl\",\"options\":{\"maxLength\":7}}");
    sign(&k);
    deliver(&k, 201);
    wait_declared("sec-decl", 7);
    api("DELETE", "/api/v1/ephemeral/queue/sec-decl", NULL, 200);
    wait_declared("sec-decl", -1);
    replayed(&k);
    /* a fresh one, never delivered, its body changed on the way */
    snprintf(alt.body, sizeof(alt.body),
             "{\"queue\":\"sec-decl\",\"options\":{\"maxLength\":7}}");
    sign(&alt);
    refused(&alt, 0, "{\"queue\":\"sec-decl\",\"options\":{\"maxLength\":9}}",
            "with its body altered");
    for (int i = 0; i < CL_NODES; i++)
        cr_expect_str_eq(declared_on(i, "sec-decl", &ml), "", "node %d", i);
}

Test(cluster_calls, a_delete_replayed_to_any_node_leaves_a_queue_declared_again)
{
    struct call k = mk("delete", CL_CLUSTER_PORT, 1, "/cluster/v1/delete", "");
    struct itest_resp r;

    api("POST", "/api/v1/ephemeral/configure",
        "{\"queue\":\"sec-del\",\"options\":{\"maxLength\":50}}", 201);
    snprintf(k.body, sizeof(k.body), "{\"queue\":\"sec-del\"}");
    sign(&k);
    deliver(&k, 200);
    wait_declared("sec-del", -1);
    /* the tenant declares it again, and stores 3 */
    api("POST", "/api/v1/ephemeral/configure",
        "{\"queue\":\"sec-del\",\"options\":{\"maxLength\":60}}", 201);
    wait_declared("sec-del", 60);
    itest_push_ok(&c.node[0], &r, "sec-del", NULL, "[1,2,3]", 3);
    itest_resp_free(&r);
    replayed(&k);
    wait_declared("sec-del", 60);
    cr_assert_eq(itest_get(&c.node[2], &r,
                           "/api/v1/ephemeral/queues/sec-del/"
                           "depth"),
                 200, "%s", r.body);
    cr_expect_eq(itest_jint(r.json, "pending"), 3, "%s", r.body);
    itest_resp_free(&r);
}

Test(cluster_calls, a_raft_message_replayed_or_altered_is_refused)
{
    struct call k = mk("raft", CL_CLUSTER_PORT, 0, "/cluster/v1/raft",
                       "not a raft message");
    struct call alt = k;
    char store[4][128], alt_store[4][128];

    master_lines(&k, 2, store);
    sign(&k);
    deliver(&k, 400); /* admitted: the body judged */
    replayed(&k);
    master_lines(&alt, 2, alt_store);
    sign(&alt);
    snprintf(alt_store[0], 128, "X-Mayfly-Node: n1"); /* another sender */
    refused(&alt, 0, NULL, "from another sender");
}

Test(cluster_calls, a_heartbeat_altered_moves_nothing_and_reaches_no_listener)
{
    struct call k =
        mk("heartbeat", CL_CLUSTER_PORT, 0, "/cluster/v1/heartbeat", "2\n");
    struct call client = k, leaving = k;
    char store[4][128], cs[4][128], ls[4][128], p[16], q[40];
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct itest_resp r;

    /* the attacker's listener */
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              listen(lfd, 16) == 0 &&
              getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
    master_lines(&k, 2, store); /* node 2's beat to node 0, as it is */
    sign(&k);
    deliver(&k, 204);
    replayed(&k);
    /* fresh beats, changed on the way: node 2's client address made the
     * attacker's, or node 2 said to leave */
    master_lines(&client, 2, cs);
    sign(&client);
    snprintf(cs[1], 128, "X-Mayfly-Client: 127.0.0.1:%d", ntohs(sa.sin_port));
    refused(&client, 0, NULL, "with X-Mayfly-Client changed");
    master_lines(&leaving, 2, ls);
    sign(&leaving);
    snprintf(ls[3], 128, "X-Mayfly-State: leaving");
    refused(&leaving, 0, NULL, "with X-Mayfly-State changed");
    /* membership as it was: node 0 sees all live, and forwards node 2's
     * partitions to node 2 */
    cl_wait_view(&c, CL_ALL);
    for (int n = 0; n < 4; n++) {
        snprintf(q, sizeof(q), "sec-hb-%d", n);
        cl_part_owned_by(q, 2, NPARTS, p, sizeof(p));
        itest_push_ok(&c.node[0], &r, q, p, "[1]", 1);
        itest_resp_free(&r);
        cr_expect_eq(itest_depth_pending(&c.node[2], q, NULL), 1, "%s", q);
    }
    cr_expect_eq(accept(lfd, NULL, NULL), -1, "a connection to the attacker");
    cr_expect_eq(errno, EAGAIN);
    close(lfd);
}

Test(cluster_calls, a_hand_over_replayed_or_altered_is_refused)
{
    struct call k =
        mk("hand-over", CL_CLUSTER_PORT, 1,
           "/cluster/v1/adopt?queue=sec-ho&partition=p0", "not a partition");
    struct call alt = k;
    char store[4][128], alt_store[4][128];
    struct itest_resp r;

    master_lines(&k, 0, store);
    sign(&k);
    deliver(&k, 400); /* admitted: the body judged */
    replayed(&k);
    master_lines(&alt, 0, alt_store);
    snprintf(alt.path, sizeof(alt.path),
             "/cluster/v1/adopt?queue=sec-ho&partition=p0");
    sign(&alt);
    snprintf(alt.path, sizeof(alt.path),
             "/cluster/v1/adopt?queue=sec-ho&partition=p1");
    refused(&alt, 1, NULL, "to another partition");
    for (int i = 0; i < CL_NODES; i++) {
        cr_expect_eq(
            itest_get(&c.node[i], &r, "/api/v1/ephemeral/queues/sec-ho/depth"),
            404, "node %d: %s", i, r.body);
        itest_resp_free(&r);
    }
}

Test(cluster_calls, a_forward_replayed_or_altered_is_refused)
{
    struct call k =
        mk("forward", CL_CLIENT_PORT, 1, "/api/v1/ephemeral/push", "");
    struct call alt;
    char p[16];

    cl_part_owned_by("sec-fw", 1, NPARTS, p, sizeof(p));
    k.lines[0] = "X-Mayfly-Forwarded: 1";
    snprintf(k.body, sizeof(k.body),
             "{\"queue\":\"sec-fw\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":1}]}",
             p);
    alt = k;
    sign(&k);
    deliver(&k, 201);
    replayed(&k);
    sign(&alt);
    refused(&alt, 1, "{\"queue\":\"sec-fw\",\"messages\":[{\"payload\":666}]}",
            "with its body altered");
    cr_expect_eq(itest_depth_pending(&c.node[1], "sec-fw", NULL), 1);
}

/* A forward's Authorization is signed: the owner authorizes the call by
 * it (tenant, permissions), so a token swapped, dropped or added on the
 * way is an altered call, refused before its nonce is taken; the call as
 * signed is then taken.  (A second one is refused 400 before anything.) */
Test(cluster_calls, a_forward_with_its_authorization_altered_is_refused)
{
    struct call k =
        mk("forward", CL_CLIENT_PORT, 1, "/api/v1/ephemeral/push", "");
    struct call bare;
    char p[16];

    cl_part_owned_by("sec-authz", 1, NPARTS, p, sizeof(p));
    k.lines[0] = "X-Mayfly-Forwarded: 1";
    snprintf(k.body, sizeof(k.body),
             "{\"queue\":\"sec-authz\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":1}]}",
             p);
    bare = k;
    k.lines[1] = "Authorization: Bearer tok-alice";
    sign(&k);
    k.lines[1] = "Authorization: Bearer tok-mallory";
    refused(&k, 1, NULL, "with another token");
    k.lines[1] = NULL;
    refused(&k, 1, NULL, "with its token dropped");
    k.lines[1] = "Authorization: Bearer tok-alice";
    sign(&bare);
    bare.lines[1] = "Authorization: Bearer tok-mallory";
    refused(&bare, 1, NULL, "with a token added");
    cr_expect_eq(itest_depth_pending(&c.node[1], "sec-authz", NULL), -1);
    deliver(&k, 201);
    cr_expect_eq(itest_depth_pending(&c.node[1], "sec-authz", NULL), 1);
}

Test(cluster_calls, a_call_past_its_deadline_is_refused_and_changes_nothing)
{
    struct call k =
        mk("late forward", CL_CLIENT_PORT, 1, "/api/v1/ephemeral/push", "");
    char addr[64], p[16];
    int64_t now = http_sign_now_ms(), ml;
    struct itest_resp r;

    cl_part_owned_by("sec-late", 1, NPARTS, p, sizeof(p));
    k.lines[0] = "X-Mayfly-Forwarded: 1";
    snprintf(k.body, sizeof(k.body),
             "{\"queue\":\"sec-late\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":1}]}",
             p);
    cl_addr(&c, 1, CL_CLIENT_PORT, addr, sizeof(addr));
    struct http_sign_req late = {
        .method = k.method,
        .target = k.path,
        .body = k.body,
        .len = strlen(k.body),
        .lines = k.lines,
        .nlines = 1,
        .to = {addr, "n1", inc[1]},
        .now_ms = now - 3000,
        .deadline_ms = now - 1000, /* its sender gave up a second ago */
    };
    cl_sign_req(&c, &late, &k.l);
    cr_expect_eq(send_to(&k, 1, NULL, &r), 503, "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "code"), "timeout", "%s", r.body);
    itest_resp_free(&r);
    cr_expect_eq(itest_depth_pending(&c.node[1], "sec-late", NULL), -1);

    /* a configure whose caller waits 0.5 s more: no time to commit it */
    struct call conf =
        mk("short configure", CL_CLUSTER_PORT, 0, "/cluster/v1/configure", "");
    snprintf(conf.body, sizeof(conf.body),
             "{\"queue\":\"sec-late\",\"options\":{\"maxLength\":5}}");
    cl_addr(&c, 0, CL_CLUSTER_PORT, addr, sizeof(addr));
    struct http_sign_req shortly = {
        .method = conf.method,
        .target = conf.path,
        .body = conf.body,
        .len = strlen(conf.body),
        .to = {addr, "n0", inc[0]},
        .deadline_ms = http_sign_now_ms() + 500,
    };
    cl_sign_req(&c, &shortly, &conf.l);
    cr_expect_eq(send_to(&conf, 0, NULL, &r), 503, "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "code"), "timeout", "%s", r.body);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++)
        cr_expect_str_eq(declared_on(i, "sec-late", &ml), "", "node %d", i);
}
