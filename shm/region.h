/*
 * region.h - how segment.c lays out the regions other shm/ files own.
 *
 * segment.c asks each owner for its size, places it 64-byte aligned, records
 * its offset in the header, and calls the owner's init on the fresh mapping
 * (all zero bytes).  shm_region() finds a region again in any process.
 */
#ifndef MAYFLY_SHM_REGION_H
#define MAYFLY_SHM_REGION_H

#include <stddef.h>

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

/* shm_region - base address of region id in this process's mapping. */
void *shm_region(struct shm_seg *seg, enum shm_region_id id);

/* shm_params_of - the parameters the segment was created with (read-only,
 * but defaults may change on HUP: see shm_segment_set_defaults). */
const struct shm_params *shm_params_of(struct shm_seg *seg);

#endif
