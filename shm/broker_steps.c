/*
 * broker_steps.c - the partition-level steps the broker's operations share
 * (broker_int.h): record checks and handles, a queue's partition list, the
 * partition lock and the loop that takes it partition by partition,
 * wake-ups, due-heap scheduling, the node cap's check.
 *
 * Locking: the dir lock briefly to list partitions; one partition lock at
 * a time, as stated per call.  Wake-ups are posted under the partition
 * lock and kicked after it.  No syscalls or logging under a lock, and no
 * malloc under a partition lock (a long partition list is malloc'd under
 * the caller's queue lock, if it holds one).
 * Errors: 0 or -errno.
 */
#include <errno.h>
#include <stdlib.h>

#include "shm/arena.h"
#include "shm/broker_int.h"
#include "shm/dir.h"
#include "shm/due.h"
#include "shm/presence.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/wake.h"

#define DUE_DELAYED_LOOK                                                       \
    8 /* messages shm_part_due_locked reads past a delayed head */

#define RELAXED memory_order_relaxed

/* ---- records and partition lists --------------------------------------- */

/* Is partition record r still the one looked up? */
static int
part_same(struct shm_seg *seg, struct shm_ref r)
{
    struct shm_part *p = shm_dir_part(seg, r.idx);

    return atomic_load(&p->alive) && p->gen == r.gen;
}

/* shm_part_list_get - see broker_int.h. */
int
shm_part_list_get(struct shm_seg *seg, struct shm_ref qr,
                  struct shm_part_list *l)
{
    int64_t n = shm_dir_queue_parts(seg, qr, l->stack, SHM_PART_STACK);

    l->v = l->stack;
    l->n = 0;
    while (n > SHM_PART_STACK) {
        struct shm_ref *h = malloc(sizeof(*h) * ((size_t)n + 8));
        if (h == NULL) {
            n = SHM_PART_STACK;
            break;
        }
        int64_t m = shm_dir_queue_parts(seg, qr, h, (uint32_t)n + 8);
        if (m >= 0 && m <= n + 8) {
            l->v = h;
            n = m;
            break;
        }
        free(h);
        n = m;
    }
    if (n < 0)
        return (int)n;
    l->n = (uint32_t)n;
    return 0;
}

/* shm_part_list_free - see broker_int.h. */
void
shm_part_list_free(struct shm_part_list *l)
{
    if (l->v != l->stack)
        free(l->v);
    l->v = l->stack;
    l->n = 0;
}

/* shm_queue_held - see broker_int.h. */
void
shm_queue_held(struct shm_seg *seg, struct shm_ref qr, uint64_t *len,
               uint64_t *bytes, uint64_t *leased, uint64_t *waiting)
{
    struct shm_dir *d = shm_dir_of(seg);
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint32_t i = q->parts, steps = 0;

    *len = *bytes = 0;
    if (leased)
        *leased = 0;
    if (waiting)
        *waiting = 0;
    for (; i != 0 && i <= d->max_parts && steps++ < d->max_parts;) {
        struct shm_part *p = shm_dir_part(seg, i - 1);
        if (atomic_load(&p->alive) && p->queue == qr.idx &&
            p->queue_gen == qr.gen) {
            *len += atomic_load_explicit(&p->count, RELAXED);
            *bytes += atomic_load_explicit(&p->cost, RELAXED);
            if (leased)
                *leased += atomic_load_explicit(&p->leased, RELAXED);
            if (waiting)
                *waiting += shm_dir_parked_sum(seg, 1, i - 1);
        }
        i = p->next_part;
    }
}

/* ---- the partition lock ------------------------------------------------ */

/* shm_part_lock - see broker_int.h. */
int
shm_part_lock(struct shm_seg *seg, int w, struct shm_ref pr)
{
    struct shm_part *p = shm_dir_part(seg, pr.idx);
    int rc = shm_ring_lock(seg, w, p);

    if (rc != 0)
        return rc;
    if (!part_same(seg, pr)) {
        shm_ring_unlock(p);
        return -ESTALE;
    }
    return 0;
}

/* shm_part_lock_ctx - see broker_int.h. */
int
shm_part_lock_ctx(struct shm_seg *seg, int w, struct shm_ref pr,
                  struct shm_queue *q, uint64_t now, struct shm_ring_ctx *c)
{
    int rc = shm_part_lock(seg, w, pr);

    if (rc != 0)
        return rc;
    *c = (struct shm_ring_ctx){
        .seg = seg, .w = w, .p = shm_dir_part(seg, pr.idx), .q = q, .now = now};
    return 0;
}

