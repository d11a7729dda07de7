/*
 * arena.c - the cell arena (arena.h): runs of consecutive 64-byte cells, one
 * tag word per cell (meaningful at run heads), a global pool, and per-worker
 * caches.
 *
 * Runs: cells 1..bump-1 are a sequence of runs, each head tag holding the
 * run's length, so a walk from cell 1 visits every head; cells from bump on
 * are nobody's (never handed out, or given back whole: an extent's rest that
 * ended at bump, a FREE run a walk found ending there), and their tags are
 * never read until bump passes them again.  A run's body cells carry no tag
 * and no link: an allocation is tagged with one store, and its data is one
 * memcpy away.  A new head is tagged before the run it is cut from shrinks
 * (release), and heads disappear (neighbours merge) only under the arena
 * lock, so a walk under the lock meets heads only, even while live workers
 * split their own runs.
 *
 * Pool (arena lock): FREE runs listed by exact length up to
 * SHM_ARENA_CLASSES, longer ones on one list, then the cells from bump.  A
 * request takes a run of its length, else a long run, else the cells from bump
 * (arena_find_locked).  Neighbouring FREE runs are merged by a walk, run once
 * bump/8 cells came back since the last one, and when a request finds
 * nothing.  The arena's word of a run's head cell holds the run's length
 * while it is allocated (write/read/free need no tag load) and the list link
 * while it is cached or FREE.
 *
 * Worker cache (no lock; only w touches it): lists of CACHE(w) runs by exact
 * length (slot->cache[]) and one extent, a CACHE(w) run that allocations are
 * carved from the front of.  Alloc pops a run of n cells or carves one; free
 * of a run of at most SHM_ARENA_CLASSES cells retags it CACHE(w) and pushes
 * it.  Neither touches more than the run's head cell, its tag and w's slot.
 * A refill brings runs of n exactly from the pool, or a new extent of at
 * most a->batch cells (a whole number of runs of n).  Once the lists hold
 * more than a->spill_at cells they spill: the length just freed keeps half
 * of that (and always the run just freed), the others 1/64 of it each.
 * Runs longer than SHM_ARENA_CLASSES are taken from the extent if it is
 * long enough, else from the pool; freed, they stay CACHE(w) on
 * slot->long_free until w's next arena call (or shm_arena_flush), then go
 * back to the pool.  "taken" counts cells out of the pool, caches
 * included, and the arena holds cap cells, so caches count against the
 * node cap too: at most spill_at + batch cells a worker that another
 * worker cannot use.  arena_cache_bounds() sizes the two at
 * create: spill_at cap / 64 within 64..2048 (room for a push or pop batch
 * of 100 runs of 5 cells to cycle through the cache without the lock) and
 * batch 128, both cut down where the caches of every worker would not fit
 * in the cap/32 that pushes leave free, so that an idle worker's cache
 * never makes a push that shm_cap_room admitted fail (down to 16 + 16 cells a
 * worker: below 64 KiB of cap a worker, caches can exceed that share).
 *
 * Crash safety (a worker killed at any instruction): the tags are the truth,
 * the lists and the slot's bookkeeping are derived.
 *  - alloc and free change a run's owner with one tag store (after the new
 *    head of a split); a freed run is CACHE(w) from that store on, so a
 *    LINKED head after a crash is the caller's intent repair's alone, an
 *    INFLIGHT(w) or CACHE(w) one shm_arena_reap()'s alone;
 *  - under the arena lock: runs change to or from FREE only there, so the
 *    next locker (EOWNERDEAD) rebuilds the pool lists and taken with a walk.
 * shm_arena_reap(w) walks all runs and frees the CACHE(w) and INFLIGHT(w)
 * ones, whatever w's slot says.
 *
 * Every tag store is atomic, release where a walk must see an earlier store
 * first.  Errors: 0 or -errno.
 */
#include "shm/arena.h"

#include <sys/mman.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "shm/layout.h"
#include "shm/lock.h"
#include "shm/region.h"
#include "shm/slot.h"
#include "shm/stats.h"

#define ARENA_BATCH     128 /* cells of a refill, where the cap allows */
#define ARENA_SPILL_MIN 64  /* spill_at bounds, cells, where the cap allows */
#define ARENA_SPILL_MAX 2048
_Static_assert(SHM_ARENA_CLASSES < ARENA_BATCH, "an extent fits a class");

#define CACHED(w, n)   SHM_TAG_RUN(SHM_TAG_CACHE, w, n)
#define INFLIGHT(w, n) SHM_TAG_RUN(SHM_TAG_INFLIGHT, w, n)
#define FREE_RUN(n)    SHM_TAG_RUN(SHM_TAG_FREE, 0, n)

