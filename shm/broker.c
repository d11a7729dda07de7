/*
 * broker.c - the workers' requests (broker.h): push, pop, ack, extend,
 * release, and the bookkeeping of parked pops; composed from dir.c (names,
 * records), ring.c (one partition's contents) and the shared steps of
 * broker_int.h.
 *
 * A push checks the bounds, allocates a run of cells per message (tagged
 * INFLIGHT, arena.h) and copies the payloads in as sent, all before the
 * partition lock; then under it drops what passed its ttl, checks the
 * bounds again (evicting under dropOldest), links the batch with one
 * store, moves the partition's due time earlier if needed and posts a wake
 * to each parked waiter.  A pop, under the same lock, drops what passed
 * its ttl, finds its group's state (made at its first pop there), takes
 * redeliveries then new messages from the cursor, leases them unless
 * autoAck and copies each into the caller's sink; finding nothing with
 * park set, it raises this worker's waiter bit in that lock hold, so no
 * push in between is missed.
 *
 * Locking: the dir lock briefly per lookup; then one partition lock at a
 * time; a queue's own lock only to create groups (queue lock -> one
 * partition lock) and, briefly, for a pop about to park on the queue.
 * Wake-ups are posted under the partition lock and kicked after it.  No
 * syscalls, logging or malloc under any lock.  Errors: 0 or -errno.
 */
#include "shm/broker.h"

#include <errno.h>
#include <string.h>

#include "shm/broker_int.h"
#include "shm/conflate.h"
#include "shm/dead.h"
#include "shm/dir.h"
#include "shm/horizon.h"
#include "shm/inbox.h"
#include "shm/lock.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/stats.h"

#define RELAXED memory_order_relaxed

/* ---- push ---------------------------------------------------------- */

/* The data bytes message i's run holds: a keyed one's key besides (kx:
 * the extras of a conflating push, else NULL). */
static size_t
push_stored(const struct shm_msg_in *msgs, const struct shm_msg_extra *kx,
            uint32_t i)
{
    return (size_t)msgs[i].len +
           (kx != NULL && kx[i].has_key ? SHM_MSG_KEY_BYTES : 0);
}

/* Check n messages against their queue's bounds o: one larger than its
 * maxBytes is -EMSGSIZE; more than it could ever hold together (less what
 * the batch replaces of itself, cf) is -EFBIG under policy reject, while
 * dropOldest keeps their newest (push_link); more than the node's memory
 * holds for pushes -EFBIG too.  Each is counted as the push's rejection.
 * *cost gets their bytes. */
static int
push_check(struct shm_seg *seg, int w, const struct shm_qopts *o,
           const struct shm_msg_in *msgs, const struct shm_msg_extra *kx,
           const struct shm_conflate *cf, uint32_t n, uint64_t *cost)
{
    *cost = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t c = shm_ring_msg_cost(push_stored(msgs, kx, i));
        if (c > o->max_bytes) {
            shm_count(seg, w, SHM_C_PUSH_REJECTED_TOO_LARGE, 1);
            return -EMSGSIZE;
        }
        *cost += c;
    }
    if ((o->policy != SHM_POLICY_DROP_OLDEST &&
         (n - cf->self > o->max_length ||
          *cost - cf->self_cost > o->max_bytes)) ||
        *cost > shm_push_cap(seg)) {
        shm_count(seg, w, SHM_C_PUSH_REJECTED_TOO_LARGE, 1);
        return -EFBIG;
    }
    return 0;
}

/* Allocate and fill the n chains (cost bytes), joined by their next
 * fields, each visible after its delay (ex: none), keyed when kx (a
 * conflating push's extras) says it has a key; -ENOBUFS when they would
 * eat into the lease reserve. */
static int
push_alloc(struct shm_seg *seg, int w, const struct shm_msg_in *msgs,
           const struct shm_msg_extra *ex, const struct shm_msg_extra *kx,
           uint32_t n, uint32_t reply_len, uint64_t cost, uint64_t now,
           uint32_t *first, uint32_t *last)
{
    uint64_t c;
    uint32_t ref;

    if (!shm_cap_room(seg, cost))
        return -ENOBUFS;
    *first = *last = 0;
    for (uint32_t i = 0; i < n; i++) {
        int rc = shm_ring_msg_new(
            seg, w, msgs[i].payload, msgs[i].len,
            (uint32_t)(push_stored(msgs, kx, i) - msgs[i].len), now, &ref, &c);
        if (rc != 0) {
            shm_chains_free(seg, w, *first);
            return rc;
        }
        shm_ring_msg(seg, ref)->reply_len = (uint16_t)reply_len;
        if (ex != NULL)
            shm_ring_msg(seg, ref)->enq_ms = shm_msg_pack(
                now + ex[i].delay_ms, ex[i].ttl_s, ex[i].delay_ms > 0);
        if (kx != NULL && kx[i].has_key)
            shm_ring_msg_key_set(seg, ref, kx[i].key_hash);
        if (*last != 0)
            shm_ring_msg(seg, *last)->next = ref;
        else
            *first = ref;
        *last = ref;
    }
    return 0;
}

