/*
 * test_openapi.c - the OpenAPI document against a real node (issue 32):
 * one request per route and per status the test can provoke (success and
 * the main errors), each answer's status, content type and body written to
 * a file of JSON lines and checked by ops/openapi/validate.mjs (ajv, JSON
 * Schema 2020-12) against worker/openapi/openapi.json, so the document
 * cannot drift from the code.  A route the node does not serve yet (404
 * not_found) is skipped with a message naming it.  The node serves the
 * document itself, byte for byte the repository's.
 *
 * The validator and its node_modules come from make openapi-deps (which
 * make test runs); the repository is found from $MAYFLYD
 * (<repo>/build/<mode>/mayflyd).
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "http/auth.h"
#include "test/integration/node.h"
#include "test/integration/tokens.h"

#define API "/api/v1/ephemeral"

/* oa - where the answers go, and the repository they are checked in. */
struct oa {
    char repo[512];
    char cases[600];
    FILE *f;
    int recorded;
};

/* oa_open - the cases file in the test's directory; the repository. */
static void
oa_open(struct oa *o)
{
    const char *bin = getenv("MAYFLYD");
    char dir[256], tmp[512];

    cr_assert(bin != NULL && *bin, "MAYFLYD is not set");
    snprintf(tmp, sizeof(tmp), "%s", bin);
    /* <repo>/build/<mode>/mayflyd: three levels up */
    snprintf(o->repo, sizeof(o->repo), "%s", dirname(dirname(dirname(tmp))));
    itest_test_dir(dir, sizeof(dir));
    snprintf(o->cases, sizeof(o->cases), "%s/answers.jsonl", dir);
    o->f = fopen(o->cases, "w");
    cr_assert_not_null(o->f, "%s", o->cases);
    o->recorded = 0;
}