/* shm_part_list_each_locked - see broker_int.h. */
uint64_t
shm_part_list_each_locked(struct shm_seg *seg, int w,
                          const struct shm_part_list *l, struct shm_queue *q,
                          uint64_t now,
                          uint64_t (*fn)(struct shm_ring_ctx *c, void *arg),
                          void *arg)
{
    struct shm_ring_ctx c;
    uint64_t sum = 0;

    for (uint32_t i = 0; i < l->n; i++) {
        if (shm_part_lock_ctx(seg, w, l->v[i], q, now, &c) != 0)
            continue;
        sum += fn(&c, arg);
        shm_ring_unlock(c.p);
    }
    return sum;
}

/* ---- wake-ups, due times, the node cap --------------------------------- */

/* shm_waiters_post - see broker_int.h. */
void
shm_waiters_post(struct shm_seg *seg, uint64_t mask, uint64_t handle,
                 uint64_t *kick)
{
    for (; mask != 0; mask &= mask - 1) {
        int w = __builtin_ctzll(mask);
        if (shm_wake_post(seg, w, handle))
            *kick |= 1ULL << w;
    }
}

/* shm_waiters_post_locked - see broker_int.h. */
void
shm_waiters_post_locked(struct shm_seg *seg, struct shm_ref qr,
                        struct shm_ref pr, uint64_t *kick)
{
    struct shm_part *p = shm_dir_part(seg, pr.idx);
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t pm = atomic_exchange(&p->waiters, 0);
    uint64_t qm =
        atomic_load(&q->waiters) ? atomic_exchange(&q->waiters, 0) : 0;

    shm_waiters_post(seg, pm, shm_handle_of(1, pr.idx, pr.gen), kick);
    shm_waiters_post(seg, qm, shm_handle_of(0, qr.idx, qr.gen), kick);
}

/* shm_waiters_kick - see broker_int.h. */
void
shm_waiters_kick(struct shm_seg *seg, uint64_t kick)
{
    for (; kick != 0; kick &= kick - 1)
        shm_wake_kick(seg, __builtin_ctzll(kick));
}

/* shm_part_due_locked - see broker_int.h.  Cheap when nothing moved
 * earlier (one racy read in shm_due_part). */
void
shm_part_due_locked(struct shm_seg *seg, uint32_t idx, const struct shm_part *p,
                    const struct shm_queue *q)
{
    uint64_t at = atomic_load_explicit(&p->due, RELAXED);
    uint64_t ttl = (uint64_t)q->opts.ttl_s * 1000;

    if (ttl != 0 && atomic_load_explicit(&p->count, RELAXED) > 0) {
        uint64_t t = atomic_load_explicit(&p->oldest_ms, RELAXED) + ttl;
        at = t < at ? t : at;
    }
    /* A head with a ttl of its own (SPEC §13) is due then too: the upkeep
     * drops it, or sends its dead letter (deadLetterExpired). */
    if (p->head != 0 && shm_msg_ttl(shm_ring_msg(seg, p->head)) != 0) {
        const struct shm_msg *m = shm_ring_msg(seg, p->head);
        uint64_t t = shm_msg_at(m) + (uint64_t)shm_msg_ttl(m) * 1000;
        at = t < at ? t : at;
    }
    /* Behind a head pushed with a delay, the first message pushed without
     * one may pass the queue's ttl before the head does
     * (shm_ring_ttl_locked drops it there): looked for a few messages deep,
     * else it waits for the head's time. */
    if (ttl != 0 && p->head != 0 &&
        (shm_ring_msg(seg, p->head)->enq_ms & SHM_MSG_DELAYED)) {
        uint32_t r = shm_ring_msg(seg, p->head)->next;
        for (int i = 0; r != 0 && i < DUE_DELAYED_LOOK; i++) {
            const struct shm_msg *m = shm_ring_msg(seg, r);
            if (!(m->enq_ms & SHM_MSG_DELAYED)) {
                uint64_t t = shm_msg_at(m) + ttl;
                at = t < at ? t : at;
                break;
            }
            r = m->next;
        }
    }
    shm_due_part(seg, idx, at);
}

/* shm_push_cap - see broker.h.  Pushes stop 1/32 of the node cap short
 * of it, so consumers of a full node can still lease (and then ack) what
 * it holds. */
uint64_t
shm_push_cap(struct shm_seg *seg)
{
    uint64_t cap = shm_params_of(seg)->max_bytes;

    return cap - cap / 32;
}

/* shm_cap_room - see broker_int.h. */
int
shm_cap_room(struct shm_seg *seg, uint64_t cost)
{
    return shm_arena_used_bytes(seg) + shm_presence_bytes(seg->presence) +
               cost <=
           shm_push_cap(seg);
}

/* shm_chains_free - see broker_int.h. */
void
shm_chains_free(struct shm_seg *seg, int w, uint32_t first)
{
    while (first != 0) {
        uint32_t next = shm_ring_msg(seg, first)->next;
        shm_arena_free(seg, w, first);
        first = next;
    }
}
