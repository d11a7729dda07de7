/*
 * ring.c - one partition's contents: messages, group states, leases.
 *
 * Every function but shm_ring_msg_new runs under the partition lock.  Each
 * mutation is ordered so that one aligned store publishes it (a list link),
 * and a chain about to be freed is first named in p->intent: the repair
 * re-derives tails, counts and tags from a bounded walk, frees an intent that
 * is no longer reachable, and wipes the partition only when a walk finds
 * something impossible.  No syscalls, logging or malloc here.
 * Errors: 0 or -errno.
 */
#include "shm/ring.h"

#include <errno.h>
#include <string.h>

#include "shm/dd_index.h"
#include "shm/dead.h"
#include "shm/horizon.h"
#include "shm/layout.h"
#include "shm/lock.h"
#include "shm/stats.h"
#include "shm/tenants.h"

#define RELAXED     memory_order_relaxed
#define LOAD(x)     atomic_load_explicit(&(x), RELAXED)
#define STORE(x, v) atomic_store_explicit(&(x), (v), RELAXED)

static void ring_wipe(struct shm_seg *seg, int w, struct shm_part *p);
static void ring_dd_drop_head(struct shm_ring_ctx *c);
static uint64_t ttl_behind_delayed(struct shm_ring_ctx *c, uint32_t ttl_s);

#define TTL_WALK_MAX 32 /* messages ttl_behind_delayed looks at, at most */
static void ring_unlink(struct shm_ring_ctx *c, uint32_t prev, uint32_t ref);

/* ring_set_cost - p's accounted bytes become cost (its lock held), and its
 * queue's tenant is charged the difference (tenants.h): the one place a
 * partition's bytes change, so a tenant's share follows every push, drop,
 * repair and wipe. */
static void
ring_set_cost(struct shm_seg *seg, struct shm_part *p, uint64_t cost)
{
    uint64_t was = LOAD(p->cost);

    STORE(p->cost, cost);
    if (seg->tenants != NULL) /* a node with tokens */
        shm_tenants_charge(seg->tenants, shm_dir_queue(seg, p->queue)->tenant,
                           (int64_t)(cost - was));
}

/* shm_ring_msg_cost - cells the message takes, in bytes. */
uint64_t
shm_ring_msg_cost(size_t len)
{
    return (uint64_t)shm_cells_for(SHM_MSG_HDR + len) * SHM_CELL_BYTES;
}

/* shm_ring_msg_key_set - see ring.h. */
void
shm_ring_msg_key_set(struct shm_seg *seg, uint32_t ref, uint64_t hash)
{
    struct shm_msg *m = shm_ring_msg(seg, ref);

    shm_arena_write(seg, ref, SHM_MSG_HDR + (size_t)m->len, &hash,
                    sizeof(hash));
    m->enq_ms |= SHM_MSG_KEYED;
}

/* shm_ring_msg_key - see ring.h. */
uint64_t
shm_ring_msg_key(struct shm_seg *seg, uint32_t ref)
{
    uint64_t hash;

    shm_arena_read(seg, ref, SHM_MSG_HDR + (size_t)shm_ring_msg(seg, ref)->len,
                   &hash, sizeof(hash));
    return hash;
}

/* shm_ring_msg_new - see ring.h. */
int
shm_ring_msg_new(struct shm_seg *seg, int w, const char *payload, uint32_t len,
                 uint32_t spare, uint64_t now, uint32_t *ref, uint64_t *cost)
{
    uint32_t n = shm_cells_for(SHM_MSG_HDR + (size_t)len + spare);
    int rc = shm_arena_alloc(seg, w, n, ref);

    if (rc != 0)
        return rc;
    struct shm_msg *m = shm_ring_msg(seg, *ref);
    m->len = len;
    m->seq = 0;
    m->enq_ms = now;
    m->next = 0;
    m->read = 0;
    m->reply_len = 0;
    shm_arena_write(seg, *ref, SHM_MSG_HDR, payload, len);
    *cost = (uint64_t)n * SHM_CELL_BYTES;
    return 0;
}

/* shm_ring_lock - see ring.h. */
int
shm_ring_lock(struct shm_seg *seg, int w, struct shm_part *p)
{
    struct shm_ring_repairer rp = {.p = p, .w = w};
    int rc = shm_lock(seg, &p->lock, shm_ring_repair, &rp);

    if (rc != 0)
        return rc;
    /* A repair by a locker without a slot may have left work that frees:
     * a wipe of a partition it found unsound (until then, such lockers
     * stay out: -EAGAIN), or an unlinked chain (outside an operation the
     * intent is otherwise 0). */
    if (w < 0) {
        if (p->wipe) {
            shm_unlock(&p->lock);
            return -EAGAIN;
        }
    } else if (p->wipe)
        ring_wipe(seg, w, p);
    else if (p->intent != 0) {
        shm_arena_free(seg, w, p->intent);
        p->intent = 0;
    }
    return 0;
}

/* shm_ring_unlock - see ring.h. */
void
shm_ring_unlock(struct shm_part *p)
{
    shm_unlock(&p->lock);
}

/* Lower the partition's due time to at least t. */
static void
ring_due(struct shm_part *p, struct shm_gs *g, uint64_t t)
{
    if (t < g->due)
        g->due = t;
    if (t < LOAD(p->due))
        STORE(p->due, t);
}

/* The partition's due time as a hold leaves it: its end, or never. */
static uint64_t
ring_hold_due(const struct shm_part *p)
{
    return p->hold_until != 0 ? p->hold_until : UINT64_MAX;
}

/* shm_ring_hold_end_locked - see ring.h. */
void
shm_ring_hold_end_locked(struct shm_ring_ctx *c)
{
    struct shm_part *p = c->p;

    p->hold_until = 0;
    if (atomic_load(&p->hold_seq) == 0)
        return;
    atomic_store(&p->hold_seq, 0);
    shm_hold_untrack(c->seg, (uint32_t)(p - shm_dir_part(c->seg, 0)));
}

/* shm_ring_join_hold_locked - see ring.h.  The window is read under the
 * partition lock: the master closes it before it takes each partition's
 * lock to end the holds nobody ships (part_move.c, shm_part_unhold), so a
 * push that takes its lock after that sees it closed, and one that took
 * the lock before has its hold found.  The numbers are taken inside the
 * push's P..C, before its own: the horizon (horizon.c) stays below them. */
void
shm_ring_join_hold_locked(struct shm_ring_ctx *c, uint32_t idx)
{
    struct shm_dir *d = shm_dir_of(c->seg);
    struct shm_part *p = c->p;
    uint64_t until = atomic_load(&d->join_until);

    if (until <= c->now || atomic_load(&p->hold_seq) != 0)
        return;
    shm_hold_track(c->seg, idx);
    atomic_store(&p->hold_seq, atomic_fetch_add(&d->next_seq, SHM_HOLD_SEQS));
    p->hold_until = until;
    if (until < LOAD(p->due))
        STORE(p->due, until);
}

/* Note that message m leaves the list (before it is unlinked): a tail
 * behind it has missed it (shm/tail.h), and a position at or below it is
 * no longer one to start from. */
static void
ring_gone(struct shm_part *p, const struct shm_msg *m)
{
    if (m->seq > LOAD(p->gone_seq))
        STORE(p->gone_seq, m->seq);
}

/* shm_ring_last_seq_locked - see ring.h. */
void
shm_ring_last_seq_locked(struct shm_part *p, uint64_t seq)
{
    if (seq > LOAD(p->last_seq))
        atomic_store(&p->last_seq, seq); /* before the link publishes */
}

/* shm_ring_link_locked - see ring.h. */
void
shm_ring_link_locked(struct shm_ring_ctx *c, uint32_t first, uint32_t last,
                     uint32_t n, uint64_t cost, uint64_t *first_seq)
{
    struct shm_seg *seg = c->seg;
    struct shm_dir *d = shm_dir_of(seg);
    uint64_t seq = atomic_fetch_add(&d->next_seq, n);

    *first_seq = seq;
    for (uint32_t r = first; r != 0; r = shm_ring_msg(seg, r)->next)
        shm_ring_msg(seg, r)->seq = seq++;
    shm_ring_append_locked(c, first, last, n, cost);
}

/* shm_ring_append_locked - see ring.h. */
void
shm_ring_append_locked(struct shm_ring_ctx *c, uint32_t first, uint32_t last,
                       uint32_t n, uint64_t cost)
{
    struct shm_seg *seg = c->seg;
    struct shm_part *p = c->p;

    shm_ring_last_seq_locked(p, shm_ring_msg(seg, last)->seq);
    /* The one store that publishes the batch; repair re-derives the rest. */
    if (p->tail != 0)
        shm_ring_msg(seg, p->tail)->next = first;
    else {
        p->head = first;
        STORE(p->oldest_ms, shm_msg_at(shm_ring_msg(seg, first)));
    }
    p->tail = last;
    STORE(p->count, LOAD(p->count) + n);
    ring_set_cost(seg, p, LOAD(p->cost) + cost);
    for (uint32_t r = first; r != 0; r = shm_ring_msg(seg, r)->next)
        shm_arena_link(seg, r);
    for (uint32_t g = p->groups; g != 0; g = shm_ring_gs(seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(seg, g);
        if (s->cursor == 0)
            s->cursor = first;
    }
    p->last_active = c->now;
}

/* shm_ring_delayed_note_locked - see ring.h. */
void
shm_ring_delayed_note_locked(struct shm_ring_ctx *c, uint32_t first, uint32_t n)
{
    uint64_t k = 0, at = UINT64_MAX;

    for (uint32_t r = first; r != 0 && n-- > 0;
         r = shm_ring_msg(c->seg, r)->next) {
        const struct shm_msg *m = shm_ring_msg(c->seg, r);
        uint64_t t = shm_msg_at(m);
        if (shm_msg_hidden(m, c->now)) {
            k++;
            at = t < at ? t : at;
        }
    }
    if (k == 0)
        return;
    STORE(c->p->delayed, LOAD(c->p->delayed) + k);
    if (at < LOAD(c->p->due))
        STORE(c->p->due, at);
}

/* shm_ring_gs_find_locked - see ring.h. */
uint32_t
shm_ring_gs_find_locked(struct shm_ring_ctx *c, struct shm_name name,
                        uint64_t h)
{
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(c->seg, g);
        if (s->name_hash != h)
            continue;
        struct shm_grp *e = shm_ring_grp(c->seg, s->grp);
        if (e->name_len == name.len &&
            (name.len == 0 ||
             shm_arena_equal(c->seg, e->name_ref, name.ptr, name.len)))
            return g;
    }
    return 0;
}

