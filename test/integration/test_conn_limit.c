/*
 * test_conn_limit.c - a worker that reached max_connections, or ran out of
 * descriptors, accepts again once connections close.  libmicrohttpd takes
 * the listening socket out of its epoll set at either limit and puts it
 * back only in a later round; a node whose last connections closed used to
 * wait for that round forever, deaf to every new client (SPEC §6: the node
 * keeps serving).  Below that limit, past max_connections, requests other
 * than /health are refused 503 (test_http_edge.c).
 */
#include <sys/resource.h>

#include <dirent.h>
#include <errno.h>
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

Test(conn_limit, a_full_worker_accepts_again_once_its_connections_close,
     .timeout = 120)
{
    struct itest_node n;

    itest_node_start(&n, "workers=1 max_connections=3");
    /* /health passes max_connections up to libmicrohttpd's own limit, a
     * reserve of 3 / 8 + 16 above it (http/server.c); the harness may hold
     * one place. */
    for (int round = 0; round < 3; round++)
        fill_and_release(&n, 3 + 16, round);
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
