/*
 * broker.c - the broker.h operations, composed from dir.c (names, records)
 * and ring.c (one partition's contents).
 *
 * Locking: the dir lock briefly per lookup; then one partition lock at a
 * time; a queue's own lock only to create or forget groups and to free the
 * queue (queue lock -> one partition lock, or queue lock -> dir lock).
 * Wake-ups are posted under the partition lock and kicked after it.  No
 * syscalls, logging or malloc under any lock.  Errors: 0 or -errno.
 */
#include "shm/broker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shm/broker_int.h"
#include "shm/dir.h"
#include "shm/due.h"
#include "shm/lock.h"
#include "shm/log.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/stats.h"
#include "shm/wake.h"

#define RELAXED         memory_order_relaxed
#define BROKER_TRIES    16    /* lookups retried after a concurrent free */
#define BROKER_STACK    64    /* partitions listed without malloc */
#define MAINTAIN_BUDGET 16384 /* records one shm_maintain call visits */
#define RELIEF_IDLE_MS  1000  /* idle, for a queue collected under pressure */
#define RELIEF_PAUSE_MS 1000  /* no relief this long after a pass in vain */
#define BROKER_GRP_SEED 0x67726f7570ULL

/* A handle: kind (bit 63: partition), record index, generation. */
static uint64_t
handle_of(int part, uint32_t idx, uint32_t gen)
{
    return ((uint64_t)(part != 0) << 63) | ((uint64_t)idx << 32) | gen;
}

/* The group hash partitions key states by. */
static uint64_t
group_hash(struct shm_name g)
{
    struct shm_name n = {g.len ? g.ptr : "", g.len};

    return shm_dir_name_hash(n, BROKER_GRP_SEED);
}

/* Is queue record r still the one looked up? */
static int
queue_same(struct shm_seg *seg, struct shm_ref r)
{
    struct shm_queue *q = shm_dir_queue(seg, r.idx);

    return atomic_load(&q->alive) && q->gen == r.gen;
}

/* Is partition record r still the one looked up? */
static int
part_same(struct shm_seg *seg, struct shm_ref r)
{
    struct shm_part *p = shm_dir_part(seg, r.idx);

    return atomic_load(&p->alive) && p->gen == r.gen;
}

/* List queue qr's partitions into *out (stack, or malloc'd when more):
 * returns how many; *out != stack must be freed. */
static uint32_t
queue_parts(struct shm_seg *seg, struct shm_ref qr, struct shm_ref *stack,
            struct shm_ref **out)
{
    uint32_t n = shm_dir_queue_parts(seg, qr, stack, BROKER_STACK);

    *out = stack;
    while (n > BROKER_STACK) {
        struct shm_ref *h = malloc(sizeof(*h) * (n + 8));
        if (h == NULL)
            return BROKER_STACK;
        uint32_t m = shm_dir_queue_parts(seg, qr, h, n + 8);
        if (m <= n + 8) {
            *out = h;
            return m;
        }
        free(h);
        n = m;
    }
    return n;
}

/* What queue qr holds: messages and message bytes, summed over its
 * partitions by racy reads (bounded walk: records are only reused as
 * records of the same kind). */
static void
queue_held(struct shm_seg *seg, struct shm_ref qr, uint64_t *len,
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

/* Post the partition's and the queue's waiters (clearing their bits); the
 * workers whose eventfd needs a write are added to *kick.  Under p's lock. */
static void
wake_post_locked(struct shm_seg *seg, struct shm_ref qr, struct shm_ref pr,
                 uint64_t *kick)
{
    struct shm_part *p = shm_dir_part(seg, pr.idx);
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t pm = atomic_exchange(&p->waiters, 0);
    uint64_t qm =
        atomic_load(&q->waiters) ? atomic_exchange(&q->waiters, 0) : 0;

    for (; pm != 0; pm &= pm - 1) {
        int w = __builtin_ctzll(pm);
        if (shm_wake_post(seg, w, handle_of(1, pr.idx, pr.gen)))
            *kick |= 1ULL << w;
    }
    for (; qm != 0; qm &= qm - 1) {
        int w = __builtin_ctzll(qm);
        if (shm_wake_post(seg, w, handle_of(0, qr.idx, qr.gen)))
            *kick |= 1ULL << w;
    }
}

/* Write the eventfds of kick (after every lock is released). */
static void
wake_kick(struct shm_seg *seg, uint64_t kick)
{
    for (; kick != 0; kick &= kick - 1)
        shm_wake_kick(seg, __builtin_ctzll(kick));
}

/* Tell the due heap when partition idx (locked) next needs maintenance: its
 * earliest lease deadline, or its oldest message's ttl.  Cheap when nothing
 * moved earlier (one racy read in shm_due_part). */
static void
part_due_locked(struct shm_seg *seg, uint32_t idx, const struct shm_part *p,
                const struct shm_queue *q)
{
    uint64_t at = atomic_load_explicit(&p->due, RELAXED);
    uint64_t ttl = (uint64_t)q->opts.ttl_s * 1000;

    if (ttl != 0 && atomic_load_explicit(&p->count, RELAXED) > 0) {
        uint64_t t = atomic_load_explicit(&p->oldest_ms, RELAXED) + ttl;
        at = t < at ? t : at;
    }
    shm_due_part(seg, idx, at);
}

/* Lock partition pr as worker w; -ESTALE when it was freed meanwhile. */
static int
part_lock(struct shm_seg *seg, int w, struct shm_ref pr)
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

/* ---- queue lock and group registry ------------------------------------ */

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

/* Lock queue qr; -ESTALE when it was freed meanwhile. */
static int
queue_lock(struct shm_seg *seg, int w, struct shm_ref qr)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct queue_repairer r = {q, w};
    int rc = shm_lock(seg, &q->lock, queue_repair, &r);

    if (rc != 0)
        return rc;
    /* A repair by a locker without a slot left an entry to free. */
    if (w >= 0 && q->intent != 0) {
        registry_free(seg, w, q->intent);
        q->intent = 0;
    }
    if (!queue_same(seg, qr)) {
        shm_unlock(&q->lock);
        return -ESTALE;
    }
    return 0;
}

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

/* Group name's entry in q's registry, made if missing (queue lock held). */
static int
registry_ensure(struct shm_seg *seg, int w, struct shm_queue *q,
                struct shm_name name, uint64_t h, enum shm_from from,
                uint64_t now, uint32_t *e)
{
    *e = registry_find(seg, q, name, h);
    return *e != 0 ? 0 : registry_add(seg, w, q, name, h, from, now, e);
}

/* Make sure group name is known to queue qr and counts as active: a pop
 * that found no partition to read registers its group all the same, so the
 * messages pushed next wait for it (and from=new starts at them). */
