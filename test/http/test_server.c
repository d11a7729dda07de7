/*
 * test_server.c - http/server.c against libcurl: a real http_server runs in
 * a forked child (PR_SET_PDEATHSIG, port 0) with a small handler, the
 * parent speaks HTTP to it.
 *
 * The child's handler, by route:
 *   health         200 {"ok": true}
 *   push           200 {"len": <body bytes>, "sum": <byte sum>}
 *   delete_queue   200 {"param": "<decoded {q}>"}
 *   reset          the -errno in ?errno= through http_reply_errno()
 *   pop            parked: suspended, answered from a later loop
 *                  iteration ({"parked": true}); with ?hold=1 never answered,
 *                  aborted when the client hangs up (EPOLLRDHUP).
 *   subscribe      a body made as it goes (stream_body.h): "open\n", then
 *                  it waits (suspended: stream_body.c gives back the
 *                  connection's zeroed pages, edge_pool.h); from a later
 *                  loop iteration "given <bytes>\n", what a trim gives
 *                  back then (with ?self=1, before stream_body.c's), and
 *                  its end.
 *   metrics        text "up <connections> parked <n>"; ?quiesce=1 first
 *                  quiesces the
 *                  server, ?stop=1 stops it after this loop iteration.
 * Every on_done result is written to a pipe as one byte, '1' or '0'.
 */
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "http/buf.h"
#include "http/edge_pool.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/server.h"
#include "http/stream_body.h"

#define PARKED_MAX 64

/* The subscribe route's body: its steps, and what edge_pool gave back. */
struct body {
    struct http_request *req;
    int step;
    int self; /* trim before stream_body.c does, as it waits */
    ssize_t given;
};

struct child {
    struct http_server *server;
    int epfd;
    int done_fd; /* write end of the on_done pipe */
    struct http_request *parked[PARKED_MAX];
    int held[PARKED_MAX]; /* 1: only RDHUP ends it */
    int nparked;
    int stop; /* stop the server after this loop iteration, then exit */
    struct body body;
    int body_more; /* the body has its next bytes: http_body_more */
};

static struct child child;
static int port;
static int done_rd = -1;
static pid_t server_pid;

static void
on_done(void *arg, int sent_ok)
{
    char c = sent_ok ? '1' : '0';

    (void)arg;
    if (write(child.done_fd, &c, 1) != 1)
        _exit(3);
}

static void
park(struct http_request *req, int hold)
{
    struct epoll_event ev = {.events = EPOLLRDHUP, .data.ptr = req};

    cr_assert_lt(child.nparked, PARKED_MAX);
    http_request_suspend(req);
    http_request_on_done(req, on_done, NULL);
    child.parked[child.nparked] = req;
    child.held[child.nparked++] = hold;
    if (hold)
        epoll_ctl(child.epfd, EPOLL_CTL_ADD, http_request_fd(req), &ev);
}

static void
unpark(int i)
{
    child.parked[i] = child.parked[--child.nparked];
    child.held[i] = child.held[child.nparked];
}

/* body_read - "open\n"; then it waits; then what a trim gave back (as it
 * waited, or now), and the end. */
static ssize_t
body_read(void *arg, char *buf, size_t max)
{
    struct body *b = arg;
    int n;

    switch (b->step++) {
    case 0:
        memcpy(buf, "open\n", 5);
        return 5;
    case 1:
        if (b->self)
            b->given = http_edge_pool_trim(b->req);
        child.body_more = 1;
        return 0;
    case 2:
        if (!b->self)
            b->given = http_edge_pool_trim(b->req);
        n = snprintf(buf, max, "given %zd\n", b->given);
        return n;
    default:
        return -1;
    }
}

