/*
 * raft.h - the raft core: a deterministic state machine over a log store.
 *
 * Inputs are calls: raft_tick() with the time, raft_step() with a message a
 * peer sent, raft_propose() with a command, raft_transfer_leadership().
 * Outputs queue up inside and are taken with raft_ready_take(): messages to
 * send, a snapshot to restore, committed entries to apply, and the status
 * when role, term or leader changed.  The core reads no clock, opens no
 * socket and draws randomness only from the seed it is given, so the same
 * inputs give the same outputs (the simulator in test/consensus relies on
 * it).  It writes the store synchronously: term and vote, and log entries,
 * are durable before any message that depends on them is queued.
 *
 * Membership is static: nodes are indices 0..n-1 into a list every node
 * orders the same way (the master sorts the members' cluster addresses).
 * One thread calls in (the master's loop); no locking.  Errors: 0 or -errno.  A store failure
 * is sticky: every later input returns it, and the caller should exit.
 */
#ifndef MAYFLY_CONSENSUS_RAFT_H
#define MAYFLY_CONSENSUS_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "consensus/raft_msg.h"

struct raft;
struct raft_store;

#define RAFT_NO_NODE       (-1) /* no leader known / no vote */
#define RAFT_TRANSFER_AUTO (-1) /* transfer to the most up-to-date peer */

enum raft_role {
    RAFT_FOLLOWER,
    RAFT_PRECANDIDATE, /* asking for pre-votes; term unchanged */
    RAFT_CANDIDATE,
    RAFT_LEADER,
};

struct raft_config {
    int self; /* this node's index */
    int n;    /* cluster size, 1..RAFT_MAX_NODES */
    /* A follower starts an election after [election_ms, 2*election_ms)
     * without a leader; 0 means 1000. */
    uint32_t election_ms;
    uint32_t heartbeat_ms; /* leader's append period; 0 means 100 */
    /* Compact when this many applied entries sit in the log; 0: 1024. */
    uint64_t snapshot_threshold;
    uint32_t max_append; /* entries per APPEND at most; 0 means 64 */
    uint64_t seed;       /* PRNG seed for election timeouts: differ per node */
    /*
     * snapshot - serialise the state machine as of the last entry handed
     * out by raft_ready_take() into a malloc'd blob (*data may be NULL when
     * *len is 0).  Returns 0 or -errno (compaction is then retried later).
     */
    int (*snapshot)(void *arg, void **data, size_t *len);
    void *arg;
};

struct raft_status {
    enum raft_role role;
    uint64_t term;
    int leader;          /* index, or RAFT_NO_NODE */
    uint64_t commit;     /* highest index known committed */
    uint64_t applied;    /* highest index handed out to apply */
    uint64_t last_index; /* last index in the log */
    /*
     * caught_up - this node has applied everything a leader had committed
     * when it was last heard (a follower), or has committed an entry of
     * its own term (a leader: everything before it is committed too).
     * Set once, never cleared: it says the state machine is as current as
     * the cluster's was at some point since the start, which is what a
     * restarted node waits for before it serves (master/raft_node.c).
     */
    bool caught_up;
};

/*
 * struct raft_ready - what to do after an input, in this order:
 * 1. if has_snapshot, replace the state machine with snapshot/snapshot_len
 *    (it covers the log up to snapshot_index);
 * 2. apply entries[0..n_entries) in order, skipping RAFT_ENTRY_NOOP ones;
 * 3. send msgs[i] to node msgs[i].to (best effort: raft retries), only
 *    after 1 and 2: an answer to the leader says the entries handed out
 *    with it are applied;
 * 4. status is always the current one (commit and applied move often);
 *    status_changed says role, term or leader changed since the last ready.
 * All of it is owned by the ready until raft_ready_release().
 */
struct raft_ready {
    struct raft_msg *msgs;
    size_t n_msgs;
    bool has_snapshot;
    uint64_t snapshot_index;
    void *snapshot;
    size_t snapshot_len;
    struct raft_entry *entries;
    size_t n_entries;
    bool status_changed;
    struct raft_status status;
};

/*
 * raft_create - a core over an open store (loaded: term, vote, snapshot,
 * entries), a follower at now_ms.  The store stays the caller's, to close
 * after raft_free().  -EINVAL for a bad config.  The first ready carries the
 * stored snapshot, if any, for the state machine to restore.
 */
int raft_create(const struct raft_config *cfg, struct raft_store *store,
                uint64_t now_ms, struct raft **out);

/* raft_free - release the core (r may be NULL); the store stays open. */
void raft_free(struct raft *r);

/*
 * raft_tick - the time is now_ms (monotonic): start an election, send
 * heartbeats, step down without a quorum, abandon a stale transfer, or
 * compact the log, as due.  Call it by raft_deadline() at the latest, and
 * right before every other input: those act at the last tick's time, and
 * a follower's heartbeat resets its election timer from that time (a core
 * ticked only at its deadline campaigns under a live leader).
 */
int raft_tick(struct raft *r, uint64_t now_ms);

/* raft_deadline - the latest time raft_tick() must next be called. */
uint64_t raft_deadline(const struct raft *r);

/*
 * raft_step - a message from a peer (m->to must be self, m->from a peer).
 * The core copies what it keeps.  -EINVAL for a message not meant for us.
 */
int raft_step(struct raft *r, const struct raft_msg *m);

/*
 * raft_propose - append a RAFT_ENTRY_DATA entry (copied) on the leader.
 * *index_out receives its index; it is committed when a ready hands out an
 * entry at that index with the term raft_status() showed at proposal: the
 * same index with another term means the proposal was lost.
 * -EPERM when not leader (raft_status().leader hints where to go), -EBUSY
 * while a leader transfer runs, -EMSGSIZE above RAFT_ENTRY_MAX.
 */
int raft_propose(struct raft *r, const void *data, size_t len,
                 uint64_t *index_out);

/*
 * raft_transfer_leadership - hand leadership to target (or
 * RAFT_TRANSFER_AUTO: the peer with the most of the log): catch it up, then
 * tell it to campaign now.  Proposals get -EBUSY until it ends (a new
 * leader, or an election timeout later, abandoned).  -EPERM when not
 * leader, -EINVAL for a bad target, -ENOENT when there is no peer.
 */
int raft_transfer_leadership(struct raft *r, int target);

/* raft_status - the current role, term, leader and indices. */
void raft_status(const struct raft *r, struct raft_status *st);

/*
 * raft_peer_applied - on the leader, the highest index peer has said (in
 * its answers to this term's appends) it has committed and applied; 0 when
 * it has not said, for self, and on any node that does not lead.  A node
 * of an earlier build never says: 0.
 */
uint64_t raft_peer_applied(const struct raft *r, int peer);

/*
 * raft_ready_take - move the pending outputs into *rd (zeroed first).
 * Entries handed out count as applied: apply them all before the next
 * input, since a compaction snapshots the state machine at that point.
 * -ENOMEM leaves everything pending.
 */
int raft_ready_take(struct raft *r, struct raft_ready *rd);

/* raft_ready_release - free what rd owns and zero it. */
void raft_ready_release(struct raft_ready *rd);

#endif