static void arena_rebuild(struct shm_seg *seg, void *arg);

/* arena_of - the ARENA region (shm_region(), inline: every call needs it). */
static inline struct shm_arena *
arena_of(struct shm_seg *seg)
{
    return (struct shm_arena *)(seg->base +
                                seg->hdr->region_off[SHM_REGION_ARENA]);
}

static inline _Atomic uint32_t *
arena_tags(struct shm_arena *a)
{
    return (_Atomic uint32_t *)((unsigned char *)a + a->tags_off);
}

static inline unsigned char *
arena_cell(struct shm_arena *a, uint32_t ref)
{
    return (unsigned char *)a + a->cells_off + (size_t)ref * SHM_CELL_BYTES;
}

/* head_word - the arena's word of a run's head cell: its length while it is
 * allocated, the list link while it is cached or FREE. */
static inline uint32_t *
head_word(struct shm_arena *a, uint32_t ref)
{
    return (uint32_t *)arena_cell(a, ref);
}

static inline uint32_t
tag_get(_Atomic uint32_t *tags, uint32_t ref)
{
    return atomic_load_explicit(&tags[ref], memory_order_acquire);
}

static inline void
tag_put(_Atomic uint32_t *tags, uint32_t ref, uint32_t tag)
{
    atomic_store_explicit(&tags[ref], tag, memory_order_release);
}

static inline void
cache_count_add(struct shm_slot *s, int64_t d)
{
    uint32_t have = atomic_load_explicit(&s->cache_count, memory_order_relaxed);

    atomic_store_explicit(&s->cache_count, (uint32_t)(have + d),
                          memory_order_relaxed);
}

static inline void
taken_add(struct shm_arena *a, int64_t d)
{
    uint32_t t = atomic_load_explicit(&a->taken, memory_order_relaxed);

    atomic_store_explicit(&a->taken, (uint32_t)(t + d), memory_order_relaxed);
}

/* arena_layout - where tags and cells start for params p, from the region
 * start; both 64-byte aligned, so every cell is one cache line. */
static size_t
arena_layout(const struct shm_params *p, size_t *tags_off, size_t *cells_off)
{
    size_t cells = (size_t)(p->max_bytes / SHM_CELL_BYTES) + 1;

    *tags_off = (sizeof(struct shm_arena) + 63) & ~(size_t)63;
    *cells_off = *tags_off + ((cells * 4 + 63) & ~(size_t)63);
    return cells;
}

/* arena_cache_bounds - a->spill_at and a->batch (see the file comment):
 * cap / 64 within ARENA_SPILL_MIN..ARENA_SPILL_MAX and ARENA_BATCH, cut
 * down so that both of every worker fit in cap/32 together (workers: the
 * worker slots; the master's slot allocates rarely and is left out), to
 * no less than one run of the longest class each. */
static void
arena_cache_bounds(struct shm_arena *a, uint32_t workers)
{
    uint32_t budget = a->cap / 32 / (workers > 0 ? workers : 1);
    uint32_t at = a->cap / 64, batch = ARENA_BATCH;

    at = at < ARENA_SPILL_MIN   ? ARENA_SPILL_MIN
         : at > ARENA_SPILL_MAX ? ARENA_SPILL_MAX
                                : at;
    if (batch > budget / 2)
        batch = budget / 2 > SHM_ARENA_CLASSES ? budget / 2 : SHM_ARENA_CLASSES;
    if (at + batch > budget)
        at = budget > batch + SHM_ARENA_CLASSES ? budget - batch
                                                : SHM_ARENA_CLASSES;
    a->spill_at = at;
    a->batch = batch;
}

/* shm_arena_region_size - see region.h: header, tags, cells 0..cap. */
size_t
shm_arena_region_size(const struct shm_params *p)
{
    size_t tags_off, cells_off;
    size_t cells = arena_layout(p, &tags_off, &cells_off);

    return cells_off + cells * SHM_CELL_BYTES;
}

/* shm_arena_region_init - see region.h.  Touches the header page only. */
int
shm_arena_region_init(struct shm_seg *seg, const struct shm_params *p)
{
    struct shm_arena *a = arena_of(seg);
    size_t tags_off, cells_off;
    size_t cells = arena_layout(p, &tags_off, &cells_off);

    a->cap = (uint32_t)(cells - 1);
    arena_cache_bounds(a, p->workers);
    a->bump = 1;
    a->dirty = 0;
    memset(a->pool, 0, sizeof(a->pool));
    a->tags_off = tags_off;
    a->cells_off = cells_off;
    seg->cells = arena_cell(a, 0);
    atomic_store_explicit(&a->taken, 0, memory_order_relaxed);
    return shm_lock_init(&a->lock);
}

