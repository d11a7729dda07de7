/*
 * horizon.c - the node's horizon (horizon.h): what a push in flight
 * publishes in its slot, the table of hand-over holds, and the lock-free
 * read of both.
 *
 * Why the read is exact.  S is the single total order of the seq_cst
 * operations.  An operation of slot w that takes numbers does, in order:
 *   P  pushing[w] := v   seq_cst; v the counter's value read just before
 *                        (or a hold's kept numbers, lower)
 *   F  s := fetch_add(next_seq)     seq_cst, so s >= v (the counter grows)
 *      link the messages s.., post the wake-ups (partition lock)
 *   C  pushing[w] := 0   release, after the wake-ups are kicked
 * and shm_horizon reads RN: N := next_seq, then RP: every pushing[w], all
 * seq_cst, and returns min(N - 1, pushing[w] - 1 where set).  Take any
 * operation that took s:
 *   - RN before F in S: RN read the counter as the last fetch_add before it
 *     in S left it, so N <= s and H < s.
 *   - F before RN: then P (sequenced before F) precedes RP in S, and RP
 *     reads P's store or a later one of pushing[w]: P's v <= s gives H < s;
 *     C's 0, or the next operation's P' (sequenced after C), synchronises
 *     with RP, so the messages linked and the wake-ups posted before C
 *     happen before everything the reader does after: it may pass s.
 * So H never passes a push in flight.  C may be a release store: all the
 * reader needs from it is that visibility (its x86 cost is a plain store;
 * P is the one full fence a push pays, on its own cache line).
 *
 * A hold (shm_part_hold) runs inside the P..C of its holder: T (holds + 1,
 * then its partition in hold_parts[], or holds_over + 1 when the table is
 * full), F (the kept numbers s..), Hs (the partition's hold_seq := s), all
 * seq_cst.  It ends under the partition lock, by whoever ends it (an adopt
 * once it has linked the messages that use the numbers, a pop or the
 * maintenance once it ran out, a free): hold_seq := 0, then its entry and
 * counts go.  The reader, after RP, loads holds and, when not 0, each
 * entry's partition's hold_seq, and with holds_over every partition's.  If
 * RP read P, H < v <= s; otherwise C happens before the reader's loads, so
 * they see T and Hs: holds >= 1 (each hold's + 1 goes only after its own
 * hold_seq is 0), its entry or holds_over >= 1 (likewise), and hold_seq = s
 * until the hold ends; H < s.  An adopt that links into kept numbers
 * publishes pushing = hold_seq before ending the hold (part_move.c), so
 * the horizon passes them only after its wake-ups too.
 *
 * A worker killed inside P..C leaves pushing set: the reap clears it after
 * repairing the partition locks and waking every parked reader
 * (shm_tail_reap).  A process killed between two steps of a hold's end
 * leaves a count high or an entry naming a partition without a hold: the
 * horizon then reads more than it needs, never less.  Errors: none.
 */
#include "shm/horizon.h"

#include <stdatomic.h>

#include "shm/dir.h"
#include "shm/slot.h"

/* shm_horizon - see horizon.h. */
uint64_t
shm_horizon(struct shm_seg *seg)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint64_t h = atomic_load(&d->next_seq) - 1, v;

    for (int w = 0; w < SHM_MAX_WORKERS; w++)
        if ((v = atomic_load(&shm_slot(seg, w)->pushing)) != 0 && v - 1 < h)
            h = v - 1;
    if (atomic_load(&d->holds) == 0)
        return h;
    for (uint32_t i = 0; i < SHM_HOLD_TABLE; i++) {
        uint32_t e = atomic_load(&d->hold_parts[i]);
        if (e != 0 && e <= d->max_parts &&
            (v = atomic_load(&shm_dir_part(seg, e - 1)->hold_seq)) != 0 &&
            v - 1 < h)
            h = v - 1;
    }
    if (atomic_load(&d->holds_over) == 0)
        return h;
    uint32_t pb = atomic_load(&d->p_bump);
    for (uint32_t i = 0; i < pb && i < d->max_parts; i++)
        if ((v = atomic_load(&shm_dir_part(seg, i)->hold_seq)) != 0 &&
            v - 1 < h)
            h = v - 1;
    return h;
}

/* shm_pushing_begin - see horizon.h. */
void
shm_pushing_begin(struct shm_seg *seg, int w, uint64_t from)
{
    uint64_t v = atomic_load(&shm_dir_of(seg)->next_seq);

    if (from != 0 && from < v)
        v = from;
    atomic_store(&shm_slot(seg, w)->pushing, v);
}

/* shm_pushing_end - see horizon.h. */
void
shm_pushing_end(struct shm_seg *seg, int w)
{
    atomic_store_explicit(&shm_slot(seg, w)->pushing, 0, memory_order_release);
}

/* shm_pushing_of - see horizon.h. */
uint64_t
shm_pushing_of(struct shm_seg *seg, int w)
{
    return atomic_load(&shm_slot(seg, w)->pushing);
}

/* Take one off *c, never below 0 (a count a killed process left high
 * comes down with the next end, not under 0). */
static void
count_down(_Atomic uint32_t *c)
{
    uint32_t n = atomic_load(c);

    while (n != 0 && !atomic_compare_exchange_weak(c, &n, n - 1))
        ;
}

/* shm_hold_track - see horizon.h.  An entry already naming idx was left
 * by a process killed ending its last hold, after hold_seq went to 0 and
 * before the entry and the count went: that count's + 1 still stands, and
 * now stands for this hold. */
void
shm_hold_track(struct shm_seg *seg, uint32_t idx)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t v = idx + 1;

    for (uint32_t i = 0; i < SHM_HOLD_TABLE; i++)
        if (atomic_load(&d->hold_parts[i]) == v)
            return;
    atomic_fetch_add(&d->holds, 1);
    for (uint32_t i = 0; i < SHM_HOLD_TABLE; i++) {
        uint32_t z = 0;
        if (atomic_load(&d->hold_parts[i]) == 0 &&
            atomic_compare_exchange_strong(&d->hold_parts[i], &z, v))
            return;
    }
    atomic_fetch_add(&d->holds_over, 1);
}

/* shm_hold_untrack - see horizon.h.  Only idx's lock holder writes v. */
void
shm_hold_untrack(struct shm_seg *seg, uint32_t idx)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t v = idx + 1, i = 0;

    while (i < SHM_HOLD_TABLE && atomic_load(&d->hold_parts[i]) != v)
        i++;
    if (i < SHM_HOLD_TABLE)
        atomic_store(&d->hold_parts[i], 0);
    else
        count_down(&d->holds_over);
    count_down(&d->holds);
}
