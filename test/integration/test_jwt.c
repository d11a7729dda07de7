/*
 * test_jwt.c - signed tokens, access_token and CORS on a real node (SPEC
 * §11): a node with jwt_secret_file serves tokens minted here with libjwt
 * as an application's backend would mint them, refuses expired, tampered
 * and lacking ones, keeps their tenants apart (and together with the auth
 * file's), drops the old secret on HUP; access_token counts on the routes
 * a page uses only and never reaches the log; cors_origins answers a
 * preflight and lets a listed origin's page read the answers, as headless
 * Chromium shows.
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <jwt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "http/auth.h"
#include "test/integration/browser.h"
#include "test/integration/node.h"
#include "test/integration/tokens.h"

#define API       "/api/v1/ephemeral"
#define JW_SECRET "integration-secret-0123456789abcdef-0123456789"
#define JW_OTHER  "the-next-secret-after-a-hup-0123456789abcdefgh"
#define JW_ORIGIN "https://app.example.com"

static char jw_secret_path[300];

/* jw_mint - an HS256 token of claims (a JSON object) signed with secret;
 * malloc'd. */
static char *
jw_mint(const char *secret, const char *claims)
{
    jwt_t *j = NULL;
    char *out;

    cr_assert_eq(jwt_new(&j), 0);
    cr_assert_eq(jwt_add_grants_json(j, claims), 0, "%s", claims);
    cr_assert_eq(jwt_set_alg(j, JWT_ALG_HS256, (const unsigned char *)secret,
                             (int)strlen(secret)),
                 0);
    out = jwt_encode_str(j);
    cr_assert_not_null(out);
    jwt_free(j);
    return out;
}

/* jw_token - a token signed with secret, valid for exp_in seconds from
 * now, with the claims rest (",..." or "") after exp. */
static char *
jw_token(const char *secret, long exp_in, const char *rest)
{
    char claims[1024];

    snprintf(claims, sizeof(claims), "{\"exp\": %lld%s}",
             (long long)time(NULL) + exp_in, rest);
    return jw_mint(secret, claims);
}

/* jw_write_secret - the secret file in dir holding secret (and a newline,
 * as an editor leaves it). */
