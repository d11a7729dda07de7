/*
 * test_status_page.c - GET / on a real node: the page and its headers, the
 * methods and paths around it, and the page itself in headless Chromium
 * (test/integration/browser.h): it loads without a console message and
 * shows the queues pushed a moment before, the streams open on it and the
 * presence members and channels it holds; with tokens on, it fills what
 * /health and /metrics give and says where the queues would be that the
 * listing wants a token, asking for it once.  The three-node view is
 * test/cluster/test_status_page_cluster.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <criterion/criterion.h>

#include "test/integration/browser.h"
#include "test/integration/node.h"
#include "test/integration/sse.h"
#include "test/integration/tokens.h"

/* The response of one request with every header kept. */
struct answer {
    long status;
    char headers[4096];
    char *body;
    size_t len;
};

/* on_header - keep a header line. */
static size_t
on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct answer *a = ctx;
    size_t have = strlen(a->headers), k = size * n;

    if (have + k < sizeof(a->headers))
        memcpy(a->headers + have, p, k), a->headers[have + k] = '\0';
    return k;
}

/* on_body - keep body bytes. */
static size_t
on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct answer *a = ctx;
    size_t k = size * n;

    a->body = realloc(a->body, a->len + k + 1);
    cr_assert_not_null(a->body);
    memcpy(a->body + a->len, p, k);
    a->len += k;
    a->body[a->len] = '\0';
    return k;
}

/* fetch - method path on node n into a (free a->body after). */
static void
fetch(const struct itest_node *n, const char *method, const char *path,
      struct answer *a)
{
    char url[256];
    CURL *h = curl_easy_init();

    memset(a, 0, sizeof(*a));
    a->body = calloc(1, 1);
    snprintf(url, sizeof(url), "%s%s", n->base, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOBODY, (long)(strcmp(method, "HEAD") == 0));
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    cr_assert_eq(curl_easy_perform(h), CURLE_OK, "%s %s failed", method, url);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    curl_easy_cleanup(h);
}

/* header - the value of header name in a ("" when absent), in buf. */
static const char *
header(const struct answer *a, const char *name, char *buf, size_t len)
{
    size_t nl = strlen(name);

    buf[0] = '\0';
    for (const char *l = a->headers; *l; l += strcspn(l, "\n") + 1) {
        if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
            const char *v = l + nl + 1 + strspn(l + nl + 1, " ");
            snprintf(buf, len, "%.*s", (int)strcspn(v, "\r\n"), v);
            break;
        }
        if (l[strcspn(l, "\n")] == '\0')
            break;
    }
    return buf;
}

TestSuite(status_page, .timeout = 180);

Test(status_page, get_serves_one_self_contained_html_document)
{
    struct itest_node n;
    struct answer a, b, h;
    char v[1024];

    itest_node_start(&n, NULL);
    fetch(&n, "GET", "/", &a);
    cr_assert_eq(a.status, 200, "GET /: %ld", a.status);
    cr_assert_str_eq(header(&a, "Content-Type", v, sizeof(v)),
                     "text/html; charset=utf-8");
    cr_assert_str_eq(header(&a, "Cache-Control", v, sizeof(v)), "no-cache");
    cr_assert_str_eq(header(&a, "X-Content-Type-Options", v, sizeof(v)),
                     "nosniff");
    header(&a, "Content-Security-Policy", v, sizeof(v));
    cr_assert(strstr(v, "default-src 'none'") &&
                  strstr(v, "connect-src 'self'"),
              "Content-Security-Policy: %s", v);
    cr_assert(strncmp(a.body, "<!doctype html>", 15) == 0, "%.80s", a.body);
    /* The CSS and the JavaScript are in the document, not named by it. */
    cr_assert(strstr(a.body, "<style>") && strstr(a.body, "<script>"),
              "the page does not inline its style and script");
    cr_assert_null(strstr(a.body, "src=\""), "the page names a script");
    cr_assert_null(strstr(a.body, "stylesheet"), "the page names a stylesheet");
    cr_assert_eq(browser_count(a.body, "href=\""),
                 browser_count(a.body, "href=\"data:"),
                 "the page links to something not in itself");
    /* It reads the node's own JSON. */
    cr_assert(strstr(a.body, "'/health'") &&
                  strstr(a.body, "/api/v1/ephemeral/queues") &&
                  strstr(a.body, "'/metrics'"),
              "the page does not read /health, the listing and /metrics");

    fetch(&n, "GET", "/index.html?from=bookmark", &b);
    cr_assert_eq(b.status, 200);
    cr_assert(b.len == a.len && memcmp(a.body, b.body, a.len) == 0,
              "/index.html is not the page / serves");

    fetch(&n, "HEAD", "/", &h);
    cr_assert_eq(h.status, 200);
    cr_assert_eq(h.len, 0);
    cr_assert_eq(atol(header(&h, "Content-Length", v, sizeof(v))), (long)a.len);
    free(a.body);
    free(b.body);
    free(h.body);
}

