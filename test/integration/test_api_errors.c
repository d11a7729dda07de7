/*
 * test_api_errors.c - the 400, 404 and 405 answers of SPEC §2: each bad
 * request answers its status and code with a sentence naming the field, and
 * changes nothing (depth, leases and the queue listing stay as they were).
 * The bounds (413, 429, 503) are in test_bounds.c.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define PUSH "/api/v1/ephemeral/push"
#define POP  "/api/v1/ephemeral/pop"
#define ACK  "/api/v1/ephemeral/ack"
#define EXT  "/api/v1/ephemeral/extend"
#define RST  "/api/v1/ephemeral/reset"

struct bad {
    const char *body_or_query; /* POST body, or the query/path for GET */
    const char *field;         /* what the error must name */
};

/* The state a bad request must leave alone: queue "q" of the fixture. */
struct snapshot {
    int64_t pending;
    int64_t leased;
    int64_t count;
};

static struct snapshot
snap(const struct itest_node *n)
{
    struct snapshot s = {-1, -1, -1};
    struct itest_resp r;
    struct json_object *q = itest_listing_find(n, "q");

    s.pending = itest_depth_pending(n, "q", "g");
    if (q)
        s.leased = itest_jint(q, "leased");
    json_object_put(q);
    itest_get(n, &r, "/api/v1/ephemeral/queues");
    s.count = itest_jint(r.json, "count");
    itest_resp_free(&r);
    return s;
}

/*
 * A node holding queue "q" with 3 messages, one of them leased to group "g";
 * *id receives the leased message's id.
 */
static void
fixture(struct itest_node *n, char *id, size_t len)
{
    struct itest_resp r;

    itest_node_start(n, NULL);
    itest_push(n, &r, "q", NULL, "[1,2,3]");
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    itest_get(n, &r, POP "?queue=q&group=g");
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    snprintf(id, len, "%s", itest_jstr(r.json, "messages.0.id"));
    itest_resp_free(&r);
}

/* Send each bad POST body to path; each must be a 400 code naming field. */
static void
post_all_bad(const struct itest_node *n, const char *path, const struct bad *b,
             size_t count, const char *code)
{
    struct snapshot before = snap(n), after;

    for (size_t i = 0; i < count; i++) {
        struct itest_resp r;
        char what[512];

        snprintf(what, sizeof(what), "POST %s %s", path, b[i].body_or_query);
        itest_req(n, "POST", path, b[i].body_or_query, &r);
        itest_assert_error(&r, 400, code, b[i].field, what);
        itest_resp_free(&r);
    }
    after = snap(n);
    cr_assert(before.pending == after.pending &&
                  before.leased == after.leased && before.count == after.count,
              "bad requests to %s changed the node: pending %lld->%lld, "
              "leased %lld->%lld, queues %lld->%lld",
              path, (long long)before.pending, (long long)after.pending,
              (long long)before.leased, (long long)after.leased,
              (long long)before.count, (long long)after.count);
}

