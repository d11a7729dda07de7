/*
 * queue_admin.c - queue administration and listing (queue_admin.h): reset,
 * delete and declare, the queue listing and a queue's depth, the walks over
 * partitions, and the gauges; composed from dir.c, ring.c and the shared
 * steps of broker_int.h.
 *
 * Locking: the dir lock briefly per lookup; a queue's lock to declare it,
 * to delete it (queue lock -> one partition lock at a time, then the dir
 * lock) and to copy its group names; one partition lock at a time for a reset
 * and for depth snapshots.  Listings without a lock read names and check
 * the record's generation after.  No syscalls or logging under any lock;
 * no malloc under a partition lock.  Errors: 0 or -errno.
 */
#include "shm/queue_admin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shm/arena.h"
#include "shm/broker_int.h"
#include "shm/dir.h"
#include "shm/due.h"
#include "shm/lock.h"
#include "shm/presence.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/stats.h"

#define RELAXED memory_order_relaxed

/* ---- reset, delete, declare -------------------------------------------- */

/* One partition emptied (its lock held): the messages dropped. */
static uint64_t
reset_step(struct shm_ring_ctx *c, void *arg)
{
    (void)arg;
    return shm_ring_reset_locked(c);
}

/* shm_queue_reset - see queue_admin.h. */
int64_t
shm_queue_reset(struct shm_seg *seg, int worker, struct shm_name queue,
                uint64_t now)
{
    struct shm_part_list l;
    struct shm_ref qr;
    int64_t k;

    if (shm_dir_find_queue(seg, worker, queue, 0, now, &qr) != 0)
        return 0;
    shm_part_list_get(seg, qr, &l);
    k = (int64_t)shm_part_list_each_locked(
        seg, worker, &l, shm_dir_queue(seg, qr.idx), now, reset_step, NULL);
    shm_part_list_free(&l);
    /* Dropped by a client's call, as a DELETE drops them. */
    if (k > 0)
        shm_count(seg, worker, SHM_C_DROP_DELETED, (uint64_t)k);
    return k;
}

/* shm_queue_delete - see queue_admin.h. */
int
shm_queue_delete(struct shm_seg *seg, int worker, struct shm_name queue,
                 uint64_t now)
{
    uint64_t missed = shm_lock_timeouts();
    struct shm_ref qr;
    int freed, rc;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        if ((rc = shm_dir_find_queue(seg, worker, queue, 0, now, &qr)) != 0)
            return rc == -ENOENT ? 0 : rc;
        if ((rc = shm_queue_lock(seg, worker, qr)) == -ESTALE)
            continue;
        if (rc != 0)
            return rc;
        uint64_t k = shm_queue_free_locked(seg, worker, qr, now, 0, &freed);
        if (k > 0)
            shm_count(seg, worker, SHM_C_DROP_DELETED, k);
        /* Kept by a lock the master could not take: it deletes again. */
        return freed || shm_lock_timeouts() == missed ? 1 : -ETIMEDOUT;
    }
    return 0;
}

/* shm_queue_declare - see queue_admin.h. */
int
shm_queue_declare(struct shm_seg *seg, int worker, struct shm_name queue,
                  const struct shm_qopts *opts)
{
    uint64_t now = shm_now_ms();
    struct shm_ref qr;
    int rc = -EAGAIN;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        if ((rc = shm_dir_find_queue(seg, worker, queue, 1, now, &qr)) != 0)
            return rc;
        if ((rc = shm_queue_lock(seg, worker, qr)) == -ESTALE)
            continue;
        if (rc != 0)
            return rc;
        struct shm_queue *q = shm_dir_queue(seg, qr.idx);
        struct shm_part_list l;
        q->opts = *opts;
        q->declared = 1;
        /* A new ttl may make messages held already due now.  Without the
         * list (lock.h) the caller declares again, which does it. */
        rc = shm_part_list_get(seg, qr, &l);
        for (uint32_t i = 0; i < l.n; i++)
            shm_due_part(seg, l.v[i].idx, 0);
        shm_part_list_free(&l);
        shm_unlock(&q->lock);
        return rc;
    }
    return rc;
}

