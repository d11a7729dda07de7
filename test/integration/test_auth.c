/*
 * test_auth.c - tokens and tenants on one node (SPEC §10): every route
 * refuses a request without a token, with an unknown one, or with one that
 * lacks the permission, and nothing changes; two tenants using the same
 * names are isolated; HUP revokes a token, ending its parked pop; -t checks
 * the auth file as the start does.
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "http/auth.h"
#include "test/integration/node.h"
#include "test/integration/tokens.h"

#define API "/api/v1/ephemeral"

/* The tokens the tests use; tenant and grants as the file gives them. */
static const char *const au_tokens[][2] = {
    {"alpha-all", "tenant=alpha push=* pop=* request=* admin=* read=*"},
    {"alpha-reader", "tenant=alpha read=*"},
    {"alpha-pusher", "tenant=alpha push=*"},
    {"beta-all", "tenant=beta push=* pop=* request=* admin=* read=*"},
    {"plain-all", "push=* pop=* request=* admin=* read=*"},
    {"alpha-jobs", "tenant=alpha push=jobs pop=jobs read=jobs"},
    {"gamma-slow", "tenant=gamma push=* pop=* rate=5"},
    {"delta-fast", "tenant=delta push=* pop=*"},
    {"eps-small", "tenant=eps push=* pop=* max_bytes=64K"},
    {"zeta-rpc", "tenant=zeta push=* pop=* request=* max_bytes=64K"},
    {"alpha-rq", "tenant=alpha request=svc"},
};
#define AU_NTOKENS (sizeof(au_tokens) / sizeof(au_tokens[0]))

static char au_file[300];

/* au_write - the auth file in the test's directory with the tokens whose
 * bit is set in mask (all: ~0u). */
static void
au_write(const char *dir, unsigned mask)
{
    itest_token_file(dir, au_tokens, AU_NTOKENS, mask, au_file,
                     sizeof(au_file));
}

/* au_start - a node with every token in its auth file. */
static void
au_start(struct itest_node *n)
{
    char dir[256], opts[400];

    itest_test_dir(dir, sizeof(dir));
    au_write(dir, ~0u);
    snprintf(opts, sizeof(opts), "auth_file=%s", au_file);
    itest_node_start(n, opts);
}

/* au_raw_request - send the request verb with body as token on a raw
 * socket of its own (the answer is read later); the socket. */
static int
au_raw_request(const struct itest_node *n, const char *token, const char *body)
{
    char raw[1024];
    int fd = itest_raw_connect(n);

    cr_assert_geq(fd, 0);
    snprintf(raw, sizeof(raw),
             "POST " API "/request HTTP/1.1\r\nHost: t\r\n"
             "Authorization: Bearer %s\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n"
             "\r\n%s",
             token, strlen(body), body);
    cr_assert_eq(itest_raw_send(fd, raw), 0);
    return fd;
}

/* au_ok - itest_req_bearer() that must answer want. */
static void
au_ok(const struct itest_node *n, const char *tok, const char *method,
      const char *path, const char *body, long want, struct itest_resp *r)
{
    itest_req_bearer(n, tok, method, path, body, r);
    cr_assert_eq(r->status, want, "%s %s as %s: %ld %s", method, path, tok,
                 r->status, r->body);
}

/* au_state - what tok's tenant holds, as a user would compare it: the
 * listing (name, tier, depth, leased) and the depth of jobs. */
static void
au_state(const struct itest_node *n, const char *tok, char *out, size_t cap)
{
    struct itest_resp r;
    size_t used = 0;

    au_ok(n, tok, "GET", API "/queues?scope=node", NULL, 200, &r);
    for (int i = 0; i < itest_jlen(r.json, "queues"); i++) {
        char k[4][48];
        snprintf(k[0], sizeof(k[0]), "queues.%d.queue", i);
        snprintf(k[1], sizeof(k[1]), "queues.%d.tier", i);
        snprintf(k[2], sizeof(k[2]), "queues.%d.depth", i);
        snprintf(k[3], sizeof(k[3]), "queues.%d.leased", i);
        used +=
            (size_t)snprintf(out + used, cap - used, "%s/%s/%lld/%lld ",
                             itest_jstr(r.json, k[0]), itest_jstr(r.json, k[1]),
                             (long long)itest_jint(r.json, k[2]),
                             (long long)itest_jint(r.json, k[3]));
        cr_assert_lt(used, cap);
    }
    itest_resp_free(&r);
    itest_req_bearer(n, tok, "GET", API "/queues/jobs/depth?scope=node&group=g",
                     NULL, &r);
    snprintf(out + used, cap - used, "| %ld %lld %lld", r.status,
             (long long)itest_jint(r.json, "pending"),
             (long long)itest_jint(r.json, "partitions.0.leased"));
    itest_resp_free(&r);
}

/* One route, as a client calls it on the queue jobs. */
struct au_route {
    const char *method, *path, *body;
    const char *verb;    /* the permission it wants */
    const char *lacking; /* a token of alpha without it */
};

