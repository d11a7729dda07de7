/*
 * maintain.c - the master's upkeep (maintain.h): what the due heap says is
 * due (lease expiry and ttl of a partition, idle groups and idle collection
 * of a queue), the relief of a queue table past 7/8 full, and the reaping
 * of a dead worker's slot; composed from dir.c, ring.c, due.c and the
 * shared steps of broker_int.h.
 *
 * Locking: one partition lock at a time; a queue's lock to forget groups
 * (queue lock -> one partition lock at a time) and to collect the queue
 * (queue lock -> one partition lock at a time, then the dir lock, in
 * shm_queue_free_locked); the reap takes and drops every lock in turn.
 * Always as SHM_STATS_MASTER.  Wake-ups are posted under the partition
 * lock and kicked after it.  Logging only after every lock is released.
 *
 * The master's waits are bounded (lock.h): a worker stopped or spinning
 * with a lock held must not stop the master, whose watchdog is what kills
 * it.  A visit that meets a lock it cannot take leaves that record as it
 * was, or as a later visit finishes it, and puts the record back on the
 * due heap MAINTAIN_RETRY_MS on; a reap that cannot take every lock says
 * so, and the master reaps again before it reuses the slot.
 * Errors: 0 or -errno.
 */
#include "shm/maintain.h"

#include <errno.h>
#include <stdint.h>

#include "shm/arena.h"
#include "shm/broker_int.h"
#include "shm/dead.h"
#include "shm/dir.h"
#include "shm/due.h"
#include "shm/lock.h"
#include "shm/log.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/stats.h"
#include "shm/tail.h"
#include "shm/wake.h"

#define MAINTAIN_BUDGET   16384 /* records one shm_maintain call visits */
#define RELIEF_IDLE_MS    1000  /* idle, for a queue collected under pressure */
#define RELIEF_PAUSE_MS   1000  /* no relief this long after a pass in vain */
#define MAINTAIN_RETRY_MS 100   /* a visit a busy lock kept: again this soon */

/* ---- a partition ------------------------------------------------------- */

/* Lease expiry and ttl of partition i (taken off the due heap), then its
 * next due time back on the heap. */
static void
maintain_part(struct shm_seg *seg, uint32_t i, uint64_t now)
{
    struct shm_part *p = shm_dir_part(seg, i);
    struct shm_ref pr = {i, p->gen};
    struct shm_ring_ctx c;
    char qname[SHM_NAME_MAX];
    size_t qlen = 0;

    if (!atomic_load(&p->alive))
        return;
    struct shm_ref qr = {p->queue, p->queue_gen};
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t kick = 0;
    int rc = shm_part_lock_ctx(seg, SHM_STATS_MASTER, pr, q, now, &c);
    if (rc != 0) {
        /* Freed meanwhile (its next record schedules itself), or held
         * past the bound: then looked at again soon. */
        if (rc != -ESTALE)
            shm_due_part(seg, i, now + MAINTAIN_RETRY_MS);
        return;
    }
    /* partition lock: ttl, expiry, waiters, next due time.  What they
     * drop for a deadLetter queue is copied out, and pushed after. */
    c.dead = shm_dead_sink();
    shm_ring_ttl_locked(&c, q->opts.ttl_s);
    if (shm_ring_expire_locked(&c, q->opts.retry_limit) > 0)
        shm_waiters_post_locked(seg, qr, pr, &kick);
    shm_part_due_locked(seg, i, p, q);
    /* The queue's name, for the flush: read under the partition lock (a
     * queue is freed only after its partitions). */
    if (c.dead->count > 0 && q->name_len <= SHM_NAME_MAX) {
        qlen = q->name_len;
        shm_arena_read(seg, q->name_ref, 0, qname, qlen);
    }
    shm_ring_unlock(p);
    shm_waiters_kick(seg, kick);
    if (c.dead->count > 0 || c.dead->need > 0)
        shm_dead_flush(seg, SHM_STATS_MASTER, (struct shm_name){qname, qlen},
                       now);
}

/* ---- a queue's groups ---------------------------------------------------- */

/* group_busy - whether registry entry e holds live leases (not yet run
 * out: maintenance expired those first) in any partition of l: a consumer
 * still inside its lease is not idle, however long since it popped or
 * acked.  A partition whose lock is held past the bound may hold some. */
