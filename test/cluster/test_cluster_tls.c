/*
 * test_cluster_tls.c - three nodes with TLS on both ports (SPEC §10):
 * requests forwarded between client ports over HTTPS, a declaration from a
 * worker to its master and through the raft log, a graceful stop
 * whose hand-over goes over the cluster port's mutual TLS; the cluster
 * port refuses a client without a certificate of the cluster's CA; and
 * calls between nodes are signed: a signed call replayed, altered (body,
 * path) or stale is refused 401, and an unsigned call cannot pass for a
 * node's (X-Mayfly-Forwarded, X-Mayfly-Withdraw, the cluster port).  The
 * signed calls are made as a node makes them (cl_sign: the same function,
 * the cluster's secret).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "test/cluster/cluster.h"
#include "test/integration/certs.h"

#define NPARTS 12

static struct cl c;
static char dir[300];

/* up - the cluster's CA and one certificate for 127.0.0.1-3 (each node's
 * client and cluster port, and the test's own client certificate), then
 * three nodes asked on https://, once each sees the three live (the
 * owners the tests compute, and every member's share in a scope=cluster
 * answer) and they agree on a raft leader (a configure right after the
 * start could otherwise meet an election: 503 no_leader, as SPEC lets it
 * answer). */
static void
up(void)
{
    char tls[1700], opts[1800];

    cl_init_tls(&c, dir, sizeof(dir), tls, sizeof(tls));
    itest_make_ca(dir, "other");
    itest_make_cert(dir, "other", "stranger", "127.0.0.1");
    snprintf(opts, sizeof(opts), "member_ttl_ms=60000 %s", tls);
    cl_start_all(&c, opts);
    cl_wait_view(&c, CL_ALL);
    cr_assert_geq(cl_leader(&c, 30000), 0, "no raft leader agreed on in 30 s");
}

static void
down(void)
{
    cl_kill_all(&c);
    itest_ca_file[0] = '\0';
}

TestSuite(cluster_tls, .init = up, .fini = down, .timeout = 240);

/* pending_in - what node i's scope=cluster depth counts pending in an
 * answer with every member's share; -1 when no node holds the queue (404).
 * An answer that names a member missing (its share did not come in time,
 * on a loaded machine) or says none came (503) is asked again, 20 s at
 * most; then it is what the last answer said (-1: not 200). */
static int64_t
pending_in(int i, const char *queue)
{
    int64_t deadline = itest_now_ms() + 20000;

    for (;;) {
        struct itest_resp r;
        long st =
            itest_get(&c.node[i], &r,
                      "/api/v1/ephemeral/queues/%s/depth?scope=cluster", queue);
        int whole = st == 200 && itest_jlen(r.json, "missing") == 0;
        int64_t n = st == 200 ? itest_jint(r.json, "pending") : -1;

        itest_resp_free(&r);
        if (whole || st == 404 || itest_now_ms() > deadline)
            return n;
        itest_sleep_ms(100);
    }
}

Test(cluster_tls, a_push_on_one_node_is_popped_on_another_over_https)
{
    struct itest_resp r;
    char p[16];
    int64_t deadline = itest_now_ms() + 30000;

    cl_part_owned_by("tls-fw", 1, NPARTS, p, sizeof(p));
    /* pushed through node 0 and popped through node 2: both forwarded
     * to node 1 */
    cr_assert_eq(itest_push(&c.node[0], &r, "tls-fw", p, "[\"hello\"]"), 201,
                 "%s", r.body);
    itest_resp_free(&r);
    while (pending_in(2, "tls-fw") != 1 && itest_now_ms() < deadline)
        itest_sleep_ms(100);
    cr_expect_eq(pending_in(2, "tls-fw"), 1, "scope=cluster over https");
    cr_assert_eq(itest_get(&c.node[2], &r,
                           "/api/v1/ephemeral/pop?queue=tls-fw&partition=%s",
                           p),
                 200, "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "messages.0.payload"), "hello", "%s",
                     r.body);
    itest_resp_free(&r);

    /* a declaration: worker to its master's cluster port, then the raft
     * log between masters, all over mutual TLS */
    cr_assert_eq(itest_post(&c.node[2], &r, "/api/v1/ephemeral/configure",
                            "{\"queue\":\"tls-decl\",\"options\":"
                            "{\"maxLength\":77}}"),
                 201, "%s", r.body);
    itest_resp_free(&r);
    deadline = itest_now_ms() + 30000;
    while (cl_declared_length(&c, 0, "tls-decl") != 77 &&
           itest_now_ms() < deadline)
        itest_sleep_ms(100);
    cr_expect_eq(cl_declared_length(&c, 0, "tls-decl"), 77);
}

