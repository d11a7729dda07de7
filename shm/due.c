/*
 * due.c - the due heap (due.h): a binary min-heap of (time, key) with a
 * position per key, so a key moves earlier in O(log n) and the master takes
 * the earliest in O(log n) each.
 *
 * Locking: due->lock, a robust leaf lock, guards the heap, n and pos[].
 * at[] is written under it and read racily by shm_due_at's fast path; it
 * holds time + 1, 0 meaning "not on the heap", so a zeroed region needs no
 * initialisation per key.  The fast path's load and the taker's store are
 * sequentially consistent: see due.h for the race they settle.  A dead
 * holder's heap is rebuilt by due_rebuild (every key handed out, at 0).
 * A schedule that cannot take the lock (the master's bounded wait: lock.h)
 * raises refill instead, and the next take rebuilds the heap as a repair
 * does before it takes anything: a key is never lost, only visited early.
 */
#include "shm/due.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

#include "shm/dir.h"
#include "shm/lock.h"
#include "shm/region.h"

/* One heap entry. */
struct due_ent {
    uint64_t at;
    uint32_t key;
    uint32_t pad;
};

/*
 * struct shm_due - the heap's header; the arrays follow, 64-byte aligned.
 *   off  size  field      written by          protected by
 *     0    40  lock       -                   robust (leaf lock)
 *    64     4  n          shm_due_at / take   lock
 *    68     4  keys       init                immutable
 *    72     8  heap_off   init                immutable: due_ent[keys]
 *    80     8  pos_off    init                immutable: uint32[keys], 1-based
 *    88     8  at_off     init                immutable: uint64[keys], time+1
 *    96     4  refill     a schedule that     atomic: set without the lock,
 *                         missed the lock;     cleared under it by a take
 *                         take
 */
struct shm_due {
    pthread_mutex_t lock;
    unsigned char pad0[64 - sizeof(pthread_mutex_t)];
    uint32_t n;
    uint32_t keys;
    uint64_t heap_off;
    uint64_t pos_off;
    uint64_t at_off;
    _Atomic uint32_t refill;
};
_Static_assert(sizeof(pthread_mutex_t) <= 64, "shm_due layout");
_Static_assert(offsetof(struct shm_due, n) == 64, "shm_due layout");
_Static_assert(offsetof(struct shm_due, at_off) == 88, "shm_due layout");
_Static_assert(offsetof(struct shm_due, refill) == 96, "shm_due layout");
_Static_assert(sizeof(struct due_ent) == 16, "due_ent layout");

#define DUE_ALIGN(x) (((x) + 63) & ~(size_t)63)

static struct shm_due *
due_of(struct shm_seg *seg)
{
    struct shm_dir *d = shm_dir_of(seg);

    return (struct shm_due *)((unsigned char *)d + d->due_off);
}

static struct due_ent *
due_heap(struct shm_due *u)
{
    return (struct due_ent *)((unsigned char *)u + u->heap_off);
}

static uint32_t *
due_pos(struct shm_due *u)
{
    return (uint32_t *)((unsigned char *)u + u->pos_off);
}

static _Atomic uint64_t *
due_at(struct shm_due *u)
{
    return (_Atomic uint64_t *)((unsigned char *)u + u->at_off);
}

/* shm_due_size - see due.h. */
size_t
shm_due_size(uint32_t keys)
{
    return DUE_ALIGN(sizeof(struct shm_due)) +
           DUE_ALIGN((size_t)keys * sizeof(struct due_ent)) +
           DUE_ALIGN((size_t)keys * sizeof(uint32_t)) +
           DUE_ALIGN((size_t)keys * sizeof(uint64_t));
}