static int
group_register(struct shm_seg *seg, int w, struct shm_ref qr,
               struct shm_name name, uint64_t h, enum shm_from from,
               uint64_t now)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint32_t e;
    int rc;

    if ((rc = queue_lock(seg, w, qr)) != 0)
        return rc;
    /* queue lock: the registry. */
    if ((rc = registry_ensure(seg, w, q, name, h, from, now, &e)) == 0)
        atomic_store_explicit(&shm_ring_grp(seg, e)->last_active, now, RELAXED);
    shm_unlock(&q->lock);
    return rc;
}

/* Make sure group name exists in queue qr and has a state in partition pr
 * (queue lock, then the partition lock). */
static int
group_ensure(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_ref pr,
             struct shm_name name, uint64_t h, enum shm_from from, uint64_t now)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_part *p = shm_dir_part(seg, pr.idx);
    uint32_t e;
    int rc;

    /* queue lock: the registry; inside it one partition lock. */
    if ((rc = queue_lock(seg, w, qr)) != 0)
        return rc;
    if ((rc = registry_ensure(seg, w, q, name, h, from, now, &e)) != 0)
        goto out;
    if ((rc = part_lock(seg, w, pr)) != 0)
        goto out;
    struct shm_ring_ctx c = {seg, w, p, q, now};
    if (shm_ring_gs_find_locked(&c, name, h) == 0)
        rc = shm_ring_gs_add_locked(&c, e);
    shm_ring_unlock(p);
out:
    shm_unlock(&q->lock);
    return rc;
}

/* ---- push ---------------------------------------------------------- */

/* Free a joined list of message chains. */
static void
chains_free(struct shm_seg *seg, int w, uint32_t first)
{
    while (first != 0) {
        uint32_t next = shm_ring_msg(seg, first)->next;
        shm_arena_free(seg, w, first);
        first = next;
    }
}

/* Does a push of cost bytes leave the lease reserve free?  Pushes stop
 * 1/32 of the node cap short of it, so consumers of a full node can still
 * lease (and then ack) what it holds. */
static int
push_room(struct shm_seg *seg, uint64_t cost)
{
    uint64_t cap = shm_params_of(seg)->max_bytes;

    return shm_arena_used_bytes(seg) + cost + cap / 32 <= cap;
}

/* Allocate and fill the n chains, joined by their next fields. */
static int
push_alloc(struct shm_seg *seg, int w, const struct shm_msg_in *msgs,
           uint32_t n, uint64_t now, uint32_t *first, uint32_t *last)
{
    uint64_t cost;
    uint32_t ref;

    *first = *last = 0;
    for (uint32_t i = 0; i < n; i++) {
        int rc = shm_ring_msg_new(seg, w, msgs[i].payload, msgs[i].len, now,
                                  &ref, &cost);
        if (rc != 0) {
            chains_free(seg, w, *first);
            return rc;
        }
        if (*last != 0)
            shm_ring_msg(seg, *last)->next = ref;
        else
            *first = ref;
        *last = ref;
    }
    return 0;
}

/* Drop ttl-expired messages of every partition of qr (one lock at a time);
 * returns how many went. */
static uint64_t
queue_ttl(struct shm_seg *seg, int w, struct shm_ref qr, uint64_t now)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_ref stack[BROKER_STACK], *parts;
    uint32_t n = queue_parts(seg, qr, stack, &parts);
    uint64_t k = 0;

    for (uint32_t i = 0; i < n && q->opts.ttl_s != 0; i++) {
        if (part_lock(seg, w, parts[i]) != 0)
            continue;
        struct shm_ring_ctx c = {seg, w, shm_dir_part(seg, parts[i].idx), q,
                                 now};
        k += shm_ring_ttl_locked(&c, q->opts.ttl_s);
        shm_ring_unlock(c.p);
    }
    if (parts != stack)
        free(parts);
    return k;
}

/* Evict oldest messages of c->p, none enqueued after upto_ms, until
 * dropping len messages and bytes is done (or none is left to evict);
 * decrements both. */
static void
evict_locked(struct shm_ring_ctx *c, uint64_t upto_ms, uint64_t *len,
             uint64_t *bytes)
{
    while ((*len > 0 || *bytes > 0) && c->p->head != 0 &&
           shm_ring_msg(c->seg, c->p->head)->enq_ms <= upto_ms) {
        uint64_t before = atomic_load_explicit(&c->p->cost, RELAXED);
        shm_ring_drop_locked(c, 1, SHM_DROP_EVICT);
        uint64_t freed = before - atomic_load_explicit(&c->p->cost, RELAXED);
        *len -= *len > 0;
        *bytes -= *bytes > freed ? freed : *bytes;
    }
}

#define EVICT_MISSES 4 /* rounds of evict_others that may find nothing */

/* dropOldest across the other partitions of qr: the queue's oldest
 * messages first.  Each round locks the partition whose head is the oldest
 * (racy oldest_ms, exact under its lock) and evicts down to the next
 * partition's oldest; one lock at a time. */
static void
evict_others(struct shm_seg *seg, int w, struct shm_ref qr, uint32_t except,
             uint64_t len, uint64_t bytes, uint64_t now)
{
    struct shm_ref stack[BROKER_STACK], *parts;
    uint32_t n = queue_parts(seg, qr, stack, &parts);
    int misses = 0;

    while (len > 0 || bytes > 0) {
        uint64_t best_ms = UINT64_MAX, next_ms = UINT64_MAX;
        uint32_t best = n;
        for (uint32_t i = 0; i < n; i++) {
            struct shm_part *p = shm_dir_part(seg, parts[i].idx);
            uint64_t ms = atomic_load_explicit(&p->oldest_ms, RELAXED);
            if (parts[i].idx == except ||
                atomic_load_explicit(&p->count, RELAXED) == 0)
                continue;
            if (ms < best_ms) {
                next_ms = best_ms;
                best_ms = ms;
                best = i;
            } else if (ms < next_ms) {
                next_ms = ms;
            }
        }
        if (best == n || part_lock(seg, w, parts[best]) != 0)
            break;
        struct shm_ring_ctx c = {seg, w, shm_dir_part(seg, parts[best].idx),
                                 shm_dir_queue(seg, qr.idx), now};
        uint64_t before = len + bytes;
        evict_locked(&c, next_ms, &len, &bytes);
        shm_ring_unlock(c.p);
        /* The racy pick moved on (acked or evicted meanwhile): look again,
         * a few times; push_link then checks the bounds again. */
        if (len + bytes == before && ++misses > EVICT_MISSES)
            break;
    }
    if (parts != stack)
        free(parts);
}

/* How far past its bounds queue qr would be with n more messages of cost
 * bytes (racy sums; the caller holds one partition lock). */
static void
push_over(struct shm_seg *seg, struct shm_ref qr, const struct shm_qopts *o,
          uint32_t n, uint64_t cost, uint64_t *olen, uint64_t *obytes)
{
    uint64_t len, bytes;

    queue_held(seg, qr, &len, &bytes, NULL, NULL);
    *olen = len + n > o->max_length ? len + n - o->max_length : 0;
    *obytes = bytes + cost > o->max_bytes ? bytes + cost - o->max_bytes : 0;
}