Test(cluster_tls, a_graceful_stop_hands_its_partitions_over)
{
    struct itest_resp r;
    char p[16];
    int64_t deadline;

    cl_part_owned_by("tls-ho", 2, NPARTS, p, sizeof(p));
    for (int k = 0; k < 5; k++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "[%d]", k);
        cr_assert_eq(itest_push(&c.node[0], &r, "tls-ho", p, msg), 201, "%s",
                     r.body);
        itest_resp_free(&r);
    }
    cr_assert_eq(cl_stop(&c, 2, 60000), 0, "node 2 stops cleanly");
    /* its messages went to their next owner, over the cluster port */
    deadline = itest_now_ms() + 30000;
    int got = 0;
    while (got < 5 && itest_now_ms() < deadline) {
        if (itest_get(&c.node[0], &r,
                      "/api/v1/ephemeral/pop?queue=tls-ho&partition=%s"
                      "&batch=10",
                      p) == 200)
            got += itest_jlen(r.json, "messages");
        itest_resp_free(&r);
        if (got < 5)
            itest_sleep_ms(200);
    }
    cr_expect_eq(got, 5, "every message handed over and popped");
    cr_expect(itest_node_log_contains(&c.node[2], "lost=0 (messages"),
              "the stopped node handed everything over");
}

/* keep_body - libcurl's write callback: the answer into the buffer. */
static size_t
keep_body(char *p, size_t size, size_t n, void *arg)
{
    char *buf = arg;
    size_t have = strlen(buf), room = 1023 - have;

    memcpy(buf + have, p, n < room ? n : room);
    buf[have + (n < room ? n : room)] = '\0';
    return size * n;
}

/* cluster_call - POST body to node i's cluster port at path with headers
 * (NULL-terminated), showing the certificate dir/<cert> (NULL: none) and
 * trusting the cluster's CA. */
