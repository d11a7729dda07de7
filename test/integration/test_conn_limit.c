/*
 * test_conn_limit.c - a worker that reached libmicrohttpd's connection
 * limit with requests under way, or ran out of descriptors, accepts again
 * once connections close.  libmicrohttpd takes the listening socket out of
 * its epoll set at either limit and puts it back only in a later round; a
 * node whose last connections closed used to wait for that round forever,
 * deaf to every new client (SPEC §6: the node keeps serving).  Below that
 * limit, past max_connections, requests other than /health are refused
 * 503 (test_http_edge.c).  Connections that send nothing, or trickle their
 * heads, silence nobody: past max_connections the one that has owed a
 * head the longest is cut (503) for a new client, and a head has 30 s
 * however it trickles (http/edge_wait.h).  Clients that never read their
 * answers hold at most max_bytes of them in a worker: past it a pop gets
 * 503 with Retry-After, until they leave.
 */
#include <sys/resource.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define HEALTH "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"

/* readable - fd has something to read within ms. */
static int
readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    return poll(&p, 1, ms) == 1;
}

/* fill_and_release - connections served once and kept open until one is
 * not served (at most max of them); then close them all and check that the
 * client left waiting is served now (the old code never accepted it). */
static void
fill_and_release(struct itest_node *n, int max, int round)
{
    int fds[64], open = 0, waiting = -1;
    struct itest_resp r;

    while (waiting < 0) {
        int fd = itest_raw_connect(n);

        cr_assert_geq(fd, 0, "connect: %d", fd);
        cr_assert_eq(itest_raw_send(fd, HEALTH), 0);
        if (!readable(fd, 1000)) {
            waiting = fd;
            break;
        }
        cr_assert_eq(itest_raw_response(fd, &r), 200, "%s", r.body);
        itest_resp_free(&r);
        cr_assert_lt(open, max, "more than %d connections were served", max);
        fds[open++] = fd;
    }
    cr_assert_gt(open, 0);
    for (int i = 0; i < open; i++)
        close(fds[i]);
    cr_assert(readable(waiting, 20000),
              "round %d: the waiting client was not served 20 s after the "
              "others closed",
              round);
    cr_assert_eq(itest_raw_response(waiting, &r), 200, "%s", r.body);
    itest_resp_free(&r);
    close(waiting);
}

/* A /health whose body never comes: a request under way, which nothing
 * cuts to make room (past max_connections /health is still read). */
#define HEALTH_BODY_OWED                                                       \
    "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"

/* fill_busy_and_release - libmicrohttpd's whole limit (max + max / 8 +
 * 16, http/edge_conn.c) of requests under way, then a client: it waits
 * unserved (the harness's idle connection, if any, is cut for one of the
 * requests); then close the requests and check that the client is served
 * now (the old code never accepted it). */
static void
fill_busy_and_release(struct itest_node *n, int limit, int round)
{
    int fds[64], waiting;
    struct itest_resp r;

    cr_assert_leq(limit, 64);
    for (int i = 0; i < limit; i++) {
        fds[i] = itest_raw_connect(n);
        cr_assert_geq(fds[i], 0, "connect: %d", fds[i]);
        cr_assert_eq(itest_raw_send(fds[i], HEALTH_BODY_OWED), 0);
    }
    waiting = itest_raw_connect(n);
    cr_assert_geq(waiting, 0);
    cr_assert_eq(itest_raw_send(waiting, HEALTH), 0);
    cr_assert(!readable(waiting, 2000),
              "round %d: served past the limit of requests under way", round);
    for (int i = 0; i < limit; i++)
        close(fds[i]);
    cr_assert(readable(waiting, 20000),
              "round %d: the waiting client was not served 20 s after the "
              "others closed",
              round);
    cr_assert_eq(itest_raw_response(waiting, &r), 200, "%s", r.body);
    itest_resp_free(&r);
    close(waiting);
}

