/*
 * part_move.c - a partition's contents out of this node (shm_part_take) and
 * into it (shm_part_adopt), as the binary record part_move.h lays out.
 *
 * Take: one partition lock; size the record, write it, then free the
 * partition's contents as shm_ring_clear_locked does.  Adopt: check the
 * record whole, allocate every message chain and lease cell before any lock
 * (INFLIGHT, as a push does), create the queue, partition and groups, then
 * under the partition lock link the messages with one store
 * (shm_ring_link_locked) and place each group.  A worker killed while
 * placing leaves nothing repair cannot re-derive: leases are appended one
 * published link at a time, each to a message already linked, before the
 * cursor moves, so a cut-short placement re-derives its cursor from the
 * highest lease and delivers some messages again (at-least-once), never
 * loses one.  Errors: a count or -errno (part_move.h).
 */
#include "shm/part_move.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm/arena.h"
#include "shm/broker_int.h"
#include "shm/conflate.h"
#include "shm/dir.h"
#include "shm/horizon.h"
#include "shm/ring.h"
#include "shm/stats.h"

#define RELAXED memory_order_relaxed

/* Bytes x takes in the record: everything is 8-byte aligned. */
static size_t
ho_pad(size_t x)
{
    return (x + 7) & ~(size_t)7;
}

/* ho_flags - what a hand-over record says of message m beside its data. */
static uint32_t
ho_flags(const struct shm_msg *m)
{
    uint32_t f = (uint32_t)m->reply_len << SHM_HO_REPLY_SHIFT;

    if (shm_msg_keyed(m))
        f |= SHM_HO_KEYED;
    if (m->read == SHM_MSG_WITHDRAWN)
        return f | SHM_HO_WITHDRAWN | SHM_HO_READ;
    return m->read ? f | SHM_HO_READ : f;
}

/* ho_msg_bytes - bytes message m (its head at the start) takes in a
 * record: head, padded payload, and its key when keyed. */
static size_t
ho_msg_bytes(const struct shm_ho_msg *m)
{
    return sizeof(*m) + ho_pad(m->len) +
           (m->flags & SHM_HO_KEYED ? SHM_MSG_KEY_BYTES : 0);
}

/* ---- take ---------------------------------------------------------------- */

/* The attempts lease L's next delivery carries; 0: it is not carried (a
 * lease at the retry limit, which its expiry or failure would drop). */
static uint32_t
take_attempts(const struct shm_lease *L, uint32_t limit)
{
    if (L->state == SHM_LEASE_READY_SAME)
        return L->attempts;
    if (L->state == SHM_LEASE_LEASED && L->attempts >= limit)
        return 0;
    return L->attempts + 1;
}

/* Bytes of the keep map of n messages (one bit each), kept at the end of
 * the caller's buffer while the record is written ahead of it. */
static size_t
take_map_bytes(uint32_t n)
{
    return ho_pad(((size_t)n + 7) / 8);
}

/* Bytes the record of c's partition takes at most (every message shipped),
 * plus its keep map. */
static size_t
take_size_locked(struct shm_ring_ctx *c)
{
    struct shm_seg *seg = c->seg;
    uint32_t limit = c->q->opts.retry_limit, n = 0;
    size_t size = sizeof(struct shm_ho_hdr);

    for (uint32_t r = c->p->head; r != 0; r = shm_ring_msg(seg, r)->next, n++)
        size += ho_pad(sizeof(struct shm_ho_msg) + shm_ring_msg(seg, r)->len) +
                (shm_msg_keyed(shm_ring_msg(seg, r)) ? SHM_MSG_KEY_BYTES : 0);
    size += take_map_bytes(n);
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(seg, g);
        size += sizeof(struct shm_ho_grp) +
                ho_pad(shm_ring_grp(seg, s->grp)->name_len);
        for (uint32_t l = s->lhead; l != 0; l = shm_ring_lease(seg, l)->next)
            if (take_attempts(shm_ring_lease(seg, l), limit) != 0)
                size += sizeof(struct shm_ho_redo);
    }
    return size + (size_t)c->p->dd_count * sizeof(struct shm_ho_dd);
}

/* Write bytes at o + *off, zero-padded to 8; advance *off. */
static void
take_put(unsigned char *o, size_t *off, const void *src, size_t len)
{
    memcpy(o + *off, src, len);
    memset(o + *off + len, 0, ho_pad(len) - len);
    *off += ho_pad(len);
}

#define KEPT(map, i) ((map)[(i) / 8] >> ((i) % 8) & 1)

/* The index of message ref in c's list (n: 0 or not found). */
static uint32_t
take_index_locked(struct shm_ring_ctx *c, uint32_t ref, uint32_t n)
{
    uint32_t i = 0;

    for (uint32_t r = c->p->head; r != 0 && r != ref;
         r = shm_ring_msg(c->seg, r)->next)
        i++;
    return ref == 0 ? n : i;
}

/* Is message ref superseded (ring.h: a later one of its key replaced it
 * while a group held it leased)?  Neither it nor its leases travel: every
 * group passes it over and none gets it again, so the new owner's groups
 * skip it by never seeing it, and it counts in the header's gone as any
 * message not carried (a stream behind it missed it, as here). */
static int
take_superseded(struct shm_seg *seg, uint32_t ref)
{
    return shm_ring_msg(seg, ref)->read == SHM_MSG_SUPERSEDED;
}

/*
 * take_map_locked - mark in map (n bits) the messages the record carries:
 * those some group still needs.  A message below every group's cursor
 * and owed by no lease was completed by every group, and stays only
 * because a partition frees from its head (one behind a lease): shipping
 * it would make a group the adoption cannot place read it again as new.
 * A message no group has read yet is kept: a group may still come for it.
 * When a group the queue knows has no state here, or none has, it may
 * still read anything: everything is kept.  A superseded message is never
 * kept (take_superseded).
 */