/*
 * struct push_keys - a keyed push (shm_push_keyed) on its way: the
 * messages, the answer's ids, and the window's cells allocated before the
 * lock (INFLIGHT, joined by their next fields), one per keyed message.
 */
struct push_keys {
    const struct shm_msg_extra *msgs;
    struct shm_push_id *ids;
    uint32_t dups;
    uint32_t cells;      /* first spare window cell */
    uint32_t dup_first;  /* chains of the duplicates, freed after the lock */
    uint32_t kept_first; /* the chains left to link, once filtered */
    int filtered;
};

#define PUSH_ID_KEPT  UINT64_MAX       /* ids[i].inc: stored (seq to come) */
#define PUSH_ID_LOCAL (UINT64_MAX - 1) /* a duplicate of message seq here */

/* Is message i a duplicate (its key in the window, or on a message kept
 * before it in this batch)?  Marks ids[i] either way. */
static int
keys_dup_locked(struct shm_ring_ctx *c, struct push_keys *k, uint32_t i,
                uint64_t window_ms)
{
    const struct shm_msg_extra *m = &k->msgs[i];
    const struct shm_dd *e;

    k->ids[i] = (struct shm_push_id){0, PUSH_ID_KEPT};
    if (!m->has_key)
        return 0;
    if ((e = shm_ring_dd_find_locked(c, m->key_hash, window_ms)) != NULL) {
        k->ids[i] = (struct shm_push_id){e->seq, e->inc};
        return 1;
    }
    for (uint32_t j = 0; j < i; j++)
        if (k->msgs[j].has_key && k->msgs[j].key_hash == m->key_hash &&
            k->ids[j].inc == PUSH_ID_KEPT) {
            k->ids[i] = (struct shm_push_id){j, PUSH_ID_LOCAL};
            return 1;
        }
    return 0;
}

/* Take the duplicates out of the chains *first..*last (n of them, cost
 * bytes), setting aside their chains in k->dup_first. */
static void
keys_filter_locked(struct shm_ring_ctx *c, struct push_keys *k,
                   uint64_t window_ms, uint32_t *first, uint32_t *last,
                   uint32_t *n, uint64_t *cost)
{
    uint32_t r = *first, total = *n, kept_last = 0, dup_last = 0;

    shm_ring_dd_trim_locked(c, window_ms, c->q->opts.max_length);
    *first = *last = 0;
    for (uint32_t i = 0; i < total; i++) {
        struct shm_msg *m = shm_ring_msg(c->seg, r);
        uint32_t next = m->next;
        m->next = 0;
        if (keys_dup_locked(c, k, i, window_ms)) {
            if (dup_last != 0)
                shm_ring_msg(c->seg, dup_last)->next = r;
            else
                k->dup_first = r;
            dup_last = r;
            k->dups++;
            (*n)--;
            *cost -= shm_ring_msg_cost(m->len);
        } else {
            if (kept_last != 0)
                shm_ring_msg(c->seg, kept_last)->next = r;
            else
                *first = r;
            kept_last = r;
        }
        r = next;
    }
    *last = kept_last;
}

/* After the link: the kept messages' ids, the duplicates of this batch
 * named by them, and each kept key into the window. */
static void
keys_settle_locked(struct shm_ring_ctx *c, struct push_keys *k, uint32_t total,
                   uint64_t first_seq)
{
    uint64_t inc = shm_params_of(c->seg)->incarnation;

    for (uint32_t i = 0; i < total; i++) {
        struct shm_push_id *id = &k->ids[i];
        if (id->inc == PUSH_ID_KEPT) {
            *id = (struct shm_push_id){first_seq++, inc};
            if (!k->msgs[i].has_key || k->cells == 0)
                continue;
            uint32_t d = k->cells;
            struct shm_dd *e = shm_ring_dd(c->seg, d);
            k->cells = e->next;
            *e = (struct shm_dd){.chain = e->chain,
                                 .hash = k->msgs[i].key_hash,
                                 .seq = id->seq,
                                 .inc = inc,
                                 .at_ms = c->now};
            shm_ring_dd_append_locked(c, d);
        } else if (id->inc == PUSH_ID_LOCAL) {
            *id = k->ids[id->seq];
        }
    }
}

/* One partition's ttl-expired messages dropped (its lock held). */
static uint64_t
ttl_step(struct shm_ring_ctx *c, void *arg)
{
    (void)arg;
    return shm_ring_ttl_locked(c, c->q->opts.ttl_s);
}