Test(status_page, other_methods_are_405_and_other_paths_stay_as_they_were)
{
    static const char *const methods[] = {"POST", "PUT", "DELETE", "PATCH"};
    static const char *const missing[] = {"/index.htm", "/status", "/page.js",
                                          "/page.css", "//"};
    struct itest_node n;
    struct itest_resp r;
    struct answer a;
    char what[64], v[256];

    itest_node_start(&n, NULL);
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        snprintf(what, sizeof(what), "%s /", methods[i]);
        itest_req(&n, methods[i], "/", NULL, &r);
        itest_assert_error(&r, 405, "method_not_allowed", NULL, what);
        cr_assert_str_eq(r.allow, "GET, HEAD", "%s: Allow %s", what, r.allow);
        itest_resp_free(&r);
    }
    fetch(&n, "POST", "/index.html", &a);
    cr_assert_eq(a.status, 405);
    cr_assert_str_eq(header(&a, "Allow", v, sizeof(v)), "GET, HEAD");
    free(a.body);
    for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
        itest_get(&n, &r, "%s", missing[i]);
        itest_assert_error(&r, 404, "not_found", NULL, missing[i]);
        itest_resp_free(&r);
    }
    itest_get(&n, &r, "/health");
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.content_type, "application/json");
    itest_resp_free(&r);
}

Test(status_page, the_browser_shows_a_queue_pushed_a_moment_before)
{
    struct itest_node n;
    struct itest_resp r;
    struct browser_run b;
    char url[128], want[256];

    itest_node_start(&n, NULL);
    itest_push_ok(&n, &r, "orders", NULL, "[1,2,3]", 3);
    itest_resp_free(&r);
    itest_push_ok(&n, &r, "audit.log", "eu", "[{\"who\":\"ada\"}]", 1);
    itest_resp_free(&r);

    snprintf(url, sizeof(url), "%s/", n.base);
    browser_dump_dom(n.dir, url, 1280, 900, 5000, &b);
    cr_assert_str_eq(b.console, "", "the page logged to the console:\n%s",
                     b.console);
    cr_assert(strstr(b.dom, "<body data-state=\"ready\">"),
              "the page never finished a refresh:\n%.2000s", b.dom);
    cr_assert(strstr(b.dom, "<tr data-queue=\"orders\" data-depth=\"3\">"),
              "no row for orders with depth 3:\n%s", b.dom);
    cr_assert(strstr(b.dom, "<tr data-queue=\"audit.log\" data-depth=\"1\">"),
              "no row for audit.log with depth 1:\n%s", b.dom);
    cr_assert(strstr(b.dom, "2 queues, 4 messages on this node"),
              "the queue count is wrong:\n%s", b.dom);
    /* One member, this node, the leader of its one-node cluster. */
    snprintf(want, sizeof(want),
             "<tr data-member=\"127.0.0.1-%d\" data-state=\"live\" "
             "class=\"self\">",
             n.port);
    cr_assert(strstr(b.dom, want), "no row %s:\n%s", want, b.dom);
    cr_assert_eq(browser_count(b.dom, "<tr data-member="), 1);
    cr_assert(strstr(b.dom, "<td class=\"leader\">leader</td>"), "%s", b.dom);
    /* The charts were drawn. */
    cr_assert(strstr(b.dom, "<path class=\"s-mem\""), "no memory line:\n%s",
              b.dom);
    browser_run_free(&b);
}

Test(status_page, the_console_check_sees_what_a_broken_page_logs)
{
    char dir[256];
    struct browser_run b;

    /* The check above passes on silence; here is a page that is not
     * silent, so a check that saw nothing would fail here. */
    itest_test_dir(dir, sizeof(dir));
    browser_dump_dom(dir,
                     "data:text/html,<p>x</p><script>console.error('boom');"
                     "setTimeout(function(){undefinedCall()},100)</script>",
                     800, 600, 1000, &b);
    cr_assert(strstr(b.console, "boom"), "console.error unseen:\n%s",
              b.console);
    cr_assert(strstr(b.console, "undefinedCall"),
              "an uncaught exception unseen:\n%s", b.console);
    browser_run_free(&b);
}