/* ---- listing ------------------------------------------------------------ */

/* Fill the per-queue view of qr (racy sums, no lock). */
static void
queue_info(struct shm_seg *seg, struct shm_ref qr, struct shm_queue_info *qi)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t len, bytes, leased, waiting;

    memset(qi, 0, sizeof(*qi));
    qi->name_len = q->name_len <= SHM_NAME_MAX ? q->name_len : SHM_NAME_MAX;
    shm_arena_read(seg, q->name_ref, 0, qi->name, qi->name_len);
    qi->declared = (int)q->declared;
    shm_queue_held(seg, qr, &len, &bytes, &leased, &waiting);
    qi->depth = len;
    qi->leased = leased;
    qi->waiting = waiting + shm_dir_parked_sum(seg, 0, qr.idx);
    qi->partitions = q->nparts;
    qi->groups = atomic_load(&q->ngroups);
    qi->bytes = bytes + SHM_QUEUE_OVERHEAD +
                (uint64_t)qi->partitions * SHM_PART_OVERHEAD;
    qi->drops_bounds = atomic_load(&q->drops[SHM_DROPS_BOUNDS]);
    qi->drops_ttl = atomic_load(&q->drops[SHM_DROPS_TTL]);
    qi->drops_retry = atomic_load(&q->drops[SHM_DROPS_RETRY]);
    qi->opts = q->opts;
}

struct list_ent {
    struct shm_ref r;
    uint32_t len;
    char name[SHM_NAME_MAX];
};

/* Name order: bytes, then the shorter first. */
static int
list_cmp(const void *a, const void *b)
{
    const struct list_ent *x = a, *y = b;
    int c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);

    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* Collect the live queues whose name starts with prefix into *v (grown from
 * *cap entries by realloc while it can); returns how many.  Without the dir
 * lock: a record's name is re-validated by its generation after reading. */
static uint32_t
list_collect(struct shm_seg *seg, struct shm_name prefix, struct list_ent **v,
             uint32_t *cap)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t bump = atomic_load(&d->q_bump), n = 0;

    for (uint32_t i = 0; i < bump; i++) {
        struct shm_queue *q = shm_dir_queue(seg, i);
        uint32_t gen = q->gen, len = q->name_len;
        if (!atomic_load(&q->alive) || len < prefix.len || len > SHM_NAME_MAX)
            continue;
        if (n == *cap) {
            struct list_ent *nv = realloc(*v, sizeof(**v) * *cap * 2);
            if (nv == NULL)
                break;
            *v = nv;
            *cap *= 2;
        }
        struct list_ent *e = &(*v)[n];
        shm_arena_read(seg, q->name_ref, 0, e->name, len);
        if (!atomic_load(&q->alive) || q->gen != gen ||
            memcmp(e->name, prefix.ptr, prefix.len) != 0)
            continue;
        e->r.idx = i;
        e->r.gen = gen;
        e->len = len;
        n++;
    }
    return n;
}

/* qi_after - a list entry holding the name after (malloc'd, for
 * list_cmp); NULL without memory. */
static struct list_ent *
qi_after(struct shm_name after)
{
    struct list_ent *a = malloc(sizeof(*a));
    size_t len = after.len < SHM_NAME_MAX ? after.len : SHM_NAME_MAX;

    if (a != NULL) {
        memcpy(a->name, after.ptr, len);
        a->len = (uint32_t)len;
    }
    return a;
}