/* Where a new group state starts: from=all the oldest held, new the first
 * message pushed after the group was made, last the newest before that. */
static uint32_t
ring_start(struct shm_ring_ctx *c, const struct shm_grp *e)
{
    uint32_t r = c->p->head, before = 0;

    if (e->from == SHM_FROM_ALL)
        return r;
    while (r != 0 && shm_ring_msg(c->seg, r)->seq < e->start_seq) {
        before = r;
        r = shm_ring_msg(c->seg, r)->next;
    }
    if (e->from == SHM_FROM_LAST && before != 0)
        return before;
    return r;
}

/* shm_ring_gs_add_locked - see ring.h. */
int
shm_ring_gs_add_locked(struct shm_ring_ctx *c, uint32_t grp)
{
    struct shm_grp *e = shm_ring_grp(c->seg, grp);
    uint32_t ref;
    int rc = shm_arena_alloc(c->seg, c->w, 1, &ref);

    if (rc != 0)
        return rc;
    struct shm_gs *s = shm_ring_gs(c->seg, ref);
    memset((unsigned char *)s + 4, 0, sizeof(*s) - 4);
    s->name_hash = e->name_hash;
    s->grp = grp;
    s->cursor = ring_start(c, e);
    if (s->cursor != 0)
        s->last = shm_ring_msg(c->seg, s->cursor)->seq - 1;
    else
        s->last = e->from == SHM_FROM_ALL ? 0 : e->start_seq - 1;
    s->due = UINT64_MAX;
    s->next = c->p->groups;
    c->p->groups = ref; /* publishes */
    shm_arena_link(c->seg, ref);
    c->p->ngs++;
    return 0;
}

/* Free a chain after naming it in the intent word (repair frees it if the
 * holder dies between the unlink and the free). */
static void
ring_free(struct shm_ring_ctx *c, uint32_t ref)
{
    shm_arena_free(c->seg, c->w, ref);
    c->p->intent = 0;
}

/* A lease of s waits for redelivery (expired, failed, released): it no
 * longer counts as leased in the partition's gauge. */
static void
ring_ready_mark(struct shm_ring_ctx *c, struct shm_gs *s)
{
    s->nready++;
    STORE(c->p->leased, LOAD(c->p->leased) - 1);
}

/* A ready lease of s went out again: leased once more. */
static void
ring_ready_unmark(struct shm_ring_ctx *c, struct shm_gs *s)
{
    s->nready--;
    STORE(c->p->leased, LOAD(c->p->leased) + 1);
}

/* Unlink lease l (after prev, 0 if first) from group state s and free it. */
static void
ring_lease_remove(struct shm_ring_ctx *c, struct shm_gs *s, uint32_t prev,
                  uint32_t l)
{
    struct shm_lease *L = shm_ring_lease(c->seg, l);

    c->p->intent = l;
    if (prev != 0)
        shm_ring_lease(c->seg, prev)->next = L->next;
    else
        s->lhead = L->next;
    if (s->ltail == l)
        s->ltail = prev;
    s->nleases--;
    if (L->state == SHM_LEASE_LEASED)
        STORE(c->p->leased, LOAD(c->p->leased) - 1);
    else if (L->state != SHM_LEASE_DELAYED)
        s->nready--;
    ring_free(c, l);
}

/* Void every lease of s. */
static void
ring_leases_clear(struct shm_ring_ctx *c, struct shm_gs *s)
{
    while (s->lhead != 0)
        ring_lease_remove(c, s, 0, s->lhead);
    s->due = UINT64_MAX;
}

/* Is message m (of seq m->seq) leased by some group, in any state?  A
 * group's leases are all at or below its last, sorted. */
static int
ring_msg_leased(struct shm_ring_ctx *c, const struct shm_msg *m)
{
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        const struct shm_gs *s = shm_ring_gs(c->seg, g);
        if (m->seq > s->last)
            continue;
        for (uint32_t l = s->lhead; l != 0;) {
            const struct shm_lease *L = shm_ring_lease(c->seg, l);
            if (L->seq >= m->seq) {
                if (L->seq == m->seq)
                    return 1;
                break;
            }
            l = L->next;
        }
    }
    return 0;
}

/*
 * ring_superseded_end - a lease of superseded message ref (SHM_MSG_
 * SUPERSEDED) ended.  Once no group holds one, nothing will read it
 * again (every cursor passes it over, and the lease holders' redeliveries
 * were voided), so it leaves the list at once, as a message replaced
 * unleased does (ring_unlink): its cells, count and bytes go now, not when
 * the slowest group's cursor reaches it.  Its predecessor is found by a
 * walk from the head: a lease ending on a superseded message is as rare
 * as a replacement, and a queue that conflates holds few per key.
 */
static void
ring_superseded_end(struct shm_ring_ctx *c, uint32_t ref)
{
    uint32_t prev = 0, r = c->p->head;

    if (ring_msg_leased(c, shm_ring_msg(c->seg, ref)))
        return;
    while (r != 0 && r != ref) {
        prev = r;
        r = shm_ring_msg(c->seg, r)->next;
    }
    if (r == ref)
        ring_unlink(c, prev, ref);
}

/* End lease l of s (after prev) as ring_lease_remove does; a superseded
 * message goes with the last lease of it (ring_superseded_end).  Only a
 * queue that conflates looks at the message (an ack otherwise touches
 * none of its cells); one whose conflate was turned off since leaves it
 * to the head's advance, which frees it once every cursor passed it. */
static void
ring_lease_end(struct shm_ring_ctx *c, struct shm_gs *s, uint32_t prev,
               uint32_t l)
{
    uint32_t ref = shm_ring_lease(c->seg, l)->msg;

    ring_lease_remove(c, s, prev, l);
    if ((c->q->opts.flags & SHM_QOPT_CONFLATE) &&
        shm_ring_msg(c->seg, ref)->read == SHM_MSG_SUPERSEDED)
        ring_superseded_end(c, ref);
}

/* Is lease L's message superseded (a later one of its key replaced it)? */
static int
ring_lease_superseded(struct shm_ring_ctx *c, const struct shm_lease *L)
{
    return shm_ring_msg(c->seg, L->msg)->read == SHM_MSG_SUPERSEDED;
}

/* shm_ring_gs_remove_locked - see ring.h. */
void
shm_ring_gs_remove_locked(struct shm_ring_ctx *c, uint32_t grp)
{
    uint32_t *link = &c->p->groups;

    while (*link != 0 && shm_ring_gs(c->seg, *link)->grp != grp)
        link = &shm_ring_gs(c->seg, *link)->next;
    if (*link == 0)
        return;
    uint32_t g = *link;
    struct shm_gs *s = shm_ring_gs(c->seg, g);
    /* Each lease ends as an ack would end it: a superseded message this
     * group alone held goes with it. */
    while (s->lhead != 0)
        ring_lease_end(c, s, 0, s->lhead);
    s->due = UINT64_MAX;
    c->p->intent = g;
    *link = s->next;
    c->p->ngs--;
    ring_free(c, g);
}

/* Bytes a sink record of message m takes in k (with a fmt: no data, but
 * where it lies). */
static inline size_t
ring_rec_size(const struct shm_part *p, const struct shm_sink *k,
              const struct shm_msg *m)
{
    size_t head = (sizeof(struct shm_popped) + p->name_len + 7) & ~(size_t)7;

    if (k->fmt != NULL)
        return head + sizeof(const char *);
    return (sizeof(struct shm_popped) + p->name_len + m->len + 7) & ~(size_t)7;
}

/* ring_data - where run ref's data from data offset off lies, with *len
 * clipped at the run's end (a damaged length reads no further). */
static inline const char *
ring_data(struct shm_seg *seg, uint32_t ref, size_t off, uint32_t *len)
{
    const unsigned char *cell = shm_cell(seg, ref);
    size_t cap = SHM_RUN_DATA(*(const uint32_t *)cell);

    if (off >= cap)
        *len = 0;
    else if (*len > cap - off)
        *len = (uint32_t)(cap - off);
    return (const char *)cell + 4 + off;
}

/* Room for message m in the sink, and in the answer its fmt writes (whose
 * room the message's bound then leaves)?  Sets need when the sink is
 * empty, and the fmt's when its room refuses. */
static inline int
ring_fits(struct shm_ring_ctx *c, struct shm_sink *k, const struct shm_msg *m)
{
    size_t sz = ring_rec_size(c->p, k, m);

    if (k->used + sz <= k->cap) {
        struct shm_sink_fmt *f = k->fmt;
        if (f == NULL)
            return 1;
        size_t b = f->fixed + 12 * (size_t)c->p->name_len + m->len +
                   6 * (size_t)m->reply_len;
        if (b <= f->room) {
            f->room -= b;
            return 1;
        }
        f->need = b;
    }
    if (k->count == 0)
        k->need = sz;
    return 0;
}

/* Copy message ref into the sink (room checked): its record, and its data
 * there, or where it lies for the fmt's put (ring_flush).  Inline, always:
 * once a message a pop takes, where a call cost a fifth of it. */
static inline __attribute__((always_inline)) void
ring_put(struct shm_ring_ctx *c, struct shm_sink *k, uint32_t ref,
         uint32_t attempts)
{
    struct shm_msg *m = shm_ring_msg(c->seg, ref);
    unsigned char *o = k->buf + k->used;
    struct shm_popped *r = (struct shm_popped *)(void *)o;
    uint32_t nlen = c->p->name_len, len = m->len;
    const char *name = ring_data(c->seg, c->p->name_ref, 0, &nlen);
    const char *data = ring_data(c->seg, ref, SHM_MSG_HDR, &len);

    *r = (struct shm_popped){.seq = m->seq,
                             .attempts = attempts,
                             .part_len = c->p->name_len,
                             .len = m->len,
                             .reply_len = m->reply_len};
    memcpy(o + sizeof(*r), name, nlen);
    if (k->fmt != NULL) {
        /* what put reads stays within the message's run */
        r->len = len;
        r->reply_len = m->reply_len < len ? m->reply_len : len;
        memcpy(o + shm_popped_head(r), &data, sizeof(data));
    } else {
        memcpy(o + sizeof(*r) + c->p->name_len, data, len);
    }
    k->used += ring_rec_size(c->p, k, m);
    k->count++;
}

