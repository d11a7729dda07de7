/*
 * cluster.c - the master's cluster port: server and router (cluster.h).
 *
 * libmicrohttpd on cluster_listen, in the master's epoll, with the cluster
 * routes only.  A request is authenticated and its sender's headers read
 * here; the handler it is routed to does the rest and answers.
 */
#include "master/cluster.h"

#include <sys/epoll.h>
#include <sys/random.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/raft_msg.h"
#include "http/node_call.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/server.h"
#include "http/sign.h"
#include "master/cluster_client.h"
#include "master/configure.h"
#include "master/groups.h"
#include "master/handover.h"
#include "master/master.h"
#include "master/membership.h"
#include "shm/log.h"

/* signed_ok - whether req is a node's call, signed with the cluster
 * secret and not seen before (http/node_call.h); answered 401 if not. */
static int
signed_ok(struct master *m, struct http_request *req)
{
    switch (http_node_call(req, m->ws.secret, &m->seg, m->seg.nonces,
                           shm_now_ms())) {
    case HTTP_CALL_NODE:
        return 1;
    case HTTP_CALL_CLIENT:
        http_reply_error(req, 401, "unauthorized",
                         "calls to the cluster port are signed with the "
                         "cluster secret (" HTTP_SIGN_HEADER ")");
        return 0;
    default:
        return 0; /* answered */
    }
}

/* peer_word - what the call's headers say of its sender. */
static struct master_peer_word
peer_word(struct http_request *req)
{
    return (struct master_peer_word){
        .node_id = http_request_header(req, CLUSTER_NODE_HEADER),
        .client = http_request_header(req, CLUSTER_CLIENT_HEADER),
        .incarnation = http_request_header(req, CLUSTER_INCARNATION_HEADER),
        .state = http_request_header(req, CLUSTER_STATE_HEADER),
        .timestamp = http_request_header(req, HTTP_SIGN_TIME),
    };
}

/* raft_in - POST /cluster/v1/raft: one encoded raft message. */
static void
raft_in(struct master *m, struct http_request *req)
{
    size_t len;
    const char *body = http_request_body(req, &len);
    struct master_peer_word pw = peer_word(req);
    int rc = master_raft_receive(m, body, len, &pw);

    if (rc == -EBADMSG)
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "body is not a raft message of this version");
    else
        http_reply(req, 204, NULL);
}

/* master_cluster_heartbeat_index - see cluster.h. */
int
master_cluster_heartbeat_index(const char *body, size_t len, int n, int self)
{
    int i = 0;

    if (len == 0 || len > 2)
        return -1;
    for (size_t k = 0; k < len; k++) {
        if (body[k] < '0' || body[k] > '9')
            return -1;
        i = i * 10 + (body[k] - '0');
    }
    return i < n && i != self ? i : -1;
}

/* heartbeat_in - POST /cluster/v1/heartbeat: the sender's member index
 * (every node numbers the members alike) on the first line, its node id
 * in a header, and the lines groups.h describes after. */
static void
heartbeat_in(struct master *m, struct http_request *req)
{
    size_t len;
    const char *body = http_request_body(req, &len);
    const char *nl = len > 0 ? memchr(body, '\n', len) : NULL;
    int i = master_cluster_heartbeat_index(body, nl ? (size_t)(nl - body) : len,
                                           m->members.n, m->members.self);

    if (i < 0) {
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "body must open with the sender's member index");
        return;
    }
    struct master_peer_word pw = peer_word(req);

    /* A beat older than what this node knows of its sender says nothing
     * (membership.h); what it is about to hand over is held before its
     * leave is known. */
    if (master_membership_heard(m, i, &pw)) {
        if (nl != NULL)
            master_groups_in(m, i, nl + 1, (size_t)(body + len - nl - 1),
                             shm_now_ms(), master_membership_beat_ms(m));
        m->members.beat[i] = shm_now_ms();
    }
    http_reply(req, 204, NULL);
}

/* on_request - the cluster port's handler. */
static void
on_request(void *ctx, struct http_request *req)
{
    struct master *m = ctx;

    if (!signed_ok(m, req))
        return;
    switch (http_request_route(req)) {
    case HTTP_ROUTE_CLUSTER_RAFT:
        raft_in(m, req);
        break;
    case HTTP_ROUTE_CLUSTER_CONFIGURE:
        master_configure(m, req);
        break;
    case HTTP_ROUTE_CLUSTER_DELETE:
        master_undeclare(m, req);
        break;
    case HTTP_ROUTE_CLUSTER_HEARTBEAT:
        heartbeat_in(m, req);
        break;
    case HTTP_ROUTE_CLUSTER_ADOPT:
        master_handover_in(m, req);
        break;
    default:
        break;
    }
}

/* What -t checks of the secret file is what the start reads of it. */
_Static_assert(sizeof(((struct worker_settings *)0)->secret) ==
                   CONFIG_SECRET_SIZE,
               "worker_settings.secret and CONFIG_SECRET_SIZE");

int
master_cluster_secret(struct master *m)
{
    unsigned char raw[24];
    char *s = m->ws.secret, err[CONFIG_PATH_MAX + 128];
    size_t cap = sizeof(m->ws.secret);

    /* config_load() checked the file and that peers come with one; it may
     * have changed since. */
    if (m->cfg.cluster_secret_file[0]) {
        if (config_read_secret(m->cfg.cluster_secret_file, s, cap, err,
                               sizeof(err)) != 0) {
            log_error(0, "%s", err);
            return -EINVAL;
        }
        return 0;
    }
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return -EIO;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(s + 2 * i, cap - 2 * i, "%02x", raw[i]);
    return 0;
}

int
master_cluster_start(struct master *m, int ep, int listen_fd)
{
    struct http_server_opts o = {
        .max_connections = 1024,
        /* a raft snapshot, or a partition handed over: it holds at most
         * what a queue may (adopts ignore queue bounds: leave room) */
        .max_body_bytes = RAFT_SNAPSHOT_MAX + 4096 > m->cfg.queue_max_bytes * 4
                              ? RAFT_SNAPSHOT_MAX + 4096
                              : m->cfg.queue_max_bytes * 4,
        .connection_timeout_s = 300,
        .cluster = 1,
        .tls = m->cluster_tls,
    };
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = MASTER_TAG_CLUSTER};

    m->cluster_srv = http_server_start(listen_fd, &o, on_request, m);
    if (m->cluster_srv == NULL)
        return -EIO;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, http_server_fd(m->cluster_srv), &ev) == -1)
        return -errno;
    return 0;
}

void
master_cluster_run(struct master *m)
{
    if (m->cluster_srv)
        http_server_run(m->cluster_srv);
}

int
master_cluster_timeout_ms(struct master *m)
{
    return m->cluster_srv ? http_server_timeout_ms(m->cluster_srv) : -1;
}

void
master_cluster_stop(struct master *m)
{
    master_configure_stop(m);
    http_server_stop(m->cluster_srv);
    m->cluster_srv = NULL;
}
