/*
 * dd_index.c - the dedupe window's hash index: insert at a bucket's head,
 * remove by a walk of one bucket, look up, rebuild from the list, grow and
 * free.  See dd_index.h; the list is the truth, the index a rebuildable
 * view of it.  No syscalls, logging or malloc (partition lock held).
 */
#include "shm/dd_index.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "shm/layout.h"
#include "shm/region.h"

/* The bucket slot of hash. */
static uint32_t *
ddx_slot(struct shm_ddx *x, uint64_t hash)
{
    return &x->b[hash & (x->nb - 1)];
}

/* shm_ddx_insert - see dd_index.h. */
void
shm_ddx_insert(struct shm_seg *seg, struct shm_ddx *x, uint32_t d)
{
    struct shm_dd *e = shm_ring_dd(seg, d);
    uint32_t *b = ddx_slot(x, e->hash);

    e->bnext = *b;
    *b = d;
}

/* shm_ddx_remove - see dd_index.h.  Bounded by the keys a bucket can hold
 * (a stale index after a crash is rebuilt by the repair before use, but a
 * walk must never spin). */
void
shm_ddx_remove(struct shm_seg *seg, struct shm_ddx *x, uint32_t d)
{
    uint32_t *pp = ddx_slot(x, shm_ring_dd(seg, d)->hash);

    while (*pp != 0 && *pp != d)
        pp = &shm_ring_dd(seg, *pp)->bnext;
    if (*pp == d)
        *pp = shm_ring_dd(seg, d)->bnext;
}

/* shm_ddx_find - see dd_index.h: a chain runs newest first, so the last
 * match is the oldest, as the list's walk would find it. */
const struct shm_dd *
shm_ddx_find(struct shm_seg *seg, const struct shm_ddx *x, uint64_t hash,
             uint64_t now, uint64_t window_ms)
{
    const struct shm_dd *found = NULL;

    for (uint32_t d = x->b[hash & (x->nb - 1)]; d != 0;) {
        const struct shm_dd *e = shm_ring_dd(seg, d);
        if (e->hash == hash && e->at_ms + window_ms > now)
            found = e;
        d = e->bnext;
    }
    return found;
}

/* shm_ddx_fill - see dd_index.h. */
int
shm_ddx_fill(struct shm_seg *seg, struct shm_ddx *x, uint32_t head,
             uint64_t max)
{
    uint64_t n = 0;

    memset(x->b, 0, (size_t)x->nb * sizeof(x->b[0]));
    for (uint32_t d = head; d != 0; d = shm_ring_dd(seg, d)->next) {
        if (++n > max)
            return -EUCLEAN;
        shm_ddx_insert(seg, x, d);
    }
    return 0;
}

/* Buckets for count keys: a power of two at or above it (a growth at twice
 * the buckets then quadruples them: amortised O(1) a key). */
static uint32_t
ddx_buckets_for(uint32_t count)
{
    uint32_t nb = SHM_DDX_MIN_BUCKETS;

    while (nb < count && nb < (1u << 30))
        nb <<= 1;
    return nb;
}

/* shm_ddx_build - see dd_index.h.  The new run is filled while INFLIGHT
 * (a builder killed then leaves it to the reap, and the old index to the
 * repair's rebuild: the fill rewrote the keys' bnext words), then named:
 * the old one first goes into p->intent, so whichever of the two p names
 * when a repair comes is rebuilt and the other freed or reaped. */
int
shm_ddx_build(struct shm_seg *seg, int w, struct shm_part *p)
{
    uint32_t nb = ddx_buckets_for(p->dd_count), r, old = p->dd_index;
    int rc;

    if (w < 0)
        return -EPERM;
    if ((rc = shm_arena_alloc(seg, w, shm_ddx_cells(nb), &r)) != 0)
        return rc;
    struct shm_ddx *x = shm_cell(seg, r);
    x->nb = nb;
    (void)shm_ddx_fill(seg, x, p->dd_head, UINT64_MAX); /* list sound */
    if (old != 0)
        p->intent = old;
    p->dd_index = r;
    shm_arena_link(seg, r);
    if (old != 0) {
        shm_arena_free(seg, w, old);
        p->intent = 0;
    }
    return 0;
}

/* shm_ddx_drop - see dd_index.h. */
void
shm_ddx_drop(struct shm_seg *seg, int w, struct shm_part *p)
{
    uint32_t x = p->dd_index;

    if (x == 0 || w < 0)
        return;
    p->intent = x;
    p->dd_index = 0;
    shm_arena_free(seg, w, x);
    p->intent = 0;
}

/* shm_ddx_sound - see dd_index.h. */
int
shm_ddx_sound(struct shm_seg *seg, uint32_t ref)
{
    struct shm_arena *a = shm_region(seg, SHM_REGION_ARENA);
    const _Atomic uint32_t *tags =
        (const _Atomic uint32_t *)((unsigned char *)a + a->tags_off);

    if (ref == 0 || ref > a->cap)
        return 0;
    uint32_t t = atomic_load(&tags[ref]), len = SHM_TAG_LEN(t);
    if ((SHM_TAG_STATE(t) != SHM_TAG_LINKED &&
         SHM_TAG_STATE(t) != SHM_TAG_INFLIGHT) ||
        len == 0 || len > a->cap - ref + 1)
        return 0;
    const struct shm_ddx *x = shm_cell(seg, ref);
    return x->chain == len && x->nb != 0 && (x->nb & (x->nb - 1)) == 0 &&
           shm_ddx_cells(x->nb) <= len;
}