/* ring_flush - the fmt's put for the records one take added to k, from
 * offset from on (count before: n0), while their cells are still there. */
static void
ring_flush(struct shm_sink *k, size_t from, uint32_t n0)
{
    if (k->fmt != NULL && k->count > n0)
        k->fmt->put(k->fmt, k, (const struct shm_popped *)(k->buf + from),
                    k->count - n0);
}

/* shm_ring_copy_locked - see ring.h. */
int
shm_ring_copy_locked(struct shm_ring_ctx *c, struct shm_sink *k, uint32_t ref,
                     uint32_t attempts)
{
    size_t from = k->used;
    uint32_t n0 = k->count;

    if (!ring_fits(c, k, shm_ring_msg(c->seg, ref)))
        return -ENOMEM;
    ring_put(c, k, ref, attempts);
    ring_flush(k, from, n0);
    return 0;
}

/*
 * ring_dead - a drop of message ref (delivered attempts times; why 0 or
 * SHM_DEAD_TTL) copied into c->dead when the queue sends such drops to a
 * deadLetter queue.  1: the drop may go on (copied, or nothing to copy);
 * 0: it must wait (no sink here, or no room: then the sink's need says
 * how much the message takes).
 */
static int
ring_dead(struct shm_ring_ctx *c, uint32_t ref, uint32_t attempts, uint32_t why)
{
    uint32_t f = c->q->opts.flags;
    struct shm_sink *k = c->dead;
    struct shm_msg *m = shm_ring_msg(c->seg, ref);
    size_t at, sz;

    if (SHM_QOPT_DL_LEN(f) == 0 ||
        (why == SHM_DEAD_TTL && !(f & SHM_QOPT_DL_EXPIRED)))
        return 1;
    if (k == NULL)
        return 0;
    sz = ring_rec_size(c->p, k, m);
    if (k->used + sz > k->cap) {
        k->need = sz > k->need ? sz : k->need;
        return 0;
    }
    at = k->used;
    ring_put(c, k, ref, attempts);
    ((struct shm_popped *)(k->buf + at))->reply_len |= why;
    return 1;
}

/* Note a drop of the retry-limit kind. */
static void
ring_drop_retry(struct shm_ring_ctx *c)
{
    shm_count(c->seg, c->w, SHM_C_DROP_RETRY_LIMIT, 1);
    atomic_fetch_add_explicit(&c->q->drops[SHM_DROPS_RETRY], 1, RELAXED);
}

/* Message m passed its own ttl (SPEC §13): every group passes over it
 * from now on, as over a withdrawn request; counted as a ttl drop once. */
static void
ring_msg_expire(struct shm_ring_ctx *c, struct shm_msg *m)
{
    if (shm_msg_passed(m)) /* counted already (or conflated) */
        return;
    m->read = SHM_MSG_WITHDRAWN;
    shm_count(c->seg, c->w, SHM_C_DROP_TTL, 1);
    atomic_fetch_add_explicit(&c->q->drops[SHM_DROPS_TTL], 1, RELAXED);
}

/* Redeliveries of s into the sink: ready leases and expired ones, in seq
 * order.  Returns taken, or -ENOMEM if not even the first fit. */
static int
ring_take_again(struct shm_ring_ctx *c, struct shm_gs *s, uint32_t batch,
                int auto_ack, struct shm_sink *k)
{
    uint32_t limit = c->q->opts.retry_limit, prev = 0, l = s->lhead;
    uint64_t lease_ms = (uint64_t)c->q->opts.lease_s * 1000, due = UINT64_MAX;
    int taken = 0;

    while (l != 0 && (uint32_t)taken < batch) {
        struct shm_lease *L = shm_ring_lease(c->seg, l);
        uint32_t next = L->next;
        if ((L->state == SHM_LEASE_LEASED || L->state == SHM_LEASE_DELAYED) &&
            L->deadline > c->now) {
            due = L->deadline < due ? L->deadline : due;
            prev = l;
            l = next;
            continue;
        }
        if (ring_lease_superseded(c, L)) {
            /* Replaced since it went out (SPEC §13): the group reads the
             * newer value instead, so it is never redelivered. */
            ring_lease_end(c, s, prev, l);
            l = next;
            continue;
        }
        if (shm_msg_outlived(shm_ring_msg(c->seg, L->msg), c->q->opts.ttl_s,
                             c->now)) { /* counted when it leaves the list */
            if (shm_msg_expired(shm_ring_msg(c->seg, L->msg), c->now))
                ring_msg_expire(c, shm_ring_msg(c->seg, L->msg));
            ring_lease_remove(c, s, prev, l);
            l = next;
            continue;
        }
        if (L->state == SHM_LEASE_DELAYED) { /* its delay is over */
            L->state = SHM_LEASE_READY_INC;
            L->deadline = 0; /* given back (ring_ack_upto) */
            s->nready++;
        }
        if (L->state == SHM_LEASE_LEASED) {
            if (L->attempts >= limit && !ring_dead(c, L->msg, L->attempts, 0)) {
                /* Its dead letter waits for the master's upkeep: due. */
                due = L->deadline < due ? L->deadline : due;
                prev = l;
                l = next;
                continue;
            }
            if (L->attempts >= limit) {
                ring_lease_remove(c, s, prev, l);
                ring_drop_retry(c);
                l = next;
                continue;
            }
            L->state = SHM_LEASE_READY_INC;
            ring_ready_mark(c, s);
            shm_count(c->seg, c->w, SHM_C_REDELIVERY_LEASE_EXPIRED, 1);
        }
        if (!ring_fits(c, k, shm_ring_msg(c->seg, L->msg)))
            return taken == 0 ? -ENOMEM : taken;
        uint32_t att = L->attempts + (L->state == SHM_LEASE_READY_INC);
        ring_put(c, k, L->msg, att);
        taken++;
        shm_ring_msg(c->seg, L->msg)->read = 1;
        if (auto_ack) {
            ring_lease_remove(c, s, prev, l);
        } else {
            L->attempts = att;
            L->deadline = c->now + lease_ms;
            due = L->deadline < due ? L->deadline : due;
            L->state = SHM_LEASE_LEASED;
            ring_ready_unmark(c, s);
            ring_due(c->p, s, L->deadline);
            prev = l;
        }
        l = next;
    }
    if (l == 0)
        s->due = due;
    return taken;
}

void
shm_ring_lease_append_locked(struct shm_ring_ctx *c, struct shm_gs *s,
                             uint32_t l, uint32_t ref, uint64_t deadline,
                             uint32_t attempts, enum shm_lease_state state)
{
    struct shm_lease *L = shm_ring_lease(c->seg, l);

    L->next = 0;
    L->seq = shm_ring_msg(c->seg, ref)->seq;
    L->deadline = deadline;
    L->attempts = attempts;
    L->state = state;
    L->msg = ref;
    if (s->ltail != 0)
        shm_ring_lease(c->seg, s->ltail)->next = l; /* publishes */
    else
        s->lhead = l;
    s->ltail = l;
    shm_arena_link(c->seg, l);
    s->nleases++;
    if (state == SHM_LEASE_LEASED)
        STORE(c->p->leased, LOAD(c->p->leased) + 1);
    else if (state != SHM_LEASE_DELAYED)
        s->nready++;
}

/* Lease message ref (seq) to s: a new cell appended to the sorted list. */
static int
ring_lease_new(struct shm_ring_ctx *c, struct shm_gs *s, uint32_t ref)
{
    uint32_t l;
    uint64_t deadline = c->now + (uint64_t)c->q->opts.lease_s * 1000;
    int rc = shm_arena_alloc(c->seg, c->w, 1, &l);

    if (rc != 0)
        return rc;
    shm_ring_lease_append_locked(c, s, l, ref, deadline, 1, SHM_LEASE_LEASED);
    ring_due(c->p, s, deadline);
    return 0;
}

/* Message ref (seq) is not visible yet (delayMs): s's cursor passes it, so
 * the messages behind it are not held up, and a DELAYED lease owes s its
 * first delivery when it becomes visible (the due heap wakes the partition
 * then, and expire makes the lease ready). */
static int
ring_lease_delayed(struct shm_ring_ctx *c, struct shm_gs *s, uint32_t ref)
{
    uint64_t at = shm_msg_at(shm_ring_msg(c->seg, ref));
    uint32_t l;
    int rc = shm_arena_alloc(c->seg, c->w, 1, &l);

    if (rc != 0)
        return rc;
    shm_ring_lease_append_locked(c, s, l, ref, at, 0, SHM_LEASE_DELAYED);
    ring_due(c->p, s, at);
    return 0;
}

/* shm_ring_take_locked - see ring.h. */
int
shm_ring_take_locked(struct shm_ring_ctx *c, uint32_t gs, uint32_t batch,
                     int auto_ack, struct shm_sink *k)
{
    struct shm_gs *s = shm_ring_gs(c->seg, gs);
    size_t from = k->used;
    uint32_t n0 = k->count;
    int taken = 0, rc = 0;

    /* A hand-over on its way here goes first (shm_part_hold): pushes taken
     * meanwhile wait behind the messages it brings.  A hold that ran out
     * ends with the first pop after: what it kept the numbers for comes
     * after what is read now, as a push would. */
    if (c->p->hold_until > c->now)
        return 0;
    if (c->p->hold_until != 0)
        shm_ring_hold_end_locked(c);
    if (s->nready > 0 || s->due <= c->now) {
        taken = ring_take_again(c, s, batch, auto_ack, k);
        if (taken < 0)
            return taken;
    }
    while ((uint32_t)taken < batch && s->cursor != 0) {
        uint32_t ref = s->cursor;
        struct shm_msg *m = shm_ring_msg(c->seg, ref);
        if (!shm_msg_passed(m) && shm_msg_expired(m, c->now))
            ring_msg_expire(c, m);
        /* Its requester gave up, it was replaced, or its time is over: the
         * queue's ttl (counted when it leaves the list) reaches messages
         * behind a delayed head that the upkeep has not dropped yet. */
        if (shm_msg_passed(m) ||
            shm_msg_outlived(m, c->q->opts.ttl_s, c->now)) {
            s->last = m->seq;
            s->cursor = m->next;
            continue;
        }
        if (shm_msg_hidden(m, c->now)) {
            if ((rc = ring_lease_delayed(c, s, ref)) != 0)
                break;
            s->last = m->seq;
            s->cursor = m->next;
            continue;
        }
        if (!ring_fits(c, k, m)) {
            rc = -ENOMEM;
            break;
        }
        if (!auto_ack && (rc = ring_lease_new(c, s, ref)) != 0)
            break;
        ring_put(c, k, ref, 1);
        m->read = 1;
        s->last = m->seq;
        s->cursor = m->next;
        taken++;
    }
    ring_flush(k, from, n0); /* before the advance may free them */
    shm_ring_advance_locked(c);
    c->p->last_active = c->now;
    return taken > 0 ? taken : rc;
}