static void
handler(void *ctx, struct http_request *req)
{
    struct http_buf b;
    const char *body, *p;
    size_t len, i, sum = 0;
    uint32_t v;
    int hold;

    (void)ctx;
    http_buf_init(&b);
    switch (http_request_route(req)) {
    case HTTP_ROUTE_HEALTH:
        http_buf_append_str(&b, "{\"ok\": true}");
        http_reply(req, 200, &b);
        break;
    case HTTP_ROUTE_PUSH:
        body = http_request_body(req, &len);
        for (i = 0; i < len; i++)
            sum += (unsigned char)body[i];
        http_buf_printf(&b, "{\"len\": %zu, \"sum\": %zu}", len, sum);
        http_reply(req, 200, &b);
        break;
    case HTTP_ROUTE_DELETE_QUEUE:
        p = http_request_param(req, &len);
        http_buf_append_str(&b, "{\"param\": ");
        http_buf_append_json_str(&b, p, len);
        http_buf_append_str(&b, "}");
        http_reply(req, 200, &b);
        break;
    case HTTP_ROUTE_METRICS:
        http_query_bool(http_request_args(req), "quiesce", 0, &hold, NULL);
        if (hold)
            http_server_quiesce(child.server);
        http_query_bool(http_request_args(req), "stop", 0, &child.stop, NULL);
        http_buf_printf(&b, "up %u parked %d\n",
                        http_server_connections(child.server), child.nparked);
        http_reply_text(req, 200, "text/plain; version=0.0.4", &b);
        break;
    case HTTP_ROUTE_RESET:
        http_query_u32(http_request_args(req), "errno", 0, 0, 4096, &v, NULL);
        http_reply_errno(req, -(int)v, "reset");
        break;
    case HTTP_ROUTE_POP:
        http_query_bool(http_request_args(req), "hold", 0, &hold, NULL);
        park(req, hold);
        break;
    case HTTP_ROUTE_SUBSCRIBE:
        child.body = (struct body){.req = req};
        http_query_bool(http_request_args(req), "self", 0, &child.body.self,
                        NULL);
        if (http_reply_body(req, 200, "text/event-stream",
                            &(struct http_body_src){body_read, &child.body}) !=
            0)
            http_reply_error(req, 500, "internal", "no memory");
        break;
    default:
        http_reply_error(req, 500, "internal", "unexpected route");
        break;
    }
}

/* One loop iteration answers the parked requests that were parked before
 * it began (so the reply comes from a later iteration than the park). */
static void
child_loop(void)
{
    struct epoll_event evs[16], ev = {.events = EPOLLIN};
    int i, n, t;

    child.epfd = epoll_create1(0);
    ev.data.ptr = NULL;
    epoll_ctl(child.epfd, EPOLL_CTL_ADD, http_server_fd(child.server), &ev);
    for (;;) {
        int due = child.nparked;

        t = http_server_timeout_ms(child.server);
        n = epoll_wait(child.epfd, evs, 16, t < 0 || t > 20 ? 20 : t);
        for (i = 0; i < n; i++) {
            struct http_request *req = evs[i].data.ptr;

            if (req == NULL)
                continue;
            for (int k = 0; k < child.nparked; k++) {
                if (child.parked[k] == req) {
                    epoll_ctl(child.epfd, EPOLL_CTL_DEL, http_request_fd(req),
                              NULL);
                    unpark(k);
                    http_request_abort(req);
                    break;
                }
            }
        }
        for (i = due - 1; i >= 0; i--) {
            struct http_request *req = child.parked[i];
            struct http_buf b;

            if (i >= child.nparked || child.held[i])
                continue;
            http_buf_init(&b);
            http_buf_append_str(&b, "{\"parked\": true}");
            http_reply(req, 200, &b);
            unpark(i);
            http_request_resume(req);
        }
        if (child.body_more) {
            child.body_more = 0;
            http_body_more(child.body.req);
        }
        http_server_run(child.server);
        if (child.stop) {
            http_server_stop(child.server);
            _exit(0);
        }
    }
}

static void
start_server(size_t max_body, int discard_bodies)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    int fd, pfd[2], one = 1;
    pid_t parent = getpid();

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_neq(fd, -1);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(fd, 128), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    port = ntohs(a.sin_port);
    cr_assert_eq(pipe(pfd), 0);
    server_pid = fork();
    cr_assert_neq(server_pid, -1);
    if (server_pid == 0) {
        struct http_server_opts o = {.max_connections = 1000,
                                     .max_body_bytes = max_body,
                                     .connection_timeout_s = 30,
                                     .discard_bodies = discard_bodies};

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        close(pfd[0]);
        child.done_fd = pfd[1];
        child.server = http_server_start(fd, &o, handler, NULL);
        if (child.server == NULL)
            _exit(2);
        child_loop();
    }
    close(pfd[1]);
    close(fd);
    done_rd = pfd[0];
    curl_global_init(CURL_GLOBAL_ALL);
}