/* pool_push_locked - list FREE run h of len cells in the pool. */
static inline void
pool_push_locked(struct shm_arena *a, uint32_t h, uint32_t len)
{
    uint32_t *list = &a->pool[len <= SHM_ARENA_CLASSES ? len : 0];

    *head_word(a, h) = *list;
    *list = h;
}

/* pool_put_locked - run h of len cells, not FREE, goes back to the pool:
 * one tag store, then listed and uncounted. */
static void
pool_put_locked(struct shm_arena *a, uint32_t h, uint32_t len)
{
    tag_put(arena_tags(a), h, FREE_RUN(len));
    pool_push_locked(a, h, len);
    taken_add(a, -(int64_t)len);
    a->dirty += len;
}

/*
 * arena_walk_locked - visit every run below bump in address order: free
 * worker reap_w's runs (reap_w >= 0), merge neighbouring FREE runs, and
 * rebuild the pool lists and taken from the tags alone; a FREE run ending
 * at bump lowers bump instead of being listed.  A run a live worker splits
 * meanwhile is seen whole or split, never FREE.
 */
static void
arena_walk_locked(struct shm_arena *a, int reap_w)
{
    _Atomic uint32_t *tags = arena_tags(a);
    uint32_t cache = reap_w >= 0 ? SHM_TAG(SHM_TAG_CACHE, reap_w) : UINT32_MAX;
    uint32_t inflight =
        reap_w >= 0 ? SHM_TAG(SHM_TAG_INFLIGHT, reap_w) : UINT32_MAX;
    uint32_t run = 0, run_len = 0, nfree = 0, c = 1;

    memset(a->pool, 0, sizeof(a->pool));
    while (c < a->bump) {
        uint32_t t = tag_get(tags, c), len = SHM_TAG_LEN(t);
        if (len == 0 || len > a->bump - c)
            break; /* not a head: stop rather than loop; the rest is taken */
        if (SHM_TAG_OWNER(t) == cache || SHM_TAG_OWNER(t) == inflight) {
            t = FREE_RUN(len);
            tag_put(tags, c, t);
        }
        if (SHM_TAG_STATE(t) == SHM_TAG_FREE) {
            nfree += len;
            if (run != 0 && run_len + len <= SHM_RUN_MAX) {
                run_len += len; /* one store absorbs c's head */
                tag_put(tags, run, FREE_RUN(run_len));
            } else {
                if (run != 0)
                    pool_push_locked(a, run, run_len);
                run = c;
                run_len = len;
            }
        } else if (run != 0) {
            pool_push_locked(a, run, run_len);
            run = 0;
        }
        c += len;
    }
    if (run != 0 && run + run_len == a->bump) {
        /* Free up to bump: one with the cells above it again, for a request
         * longer than either. */
        a->bump = run;
        nfree -= run_len;
    } else if (run != 0)
        pool_push_locked(a, run, run_len);
    atomic_store_explicit(&a->taken, a->bump - 1 - nfree, memory_order_relaxed);
    a->dirty = 0;
}

/* arena_rebuild - repair of the arena lock: a holder died mid-splice; the
 * tags say which runs are FREE (they change only under this lock). */
static void
arena_rebuild(struct shm_seg *seg, void *arg)
{
    (void)arg;
    arena_walk_locked(arena_of(seg), -1);
}

/* pool_pop_locked - unlink the first run of pool list i. */
static inline uint32_t
pool_pop_locked(struct shm_arena *a, uint32_t i)
{
    uint32_t h = a->pool[i];

    a->pool[i] = *head_word(a, h);
    return h;
}

/*
 * pool_long_locked - unlink a FREE run of at least n cells from the long
 * list: the first long enough, or the shortest when best (long requests, so
 * that holes fit what is asked again).  0 if none; *len gets its length.
 * The run stays tagged FREE until pool_carve_locked.
 */
static uint32_t
pool_long_locked(struct shm_arena *a, uint32_t n, int best, uint32_t *len)
{
    _Atomic uint32_t *tags = arena_tags(a);
    uint32_t h, *prev, *fit = NULL, fit_len = 0;

    for (prev = &a->pool[0]; (h = *prev) != 0; prev = head_word(a, h)) {
        uint32_t l = SHM_TAG_LEN(tag_get(tags, h));
        if (l >= n && (fit == NULL || l < fit_len)) {
            fit = prev;
            fit_len = l;
            if (l == n || !best)
                break;
        }
    }
    if (fit == NULL)
        return 0;
    h = *fit;
    *fit = *head_word(a, h);
    *len = fit_len;
    return h;
}