Test(status_page, the_browser_shows_the_streams_open_on_the_node)
{
    struct itest_node n;
    struct sse_client a, b;
    struct browser_run run;
    char url[128];
    double v = 0;

    itest_node_start(&n, "workers=2");
    sse_open(&a, &n, "/api/v1/ephemeral/subscribe?queue=room", NULL);
    sse_open(&b, &n, "/api/v1/ephemeral/subscribe?queue=room&partition=p1",
             NULL);
    cr_assert_eq(sse_wait_events(&a, 1, 10000), 1);
    cr_assert_eq(sse_wait_events(&b, 1, 10000), 1);
    cr_assert_eq(itest_metric(&n, "mayfly_streams", &v), 0);
    cr_assert_eq(v, 2);
    snprintf(url, sizeof(url), "%s/", n.base);
    browser_dump_dom(n.dir, url, 1280, 900, 5000, &run);
    cr_assert_str_eq(run.console, "", "the page logged to the console:\n%s",
                     run.console);
    cr_assert(strstr(run.dom, "<body data-state=\"ready\">"),
              "the page never finished a refresh:\n%.2000s", run.dom);
    cr_assert(strstr(run.dom, "<dt>open streams</dt><dd>2</dd>"),
              "two open streams not shown:\n%s", run.dom);
    browser_run_free(&run);
    sse_close(&a);
    sse_close(&b);
}

/* metric_reaches - until node n's series is want (5 s at most); its last
 * value. */
static double
metric_reaches(const struct itest_node *n, const char *series, double want)
{
    int64_t end = itest_now_ms() + 5000;
    double v = -1;

    while (itest_now_ms() < end) {
        cr_assert_eq(itest_metric(n, series, &v), 0, "no %s", series);
        if (v == want)
            break;
        itest_sleep_ms(20);
    }
    return v;
}

Test(status_page, the_browser_shows_the_presence_members_and_channels)
{
    struct itest_node n;
    struct itest_resp r = {0};
    struct sse_client s;
    struct browser_run run;
    char url[128];
    static const char *const calls[] = {
        "{\"channel\":\"lobby\",\"member\":\"ada\",\"ttlSeconds\":60}",
        "{\"channel\":\"lobby\",\"member\":\"bob\",\"ttlSeconds\":60}",
        "{\"channel\":\"room 7\",\"member\":\"ada\",\"ttlSeconds\":60}",
    };

    itest_node_start(&n, "workers=2");
    /* three call members in two channels, and a stream member of one of
     * them: four members (a member is a key of its channel) in two */
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        cr_assert_eq(
            itest_post(&n, &r, "/api/v1/presence/enter", "%s", calls[i]), 200,
            "%s: %s", calls[i], r.body);
        itest_resp_free(&r);
    }
    sse_open(&s, &n, "/api/v1/ephemeral/subscribe?presence=room%207&member=cy",
             NULL);
    cr_assert_geq(sse_wait_events(&s, 1, 10000), 1, "the member stream");
    cr_assert_eq(metric_reaches(&n, "mayfly_presence_members", 4), 4);
    cr_assert_eq(metric_reaches(&n, "mayfly_presence_channels", 2), 2);
    snprintf(url, sizeof(url), "%s/", n.base);
    browser_dump_dom(n.dir, url, 1280, 900, 5000, &run);
    cr_assert_str_eq(run.console, "", "the page logged to the console:\n%s",
                     run.console);
    cr_assert(strstr(run.dom, "<body data-state=\"ready\">"),
              "the page never finished a refresh:\n%.2000s", run.dom);
    cr_assert(
        strstr(run.dom, "<dt>presence</dt><dd>4 members in 2 channels</dd>"),
        "four members in two channels not shown:\n%s", run.dom);
    browser_run_free(&run);
    sse_close(&s);
}

/* README Security: "The status page reads the listing without a token:
 * with tokens on, it says so where the queues would be."  The page
 * shows the node from /health and /metrics (open here), no error, and
 * asks for the listing once: its 401 does not change while the node
 * runs, so it is not retried every round. */
