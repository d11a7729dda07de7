/*
 * test_arena.c - the cell arena: runs, the node cap and its accounting,
 * fragmentation, and recovery after a worker is SIGKILLed at random
 * instructions inside alloc, free, refill and spill.
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/check.h"
#include "shm/layout.h"
#include "shm/lock.h"
#include "shm/maintain.h"
#include "shm/segment.h"
#include "shm/slot.h"
#include "shm/stats.h"

#define CAP 4096 /* cells */

static void
arena_setup(struct shm_seg *seg, uint64_t cells)
{
    struct shm_params p = {.max_bytes = cells * SHM_CELL_BYTES, .workers = 4};

    cr_assert_eq(shm_segment_create(&p, seg), 0);
}

/* The segment checker finds the arena sound: runs tile it, taken and the
 * pool agree with the tags (live mode: the roots these tests link belong
 * to no queue, so the whole-segment reachability is not asked). */
static void
arena_sound(struct shm_seg *seg)
{
    struct shm_check_report r;

    cr_assert_eq(shm_check(seg, 0, &r), 0, "segment check: %s", r.first);
}

static uint32_t
tag_of(struct shm_seg *seg, uint32_t ref)
{
    struct shm_arena *a = shm_region(seg, SHM_REGION_ARENA);
    _Atomic uint32_t *tags =
        (_Atomic uint32_t *)((unsigned char *)a + a->tags_off);

    return atomic_load(&tags[ref]);
}

/* run_len - the length its head tag gives run head. */
static uint32_t
run_len(struct shm_seg *seg, uint32_t head)
{
    return SHM_TAG_LEN(tag_of(seg, head));
}

/* fill - allocate 1-cell chains until -ENOBUFS; returns how many, their
 * heads in out (if not NULL). */
static uint32_t
fill(struct shm_seg *seg, int w, uint32_t *out, uint32_t max)
{
    uint32_t n = 0, h;
    int rc;

    while ((rc = shm_arena_alloc(seg, w, 1, &h)) == 0) {
        cr_assert_lt(n, max, "allocated past the cap");
        if (out != NULL)
            out[n] = h;
        n++;
    }
    cr_assert_eq(rc, -ENOBUFS);
    return n;
}

Test(shm_arena, freed_cell_is_reused)
{
    struct shm_seg seg = {0};
    uint32_t a, b;

    arena_setup(&seg, CAP);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);
    cr_assert_eq(shm_arena_alloc(&seg, 0, 1, &a), 0);
    cr_assert_neq(a, 0);
    cr_assert_eq(run_len(&seg, a), 1);
    cr_assert_eq(shm_arena_used_bytes(&seg), SHM_CELL_BYTES);
    shm_arena_free(&seg, 0, a);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);
    cr_assert_eq(shm_arena_alloc(&seg, 0, 1, &b), 0);
    cr_assert_eq(a, b);
    cr_assert_eq(shm_arena_alloc(&seg, 0, 0, &b), -EINVAL);
}

Test(shm_arena, cells_for_rounds_up)
{
    cr_assert_eq(shm_cells_for(0), 1);
    cr_assert_eq(shm_cells_for(1), 1);
    cr_assert_eq(shm_cells_for(SHM_RUN_DATA(1)), 1);
    cr_assert_eq(shm_cells_for(SHM_RUN_DATA(1) + 1), 2);
    cr_assert_eq(shm_cells_for(SHM_RUN_DATA(10)), 10);
    cr_assert_eq(shm_cells_for(SHM_RUN_DATA(10) + 1), 11);
}

Test(shm_arena, run_round_trips_across_cells)
{
    struct shm_seg seg = {0};
    unsigned char src[1100], dst[1000];
    uint32_t h;

    arena_setup(&seg, CAP);
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (unsigned char)(i * 31 + 7);
    uint32_t n = shm_cells_for(1000);
    cr_assert_eq(shm_arena_alloc(&seg, 0, n, &h), 0);
    cr_assert_eq(run_len(&seg, h), n);
    shm_arena_write(&seg, h, 0, src, 100);
    shm_arena_write(&seg, h, 100, src + 100, 900);
    memset(dst, 0, sizeof(dst));
    shm_arena_read(&seg, h, 0, dst, sizeof(dst));
    cr_assert_eq(memcmp(src, dst, sizeof(dst)), 0);
    /* Unaligned windows that straddle cell boundaries. */
    for (size_t off = 0; off < 200; off += 7) {
        memset(dst, 0, sizeof(dst));
        shm_arena_read(&seg, h, off, dst, 333);
        cr_assert_eq(memcmp(src + off, dst, 333), 0, "off %zu", off);
    }
    cr_assert(shm_arena_equal(&seg, h, src, 1000));
    cr_assert(shm_arena_equal(&seg, h, src, 61));
    src[999] ^= 1;
    cr_assert_not(shm_arena_equal(&seg, h, src, 1000));
    cr_assert_not(shm_arena_equal(&seg, h, src, SHM_RUN_DATA(n) + 1),
                  "too long");
    /* Writes stop at the run's end: the next run is untouched. */
    uint32_t next;
    cr_assert_eq(shm_arena_alloc(&seg, 0, 1, &next), 0);
    cr_assert_eq(next, h + n);
    shm_arena_write(&seg, next, 0, "next", 4);
    shm_arena_write(&seg, h, SHM_RUN_DATA(n) - 2, src, sizeof(src));
    cr_assert(shm_arena_equal(&seg, next, "next", 4));
    cr_assert_eq(run_len(&seg, h), n);
}

