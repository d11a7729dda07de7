/*
 * dd_index.h - the dedupe window's hash index (SPEC §13): buckets of the
 * window's key cells, so a keyed push finds its key in O(1) instead of
 * walking every key of the partition under its lock.
 *
 * The window's list (p->dd_head .. p->dd_tail, ring.h) stays the truth: the
 * index is one arena run named by p->dd_index, each bucket the newest key
 * whose hash falls in it, and each key's bnext the next older one of its
 * bucket, so a chain runs in the list's reverse order.  A repair, an adopt
 * or a growth rebuilds it from the list; a holder killed mid-update leaves
 * at worst a stale index the repair rebuilds.  Without an index (a small
 * window, no room in the arena, a locker without a slot) a lookup walks the
 * list, as before.
 *
 * Locking: every function runs under the partition's lock (or in its
 * repair).  No malloc, syscalls or logging; arena allocation only.
 * Errors: 0 or -errno.
 */
#ifndef MAYFLY_SHM_DD_INDEX_H
#define MAYFLY_SHM_DD_INDEX_H

#include <stdint.h>

#include "shm/ring.h"

/*
 * struct shm_ddx - the index: one run of shm_ddx_cells(nb) cells.
 *   off  size  field   written by          protected by
 *     0     4  chain   arena (run length)  -
 *     4     4  nb      builder, before it  immutable once linked: buckets,
 *                        is named            a power of two
 *     8  4*nb  b       push/trim/builder   partition lock: bucket i's
 *                                          newest key (hash & (nb - 1) ==
 *                                          i), 0: none
 */
struct shm_ddx {
    uint32_t chain;
    uint32_t nb;
    uint32_t b[];
};

#define SHM_DDX_MIN_KEYS    8  /* a window this long gets an index */
#define SHM_DDX_MIN_BUCKETS 16 /* and at least this many buckets */

/* shm_ddx_of - p's index, or NULL (the list is walked). */
static inline struct shm_ddx *
shm_ddx_of(struct shm_seg *seg, const struct shm_part *p)
{
    return p->dd_index != 0 ? shm_cell(seg, p->dd_index) : NULL;
}

/* shm_ddx_cells - cells an index of nb buckets takes. */
static inline uint32_t
shm_ddx_cells(uint32_t nb)
{
    return shm_cells_for(4 + (size_t)nb * 4);
}

/* shm_ddx_insert - put key cell d (filled) at the head of its bucket: it
 * is the window's newest key. */
void shm_ddx_insert(struct shm_seg *seg, struct shm_ddx *x, uint32_t d);

/* shm_ddx_remove - take key cell d out of its bucket (a walk of it: d is
 * its bucket's oldest when the window drops its oldest key). */
void shm_ddx_remove(struct shm_seg *seg, struct shm_ddx *x, uint32_t d);

/* shm_ddx_find - the oldest key of hash seen within window_ms of now (what
 * a walk of the list would find first), or NULL. */
const struct shm_dd *shm_ddx_find(struct shm_seg *seg, const struct shm_ddx *x,
                                  uint64_t hash, uint64_t now,
                                  uint64_t window_ms);

/* shm_ddx_fill - empty every bucket and insert the keys of the list from
 * head, oldest first, at most max of them.  -EUCLEAN if the list runs on
 * past max (the index is then partial: drop it). */
int shm_ddx_fill(struct shm_seg *seg, struct shm_ddx *x, uint32_t head,
                 uint64_t max);

/* shm_ddx_build - give p an index of buckets enough for its keys, filled
 * from its list, in place of the one it has (freed, named in p->intent
 * first).  -ENOBUFS when the arena has no run for it (p keeps what it has),
 * -EPERM for a locker without a slot (w < 0). */
int shm_ddx_build(struct shm_seg *seg, int w, struct shm_part *p);

/* shm_ddx_drop - free p's index, if any (named in p->intent first). */
void shm_ddx_drop(struct shm_seg *seg, int w, struct shm_part *p);

/* shm_ddx_sound - (repair) can run ref be an index: a LINKED or INFLIGHT
 * head whose length holds its nb buckets, nb a power of two? */
int shm_ddx_sound(struct shm_seg *seg, uint32_t ref);

#endif
