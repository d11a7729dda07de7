/*
 * raft_core.h - the raft core's state, shared by raft.c (life cycle, timers,
 * inputs), raft_elect.c (pre-votes, votes, taking office), raft_repl.c
 * (replication, commit, snapshots), raft_role.c (stepping down, the election
 * timer, the quorum, store failure) and raft_ready.c (outputs).  Internal to
 * consensus/: the master sees only raft.h.  Single-threaded, no locking.
 *
 * Calls go one way: raft.c calls raft_elect.c, raft_repl.c and the files
 * below them; raft_elect.c calls raft_repl.c (a new leader replicates its
 * no-op); all three call raft_role.c and raft_ready.c, which call only the
 * log, the store and raft_msg.c.
 */
#ifndef MAYFLY_CONSENSUS_RAFT_CORE_H
#define MAYFLY_CONSENSUS_RAFT_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "consensus/raft.h"
#include "consensus/raft_log.h"

#define RAFT_APPEND_BYTES (1u << 20) /* bytes per APPEND, about */

/* struct raft_peer - the leader's view of one follower. */
struct raft_peer {
    uint64_t next;      /* next index to send */
    uint64_t match;     /* highest index known to be in its log */
    uint64_t snap_wait; /* no snapshot resend before this time */
    uint64_t applied;   /* highest commit it reported: applied there */
    bool active;        /* heard from since the last quorum check */
};

struct raft {
    struct raft_config cfg;
    struct raft_log log;
    int failed; /* sticky store error: the core is unusable */

    /* persistent (store) */
    uint64_t term;
    int vote;

    /* volatile */
    enum raft_role role;
    int leader;
    uint64_t commit;
    uint64_t applied; /* last index handed out by raft_ready_take */
    bool caught_up;   /* see struct raft_status */
    bool restore_pending;
    uint64_t now;
    uint64_t election_at;  /* not leader: campaign at this time */
    uint64_t heartbeat_at; /* leader: next append to every peer */
    uint64_t quorum_at;    /* leader: next check that a quorum is alive */
    uint64_t leader_seen;  /* last time the current leader was heard */
    uint32_t granted;      /* (pre)votes for us this round, by bit */
    uint32_t refused;
    int transfer_to; /* RAFT_NO_NODE or the transfer target */
    uint64_t transfer_until;
    uint64_t rng;
    struct raft_peer peers[RAFT_MAX_NODES];

    /* outputs */
    struct raft_msg *out;
    size_t n_out;
    size_t cap_out;
    struct raft_status reported; /* status given by the last ready */
};

/* raft_ready.c */
/* raft_send - queue m (its owned parts move to the outbox); a message
 * that cannot be queued is dropped, which raft tolerates. */
void raft_send(struct raft *r, struct raft_msg *m);

/* raft_role.c */
/* raft_fail - remember a store error; later inputs return it. */
void raft_fail(struct raft *r, int rc);
/* raft_quorum - votes needed: a strict majority of n. */
int raft_quorum(const struct raft *r);
/* raft_reset_election - pick a fresh randomised election time. */
void raft_reset_election(struct raft *r);
/* raft_become_follower - at term (persisted if new), leader known or not. */
void raft_become_follower(struct raft *r, uint64_t term, int leader);

/* raft_elect.c */
/* raft_campaign - start a pre-vote round (or a real vote when forced by
 * TimeoutNow, skipping pre-vote). */
void raft_campaign(struct raft *r, bool prevote);
void raft_on_vote(struct raft *r, const struct raft_msg *m);
void raft_on_vote_resp(struct raft *r, const struct raft_msg *m);

/* raft_repl.c */
/* raft_send_append - entries from the peer's next index, or a snapshot. */
void raft_send_append(struct raft *r, int peer);
void raft_broadcast_append(struct raft *r);
/* raft_maybe_commit - advance commit to the quorum's match, own term only. */
void raft_maybe_commit(struct raft *r);
void raft_on_append(struct raft *r, const struct raft_msg *m);
void raft_on_append_resp(struct raft *r, const struct raft_msg *m);
void raft_on_snapshot(struct raft *r, const struct raft_msg *m);

#endif