static void
take_map_locked(struct shm_ring_ctx *c, uint32_t n, unsigned char *map)
{
    struct shm_seg *seg = c->seg;
    uint32_t limit = c->q->opts.retry_limit, min_cur = n;

    memset(map, 0, take_map_bytes(n));
    if (c->p->groups == 0 || c->p->ngs < atomic_load(&c->q->ngroups)) {
        uint32_t i = 0;
        memset(map, 0xff, take_map_bytes(n));
        for (uint32_t r = c->p->head; r != 0;
             r = shm_ring_msg(seg, r)->next, i++)
            if (take_superseded(seg, r))
                map[i / 8] &= (unsigned char)~(1u << i % 8);
        return;
    }
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(seg, g);
        uint32_t cur = take_index_locked(c, s->cursor, n);
        uint32_t r = c->p->head, idx = 0;

        min_cur = cur < min_cur ? cur : min_cur;
        for (uint32_t l = s->lhead; l != 0; l = shm_ring_lease(seg, l)->next) {
            struct shm_lease *L = shm_ring_lease(seg, l);
            for (; r != 0 && r != L->msg; idx++)
                r = shm_ring_msg(seg, r)->next;
            if (r != 0 && take_attempts(L, limit) != 0 &&
                !take_superseded(seg, r))
                map[idx / 8] |= (unsigned char)(1u << idx % 8);
        }
    }
    /* Past the earliest cursor, or read by no group yet (a from=new or
     * from=last group starts past messages it leaves for others). */
    uint32_t i = 0;
    for (uint32_t r = c->p->head; r != 0; r = shm_ring_msg(seg, r)->next, i++)
        if ((i >= min_cur || !shm_ring_msg(seg, r)->read) &&
            !take_superseded(seg, r))
            map[i / 8] |= (unsigned char)(1u << i % 8);
}

/* Write the messages map keeps; returns how many. */
static uint32_t
take_msgs_locked(struct shm_ring_ctx *c, const unsigned char *map,
                 unsigned char *o, size_t *off)
{
    uint32_t n = 0, i = 0;

    for (uint32_t r = c->p->head; r != 0;
         r = shm_ring_msg(c->seg, r)->next, i++) {
        if (!KEPT(map, i))
            continue;
        struct shm_msg *m = shm_ring_msg(c->seg, r);
        /* modulo 2^64: a message not visible yet has a negative age */
        uint64_t at = shm_msg_at(m);
        struct shm_ho_msg h = {.len = m->len,
                               .flags = ho_flags(m),
                               .age_ms = shm_msg_hidden(m, c->now) ? c->now - at
                                         : c->now > at             ? c->now - at
                                                                   : 0,
                               .seq = m->seq,
                               .ttl_s = shm_msg_ttl(m)};
        memcpy(o + *off, &h, sizeof(h));
        *off += sizeof(h);
        /* The payload, then its padding, in place. */
        shm_arena_read(c->seg, r, SHM_MSG_HDR, o + *off, m->len);
        memset(o + *off + m->len, 0, ho_pad(m->len) - m->len);
        *off += ho_pad(m->len);
        if (shm_msg_keyed(m)) {
            uint64_t key = shm_ring_msg_key(c->seg, r);
            memcpy(o + *off, &key, sizeof(key));
            *off += sizeof(key);
        }
        n++;
    }
    return n;
}

/* Write group state gs: its name, then its redeliveries with their message
 * indexes (one walk of the messages alongside the seq-sorted leases), then
 * its cursor's index.  *leased counts the leases carried that were out with
 * a consumer, *dropped those at the retry limit left behind. */
static void
take_group_locked(struct shm_ring_ctx *c, uint32_t gs, const unsigned char *map,
                  unsigned char *o, size_t *off, uint64_t *leased,
                  uint64_t *dropped)
{
    struct shm_seg *seg = c->seg;
    struct shm_gs *s = shm_ring_gs(seg, gs);
    struct shm_grp *e = shm_ring_grp(seg, s->grp);
    struct shm_ho_grp h = {
        .name_len = e->name_len, .from = e->from, .skipped = s->skipped};
    size_t at = *off;
    uint32_t r = c->p->head, idx = 0, i = 0; /* idx: kept ones before r */

    *off += sizeof(h);
    shm_arena_read(seg, e->name_ref, 0, o + *off, e->name_len);
    memset(o + *off + e->name_len, 0, ho_pad(e->name_len) - e->name_len);
    *off += ho_pad(e->name_len);
    for (uint32_t l = s->lhead; l != 0; l = shm_ring_lease(seg, l)->next) {
        struct shm_lease *L = shm_ring_lease(seg, l);
        struct shm_ho_redo d = {
            .attempts = take_attempts(L, c->q->opts.retry_limit),
            .delay_ms = L->state == SHM_LEASE_DELAYED && L->deadline > c->now
                            ? (uint32_t)(L->deadline - c->now)
                            : 0};
        if (take_superseded(seg, L->msg))
            continue; /* replaced: it would not come again there either */
        if (d.attempts == 0) {
            (*dropped)++;
            continue;
        }
        for (; r != 0 && r != L->msg; i++) {
            idx += KEPT(map, i);
            r = shm_ring_msg(seg, r)->next;
        }
        d.index = idx;
        take_put(o, off, &d, sizeof(d));
        h.nredo++;
        *leased += L->state == SHM_LEASE_LEASED;
    }
    for (; r != 0 && r != s->cursor; i++) {
        idx += KEPT(map, i);
        r = shm_ring_msg(seg, r)->next;
    }
    h.cursor = idx;
    memcpy(o + at, &h, sizeof(h));
}

/* The highest number of a message that left c's list or that map does
 * not carry: a stream past it missed nothing (shm_ho_hdr.gone). */
static uint64_t
take_gone_locked(struct shm_ring_ctx *c, const unsigned char *map)
{
    uint64_t gone = atomic_load_explicit(&c->p->gone_seq, RELAXED);
    uint32_t i = 0;

    for (uint32_t r = c->p->head; r != 0;
         r = shm_ring_msg(c->seg, r)->next, i++)
        if (!KEPT(map, i) && shm_ring_msg(c->seg, r)->seq > gone)
            gone = shm_ring_msg(c->seg, r)->seq;
    return gone;
}

/* Write the dedupe window's keys (SPEC §13: it travels with the
 * partition); returns how many. */
static uint32_t
take_dd_locked(struct shm_ring_ctx *c, unsigned char *o, size_t *off)
{
    uint32_t n = 0;

    for (uint32_t d = c->p->dd_head; d != 0; d = shm_ring_dd(c->seg, d)->next) {
        const struct shm_dd *e = shm_ring_dd(c->seg, d);
        struct shm_ho_dd h = {.hash = e->hash,
                              .seq = e->seq,
                              .inc = e->inc,
                              .age_ms =
                                  c->now > e->at_ms ? c->now - e->at_ms : 0};
        take_put(o, off, &h, sizeof(h));
        n++;
    }
    return n;
}