/* pool_bump_locked - a FREE run of n to want cells from bump, 0 if fewer
 * than n are left. */
static uint32_t
pool_bump_locked(struct shm_arena *a, uint32_t n, uint32_t want, uint32_t *len)
{
    uint32_t room = a->cap + 1 - a->bump, h = a->bump;

    if (room < n)
        return 0;
    *len = want < room ? want : room;
    /* Tagged before bump passes it: a walk meets a run, never a cell
     * without a head. */
    tag_put(arena_tags(a), h, FREE_RUN(*len));
    a->bump = h + *len;
    return h;
}

/* pool_class_locked - unlink a FREE run of n <= SHM_ARENA_CLASSES cells
 * exactly (exact: no other length), else of the shortest longer class.  0 if
 * none. */
static uint32_t
pool_class_locked(struct shm_arena *a, uint32_t n, int exact, uint32_t *len)
{
    uint32_t last = exact ? n : SHM_ARENA_CLASSES;

    for (uint32_t c = n; c <= last; c++)
        if (a->pool[c] != 0) {
            *len = c;
            return pool_pop_locked(a, c);
        }
    return 0;
}

/* pool_find_locked - a FREE run of at least n cells: of n exactly, long,
 * from bump, or of a longer class, in that order.  0 if none. */
static uint32_t
pool_find_locked(struct shm_arena *a, uint32_t n, uint32_t want, int best,
                 uint32_t *len)
{
    uint32_t h = 0;

    if (n <= SHM_ARENA_CLASSES)
        h = pool_class_locked(a, n, 1, len);
    if (h == 0)
        h = pool_long_locked(a, n, best, len);
    if (h == 0)
        h = pool_bump_locked(a, n, want, len);
    if (h == 0 && n < SHM_ARENA_CLASSES)
        h = pool_class_locked(a, n + 1, 0, len);
    return h;
}

/* pool_carve_locked - FREE run h of len cells: its first k cells become a
 * run tagged tag (state and worker), counted as taken; the rest stays FREE. */
static void
pool_carve_locked(struct shm_arena *a, uint32_t h, uint32_t len, uint32_t k,
                  uint32_t tag)
{
    _Atomic uint32_t *tags = arena_tags(a);

    if (k < len) {
        tag_put(tags, h + k, FREE_RUN(len - k)); /* before h shrinks */
        pool_push_locked(a, h + k, len - k);
    }
    tag_put(tags, h, tag | k << 8);
    taken_add(a, k);
}

/* cache_drop_ext_locked - w's extent goes back: to the cells from bump if
 * it ends where they begin (the next extent then starts where this one
 * stopped, and no hole shorter than the runs asked is left between them:
 * 3 cells of every 128 for 256-byte messages), else to the pool.  A walk
 * stops at bump, so the rest's stale tag is never read; bump tags a run
 * before it passes it again. */
static uint32_t
cache_drop_ext_locked(struct shm_arena *a, struct shm_slot *s)
{
    uint32_t k = s->ext_len;

    if (k != 0) {
        if (s->ext + k == a->bump) {
            a->bump = s->ext;
            taken_add(a, -(int64_t)k);
        } else
            pool_put_locked(a, s->ext, k);
        s->ext = 0;
        s->ext_len = 0;
        cache_count_add(s, -(int64_t)k);
    }
    return k;
}

/* long_release_locked - the long runs w freed go back to the pool.  Only w
 * calls this (or the reap, after w died), and never inside the
 * shm_arena_free() that deferred them: see shm_arena_free. */
static uint32_t
long_release_locked(struct shm_arena *a, struct shm_slot *s)
{
    _Atomic uint32_t *tags = arena_tags(a);
    uint32_t k = 0;

    while (s->long_free != 0) {
        uint32_t h = s->long_free;
        uint32_t len =
            SHM_TAG_LEN(atomic_load_explicit(&tags[h], memory_order_relaxed));
        s->long_free = *head_word(a, h);
        pool_put_locked(a, h, len);
        cache_count_add(s, -(int64_t)len);
        k += len;
    }
    return k;
}

/* long_release - long_release_locked under the arena lock, when w has any. */
static void
long_release(struct shm_seg *seg, struct shm_slot *s)
{
    struct shm_arena *a = arena_of(seg);

    if (s->long_free == 0 || shm_lock(seg, &a->lock, arena_rebuild, NULL) != 0)
        return;
    long_release_locked(a, s);
    shm_unlock(&a->lock);
}