/* shm_queue_list_after - see queue_admin.h. */
int
shm_queue_list_after(struct shm_seg *seg, struct shm_name prefix,
                     struct shm_name after, uint32_t limit, uint64_t now,
                     void (*fn)(void *arg, const struct shm_queue_info *q),
                     void *arg)
{
    uint32_t n, i = 0, cap = 64;
    struct list_ent *v = malloc(sizeof(*v) * cap);
    struct shm_queue_info *qi = malloc(sizeof(*qi));
    int listed = 0;

    (void)now;
    if (v == NULL || qi == NULL)
        goto out;
    n = list_collect(seg, prefix, &v, &cap);
    qsort(v, n, sizeof(*v), list_cmp);
    if (after.len > 0) { /* the first name past after, by bisection */
        uint32_t hi = n;
        struct list_ent *a = qi_after(after);
        if (a == NULL)
            goto out;
        while (i < hi) {
            uint32_t mid = i + (hi - i) / 2;
            if (list_cmp(&v[mid], a) <= 0)
                i = mid + 1;
            else
                hi = mid;
        }
        free(a);
    }
    for (; i < n && (uint32_t)listed < limit; i++) {
        if (!shm_queue_same(seg, v[i].r))
            continue;
        queue_info(seg, v[i].r, qi);
        fn(arg, qi);
        listed++;
    }
out:
    free(v);
    free(qi);
    return listed;
}

/* ---- depth -------------------------------------------------------------- */

/* Per-partition figures of pr for group (h) or for none. */
static int
part_depth(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_ref pr,
           const struct shm_name *group, uint64_t h, uint64_t now,
           struct shm_part_info *pi, uint64_t *skipped)
{
    struct shm_ring_depth rd;
    struct shm_ring_ctx c;
    int rc;

    rc = shm_part_lock_ctx(seg, w, pr, shm_dir_queue(seg, qr.idx), now, &c);
    if (rc != 0)
        return rc;
    /* partition lock: a consistent snapshot of this partition. */
    uint32_t gs = group ? shm_ring_gs_find_locked(&c, *group, h) : 0;
    shm_ring_depth_locked(&c, gs, &rd);
    memset(pi, 0, sizeof(*pi));
    pi->name_len = c.p->name_len;
    shm_arena_read(seg, c.p->name_ref, 0, pi->name, pi->name_len);
    pi->pending = rd.pending;
    pi->leased = rd.leased;
    pi->waiting = shm_dir_parked_sum(seg, 1, pr.idx);
    pi->bytes = atomic_load_explicit(&c.p->cost, RELAXED) + SHM_PART_OVERHEAD;
    pi->oldest_age_ms = rd.oldest_age_ms;
    pi->delayed = rd.delayed;
    shm_ring_unlock(c.p);
    *skipped = rd.skipped;
    return 0;
}

/* Copy the names of qr's registry (queue lock) into a malloc'd array. */
static uint32_t
group_names(struct shm_seg *seg, struct shm_ref qr, struct shm_group_info **out)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint32_t n = atomic_load(&q->ngroups) + 4, k = 0;

    *out = malloc(sizeof(**out) * n);
    if (*out == NULL || shm_queue_lock(seg, -1, qr) != 0)
        return 0;
    for (uint32_t e = q->groups; e != 0 && k < n;
         e = shm_ring_grp(seg, e)->next, k++) {
        struct shm_grp *g = shm_ring_grp(seg, e);
        memset(&(*out)[k], 0, sizeof(**out));
        (*out)[k].name_len = g->name_len;
        if (g->name_len != 0)
            shm_arena_read(seg, g->name_ref, 0, (*out)[k].name, g->name_len);
    }
    shm_unlock(&q->lock);
    return k;
}

/* Sum a group's pending and skipped over the partitions of l. */
static void
group_depth(struct shm_seg *seg, struct shm_ref qr,
            const struct shm_part_list *l, uint64_t now,
            struct shm_group_info *gi)
{
    struct shm_name g = {gi->name, gi->name_len};
    uint64_t h = shm_group_hash(g), skipped;
    struct shm_part_info pi;

    gi->pending = gi->skipped = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        if (part_depth(seg, -1, qr, l->v[i], &g, h, now, &pi, &skipped) != 0)
            continue;
        gi->pending += pi.pending;
        gi->skipped += skipped;
    }
}

