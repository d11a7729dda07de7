/*
 * cluster_client.c - the master's calls to its peers (cluster_client.h).
 *
 * One libcurl multi in the master's epoll, with keep-alive to each peer.
 * Raft messages and heartbeats are posted fire-and-forget (raft retries on
 * its own; the next beat comes a period later); configure/delete and
 * hand-overs wait for their answers, which go to the caller's done.
 *
 * A peer gets at most OUT_MAX appends and append answers and, while this
 * node runs, one heartbeat in flight; more are dropped, as a network would
 * drop them (votes and a leadership hand-over always go).  A call finds an
 * idle connection or opens one, and a call given up closes its own: while
 * a peer (or this node) is slow to answer, every raft tick (100 ms) would
 * otherwise open another connection, and over TLS each costs a handshake
 * of both masters' CPU.  On a starved machine those handshakes took longer
 * than the calls' timeouts, were thrown away with them and made the
 * masters slower still: hundreds of connections a minute, and no leader
 * for tens of seconds where the same cluster without TLS kept one.
 */
#include "master/cluster_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/raft_msg.h"
#include "http/buf.h"
#include "http/client.h"
#include "master/master.h"

#define RAFT_SEND_MS 2000 /* a raft message later than this is stale */
#define OUT_MAX      2    /* appends (or answers) in flight to one peer */

static struct http_client *cli;
static master_cluster_client_serving_fn *says_serving;

int
master_cluster_client_start(int ep, master_cluster_client_serving_fn *serving,
                            const struct http_client_peers *peers)
{
    says_serving = serving;
    http_client_global_init();
    cli = http_client_new(ep, MASTER_TAG_CLIENT);
    if (cli == NULL || http_client_set_peers(cli, peers) != 0)
        return -ENOMEM;
    return 0;
}

void
master_cluster_client_event(uint64_t tag, uint32_t events)
{
    if (tag >= MASTER_TAG_CLIENT)
        http_client_on_event(cli, (int)(tag - MASTER_TAG_CLIENT), events);
}

void
master_cluster_client_run(void)
{
    if (cli)
        http_client_on_timeout(cli);
}

int
master_cluster_client_timeout_ms(void)
{
    return cli ? http_client_timeout_ms(cli) : -1;
}

void
master_cluster_client_post(struct master *m, const char *addr, const char *path,
                           const void *body, size_t len, uint64_t timeout_ms,
                           http_client_done_fn *done, void *arg)
{
    char node[128], client[CONFIG_ADDR_MAX + 32], inc[64];
    const char *headers[] = {
        node,
        client,
        inc,
        m->state != MASTER_RUNNING ? CLUSTER_STATE_HEADER ": leaving"
        : says_serving(m)          ? CLUSTER_STATE_HEADER ": ready"
                                   : CLUSTER_STATE_HEADER ": starting",
        CLUSTER_FWD_HEADER ": 1",
        "Content-Type: application/json"};
    struct http_client_req r = {
        .method = "POST",
        .port = HTTP_CLIENT_CLUSTER,
        .addr = addr,
        .target = path,
        .headers = headers,
        .nheaders = sizeof(headers) / sizeof(headers[0]),
        .body = body,
        .body_len = len,
        .timeout_ms = (unsigned)(timeout_ms ? timeout_ms : 1),
    };

    snprintf(node, sizeof(node), CLUSTER_NODE_HEADER ": %s", m->cfg.node_id);
    snprintf(client, sizeof(client), CLUSTER_CLIENT_HEADER ": %s",
             m->cfg.advertise);
    snprintf(inc, sizeof(inc), CLUSTER_INCARNATION_HEADER ": %016llx",
             (unsigned long long)m->incarnation);
    if (http_client_request(cli, &r, done, arg) != 0) {
        struct http_client_resp fail = {.err = -EIO, .error = ""};
        done(arg, &fail);
    }
}

void
master_cluster_client_cancel(void *arg)
{
    if (cli != NULL)
        http_client_cancel(cli, arg);
}

/*
 * A message in flight, raft's or a heartbeat.  The client needs the bytes
 * until its done callback, and drops pending requests without calling it
 * when freed, so the master keeps them listed and frees what is left at
 * stop.
 */
struct out {
    struct out *prev, *next;
    int *count; /* the peer's count of its kind in flight */
    size_t len;
    unsigned char data[];
};

static struct out out_list = {&out_list, &out_list, NULL, 0};
/* in flight to each peer, by node index: raft messages, heartbeats */
static int raft_out[RAFT_MAX_NODES], beats_out[RAFT_MAX_NODES];

/* out_new - a listed message of len bytes, copied from data, counted in
 * *count; NULL when out of memory. */
static struct out *
out_new(const void *data, size_t len, int *count)
{
    struct out *o = malloc(sizeof(*o) + len + 1);

    if (o == NULL)
        return NULL;
    if (data != NULL)
        memcpy(o->data, data, len);
    o->count = count;
    (*count)++;
    o->len = len;
    o->next = &out_list;
    o->prev = out_list.prev;
    o->prev->next = o;
    out_list.prev = o;
    return o;
}

/* sent - a message went out (or not: raft retries by itself, the next beat
 * comes a period later). */
static void
sent(void *arg, struct http_client_resp *r)
{
    struct out *o = arg;

    (void)r;
    (*o->count)--;
    o->prev->next = o->next;
    o->next->prev = o->prev;
    free(o);
}

int
master_cluster_client_heartbeat(struct master *m, uint64_t timeout_ms,
                                struct http_buf *body, uint64_t force)
{
    const struct master_members *r = &m->members;

    if (cli == NULL)
        return 0;
    for (int i = 0; i < r->n; i++) {
        struct out *o;
        /* the beat that says leaving, with what each peer is about to be
         * handed, goes whatever is still out */
        int skip = m->state == MASTER_RUNNING && beats_out[i] > 0 &&
                   !(i < 64 && (force & (1ull << i)));
        if (i == r->self || body[i].oom || skip ||
            (o = out_new(body[i].data, body[i].len, &beats_out[i])) == NULL) {
            http_buf_free(&body[i]);
            continue;
        }
        http_buf_free(&body[i]);
        master_cluster_client_post(m, r->addr[i], CLUSTER_PATH_HEARTBEAT,
                                   o->data, o->len, timeout_ms, sent, o);
    }
    return 1;
}

void
master_cluster_client_send_raft(struct master *m, const struct raft_msg *msg)
{
    const struct master_members *r = &m->members;
    size_t len = raft_msg_size(msg);
    struct out *o;

    if (msg->to < 0 || msg->to >= r->n || msg->to == r->self)
        return;
    /* the next heartbeat sends the leader's appends again */
    if ((msg->type == RAFT_MSG_APPEND || msg->type == RAFT_MSG_APPEND_RESP) &&
        raft_out[msg->to] >= OUT_MAX)
        return;
    if ((o = out_new(NULL, len, &raft_out[msg->to])) == NULL)
        return;
    if (raft_msg_encode(msg, o->data, len) != 0) {
        sent(o, NULL);
        return;
    }
    master_cluster_client_post(m, r->addr[msg->to], CLUSTER_PATH_RAFT, o->data,
                               len, RAFT_SEND_MS, sent, o);
}

void
master_cluster_client_stop(void)
{
    http_client_free(cli);
    cli = NULL;
    while (out_list.next != &out_list)
        sent(out_list.next, NULL);
}