/*
 * cache_spill_locked - w's cached runs go back to the pool but for the
 * first (most recently freed) keep_hot cells of length hot and keep cells
 * of each other length; returns the cells spilled.  Runs that follow each
 * other in the lists and in the arena (freed in the order they were carved
 * from an extent, as a queue frees its messages) go back as one FREE run:
 * one store absorbs a run into its neighbour, and a refill then carves an
 * extent from it instead of chasing one list link per run.
 */
static uint32_t
cache_spill_locked(struct shm_arena *a, struct shm_slot *s, uint32_t hot,
                   uint32_t keep_hot, uint32_t keep)
{
    _Atomic uint32_t *tags = arena_tags(a);
    uint32_t spilled = 0, run = 0, run_len = 0;

    for (uint32_t c = 1; c <= SHM_ARENA_CLASSES; c++) {
        uint32_t *prev = &s->cache[c - 1], h, kept = 0;
        uint32_t k = c == hot ? keep_hot : keep;
        while ((h = *prev) != 0 && kept + c <= k) {
            kept += c;
            prev = head_word(a, h);
        }
        *prev = 0;
        while (h != 0) {
            uint32_t next = *head_word(a, h);
            spilled += c;
            if (run != 0 && h + c == run && run_len + c <= SHM_RUN_MAX) {
                run = h; /* h absorbs the run after it */
                run_len += c;
                tag_put(tags, run, FREE_RUN(run_len));
            } else if (run != 0 && run + run_len == h &&
                       run_len + c <= SHM_RUN_MAX) {
                run_len += c; /* the run absorbs h */
                tag_put(tags, run, FREE_RUN(run_len));
            } else {
                if (run != 0)
                    pool_push_locked(a, run, run_len);
                run = h;
                run_len = c;
                tag_put(tags, run, FREE_RUN(run_len));
            }
            h = next;
        }
    }
    if (run != 0)
        pool_push_locked(a, run, run_len);
    if (spilled != 0) {
        taken_add(a, -(int64_t)spilled);
        a->dirty += spilled;
        cache_count_add(s, -(int64_t)spilled);
    }
    return spilled;
}

/*
 * arena_find_locked - a FREE run of at least n cells, up to want (see
 * pool_long_locked for best), by pool_find_locked: holes of the length asked
 * are filled first, then long runs are carved, then cells from bump (so the
 * arena's resident part grows only by what could not be reused).  Before
 * that, a walk merges FREE neighbours if a ninth of the cells below bump came
 * back since the last one (a queue frees its messages in the order they were
 * carved, so most merge; and walks cost O(1) a freed cell).  On failure,
 * again after a walk if anything came back at all, then after all of w's
 * cache went back: a request fails only when no n free cells in a row are
 * left outside other workers' caches.
 */
static uint32_t
arena_find_locked(struct shm_arena *a, struct shm_slot *s, uint32_t n,
                  uint32_t want, int best, uint32_t *len)
{
    uint32_t h;

    if (a->dirty != 0 && a->dirty >= (a->bump - 1) / 8)
        arena_walk_locked(a, -1);
    h = pool_find_locked(a, n, want, best, len);
    if (h == 0 && a->dirty != 0) {
        arena_walk_locked(a, -1);
        h = pool_find_locked(a, n, want, best, len);
    }
    if (h == 0 && cache_spill_locked(a, s, 0, 0, 0) +
                          cache_drop_ext_locked(a, s) +
                          long_release_locked(a, s) !=
                      0) {
        arena_walk_locked(a, -1);
        h = pool_find_locked(a, n, want, best, len);
    }
    return h;
}

/*
 * arena_refill - give w's cache a run of n <= SHM_ARENA_CLASSES cells: up to
 * a->batch cells of runs of n exactly if the pool has them, else a new
 * extent of up to a->batch cells (the old one, shorter than n, went back
 * first).  -ENOBUFS if none is left.
 */
