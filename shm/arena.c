/*
 * arena.c - the cell arena (arena.h): chains of 64-byte cells, one tag word
 * per cell, a global free list, and per-worker caches.
 *
 * Pool: cells 1..bump-1 have been handed out at least once; cells from bump
 * on were never touched (so never paged in).  A cell out of the pool is in a
 * worker's cache (CACHE(w)) or in an allocated chain (head INFLIGHT(w) or
 * LINKED, other cells BODY).  "taken" counts cells out of the pool and never
 * passes the cap, so caches count against the node cap too: at most
 * SHM_ARENA_SPILL cells a worker (~24 KiB) that another worker cannot use.
 *
 * Hot path: alloc takes the first n cells of the caller's cache list, free
 * puts a chain at its front; both touch only the caller's slot, the chain's
 * cells and their tags (no lock, no shared counter, no syscall).  The arena
 * lock (a leaf lock: take no other lock under it) is taken to refill a cache
 * from the pool, spill its tail back, and reap.
 *
 * Crash safety (a worker killed at any instruction):
 *  - in alloc: the head is tagged INFLIGHT(w) first, then the bodies BODY,
 *    so a BODY cell always hangs off an INFLIGHT(w) or LINKED head;
 *  - in free: slot->freeing holds the head while the chain's cells turn
 *    CACHE(w) (its head may still say LINKED);
 *  - under the arena lock: cells change to or from FREE only there, so the
 *    next locker (EOWNERDEAD) rebuilds the free list and taken from the tags.
 *    The dead holder's half-spliced cells keep stale next words.
 * shm_arena_reap(w) frees every CACHE(w) cell alone, and walks the freeing
 * chain and each INFLIGHT(w) chain through BODY and CACHE(w) cells.
 *
 * Every store that crash recovery reads (tags, next words, slot fields) is
 * atomic and ordered by release where order matters.  Errors: 0 or -errno.
 */
#include "shm/arena.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "shm/layout.h"
#include "shm/lock.h"
#include "shm/region.h"
#include "shm/slot.h"

#define SHM_ARENA_BATCH 128                   /* cells a refill adds */
#define SHM_ARENA_SPILL (3 * SHM_ARENA_BATCH) /* cache size that spills */

static void arena_rebuild(struct shm_seg *seg, void *arg);