Test(shm_arena, cap_gives_enobufs_and_accounting_returns_to_zero)
{
    struct shm_seg seg = {0};
    static uint32_t heads[CAP];
    uint32_t big;

    arena_setup(&seg, CAP);
    cr_assert_eq(shm_arena_alloc(&seg, 0, CAP + 1, &big), -ENOBUFS);
    cr_assert_eq(shm_arena_alloc(&seg, 0, CAP, &big), 0);
    cr_assert_eq(run_len(&seg, big), CAP);
    cr_assert_eq(shm_arena_used_bytes(&seg), (uint64_t)CAP * SHM_CELL_BYTES);
    cr_assert_eq(shm_arena_alloc(&seg, 1, 1, &heads[0]), -ENOBUFS);
    shm_arena_free(&seg, 0, big);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);

    /* Worker 0's cache holds the cells it freed: it can take them all. */
    for (int round = 0; round < 3; round++) {
        cr_assert_eq(fill(&seg, 0, heads, CAP), CAP);
        cr_assert_eq(shm_arena_used_bytes(&seg),
                     (uint64_t)CAP * SHM_CELL_BYTES);
        for (uint32_t i = 0; i < CAP; i++)
            shm_arena_free(&seg, 0, heads[i]);
        cr_assert_eq(shm_arena_used_bytes(&seg), 0);
    }
}

Test(shm_arena, reap_returns_a_dead_workers_cells)
{
    struct shm_seg seg = {0};
    uint32_t kept;

    arena_setup(&seg, CAP);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        uint32_t h;
        /* One linked chain survives; in-flight chains and cache go. */
        if (shm_arena_alloc(&seg, 2, 5, &h) != 0)
            _exit(1);
        shm_arena_write(&seg, h, 0, "linked", 6);
        shm_arena_link(&seg, h);
        for (int i = 0; i < 50; i++)
            if (shm_arena_alloc(&seg, 2, 3, &h) != 0)
                _exit(1);
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert_eq(shm_arena_used_bytes(&seg), 155 * SHM_CELL_BYTES);
    shm_arena_reap(&seg, 2);
    cr_assert_eq(shm_arena_used_bytes(&seg), 5 * SHM_CELL_BYTES);
    cr_assert_eq(fill(&seg, 0, NULL, CAP), CAP - 5);
    /* The linked run was cell 1 onwards: untouched by the fill. */
    kept = 1;
    cr_assert_eq(run_len(&seg, kept), 5);
    cr_assert(shm_arena_equal(&seg, kept, "linked", 6));
}

Test(shm_arena, dead_arena_lock_holder_is_repaired)
{
    struct shm_seg seg = {0};
    struct shm_arena *a;
    uint32_t h;

    arena_setup(&seg, CAP);
    a = shm_region(&seg, SHM_REGION_ARENA);
    cr_assert_eq(shm_arena_alloc(&seg, 0, 10, &h), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        shm_lock(&seg, &a->lock, NULL, NULL);
        _exit(0);
    }
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    shm_arena_free(&seg, 0, h);
    cr_assert_eq(fill(&seg, 0, NULL, CAP), CAP);
    uint64_t c[SHM_C_COUNT];
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_LOCK_REPAIRS], 1);
}

/* Runs are carved one after another from the extent, tagged with owner and
 * length at their head only; a freed run is reused whole; long runs go
 * through the pool. */