static int
arena_refill(struct shm_seg *seg, struct shm_slot *s, int w, uint32_t n)
{
    struct shm_arena *a = arena_of(seg);
    _Atomic uint32_t *tags = arena_tags(a);
    uint32_t got = 0, h, len;
    int rc;

    /* arena->lock: pool and w's cache; no syscalls, no other lock. */
    if ((rc = shm_lock(seg, &a->lock, arena_rebuild, NULL)) != 0)
        return rc;
    cache_drop_ext_locked(a, s);
    if ((h = arena_find_locked(a, s, n, a->batch, 0, &len)) == 0) {
        rc = -ENOBUFS;
        goto out;
    }
    if (len == n) {
        for (;;) {
            tag_put(tags, h, CACHED(w, n));
            *head_word(a, h) = s->cache[n - 1];
            s->cache[n - 1] = h;
            got += n;
            if (got + n > a->batch || a->pool[n] == 0)
                break;
            h = pool_pop_locked(a, n);
        }
        taken_add(a, got);
    } else {
        /* A whole number of runs of n from a longer run: runs of n alone
         * then leave no rest behind between extents. */
        got = len <= a->batch ? len : a->batch - a->batch % n;
        pool_carve_locked(a, h, len, got, SHM_TAG(SHM_TAG_CACHE, w));
        s->ext = h;
        s->ext_len = got;
    }
    cache_count_add(s, got);
out:
    shm_unlock(&a->lock);
    return rc;
}

/* arena_alloc_long - a run of n > SHM_ARENA_CLASSES cells from the pool. */
static int
arena_alloc_long(struct shm_seg *seg, struct shm_slot *s, int w, uint32_t n,
                 uint32_t *head)
{
    struct shm_arena *a = arena_of(seg);
    uint32_t h, len;
    int rc;

    if ((rc = shm_lock(seg, &a->lock, arena_rebuild, NULL)) != 0)
        return rc;
    if ((h = arena_find_locked(a, s, n, n, 1, &len)) != 0) {
        pool_carve_locked(a, h, len, n, SHM_TAG(SHM_TAG_INFLIGHT, w));
        *head_word(a, h) = n;
        *head = h;
    } else
        rc = -ENOBUFS;
    shm_unlock(&a->lock);
    return rc;
}

/*
 * shm_arena_alloc - see arena.h.  A cached run of n cells, else the front of
 * the extent (the rest's head tagged first, then the run's), else a refill.
 */
int
shm_arena_alloc(struct shm_seg *seg, int w, uint32_t n, uint32_t *head)
{
    struct shm_arena *a = arena_of(seg);
    _Atomic uint32_t *tags = arena_tags(a);
    struct shm_slot *s = shm_slot(seg, w);
    uint32_t h;
    int rc;

    if (n == 0)
        return -EINVAL;
    if (n > SHM_RUN_MAX)
        return -ENOBUFS;
    long_release(seg, s);
    for (;;) {
        if (n <= SHM_ARENA_CLASSES && (h = s->cache[n - 1]) != 0) {
            s->cache[n - 1] = *head_word(a, h);
            tag_put(tags, h, INFLIGHT(w, n));
            break;
        }
        if (s->ext_len >= n) {
            uint32_t len = s->ext_len;
            h = s->ext;
            if (len > n)
                tag_put(tags, h + n, CACHED(w, len - n));
            s->ext = len > n ? h + n : 0;
            s->ext_len = len - n;
            tag_put(tags, h, INFLIGHT(w, n));
            break;
        }
        if (n > SHM_ARENA_CLASSES)
            return arena_alloc_long(seg, s, w, n, head);
        if ((rc = arena_refill(seg, s, w, n)) != 0)
            return rc;
    }
    cache_count_add(s, -(int64_t)n);
    *head_word(a, h) = n;
    *head = h;
    return 0;
}

/* shm_arena_link - see arena.h: one store; the run keeps its length (from
 * the head word, in the line the caller just wrote: the tag is only stored). */
void
shm_arena_link(struct shm_seg *seg, uint32_t head)
{
    struct shm_arena *a = arena_of(seg);

    tag_put(arena_tags(a), head,
            SHM_TAG_RUN(SHM_TAG_LINKED, 0, *head_word(a, head)));
}

/* arena_spill - w's lists are past a->spill_at cells, the last run
 * freed hot cells long: they go back to the pool but for the most recently
 * freed half of that of length hot, and 1/64 of it of each other length.
 * The run just freed always stays (a small arena's spill_at / 2 can be
 * shorter than it): its freer's intent may still name it, as for a long
 * run (shm_arena_free), so it must not be reused before w's next call. */
static void
arena_spill(struct shm_seg *seg, struct shm_slot *s, uint32_t hot)
{
    struct shm_arena *a = arena_of(seg);
    uint32_t at = a->spill_at;

    if (shm_lock(seg, &a->lock, arena_rebuild, NULL) != 0)
        return;
    cache_spill_locked(a, s, hot, at / 2 > hot ? at / 2 : hot, at / 64);
    shm_unlock(&a->lock);
}