/* oa_line - one answer as the validator reads it. */
static void
oa_line(struct oa *o, const char *path, const char *method, long status,
        const char *ctype, const char *body)
{
    struct json_object *j = json_object_new_object();

    json_object_object_add(j, "path", json_object_new_string(path));
    json_object_object_add(j, "method", json_object_new_string(method));
    json_object_object_add(j, "status", json_object_new_int64(status));
    json_object_object_add(j, "contentType", json_object_new_string(ctype));
    json_object_object_add(j, "body", json_object_new_string(body));
    fprintf(o->f, "%s\n",
            json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    o->recorded++;
}

/*
 * oa_case - record r, the answer to method on the document's path, which
 * the test provoked expecting status want (the test's own check that it
 * provoked what it says).  A route the node does not serve yet answers
 * 404 not_found: skipped, named on stderr.  Returns 1 when recorded.
 */
static int
oa_case(struct oa *o, const char *path, const char *method, long want,
        const struct itest_resp *r)
{
    if (r->status == 404 &&
        strcmp(itest_jstr(r->json, "code"), "not_found") == 0) {
        fprintf(stderr,
                "test_openapi: %s %s is not served by this node yet; "
                "skipped (the document describes it from SPEC)\n",
                method, path);
        return 0;
    }
    cr_expect_eq(r->status, want, "%s %s: %ld, not %ld: %s", method, path,
                 r->status, want, r->body);
    oa_line(o, path, method, r->status, r->content_type, r->body);
    return 1;
}

/* oa_do - send method target with body (NULL: none) and record it. */
static int
oa_do(struct oa *o, const struct itest_node *n, const char *path,
      const char *method, const char *target, const char *body, long want)
{
    struct itest_resp r;
    char m[16];
    int got;

    for (size_t i = 0; i < sizeof(m) - 1 && method[i]; i++)
        m[i] = (char)(method[i] - 'a' + 'A'), m[i + 1] = '\0';
    itest_req(n, m, target, body, &r);
    got = oa_case(o, path, method, want, &r);
    itest_resp_free(&r);
    return got;
}

/* oa_as - oa_do() as token tok (NULL: none). */
static void
oa_as(struct oa *o, const struct itest_node *n, const char *tok,
      const char *path, const char *method, const char *target,
      const char *body, long want)
{
    struct itest_resp r;
    char h[128], m[16];
    const char *hdrs[] = {h, NULL};

    for (size_t i = 0; i < sizeof(m) - 1 && method[i]; i++)
        m[i] = (char)(method[i] - 'a' + 'A'), m[i + 1] = '\0';
    snprintf(h, sizeof(h), "Authorization: Bearer %s", tok ? tok : "");
    itest_req_with(n, m, target, body, tok ? hdrs : NULL, &r);
    oa_case(o, path, method, want, &r);
    itest_resp_free(&r);
}

/* oa_check - run the validator over what was recorded; its exit status,
 * its output in out. */
static int
oa_check(struct oa *o, const char *cases, char *out, size_t cap)
{
    char cmd[2400];
    FILE *p;
    size_t len = 0, got;
    int st;

    snprintf(cmd, sizeof(cmd),
             "node '%s/ops/openapi/validate.mjs' '%s/build/openapi' "
             "'%s/worker/openapi/openapi.json' '%s' 2>&1",
             o->repo, o->repo, o->repo, cases);
    p = popen(cmd, "r");
    cr_assert_not_null(p, "popen(%s)", cmd);
    while (len + 1 < cap && (got = fread(out + len, 1, cap - 1 - len, p)) > 0)
        len += got;
    out[len] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* oa_tools - abort unless the validator's packages are installed. */
static void
oa_tools(const struct oa *o)
{
    char p[700];

    snprintf(p, sizeof(p), "%s/build/openapi/node_modules/ajv/package.json",
             o->repo);
    cr_assert(access(p, R_OK) == 0,
              "%s is missing: run make openapi-deps (make test does)", p);
}

/* asked - a request sent from a thread of its own, which the main thread
 * answers (reply_one); the answer is recorded after the join. */
struct asked {
    const struct itest_node *n;
    const char *body;
    struct itest_resp r;
};

/* ask - the thread: send a->body to the request route. */
static void *
ask(void *arg)
{
    struct asked *a = arg;

    itest_req(a->n, "POST", API "/request", a->body, &a->r);
    itest_req_thread_end();
    return NULL;
}

/* reply_one - pop queue's next message (waiting) and ack it with a reply;
 * the ack's answer recorded. */
static void
reply_one(struct oa *o, const struct itest_node *n, const char *queue)
{
    struct itest_resp p, a;
    char body[512];

    itest_get(n, &p, API "/pop?queue=%s&wait=true&timeout=10000", queue);
    cr_assert_eq(itest_jlen(p.json, "messages"), 1, "%s", p.body);
    cr_assert_str_neq(itest_jstr(p.json, "messages.0.replyTo"), "");
    oa_case(o, API "/pop", "get", 200, &p);
    snprintf(
        body, sizeof(body),
        "{\"queue\":\"%s\",\"acks\":[{\"id\":\"%s\",\"reply\":{\"ok\":1}}]}",
        queue, itest_jstr(p.json, "messages.0.id"));
    itest_post(n, &a, API "/ack", "%s", body);
    cr_expect_eq(itest_jbool(a.json, "results.0.replied"), 1, "%s", a.body);
    oa_case(o, API "/ack", "post", 200, &a);
    itest_resp_free(&a);
    itest_resp_free(&p);
}

/* request_replied - a request answered by reply_one (gather: with
 * gather). */
static void
request_replied(struct oa *o, const struct itest_node *n, const char *queue,
                const char *extra)
{
    struct asked a = {.n = n};
    struct itest_resp e;
    char body[256];
    pthread_t t;

    /* a pop within responders_idle_ms makes the queue's partition
     * listened to, so the request is not refused no_responders */
    itest_get(n, &e, API "/pop?queue=%s", queue);
    itest_resp_free(&e);
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"payload\":{\"q\":1},\"timeout\":10000%s}",
             queue, extra);
    a.body = body;
    cr_assert_eq(pthread_create(&t, NULL, ask, &a), 0);
    reply_one(o, n, queue);
    pthread_join(t, NULL);
    oa_case(o, API "/request", "post", 200, &a.r);
    itest_resp_free(&a.r);
}

/* stream_head - open a stream at target on a raw socket and record its
 * status and content type once the head came (the body never ends). */
static void
stream_head(struct oa *o, const struct itest_node *n, const char *target)
{
    struct timeval tv = {.tv_sec = 10};
    char raw[1024], buf[4096], ctype[128] = "";
    size_t len = 0;
    ssize_t got;
    long status = 0;
    int fd = itest_raw_connect(n);
    const char *c;

    cr_assert_geq(fd, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
    cr_assert_eq(itest_raw_send(fd, raw), 0);
    while (len + 1 < sizeof(buf) &&
           (got = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
        len += (size_t)got;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n") != NULL)
            break;
    }
    buf[len] = '\0';
    close(fd);
    cr_assert(strstr(buf, "\r\n\r\n") != NULL, "no head: %s", buf);
    sscanf(buf, "HTTP/1.1 %ld", &status);
    if ((c = strcasestr(buf, "\r\nContent-Type:")) != NULL)
        sscanf(c + 15, " %127[^\r\n]", ctype);
    cr_expect_eq(status, 200, "%s", buf);
    oa_line(o, API "/subscribe", "get", status, ctype, "");
}

/* The tokens of the node with auth: all rights, and read alone. */
static const char *const oa_tokens[][2] = {
    {"oa-all", "push=* pop=* request=* admin=* read=* subscribe=* presence=*"},
    {"oa-reader", "read=*"},
};

/* auth_node - a node with an auth file (and metrics behind it). */
static void
auth_node(struct itest_node *n)
{
    char dir[256], file[300], opts[400];

    itest_test_dir(dir, sizeof(dir));
    itest_token_file(dir, oa_tokens, sizeof(oa_tokens) / sizeof(oa_tokens[0]),
                     ~0u, file, sizeof(file));
    snprintf(opts, sizeof(opts), "auth_file=%s metrics_auth=on", file);
    itest_node_start(n, opts);
}

/* queue_routes - push, pop, ack, extend, configure, reset, delete, listing
 * and depth: success and the errors a request alone provokes. */
static void
queue_routes(struct oa *o, const struct itest_node *n)
{
    struct itest_resp p;
    char body[512], big[1600], body2[2048];

    oa_do(o, n, API "/push", "post", API "/push",
          "{\"queue\":\"jobs\",\"messages\":[{\"payload\":{\"a\":1}},"
          "{\"payload\":2}]}",
          201);
    oa_do(o, n, API "/push", "post", API "/push",
          "{\"queue\":\"jobs\",\"messages\":[]}", 201);
    oa_do(o, n, API "/push", "post", API "/push", "{\"queue\":", 400);
    oa_do(o, n, API "/push", "post", API "/push",
          "{\"queue\":\"\",\"messages\":[]}", 400);

    /* a popped message, for ack and extend to name */
    itest_get(n, &p, API "/pop?queue=jobs&group=g&batch=1");
    oa_case(o, API "/pop", "get", 200, &p);
    snprintf(body, sizeof(body),
             "{\"queue\":\"jobs\",\"group\":\"g\",\"messages\":"
             "[{\"id\":\"%s\",\"attempts\":1,\"seconds\":30}]}",
             itest_jstr(p.json, "messages.0.id"));
    oa_do(o, n, API "/extend", "post", API "/extend", body, 200);
    snprintf(
        body, sizeof(body),
        "{\"queue\":\"jobs\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
        "\"status\":\"retry\"},\"not-an-id\",{\"id\":\"%s\",\"upTo\":true}]}",
        itest_jstr(p.json, "messages.0.id"),
        itest_jstr(p.json, "messages.0.id"));
    oa_do(o, n, API "/ack", "post", API "/ack", body, 200);
    itest_resp_free(&p);
    oa_do(o, n, API "/pop", "get", API "/pop?queue=jobs&group=g&batch=10", NULL,
          200);
    oa_do(o, n, API "/pop", "get", API "/pop?queue=jobs&batch=many", NULL, 400);
    oa_do(o, n, API "/pop", "get", API "/pop?queue=empty&wait=true&timeout=50",
          NULL, 200);
    oa_do(o, n, API "/pop", "post", API "/pop",
          "{\"queue\":\"jobs\",\"group\":\"h\",\"batch\":2,"
          "\"acks\":[\"not-an-id\"]}",
          200);
    oa_do(o, n, API "/pop", "post", API "/pop", "{\"queue\":7}", 400);
    oa_do(o, n, API "/extend", "post", API "/extend", "{\"queue\":\"jobs\"}",
          400);
    oa_do(o, n, API "/ack", "post", API "/ack", "[]", 400);

    oa_do(o, n, API "/configure", "post", API "/configure",
          "{\"queue\":\"small\",\"options\":{\"maxLength\":1,"
          "\"maxBytes\":1024,\"policy\":\"reject\"}}",
          201);
    oa_do(o, n, API "/configure", "post", API "/configure",
          "{\"queue\":\"small\",\"options\":{\"maxLenght\":1}}", 400);
    oa_do(o, n, API "/configure", "post", API "/configure",
          "{\"queue\":\"small\",\"options\":{\"maxLength\":100000000}}", 400);
    oa_do(o, n, API "/push", "post", API "/push",
          "{\"queue\":\"small\",\"messages\":[{\"payload\":1}]}", 201);
    oa_do(o, n, API "/push", "post", API "/push",
          "{\"queue\":\"small\",\"messages\":[{\"payload\":2}]}", 429);
    /* more than maxLength in one batch: no wait makes room for it */
    oa_do(o, n, API "/push", "post", API "/push",
          "{\"queue\":\"small\",\"messages\":[{\"payload\":2},"
          "{\"payload\":3}]}",
          413);
    oa_do(o, n, API "/reset", "post", API "/reset", "{\"queue\":\"small\"}",
          200);
    /* a queue that conflates, and keyed pushes (SPEC §13) */
    oa_do(o, n, API "/configure", "post", API "/configure",
          "{\"queue\":\"signals\",\"options\":{\"conflate\":true}}", 201);
    oa_do(o, n, API "/push", "post", API "/push",
          "{\"queue\":\"signals\",\"messages\":[{\"payload\":1,\"key\":"
          "\"a\"},{\"payload\":2,\"key\":\"a\"}]}",
          201);
    /* one message over the queue's maxBytes (1024) */
    memset(big, 'x', 1500);
    big[1500] = '\0';
    snprintf(body2, sizeof(body2),
             "{\"queue\":\"small\",\"messages\":[{\"payload\":\"%s\"}]}", big);
    oa_do(o, n, API "/push", "post", API "/push", body2, 413);
    oa_do(o, n, API "/reset", "post", API "/reset", "{}", 400);

    oa_do(o, n, API "/queues", "get", API "/queues", NULL, 200);
    oa_do(o, n, API "/queues", "get", API "/queues?limit=1&scope=node", NULL,
          200);
    oa_do(o, n, API "/queues", "get", API "/queues?limit=lots", NULL, 400);
    oa_do(o, n, API "/queues/{queue}/depth", "get",
          API "/queues/jobs/depth?group=g", NULL, 200);
    oa_do(o, n, API "/queues/{queue}/depth", "get", API "/queues/jobs/depth",
          NULL, 200);
    oa_do(o, n, API "/queues/{queue}/depth", "get", API "/queues/nothing/depth",
          NULL, 404);
    oa_do(o, n, API "/queue/{queue}", "delete", API "/queue/small", NULL, 200);
    oa_do(o, n, API "/queues/{queue}", "delete", API "/queues/jobs", NULL, 200);
    oa_do(o, n, API "/queues/{queue}", "delete", API "/queues/never", NULL,
          200);
}

/* rpc_routes - request (replied, gathered, timed out, no responders) and
 * redrive. */
static void
rpc_routes(struct oa *o, const struct itest_node *n)
{
    struct itest_resp e;

    request_replied(o, n, "svc", "");
    request_replied(o, n, "svc", ",\"gather\":{\"max\":1}");
    oa_do(o, n, API "/request", "post", API "/request",
          "{\"queue\":\"nobody\",\"payload\":1}", 503);
    itest_get(n, &e, API "/pop?queue=slow");
    itest_resp_free(&e);
    oa_do(o, n, API "/request", "post", API "/request",
          "{\"queue\":\"slow\",\"payload\":1,\"timeout\":100}", 504);
    oa_do(o, n, API "/request", "post", API "/request", "{\"payload\":1}", 400);

    if (oa_do(o, n, API "/redrive", "post", API "/redrive",
              "{\"queue\":\"dead\",\"max\":10}", 200))
        oa_do(o, n, API "/redrive", "post", API "/redrive", "{\"max\":1}", 400);
}

/* stream_and_presence_routes - subscribe's head and its refusal; the
 * presence calls. */
static void
stream_and_presence_routes(struct oa *o, const struct itest_node *n)
{
    stream_head(o, n, API "/subscribe?queue=jobs&from=last");
    oa_do(o, n, API "/subscribe", "get", API "/subscribe?from=sideways", NULL,
          400);

    if (oa_do(o, n, "/api/v1/presence/enter", "post", "/api/v1/presence/enter",
              "{\"channel\":\"room\",\"member\":\"ada\",\"data\":{\"t\":1},"
              "\"ttlSeconds\":30}",
              200)) {
        oa_do(o, n, "/api/v1/presence/enter", "post", "/api/v1/presence/enter",
              "{\"channel\":\"room\"}", 400);
        oa_do(o, n, "/api/v1/presence/{channel}", "get",
              "/api/v1/presence/room", NULL, 200);
        oa_do(o, n, "/api/v1/presence/{channel}", "get",
              "/api/v1/presence/room?count=true", NULL, 200);
    }
    if (oa_do(o, n, "/api/v1/presence/leave", "post", "/api/v1/presence/leave",
              "{\"channel\":\"room\",\"member\":\"ada\"}", 200))
        oa_do(o, n, "/api/v1/presence/leave", "post", "/api/v1/presence/leave",
              "{\"member\":\"ada\"}", 400);
}

/* node_routes - health, metrics and the document, which is the file. */
static void
node_routes(struct oa *o, const struct itest_node *n)
{
    struct itest_resp r;
    char path[700], *file;
    FILE *f;
    long len;

    oa_do(o, n, "/health", "get", "/health", NULL, 200);
    oa_do(o, n, "/metrics", "get", "/metrics", NULL, 200);
    itest_get(n, &r, "/api/v1/openapi.json");
    oa_case(o, "/api/v1/openapi.json", "get", 200, &r);
    snprintf(path, sizeof(path), "%s/worker/openapi/openapi.json", o->repo);
    f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    rewind(f);
    file = malloc((size_t)len + 1);
    cr_assert_eq(fread(file, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    cr_expect(r.len == (size_t)len && memcmp(r.body, file, r.len) == 0,
              "the node serves a document other than %s", path);
    free(file);
    itest_resp_free(&r);
}

Test(openapi, every_answer_matches_the_document, .timeout = 120)
{
    struct itest_node n, a;
    struct oa o;
    char out[65536], *last;
    int rc;

    oa_open(&o);
    oa_tools(&o);
    itest_node_start(&n, NULL);
    queue_routes(&o, &n);
    rpc_routes(&o, &n);
    stream_and_presence_routes(&o, &n);
    node_routes(&o, &n);

    auth_node(&a);
    oa_as(&o, &a, NULL, API "/push", "post", API "/push",
          "{\"queue\":\"q\",\"messages\":[]}", 401);
    oa_as(&o, &a, "oa-reader", API "/push", "post", API "/push",
          "{\"queue\":\"q\",\"messages\":[]}", 403);
    oa_as(&o, &a, "oa-all", API "/push", "post", API "/push",
          "{\"queue\":\"q\",\"messages\":[{\"payload\":1}]}", 201);
    oa_as(&o, &a, "wrong", API "/queues", "get", API "/queues", NULL, 401);
    oa_as(&o, &a, "oa-reader", API "/queues", "get", API "/queues", NULL, 200);
    oa_as(&o, &a, "oa-reader", API "/pop", "get", API "/pop?queue=q", NULL,
          403);
    oa_as(&o, &a, NULL, "/metrics", "get", "/metrics", NULL, 401);
    oa_as(&o, &a, NULL, "/health", "get", "/health", NULL, 200);
    oa_as(&o, &a, NULL, "/api/v1/openapi.json", "get", "/api/v1/openapi.json",
          NULL, 200);
    cr_assert_eq(fclose(o.f), 0);

    cr_assert_geq(o.recorded, 50, "only %d answers recorded", o.recorded);
    rc = oa_check(&o, o.cases, out, sizeof(out));
    cr_assert_eq(rc, 0, "answers that do not match the document:\n%s", out);
    /* the validator's last line: how many answers it checked */
    last = out + strlen(out);
    while (last > out && last[-1] == '\n')
        *--last = '\0';
    while (last > out && last[-1] != '\n')
        last--;
    fprintf(stderr, "test_openapi: %s\n", last);
}

/* The check itself can fail: an answer the document does not allow (a
 * wrong type, a code not in the status's enum, an undocumented status, a
 * wrong content type) is refused, each one. */
Test(openapi, the_check_refuses_what_the_document_does_not_allow, .timeout = 60)
{
    static const char *const wrong[][4] = {
        {API "/push", "201", "application/json",
         "{\"pushed\":\"2\",\"ids\":[]}"},
        {API "/queues/{queue}/depth", "404", "application/json",
         "{\"error\":\"x\",\"code\":\"queue_full\"}"},
        {API "/push", "418", "application/json", "{}"},
        {API "/push", "201", "text/html", "<p>"},
    };
    struct oa o;
    char out[8192];

    oa_open(&o);
    oa_tools(&o);
    cr_assert_eq(fclose(o.f), 0);
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        const char *method = strstr(wrong[i][0], "depth") ? "get" : "post";

        o.f = fopen(o.cases, "w");
        cr_assert_not_null(o.f);
        oa_line(&o, wrong[i][0], method, atol(wrong[i][1]), wrong[i][2],
                wrong[i][3]);
        cr_assert_eq(fclose(o.f), 0);
        cr_expect_eq(oa_check(&o, o.cases, out, sizeof(out)), 1,
                     "validator accepted %s %s %s: %s", wrong[i][0],
                     wrong[i][1], wrong[i][3], out);
    }
}