Test(auth, every_route_refuses_a_missing_unknown_or_lacking_token,
     .timeout = 120)
{
    struct itest_node n;
    struct itest_resp r;
    char before[4096], after[4096], ack[512], extend[512], id[256];

    au_start(&n);
    /* alpha's state: three messages in jobs, one leased to g, a declared
     * queue */
    au_ok(&n, "alpha-all", "POST", API "/push",
          "{\"queue\":\"jobs\",\"messages\":[{\"payload\":1},{\"payload\":2},"
          "{\"payload\":3}]}",
          201, &r);
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "POST", API "/configure",
          "{\"queue\":\"decl\",\"options\":{\"maxLength\":5}}", 201, &r);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "decl", "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "GET", API "/pop?queue=jobs&group=g", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    snprintf(ack, sizeof(ack),
             "{\"queue\":\"jobs\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\"}]}",
             id);
    snprintf(extend, sizeof(extend),
             "{\"queue\":\"jobs\",\"group\":\"g\",\"messages\":[{\"id\":\"%s\","
             "\"seconds\":60}]}",
             id);
    au_state(&n, "alpha-all", before, sizeof(before));
    cr_assert(strstr(before, "jobs/implicit/3/1") != NULL, "%s", before);
    cr_assert(strstr(before, "decl/declared/0/0") != NULL, "%s", before);

    const struct au_route routes[] = {
        {"POST", API "/push",
         "{\"queue\":\"jobs\",\"messages\":[{\"payload\":9}]}", "push",
         "alpha-reader"},
        {"GET", API "/pop?queue=jobs&group=g&autoAck=true", NULL, "pop",
         "alpha-pusher"},
        {"POST", API "/ack", ack, "pop", "alpha-pusher"},
        {"POST", API "/extend", extend, "pop", "alpha-pusher"},
        {"POST", API "/request",
         "{\"queue\":\"jobs\",\"payload\":1,\"timeout\":100}", "request",
         "alpha-pusher"},
        {"POST", API "/configure",
         "{\"queue\":\"jobs\",\"options\":{\"maxLength\":7}}", "admin",
         "alpha-pusher"},
        {"POST", API "/reset", "{\"queue\":\"jobs\"}", "admin", "alpha-pusher"},
        {"DELETE", API "/queue/jobs", NULL, "admin", "alpha-pusher"},
        {"DELETE", API "/queues/decl", NULL, "admin", "alpha-pusher"},
        {"GET", API "/queues/jobs/depth", NULL, "read", "alpha-pusher"},
        {"GET", API "/queues", NULL, "read", "alpha-pusher"},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        const struct au_route *rt = &routes[i];
        const char *who[] = {NULL, "not-a-known-token"};

        for (int k = 0; k < 2; k++) {
            itest_req_bearer(&n, who[k], rt->method, rt->path, rt->body, &r);
            itest_assert_error(&r, 401, "unauthorized", NULL, rt->path);
            cr_assert_str_eq(r.www_authenticate, "Bearer", "%s %s", rt->method,
                             rt->path);
            itest_resp_free(&r);
        }
        itest_req_bearer(&n, rt->lacking, rt->method, rt->path, rt->body, &r);
        itest_assert_error(&r, 403, "forbidden", rt->verb, rt->path);
        if (strcmp(rt->path, API "/queues") != 0)
            cr_assert(strstr(itest_jstr(r.json, "error"),
                             strstr(rt->path, "decl") ? "'decl'" : "'jobs'"),
                      "%s %s: the refusal does not name the queue: %s",
                      rt->method, rt->path, r.body);
        itest_resp_free(&r);
    }
    /* A pattern grants its queues alone. */
    au_ok(&n, "alpha-jobs", "GET", API "/queues/jobs/depth?scope=node", NULL,
          200, &r);
    itest_resp_free(&r);
    itest_req_bearer(&n, "alpha-jobs", "GET", API "/queues/decl/depth", NULL,
                     &r);
    itest_assert_error(&r, 403, "forbidden", "read", "depth of decl");
    itest_resp_free(&r);
    au_ok(&n, "alpha-jobs", "GET", API "/queues?scope=node", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "queues"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.queue"), "jobs", "%s",
                     r.body);
    itest_resp_free(&r);
    au_state(&n, "alpha-all", after, sizeof(after));
    cr_assert_str_eq(after, before, "a refused request changed the state");
    cr_assert(!itest_node_log_contains(&n, "beyond loopback"),
              "a node on loopback with tokens warned");
    /* The open routes stay open. */
    cr_assert_eq(itest_get(&n, &r, "/health"), 200);
    itest_resp_free(&r);
    cr_assert_eq(itest_get(&n, &r, "/metrics"), 200);
    itest_resp_free(&r);
    cr_assert_eq(itest_get(&n, &r, "/"), 200);
    itest_resp_free(&r);
}

