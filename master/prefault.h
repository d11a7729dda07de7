/*
 * prefault.h - the master allocates the segment's pages just above the
 * arena's high-water mark while it grows, so that pushes into fresh cells
 * find them there (prefault.c).
 */
#ifndef MAYFLY_MASTER_PREFAULT_H
#define MAYFLY_MASTER_PREFAULT_H

#include <stddef.h>
#include <stdint.h>

struct shm_seg;

/* master_prefault - from every round of the master's loop: while the
 * arena grows, allocate a window ahead of it (at most once every
 * PREFAULT_EVERY_MS).  Never under a lock; takes none. */
void master_prefault(struct shm_seg *seg, size_t max_bytes, uint64_t now);

/* master_prefault_timeout_ms - when the loop should come back for
 * master_prefault: soon while the arena grows, else -1 (no wish). */
int master_prefault_timeout_ms(uint64_t now);

#endif
