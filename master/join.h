/*
 * join.h - a join keeps each partition's order, on the node that joins
 * (SPEC §5: join or return; a graceful move keeps order).
 *
 * When this node becomes live, the old owners of what hashes to it now
 * ship it here; pushes routed here meanwhile must be read after what they
 * ship.  A drain names what it ships before anyone routes elsewhere (its
 * "h" lines); a join cannot: a peer that sees this node live a beat later
 * than a third one keeps taking pushes, and may make a partition, until
 * then.  So for a window after it becomes live (JOIN_WINDOW_MS) every push
 * here holds its partition first (shm/part_move.h: numbers kept below it,
 * pops held), and each live peer, once it sees this incarnation live,
 * says in its beats what it ships here ("J" and "H" lines, groups.h).
 * When every peer that may have owned something has said (join.c), the
 * window closes: holds of partitions nobody named end, a named one's hold
 * waits for its adopt (MASTER_HOLD_MS at most from its naming).  Master
 * only, single-threaded.
 */
#ifndef MAYFLY_MASTER_JOIN_H
#define MAYFLY_MASTER_JOIN_H

#include <stdint.h>

#include "shm/broker.h"

struct master;

/* The longest a join's window stays open when a peer never says what it
 * ships (an older build, a beat lost): as long as a drain's hold. */
#define JOIN_WINDOW_MS 5000

/* master_join_start - this node becomes live (view.c), before it says so
 * to anyone: open the window, with peers. */
void master_join_start(struct master *m, uint64_t now);

/* master_join_from - a peer's "J <inc>" line: 1 when inc is this node's
 * incarnation and the window is open (its "H" lines then count). */
int master_join_from(const struct master *m, uint64_t inc);

/* master_join_named - an "H" line of a beat master_join_from accepted:
 * (queue, part) is coming from that peer.  Held (MASTER_HOLD_MS) unless
 * its adopt came already; named once, a hold is not drawn out. */
void master_join_named(struct master *m, struct shm_name queue,
                       struct shm_name part, uint64_t now);

/* master_join_said - that beat's list is whole: peer (a member index) has
 * said everything it ships here. */
void master_join_said(struct master *m, int peer);

/* master_join_adopted - (queue, part) was adopted here. */
void master_join_adopted(struct shm_name queue, struct shm_name part);

/* master_join_tick - each tick while running: close the window once every
 * live peer has said, or it ran out. */
void master_join_tick(struct master *m, uint64_t now);

/* master_join_stop - at exit: free what is left. */
void master_join_stop(void);

#endif
