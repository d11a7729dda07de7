/*
 * test_client.c - http/client.c against a libmicrohttpd server in a forked
 * child, the client driven by a small epoll loop like a worker's.
 *
 * The server: /echo answers "<method> <x-test header> <body length>\n"
 * followed by the body; /busy answers 503 with Retry-After; /hang never
 * answers.  It counts the connections it accepts in a shared page, which
 * is how keep-alive is checked.  Streams have a server of their own, at
 * the end.
 */
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <microhttpd.h>

#include "http/client.h"
#include "http/sse_parse.h"

#define TAG_BASE ((uint64_t)7 << 32)

/* ---- the server --------------------------------------------------------- */

struct srv_shared {
    _Atomic unsigned accepted;
};

struct srv_req {
    struct http_buf body;
    int suspended;
};

static void
srv_on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                  enum MHD_ConnectionNotificationCode code)
{
    struct srv_shared *sh = cls;

    (void)conn;
    (void)socket_ctx;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&sh->accepted, 1);
}

static void
srv_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
              enum MHD_RequestTerminationCode toe)
{
    struct srv_req *r = *req_cls;

    (void)cls;
    (void)conn;
    (void)toe;
    if (r != NULL) {
        http_buf_free(&r->body);
        free(r);
    }
}

/* Queue status with body and a content type. */
static enum MHD_Result
srv_answer(struct MHD_Connection *conn, unsigned status, const char *type,
           const struct http_buf *body)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        body->len, body->data, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result rc;

    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "7");
    rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* The access handler: never answers on the first call (MHD 0.9.75 would
 * close the connection after the reply, http/edge.h D1). */
static enum MHD_Result
srv_handler(void *cls, struct MHD_Connection *conn, const char *url,
            const char *method, const char *version, const char *upload,
            size_t *upload_size, void **req_cls)
{
    struct srv_req *r = *req_cls;
    struct http_buf out = {0};
    const char *test;
    enum MHD_Result rc;

    (void)cls;
    (void)version;
    if (r == NULL) {
        *req_cls = r = calloc(1, sizeof(*r));
        return r != NULL ? MHD_YES : MHD_NO;
    }
    if (*upload_size > 0) {
        http_buf_append(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, "/hang") == 0) {
        if (!r->suspended)
            MHD_suspend_connection(conn);
        r->suspended = 1;
        return MHD_YES;
    }
    test = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Test");
    http_buf_printf(&out, "%s %s %zu\n", method, test ? test : "-",
                    r->body.len);
    http_buf_append(&out, r->body.data, r->body.len);
    rc = srv_answer(conn, strcmp(url, "/busy") == 0 ? 503 : 200,
                    "text/plain; charset=utf-8", &out);
    http_buf_free(&out);
    return rc;
}