static void
jw_write_secret(const char *dir, const char *secret)
{
    FILE *f;

    snprintf(jw_secret_path, sizeof(jw_secret_path), "%s/jwt.secret", dir);
    f = fopen(jw_secret_path, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s\n", secret);
    cr_assert_eq(fclose(f), 0);
}

/* jw_start - a node with jwt_secret_file and the settings more (may be
 * ""); its directory in dir. */
static void
jw_start(struct itest_node *n, char *dir, size_t cap, const char *more)
{
    char opts[1024];

    itest_test_dir(dir, cap);
    jw_write_secret(dir, JW_SECRET);
    snprintf(opts, sizeof(opts), "jwt_secret_file=%s %s", jw_secret_path, more);
    itest_node_start(n, opts);
}


/* jw_ok - itest_req_bearer() that must answer want. */
static void
jw_ok(const struct itest_node *n, const char *tok, const char *method,
      const char *path, const char *body, long want, struct itest_resp *r)
{
    itest_req_bearer(n, tok, method, path, body, r);
    cr_assert_eq(r->status, want, "%s %s: %ld %s", method, path, r->status,
                 r->body);
}

/* jw_push_body - a push of one payload to queue. */
static const char *
jw_push_body(const char *queue, const char *payload)
{
    static char b[256];

    snprintf(b, sizeof(b),
             "{\"queue\": \"%s\", \"messages\": [{\"payload\": %s}]}", queue,
             payload);
    return b;
}

Test(jwt, a_signed_token_pushes_and_pops_what_it_grants, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char dir[256];
    char *tok = jw_token(JW_SECRET, 300,
                         ", \"sub\": \"ada\", \"push\": [\"jobs\"], "
                         "\"pop\": [\"jobs\"], \"read\": [\"*\"]");

    jw_start(&n, dir, sizeof(dir), "");
    jw_ok(&n, tok, "POST", API "/push", jw_push_body("jobs", "{\"n\": 1}"), 201,
          &r);
    itest_resp_free(&r);
    jw_ok(&n, tok, "GET", API "/pop?queue=jobs&autoAck=true", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_eq(itest_jint(r.json, "messages.0.payload.n"), 1, "%s", r.body);
    itest_resp_free(&r);
    jw_ok(&n, tok, "GET", API "/queues", NULL, 200, &r);
    itest_resp_free(&r);
    /* what it does not grant: 403 naming the verb and the queue */
    itest_req_bearer(&n, tok, "POST", API "/push", jw_push_body("other", "1"),
                     &r);
    itest_assert_error(&r, 403, "forbidden", "other", "push to other");
    cr_assert_not_null(strstr(r.body, "push"), "%s", r.body);
    itest_resp_free(&r);
    itest_req_bearer(&n, tok, "POST", API "/reset", "{\"queue\": \"jobs\"}",
                     &r);
    itest_assert_error(&r, 403, "forbidden", "admin", "reset without admin");
    itest_resp_free(&r);
    /* no token at all */
    itest_req_bearer(&n, NULL, "GET", API "/queues", NULL, &r);
    itest_assert_error(&r, 401, "unauthorized", NULL, "no token");
    cr_assert_str_eq(r.www_authenticate, "Bearer");
    itest_resp_free(&r);
    free(tok);
}

Test(jwt, expired_tampered_and_foreign_tokens_are_401_and_change_nothing,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char dir[256], forged[4096];
    const char *grants = ", \"push\": [\"*\"], \"pop\": [\"*\"]";
    char *good = jw_token(JW_SECRET, 300, grants);
    char *expired = jw_token(JW_SECRET, -10, grants);
    char *foreign = jw_token("a-secret-this-node-never-heard-of-0123", 300,
                             ", \"push\": [\"*\"], \"admin\": [\"*\"]");
    char *noexp = jw_mint(JW_SECRET, "{\"push\": [\"*\"]}");
    const struct {
        const char *tok, *why;
    } bad[] = {
        {expired, "expired"},
        {foreign, "does not verify"},
        {forged, "does not verify"},
        {noexp, "no exp"},
    };

    /* good's header and signature around another token's claims */
    const char *claims = strchr(foreign, '.') + 1;
    snprintf(forged, sizeof(forged), "%.*s.%.*s%s",
             (int)(strchr(good, '.') - good), good,
             (int)(strchr(claims, '.') - claims), claims, strrchr(good, '.'));
    jw_start(&n, dir, sizeof(dir), "");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        itest_req_bearer(&n, bad[i].tok, "POST", API "/push",
                         jw_push_body("jobs", "1"), &r);
        itest_assert_error(&r, 401, "unauthorized", NULL, bad[i].why);
        cr_assert_not_null(strstr(r.body, bad[i].why), "%s", r.body);
        cr_assert_str_eq(r.www_authenticate, "Bearer");
        itest_resp_free(&r);
    }
    /* nothing was pushed by any of them */
    jw_ok(&n, good, "GET", API "/pop?queue=jobs", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
    free(good);
    free(expired);
    free(foreign);
    free(noexp);
}

Test(jwt, signed_tokens_keep_their_tenants_apart_as_the_auth_file_does,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char dir[256], opts[700], tokens[300], hash[AUTH_HASH_TEXT];
    const char *all =
        ", \"push\": [\"*\"], \"pop\": [\"*\"], \"read\": [\"*\"]";
    char alpha_rest[200], beta_rest[200];
    FILE *f;

    snprintf(alpha_rest, sizeof(alpha_rest), ", \"tenant\": \"alpha\"%s", all);
    snprintf(beta_rest, sizeof(beta_rest), ", \"tenant\": \"beta\"%s", all);
    char *alpha = jw_token(JW_SECRET, 300, alpha_rest);
    char *beta = jw_token(JW_SECRET, 300, beta_rest);

    /* an auth file too: its token of tenant alpha shares alpha's names */
    itest_test_dir(dir, sizeof(dir));
    snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
    f = fopen(tokens, "w");
    cr_assert_not_null(f);
    auth_hash_text("alpha-file", 10, hash);
    fprintf(f, "%s tenant=alpha push=* pop=* read=*\n", hash);
    cr_assert_eq(fclose(f), 0);
    jw_write_secret(dir, JW_SECRET);
    snprintf(opts, sizeof(opts), "jwt_secret_file=%s auth_file=%s",
             jw_secret_path, tokens);
    itest_node_start(&n, opts);

    jw_ok(&n, alpha, "POST", API "/push", jw_push_body("jobs", "\"a\""), 201,
          &r);
    itest_resp_free(&r);
    jw_ok(&n, beta, "POST", API "/push", jw_push_body("jobs", "\"b\""), 201,
          &r);
    itest_resp_free(&r);
    /* each tenant's listing shows its own jobs, one message deep */
    jw_ok(&n, beta, "GET", API "/queues/jobs/depth?scope=node", NULL, 200, &r);
    cr_assert_eq(itest_jint(r.json, "pending"), 1, "%s", r.body);
    itest_resp_free(&r);
    jw_ok(&n, beta, "GET", API "/pop?queue=jobs&autoAck=true", NULL, 200, &r);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "b", "%s",
                     r.body);
    itest_resp_free(&r);
    /* the file's alpha token reads what the signed alpha token pushed */
    jw_ok(&n, "alpha-file", "GET", API "/pop?queue=jobs&autoAck=true", NULL,
          200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "messages.0.payload"), "a", "%s",
                     r.body);
    itest_resp_free(&r);
    jw_ok(&n, beta, "GET", API "/pop?queue=jobs", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 0, "%s", r.body);
    itest_resp_free(&r);
    free(alpha);
    free(beta);
}