/* GET each bad path; each must be a 400 code naming field. */
static void
get_all_bad(const struct itest_node *n, const struct bad *b, size_t count,
            const char *method, const char *code)
{
    struct snapshot before = snap(n), after;

    for (size_t i = 0; i < count; i++) {
        struct itest_resp r;
        char what[1200];

        snprintf(what, sizeof(what), "%s %.1000s", method, b[i].body_or_query);
        itest_req(n, method, b[i].body_or_query, NULL, &r);
        itest_assert_error(&r, 400, code, b[i].field, what);
        itest_resp_free(&r);
    }
    after = snap(n);
    cr_assert(before.pending == after.pending &&
                  before.leased == after.leased && before.count == after.count,
              "bad requests changed the node: pending %lld->%lld, "
              "leased %lld->%lld, queues %lld->%lld",
              (long long)before.pending, (long long)after.pending,
              (long long)before.leased, (long long)after.leased,
              (long long)before.count, (long long)after.count);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

Test(push, malformed_json_is_bad_request_and_changes_nothing, .timeout = 60)
{
    static const struct bad b[] = {
        {"{", NULL},
        {"not json", NULL},
        {"", NULL},
        {"{\"queue\":\"q\",\"messages\":[{\"payload\":1}]", NULL},
        {"{\"queue\":\"q\",\"messages\":[{\"payload\":tru}]}", NULL},
        {"{\"queue\":\"q\",\"messages\":[{\"payload\":\"unterminated}]}", NULL},
        {"{\"queue\":\"q\",\"messages\":[{\"payload\":1}]} trailing", NULL},
    };
    struct itest_node n;
    char id[256];

    fixture(&n, id, sizeof(id));
    post_all_bad(&n, PUSH, b, N(b), "ephemeral_bad_request");
}

Test(push, wrong_types_and_missing_fields_name_the_field, .timeout = 60)
{
    static const struct bad b[] = {
        {"[1,2]", NULL},
        {"{\"messages\":[{\"payload\":1}]}", "queue"},
        {"{\"queue\":5,\"messages\":[{\"payload\":1}]}", "queue"},
        {"{\"queue\":null,\"messages\":[{\"payload\":1}]}", "queue"},
        {"{\"queue\":\"q\"}", "messages"},
        {"{\"queue\":\"q\",\"messages\":{}}", "messages"},
        {"{\"queue\":\"q\",\"messages\":\"x\"}", "messages"},
        {"{\"queue\":\"q\",\"partition\":7,\"messages\":[{\"payload\":1}]}",
         "partition"},
        {"{\"queue\":\"q\",\"messages\":[{\"payload\":1},5]}",
         "messages|payload"},
        {"{\"queue\":\"q\",\"messages\":[{\"payload\":1},{\"pay\":2}]}",
         "payload"},
    };
    struct itest_node n;
    char id[256];

    fixture(&n, id, sizeof(id));
    post_all_bad(&n, PUSH, b, N(b), "ephemeral_bad_request");
}

Test(push, more_than_10000_messages_is_refused_whole, .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256];
    struct snapshot before, after;
    size_t cap = 16 + 10001 * 16 + 16, len = 0;
    char *body = malloc(cap);

    cr_assert(body);
    fixture(&n, id, sizeof(id));
    before = snap(&n);
    len += (size_t)sprintf(body, "{\"queue\":\"q\",\"messages\":[");
    for (int i = 0; i < 10001; i++)
        len += (size_t)sprintf(body + len, "%s{\"payload\":1}", i ? "," : "");
    sprintf(body + len, "]}");
    itest_req(&n, "POST", PUSH, body, &r);
    cr_assert(r.status == 400 || r.status == 413,
              "a push of 10001 messages: %ld %s", r.status, r.body);
    cr_assert(*itest_jstr(r.json, "code") && *itest_jstr(r.json, "error"), "%s",
              r.body);
    itest_resp_free(&r);
    after = snap(&n);
    cr_assert_eq(after.pending, before.pending, "part of the batch was kept");
    free(body);
}

Test(pop, bad_query_values_are_bad_request_naming_the_field, .timeout = 60)
{
    static const struct bad b[] = {
        {POP "?group=g", "queue"},
        {POP "?queue=q&group=g&batch=abc", "batch"},
        {POP "?queue=q&group=g&batch=3x", "batch"},
        {POP "?queue=q&group=g&timeout=soon", "timeout"},
        {POP "?queue=q&group=g&wait=true&timeout=1.5e", "timeout"},
        {POP "?queue=q&group=g&wait=maybe", "wait"},
        {POP "?queue=q&group=g&autoAck=perhaps", "autoAck"},
        {POP "?queue=q&group=g&commitOnDelivery=perhaps", "commitOnDelivery"},
        {POP "?queue=q&group=g&from=yesterday", "from"},
    };
    struct itest_node n;
    char id[256];

    fixture(&n, id, sizeof(id));
    get_all_bad(&n, b, N(b), "GET", "ephemeral_bad_request");
}

