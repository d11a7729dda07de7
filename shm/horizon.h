/*
 * horizon.h - the node's horizon (SPEC §11, DESIGN.md §4): the highest
 * sequence number H such that every operation that took a number <= H from
 * the node counter (shm_dir.next_seq) has linked its messages and posted
 * its wake-ups.  A tail emits events in sequence order up to H only, so
 * after an event of sequence s nothing <= s can still appear in any
 * partition of this node: one number per owner is a stream's position.
 *
 * Two things hold H back, both in horizon.c:
 *   pushing  one word in each slot (slot.h), set before a push, an adopt or
 *            a hold takes numbers and cleared once its wake-ups are posted:
 *            two stores to the pusher's own cache line, nothing shared;
 *   holds    a hand-over's kept numbers (shm_part_hold, SHM_HOLD_SEQS of
 *            them) until the adopt has linked the messages that use them,
 *            or the hold ends without them: a bounded table of the
 *            partitions holding (SHM_HOLD_TABLE), and past it a count that
 *            makes the horizon scan the partition table.
 *
 * The shm/-internal calls run where their callers say (under a partition
 * lock or not); shm_horizon takes no lock and may run anywhere.
 */
#ifndef MAYFLY_SHM_HORIZON_H
#define MAYFLY_SHM_HORIZON_H

#include <stdint.h>

#include "shm/segment.h"

/*
 * shm_horizon - the node's horizon H now (0: nothing yet).  Lock-free: the
 * counter, one word per slot and, while a hand-over holds numbers, the
 * hold table.  What a call returned stays true (nothing can take a number
 * <= H afterwards), but a later call may return less for a moment (a push
 * publishes the counter's value it read before others took theirs): keep
 * the highest seen.
 */
uint64_t shm_horizon(struct shm_seg *seg);

/* ---- shm/-internal ---------------------------------------------------- */

/*
 * shm_pushing_begin - slot w is about to take numbers (or to link ones a
 * hold kept from `from` on; 0: none): publish the lowest it may link, the
 * counter's value now or from if lower (seq_cst).  Before the fetch_add
 * that takes them; one at a time per slot.
 */
void shm_pushing_begin(struct shm_seg *seg, int w, uint64_t from);

/* shm_pushing_end - slot w's operation has linked its messages and posted
 * (and kicked) its wake-ups: the horizon may pass it. */
void shm_pushing_end(struct shm_seg *seg, int w);

/* shm_pushing_of - what slot w publishes (0: no push in flight). */
uint64_t shm_pushing_of(struct shm_seg *seg, int w);

/*
 * shm_hold_track - partition idx is about to get hold_seq (its lock held,
 * inside a pushing_begin/end of the holder): count it and note it in the
 * table, or in holds_over when the table is full.
 */
void shm_hold_track(struct shm_seg *seg, uint32_t idx);

/* shm_hold_untrack - partition idx's hold_seq was just set to 0 (its lock
 * held): forget it. */
void shm_hold_untrack(struct shm_seg *seg, uint32_t idx);

#endif
