/*
 * prefault.c - see prefault.h.
 *
 * A page of the segment costs the kernel 2.6 us of CPU the first time any
 * process touches it (zeroing, memcg charge, page cache; this project's
 * VM), which doubled a push's cost while the arena grew (BENCHMARKS.md,
 * backlog).  The master, idle between ticks, allocates them instead, a
 * window ahead of the arena's bump sized by its growth: what it would
 * grow in PREFAULT_AHEAD_MS at the rate since the last round, within
 * PREFAULT_MIN..PREFAULT_MAX and never more than a sixteenth of max_bytes
 * (the window stays allocated after a fill: the memory it costs).
 * While the arena grows fast (PREFAULT_FAST bytes or more a round) the
 * loop comes back every PREFAULT_EVERY_MS, else at its tick; a node that
 * does not grow allocates nothing beyond what it used, plus the window of
 * its last growth.  Workers then map the pages 16 at a time
 * (shm_arena_flush).  Best effort: a failed madvise costs only the faults
 * it would have spared.  State: this process's, in this file (the master
 * is single-threaded).
 */
#include "master/prefault.h"

#include "shm/arena.h"

#define PREFAULT_AHEAD_MS 20
#define PREFAULT_EVERY_MS 5
#define PREFAULT_MIN      (256u << 10)
#define PREFAULT_MAX      (16u << 20)
#define PREFAULT_FAST     (64u << 10)

static struct shm_ahead ahead = {.bump = 1, .to = 1};
static uint64_t last_ms; /* the last round that looked */
static int growing;      /* it grew fast then */

/* master_prefault - see prefault.h. */
void
master_prefault(struct shm_seg *seg, size_t max_bytes, uint64_t now)
{
    uint64_t dt = now - last_ms, win, cap = max_bytes / 16;

    if (now < last_ms + PREFAULT_EVERY_MS)
        return;
    last_ms = now;
    win = (uint64_t)shm_arena_grew(seg, &ahead) * SHM_CELL_BYTES;
    growing = win >= PREFAULT_FAST;
    if (win == 0)
        return;
    win = win * PREFAULT_AHEAD_MS / dt;
    win = win < PREFAULT_MIN   ? PREFAULT_MIN
          : win > PREFAULT_MAX ? PREFAULT_MAX
                               : win;
    (void)shm_arena_ahead(seg, &ahead, win < cap ? win : cap, 1);
}

/* master_prefault_timeout_ms - see prefault.h. */
int
master_prefault_timeout_ms(uint64_t now)
{
    if (!growing)
        return -1;
    return now >= last_ms + PREFAULT_EVERY_MS
               ? 0
               : (int)(last_ms + PREFAULT_EVERY_MS - now);
}