Test(shm_arena, runs_are_carved_in_a_row_and_reused_whole)
{
    struct shm_seg seg = {0};
    uint32_t a, b, c, d, l;

    arena_setup(&seg, CAP);
    cr_assert_eq(shm_arena_alloc(&seg, 1, 3, &a), 0);
    cr_assert_eq(shm_arena_alloc(&seg, 1, 5, &b), 0);
    cr_assert_eq(shm_arena_alloc(&seg, 1, 1, &c), 0);
    cr_assert_eq(b, a + 3);
    cr_assert_eq(c, b + 5);
    cr_assert_eq(tag_of(&seg, b), SHM_TAG_RUN(SHM_TAG_INFLIGHT, 1, 5));
    shm_arena_link(&seg, b);
    cr_assert_eq(tag_of(&seg, b), SHM_TAG_RUN(SHM_TAG_LINKED, 0, 5));
    cr_assert_eq(shm_arena_used_bytes(&seg), 9 * SHM_CELL_BYTES);
    shm_arena_free(&seg, 1, b);
    cr_assert_eq(tag_of(&seg, b), SHM_TAG_RUN(SHM_TAG_CACHE, 1, 5));
    cr_assert_eq(shm_arena_used_bytes(&seg), 4 * SHM_CELL_BYTES);
    /* Another length comes from the extent; a run of 5 is b again. */
    cr_assert_eq(shm_arena_alloc(&seg, 1, 4, &d), 0);
    cr_assert_eq(d, c + 1);
    cr_assert_eq(shm_arena_alloc(&seg, 1, 5, &d), 0);
    cr_assert_eq(d, b);
    /* Longer than the extent's rest: from the cells at bump, back to the
     * pool as one FREE run, and found there again. */
    cr_assert_eq(shm_arena_alloc(&seg, 1, 300, &l), 0);
    cr_assert_eq(run_len(&seg, l), 300);
    shm_arena_free(&seg, 1, l);
    /* Held back (the freer's, uncounted) until the freer's next call. */
    cr_assert_eq(tag_of(&seg, l), SHM_TAG_RUN(SHM_TAG_CACHE, 1, 300));
    cr_assert_eq(shm_arena_used_bytes(&seg), 13 * SHM_CELL_BYTES);
    shm_arena_flush(&seg, 1);
    cr_assert_eq(tag_of(&seg, l), SHM_TAG_RUN(SHM_TAG_FREE, 0, 300));
    cr_assert_eq(shm_arena_used_bytes(&seg), 13 * SHM_CELL_BYTES);
    cr_assert_eq(shm_arena_alloc(&seg, 2, 250, &d), 0);
    cr_assert_eq(d, l);
    cr_assert_eq(shm_arena_alloc(&seg, 2, SHM_RUN_MAX + 1, &d), -ENOBUFS);
}

/* The lengths of a fill that mixes short and long runs. */
static const uint32_t mix[] = {1, 5, 3, 17, 2, 40, 5, 8, 1, 16};
#define NMIX (sizeof(mix) / sizeof(mix[0]))

/* Fill with mixed lengths (what runs cannot fit stays below the broker's
 * headroom of cap / 32) and free every other run: asking again for the
 * lengths freed gets them all (a hole of the length asked is taken first, a
 * long request takes the best fit), every last cell can still be had, and
 * once all is freed the arena is one run again. */
Test(shm_arena, holes_left_by_mixed_lengths_are_refilled)
{
    struct shm_seg seg = {0};
    static uint32_t heads[CAP], lens[CAP], again[CAP], ones[CAP];
    uint32_t n = 0, freed = 0, h;

    arena_setup(&seg, CAP);
    while (shm_arena_alloc(&seg, 0, mix[n % NMIX], &h) == 0) {
        heads[n] = h;
        lens[n] = mix[n % NMIX];
        n++;
    }
    cr_assert_geq(shm_arena_used_bytes(&seg),
                  (CAP - CAP / 32) * SHM_CELL_BYTES);
    for (uint32_t i = 1; i < n; i += 2) {
        shm_arena_free(&seg, 0, heads[i]);
        freed += lens[i];
    }
    cr_assert_gt(freed, CAP / 3);
    for (uint32_t i = 1; i < n; i += 2)
        cr_assert_eq(shm_arena_alloc(&seg, 0, lens[i], &again[i]), 0,
                     "run %u of %u cells", i, lens[i]);
    uint32_t rest = fill(&seg, 0, ones, CAP);
    cr_assert_eq(shm_arena_used_bytes(&seg), (uint64_t)CAP * SHM_CELL_BYTES);
    for (uint32_t i = 0; i < n; i++)
        shm_arena_free(&seg, 0, i % 2 ? again[i] : heads[i]);
    for (uint32_t i = 0; i < rest; i++)
        shm_arena_free(&seg, 0, ones[i]);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);
    cr_assert_eq(shm_arena_alloc(&seg, 0, CAP, &h), 0);
}

/* One-cell runs everywhere, all freed: they merge back into runs of any
 * length. */
Test(shm_arena, freed_cells_merge_into_longer_runs)
{
    struct shm_seg seg = {0};
    static uint32_t heads[CAP];
    uint32_t h, n = 0;

    arena_setup(&seg, CAP);
    cr_assert_eq(fill(&seg, 0, heads, CAP), CAP);
    for (uint32_t i = 0; i < CAP; i++)
        shm_arena_free(&seg, 0, heads[i]);
    while (shm_arena_alloc(&seg, 0, 5, &h) == 0)
        heads[n++] = h;
    cr_assert_eq(n, CAP / 5);
    for (uint32_t i = 0; i < n; i++)
        shm_arena_free(&seg, 0, heads[i]);
    cr_assert_eq(shm_arena_alloc(&seg, 0, CAP, &h), 0);
}

/* Holes freed by another worker are reused but for what that worker's cache
 * may keep (arena_spill_at: cap / 64, at least 64 cells, plus an extent). */
