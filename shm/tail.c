/*
 * tail.c - tail reads (tail.h): one partition's messages in a range of
 * numbers copied under its lock, from where the last read stopped when
 * that still holds, and the park in the same lock hold; and the reap of a
 * push a dead worker left in flight.  Composed from dir.c (lookups),
 * ring.c (the list, ttl, the copy) and the shared steps of broker_int.h.
 *
 * Locking: the dir lock briefly per lookup, then one partition lock; the
 * reap takes each partition's lock in turn.  Wake-ups are posted under
 * the partition lock and kicked after it.  No malloc, syscall or logging
 * under a lock.  Errors: a count or -errno (tail.h).
 */
#include "shm/tail.h"

#include <errno.h>
#include <string.h>

#include "shm/arena.h"
#include "shm/broker_int.h"
#include "shm/dir.h"
#include "shm/horizon.h"
#include "shm/layout.h"
#include "shm/lock.h"
#include "shm/ring.h"
#include "shm/stats.h"

#define RELAXED memory_order_relaxed

/*
 * Where to walk pr's list from: the message req->pos names while it is
 * still listed, at or below after, and below a hold's kept numbers (an
 * adopt puts its messages just below the first message at or above them:
 * a walk from there would pass them); else the head.  Its seq above
 * gone_seq says it is still listed: a message raises gone_seq to its seq
 * before it is unlinked (ring.c: from the head, or from the middle when a
 * later one of its key replaces it or its request is withdrawn), a wipe to
 * every number given, and nothing else unlinks one.
 */
static uint32_t
tail_start(struct shm_ring_ctx *c, struct shm_ref pr,
           const struct shm_tail_req *req)
{
    const struct shm_tail_pos *h = &req->pos;
    const struct shm_arena *a = shm_region(c->seg, SHM_REGION_ARENA);
    uint64_t hold = atomic_load(&c->p->hold_seq);

    if (h->ref == 0 || h->ref > a->cap ||
        h->handle != shm_handle_of(1, pr.idx, pr.gen) || h->seq > req->after ||
        h->seq <= atomic_load_explicit(&c->p->gone_seq, RELAXED) ||
        (hold != 0 && h->seq >= hold) ||
        shm_ring_msg(c->seg, h->ref)->seq != h->seq)
        return c->p->head;
    return h->ref;
}

/* Copy c's messages req->after < seq <= req->upto (or the newest of them)
 * into k; res->more and res->pos as tail.h says.  Returns the records
 * copied or -ENOMEM. */
static int
tail_copy(struct shm_ring_ctx *c, struct shm_ref pr,
          const struct shm_tail_req *req, struct shm_sink *k,
          struct shm_tail_res *res)
{
    uint32_t r = tail_start(c, pr, req), at = 0, best = 0;
    int n = 0;

    for (; r != 0; r = shm_ring_msg(c->seg, r)->next) {
        const struct shm_msg *m = shm_ring_msg(c->seg, r);
        if (m->seq > req->upto)
            break;
        /* A tail reads in sequence order: a message still hidden by its
         * delay (SPEC §13) is passed over for good (DESIGN.md §6), as one
         * withdrawn or replaced by a later one of its key (superseded:
         * still listed while a group holds it leased; gone_seq says a
         * tail behind it missed it, as for one unlinked). */
        if (m->seq > req->after && !shm_msg_passed(m) &&
            !shm_msg_hidden(m, c->now) &&
            !shm_msg_outlived(m, c->q->opts.ttl_s, c->now)) {
            if (req->newest_only)
                best = r;
            else if (shm_ring_copy_locked(c, k, r, 1) != 0) {
                res->more = 1;
                break;
            } else
                n++;
        }
        at = r;
    }
    if (best != 0 && shm_ring_copy_locked(c, k, best, 1) == 0)
        n = 1;
    if (at != 0)
        res->pos =
            (struct shm_tail_pos){.handle = shm_handle_of(1, pr.idx, pr.gen),
                                  .seq = shm_ring_msg(c->seg, at)->seq,
                                  .ref = at};
    return n == 0 && k->need != 0 ? -ENOMEM : n;
}

/* The tail read of partition pr of queue qr; -ESTALE when it was freed
 * meanwhile. */
static int
tail_part(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_ref pr,
          const struct shm_tail_req *req, uint64_t now, struct shm_sink *sink,
          struct shm_tail_res *res)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_ring_ctx c;
    int rc = shm_part_lock_ctx(seg, w, pr, q, now, &c);

    if (rc != 0)
        return rc;
    /* partition lock: ttl, copy, park.  Nothing taken, leased or marked. */
    shm_ring_ttl_locked(&c, q->opts.ttl_s);
    rc = tail_copy(&c, pr, req, sink, res);
    res->handle = shm_handle_of(1, pr.idx, pr.gen);
    res->newest = c.p->tail != 0 ? shm_ring_msg(seg, c.p->tail)->seq : 0;
    res->gap = atomic_load_explicit(&c.p->gone_seq, RELAXED) > req->after;
    if (rc >= 0 && req->park)
        atomic_fetch_or(&c.p->waiters, 1ULL << w);
    shm_ring_unlock(c.p);
    return rc;
}