/* shm_ring_peek_locked - see ring.h. */
int
shm_ring_peek_locked(struct shm_ring_ctx *c, uint32_t gs)
{
    const struct shm_gs *s = shm_ring_gs(c->seg, gs);
    uint32_t limit = c->q->opts.retry_limit;

    /* A pop finds nothing while a hand-over is on its way here
     * (shm_ring_take_locked): neither does a peek, or a peer's watch would
     * say ready to passes that take nothing, again and again. */
    if (c->p->hold_until > c->now)
        return 0;
    if (s->nready > 0)
        return 1;
    if (s->due <= c->now)
        for (uint32_t l = s->lhead; l != 0;) {
            const struct shm_lease *L = shm_ring_lease(c->seg, l);
            if (L->deadline <= c->now && L->attempts < limit &&
                !ring_lease_superseded(c, L))
                return 1; /* expired, and another attempt is allowed */
            l = L->next;
        }
    for (uint32_t r = s->cursor; r != 0;) {
        const struct shm_msg *m = shm_ring_msg(c->seg, r);
        if (!shm_msg_passed(m) && !shm_msg_hidden(m, c->now) &&
            !shm_msg_outlived(m, c->q->opts.ttl_s, c->now))
            return 1;
        r = m->next;
    }
    return 0;
}

/* Find s's lease of seq: *prev gets its predecessor.  0 if none. */
static uint32_t
ring_lease_find(struct shm_ring_ctx *c, struct shm_gs *s, uint64_t seq,
                uint32_t *prev)
{
    *prev = 0;
    for (uint32_t l = s->lhead; l != 0;) {
        struct shm_lease *L = shm_ring_lease(c->seg, l);
        if (L->seq == seq)
            return l;
        if (L->seq > seq)
            return 0;
        *prev = l;
        l = L->next;
    }
    return 0;
}

/* Apply a cumulative ack to s: every message of s delivered up to
 * a->seq completes, whatever attempts it went out with: one out to a
 * consumer, and one whose lease ran out before the ack came (READY_INC
 * with its old deadline), so an ack a little late does not have the batch
 * sent again.  What the consumer gave back (failed, retry, release: a
 * ready lease with deadline 0, READY_SAME, DELAYED) stays, so a pop that
 * fails one message and acks its batch up to the last in one exchange
 * (SPEC §14) has it again; how many in a->count. */
static uint32_t
ring_ack_upto(struct shm_ring_ctx *c, struct shm_gs *s, struct shm_ack *a)
{
    uint32_t prev = 0, l = s->lhead, n = 0;

    while (l != 0) {
        struct shm_lease *L = shm_ring_lease(c->seg, l);
        uint32_t next = L->next;
        if (L->seq > a->seq)
            break;
        if (L->state == SHM_LEASE_LEASED ||
            (L->state == SHM_LEASE_READY_INC && L->deadline != 0)) {
            ring_lease_end(c, s, prev, l);
            n++;
        } else {
            prev = l;
        }
        l = next;
    }
    a->count = n;
    return n > 0 ? SHM_OUT_ACKED : SHM_OUT_UNKNOWN;
}

/* Apply one ack to s. */
static uint32_t
ring_ack_one(struct shm_ring_ctx *c, struct shm_gs *s, struct shm_ack *a)
{
    if (a->status == SHM_ACK_UPTO)
        return ring_ack_upto(c, s, a);
    uint32_t prev, l = ring_lease_find(c, s, a->seq, &prev);

    if (l == 0)
        return SHM_OUT_UNKNOWN;
    struct shm_lease *L = shm_ring_lease(c->seg, l);
    if (L->state == SHM_LEASE_DELAYED && L->attempts == 0)
        return SHM_OUT_UNKNOWN; /* not delivered yet: nothing to ack */
    if (a->attempts != 0 && a->attempts != L->attempts)
        return SHM_OUT_STALE;
    if (a->status == SHM_ACK_COMPLETED) {
        ring_lease_end(c, s, prev, l);
        return SHM_OUT_ACKED;
    }
    if (ring_lease_superseded(c, L)) {
        /* Failed or retry, but a later message of its key replaced it
         * (SPEC §13): it will not come back, so the lease ends as a drop
         * at the retry limit answers ("dropped"), counted as conflated
         * once already, not as a retry drop. */
        ring_lease_end(c, s, prev, l);
        return SHM_OUT_ACKED_DROPPED;
    }
    if (L->attempts >= c->q->opts.retry_limit) {
        if (!ring_dead(c, L->msg, L->attempts, 0))
            return SHM_OUT_DEFER;
        ring_lease_remove(c, s, prev, l);
        ring_drop_retry(c);
        return SHM_OUT_ACKED_DROPPED;
    }
    uint32_t delay = a->status != SHM_ACK_RETRY ? 0
                     : a->delay_ms == SHM_ACK_DELAY_QUEUE
                         ? c->q->opts.retry_delay_ms
                         : a->delay_ms;
    if (L->state == SHM_LEASE_LEASED)
        ring_ready_mark(c, s);
    else if (L->state == SHM_LEASE_DELAYED)
        s->nready++;
    L->state = SHM_LEASE_READY_INC;
    L->deadline = 0; /* given back (ring_ack_upto) */
    if (delay > 0) { /* ready again once the delay is over (expire) */
        s->nready--;
        L->state = SHM_LEASE_DELAYED;
        L->deadline = c->now + delay;
        ring_due(c->p, s, L->deadline);
    }
    shm_count(c->seg, c->w, SHM_C_REDELIVERY_FAILED, 1);
    return SHM_OUT_REDELIVERED;
}

/* shm_ring_ack_locked - see ring.h. */
void
shm_ring_ack_locked(struct shm_ring_ctx *c, uint32_t gs, struct shm_ack *acks,
                    uint32_t n)
{
    struct shm_gs *s = shm_ring_gs(c->seg, gs);

    for (uint32_t i = 0; i < n; i++)
        acks[i].outcome = ring_ack_one(c, s, &acks[i]);
    shm_ring_advance_locked(c);
}

/* shm_ring_extend_locked - see ring.h. */
void
shm_ring_extend_locked(struct shm_ring_ctx *c, uint32_t gs,
                       struct shm_ack *ents, uint32_t n)
{
    struct shm_gs *s = shm_ring_gs(c->seg, gs);

    for (uint32_t i = 0; i < n; i++) {
        uint32_t prev, l = ring_lease_find(c, s, ents[i].seq, &prev);
        struct shm_lease *L = l != 0 ? shm_ring_lease(c->seg, l) : NULL;
        if (L == NULL || L->state != SHM_LEASE_LEASED)
            ents[i].outcome = SHM_OUT_UNKNOWN;
        else if (ents[i].attempts != 0 && ents[i].attempts != L->attempts)
            ents[i].outcome = SHM_OUT_STALE;
        else {
            L->deadline = c->now + (uint64_t)ents[i].seconds * 1000;
            ring_due(c->p, s, L->deadline);
            ents[i].outcome = SHM_OUT_EXTENDED;
        }
    }
}

/* shm_ring_release_locked - see ring.h. */
int
shm_ring_release_locked(struct shm_ring_ctx *c, uint32_t gs, uint64_t seq,
                        uint32_t attempts)
{
    struct shm_gs *s = shm_ring_gs(c->seg, gs);
    uint32_t prev, l = ring_lease_find(c, s, seq, &prev);

    if (l == 0)
        return 0;
    struct shm_lease *L = shm_ring_lease(c->seg, l);
    if (L->state != SHM_LEASE_LEASED || L->attempts != attempts)
        return 0;
    if (ring_lease_superseded(c, L)) { /* never again: nothing to wake */
        ring_lease_end(c, s, prev, l);
        return 0;
    }
    L->state = SHM_LEASE_READY_SAME;
    ring_ready_mark(c, s);
    return 1;
}

/* Unlink and free the head message (no group state refers to it any
 * more), leaving the partition's count, cost and oldest to the caller
 * (ring_heads_gone); returns its cost.  A holder dead in between leaves
 * them to the repair, which derives all three from its walk. */
static uint64_t
ring_unlink_head(struct shm_ring_ctx *c)
{
    struct shm_part *p = c->p;
    uint32_t h = p->head;
    struct shm_msg *m = shm_ring_msg(c->seg, h);
    uint64_t cost = shm_ring_msg_cost(shm_msg_stored(m));

    ring_gone(p, m);
    if (shm_msg_hidden(m, c->now) && LOAD(p->delayed) > 0)
        STORE(p->delayed, LOAD(p->delayed) - 1);
    p->intent = h;
    p->head = m->next;
    if (p->head == 0)
        p->tail = 0;
    ring_free(c, h);
    return cost;
}

/* ring_heads_gone - n head messages of cost bytes went (ring_unlink_head). */
static void
ring_heads_gone(struct shm_ring_ctx *c, uint64_t n, uint64_t cost)
{
    struct shm_part *p = c->p;

    if (p->head != 0)
        STORE(p->oldest_ms, shm_msg_at(shm_ring_msg(c->seg, p->head)));
    STORE(p->count, LOAD(p->count) - n);
    ring_set_cost(c->seg, p, LOAD(p->cost) - cost);
}

/* Free the head message (no group state refers to it any more). */
static void
ring_free_head(struct shm_ring_ctx *c)
{
    ring_heads_gone(c, 1, ring_unlink_head(c));
}

/* shm_ring_advance_locked - see ring.h.  Nothing is freed while a group the
 * queue knows has no state here yet (it may still want everything), nor a
 * message no group has read (a group may still come for it); a read message
 * all of whose groups were forgotten goes. */