Test(ack, bad_bodies_are_bad_request_and_keep_the_lease, .timeout = 60)
{
    struct itest_node n;
    char id[256], bodies[8][512];
    struct bad b[8];

    fixture(&n, id, sizeof(id));
    snprintf(bodies[0], 512,
             "{\"queue\":\"q\",\"group\":\"g\",\"acks\":[\"%s\"", id);
    snprintf(bodies[1], 512, "{\"group\":\"g\",\"acks\":[\"%s\"]}", id);
    snprintf(bodies[2], 512, "{\"queue\":\"q\",\"group\":\"g\"}");
    snprintf(bodies[3], 512, "{\"queue\":\"q\",\"group\":\"g\",\"acks\":5}");
    snprintf(bodies[4], 512,
             "{\"queue\":\"q\",\"group\":\"g\",\"acks\":[\"%s\",5]}", id);
    snprintf(bodies[5], 512,
             "{\"queue\":\"q\",\"group\":\"g\",\"acks\":[\"%s\","
             "{\"status\":\"completed\"}]}",
             id);
    snprintf(bodies[6], 512, "{\"queue\":\"q\",\"group\":7,\"acks\":[\"%s\"]}",
             id);
    snprintf(bodies[7], 512,
             "{\"queue\":\"q\",\"group\":\"g\",\"acks\":[{\"id\":\"%s\","
             "\"attempts\":\"one\"}]}",
             id);
    const char *fields[8] = {NULL,      "queue", "acks",  "acks",
                             "acks|id", "id",    "group", "attempts"};
    for (int i = 0; i < 8; i++) {
        b[i].body_or_query = bodies[i];
        b[i].field = fields[i];
    }
    post_all_bad(&n, ACK, b, N(b), "ephemeral_bad_request");
}

Test(extend, bad_bodies_are_bad_request_naming_the_field, .timeout = 60)
{
    struct itest_node n;
    char id[256], bodies[6][512];
    struct bad b[6];
    const char *fields[6] = {NULL,      "queue",   "messages",
                             "seconds", "seconds", "seconds"};

    fixture(&n, id, sizeof(id));
    snprintf(bodies[0], 512, "{\"queue\":");
    snprintf(bodies[1], 512,
             "{\"group\":\"g\",\"messages\":[{\"id\":\"%s\",\"seconds\":9}]}",
             id);
    snprintf(bodies[2], 512,
             "{\"queue\":\"q\",\"group\":\"g\",\"messages\":7}");
    snprintf(bodies[3], 512,
             "{\"queue\":\"q\",\"group\":\"g\",\"messages\":[{\"id\":\"%s\"}]}",
             id);
    snprintf(bodies[4], 512,
             "{\"queue\":\"q\",\"group\":\"g\",\"messages\":[{\"id\":\"%s\","
             "\"seconds\":\"ten\"}]}",
             id);
    /* Longer than any lease a queue may declare (86400 s). */
    snprintf(bodies[5], 512,
             "{\"queue\":\"q\",\"group\":\"g\",\"messages\":[{\"id\":\"%s\","
             "\"seconds\":4000000000}]}",
             id);
    for (int i = 0; i < 6; i++) {
        b[i].body_or_query = bodies[i];
        b[i].field = fields[i];
    }
    post_all_bad(&n, EXT, b, N(b), "ephemeral_bad_request");
}

Test(reset, bad_bodies_are_bad_request_naming_the_field, .timeout = 60)
{
    static const struct bad b[] = {
        {"{\"queue\"", NULL},
        {"{}", "queue"},
        {"{\"queue\":1}", "queue"},
    };
    struct itest_node n;
    char id[256];

    fixture(&n, id, sizeof(id));
    post_all_bad(&n, RST, b, N(b), "ephemeral_bad_request");
}

/*
 * A refused body leaves nothing allocated behind it.  Each route's parser
 * allocates before it can fail; the sanitizer build (what make test runs)
 * checks the worker's heap when it exits, so a leak is a LeakSanitizer
 * report in the node's log.  One worker, so every request meets the same
 * heap.
 */
Test(leaks, refused_bodies_leave_nothing_allocated, .timeout = 60)
{
    static const char *const paths[] = {PUSH, ACK, EXT, RST,
                                        "/api/v1/ephemeral/configure"};
    static const char *const bodies[] = {
        "{\"queue\":\"q\",\"x\":[1,2", /* malformed */
        "{\"queue\":1}",               /* well formed, a field wrong */
        "[]",
    };
    struct itest_node n;

    itest_node_start(&n, "workers=1");
    for (size_t i = 0; i < N(paths); i++) {
        for (size_t j = 0; j < N(bodies); j++) {
            struct itest_resp r;

            itest_req(&n, "POST", paths[i], bodies[j], &r);
            cr_assert_eq(r.status, 400, "POST %s %s: %ld %s", paths[i],
                         bodies[j], r.status, r.body);
            itest_resp_free(&r);
        }
    }
    cr_assert_eq(itest_node_stop(&n, 20000), 0);
    if (itest_node_log_contains(&n, "LeakSanitizer"))
        itest_node_log_tail(&n, 60);
    cr_assert(!itest_node_log_contains(&n, "LeakSanitizer"),
              "refused bodies leaked (the node's log above)");
}