/* shm_tail - see tail.h. */
int
shm_tail(struct shm_seg *seg, int worker, const struct shm_tail_req *req,
         uint64_t now, struct shm_sink *sink, struct shm_tail_res *res)
{
    struct shm_ref qr, pr;
    int rc = -EAGAIN;

    memset(res, 0, sizeof(*res));
    sink->used = 0;
    sink->count = 0;
    sink->need = 0;
    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        /* Made only to park on (as a parked pop makes them). */
        rc = shm_dir_find_queue(seg, worker, req->queue, req->park, now, &qr);
        if (rc == 0)
            rc = shm_dir_find_part(seg, worker, qr, req->part, req->park, now,
                                   &pr);
        if (rc == 0)
            rc = tail_part(seg, worker, qr, pr, req, now, sink, res);
        if (rc == -ESTALE && req->park)
            continue; /* freed meanwhile: made again */
        if (rc == -ENOENT || rc == -ESTALE)
            return 0;
        return rc;
    }
    return -EAGAIN;
}

/* shm_tail_queue - see tail.h.  As an any-partition pop parks (broker.c):
 * the bit goes up first, then the queue lock says the record is still
 * this queue (a queue freed meanwhile is made again). */
int
shm_tail_queue(struct shm_seg *seg, int worker, struct shm_name queue,
               uint64_t now, uint64_t *handle)
{
    struct shm_ref qr;
    int rc;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        if ((rc = shm_dir_find_queue(seg, worker, queue, 1, now, &qr)) != 0)
            return rc;
        struct shm_queue *q = shm_dir_queue(seg, qr.idx);
        atomic_fetch_or(&q->waiters, 1ULL << worker);
        if ((rc = shm_queue_lock(seg, worker, qr)) == -ESTALE)
            continue;
        if (rc != 0)
            return rc;
        shm_unlock(&q->lock);
        *handle = shm_handle_of(0, qr.idx, qr.gen);
        return 0;
    }
    return -EAGAIN;
}

/* shm_tail_parts - see tail.h. */
int
shm_tail_parts(struct shm_seg *seg, struct shm_name queue, uint64_t after,
               uint64_t now,
               int (*fn)(void *arg, struct shm_name part, uint64_t handle),
               void *arg)
{
    struct shm_part_list l;
    struct shm_ref qr;
    char name[SHM_NAME_MAX];
    int r = 0;

    if (shm_dir_find_queue(seg, -1, queue, 0, now, &qr) != 0)
        return 0;
    if ((r = shm_part_list_get(seg, qr, &l)) != 0)
        return r;
    for (uint32_t i = 0; i < l.n && r == 0; i++) {
        struct shm_part *p = shm_dir_part(seg, l.v[i].idx);
        uint32_t len = p->name_len;
        if (atomic_load(&p->last_seq) <= after || !atomic_load(&p->alive) ||
            p->gen != l.v[i].gen || len == 0 || len > SHM_NAME_MAX)
            continue;
        shm_arena_read(seg, p->name_ref, 0, name, len);
        if (p->gen != l.v[i].gen)
            continue;
        r = fn(arg, (struct shm_name){name, len},
               shm_handle_of(1, l.v[i].idx, l.v[i].gen));
    }
    shm_part_list_free(&l);
    return r;
}

/* shm_tail_map - see tail.h. */
int
shm_tail_map(struct shm_seg *seg, int worker, struct shm_name queue,
             struct shm_name part, uint64_t inc, uint64_t w, uint64_t now,
             uint64_t *after)
{
    struct shm_ref qr, pr;
    int rc = -EAGAIN;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        rc = shm_dir_find_queue(seg, worker, queue, 0, now, &qr);
        if (rc == 0)
            rc = shm_dir_find_part(seg, worker, qr, part, 0, now, &pr);
        if (rc == 0)
            rc = shm_part_lock(seg, worker, pr);
        if (rc == -ESTALE)
            continue;
        if (rc != 0)
            return rc == -EAGAIN ? rc : -ENOENT;
        /* partition lock: its adoption and its oldest message. */
        struct shm_part *p = shm_dir_part(seg, pr.idx);
        uint64_t base = p->adopt_base, lo = p->adopt_lo, hi = p->adopt_hi;
        uint64_t cut = p->adopt_cut_at, cut_len = p->adopt_cut_len;
        rc = -ENOENT;
        if (p->hold_until > now)
            rc = -EINPROGRESS; /* its hand-over is on its way: not yet */
        else if (inc != 0 && p->adopt_inc == inc &&
                 (p->head == 0 || shm_ring_msg(seg, p->head)->seq >= base)) {
            uint64_t o = w < hi ? w : hi;
            if (w < lo)
                *after = base - 1;
            else if (cut_len == 0 || o <= cut)
                *after = base + (o - lo);
            else if (o - cut < cut_len + SHM_ADOPT_GAP)
                *after = base + (cut - lo); /* in the gap: nothing there */
            else
                *after = base + (o - lo) - cut_len;
            rc = 0;
        }
        shm_ring_unlock(p);
        return rc;
    }
    return rc;
}

/* shm_tail_reap - see tail.h.  The dead worker's waiter bits are off
 * already: every other waiter is woken, and looks again. */
void
shm_tail_reap(struct shm_seg *seg, int w)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t pb = atomic_load(&d->p_bump);
    uint64_t kick = 0;

    if (shm_pushing_of(seg, w) == 0)
        return;
    for (uint32_t i = 0; i < pb; i++) {
        struct shm_part *p = shm_dir_part(seg, i);
        if (!atomic_load(&p->alive) ||
            shm_ring_lock(seg, SHM_STATS_MASTER, p) != 0)
            continue;
        /* partition lock: its waiters and its queue's. */
        if (atomic_load(&p->alive)) {
            struct shm_ref pr = {i, p->gen}, qr = {p->queue, p->queue_gen};
            shm_waiters_post_locked(seg, qr, pr, &kick);
        }
        shm_ring_unlock(p);
    }
    shm_waiters_kick(seg, kick);
    shm_pushing_end(seg, w);
}
