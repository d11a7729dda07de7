/*
 * queue_lock.c - a queue's own lock and what it guards (broker_int.h): the
 * group registry (find, add, forget, with the repair a dead holder needs),
 * groups made known to a queue and its partitions, and the freeing of the
 * queue itself.
 *
 * Locking: the queue lock, then one partition lock at a time; or the queue
 * lock, then the dir lock (shm_dir_free_queue).  A registry entry being
 * forgotten is named in q->intent while it is unlinked and freed, so the
 * repair after a holder killed in between finishes the free.  No syscalls
 * or logging under a lock; no malloc under a partition lock.  Errors: 0 or
 * -errno.
 */
#include <errno.h>

#include "shm/arena.h"
#include "shm/broker_int.h"
#include "shm/dir.h"
#include "shm/lock.h"
#include "shm/ring.h"

#define RELAXED memory_order_relaxed

/* ---- the queue lock ---------------------------------------------------- */

struct queue_repairer {
    struct shm_queue *q;
    int w;
};

/* Is cell ref on q's registry list? */
static int
registry_has(struct shm_seg *seg, struct shm_queue *q, uint32_t ref)
{
    for (uint32_t e = q->groups; e != 0; e = shm_ring_grp(seg, e)->next)
        if (e == ref)
            return 1;
    return 0;
}

/* Free registry entry e's name and cell (unlinked already). */
static void
registry_free(struct shm_seg *seg, int w, uint32_t e)
{
    struct shm_grp *g = shm_ring_grp(seg, e);

    if (g->name_ref != 0 && shm_ring_tag_linked(seg, g->name_ref))
        shm_arena_free(seg, w, g->name_ref);
    g->name_ref = 0;
    shm_arena_free(seg, w, e);
}

/* The queue lock's repair: re-tag and recount the registry, finish a
 * forgotten group's free. */
static void
queue_repair(struct shm_seg *seg, void *arg)
{
    struct queue_repairer *r = arg;
    struct shm_queue *q = r->q;
    uint32_t n = 0;

    for (uint32_t e = q->groups; e != 0; e = shm_ring_grp(seg, e)->next) {
        shm_arena_link(seg, e);
        if (shm_ring_grp(seg, e)->name_ref != 0)
            shm_arena_link(seg, shm_ring_grp(seg, e)->name_ref);
        n++;
    }
    if (q->intent != 0 && !registry_has(seg, q, q->intent) &&
        shm_ring_tag_linked(seg, q->intent)) {
        if (r->w >= 0) {
            registry_free(seg, r->w, q->intent);
            q->intent = 0;
        }
    } else
        q->intent = 0;
    atomic_store(&q->ngroups, n);
}

/* shm_queue_lock_record - see broker_int.h. */
int
shm_queue_lock_record(struct shm_seg *seg, int w, struct shm_queue *q)
{
    struct queue_repairer r = {q, w};

    return shm_lock(seg, &q->lock, queue_repair, &r);
}

/* shm_queue_lock - see broker_int.h. */
int
shm_queue_lock(struct shm_seg *seg, int w, struct shm_ref qr)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    int rc = shm_queue_lock_record(seg, w, q);

    if (rc != 0)
        return rc;
    /* A repair by a locker without a slot left an entry to free. */
    if (w >= 0 && q->intent != 0) {
        registry_free(seg, w, q->intent);
        q->intent = 0;
    }
    if (!shm_queue_same(seg, qr)) {
        shm_unlock(&q->lock);
        return -ESTALE;
    }
    return 0;
}

/* ---- the group registry ------------------------------------------------ */

/* Find group name in q's registry (queue lock held); 0 if none. */
static uint32_t
registry_find(struct shm_seg *seg, struct shm_queue *q, struct shm_name name,
              uint64_t h)
{
    for (uint32_t e = q->groups; e != 0; e = shm_ring_grp(seg, e)->next) {
        struct shm_grp *g = shm_ring_grp(seg, e);
        if (g->name_hash == h && g->name_len == name.len &&
            (name.len == 0 ||
             shm_arena_equal(seg, g->name_ref, name.ptr, name.len)))
            return e;
    }
    return 0;
}

/* Add group name to q's registry (queue lock held). */
static int
registry_add(struct shm_seg *seg, int w, struct shm_queue *q,
             struct shm_name name, uint64_t h, enum shm_from from, uint64_t now,
             uint32_t *out)
{
    uint32_t e, nref = 0;
    int rc;

    if (atomic_load(&q->ngroups) >= SHM_RING_GROUPS_MAX)
        return -EOVERFLOW;
    if (name.len != 0 &&
        (rc = shm_arena_alloc(seg, w, shm_cells_for(name.len), &nref)) != 0)
        return rc;
    if ((rc = shm_arena_alloc(seg, w, 1, &e)) != 0) {
        if (nref != 0)
            shm_arena_free(seg, w, nref);
        return rc;
    }
    if (nref != 0)
        shm_arena_write(seg, nref, 0, name.ptr, name.len);
    struct shm_grp *g = shm_ring_grp(seg, e);
    g->name_hash = h;
    g->name_ref = nref;
    g->name_len = (uint32_t)name.len;
    atomic_store(&g->last_active, now);
    g->start_seq = atomic_load(&shm_dir_of(seg)->next_seq);
    g->from = from;
    g->next = q->groups;
    q->groups = e; /* publishes */
    shm_arena_link(seg, e);
    if (nref != 0)
        shm_arena_link(seg, nref);
    atomic_fetch_add(&q->ngroups, 1);
    *out = e;
    return 0;
}