Test(shm_arena, holes_freed_by_another_worker_are_reused)
{
    struct shm_seg seg = {0};
    static uint32_t heads[CAP];
    uint32_t h, n = 0, freed = 0, got = 0;

    arena_setup(&seg, CAP);
    while (shm_arena_alloc(&seg, 0, 5, &h) == 0)
        heads[n++] = h;
    for (uint32_t i = 0; i < n; i += 2) {
        shm_arena_free(&seg, 1, heads[i]);
        freed += 5;
    }
    while (shm_arena_alloc(&seg, 0, 5, &h) == 0)
        got += 5;
    cr_assert_geq(got + 64, freed, "got %u of %u", got, freed);
}

/* hoard - worker w takes n runs of 5 cells and frees them, stopping where
 * its cache holds the most it will (just under the level that spilled);
 * the rest stay allocated, as messages held. */
static void
hoard(struct shm_seg *seg, int w, uint32_t *heads, uint32_t n)
{
    _Atomic uint32_t *count = &shm_slot(seg, w)->cache_count;
    uint32_t i, peak = 0;

    for (i = 0; i < n; i++)
        cr_assert_eq(shm_arena_alloc(seg, w, 5, &heads[i]), 0);
    for (i = 0; i < n; i++) {
        uint32_t before = atomic_load(count);
        shm_arena_free(seg, w, heads[i]);
        if (atomic_load(count) < before)
            break;
        peak = atomic_load(count);
    }
    cr_assert_lt(i, n, "worker %d's cache never spilled", w);
    for (i++; i < n && atomic_load(count) + 5 <= peak; i++)
        shm_arena_free(seg, w, heads[i]);
}

/* admitted_pushes_fit - worker 0 allocates 5-cell runs (256-byte messages)
 * for as long as a push would be admitted (shm_cap_room, broker_steps.c:
 * the cap less 1/32), and each finds its cells. */
static void
admitted_pushes_fit(struct shm_seg *seg, uint64_t cap)
{
    uint32_t h;

    while (shm_arena_used_bytes(seg) + 5 * SHM_CELL_BYTES + cap / 32 <= cap)
        cr_assert_eq(shm_arena_alloc(seg, 0, 5, &h), 0,
                     "an admitted push failed with %llu of %llu bytes used",
                     (unsigned long long)shm_arena_used_bytes(seg),
                     (unsigned long long)cap);
}

/* What idle workers keep in their caches fits in the 1/32 of the cap that
 * pushes leave free: a push the cap admits (shm_cap_room) finds
 * its cells. */
/* A run just freed stays its freer's (CACHE) until the freer's next call,
 * whatever its length and however small the caches: the freer's intent may
 * still name it.  Here spill_at is 16 cells, and runs of 12 spill. */
Test(shm_arena, a_run_just_freed_stays_its_freers_through_a_spill)
{
    struct shm_seg seg = {0};
    uint32_t h[8];

    arena_setup(&seg, CAP);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(shm_arena_alloc(&seg, 1, 12, &h[i]), 0);
    for (int i = 0; i < 8; i++) {
        shm_arena_free(&seg, 1, h[i]);
        cr_assert_eq(tag_of(&seg, h[i]), SHM_TAG_RUN(SHM_TAG_CACHE, 1, 12),
                     "run %d went back to the pool as it was freed", i);
    }
}

Test(shm_arena, idle_workers_caches_fit_the_headroom)
{
    static uint32_t heads[3][1000];
    struct shm_seg seg = {0};
    uint64_t cap = (uint64_t)64 * 1024 * SHM_CELL_BYTES; /* 4 MiB */

    arena_setup(&seg, 64 * 1024); /* four workers */
    for (int w = 1; w <= 3; w++)
        hoard(&seg, w, heads[w - 1], 1000);
    admitted_pushes_fit(&seg, cap);
}

/* The same in an arena too small for 128-cell refills: idle workers that
 * took one run each hold the rest of a shorter extent. */
Test(shm_arena, idle_extents_fit_the_headroom_in_a_small_arena)
{
    struct shm_seg seg = {0};
    uint64_t cap = (uint64_t)CAP * SHM_CELL_BYTES;
    uint32_t h;

    arena_setup(&seg, CAP);
    for (int w = 1; w <= 3; w++) /* one message each, then idle */
        cr_assert_eq(shm_arena_alloc(&seg, w, 5, &h), 0);
    admitted_pushes_fit(&seg, cap);
}

/* resident - pages of cells [from, to) in memory (mincore). */
static size_t
resident(struct shm_seg *seg, uint32_t from, uint32_t to)
{
    const uintptr_t pg = 4096;
    uintptr_t lo = (uintptr_t)shm_cell(seg, from) & ~(pg - 1);
    uintptr_t hi = ((uintptr_t)shm_cell(seg, to) + pg - 1) & ~(pg - 1);
    unsigned char v[1024];
    size_t n = 0;

    cr_assert_leq((hi - lo) / pg, sizeof(v));
    cr_assert_eq(mincore((void *)lo, hi - lo, v), 0);
    for (size_t i = 0; i < (hi - lo) / pg; i++)
        n += v[i] & 1;
    return n;
}

/* The cells just above bump are mapped ahead of use (the master's way:
 * allocated) in a window of the size asked, no further; again only once
 * less than half of it is left above bump; never past the arena's end. */