/* Call group_fn with the depth over the partitions of l of group, or, with
 * group NULL, of each group the queue knows. */
static void
depth_groups(struct shm_seg *seg, struct shm_ref qr,
             const struct shm_part_list *l, const struct shm_name *group,
             uint64_t now,
             void (*group_fn)(void *arg, const struct shm_group_info *g),
             void *arg)
{
    struct shm_group_info *gi = NULL;

    if (group != NULL) {
        gi = calloc(1, sizeof(*gi));
        if (gi != NULL && group->len <= SHM_NAME_MAX) {
            memcpy(gi->name, group->ptr, group->len);
            gi->name_len = group->len;
            group_depth(seg, qr, l, now, gi);
            if (group_fn != NULL)
                group_fn(arg, gi);
        }
    } else {
        uint32_t k = group_names(seg, qr, &gi);
        for (uint32_t i = 0; i < k; i++) {
            group_depth(seg, qr, l, now, &gi[i]);
            if (group_fn != NULL)
                group_fn(arg, &gi[i]);
        }
    }
    free(gi);
}

/* shm_queue_depth - see queue_admin.h.  Read-only, and called without a
 * worker slot: it locks as w = -1 (a repair it runs frees nothing
 * itself). */
int
shm_queue_depth(struct shm_seg *seg, struct shm_name queue,
                const struct shm_name *group, uint64_t now,
                struct shm_queue_info *q,
                void (*part_fn)(void *arg, const struct shm_part_info *p),
                void (*group_fn)(void *arg, const struct shm_group_info *g),
                void *arg)
{
    struct shm_part_info *pi = malloc(sizeof(*pi));
    uint64_t h = group ? shm_group_hash(*group) : 0, skipped;
    struct shm_part_list l;
    struct shm_ref qr;
    int rc = shm_dir_find_queue(seg, -1, queue, 0, now, &qr);

    if (rc != 0 || pi == NULL) {
        free(pi);
        return rc != 0 ? rc : -ENOMEM;
    }
    queue_info(seg, qr, q);
    shm_part_list_get(seg, qr, &l);
    for (uint32_t i = 0; i < l.n; i++)
        if (part_depth(seg, -1, qr, l.v[i], group, h, now, pi, &skipped) == 0 &&
            part_fn != NULL)
            part_fn(arg, pi);
    depth_groups(seg, qr, &l, group, now, group_fn, arg);
    free(pi);
    shm_part_list_free(&l);
    return 0;
}

/* ---- partition walks ---------------------------------------------------- */

/*
 * part_window_live - whether p's dedupe window still holds a key inside
 * q's dedupeSeconds at now: an emptied partition's window is state its
 * next owner needs (SPEC §13: the window travels with hand-over), or a
 * retried push there is stored twice.  Read without the lock, as the walk
 * reads everything: the newest key decides (the list is oldest first), a
 * cell read racily only sends one more partition to the take, which
 * decides under the lock (an empty record is not shipped).
 */
static int
part_window_live(struct shm_seg *seg, const struct shm_part *p,
                 const struct shm_queue *q, uint64_t now)
{
    uint32_t tail = p->dd_tail;

    return p->dd_count != 0 && tail != 0 && q->opts.dedupe_s != 0 &&
           shm_ring_dd(seg, tail)->at_ms + (uint64_t)q->opts.dedupe_s * 1000 >
               now;
}