/* Link the allocated chains into (qr, part) within bounds; -ENOSPC. */
static int
push_link(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_name part,
          uint32_t first, uint32_t last, uint32_t n, uint64_t cost,
          uint64_t now, uint64_t *first_seq)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_qopts o = q->opts;
    struct shm_ref pr;
    uint64_t kick = 0, olen, obytes;
    int rc = -ESTALE;

    for (int t = 0; t < BROKER_TRIES; t++) {
        /* A refused push changes nothing: a partition it would make is made
         * only when the queue has room (racy here, exact under the lock
         * below; a push racing another may still leave it empty). */
        rc = shm_dir_find_part(seg, w, qr, part, 0, now, &pr);
        if (rc == -ENOENT && o.policy != SHM_POLICY_DROP_OLDEST) {
            push_over(seg, qr, &o, n, cost, &olen, &obytes);
            if (olen > 0 || obytes > 0)
                return -ENOSPC;
        }
        if (rc == -ENOENT)
            rc = shm_dir_find_part(seg, w, qr, part, 1, now, &pr);
        if (rc != 0)
            return rc;
        if ((rc = part_lock(seg, w, pr)) != 0)
            continue;
        /* partition lock: ttl, bounds, link, waiters. */
        struct shm_ring_ctx c = {seg, w, shm_dir_part(seg, pr.idx), q, now};
        shm_ring_ttl_locked(&c, o.ttl_s);
        push_over(seg, qr, &o, n, cost, &olen, &obytes);
        if ((olen > 0 || obytes > 0) && o.policy == SHM_POLICY_DROP_OLDEST)
            evict_locked(&c, UINT64_MAX, &olen, &obytes);
        if (olen > 0 || obytes > 0) {
            shm_ring_unlock(c.p);
            if (o.policy != SHM_POLICY_DROP_OLDEST)
                return -ENOSPC;
            evict_others(seg, w, qr, pr.idx, olen, obytes, now);
            rc = -ENOSPC;
            continue;
        }
        shm_ring_link_locked(&c, first, last, n, cost, first_seq);
        part_due_locked(seg, pr.idx, c.p, q);
        wake_post_locked(seg, qr, pr, &kick);
        shm_ring_unlock(c.p);
        wake_kick(seg, kick);
        return 0;
    }
    return rc == -ESTALE ? -EAGAIN : rc;
}

/* shm_push - see broker.h. */
int
shm_push(struct shm_seg *seg, int worker, struct shm_name queue,
         struct shm_name part, const struct shm_msg_in *msgs, uint32_t n,
         uint64_t now, uint64_t *first_seq)
{
    struct shm_ref qr;
    uint64_t cost = 0;
    uint32_t first, last;
    int rc;

    *first_seq = 0;
    if (n == 0)
        return 0;
    /* A push that fails changes nothing: the queue is made only once the
     * messages are allocated; until then a missing one has the defaults. */
    struct shm_qopts o = shm_params_of(seg)->defaults;
    rc = shm_dir_find_queue(seg, worker, queue, 0, now, &qr);
    if (rc == 0)
        o = shm_dir_queue(seg, qr.idx)->opts;
    else if (rc != -ENOENT)
        return rc;
    int found = rc == 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t c = shm_ring_msg_cost(msgs[i].len);
        if (c > o.max_bytes) {
            shm_count(seg, worker, SHM_C_PUSH_REJECTED_TOO_LARGE, 1);
            return -EMSGSIZE;
        }
        cost += c;
    }
    if (n > o.max_length || cost > o.max_bytes) {
        shm_count(seg, worker, SHM_C_PUSH_REJECTED_FULL, 1);
        return -ENOSPC;
    }
    rc = push_room(seg, cost)
             ? push_alloc(seg, worker, msgs, n, now, &first, &last)
             : -ENOBUFS;
    if (rc == -ENOBUFS && found && queue_ttl(seg, worker, qr, now) > 0)
        rc = push_room(seg, cost)
                 ? push_alloc(seg, worker, msgs, n, now, &first, &last)
                 : -ENOBUFS;
    if (rc == -ENOBUFS)
        shm_count(seg, worker, SHM_C_PUSH_UNAVAILABLE, 1);
    if (rc != 0)
        return rc;
    for (int t = 0; t < BROKER_TRIES; t++) {
        /* Made now if missing, or again if collected meanwhile. */
        if (!found &&
            (rc = shm_dir_find_queue(seg, worker, queue, 1, now, &qr)) != 0)
            break;
        rc = push_link(seg, worker, qr, part, first, last, n, cost, now,
                       first_seq);
        if (rc != -ESTALE)
            break;
        found = 0;
    }
    if (rc != 0) {
        chains_free(seg, worker, first);
        if (rc == -ENOSPC)
            shm_count(seg, worker, SHM_C_PUSH_REJECTED_FULL, 1);
        return rc;
    }
    atomic_store_explicit(&shm_dir_queue(seg, qr.idx)->last_active, now,
                          RELAXED);
    shm_count(seg, worker, SHM_C_PUSH_ACCEPTED, n);
    return 0;
}

/* ---- pop ----------------------------------------------------------- */

/* Pop from one partition into the sink; with park, set this worker's
 * waiter bit when nothing was taken.  Returns taken or -errno (-ESTALE:
 * the partition was freed meanwhile). */
static int
pop_part(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_ref pr,
         const struct shm_pop_req *req, uint64_t h, uint32_t batch, int park,
         uint64_t now, struct shm_sink *sink)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_part *p = shm_dir_part(seg, pr.idx);
    int rc = -EAGAIN;

    for (int t = 0; t < BROKER_TRIES; t++) {
        if ((rc = part_lock(seg, w, pr)) != 0)
            return rc;
        /* partition lock: ttl, take, lease, park. */
        struct shm_ring_ctx c = {seg, w, p, q, now};
        shm_ring_ttl_locked(&c, q->opts.ttl_s);
        uint32_t gs = shm_ring_gs_find_locked(&c, req->group, h);
        if (gs == 0) {
            shm_ring_unlock(p);
            rc = group_ensure(seg, w, qr, pr, req->group, h, req->from, now);
            if (rc != 0)
                return rc;
            continue;
        }
        rc = shm_ring_take_locked(&c, gs, batch, req->auto_ack, sink);
        part_due_locked(seg, pr.idx, p, q);
        atomic_store_explicit(
            &shm_ring_grp(seg, shm_ring_gs(seg, gs)->grp)->last_active, now,
            RELAXED);
        if (rc == 0 && park)
            atomic_fetch_or(&p->waiters, 1ULL << w);
        shm_ring_unlock(p);
        if (rc > 0)
            shm_count(seg, w, SHM_C_POP, (uint64_t)rc);
        return rc;
    }
    return rc;
}