Test(conn_limit, a_full_worker_accepts_again_once_its_connections_close,
     .timeout = 120)
{
    struct itest_node n;

    itest_node_start(&n, "workers=1 max_connections=3");
    for (int round = 0; round < 3; round++)
        fill_busy_and_release(&n, 3 + 3 / 8 + 16, round);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(conn_limit, connections_that_send_nothing_are_cut_for_new_clients,
     .timeout = 120)
{
    struct itest_node n;
    struct itest_resp r;
    int idle[60], fd;
    int64_t t0;

    itest_node_start(&n, "workers=1 max_connections=3");
    /* three times libmicrohttpd's own limit (19) of silent connections */
    for (int i = 0; i < 60; i++) {
        idle[i] = itest_raw_connect(&n);
        cr_assert_geq(idle[i], 0, "connect %d: %d", i, idle[i]);
    }
    /* a new client is served at once, not after the 30 s they have to
     * send a head: once they owed it a second, they make room */
    t0 = itest_now_ms();
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    cr_assert_eq(itest_raw_send(fd, HEALTH), 0);
    cr_assert(readable(fd, 10000), "/health unanswered for 10 s");
    cr_assert_eq(itest_raw_response(fd, &r), 200, "%s", r.body);
    itest_resp_free(&r);
    close(fd);
    cr_assert_lt(itest_now_ms() - t0, 10000);
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    cr_assert_eq(itest_raw_send(fd, "POST /api/v1/ephemeral/push HTTP/1.1\r\n"
                                    "Host: x\r\nContent-Length: 43\r\n\r\n"
                                    "{\"queue\":\"edge\",\"messages\":"
                                    "[{\"payload\":1}]}"),
                 0);
    cr_assert(readable(fd, 10000), "a push unanswered for 10 s");
    cr_assert_eq(itest_raw_response(fd, &r), 201, "%s", r.body);
    itest_resp_free(&r);
    close(fd);
    /* the first silent connection was cut: 503, Retry-After, closed */
    cr_assert(readable(idle[0], 10000));
    cr_assert_eq(itest_raw_response(idle[0], &r), 503, "%s", r.body);
    cr_assert(strstr(r.body, "max_connections") != NULL, "%s", r.body);
    cr_assert_str_eq(r.retry_after, "1");
    itest_resp_free(&r);
    char c;
    cr_assert_eq(recv(idle[0], &c, 1, 0), 0, "not closed after its 503");
    for (int i = 0; i < 60; i++)
        close(idle[i]);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(conn_limit, a_trickled_request_head_is_cut_after_30_s, .timeout = 120)
{
    static const char head[] = "GET /health HTTP/1.1\r\nHost: x\r\nX-A: ";
    struct itest_node n;
    struct itest_resp r;
    int64_t t0;
    int fd, sent = 0;

    itest_node_start(&n, "workers=1");
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    t0 = itest_now_ms();
    cr_assert_eq(itest_raw_send(fd, head), 0);
    /* a byte every half second, each restarting libmicrohttpd's idle
     * timeout, until the node answers (or 45 s) */
    while (!readable(fd, 500) && itest_now_ms() - t0 < 45000) {
        cr_assert_eq(send(fd, "a", 1, MSG_NOSIGNAL), 1);
        sent++;
    }
    cr_assert(readable(fd, 0), "no answer 45 s into a trickled head");
    cr_assert_gt(sent, 40, "the head was not trickled: %d bytes", sent);
    cr_assert_eq(itest_raw_response(fd, &r), 408, "%s", r.body);
    cr_assert(strstr(r.body, "within 30 s") != NULL, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_geq(itest_now_ms() - t0, 29000, "cut before its 30 s");
    close(fd);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* highest_fd - the highest descriptor number pid holds, or -1. */
static int
highest_fd(pid_t pid)
{
    char path[64];
    struct dirent *e;
    DIR *d;
    int hi = -1;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    if ((d = opendir(path)) == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && atoi(e->d_name) > hi)
            hi = atoi(e->d_name);
    closedir(d);
    return hi;
}

/* Out of descriptors (EMFILE at accept), libmicrohttpd stops accepting as
 * it does at its connection limit, until a connection closes: the same
 * deafness, with the limit an operator's ulimit instead of ours. */
Test(conn_limit, a_worker_out_of_descriptors_accepts_again_once_some_close,
     .timeout = 120)
{
    struct itest_node n;
    pid_t w;

    itest_node_start(&n, "workers=1");
    cr_assert_eq(itest_node_workers(&n, &w, 1), 1);
    int hi = highest_fd(w);
    cr_assert_geq(hi, 0);
    /* Room for a few connections: the free numbers below the limit (the
     * holes below hi too). */
    struct rlimit rl = {(rlim_t)hi + 4, (rlim_t)hi + 4};
    if (prlimit(w, RLIMIT_NOFILE, &rl, NULL) != 0)
        cr_skip_test("prlimit(worker, RLIMIT_NOFILE): %s", strerror(errno));
    for (int round = 0; round < 3; round++)
        fill_and_release(&n, 60, round);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* lowered_to - the max_connections a worker of n was lowered to, as its
 * log says; 0 when it says none. */
static int
lowered_to(const struct itest_node *n)
{
    FILE *f = fopen(n->log, "r");
    char line[512], *at;
    int fit = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if ((at = strstr(line, " lowered to ")) != NULL &&
            sscanf(at, " lowered to %d a worker", &fit) != 1)
            fit = 0;
    fclose(f);
    return fit;
}

/* A node started under a descriptor limit smaller than max_connections
 * lowers max_connections to fit (and says so), so that a flood of clients
 * meets libmicrohttpd's own connection limit, not EMFILE.  Out of
 * descriptors with clients that sent half a request and hung up, a worker
 * lost the end of the connections it held and stayed deaf for good. */
Test(conn_limit, a_small_descriptor_limit_lowers_max_connections_to_fit,
     .timeout = 120)
{
    static const char half[] = "GET /health HTTP/1.1\r\nHost: x\r\n";
    struct itest_node n;
    struct itest_resp r;
    int fds[300];

    itest_node_nofile = 64;
    itest_node_start(&n, "workers=2");
    itest_node_nofile = 0;
    cr_assert(itest_node_log_contains(&n, "max_connections 20000 lowered"),
              "the start says max_connections was lowered");
    for (int i = 0; i < 300; i++) {
        fds[i] = itest_raw_connect(&n);
        cr_assert_geq(fds[i], 0, "connect %d", i);
        cr_assert_eq(itest_raw_send(fds[i], half), 0);
    }
    /* each worker holds as many as max_connections now lets it */
    int fit = lowered_to(&n), held[2] = {0, 0};
    pid_t w[2];
    cr_assert_gt(fit, 0, "the start names the lowered max_connections");
    cr_assert_eq(itest_node_workers(&n, w, 2), 2);
    int64_t full_by = itest_now_ms() + 20000;
    while ((held[0] = itest_worker_conns(&n, w[0])) < fit ||
           (held[1] = itest_worker_conns(&n, w[1])) < fit) {
        cr_assert_lt(itest_now_ms(), full_by,
                     "the workers hold %d and %d connections, not %d each",
                     held[0], held[1], fit);
        itest_sleep_ms(20);
    }
    for (int i = 0; i < 300; i++)
        close(fds[i]);
    int64_t deadline = itest_now_ms() + 20000;
    while (itest_req(&n, "GET", "/health", NULL, &r) != 200) {
        itest_resp_free(&r);
        cr_assert_lt(itest_now_ms(), deadline,
                     "the node does not answer 20 s after the clients left");
        itest_sleep_ms(200);
    }
    itest_resp_free(&r);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* slow_reader - a connection to the node that reads almost nothing: a
 * 4 KiB receive buffer, set before it connects. */
static int
slow_reader(const struct itest_node *n)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)n->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), small = 4096;

    cr_assert_geq(fd, 0);
    cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)),
                 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s",
                 strerror(errno));
    return fd;
}

