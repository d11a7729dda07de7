/*
 * cluster.h - the master's cluster port: raft messages between masters,
 * and configure/delete requests from this node's workers and from peers.
 *
 * Every request must carry the cluster secret (X-Mayfly-Secret); one that
 * does not is answered 401 and changes nothing.  Outgoing calls go through
 * one libcurl multi client inside the master's epoll.
 */
#ifndef MAYFLY_MASTER_CLUSTER_H
#define MAYFLY_MASTER_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "http/client.h"

struct master;
struct raft_msg;

/* Epoll tags of the master's loop (the client owns CLUSTER_TAG_CLIENT|fd). */
#define MASTER_TAG_SIGNAL  1u
#define MASTER_TAG_TIMER   2u
#define MASTER_TAG_CLUSTER 3u
#define MASTER_TAG_DRAIN   4u /* the client port during a drain */
#define MASTER_TAG_CLIENT  (1ull << 32)

/* The header node-to-node and worker-to-master calls authenticate with. */
#define CLUSTER_SECRET_HEADER "X-Mayfly-Secret"
#define CLUSTER_NODE_HEADER   "X-Mayfly-Node"
#define CLUSTER_FWD_HEADER    "X-Mayfly-Forwarded"
/* The sender's client address (advertise), on every master-to-master call:
 * workers call a peer's client port there (depth?scope=cluster). */
#define CLUSTER_CLIENT_HEADER "X-Mayfly-Client"
/* And the sender's incarnation and state (ready, starting, leaving): a
 * member owns partitions only while it says ready (master/raft_node.c). */
#define CLUSTER_INCARNATION_HEADER "X-Mayfly-Incarnation"
#define CLUSTER_STATE_HEADER       "X-Mayfly-State"

#define CLUSTER_PATH_RAFT      "/cluster/v1/raft"
#define CLUSTER_PATH_CONFIGURE "/cluster/v1/configure"
#define CLUSTER_PATH_DELETE    "/cluster/v1/delete"
#define CLUSTER_PATH_HEARTBEAT "/cluster/v1/heartbeat"

/*
 * master_cluster_secret - read cluster_secret_file, or make a random secret
 * for a node without peers (only its own workers call it).  Before forking:
 * workers inherit it.  0 or -errno (logged).
 */
int master_cluster_secret(struct master *m);

/* master_cluster_start - serve the cluster port on listen_fd and make the
 * client, both inside epoll ep.  0 or -errno (logged). */
int master_cluster_start(struct master *m, int ep, int listen_fd);

/* master_cluster_event - an epoll event for the cluster server or client. */
void master_cluster_event(struct master *m, uint64_t tag, uint32_t events);

/* master_cluster_run - let MHD and curl do their due work (each loop turn). */
void master_cluster_run(struct master *m);

/* master_cluster_timeout_ms - how long the loop may sleep for them. */
int master_cluster_timeout_ms(struct master *m);

/* master_cluster_beat_ms - the heartbeat period: a quarter of
 * member_ttl_ms, 500 ms at most. */
uint64_t master_cluster_beat_ms(const struct master *m);

/* master_cluster_heartbeat - tell every peer we are alive, and our state
 * (each tick that is due, or at once with now_or_never: a drain announces
 * the leave before anything else); peers count a member dead after
 * member_ttl_ms of silence. */
void master_cluster_heartbeat(struct master *m, uint64_t now, int now_or_never);

/* master_cluster_send_raft - post a raft message to its node (best effort). */
void master_cluster_send_raft(struct master *m, const struct raft_msg *msg);

/*
 * master_cluster_post - POST body (kept by the caller until done) to addr's
 * cluster port at path, with the secret, our node id and X-Mayfly-Forwarded;
 * done(arg, resp) runs once (resp->err != 0 when no answer came within
 * timeout_ms), unless the caller cancels (http_client_cancel(cli, arg)).
 */
void master_cluster_post(struct master *m, const char *addr, const char *path,
                         const void *body, size_t len, uint64_t timeout_ms,
                         http_client_done_fn *done, void *arg);

/* master_cluster_stop - answer what waits, close the port and the client. */
void master_cluster_stop(struct master *m);

#endif
