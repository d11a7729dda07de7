/*
 * cluster.c - the master's cluster port and its calls to peers.
 *
 * Server: libmicrohttpd on cluster_listen, in the master's epoll, with the
 * cluster routes only.  Client: one libcurl multi, also in that epoll, with
 * keep-alive to each peer.  Raft messages are posted fire-and-forget (raft
 * retries on its own); configure/delete are relayed with their answers.
 */
#include "master/cluster.h"

#include <sys/epoll.h>
#include <sys/random.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consensus/raft_msg.h"
#include "http/buf.h"
#include "http/client.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/server.h"
#include "master/configure.h"
#include "master/handover.h"
#include "master/master.h"
#include "master/view.h"
#include "shm/log.h"

/* secret_ok - constant-time comparison of the request's secret. */
static int
secret_ok(const struct master *m, struct http_request *req)
{
    const char *s = http_request_header(req, CLUSTER_SECRET_HEADER);
    size_t n = strlen(m->ws.secret);
    unsigned char diff = 0;

    if (s == NULL || strlen(s) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(s[i] ^ m->ws.secret[i]);
    return diff == 0;
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

/* heartbeat_in - POST /cluster/v1/heartbeat: the sender's member index
 * (every node numbers the members alike) and, in a header, its node id. */
static void
heartbeat_in(struct master *m, struct http_request *req)
{
    size_t len;
    const char *body = http_request_body(req, &len);
    char *end;
    long i = strtol(body, &end, 10);

    if (len == 0 || end != body + len || i < 0 || i >= m->raft.n ||
        i == m->raft.self) {
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "body must be the sender's member index");
        return;
    }
    struct master_peer_word pw = peer_word(req);

    master_raft_heard(m, (int)i, &pw);
    http_reply(req, 204, NULL);
}

/* on_request - the cluster port's handler. */
static void
on_request(void *ctx, struct http_request *req)
{
    struct master *m = ctx;

    if (!secret_ok(m, req)) {
        http_reply_error(req, 401, "unauthorized",
                         "header '" CLUSTER_SECRET_HEADER
                         "' must carry the cluster secret");
        return;
    }
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
    };
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = MASTER_TAG_CLUSTER};

    http_client_global_init();
    m->cluster_srv = http_server_start(listen_fd, &o, on_request, m);
    if (m->cluster_srv == NULL)
        return -EIO;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, http_server_fd(m->cluster_srv), &ev) == -1)
        return -errno;
    m->cluster_cli = http_client_new(ep, MASTER_TAG_CLIENT);
    return m->cluster_cli ? 0 : -ENOMEM;
}

void
master_cluster_event(struct master *m, uint64_t tag, uint32_t events)
{
    if (tag >= MASTER_TAG_CLIENT)
        http_client_on_event(m->cluster_cli, (int)(tag - MASTER_TAG_CLIENT),
                             events);
}

void
master_cluster_run(struct master *m)
{
    if (m->cluster_cli)
        http_client_on_timeout(m->cluster_cli);
    if (m->cluster_srv)
        http_server_run(m->cluster_srv);
}

int
master_cluster_timeout_ms(struct master *m)
{
    int a = m->cluster_srv ? http_server_timeout_ms(m->cluster_srv) : -1;
    int b = m->cluster_cli ? http_client_timeout_ms(m->cluster_cli) : -1;

    if (a < 0)
        return b;
    return b < 0 || a < b ? a : b;
}

/* url - "http://addr/path" for a peer. */
static void
url(char *buf, size_t len, const char *addr, const char *path)
{
    snprintf(buf, len, "http://%s%s", addr, path);
}

