/*
 * drain_port.c - the master's answers on the client port during a drain.
 *
 * Why it exists: on SIGTERM the workers stop accepting (MHD_quiesce_daemon,
 * then each closes its copy of the listening socket) and take up to 5 s to
 * finish what is in flight; then the master hands partitions over (up to
 * 15 s) and raft leadership off (up to 3 s).  The master holds the socket
 * open all along (it is the one workers are forked with), so without this
 * file a new connection -- a load balancer's health check, a client's
 * request -- waits in the backlog unaccepted and is reset when the master
 * exits.  Instead the master accepts from the start of the drain, with a
 * small libmicrohttpd server in its own epoll loop (as the cluster port
 * runs): GET /health answers 503 with the node's status built as a
 * worker's is (status "draining", ready false), every other routed request
 * 503 draining with Retry-After, like a draining worker.  Bodies are read
 * and dropped, never kept.  Unknown paths and wrong methods get the
 * server's own 404/405.  At the very end the kernel stops opening
 * connections on the socket and the master answers the ones it had
 * queued before closing it (master_drain_port_finish): closing a listening
 * socket resets every connection still in its accept queue, and a client
 * whose request sat there cannot tell it was never read.
 *
 * Single-threaded (the master's loop), no locking.  Errors are logged.
 */
#include "master/drain_port.h"

#include <sys/epoll.h>

#include <errno.h>
#include <poll.h>

#include "http/answer_json.h"
#include "http/buf.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/server.h"
#include "master/master.h"
#include "shm/board.h"
#include "shm/log.h"
#include "worker/worker.h"

#define DRAIN_PORT_CONNECTIONS 256  /* health checks and refused retries */
#define DRAIN_PORT_TIMEOUT_S   5    /* idle connections close */
#define LAST_ROUND_GRACE_MS    50   /* the last round lasts this at least */
#define LAST_ROUND_MS          1000 /* and this at most */

/* on_request - /health says draining; everything else is refused.  Every
 * answer closes its connection, as http_reply_draining's does. */
static void
on_request(void *ctx, struct http_request *req)
{
    struct master *m = ctx;
    struct shm_board_view v;
    struct http_health h;
    struct http_health_member mm[SHM_BOARD_MEMBERS];
    struct http_buf b = {0};

    if (http_request_route(req) != HTTP_ROUTE_HEALTH) {
        http_reply_draining(req);
        return;
    }
    shm_board_read(m->seg.board, &v);
    worker_health_view(&h, mm, m->ws.node_id, m->incarnation,
                       WORKER_HEALTH_DRAINING, &v);
    http_reply(req, http_health_json(&b, &h), &b);
    http_reply_header(req, "Connection", "close");
}

int
master_drain_port_start(struct master *m, int ep)
{
    struct http_server_opts o = {
        .max_connections = DRAIN_PORT_CONNECTIONS,
        /* a worker would answer a larger body 413 (not retryable): so
         * does this port; smaller ones are read and dropped */
        .max_body_bytes = m->cfg.max_body_bytes,
        .connection_timeout_s = DRAIN_PORT_TIMEOUT_S,
        .discard_bodies = 1,
        .tls = m->ws.tls, /* the client port's */
    };
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = MASTER_TAG_DRAIN};

    m->drain_srv = http_server_start(m->ws.listen_fd, &o, on_request, m);
    if (m->drain_srv == NULL)
        return -EIO;
    m->ws.listen_fd = -1; /* the server's now: it closes it at stop */
    if (epoll_ctl(ep, EPOLL_CTL_ADD, http_server_fd(m->drain_srv), &ev) == -1) {
        int e = errno;
        log_error(e, "epoll_ctl(ADD, drain port) failed");
        master_drain_port_stop(m);
        return -e;
    }
    return 0;
}

void
master_drain_port_run(struct master *m)
{
    if (m->drain_srv)
        http_server_run(m->drain_srv);
}

int
master_drain_port_timeout_ms(struct master *m)
{
    return m->drain_srv ? http_server_timeout_ms(m->drain_srv) : -1;
}

void
master_drain_port_finish(struct master *m)
{
    struct http_server *s = m->drain_srv;
    uint64_t start = shm_now_ms(), now;

    if (s == NULL || http_server_refuse_new(s) != 0)
        return;
    /* At least one round; then on while connections wait to be accepted,
     * one accepted has not begun its request, or a request is under way. */
    for (int round = 0;; round++) {
        struct pollfd p = {.fd = http_server_fd(s), .events = POLLIN};
        int t = http_server_timeout_ms(s);

        now = shm_now_ms();
        if (round > 0 &&
            (now >= start + LAST_ROUND_MS ||
             (now >= start + LAST_ROUND_GRACE_MS && http_server_busy(s) == 0 &&
              !http_server_accept_pending(s))))
            break;
        if (poll(&p, 1, t >= 0 && t < 10 ? t : 10) == -1 && errno != EINTR)
            log_warn(errno, "poll(drain port) failed");
        http_server_run(s);
    }
}

void
master_drain_port_stop(struct master *m)
{
    http_server_stop(m->drain_srv);
    m->drain_srv = NULL;
}