Test(shm_arena, cells_ahead_of_bump_are_mapped_within_the_window)
{
    const uint32_t win = 64 * 1024 / SHM_CELL_BYTES; /* 16 pages */
    struct shm_seg seg = {0};
    struct shm_ahead st = {.bump = 1, .to = 1};
    struct shm_arena *a;
    uint32_t h, bump, was;

    arena_setup(&seg, 16384);
    a = shm_region(&seg, SHM_REGION_ARENA);
    cr_assert_eq(shm_arena_alloc(&seg, 0, 1, &h), 0); /* an extent */
    bump = a->bump;
    cr_assert_eq(shm_arena_grew(&seg, &st), bump - 1);
    cr_assert_eq(resident(&seg, bump + 128, bump + win), 0, "fresh");
    cr_assert_eq(shm_arena_ahead(&seg, &st, win * SHM_CELL_BYTES, 1),
                 (long)win * SHM_CELL_BYTES);
    cr_assert_eq(st.to, bump + win);
    cr_assert_geq(resident(&seg, bump, bump + win),
                  (size_t)win * SHM_CELL_BYTES / 4096, "the window");
    cr_assert_eq(resident(&seg, bump + win + 64, bump + 4 * win), 0,
                 "past the window");
    cr_assert_eq(shm_arena_ahead(&seg, &st, win * SHM_CELL_BYTES, 1), 0,
                 "more than half the window is still ahead");

    /* bump passes half the window: the next call maps from where the
     * last stopped to a window past bump (read: what is there, and the
     * holes) */
    was = st.to;
    for (int w = 1; a->bump < bump + win / 2 + 1; w++)
        cr_assert_eq(shm_arena_alloc(&seg, w, 1, &h), 0);
    cr_assert_eq(shm_arena_grew(&seg, &st), a->bump - bump);
    bump = a->bump;
    cr_assert_eq(shm_arena_ahead(&seg, &st, win * SHM_CELL_BYTES, 0),
                 (long)(bump + win - was) * SHM_CELL_BYTES);
    cr_assert_eq(st.to, bump + win);
    cr_assert_geq(resident(&seg, bump, bump + win),
                  (size_t)win * SHM_CELL_BYTES / 4096);

    /* a window past the end stops at the last cell */
    cr_assert_gt(shm_arena_ahead(&seg, &st, 64 << 20, 1), 0);
    cr_assert_eq(st.to, a->cap + 1);
    cr_assert_eq(shm_arena_ahead(&seg, &st, 64 << 20, 1), 0);
}

/* Runs of one length (256-byte messages are 5 cells) fill the arena to its
 * last whole run: an extent's rest shorter than a run goes back to the
 * cells above bump, where the next extent starts, not into a hole. */
Test(shm_arena, runs_of_one_length_fill_the_arena)
{
    struct shm_seg seg = {0};
    uint32_t h, n = 0;

    arena_setup(&seg, CAP);
    while (shm_arena_alloc(&seg, 0, 5, &h) == 0)
        n++;
    cr_assert_eq(n, CAP / 5, "%u runs of 5 in %u cells", n, CAP);
}

/*
 * The crash tests.  A child allocates, writes, links into a shared root
 * table, unlinks and frees in a loop, with chains large enough to refill
 * and spill through the arena lock; the parent SIGKILLs it at a random
 * moment, reaps its slot, repairs the root table as a partition repair
 * would (the intent word says which chain was being linked or unlinked),
 * and checks: every linked chain intact, used == linked cells, and every
 * other cell allocatable up to the cap.
 */
#define KILL_W  2
#define LIVE_W  3
#define PARENT  0
#define NROOTS  64
#define OP_LINK 1
#define OP_FREE 2

struct crash_ctl {
    _Atomic uint64_t ops;
    _Atomic int stop;
    _Atomic uint32_t roots[NROOTS];
    _Atomic uint32_t pending; /* chain being linked or unlinked */
    _Atomic uint32_t pending_op;
    _Atomic uint32_t pending_k;
};

static uint8_t
pattern(uint32_t head, size_t i)
{
    return (uint8_t)(head * 13 + i);
}

/* write_pattern - fill run h of n cells, a cell's worth per write. */
static void
write_pattern(struct shm_seg *seg, uint32_t h, uint32_t n)
{
    uint8_t buf[SHM_CELL_BYTES];

    for (size_t off = 0; off < SHM_RUN_DATA(n); off += sizeof(buf)) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = pattern(h, off + i);
        shm_arena_write(seg, h, off, buf, sizeof(buf));
    }
}

static int
pattern_ok(struct shm_seg *seg, uint32_t h, uint32_t n)
{
    uint8_t buf[SHM_CELL_BYTES];

    for (size_t off = 0; off < SHM_RUN_DATA(n); off += sizeof(buf)) {
        size_t k = SHM_RUN_DATA(n) - off < sizeof(buf) ? SHM_RUN_DATA(n) - off
                                                       : sizeof(buf);
        shm_arena_read(seg, h, off, buf, k);
        for (size_t i = 0; i < k; i++)
            if (buf[i] != pattern(h, off + i))
                return 0;
    }
    return 1;
}