/* Any-partition pop: round robin from the queue's rotating index. */
static int
pop_any(struct shm_seg *seg, int w, struct shm_ref qr,
        const struct shm_pop_req *req, uint64_t h, uint64_t now,
        struct shm_sink *sink)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_ref stack[BROKER_STACK], *parts;
    uint32_t taken = 0;
    int rc = 0, checked = 0;

    /* The bit goes up before the scan, so a push to a partition already
     * scanned still finds it: no lost wake-up.  It is per worker, not per
     * pop: one that was up already belongs to another pop parked here, and
     * stays (at worst one wake too many; shm_unpark clears it). */
    uint64_t had = 0;
    if (req->park)
        had = atomic_fetch_or(&q->waiters, 1ULL << w) & (1ULL << w);
    uint32_t n = queue_parts(seg, qr, stack, &parts);
    uint32_t start = n ? atomic_fetch_add(&q->rr, 1) % n : 0;
    if (n == 0) {
        rc = group_register(seg, w, qr, req->group, h, req->from, now);
        checked = rc == 0; /* under the queue lock, after the bit went up */
    }
    for (uint32_t i = 0; i < n && taken < req->batch; i++) {
        struct shm_ref pr = parts[(start + i) % n];
        int r =
            pop_part(seg, w, qr, pr, req, h, req->batch - taken, 0, now, sink);
        if (r == -ENOMEM && sink->count == 0) {
            rc = r;
            break;
        }
        if (r > 0)
            taken += (uint32_t)r;
        else if (r != -ESTALE && r != -ENOMEM && r != 0 && taken == 0)
            rc = r;
    }
    if (parts != stack)
        free(parts);
    /* About to park: under the queue lock, the record must still be this
     * queue (see queue_free_locked); else the pop starts over. */
    if (req->park && taken == 0 && rc == 0 && !checked) {
        if (queue_lock(seg, w, qr) == 0)
            shm_unlock(&q->lock);
        else
            rc = -ESTALE;
    }
    if (req->park && !had && (taken > 0 || rc < 0))
        atomic_fetch_and(&q->waiters, ~(1ULL << w));
    return taken > 0 ? (int)taken : rc;
}

/* shm_pop - see broker.h. */
int
shm_pop(struct shm_seg *seg, int worker, const struct shm_pop_req *req,
        uint64_t now, struct shm_sink *sink)
{
    uint64_t h = group_hash(req->group);
    struct shm_ref qr, pr;
    int rc = -EAGAIN;

    sink->used = 0;
    sink->count = 0;
    sink->need = 0;
    for (int t = 0; t < BROKER_TRIES; t++) {
        if ((rc = shm_dir_find_queue(seg, worker, req->queue, 1, now, &qr)))
            return rc;
        atomic_store_explicit(&shm_dir_queue(seg, qr.idx)->last_active, now,
                              RELAXED);
        if (req->part.len == 0)
            rc = pop_any(seg, worker, qr, req, h, now, sink);
        else if ((rc = shm_dir_find_part(seg, worker, qr, req->part, 1, now,
                                         &pr)) == 0)
            rc = pop_part(seg, worker, qr, pr, req, h, req->batch, req->park,
                          now, sink);
        if (rc != -ESTALE)
            return rc;
    }
    return rc;
}

/* shm_popped_next - see broker.h. */
const struct shm_popped *
shm_popped_next(const struct shm_sink *sink, const struct shm_popped *prev)
{
    size_t off = 0;

    if (prev != NULL) {
        off = (size_t)((const unsigned char *)prev - sink->buf);
        off += (sizeof(*prev) + prev->part_len + prev->len + 7) & ~(size_t)7;
    }
    if (off >= sink->used)
        return NULL;
    return (const struct shm_popped *)(sink->buf + off);
}

/* ---- ack, extend, release ------------------------------------------- */

/* Resolve (queue, part) without creating; 0 or -ENOENT. */
static int
find_qp(struct shm_seg *seg, int w, struct shm_name queue, struct shm_name part,
        uint64_t now, struct shm_ref *qr, struct shm_ref *pr)
{
    int rc = shm_dir_find_queue(seg, w, queue, 0, now, qr);

    if (rc == 0)
        rc = shm_dir_find_part(seg, w, *qr, part, 0, now, pr);
    return rc == -ESTALE ? -ENOENT : rc;
}

/* Apply acks (extend when ext) of one partition under one lock. */
static void
ack_apply(struct shm_seg *seg, int w, struct shm_name queue,
          struct shm_name part, struct shm_name group, struct shm_ack *acks,
          uint32_t n, uint64_t now, int ext)
{
    uint64_t h = group_hash(group), kick = 0;
    struct shm_ref qr, pr;
    int found = 0;

    for (uint32_t i = 0; i < n; i++)
        acks[i].outcome = SHM_OUT_UNKNOWN;
    if (find_qp(seg, w, queue, part, now, &qr, &pr) == 0 &&
        part_lock(seg, w, pr) == 0) {
        /* partition lock: leases, head advance, waiters. */
        struct shm_queue *q = shm_dir_queue(seg, qr.idx);
        struct shm_ring_ctx c = {seg, w, shm_dir_part(seg, pr.idx), q, now};
        uint32_t gs = shm_ring_gs_find_locked(&c, group, h);
        if (gs != 0) {
            found = 1;
            if (ext) {
                /* A shorter extension moves the deadline earlier. */
                shm_ring_extend_locked(&c, gs, acks, n);
                part_due_locked(seg, pr.idx, c.p, q);
            } else
                shm_ring_ack_locked(&c, gs, acks, n);
            atomic_store_explicit(
                &shm_ring_grp(seg, shm_ring_gs(seg, gs)->grp)->last_active, now,
                RELAXED);
            for (uint32_t i = 0; i < n && !ext; i++)
                if (acks[i].outcome == SHM_OUT_REDELIVERED) {
                    wake_post_locked(seg, qr, pr, &kick);
                    break;
                }
        }
        shm_ring_unlock(c.p);
        wake_kick(seg, kick);
        if (found)
            atomic_store_explicit(&q->last_active, now, RELAXED);
    }
    for (uint32_t i = 0; i < n; i++)
        if (acks[i].moved && acks[i].outcome == SHM_OUT_UNKNOWN)
            acks[i].outcome = SHM_OUT_STALE;
    for (uint32_t i = 0; i < n && !ext; i++) {
        static const enum shm_counter ctr[] = {
            [SHM_OUT_ACKED] = SHM_C_ACK_ACKED,
            [SHM_OUT_ACKED_DROPPED] = SHM_C_ACK_ACKED,
            [SHM_OUT_REDELIVERED] = SHM_C_ACK_REDELIVERED,
            [SHM_OUT_STALE] = SHM_C_ACK_STALE,
            [SHM_OUT_UNKNOWN] = SHM_C_ACK_UNKNOWN,
        };
        shm_count(seg, w, ctr[acks[i].outcome], 1);
    }
}