/* shm_part_each - see queue_admin.h. */
uint32_t
shm_part_each(struct shm_seg *seg,
              void (*fn)(void *arg, struct shm_name queue,
                         struct shm_name part),
              void *arg)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t bump = atomic_load(&d->p_bump), listed = 0;
    uint64_t now = shm_now_ms();
    char qn[SHM_NAME_MAX], pn[SHM_NAME_MAX];

    for (uint32_t i = 0; i < bump; i++) {
        struct shm_part *p = shm_dir_part(seg, i);
        uint32_t gen = p->gen, plen = p->name_len, qi = p->queue;
        struct shm_queue *q;
        uint32_t qgen, qlen;

        if (!atomic_load(&p->alive) || plen == 0 || plen > SHM_NAME_MAX ||
            qi >= d->max_queues)
            continue;
        q = shm_dir_queue(seg, qi);
        if (atomic_load(&p->count) == 0 && atomic_load(&p->leased) == 0 &&
            !part_window_live(seg, p, q, now))
            continue;
        qgen = q->gen;
        qlen = q->name_len;
        if (qlen == 0 || qlen > SHM_NAME_MAX)
            continue;
        shm_arena_read(seg, p->name_ref, 0, pn, plen);
        shm_arena_read(seg, q->name_ref, 0, qn, qlen);
        if (!atomic_load(&p->alive) || p->gen != gen || p->queue != qi ||
            q->gen != qgen || p->queue_gen != qgen)
            continue;
        if (fn != NULL)
            fn(arg, (struct shm_name){qn, qlen}, (struct shm_name){pn, plen});
        listed++;
    }
    return listed;
}

/* shm_queue_part_each - see queue_admin.h.  No lock: each name is read,
 * then checked against the record's generation. */
int
shm_queue_part_each(struct shm_seg *seg, struct shm_name queue, uint64_t now,
                    int (*fn)(void *arg, struct shm_name part, uint64_t held),
                    void *arg)
{
    struct shm_part_list l;
    struct shm_ref qr;
    char name[SHM_NAME_MAX];
    int r = 0;

    if (shm_dir_find_queue(seg, -1, queue, 0, now, &qr) != 0)
        return 0;
    shm_part_list_get(seg, qr, &l);
    for (uint32_t i = 0; i < l.n && r == 0; i++) {
        struct shm_part *p = shm_dir_part(seg, l.v[i].idx);
        uint32_t len = p->name_len;
        if (!atomic_load(&p->alive) || p->gen != l.v[i].gen || len == 0 ||
            len > SHM_NAME_MAX)
            continue;
        shm_arena_read(seg, p->name_ref, 0, name, len);
        if (p->gen != l.v[i].gen)
            continue;
        r = fn(arg, (struct shm_name){name, len},
               atomic_load(&p->count) + atomic_load(&p->leased));
    }
    shm_part_list_free(&l);
    return r;
}

/* ---- gauges ------------------------------------------------------------- */

/* shm_gauges_read - see queue_admin.h.  Racy sums over the tables. */
void
shm_gauges_read(struct shm_seg *seg, uint64_t now, struct shm_gauges *g)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t qb = atomic_load(&d->q_bump), pb = atomic_load(&d->p_bump);

    memset(g, 0, sizeof(*g));
    g->memory_used =
        shm_arena_used_bytes(seg) + shm_presence_bytes(seg->presence);
    g->memory_limit = shm_params_of(seg)->max_bytes;
    for (uint32_t i = 0; i < qb; i++) {
        struct shm_queue *q = shm_dir_queue(seg, i);
        if (!atomic_load(&q->alive))
            continue;
        if (q->declared)
            g->queues_declared++;
        else
            g->queues_implicit++;
        g->parked_pops += shm_dir_parked_sum(seg, 0, i);
    }
    for (uint32_t i = 0; i < pb; i++) {
        struct shm_part *p = shm_dir_part(seg, i);
        if (!atomic_load(&p->alive))
            continue;
        uint64_t n = atomic_load_explicit(&p->count, RELAXED);
        uint64_t l = atomic_load_explicit(&p->leased, RELAXED);
        uint64_t o = atomic_load_explicit(&p->oldest_ms, RELAXED);
        g->messages += n;
        g->pending += n > l ? n - l : 0;
        g->leased += l;
        g->delayed += atomic_load_explicit(&p->delayed, RELAXED);
        g->parked_pops += shm_dir_parked_sum(seg, 1, i);
        if (n > 0 && now > o && now - o > g->oldest_age_ms)
            g->oldest_age_ms = now - o;
    }
}