/* Write the record of c's partition into o (room checked), then empty the
 * partition; returns the messages taken. */
static int
take_locked(struct shm_ring_ctx *c, unsigned char *o, size_t need, size_t *used)
{
    struct shm_ho_hdr h = {.magic = SHM_HO_MAGIC,
                           .version = SHM_HO_VERSION,
                           .inc = shm_params_of(c->seg)->incarnation};
    uint64_t leased = 0, dropped = 0;
    size_t off = sizeof(h);
    uint32_t n = 0;

    for (uint32_t r = c->p->head; r != 0; r = shm_ring_msg(c->seg, r)->next)
        n++;
    /* The map sits after the longest record, which this one never passes. */
    unsigned char *map = o + need - take_map_bytes(n);
    take_map_locked(c, n, map);
    h.gone = take_gone_locked(c, map);
    h.nmsgs = take_msgs_locked(c, map, o, &off);
    for (uint32_t g = c->p->groups; g != 0; g = shm_ring_gs(c->seg, g)->next) {
        take_group_locked(c, g, map, o, &off, &leased, &dropped);
        h.ngroups++;
    }
    h.ndd = take_dd_locked(c, o, &off);
    h.size = off;
    memcpy(o, &h, sizeof(h));
    *used = off;
    /* They moved: freed as a reset frees them, counted as no drop. */
    shm_ring_clear_locked(c);
    shm_count(c->seg, c->w, SHM_C_REDELIVERY_HANDOVER, leased);
    if (dropped > 0) {
        shm_count(c->seg, c->w, SHM_C_DROP_RETRY_LIMIT, dropped);
        atomic_fetch_add_explicit(&c->q->drops[SHM_DROPS_RETRY], dropped,
                                  RELAXED);
    }
    return (int)h.nmsgs;
}

/* shm_part_take - see part_move.h. */
int
shm_part_take(struct shm_seg *seg, int w, struct shm_name queue,
              struct shm_name part, uint64_t now, struct shm_ho_sink *out)
{
    struct shm_ring_ctx c;
    struct shm_ref qr, pr;
    uint64_t kick = 0;
    int rc = -ENOENT;

    out->used = 0;
    out->need = 0;
    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        rc = shm_dir_find_queue(seg, w, queue, 0, now, &qr);
        if (rc == 0)
            rc = shm_dir_find_part(seg, w, qr, part, 0, now, &pr);
        if (rc == 0)
            rc = shm_part_lock_ctx(seg, w, pr, shm_dir_queue(seg, qr.idx), now,
                                   &c);
        if (rc == -ESTALE)
            continue; /* freed meanwhile: look again */
        if (rc != 0)
            return rc;
        /* partition lock: size, write, empty, waiters.  Copy only. */
        size_t need = take_size_locked(&c);
        if (need > out->cap) {
            out->need = need;
            rc = -ENOMEM;
        } else {
            rc = take_locked(&c, out->buf, need, &out->used);
            shm_waiters_post_locked(seg, qr, pr, &kick);
        }
        shm_ring_unlock(c.p);
        shm_waiters_kick(seg, kick);
        return rc;
    }
    return -ENOENT;
}

/* ---- hold ---------------------------------------------------------------- */

/* shm_part_hold - see part_move.h. */
int
shm_part_hold(struct shm_seg *seg, int w, struct shm_name queue,
              struct shm_name part, uint64_t now, uint64_t ms)
{
    struct shm_dir *d = shm_dir_of(seg);
    struct shm_ref qr, pr;
    int rc = -EAGAIN;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        rc = shm_dir_find_queue(seg, w, queue, 1, now, &qr);
        if (rc == 0)
            rc = shm_dir_find_part(seg, w, qr, part, 1, now, &pr);
        if (rc == 0)
            rc = shm_part_lock(seg, w, pr);
        if (rc == -ESTALE)
            continue;
        if (rc != 0)
            return rc;
        /* partition lock: the hold.  One already waiting keeps its
         * numbers: what came since its start comes after the adopt too.
         * The numbers are taken as a push takes its own, the horizon held
         * below them (horizon.c) until the hold ends. */
        struct shm_part *p = shm_dir_part(seg, pr.idx);
        int took = atomic_load(&p->hold_seq) == 0;
        if (took) {
            shm_pushing_begin(seg, w, 0);
            shm_hold_track(seg, pr.idx);
            atomic_store(&p->hold_seq,
                         atomic_fetch_add(&d->next_seq, SHM_HOLD_SEQS));
        }
        p->hold_until = now + ms;
        p->last_active = now;
        /* Due when it runs out: the maintenance ends it then if no adopt
         * or pop did (shm_ring_expire_locked). */
        if (p->hold_until < atomic_load_explicit(&p->due, RELAXED))
            atomic_store_explicit(&p->due, p->hold_until, RELAXED);
        shm_part_due_locked(seg, pr.idx, p, shm_dir_queue(seg, qr.idx));
        shm_ring_unlock(p);
        if (took)
            shm_pushing_end(seg, w);
        return 0;
    }
    return rc;
}

/* shm_part_join_window - see part_move.h. */
void
shm_part_join_window(struct shm_seg *seg, uint64_t until)
{
    atomic_store(&shm_dir_of(seg)->join_until, until);
}

/* shm_part_unhold - see part_move.h. */
int
shm_part_unhold(struct shm_seg *seg, int w, struct shm_name queue,
                struct shm_name part, uint64_t until, uint64_t now)
{
    struct shm_ring_ctx c;
    struct shm_ref qr, pr;
    uint64_t kick = 0;
    int rc = 0;

    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        rc = shm_dir_find_queue(seg, w, queue, 0, now, &qr);
        if (rc == 0)
            rc = shm_dir_find_part(seg, w, qr, part, 0, now, &pr);
        if (rc == 0)
            rc = shm_part_lock_ctx(seg, w, pr, shm_dir_queue(seg, qr.idx), now,
                                   &c);
        if (rc == -ESTALE)
            continue;
        if (rc != 0)
            return rc == -ENOENT ? 0 : rc;
        /* partition lock: the hold's end, due time, waiters.  Pops it kept
         * waiting, and tails the horizon kept below it, read now. */
        if (atomic_load(&c.p->hold_seq) != 0 && c.p->hold_until == until) {
            shm_ring_hold_end_locked(&c);
            shm_part_due_locked(seg, pr.idx, c.p, c.q);
            shm_waiters_post_locked(seg, qr, pr, &kick);
        }
        shm_ring_unlock(c.p);
        shm_waiters_kick(seg, kick);
        return 0;
    }
    return 0;
}

