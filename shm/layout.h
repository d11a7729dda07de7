/*
 * layout.h - the arena header and cell tags: shm/-internal layouts shared by
 * segment.c, lock.c, arena.c and stats.c (and white-box tests); the segment
 * header is in region.h.
 *
 * Everything here lives in the segment, so it holds offsets, never pointers.
 */
#ifndef MAYFLY_SHM_LAYOUT_H
#define MAYFLY_SHM_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/arena.h"
#include "shm/region.h"
#include "shm/segment.h"

/*
 * Cell tags, one uint32 per cell, meaningful at the head of a run only (the
 * first cell of a run of consecutive cells; the others keep stale tags):
 *   bits 0-1   state: FREE, CACHE, INFLIGHT, LINKED
 *   bits 2-7   worker (CACHE and INFLIGHT; 0 otherwise)
 *   bits 8-31  run length in cells, 1..SHM_RUN_MAX
 * A run changes hands with one store to its head tag.  Cells 1..bump-1 are
 * always a sequence of runs, each head's length leading to the next head, so
 * a walk from cell 1 finds every run (shm_arena_reap, lock repair).  Tags
 * from bump on are not read: those cells are nobody's (never handed out, or
 * given back whole at the end; their tags may be stale).
 */
#define SHM_TAG_FREE               0u
#define SHM_TAG_CACHE              1u /* in worker w's cache */
#define SHM_TAG_INFLIGHT           2u /* allocated by w, not linked */
#define SHM_TAG_LINKED             3u /* reachable from a structure */
#define SHM_TAG(state, w)          ((uint32_t)(state) | (uint32_t)(w) << 2)
#define SHM_TAG_RUN(state, w, len) (SHM_TAG(state, w) | (uint32_t)(len) << 8)
#define SHM_TAG_STATE(t)           ((t)&3u)
#define SHM_TAG_OWNER(t)           ((t)&0xffu) /* state and worker */
#define SHM_TAG_LEN(t)             ((t) >> 8)
#define SHM_RUN_MAX                0xffffffu
_Static_assert(SHM_MAX_WORKERS <= 64, "tag worker bits");

/*
 * struct shm_arena - start of the ARENA region; tags and cells follow.
 *   off  size  field      written by           protected by
 *     0    40  lock       -                    robust, pshared (leaf lock)
 *    64     4  bump       lock holder          lock (cells from bump on
 *                                              are nobody's)
 *    68     4  cap        master, at create    immutable (cells)
 *    72     4  taken      alloc/free paths     lock; atomic for readers
 *                         under the lock
 *    76     4  dirty      pool puts, walk      lock (FREE runs put since
 *                                              the last walk merged them)
 *    80     8  tags_off   master, at create    immutable (from region)
 *    88     8  cells_off  master, at create    immutable (from region)
 *    96    68  pool[]     lock holder          lock
 *   164     4  spill_at   master, at create    immutable (cells a worker's
 *                                              lists hold before they spill)
 *   168     4  batch      master, at create    immutable (cells of a refill)
 * spill_at + batch bounds what one worker's cache holds; both are sized at
 * create so that the caches of all workers fit in the cap/32 that pushes
 * leave free (shm_cap_room, broker_steps.c), down to 16 + 16 cells a worker.
 * pool[c] (1 <= c <= SHM_ARENA_CLASSES) lists FREE runs of exactly c cells,
 * pool[0] the longer ones, linked through the first word of their head cell.
 * taken counts cells below bump not FREE (allocated or in a worker cache):
 * taken <= bump - 1 <= cap always.  A holder that dies leaves the lists
 * half-spliced: the next locker rebuilds them and taken from a walk over the
 * tags (FREE changes only under this lock).
 */
struct shm_arena {
    pthread_mutex_t lock;
    unsigned char pad0[64 - sizeof(pthread_mutex_t)];
    uint32_t bump;
    uint32_t cap;
    _Atomic uint32_t taken;
    uint32_t dirty;
    uint64_t tags_off;
    uint64_t cells_off;
    uint32_t pool[SHM_ARENA_CLASSES + 1];
    uint32_t spill_at;
    uint32_t batch;
};
_Static_assert(sizeof(pthread_mutex_t) <= 64, "shm_arena layout");
_Static_assert(offsetof(struct shm_arena, bump) == 64, "shm_arena");
_Static_assert(offsetof(struct shm_arena, taken) == 72, "shm_arena");
_Static_assert(offsetof(struct shm_arena, cells_off) == 88, "shm_arena");
_Static_assert(offsetof(struct shm_arena, pool) == 96, "shm_arena");
_Static_assert(offsetof(struct shm_arena, spill_at) == 164, "shm_arena");
_Static_assert(offsetof(struct shm_arena, batch) == 168, "shm_arena");

#endif
