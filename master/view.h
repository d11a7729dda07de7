/*
 * view.h - when this node may serve: ready after a start, and fresh while
 * the master runs.
 *
 * Ready: a node alone is ready as soon as it has started.  With peers it
 * is ready once its raft log is applied up to what a leader has committed
 * (so its declared queues are there with their options), or after an
 * election timeout with no leader heard (a node restarted alone).  The
 * board (/health) and the state sent to peers both read m->ready.
 *
 * Fresh: workers trust the master's view of who owns what only while the
 * master beats the board (shm_board_beat); a stopped master's
 * workers answer 503 owner_moved and /health 503 before its peers can
 * count the node dead.  Master only, single-threaded.
 */
#ifndef MAYFLY_MASTER_VIEW_H
#define MAYFLY_MASTER_VIEW_H

#include <stdint.h>

struct master;

/* master_view_start - the node has started (workers, raft, cluster port):
 * ready now when alone, else wait (master_view_check_ready). */
void master_view_start(struct master *m, uint64_t now);

/* master_view_check_ready - become ready when the raft log has caught up
 * or the wait for a leader is over; after every raft input and tick. */
void master_view_check_ready(struct master *m, uint64_t now);

/* master_view_woke - the loop woke at now: a gap since the last wake
 * longer than the view may age means the master was stopped, and the view
 * is held stale until the peers are heard again. */
void master_view_woke(struct master *m, uint64_t now);

/* master_view_serving - what this node tells its peers: ready, and its
 * view not held stale after a stall (its workers refuse meanwhile, so
 * peers must not count it live and forward to it yet). */
int master_view_serving(const struct master *m);

/* master_view_beat - every tick, after the board was published: the
 * view is current (unless held after a stall). */
void master_view_beat(struct master *m, uint64_t now);

#endif