static int
group_busy(struct shm_seg *seg, int w, const struct shm_part_list *l,
           uint32_t e)
{
    for (uint32_t i = 0; i < l->n; i++) {
        struct shm_part *p = shm_dir_part(seg, l->v[i].idx);
        int busy = 0, rc = shm_part_lock(seg, w, l->v[i]);

        if (rc == -ESTALE)
            continue;
        if (rc != 0)
            return 1;
        /* partition lock: its group states. */
        for (uint32_t gs = p->groups, k = 0; gs != 0 && k <= p->ngs && !busy;
             gs = shm_ring_gs(seg, gs)->next, k++)
            busy = shm_ring_gs(seg, gs)->grp == e &&
                   shm_ring_gs(seg, gs)->nleases > shm_ring_gs(seg, gs)->nready;
        shm_ring_unlock(p);
        if (busy)
            return 1;
    }
    return 0;
}

/* Does a pop wait on queue qr or on one of its partitions (l)?  A parked
 * pop is a pop still going on: its group is not idle, however long it
 * waits (max_wait_ms may pass implicit_idle_s).  Which group a pop waits
 * for is not recorded, so while any pop waits on the queue none is
 * forgotten. */
static int
queue_parked(struct shm_seg *seg, struct shm_ref qr,
             const struct shm_part_list *l)
{
    int parked = shm_dir_parked_sum(seg, 0, qr.idx) != 0;

    for (uint32_t i = 0; i < l->n && !parked; i++)
        parked = shm_dir_parked_sum(seg, 1, l->v[i].idx) != 0;
    return parked;
}

/* One partition's state of registry entry *arg forgotten (its lock held). */
static uint64_t
forget_step(struct shm_ring_ctx *c, void *arg)
{
    shm_ring_gs_remove_locked(c, *(const uint32_t *)arg);
    return 0;
}

/* forget_parts - registry entry e's state forgotten in each partition of
 * l (one lock at a time); -ETIMEDOUT when one of their locks was held past
 * the bound, which keeps its state of e: e must stay registered then.  The
 * partitions done hold no state of e, as for a group that registered and
 * never read them, and a later visit forgets the rest. */
static int
forget_parts(struct shm_seg *seg, int w, const struct shm_part_list *l,
             struct shm_queue *q, uint64_t now, uint32_t e)
{
    struct shm_ring_ctx c;

    for (uint32_t i = 0; i < l->n; i++) {
        int rc = shm_part_lock_ctx(seg, w, l->v[i], q, now, &c);
        if (rc == -ESTALE)
            continue;
        if (rc != 0)
            return rc;
        forget_step(&c, &e);
        shm_ring_unlock(c.p);
    }
    return 0;
}

/* One partition's head advanced past what no group still needs (its lock
 * held). */
static uint64_t
advance_step(struct shm_ring_ctx *c, void *arg)
{
    (void)arg;
    shm_ring_advance_locked(c);
    return 0;
}

/* Forget qr's groups idle for idle_ms (queue lock, one partition lock at a
 * time), then let each partition free what they held.  Returns the earliest
 * last activity of the groups kept (UINT64_MAX: none). */
static uint64_t
maintain_groups(struct shm_seg *seg, struct shm_ref qr, uint64_t now,
                uint64_t idle_ms)
{
    const int w = SHM_STATS_MASTER;
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t earliest = UINT64_MAX;
    struct shm_part_list l;
    int forgot = 0;

    if (shm_queue_lock(seg, w, qr) != 0)
        return earliest;
    if (shm_part_list_get(seg, qr, &l) != 0) {
        shm_unlock(&q->lock); /* dir lock held past the bound */
        return earliest;
    }
    /* A queue a pop waits on is looked at again an idle time on. */
    int parked = queue_parked(seg, qr, &l);
    if (parked)
        earliest = now;
    for (uint32_t *link = &q->groups; *link != 0 && !parked;) {
        uint32_t e = *link;
        struct shm_grp *g = shm_ring_grp(seg, e);
        uint64_t last = atomic_load(&g->last_active);
        if (last + idle_ms > now || group_busy(seg, w, &l, e)) {
            earliest = last < earliest ? last : earliest;
            link = &g->next;
            continue;
        }
        if (forget_parts(seg, w, &l, q, now, e) != 0)
            break;
        shm_registry_forget(seg, w, q, link);
        forgot = 1;
    }
    if (forgot)
        shm_part_list_each_locked(seg, w, &l, q, now, advance_step, NULL);
    shm_unlock(&q->lock);
    shm_part_list_free(&l);
    return earliest;
}