/* shm_registry_ensure - see broker_int.h. */
int
shm_registry_ensure(struct shm_seg *seg, int w, struct shm_queue *q,
                    struct shm_name name, uint64_t h, enum shm_from from,
                    uint64_t now, uint32_t *e)
{
    *e = registry_find(seg, q, name, h);
    return *e != 0 ? 0 : registry_add(seg, w, q, name, h, from, now, e);
}

/* shm_registry_forget - see broker_int.h. */
void
shm_registry_forget(struct shm_seg *seg, int w, struct shm_queue *q,
                    uint32_t *link)
{
    uint32_t e = *link;

    q->intent = e;
    *link = shm_ring_grp(seg, e)->next;
    registry_free(seg, w, e);
    q->intent = 0;
    atomic_fetch_sub(&q->ngroups, 1);
}

/* shm_group_register - see broker_int.h.  A pop that found no partition
 * to read registers its group all the same, so the messages pushed next
 * wait for it (and from=new starts at them). */
int
shm_group_register(struct shm_seg *seg, int w, struct shm_ref qr,
                   struct shm_name name, uint64_t h, enum shm_from from,
                   uint64_t now)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint32_t e;
    int rc;

    if ((rc = shm_queue_lock(seg, w, qr)) != 0)
        return rc;
    /* queue lock: the registry. */
    if ((rc = shm_registry_ensure(seg, w, q, name, h, from, now, &e)) == 0)
        atomic_store_explicit(&shm_ring_grp(seg, e)->last_active, now, RELAXED);
    shm_unlock(&q->lock);
    return rc;
}

/* shm_group_ensure - see broker_int.h. */
int
shm_group_ensure(struct shm_seg *seg, int w, struct shm_ref qr,
                 struct shm_ref pr, struct shm_name name, uint64_t h,
                 enum shm_from from, uint64_t now)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_ring_ctx c;
    uint32_t e;
    int rc;

    /* queue lock: the registry; inside it one partition lock. */
    if ((rc = shm_queue_lock(seg, w, qr)) != 0)
        return rc;
    if ((rc = shm_registry_ensure(seg, w, q, name, h, from, now, &e)) != 0)
        goto out;
    if ((rc = shm_part_lock_ctx(seg, w, pr, q, now, &c)) != 0)
        goto out;
    if (shm_ring_gs_find_locked(&c, name, h) == 0)
        rc = shm_ring_gs_add_locked(&c, e);
    shm_ring_unlock(c.p);
out:
    shm_unlock(&q->lock);
    return rc;
}

/* ---- freeing a queue --------------------------------------------------- */

/* Free the partitions of qr listed in l (only idle, empty ones when
 * idle_ms != 0), adding the messages dropped to *k and the workers to wake
 * to *kick.  Queue lock held.  Returns whether every one went. */
static int
free_parts(struct shm_seg *seg, int w, struct shm_ref qr,
           const struct shm_part_list *l, uint64_t now, uint64_t idle_ms,
           uint64_t *k, uint64_t *kick)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_ring_ctx c;

    for (uint32_t i = 0; i < l->n; i++) {
        int rc = shm_part_lock_ctx(seg, w, l->v[i], q, now, &c);
        if (rc == -ESTALE) { /* marked dead by a killed deleter */
            shm_dir_free_part(seg, w, l->v[i].idx);
            continue;
        }
        if (rc != 0)
            return 0; /* not taken (lock.h): not every one went */
        /* partition lock: empty it and mark it dead. */
        if (idle_ms != 0 &&
            (c.p->head != 0 || atomic_load(&c.p->waiters) != 0 ||
             c.p->last_active + idle_ms > now)) {
            shm_ring_unlock(c.p);
            return 0;
        }
        *k += shm_ring_clear_locked(&c);
        shm_waiters_post_locked(seg, qr, l->v[i], kick);
        atomic_store(&c.p->alive, 0);
        c.p->gen++;
        shm_ring_unlock(c.p);
        shm_dir_free_part(seg, w, l->v[i].idx);
    }
    return 1;
}

/* shm_queue_free_locked - see broker_int.h. */
uint64_t
shm_queue_free_locked(struct shm_seg *seg, int w, struct shm_ref qr,
                      uint64_t now, uint64_t idle_ms, int *freed)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t k = 0, kick = 0;

    *freed = 0;
    /* queue lock: an idle collection looks again at what a pop changes
     * without it.  A pop that parks raises its waiter bit, then takes this
     * lock to see the queue is still there (pop_any in broker.c): either
     * it is seen here, or the record is gone when the pop gets the lock. */
    if (idle_ms != 0 && (atomic_load(&q->waiters) != 0 ||
                         atomic_load(&q->last_active) + idle_ms > now)) {
        shm_unlock(&q->lock);
        return 0;
    }
    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        struct shm_part_list l;
        if (shm_part_list_get(seg, qr, &l) != 0)
            break;
        int all = free_parts(seg, w, qr, &l, now, idle_ms, &k, &kick);
        shm_part_list_free(&l);
        if (!all)
            break;
        while (q->groups != 0)
            shm_registry_forget(seg, w, q, &q->groups);
        shm_waiters_post(seg, atomic_exchange(&q->waiters, 0),
                         shm_handle_of(0, qr.idx, qr.gen), &kick);
        if (shm_dir_free_queue(seg, w, qr.idx) == 0) {
            *freed = 1;
            break;
        }
    }
    shm_unlock(&q->lock);
    shm_waiters_kick(seg, kick);
    return k;
}