static inline struct shm_arena *
arena_of(struct shm_seg *seg)
{
    return shm_region(seg, SHM_REGION_ARENA);
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

static inline uint32_t
cell_next(struct shm_arena *a, uint32_t ref)
{
    return __atomic_load_n((uint32_t *)arena_cell(a, ref), __ATOMIC_RELAXED);
}

static inline void
cell_set_next(struct shm_arena *a, uint32_t ref, uint32_t next)
{
    __atomic_store_n((uint32_t *)arena_cell(a, ref), next, __ATOMIC_RELAXED);
}

static inline uint32_t
tag_get(_Atomic uint32_t *tags, uint32_t ref)
{
    return atomic_load_explicit(&tags[ref], memory_order_relaxed);
}

static inline void
tag_set(_Atomic uint32_t *tags, uint32_t ref, uint32_t tag)
{
    atomic_store_explicit(&tags[ref], tag, memory_order_relaxed);
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
    a->bump = 1;
    a->free_head = 0;
    a->tags_off = tags_off;
    a->cells_off = cells_off;
    atomic_store_explicit(&a->taken, 0, memory_order_relaxed);
    return shm_lock_init(&a->lock);
}

/* shm_cell - see arena.h. */
void *
shm_cell(struct shm_seg *seg, uint32_t ref)
{
    return arena_cell(arena_of(seg), ref);
}

/* shm_cell_next - see arena.h. */
uint32_t
shm_cell_next(struct shm_seg *seg, uint32_t ref)
{
    return cell_next(arena_of(seg), ref);
}

/* shm_cells_for - see arena.h. */
uint32_t
shm_cells_for(size_t len)
{
    return len == 0 ? 1 : (uint32_t)((len + SHM_CELL_DATA - 1) / SHM_CELL_DATA);
}

/*
 * arena_rebuild - repair of the arena lock: a holder died mid-splice.  The
 * FREE tags are the truth (they change only under this lock); live workers
 * may meanwhile move their own cells between CACHE, INFLIGHT, BODY and
 * LINKED, which this does not read.
 */
static void
arena_rebuild(struct shm_seg *seg, void *arg)
{
    struct shm_arena *a = arena_of(seg);
    _Atomic uint32_t *tags = arena_tags(a);
    uint32_t head = 0, nfree = 0;

    (void)arg;
    for (uint32_t c = a->bump; c-- > 1;) {
        if (tag_get(tags, c) != SHM_TAG_FREE)
            continue;
        cell_set_next(a, c, head);
        head = c;
        nfree++;
    }
    a->free_head = head;
    atomic_store_explicit(&a->taken, a->bump - 1 - nfree, memory_order_relaxed);
}

/*
 * arena_take_locked - k cells out of the pool, tagged CACHE(w), as a list
 * ending in tail_next; returns its first cell.  The free list first, then
 * never-used cells (bump moves before they are tagged, so a crash leaves
 * them FREE below bump, for arena_rebuild to collect).
 */
static uint32_t
arena_take_locked(struct shm_arena *a, int w, uint32_t k, uint32_t tail_next)
{
    _Atomic uint32_t *tags = arena_tags(a);
    uint32_t tag = SHM_TAG(SHM_TAG_CACHE, w);
    uint32_t first = 0, last = 0;

    while (k > 0 && a->free_head != 0) {
        uint32_t c = a->free_head;
        tag_set(tags, c, tag);
        a->free_head = cell_next(a, c);
        if (last != 0)
            cell_set_next(a, last, c);
        else
            first = c;
        last = c;
        k--;
    }
    if (k > 0) {
        uint32_t b = a->bump;
        a->bump = b + k;
        for (uint32_t c = b; c < b + k; c++) {
            cell_set_next(a, c, c + 1);
            tag_set(tags, c, tag);
        }
        if (last != 0)
            cell_set_next(a, last, b);
        else
            first = b;
        last = b + k - 1;
    }
    cell_set_next(a, last, tail_next);
    return first;
}

/*
 * arena_refill - give w's cache at least n cells (and a batch more if the
 * cap allows) from the pool.  -ENOBUFS if the cap leaves fewer than n.
 */
static int
arena_refill(struct shm_seg *seg, struct shm_slot *s, int w, uint32_t n)
{
    struct shm_arena *a = arena_of(seg);
    uint32_t have = atomic_load_explicit(&s->cache_count, memory_order_relaxed);
    uint64_t want = (uint64_t)n - have + SHM_ARENA_BATCH;
    int rc;

    /* arena->lock: pool and w's cache list; no syscalls, no other lock. */
    if ((rc = shm_lock(seg, &a->lock, arena_rebuild, NULL)) != 0)
        return rc;
    uint32_t taken = atomic_load_explicit(&a->taken, memory_order_relaxed);
    uint64_t room = a->cap - taken;
    if (room < n - have) {
        rc = -ENOBUFS;
        goto out;
    }
    uint32_t k = (uint32_t)(want < room ? want : room);
    atomic_store_explicit(&a->taken, taken + k, memory_order_relaxed);
    s->cache_head = arena_take_locked(a, w, k, s->cache_head);
    atomic_store_explicit(&s->cache_count, have + k, memory_order_relaxed);
out:
    shm_unlock(&a->lock);
    return rc;
}

/* arena_spill - return w's cache beyond its first SHM_ARENA_BATCH cells (the
 * most recently freed, warmest) to the free list. */
static void
arena_spill(struct shm_seg *seg, struct shm_slot *s)
{
    struct shm_arena *a = arena_of(seg);
    _Atomic uint32_t *tags = arena_tags(a);

    if (shm_lock(seg, &a->lock, arena_rebuild, NULL) != 0)
        return;
    uint32_t keep_last = s->cache_head;
    for (uint32_t i = 1; i < SHM_ARENA_BATCH; i++)
        keep_last = cell_next(a, keep_last);
    uint32_t first = cell_next(a, keep_last), c = first, k = 0;
    for (;;) {
        tag_set(tags, c, SHM_TAG_FREE);
        k++;
        uint32_t next = cell_next(a, c);
        if (next == 0)
            break;
        c = next;
    }
    cell_set_next(a, c, a->free_head);
    a->free_head = first;
    cell_set_next(a, keep_last, 0);
    atomic_store_explicit(&s->cache_count, SHM_ARENA_BATCH,
                          memory_order_relaxed);
    atomic_store_explicit(
        &a->taken, atomic_load_explicit(&a->taken, memory_order_relaxed) - k,
        memory_order_relaxed);
    shm_unlock(&a->lock);
}

/*
 * shm_arena_alloc - see arena.h.  The first n cells of w's cache become the
 * chain: its head is tagged INFLIGHT(w) first, then the bodies BODY in chain
 * order, then the chain is cut after cell n.  A BODY cell is thus always
 * reachable from an INFLIGHT(w) head through BODY cells (shm_arena_reap).
 */
int
shm_arena_alloc(struct shm_seg *seg, int w, uint32_t n, uint32_t *head)
{
    struct shm_arena *a = arena_of(seg);
    _Atomic uint32_t *tags = arena_tags(a);
    struct shm_slot *s = shm_slot(seg, w);
    uint32_t have = atomic_load_explicit(&s->cache_count, memory_order_relaxed);
    int rc;

    if (n == 0)
        return -EINVAL;
    if (have < n) {
        if ((rc = arena_refill(seg, s, w, n)) != 0)
            return rc;
        have = atomic_load_explicit(&s->cache_count, memory_order_relaxed);
    }
    uint32_t h = s->cache_head, c = h;
    tag_set(tags, h, SHM_TAG(SHM_TAG_INFLIGHT, w));
    atomic_thread_fence(memory_order_release); /* head before bodies */
    for (uint32_t i = 1; i < n; i++) {
        c = cell_next(a, c);
        tag_set(tags, c, SHM_TAG(SHM_TAG_BODY, 0));
    }
    uint32_t rest = cell_next(a, c);
    cell_set_next(a, c, 0);
    s->cache_head = rest;
    atomic_store_explicit(&s->cache_count, have - n, memory_order_relaxed);
    *head = h;
    return 0;
}

/* shm_arena_link - see arena.h: one store, the chain's bodies stay BODY. */
void
shm_arena_link(struct shm_seg *seg, uint32_t head)
{
    atomic_store_explicit(&arena_tags(arena_of(seg))[head],
                          SHM_TAG(SHM_TAG_LINKED, 0), memory_order_release);
}

/*
 * shm_arena_free - see arena.h.  slot->freeing names the chain until it is
 * all in the cache, so a crash in between leaves it to shm_arena_reap().
 * Spills the cache's tail once it passes SHM_ARENA_SPILL cells.
 */
void
shm_arena_free(struct shm_seg *seg, int w, uint32_t head)
{
    struct shm_arena *a = arena_of(seg);
    _Atomic uint32_t *tags = arena_tags(a);
    struct shm_slot *s = shm_slot(seg, w);
    uint32_t tag = SHM_TAG(SHM_TAG_CACHE, w), c = head, n = 1;

    if (head == 0)
        return;
    /* Claim the chain with one store before journalling it: a head still
     * LINKED after a crash belongs to the caller's intent repair alone, one
     * INFLIGHT(w) or CACHE(w) to shm_arena_reap() alone, so no chain is
     * freed by both. */
    tag_set(tags, head, SHM_TAG(SHM_TAG_INFLIGHT, w));
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->freeing, head, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (;;) {
        tag_set(tags, c, tag);
        uint32_t next = cell_next(a, c);
        if (next == 0)
            break;
        c = next;
        n++;
    }
    cell_set_next(a, c, s->cache_head);
    s->cache_head = head;
    uint32_t have =
        atomic_load_explicit(&s->cache_count, memory_order_relaxed) + n;
    atomic_store_explicit(&s->cache_count, have, memory_order_relaxed);
    atomic_store_explicit(&s->freeing, 0, memory_order_release);
    if (have > SHM_ARENA_SPILL)
        arena_spill(seg, s);
}

/* arena_seek - the cell holding data offset *off of head's chain; *off
 * becomes the offset inside it.  0 if the chain is shorter. */
static inline uint32_t
arena_seek(struct shm_arena *a, uint32_t head, size_t *off)
{
    uint32_t c = head;

    while (*off >= SHM_CELL_DATA && c != 0) {
        c = cell_next(a, c);
        *off -= SHM_CELL_DATA;
    }
    return c;
}

/* shm_arena_write - see arena.h.  Stops at the end of the chain. */
void
shm_arena_write(struct shm_seg *seg, uint32_t head, size_t off, const void *src,
                size_t len)
{
    struct shm_arena *a = arena_of(seg);
    const unsigned char *p = src;

    for (uint32_t c = arena_seek(a, head, &off); len > 0 && c != 0;
         c = cell_next(a, c), off = 0) {
        size_t k = SHM_CELL_DATA - off < len ? SHM_CELL_DATA - off : len;
        memcpy(arena_cell(a, c) + 4 + off, p, k);
        p += k;
        len -= k;
    }
}

/* shm_arena_read - see arena.h.  Stops at the end of the chain. */
void
shm_arena_read(struct shm_seg *seg, uint32_t head, size_t off, void *dst,
               size_t len)
{
    struct shm_arena *a = arena_of(seg);
    unsigned char *p = dst;

    for (uint32_t c = arena_seek(a, head, &off); len > 0 && c != 0;
         c = cell_next(a, c), off = 0) {
        size_t k = SHM_CELL_DATA - off < len ? SHM_CELL_DATA - off : len;
        memcpy(p, arena_cell(a, c) + 4 + off, k);
        p += k;
        len -= k;
    }
}

/* shm_arena_equal - see arena.h; 0 if the chain is shorter than len. */
int
shm_arena_equal(struct shm_seg *seg, uint32_t head, const void *s, size_t len)
{
    struct shm_arena *a = arena_of(seg);
    const unsigned char *p = s;
    uint32_t c = head;

    for (; len > 0 && c != 0; c = cell_next(a, c)) {
        size_t k = len < SHM_CELL_DATA ? len : SHM_CELL_DATA;
        if (memcmp(arena_cell(a, c) + 4, p, k) != 0)
            return 0;
        p += k;
        len -= k;
    }
    return len == 0;
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

/* arena_push_locked - put cell c on the free list. */
static inline void
arena_push_locked(struct shm_arena *a, uint32_t c)
{
    tag_set(arena_tags(a), c, SHM_TAG_FREE);
    cell_set_next(a, c, a->free_head);
    a->free_head = c;
}

/*
 * arena_reap_chain_locked - free c, then the cells after it while they are
 * BODY or CACHE(w); returns cells freed.
 */
static uint32_t
arena_reap_chain_locked(struct shm_arena *a, int w, uint32_t c)
{
    _Atomic uint32_t *tags = arena_tags(a);
    uint32_t n = 0;

    for (;;) {
        uint32_t next = cell_next(a, c);
        arena_push_locked(a, c);
        n++;
        if (next == 0)
            break;
        uint32_t t = tag_get(tags, next);
        if (t != SHM_TAG(SHM_TAG_BODY, 0) && t != SHM_TAG(SHM_TAG_CACHE, w))
            break;
        c = next;
    }
    return n;
}

/*
 * shm_arena_reap - see arena.h.  w must be dead and its partition locks
 * repaired: a chain w linked into a structure must be tagged LINKED by then,
 * and one it unlinked without reaching shm_arena_free() is the repairer's.
 *
 * A cell of a refill or spill w died in may point anywhere (into a cell
 * since reused), so a CACHE(w) cell's next word is never followed from the
 * cell itself: each is freed alone.  The walks start from the freeing chain
 * and from INFLIGHT(w) heads, and follow BODY and CACHE(w) cells: they reach
 * the cache list only when w died in alloc or free, with the list whole.
 */
void
shm_arena_reap(struct shm_seg *seg, int w)
{
    struct shm_arena *a = arena_of(seg);
    _Atomic uint32_t *tags = arena_tags(a);
    struct shm_slot *s = shm_slot(seg, w);
    uint32_t cache = SHM_TAG(SHM_TAG_CACHE, w);
    uint32_t inflight = SHM_TAG(SHM_TAG_INFLIGHT, w);
    uint32_t n = 0;

    if (shm_lock(seg, &a->lock, arena_rebuild, NULL) != 0)
        return;
    uint32_t f = atomic_load_explicit(&s->freeing, memory_order_relaxed);
    uint32_t ft = f != 0 ? tag_get(tags, f) : SHM_TAG_FREE;
    if (ft == inflight || ft == cache) /* claimed by w: w's to finish */
        n += arena_reap_chain_locked(a, w, f);
    for (uint32_t c = 1; c < a->bump; c++) {
        uint32_t t = tag_get(tags, c);
        if (t == inflight) {
            n += arena_reap_chain_locked(a, w, c);
        } else if (t == cache) {
            arena_push_locked(a, c);
            n++;
        }
    }
    atomic_store_explicit(
        &a->taken, atomic_load_explicit(&a->taken, memory_order_relaxed) - n,
        memory_order_relaxed);
    s->cache_head = 0;
    atomic_store_explicit(&s->cache_count, 0, memory_order_relaxed);
    atomic_store_explicit(&s->freeing, 0, memory_order_relaxed);
    shm_unlock(&a->lock);
}
