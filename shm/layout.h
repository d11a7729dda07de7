/*
 * layout.h - the segment header and the arena header: shm/-internal layouts
 * shared by segment.c, lock.c, arena.c and stats.c (and white-box tests).
 *
 * Everything here lives in the segment, so it holds offsets, never pointers.
 */
#ifndef MAYFLY_SHM_LAYOUT_H
#define MAYFLY_SHM_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/region.h"
#include "shm/segment.h"

/*
 * struct shm_header - offset 0 of the segment.
 *   off  size  field         written by          protected by
 *     0     8  magic         master, at create   immutable
 *     8     4  version       master, at create   immutable
 *    12     4  pad
 *    16     8  size          master, at create   immutable
 *    24    24  region_off[]  master, at create   immutable
 *    48    24  region_size[] master, at create   immutable
 *    72     8  lock_repairs  any locker          atomic (relaxed add)
 *    80     4  params_gen    master (HUP)        atomic; copy = gen & 1
 *   128   160  params[2]     master              the copy not current
 * shm_segment_set_defaults() fills the spare copy, then bumps params_gen
 * (release): a reader holding a pointer from shm_params_of() sees a whole
 * copy unless two HUPs land while it reads (LMDB's two metas).
 */
struct shm_header {
    uint64_t magic;
    uint32_t version;
    uint32_t pad0;
    uint64_t size;
    uint64_t region_off[SHM_REGION_COUNT];
    uint64_t region_size[SHM_REGION_COUNT];
    _Atomic uint64_t lock_repairs;
    _Atomic uint32_t params_gen;
    unsigned char pad1[44];
    struct shm_params params[2];
};
_Static_assert(SHM_REGION_COUNT == 3, "shm_header layout");
_Static_assert(offsetof(struct shm_header, region_off) == 24, "shm_header");
_Static_assert(offsetof(struct shm_header, lock_repairs) == 72, "shm_header");
_Static_assert(offsetof(struct shm_header, params_gen) == 80, "shm_header");
_Static_assert(offsetof(struct shm_header, params) == 128, "shm_header");
_Static_assert(sizeof(struct shm_params) == 80, "shm_params layout");

/*
 * Cell tags, one uint32 per cell: state in the low byte, worker in the next.
 * Only chain heads carry INFLIGHT/LINKED; the other cells of an allocated
 * chain are BODY, so a chain changes hands with one store to its head tag.
 * FREE is 0: a never-used cell (beyond bump) reads FREE too.
 */
#define SHM_TAG_FREE      0u
#define SHM_TAG_CACHE     1u /* in worker w's cache list */
#define SHM_TAG_INFLIGHT  2u /* head of a chain w allocated, not linked */
#define SHM_TAG_LINKED    3u /* head of a chain reachable from a structure */
#define SHM_TAG_BODY      4u /* non-head cell of an allocated chain */
#define SHM_TAG(state, w) ((uint32_t)(state) | (uint32_t)(w) << 8)
#define SHM_TAG_STATE(t)  ((t)&0xffu)

/*
 * struct shm_arena - start of the ARENA region; tags and cells follow.
 *   off  size  field      written by          protected by
 *     0    40  lock       -                   robust, pshared (leaf lock)
 *    64     4  free_head  refill/spill/reap   lock
 *    68     4  bump       refill              lock (next never-used cell)
 *    72     4  cap        master, at create   immutable (cells)
 *    76     4  taken      refill/spill/reap   lock; atomic for readers
 *    80     8  tags_off   master, at create   immutable (from region)
 *    88     8  cells_off  master, at create   immutable (from region)
 * taken counts cells out of the pool (allocated or in a worker cache):
 * taken == bump - 1 - (cells on the free list), and taken <= cap always.
 * A holder that dies leaves the free list half-spliced: the next locker
 * rebuilds it from the tags (FREE changes only under this lock).
 */
struct shm_arena {
    pthread_mutex_t lock;
    unsigned char pad0[64 - sizeof(pthread_mutex_t)];
    uint32_t free_head;
    uint32_t bump;
    uint32_t cap;
    _Atomic uint32_t taken;
    uint64_t tags_off;
    uint64_t cells_off;
};
_Static_assert(sizeof(pthread_mutex_t) <= 64, "shm_arena layout");
_Static_assert(offsetof(struct shm_arena, free_head) == 64, "shm_arena");
_Static_assert(offsetof(struct shm_arena, taken) == 76, "shm_arena");
_Static_assert(offsetof(struct shm_arena, cells_off) == 88, "shm_arena");

#endif