void
shm_ring_advance_locked(struct shm_ring_ctx *c)
{
    struct shm_part *p = c->p;
    uint64_t min = UINT64_MAX;

    if (p->ngs < LOAD(c->q->ngroups))
        return;
    for (uint32_t g = p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(c->seg, g);
        if (s->cursor != 0 && shm_ring_msg(c->seg, s->cursor)->seq < min)
            min = shm_ring_msg(c->seg, s->cursor)->seq;
        if (s->lhead != 0 && shm_ring_lease(c->seg, s->lhead)->seq < min)
            min = shm_ring_lease(c->seg, s->lhead)->seq;
    }
    uint64_t n = 0, cost = 0; /* counted once for the run freed */
    while (p->head != 0 && shm_ring_msg(c->seg, p->head)->seq < min &&
           shm_ring_msg(c->seg, p->head)->read) {
        cost += ring_unlink_head(c);
        n++;
    }
    if (n > 0)
        ring_heads_gone(c, n, cost);
}

/* Drop the head message whatever the groups think of it. */
static void
ring_drop_head(struct shm_ring_ctx *c)
{
    uint32_t h = c->p->head;
    uint64_t seq = shm_ring_msg(c->seg, h)->seq;
    /* a group would have passed a superseded one over: no skip */
    int lost = shm_ring_msg(c->seg, h)->read != SHM_MSG_SUPERSEDED;

    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(c->seg, g);
        if (s->cursor == h) {
            s->last = seq;
            s->cursor = shm_ring_msg(c->seg, h)->next;
            s->skipped += (uint64_t)lost;
        }
        while (s->lhead != 0 && shm_ring_lease(c->seg, s->lhead)->seq <= seq)
            ring_lease_remove(c, s, 0, s->lhead);
    }
    ring_free_head(c);
}

/* shm_ring_drop_locked - see ring.h. */
uint64_t
shm_ring_drop_locked(struct shm_ring_ctx *c, uint64_t n, enum shm_drop_why why)
{
    uint64_t k = 0;

    while (k < n && c->p->head != 0) {
        ring_drop_head(c);
        k++;
    }
    if (k > 0 && why == SHM_DROP_EVICT) {
        shm_count(c->seg, c->w, SHM_C_DROP_DROP_OLDEST, k);
        atomic_fetch_add_explicit(&c->q->drops[SHM_DROPS_BOUNDS], k, RELAXED);
    }
    return k;
}

/* ring_held - whether message ref is still wanted: unread, or unread or
 * leased by some group (*attempts: its highest delivery's attempts); a
 * message every group completed, held only behind an older one, or a
 * withdrawn request, is not. */
static int
ring_held(struct shm_ring_ctx *c, uint32_t ref, uint32_t *attempts)
{
    const struct shm_msg *m = shm_ring_msg(c->seg, ref);
    int held = m->read == 0;

    *attempts = 0;
    if (shm_msg_passed(m))
        return 0;
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        const struct shm_gs *s = shm_ring_gs(c->seg, g);
        held |= m->seq > s->last;
        for (uint32_t l = s->lhead; l != 0;) {
            const struct shm_lease *L = shm_ring_lease(c->seg, l);
            if (L->seq == m->seq) {
                held = 1;
                *attempts = L->attempts > *attempts ? L->attempts : *attempts;
            }
            if (L->seq >= m->seq)
                break;
            l = L->next;
        }
    }
    return held;
}

/* ring_drop_counted - was m's end counted already: marked at its own ttl
 * (ring_msg_expire), or replaced by a later one of its key (conflated)? */
static int
ring_drop_counted(const struct shm_msg *m)
{
    return (m->read == SHM_MSG_WITHDRAWN && shm_msg_ttl(m) != 0) ||
           m->read == SHM_MSG_SUPERSEDED;
}

/* shm_ring_ttl_locked - see ring.h. */
uint64_t
shm_ring_ttl_locked(struct shm_ring_ctx *c, uint32_t ttl_s)
{
    uint64_t k = 0;

    /* A message's own ttl drops it from the head too (one further in is
     * passed over by the groups, ring_msg_expire, and freed from the head
     * as any read message). */
    while (c->p->head != 0) {
        const struct shm_msg *m = shm_ring_msg(c->seg, c->p->head);
        uint32_t att;
        if (!shm_msg_outlived(m, ttl_s, c->now))
            break;
        if (ring_drop_counted(m)) {
            ring_drop_head(c);
            continue;
        }
        if (ring_held(c, c->p->head, &att) &&
            !ring_dead(c, c->p->head, att, SHM_DEAD_TTL))
            break; /* its dead letter first: the rest waits behind it */
        ring_drop_head(c);
        k++;
    }
    k += ttl_behind_delayed(c, ttl_s);
    if (k > 0) {
        shm_count(c->seg, c->w, SHM_C_DROP_TTL, k);
        atomic_fetch_add_explicit(&c->q->drops[SHM_DROPS_TTL], k, RELAXED);
    }
    return k;
}

/* ttl_behind_delayed - the messages past their time behind a head pushed
 * with a delay, which the head's drops stop at: each one no group holds a
 * lease of (a group that passed it over owes it nothing) leaves the middle
 * of the list as a withdrawn request does, its dead letter first when
 * deadLetterExpired wants one.  The walk crosses messages pushed with a
 * delay (each their own time) and stops at the first other one still in
 * its time: those behind it were pushed later.  Every push and pop comes
 * here, so it looks TTL_WALK_MAX messages deep at most: one further in
 * waits for the head's own time (pops pass over it meanwhile).  Returns
 * the drops to count (ring_drop_counted). */
static uint64_t
ttl_behind_delayed(struct shm_ring_ctx *c, uint32_t ttl_s)
{
    uint64_t k = 0;
    uint32_t prev = c->p->head, r, att, seen = 0;

    if (prev == 0 || !(shm_ring_msg(c->seg, prev)->enq_ms & SHM_MSG_DELAYED))
        return 0;
    for (r = shm_ring_msg(c->seg, prev)->next;
         r != 0 && seen++ < TTL_WALK_MAX;) {
        const struct shm_msg *m = shm_ring_msg(c->seg, r);
        uint32_t next = m->next;
        if (!shm_msg_outlived(m, ttl_s, c->now)) {
            if (!(m->enq_ms & SHM_MSG_DELAYED))
                break;
        } else if (!ring_msg_leased(c, m) && !shm_msg_hidden(m, c->now)) {
            if (ring_held(c, r, &att) && !ring_dead(c, r, att, SHM_DEAD_TTL))
                break; /* its dead letter first: the rest waits behind it */
            k += !ring_drop_counted(m);
            ring_unlink(c, prev, r);
            r = next;
            continue;
        }
        prev = r;
        r = next;
    }
    return k;
}

/* Count again the messages not visible yet (p->delayed), when there were
 * some: those that became visible since make ready ones (parked pops are
 * woken for them), and the next to become visible lowers *pdue. */
static uint64_t
ring_delayed_count(struct shm_ring_ctx *c, uint64_t *pdue)
{
    uint64_t was = LOAD(c->p->delayed), n = 0;

    if (was == 0)
        return 0;
    for (uint32_t r = c->p->head; r != 0; r = shm_ring_msg(c->seg, r)->next) {
        const struct shm_msg *m = shm_ring_msg(c->seg, r);
        uint64_t at = shm_msg_at(m);
        if (shm_msg_hidden(m, c->now)) {
            n++;
            *pdue = at < *pdue ? at : *pdue;
        }
    }
    STORE(c->p->delayed, n);
    return was > n ? was - n : 0;
}

/* shm_ring_expire_locked - see ring.h. */
uint64_t
shm_ring_expire_locked(struct shm_ring_ctx *c, uint32_t retry_limit)
{
    uint64_t ready = 0, pdue;

    /* A hold that ran out ends here (shm_part_hold made the partition due
     * then), not only with the next pop: the horizon (shm/horizon.h) waits
     * for no pop, and pops it kept waiting are woken for what it held. */
    if (c->p->hold_until != 0 && c->p->hold_until <= c->now) {
        shm_ring_hold_end_locked(c);
        ready += c->p->head != 0;
    }
    pdue = ring_hold_due(c->p);
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(c->seg, g);
        uint32_t prev = 0, l = s->lhead;
        if (s->due > c->now) {
            pdue = s->due < pdue ? s->due : pdue;
            continue;
        }
        s->due = UINT64_MAX;
        while (l != 0) {
            struct shm_lease *L = shm_ring_lease(c->seg, l);
            uint32_t next = L->next;
            int timed =
                L->state == SHM_LEASE_LEASED || L->state == SHM_LEASE_DELAYED;
            if (!timed || L->deadline > c->now) {
                if (timed && L->deadline < s->due)
                    s->due = L->deadline;
                prev = l;
            } else if (ring_lease_superseded(c, L)) {
                ring_lease_end(c, s, prev, l); /* replaced: never again */
            } else if (L->state == SHM_LEASE_DELAYED) {
                L->state = SHM_LEASE_READY_INC; /* its delay is over */
                L->deadline = 0;                /* given back: ring_ack_upto */
                s->nready++;
                ready++;
                prev = l;
            } else if (L->attempts >= retry_limit &&
                       !ring_dead(c, L->msg, L->attempts, 0)) {
                /* No room for its dead letter: due again at once. */
                s->due = L->deadline < s->due ? L->deadline : s->due;
                prev = l;
            } else if (L->attempts >= retry_limit) {
                ring_lease_remove(c, s, prev, l);
                ring_drop_retry(c);
            } else {
                L->state = SHM_LEASE_READY_INC;
                ring_ready_mark(c, s);
                ready++;
                shm_count(c->seg, c->w, SHM_C_REDELIVERY_LEASE_EXPIRED, 1);
                prev = l;
            }
            l = next;
        }
        pdue = s->due < pdue ? s->due : pdue;
    }
    ready += ring_delayed_count(c, &pdue);
    STORE(c->p->due, pdue);
    shm_ring_advance_locked(c);
    return ready;
}

/* shm_ring_reset_locked - see ring.h. */
uint64_t
shm_ring_reset_locked(struct shm_ring_ctx *c)
{
    uint64_t k = 0;

    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next)
        ring_leases_clear(c, shm_ring_gs(c->seg, g));
    while (c->p->head != 0) {
        ring_drop_head(c);
        k++;
    }
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        shm_ring_gs(c->seg, g)->cursor = 0;
        shm_ring_gs(c->seg, g)->skipped = 0;
    }
    STORE(c->p->due, ring_hold_due(c->p));
    return k;
}

/* shm_ring_clear_locked - see ring.h. */
uint64_t
shm_ring_clear_locked(struct shm_ring_ctx *c)
{
    uint64_t k = shm_ring_reset_locked(c);

    shm_ring_hold_end_locked(c);      /* the record goes: so does its hold */
    shm_ddx_drop(c->seg, c->w, c->p); /* and its window (a hand-over */
    while (c->p->dd_head != 0)        /* carries it) */
        ring_dd_drop_head(c);
    while (c->p->groups != 0)
        shm_ring_gs_remove_locked(c, shm_ring_gs(c->seg, c->p->groups)->grp);
    return k;
}