Test(auth, metrics_wants_a_token_with_metrics_auth_on, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char dir[256], opts[400];

    itest_test_dir(dir, sizeof(dir));
    au_write(dir, ~0u);
    snprintf(opts, sizeof(opts), "auth_file=%s metrics_auth=on", au_file);
    itest_node_start(&n, opts);
    itest_req_bearer(&n, NULL, "GET", "/metrics", NULL, &r);
    itest_assert_error(&r, 401, "unauthorized", NULL, "/metrics");
    itest_resp_free(&r);
    au_ok(&n, "alpha-reader", "GET", "/metrics", NULL, 200, &r);
    cr_assert(strstr(r.body, "mayfly_push_total") != NULL);
    itest_resp_free(&r);
    cr_assert_eq(itest_get(&n, &r, "/health"), 200);
    itest_resp_free(&r);
}

Test(auth, tenants_using_the_same_names_are_isolated, .timeout = 120)
{
    struct itest_node n;
    struct itest_resp r;
    char ack[512];

    au_start(&n);
    au_ok(&n, "alpha-all", "POST", API "/push",
          "{\"queue\":\"jobs\",\"messages\":[{\"payload\":\"a1\"},"
          "{\"payload\":\"a2\"},{\"payload\":\"a3\"}]}",
          201, &r);
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "POST", API "/push",
          "{\"queue\":\"alpha-only\",\"messages\":[{\"payload\":0}]}", 201, &r);
    itest_resp_free(&r);
    au_ok(&n, "beta-all", "POST", API "/push",
          "{\"queue\":\"jobs\",\"messages\":[{\"payload\":\"b1\"}]}", 201, &r);
    itest_resp_free(&r);
    au_ok(&n, "plain-all", "POST", API "/push",
          "{\"queue\":\"jobs\",\"messages\":[{\"payload\":\"p1\"},"
          "{\"payload\":\"p2\"}]}",
          201, &r);
    itest_resp_free(&r);

    /* Depth: each tenant's own jobs. */
    au_ok(&n, "alpha-all", "GET", API "/queues/jobs/depth", NULL, 200, &r);
    cr_assert_eq(itest_jint(r.json, "pending"), 3, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "jobs", "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "beta-all", "GET", API "/queues/jobs/depth", NULL, 200, &r);
    cr_assert_eq(itest_jint(r.json, "pending"), 1, "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "plain-all", "GET", API "/queues/jobs/depth", NULL, 200, &r);
    cr_assert_eq(itest_jint(r.json, "pending"), 2, "%s", r.body);
    itest_resp_free(&r);
    itest_req_bearer(&n, "beta-all", "GET", API "/queues/alpha-only/depth",
                     NULL, &r);
    itest_assert_error(&r, 404, "ephemeral_queue_not_found", NULL,
                       "beta's depth of alpha's queue");
    itest_resp_free(&r);

    /* Listing: each sees its own names, none with a prefix. */
    au_ok(&n, "beta-all", "GET", API "/queues", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "queues"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.queue"), "jobs", "%s",
                     r.body);
    cr_assert_eq(itest_jint(r.json, "queues.0.depth"), 1, "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "GET", API "/queues", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "queues"), 2, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.queue"), "alpha-only", "%s",
                     r.body);
    cr_assert_str_eq(itest_jstr(r.json, "queues.1.queue"), "jobs", "%s",
                     r.body);
    itest_resp_free(&r);
    au_ok(&n, "plain-all", "GET", API "/queues", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "queues"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "queues.0.depth"), 2, "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "GET", API "/queues?prefix=j", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "queues"), 1, "%s", r.body);
    itest_resp_free(&r);

    /* Pop: beta takes its own message; an ack with its id is alpha's
     * unknown, and alpha's lease is untouched by beta's ack. */
    au_ok(&n, "alpha-all", "GET", API "/pop?queue=jobs", NULL, 200, &r);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "jobs", "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "a1", "%s",
                     r.body);
    snprintf(ack, sizeof(ack), "{\"queue\":\"jobs\",\"acks\":[\"%s\"]}",
             itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    au_ok(&n, "beta-all", "POST", API "/ack", ack, 200, &r);
    cr_assert_str_eq(itest_jstr(r.json, "results.0.outcome"), "unknown", "%s",
                     r.body);
    itest_resp_free(&r);
    au_ok(&n, "beta-all", "GET", API "/pop?queue=jobs&autoAck=true", NULL, 200,
          &r);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "b1", "%s",
                     r.body);
    itest_resp_free(&r);

    /* Reset and delete act in the caller's tenant alone. */
    au_ok(&n, "alpha-all", "GET", API "/queues/jobs/depth", NULL, 200, &r);
    int64_t alpha_pending = itest_jint(r.json, "pending");
    itest_resp_free(&r);
    au_ok(&n, "beta-all", "POST", API "/reset", "{\"queue\":\"jobs\"}", 200,
          &r);
    itest_resp_free(&r);
    au_ok(&n, "beta-all", "DELETE", API "/queue/jobs", NULL, 200, &r);
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "GET", API "/queues/jobs/depth", NULL, 200, &r);
    cr_assert_eq(itest_jint(r.json, "pending"), alpha_pending, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "partitions.0.leased"), 1, "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "plain-all", "GET", API "/queues/jobs/depth", NULL, 200, &r);
    cr_assert_eq(itest_jint(r.json, "pending"), 2, "%s", r.body);
    itest_resp_free(&r);

    /* Declarations are the tenant's too. */
    au_ok(&n, "beta-all", "POST", API "/configure",
          "{\"queue\":\"jobs\",\"options\":{\"maxLength\":1}}", 201, &r);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "jobs", "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "GET", API "/queues?prefix=jobs", NULL, 200, &r);
    cr_assert_str_eq(itest_jstr(r.json, "queues.0.tier"), "implicit", "%s",
                     r.body);
    itest_resp_free(&r);
    au_ok(&n, "beta-all", "DELETE", API "/queue/jobs", NULL, 200, &r);
    cr_assert_str_eq(itest_jstr(r.json, "queue"), "jobs", "%s", r.body);
    cr_assert(strchr(r.body, 0x1f) == NULL && !strstr(r.body, "u001f"), "%s",
              r.body);
    itest_resp_free(&r);
}

