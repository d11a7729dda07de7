/*
 * region.h - how segment.c lays out the regions other shm/ files own.
 *
 * segment.c asks each owner for its size, places it 64-byte aligned, records
 * its offset in the header, and calls the owner's init on the fresh mapping
 * (all zero bytes).  shm_region() finds a region again in any process.  The
 * accessors are inline here, below every region's owner, so that no owner
 * calls back up into segment.c.
 */
#ifndef MAYFLY_SHM_REGION_H
#define MAYFLY_SHM_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/segment.h"

enum shm_region_id {
    SHM_REGION_SLOTS, /* worker slots: stats.c, wake.c, arena caches */
    SHM_REGION_DIR,   /* queue + partition tables and name index: dir.c */
    SHM_REGION_ARENA, /* cells and tags: arena.c */
    SHM_REGION_COUNT
};

/* Implemented by the region's owner. */
size_t shm_slots_region_size(const struct shm_params *p);
int shm_slots_region_init(struct shm_seg *seg, const struct shm_params *p);
size_t shm_dir_region_size(const struct shm_params *p);
int shm_dir_region_init(struct shm_seg *seg, const struct shm_params *p);
size_t shm_arena_region_size(const struct shm_params *p);
int shm_arena_region_init(struct shm_seg *seg, const struct shm_params *p);

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
 *    88     8  streams       workers; master     atomic: streams open on
 *                            (a dead worker's)   the node, reserved by CAS
 *                                                below stream_max
 *                                                (stats.h), a dead
 *                                                worker's taken off when
 *                                                its slot is claimed again
 *   128   176  params[2]     master              the copy not current
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
    uint32_t pad1;
    _Atomic int64_t streams;
    unsigned char pad2[32];
    struct shm_params params[2];
};
_Static_assert(SHM_REGION_COUNT == 3, "shm_header layout");
_Static_assert(offsetof(struct shm_header, region_off) == 24, "shm_header");
_Static_assert(offsetof(struct shm_header, lock_repairs) == 72, "shm_header");
_Static_assert(offsetof(struct shm_header, params_gen) == 80, "shm_header");
_Static_assert(offsetof(struct shm_header, streams) == 88, "shm_header");
_Static_assert(offsetof(struct shm_header, params) == 128, "shm_header");
_Static_assert(sizeof(struct shm_params) == 88, "shm_params layout");

/* shm_region - base address of region id in this process's mapping. */
static inline void *
shm_region(struct shm_seg *seg, enum shm_region_id id)
{
    return seg->base + seg->hdr->region_off[id];
}

/* shm_params_of - the parameters the segment was created with (read-only,
 * but defaults may change on HUP: see shm_segment_set_defaults). */
static inline const struct shm_params *
shm_params_of(struct shm_seg *seg)
{
    struct shm_header *h = seg->hdr;
    uint32_t gen = atomic_load_explicit(&h->params_gen, memory_order_acquire);

    return &h->params[gen & 1];
}

#endif
