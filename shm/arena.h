/*
 * arena.h - the cell arena: every variable-sized thing the segment holds
 * (payloads, names, group states, leases) lives in a run of consecutive
 * fixed cells.
 *
 * A cell is SHM_CELL_BYTES.  An allocation is one run of n cells; its data
 * starts 4 bytes into the head cell (the first word is the arena's) and runs
 * on contiguously, SHM_RUN_DATA(n) bytes.  Beside the cells is one tag word
 * per cell; the head's says who holds the run, and its length:
 *   FREE          in the global pool (arena lock)
 *   CACHE(w)      in worker w's private cache (only w touches it)
 *   INFLIGHT(w)   allocated by w, not yet linked into a structure
 *   LINKED        reachable from a queue/partition (partition or dir lock)
 * so after worker w dies the master frees every CACHE(w)/INFLIGHT(w) run in
 * one walk (shm_arena_reap), whatever instruction w died at.
 *
 * Accounting: "used" counts cells not FREE and not cached; the node cap is
 * the arena's size (-ENOBUFS).  Runs of up to SHM_ARENA_CLASSES cells come
 * from and go to a per-worker cache without a lock; the cache refills and
 * spills in batches under the arena lock, and longer runs take it each time.
 */
#ifndef MAYFLY_SHM_ARENA_H
#define MAYFLY_SHM_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "shm/segment.h"

#define SHM_CELL_BYTES    64
#define SHM_RUN_DATA(n)   ((size_t)(n)*SHM_CELL_BYTES - 4)
#define SHM_ARENA_CLASSES 16 /* run lengths a worker cache keeps */

/* shm_cell - address of cell ref (ref != 0); inline: every message, group
 * state and lease access goes through it. */
static inline void *
shm_cell(struct shm_seg *seg, uint32_t ref)
{
    return seg->cells + (size_t)ref * SHM_CELL_BYTES;
}

/* shm_cells_for - cells a run needs to hold len data bytes (>= 1): the
 * head cell's first word is the arena's. */
static inline uint32_t
shm_cells_for(size_t len)
{
    return (uint32_t)((len + 4 + SHM_CELL_BYTES - 1) / SHM_CELL_BYTES);
}

/*
 * shm_arena_alloc - a run of n consecutive cells, tagged INFLIGHT(w), counted
 * as used.  -ENOBUFS when no run of n free cells is left.  Never blocks but
 * for a brief arena lock (cache refill, or n > SHM_ARENA_CLASSES).
 */
int shm_arena_alloc(struct shm_seg *seg, int w, uint32_t n, uint32_t *head);

/*
 * shm_arena_link - tag run head LINKED: it is now reachable from a structure.
 * Call under the lock that guards that structure, right after linking.
 */
void shm_arena_link(struct shm_seg *seg, uint32_t head);

/*
 * shm_arena_free - return a run (LINKED or INFLIGHT) to worker w's cache (or
 * the pool) and uncount it, with one store to its tag first.  The caller has
 * already unlinked it.
 */
void shm_arena_free(struct shm_seg *seg, int w, uint32_t head);

/*
 * shm_arena_flush - worker w, at rest (its heartbeat): runs longer than
 * SHM_ARENA_CLASSES it freed go back to the pool.  A long free defers that
 * to w's next arena call, so a run another worker could reuse is never
 * still named in its freer's intent word.  While the arena grows, this
 * process also maps the cells just above its high-water mark ahead of
 * use (a bounded window, arena.c's "Mapping ahead"); outside every lock.
 */
void shm_arena_flush(struct shm_seg *seg, int w);

/* A process's mapping ahead of the arena's growth (shm_arena_ahead);
 * zeroed but bump = to = 1: nothing mapped yet. */
struct shm_ahead {
    uint32_t bump; /* bump at the last shm_arena_grew */
    uint32_t to;   /* cells below this one are mapped in this process */
    int off;       /* the kernel cannot (before Linux 5.14): never again */
};

/*
 * shm_arena_ahead - map in this process the cells just above the arena's
 * high-water mark (bump, as st's last shm_arena_grew saw it) and their tags, up to window bytes past it, once
 * less than half of that is left mapped: one madvise, MADV_POPULATE_WRITE
 * with alloc (the kernel allocates the pages: the master, off the workers'
 * path), else MADV_POPULATE_READ (maps what is there, 16 pages a fault).
 * Returns the bytes mapped, 0, or -errno.  A system call: never under a
 * lock.  Costs the node's memory the window, beyond what it holds.
 */
long shm_arena_ahead(struct shm_seg *seg, struct shm_ahead *st, size_t window,
                     int alloc);

/* shm_arena_grew - cells bump passed since st's last call (0 when it went
 * down: free runs at its top went back); notes bump in st. */
uint32_t shm_arena_grew(struct shm_seg *seg, struct shm_ahead *st);

/* shm_arena_write / read - copy len bytes at data offset off of a run
 * (clipped at its end). */
void shm_arena_write(struct shm_seg *seg, uint32_t head, size_t off,
                     const void *src, size_t len);
void shm_arena_read(struct shm_seg *seg, uint32_t head, size_t off, void *dst,
                    size_t len);

/* shm_arena_equal - do len bytes at data offset 0 of head equal s?  (0 if
 * the run is shorter.) */
int shm_arena_equal(struct shm_seg *seg, uint32_t head, const void *s,
                    size_t len);

/* shm_arena_used_bytes - accounted bytes (used cells * SHM_CELL_BYTES). */
uint64_t shm_arena_used_bytes(struct shm_seg *seg);

/* shm_arena_lock - take the arena's lock (rebuilding the pool after a dead
 * holder) for a walk that must see no run change hands: the checker's
 * (check.h).  Nothing may be taken under it. */
int shm_arena_lock(struct shm_seg *seg);
void shm_arena_unlock(struct shm_seg *seg);

/* shm_arena_reap - master: free every run tagged CACHE(w) or INFLIGHT(w)
 * (after the dead worker's partition locks were repaired).  0, or
 * -ETIMEDOUT with nothing done when the arena lock was held past the
 * master's bound (lock.h). */
int shm_arena_reap(struct shm_seg *seg, int w);

#endif