Test(status_page, with_tokens_on_it_shows_the_node_and_says_so_for_queues)
{
    static const char *const toks[][2] = {
        {"admintok", "push=* pop=* admin=* read=*"}};
    struct itest_node n;
    struct itest_resp r = {0};
    struct browser_run run;
    char dir[256], file[300], opts[400], url[128];

    itest_test_dir(dir, sizeof(dir));
    itest_token_file(dir, toks, 1, ~0u, file, sizeof(file));
    snprintf(opts, sizeof(opts), "auth_file=%s", file);
    itest_node_start(&n, opts);
    cr_assert_eq(itest_req_bearer(
                     &n, "admintok", "POST", "/api/v1/ephemeral/push",
                     "{\"queue\":\"orders\",\"messages\":[{\"payload\":1}]}",
                     &r),
                 201, "%s", r.body);
    itest_resp_free(&r);
    snprintf(url, sizeof(url), "%s/", n.base);
    /* three rounds and more (REFRESH_MS 2 s) */
    browser_dump_dom(n.dir, url, 1280, 900, 7000, &run);
    cr_assert_str_eq(run.console, "", "the page logged to the console:\n%s",
                     run.console);
    /* rounds went on (health every one), the listing was asked once */
    cr_assert_geq(browser_requests(&run, "/health"), 3, "too few rounds");
    cr_assert_eq(browser_requests(&run, "/api/v1/ephemeral/queues"), 1,
                 "the page asked for the listing again");
    cr_assert(strstr(run.dom, "<body data-state=\"ready\">"),
              "the page never finished a refresh:\n%.3000s", run.dom);
    cr_assert(strstr(run.dom, "<p id=\"error\" class=\"error\" role=\"alert\" "
                              "hidden=\"\">"),
              "an error is shown:\n%.3000s", run.dom);
    /* the node's figures, from /health and /metrics */
    cr_assert(strstr(run.dom, "<dt>open streams</dt><dd>0</dd>"),
              "the summary is not filled:\n%s", run.dom);
    cr_assert(strstr(run.dom, "<dt>messages</dt><dd>1 pending, 0 leased</dd>"),
              "the summary is not filled:\n%s", run.dom);
    cr_assert(strstr(run.dom, "<path class=\"s-mem\""), "no memory line:\n%s",
              run.dom);
    cr_assert(strstr(run.dom, "<td class=\"leader\">leader</td>"), "%s",
              run.dom);
    /* and where the queues would be, why they are not */
    cr_assert(strstr(run.dom, "tokens on"), "no word of the tokens:\n%s",
              run.dom);
    cr_assert_null(strstr(run.dom, "data-queue="), "%s", run.dom);
    browser_run_free(&run);
}

/* With metrics_auth on as well, /health alone is open: the page shows the
 * node and its members, says where the figures would be that /metrics
 * wants a token, and asks for neither refused part again. */
Test(status_page, with_metrics_auth_too_it_shows_what_health_gives)
{
    static const char *const toks[][2] = {{"admintok", "admin=* read=*"}};
    struct itest_node n;
    struct browser_run run;
    char dir[256], file[300], opts[400], url[128];

    itest_test_dir(dir, sizeof(dir));
    itest_token_file(dir, toks, 1, ~0u, file, sizeof(file));
    snprintf(opts, sizeof(opts), "auth_file=%s metrics_auth=on", file);
    itest_node_start(&n, opts);
    snprintf(url, sizeof(url), "%s/", n.base);
    browser_dump_dom(n.dir, url, 1280, 900, 7000, &run);
    cr_assert_str_eq(run.console, "", "the page logged to the console:\n%s",
                     run.console);
    cr_assert_geq(browser_requests(&run, "/health"), 3, "too few rounds");
    cr_assert_eq(browser_requests(&run, "/metrics"), 1,
                 "the page asked for /metrics again");
    cr_assert_eq(browser_requests(&run, "/api/v1/ephemeral/queues"), 1,
                 "the page asked for the listing again");
    cr_assert(strstr(run.dom, "<body data-state=\"ready\">"),
              "the page never finished a refresh:\n%.3000s", run.dom);
    cr_assert(strstr(run.dom, "<td class=\"leader\">leader</td>"), "%s",
              run.dom);
    cr_assert(strstr(run.dom, "<dt>role</dt><dd>leader (term "), "%s", run.dom);
    cr_assert(strstr(run.dom, "/metrics wants a token"),
              "no word of the metrics' token:\n%s", run.dom);
    cr_assert(strstr(run.dom, "tokens on"), "no word of the tokens:\n%s",
              run.dom);
    browser_run_free(&run);
}