/* ---- a queue ------------------------------------------------------------ */

/* Collect queue qr if implicit, empty, unleased, unpolled and idle; early
 * (before implicit_idle_s: maintain_relieve), only a queue read in queue
 * mode alone.  Returns whether it went. */
static int
maintain_collect(struct shm_seg *seg, struct shm_ref qr, uint64_t now,
                 uint64_t idle_ms, int early)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t len, bytes, leased, waiting;
    int freed = 0;

    if (q->declared || atomic_load(&q->last_active) + idle_ms > now ||
        atomic_load(&q->waiters) != 0)
        return 0;
    shm_queue_held(seg, qr, &len, &bytes, &leased, &waiting);
    if (len != 0 || leased != 0 || waiting != 0)
        return 0;
    if (shm_queue_lock(seg, SHM_STATS_MASTER, qr) != 0)
        return 0;
    /* queue lock: the registry.  A named group forgotten early would no
     * longer hold a message another group reads first, or (from=new) would
     * skip what comes before its next pop; the queue-mode group of an inbox
     * started from=all is the one a pop makes again as it was.  A queue
     * nothing was ever pushed to (no partition) holds no position worth
     * keeping: groups that only polled it go with it, as they did before
     * an empty poll registered them. */
    if (early && q->nparts != 0 &&
        (atomic_load(&q->ngroups) > 1 ||
         (q->groups != 0 &&
          (shm_ring_grp(seg, q->groups)->name_len != 0 ||
           shm_ring_grp(seg, q->groups)->from != SHM_FROM_ALL)))) {
        shm_unlock(&q->lock);
        return 0;
    }
    shm_queue_free_locked(seg, SHM_STATS_MASTER, qr, now, idle_ms, &freed);
    return freed;
}

/* Idle groups and idle collection of queue i (taken off the due heap), then
 * back on the heap for when it could next be idle: every live queue is
 * visited about once per idle time, whatever its traffic; one whose visit
 * met a lock held past the bound, again MAINTAIN_RETRY_MS on. */
static void
maintain_queue(struct shm_seg *seg, uint32_t i, uint64_t now, uint64_t idle_ms)
{
    struct shm_queue *q = shm_dir_queue(seg, i);
    struct shm_ref qr = {i, q->gen};
    uint64_t last = UINT64_MAX, missed = shm_lock_timeouts();

    if (!atomic_load(&q->alive))
        return;
    if (atomic_load(&q->ngroups) != 0)
        last = maintain_groups(seg, qr, now, idle_ms);
    (void)maintain_collect(seg, qr, now, idle_ms, 0);
    if (!shm_queue_same(seg, qr))
        return;
    if (shm_lock_timeouts() != missed) {
        shm_due_queue(seg, i, now + MAINTAIN_RETRY_MS);
        return;
    }
    uint64_t active = atomic_load(&q->last_active);
    last = active < last ? active : last;
    /* Idle but kept (messages, leases, parked pops): look again later. */
    shm_due_queue(seg, i,
                  last + idle_ms > now ? last + idle_ms : now + idle_ms);
}

/* ---- the queue table, the heap, a dead worker --------------------------- */

/*
 * maintain_relieve - the queue table past 7/8 full: collect empty implicit
 * queues read in queue mode alone (or not at all) and unpolled for
 * RELIEF_IDLE_MS, before their idle time, until it is down to 3/4.  A
 * request that names a new queue in a full table answers 503; this keeps
 * one inbox per request working at any rate the table holds for a second,
 * where waiting out implicit_idle_s caps it at max_queues /
 * implicit_idle_s (1,747 a second by default).  It scans the records in
 * turn from d->relief_next, MAINTAIN_BUDGET a pass, so queues it must keep
 * never hide the ones behind them; a pass that frees nothing (a table full
 * of queues in use) pauses relief for RELIEF_PAUSE_MS.  Returns the queues
 * collected.
 */