Test(jwt, hup_reads_the_secret_again_and_ends_the_old_tokens_parked_pop,
     .timeout = 90)
{
    struct itest_node n;
    struct itest_resp r;
    struct timeval tv = {.tv_sec = 20};
    char dir[256], raw[4400];
    const char *grants = ", \"pop\": [\"*\"], \"read\": [\"*\"]";
    char *old = jw_token(JW_SECRET, 300, grants);
    char *next = jw_token(JW_OTHER, 300, grants);
    int64_t t0;
    int fd;

    jw_start(&n, dir, sizeof(dir), "");
    jw_ok(&n, old, "GET", API "/queues", NULL, 200, &r);
    itest_resp_free(&r);
    itest_req_bearer(&n, next, "GET", API "/queues", NULL, &r);
    itest_assert_error(&r, 401, "unauthorized", NULL, "the next secret's");
    itest_resp_free(&r);
    /* a pop parked with the old secret's token */
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    snprintf(raw, sizeof(raw),
             "GET " API "/pop?queue=jobs&wait=true&timeout=30000 HTTP/1.1\r\n"
             "Host: t\r\nAuthorization: Bearer %s\r\n\r\n",
             old);
    cr_assert_eq(itest_raw_send(fd, raw), 0);
    t0 = itest_now_ms();
    while (!itest_conn_consumed(&n, fd)) {
        cr_assert_lt(itest_now_ms() - t0, 20000, "the pop never parked");
        itest_sleep_ms(20);
    }
    jw_write_secret(dir, JW_OTHER);
    t0 = itest_now_ms();
    cr_assert_eq(kill(n.pid, SIGHUP), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    itest_raw_response(fd, &r);
    cr_assert_eq(r.status, 401, "the old token's parked pop: %ld %s", r.status,
                 r.body);
    cr_assert_lt(itest_now_ms() - t0, 10000, "ended %lld ms after the HUP",
                 (long long)(itest_now_ms() - t0));
    itest_resp_free(&r);
    close(fd);
    /* every worker takes the new secret (each reads it on its own HUP;
     * the answers come from any): eight rounds in a row say so */
    t0 = itest_now_ms();
    for (int good = 0; good < 8;) {
        long a = itest_req_bearer(&n, old, "GET", API "/queues", NULL, &r);
        itest_resp_free(&r);
        long b = itest_req_bearer(&n, next, "GET", API "/queues", NULL, &r);
        itest_resp_free(&r);
        good = a == 401 && b == 200 ? good + 1 : 0;
        cr_assert_lt(itest_now_ms() - t0, 10000,
                     "the workers still take the old secret (%ld, %ld)", a, b);
    }
    /* a file that no longer holds a secret keeps the one loaded before */
    jw_write_secret(dir, "short");
    cr_assert_eq(kill(n.pid, SIGHUP), 0);
    t0 = itest_now_ms();
    while (!itest_node_log_contains(&n, "keeping the secret loaded before")) {
        cr_assert_lt(itest_now_ms() - t0, 20000, "no word of the bad secret");
        itest_sleep_ms(50);
    }
    jw_ok(&n, next, "GET", API "/queues", NULL, 200, &r);
    itest_resp_free(&r);
    free(old);
    free(next);
}

Test(jwt, access_token_is_no_token_on_other_routes_and_never_logged,
     .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    char dir[256], path[4400];
    const char *hdrs[] = {"X-Mayfly-Forwarded: 1", NULL};
    char *tok = jw_token(JW_SECRET, 300,
                         ", \"push\": [\"*\"], \"pop\": [\"*\"], "
                         "\"subscribe\": [\"*\"]");
    char sig[64];

    jw_start(&n, dir, sizeof(dir), "");
    /* pop is not a route a page's EventSource opens: 401, as if no token */
    snprintf(path, sizeof(path), API "/pop?queue=jobs&access_token=%s", tok);
    itest_req(&n, "GET", path, NULL, &r);
    itest_assert_error(&r, 401, "unauthorized", "access_token",
                       "access_token on pop");
    itest_resp_free(&r);
    /* with the header as well, the header is the token there */
    jw_ok(&n, tok, "GET", path, NULL, 200, &r);
    itest_resp_free(&r);
    /* a call the node refuses and logs with its URL (a client passing
     * for a node): the URL is in the log, the token is not */
    itest_req_with(&n, "GET", path, NULL, hdrs, &r);
    cr_assert_eq(r.status, 401, "%s", r.body);
    itest_resp_free(&r);
    int64_t t0 = itest_now_ms();
    while (!itest_node_log_contains(&n, "access_token=[redacted]")) {
        cr_assert_lt(itest_now_ms() - t0, 20000,
                     "the refused call's URL was not logged");
        itest_sleep_ms(50);
    }
    snprintf(sig, sizeof(sig), "%s", strrchr(tok, '.') + 1);
    cr_assert_not(itest_node_log_contains(&n, tok), "the token is in the log");
    cr_assert_not(itest_node_log_contains(&n, sig),
                  "the token's signature is in the log");
    free(tok);
}

/* What a browser's request gets back: the status and every header. */
#define JW_ANSWER_MAX 4096
struct jw_answer {
    long status;
    char head[JW_ANSWER_MAX];
    char body[JW_ANSWER_MAX];
};

/* jw_collect - curl's header and body callbacks: append to the buffer
 * (JW_ANSWER_MAX bytes). */
static size_t
jw_collect(char *data, size_t size, size_t n, void *buf)
{
    size_t len = strlen(buf), k = size * n;

    if (len + k >= JW_ANSWER_MAX)
        k = JW_ANSWER_MAX - 1 - len;
    memcpy((char *)buf + len, data, k);
    ((char *)buf)[len + k] = '\0';
    return size * n;
}

/* jw_browser - method path with the headers a browser would send (NULL
 * terminated), every answer header kept. */
static void
jw_browser(const struct itest_node *n, const char *method, const char *path,
           const char *const *headers, struct jw_answer *a)
{
    CURL *h = curl_easy_init();
    struct curl_slist *list = NULL;
    char url[512];

    memset(a, 0, sizeof(*a));
    cr_assert_not_null(h);
    snprintf(url, sizeof(url), "%s%s", n->base, path);
    for (int i = 0; headers != NULL && headers[i] != NULL; i++)
        list = curl_slist_append(list, headers[i]);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOBODY, strcmp(method, "HEAD") == 0);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, jw_collect);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a->head);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, jw_collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a->body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
    cr_assert_eq(curl_easy_perform(h), CURLE_OK);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
}