/* A listening socket on 127.0.0.1, port 0; its port in *port. */
static int
listen_any(unsigned short *port, int do_listen)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    cr_assert_neq(fd, -1);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    if (do_listen)
        cr_assert_eq(listen(fd, 512), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* Fork the server on a socket made here; it dies with the test. */
static struct srv_shared *
srv_start(unsigned short *port)
{
    struct srv_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fd = listen_any(port, 1);
    pid_t parent = getpid(), pid;

    cr_assert_neq(sh, MAP_FAILED);
    /* The child must not touch Criterion: with --full-stats even a passing
     * assertion talks to the runner over a socket it shares with us. */
    pid = fork();
    if (pid == 0) {
        struct MHD_Daemon *d;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        d = MHD_start_daemon(
            MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0, NULL,
            NULL, srv_handler, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
            MHD_OPTION_NOTIFY_CONNECTION, srv_on_connection, sh,
            MHD_OPTION_NOTIFY_COMPLETED, srv_completed, NULL,
            MHD_OPTION_CONNECTION_LIMIT, 1000u, MHD_OPTION_END);
        if (d == NULL)
            _exit(3);
        for (;;)
            pause();
    }
    cr_assert_neq(pid, -1);
    close(fd);
    return sh;
}

/* ---- the loop ----------------------------------------------------------- */

struct loop {
    int epfd;
    struct http_client *c;
    unsigned done;
    int foreign_tags;
};

static void
loop_init(struct loop *l)
{
    memset(l, 0, sizeof(*l));
    cr_assert_eq(http_client_global_init(), 0);
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    cr_assert_neq(l->epfd, -1);
    l->c = http_client_new(l->epfd, TAG_BASE);
    cr_assert_not_null(l->c);
}

static void
loop_fini(struct loop *l)
{
    http_client_free(l->c);
    close(l->epfd);
}

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Run the loop until l->done reaches want or budget_ms pass. */
static void
loop_run(struct loop *l, unsigned want, unsigned budget_ms)
{
    uint64_t end = now_ms() + budget_ms;
    struct epoll_event ev[64];

    while (l->done < want && now_ms() < end) {
        int t = http_client_timeout_ms(l->c);
        int n = epoll_wait(l->epfd, ev, 64, t < 0 || t > 100 ? 100 : t);

        for (int i = 0; i < n; i++) {
            uint64_t tag = ev[i].data.u64;

            if ((tag & HTTP_CLIENT_TAG_MASK) != TAG_BASE) {
                l->foreign_tags++;
                continue;
            }
            http_client_on_event(l->c, (int)(uint32_t)tag, ev[i].events);
        }
        if (http_client_timeout_ms(l->c) == 0)
            http_client_on_timeout(l->c);
    }
    cr_assert_eq(l->done, want, "%u of %u requests done in %u ms", l->done,
                 want, budget_ms);
    cr_assert_eq(l->foreign_tags, 0);
}

/* ---- requests and what came back --------------------------------------- */

struct result {
    struct loop *l;
    unsigned calls;
    int err;
    int curl_code;
    unsigned status;
    struct http_buf body;
    char ctype[64];
    long retry_after;
    uint64_t at_ms;
};

/* done: keep everything, take the body's bytes. */
static void
on_done(void *arg, struct http_client_resp *resp)
{
    struct result *r = arg;

    r->calls++;
    r->err = resp->err;
    r->curl_code = resp->curl_code;
    r->status = resp->status;
    r->body = resp->body;
    http_buf_init(&resp->body);
    snprintf(r->ctype, sizeof(r->ctype), "%s",
             resp->content_type ? resp->content_type : "");
    r->retry_after = resp->retry_after_s;
    r->at_ms = now_ms();
    r->l->done++;
    cr_assert_eq(resp->err == 0, resp->error[0] == '\0', "error '%s'",
                 resp->error);
}

static char url_buf[8][128];

/* "http://127.0.0.1:<port><path>" (a few live at once). */
static const char *
url(unsigned short port, const char *path)
{
    static unsigned next;
    char *u = url_buf[next++ % 8];

    snprintf(u, sizeof(url_buf[0]), "http://127.0.0.1:%u%s", port, path);
    return u;
}

static void
start(struct loop *l, struct result *r, const char *method, const char *u,
      const char *body, size_t len, unsigned timeout_ms)
{
    static const char *const hdr[] = {"X-Test: hello"};
    struct http_client_req req = {.method = method,
                                  .url = u,
                                  .headers = hdr,
                                  .nheaders = 1,
                                  .body = body,
                                  .body_len = len,
                                  .timeout_ms = timeout_ms};

    r->l = l;
    cr_assert_eq(http_client_request(l->c, &req, on_done, r), 0);
}

static void
expect_body(const struct result *r, const char *want)
{
    cr_assert_eq(r->err, 0, "err %d", r->err);
    cr_assert_eq(r->body.len, strlen(want), "body '%.*s'", (int)r->body.len,
                 r->body.data ? r->body.data : "");
    cr_assert_eq(memcmp(r->body.data, want, r->body.len), 0);
}

Test(http_client, get_round_trip)
{
    unsigned short port;
    struct srv_shared *sh = srv_start(&port);
    struct loop l;
    struct result r = {0};

    loop_init(&l);
    start(&l, &r, "GET", url(port, "/echo"), NULL, 0, 10000);
    cr_assert_eq(http_client_pending(l.c), 1);
    loop_run(&l, 1, 10000);
    cr_assert_eq(r.status, 200);
    expect_body(&r, "GET hello 0\n");
    cr_assert_str_eq(r.ctype, "text/plain; charset=utf-8");
    cr_assert_eq(r.retry_after, 0);
    cr_assert_eq(http_client_pending(l.c), 0);
    cr_assert_eq(atomic_load(&sh->accepted), 1);
    http_buf_free(&r.body);
    loop_fini(&l);
}

Test(http_client, post_and_delete_round_trip)
{
    unsigned short port;
    struct loop l;
    struct result r[3] = {{0}};
    static const char body[] = "{\"queue\":\"q\",\"messages\":[]}";

    srv_start(&port);
    loop_init(&l);
    start(&l, &r[0], "POST", url(port, "/echo"), body, sizeof(body) - 1, 10000);
    start(&l, &r[1], "POST", url(port, "/echo"), NULL, 0, 10000);
    start(&l, &r[2], "DELETE", url(port, "/echo"), NULL, 0, 10000);
    loop_run(&l, 3, 10000);
    expect_body(&r[0], "POST hello 27\n{\"queue\":\"q\",\"messages\":[]}");
    expect_body(&r[1], "POST hello 0\n");
    expect_body(&r[2], "DELETE hello 0\n");
    for (int i = 0; i < 3; i++)
        http_buf_free(&r[i].body);
    loop_fini(&l);
}

/* Megabytes both ways, without a 100-continue pause. */
Test(http_client, large_body_round_trips)
{
    unsigned short port;
    struct loop l;
    struct result r = {0};
    size_t len = (size_t)3 << 20, head;
    char *body = malloc(len);

    cr_assert_not_null(body);
    for (size_t i = 0; i < len; i++)
        body[i] = (char)('a' + i % 23);
    srv_start(&port);
    loop_init(&l);
    start(&l, &r, "POST", url(port, "/echo"), body, len, 20000);
    loop_run(&l, 1, 20000);
    cr_assert_eq(r.err, 0);
    head = strlen("POST hello 3145728\n");
    cr_assert_eq(r.body.len, head + len);
    cr_assert_eq(memcmp(r.body.data, "POST hello 3145728\n", head), 0);
    cr_assert_eq(memcmp(r.body.data + head, body, len), 0);
    http_buf_free(&r.body);
    free(body);
    loop_fini(&l);
}

/* An answer longer than the request's max_body stops the transfer. */
Test(http_client, an_answer_over_max_body_fails)
{
    unsigned short port;
    struct loop l;
    struct result r = {0};
    size_t len = (size_t)3 << 20;
    char *body = calloc(1, len);
    struct http_client_req req = {.method = "POST",
                                  .url = NULL,
                                  .body = body,
                                  .body_len = len,
                                  .timeout_ms = 20000,
                                  .max_body = (size_t)1 << 20};

    cr_assert_not_null(body);
    srv_start(&port);
    loop_init(&l);
    req.url = url(port, "/echo");
    r.l = &l;
    cr_assert_eq(http_client_request(l.c, &req, on_done, &r), 0);
    loop_run(&l, 1, 20000);
    cr_assert_eq(r.err, -EMSGSIZE, "err %d", r.err);
    cr_assert_leq(r.body.len, (size_t)1 << 20);
    http_buf_free(&r.body);
    free(body);
    loop_fini(&l);
}

Test(http_client, error_status_carries_retry_after)
{
    unsigned short port;
    struct loop l;
    struct result r = {0};

    srv_start(&port);
    loop_init(&l);
    start(&l, &r, "GET", url(port, "/busy"), NULL, 0, 10000);
    loop_run(&l, 1, 10000);
    cr_assert_eq(r.err, 0);
    cr_assert_eq(r.status, 503);
    cr_assert_eq(r.retry_after, 7);
    http_buf_free(&r.body);
    loop_fini(&l);
}

Test(http_client, hundred_concurrent_requests_complete)
{
    unsigned short port;
    struct loop l;
    static struct result r[100];
    static char body[100][16], want[100][64];

    srv_start(&port);
    loop_init(&l);
    for (int i = 0; i < 100; i++) {
        int n = snprintf(body[i], sizeof(body[i]), "request-%d", i);

        snprintf(want[i], sizeof(want[i]), "POST hello %d\n%.16s", n, body[i]);
        start(&l, &r[i], "POST", url(port, "/echo"), body[i], (size_t)n, 20000);
    }
    cr_assert_eq(http_client_pending(l.c), 100);
    loop_run(&l, 100, 20000);
    for (int i = 0; i < 100; i++) {
        cr_assert_eq(r[i].calls, 1);
        cr_assert_eq(r[i].status, 200);
        expect_body(&r[i], want[i]);
        http_buf_free(&r[i].body);
    }
    loop_fini(&l);
}

/* ---- keep-alive ---------------------------------------------------------- */

/* A chain: each done starts the next request until count are done. */
struct chain {
    struct loop *l;
    unsigned short port;
    unsigned count;
    struct result r;
};

static void
chain_done(void *arg, struct http_client_resp *resp)
{
    struct chain *ch = arg;
    struct http_client_req req = {
        .method = "GET", .url = url(ch->port, "/echo"), .timeout_ms = 10000};

    cr_assert_eq(resp->err, 0);
    cr_assert_eq(resp->status, 200);
    if (++ch->l->done < ch->count)
        cr_assert_eq(http_client_request(ch->l->c, &req, chain_done, ch), 0);
}

/* count requests one after another, each started from the last one's
 * done. */
static void
run_chain(struct loop *l, unsigned short port, unsigned count)
{
    struct chain ch = {.l = l, .port = port, .count = l->done + count};
    struct http_client_req req = {
        .method = "GET", .url = url(port, "/echo"), .timeout_ms = 10000};

    cr_assert_eq(http_client_request(l->c, &req, chain_done, &ch), 0);
    loop_run(l, ch.count, 20000);
}

Test(http_client, sequential_requests_reuse_one_connection)
{
    unsigned short port;
    struct srv_shared *sh = srv_start(&port);
    struct loop l;

    loop_init(&l);
    run_chain(&l, port, 50);
    cr_assert_eq(atomic_load(&sh->accepted), 1);
    loop_fini(&l);
}

/* After a burst, the next requests ride the connections it left open. */
Test(http_client, connections_of_a_burst_are_reused)
{
    unsigned short port;
    struct srv_shared *sh = srv_start(&port);
    struct loop l;
    static struct result r[50];
    unsigned after_burst;

    loop_init(&l);
    for (int i = 0; i < 50; i++)
        start(&l, &r[i], "GET", url(port, "/echo"), NULL, 0, 20000);
    loop_run(&l, 50, 20000);
    after_burst = atomic_load(&sh->accepted);
    cr_assert(after_burst >= 1 && after_burst <= 50, "%u", after_burst);
    run_chain(&l, port, 30);
    cr_assert_eq(atomic_load(&sh->accepted), after_burst);
    for (int i = 0; i < 50; i++)
        http_buf_free(&r[i].body);
    loop_fini(&l);
}

/* ---- failures ------------------------------------------------------------ */

Test(http_client, timeout_on_a_server_that_never_answers)
{
    unsigned short port;
    struct loop l;
    struct result r = {0};
    uint64_t t0;

    srv_start(&port);
    loop_init(&l);
    t0 = now_ms();
    start(&l, &r, "GET", url(port, "/hang"), NULL, 0, 300);
    loop_run(&l, 1, 20000);
    cr_assert_eq(r.err, -ETIMEDOUT);
    cr_assert_eq(r.curl_code, CURLE_OPERATION_TIMEDOUT);
    cr_assert_eq(r.status, 0);
    cr_assert_geq(r.at_ms - t0, 290);
    cr_assert_lt(r.at_ms - t0, 10000);
    loop_fini(&l);
}

Test(http_client, connection_refused_reports_failure)
{
    unsigned short port;
    int fd = listen_any(&port, 0); /* bound, not listening: refused */
    struct loop l;
    struct result r = {0};

    loop_init(&l);
    start(&l, &r, "POST", url(port, "/echo"), "x", 1, 10000);
    loop_run(&l, 1, 10000);
    cr_assert_eq(r.err, -ECONNREFUSED);
    cr_assert_eq(r.curl_code, CURLE_COULDNT_CONNECT);
    cr_assert_eq(r.status, 0);
    cr_assert_eq(r.body.len, 0);
    close(fd);
    loop_fini(&l);
}

Test(http_client, only_http_urls_are_served)
{
    struct loop l;
    struct result r = {0};

    loop_init(&l);
    start(&l, &r, "GET", "file:///etc/passwd", NULL, 0, 10000);
    loop_run(&l, 1, 10000);
    cr_assert_eq(r.err, -EINVAL);
    cr_assert_eq(r.curl_code, CURLE_UNSUPPORTED_PROTOCOL);
    cr_assert_eq(r.body.len, 0);
    loop_fini(&l);
}

Test(http_client, incomplete_requests_are_refused)
{
    struct loop l;
    struct result r = {0};
    struct http_client_req req = {.method = "GET",
                                  .url = "http://127.0.0.1:1/"};

    loop_init(&l);
    req.method = NULL;
    cr_assert_eq(http_client_request(l.c, &req, on_done, &r), -EINVAL);
    req.method = "POST";
    req.body_len = 3;
    cr_assert_eq(http_client_request(l.c, &req, on_done, &r), -EINVAL);
    req.body_len = 0;
    cr_assert_eq(http_client_request(l.c, &req, NULL, &r), -EINVAL);
    cr_assert_eq(http_client_pending(l.c), 0);
    cr_assert_eq(http_client_timeout_ms(l.c), -1);
    loop_fini(&l);
}

Test(http_client, tag_base_must_leave_the_fd_bits_free)
{
    cr_assert_eq(http_client_global_init(), 0);
    cr_assert_null(http_client_new(0, TAG_BASE | 1));
}

/* ---- cancelling ---------------------------------------------------------- */

Test(http_client, cancel_drops_requests_without_done)
{
    unsigned short port;
    struct srv_shared *sh = srv_start(&port);
    struct loop l;
    struct result hang[2] = {{0}}, echo = {0};

    loop_init(&l);
    start(&l, &hang[0], "GET", url(port, "/hang"), NULL, 0, 60000);
    start(&l, &hang[1], "GET", url(port, "/hang"), NULL, 0, 60000);
    start(&l, &echo, "GET", url(port, "/echo"), NULL, 0, 10000);
    loop_run(&l, 1, 10000);
    cr_assert_eq(echo.status, 200);
    cr_assert_eq(atomic_load(&sh->accepted), 3);
    cr_assert_eq(http_client_cancel(l.c, &hang[0]), 1);
    cr_assert_eq(http_client_pending(l.c), 1);
    cr_assert_eq(http_client_cancel(l.c, &hang[0]), 0);
    http_client_cancel_all(l.c);
    cr_assert_eq(http_client_pending(l.c), 0);
    /* The client still works; a cancelled connection is not reused. */
    run_chain(&l, port, 3);
    cr_assert_eq(hang[0].calls + hang[1].calls, 0);
    cr_assert_eq(atomic_load(&sh->accepted), 3);
    http_buf_free(&echo.body);
    loop_fini(&l);
}

/* Freeing with requests in flight runs no done and leaks nothing (ASan's
 * leak check runs when the test process exits). */
Test(http_client, free_with_requests_in_flight)
{
    unsigned short port;
    struct srv_shared *sh = srv_start(&port);
    struct loop l;
    static struct result r[5];
    uint64_t end;

    loop_init(&l);
    for (int i = 0; i < 5; i++) {
        start(&l, &r[i], "POST", url(port, "/hang"), "x", 1, 60000);
        r[i].l = &l;
    }
    /* Drive the loop until all five are connected. */
    end = now_ms() + 10000;
    while (atomic_load(&sh->accepted) < 5 && now_ms() < end) {
        struct epoll_event ev[8];
        int n = epoll_wait(l.epfd, ev, 8, 10);

        for (int i = 0; i < n; i++)
            http_client_on_event(l.c, (int)(uint32_t)ev[i].data.u64,
                                 ev[i].events);
        if (http_client_timeout_ms(l.c) == 0)
            http_client_on_timeout(l.c);
    }
    cr_assert_eq(atomic_load(&sh->accepted), 5);
    cr_assert_eq(http_client_pending(l.c), 5);
    loop_fini(&l);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(r[i].calls, 0);
}

/* ---- streams -------------------------------------------------------------
 *
 * A server of our own, by hand on a socket, so that each way a stream ends
 * is the test's to choose and each way a client leaves is seen: per
 * connection a thread reads requests and answers, keep-alive:
 *   /sse?n=N&gap=MS&end=E  200 text/event-stream, chunked: N events
 *                          "data: <i>\n\n", one a chunk, MS apart; then
 *                          E = clean (the last chunk; the connection
 *                          stays), close (closed mid-body) or reset (an
 *                          RST mid-body)
 *   /silent                200 and its headers, then nothing
 *   anything else          404 with a JSON body
 * While it waits between events it watches the socket: the client going
 * away is recorded in gone[] as FIN or RST.
 */

#define SSE_CONNS 32

enum sse_gone { SSE_HERE, SSE_FIN, SSE_RST };

struct sse_shared {
    _Atomic unsigned conns;
    _Atomic int gone[SSE_CONNS]; /* enum sse_gone, per connection */
};

struct sse_conn {
    struct sse_shared *sh;
    int fd;
    unsigned i;
};

/* sse_read_request - read up to the end of a request's headers into buf;
 * the path and query in target.  0, or -1 when the client left. */
static int
sse_read_request(struct sse_conn *k, char *target, size_t cap)
{
    char buf[4096];
    size_t len = 0;

    while (memmem(buf, len, "\r\n\r\n", 4) == NULL) {
        ssize_t n = recv(k->fd, buf + len, sizeof(buf) - 1 - len, 0);

        if (n <= 0 || len + (size_t)n >= sizeof(buf) - 1) {
            atomic_store(&k->sh->gone[k->i],
                         n < 0 && errno == ECONNRESET ? SSE_RST : SSE_FIN);
            return -1;
        }
        len += (size_t)n;
    }
    buf[len] = '\0';
    if (sscanf(buf, "GET %1023s ", target) != 1 || cap < 1024)
        return -1;
    return 0;
}

/* sse_send - all of s; -1 when the client left. */
static int
sse_send(struct sse_conn *k, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(k->fd, s, n, MSG_NOSIGNAL);

        if (w <= 0) {
            atomic_store(&k->sh->gone[k->i], SSE_RST);
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* sse_wait - ms of pacing, watching for the client going away: -1 if it
 * did (recorded), else 0. */
static int
sse_wait(struct sse_conn *k, int ms)
{
    struct pollfd p = {.fd = k->fd, .events = POLLIN};
    char c;
    ssize_t n;

    if (poll(&p, 1, ms) == 0)
        return 0;
    n = recv(k->fd, &c, 1, 0);
    if (n > 0)
        return 0; /* nothing is sent mid-stream; not a way to leave */
    atomic_store(&k->sh->gone[k->i],
                 n < 0 && errno == ECONNRESET ? SSE_RST : SSE_FIN);
    return -1;
}

/* sse_events - the /sse answer; 1 when the connection may carry another
 * request. */
static int
sse_events(struct sse_conn *k, const char *target)
{
    static const char head[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Type: text/event-stream\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";
    int n = 0, gap = 0;
    char end[16] = "", chunk[64];
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    sscanf(target, "/sse?n=%d&gap=%d&end=%15s", &n, &gap, end);
    if (sse_send(k, head, sizeof(head) - 1) != 0)
        return 0;
    for (int i = 0; i < n; i++) {
        char ev[32];
        int len = snprintf(ev, sizeof(ev), "data: %d\n\n", i);

        snprintf(chunk, sizeof(chunk), "%x\r\n%s\r\n", len, ev);
        if (sse_wait(k, gap) != 0 || sse_send(k, chunk, strlen(chunk)) != 0)
            return 0;
    }
    if (strcmp(end, "reset") == 0)
        setsockopt(k->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    if (strcmp(end, "clean") != 0)
        return 0;
    return sse_send(k, "0\r\n\r\n", 5) == 0;
}

/* sse_serve - one connection's requests, until one ends it. */
static void *
sse_serve(void *arg)
{
    struct sse_conn *k = arg;
    static const char nf[] = "HTTP/1.1 404 Not Found\r\n"
                             "Content-Type: application/json\r\n"
                             "Content-Length: 19\r\n\r\n"
                             "{\"code\":\"no_such\"}\n";
    static const char silent[] = "HTTP/1.1 200 OK\r\n"
                                 "Content-Type: text/event-stream\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n";
    char target[1024];
    int again = 1;

    while (again && sse_read_request(k, target, sizeof(target)) == 0) {
        if (strncmp(target, "/sse?", 5) == 0) {
            again = sse_events(k, target);
        } else if (strcmp(target, "/silent") == 0) {
            again = 0;
            if (sse_send(k, silent, sizeof(silent) - 1) == 0)
                while (sse_wait(k, 1000) == 0)
                    ;
        } else {
            again = sse_send(k, nf, sizeof(nf) - 1) == 0;
        }
    }
    close(k->fd);
    free(k);
    return NULL;
}

/* Fork the stream server; it dies with the test. */
static struct sse_shared *
sse_start(unsigned short *port)
{
    struct sse_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fd = listen_any(port, 1);
    pid_t parent = getpid(), pid;

    cr_assert_neq(sh, MAP_FAILED);
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        for (;;) {
            struct sse_conn *k = calloc(1, sizeof(*k));
            pthread_t t;

            if (k == NULL || (k->fd = accept(fd, NULL, NULL)) == -1)
                _exit(3);
            k->sh = sh;
            k->i = atomic_fetch_add(&sh->conns, 1) % SSE_CONNS;
            if (pthread_create(&t, NULL, sse_serve, k) != 0)
                _exit(3);
            pthread_detach(t);
        }
    }
    cr_assert_neq(pid, -1);
    close(fd);
    return sh;
}

/* What a stream saw. */
struct stream {
    struct loop *l;
    struct http_client_stream *s;
    struct http_buf bytes; /* every chunk, in order */
    unsigned chunks;
    uint64_t first_ms, end_ms;
    int ends; /* on_end calls */
    struct result r;
    /* Set by the test, acted on in on_chunk at the chunk that brings
     * bytes.len to at least at: */
    size_t at;
    int fail;                                /* return this */
    int cancel_own;                          /* cancel this stream */
    struct http_client_stream *cancel_other; /* cancel that one */
};

static int
on_chunk(void *arg, const char *p, size_t len)
{
    struct stream *st = arg;

    cr_assert_gt(len, 0);
    cr_assert_eq(st->ends, 0);
    if (st->chunks++ == 0)
        st->first_ms = now_ms();
    http_buf_append(&st->bytes, p, len);
    if (st->at == 0 || st->bytes.len < st->at)
        return 0;
    st->at = 0;
    if (st->cancel_own)
        http_client_stream_cancel(st->s);
    if (st->cancel_other != NULL)
        http_client_stream_cancel(st->cancel_other);
    return st->fail;
}

static void
on_end(void *arg, struct http_client_resp *resp)
{
    struct stream *st = arg;

    st->ends++;
    st->end_ms = now_ms();
    st->r.l = st->l;
    on_done(&st->r, resp);
}

/* stream_start - a stream to target on the server at port, as a call to a
 * node's client port (so a cancel resets it) or by URL. */
static void
stream_start(struct loop *l, struct stream *st, unsigned short port,
             const char *target, int to_node, unsigned idle_s)
{
    static char addr[32];
    struct http_client_req req = {
        .method = "GET", .connect_timeout_ms = 5000, .idle_s = idle_s};

    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    if (to_node) {
        req.port = HTTP_CLIENT_PEER;
        req.addr = addr;
        req.target = target;
    } else {
        req.url = url(port, target);
    }
    st->l = l;
    cr_assert_eq(http_client_stream(l->c, &req, on_chunk, on_end, st, &st->s),
                 0);
}

/* loop_until - run the loop until cond(arg) holds or budget_ms pass. */
static void
loop_until(struct loop *l, int (*cond)(const void *), const void *arg,
           unsigned budget_ms)
{
    uint64_t end = now_ms() + budget_ms;

    while (!cond(arg) && now_ms() < end) {
        struct epoll_event ev[16];
        int t = http_client_timeout_ms(l->c);
        int n = epoll_wait(l->epfd, ev, 16, t < 0 || t > 20 ? 20 : t);

        for (int i = 0; i < n; i++)
            http_client_on_event(l->c, (int)(uint32_t)ev[i].data.u64,
                                 ev[i].events);
        if (http_client_timeout_ms(l->c) == 0)
            http_client_on_timeout(l->c);
    }
    cr_assert(cond(arg), "not within %u ms", budget_ms);
}

/* count_event - one event of the stream server: "<i>", in order. */
static int
count_event(void *arg, const struct http_sse_parsed *ev)
{
    int *n = arg;
    char want[16];

    snprintf(want, sizeof(want), "%d", (*n)++);
    cr_assert_str_eq(ev->data, want);
    return 0;
}

/* count_events - how many events the bytes hold, read as the worker reads
 * a peer's stream (http/sse_parse.h). */
static int
count_events(const struct http_buf *b)
{
    struct http_sse_parser p;
    int n = 0;

    http_sse_parse_init(&p, 1024);
    cr_assert_eq(http_sse_parse_feed(&p, b->data, b->len, count_event, &n), 0);
    http_sse_parse_free(&p);
    return n;
}

/* has_two - the stream got two events. */
static int
has_two(const void *arg)
{
    return count_events(&((const struct stream *)arg)->bytes) >= 2;
}

/* left - the server saw the client leave its first connection. */
static int
left(const void *arg)
{
    return atomic_load(&((const struct sse_shared *)arg)->gone[0]) != SSE_HERE;
}

/* The body comes as it is sent, chunk by chunk, long before the end; a
 * clean end is err 0 with the answer's status and type. */
Test(http_client, a_stream_delivers_its_body_as_it_comes)
{
    unsigned short port;
    struct loop l;
    struct stream st = {0};

    sse_start(&port);
    loop_init(&l);
    stream_start(&l, &st, port, "/sse?n=6&gap=100&end=clean", 1, 0);
    cr_assert_eq(http_client_pending(l.c), 1);
    loop_run(&l, 1, 20000);
    cr_assert_eq(st.ends, 1);
    cr_assert_eq(st.r.err, 0, "err %d", st.r.err);
    cr_assert_eq(st.r.status, 200);
    cr_assert_str_eq(st.r.ctype, "text/event-stream");
    cr_assert_eq(st.r.body.len, 0);
    cr_assert_geq(st.chunks, 3, "%u chunks", st.chunks);
    cr_assert_geq(st.end_ms - st.first_ms, 300);
    cr_assert_eq(count_events(&st.bytes), 6);
    cr_assert_eq(http_client_pending(l.c), 0);
    http_buf_free(&st.bytes);
    loop_fini(&l);
}

/* A cancel from outside any callback: no on_end, no more bytes, and a
 * node's connection is reset at once; the client goes on. */
Test(http_client, a_cancelled_stream_resets_its_connection)
{
    unsigned short port;
    struct sse_shared *sh = sse_start(&port);
    struct loop l;
    struct stream st = {0};
    size_t had;

    loop_init(&l);
    stream_start(&l, &st, port, "/sse?n=100000&gap=20&end=clean", 1, 0);
    loop_until(&l, has_two, &st, 10000);
    http_client_stream_cancel(st.s);
    cr_assert_eq(http_client_pending(l.c), 0);
    had = st.bytes.len;
    loop_until(&l, left, sh, 10000);
    cr_assert_eq(atomic_load(&sh->gone[0]), SSE_RST);
    cr_assert_eq(st.bytes.len, had);
    cr_assert_eq(st.ends, 0);
    /* The client goes on: another stream, to its clean end. */
    http_buf_free(&st.bytes);
    memset(&st, 0, sizeof(st));
    stream_start(&l, &st, port, "/sse?n=2&gap=10&end=clean", 1, 0);
    loop_run(&l, 1, 10000);
    cr_assert_eq(st.r.err, 0, "err %d", st.r.err);
    cr_assert_eq(count_events(&st.bytes), 2);
    http_buf_free(&st.bytes);
    loop_fini(&l);
}

/* A stream cancelled from inside its own on_chunk gets no byte more and
 * no on_end; its connection closes once libcurl has returned. */
Test(http_client, a_stream_cancelled_from_its_on_chunk_stops_there)
{
    unsigned short port;
    struct sse_shared *sh = sse_start(&port);
    struct loop l;
    struct stream st = {.at = 1, .cancel_own = 1};

    loop_init(&l);
    stream_start(&l, &st, port, "/sse?n=100000&gap=20&end=clean", 0, 0);
    loop_until(&l, left, sh, 10000);
    cr_assert_eq(http_client_pending(l.c), 0);
    cr_assert_eq(st.chunks, 1);
    cr_assert_eq(st.ends, 0);
    http_buf_free(&st.bytes);
    loop_fini(&l);
}

/* left2 - the server saw the client leave two connections. */
static int
left2(const void *arg)
{
    const struct sse_shared *sh = arg;

    return (atomic_load(&sh->gone[0]) != SSE_HERE) +
               (atomic_load(&sh->gone[1]) != SSE_HERE) ==
           2;
}

/* One stream's on_chunk cancels another (and http_client_cancel drops a
 * stream by its arg): the other ends there, with no on_end. */
Test(http_client, a_chunk_may_cancel_other_streams)
{
    unsigned short port;
    struct sse_shared *sh = sse_start(&port);
    struct loop l;
    struct stream a = {0}, b = {0};

    loop_init(&l);
    stream_start(&l, &b, port, "/sse?n=100000&gap=20&end=clean", 1, 0);
    loop_until(&l, has_two, &b, 10000);
    a.at = 1;
    a.cancel_other = b.s;
    stream_start(&l, &a, port, "/sse?n=100000&gap=20&end=clean", 1, 0);
    cr_assert_eq(http_client_pending(l.c), 2);
    loop_until(&l, has_two, &a, 10000);
    cr_assert_eq(http_client_pending(l.c), 1);
    cr_assert_eq(http_client_cancel(l.c, &a), 1);
    cr_assert_eq(http_client_pending(l.c), 0);
    loop_until(&l, left2, sh, 10000);
    cr_assert_eq(atomic_load(&sh->gone[0]), SSE_RST);
    cr_assert_eq(atomic_load(&sh->gone[1]), SSE_RST);
    cr_assert_eq(a.ends + b.ends, 0);
    http_buf_free(&a.bytes);
    http_buf_free(&b.bytes);
    loop_fini(&l);
}

/* on_chunk's error ends the stream: on_end has it, with the status. */
Test(http_client, an_error_from_on_chunk_ends_the_stream)
{
    unsigned short port;
    struct sse_shared *sh = sse_start(&port);
    struct loop l;
    struct stream st = {.at = 1, .fail = -EPROTO};

    loop_init(&l);
    stream_start(&l, &st, port, "/sse?n=100000&gap=20&end=clean", 1, 0);
    loop_run(&l, 1, 10000);
    cr_assert_eq(st.r.err, -EPROTO, "err %d", st.r.err);
    cr_assert_eq(st.r.status, 200);
    cr_assert_eq(st.chunks, 1);
    loop_until(&l, left, sh, 10000);
    http_buf_free(&st.bytes);
    loop_fini(&l);
}

/* A peer that closes or resets mid-body: every event sent arrived, and
 * on_end says the stream broke, with the status it had. */
Test(http_client, a_peer_gone_mid_stream_ends_it_with_econnreset)
{
    static const char *const how[] = {"/sse?n=3&gap=20&end=close",
                                      "/sse?n=3&gap=20&end=reset"};
    unsigned short port;
    struct loop l;

    sse_start(&port);
    loop_init(&l);
    for (int i = 0; i < 2; i++) {
        struct stream st = {0};

        stream_start(&l, &st, port, how[i], 1, 0);
        loop_run(&l, (unsigned)i + 1, 10000);
        cr_assert_eq(st.r.err, -ECONNRESET, "%s: err %d", how[i], st.r.err);
        cr_assert_eq(st.r.status, 200);
        cr_assert_eq(count_events(&st.bytes), 3);
        http_buf_free(&st.bytes);
    }
    loop_fini(&l);
}

/* Another status is not streamed: its body goes to on_end. */
Test(http_client, an_error_answer_is_not_streamed)
{
    unsigned short port;
    struct loop l;
    struct stream st = {0};

    sse_start(&port);
    loop_init(&l);
    stream_start(&l, &st, port, "/nope", 1, 0);
    loop_run(&l, 1, 10000);
    cr_assert_eq(st.r.err, 0);
    cr_assert_eq(st.r.status, 404);
    cr_assert_eq(st.chunks, 0);
    expect_body(&st.r, "{\"code\":\"no_such\"}\n");
    http_buf_free(&st.r.body);
    loop_fini(&l);
}

/* idle_s ends a peer that fell silent, and only such a peer: a stream
 * whose events come every 300 ms lives past it to its end. */
Test(http_client, idle_s_ends_a_silent_stream_only)
{
    unsigned short port;
    struct loop l;
    struct stream quiet = {0}, live = {0};
    uint64_t t0 = now_ms();

    sse_start(&port);
    loop_init(&l);
    stream_start(&l, &quiet, port, "/silent", 1, 1);
    stream_start(&l, &live, port, "/sse?n=12&gap=300&end=clean", 1, 1);
    loop_run(&l, 2, 30000);
    cr_assert_eq(quiet.r.err, -ETIMEDOUT, "err %d", quiet.r.err);
    cr_assert_eq(quiet.r.status, 200);
    cr_assert_geq(quiet.end_ms - t0, 1000);
    cr_assert_eq(live.r.err, 0, "err %d", live.r.err);
    cr_assert_eq(count_events(&live.bytes), 12);
    cr_assert_geq(live.end_ms - t0, 3000);
    http_buf_free(&live.bytes);
    loop_fini(&l);
}