/* Drop ttl-expired messages of every partition of qr (one lock at a time);
 * returns how many went. */
static uint64_t
queue_ttl(struct shm_seg *seg, int w, struct shm_ref qr, uint64_t now)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_part_list l;
    uint64_t k;

    if (q->opts.ttl_s == 0)
        return 0;
    shm_part_list_get(seg, qr, &l);
    k = shm_part_list_each_locked(seg, w, &l, q, now, ttl_step, NULL);
    shm_part_list_free(&l);
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
           shm_msg_at(shm_ring_msg(c->seg, c->p->head)) <= upto_ms) {
        uint64_t before = atomic_load_explicit(&c->p->cost, RELAXED);
        shm_ring_drop_locked(c, 1, SHM_DROP_EVICT);
        uint64_t freed = before - atomic_load_explicit(&c->p->cost, RELAXED);
        *len -= *len > 0;
        *bytes -= *bytes > freed ? freed : *bytes;
    }
}

#define EVICT_MISSES 4 /* rounds of evict_others that may find nothing */

/* Which partition of l but except holds the oldest message (racy
 * oldest_ms): its index (l->n: none), and in *next_ms the oldest of the
 * others. */
static uint32_t
evict_pick(struct shm_seg *seg, const struct shm_part_list *l, uint32_t except,
           uint64_t *next_ms)
{
    uint64_t best_ms = UINT64_MAX;
    uint32_t best = l->n;

    *next_ms = UINT64_MAX;
    for (uint32_t i = 0; i < l->n; i++) {
        struct shm_part *p = shm_dir_part(seg, l->v[i].idx);
        uint64_t ms = atomic_load_explicit(&p->oldest_ms, RELAXED);
        if (l->v[i].idx == except ||
            atomic_load_explicit(&p->count, RELAXED) == 0)
            continue;
        if (ms < best_ms) {
            *next_ms = best_ms;
            best_ms = ms;
            best = i;
        } else if (ms < *next_ms) {
            *next_ms = ms;
        }
    }
    return best;
}

/* dropOldest across the other partitions of qr: the queue's oldest
 * messages first.  Each round locks the partition whose head is the oldest
 * (racy oldest_ms, exact under its lock) and evicts down to the next
 * partition's oldest; one lock at a time. */
static void
evict_others(struct shm_seg *seg, int w, struct shm_ref qr, uint32_t except,
             uint64_t len, uint64_t bytes, uint64_t now)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_part_list l;
    struct shm_ring_ctx c;
    uint64_t next_ms;
    int misses = 0;

    shm_part_list_get(seg, qr, &l);
    while (len > 0 || bytes > 0) {
        uint32_t best = evict_pick(seg, &l, except, &next_ms);
        if (best == l.n ||
            shm_part_lock_ctx(seg, w, l.v[best], q, now, &c) != 0)
            break;
        uint64_t before = len + bytes;
        evict_locked(&c, next_ms, &len, &bytes);
        shm_ring_unlock(c.p);
        /* The racy pick moved on (acked or evicted meanwhile): look again,
         * a few times; push_link then checks the bounds again. */
        if (len + bytes == before && ++misses > EVICT_MISSES)
            break;
    }
    shm_part_list_free(&l);
}

/* How far past its bounds queue qr would be with n more messages of cost
 * bytes (racy sums; the caller holds one partition lock). */
static void
push_over(struct shm_seg *seg, struct shm_ref qr, const struct shm_qopts *o,
          uint32_t n, uint64_t cost, uint64_t *olen, uint64_t *obytes)
{
    uint64_t len, bytes;

    shm_queue_held(seg, qr, &len, &bytes, NULL, NULL);
    *olen = len + n > o->max_length ? len + n - o->max_length : 0;
    *obytes = bytes + cost > o->max_bytes ? bytes + cost - o->max_bytes : 0;
}

/* How far past its bounds queue qr would be with n more messages of cost
 * bytes, less what they replace (cf: a conflating push; the messages
 * already held it replaces counted now, under c's lock). */
static void
push_over_net(struct shm_ring_ctx *c, struct shm_ref qr,
              const struct shm_qopts *o, const struct shm_conflate *cf,
              uint32_t n, uint64_t cost, uint64_t *olen, uint64_t *obytes)
{
    uint64_t held_cost = 0;
    uint32_t held = 0;

    if (cf != NULL) {
        held = shm_ring_conflate_locked(c, &cf->keys, 1, &held_cost);
        n -= cf->self + held;
        cost -= cf->self_cost + held_cost;
    }
    push_over(c->seg, qr, o, n, cost, olen, obytes);
}