Test(auth, a_request_and_its_reply_stay_in_the_tenant, .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    struct timeval tv = {.tv_sec = 20};
    const char *body = "{\"queue\":\"rpc\",\"payload\":7,\"timeout\":15000}";
    char ack[512], reply_to[256];
    int64_t t0;
    int fd;

    au_start(&n);
    /* a responder of alpha has popped lately: the request is stored */
    au_ok(&n, "alpha-all", "GET", API "/pop?queue=rpc&group=w", NULL, 200, &r);
    itest_resp_free(&r);
    fd = au_raw_request(&n, "alpha-all", body);
    /* beta's rpc is another queue: nothing there */
    au_ok(&n, "beta-all", "GET", API "/pop?queue=rpc&group=w", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "GET",
          API "/pop?queue=rpc&group=w&wait=true&timeout=10000", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    snprintf(reply_to, sizeof(reply_to), "%s",
             itest_jstr(r.json, "messages.0.replyTo"));
    cr_assert(strncmp(reply_to, "mayfly.inbox/", 13) == 0, "%s", r.body);
    cr_assert(strstr(r.body, "u001f") == NULL, "%s", r.body);
    snprintf(ack, sizeof(ack),
             "{\"queue\":\"rpc\",\"group\":\"w\",\"acks\":[{\"id\":\"%s\","
             "\"reply\":{\"ok\":1}}]}",
             itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
    /* replying takes the request permission besides pop */
    itest_req_bearer(&n, "alpha-jobs", "POST", API "/ack", ack, &r);
    itest_assert_error(&r, 403, "forbidden", "pop|request", "reply");
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "POST", API "/ack", ack, 200, &r);
    cr_assert_eq(itest_jbool(r.json, "results.0.replied"), 1, "%s", r.body);
    itest_resp_free(&r);
    t0 = itest_now_ms();
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    itest_raw_response(fd, &r);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_eq(itest_jint(r.json, "reply.ok"), 1, "%s", r.body);
    cr_assert_lt(itest_now_ms() - t0, 15000);
    itest_resp_free(&r);
    close(fd);
}

/* A request's inbox takes replies and nothing else: a token that may only
 * send requests cannot pop, configure, reset, read or delete a queue by
 * naming it like an inbox (the request permission is not admin or pop). */
Test(auth, an_inbox_name_grants_no_verb_but_a_reply, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    const char *inbox = "mayfly.inbox/n1/1";
    const struct au_route routes[] = {
        {"POST", API "/configure",
         "{\"queue\":\"mayfly.inbox/n1/1\",\"options\":{\"maxLength\":5}}",
         "configure", NULL},
        {"GET", API "/pop?queue=mayfly.inbox/n1/1", NULL, "pop", NULL},
        {"POST", API "/reset", "{\"queue\":\"mayfly.inbox/n1/1\"}", "reset",
         NULL},
        {"DELETE", API "/queue/mayfly.inbox%2Fn1%2F1", NULL, "delete", NULL},
        {"GET", API "/queues/mayfly.inbox%2Fn1%2F1/depth", NULL, "depth", NULL},
    };

    au_start(&n);
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        itest_req_bearer(&n, "alpha-rq", routes[i].method, routes[i].path,
                         routes[i].body, &r);
        itest_assert_error(&r, 403, "forbidden", inbox, routes[i].verb);
        itest_resp_free(&r);
    }
    /* nothing was declared or made under that name */
    au_ok(&n, "alpha-all", "GET", API "/queues?scope=node", NULL, 200, &r);
    cr_assert(strstr(r.body, "mayfly.inbox") == NULL, "%s", r.body);
    itest_resp_free(&r);
    /* a reply by hand is still a push with the request permission: this
     * inbox is no live request's, so it is gone (404), not forbidden */
    itest_req_bearer(
        &n, "alpha-rq", "POST", API "/push",
        "{\"queue\":\"mayfly.inbox/n1/1\",\"messages\":[{\"payload\":1}]}", &r);
    cr_assert_neq(r.status, 403, "%s", r.body);
    cr_assert_neq(r.status, 201, "%s", r.body);
    itest_resp_free(&r);
}