/* jw_has - whether the answer's head holds the header line (name and
 * value as sent, case aside). */
static int
jw_has(const struct jw_answer *a, const char *line)
{
    char want[256];

    snprintf(want, sizeof(want), "\r\n%s\r\n", line);
    return strcasestr(a->head, want) != NULL;
}

Test(jwt, cors_answers_a_listed_origins_preflight_and_lets_it_read,
     .timeout = 60)
{
    struct itest_node n;
    struct jw_answer a;
    char dir[256];
    char *tok = jw_token(JW_SECRET, 300, ", \"push\": [\"*\"]");
    char auth[4200];
    const char *listed[] = {"Origin: " JW_ORIGIN,
                            "Access-Control-Request-Method: POST",
                            "Access-Control-Request-Headers: authorization, "
                            "content-type",
                            NULL};
    const char *unlisted[] = {"Origin: https://evil.example.com",
                              "Access-Control-Request-Method: POST", NULL};
    const char *page[] = {"Origin: " JW_ORIGIN, NULL};
    const char *with_token[] = {"Origin: " JW_ORIGIN, auth,
                                "Content-Type: application/json", NULL};

    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
    jw_start(&n, dir, sizeof(dir),
             "cors_origins=" JW_ORIGIN ",http://localhost:8080");
    /* the preflight: no token, 204 with what the path takes */
    jw_browser(&n, "OPTIONS", API "/push", listed, &a);
    cr_assert_eq(a.status, 204, "%s%s", a.head, a.body);
    cr_assert(jw_has(&a, "Access-Control-Allow-Origin: " JW_ORIGIN), "%s",
              a.head);
    cr_assert(jw_has(&a, "Access-Control-Allow-Methods: POST"), "%s", a.head);
    cr_assert(jw_has(&a, "Access-Control-Allow-Headers: authorization, "
                         "content-type, last-event-id"),
              "%s", a.head);
    cr_assert(jw_has(&a, "Access-Control-Max-Age: 600"), "%s", a.head);
    cr_assert(jw_has(&a, "Vary: Origin"), "%s", a.head);
    jw_browser(&n, "OPTIONS", API "/queues", listed, &a);
    cr_assert_eq(a.status, 204);
    cr_assert(jw_has(&a, "Access-Control-Allow-Methods: GET, HEAD"), "%s",
              a.head);
    /* an unlisted origin: 403 naming it, nothing it could read by */
    jw_browser(&n, "OPTIONS", API "/push", unlisted, &a);
    cr_assert_eq(a.status, 403, "%s%s", a.head, a.body);
    cr_assert_not_null(strstr(a.body, "https://evil.example.com"), "%s",
                       a.body);
    cr_assert_not_null(strstr(a.body, "\"forbidden\""), "%s", a.body);
    cr_assert_null(strcasestr(a.head, "Access-Control-Allow-Origin"), "%s",
                   a.head);
    /* an OPTIONS that is no preflight is what it was: 405 with Allow */
    jw_browser(&n, "OPTIONS", API "/push", NULL, &a);
    cr_assert_eq(a.status, 405, "%s", a.body);
    cr_assert(jw_has(&a, "Allow: POST"), "%s", a.head);
    /* the call itself, and an error, carry Allow-Origin for the page */
    jw_browser(&n, "POST", API "/push", with_token, &a);
    cr_assert_eq(a.status, 400, "no body: %s", a.body);
    cr_assert(jw_has(&a, "Access-Control-Allow-Origin: " JW_ORIGIN), "%s",
              a.head);
    jw_browser(&n, "GET", API "/queues", page, &a);
    cr_assert_eq(a.status, 401, "%s", a.body);
    cr_assert(jw_has(&a, "Access-Control-Allow-Origin: " JW_ORIGIN), "%s",
              a.head);
    cr_assert(jw_has(&a, "Access-Control-Expose-Headers: retry-after, "
                         "www-authenticate"),
              "%s", a.head);
    jw_browser(&n, "GET", "/health", page, &a);
    cr_assert_eq(a.status, 200);
    cr_assert(jw_has(&a, "Access-Control-Allow-Origin: " JW_ORIGIN), "%s",
              a.head);
    cr_assert(jw_has(&a, "Vary: Origin"), "%s", a.head);
    /* without Origin an answer is as it was */
    jw_browser(&n, "GET", "/health", NULL, &a);
    cr_assert_eq(a.status, 200);
    cr_assert_null(strcasestr(a.head, "Access-Control"), "%s", a.head);
    cr_assert_null(strcasestr(a.head, "Vary"), "%s", a.head);
    free(tok);
}