/* How far past the bounds o a batch of n messages of cost bytes (net of
 * what it replaces of itself, cf) would be on its own: what dropOldest
 * takes of the batch itself, its oldest first, once nothing older is
 * left. */
static void
push_over_self(const struct shm_qopts *o, const struct shm_conflate *cf,
               uint32_t n, uint64_t cost, uint64_t *slen, uint64_t *sbytes)
{
    *slen = *sbytes = 0;
    if (o->policy != SHM_POLICY_DROP_OLDEST)
        return; /* push_check refused it */
    if (cf != NULL) {
        n -= cf->self;
        cost -= cf->self_cost;
    }
    *slen = n > o->max_length ? n - o->max_length : 0;
    *sbytes = cost > o->max_bytes ? cost - o->max_bytes : 0;
}

/* a - b, or 0 below it. */
static uint64_t
sat_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* Link the allocated chains into (qr, part) within bounds, then, with cf,
 * replace what they replace (SPEC §13); -ENOSPC.  Under dropOldest a
 * batch larger than the bounds goes in once nothing older is held, and
 * its own oldest messages go then as any others would (SPEC §4): the
 * push answers every id, the newest stay.  join: the partition may be
 * one a hand-over is bringing (not a request's inbox, which stays on its
 * requester's node): a join's window holds it (part_move.h). */
static int
push_link(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_name part,
          uint32_t first, uint32_t last, uint32_t n, uint64_t cost,
          uint64_t now, uint64_t *first_seq, struct push_keys *k,
          struct shm_conflate *cf, int join)
{
    uint32_t total = n;

    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_qopts o = q->opts;
    struct shm_ring_ctx c;
    struct shm_ref pr;
    uint64_t kick = 0, olen, obytes, slen, sbytes;
    int rc = -ESTALE;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        /* A refused push changes nothing: a partition it would make is made
         * only when the queue has room (racy here, exact under the lock
         * below; a push racing another may still leave it empty). */
        rc = shm_dir_find_part(seg, w, qr, part, 0, now, &pr);
        if (rc == -ENOENT && o.policy != SHM_POLICY_DROP_OLDEST) {
            push_over(seg, qr, &o, n - (cf != NULL ? cf->self : 0),
                      cost - (cf != NULL ? cf->self_cost : 0), &olen, &obytes);
            if (olen > 0 || obytes > 0)
                return -ENOSPC;
        }
        if (rc == -ENOENT)
            rc = shm_dir_find_part(seg, w, qr, part, 1, now, &pr);
        if (rc != 0)
            return rc;
        if ((rc = shm_part_lock_ctx(seg, w, pr, q, now, &c)) != 0)
            continue;
        /* partition lock: ttl, duplicates, bounds, link, waiters. */
        shm_ring_ttl_locked(&c, o.ttl_s);
        if (k != NULL && !k->filtered) { /* once: the window only grows */
            keys_filter_locked(&c, k, (uint64_t)o.dedupe_s * 1000, &first,
                               &last, &n, &cost);
            k->filtered = 1;
            k->kept_first = first;
        }
        if (n == 0) { /* every one a duplicate: nothing to store */
            keys_settle_locked(&c, k, total, 0);
            shm_ring_unlock(c.p);
            *first_seq = 0;
            return 0;
        }
        push_over_net(&c, qr, &o, cf, n, cost, &olen, &obytes);
        push_over_self(&o, cf, n, cost, &slen, &sbytes);
        if ((olen > slen || obytes > sbytes) &&
            o.policy == SHM_POLICY_DROP_OLDEST) {
            evict_locked(&c, UINT64_MAX, &olen, &obytes);
            if (cf != NULL) /* what it evicted may have been replaced */
                push_over_net(&c, qr, &o, cf, n, cost, &olen, &obytes);
        }
        if (olen > slen || obytes > sbytes) {
            shm_ring_unlock(c.p);
            if (o.policy != SHM_POLICY_DROP_OLDEST)
                return -ENOSPC;
            evict_others(seg, w, qr, pr.idx, sat_sub(olen, slen),
                         sat_sub(obytes, sbytes), now);
            rc = -ENOSPC;
            continue;
        }
        /* The horizon stays below the numbers taken until the wake-ups
         * are out (horizon.c): two stores to this slot's own line. */
        shm_pushing_begin(seg, w, 0);
        if (join)
            shm_ring_join_hold_locked(&c, pr.idx);
        shm_ring_link_locked(&c, first, last, n, cost, first_seq);
        shm_ring_delayed_note_locked(&c, first, n);
        if (k != NULL)
            keys_settle_locked(&c, k, total, *first_seq);
        if (cf != NULL)
            cf->done = shm_ring_conflate_locked(&c, &cf->keys, 0, NULL);
        if (slen > 0 || sbytes > 0) { /* the batch's own oldest go */
            push_over(seg, qr, &o, 0, 0, &olen, &obytes);
            evict_locked(&c, UINT64_MAX, &olen, &obytes);
        }
        shm_part_due_locked(seg, pr.idx, c.p, q);
        shm_waiters_post_locked(seg, qr, pr, &kick);
        shm_ring_unlock(c.p);
        shm_waiters_kick(seg, kick);
        shm_pushing_end(seg, w);
        return 0;
    }
    return rc == -ESTALE ? -EAGAIN : rc;
}