/* answer_head - the status of the answer on fd and its head in head (the
 * first bytes only: the rest is left unread). */
static long
answer_head(int fd, char *head, size_t cap)
{
    size_t len = 0;
    long status = 0;

    while (len < cap - 1 && readable(fd, 20000)) {
        ssize_t k = recv(fd, head + len, cap - 1 - len, 0);
        if (k <= 0)
            break;
        len += (size_t)k;
        head[len] = '\0';
        if (strstr(head, "\r\n\r\n") != NULL)
            break;
    }
    head[len] = '\0';
    sscanf(head, "HTTP/1.%*d %ld", &status);
    return status;
}

Test(conn_limit, answers_nobody_reads_are_bounded_and_then_pops_get_503,
     .timeout = 120)
{
    static const char pop[] =
        "GET /api/v1/ephemeral/pop?queue=big&max=1 HTTP/1.1\r\nHost: x\r\n\r\n";
    enum { PAYLOAD = 3 << 20 };
    struct itest_node n;
    struct itest_resp r;
    char head[16384];
    int stuck[32], nstuck = 0;
    long status = 0;
    char *body = malloc(PAYLOAD + 128);

    cr_assert_not_null(body);
    /* the node holds 8 MiB, and so may a worker of answers not read */
    itest_node_start(&n, "workers=1 max_bytes=8M");
    cr_assert_eq(itest_post(&n, &r, "/api/v1/ephemeral/configure",
                            "{\"queue\":\"big\",\"options\":{\"leaseSeconds\":"
                            "1,\"retryLimit\":100}}"),
                 201, "%s", r.body);
    itest_resp_free(&r);
    int len = snprintf(body, 128,
                       "{\"queue\":\"big\",\"messages\":[{"
                       "\"payload\":\"");
    memset(body + len, 'x', PAYLOAD);
    snprintf(body + len + PAYLOAD, 128, "\"}]}");
    cr_assert_eq(itest_req(&n, "POST", "/api/v1/ephemeral/push", body, &r), 201,
                 "%s", r.body);
    itest_resp_free(&r);
    free(body);
    /* pops of its 3 MiB message by clients that never read it: each holds
     * a copy until its lease (1 s) lets the next pop have it, until the
     * worker holds 8 MiB of them */
    int64_t until = itest_now_ms() + 60000;
    while (status != 503 && itest_now_ms() < until) {
        int fd = slow_reader(&n);
        cr_assert_eq(itest_raw_send(fd, pop), 0);
        status = answer_head(fd, head, sizeof(head));
        cr_assert(status == 200 || status == 503, "%ld: %s", status, head);
        if (status == 200 && strstr(head, "Content-Length: ") != NULL &&
            atol(strstr(head, "Content-Length: ") + 16) > PAYLOAD) {
            cr_assert_lt(nstuck, 32, "%d answers of 3 MiB held", nstuck);
            stuck[nstuck++] = fd; /* never read */
            continue;
        }
        if (status == 503)
            cr_assert(strstr(head, "Retry-After: 1") != NULL, "%s", head);
        close(fd);
        if (status != 503)
            itest_sleep_ms(100); /* the lease has not run out yet */
    }
    cr_assert_eq(status, 503, "no 503 in 60 s, %d answers held", nstuck);
    cr_assert_geq(nstuck, 2, "503 with %d answers held", nstuck);
    /* the answer says why (its body may have come with its head) */
    cr_assert_eq(
        itest_req(&n, "GET", "/api/v1/ephemeral/pop?queue=big&max=1", NULL, &r),
        503, "%s", r.body);
    cr_assert(strstr(r.body, "have not read") != NULL, "%s", r.body);
    itest_resp_free(&r);
    /* /health is served meanwhile */
    cr_assert_eq(itest_req(&n, "GET", "/health", NULL, &r), 200);
    itest_resp_free(&r);
    /* once the clients leave, pops are served again */
    for (int i = 0; i < nstuck; i++)
        close(stuck[i]);
    until = itest_now_ms() + 20000;
    while (itest_req(&n, "GET", "/api/v1/ephemeral/pop?queue=big&max=1", NULL,
                     &r) != 200) {
        cr_assert_eq(r.status, 503, "%s", r.body);
        itest_resp_free(&r);
        cr_assert_lt(itest_now_ms(), until, "pops refused 20 s after");
        itest_sleep_ms(100);
    }
    itest_resp_free(&r);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}