static long
cluster_call(int i, const char *cert, const char *path, const char *body,
             const char *const *headers, struct itest_resp *r)
{
    static char body_seen[1024];
    char url[200], crt[400], key[400];
    struct curl_slist *h = NULL;
    CURL *e = curl_easy_init();
    long status = 0;

    memset(r, 0, sizeof(*r));
    snprintf(url, sizeof(url), "https://%s:%d%s", c.addr[i], c.cport[i], path);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CAINFO, itest_ca_file);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    body_seen[0] = '\0';
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, keep_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, body_seen);
    if (cert != NULL) {
        snprintf(crt, sizeof(crt), "%s/%s.pem", dir, cert);
        snprintf(key, sizeof(key), "%s/%s.key", dir, cert);
        curl_easy_setopt(e, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(e, CURLOPT_SSLKEY, key);
    }
    for (int k = 0; headers && headers[k]; k++)
        h = curl_slist_append(h, headers[k]);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    r->curl_code = (int)curl_easy_perform(e);
    if (r->curl_code == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    r->status = status;
    r->body = body_seen; /* static: not to be freed */
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return status;
}

Test(cluster_tls, the_cluster_port_wants_a_certificate_of_the_cluster_ca)
{
    struct itest_resp r;
    struct http_sign_lines l;
    const char *hb = "9"; /* no such member: answered 400 once admitted */

    cl_sign(&c, 0, CL_CLUSTER_PORT, "POST", "/cluster/v1/heartbeat", hb, NULL,
            &l);
    const char *const h[] = {l.sig, l.time, l.nonce, l.to, NULL};
    /* no certificate, or one another CA signed: refused */
    long st = cluster_call(0, NULL, "/cluster/v1/heartbeat", hb, h, &r);
    cr_expect(st == 401 || st == 0, "without a certificate: %ld", st);
    cr_expect(st == 0 || strstr(r.body, "client certificate"), "%s", r.body);
    cl_sign(&c, 0, CL_CLUSTER_PORT, "POST", "/cluster/v1/heartbeat", hb, NULL,
            &l);
    st = cluster_call(0, "stranger", "/cluster/v1/heartbeat", hb, h, &r);
    cr_expect(st == 401 || st == 0, "a stranger's certificate: %ld", st);
    cr_expect(st == 0 || strstr(r.body, "client certificate"), "%s", r.body);
    /* the cluster's certificate and a good signature: admitted */
    cl_sign(&c, 0, CL_CLUSTER_PORT, "POST", "/cluster/v1/heartbeat", hb, NULL,
            &l);
    cr_expect_eq(cluster_call(0, "node", "/cluster/v1/heartbeat", hb, h, &r),
                 400, "admitted, and the body judged");
    /* the same call again: a replay */
    cr_expect_eq(cluster_call(0, "node", "/cluster/v1/heartbeat", hb, h, &r),
                 401, "replayed on the cluster port");
    cr_expect(strstr(r.body, "X-Mayfly-Nonce"), "%s", r.body);
    /* unsigned, with the certificate: refused */
    const char *const none[] = {NULL};
    cr_expect_eq(cluster_call(0, "node", "/cluster/v1/heartbeat", hb, none, &r),
                 401);
}

#define FWD "X-Mayfly-Forwarded: 1"
static const char *const fwd_signed[] = {FWD, NULL};

/* signed_req - method path body to node i's client port with the given
 * signature lines (signed with fwd_signed), marked forwarded (and extra, if not
 * NULL). */
static long
signed_req(int i, const char *method, const char *path, const char *body,
           const struct http_sign_lines *l, const char *extra,
           struct itest_resp *r)
{
    const char *const h[] = {FWD,   l->sig, l->time, l->nonce,
                             l->to, extra,  NULL};
    return itest_req_with(&c.node[i], method, path, body, h, r);
}

Test(cluster_tls, a_replayed_or_altered_signed_call_is_refused)
{
    struct itest_resp r;
    struct http_sign_lines l;
    char p[16], body[200], altered[200], path[200];
    const char *push = "/api/v1/ephemeral/push";

    cl_part_owned_by("tls-sig", 0, NPARTS, p, sizeof(p));
    snprintf(body, sizeof(body),
             "{\"queue\":\"tls-sig\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":1}]}",
             p);
    cl_sign(&c, 0, CL_CLIENT_PORT, "POST", push, body, fwd_signed, &l);
    cr_assert_eq(signed_req(0, "POST", push, body, &l, NULL, &r), 201, "%s",
                 r.body);
    itest_resp_free(&r);

    /* the very same call again */
    cr_expect_eq(signed_req(0, "POST", push, body, &l, NULL, &r), 401, "%s",
                 r.body);
    cr_expect_str_eq(itest_jstr(r.json, "code"), "unauthorized");
    itest_resp_free(&r);

    /* its body altered */
    cl_sign(&c, 0, CL_CLIENT_PORT, "POST", push, body, fwd_signed, &l);
    snprintf(altered, sizeof(altered),
             "{\"queue\":\"tls-sig\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":2}]}",
             p);
    cr_expect_eq(signed_req(0, "POST", push, altered, &l, NULL, &r), 401, "%s",
                 r.body);
    itest_resp_free(&r);

    /* its path altered */
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=tls-sig&partition=%s", p);
    cl_sign(&c, 0, CL_CLIENT_PORT, "GET", path, NULL, fwd_signed, &l);
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=tls-sig&partition=%s&batch=5", p);
    cr_expect_eq(signed_req(0, "GET", path, NULL, &l, NULL, &r), 401, "%s",
                 r.body);
    itest_resp_free(&r);

    /* a timestamp outside the window, signed as such */
    struct http_sign_lines stale;
    char to[64];
    cl_addr(&c, 0, CL_CLIENT_PORT, to, sizeof(to));
    struct http_sign_req old = {
        .method = "POST",
        .target = push,
        .body = body,
        .len = strlen(body),
        .lines = fwd_signed,
        .to = {to, NULL, 0},
        .now_ms = http_sign_now_ms() - 3 * HTTP_SIGN_WINDOW_MS,
    };
    cl_sign_req(&c, &old, &stale);
    cr_expect_eq(signed_req(0, "POST", push, body, &stale, NULL, &r), 401, "%s",
                 r.body);
    itest_resp_free(&r);

    /* one message went in, from the first call only */
    cr_expect_eq(pending_in(0, "tls-sig"), 1);
}

Test(cluster_tls, an_unsigned_call_cannot_pass_for_a_nodes)
{
    static const char *const fwd[] = {"X-Mayfly-Forwarded: 1", NULL};
    static const char *const wd[] = {"X-Mayfly-Withdraw: 1234", NULL};
    struct itest_resp r;
    char p[16], body[200];

    cl_part_owned_by("tls-uns", 1, NPARTS, p, sizeof(p));
    snprintf(body, sizeof(body),
             "{\"queue\":\"tls-uns\",\"partition\":\"%s\","
             "\"messages\":[{\"payload\":1}]}",
             p);
    cr_expect_eq(itest_req_with(&c.node[1], "POST", "/api/v1/ephemeral/push",
                                body, fwd, &r),
                 401, "%s", r.body);
    cr_expect(strstr(r.body, "X-Mayfly-Forwarded"), "%s", r.body);
    itest_resp_free(&r);
    snprintf(body, sizeof(body),
             "{\"queue\":\"tls-uns\",\"partition\":\"%s\",\"payload\":null}",
             p);
    cr_expect_eq(itest_req_with(&c.node[1], "POST", "/api/v1/ephemeral/request",
                                body, wd, &r),
                 401, "%s", r.body);
    itest_resp_free(&r);
    cr_expect_eq(pending_in(1, "tls-uns"), -1, "nothing stored: %s",
                 "no queue");
}