/* Free the window cells from d on (joined by their next fields). */
static void
keys_cells_free(struct shm_seg *seg, int w, uint32_t d)
{
    while (d != 0) {
        uint32_t next = shm_ring_dd(seg, d)->next;
        shm_arena_free(seg, w, d);
        d = next;
    }
}

/* A window cell for each of the n messages that carries a key, before any
 * lock (INFLIGHT, as the messages): 0 or -ENOBUFS (none kept). */
static int
keys_cells(struct shm_seg *seg, int w, struct push_keys *k, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t d;
        if (!k->msgs[i].has_key)
            continue;
        if (shm_arena_alloc(seg, w, 1, &d) != 0) {
            keys_cells_free(seg, w, k->cells);
            k->cells = 0;
            return -ENOBUFS;
        }
        shm_ring_dd(seg, d)->next = k->cells;
        k->cells = d;
    }
    return 0;
}

/* push - shm_push, each message led by reply_len bytes of replyTo; with k,
 * a keyed push (shm_push_keyed), and with conflated too, one that may
 * conflate (*conflated: the messages it replaced). */
static int
push(struct shm_seg *seg, int worker, struct shm_name queue,
     struct shm_name part, const struct shm_msg_in *msgs,
     const struct shm_msg_extra *ex, uint32_t n, uint32_t reply_len,
     uint64_t now, uint64_t *first_seq, struct push_keys *k,
     uint32_t *conflated)
{
    struct shm_conflate cf = {0};
    const struct shm_msg_extra *kx = NULL;
    struct shm_ref qr;
    uint64_t cost;
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
    if (!found && shm_inbox_named(queue))
        return -ENOENT; /* its request is over: nothing may make it again */
    /* Keys conflate on a queue that conflates (SPEC §13; configure
     * refuses it beside a dedupe window, which keeps a key's first). */
    if (conflated != NULL && (o.flags & SHM_QOPT_CONFLATE) && o.dedupe_s == 0) {
        if ((rc = shm_conflate_prepare(msgs, ex, n, &cf)) != 0)
            goto out;
        kx = cf.keys.n > 0 ? ex : NULL;
    }
    if ((rc = push_check(seg, worker, &o, msgs, kx, &cf, n, &cost)) != 0)
        goto out;
    rc = push_alloc(seg, worker, msgs, ex, kx, n, reply_len, cost, now, &first,
                    &last);
    if (rc == -ENOBUFS && found && queue_ttl(seg, worker, qr, now) > 0)
        rc = push_alloc(seg, worker, msgs, ex, kx, n, reply_len, cost, now,
                        &first, &last);
    /* Keys count only on a queue with a window (SPEC §13). */
    if (k != NULL && o.dedupe_s == 0)
        k = NULL;
    if (rc == 0 && k != NULL && (rc = keys_cells(seg, worker, k, n)) != 0)
        shm_chains_free(seg, worker, first);
    if (rc == -ENOBUFS)
        shm_count(seg, worker, SHM_C_PUSH_UNAVAILABLE, 1);
    if (rc != 0)
        goto out;
    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        /* Made now if missing, or again if collected meanwhile. */
        if (!found &&
            (rc = shm_dir_find_queue(seg, worker, queue,
                                     !shm_inbox_named(queue), now, &qr)) != 0)
            break;
        rc = push_link(seg, worker, qr, part, first, last, n, cost, now,
                       first_seq, k, kx != NULL ? &cf : NULL,
                       !shm_inbox_named(queue));
        if (rc != -ESTALE)
            break;
        found = 0;
    }
    if (k != NULL) { /* what the lock left over: duplicates, spare cells */
        shm_chains_free(seg, worker, k->dup_first);
        keys_cells_free(seg, worker, k->cells);
        if (k->filtered)
            first = k->kept_first;
        n -= k->dups;
        shm_count(seg, worker, SHM_C_DUPLICATES, k->dups);
    }
    if (rc != 0) {
        shm_chains_free(seg, worker, first);
        if (rc == -ENOSPC)
            shm_count(seg, worker, SHM_C_PUSH_REJECTED_FULL, 1);
        goto out;
    }
    atomic_store_explicit(&shm_dir_queue(seg, qr.idx)->last_active, now,
                          RELAXED);
    shm_count(seg, worker, SHM_C_PUSH_ACCEPTED, n);
    if (conflated != NULL)
        *conflated = cf.done;