static void
stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
    }
    curl_global_cleanup();
}

struct reply {
    long status;
    char body[4096];
    size_t len;
    char allow[64];
    char retry_after[16];
    char ctype[64];
};

static size_t
on_body(char *p, size_t sz, size_t n, void *arg)
{
    struct reply *r = arg;
    size_t k = sz * n;

    if (k > sizeof(r->body) - 1 - r->len)
        k = sizeof(r->body) - 1 - r->len;
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = '\0';
    return sz * n;
}

static void
header_value(const char *line, size_t n, const char *name, char *out,
             size_t cap)
{
    size_t nl = strlen(name);

    if (n > nl + 1 && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
        size_t i = nl + 1, k = 0;

        while (i < n && line[i] == ' ')
            i++;
        while (i < n && line[i] != '\r' && line[i] != '\n' && k < cap - 1)
            out[k++] = line[i++];
        out[k] = '\0';
    }
}

static size_t
on_header(char *p, size_t sz, size_t n, void *arg)
{
    struct reply *r = arg;

    header_value(p, sz * n, "Allow", r->allow, sizeof(r->allow));
    header_value(p, sz * n, "Retry-After", r->retry_after,
                 sizeof(r->retry_after));
    header_value(p, sz * n, "Content-Type", r->ctype, sizeof(r->ctype));
    return sz * n;
}

/* request - one request on handle h (reused: keep-alive); body NULL for no
 * body.  Returns curl's result. */