/*
 * shm_arena_free - see arena.h.  A run of at most SHM_ARENA_CLASSES cells is
 * retagged CACHE(w) and pushed on w's list; a longer one goes to the pool
 * under the lock (retagged FREE there).  (shm_lock fails only on a mutex that
 * is not robust; the run then stays as it was.)
 */
void
shm_arena_free(struct shm_seg *seg, int w, uint32_t head)
{
    struct shm_arena *a = arena_of(seg);
    _Atomic uint32_t *tags = arena_tags(a);
    struct shm_slot *s = shm_slot(seg, w);

    if (head == 0)
        return;
    /* The length from the head word (alloc wrote it, as the tag's): the
     * caller has that line already, and the tag line is then only stored. */
    uint32_t len = *head_word(a, head);
    if (len > SHM_ARENA_CLASSES) {
        /* Not into the pool yet: the caller still names the run in its
         * intent word, and a repair after its death must find the run
         * w's (CACHE), not reused by another worker and LINKED there.  It
         * goes back at w's next arena call, or its heartbeat. */
        long_release(seg, s);
        tag_put(tags, head, CACHED(w, len));
        *head_word(a, head) = s->long_free;
        s->long_free = head;
        cache_count_add(s, len);
        return;
    }
    tag_put(tags, head, CACHED(w, len));
    *head_word(a, head) = s->cache[len - 1];
    s->cache[len - 1] = head;
    cache_count_add(s, len);
    if (atomic_load_explicit(&s->cache_count, memory_order_relaxed) -
            s->ext_len >
        a->spill_at)
        arena_spill(seg, s, len);
}

/* run_clip - how many of len bytes at data offset off fit in run head. */
static inline size_t
run_clip(struct shm_arena *a, uint32_t head, size_t off, size_t len)
{
    size_t cap = SHM_RUN_DATA(*head_word(a, head));

    if (off >= cap)
        return 0;
    return len < cap - off ? len : cap - off;
}

/* shm_arena_write - see arena.h: one memcpy. */
void
shm_arena_write(struct shm_seg *seg, uint32_t head, size_t off, const void *src,
                size_t len)
{
    struct shm_arena *a = arena_of(seg);

    memcpy(arena_cell(a, head) + 4 + off, src, run_clip(a, head, off, len));
}

/* shm_arena_read - see arena.h: one memcpy. */
void
shm_arena_read(struct shm_seg *seg, uint32_t head, size_t off, void *dst,
               size_t len)
{
    struct shm_arena *a = arena_of(seg);

    memcpy(dst, arena_cell(a, head) + 4 + off, run_clip(a, head, off, len));
}

/* shm_arena_equal - see arena.h. */
int
shm_arena_equal(struct shm_seg *seg, uint32_t head, const void *s, size_t len)
{
    struct shm_arena *a = arena_of(seg);

    return run_clip(a, head, 0, len) == len &&
           memcmp(arena_cell(a, head) + 4, s, len) == 0;
}

/* shm_arena_used_bytes - see arena.h: cells out of the pool less the cells
 * sitting in caches.  Exact when no alloc/free is running. */
uint64_t
shm_arena_used_bytes(struct shm_seg *seg)
{
    struct shm_arena *a = arena_of(seg);
    int64_t used = atomic_load_explicit(&a->taken, memory_order_relaxed);

    for (int w = 0; w < SHM_MAX_WORKERS; w++)
        used -= atomic_load_explicit(&shm_slot(seg, w)->cache_count,
                                     memory_order_relaxed);
    return used > 0 ? (uint64_t)used * SHM_CELL_BYTES : 0;
}

/* shm_arena_lock - see arena.h. */
int
shm_arena_lock(struct shm_seg *seg)
{
    return shm_lock(seg, &arena_of(seg)->lock, arena_rebuild, NULL);
}

/* shm_arena_unlock - see arena.h. */
void
shm_arena_unlock(struct shm_seg *seg)
{
    shm_unlock(&arena_of(seg)->lock);
}

/*
 * Mapping ahead.  The first touch of a page of the segment costs the
 * kernel's allocation of it (2.6 us of CPU a page on this project's VM:
 * zeroing, memcg charge, page cache), and each other process that touches
 * it a fault to map it (1.3 us; BENCHMARKS.md, backlog): twice a push's
 * CPU while the arena grows.  shm_arena_ahead maps the cells just above
 * bump, where the next extents come from, in one madvise: the master's
 * allocates them off the workers' path (master/prefault.c), a worker's
 * maps them read (16 pages a fault, already writable: the segment is
 * shmem, which tracks no dirty pages), at 0.3 us a page.  A node that
 * does not grow maps nothing more.
 */
