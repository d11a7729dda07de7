/*
 * cluster_client.c - the master's calls to its peers (cluster_client.h).
 *
 * One libcurl multi in the master's epoll, with keep-alive to each peer.
 * Raft messages and heartbeats are posted fire-and-forget (raft retries on
 * its own; the next beat comes a period later); configure/delete and
 * hand-overs wait for their answers, which go to the caller's done.
 */
#include "master/cluster_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/raft_msg.h"
#include "http/client.h"
#include "master/master.h"

#define RAFT_SEND_MS 2000 /* a raft message later than this is stale */

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

/* beat_sent - a heartbeat's answer: nothing to do.  Its body is static: one
 * still out to a hung peer when the client is freed at exit (no done runs
 * then) leaves nothing behind. */
static void
beat_sent(void *arg, struct http_client_resp *r)
{
    (void)arg;
    (void)r;
}

int
master_cluster_client_heartbeat(struct master *m, uint64_t timeout_ms)
{
    static char body[16]; /* this node's member index, the same every time */
    const struct master_members *r = &m->members;

    if (cli == NULL)
        return 0;
    if (body[0] == '\0')
        snprintf(body, sizeof(body), "%d", r->self);
    for (int i = 0; i < r->n; i++)
        if (i != r->self)
            master_cluster_client_post(m, r->addr[i], CLUSTER_PATH_HEARTBEAT,
                                       body, strlen(body), timeout_ms,
                                       beat_sent, NULL);
    return 1;
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
master_cluster_client_send_raft(struct master *m, const struct raft_msg *msg)
{
    const struct master_members *r = &m->members;
    size_t len = raft_msg_size(msg);
    struct raft_out *o;

    if (msg->to < 0 || msg->to >= r->n || msg->to == r->self)
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
    master_cluster_client_post(m, r->addr[msg->to], CLUSTER_PATH_RAFT, o->data,
                               len, RAFT_SEND_MS, sent, o);
}

void
master_cluster_client_stop(void)
{
    http_client_free(cli);
    cli = NULL;
    while (raft_out_list.next != &raft_out_list)
        sent(raft_out_list.next, NULL);
}
