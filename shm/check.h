/*
 * check.h - the segment checker: one walk over the whole segment that tests
 * every invariant the layout comments and DESIGN.md §2 state, and says which
 * one broke first.
 *
 * What it checks, by structure (each under the lock that guards it, taken
 * in the lock order of DESIGN.md §2: queue lock -> one partition lock; the
 * dir lock, the arena's and the due heap's each alone):
 *   DIR        magic; no record alive and on its free list, the free
 *              lists without a cycle; the name index: every slot naming a
 *              live record carries the high half of its hash and is
 *              reachable from its home slot; each live queue's partition
 *              list: nparts entries, each a partition of that queue and
 *              generation, and every live partition on its queue's list;
 *              waiter bits and parked-pop counts only for worker slots in
 *              use.  Quiet only (a record is marked dead under its own lock
 *              before the dir lock frees it): every record below its
 *              table's bump alive or free, nqueues, every index slot a live
 *              record, every live record indexed once.
 *   queue      its name a LINKED run of its length; the group registry: no
 *              cycle, ngroups entries, each a LINKED cell with a LINKED
 *              name; a pending free (intent) not on the list.
 *   partition  no wipe owed; its name; the message list: seqs rising and
 *              below the node counter, each a LINKED run as long as its
 *              length needs, tail the last, count and cost equal to the
 *              walk, oldest_ms the head's (when there is one); intent, if
 *              set, reachable from nothing; a hold's time and numbers set
 *              together, the numbers given by the node's counter and used
 *              by no message, known to the horizon (its hold table or the
 *              count past it); what left the list (gone_seq) below the
 *              counter; the group states: ngs of them, each pointing
 *              at a registry entry of the queue (once) with its name hash,
 *              cursor the first message above last; each state's leases:
 *              seqs rising and at most last, each naming the listed message
 *              of its seq (marked read, but for a first delivery owed:
 *              READY_INC of attempts 0), a known state, attempts 0 only
 *              when owed, nleases, nready and ltail equal to the walk,
 *              every live lease's deadline at or after the state's and the
 *              partition's due; leased equal to the live leases.
 *   arena      the runs from cell 1 tile [1, bump); taken equal to the
 *              cells of runs not FREE; every pool entry a FREE head of its
 *              class, listed once, and the pool holding every FREE cell.
 *   due heap   heap order, positions and times agree (shm_due_check).
 *   horizon    hold table entries name partition records (horizon.c).
 *   catalog    every entry of one generation found by its lookup with the
 *              same options (when the handle has a catalog).
 * With SHM_CHECK_QUIET (no other process changes the segment meanwhile: a
 * test's fixture, a node stopped), also: every run reached from a structure
 * reached once, every LINKED run reached (no leak), no INFLIGHT run, no
 * slot with a push in flight, the hold counts at least the holds, each
 * worker's CACHE cells equal to its cache_count, the arena's used bytes
 * equal to the LINKED cells, and every partition with a live lease on the
 * due heap no later than its earliest deadline.
 *
 * A ref outside the arena is named, never followed; every list walk is
 * capped at the arena's cells; a partition whose message list is unsound
 * (a bad ref, seqs not rising: a cycle) has its states and leases left
 * unchecked, since they are checked against that list.
 *
 * It never frees nor repairs beyond what taking a lock does (as a locker
 * without a slot: a partition whose wipe is owed is skipped and counted in
 * a live check, an error in a quiet one).  It allocates its bitmaps before
 * taking any lock.  Errors: see shm_check.
 */
#ifndef MAYFLY_SHM_CHECK_H
#define MAYFLY_SHM_CHECK_H

#include <sys/types.h>

#include <stdint.h>

#include "shm/segment.h"

#define SHM_CHECK_QUIET 1u /* nothing else runs: whole-segment accounting */

/* What a check found: the first broken invariant, how many broke, and the
 * figures of what it walked. */
struct shm_check_report {
    uint64_t problems; /* broken invariants (0: sound) */
    char first[256];   /* the first, as a sentence ("" when sound) */
    uint64_t queues, parts, messages, message_bytes, states, leases, groups;
    uint64_t linked_cells, free_cells, cached_cells, inflight_cells;
    uint64_t skipped; /* partitions passed over: a wipe owed, or freed */
};

/*
 * shm_check - walk seg and check every invariant above into *r.  Returns
 * the number of problems (0: sound), or -ENOMEM (bitmaps).  Callable from
 * any process mapping the segment, while workers run (flags 0).
 */
int64_t shm_check(struct shm_seg *seg, unsigned flags,
                  struct shm_check_report *r);

/*
 * shm_check_attach - map the segment of the running node whose master is
 * pid (its memfd, through /proc/pid/fd) into *seg, for shm_check.  0 or
 * -errno (-ENOENT: no mayfly segment open in pid).
 */
int shm_check_attach(pid_t pid, struct shm_seg *seg);

/* shm_check_detach - unmap what shm_check_attach mapped. */
void shm_check_detach(struct shm_seg *seg);

#endif