/* ---- the record, checked ------------------------------------------------- */

/* A record that passed ho_check: where its parts start, what it needs. */
struct ho_view {
    const unsigned char *msgs;   /* first struct shm_ho_msg */
    const unsigned char *groups; /* first struct shm_ho_grp */
    uint32_t nmsgs, ngroups;
    uint64_t nredo; /* redeliveries over all groups */
    uint64_t cost;  /* accounted bytes of the messages */
    uint64_t inc;   /* the sender's incarnation, 0 when its numbers are not
                       kept (unknown, not rising, or too far apart) */
    uint64_t lo;    /* the lowest number (the sender's) it accounts for:
                       its gone, or its first message's */
    uint64_t hi;    /* and the highest */
    uint64_t cut_at, cut_len; /* its one gap past SHM_ADOPT_GAP: after
                                 cut_at, cut_len numbers are left out */
    uint64_t gone;            /* shm_ho_hdr.gone */
    const unsigned char *dd;  /* first struct shm_ho_dd */
    uint32_t ndd;
    uint32_t nkeyed; /* messages with a conflation key */
};

/* One group entry at p (checked): its head, name and redeliveries; returns
 * the next entry. */
static const unsigned char *
ho_group(const unsigned char *p, struct shm_ho_grp *g, struct shm_name *name,
         const unsigned char **redo)
{
    memcpy(g, p, sizeof(*g));
    name->ptr = (const char *)p + sizeof(*g);
    name->len = g->name_len;
    *redo = p + sizeof(*g) + ho_pad(g->name_len);
    return *redo + (size_t)g->nredo * sizeof(struct shm_ho_redo);
}

/* Check the messages from *off (nmsgs of them) fit in len; advance *off. */
static int
ho_check_msgs(const unsigned char *b, size_t len, size_t *off,
              struct ho_view *v)
{
    uint64_t last = 0;

    for (uint32_t i = 0; i < v->nmsgs; i++) {
        struct shm_ho_msg m;
        if (len - *off < sizeof(m))
            return -EBADMSG;
        memcpy(&m, b + *off, sizeof(m));
        *off += sizeof(m);
        if (m.seq <= last || m.seq == 0)
            v->inc = 0; /* not rising: numbered end to end */
        last = m.seq;
        /* a request's replyTo leads its data, and a payload follows (as
         * shm_push_request requires) */
        uint32_t reply_len = m.flags >> SHM_HO_REPLY_SHIFT;
        size_t key = m.flags & SHM_HO_KEYED ? SHM_MSG_KEY_BYTES : 0;
        if ((m.flags & 0xffffu &
             ~(SHM_HO_READ | SHM_HO_WITHDRAWN | SHM_HO_KEYED)) != 0 ||
            m.ttl_s > SHM_MSG_TTL_MAX ||
            (reply_len != 0 && reply_len >= m.len) ||
            len - *off < ho_pad(m.len) + key)
            return -EBADMSG;
        *off += ho_pad(m.len) + key;
        v->cost += shm_ring_msg_cost((size_t)m.len + key);
        v->nkeyed += key != 0;
    }
    return 0;
}

/* Is name among the first ngroups entries from groups (checked already)?
 * A group named twice would be placed twice. */
static int
ho_dup(const unsigned char *groups, uint32_t ngroups, struct shm_name name)
{
    const unsigned char *p = groups, *redo;
    struct shm_ho_grp g;
    struct shm_name n;

    for (uint32_t i = 0; i < ngroups; i++) {
        p = ho_group(p, &g, &n, &redo);
        if (n.len == name.len && memcmp(n.ptr, name.ptr, n.len) == 0)
            return 1;
    }
    return 0;
}

/* The longest delay a record may carry (a message's delayMs or a retry's
 * are at most an hour; more is a malformed record). */
#define SHM_HO_DELAY_MAX (24u * 3600 * 1000)

/* Check group entry number before at *off: fields in range, name and
 * redeliveries within len, a name not seen yet, indexes rising below the
 * cursor; advance *off and count its redeliveries in v->nredo. */
static int
ho_check_group(const unsigned char *b, size_t len, size_t *off,
               struct ho_view *v, uint32_t before)
{
    struct shm_ho_grp g;
    struct shm_name name;
    const unsigned char *redo;

    if (len - *off < sizeof(g))
        return -EBADMSG;
    memcpy(&g, b + *off, sizeof(g));
    if (g.name_len > SHM_NAME_MAX || g.from > SHM_FROM_LAST ||
        g.cursor > v->nmsgs || g.nredo > g.cursor ||
        len - *off - sizeof(g) <
            ho_pad(g.name_len) + (size_t)g.nredo * sizeof(struct shm_ho_redo))
        return -EBADMSG;
    ho_group(b + *off, &g, &name, &redo);
    if (ho_dup(v->groups, before, name))
        return -EBADMSG;
    for (uint32_t i = 0; i < g.nredo; i++) {
        struct shm_ho_redo d, prev = {0};
        memcpy(&d, redo + i * sizeof(d), sizeof(d));
        if (i > 0)
            memcpy(&prev, redo + (i - 1) * sizeof(d), sizeof(d));
        if (d.index >= g.cursor || d.attempts == 0 ||
            d.delay_ms > SHM_HO_DELAY_MAX || (i > 0 && d.index <= prev.index))
            return -EBADMSG;
    }
    *off = (size_t)(redo - b) + (size_t)g.nredo * sizeof(struct shm_ho_redo);
    v->nredo += g.nredo;
    return 0;
}

/* span_see - point x, the next of the sender's numbers v accounts for
 * (rising): the range grows to it, and a gap past SHM_ADOPT_GAP before
 * it is the one cut (a second: the numbers are not kept). */
static void
span_see(struct ho_view *v, uint64_t x, int *have)
{
    if (!*have)
        v->lo = x;
    else if (x - v->hi > SHM_ADOPT_GAP) {
        if (v->cut_len != 0)
            v->inc = 0;
        v->cut_at = v->hi;
        v->cut_len = x - v->hi - SHM_ADOPT_GAP;
    }
    v->hi = x;
    *have = 1;
}