/* shm_ack - see broker.h. */
void
shm_ack(struct shm_seg *seg, int worker, struct shm_name queue,
        struct shm_name part, struct shm_name group, struct shm_ack *acks,
        uint32_t n, uint64_t now)
{
    ack_apply(seg, worker, queue, part, group, acks, n, now, 0);
}

/* shm_extend - see broker.h. */
void
shm_extend(struct shm_seg *seg, int worker, struct shm_name queue,
           struct shm_name part, struct shm_name group, struct shm_ack *ents,
           uint32_t n, uint64_t now)
{
    ack_apply(seg, worker, queue, part, group, ents, n, now, 1);
}

/* shm_release - see broker.h.  Consecutive records of one partition share
 * one lock. */
void
shm_release(struct shm_seg *seg, int worker, struct shm_name queue,
            struct shm_name group, const struct shm_sink *sink, uint64_t now)
{
    uint64_t h = group_hash(group);
    const struct shm_popped *r = shm_popped_next(sink, NULL);

    while (r != NULL) {
        struct shm_name part = {(const char *)(r + 1), r->part_len};
        struct shm_ref qr, pr;
        uint64_t kick = 0;
        int any = 0;
        if (find_qp(seg, worker, queue, part, now, &qr, &pr) != 0 ||
            part_lock(seg, worker, pr) != 0) {
            r = shm_popped_next(sink, r);
            continue;
        }
        /* partition lock: leases back to ready, waiters. */
        struct shm_ring_ctx c = {seg, worker, shm_dir_part(seg, pr.idx),
                                 shm_dir_queue(seg, qr.idx), now};
        uint32_t gs = shm_ring_gs_find_locked(&c, group, h);
        do {
            if (gs != 0)
                any |= shm_ring_release_locked(&c, gs, r->seq, r->attempts);
            r = shm_popped_next(sink, r);
        } while (r != NULL && r->part_len == part.len &&
                 memcmp(r + 1, part.ptr, part.len) == 0);
        if (any)
            wake_post_locked(seg, qr, pr, &kick);
        shm_ring_unlock(c.p);
        wake_kick(seg, kick);
    }
}

/* ---- admin ------------------------------------------------------------ */

/* shm_queue_reset - see broker.h. */
int64_t
shm_queue_reset(struct shm_seg *seg, int worker, struct shm_name queue,
                uint64_t now)
{
    struct shm_ref qr, stack[BROKER_STACK], *parts;
    int64_t k = 0;

    if (shm_dir_find_queue(seg, worker, queue, 0, now, &qr) != 0)
        return 0;
    uint32_t n = queue_parts(seg, qr, stack, &parts);
    for (uint32_t i = 0; i < n; i++) {
        if (part_lock(seg, worker, parts[i]) != 0)
            continue;
        struct shm_ring_ctx c = {seg, worker, shm_dir_part(seg, parts[i].idx),
                                 shm_dir_queue(seg, qr.idx), now};
        k += (int64_t)shm_ring_reset_locked(&c);
        shm_ring_unlock(c.p);
    }
    if (parts != stack)
        free(parts);
    /* Dropped by a client's call, as a DELETE drops them. */
    if (k > 0)
        shm_count(seg, worker, SHM_C_DROP_DELETED, (uint64_t)k);
    return k;
}

/* Free queue qr's partitions (only idle, empty ones when idle_ms != 0) and,
 * when none is left, its registry and record.  Queue lock held.  Returns
 * the messages dropped; *freed says whether the queue went. */
static uint64_t
queue_free_locked(struct shm_seg *seg, int w, struct shm_ref qr, uint64_t now,
                  uint64_t idle_ms, int *freed)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t k = 0, kick = 0;

    *freed = 0;
    /* queue lock: an idle collection looks again at what a pop changes
     * without it.  A pop that parks raises its waiter bit, then takes this
     * lock to see the queue is still there (pop_any): either it is seen
     * here, or the record is gone when the pop gets the lock. */
    if (idle_ms != 0 && (atomic_load(&q->waiters) != 0 ||
                         atomic_load(&q->last_active) + idle_ms > now)) {
        shm_unlock(&q->lock);
        return 0;
    }
    for (int t = 0; t < BROKER_TRIES; t++) {
        struct shm_ref stack[BROKER_STACK], *parts;
        uint32_t n = queue_parts(seg, qr, stack, &parts), i;
        for (i = 0; i < n; i++) {
            struct shm_part *p = shm_dir_part(seg, parts[i].idx);
            int rc = part_lock(seg, w, parts[i]);
            if (rc == -ESTALE) /* marked dead by a killed deleter */
                shm_dir_free_part(seg, w, parts[i].idx);
            if (rc != 0)
                continue;
            /* partition lock: empty it and mark it dead. */
            if (idle_ms != 0 &&
                (p->head != 0 || atomic_load(&p->waiters) != 0 ||
                 p->last_active + idle_ms > now)) {
                shm_ring_unlock(p);
                break;
            }
            struct shm_ring_ctx c = {seg, w, p, q, now};
            k += shm_ring_clear_locked(&c);
            wake_post_locked(seg, qr, parts[i], &kick);
            atomic_store(&p->alive, 0);
            p->gen++;
            shm_ring_unlock(p);
            shm_dir_free_part(seg, w, parts[i].idx);
        }
        if (parts != stack)
            free(parts);
        if (i < n)
            break;
        while (q->groups != 0) {
            uint32_t e = q->groups;
            q->intent = e;
            q->groups = shm_ring_grp(seg, e)->next;
            registry_free(seg, w, e);
            q->intent = 0;
            atomic_fetch_sub(&q->ngroups, 1);
        }
        uint64_t qm = atomic_exchange(&q->waiters, 0);
        for (; qm != 0; qm &= qm - 1) {
            int x = __builtin_ctzll(qm);
            if (shm_wake_post(seg, x, handle_of(0, qr.idx, qr.gen)))
                kick |= 1ULL << x;
        }
        if (shm_dir_free_queue(seg, w, qr.idx) == 0) {
            *freed = 1;
            break;
        }
    }
    shm_unlock(&q->lock);
    wake_kick(seg, kick);
    return k;
}

/* shm_queue_delete - see broker.h. */
int
shm_queue_delete(struct shm_seg *seg, int worker, struct shm_name queue,
                 uint64_t now)
{
    struct shm_ref qr;
    int freed;

    for (int t = 0; t < BROKER_TRIES; t++) {
        if (shm_dir_find_queue(seg, worker, queue, 0, now, &qr) != 0)
            return 0;
        if (queue_lock(seg, worker, qr) != 0)
            continue;
        uint64_t k = queue_free_locked(seg, worker, qr, now, 0, &freed);
        if (k > 0)
            shm_count(seg, worker, SHM_C_DROP_DELETED, k);
        return 1;
    }
    return 0;
}

