/*
 * cluster.h - the master's cluster port: raft messages and heartbeats
 * between masters, partitions handed over, and configure/delete requests
 * from this node's workers and from peers.
 *
 * Every request must carry the cluster secret (X-Mayfly-Secret); one that
 * does not is answered 401 and changes nothing.  The router calls down
 * into the handlers (raft_node.c, membership.c, configure.c, handover.c),
 * which never call back into it; the calls to peers are
 * cluster_client.c's.
 */
#ifndef MAYFLY_MASTER_CLUSTER_H
#define MAYFLY_MASTER_CLUSTER_H

#include <stddef.h>

struct master;

/*
 * master_cluster_secret - read cluster_secret_file, or make a random secret
 * for a node without peers (only its own workers call it).  Before forking:
 * workers inherit it.  0 or -errno (logged).
 */
int master_cluster_secret(struct master *m);

/* master_cluster_start - serve the cluster port on listen_fd inside epoll
 * ep.  0 or -errno. */
int master_cluster_start(struct master *m, int ep, int listen_fd);

/* master_cluster_run - let MHD do its due work (each loop turn). */
void master_cluster_run(struct master *m);

/* master_cluster_timeout_ms - how long the loop may sleep for it (-1: no
 * timer, or not started). */
int master_cluster_timeout_ms(struct master *m);

/* master_cluster_stop - answer what waits, close the port. */
void master_cluster_stop(struct master *m);

/*
 * master_cluster_heartbeat_index - a heartbeat's body, body[0..len): the
 * sender's member index in decimal (at most two digits: RAFT_MAX_NODES),
 * below n and not self.  The index, or -1 for anything else.
 */
int master_cluster_heartbeat_index(const char *body, size_t len, int n,
                                   int self);

#endif