/* ho_span - the sender's numbers v accounts for (lo..hi, its gone among
 * them) and its one long gap cut, from its messages at msgs (checked);
 * v->inc 0 when they are not kept: none, two long gaps, or a span past
 * what a hold keeps. */
static void
ho_span(const unsigned char *msgs, struct ho_view *v)
{
    const unsigned char *p = msgs;
    struct shm_ho_msg m;
    int have = 0, gone = v->gone == 0;

    for (uint32_t i = 0; i < v->nmsgs && v->inc != 0; i++) {
        memcpy(&m, p, sizeof(m));
        p += ho_msg_bytes(&m);
        if (!gone && v->gone <= m.seq) {
            if (v->gone < m.seq)
                span_see(v, v->gone, &have);
            gone = 1;
        }
        span_see(v, m.seq, &have);
    }
    if (!gone)
        span_see(v, v->gone, &have);
    if (!have || v->hi - v->lo - v->cut_len >= SHM_HOLD_SEQS)
        v->inc = 0;
}

/* ho_place - where the sender's number o goes, from base: its distance
 * from lo, less the gap cut below it. */
static uint64_t
ho_place(const struct ho_view *v, uint64_t base, uint64_t o)
{
    return base + (o - v->lo) -
           (v->cut_len != 0 && o > v->cut_at ? v->cut_len : 0);
}

/* ho_check - is (b, len) a whole, well-formed record?  Reads nothing out of
 * bounds whatever the bytes say.  0 with *v filled, or -EBADMSG. */
static int
ho_check(const unsigned char *b, size_t len, struct ho_view *v)
{
    struct shm_ho_hdr h;
    size_t off = sizeof(h);

    memset(v, 0, sizeof(*v));
    if (len < sizeof(h))
        return -EBADMSG;
    memcpy(&h, b, sizeof(h));
    if (h.magic != SHM_HO_MAGIC || h.version != SHM_HO_VERSION ||
        h.size != len || h.nmsgs > INT32_MAX || h.ngroups > SHM_RING_GROUPS_MAX)
        return -EBADMSG;
    v->nmsgs = h.nmsgs;
    v->ngroups = h.ngroups;
    v->msgs = b + off;
    v->inc = h.inc;
    v->gone = h.gone;
    if (ho_check_msgs(b, len, &off, v) != 0)
        return -EBADMSG;
    ho_span(b + sizeof(h), v);
    v->groups = b + off;
    for (uint32_t i = 0; i < h.ngroups; i++)
        if (ho_check_group(b, len, &off, v, i) != 0)
            return -EBADMSG;
    v->dd = b + off;
    v->ndd = h.ndd;
    if (h.pad != 0 || (len - off) / sizeof(struct shm_ho_dd) != h.ndd)
        return -EBADMSG;
    off += (size_t)h.ndd * sizeof(struct shm_ho_dd);
    return off == len ? 0 : -EBADMSG;
}

/* ---- adopt --------------------------------------------------------------- */

/* What an adopt holds between allocating and linking (process memory). */
struct adopt {
    uint32_t first, last;   /* the message chains, joined by next */
    uint64_t *hash;         /* [ngroups] each group's name hash (the block) */
    uint32_t *refs;         /* [nmsgs] each message's chain */
    uint32_t *leases;       /* [nredo] a lease cell per redelivery, 0 once
                             linked */
    uint32_t *gs;           /* [ngroups] the state to place, 0: none */
    uint32_t dd;            /* the window's key cells, joined by next, 0 once
                             linked */
    struct shm_conflate cf; /* the conflation keys of its messages */
};

/* Free what adopt_alloc got and linking did not use (no lock). */
static void
adopt_free(struct shm_seg *seg, int w, const struct ho_view *v, struct adopt *a)
{
    shm_chains_free(seg, w, a->first);
    for (uint64_t i = 0; a->leases != NULL && i < v->nredo; i++)
        if (a->leases[i] != 0)
            shm_arena_free(seg, w, a->leases[i]);
    while (a->dd != 0) {
        uint32_t next = shm_ring_dd(seg, a->dd)->next;
        shm_arena_free(seg, w, a->dd);
        a->dd = next;
    }
    free(a->hash);
    shm_conflate_free(&a->cf);
}

/* When a message of the record becomes (or became) visible here: now less
 * its age, which is negative (as int64) for one not visible yet. */
static uint64_t
adopt_at(uint64_t age_ms, uint64_t now)
{
    int64_t age = (int64_t)age_ms;
    uint64_t ahead = 0 - age_ms; /* -age, INT64_MIN's too, with no overflow */

    if (age < 0)
        return now + (ahead < SHM_HO_DELAY_MAX ? ahead : SHM_HO_DELAY_MAX);
    return (uint64_t)age < now ? now - (uint64_t)age : 0;
}

/* Allocate every message chain (enqueue time now - age) and lease cell the
 * record needs, INFLIGHT and before any lock, as a push does; all or none.
 * 0, -ENOBUFS (node cap), -ENOMEM (malloc). */
static int
adopt_alloc(struct shm_seg *seg, int w, const struct ho_view *v, uint64_t now,
            struct adopt *a)
{
    size_t n = v->nmsgs, r = v->nredo, g = v->ngroups;
    const unsigned char *p = v->msgs, *redo;
    struct shm_ho_grp gh;
    struct shm_name name;
    uint64_t cost;
    int rc;