static CURLcode
request(CURL *h, const char *method, const char *path, const char *body,
        size_t blen, struct reply *r)
{
    char url[512];

    memset(r, 0, sizeof(*r));
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    } else {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    /* HEAD: the answer has headers alone; curl must not wait for a body. */
    curl_easy_setopt(h, CURLOPT_NOBODY, strcmp(method, "HEAD") == 0 ? 1L : 0L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    return rc;
}

/* wait_done - the next on_done byte, within 10 s. */
static int
wait_done(void)
{
    struct pollfd p = {.fd = done_rd, .events = POLLIN};
    char c;

    cr_assert_eq(poll(&p, 1, 10000), 1, "no on_done within 10 s");
    cr_assert_eq(read(done_rd, &c, 1), 1);
    return c == '1';
}

static void
setup(void)
{
    start_server(64 * 1024, 0);
}

static void
setup_discard(void)
{
    start_server(64 * 1024, 1);
}

TestSuite(http_server, .init = setup, .fini = stop_server, .timeout = 60);

Test(http_server, keep_alive_reuses_one_connection_for_100_requests)
{
    CURL *h = curl_easy_init();
    struct reply r;
    long connects, total = 0;
    int i;

    for (i = 0; i < 100; i++) {
        cr_assert_eq(request(h, "GET", "/health", NULL, 0, &r), CURLE_OK);
        cr_assert_eq(r.status, 200);
        cr_assert_str_eq(r.body, "{\"ok\": true}");
        cr_assert_str_eq(r.ctype, "application/json");
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
        total += connects;
    }
    cr_assert_eq(total, 1, "%ld connections for 100 GETs", total);
    for (i = 0; i < 100; i++) {
        cr_assert_eq(request(h, "POST", "/api/v1/ephemeral/push", "{}", 2, &r),
                     CURLE_OK);
        cr_assert_eq(r.status, 200);
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
        total += connects;
    }
    cr_assert_eq(total, 1, "%ld connections for 100 more POSTs", total);
    curl_easy_cleanup(h);
}

Test(http_server, unknown_path_is_404_not_found)
{
    CURL *h = curl_easy_init();
    struct reply r;

    cr_assert_eq(request(h, "GET", "/nope", NULL, 0, &r), CURLE_OK);
    cr_assert_eq(r.status, 404);
    cr_assert_str_eq(r.body,
                     "{\"error\": \"no such route\", \"code\": \"not_found\"}");
    cr_assert_eq(request(h, "POST", "/api/v1/ephemeral/pushy", "{}", 2, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 404);
    cr_assert_eq(
        request(h, "GET", "/api/v1/ephemeral/queues//depth", NULL, 0, &r),
        CURLE_OK);
    cr_assert_eq(r.status, 404);
    curl_easy_cleanup(h);
}

Test(http_server, wrong_method_is_405_with_allow)
{
    CURL *h = curl_easy_init();
    struct reply r;
    long connects, total = 0;

    cr_assert_eq(request(h, "GET", "/api/v1/ephemeral/push", NULL, 0, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 405);
    cr_assert_str_eq(r.allow, "POST");
    cr_assert(strstr(r.body, "\"code\": \"method_not_allowed\"") != NULL);
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    total += connects;
    cr_assert_eq(request(h, "POST", "/health", "{\"a\": 1}", 8, &r), CURLE_OK);
    cr_assert_eq(r.status, 405);
    cr_assert_str_eq(r.allow, "GET, HEAD");
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    total += connects;
    /* HEAD reads; a pop would change what it reads: GET or POST. */
    cr_assert_eq(request(h, "HEAD", "/health", NULL, 0, &r), CURLE_OK);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(r.len, 0, "HEAD sent a body");
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    total += connects;
    cr_assert_eq(
        request(h, "HEAD", "/api/v1/ephemeral/pop?queue=q", NULL, 0, &r),
        CURLE_OK);
    cr_assert_eq(r.status, 405);
    cr_assert_str_eq(r.allow, "GET, POST");
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    total += connects;
    cr_assert_eq(request(h, "GET", "/api/v1/ephemeral/queues/q", NULL, 0, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 405);
    cr_assert_str_eq(r.allow, "DELETE");
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    total += connects;
    cr_assert_eq(total, 1, "a 405 must keep the connection (%ld)", total);
    curl_easy_cleanup(h);
}

Test(http_server, body_over_max_is_413_payload_too_large)
{
    CURL *h = curl_easy_init();
    /* Over the 64 KiB limit but under twice it: the server reads the body
     * to its end and answers.  Past twice the limit it closes instead, and
     * the client may then meet the reset before it reads any answer. */
    size_t n = 100 * 1024;
    char *big = malloc(n);
    struct reply r;

    memset(big, 'x', n);
    cr_assert_eq(request(h, "POST", "/api/v1/ephemeral/push", big, n, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 413);
    cr_assert(strstr(r.body, "\"code\": \"payload_too_large\"") != NULL);
    /* the next request still works, on a new connection if need be */
    cr_assert_eq(request(h, "GET", "/health", NULL, 0, &r), CURLE_OK);
    cr_assert_eq(r.status, 200);
    free(big);
    curl_easy_cleanup(h);
}

Test(http_server, handler_gets_the_whole_body)
{
    CURL *h = curl_easy_init();
    size_t n = 60 * 1024, i, sum = 0;
    char *body = malloc(n), want[64];
    struct reply r;

    for (i = 0; i < n; i++) {
        body[i] = (char)('a' + i % 26);
        sum += (unsigned char)body[i];
    }
    cr_assert_eq(request(h, "POST", "/api/v1/ephemeral/push", body, n, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 200);
    snprintf(want, sizeof(want), "{\"len\": %zu, \"sum\": %zu}", n, sum);
    cr_assert_str_eq(r.body, want);
    cr_assert_eq(request(h, "POST", "/api/v1/ephemeral/push", "", 0, &r),
                 CURLE_OK);
    cr_assert_str_eq(r.body, "{\"len\": 0, \"sum\": 0}");
    free(body);
    curl_easy_cleanup(h);
}

Test(http_server, path_parameter_is_percent_decoded)
{
    CURL *h = curl_easy_init();
    struct reply r;

    cr_assert_eq(request(h, "DELETE", "/api/v1/ephemeral/queues/inbox%2F7%20x",
                         NULL, 0, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "{\"param\": \"inbox/7 x\"}");
    cr_assert_eq(
        request(h, "DELETE", "/api/v1/ephemeral/queue/a+b%3Ac", NULL, 0, &r),
        CURLE_OK);
    cr_assert_str_eq(r.body, "{\"param\": \"a+b:c\"}");
    cr_assert_eq(
        request(h, "DELETE", "/api/v1/ephemeral/queue/a%zz", NULL, 0, &r),
        CURLE_OK);
    cr_assert_eq(r.status, 400);
    curl_easy_cleanup(h);
}

Test(http_server, retryable_errors_carry_retry_after)
{
    CURL *h = curl_easy_init();
    struct reply r;

    cr_assert_eq(
        request(h, "POST", "/api/v1/ephemeral/reset?errno=28", "{}", 2, &r),
        CURLE_OK); /* ENOSPC */
    cr_assert_eq(r.status, 429);
    cr_assert_str_eq(r.retry_after, "1");
    cr_assert(strstr(r.body, "\"code\": \"queue_full\"") != NULL);
    cr_assert_eq(
        request(h, "POST", "/api/v1/ephemeral/reset?errno=105", "{}", 2, &r),
        CURLE_OK); /* ENOBUFS */
    cr_assert_eq(r.status, 503);
    cr_assert_str_eq(r.retry_after, "1");
    cr_assert_eq(
        request(h, "POST", "/api/v1/ephemeral/reset?errno=2", "{}", 2, &r),
        CURLE_OK); /* ENOENT */
    cr_assert_eq(r.status, 404);
    cr_assert_str_eq(r.retry_after, "");
    curl_easy_cleanup(h);
}

Test(http_server, suspended_request_is_answered_after_resume)
{
    CURL *h = curl_easy_init();
    struct reply r;
    long connects, total = 0;
    int i;

    for (i = 0; i < 20; i++) {
        cr_assert_eq(
            request(h, "GET", "/api/v1/ephemeral/pop?queue=q", NULL, 0, &r),
            CURLE_OK);
        cr_assert_eq(r.status, 200);
        cr_assert_str_eq(r.body, "{\"parked\": true}");
        cr_assert_eq(wait_done(), 1, "on_done must report the reply sent");
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
        total += connects;
    }
    cr_assert_eq(total, 1, "parking must keep the connection (%ld)", total);
    curl_easy_cleanup(h);
}

struct feed {
    size_t left;
};

static size_t
feed_read(char *p, size_t sz, size_t n, void *arg)
{
    struct feed *f = arg;
    size_t k = sz * n < f->left ? sz * n : f->left;

    memset(p, 'y', k);
    f->left -= k;
    return k;
}

/* chunked bodies have no Content-Length: the limit applies as they come */
static CURLcode
chunked_post(size_t n, struct reply *r)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hd =
        curl_slist_append(NULL, "Transfer-Encoding: chunked");
    struct feed f = {.left = n};
    char url[256];
    CURLcode rc;

    memset(r, 0, sizeof(*r));
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v1/ephemeral/push",
             port);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, feed_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &f);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hd);
    return rc;
}

Test(http_server, chunked_body_is_accumulated_and_bounded)
{
    struct reply r;
    CURLcode rc;

    cr_assert_eq(chunked_post(50000, &r), CURLE_OK);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "{\"len\": 50000, \"sum\": 6050000}");
    rc = chunked_post(1 << 20, &r);
    cr_assert(rc != CURLE_OK || r.status == 413, "rc %d status %ld", rc,
              r.status);
    cr_assert_neq(r.status, 200);
}

/* raw_connect - a plain TCP connection to the server. */
static int
raw_connect(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    cr_assert_neq(fd, -1);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* raw_send - send a GET request on fd. */
static void
raw_send(int fd, const char *path)
{
    char req[256];
    int n =
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);

    cr_assert_eq(write(fd, req, (size_t)n), n);
}

/* wait_parked - poll /metrics until n requests are parked. */
static void
wait_parked(CURL *h, const char *want)
{
    struct reply r;
    int i;

    for (i = 0; i < 1000; i++) {
        cr_assert_eq(request(h, "GET", "/metrics", NULL, 0, &r), CURLE_OK);
        if (strcmp(r.body, want) == 0)
            return;
        usleep(10000);
    }
    cr_assert_str_eq(r.body, want);
}

Test(http_server, quiesce_stops_accepting_but_serves_open_connections)
{
    CURL *h = curl_easy_init(), *h2 = curl_easy_init();
    struct reply r;

    cr_assert_eq(request(h, "GET", "/metrics?quiesce=1", NULL, 0, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "up 1 parked 0\n");
    cr_assert_str_eq(r.ctype, "text/plain; version=0.0.4");
    /* the open connection is still served */
    cr_assert_eq(request(h, "GET", "/health", NULL, 0, &r), CURLE_OK);
    cr_assert_eq(r.status, 200);
    /* nobody listens any more */
    cr_assert_eq(request(h2, "GET", "/health", NULL, 0, &r),
                 CURLE_COULDNT_CONNECT);
    curl_easy_cleanup(h);
    curl_easy_cleanup(h2);
}

Test(http_server, stop_ends_parked_requests_unsent)
{
    int held = raw_connect(), other = raw_connect();
    char buf[512];
    CURL *h = curl_easy_init();
    struct reply r;

    raw_send(held, "/api/v1/ephemeral/pop?hold=1");
    raw_send(other, "/api/v1/ephemeral/pop?hold=1");
    wait_parked(h, "up 3 parked 2\n");
    cr_assert_eq(request(h, "GET", "/metrics?stop=1", NULL, 0, &r), CURLE_OK);
    cr_assert_eq(wait_done(), 0);
    cr_assert_eq(wait_done(), 0);
    /* the parked connections close without a response */
    cr_assert_eq(read(held, buf, sizeof(buf)), 0);
    cr_assert_eq(read(other, buf, sizeof(buf)), 0);
    close(held);
    close(other);
    curl_easy_cleanup(h);
}

Test(http_server, on_done_reports_failure_when_client_leaves_while_parked)
{
    int fd = raw_connect();
    CURL *h = curl_easy_init();

    raw_send(fd, "/api/v1/ephemeral/pop?hold=1");
    wait_parked(h, "up 2 parked 1\n");
    close(fd);
    cr_assert_eq(wait_done(), 0, "on_done must report the reply unsent");
    wait_parked(h, "up 1 parked 0\n");
    curl_easy_cleanup(h);
}

/* discard_bodies (the master's drain port): the handler runs with no body,
 * the connection carries on, and a body over the limit is still 413. */
Test(http_server_discard, handler_runs_without_the_body_it_read,
     .init = setup_discard, .fini = stop_server, .timeout = 60)
{
    CURL *h = curl_easy_init();
    size_t n = 60 * 1024;
    char *body = malloc(n);
    struct reply r;
    long connects, total = 0;

    memset(body, 'x', n);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(request(h, "POST", "/api/v1/ephemeral/push", body, n, &r),
                     CURLE_OK);
        cr_assert_eq(r.status, 200);
        cr_assert_str_eq(r.body, "{\"len\": 0, \"sum\": 0}");
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
        total += connects;
    }
    cr_assert_eq(total, 1, "%ld connections for 3 POSTs", total);
    free(body);
    n = 256 * 1024;
    body = malloc(n);
    memset(body, 'x', n);
    cr_assert_eq(request(h, "POST", "/api/v1/ephemeral/push", body, n, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 413);
    free(body);
    curl_easy_cleanup(h);
}

/* edge.h, D21: MHD zeroes the free part of a first request's read buffer
 * (half its 24 KiB) when the answer starts, and the whole of it after a
 * request; a body that waits gives those pages back (a trim of its own
 * before stream_body.c's finds them; one after finds none left), and the
 * connection serves on. */
Test(http_server, a_waiting_body_gives_back_its_zeroed_pages)
{
    static const char *const paths[] = {
        "/api/v1/ephemeral/subscribe?self=1", "/api/v1/ephemeral/subscribe",
        "/api/v1/ephemeral/subscribe?self=1", "/api/v1/ephemeral/subscribe"};
    CURL *h = curl_easy_init();
    struct reply r;
    long connects, total = 0;
    long long given;

    for (int i = 0; i < 4; i++) {
        cr_assert_eq(request(h, "GET", paths[i], NULL, 0, &r), CURLE_OK);
        cr_assert_eq(r.status, 200);
        cr_assert_eq(sscanf(r.body, "open\ngiven %lld\n", &given), 1, "%s",
                     r.body);
        /* the first request: two whole pages of the 12 KiB at least; a
         * later one (the whole pool zeroed): three; none after
         * stream_body.c's trim */
        if (i % 2 == 1)
            cr_assert_eq(given, 0, "request %d: %lld", i, given);
        else
            cr_assert_geq(given, i == 0 ? 8192 : 12288, "request %d: %lld", i,
                          given);
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
        total += connects;
        cr_assert_eq(request(h, "GET", "/health", NULL, 0, &r), CURLE_OK);
        cr_assert_str_eq(r.body, "{\"ok\": true}");
    }
    cr_assert_eq(total, 1, "%ld connections", total);
    curl_easy_cleanup(h);
}