out:
    shm_conflate_free(&cf);
    return rc;
}

/* shm_push_keyed - see broker.h. */
int
shm_push_keyed(struct shm_seg *seg, int worker, struct shm_name queue,
               struct shm_name part, const struct shm_msg_in *msgs,
               const struct shm_msg_extra *ex, uint32_t n, uint64_t now,
               struct shm_push_id *ids, uint32_t *dups, uint32_t *conflated)
{
    struct push_keys k = {.msgs = ex, .ids = ids};
    uint64_t first_seq, inc = shm_params_of(seg)->incarnation;
    int keyed = 0, rc;

    for (uint32_t i = 0; i < n && !keyed; i++)
        keyed = ex[i].has_key;
    *dups = *conflated = 0;
    rc = push(seg, worker, queue, part, msgs, ex, n, 0, now, &first_seq,
              keyed ? &k : NULL, keyed ? conflated : NULL);
    if (rc != 0)
        return rc;
    if (!k.filtered)
        for (uint32_t i = 0; i < n; i++)
            ids[i] = (struct shm_push_id){first_seq + i, inc};
    *dups = k.dups;
    return 0;
}

/* shm_push - see broker.h. */
int
shm_push(struct shm_seg *seg, int worker, struct shm_name queue,
         struct shm_name part, const struct shm_msg_in *msgs, uint32_t n,
         uint64_t now, uint64_t *first_seq)
{
    return push(seg, worker, queue, part, msgs, NULL, n, 0, now, first_seq,
                NULL, NULL);
}

/* shm_push_request - see broker.h. */
int
shm_push_request(struct shm_seg *seg, int worker, struct shm_name queue,
                 struct shm_name part, const struct shm_msg_in *msg,
                 uint32_t reply_len, uint64_t now, uint64_t *seq)
{
    if (reply_len == 0 || reply_len > UINT16_MAX || reply_len >= msg->len)
        return -EINVAL;
    return push(seg, worker, queue, part, msg, NULL, 1, reply_len, now, seq,
                NULL, NULL);
}

/* ---- pop ----------------------------------------------------------- */

/* Pop from one partition into the sink (NULL: a peek); with park, set
 * this worker's waiter bit when nothing was taken.  Returns taken or
 * -errno (-ESTALE: the partition was freed meanwhile). */
static int
pop_part(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_ref pr,
         const struct shm_pop_req *req, uint64_t h, uint32_t batch, int park,
         uint64_t now, struct shm_sink *sink)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_ring_ctx c;
    int rc = -EAGAIN;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        if ((rc = shm_part_lock_ctx(seg, w, pr, q, now, &c)) != 0)
            return rc;
        /* partition lock: ttl, take, lease, park. */
        shm_ring_ttl_locked(&c, q->opts.ttl_s);
        uint32_t gs = shm_ring_gs_find_locked(&c, req->group, h);
        if (gs == 0) {
            shm_ring_unlock(c.p);
            rc =
                shm_group_ensure(seg, w, qr, pr, req->group, h, req->from, now);
            if (rc != 0)
                return rc;
            continue;
        }
        rc = sink == NULL
                 ? shm_ring_peek_locked(&c, gs)
                 : shm_ring_take_locked(&c, gs, batch, req->auto_ack, sink);
        shm_part_due_locked(seg, pr.idx, c.p, q);
        atomic_store_explicit(
            &shm_ring_grp(seg, shm_ring_gs(seg, gs)->grp)->last_active, now,
            RELAXED);
        atomic_store_explicit(&c.p->popped, now, RELAXED);
        if (rc == 0 && park)
            atomic_fetch_or(&c.p->waiters, 1ULL << w);
        shm_ring_unlock(c.p);
        if (rc > 0 && sink != NULL)
            shm_count(seg, w, SHM_C_POP, (uint64_t)rc);
        return rc;
    }
    return rc;
}

/* Any-partition pop (sink NULL: a peek): round robin from the queue's
 * rotating index. */