/* shm_due_init - see due.h. */
int
shm_due_init(void *base, uint32_t keys)
{
    struct shm_due *u = base;

    u->keys = keys;
    u->n = 0;
    u->heap_off = DUE_ALIGN(sizeof(struct shm_due));
    u->pos_off = u->heap_off + DUE_ALIGN((size_t)keys * sizeof(struct due_ent));
    u->at_off = u->pos_off + DUE_ALIGN((size_t)keys * sizeof(uint32_t));
    return shm_lock_init(&u->lock);
}

/* Put entry e at heap slot i and record where it is (lock held). */
static void
due_place(struct shm_due *u, uint32_t i, struct due_ent e)
{
    due_heap(u)[i] = e;
    due_pos(u)[e.key] = i + 1;
}

/* Move the entry at slot i towards the root while it is earlier. */
static void
due_sift_up(struct shm_due *u, uint32_t i)
{
    struct due_ent *h = due_heap(u), e = h[i];

    while (i > 0 && h[(i - 1) / 2].at > e.at) {
        due_place(u, i, h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    due_place(u, i, e);
}

/* Move the entry at slot i towards the leaves while a child is earlier. */
static void
due_sift_down(struct shm_due *u, uint32_t i)
{
    struct due_ent *h = due_heap(u), e = h[i];

    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= u->n)
            break;
        if (c + 1 < u->n && h[c + 1].at < h[c].at)
            c++;
        if (h[c].at >= e.at)
            break;
        due_place(u, i, h[c]);
        i = c;
    }
    due_place(u, i, e);
}

/* Every key ever handed out on the heap at time 0 (a heap of equal times is
 * trivially ordered).  Keys from the bumps on were never used: their pos and
 * at are still zero.  Lock held. */
static void
due_fill_all(struct shm_seg *seg, struct shm_due *u)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t end[2] = {atomic_load(&d->q_bump), atomic_load(&d->p_bump)};

    u->n = 0;
    for (int part = 0; part < 2; part++)
        for (uint32_t i = 0; i < end[part]; i++) {
            uint32_t k = part ? d->max_queues + i : i;
            due_place(u, u->n++, (struct due_ent){0, k, 0});
            atomic_store(&due_at(u)[k], 1);
        }
}

/* Lock repair: the dead holder may have left the heap half-sifted. */
static void
due_rebuild(struct shm_seg *seg, void *arg)
{
    due_fill_all(seg, arg);
}

static int
due_lock(struct shm_seg *seg, struct shm_due *u)
{
    return shm_lock(seg, &u->lock, due_rebuild, u);
}

/* Schedule key no later than at. */
static void
due_schedule(struct shm_seg *seg, uint32_t key, uint64_t at)
{
    struct shm_due *u = due_of(seg);
    uint64_t cur = atomic_load(&due_at(u)[key]);

    if (at == UINT64_MAX || (cur != 0 && cur - 1 <= at))
        return;
    if (due_lock(seg, u) != 0) {
        atomic_store(&u->refill, 1); /* every key, at the next take */
        return;
    }
    /* due lock: heap, pos, at. */
    uint32_t i = due_pos(u)[key];
    if (i == 0) {
        due_place(u, u->n, (struct due_ent){at, key, 0});
        due_sift_up(u, u->n++);
    } else if (at < due_heap(u)[i - 1].at) {
        due_heap(u)[i - 1].at = at;
        due_sift_up(u, i - 1);
    }
    atomic_store(&due_at(u)[key], due_heap(u)[due_pos(u)[key] - 1].at + 1);
    shm_unlock(&u->lock);
}

/* shm_due_queue - see due.h. */
void
shm_due_queue(struct shm_seg *seg, uint32_t idx, uint64_t at)
{
    due_schedule(seg, idx, at);
}

/* shm_due_part - see due.h. */
void
shm_due_part(struct shm_seg *seg, uint32_t idx, uint64_t at)
{
    due_schedule(seg, shm_dir_of(seg)->max_queues + idx, at);
}