Test(auth, a_name_too_long_for_its_tenant_is_refused_saying_so, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char name[513], body[700];

    au_start(&n);
    memset(name, 'q', 510);
    name[510] = '\0';
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"messages\":[{\"payload\":1}]}", name);
    au_ok(&n, "plain-all", "POST", API "/push", body, 201, &r);
    itest_resp_free(&r);
    itest_req_bearer(&n, "alpha-all", "POST", API "/push", body, &r);
    itest_assert_error(&r, 400, "invalid_name", "tenant 'alpha'", "push");
    cr_assert(strstr(itest_jstr(r.json, "error"), "506") != NULL, "%s", r.body);
    itest_resp_free(&r);
}

Test(auth, hup_revokes_a_token_and_ends_its_parked_pop, .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    char dir[256], opts[400];
    struct timeval tv = {.tv_sec = 20};
    double parked = 0;
    int64_t t0;
    int fd;

    itest_test_dir(dir, sizeof(dir));
    au_write(dir, ~0u);
    snprintf(opts, sizeof(opts), "auth_file=%s", au_file);
    itest_node_start(&n, opts);
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    cr_assert_eq(itest_raw_send(fd, "GET " API "/pop?queue=jobs&wait=true&"
                                    "timeout=30000 HTTP/1.1\r\n"
                                    "Host: t\r\n"
                                    "Authorization: Bearer beta-all\r\n\r\n"),
                 0);
    /* parked, not only read: the HUP is to end a parked pop */
    t0 = itest_now_ms();
    while (itest_metric(&n, "mayfly_parked_pops", &parked) != 0 || parked < 1) {
        cr_assert_lt(itest_now_ms() - t0, 20000, "the pop never parked");
        itest_sleep_ms(20);
    }
    au_write(dir, ~(1u << 3)); /* beta-all goes */
    t0 = itest_now_ms();
    cr_assert_eq(kill(n.pid, SIGHUP), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    itest_raw_response(fd, &r);
    cr_assert_eq(r.status, 401, "the revoked token's parked pop: %ld %s",
                 r.status, r.body);
    cr_assert_lt(itest_now_ms() - t0, 10000,
                 "the parked pop ended %lld ms after the HUP, its timeout "
                 "being 30 s",
                 (long long)(itest_now_ms() - t0));
    itest_resp_free(&r);
    close(fd);
    itest_req_bearer(&n, "beta-all", "GET", API "/queues", NULL, &r);
    itest_assert_error(&r, 401, "unauthorized", NULL, "revoked token");
    itest_resp_free(&r);
    au_ok(&n, "alpha-all", "GET", API "/queues", NULL, 200, &r);
    itest_resp_free(&r);
    /* A file that no longer loads keeps the tokens loaded before. */
    FILE *f = fopen(au_file, "a");
    cr_assert_not_null(f);
    fprintf(f, "sha256:nonsense tenant=x\n");
    fclose(f);
    cr_assert_eq(kill(n.pid, SIGHUP), 0);
    t0 = itest_now_ms();
    while (!itest_node_log_contains(&n, "keeping the tokens loaded before")) {
        cr_assert_lt(itest_now_ms() - t0, 20000, "no word of the bad file");
        itest_sleep_ms(50);
    }
    au_ok(&n, "alpha-all", "GET", API "/queues", NULL, 200, &r);
    itest_resp_free(&r);
}

/* A request is a long poll too: the HUP that revokes its token ends its
 * wait with 401, long before its timeout. */
Test(auth, hup_revokes_a_token_and_ends_its_waiting_request, .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    char dir[256], opts[400];
    const char *body = "{\"queue\":\"rpc\",\"payload\":1,\"timeout\":30000}";
    struct timeval tv = {.tv_sec = 20};
    int64_t t0;
    int fd;

    itest_test_dir(dir, sizeof(dir));
    au_write(dir, ~0u);
    snprintf(opts, sizeof(opts), "auth_file=%s", au_file);
    itest_node_start(&n, opts);
    au_ok(&n, "beta-all", "GET", API "/pop?queue=rpc&group=w", NULL, 200, &r);
    itest_resp_free(&r);
    fd = au_raw_request(&n, "beta-all", body);
    /* the request is stored (so its wait has begun) once a pop finds it */
    t0 = itest_now_ms();
    for (;;) {
        au_ok(&n, "beta-all", "GET", API "/pop?queue=rpc&group=w", NULL, 200,
              &r);
        int got = itest_jlen(r.json, "messages");
        itest_resp_free(&r);
        if (got == 1)
            break;
        cr_assert_lt(itest_now_ms() - t0, 20000, "the request never stored");
        itest_sleep_ms(20);
    }
    au_write(dir, ~(1u << 3)); /* beta-all goes */
    t0 = itest_now_ms();
    cr_assert_eq(kill(n.pid, SIGHUP), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    itest_raw_response(fd, &r);
    cr_assert_eq(r.status, 401, "the revoked token's request: %ld %s", r.status,
                 r.body);
    cr_assert_str_eq(itest_jstr(r.json, "code"), "unauthorized", "%s", r.body);
    cr_assert_lt(itest_now_ms() - t0, 10000,
                 "the request ended %lld ms after the HUP, its timeout "
                 "being 30 s",
                 (long long)(itest_now_ms() - t0));
    itest_resp_free(&r);
    close(fd);
}

Test(auth, a_tenant_over_its_rate_gets_429_while_another_is_served,
     .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    const char *one = "{\"queue\":\"q\",\"messages\":[{\"payload\":1}]}";
    const char *five = "{\"queue\":\"q\",\"messages\":[{\"payload\":1},"
                       "{\"payload\":2},{\"payload\":3},{\"payload\":4},"
                       "{\"payload\":5}]}";
    const char *six = "{\"queue\":\"q\",\"messages\":[{\"payload\":1},"
                      "{\"payload\":2},{\"payload\":3},{\"payload\":4},"
                      "{\"payload\":5},{\"payload\":6}]}";
    int limited = 0, stored = 0;

    au_start(&n);
    /* More than the rate in one batch fits a full bucket, and leaves it
     * in debt: the next push waits as long as Retry-After says. */
    au_ok(&n, "gamma-slow", "POST", API "/push", six, 201, &r);
    itest_resp_free(&r);
    stored += 6;
    itest_req_bearer(&n, "gamma-slow", "POST", API "/push", one, &r);
    itest_assert_error(&r, 429, "rate_limited", "5", "one after a batch of 6");
    cr_assert_str_eq(r.retry_after, "1", "%s", r.body);
    itest_resp_free(&r);
    itest_sleep_ms(1300); /* the debt paid, the bucket full again */
    /* Five fit a full bucket, a sixth does not (unless 200 ms passed
     * between the two and one came back: then again). */
    for (int i = 0; i < 20 && !limited; i++) {
        itest_req_bearer(&n, "gamma-slow", "POST", API "/push", five, &r);
        long first = r.status;
        stored += first == 201 ? 5 : 0;
        itest_resp_free(&r);
        itest_req_bearer(&n, "gamma-slow", "POST", API "/push", one, &r);
        stored += r.status == 201;
        if (first == 201 && r.status == 429) {
            limited = 1;
            cr_assert_str_eq(itest_jstr(r.json, "code"), "rate_limited");
            cr_assert(r.retry_after[0] != '\0', "no Retry-After");
            itest_resp_free(&r);
            /* another tenant is served meanwhile */
            au_ok(&n, "delta-fast", "POST", API "/push", six, 201, &r);
        }
        itest_resp_free(&r);
        itest_sleep_ms(1100);
    }
    cr_assert(limited, "a sixth push in one second was never refused");
    /* What was refused was not stored. */
    au_ok(&n, "gamma-slow", "GET", API "/pop?queue=q&batch=10000&autoAck=true",
          NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), stored, "%s", r.body);
    itest_resp_free(&r);
}

/* A push the queue refuses (429 queue_full: more messages than it holds
 * room for; 413 payload_too_large: more than it may ever hold) changes
 * nothing, the tenant's rate included: its refused messages do not use up
 * the bucket. */
Test(auth, a_refused_push_does_not_count_toward_the_rate, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char dir[256], opts[400];
    const char *two = "{\"queue\":\"q\",\"messages\":[{\"payload\":1},"
                      "{\"payload\":2}]}";
    const char *three = "{\"queue\":\"q\",\"messages\":[{\"payload\":1},"
                        "{\"payload\":2},{\"payload\":3}]}";
    const char *one = "{\"queue\":\"q\",\"messages\":[{\"payload\":1}]}";

    itest_test_dir(dir, sizeof(dir));
    au_write(dir, ~0u);
    snprintf(opts, sizeof(opts), "auth_file=%s queue_max_length=2", au_file);
    itest_node_start(&n, opts);
    /* gamma-slow may push 5 a second: one stored, three refused batches
     * of two and two of three (12 messages), and one more that fits are
     * all answered as the queue decides */
    au_ok(&n, "gamma-slow", "POST", API "/push", one, 201, &r);
    itest_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        itest_req_bearer(&n, "gamma-slow", "POST", API "/push", two, &r);
        cr_assert_eq(r.status, 429, "refused batch %d: %ld %s", i, r.status,
                     r.body);
        cr_assert_str_eq(itest_jstr(r.json, "code"), "queue_full",
                         "refused batch %d: %s", i, r.body);
        itest_resp_free(&r);
    }
    for (int i = 0; i < 2; i++) {
        itest_req_bearer(&n, "gamma-slow", "POST", API "/push", three, &r);
        itest_assert_error(&r, 413, "payload_too_large", "maxLength",
                           "three into a queue of two");
        itest_resp_free(&r);
    }
    au_ok(&n, "gamma-slow", "POST", API "/push", one, 201, &r);
    itest_resp_free(&r);
}