static uint32_t
maintain_relieve(struct shm_seg *seg, uint64_t now)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t bump = atomic_load(&d->q_bump);
    uint32_t low = d->max_queues - d->max_queues / 4, k, freed = 0;
    uint32_t i = d->relief_next < bump ? d->relief_next : 0;

    if (d->nqueues <= d->max_queues - d->max_queues / 8 ||
        now < d->relief_after || bump == 0)
        return 0;
    for (k = 0; k < MAINTAIN_BUDGET && k < bump && d->nqueues > low; k++) {
        struct shm_queue *q = shm_dir_queue(seg, i);
        struct shm_ref qr = {i, q->gen};
        if (atomic_load(&q->alive))
            freed +=
                (uint32_t)maintain_collect(seg, qr, now, RELIEF_IDLE_MS, 1);
        i = i + 1 < bump ? i + 1 : 0;
    }
    d->relief_next = i;
    d->relief_after = freed > 0 ? 0 : now + RELIEF_PAUSE_MS;
    shm_count(seg, SHM_STATS_MASTER, SHM_C_MAINTAIN_VISITS, k);
    return freed;
}

/* shm_maintain - see maintain.h.  Visits only what the due heap says is due,
 * earliest first, at most MAINTAIN_BUDGET records a call (the rest stay due
 * for the next call), so the master's tick stays short; then relieves a
 * queue table past 7/8 full. */
int
shm_maintain(struct shm_seg *seg, uint64_t now)
{
    uint64_t idle_ms = (uint64_t)shm_params_of(seg)->implicit_idle_s * 1000;
    uint32_t keys[256], n, done = 0, idx, relieved;

    while (done < MAINTAIN_BUDGET &&
           (n = shm_due_take(seg, now, keys, 256)) > 0) {
        for (uint32_t k = 0; k < n; k++) {
            if (shm_due_is_part(seg, keys[k], &idx))
                maintain_part(seg, idx, now);
            else
                maintain_queue(seg, idx, now, idle_ms);
        }
        done += n;
    }
    if (done > 0)
        shm_count(seg, SHM_STATS_MASTER, SHM_C_MAINTAIN_VISITS, done);
    if ((relieved = maintain_relieve(seg, now)) > 0)
        log_info(0,
                 "queue table %u of %u: collected %u empty queues before "
                 "their idle time",
                 shm_dir_of(seg)->nqueues, shm_dir_of(seg)->max_queues,
                 relieved);
    return 0;
}

/* shm_worker_reap - see maintain.h. */
int
shm_worker_reap(struct shm_seg *seg, int worker)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t pb = atomic_load(&d->p_bump), qb = atomic_load(&d->q_bump);
    uint64_t bit = ~(1ULL << worker);
    int rc, held = 0;

    /* Each lock taken and dropped: a lock the dead worker held is repaired
     * by shm_lock() before its cells are reaped.  One held past the bound
     * is held by a live process, which took it after the dead one (and
     * repaired it then) or before; either way the repair it may be in the
     * middle of must end before the cells are reaped: not this time. */
    if ((rc = shm_dir_lock(seg)) == 0)
        shm_dir_unlock(seg);
    held |= rc == -ETIMEDOUT;
    for (uint32_t i = 0; i < qb; i++) {
        struct shm_queue *q = shm_dir_queue(seg, i);
        if ((rc = shm_queue_lock_record(seg, SHM_STATS_MASTER, q)) == 0)
            shm_unlock(&q->lock);
        held |= rc == -ETIMEDOUT;
        atomic_fetch_and(&q->waiters, bit);
        atomic_store(&shm_dir_parked(seg, 0, i)[worker], 0);
    }
    for (uint32_t i = 0; i < pb; i++) {
        struct shm_part *p = shm_dir_part(seg, i);
        if ((rc = shm_ring_lock(seg, SHM_STATS_MASTER, p)) == 0)
            shm_ring_unlock(p);
        held |= rc == -ETIMEDOUT;
        atomic_fetch_and(&p->waiters, bit);
        atomic_store(&shm_dir_parked(seg, 1, i)[worker], 0);
    }
    shm_tail_reap(seg, worker); /* a push it left in flight: horizon.h */
    /* The dead worker may have moved a deadline (a lease, a first message
     * under a ttl, a new queue) and died before telling the heap: each
     * record is looked at once and rescheduled from what it holds. */
    shm_due_all(seg);
    if (held || shm_arena_reap(seg, worker) != 0)
        return -ETIMEDOUT;
    shm_wake_reset(seg, worker);
    return 0;
}