static int
pop_any(struct shm_seg *seg, int w, struct shm_ref qr,
        const struct shm_pop_req *req, uint64_t h, uint64_t now,
        struct shm_sink *sink)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);
    struct shm_part_list l;
    uint32_t taken = 0;
    int rc = 0, checked = 0;

    /* The bit goes up before the scan, so a push to a partition already
     * scanned still finds it: no lost wake-up.  It is per worker, not per
     * pop: one that was up already belongs to another pop parked here, and
     * stays (at worst one wake too many; shm_unpark clears it). */
    uint64_t had = 0;
    if (req->park)
        had = atomic_fetch_or(&q->waiters, 1ULL << w) & (1ULL << w);
    shm_part_list_get(seg, qr, &l);
    uint32_t n = l.n, start = n ? atomic_fetch_add(&q->rr, 1) % n : 0;
    if (n == 0) {
        rc = shm_group_register(seg, w, qr, req->group, h, req->from, now);
        checked = rc == 0; /* under the queue lock, after the bit went up */
    }
    for (uint32_t i = 0; i < n && taken < req->batch; i++) {
        struct shm_ref pr = l.v[(start + i) % n];
        int r =
            pop_part(seg, w, qr, pr, req, h, req->batch - taken, 0, now, sink);
        if (r == -ENOMEM && sink != NULL && sink->count == 0) {
            rc = r;
            break;
        }
        if (r > 0)
            taken += (uint32_t)r;
        else if (r != -ESTALE && r != -ENOMEM && r != 0 && taken == 0)
            rc = r;
    }
    shm_part_list_free(&l);
    /* About to park: under the queue lock, the record must still be this
     * queue (see shm_queue_free_locked); else the pop starts over. */
    if (req->park && taken == 0 && rc == 0 && !checked) {
        if (shm_queue_lock(seg, w, qr) == 0)
            shm_unlock(&q->lock);
        else
            rc = -ESTALE;
    }
    if (req->park && !had && (taken > 0 || rc < 0))
        atomic_fetch_and(&q->waiters, ~(1ULL << w));
    return taken > 0 ? (int)taken : rc;
}

/* pop_or_peek - shm_pop into sink, or shm_peek (sink NULL). */
static int
pop_or_peek(struct shm_seg *seg, int worker, const struct shm_pop_req *req,
            uint64_t now, struct shm_sink *sink)
{
    uint64_t h = shm_group_hash(req->group);
    struct shm_ref qr, pr;
    int rc = -EAGAIN;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        if ((rc = shm_dir_find_queue(seg, worker, req->queue, 1, now, &qr)))
            return rc;
        atomic_store_explicit(&shm_dir_queue(seg, qr.idx)->last_active, now,
                              RELAXED);
        if (req->part.len == 0) {
            atomic_store_explicit(&shm_dir_queue(seg, qr.idx)->any_popped, now,
                                  RELAXED);
            rc = pop_any(seg, worker, qr, req, h, now, sink);
        } else if ((rc = shm_dir_find_part(seg, worker, qr, req->part, 1, now,
                                           &pr)) == 0)
            rc = pop_part(seg, worker, qr, pr, req, h, req->batch, req->park,
                          now, sink);
        if (rc != -ESTALE)
            return rc;
    }
    return rc;
}

/* shm_pop - see broker.h. */
int
shm_pop(struct shm_seg *seg, int worker, const struct shm_pop_req *req,
        uint64_t now, struct shm_sink *sink)
{
    sink->used = 0;
    sink->count = 0;
    sink->need = 0;
    return pop_or_peek(seg, worker, req, now, sink);
}

/* shm_peek - see broker.h. */
int
shm_peek(struct shm_seg *seg, int worker, const struct shm_pop_req *req,
         uint64_t now)
{
    return pop_or_peek(seg, worker, req, now, NULL);
}