/* shm_queue_declare - see broker.h. */
int
shm_queue_declare(struct shm_seg *seg, int worker, struct shm_name queue,
                  const struct shm_qopts *opts)
{
    uint64_t now = shm_now_ms();
    struct shm_ref qr;
    int rc = -EAGAIN;

    for (int t = 0; t < BROKER_TRIES; t++) {
        if ((rc = shm_dir_find_queue(seg, worker, queue, 1, now, &qr)) != 0)
            return rc;
        if ((rc = queue_lock(seg, worker, qr)) != 0)
            continue;
        struct shm_queue *q = shm_dir_queue(seg, qr.idx);
        struct shm_ref stack[BROKER_STACK], *parts;
        q->opts = *opts;
        q->declared = 1;
        /* A new ttl may make messages held already due now. */
        uint32_t n = queue_parts(seg, qr, stack, &parts);
        for (uint32_t i = 0; i < n; i++)
            shm_due_part(seg, parts[i].idx, 0);
        if (parts != stack)
            free(parts);
        shm_unlock(&q->lock);
        return 0;
    }
    return rc;
}

/* ---- listing and depth ---------------------------------------------- */

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
    queue_held(seg, qr, &len, &bytes, &leased, &waiting);
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

/* shm_queue_list - see broker.h.  Scans the table without the dir lock: a
 * record's name is re-validated by its generation after reading it. */
int
shm_queue_list(struct shm_seg *seg, struct shm_name prefix, uint32_t limit,
               uint64_t now,
               void (*fn)(void *arg, const struct shm_queue_info *q), void *arg)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t bump = atomic_load(&d->q_bump), n = 0, cap = 64;
    struct list_ent *v = malloc(sizeof(*v) * cap);
    struct shm_queue_info *qi = malloc(sizeof(*qi));
    int listed = 0;

    (void)now;
    if (v == NULL || qi == NULL)
        goto out;
    for (uint32_t i = 0; i < bump; i++) {
        struct shm_queue *q = shm_dir_queue(seg, i);
        uint32_t gen = q->gen, len = q->name_len;
        if (!atomic_load(&q->alive) || len < prefix.len || len > SHM_NAME_MAX)
            continue;
        if (n == cap) {
            struct list_ent *nv = realloc(v, sizeof(*v) * cap * 2);
            if (nv == NULL)
                break;
            v = nv;
            cap *= 2;
        }
        shm_arena_read(seg, q->name_ref, 0, v[n].name, len);
        if (!atomic_load(&q->alive) || q->gen != gen ||
            memcmp(v[n].name, prefix.ptr, prefix.len) != 0)
            continue;
        v[n].r.idx = i;
        v[n].r.gen = gen;
        v[n].len = len;
        n++;
    }
    qsort(v, n, sizeof(*v), list_cmp);
    for (uint32_t i = 0; i < n && (uint32_t)listed < limit; i++) {
        if (!queue_same(seg, v[i].r))
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

/* Per-partition figures of pr for group (h) or for none. */
static int
part_depth(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_ref pr,
           const struct shm_name *group, uint64_t h, uint64_t now,
           struct shm_part_info *pi, uint64_t *skipped)
{
    struct shm_part *p = shm_dir_part(seg, pr.idx);
    struct shm_ring_depth rd;
    int rc;

    if ((rc = part_lock(seg, w, pr)) != 0)
        return rc;
    /* partition lock: a consistent snapshot of this partition. */
    struct shm_ring_ctx c = {seg, w, p, shm_dir_queue(seg, qr.idx), now};
    uint32_t gs = group ? shm_ring_gs_find_locked(&c, *group, h) : 0;
    shm_ring_depth_locked(&c, gs, &rd);
    memset(pi, 0, sizeof(*pi));
    pi->name_len = p->name_len;
    shm_arena_read(seg, p->name_ref, 0, pi->name, pi->name_len);
    pi->pending = rd.pending;
    pi->leased = rd.leased;
    pi->waiting = shm_dir_parked_sum(seg, 1, pr.idx);
    pi->bytes = atomic_load_explicit(&p->cost, RELAXED) + SHM_PART_OVERHEAD;
    pi->oldest_age_ms = rd.oldest_age_ms;
    shm_ring_unlock(p);
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
    if (*out == NULL || queue_lock(seg, -1, qr) != 0)
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

/* Sum a group's pending and skipped over the partitions. */
static void
group_depth(struct shm_seg *seg, struct shm_ref qr, struct shm_ref *parts,
            uint32_t n, uint64_t now, struct shm_group_info *gi)
{
    struct shm_name g = {gi->name, gi->name_len};
    uint64_t h = group_hash(g), skipped;
    struct shm_part_info pi;

    gi->pending = gi->skipped = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (part_depth(seg, -1, qr, parts[i], &g, h, now, &pi, &skipped) != 0)
            continue;
        gi->pending += pi.pending;
        gi->skipped += skipped;
    }
}

/* shm_queue_depth - see broker.h.  Read-only, and called without a worker
 * slot: it locks as w = -1 (a repair it runs frees nothing itself). */
uint32_t
shm_part_each(struct shm_seg *seg,
              void (*fn)(void *arg, struct shm_name queue,
                         struct shm_name part),
              void *arg)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t bump = atomic_load(&d->p_bump), listed = 0;
    char qn[SHM_NAME_MAX], pn[SHM_NAME_MAX];

    for (uint32_t i = 0; i < bump; i++) {
        struct shm_part *p = shm_dir_part(seg, i);
        uint32_t gen = p->gen, plen = p->name_len, qi = p->queue;
        struct shm_queue *q;
        uint32_t qgen, qlen;

        if (!atomic_load(&p->alive) ||
            (atomic_load(&p->count) == 0 && atomic_load(&p->leased) == 0) ||
            plen == 0 || plen > SHM_NAME_MAX || qi >= d->max_queues)
            continue;
        q = shm_dir_queue(seg, qi);
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

int
shm_queue_part_each(struct shm_seg *seg, struct shm_name queue, uint64_t now,
                    int (*fn)(void *arg, struct shm_name part, uint64_t held),
                    void *arg)
{
    struct shm_ref qr, stack[BROKER_STACK], *parts;
    char name[SHM_NAME_MAX];
    uint32_t n;
    int r = 0;

    if (shm_dir_find_queue(seg, -1, queue, 0, now, &qr) != 0)
        return 0;
    n = queue_parts(seg, qr, stack, &parts);
    for (uint32_t i = 0; i < n && r == 0; i++) {
        struct shm_part *p = shm_dir_part(seg, parts[i].idx);
        uint32_t len = p->name_len;
        if (!atomic_load(&p->alive) || p->gen != parts[i].gen || len == 0 ||
            len > SHM_NAME_MAX)
            continue;
        shm_arena_read(seg, p->name_ref, 0, name, len);
        if (p->gen != parts[i].gen)
            continue;
        r = fn(arg, (struct shm_name){name, len},
               atomic_load(&p->count) + atomic_load(&p->leased));
    }
    if (parts != stack)
        free(parts);
    return r;
}

int
shm_queue_depth(struct shm_seg *seg, struct shm_name queue,
                const struct shm_name *group, uint64_t now,
                struct shm_queue_info *q,
                void (*part_fn)(void *arg, const struct shm_part_info *p),
                void (*group_fn)(void *arg, const struct shm_group_info *g),
                void *arg)
{
    struct shm_ref qr, stack[BROKER_STACK], *parts;
    struct shm_part_info *pi = malloc(sizeof(*pi));
    struct shm_group_info *gi = NULL;
    uint64_t h = group ? group_hash(*group) : 0, skipped;
    int rc = shm_dir_find_queue(seg, -1, queue, 0, now, &qr);

    if (rc != 0 || pi == NULL) {
        free(pi);
        return rc != 0 ? rc : -ENOMEM;
    }
    queue_info(seg, qr, q);
    uint32_t n = queue_parts(seg, qr, stack, &parts);
    for (uint32_t i = 0; i < n; i++)
        if (part_depth(seg, -1, qr, parts[i], group, h, now, pi, &skipped) ==
                0 &&
            part_fn != NULL)
            part_fn(arg, pi);
    if (group != NULL) {
        gi = calloc(1, sizeof(*gi));
        if (gi != NULL && group->len <= SHM_NAME_MAX) {
            memcpy(gi->name, group->ptr, group->len);
            gi->name_len = group->len;
            group_depth(seg, qr, parts, n, now, gi);
            if (group_fn != NULL)
                group_fn(arg, gi);
        }
    } else {
        uint32_t k = group_names(seg, qr, &gi);
        for (uint32_t i = 0; i < k; i++) {
            group_depth(seg, qr, parts, n, now, &gi[i]);
            if (group_fn != NULL)
                group_fn(arg, &gi[i]);
        }
    }
    free(gi);
    free(pi);
    if (parts != stack)
        free(parts);
    return 0;
}

/* shm_gauges_read - see stats.h.  Racy sums over the tables. */
void
shm_gauges_read(struct shm_seg *seg, uint64_t now, struct shm_gauges *g)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t qb = atomic_load(&d->q_bump), pb = atomic_load(&d->p_bump);

    memset(g, 0, sizeof(*g));
    g->memory_used = shm_arena_used_bytes(seg);
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
        g->parked_pops += shm_dir_parked_sum(seg, 1, i);
        if (n > 0 && now > o && now - o > g->oldest_age_ms)
            g->oldest_age_ms = now - o;
    }
}