Test(jwt, without_cors_origins_no_page_may_read_and_preflights_are_403,
     .timeout = 60)
{
    struct itest_node n;
    struct jw_answer a;
    const char *pre[] = {"Origin: " JW_ORIGIN,
                         "Access-Control-Request-Method: GET", NULL};
    const char *page[] = {"Origin: " JW_ORIGIN, NULL};

    itest_node_start(&n, "");
    jw_browser(&n, "OPTIONS", "/health", pre, &a);
    cr_assert_eq(a.status, 403, "%s", a.body);
    cr_assert_null(strcasestr(a.head, "Access-Control-Allow-Origin"));
    jw_browser(&n, "GET", "/health", page, &a);
    cr_assert_eq(a.status, 200);
    cr_assert_null(strcasestr(a.head, "Access-Control"), "%s", a.head);
}

/* A page's own server, on an origin of its own: it answers every request
 * with the page, then closes. */
struct jw_site {
    int fd;
    char page[8192];
};

/* jw_site_serve - the page server's thread; it ends with the test. */
static void *
jw_site_serve(void *arg)
{
    struct jw_site *site = arg;
    char req[4096], head[160];

    for (;;) {
        int c = accept(site->fd, NULL, NULL);
        if (c == -1)
            continue;
        ssize_t got = 0, k;
        while ((size_t)got < sizeof(req) - 1 &&
               (k = recv(c, req + got, sizeof(req) - 1 - (size_t)got, 0)) > 0) {
            got += k;
            req[got] = '\0';
            if (strstr(req, "\r\n\r\n") != NULL)
                break;
        }
        snprintf(head, sizeof(head),
                 "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                 strlen(site->page));
        if (send(c, head, strlen(head), MSG_NOSIGNAL) > 0)
            (void)!send(c, site->page, strlen(site->page), MSG_NOSIGNAL);
        close(c);
    }
    return NULL;
}

/* jw_site_start - serve site->page on 127.0.0.1:port from a thread. */
static void
jw_site_start(struct jw_site *site, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    pthread_t t;
    int on = 1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    site->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(site->fd, 0);
    setsockopt(site->fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    cr_assert_eq(bind(site->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(site->fd, 16), 0);
    cr_assert_eq(pthread_create(&t, NULL, jw_site_serve, site), 0);
    pthread_detach(t);
}

/* jw_attr - the value of the body's data-<name> attribute in dom ("" when
 * absent), into out. */
static const char *
jw_attr(const char *dom, const char *name, char *out, size_t cap)
{
    char want[64];
    const char *p;

    snprintf(want, sizeof(want), "data-%s=\"", name);
    out[0] = '\0';
    if ((p = strstr(dom, want)) != NULL) {
        p += strlen(want);
        snprintf(out, cap, "%.*s", (int)strcspn(p, "\""), p);
    }
    return out;
}

/* In a real browser (headless Chromium): a page of a listed origin calls
 * the node with a token and a JSON body, which makes the browser ask
 * first, and reads the answers, a 401's WWW-Authenticate included; the
 * same page from an origin not listed reads nothing, and its push never
 * happens. */
Test(jwt, a_browser_page_of_a_listed_origin_reads_and_another_does_not,
     .timeout = 240)
{
    struct itest_node n;
    struct itest_resp r;
    static struct jw_site site;
    struct browser_run b;
    char dir[256], cors[128], url[128], v[128];
    char *tok = jw_token(JW_SECRET, 600, ", \"push\": [\"room.*\"]");
    char *reader = jw_token(JW_SECRET, 600, ", \"pop\": [\"room.*\"]");
    int port = itest_free_port();

    snprintf(cors, sizeof(cors), "cors_origins=http://127.0.0.1:%d", port);
    jw_start(&n, dir, sizeof(dir), cors);
    snprintf(
        site.page, sizeof(site.page),
        "<!doctype html><html><body><script>\n"
        "const node = 'http://127.0.0.1:%d';\n"
        "const out = (k, v) => document.body.setAttribute('data-' + k, v);\n"
        "fetch(node + '/api/v1/ephemeral/push', {method: 'POST',\n"
        "  headers: {'Authorization': 'Bearer %s',\n"
        "            'Content-Type': 'application/json'},\n"
        "  body: JSON.stringify({queue: 'room.7', messages: [{payload: "
        "1}]})})\n"
        "  .then(r => r.json().then(j => out('push', r.status + ' ' + "
        "j.pushed)))\n"
        "  .catch(e => out('push', 'blocked'));\n"
        "fetch(node + '/api/v1/ephemeral/queues')\n"
        "  .then(r => out('refused', r.status + ' ' +\n"
        "                 r.headers.get('www-authenticate')))\n"
        "  .catch(e => out('refused', 'blocked'));\n"
        "</script></body></html>\n",
        n.port, tok);
    jw_site_start(&site, port);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
    browser_dump_dom(dir, url, 800, 600, 5000, &b);
    cr_assert_str_eq(jw_attr(b.dom, "push", v, sizeof(v)), "201 1",
                     "the listed page's push:\n%s\n%s", b.dom, b.console);
    cr_assert_str_eq(jw_attr(b.dom, "refused", v, sizeof(v)), "401 Bearer",
                     "the listed page's refused call:\n%s\n%s", b.dom,
                     b.console);
    browser_run_free(&b);

    /* localhost:port is another origin than 127.0.0.1:port */
    snprintf(url, sizeof(url), "http://localhost:%d/", port);
    browser_dump_dom(dir, url, 800, 600, 5000, &b);
    cr_assert_str_eq(jw_attr(b.dom, "push", v, sizeof(v)), "blocked",
                     "the unlisted page's push:\n%s", b.dom);
    cr_assert_str_eq(jw_attr(b.dom, "refused", v, sizeof(v)), "blocked",
                     "the unlisted page's refused call:\n%s", b.dom);
    browser_run_free(&b);
    jw_ok(&n, reader, "GET", API "/pop?queue=room.7&batch=10", NULL, 200, &r);
    cr_assert_eq(itest_jlen(r.json, "messages"), 1,
                 "one push, the listed page's: %s", r.body);
    itest_resp_free(&r);
    free(reader);
    free(tok);
}

/* jw_check - mayflyd -t with jwt_secret_file=path: its exit status, and
 * what it printed into out. */
static int
jw_check(const char *path, char *out, size_t cap)
{
    char cmd[1024];
    FILE *p;
    size_t n;

    snprintf(cmd, sizeof(cmd), "'%s' -t -o jwt_secret_file=%s 2>&1",
             getenv("MAYFLYD"), path);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return WEXITSTATUS(pclose(p));
}

Test(jwt, an_unreadable_or_short_secret_is_refused_at_start_and_by_t,
     .timeout = 60)
{
    char dir[256], out[2048], log[300], ov[400], dd[300], l[64], cl[64];
    int st;

    itest_test_dir(dir, sizeof(dir));
    cr_assert_eq(jw_check("/nonexistent/jwt.secret", out, sizeof(out)), 1);
    cr_assert_not_null(strstr(out, "jwt_secret_file: cannot read "
                                   "/nonexistent/jwt.secret"),
                       "%s", out);
    jw_write_secret(dir, "");
    cr_assert_eq(jw_check(jw_secret_path, out, sizeof(out)), 1);
    cr_assert_not_null(strstr(out, "holds no secret"), "%s", out);
    jw_write_secret(dir, "too-short");
    cr_assert_eq(jw_check(jw_secret_path, out, sizeof(out)), 1);
    cr_assert_not_null(strstr(out, "at least 32"), "%s", out);
    /* the start refuses it the same way, before it serves anything */
    snprintf(ov, sizeof(ov), "jwt_secret_file=%s", jw_secret_path);
    snprintf(dd, sizeof(dd), "data_dir=%s/data", dir);
    snprintf(l, sizeof(l), "listen=127.0.0.1:%d", itest_free_port());
    snprintf(cl, sizeof(cl), "cluster_listen=127.0.0.1:%d", itest_free_port());
    snprintf(log, sizeof(log), "%s/node.log", dir);
    const char *own[] = {l, cl, dd, ov};
    pid_t pid = itest_spawn(own, 4, NULL, log);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    FILE *f = fopen(log, "r");
    cr_assert_not_null(f);
    out[fread(out, 1, sizeof(out) - 1, f)] = '\0';
    fclose(f);
    cr_assert_not_null(strstr(out, "jwt_secret_file"), "%s", out);
    jw_write_secret(dir, JW_SECRET);
    cr_assert_eq(jw_check(jw_secret_path, out, sizeof(out)), 0, "%s", out);
}
