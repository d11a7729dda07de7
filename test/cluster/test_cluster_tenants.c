/*
 * test_cluster_tenants.c - tokens and tenants on three real nodes (SPEC
 * §10): a push on node 1 and a pop on node 3 of a partition node 2 owns
 * both go there with the client's token, and each tenant reads its own
 * queue of the shared name; an ack goes by its id to the node that
 * delivered it; depth and listing with scope=cluster sum every node's
 * share of the caller's tenant alone; a declaration keeps its tenant in
 * the raft catalog; a HUP that revokes a token ends the long poll the
 * node forwarded for it to the partition's owner.
 */
#include <sys/socket.h>
#include <sys/time.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "http/auth.h"
#include "test/cluster/cluster.h"

#define API "/api/v1/ephemeral"

static struct cl c;
static char tokens_path[300];
static const char *const tokens[][2] = {
    {"alpha-token", "tenant=alpha push=* pop=* admin=* read=*"},
    {"beta-token", "tenant=beta push=* pop=* admin=* read=*"},
};

/* write_tokens - the first n tokens into the auth file. */
static void
write_tokens(int n)
{
    char hash[AUTH_HASH_TEXT];
    FILE *f = fopen(tokens_path, "w");

    cr_assert_not_null(f);
    for (int i = 0; i < n; i++) {
        auth_hash_text(tokens[i][0], strlen(tokens[i][0]), hash);
        fprintf(f, "%s %s\n", hash, tokens[i][1]);
    }
    cr_assert_eq(fclose(f), 0);
}

static void
up(void)
{
    char dir[256], opts[400];

    itest_test_dir(dir, sizeof(dir));
    snprintf(tokens_path, sizeof(tokens_path), "%s/tokens", dir);
    write_tokens(2);
    snprintf(opts, sizeof(opts), "member_ttl_ms=60000 auth_file=%s",
             tokens_path);
    cl_up(&c, opts);
    cl_wait_view(&c, CL_ALL);
}

static void
down(void)
{
    cl_kill_all(&c);
}

TestSuite(cluster_tenants, .init = up, .fini = down, .timeout = 180);

/* req - method path body on node i as token tok; the status. */
static long
req(int i, const char *tok, const char *method, const char *path,
    const char *body, struct itest_resp *r)
{
    char h[128];
    const char *hdrs[] = {h, NULL};

    snprintf(h, sizeof(h), "Authorization: Bearer %s", tok);
    return itest_req_with(&c.node[i], method, path, body, hdrs, r);
}

/* until_whole - GET path on node i as tok until a 200 in which every node
 * answered (20 s at most); the last answer. */
static void
until_whole(int i, const char *tok, const char *path, struct itest_resp *r)
{
    int64_t deadline = itest_now_ms() + 20000;

    for (;;) {
        long st = req(i, tok, "GET", path, NULL, r);
        if ((st == 200 && itest_jlen(r->json, "nodes") == CL_NODES &&
             itest_jlen(r->json, "missing") == 0) ||
            itest_now_ms() > deadline)
            break;
        itest_resp_free(r);
        itest_sleep_ms(100);
    }
    cr_assert_eq(r->status, 200, "%s on node %d: %ld %s", path, i, r->status,
                 r->body);
    cr_assert_eq(itest_jlen(r->json, "missing"), 0, "%s", r->body);
}