Test(depth, bad_scope_and_listing_bad_limit_are_bad_request, .timeout = 60)
{
    static const struct bad b[] = {
        {"/api/v1/ephemeral/queues/q/depth?scope=galaxy", "scope"},
        {"/api/v1/ephemeral/queues?limit=lots", "limit"},
    };
    struct itest_node n;
    char id[256];

    fixture(&n, id, sizeof(id));
    get_all_bad(&n, b, N(b), "GET", "ephemeral_bad_request");
}

Test(names, invalid_names_in_bodies_are_invalid_name_naming_the_field,
     .timeout = 60)
{
    static char long_body[1024], long_part[1024];
    struct bad b[] = {
        {"{\"queue\":\"\",\"messages\":[{\"payload\":1}]}", "queue"},
        {"{\"queue\":\"a\\u0001b\",\"messages\":[{\"payload\":1}]}", "queue"},
        {"{\"queue\":\"a\\nb\",\"messages\":[{\"payload\":1}]}", "queue"},
        {"{\"queue\":\"a\\u007fb\",\"messages\":[{\"payload\":1}]}", "queue"},
        /* a lone surrogate is no character: not U+FFFD, another's twin */
        {"{\"queue\":\"s\\ud800b\",\"messages\":[{\"payload\":1}]}", "queue"},
        {"{\"queue\":\"q\",\"partition\":\"p\\udc00\",\"messages\":[{"
         "\"payload\":1}]}",
         "partition"},
        {long_body, "queue"},
        {"{\"queue\":\"q\",\"partition\":\"\\t\",\"messages\":[{\"payload\":1}"
         "]}",
         "partition"},
        {long_part, "partition"},
    };
    struct itest_node n;
    char id[256];

    snprintf(long_body, sizeof(long_body),
             "{\"queue\":\"%0513d\",\"messages\":[{\"payload\":1}]}", 7);
    snprintf(long_part, sizeof(long_part),
             "{\"queue\":\"q\",\"partition\":\"%0513d\",\"messages\":"
             "[{\"payload\":1}]}",
             7);
    fixture(&n, id, sizeof(id));
    post_all_bad(&n, PUSH, b, N(b), "invalid_name");
}

Test(names, invalid_group_in_ack_and_extend_is_invalid_name, .timeout = 60)
{
    struct itest_node n;
    char id[256], bodies[2][512];
    struct bad b[1];

    fixture(&n, id, sizeof(id));
    snprintf(bodies[0], 512,
             "{\"queue\":\"q\",\"group\":\"g\\u0002\",\"acks\":[\"%s\"]}", id);
    snprintf(bodies[1], 512,
             "{\"queue\":\"q\",\"group\":\"\\u0002\",\"messages\":[{\"id\":"
             "\"%s\",\"seconds\":5}]}",
             id);
    b[0] = (struct bad){bodies[0], "group"};
    post_all_bad(&n, ACK, b, 1, "invalid_name");
    b[0] = (struct bad){bodies[1], "group"};
    post_all_bad(&n, EXT, b, 1, "invalid_name");
    /* An empty group is no name either (as for pop's group=). */
    snprintf(bodies[0], 512,
             "{\"queue\":\"q\",\"group\":\"\",\"acks\":[\"%s\"]}", id);
    b[0] = (struct bad){bodies[0], "group"};
    post_all_bad(&n, ACK, b, 1, "invalid_name");
}

Test(names, invalid_percent_encoded_names_in_queries_and_paths, .timeout = 60)
{
    static char long_q[2048];
    struct bad b[] = {
        {POP "?queue=", "queue"},
        {POP "?queue=a%01b", "queue"},
        {POP "?queue=a%0Ab", "queue"},
        {POP "?queue=%FF%FE", "queue"},
        {POP "?queue=%C0%AF", "queue"},
        {POP "?queue=%ED%A0%80", "queue"},
        {POP "?queue=caf%C3", "queue"},
        {POP "?queue=q&partition=%1B", "partition"},
        {POP "?queue=q&group=%00", "group"},
        {POP "?queue=q&group=%E2%82", "group"},
        {long_q, "queue"},
        {"/api/v1/ephemeral/queues/a%01b/depth", "queue"},
        {"/api/v1/ephemeral/queues/%FF/depth", "queue"},
    };
    struct itest_node n;
    char id[256];
    int k;

    k = snprintf(long_q, sizeof(long_q), POP "?queue=");
    for (int i = 0; i < 513; i++)
        k += snprintf(long_q + k, sizeof(long_q) - (size_t)k, "x");
    fixture(&n, id, sizeof(id));
    get_all_bad(&n, b, N(b), "GET", "invalid_name");
    b[0] = (struct bad){"/api/v1/ephemeral/queue/a%01b", "queue"};
    b[1] = (struct bad){"/api/v1/ephemeral/queues/%FF", "queue"};
    get_all_bad(&n, b, 2, "DELETE", "invalid_name");
}