static uint32_t
crash_size(unsigned r)
{
    switch (r % 8) {
    case 0:
        return 150 + r % 300; /* forces refills and spills */
    case 1:
        return 20 + r % 40;
    default:
        return 1 + r % 6;
    }
}

/* root_link - write run h and link it as root k, naming it in the intent
 * words while the link is under way. */
static void
root_link(struct shm_seg *seg, struct crash_ctl *ctl, uint32_t k, uint32_t h,
          uint32_t n)
{
    write_pattern(seg, h, n);
    atomic_store(&ctl->pending_k, k);
    atomic_store(&ctl->pending_op, OP_LINK);
    atomic_store(&ctl->pending, h);
    shm_arena_link(seg, h);
    atomic_store(&ctl->roots[k], h);
    atomic_store(&ctl->pending, 0);
}

/* root_unlink - unlink root k and free it, under the intent words. */
static void
root_unlink(struct shm_seg *seg, struct crash_ctl *ctl, int w, uint32_t k)
{
    uint32_t h = atomic_load(&ctl->roots[k]);

    atomic_store(&ctl->pending_k, k);
    atomic_store(&ctl->pending_op, OP_FREE);
    atomic_store(&ctl->pending, h);
    atomic_store(&ctl->roots[k], 0);
    shm_arena_free(seg, w, h);
    atomic_store(&ctl->pending, 0);
}

/* child_check - in a crash child (no Criterion calls there): run h must be
 * a head whose tag, masked, is want; else say what was found and abort, so
 * that a corruption (a run with two owners, a list link overwritten) shows
 * where it first appears rather than as a fault further on. */
static void
child_check(struct shm_seg *seg, uint32_t h, uint32_t mask, uint32_t want,
            const char *what)
{
    uint32_t t = h != 0 && h <= CAP ? tag_of(seg, h) : 0;

    if (h == 0 || h > CAP || (t & mask) != want || SHM_TAG_LEN(t) == 0) {
        fprintf(stderr, "crash child: %s: run %u tagged %#x, wanted %#x\n",
                what, h, t, want);
        abort();
    }
}

/* crash_child - worker w's loop on ctl's roots until ctl->stop. */
static void
crash_child(struct shm_seg *seg, struct crash_ctl *ctl, int w, unsigned seed)
{
    srand(seed);
    while (!atomic_load(&ctl->stop)) {
        unsigned r = (unsigned)rand();
        uint32_t k = r % NROOTS, h = atomic_load(&ctl->roots[k]);
        if (h == 0) {
            uint32_t n = crash_size(r >> 8);
            if (shm_arena_alloc(seg, w, n, &h) == 0) {
                child_check(seg, h, ~0u, SHM_TAG_RUN(SHM_TAG_INFLIGHT, w, n),
                            "allocated");
                if (r & (1u << 30)) {
                    write_pattern(seg, h, n);
                    shm_arena_free(seg, w, h);
                } else
                    root_link(seg, ctl, k, h, n);
            }
        } else {
            child_check(seg, h, 0xffu, SHM_TAG(SHM_TAG_LINKED, 0), "a root");
            root_unlink(seg, ctl, w, k);
        }
        atomic_fetch_add(&ctl->ops, 1);
    }
    _exit(0);
}

static pid_t
crash_spawn(struct shm_seg *seg, struct crash_ctl *ctl, int w)
{
    unsigned seed = (unsigned)rand();
    pid_t pid = fork();

    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves none */
        crash_child(seg, ctl, w, seed);
    }
    return pid;
}

/* crash_kill - let the child run a random number of operations, then
 * SIGKILL it and wait for it. */
static void
crash_kill(struct crash_ctl *ctl, pid_t pid, int round)
{
    uint64_t target = atomic_load(&ctl->ops) + 1 + rand() % 2000;
    int st;

    for (int i = 0; atomic_load(&ctl->ops) < target; i++) {
        cr_assert_lt(i, 1000000, "child made no progress");
        usleep(20);
    }
    cr_assert_eq(kill(pid, SIGKILL), 0);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st), "round %d: child exited %d", round,
              WEXITSTATUS(st));
}

/* crash_repair - finish or undo the dead child's link/unlink, before the
 * reap, as a partition repair runs before the arena's (shm_worker_reap):
 * until then a LINKED run its intent names can only be the dead child's.
 * After the reap the run may be back in the pool and linked by a live
 * worker, and freeing it here would free that worker's run (the order was
 * the other way once, and a live child died of it). */
static void
crash_repair(struct shm_seg *seg, struct crash_ctl *ctl)
{
    uint32_t h = atomic_load(&ctl->pending);
    uint32_t k = atomic_load(&ctl->pending_k);

    atomic_store(&ctl->pending, 0);
    if (h == 0 || SHM_TAG_OWNER(tag_of(seg, h)) != SHM_TAG(SHM_TAG_LINKED, 0))
        return;
    if (atomic_load(&ctl->pending_op) == OP_LINK)
        atomic_store(&ctl->roots[k], h);
    else if (atomic_load(&ctl->roots[k]) != h)
        shm_arena_free(seg, PARENT, h);
}