/* ---- parked pops ------------------------------------------------------ */

/* shm_pop_handle - see broker.h. */
uint64_t
shm_pop_handle(struct shm_seg *seg, struct shm_name queue, struct shm_name part)
{
    struct shm_ref qr, pr;

    if (shm_dir_find_queue(seg, -1, queue, 0, 0, &qr) != 0)
        return 0;
    if (part.len == 0)
        return handle_of(0, qr.idx, qr.gen);
    if (shm_dir_find_part(seg, -1, qr, part, 0, 0, &pr) != 0)
        return 0;
    return handle_of(1, pr.idx, pr.gen);
}

/* shm_unpark - see broker.h.  Clearing a bit needs no lock. */
void
shm_unpark(struct shm_seg *seg, int worker, uint64_t handle)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t idx = (uint32_t)(handle >> 32) & 0x7fffffffu;
    uint32_t gen = (uint32_t)handle;
    uint64_t bit = ~(1ULL << worker);

    if (handle >> 63) {
        if (idx >= d->max_parts)
            return;
        struct shm_part *p = shm_dir_part(seg, idx);
        if (p->gen == gen)
            atomic_fetch_and(&p->waiters, bit);
    } else if (handle != 0 && idx < d->max_queues) {
        struct shm_queue *q = shm_dir_queue(seg, idx);
        if (q->gen == gen)
            atomic_fetch_and(&q->waiters, bit);
    }
}

/* shm_park_count - see broker.h. */
void
shm_park_count(struct shm_seg *seg, int worker, uint64_t handle, int delta)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t idx = (uint32_t)(handle >> 32) & 0x7fffffffu;
    uint32_t gen = (uint32_t)handle;
    int part = (int)(handle >> 63);

    if (handle == 0 || worker < 0 || (uint32_t)worker >= d->parked_cols ||
        idx >= (part ? d->max_parts : d->max_queues))
        return;
    if ((part ? shm_dir_part(seg, idx)->gen : shm_dir_queue(seg, idx)->gen) !=
        gen)
        return;
    _Atomic uint16_t *c = &shm_dir_parked(seg, part, idx)[worker];
    if (delta > 0 || atomic_load(c) > 0)
        atomic_fetch_add(c, (uint16_t)delta);
}

/* ---- maintenance and reaping ------------------------------------------- */

/* Lease expiry and ttl of partition i (taken off the due heap), then its
 * next due time back on the heap. */
static void
maintain_part(struct shm_seg *seg, uint32_t i, uint64_t now)
{
    struct shm_part *p = shm_dir_part(seg, i);
    struct shm_ref pr = {i, p->gen};

    if (!atomic_load(&p->alive))
        return;
    struct shm_ref qr = {p->queue, p->queue_gen};
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    uint64_t kick = 0;
    if (part_lock(seg, SHM_STATS_MASTER, pr) != 0)
        return;
    /* partition lock: ttl, expiry, waiters, next due time. */
    struct shm_ring_ctx c = {seg, SHM_STATS_MASTER, p, q, now};
    shm_ring_ttl_locked(&c, q->opts.ttl_s);
    if (shm_ring_expire_locked(&c, q->opts.retry_limit) > 0)
        wake_post_locked(seg, qr, pr, &kick);
    part_due_locked(seg, i, p, q);
    shm_ring_unlock(p);
    wake_kick(seg, kick);
}

/* group_busy - whether registry entry e holds live leases (not yet run
 * out: maintenance expired those first) in any partition: a consumer still
 * inside its lease is not idle, however long since it popped or acked. */