/* ---- conflation -------------------------------------------------------- */

/* shm_ring_keys_find - see ring.h: a binary search. */
uint32_t
shm_ring_keys_find(const struct shm_ring_keys *k, uint64_t hash)
{
    uint32_t lo = 0, hi = k->n;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (k->hash[mid] < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < k->n && k->hash[lo] == hash ? lo : k->n;
}

/*
 * ring_unread - is message m unread, so it may leave the middle of the list
 * at once however the groups stand (an adopt finds it stored twice, or its
 * request is withdrawn)?  No group has had it (read 0) and none owes it (a
 * lease: a first delivery an adopt owes it, or, for a message pushed with
 * a delay, the DELAYED lease a group takes when its cursor passes it).
 */
static int
ring_unread(struct shm_ring_ctx *c, const struct shm_msg *m)
{
    return m->read == 0 && !(m->enq_ms & SHM_MSG_DELAYED) &&
           !ring_msg_leased(c, m);
}


/* ring_replaceable - may keyed message m give way to a later one of its
 * key?  Keyed, not pushed with a delay (never replaced: DESIGN.md §4b),
 * and not passed over already (replaced, withdrawn, expired). */
static int
ring_replaceable(const struct shm_msg *m)
{
    return shm_msg_keyed(m) && !(m->enq_ms & SHM_MSG_DELAYED) &&
           !shm_msg_passed(m);
}

/*
 * ring_unlink - take message ref (after prev; 0: it is the head) out of
 * the list and free it.  A cursor on it moves to the next (the first
 * above the group's last, as repair would derive it), a tail read behind
 * it has missed it (gone_seq is raised first: tail.c trusts a position
 * above gone_seq to be listed), it is named in the intent, and the store
 * into prev's link (or the head) publishes.
 */
static void
ring_unlink(struct shm_ring_ctx *c, uint32_t prev, uint32_t ref)
{
    struct shm_part *p = c->p;
    struct shm_msg *m = shm_ring_msg(c->seg, ref);

    ring_gone(p, m);
    for (uint32_t g = p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next)
        if (shm_ring_gs(c->seg, g)->cursor == ref)
            shm_ring_gs(c->seg, g)->cursor = m->next;
    p->intent = ref;
    if (prev != 0)
        shm_ring_msg(c->seg, prev)->next = m->next; /* publishes */
    else {
        p->head = m->next;
        if (p->head != 0)
            STORE(p->oldest_ms, shm_msg_at(shm_ring_msg(c->seg, p->head)));
    }
    if (p->tail == ref)
        p->tail = prev;
    STORE(p->count, LOAD(p->count) - 1);
    ring_set_cost(c->seg, p,
                  LOAD(p->cost) - shm_ring_msg_cost(shm_msg_stored(m)));
    ring_free(c, ref);
}

/* shm_ring_withdraw_locked - see ring.h.  Unread (ring_unread): no group
 * had it and none owes it, so it leaves the middle of the list as a
 * replaced message does (ring_unlink: named in the intent, one store
 * publishes, a cursor on it moves on, and gone_seq is raised, so a tail
 * read from before it, which never copied it, learns it missed it: it
 * did).  Then the head advances: read messages behind an unread request
 * at the head were held there by it alone. */
int
shm_ring_withdraw_locked(struct shm_ring_ctx *c, uint32_t prev, uint32_t ref)
{
    if (!ring_unread(c, shm_ring_msg(c->seg, ref)))
        return 0;
    ring_unlink(c, prev, ref);
    shm_ring_advance_locked(c);
    return 1;
}

/* The index in k of keyed message ref's key, or k->n. */
static uint32_t
ring_key_of(struct shm_ring_ctx *c, const struct shm_ring_keys *k, uint32_t ref)
{
    if (!shm_msg_keyed(shm_ring_msg(c->seg, ref)))
        return k->n;
    return shm_ring_keys_find(k, shm_ring_msg_key(c->seg, ref));
}

/*
 * Conflation across groups (SPEC §13: "a consumer that comes back reads
 * each key's newest value once").  Whether an older message of a key gives
 * way is asked of each group, not of the message: with an `active` group
 * that reads every message as it comes and a `back` group that is away,
 * every message has been read by someone, yet `back` must read only each
 * key's newest.  So a replaced message is gone for every group that has
 * not had it, while a group that had it keeps what it holds:
 *
 * - a group whose cursor has not passed it (seq above its last), one
 *   owed a first delivery of it (an adopt's lease of attempts 0), or a
 *   group the queue knows with no state here yet, has not had it: it
 *   never will (its cursor passes it over, or it is gone from the list);
 * - a group that read it and is done (acked, autoAck) loses nothing;
 * - a group that holds it out to a consumer (LEASED) keeps the lease: an
 *   extend, a completed ack answer as before; a failed or retry ack, a
 *   lease that runs out and a release end it without a redelivery (the
 *   group reads the newer value, which is past its cursor); a lease
 *   waiting for a redelivery (ready, or a retry's delay) is voided now.
 *
 * Memory: a replaced message no group holds leased leaves the list at
 * once (ring_unlink, its cells freed: a message read by some groups and
 * not by others may leave the middle as well as an unread one, since no
 * lease names it and a cursor on it moves on); one still leased is marked
 * SHM_MSG_SUPERSEDED, one store, and leaves with its last lease
 * (ring_superseded_end).  The list, count and bytes hold it meanwhile, as
 * they hold any message out to a consumer, so depth, maxLength, maxBytes
 * and the node cap count what memory holds and what some group may still
 * act on; a group's own pending skips it.  A tail (no group) passes it over
 * too, and gone_seq is raised as for an unlinked one: a tail reads in
 * sequence order, and the newer value comes later in it.  The hand-over
 * carries neither a superseded message nor its leases (part_move.c): the
 * new owner's groups would pass them over anyway.
 *
 * A message every group has had (all past it, none waiting) is left to
 * the head's advance, as before, and one group alone holding a lease with
 * nobody waiting keeps today's single-group behaviour: its redelivery
 * comes (nothing is replaced for nobody).
 */

/* What the groups say of keyed message m, which a later one of its key
 * replaces: *waiting, some group has not had it yet; *out, some group
 * holds it leased out to a consumer.  A group's leases are all at or
 * below its last, sorted. */
static void
ring_claims(struct shm_ring_ctx *c, const struct shm_msg *m, int *waiting,
            int *out)
{
    *waiting = m->read == 0 || c->p->ngs < LOAD(c->q->ngroups);
    *out = 0;
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        const struct shm_gs *s = shm_ring_gs(c->seg, g);
        if (m->seq > s->last) {
            *waiting = 1;
            continue;
        }
        for (uint32_t l = s->lhead; l != 0;) {
            const struct shm_lease *L = shm_ring_lease(c->seg, l);
            if (L->seq >= m->seq) {
                if (L->seq == m->seq && L->attempts == 0)
                    *waiting = 1; /* a first delivery owed */
                else if (L->seq == m->seq && L->state == SHM_LEASE_LEASED)
                    *out = 1;
                break;
            }
            l = L->next;
        }
    }
}

/* Void every lease of m that is not out to a consumer: a redelivery
 * waiting (ready, or a retry's delay) or a first delivery owed.  Each is
 * one published unlink (ring_lease_remove). */
static void
ring_claims_void(struct shm_ring_ctx *c, const struct shm_msg *m)
{
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(c->seg, g);
        uint32_t prev = 0;
        if (m->seq > s->last)
            continue;
        for (uint32_t l = s->lhead; l != 0;) {
            const struct shm_lease *L = shm_ring_lease(c->seg, l);
            if (L->seq >= m->seq) {
                if (L->seq == m->seq && L->state != SHM_LEASE_LEASED)
                    ring_lease_remove(c, s, prev, l);
                break;
            }
            prev = l;
            l = L->next;
        }
    }
}

/* shm_ring_conflate_locked - see ring.h.  Two walks: the last place of
 * each key (counted from 1), then the replacements: each an unlink, or
 * its waiting leases voided and then the mark, one store (a holder killed
 * before it leaves the message as it was, read by those still waiting:
 * at-least-once; the checker's rule that a superseded message has only
 * LEASED leases holds at every step). */
uint32_t
shm_ring_conflate_locked(struct shm_ring_ctx *c, const struct shm_ring_keys *k,
                         int count_only, uint64_t *cost)
{
    uint32_t n = 0, i = 1, prev = 0, r, next, j;
    int waiting, out;

    if (k->n == 0)
        return 0;
    if (!count_only) {
        memset(k->last, 0, (size_t)k->n * sizeof(*k->last));
        for (r = c->p->head; r != 0; r = shm_ring_msg(c->seg, r)->next, i++)
            if ((j = ring_key_of(c, k, r)) < k->n)
                k->last[j] = i;
    }
    for (r = c->p->head, i = 1; r != 0; r = next, i++) {
        struct shm_msg *m = shm_ring_msg(c->seg, r);
        next = m->next;
        if (!ring_replaceable(m) || (j = ring_key_of(c, k, r)) >= k->n ||
            (!count_only && k->last[j] <= i)) {
            prev = r;
            continue;
        }
        ring_claims(c, m, &waiting, &out);
        if (!waiting) { /* every group had it: the advance frees it */
            prev = r;
            continue;
        }
        if (count_only) { /* only what leaves at once nets out of bounds */
            if (!out) {
                n++;
                *cost += shm_ring_msg_cost(shm_msg_stored(m));
            }
            prev = r;
            continue;
        }
        n++;
        ring_claims_void(c, m);
        if (!out) {
            ring_unlink(c, prev, r);
            continue;
        }
        ring_gone(c->p, m); /* a tail behind it misses it, as an unlink */
        m->read = SHM_MSG_SUPERSEDED;
        prev = r;
    }
    if (!count_only && n > 0)
        shm_count(c->seg, c->w, SHM_C_CONFLATED, n);
    return n;
}

/* ---- the dedupe window ------------------------------------------------ */

/* Unlink and free the window's oldest key (named in the intent first, and
 * out of the index before it is freed); the last one takes the index. */
