/*
 * cluster_client.h - the master's calls to its peers: heartbeats, raft
 * messages, configure/delete requests passed to the leader, partitions
 * shipped to their new owner.
 *
 * One libcurl multi client inside the master's epoll.  Every call is
 * signed with the cluster secret (http/sign.h; over HTTPS with
 * cluster_tls_*) for the peer it goes to (its id and incarnation as
 * membership heard them: master_membership_start gives the client its
 * identify), with its deadline (now plus the call's timeout), and says who
 * sends it: node id, client address, incarnation and state, all signed.  The modules that send call down into this one;
 * it calls none of them (what state to say comes through the function
 * given at start).  Master only, single-threaded.
 */
#ifndef MAYFLY_MASTER_CLUSTER_CLIENT_H
#define MAYFLY_MASTER_CLUSTER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "http/client.h"
#include "http/node_call.h"

struct master;
struct http_buf;
struct raft_msg;

/* Who sends a call; every call is signed (http/sign.h). */
#define CLUSTER_NODE_HEADER "X-Mayfly-Node"
#define CLUSTER_FWD_HEADER  HTTP_NODE_FORWARDED
/* The sender's client address (advertise), on every master-to-master call:
 * workers call a peer's client port there (depth?scope=cluster). */
#define CLUSTER_CLIENT_HEADER "X-Mayfly-Client"
/* And the sender's incarnation and state (ready, starting, leaving): a
 * member owns partitions only while it says ready (master/membership.c). */
#define CLUSTER_INCARNATION_HEADER "X-Mayfly-Incarnation"
#define CLUSTER_STATE_HEADER       "X-Mayfly-State"

#define CLUSTER_PATH_RAFT      "/cluster/v1/raft"
#define CLUSTER_PATH_CONFIGURE "/cluster/v1/configure"
#define CLUSTER_PATH_DELETE    "/cluster/v1/delete"
#define CLUSTER_PATH_HEARTBEAT "/cluster/v1/heartbeat"

/* Whether this node says it is ready (1) or starting (0) to its peers,
 * while it runs (it says leaving once it no longer does). */
typedef int master_cluster_client_serving_fn(const struct master *m);

/* master_cluster_client_start - make the client inside epoll ep, calling
 * peers as peers says; every call says the state serving(m) gives.  0 or
 * -ENOMEM. */
int master_cluster_client_start(int ep,
                                master_cluster_client_serving_fn *serving,
                                const struct http_client_peers *peers);

/* master_cluster_client_event - an epoll event for one of the client's
 * descriptors (tag MASTER_TAG_CLIENT and above). */
void master_cluster_client_event(uint64_t tag, uint32_t events);

/* master_cluster_client_run - let curl do its due work (each loop turn). */
void master_cluster_client_run(void);

/* master_cluster_client_timeout_ms - how long the loop may sleep for it
 * (-1: no timer, or not started). */
int master_cluster_client_timeout_ms(void);

/*
 * master_cluster_client_post - POST body (kept by the caller until done)
 * to addr's cluster port at path, signed, with our node id and
 * X-Mayfly-Forwarded; done(arg, resp) runs once (resp->err != 0 when no
 * answer came within timeout_ms), unless the caller cancels.
 */
void master_cluster_client_post(struct master *m, const char *addr,
                                const char *path, const void *body, size_t len,
                                uint64_t timeout_ms, http_client_done_fn *done,
                                void *arg);

/* master_cluster_client_cancel - drop the calls posted with arg: their
 * done will not run. */
void master_cluster_client_cancel(void *arg);

/* master_cluster_client_heartbeat - post each peer i its heartbeat body
 * body[i] (groups.h says what it holds), each answer awaited timeout_ms
 * at most (and ignored); a peer's beat is dropped while one is still out
 * to it, unless bit i of force is set (a joiner's first word: join.h).  0
 * when the client is not running (nothing sent), else 1.  The bodies are
 * the client's now: each is freed once its answer came, or at stop;
 * body[] is left empty. */
int master_cluster_client_heartbeat(struct master *m, uint64_t timeout_ms,
                                    struct http_buf *body, uint64_t force);

/* master_cluster_client_send_raft - post a raft message to its node (best
 * effort: raft retries on its own). */
void master_cluster_client_send_raft(struct master *m,
                                     const struct raft_msg *msg);

/* master_cluster_client_stop - free the client (no done runs any more)
 * and the raft messages and heartbeats still out. */
void master_cluster_client_stop(void);

#endif
