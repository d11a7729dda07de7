/*
 * arena.h - the cell arena: every variable-sized thing the segment holds
 * (payloads, names, group states, leases) lives in chains of fixed cells.
 *
 * A cell is SHM_CELL_BYTES; its first 4 bytes are the index of the next cell
 * of its chain (0 ends a chain; cell 0 is never handed out), the rest is data.
 * Beside the cells is one tag word per cell saying who holds it:
 *   FREE          on the global free list (arena lock)
 *   CACHE(w)      in worker w's private cache (only w touches it)
 *   INFLIGHT(w)   allocated by w, not yet linked into a structure
 *   LINKED        reachable from a queue/partition (partition or dir lock)
 * so after worker w dies the master frees every CACHE(w)/INFLIGHT(w) cell in
 * one scan (shm_arena_reap), whatever instruction w died at.
 *
 * Accounting: "used" counts cells not FREE and not cached; the node cap is
 * checked against it at allocation (-ENOBUFS).  Per-worker caches refill and
 * spill in batches under the arena lock, so the common path takes no lock.
 */
#ifndef MAYFLY_SHM_ARENA_H
#define MAYFLY_SHM_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define SHM_CELL_BYTES 64
#define SHM_CELL_DATA  (SHM_CELL_BYTES - 4)

struct shm_seg;

/* shm_cell - address of cell ref (ref != 0). */
void *shm_cell(struct shm_seg *seg, uint32_t ref);

/* shm_cell_next - the next cell of ref's chain, 0 at the end. */
uint32_t shm_cell_next(struct shm_seg *seg, uint32_t ref);

/* shm_cells_for - cells a chain needs to hold len data bytes (>= 1). */
uint32_t shm_cells_for(size_t len);

/*
 * shm_arena_alloc - n cells linked as one chain, tagged INFLIGHT(w), counted
 * as used.  -ENOBUFS when that would pass the node cap (or the arena is
 * exhausted).  Never blocks but for a brief arena lock on cache refill.
 */
int shm_arena_alloc(struct shm_seg *seg, int w, uint32_t n, uint32_t *head);

/*
 * shm_arena_link - tag chain head LINKED: it is now reachable from a structure.
 * Call under the lock that guards that structure, right after linking.
 */
void shm_arena_link(struct shm_seg *seg, uint32_t head);

/*
 * shm_arena_free - return a whole chain (LINKED or INFLIGHT) to worker w's
 * cache and uncount it.  The caller has already unlinked it.
 */
void shm_arena_free(struct shm_seg *seg, int w, uint32_t head);

/* shm_arena_write / read - copy len bytes at data offset off of a chain. */
void shm_arena_write(struct shm_seg *seg, uint32_t head, size_t off,
                     const void *src, size_t len);
void shm_arena_read(struct shm_seg *seg, uint32_t head, size_t off, void *dst,
                    size_t len);

/* shm_arena_equal - do len bytes at data offset 0 of head equal s? */
int shm_arena_equal(struct shm_seg *seg, uint32_t head, const void *s,
                    size_t len);

/* shm_arena_used_bytes - accounted bytes (used cells * SHM_CELL_BYTES). */
uint64_t shm_arena_used_bytes(struct shm_seg *seg);

/* shm_arena_reap - master: free every cell tagged CACHE(w) or INFLIGHT(w)
 * (after the dead worker's partition locks were repaired). */
void shm_arena_reap(struct shm_seg *seg, int w);

#endif