Test(names, invalid_utf8_in_a_body_is_refused, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char id[256];
    struct snapshot before, after;

    fixture(&n, id, sizeof(id));
    before = snap(&n);
    itest_req(&n, "POST", PUSH,
              "{\"queue\":\"bad\xff\xfe\",\"messages\":[{\"payload\":1}]}", &r);
    cr_assert_eq(r.status, 400, "%ld %s", r.status, r.body);
    cr_assert(strcmp(itest_jstr(r.json, "code"), "invalid_name") == 0 ||
                  strcmp(itest_jstr(r.json, "code"), "ephemeral_bad_request") ==
                      0,
              "%s", r.body);
    itest_resp_free(&r);
    after = snap(&n);
    cr_assert_eq(after.count, before.count, "a queue was created");
}

Test(routes, unknown_paths_are_404_not_found, .timeout = 60)
{
    static const char *paths[] = {
        "/index.htm",
        "/api/v1/ephemeral/nothing",
        "/api/v1/ephemeral/queues/q/depth/extra",
        "/api/v2/ephemeral/pop?queue=q",
        "/api/v1/ephemeral/popx?queue=q",
        "/healthz",
    };
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    for (size_t i = 0; i < N(paths); i++) {
        itest_get(&n, &r, "%s", paths[i]);
        itest_assert_error(&r, 404, "not_found", NULL, paths[i]);
        itest_resp_free(&r);
    }
    itest_req(&n, "POST", "/api/v1/ephemeral/pushx", "{\"queue\":\"q\"}", &r);
    itest_assert_error(&r, 404, "not_found", NULL, "POST /pushx");
    itest_resp_free(&r);
}

Test(routes, wrong_methods_are_405_with_allow, .timeout = 60)
{
    static const struct {
        const char *method, *path, *allow;
    } c[] = {
        {"GET", PUSH, "POST"},
        {"PUT", POP "?queue=q", "GET, POST"},
        {"DELETE", POP "?queue=q", "GET, POST"},
        {"GET", ACK, "POST"},
        {"PUT", ACK, "POST"},
        {"GET", EXT, "POST"},
        {"GET", RST, "POST"},
        {"GET", "/api/v1/ephemeral/queue/q", "DELETE"},
        {"POST", "/api/v1/ephemeral/queue/q", "DELETE"},
        {"PUT", "/api/v1/ephemeral/queues/q", "DELETE"},
        {"POST", "/api/v1/ephemeral/queues/q/depth", "GET"},
        {"DELETE", "/api/v1/ephemeral/queues", "GET"},
        {"POST", "/health", "GET"},
        {"DELETE", "/metrics", "GET"},
        {"POST", "/", "GET"},
        {"PUT", "/index.html", "GET"},
    };
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, NULL);
    for (size_t i = 0; i < N(c); i++) {
        char what[256];

        snprintf(what, sizeof(what), "%s %s", c[i].method, c[i].path);
        itest_req(&n, c[i].method, c[i].path,
                  strcmp(c[i].method, "GET") == 0 ||
                          strcmp(c[i].method, "DELETE") == 0
                      ? NULL
                      : "{}",
                  &r);
        itest_assert_error(&r, 405, "method_not_allowed", NULL, what);
        cr_assert(strstr(r.allow, c[i].allow),
                  "%s: Allow is \"%s\", want it to list %s", what, r.allow,
                  c[i].allow);
        itest_resp_free(&r);
    }
    itest_get(&n, &r, "/api/v1/ephemeral/queues");
    cr_assert_eq(itest_jint(r.json, "count"), 0,
                 "refused methods created a queue: %s", r.body);
    itest_resp_free(&r);
}