void
master_cluster_post(struct master *m, const char *addr, const char *path,
                    const void *body, size_t len, uint64_t timeout_ms,
                    http_client_done_fn *done, void *arg)
{
    char u[512], sec[256], node[128], client[CONFIG_ADDR_MAX + 32], inc[64];
    const char *headers[] = {
        sec,
        node,
        client,
        inc,
        m->state != MASTER_RUNNING ? CLUSTER_STATE_HEADER ": leaving"
        : master_view_serving(m)   ? CLUSTER_STATE_HEADER ": ready"
                                   : CLUSTER_STATE_HEADER ": starting",
        CLUSTER_FWD_HEADER ": 1",
        "Content-Type: application/json"};
    struct http_client_req r = {
        .method = "POST",
        .url = u,
        .headers = headers,
        .nheaders = sizeof(headers) / sizeof(headers[0]),
        .body = body,
        .body_len = len,
        .timeout_ms = (unsigned)(timeout_ms ? timeout_ms : 1),
    };

    url(u, sizeof(u), addr, path);
    snprintf(sec, sizeof(sec), CLUSTER_SECRET_HEADER ": %s", m->ws.secret);
    snprintf(node, sizeof(node), CLUSTER_NODE_HEADER ": %s", m->cfg.node_id);
    snprintf(client, sizeof(client), CLUSTER_CLIENT_HEADER ": %s",
             m->cfg.advertise);
    snprintf(inc, sizeof(inc), CLUSTER_INCARNATION_HEADER ": %016llx",
             (unsigned long long)m->incarnation);
    if (http_client_request(m->cluster_cli, &r, done, arg) != 0) {
        struct http_client_resp fail = {.err = -EIO, .error = ""};
        done(arg, &fail);
    }
}

#define RAFT_SEND_MS 2000 /* a raft message later than this is stale */
#define HEARTBEAT_MS 500  /* a quarter of the default member_ttl_ms at most */

/* beat_sent - a heartbeat's answer: nothing to do.  Its body is static: one
 * still out to a hung peer when the client is freed at exit (no done runs
 * then) leaves nothing behind. */
static void
beat_sent(void *arg, struct http_client_resp *r)
{
    (void)arg;
    (void)r;
}

uint64_t
master_cluster_beat_ms(const struct master *m)
{
    uint64_t every = m->cfg.member_ttl_ms / 4;

    return every < HEARTBEAT_MS ? every : HEARTBEAT_MS;
}

void
master_cluster_heartbeat(struct master *m, uint64_t now, int now_or_never)
{
    static uint64_t last;
    static char body[16]; /* this node's raft index, the same every time */
    uint64_t every = master_cluster_beat_ms(m);

    if (m->cluster_cli == NULL || (!now_or_never && now < last + every))
        return;
    last = now;
    if (body[0] == '\0')
        snprintf(body, sizeof(body), "%d", m->raft.self);
    for (int i = 0; i < m->raft.n; i++)
        if (i != m->raft.self)
            master_cluster_post(m, m->raft.addr[i], CLUSTER_PATH_HEARTBEAT,
                                body, strlen(body), every * 2, beat_sent, NULL);
}

/*
 * A raft message in flight.  The client needs the bytes until its done
 * callback, and drops pending requests without calling it when freed, so
 * the master keeps them listed and frees what is left at stop.
 */
struct raft_out {
    struct raft_out *prev, *next;
    unsigned char data[];
};

static struct raft_out raft_out_list = {&raft_out_list, &raft_out_list};

/* sent - a raft message went out (or not: raft retries by itself). */
static void
sent(void *arg, struct http_client_resp *r)
{
    struct raft_out *o = arg;

    (void)r;
    o->prev->next = o->next;
    o->next->prev = o->prev;
    free(o);
}

void
master_cluster_send_raft(struct master *m, const struct raft_msg *msg)
{
    size_t len = raft_msg_size(msg);
    struct raft_out *o;

    if (msg->to < 0 || msg->to >= m->raft.n || msg->to == m->raft.self)
        return;
    if ((o = malloc(sizeof(*o) + len)) == NULL)
        return;
    if (raft_msg_encode(msg, o->data, len) != 0) {
        free(o);
        return;
    }
    o->next = &raft_out_list;
    o->prev = raft_out_list.prev;
    o->prev->next = o;
    raft_out_list.prev = o;
    master_cluster_post(m, m->raft.addr[msg->to], CLUSTER_PATH_RAFT, o->data,
                        len, RAFT_SEND_MS, sent, o);
}

void
master_cluster_stop(struct master *m)
{
    master_configure_stop(m);
    http_server_stop(m->cluster_srv);
    m->cluster_srv = NULL;
    http_client_free(m->cluster_cli);
    m->cluster_cli = NULL;
    while (raft_out_list.next != &raft_out_list)
        sent(raft_out_list.next, NULL);
}