/* A batch larger than the rate is taken when the bucket is full (SPEC §2:
 * a 429's Retry-After promises that a later try can work), the pushes
 * after it wait for as long as Retry-After says, and another tenant is
 * served meanwhile. */
Test(auth, a_batch_larger_than_the_rate_is_taken_and_paid_for_after,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char twelve[512];
    const char *one = "{\"queue\":\"q\",\"messages\":[{\"payload\":99}]}";
    size_t used = (size_t)snprintf(twelve, sizeof(twelve),
                                   "{\"queue\":\"q\",\"messages\":[");
    char *end;
    long wait_s;
    int64_t t0;

    for (int i = 0; i < 12; i++)
        used += (size_t)snprintf(twelve + used, sizeof(twelve) - used,
                                 "%s{\"payload\":%d}", i ? "," : "", i);
    snprintf(twelve + used, sizeof(twelve) - used, "]}");
    au_start(&n);
    t0 = itest_now_ms();
    au_ok(&n, "gamma-slow", "POST", API "/push", twelve, 201, &r);
    cr_assert_eq(itest_jint(r.json, "pushed"), 12, "%s", r.body);
    itest_resp_free(&r);
    /* 12 at 5 a second: 2.4 s of pushes, the bucket's second less */
    itest_req_bearer(&n, "gamma-slow", "POST", API "/push", one, &r);
    itest_assert_error(&r, 429, "rate_limited", "5", "one after 12");
    wait_s = strtol(r.retry_after, &end, 10);
    cr_assert(*end == '\0' && wait_s >= 1 && wait_s <= 2,
              "Retry-After \"%s\" after 12 at 5 a second", r.retry_after);
    cr_assert(itest_now_ms() - t0 > 600 || wait_s == 2,
              "Retry-After %ld: 1.6 s of debt", wait_s);
    itest_resp_free(&r);
    au_ok(&n, "delta-fast", "POST", API "/push", twelve, 201, &r);
    itest_resp_free(&r);
    itest_sleep_ms((int)wait_s * 1000);
    au_ok(&n, "gamma-slow", "POST", API "/push", one, 201, &r);
    itest_resp_free(&r);
    au_ok(&n, "gamma-slow", "GET", API "/pop?queue=q&batch=100&autoAck=true",
          NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 13, "%s", r.body);
    for (int i = 0; i < 12; i++) {
        char k[32];
        snprintf(k, sizeof(k), "messages.%d.payload", i);
        cr_assert_eq(itest_jint(r.json, k), i, "%s", r.body);
    }
    itest_resp_free(&r);
}