/* crash_check - the invariants of the file comment over ctl[0..nctl). */
static void
crash_check(struct shm_seg *seg, struct crash_ctl *ctl, int nctl,
            uint32_t *spare, uint32_t cap)
{
    uint64_t linked = 0;

    for (int i = 0; i < nctl; i++)
        for (int k = 0; k < NROOTS; k++) {
            uint32_t h = atomic_load(&ctl[i].roots[k]);
            if (h == 0)
                continue;
            uint32_t n = run_len(seg, h);
            cr_assert_eq(SHM_TAG_OWNER(tag_of(seg, h)),
                         SHM_TAG(SHM_TAG_LINKED, 0));
            cr_assert(pattern_ok(seg, h, n), "root %d damaged", k);
            linked += n;
        }
    cr_assert_eq(shm_arena_used_bytes(seg), linked * SHM_CELL_BYTES);
    uint32_t got = fill(seg, PARENT, spare, cap);
    cr_assert_eq(got, cap - linked, "reusable %u, expected %lu", got,
                 (unsigned long)(cap - linked));
    for (uint32_t i = 0; i < got; i++)
        shm_arena_free(seg, PARENT, spare[i]);
    cr_assert_eq(shm_arena_used_bytes(seg), linked * SHM_CELL_BYTES);
}

/* crash_release - free every root: the arena must be empty after. */
static void
crash_release(struct shm_seg *seg, struct crash_ctl *ctl, int nctl)
{
    for (int i = 0; i < nctl; i++)
        for (int k = 0; k < NROOTS; k++) {
            uint32_t h = atomic_load(&ctl[i].roots[k]);
            if (h != 0)
                shm_arena_free(seg, PARENT, h);
        }
    cr_assert_eq(shm_arena_used_bytes(seg), 0);
    uint64_t c[SHM_C_COUNT];
    shm_counters_sum(seg, c);
    cr_log_info("arena lock repairs: %lu",
                (unsigned long)c[SHM_C_LOCK_REPAIRS]);
}