static int
group_busy(struct shm_seg *seg, int w, const struct shm_ref *parts, uint32_t n,
           uint32_t e)
{
    for (uint32_t i = 0; i < n; i++) {
        struct shm_part *p = shm_dir_part(seg, parts[i].idx);
        int busy = 0;

        if (part_lock(seg, w, parts[i]) != 0)
            continue;
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

/* Forget qr's groups idle for idle_ms (queue lock, one partition lock at a
 * time), then let each partition free what they held.  Returns the earliest
 * last activity of the groups kept (UINT64_MAX: none). */
static uint64_t
maintain_groups(struct shm_seg *seg, struct shm_ref qr, uint64_t now,
                uint64_t idle_ms)
{
    const int w = SHM_STATS_MASTER;
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_ref stack[BROKER_STACK], *parts;
    uint64_t earliest = UINT64_MAX;
    int forgot = 0;

    if (queue_lock(seg, w, qr) != 0)
        return earliest;
    uint32_t n = queue_parts(seg, qr, stack, &parts);
    /* A parked pop is a pop still going on: its group is not idle, however
     * long it waits (max_wait_ms may pass implicit_idle_s).  Which group a
     * pop waits for is not recorded, so while any pop waits on the queue
     * none is forgotten; the queue is looked at again an idle time on. */
    int parked = shm_dir_parked_sum(seg, 0, qr.idx) != 0;
    for (uint32_t i = 0; i < n && !parked; i++)
        parked = shm_dir_parked_sum(seg, 1, parts[i].idx) != 0;
    if (parked)
        earliest = now;
    for (uint32_t *link = &q->groups; *link != 0 && !parked;) {
        uint32_t e = *link;
        struct shm_grp *g = shm_ring_grp(seg, e);
        uint64_t last = atomic_load(&g->last_active);
        if (last + idle_ms > now || group_busy(seg, w, parts, n, e)) {
            earliest = last < earliest ? last : earliest;
            link = &g->next;
            continue;
        }
        for (uint32_t i = 0; i < n; i++) {
            if (part_lock(seg, w, parts[i]) != 0)
                continue;
            struct shm_ring_ctx c = {seg, w, shm_dir_part(seg, parts[i].idx), q,
                                     now};
            shm_ring_gs_remove_locked(&c, e);
            shm_ring_unlock(c.p);
        }
        q->intent = e;
        *link = g->next;
        registry_free(seg, w, e);
        q->intent = 0;
        atomic_fetch_sub(&q->ngroups, 1);
        forgot = 1;
    }
    for (uint32_t i = 0; forgot && i < n; i++) {
        if (part_lock(seg, w, parts[i]) != 0)
            continue;
        struct shm_ring_ctx c = {seg, w, shm_dir_part(seg, parts[i].idx), q,
                                 now};
        shm_ring_advance_locked(&c);
        shm_ring_unlock(c.p);
    }
    shm_unlock(&q->lock);
    if (parts != stack)
        free(parts);
    return earliest;
}

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
    queue_held(seg, qr, &len, &bytes, &leased, &waiting);
    if (len != 0 || leased != 0 || waiting != 0)
        return 0;
    if (queue_lock(seg, SHM_STATS_MASTER, qr) != 0)
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
    queue_free_locked(seg, SHM_STATS_MASTER, qr, now, idle_ms, &freed);
    return freed;
}

/* Idle groups and idle collection of queue i (taken off the due heap), then
 * back on the heap for when it could next be idle: every live queue is
 * visited about once per idle time, whatever its traffic. */
static void
maintain_queue(struct shm_seg *seg, uint32_t i, uint64_t now, uint64_t idle_ms)
{
    struct shm_queue *q = shm_dir_queue(seg, i);
    struct shm_ref qr = {i, q->gen};
    uint64_t last = UINT64_MAX;

    if (!atomic_load(&q->alive))
        return;
    if (atomic_load(&q->ngroups) != 0)
        last = maintain_groups(seg, qr, now, idle_ms);
    (void)maintain_collect(seg, qr, now, idle_ms, 0);
    if (!queue_same(seg, qr))
        return;
    uint64_t active = atomic_load(&q->last_active);
    last = active < last ? active : last;
    /* Idle but kept (messages, leases, parked pops): look again later. */
    shm_due_queue(seg, i,
                  last + idle_ms > now ? last + idle_ms : now + idle_ms);
}

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

/* shm_maintain - see broker.h.  Visits only what the due heap says is due,
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

/* shm_worker_reap - see broker.h. */
void
shm_worker_reap(struct shm_seg *seg, int worker)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint32_t pb = atomic_load(&d->p_bump), qb = atomic_load(&d->q_bump);
    uint64_t bit = ~(1ULL << worker);

    /* Each lock taken and dropped: a lock the dead worker held is repaired
     * by shm_lock() before its cells are reaped. */
    if (shm_dir_lock(seg) == 0)
        shm_dir_unlock(seg);
    for (uint32_t i = 0; i < qb; i++) {
        struct shm_queue *q = shm_dir_queue(seg, i);
        struct queue_repairer r = {q, SHM_STATS_MASTER};
        if (shm_lock(seg, &q->lock, queue_repair, &r) == 0)
            shm_unlock(&q->lock);
        atomic_fetch_and(&q->waiters, bit);
        atomic_store(&shm_dir_parked(seg, 0, i)[worker], 0);
    }
    for (uint32_t i = 0; i < pb; i++) {
        struct shm_part *p = shm_dir_part(seg, i);
        if (shm_ring_lock(seg, SHM_STATS_MASTER, p) == 0)
            shm_ring_unlock(p);
        atomic_fetch_and(&p->waiters, bit);
        atomic_store(&shm_dir_parked(seg, 1, i)[worker], 0);
    }
    /* The dead worker may have moved a deadline (a lease, a first message
     * under a ttl, a new queue) and died before telling the heap: each
     * record is looked at once and rescheduled from what it holds. */
    shm_due_all(seg);
    shm_arena_reap(seg, worker);
    shm_wake_reset(seg, worker);
}

/* ---- steps handover.c shares (broker_int.h) ---------------------------- */

/* Each forwards to the step broker.c's own operations use, so the static
 * names above stay as they are. */

int
shm_broker_part_lock(struct shm_seg *seg, int w, struct shm_ref pr)
{
    return part_lock(seg, w, pr);
}

uint64_t
shm_broker_group_hash(struct shm_name group)
{
    return group_hash(group);
}

int
shm_broker_group_ensure(struct shm_seg *seg, int w, struct shm_ref qr,
                        struct shm_ref pr, struct shm_name group,
                        enum shm_from from, uint64_t now)
{
    return group_ensure(seg, w, qr, pr, group, group_hash(group), from, now);
}

int
shm_broker_room(struct shm_seg *seg, uint64_t cost)
{
    return push_room(seg, cost);
}

void
shm_broker_chains_free(struct shm_seg *seg, int w, uint32_t first)
{
    chains_free(seg, w, first);
}

void
shm_broker_wake_post_locked(struct shm_seg *seg, struct shm_ref qr,
                            struct shm_ref pr, uint64_t *kick)
{
    wake_post_locked(seg, qr, pr, kick);
}

void
shm_broker_wake_kick(struct shm_seg *seg, uint64_t kick)
{
    wake_kick(seg, kick);
}

void
shm_broker_part_due_locked(struct shm_seg *seg, uint32_t idx,
                           const struct shm_part *p, const struct shm_queue *q)
{
    part_due_locked(seg, idx, p, q);
}