Test(cluster_tenants, each_tenant_reads_its_own_queue_across_the_nodes)
{
    struct itest_resp r;
    const char *tenant[] = {"alpha", "beta"};
    char part[2][16], body[512], path[256], internal[64], id[256];

    for (int t = 0; t < 2; t++) {
        /* the node that owns it hashes the tenant's name, not the
         * client's */
        snprintf(internal, sizeof(internal), "%s\x1fjobs", tenant[t]);
        cl_part_owned_by(internal, 1, 64, part[t], sizeof(part[t]));
        snprintf(body, sizeof(body),
                 "{\"queue\":\"jobs\",\"partition\":\"%s\",\"messages\":"
                 "[{\"payload\":\"%s-1\"},{\"payload\":\"%s-2\"}]}",
                 part[t], tenant[t], tenant[t]);
        req(0, tokens[t][0], "POST", API "/push", body, &r);
        cr_assert_eq(r.status, 201, "%s push on node 1: %ld %s", tenant[t],
                     r.status, r.body);
        itest_resp_free(&r);
    }
    for (int t = 0; t < 2; t++) {
        snprintf(path, sizeof(path), API "/pop?queue=jobs&partition=%s",
                 part[t]);
        req(2, tokens[t][0], "GET", path, NULL, &r);
        cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
        cr_assert_str_eq(itest_jstr(r.json, "queue"), "jobs", "%s", r.body);
        cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
        snprintf(body, sizeof(body), "%s-1", tenant[t]);
        cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), body,
                         "tenant %s popped on node 3: %s", tenant[t], r.body);
        snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
        itest_resp_free(&r);
        /* the ack goes to the node that delivered it, and is checked
         * there again */
        snprintf(body, sizeof(body), "{\"queue\":\"jobs\",\"acks\":[\"%s\"]}",
                 id);
        req(0, tokens[t][0], "POST", API "/ack", body, &r);
        cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
        cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "acked", "%s",
                         r.body);
        itest_resp_free(&r);
    }
    /* beta has a second queue; alpha declares one */
    req(1, "beta-token", "POST", API "/push",
        "{\"queue\":\"beta-only\",\"messages\":[{\"payload\":0}]}", &r);
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    req(2, "alpha-token", "POST", API "/configure",
        "{\"queue\":\"decl\",\"options\":{\"maxLength\":9}}", &r);
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "decl", "%s", r.body);
    itest_resp_free(&r);

    for (int t = 0; t < 2; t++) {
        until_whole(0, tokens[t][0], API "/queues/jobs/depth?scope=cluster",
                    &r);
        cr_assert_eq(itest_jint(r.json, "pending"), 1, "tenant %s: %s",
                     tenant[t], r.body);
        cr_assert_str_eq(itest_jstr(r.json, "queue"), "jobs", "%s", r.body);
        itest_resp_free(&r);
    }
    until_whole(2, "alpha-token", API "/queues?scope=cluster", &r);
    cr_assert_eq(itest_jlen(r.json, "queues"), 2, "alpha lists: %s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.queue"), "decl", "%s",
                     r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.tier"), "declared", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "queues.0.options.maxLength"), 9, "%s",
                 r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.1.queue"), "jobs", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "queues.1.depth"), 1, "%s", r.body);
    itest_resp_free(&r);
    until_whole(0, "beta-token", API "/queues?scope=cluster", &r);
    cr_assert_eq(itest_jlen(r.json, "queues"), 2, "beta lists: %s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.queue"), "beta-only", "%s",
                     r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.1.queue"), "jobs", "%s",
                     r.body);
    itest_resp_free(&r);
    /* the declaration is alpha's on every node */
    for (int i = 0; i < CL_NODES; i++) {
        req(i, "beta-token", "GET", API "/queues/decl/depth?scope=node", NULL,
            &r);
        cr_assert_eq(r.status, 404,
                     "beta sees alpha's declaration on node "
                     "%d: %s",
                     i + 1, r.body);
        itest_resp_free(&r);
        req(i, "alpha-token", "GET", API "/queues/decl/depth?scope=node", NULL,
            &r);
        cr_assert_eq(r.status, 200, "node %d: %ld %s", i + 1, r.status, r.body);
        cr_assert_str_eq(itest_jstr(r.json, "tier"), "declared", "%s", r.body);
        itest_resp_free(&r);
    }
}

/* beta_waits_forwarded - beta's long poll on node 1 for a partition node 2
 * owns, forwarded there and parked there; its socket. */
static int
beta_waits_forwarded(void)
{
    char part[16], raw[512];
    double parked = 0;
    int64_t t0;
    int fd;

    cl_part_owned_by("beta\x1fwait", 1, 64, part, sizeof(part));
    fd = itest_raw_connect(&c.node[0]);
    cr_assert_geq(fd, 0);
    snprintf(raw, sizeof(raw),
             "GET " API "/pop?queue=wait&partition=%s&wait=true&"
             "timeout=30000 HTTP/1.1\r\nHost: t\r\n"
             "Authorization: Bearer beta-token\r\n\r\n",
             part);
    cr_assert_eq(itest_raw_send(fd, raw), 0);
    /* parked at the owner: the forward has arrived there */
    t0 = itest_now_ms();
    while (itest_metric(&c.node[1], "mayfly_parked_pops", &parked) != 0 ||
           parked < 1) {
        cr_assert_lt(itest_now_ms() - t0, 20000,
                     "the pop never parked at its owner");
        itest_sleep_ms(20);
    }
    return fd;
}

Test(cluster_tenants, a_revoked_tokens_forwarded_long_poll_ends_at_the_hup)
{
    struct itest_resp r;
    struct timeval tv = {.tv_sec = 20};
    int64_t t0;
    int fd;

    /* beta waits on node 1 for a partition node 2 owns: the long poll is
     * forwarded there */
    fd = beta_waits_forwarded();
    /* beta goes from the file; node 1 alone reads it again */
    write_tokens(1);
    t0 = itest_now_ms();
    cr_assert_eq(kill(c.node[0].pid, SIGHUP), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    itest_raw_response(fd, &r);
    cr_assert_eq(r.status, 401, "the revoked token's forwarded pop: %ld %s",
                 r.status, r.body);
    cr_assert_lt(itest_now_ms() - t0, 10000);
    itest_resp_free(&r);
    close(fd);
    /* node 2 still knows beta; node 1 no longer does */
    req(1, "beta-token", "GET", API "/queues?scope=node", NULL, &r);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    req(0, "beta-token", "GET", API "/queues?scope=node", NULL, &r);
    cr_assert_eq(r.status, 401, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
}

/* The owner alone revokes the token: its 401 reaches the client through
 * the node that forwarded the long poll, with its Bearer challenge. */
Test(cluster_tenants, the_owners_401_reaches_the_client_with_its_challenge)
{
    struct itest_resp r;
    struct timeval tv = {.tv_sec = 20};
    int fd;

    fd = beta_waits_forwarded();
    /* beta goes from the file; node 2, the owner, alone reads it again */
    write_tokens(1);
    cr_assert_eq(kill(c.node[1].pid, SIGHUP), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    itest_raw_response(fd, &r);
    cr_assert_eq(r.status, 401, "the owner's answer: %ld %s", r.status, r.body);
    cr_assert_str_eq(r.www_authenticate, "Bearer",
                     "a 401 without its challenge: %s", r.body);
    itest_resp_free(&r);
    close(fd);
}
