/*
 * membership.h - who the members are, which of them are live, and the
 * board that says so to the workers.
 *
 * The members are this node and its peers, numbered by cluster address.
 * Every call a peer makes to the cluster port (a heartbeat, a raft
 * message) says its node id, client address, incarnation and state; a
 * member is live when heard within member_ttl_ms and ready.  The master
 * publishes every member's state into the board, from which the
 * workers and the hand-over derive who owns what: only live members own
 * partitions.  Master only, single-threaded.
 */
#ifndef MAYFLY_MASTER_MEMBERSHIP_H
#define MAYFLY_MASTER_MEMBERSHIP_H

#include <stdint.h>

#include "consensus/raft.h"
#include "shm/board.h"

struct master;

/* The members, by index: the same index on every node, and raft's. */
struct master_members {
    int self, n;
    /* cluster addresses by node index (sorted), and the node ids heard */
    char addr[RAFT_MAX_NODES][256];
    char id[RAFT_MAX_NODES][65];
    char client[RAFT_MAX_NODES][SHM_BOARD_ADDR_MAX]; /* advertise heard */
    uint64_t heard[RAFT_MAX_NODES]; /* when a message last came from it */
    uint64_t beat[RAFT_MAX_NODES];  /* when a heartbeat (its groups) did */
    uint64_t inc[RAFT_MAX_NODES];   /* the incarnation it last named */
    uint8_t said[RAFT_MAX_NODES];   /* the state it last named */
    /* A leave it announced: that incarnation is out of the placement until
     * left_until, or until another incarnation of it is heard. */
    uint64_t left_inc[RAFT_MAX_NODES];
    uint64_t left_until[RAFT_MAX_NODES];
    /* The newest X-Mayfly-Timestamp heard from it: an older message (a
     * previous incarnation's, or one that sat in a kernel queue through a
     * partition) says nothing of it any more. */
    int64_t sent[RAFT_MAX_NODES];
};

/* What a master-to-master call says of its sender (headers; NULL when a
 * header was absent). */
struct master_peer_word {
    const char *node_id;     /* X-Mayfly-Node */
    const char *client;      /* X-Mayfly-Client: its advertise address */
    const char *incarnation; /* X-Mayfly-Incarnation: 16 hex digits */
    const char *state;       /* X-Mayfly-State: ready, starting, leaving */
    const char *timestamp;   /* X-Mayfly-Timestamp: its wall clock, ms */
};

/*
 * master_membership_start - number the members: self and peers by cluster
 * address, sorted, so every node numbers them alike; and say who this
 * node is and who its peers are to the signature of calls between nodes
 * (http/node_call.h, and m->ws.peers.identify, which the master's client
 * and the workers' use).  Before the workers fork.  -EINVAL (logged) when
 * an address is listed twice.
 */
int master_membership_start(struct master *m);

/* master_membership_heard - member i was heard from now, saying pw (a NULL
 * field keeps what we had).  A state "leaving" leaves that incarnation out
 * of the placement for leave_exclude_s.  A message older than one heard
 * before from it (pw->timestamp), or sent member_ttl_ms ago or more (it
 * sat in a kernel queue through a partition), is ignored: it never
 * revives a member that left, restarted or died since.  1 when taken, 0
 * when ignored. */
int master_membership_heard(struct master *m, int i,
                            const struct master_peer_word *pw);

/* master_membership_peer - the raft index of peer id; -1 when id is this
 * node or not a member. */
int master_membership_peer(const struct master *m, const char *id);

/* master_membership_state - what member i is to this node at now: LIVE
 * ones own partitions. */
enum shm_member_state master_membership_state(const struct master *m, int i,
                                              uint64_t now);

/* master_membership_groups_heard - whether every peer heard from within
 * member_ttl_ms has sent a heartbeat (so its groups, groups.h) since
 * since: a starting node says ready only then. */
int master_membership_groups_heard(const struct master *m, uint64_t since,
                                   uint64_t now);

/* master_membership_beat_ms - the heartbeat period: a quarter of
 * member_ttl_ms, 500 ms at most. */
uint64_t master_membership_beat_ms(const struct master *m);

/* master_membership_heartbeat - tell every peer we are alive, and our
 * state (each tick that is due, or at once with now_or_never: a drain
 * announces the leave before anything else); peers count a member dead
 * after member_ttl_ms of silence.  The beat carries the groups our queues
 * know and, the first time it says "leaving", the partitions each peer is
 * about to be handed (groups.h). */
void master_membership_heartbeat(struct master *m, uint64_t now,
                                 int now_or_never);

/* master_membership_publish - readiness, raft and members into the board
 * workers serve /health and /metrics from, and take the owners from. */
void master_membership_publish(struct master *m);

#endif
