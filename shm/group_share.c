/*
 * group_share.c - the groups a queue knows, walked for the peers and
 * learned from them (group_share.h).  Both work on the queue registry
 * under the queue lock, as a pop registering its group does.
 */
#include "shm/group_share.h"

#include <errno.h>
#include <stdatomic.h>

#include "shm/arena.h"
#include "shm/broker_int.h"
#include "shm/dir.h"
#include "shm/lock.h"
#include "shm/ring.h"
#include "shm/stats.h"

/* Move *at up to t (never back): pops store the time without a lock. */
static void
later(_Atomic uint64_t *at, uint64_t t)
{
    uint64_t was = atomic_load(at);

    while (was < t && !atomic_compare_exchange_weak(at, &was, t))
        ;
}

/* Report queue qr's groups to fn (its lock held by the caller). */
static uint32_t
groups_report(struct shm_seg *seg, struct shm_queue *q, struct shm_name queue,
              shm_group_fn *fn, void *arg)
{
    char gn[SHM_NAME_MAX];
    uint32_t n = 0;

    for (uint32_t e = q->groups; e != 0 && n < SHM_RING_GROUPS_MAX;
         e = shm_ring_grp(seg, e)->next, n++) {
        struct shm_grp *g = shm_ring_grp(seg, e);
        uint32_t len = g->name_len <= SHM_NAME_MAX ? g->name_len : 0;
        if (len != 0)
            shm_arena_read(seg, g->name_ref, 0, gn, len);
        fn(arg, queue, (struct shm_name){gn, len}, (enum shm_from)g->from,
           atomic_load(&g->last_active));
    }
    return n;
}

/* shm_groups_each - see group_share.h. */
uint32_t
shm_groups_each(struct shm_seg *seg, uint32_t *next, uint32_t budget,
                shm_group_fn *fn, void *arg)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t bump = atomic_load(&d->q_bump), n = 0, i = *next;
    char qn[SHM_NAME_MAX];

    for (uint32_t k = 0; k < budget && i < bump; k++, i++) {
        struct shm_queue *q = shm_dir_queue(seg, i);
        struct shm_ref qr = {i, q->gen};
        if (!atomic_load(&q->alive) || atomic_load(&q->ngroups) == 0)
            continue;
        if (shm_queue_lock(seg, SHM_STATS_MASTER, qr) != 0)
            continue;
        /* queue lock: the registry, and the name (freed with the record) */
        uint32_t len = q->name_len;
        if (len != 0 && len <= SHM_NAME_MAX) {
            shm_arena_read(seg, q->name_ref, 0, qn, len);
            n += groups_report(seg, q, (struct shm_name){qn, len}, fn, arg);
        }
        shm_unlock(&q->lock);
    }
    *next = i < bump ? i : 0;
    return n;
}

/* shm_group_known - see group_share.h. */
int
shm_group_known(struct shm_seg *seg, int w, struct shm_name queue,
                struct shm_name group)
{
    uint64_t h = shm_group_hash(group);
    struct shm_ref qr;
    int known = 0;

    if (shm_dir_find_queue(seg, w, queue, 0, 0, &qr) != 0 ||
        shm_queue_lock(seg, w, qr) != 0)
        return 0;
    /* queue lock: the registry. */
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint32_t n = 0;
    for (uint32_t e = q->groups; e != 0 && !known && n < SHM_RING_GROUPS_MAX;
         e = shm_ring_grp(seg, e)->next, n++) {
        const struct shm_grp *g = shm_ring_grp(seg, e);
        known = g->name_hash == h && g->name_len == group.len &&
                (group.len == 0 ||
                 shm_arena_equal(seg, g->name_ref, group.ptr, group.len));
    }
    shm_unlock(&q->lock);
    return known;
}

/* shm_group_learn - see group_share.h. */
int
shm_group_learn(struct shm_seg *seg, int w, struct shm_name queue,
                struct shm_name group, enum shm_from from, uint64_t last_active,
                uint64_t now, int create)
{
    uint64_t h = shm_group_hash(group);
    struct shm_ref qr;
    uint32_t e;
    int rc = -EAGAIN;

    if (last_active > now)
        last_active = now;
    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        if ((rc = shm_dir_find_queue(seg, w, queue, create, now, &qr)) != 0)
            return rc;
        if ((rc = shm_queue_lock(seg, w, qr)) == -ESTALE)
            continue;
        if (rc != 0)
            return rc;
        /* queue lock: the registry. */
        struct shm_queue *q = shm_dir_queue(seg, qr.idx);
        rc = shm_registry_ensure(seg, w, q, group, h, from, last_active, &e);
        if (rc == 0) {
            later(&shm_ring_grp(seg, e)->last_active, last_active);
            later(&q->last_active, last_active);
        }
        shm_unlock(&q->lock);
        return rc;
    }
    return rc;
}
