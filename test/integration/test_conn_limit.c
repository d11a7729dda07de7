/*
 * test_conn_limit.c - a worker that reached max_connections accepts again
 * once connections close.  libmicrohttpd takes the listening socket out of
 * its epoll set at the limit and puts it back only in a later round; a
 * node whose last connections closed used to wait for that round forever,
 * deaf to every new client (SPEC §6: the node keeps serving).
 */
#include <poll.h>
#include <stdio.h>
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

Test(conn_limit, a_full_worker_accepts_again_once_its_connections_close,
     .timeout = 120)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, "workers=1 max_connections=3");
    for (int round = 0; round < 3; round++) {
        int fds[8], open = 0, waiting = -1;

        /* Fill the worker: connections served once and kept open, until
         * one is not served (the harness may hold one of the three). */
        while (waiting < 0) {
            int fd = itest_raw_connect(&n);

            cr_assert_geq(fd, 0, "connect: %d", fd);
            cr_assert_eq(itest_raw_send(fd, HEALTH), 0);
            if (!readable(fd, 1000)) {
                waiting = fd;
                break;
            }
            cr_assert_eq(itest_raw_response(fd, &r), 200, "%s", r.body);
            itest_resp_free(&r);
            cr_assert_lt(open, 3, "more than max_connections were served");
            fds[open++] = fd;
        }
        cr_assert_gt(open, 0);
        for (int i = 0; i < open; i++)
            close(fds[i]);
        /* The client left waiting is served now (the old code never
         * accepted it). */
        cr_assert(readable(waiting, 20000),
                  "round %d: the waiting client was not served 20 s after "
                  "the others closed",
                  round);
        cr_assert_eq(itest_raw_response(waiting, &r), 200, "%s", r.body);
        itest_resp_free(&r);
        close(waiting);
    }
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}