/* A batch larger than the tenant's whole share of the node would never
 * fit, however much its consumers take: 413, not 503 with Retry-After. */
Test(auth, a_batch_larger_than_the_tenants_share_is_413, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    size_t cap = 128 + 70 * 1100, used;
    char *body = malloc(cap), kb[1001];

    cr_assert(body);
    memset(kb, 'x', 1000);
    kb[1000] = '\0';
    used = (size_t)snprintf(body, cap, "{\"queue\":\"big\",\"messages\":[");
    for (int i = 0; i < 70; i++)
        used += (size_t)snprintf(body + used, cap - used,
                                 "%s{\"payload\":\"%s\"}", i ? "," : "", kb);
    snprintf(body + used, cap - used, "]}");
    au_start(&n);
    itest_req_bearer(&n, "eps-small", "POST", API "/push", body, &r);
    itest_assert_error(&r, 413, "payload_too_large", "max_bytes",
                       "70 KB in a 64 KB share");
    cr_expect(strstr(itest_jstr(r.json, "error"),
                     "tenant 'eps' may hold 65536 bytes on this node") != NULL,
              "%s", r.body);
    cr_assert_str_eq(r.retry_after, "", "%s", r.body);
    itest_resp_free(&r);
    /* the bound is the tenant's: another without a share stores it */
    au_ok(&n, "delta-fast", "POST", API "/push", body, 201, &r);
    itest_resp_free(&r);
    free(body);
    au_ok(&n, "eps-small", "GET", API "/pop?queue=big&batch=100&autoAck=true",
          NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
}

Test(auth, a_tenant_past_its_share_of_memory_gets_503_until_it_drains,
     .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    char body[16384], kb[1001];
    int full = 0;

    memset(kb, 'x', 1000);
    kb[1000] = '\0';
    size_t used = (size_t)snprintf(body, sizeof(body),
                                   "{\"queue\":\"big\",\"messages\":[");
    for (int i = 0; i < 10; i++)
        used += (size_t)snprintf(body + used, sizeof(body) - used,
                                 "%s{\"payload\":\"%s\"}", i ? "," : "", kb);
    snprintf(body + used, sizeof(body) - used, "]}");
    au_start(&n);
    for (int i = 0; i < 20 && !full; i++) {
        itest_req_bearer(&n, "eps-small", "POST", API "/push", body, &r);
        if (r.status == 503) {
            full = 1;
            itest_assert_error(&r, 503, "ephemeral_unavailable", "max_bytes",
                               "past the share");
            cr_assert(r.retry_after[0] != '\0', "no Retry-After");
        } else {
            cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
        }
        itest_resp_free(&r);
    }
    cr_assert(full, "200 KB pushed into a 64 KB share");
    au_ok(&n, "delta-fast", "POST", API "/push", body, 201, &r);
    itest_resp_free(&r);
    au_ok(&n, "eps-small", "GET", API "/pop?queue=big&batch=10000&autoAck=true",
          NULL, 200, &r);
    cr_assert_gt(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
    au_ok(&n, "eps-small", "POST", API "/push", body, 201, &r);
    itest_resp_free(&r);
}

/* A request is a message stored in the tenant's queue: past the tenant's
 * share it is refused as a push is, and nothing is stored. */
Test(auth, a_request_past_its_tenants_share_is_refused_and_not_stored,
     .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    char body[16384], kb[1001], rpc[1200];
    int full = 0;

    memset(kb, 'x', 1000);
    kb[1000] = '\0';
    size_t used = (size_t)snprintf(body, sizeof(body),
                                   "{\"queue\":\"big\",\"messages\":[");
    for (int i = 0; i < 10; i++)
        used += (size_t)snprintf(body + used, sizeof(body) - used,
                                 "%s{\"payload\":\"%s\"}", i ? "," : "", kb);
    snprintf(body + used, sizeof(body) - used, "]}");
    snprintf(rpc, sizeof(rpc),
             "{\"queue\":\"rpc\",\"payload\":\"%s\",\"timeout\":2000}", kb);
    au_start(&n);
    /* a responder of zeta has popped lately: requests are stored */
    au_ok(&n, "zeta-rpc", "GET", API "/pop?queue=rpc&group=w", NULL, 200, &r);
    itest_resp_free(&r);
    for (int i = 0; i < 20 && !full; i++) {
        itest_req_bearer(&n, "zeta-rpc", "POST", API "/push", body, &r);
        full = r.status == 503;
        itest_resp_free(&r);
    }
    cr_assert(full, "200 KB pushed into a 64 KB share");
    itest_req_bearer(&n, "zeta-rpc", "POST", API "/request", rpc, &r);
    itest_assert_error(&r, 503, "ephemeral_unavailable", "max_bytes",
                       "a request past the share");
    cr_assert(r.retry_after[0] != '\0', "no Retry-After");
    itest_resp_free(&r);
    au_ok(&n, "zeta-rpc", "GET", API "/pop?queue=rpc&group=w", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "stored: %s", r.body);
    itest_resp_free(&r);
}

/* au_log_has - whether the file at path holds needle. */
static int
au_log_has(const char *path, const char *needle)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

Test(auth, a_node_beyond_loopback_without_tokens_warns, .timeout = 60)
{
    char dir[256], log[300], l[64], cl[64], dd[300];
    int64_t t0 = itest_now_ms();
    int st;

    itest_test_dir(dir, sizeof(dir));
    snprintf(l, sizeof(l), "listen=0.0.0.0:%d", itest_free_port());
    snprintf(cl, sizeof(cl), "cluster_listen=127.0.0.1:%d", itest_free_port());
    snprintf(dd, sizeof(dd), "data_dir=%s/data", dir);
    snprintf(log, sizeof(log), "%s/node.log", dir);
    const char *own[] = {l, cl, dd, "workers=1"};
    pid_t pid = itest_spawn(own, 4, NULL, log);
    while (!au_log_has(log, "reaches beyond loopback and no auth_file")) {
        cr_assert_lt(itest_now_ms() - t0, 20000, "no warning in %s", log);
        itest_sleep_ms(50);
    }
    kill(pid, SIGTERM);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
}

/* au_check - mayflyd -t with the auth file at path: its exit status, and
 * what it printed into out. */
static int
au_check(const char *path, char *out, size_t cap)
{
    char cmd[1024];
    FILE *p;
    size_t n;

    snprintf(cmd, sizeof(cmd), "'%s' -t -o auth_file=%s 2>&1",
             getenv("MAYFLYD"), path);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return WEXITSTATUS(pclose(p));
}

Test(auth, dash_t_checks_the_auth_file_as_the_start_does, .timeout = 60)
{
    char dir[256], out[2048];
    FILE *f;

    itest_test_dir(dir, sizeof(dir));
    au_write(dir, ~0u);
    cr_assert_eq(au_check(au_file, out, sizeof(out)), 0, "%s", out);
    f = fopen(au_file, "a");
    cr_assert_not_null(f);
    fprintf(f, "\nsha256:0123 tenant=x\n");
    fclose(f);
    cr_assert_eq(au_check(au_file, out, sizeof(out)), 1, "%s", out);
    /* the comment, every token, the blank line, then the bad one */
    char line[16];
    snprintf(line, sizeof(line), ":%zu:", AU_NTOKENS + 3);
    cr_assert(strstr(out, au_file) != NULL && strstr(out, line) != NULL,
              "the error does not name the file and line %s: %s", line, out);
}