/* shm_popped_next - see broker.h. */
const struct shm_popped *
shm_popped_next(const struct shm_sink *sink, const struct shm_popped *prev)
{
    size_t off = 0;

    if (prev != NULL) {
        off = (size_t)((const unsigned char *)prev - sink->buf);
        off += shm_popped_size(sink, prev);
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

/* Count n acks' outcomes in slot w's counters. */
static void
ack_count(struct shm_seg *seg, int w, const struct shm_ack *acks, uint32_t n)
{
    static const enum shm_counter ctr[] = {
        [SHM_OUT_ACKED] = SHM_C_ACK_ACKED,
        [SHM_OUT_ACKED_DROPPED] = SHM_C_ACK_ACKED,
        [SHM_OUT_REDELIVERED] = SHM_C_ACK_REDELIVERED,
        [SHM_OUT_STALE] = SHM_C_ACK_STALE,
        [SHM_OUT_UNKNOWN] = SHM_C_ACK_UNKNOWN,
    };

    for (uint32_t i = 0; i < n; i++)
        if (acks[i].outcome != SHM_OUT_DEFER)
            shm_count(seg, w, ctr[acks[i].outcome],
                      acks[i].status == SHM_ACK_UPTO && acks[i].count > 0
                          ? acks[i].count
                          : 1);
}

/* Apply acks (extend when ext) of one partition under one lock. */
static void
ack_apply(struct shm_seg *seg, int w, struct shm_name queue,
          struct shm_name part, struct shm_name group, struct shm_ack *acks,
          uint32_t n, uint64_t now, int ext)
{
    uint64_t h = shm_group_hash(group), kick = 0;
    struct shm_ring_ctx c;
    struct shm_ref qr, pr;
    int found = 0;

    for (uint32_t i = 0; i < n; i++)
        acks[i].outcome = SHM_OUT_UNKNOWN;
    if (find_qp(seg, w, queue, part, now, &qr, &pr) == 0 &&
        shm_part_lock_ctx(seg, w, pr, shm_dir_queue(seg, qr.idx), now, &c) ==
            0) {
        /* partition lock: leases, head advance, waiters. */
        uint32_t gs = shm_ring_gs_find_locked(&c, group, h);
        c.dead = ext ? NULL : shm_dead_sink();
        if (gs != 0) {
            found = 1;
            if (ext) {
                /* A shorter extension moves the deadline earlier. */
                shm_ring_extend_locked(&c, gs, acks, n);
                shm_part_due_locked(seg, pr.idx, c.p, c.q);
            } else {
                shm_ring_ack_locked(&c, gs, acks, n);
                /* a retry with a delay is due then (SPEC §13) */
                shm_part_due_locked(seg, pr.idx, c.p, c.q);
            }
            atomic_store_explicit(
                &shm_ring_grp(seg, shm_ring_gs(seg, gs)->grp)->last_active, now,
                RELAXED);
            for (uint32_t i = 0; i < n && !ext; i++)
                if (acks[i].outcome == SHM_OUT_REDELIVERED) {
                    shm_waiters_post_locked(seg, qr, pr, &kick);
                    break;
                }
        }
        shm_ring_unlock(c.p);
        shm_waiters_kick(seg, kick);
        if (found)
            atomic_store_explicit(&c.q->last_active, now, RELAXED);
    }
    for (uint32_t i = 0; i < n; i++)
        if (acks[i].moved && acks[i].outcome == SHM_OUT_UNKNOWN)
            acks[i].outcome = SHM_OUT_STALE;
    if (!ext)
        ack_count(seg, w, acks, n);
}

/* shm_ack - see broker.h.  The dead letters its drops copied out are
 * pushed once the partition lock is released; an ack whose dead letter
 * did not fit is applied again, alone, after the flush grew the sink. */
void
shm_ack(struct shm_seg *seg, int worker, struct shm_name queue,
        struct shm_name part, struct shm_name group, struct shm_ack *acks,
        uint32_t n, uint64_t now)
{
    ack_apply(seg, worker, queue, part, group, acks, n, now, 0);
    shm_dead_flush(seg, worker, queue, now);
    for (uint32_t i = 0; i < n; i++) {
        if (acks[i].outcome != SHM_OUT_DEFER)
            continue;
        ack_apply(seg, worker, queue, part, group, &acks[i], 1, now, 0);
        shm_dead_flush(seg, worker, queue, now);
        /* Still no room (memory short): the lease stays, and runs out into
         * the master's upkeep, which dead-letters it then. */
        if (acks[i].outcome == SHM_OUT_DEFER) {
            acks[i].outcome = SHM_OUT_ACKED_DROPPED;
            shm_count(seg, worker, SHM_C_ACK_ACKED, 1);
        }
    }
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
    uint64_t h = shm_group_hash(group);
    const struct shm_popped *r = shm_popped_next(sink, NULL);

    while (r != NULL) {
        struct shm_name part = {(const char *)(r + 1), r->part_len};
        struct shm_ring_ctx c;
        struct shm_ref qr, pr;
        uint64_t kick = 0;
        int any = 0;
        if (find_qp(seg, worker, queue, part, now, &qr, &pr) != 0 ||
            shm_part_lock_ctx(seg, worker, pr, shm_dir_queue(seg, qr.idx), now,
                              &c) != 0) {
            r = shm_popped_next(sink, r);
            continue;
        }
        /* partition lock: leases back to ready, waiters. */
        uint32_t gs = shm_ring_gs_find_locked(&c, group, h);
        do {
            if (gs != 0)
                any |= shm_ring_release_locked(&c, gs, r->seq, r->attempts);
            r = shm_popped_next(sink, r);
        } while (r != NULL && r->part_len == part.len &&
                 memcmp(r + 1, part.ptr, part.len) == 0);
        if (any)
            shm_waiters_post_locked(seg, qr, pr, &kick);
        shm_ring_unlock(c.p);
        shm_waiters_kick(seg, kick);
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
        return shm_handle_of(0, qr.idx, qr.gen);
    if (shm_dir_find_part(seg, -1, qr, part, 0, 0, &pr) != 0)
        return 0;
    return shm_handle_of(1, pr.idx, pr.gen);
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