static struct crash_ctl *
crash_ctl_map(int n)
{
    struct crash_ctl *ctl = mmap(NULL, n * sizeof(*ctl), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    cr_assert_neq(ctl, MAP_FAILED);
    return ctl;
}

Test(shm_arena, worker_killed_anywhere_is_reaped_exactly, .timeout = 300)
{
    struct shm_seg seg = {0};
    static uint32_t spare[CAP];
    struct crash_ctl *ctl = crash_ctl_map(1);

    arena_setup(&seg, CAP);
    srand(20261130);
    for (int round = 0; round < 120; round++) {
        crash_kill(ctl, crash_spawn(&seg, ctl, KILL_W), round);
        crash_repair(&seg, ctl);
        shm_arena_reap(&seg, KILL_W);
        arena_sound(&seg);
        crash_check(&seg, ctl, 1, spare, CAP);
    }
    crash_release(&seg, ctl, 1);
}

/* The same while another worker keeps allocating and freeing: reaping (and
 * rebuilding the free list) must not disturb a live worker. */
Test(shm_arena, reap_beside_a_live_worker_is_exact, .timeout = 300)
{
    struct shm_seg seg = {0};
    static uint32_t spare[CAP];
    struct crash_ctl *ctl = crash_ctl_map(2);

    arena_setup(&seg, CAP);
    srand(1130);
    pid_t live = crash_spawn(&seg, &ctl[1], LIVE_W);
    for (int round = 0; round < 60; round++) {
        crash_kill(&ctl[0], crash_spawn(&seg, &ctl[0], KILL_W), round);
        crash_repair(&seg, &ctl[0]); /* first: see crash_repair */
        shm_arena_reap(&seg, KILL_W);
        arena_sound(&seg);
    }
    atomic_store(&ctl[1].stop, 1);
    int st;
    cr_assert_eq(waitpid(live, &st, 0), live);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert_gt(atomic_load(&ctl[1].ops), 0);
    shm_arena_reap(&seg, LIVE_W); /* its cache */
    crash_check(&seg, ctl, 2, spare, CAP);
    crash_release(&seg, ctl, 2);
}

/*
 * Killed at each instruction: a traced child runs step_script as worker
 * KILL_W one instruction at a time.  After each step that changed shared
 * memory, the parent copies the segment and the root table as they are (all
 * a SIGKILL there would leave; a held arena lock is marked as its dead
 * owner's, as the kernel would), and reaps, repairs and checks the copy.
 */
#define STEP_CAP 512

/* step_script - every path of alloc and free once: refill with a new
 * extent, carve, free to the cache and pop, long alloc from the cells at bump
 * and from the long list (best fit), long free, refill of exact runs, spill
 * (merging neighbours), a walk, and the ENOBUFS fallback.  Exit status: 0,
 * or the line that failed. */
static void
step_script(struct shm_seg *seg, struct crash_ctl *ctl, int w)
{
    struct shm_slot *s = shm_slot(seg, w);
    uint32_t h, b, d, runs[16];

#define STEP(x)                                                                \
    do {                                                                       \
        if (!(x))                                                              \
            _exit(__LINE__ % 250 + 1);                                         \
    } while (0)
    STEP(shm_arena_alloc(seg, w, 5, &h) == 0);
    root_link(seg, ctl, 0, h, 5);
    STEP(shm_arena_alloc(seg, w, 3, &b) == 0);
    shm_arena_free(seg, w, b);
    STEP(shm_arena_alloc(seg, w, 3, &h) == 0 && h == b);
    root_link(seg, ctl, 1, h, 3);
    STEP(shm_arena_alloc(seg, w, 150, &d) == 0);
    shm_arena_free(seg, w, d);
    STEP(shm_arena_alloc(seg, w, 130, &h) == 0 && h == d);
    shm_arena_free(seg, w, h);
    int nruns = 0;
    while (s->ext_len > 0 && nruns < 16) {
        uint32_t n = s->ext_len < 16 ? s->ext_len : 16;
        STEP(shm_arena_alloc(seg, w, n, &runs[nruns++]) == 0);
    }
    STEP(s->ext_len == 0);
    STEP(shm_arena_alloc(seg, w, 4, &h) == 0); /* the parent's holes */
    STEP(shm_arena_alloc(seg, w, 10, &h) == 0);
    root_link(seg, ctl, 2, h, 10);
    for (int i = 0; i < nruns; i++)
        shm_arena_free(seg, w, runs[i]);
    STEP(shm_arena_alloc(seg, w, 16, &h) == 0);
    shm_arena_free(seg, w, h);
    root_unlink(seg, ctl, w, 0);
    root_unlink(seg, ctl, w, 2);
    STEP(shm_arena_alloc(seg, w, STEP_CAP, &h) == -ENOBUFS);
#undef STEP
    _exit(0);
}

/* step_check - what a kill of pid would leave in src (and ctl): reaped,
 * repaired and checked in copy. */
static void
step_check(struct shm_seg *copy, const unsigned char *src,
           struct crash_ctl *ctl, pid_t pid, uint32_t *spare)
{
    memcpy(copy->base, src, copy->size);
    struct shm_arena *a = shm_region(copy, SHM_REGION_ARENA);
    if ((a->lock.__data.__lock & FUTEX_TID_MASK) == pid)
        a->lock.__data.__lock = FUTEX_OWNER_DIED;
    crash_repair(copy, ctl);
    shm_arena_reap(copy, KILL_W);
    arena_sound(copy);
    crash_check(copy, ctl, 1, spare, STEP_CAP);
}

Test(shm_arena, worker_killed_at_each_instruction_is_reaped_exactly,
     .timeout = 600)
{
    struct shm_seg seg = {0}, copy = {0};
    static uint32_t spare[STEP_CAP];
    struct crash_ctl *ctl = crash_ctl_map(3); /* live, last seen, copy */
    uint32_t h, hole;

    arena_setup(&seg, STEP_CAP);
    arena_setup(&copy, STEP_CAP);
    cr_assert_eq(seg.size, copy.size);
    /* Isolated FREE runs of 4 in the pool, between linked roots. */
    for (uint32_t k = 10; k < 14; k++) {
        cr_assert_eq(shm_arena_alloc(&seg, 1, 4, &hole), 0);
        cr_assert_eq(shm_arena_alloc(&seg, 1, 1, &h), 0);
        root_link(&seg, &ctl[0], k, h, 1);
        shm_arena_free(&seg, 1, hole);
    }
    shm_arena_reap(&seg, 1);
    unsigned char *last = malloc(seg.size);
    cr_assert_not_null(last);
    memcpy(last, seg.base, seg.size);
    ctl[1] = ctl[0];

    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(251);
        raise(SIGSTOP);
        step_script(&seg, &ctl[0], KILL_W);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSTOPPED(st));
    uint64_t steps = 0, checks = 0;
    for (;;) {
        cr_assert_eq(ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL), 0);
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        if (WIFEXITED(st))
            break;
        cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP,
                  "child stopped by signal %d", WSTOPSIG(st));
        steps++;
        if (memcmp(last, seg.base, seg.size) == 0 &&
            memcmp(&ctl[1], &ctl[0], sizeof(ctl[0])) == 0)
            continue;
        memcpy(last, seg.base, seg.size);
        ctl[1] = ctl[0];
        ctl[2] = ctl[1];
        step_check(&copy, last, &ctl[2], pid, spare);
        checks++;
    }
    cr_assert_eq(WEXITSTATUS(st), 0, "script failed at line ~%d",
                 WEXITSTATUS(st));
    cr_log_info("%lu steps, %lu states checked", (unsigned long)steps,
                (unsigned long)checks);
    cr_assert_gt(checks, 100);
    free(last);
}