/* shm_due_take - see due.h. */
uint32_t
shm_due_take(struct shm_seg *seg, uint64_t now, uint32_t *keys, uint32_t max)
{
    struct shm_due *u = due_of(seg);
    uint32_t k = 0;

    if (due_lock(seg, u) != 0)
        return 0;
    /* due lock: heap, pos, at; a schedule missed, every key first. */
    if (atomic_exchange(&u->refill, 0) != 0)
        due_fill_all(seg, u);
    while (k < max && u->n > 0 && due_heap(u)[0].at <= now) {
        uint32_t key = due_heap(u)[0].key;
        due_pos(u)[key] = 0;
        atomic_store(&due_at(u)[key], 0);
        if (--u->n > 0) {
            due_place(u, 0, due_heap(u)[u->n]);
            due_sift_down(u, 0);
        }
        keys[k++] = key;
    }
    shm_unlock(&u->lock);
    return k;
}

/* shm_due_all - see due.h. */
void
shm_due_all(struct shm_seg *seg)
{
    struct shm_due *u = due_of(seg);

    if (due_lock(seg, u) != 0) {
        atomic_store(&u->refill, 1); /* done by the next take */
        return;
    }
    due_fill_all(seg, u);
    shm_unlock(&u->lock);
}

/* shm_due_is_part - see due.h. */
int
shm_due_is_part(struct shm_seg *seg, uint32_t key, uint32_t *idx)
{
    uint32_t mq = shm_dir_of(seg)->max_queues;

    *idx = key < mq ? key : key - mq;
    return key >= mq;
}

/* shm_due_when - see due.h. */
uint64_t
shm_due_when(struct shm_seg *seg, uint32_t key)
{
    struct shm_due *u = due_of(seg);
    uint64_t at = key < u->keys ? atomic_load(&due_at(u)[key]) : 0;

    return at != 0 ? at - 1 : UINT64_MAX;
}

/* The first broken rule of the heap (lock held), written into why.  Keys
 * from the bumps on were never handed out: they are not read, so their
 * untouched pages stay unallocated. */
static int
due_broken(struct shm_seg *seg, struct shm_due *u, char *why, size_t len)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t qb = atomic_load(&d->q_bump), pb = atomic_load(&d->p_bump);
    struct due_ent *h = due_heap(u);
    uint32_t on = 0;

    if (u->n > u->keys)
        return snprintf(why, len, "the due heap holds %u entries for %u keys",
                        u->n, u->keys);
    for (uint32_t i = 0; i < u->n; i++) {
        uint32_t k = h[i].key;
        if (i > 0 && h[(i - 1) / 2].at > h[i].at)
            return snprintf(why, len,
                            "due heap slot %u is earlier than its parent", i);
        if (k >= u->keys || due_pos(u)[k] != i + 1)
            return snprintf(why, len,
                            "due heap slot %u holds key %u whose position "
                            "does not name it",
                            i, k);
        if (atomic_load(&due_at(u)[k]) != h[i].at + 1)
            return snprintf(
                why, len, "due key %u's time differs from its heap entry's", k);
    }
    for (int part = 0; part < 2; part++)
        for (uint32_t i = 0; i < (part ? pb : qb); i++) {
            uint32_t k = part ? d->max_queues + i : i;
            if (due_pos(u)[k] != 0)
                on++;
            else if (atomic_load(&due_at(u)[k]) != 0)
                return snprintf(why, len,
                                "due key %u is off the heap but has a time", k);
        }
    if (on != u->n)
        return snprintf(why, len,
                        "%u due keys have a heap position, the heap has %u", on,
                        u->n);
    return 0;
}

/* shm_due_check - see due.h. */
int
shm_due_check(struct shm_seg *seg, char *why, size_t len)
{
    struct shm_due *u = due_of(seg);
    int bad;

    if (due_lock(seg, u) != 0)
        return snprintf(why, len, "the due heap's lock is unusable"), -EUCLEAN;
    bad = due_broken(seg, u, why, len) > 0;
    shm_unlock(&u->lock);
    return bad ? -EUCLEAN : 0;
}