    memset(a, 0, sizeof(*a));
    if (!shm_cap_room(seg, v->cost + (r + v->ndd) * SHM_CELL_BYTES))
        return -ENOBUFS;
    if ((a->hash = calloc(1, g * 8 + (n + r + g) * 4 + 8)) == NULL ||
        shm_conflate_alloc(&a->cf, v->nkeyed) != 0) {
        free(a->hash);
        return -ENOMEM;
    }
    a->refs = (uint32_t *)(a->hash + g);
    a->leases = a->refs + n;
    a->gs = a->leases + r;
    for (size_t i = 0, k = 0; i < n; i++) {
        struct shm_ho_msg m;
        uint64_t key;
        memcpy(&m, p, sizeof(m));
        int keyed = (m.flags & SHM_HO_KEYED) != 0;
        rc = shm_ring_msg_new(seg, w, (const char *)p + sizeof(m), m.len,
                              keyed ? SHM_MSG_KEY_BYTES : 0, now, &a->refs[i],
                              &cost);
        if (rc != 0)
            goto fail;
        struct shm_msg *made = shm_ring_msg(seg, a->refs[i]);
        made->enq_ms = shm_msg_pack(adopt_at(m.age_ms, now), m.ttl_s,
                                    (int64_t)m.age_ms < 0);
        if (keyed) {
            memcpy(&key, p + sizeof(m) + ho_pad(m.len), sizeof(key));
            shm_ring_msg_key_set(seg, a->refs[i], key);
            a->cf.mem[k++] = key;
        }
        made->read = m.flags & SHM_HO_WITHDRAWN ? SHM_MSG_WITHDRAWN
                                                : (m.flags & SHM_HO_READ) != 0;
        made->reply_len = (uint16_t)(m.flags >> SHM_HO_REPLY_SHIFT);
        made->seq = m.seq; /* the sender's, until it is linked (adopt_seq) */
        if (a->last != 0)
            shm_ring_msg(seg, a->last)->next = a->refs[i];
        else
            a->first = a->refs[i];
        a->last = a->refs[i];
        p += ho_msg_bytes(&m);
    }
    shm_conflate_sort(&a->cf, v->nkeyed);
    for (size_t i = 0; i < r; i++)
        if ((rc = shm_arena_alloc(seg, w, 1, &a->leases[i])) != 0)
            goto fail;
    for (uint32_t i = v->ndd; i-- > 0;) { /* the chain in record order */
        struct shm_ho_dd h;
        uint32_t d;
        if ((rc = shm_arena_alloc(seg, w, 1, &d)) != 0)
            goto fail;
        memcpy(&h, v->dd + (size_t)i * sizeof(h), sizeof(h));
        *shm_ring_dd(seg, d) =
            (struct shm_dd){.chain = shm_ring_dd(seg, d)->chain,
                            .next = a->dd,
                            .hash = h.hash,
                            .seq = h.seq,
                            .inc = h.inc,
                            .at_ms = h.age_ms < now ? now - h.age_ms : 0};
        a->dd = d;
    }
    p = v->groups;
    for (size_t i = 0; i < g; i++) {
        p = ho_group(p, &gh, &name, &redo);
        a->hash[i] = shm_group_hash(name);
    }
    return 0;
fail:
    adopt_free(seg, w, v, a);
    return rc;
}

/* Make every group of the record known to the queue, with a state in the
 * partition (queue lock, then the partition lock, per group). */