static void
ring_dd_drop_head(struct shm_ring_ctx *c)
{
    struct shm_part *p = c->p;
    struct shm_ddx *x = shm_ddx_of(c->seg, p);
    uint32_t d = p->dd_head;

    p->intent = d;
    if (x != NULL)
        shm_ddx_remove(c->seg, x, d);
    p->dd_head = shm_ring_dd(c->seg, d)->next;
    if (p->dd_head == 0)
        p->dd_tail = 0;
    p->dd_count--;
    ring_free(c, d);
    if (p->dd_head == 0)
        shm_ddx_drop(c->seg, c->w, p);
}

/* shm_ring_dd_undo_locked - see ring.h.  The message is found by its
 * sequence (a walk: this is rare, a key pushed here during a gap), then
 * unlinked as conflation does (one store publishes, named in the intent
 * first); then the key leaves the window the same way (out of the index
 * before it is freed).  A crash between the two leaves a key whose
 * message is gone, as an acked one's is: sound. */
int
shm_ring_dd_undo_locked(struct shm_ring_ctx *c, uint64_t hash,
                        uint64_t window_ms, uint64_t inc)
{
    struct shm_part *p = c->p;
    const struct shm_dd *e = shm_ring_dd_find_locked(c, hash, window_ms);
    uint32_t prev = 0, r, d, dprev = 0;

    if (e == NULL || e->inc != inc)
        return 0;
    for (r = p->head; r != 0; prev = r, r = shm_ring_msg(c->seg, r)->next)
        if (shm_ring_msg(c->seg, r)->seq == e->seq)
            break;
    if (r == 0 || !ring_unread(c, shm_ring_msg(c->seg, r)))
        return 0; /* read, or acked and gone: both stay (at-least-once) */
    for (d = p->dd_head; d != 0 && shm_ring_dd(c->seg, d) != e;
         dprev = d, d = shm_ring_dd(c->seg, d)->next)
        ;
    if (d == 0)
        return 0;
    ring_unlink(c, prev, r);
    struct shm_ddx *x = shm_ddx_of(c->seg, p);
    p->intent = d;
    if (x != NULL)
        shm_ddx_remove(c->seg, x, d);
    if (dprev != 0)
        shm_ring_dd(c->seg, dprev)->next = shm_ring_dd(c->seg, d)->next;
    else
        p->dd_head = shm_ring_dd(c->seg, d)->next;
    if (p->dd_tail == d)
        p->dd_tail = dprev;
    p->dd_count--;
    ring_free(c, d);
    if (p->dd_head == 0)
        shm_ddx_drop(c->seg, c->w, p);
    return 1;
}

/* shm_ring_dd_trim_locked - see ring.h. */
void
shm_ring_dd_trim_locked(struct shm_ring_ctx *c, uint64_t window_ms,
                        uint32_t max)
{
    while (c->p->dd_head != 0 &&
           (c->p->dd_count > max ||
            shm_ring_dd(c->seg, c->p->dd_head)->at_ms + window_ms <= c->now))
        ring_dd_drop_head(c);
}

/* shm_ring_dd_find_locked - see ring.h. */
const struct shm_dd *
shm_ring_dd_find_locked(struct shm_ring_ctx *c, uint64_t hash,
                        uint64_t window_ms)
{
    const struct shm_ddx *x = shm_ddx_of(c->seg, c->p);

    if (x != NULL)
        return shm_ddx_find(c->seg, x, hash, c->now, window_ms);
    for (uint32_t d = c->p->dd_head; d != 0; d = shm_ring_dd(c->seg, d)->next) {
        const struct shm_dd *e = shm_ring_dd(c->seg, d);
        if (e->hash == hash && e->at_ms + window_ms > c->now)
            return e;
    }
    return NULL;
}

/* shm_ring_dd_append_locked - see ring.h. */
void
shm_ring_dd_append_locked(struct shm_ring_ctx *c, uint32_t d)
{
    struct shm_part *p = c->p;

    if (p->dd_tail != 0)
        shm_ring_dd(c->seg, p->dd_tail)->next = d; /* publishes */
    else
        p->dd_head = d;
    p->dd_tail = d;
    p->dd_count++;
    shm_arena_link(c->seg, d);
    /* The index: made once the window is long enough for a walk to cost,
     * grown past two keys a bucket.  A build that finds no room is tried
     * again only every so many keys (a long run takes the arena lock), and
     * meanwhile the lookup walks, or uses the index it has. */
    struct shm_ddx *x = shm_ddx_of(c->seg, p);
    if (x != NULL) {
        shm_ddx_insert(c->seg, x, d);
        if (p->dd_count > 2 * x->nb && ((p->dd_count - 1) & (x->nb - 1)) == 0)
            (void)shm_ddx_build(c->seg, c->w, p);
    } else if (p->dd_count >= SHM_DDX_MIN_KEYS &&
               (p->dd_count & (SHM_DDX_MIN_KEYS - 1)) == 0)
        (void)shm_ddx_build(c->seg, c->w, p);
}

/* shm_ring_dd_reindex_locked - see ring.h. */
void
shm_ring_dd_reindex_locked(struct shm_ring_ctx *c)
{
    struct shm_part *p = c->p;
    struct shm_ddx *x = shm_ddx_of(c->seg, p);

    if (p->dd_head == 0) {
        shm_ddx_drop(c->seg, c->w, p);
        return;
    }
    if ((x != NULL || p->dd_count >= SHM_DDX_MIN_KEYS) &&
        shm_ddx_build(c->seg, c->w, p) == 0)
        return;
    if (x != NULL) /* no room for a bigger one: the old one, refilled */
        (void)shm_ddx_fill(c->seg, x, p->dd_head, UINT64_MAX);
}

/* shm_ring_depth_locked - see ring.h. */
void
shm_ring_depth_locked(struct shm_ring_ctx *c, uint32_t gs,
                      struct shm_ring_depth *out)
{
    struct shm_part *p = c->p;

    memset(out, 0, sizeof(*out));
    out->leased = LOAD(p->leased);
    if (p->head != 0) {
        uint64_t enq = shm_msg_at(shm_ring_msg(c->seg, p->head));
        out->oldest_age_ms = c->now > enq ? c->now - enq : 0;
    }
    if (gs == 0) {
        out->delayed = LOAD(p->delayed);
        out->pending = LOAD(p->count) - out->delayed;
        return;
    }
    struct shm_gs *s = shm_ring_gs(c->seg, gs);
    for (uint32_t r = s->cursor; r != 0; r = shm_ring_msg(c->seg, r)->next) {
        const struct shm_msg *m = shm_ring_msg(c->seg, r);
        if (m->read == SHM_MSG_SUPERSEDED)
            continue; /* it will pass it over */
        if (shm_msg_hidden(m, c->now))
            out->delayed++;
        else
            out->pending++;
    }
    for (uint32_t l = s->lhead; l != 0; l = shm_ring_lease(c->seg, l)->next)
        out->delayed += shm_ring_lease(c->seg, l)->state == SHM_LEASE_DELAYED;
    out->pending += s->nready;
    out->leased = s->nleases - s->nready - out->delayed;
    out->skipped = s->skipped;
}

/* ---- repair ---------------------------------------------------------- */

/* The longest list a walk may follow: more means a cycle. */
static uint64_t
ring_walk_max(struct shm_seg *seg)
{
    return seg->size / SHM_CELL_BYTES;
}

/* Is message ref in the list? (Repair only: O(n).) */
static int
ring_has_msg(struct shm_seg *seg, struct shm_part *p, uint32_t ref)
{
    for (uint32_t r = p->head; r != 0; r = shm_ring_msg(seg, r)->next)
        if (r == ref)
            return 1;
    return 0;
}

/* Re-derive the message list: tail, counts, tags.  0 if it is sound. */
static int
ring_repair_msgs(struct shm_seg *seg, struct shm_part *p)
{
    uint64_t n = 0, cost = 0, prev = 0, max = ring_walk_max(seg);
    uint32_t last = 0;

    for (uint32_t r = p->head; r != 0; r = shm_ring_msg(seg, r)->next) {
        struct shm_msg *m = shm_ring_msg(seg, r);
        if (++n > max || m->seq <= prev)
            return -EUCLEAN;
        prev = m->seq;
        cost += shm_ring_msg_cost(shm_msg_stored(m));
        shm_arena_link(seg, r);
        last = r;
    }
    p->tail = last;
    shm_ring_last_seq_locked(p, prev);
    STORE(p->count, n);
    ring_set_cost(seg, p, cost);
    STORE(p->oldest_ms, p->head ? shm_msg_at(shm_ring_msg(seg, p->head)) : 0);
    return 0;
}

/* Re-derive the dedupe window's tail, count and tags; *intent_seen when
 * the intent is one of its keys.  A list longer than the arena (a cycle)
 * is unsound. */
static int
ring_repair_dd(struct shm_seg *seg, struct shm_part *p, int *intent_seen)
{
    uint64_t n = 0, max = ring_walk_max(seg);
    uint32_t last = 0;

    for (uint32_t d = p->dd_head; d != 0; d = shm_ring_dd(seg, d)->next) {
        if (++n > max)
            return -EUCLEAN;
        if (d == p->intent)
            *intent_seen = 1;
        shm_arena_link(seg, d);
        last = d;
    }
    p->dd_tail = last;
    p->dd_count = (uint32_t)n;
    /* The index is rebuilt from the sound list (a holder killed mid-insert,
     * mid-removal or mid-growth left it stale); one it was freeing is kept
     * (named in the intent: seen), one that cannot be an index is
     * forgotten (it leaks rather than being trusted). */
    if (p->dd_index != 0) {
        if (p->dd_index == p->intent)
            *intent_seen = 1;
        if (!shm_ddx_sound(seg, p->dd_index)) {
            p->dd_index = 0;
            return 0;
        }
        shm_arena_link(seg, p->dd_index);
        (void)shm_ddx_fill(seg, shm_cell(seg, p->dd_index), p->dd_head, n);
    }
    return 0;
}

