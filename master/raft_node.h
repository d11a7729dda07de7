/*
 * raft_node.h - the master's raft: the core, its LMDB store, the declared
 * queues it drives, and proposals waiting for their commit.
 *
 * The master's loop feeds it ticks and the messages peers post to the
 * cluster port; after each input it applies what committed (publishing
 * the catalog and the new options into the segment), sends what the core
 * emitted, publishes role/term/leader into the board, and resolves
 * waiting proposals.  Its nodes are the members, numbered as membership.h
 * numbers them.  Master only, single-threaded.
 * Errors: 0 or -errno.
 */
#ifndef MAYFLY_MASTER_RAFT_NODE_H
#define MAYFLY_MASTER_RAFT_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "consensus/raft.h"
#include "master/declared.h"

struct master;
struct master_peer_word;

/* A follower campaigns after [1, 2) x this without a leader. */
#define MASTER_RAFT_ELECTION_MS 1000

/* How a proposal ended: 0 committed (and applied by the members, or the
 * deadline came), -ETIMEDOUT, -ENOTCONN (no leader), -ECANCELED (lost to
 * another leader's entry), or another -errno. */
typedef void master_raft_done_fn(void *arg, int rc);

struct master_proposal {
    uint64_t index, term;
    uint64_t deadline;
    int committed; /* and applied here: waiting for the members to apply */
    master_raft_done_fn *done;
    void *arg;
    struct master_proposal *next;
};

struct master_raft {
    struct raft *core;
    struct raft_store *store;
    struct decl_set decl;
    struct raft_status st;
    struct master_proposal *pending;
};

/*
 * master_raft_open - open data_dir/raft, replay the log into the declared
 * set and the catalog (after master_membership_start numbered the
 * members).  0 or -errno (logged).
 */
int master_raft_open(struct master *m, uint64_t now);

/* master_raft_close - free the core, close the store. */
void master_raft_close(struct master *m);

/* master_raft_tick - drive timers; call at master_raft_deadline() latest. */
void master_raft_tick(struct master *m, uint64_t now);
uint64_t master_raft_deadline(const struct master *m);

/* master_raft_receive - a message a peer posted (from the index it claims,
 * with what its headers said: it counts as heard).  -EBADMSG for
 * garbage. */
int master_raft_receive(struct master *m, const void *buf, size_t len,
                        const struct master_peer_word *pw);

/*
 * master_raft_propose - append cmd on the leader at the log index it puts
 * in *index (before done can run); done(arg, rc) runs once:
 * 0 when it has committed and been applied here and by every live or
 * starting member (each says so in its answers to the leader), or when it
 * has committed and the deadline (shm_now_ms() time) came first (see
 * settle() for what that answer means); an error when it did not commit.
 * Returns -ETIMEDOUT, appending nothing, when the deadline has come: an
 * entry in the log commits whether its sender still waits or not, so a
 * proposal its sender gave up on must never go in.  -EPERM when not
 * leader.  done is not called on an error returned.
 */
int master_raft_propose(struct master *m, const struct decl_cmd *cmd,
                        uint64_t deadline, master_raft_done_fn *done, void *arg,
                        uint64_t *index);

/* master_raft_cancel - forget the proposals started with arg: their done
 * will not run (the caller answered them otherwise). */
void master_raft_cancel(struct master *m, void *arg);

/* master_raft_leader_addr - the leader's cluster address, or NULL. */
const char *master_raft_leader_addr(const struct master *m);

/* master_raft_hand_off - graceful stop: transfer leadership if leader.
 * Returns 1 when a transfer started. */
int master_raft_hand_off(struct master *m);

/* master_raft_is_leader - 1 when this node leads. */
int master_raft_is_leader(const struct master *m);

#endif
