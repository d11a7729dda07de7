/*
 * slot.h - one worker slot of the SLOTS region (SHM_MAX_WORKERS of them; the
 * last, SHM_STATS_MASTER, is the master's).  shm/-internal: stats.c, wake.c,
 * arena.c and horizon.c own its parts; broker code may read pid and parked;
 * stats.c owns streams too.
 *
 * A slot is written by its worker only, except the wake queue (any process
 * posts) and what the master resets after the worker died (shm_arena_reap,
 * shm_wake_reset, shm_tail_reap, shm_slot_claim for the next worker).
 */
#ifndef MAYFLY_SHM_SLOT_H
#define MAYFLY_SHM_SLOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/arena.h"
#include "shm/segment.h"
#include "shm/stats.h"

#define SHM_WAKE_SLOTS 1024 /* handles a wake queue holds before overflow */
#define SHM_WAKE_WORDS (SHM_WAKE_SLOTS / 64)

/*
 * struct shm_slot
 *   off  size  field          written by              protected by
 *     0     4  pid            claimer                 atomic
 *     8     8  beat_ms        worker (heartbeat)      atomic
 *    16     8  parked         worker                  atomic, one writer
 *    24     8  pushing        worker; reaper if dead  atomic, one writer
 *                                                     (horizon.h: lowest
 *                                                     seq a push in flight
 *                                                     may link; 0: none)
 *    32     8  streams        worker                  atomic, one writer
 *                                                     (streams open)
 *    64     4  ext            worker; reaper if dead  one writer (arena
 *                                                     cache: extent head)
 *    68     4  cache_count    worker; reaper if dead  atomic, one writer
 *    72     4  ext_len        worker; reaper if dead  one writer
 *    76     4  long_free      worker; reaper if dead  one writer (arena:
 *                                                     long runs freed, not
 *                                                     yet back in the pool)
 *   128   312  counters[]     worker                  atomic, one writer
 *                                                     (room for 64)
 *   640     4  wake_armed     consumer sets, posters  atomic
 *                             clear
 *   644     4  wake_overflow  posters set, consumer   atomic
 *                             clears
 *   648     4  wake_pos       posters                 atomic (start hint)
 *   704   128  wake_hint[]    posters set, consumer   atomic (bit j: entry j
 *                             clears                  may be non-zero)
 *   832  8192  wake_ring[]    posters 0->h, consumer  atomic (CAS)
 *                             h->0
 *  9024    64  cache[]        worker; reaper if dead  one writer (arena
 *                                                     cache: runs of c cells
 *                                                     at cache[c - 1])
 *  9088   112  request_hist[] worker                  atomic, one writer
 *                                                     (stats.h: buckets,
 *                                                     then the sum in µs)
 * The arena cache (arena.c) is a bookkeeping copy: the tags say which runs
 * are w's, so a worker killed between two of these stores loses nothing.
 */
struct shm_slot {
    _Atomic int32_t pid;
    uint32_t pad0;
    _Atomic uint64_t beat_ms;
    _Atomic int64_t parked;
    _Atomic uint64_t pushing;
    _Atomic int64_t streams;
    unsigned char pad1[24];

    uint32_t ext;
    _Atomic uint32_t cache_count;
    uint32_t ext_len;
    uint32_t long_free;
    unsigned char pad2[48];

    _Atomic uint64_t counters[SHM_C_COUNT];
    unsigned char pad3[512 - 8 * SHM_C_COUNT];

    _Atomic uint32_t wake_armed;
    _Atomic uint32_t wake_overflow;
    _Atomic uint32_t wake_pos;
    unsigned char pad4[52];
    _Atomic uint64_t wake_hint[SHM_WAKE_WORDS];
    _Atomic uint64_t wake_ring[SHM_WAKE_SLOTS];

    uint32_t cache[SHM_ARENA_CLASSES];
    _Atomic uint64_t request_hist[SHM_REQUEST_BUCKETS + 2];
    unsigned char pad5[16];
};
_Static_assert(SHM_C_COUNT <= 64, "shm_slot counters");
_Static_assert(offsetof(struct shm_slot, pushing) == 24, "shm_slot layout");
_Static_assert(offsetof(struct shm_slot, streams) == 32, "shm_slot layout");
_Static_assert(offsetof(struct shm_slot, ext) == 64, "shm_slot layout");
_Static_assert(offsetof(struct shm_slot, long_free) == 76, "shm_slot layout");
_Static_assert(offsetof(struct shm_slot, counters) == 128, "shm_slot layout");
_Static_assert(offsetof(struct shm_slot, wake_armed) == 640, "shm_slot");
_Static_assert(offsetof(struct shm_slot, wake_hint) == 704, "shm_slot layout");
_Static_assert(offsetof(struct shm_slot, wake_ring) == 832, "shm_slot layout");
_Static_assert(offsetof(struct shm_slot, cache) == 9024, "shm_slot layout");
_Static_assert(offsetof(struct shm_slot, request_hist) == 9088, "shm_slot");
_Static_assert(sizeof(struct shm_slot) % 64 == 0, "shm_slot layout");

/* shm_slot - worker w's slot (0 <= w < SHM_MAX_WORKERS). */
struct shm_slot *shm_slot(struct shm_seg *seg, int w);

#endif