static int
adopt_groups(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_ref pr,
             const struct ho_view *v, uint64_t now)
{
    const unsigned char *p = v->groups, *redo;
    struct shm_ho_grp g;
    struct shm_name name;
    int rc;

    for (uint32_t i = 0; i < v->ngroups; i++) {
        p = ho_group(p, &g, &name, &redo);
        rc = shm_group_ensure(seg, w, qr, pr, name, shm_group_hash(name),
                              g.from, now);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The state of each group of the record here, 0 where it has none (one
 * forgotten since adopt_groups reads the messages as any group does).
 * Each is touched, as a pop does: a group arriving is not idle. */
static void
adopt_pick_locked(struct shm_ring_ctx *c, const struct ho_view *v,
                  struct adopt *a)
{
    const unsigned char *p = v->groups, *redo;
    struct shm_ho_grp g;
    struct shm_name name;

    for (uint32_t i = 0; i < v->ngroups; i++) {
        p = ho_group(p, &g, &name, &redo);
        a->gs[i] = shm_ring_gs_find_locked(c, name, a->hash[i]);
        if (a->gs[i] != 0)
            atomic_store_explicit(
                &shm_ring_grp(c->seg, shm_ring_gs(c->seg, a->gs[i])->grp)
                     ->last_active,
                c->now, RELAXED);
    }
}

/* Where the adopted messages go: after the message returned (0: at the
 * head), before the pushes a hold kept behind them, when none of those
 * has been read yet (*insert set); else after the tail, as pushes go. */
static uint32_t
adopt_spot_locked(struct shm_ring_ctx *c, uint32_t n, int *insert)
{
    struct shm_seg *seg = c->seg;
    uint32_t prev = 0, r = c->p->head;

    *insert = 0;
    if (c->p->hold_seq == 0 || n == 0)
        return c->p->tail;
    for (; r != 0 && shm_ring_msg(seg, r)->seq < c->p->hold_seq;
         r = shm_ring_msg(seg, r)->next)
        prev = r;
    for (uint32_t k = r; k != 0; k = shm_ring_msg(seg, k)->next)
        if (shm_ring_msg(seg, k)->read)
            return c->p->tail;
    *insert = 1;
    return prev;
}

/* adopt_number - number the adopted chains from base: each at its
 * distance from v->lo at the sender when v keeps the sender's numbers
 * (they hold the sender's until now, adopt_alloc), else end to end. */
static void
adopt_number(struct shm_seg *seg, const struct ho_view *v,
             const struct adopt *a, uint64_t base)
{
    uint64_t seq = base;

    for (uint32_t r = a->first; r != 0; r = shm_ring_msg(seg, r)->next) {
        struct shm_msg *m = shm_ring_msg(seg, r);
        m->seq = v->inc != 0 ? ho_place(v, base, m->seq) : seq++;
    }
}

/* adopt_note_locked - the partition notes where the sender's numbers are
 * here (dir.h: adopt_*), and the mark of what left it covers what left
 * the sender uncarried: a stream that had not passed it missed it. */
static void
adopt_note_locked(struct shm_ring_ctx *c, const struct ho_view *v,
                  uint64_t base)
{
    struct shm_part *p = c->p;

    p->adopt_inc = v->inc;
    p->adopt_lo = v->lo;
    p->adopt_hi = v->hi;
    p->adopt_base = base;
    p->adopt_cut_at = v->cut_at;
    p->adopt_cut_len = v->cut_len;
    if (v->inc != 0 && v->gone != 0 &&
        ho_place(v, base, v->gone) >
            atomic_load_explicit(&p->gone_seq, RELAXED))
        atomic_store_explicit(&p->gone_seq, ho_place(v, base, v->gone),
                              RELAXED);
    shm_ring_last_seq_locked(p, atomic_load_explicit(&p->gone_seq, RELAXED));
}

/* Link the adopted chains (n of them, cost bytes) after message prev (0:
 * at the head), numbered from the sequence numbers the hold kept, so the
 * list stays in sequence order.  A group about to read what follows reads
 * them first.  The store into prev's link (or the head) publishes them. */
static void
adopt_insert_locked(struct shm_ring_ctx *c, const struct ho_view *v,
                    const struct adopt *a, uint32_t prev)
{
    struct shm_seg *seg = c->seg;
    struct shm_part *p = c->p;
    uint32_t after = prev != 0 ? shm_ring_msg(seg, prev)->next : p->head;
    uint32_t n = v->nmsgs;
    uint64_t cost = v->cost;

    adopt_number(seg, v, a, p->hold_seq);
    shm_ring_last_seq_locked(p, shm_ring_msg(seg, a->last)->seq);
    shm_ring_msg(seg, a->last)->next = after;
    if (prev != 0)
        shm_ring_msg(seg, prev)->next = a->first; /* publishes */
    else
        p->head = a->first;
    if (after == 0)
        p->tail = a->last;
    atomic_store_explicit(&p->oldest_ms, shm_msg_at(shm_ring_msg(seg, p->head)),
                          RELAXED);
    atomic_store_explicit(&p->count, atomic_load(&p->count) + n, RELAXED);
    atomic_store_explicit(&p->cost, atomic_load(&p->cost) + cost, RELAXED);
    for (uint32_t r = a->first; r != after; r = shm_ring_msg(seg, r)->next)
        shm_arena_link(seg, r);
    /* A group about to read what follows (made here during the hold, its
     * last just below that) now reads them first: its last goes below
     * them, where repair looks for its cursor.  Its leases are all below
     * the hold: it read nothing pushed since. */
    for (uint32_t g = p->groups; g != 0; g = shm_ring_gs(seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(seg, g);
        if (s->cursor == after) {
            s->cursor = a->first;
            s->last = p->hold_seq - 1;
        }
    }
    p->last_active = c->now;
}

/* Append lease cell l (INFLIGHT) to s for message ref, ready to go out
 * again with exactly attempts: a READY_SAME lease, as shm_release leaves
 * one.  The list stays sorted: adopted messages are the newest s holds. */
static void
adopt_lease_locked(struct shm_ring_ctx *c, struct shm_gs *s, uint32_t l,
                   uint32_t ref, uint32_t attempts)
{
    shm_ring_msg(c->seg, ref)->read = 1;
    shm_ring_lease_append_locked(c, s, l, ref, c->now, attempts,
                                 SHM_LEASE_READY_SAME);
}

/* A redelivery that waits out a delay (a retry's, or a message not visible
 * yet: attempts 1) as a DELAYED lease, due when it ends. */
static void
adopt_delayed_locked(struct shm_ring_ctx *c, struct shm_gs *s, uint32_t l,
                     uint32_t ref, const struct shm_ho_redo *d)
{
    uint64_t at = c->now + d->delay_ms;

    if (d->attempts > 1)
        shm_ring_msg(c->seg, ref)->read = 1;
    shm_ring_lease_append_locked(c, s, l, ref, at, d->attempts - 1,
                                 SHM_LEASE_DELAYED);
    if (at < s->due)
        s->due = at;
    if (at < atomic_load_explicit(&c->p->due, RELAXED))
        atomic_store_explicit(&c->p->due, at, RELAXED);
}

/*
 * adopt_owed_locked - what s had not read yet before the adopted messages
 * (first: the first of them) becomes first deliveries owed, ahead of the
 * adopted ones, so its cursor can move into them: a READY_INC lease of
 * attempts 0 goes out with attempts 1, as a first delivery does.  Its
 * cells are allocated before any is linked; 0, or -ENOBUFS with nothing
 * changed.  (A group that read here already, and still had messages to
 * read: rare with a hold in place.)
 */
static int
adopt_owed_locked(struct shm_ring_ctx *c, struct shm_gs *s, uint32_t first)
{
    struct shm_seg *seg = c->seg;
    uint32_t r = s->cursor, cells = 0;

    while (r != 0 && r != first)
        r = shm_ring_msg(seg, r)->next;
    if (r != first || s->cursor == first)
        return 0; /* nothing owed before them */
    for (r = s->cursor; r != first; r = shm_ring_msg(seg, r)->next) {
        uint32_t l;
        if (shm_arena_alloc(seg, c->w, 1, &l) != 0) {
            for (; cells != 0; cells = l) {
                l = shm_ring_lease(seg, cells)->next;
                shm_arena_free(seg, c->w, cells);
            }
            return -ENOBUFS;
        }
        shm_ring_lease(seg, l)->next = cells;
        cells = l;
    }
    for (r = s->cursor; r != first; r = shm_ring_msg(seg, r)->next) {
        uint32_t l = cells;
        cells = shm_ring_lease(seg, l)->next;
        shm_ring_lease_append_locked(c, s, l, r, c->now, 0,
                                     SHM_LEASE_READY_INC);
    }
    s->cursor = first;
    return 0;
}

/* Put state gs where group entry g says, whatever it read here before:
 * what it still owed before the adopted messages first, then its
 * redeliveries (lease cells leases[]), then the cursor, in that order, so
 * a holder killed in between leaves a cursor repair re-derives from the
 * highest lease.  Messages below its cursor that are no redelivery were
 * completed: it never reads them again. */
static void
adopt_place_locked(struct shm_ring_ctx *c, uint32_t gs,
                   const struct shm_ho_grp *g, const unsigned char *redo,
                   const struct adopt *a, uint32_t *leases, uint32_t n)
{
    struct shm_seg *seg = c->seg;
    struct shm_gs *s = shm_ring_gs(seg, gs);
    uint32_t first = a->refs[0];
    uint32_t after = shm_ring_msg(seg, a->refs[n - 1])->next;

    if (adopt_owed_locked(c, s, first) != 0)
        return; /* no cell to spare: it reads them all as new */
    for (uint32_t i = 0; i < g->nredo; i++) {
        struct shm_ho_redo d;
        memcpy(&d, redo + i * sizeof(d), sizeof(d));
        if (d.delay_ms > 0)
            adopt_delayed_locked(c, s, leases[i], a->refs[d.index], &d);
        else
            adopt_lease_locked(c, s, leases[i], a->refs[d.index], d.attempts);
        leases[i] = 0;
    }
    if (g->cursor > 0)
        s->last = shm_ring_msg(seg, a->refs[g->cursor - 1])->seq;
    else
        s->last = shm_ring_msg(seg, first)->seq - 1;
    s->cursor = g->cursor < n ? a->refs[g->cursor] : after;
    s->skipped += g->skipped;
}

/* A record's key that this window holds too was pushed here during the
 * gap (the owner came back before its partitions did): stored twice.  The
 * copy here, if unread, goes (the record's key keeps the first id, which
 * the dedupe answer names) and counts as a duplicate; one already read
 * stays, and both are delivered (at-least-once). */
static void
adopt_dd_twice_locked(struct shm_ring_ctx *c, const struct adopt *a)
{
    uint64_t win = (uint64_t)c->q->opts.dedupe_s * 1000;
    uint64_t inc = shm_params_of(c->seg)->incarnation;
    uint32_t n = 0;

    if (c->p->dd_head == 0 || win == 0)
        return;
    for (uint32_t d = a->dd; d != 0; d = shm_ring_dd(c->seg, d)->next) {
        const struct shm_dd *e = shm_ring_dd(c->seg, d);
        if (e->at_ms + win > c->now)
            n += (uint32_t)shm_ring_dd_undo_locked(c, e->hash, win, inc);
    }
    if (n > 0)
        shm_count(c->seg, c->w, SHM_C_DUPLICATES, n);
}

/* The record's window keys go before those here (they are older: pushes
 * that came during the hold); the store into dd_head publishes them, and
 * the window's hash index is rebuilt from the list. */
static void
adopt_dd_locked(struct shm_ring_ctx *c, struct adopt *a)
{
    struct shm_part *p = c->p;
    uint32_t last = 0, n = 0;

    if (a->dd == 0)
        return;
    adopt_dd_twice_locked(c, a);
    for (uint32_t d = a->dd; d != 0; d = shm_ring_dd(c->seg, d)->next) {
        last = d;
        n++;
    }
    shm_ring_dd(c->seg, last)->next = p->dd_head;
    p->dd_head = a->dd;
    if (p->dd_tail == 0)
        p->dd_tail = last;
    p->dd_count += n;
    for (uint32_t d = a->dd; d != shm_ring_dd(c->seg, last)->next;
         d = shm_ring_dd(c->seg, d)->next)
        shm_arena_link(c->seg, d);
    a->dd = 0;
    shm_ring_dd_reindex_locked(c); /* the index knew none of them */
}

/* Under pr's lock: link the messages (before what a hold kept behind
 * them, or at the tail), place the groups, end the hold, schedule, wake. */
static int
adopt_link(struct shm_seg *seg, int w, struct shm_ref qr, struct shm_ref pr,
           const struct ho_view *v, struct adopt *a, uint64_t now)
{
    const unsigned char *gp = v->groups, *redo;
    struct shm_ring_ctx c;
    struct shm_ho_grp g;
    struct shm_name name;
    uint64_t kick = 0, base, k = 0;
    int insert;
    int rc = shm_part_lock_ctx(seg, w, pr, shm_dir_queue(seg, qr.idx), now, &c);

    if (rc != 0)
        return rc;
    /* partition lock: link, pick, place, due time, waiters.  No malloc.
     * Numbers are taken or the kept ones used as a push takes them: the
     * horizon stays below both until the wake-ups are out (horizon.c). */
    shm_pushing_begin(seg, w, atomic_load(&c.p->hold_seq));
    uint32_t prev = adopt_spot_locked(&c, v->nmsgs, &insert);
    if (insert) {
        base = c.p->hold_seq;
        adopt_insert_locked(&c, v, a, prev);
    } else {
        /* numbers of its own, as a push takes them: the sender's span */
        base = atomic_fetch_add(&shm_dir_of(seg)->next_seq,
                                v->inc != 0 ? v->hi - v->lo - v->cut_len + 1
                                            : v->nmsgs);
        adopt_number(seg, v, a, base);
        if (v->nmsgs > 0)
            shm_ring_append_locked(&c, a->first, a->last, v->nmsgs, v->cost);
    }
    adopt_note_locked(&c, v, base);
    a->first = 0;
    if (v->nmsgs > 0)
        shm_ring_delayed_note_locked(&c, a->refs[0], v->nmsgs);
    adopt_dd_locked(&c, a);
    shm_ring_hold_end_locked(&c);
    adopt_pick_locked(&c, v, a);
    for (uint32_t i = 0; i < v->ngroups; i++) {
        gp = ho_group(gp, &g, &name, &redo);
        if (a->gs[i] != 0 && v->nmsgs > 0)
            adopt_place_locked(&c, a->gs[i], &g, redo, a, a->leases + k,
                               v->nmsgs);
        k += g.nredo;
    }
    /* Once every group is placed (its leases say what it still owes), a
     * message of a key the record carries gives way to a later one. */
    if ((c.q->opts.flags & SHM_QOPT_CONFLATE) && a->cf.keys.n > 0)
        shm_ring_conflate_locked(&c, &a->cf.keys, 0, NULL);
    shm_part_due_locked(seg, pr.idx, c.p, c.q);
    shm_waiters_post_locked(seg, qr, pr, &kick);
    shm_ring_unlock(c.p);
    shm_waiters_kick(seg, kick);
    shm_pushing_end(seg, w);
    return 0;
}

/* shm_part_adopt - see part_move.h. */
int
shm_part_adopt(struct shm_seg *seg, int w, struct shm_name queue,
               struct shm_name part, const void *rec, size_t len, uint64_t now)
{
    struct shm_ref qr, pr;
    struct ho_view v;
    struct adopt a;
    int rc;

    if (ho_check(rec, len, &v) != 0)
        return -EBADMSG;
    if (v.nmsgs == 0 && v.ngroups == 0 && v.ndd == 0)
        return 0;
    if ((rc = adopt_alloc(seg, w, &v, now, &a)) != 0)
        return rc;
    for (int t = 0; t < SHM_BROKER_TRIES; t++) {
        rc = shm_dir_find_queue(seg, w, queue, 1, now, &qr);
        if (rc == 0)
            rc = shm_dir_find_part(seg, w, qr, part, 1, now, &pr);
        if (rc == 0)
            rc = adopt_groups(seg, w, qr, pr, &v, now);
        if (rc == 0)
            rc = adopt_link(seg, w, qr, pr, &v, &a, now);
        if (rc != -ESTALE)
            break; /* else the queue was collected meanwhile: again */
    }
    if (rc == 0)
        atomic_store_explicit(&shm_dir_queue(seg, qr.idx)->last_active, now,
                              RELAXED);
    adopt_free(seg, w, &v, &a);
    if (rc == -ESTALE)
        return -EAGAIN;
    return rc == 0 ? (int)v.nmsgs : rc;
}