#define AHEAD_MIN  (256u << 10) /* a worker's window, bytes */
#define AHEAD_MAX  (4u << 20)
#define AHEAD_GAIN 8 /* times the growth since its last call */

/* populate - map [from, to) here, whole pages.  0 or -errno. */
static int
populate(unsigned char *from, unsigned char *to, int advice)
{
    const uintptr_t pg = 4096;
    uintptr_t lo = (uintptr_t)from & ~(pg - 1);
    uintptr_t hi = ((uintptr_t)to + pg - 1) & ~(pg - 1);

    if (hi <= lo || madvise((void *)lo, hi - lo, advice) == 0)
        return 0;
    return -errno;
}

/* shm_arena_ahead - see arena.h. */
long
shm_arena_ahead(struct shm_seg *seg, struct shm_ahead *st, size_t window,
                int alloc)
{
    struct shm_arena *a = arena_of(seg);
    uint64_t win = window / SHM_CELL_BYTES, end;
    uint32_t bump = st->bump, from;
    int rc;

    if (st->off || st->to >= bump + win / 2)
        return 0;
    end = bump + win < (uint64_t)a->cap + 1 ? bump + win : a->cap + 1;
    from = st->to > bump ? st->to : bump;
    if (end <= from)
        return 0;
    int advice = alloc ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
    rc = populate(arena_cell(a, from), arena_cell(a, (uint32_t)end), advice);
    if (rc == 0)
        rc = populate((unsigned char *)&arena_tags(a)[from],
                      (unsigned char *)&arena_tags(a)[end], advice);
    if (rc == -EINVAL) /* no MADV_POPULATE_* here (Linux < 5.14) */
        st->off = 1;
    if (rc != 0)
        return rc;
    st->to = (uint32_t)end;
    return (long)((end - from) * SHM_CELL_BYTES);
}

/* shm_arena_grew - see arena.h. */
uint32_t
shm_arena_grew(struct shm_seg *seg, struct shm_ahead *st)
{
    uint32_t bump = __atomic_load_n(&arena_of(seg)->bump, __ATOMIC_RELAXED);
    uint32_t grew = bump > st->bump ? bump - st->bump : 0;

    st->bump = bump;
    return grew;
}

/* worker_ahead - a worker's, from its every loop (shm_arena_flush): once
 * the arena grows, AHEAD_GAIN times what it grew since the last call,
 * within AHEAD_MIN..AHEAD_MAX.  One state a process: a fork maps none of
 * its parent's pages (shared mappings' are not copied), and a forked
 * worker calls with another slot than its parent did. */
static void
worker_ahead(struct shm_seg *seg, int w)
{
    static struct shm_ahead st;
    static int of = -1;
    uint64_t grew;

    if (of != w) {
        of = w;
        st = (struct shm_ahead){.bump = 1, .to = 1};
    }
    grew = (uint64_t)shm_arena_grew(seg, &st) * SHM_CELL_BYTES * AHEAD_GAIN;
    if (grew != 0)
        (void)shm_arena_ahead(seg, &st,
                              grew < AHEAD_MIN   ? AHEAD_MIN
                              : grew > AHEAD_MAX ? AHEAD_MAX
                                                 : grew,
                              0);
}

/* shm_arena_flush - see arena.h. */
void
shm_arena_flush(struct shm_seg *seg, int w)
{
    long_release(seg, shm_slot(seg, w));
    if (w != SHM_STATS_MASTER) /* the master maps ahead its own way */
        worker_ahead(seg, w);
}

/*
 * shm_arena_reap - see arena.h.  w must be dead and its partition locks
 * repaired: a run w linked into a structure must be tagged LINKED by then,
 * and one it unlinked without reaching shm_arena_free() is the repairer's.
 * The walk frees w's runs by their tags; w's slot (lists, extent, count),
 * possibly half-updated, is then reset.
 */
int
shm_arena_reap(struct shm_seg *seg, int w)
{
    struct shm_arena *a = arena_of(seg);
    struct shm_slot *s = shm_slot(seg, w);
    int rc;

    if ((rc = shm_lock(seg, &a->lock, arena_rebuild, NULL)) != 0)
        return rc;
    arena_walk_locked(a, w);
    s->ext = 0;
    s->ext_len = 0;
    s->long_free = 0;
    memset(s->cache, 0, sizeof(s->cache));
    atomic_store_explicit(&s->cache_count, 0, memory_order_relaxed);
    shm_unlock(&a->lock);
    return 0;
}