/* Re-derive one group state's leases and cursor. */
static int
ring_repair_gs(struct shm_seg *seg, struct shm_part *p, struct shm_gs *s,
               uint64_t *leased, int *intent_seen)
{
    uint64_t prev = 0, n = 0, max = ring_walk_max(seg);
    uint32_t last = 0, ready = 0, delayed = 0;

    s->due = UINT64_MAX;
    for (uint32_t l = s->lhead; l != 0; l = shm_ring_lease(seg, l)->next) {
        struct shm_lease *L = shm_ring_lease(seg, l);
        if (++n > max || L->seq <= prev || !ring_has_msg(seg, p, L->msg) ||
            shm_ring_msg(seg, L->msg)->seq != L->seq)
            return -EUCLEAN;
        if (l == p->intent)
            *intent_seen = 1;
        prev = L->seq;
        if (L->attempts != 0 && shm_ring_msg(seg, L->msg)->read == 0)
            shm_ring_msg(seg, L->msg)->read = 1; /* not passed over */
        ready +=
            L->state == SHM_LEASE_READY_INC || L->state == SHM_LEASE_READY_SAME;
        delayed += L->state == SHM_LEASE_DELAYED;
        if ((L->state == SHM_LEASE_LEASED || L->state == SHM_LEASE_DELAYED) &&
            L->deadline < s->due)
            s->due = L->deadline;
        shm_arena_link(seg, l);
        last = l;
    }
    s->ltail = last;
    s->nleases = (uint32_t)n;
    s->nready = ready;
    *leased += n - ready - delayed;
    /* The cursor is the first message above what the group has had: above
     * its last first delivery, and above a lease published before the
     * cursor moved past it. */
    if (prev > s->last)
        s->last = prev;
    s->cursor = p->head;
    while (s->cursor != 0 && shm_ring_msg(seg, s->cursor)->seq <= s->last)
        s->cursor = shm_ring_msg(seg, s->cursor)->next;
    return 0;
}

/* shm_ring_tag_linked - see ring.h. */
int
shm_ring_tag_linked(struct shm_seg *seg, uint32_t ref)
{
    struct shm_arena *a = shm_region(seg, SHM_REGION_ARENA);
    const _Atomic uint32_t *tags =
        (const _Atomic uint32_t *)((unsigned char *)a + a->tags_off);

    return SHM_TAG_STATE(atomic_load(&tags[ref])) == SHM_TAG_LINKED;
}

static uint64_t
ring_msg_seq(struct shm_seg *seg, uint32_t r, uint32_t *next)
{
    *next = shm_ring_msg(seg, r)->next;
    return shm_ring_msg(seg, r)->seq;
}

static uint64_t
ring_lease_seq(struct shm_seg *seg, uint32_t l, uint32_t *next)
{
    *next = shm_ring_lease(seg, l)->next;
    return shm_ring_lease(seg, l)->seq;
}

/* Is ref within the rising-seq prefix of the list from head, the part a
 * wipe frees?  A list a killed wiper left behind may run on through chains
 * it had already freed (their next words still point on), and from there
 * back to the chain it was unlinking: only the rising prefix counts. */
static int
ring_prefix_has(struct shm_seg *seg, uint32_t head, uint32_t ref,
                uint64_t (*seq_of)(struct shm_seg *, uint32_t, uint32_t *))
{
    uint64_t max = ring_walk_max(seg), n = 0, prev = 0;

    for (uint32_t r = head, next; r != 0 && n++ < max; r = next) {
        uint64_t seq = seq_of(seg, r, &next);
        if (seq <= prev)
            break;
        if (r == ref)
            return 1;
        prev = seq;
    }
    return 0;
}

/* Will the wipe free ref, or keep it as a group state?  (Repair only.) */
static int
ring_reaches(struct shm_seg *seg, struct shm_part *p, uint32_t ref)
{
    uint32_t n = 0;

    if (ring_prefix_has(seg, p->head, ref, ring_msg_seq))
        return 1;
    if (ref == p->dd_index) /* the window's index */
        return 1;
    uint64_t k = 0, max = ring_walk_max(seg);
    for (uint32_t d = p->dd_head; d != 0 && k++ <= max;
         d = shm_ring_dd(seg, d)->next)
        if (d == ref)
            return 1;
    for (uint32_t g = p->groups; g != 0 && n++ < SHM_RING_GROUPS_MAX;
         g = shm_ring_gs(seg, g)->next)
        if (g == ref || ring_prefix_has(seg, shm_ring_gs(seg, g)->lhead, ref,
                                        ring_lease_seq))
            return 1;
    return 0;
}

/* Free the chains of list *head one at a time, each first named in
 * p->intent and unlinked (as ring_free_head does), so a repairer killed
 * here leaves a list that is still sound up to its end: the next repair
 * neither walks a freed chain nor frees one twice.  The walk follows rising
 * seqs only (seq_of reads one); past a cycle or a stray link it stops, and
 * what lies beyond leaks rather than being freed twice. */
static void
ring_wipe_list(struct shm_seg *seg, int w, struct shm_part *p, uint32_t *head,
               uint64_t (*seq_of)(struct shm_seg *, uint32_t, uint32_t *))
{
    uint64_t max = ring_walk_max(seg), n = 0, prev = 0;

    while (*head != 0 && n++ < max) {
        uint32_t r = *head, next;
        uint64_t seq = seq_of(seg, r, &next);
        if (seq <= prev)
            break;
        prev = seq;
        p->intent = r;
        *head = next;
        shm_arena_free(seg, w, r);
        p->intent = 0;
    }
    *head = 0;
}

/* Free the dedupe window when a bounded walk ends (no cycle: a key freed
 * twice is worse than keys leaked), each key named in the intent first. */
static void
ring_wipe_dd(struct shm_seg *seg, int w, struct shm_part *p)
{
    uint64_t n = 0, max = ring_walk_max(seg);
    uint32_t d = p->dd_head;

    while (d != 0 && n++ <= max)
        d = shm_ring_dd(seg, d)->next;
    while (d == 0 && p->dd_head != 0) {
        uint32_t r = p->dd_head;
        p->intent = r;
        p->dd_head = shm_ring_dd(seg, r)->next;
        shm_arena_free(seg, w, r);
        p->intent = 0;
    }
    p->dd_head = p->dd_tail = p->dd_count = 0;
    if (p->dd_index != 0 && shm_ddx_sound(seg, p->dd_index)) {
        shm_arena_link(seg, p->dd_index); /* a dead builder's: ours now */
        shm_ddx_drop(seg, w, p);
    }
    p->dd_index = 0;
}

/* Free what a validated walk reaches and empty the partition (a locker with
 * a slot: w >= 0).  The group states stay (the registry still names them),
 * tagged LINKED first: a state a dead worker linked but never tagged must
 * not be freed by its reap. */
static void
ring_wipe(struct shm_seg *seg, int w, struct shm_part *p)
{
    /* Owed until done: a wiper killed midway leaves the rest (and the
     * count) to the next locker with a slot, whose repair may find what is
     * left sound. */
    p->wipe = 1;
    /* A chain a dead holder (or a dead wiper) had unlinked but not started
     * to free: ours.  One it had started to free is its reap's. */
    if (p->intent != 0 && shm_ring_tag_linked(seg, p->intent) &&
        !ring_reaches(seg, p, p->intent))
        shm_arena_free(seg, w, p->intent);
    p->intent = 0;
    /* Whatever the list held is gone, up to every number given so far (a
     * walk of a list found unsound cannot say which). */
    STORE(p->gone_seq, atomic_load(&shm_dir_of(seg)->next_seq) - 1);
    shm_ring_last_seq_locked(p, LOAD(p->gone_seq));
    ring_wipe_list(seg, w, p, &p->head, ring_msg_seq);
    p->tail = 0;
    ring_wipe_dd(seg, w, p);
    STORE(p->delayed, 0);
    uint32_t ng = 0;
    for (uint32_t g = p->groups; g != 0; g = shm_ring_gs(seg, g)->next) {
        if (++ng > SHM_RING_GROUPS_MAX) {
            p->groups = 0; /* a cycle: forget the states (they leak) */
            break;
        }
        struct shm_gs *s = shm_ring_gs(seg, g);
        shm_arena_link(seg, g);
        ring_wipe_list(seg, w, p, &s->lhead, ring_lease_seq);
        s->ltail = s->nleases = s->nready = 0;
        s->cursor = 0;
        s->due = UINT64_MAX;
    }
    p->ngs = p->groups != 0 ? ng : 0;
    STORE(p->count, 0);
    ring_set_cost(seg, p, 0);
    STORE(p->leased, 0);
    STORE(p->due, ring_hold_due(p));
    STORE(p->oldest_ms, 0);
    shm_count(seg, w, SHM_C_WIPES, 1);
    p->wipe = 0;
}

/* shm_ring_repair - see ring.h. */
void
shm_ring_repair(struct shm_seg *seg, void *arg)
{
    struct shm_ring_repairer *rp = arg;
    struct shm_part *p = rp->p;
    uint64_t leased = 0, pdue, n = 0;
    int intent_seen = 0, bad;
    uint32_t ngs = 0;

    /* A hold half set or half ended (its holder killed between the two
     * stores): numbers without a time, which nothing would end, would
     * keep the horizon below them for good. */
    if (atomic_load(&p->hold_seq) != 0 && p->hold_until == 0) {
        atomic_store(&p->hold_seq, 0);
        shm_hold_untrack(seg, (uint32_t)(p - shm_dir_part(seg, 0)));
    }
    pdue = ring_hold_due(p);
    bad = ring_repair_msgs(seg, p) != 0;

    if (!bad && p->intent != 0 && ring_has_msg(seg, p, p->intent))
        intent_seen = 1;
    if (!bad)
        bad = ring_repair_dd(seg, p, &intent_seen) != 0;
    for (uint32_t g = p->groups; !bad && g != 0;
         g = shm_ring_gs(seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(seg, g);
        if (++n > SHM_RING_GROUPS_MAX) {
            bad = 1;
            break;
        }
        if (g == p->intent)
            intent_seen = 1;
        shm_arena_link(seg, g);
        bad = ring_repair_gs(seg, p, s, &leased, &intent_seen) != 0;
        pdue = s->due < pdue ? s->due : pdue;
        ngs++;
    }
    if (bad) {
        /* A locker without a slot cannot free: it leaves the wipe owed to
         * the next locker with one (shm_ring_lock), touching nothing. */
        if (rp->w >= 0)
            ring_wipe(seg, rp->w, p);
        else
            p->wipe = 1;
        return;
    }
    /* An unlinked chain its holder did not start to free: ours to free,
     * or, for a locker without a slot, the next one's (shm_ring_lock). */
    if (p->intent != 0 && !intent_seen && shm_ring_tag_linked(seg, p->intent)) {
        if (rp->w >= 0) {
            shm_arena_free(seg, rp->w, p->intent);
            p->intent = 0;
        }
    } else
        p->intent = 0;
    p->ngs = ngs;
    STORE(p->leased, leased);
    STORE(p->due, pdue);
}
