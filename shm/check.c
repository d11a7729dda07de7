/*
 * check.c - the segment checker (check.h): the DIR tables, each queue with
 * its partitions, the arena, the due heap and the catalog, in that order,
 * each under its own lock in the lock order of DESIGN.md §2.  In a quiet
 * check every run a structure reaches is marked in a bitmap, so the
 * arena's walk can tell a leak or a run reached twice.
 */
#include "shm/check.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/broker_int.h"
#include "shm/catalog.h"
#include "shm/dd_index.h"
#include "shm/due.h"
#include "shm/layout.h"
#include "shm/lock.h"
#include "shm/ring.h"
#include "shm/slot.h"

#define RELAXED memory_order_relaxed
#define LOAD(x) atomic_load_explicit(&(x), RELAXED)

/* One check's state. */
struct check {
    struct shm_seg *seg;
    struct shm_check_report *r;
    int quiet;
    uint32_t cap;     /* arena cells */
    uint8_t *reached; /* quiet: heads reached, one bit a cell */
    uint32_t workers; /* worker slots in use */
    uint32_t reg[SHM_RING_GROUPS_MAX + 1]; /* the queue's registry */
    uint32_t nreg;
    uint64_t holds, holds_over; /* holds found, and those not in the table */
};

/* Count a broken invariant; the first one's sentence is kept. */
static void __attribute__((format(printf, 2, 3)))
broken(struct check *k, const char *fmt, ...)
{
    va_list ap;

    if (k->r->problems++ == 0) {
        va_start(ap, fmt);
        vsnprintf(k->r->first, sizeof(k->r->first), fmt, ap);
        va_end(ap);
    }
}

static struct shm_arena *
check_arena(struct shm_seg *seg)
{
    return shm_region(seg, SHM_REGION_ARENA);
}

static uint32_t
check_tag(struct shm_seg *seg, uint32_t ref)
{
    struct shm_arena *a = check_arena(seg);

    return atomic_load((_Atomic uint32_t *)((unsigned char *)a + a->tags_off) +
                       ref);
}

static int
bit_test_set(uint8_t *map, uint32_t i)
{
    int was = map[i / 8] >> (i % 8) & 1;

    map[i / 8] |= (uint8_t)(1u << (i % 8));
    return was;
}

/*
 * Is ref a cell of the arena (1..cap)?  Every read through a ref a
 * structure holds comes after this test: a damaged ref must be named, never
 * followed out of the mapping.  Counts a problem when it is not.
 */
static int
valid_ref(struct check *k, uint32_t ref, const char *what)
{
    if (ref != 0 && ref <= k->cap)
        return 1;
    broken(k, "%s points at cell %u, outside the arena", what, ref);
    return 0;
}

/*
 * A structure reaches run ref of len cells (0: any length) as what: it must
 * be a LINKED head of that length, inside the arena, whose first word is its
 * length; in a quiet check, reached once.  Returns 0 when it is sound.
 */
static int
reach(struct check *k, uint32_t ref, uint32_t len, const char *what)
{
    if (!valid_ref(k, ref, what))
        return -1;
    uint32_t t = check_tag(k->seg, ref);
    if (SHM_TAG_STATE(t) != SHM_TAG_LINKED) {
        broken(k, "%s at cell %u is tagged %u, not LINKED", what, ref,
               SHM_TAG_STATE(t));
        return -1;
    }
    if ((len != 0 && SHM_TAG_LEN(t) != len) ||
        SHM_TAG_LEN(t) > k->cap - ref + 1 ||
        *(uint32_t *)shm_cell(k->seg, ref) != SHM_TAG_LEN(t)) {
        broken(k, "%s at cell %u is a run of %u cells, %u needed", what, ref,
               SHM_TAG_LEN(t), len);
        return -1;
    }
    if (k->quiet && bit_test_set(k->reached, ref)) {
        broken(k, "%s at cell %u is reached twice", what, ref);
        return -1;
    }
    return 0;
}

/* ---- DIR --------------------------------------------------------------- */

/* A table's free list: bounded, below bump, of dead records, no repeat;
 * free gets one bit per record on it.  Returns its length. */
static uint32_t
check_free_list(struct check *k, uint32_t kind, uint8_t *free)
{
    struct shm_dir *d = shm_dir_of(k->seg);
    uint32_t bump = kind ? d->p_bump : d->q_bump, n = 0;
    const char *what = kind ? "partition" : "queue";

    for (uint32_t i = kind ? d->p_free : d->q_free; i != 0; n++) {
        if (i > bump) {
            broken(k, "the %s free list names record %u past the bump", what,
                   i - 1);
            break;
        }
        uint32_t idx = i - 1;
        if (bit_test_set(free, idx)) {
            broken(k, "the %s free list meets record %u twice", what, idx);
            break;
        }
        if (kind ? LOAD(shm_dir_part(k->seg, idx)->alive)
                 : LOAD(shm_dir_queue(k->seg, idx)->alive))
            broken(k, "%s record %u is alive and on the free list", what, idx);
        i = kind ? shm_dir_part(k->seg, idx)->next_free
                 : shm_dir_queue(k->seg, idx)->next_free;
    }
    for (uint32_t i = 0; i < bump; i++) {
        int alive = kind ? LOAD(shm_dir_part(k->seg, i)->alive)
                         : LOAD(shm_dir_queue(k->seg, i)->alive);
        if (k->quiet && !alive && !(free[i / 8] >> (i % 8) & 1))
            broken(k, "%s record %u is neither alive nor free", what, i);
    }
    return n;
}

/* The name index (dir lock held): each slot a live record of its kind,
 * found from its home slot; returns how many slots are used. */
static uint32_t
check_index(struct check *k)
{
    struct shm_dir *d = shm_dir_of(k->seg);
    struct shm_dir_slot *ix =
        (struct shm_dir_slot *)((unsigned char *)d + d->index_off);
    uint32_t mask = d->index_slots - 1, used = 0;

    for (uint32_t i = 0; i < d->index_slots; i++) {
        if (ix[i].ref == 0)
            continue;
        used++;
        uint32_t ref = ix[i].ref - 1, idx = ref & ~SHM_DIR_PART_BIT;
        int part = (ref & SHM_DIR_PART_BIT) != 0;
        if (idx >= (part ? d->p_bump : d->q_bump)) {
            broken(k, "index slot %u names a record past its table's bump", i);
            continue;
        }
        uint64_t h = part ? shm_dir_part(k->seg, idx)->name_hash
                          : shm_dir_queue(k->seg, idx)->name_hash;
        int alive = part ? LOAD(shm_dir_part(k->seg, idx)->alive)
                         : LOAD(shm_dir_queue(k->seg, idx)->alive);
        if ((!alive && k->quiet) ||
            (alive && ix[i].hash != (uint32_t)(h >> 32)))
            broken(k, "index slot %u names %s record %u, %s", i,
                   part ? "partition" : "queue", idx,
                   alive ? "with another hash" : "which is dead");
        for (uint32_t j = (uint32_t)h & mask; j != i; j = (j + 1) & mask)
            if (ix[j].ref == 0) {
                broken(k, "index slot %u cannot be found from its home %u", i,
                       (uint32_t)h & mask);
                break;
            }
    }
    return used;
}

/* A live queue's partition list (dir lock held); *listed counts entries
 * per partition record. */
static void
check_part_list(struct check *k, uint32_t qi, uint8_t *listed)
{
    struct shm_dir *d = shm_dir_of(k->seg);
    struct shm_queue *q = shm_dir_queue(k->seg, qi);
    uint32_t n = 0;

    for (uint32_t i = q->parts; i != 0; n++) {
        if (i > d->p_bump || n > d->p_bump) {
            broken(k, "queue %u's partition list leaves the table or loops",
                   qi);
            return;
        }
        struct shm_part *p = shm_dir_part(k->seg, i - 1);
        if ((!LOAD(p->alive) && k->quiet) || p->queue != qi ||
            p->queue_gen != q->gen)
            broken(k, "queue %u lists partition %u, %s", qi, i - 1,
                   LOAD(p->alive) ? "another queue's" : "which is dead");
        if (bit_test_set(listed, i - 1)) {
            broken(k, "partition %u is listed twice", i - 1);
            return;
        }
        i = p->next_part;
    }
    if (n != q->nparts)
        broken(k, "queue %u lists %u partitions and counts %u", qi, n,
               q->nparts);
}

/* Waiter bits and parked counts name only worker slots in use. */
static void
check_waiters(struct check *k, int part, uint32_t idx, uint64_t mask)
{
    struct shm_dir *d = shm_dir_of(k->seg);
    _Atomic uint16_t *row = shm_dir_parked(k->seg, part, idx);

    if (k->workers < 64 && mask >> k->workers != 0)
        broken(k, "%s %u has waiter bits %#llx beyond its %u workers",
               part ? "partition" : "queue", idx, (unsigned long long)mask,
               k->workers);
    for (uint32_t w = k->workers; w < d->parked_cols; w++)
        if (LOAD(row[w]) != 0)
            broken(k, "%s %u counts pops parked by worker slot %u, not in use",
                   part ? "partition" : "queue", idx, w);
}

/* The DIR tables under the dir lock.  free and listed are zeroed bitmaps
 * of the partition table's size. */
static void
check_dir(struct check *k, uint8_t *qfree, uint8_t *pfree, uint8_t *listed)
{
    struct shm_dir *d = shm_dir_of(k->seg);
    uint32_t alive_q = 0, alive_p = 0;

    if (d->magic != SHM_DIR_MAGIC) {
        broken(k, "the DIR region has lost its magic");
        return;
    }
    if (shm_dir_lock(k->seg) != 0) {
        broken(k, "the dir lock is unusable");
        return;
    }
    uint32_t nfree = check_free_list(k, 0, qfree);
    for (uint32_t i = 0; i < d->q_bump; i++)
        if (LOAD(shm_dir_queue(k->seg, i)->alive)) {
            alive_q++;
            check_part_list(k, i, listed);
            check_waiters(k, 0, i, LOAD(shm_dir_queue(k->seg, i)->waiters));
        }
    if (k->quiet && (alive_q != d->nqueues || alive_q + nfree != d->q_bump))
        broken(k, "%u queues alive and %u free of %u handed out; nqueues %u",
               alive_q, nfree, d->q_bump, d->nqueues);
    nfree = check_free_list(k, SHM_DIR_PART_BIT, pfree);
    for (uint32_t i = 0; i < d->p_bump; i++) {
        struct shm_part *p = shm_dir_part(k->seg, i);
        if (!LOAD(p->alive))
            continue;
        alive_p++;
        check_waiters(k, 1, i, LOAD(p->waiters));
        if (!(listed[i / 8] >> (i % 8) & 1))
            broken(k, "partition %u is alive but on no live queue's list", i);
    }
    if (k->quiet && alive_p + nfree != d->p_bump)
        broken(k, "%u partitions alive and %u free of %u handed out", alive_p,
               nfree, d->p_bump);
    if (check_index(k) != alive_q + alive_p && k->quiet)
        broken(k,
               "the name index holds a number of entries other than the "
               "%u live records",
               alive_q + alive_p);
    shm_dir_unlock(k->seg);
}

/* ---- a queue and its partitions ---------------------------------------- */

/* A record's name: a LINKED run of its length. */
static void
check_name(struct check *k, uint32_t ref, uint32_t len, const char *what)
{
    if (len == 0 || len > SHM_NAME_MAX)
        broken(k, "%s has a name of %u bytes", what, len);
    else
        reach(k, ref, shm_cells_for(len), what);
}

/* The queue's group registry (queue lock held), copied into k->reg. */
static void
check_registry(struct check *k, uint32_t qi, struct shm_queue *q)
{
    char what[64];

    k->nreg = 0;
    snprintf(what, sizeof(what), "queue %u's group entry", qi);
    for (uint32_t e = q->groups; e != 0; e = shm_ring_grp(k->seg, e)->next) {
        if (k->nreg == SHM_RING_GROUPS_MAX + 1 || reach(k, e, 1, what) != 0) {
            broken(k, "queue %u's group registry is unsound", qi);
            break;
        }
        k->reg[k->nreg++] = e;
        struct shm_grp *g = shm_ring_grp(k->seg, e);
        if (g->name_len != 0)
            reach(k, g->name_ref, shm_cells_for(g->name_len), what);
        if (e == q->intent)
            broken(k, "queue %u's registry holds the entry being freed", qi);
    }
    if (k->nreg != LOAD(q->ngroups))
        broken(k, "queue %u knows %u groups and counts %u", qi, k->nreg,
               LOAD(q->ngroups));
    k->r->groups += k->nreg;
    if (q->intent != 0 && reach(k, q->intent, 1, "a group entry to free") == 0)
        if (shm_ring_grp(k->seg, q->intent)->name_len != 0)
            reach(k, shm_ring_grp(k->seg, q->intent)->name_ref, 0,
                  "a group name to free");
}

/* The message list of partition pi; 0 when it can be walked again (every
 * ref inside the arena, seqs rising: no cycle), -1 when not. */
static int
check_msgs(struct check *k, uint32_t pi, struct shm_part *p)
{
    uint64_t n = 0, cost = 0, prev = 0,
             next = LOAD(shm_dir_of(k->seg)->next_seq);
    uint32_t last = 0;
    char what[64];

    snprintf(what, sizeof(what), "a message of partition %u", pi);
    for (uint32_t r = p->head; r != 0; r = shm_ring_msg(k->seg, r)->next) {
        if (!valid_ref(k, r, what))
            return -1;
        struct shm_msg *m = shm_ring_msg(k->seg, r);
        if (n++ > k->cap || m->seq <= prev || m->seq >= next) {
            broken(k,
                   "partition %u's messages do not rise in seq below the "
                   "node's counter (seq %llu after %llu)",
                   pi, (unsigned long long)m->seq, (unsigned long long)prev);
            return -1;
        }
        if (reach(k, r, shm_cells_for(SHM_MSG_HDR + shm_msg_stored(m)), what))
            return -1;
        if (m->read > SHM_MSG_SUPERSEDED ||
            (m->read == SHM_MSG_SUPERSEDED && !shm_msg_keyed(m)))
            broken(k, "message %llu of partition %u is marked %u",
                   (unsigned long long)m->seq, pi, m->read);
        prev = m->seq;
        cost += shm_ring_msg_cost(shm_msg_stored(m));
        last = r;
    }
    if (last != p->tail)
        broken(k, "partition %u's tail is not its last message", pi);
    if (n != LOAD(p->count) || cost != LOAD(p->cost))
        broken(k,
               "partition %u holds %llu messages of %llu bytes and counts "
               "%llu of %llu",
               pi, (unsigned long long)n, (unsigned long long)cost,
               (unsigned long long)LOAD(p->count),
               (unsigned long long)LOAD(p->cost));
    if (p->head != 0 &&
        LOAD(p->oldest_ms) != shm_msg_at(shm_ring_msg(k->seg, p->head)))
        broken(k, "partition %u's oldest_ms is not its head's", pi);
    k->r->messages += n;
    k->r->message_bytes += cost;
    return 0;
}

/* Is message ref of seq seq on p's list (which check_msgs found sound)?
 * (Leases are sorted by seq as the list is, so *from carries on where the
 * last lookup stopped.)  The walk is capped at the arena's cells all the
 * same. */
static int
check_listed(struct check *k, struct shm_part *p, uint32_t *from, uint64_t seq,
             uint32_t ref)
{
    uint32_t r = *from ? *from : p->head;

    for (uint32_t n = 0; r != 0 && shm_ring_msg(k->seg, r)->seq < seq; n++)
        r = n < k->cap ? shm_ring_msg(k->seg, r)->next : 0;
    *from = r;
    return r == ref && r != 0 && shm_ring_msg(k->seg, r)->seq == seq;
}

/* One group state's leases; returns its live (LEASED) ones, *earliest the
 * earliest live deadline. */
static uint64_t
check_leases(struct check *k, uint32_t pi, struct shm_part *p, struct shm_gs *s,
             uint64_t *earliest)
{
    uint64_t prev = 0, n = 0, ready = 0, delayed = 0;
    uint32_t last = 0, from = 0;
    char what[64];

    snprintf(what, sizeof(what), "a lease in partition %u", pi);
    for (uint32_t l = s->lhead; l != 0; l = shm_ring_lease(k->seg, l)->next) {
        struct shm_lease *L = shm_ring_lease(k->seg, l);
        if (reach(k, l, 1, what) != 0)
            return 0;
        if (n++ > k->cap || L->seq <= prev || L->seq > s->last) {
            broken(k,
                   "partition %u's leases do not rise in seq up to the "
                   "group's last delivery",
                   pi);
            return 0;
        }
        /* A first delivery owed (an adopt placed a group that had not
         * read this far: READY_INC, attempts 0) may be of a message no
         * group has read; any other lease went out at least once. */
        int owed = (L->state == SHM_LEASE_READY_INC ||
                    L->state == SHM_LEASE_DELAYED) &&
                   L->attempts == 0;
        if (!check_listed(k, p, &from, L->seq, L->msg))
            broken(k,
                   "a lease in partition %u names no listed message of "
                   "its seq %llu",
                   pi, (unsigned long long)L->seq);
        else if (!owed && !shm_ring_msg(k->seg, L->msg)->read)
            broken(k, "leased message %llu of partition %u is not marked read",
                   (unsigned long long)L->seq, pi);
        else if (shm_ring_msg(k->seg, L->msg)->read == SHM_MSG_SUPERSEDED &&
                 L->state != SHM_LEASE_LEASED)
            /* ring.c voids every other lease as it marks one superseded */
            broken(k,
                   "superseded message %llu of partition %u waits for a "
                   "delivery",
                   (unsigned long long)L->seq, pi);
        if (L->state < SHM_LEASE_LEASED || L->state > SHM_LEASE_DELAYED)
            broken(k, "a lease in partition %u has state %u", pi, L->state);
        else if (L->attempts == 0 && !owed)
            broken(k, "a lease in partition %u went out with attempts 0", pi);
        else if (L->state == SHM_LEASE_DELAYED) {
            delayed++;
            if (L->deadline < s->due || L->deadline < LOAD(p->due))
                broken(k,
                       "a delayed lease in partition %u is due before its "
                       "state or partition says",
                       pi);
            else if (L->deadline < *earliest)
                *earliest = L->deadline;
        } else if (L->state != SHM_LEASE_LEASED)
            ready++;
        else if (L->deadline < s->due || L->deadline < LOAD(p->due))
            broken(k,
                   "a lease in partition %u is due before its state or "
                   "partition says",
                   pi);
        else if (L->deadline < *earliest)
            *earliest = L->deadline;
        prev = L->seq;
        last = l;
    }
    if (s->nleases != n || s->nready != ready || s->ltail != last)
        broken(k,
               "a group state of partition %u counts %u leases (%u ready), "
               "its list has %llu (%llu)",
               pi, s->nleases, s->nready, (unsigned long long)n,
               (unsigned long long)ready);
    k->r->leases += n;
    return n - ready - delayed;
}

/* The window's hash index (dd_index.h) against its sound list of n keys:
 * a LINKED run holding its buckets, each chain only keys of its bucket,
 * and every key of the list on its bucket's chain. */
static void
check_dd_index(struct check *k, uint32_t pi, struct shm_part *p, uint64_t n)
{
    if (reach(k, p->dd_index, 0, "a dedupe index") != 0)
        return;
    const struct shm_ddx *x = shm_cell(k->seg, p->dd_index);
    uint64_t chained = 0;

    if (x->nb == 0 || (x->nb & (x->nb - 1)) != 0 ||
        shm_ddx_cells(x->nb) > x->chain) {
        broken(k, "partition %u's dedupe index has %u buckets in %u cells", pi,
               x->nb, x->chain);
        return;
    }
    for (uint32_t b = 0; b < x->nb; b++)
        for (uint32_t d = x->b[b]; d != 0; d = shm_ring_dd(k->seg, d)->bnext) {
            if (++chained > n || !valid_ref(k, d, "a dedupe index bucket") ||
                (shm_ring_dd(k->seg, d)->hash & (x->nb - 1)) != b) {
                broken(k,
                       "partition %u's dedupe index holds more than its "
                       "%llu keys, or one in the wrong bucket",
                       pi, (unsigned long long)n);
                return;
            }
        }
    /* Each key of the list on its chain (n and the chains are bounded by
     * now: a key not found is one the index misses). */
    for (uint32_t d = p->dd_head; d != 0; d = shm_ring_dd(k->seg, d)->next) {
        uint32_t e = x->b[shm_ring_dd(k->seg, d)->hash & (x->nb - 1)];
        while (e != 0 && e != d)
            e = shm_ring_dd(k->seg, e)->bnext;
        if (e == 0) {
            broken(k, "partition %u's dedupe index misses key cell %u", pi, d);
            return;
        }
    }
    if (chained != n)
        broken(k,
               "partition %u's dedupe index holds %llu keys, its window %llu",
               pi, (unsigned long long)chained, (unsigned long long)n);
}

/* The dedupe window's keys (ring.h, struct shm_dd): each a LINKED cell,
 * the tail the last, the count right; and its index. */
static void
check_dd(struct check *k, uint32_t pi, struct shm_part *p)
{
    uint64_t n = 0;
    uint32_t last = 0;

    for (uint32_t d = p->dd_head; d != 0; d = shm_ring_dd(k->seg, d)->next) {
        if (n++ > k->cap || !valid_ref(k, d, "a dedupe key") ||
            reach(k, d, 1, "a dedupe key") != 0) {
            broken(k, "partition %u's dedupe window is unsound", pi);
            return;
        }
        last = d;
    }
    if (last != p->dd_tail || n != p->dd_count)
        broken(k,
               "partition %u's dedupe window has %llu keys and counts %u, "
               "or its tail is not its last",
               pi, (unsigned long long)n, p->dd_count);
    else if (p->dd_index != 0)
        check_dd_index(k, pi, p, n);
}

/* Is cell e on the queue's registry (as copied by check_registry)? */
static int
check_in_registry(struct check *k, uint32_t e)
{
    for (uint32_t i = 0; i < k->nreg; i++)
        if (k->reg[i] == e)
            return 1;
    return 0;
}

/* The group states of partition pi; returns the partition's live leases. */
static uint64_t
check_states(struct check *k, uint32_t pi, struct shm_part *p,
             uint64_t *earliest)
{
    uint64_t live = 0;
    uint32_t n = 0;
    char what[64];

    snprintf(what, sizeof(what), "a group state of partition %u", pi);
    for (uint32_t g = p->groups; g != 0; g = shm_ring_gs(k->seg, g)->next) {
        struct shm_gs *s = shm_ring_gs(k->seg, g);
        if (n++ == SHM_RING_GROUPS_MAX || reach(k, g, 1, what) != 0) {
            broken(k, "partition %u's group states are unsound", pi);
            return live;
        }
        if (!check_in_registry(k, s->grp) ||
            shm_ring_grp(k->seg, s->grp)->name_hash != s->name_hash)
            broken(k,
                   "a group state of partition %u points at no group "
                   "entry of its queue",
                   pi);
        for (uint32_t o = p->groups; o != g; o = shm_ring_gs(k->seg, o)->next)
            if (shm_ring_gs(k->seg, o)->grp == s->grp)
                broken(k, "partition %u has two states for one group", pi);
        uint32_t cur = p->head; /* a list check_msgs found sound */
        for (uint32_t m = 0;
             cur != 0 && shm_ring_msg(k->seg, cur)->seq <= s->last; m++)
            cur = m < k->cap ? shm_ring_msg(k->seg, cur)->next : 0;
        if (s->cursor != cur)
            broken(k,
                   "a group's cursor in partition %u is not the first "
                   "message above its last delivery %llu",
                   pi, (unsigned long long)s->last);
        live += check_leases(k, pi, p, s, earliest);
    }
    if (n != p->ngs)
        broken(k, "partition %u has %u group states and counts %u", pi, n,
               p->ngs);
    k->r->states += n;
    return live;
}

/* Is partition pi's hold known to the horizon: counted, and in the hold
 * table or counted past it (horizon.c)?  Counts it in k. */
static void
check_hold_tracked(struct check *k, uint32_t pi)
{
    struct shm_dir *d = shm_dir_of(k->seg);
    uint32_t i = 0;

    while (i < SHM_HOLD_TABLE && LOAD(d->hold_parts[i]) != pi + 1)
        i++;
    k->holds++;
    k->holds_over += i == SHM_HOLD_TABLE;
    if (LOAD(d->holds) == 0 ||
        (i == SHM_HOLD_TABLE && LOAD(d->holds_over) == 0))
        broken(k, "partition %u's hold is unknown to the horizon", pi);
}

/* A hold (shm_part_hold) of partition pi, whose message list check_msgs
 * found sound: its time and its kept numbers set together, the numbers
 * taken from the node's counter, none used by a message yet (the adopt
 * that uses them ends the hold), and the horizon knowing of it.  Also the
 * mark of what left the list: below the counter. */
static void
check_hold(struct check *k, uint32_t pi, struct shm_part *p)
{
    uint64_t next = LOAD(shm_dir_of(k->seg)->next_seq);

    if (LOAD(p->gone_seq) >= next)
        broken(k,
               "partition %u says message %llu left it, a number not "
               "given yet",
               pi, (unsigned long long)LOAD(p->gone_seq));

    if ((p->hold_seq == 0) != (p->hold_until == 0)) {
        broken(k, "partition %u's hold has %s but no %s", pi,
               p->hold_seq ? "numbers" : "a time",
               p->hold_seq ? "time" : "numbers");
        return;
    }
    if (p->hold_seq == 0)
        return;
    if (p->hold_seq > next || next - p->hold_seq < SHM_HOLD_SEQS) {
        broken(k, "partition %u's hold keeps numbers the node has not given",
               pi);
        return;
    }
    check_hold_tracked(k, pi);
    for (uint32_t r = p->head; r != 0; r = shm_ring_msg(k->seg, r)->next) {
        uint64_t seq = shm_ring_msg(k->seg, r)->seq;
        if (seq >= p->hold_seq && seq - p->hold_seq < SHM_HOLD_SEQS) {
            broken(k,
                   "partition %u holds message %llu, a number its hold "
                   "keeps",
                   pi, (unsigned long long)seq);
            return;
        }
    }
}

/* Partition pi of queue qi (its lock held). */
static void
check_part(struct check *k, uint32_t pi, struct shm_part *p)
{
    struct shm_dir *d = shm_dir_of(k->seg);
    uint64_t earliest = UINT64_MAX;
    char what[64];

    snprintf(what, sizeof(what), "partition %u's name", pi);
    check_name(k, p->name_ref, p->name_len, what);
    if (check_msgs(k, pi, p) != 0) {
        /* The states and leases are checked against the list: with the
         * list unsound, that would only follow its damage. */
        k->r->parts++;
        return;
    }
    check_hold(k, pi, p); /* walks the list check_msgs found sound */
    check_dd(k, pi, p);
    uint64_t live = check_states(k, pi, p, &earliest);
    if (live != LOAD(p->leased))
        broken(k, "partition %u holds %llu live leases and counts %llu", pi,
               (unsigned long long)live, (unsigned long long)LOAD(p->leased));
    if (p->intent != 0 && valid_ref(k, p->intent, "a chain to free")) {
        /* A pending free a locker without a slot left: unreachable. */
        uint32_t from = 0;
        if (check_listed(k, p, &from, shm_ring_msg(k->seg, p->intent)->seq,
                         p->intent))
            broken(k, "partition %u's chain to free is still listed", pi);
        else
            reach(k, p->intent, 0, "a chain to free");
    }
    if (k->quiet && earliest != UINT64_MAX &&
        shm_due_when(k->seg, d->max_queues + pi) > earliest)
        broken(k,
               "partition %u has a lease due at %llu ms but is not on the "
               "due heap by then",
               pi, (unsigned long long)earliest);
    k->r->parts++;
}

/* Queue qi with every partition it lists: queue lock, then each
 * partition's lock in turn. */
static void
check_queue(struct check *k, uint32_t qi)
{
    struct shm_queue *q = shm_dir_queue(k->seg, qi);
    struct shm_ref qr = {qi, q->gen};
    struct shm_part_list l;
    char what[64];

    if (!LOAD(q->alive) || shm_queue_lock(k->seg, -1, qr) != 0)
        return; /* freed meanwhile */
    k->r->queues++;
    snprintf(what, sizeof(what), "queue %u's name", qi);
    check_name(k, q->name_ref, q->name_len, what);
    check_registry(k, qi, q);
    shm_part_list_get(k->seg, qr, &l);
    for (uint32_t i = 0; i < l.n; i++) {
        struct shm_part *p = shm_dir_part(k->seg, l.v[i].idx);
        int rc = shm_ring_lock(k->seg, -1, p);
        if (rc == -EAGAIN && k->quiet)
            broken(k, "partition %u owes a wipe", l.v[i].idx);
        if (rc != 0) {
            k->r->skipped++;
            continue;
        }
        if (LOAD(p->alive) && p->gen == l.v[i].gen)
            check_part(k, l.v[i].idx, p);
        else
            k->r->skipped++;
        shm_ring_unlock(p);
    }
    shm_part_list_free(&l);
    shm_unlock(&q->lock);
}

/* ---- the arena ---------------------------------------------------------- */

/* The pool lists (arena lock held): FREE heads of their class, once each;
 * returns the cells they hold. */
static uint64_t
check_pool(struct check *k, struct shm_arena *a, const uint8_t *heads,
           uint8_t *listed)
{
    uint64_t cells = 0;

    for (uint32_t c = 0; c <= SHM_ARENA_CLASSES; c++)
        for (uint32_t h = a->pool[c]; h != 0;
             h = *(uint32_t *)shm_cell(k->seg, h)) {
            if (h >= a->bump || !(heads[h / 8] >> (h % 8) & 1) ||
                SHM_TAG_STATE(check_tag(k->seg, h)) != SHM_TAG_FREE) {
                broken(k, "pool list %u names cell %u, not a FREE run", c, h);
                return cells;
            }
            uint32_t len = SHM_TAG_LEN(check_tag(k->seg, h));
            if ((c != 0 && len != c) || (c == 0 && len <= SHM_ARENA_CLASSES))
                broken(k, "pool list %u holds a run of %u cells", c, len);
            if (bit_test_set(listed, h)) {
                broken(k, "pool list %u meets cell %u twice", c, h);
                return cells;
            }
            cells += len;
        }
    return cells;
}

/* The arena under its lock: the runs tile [1, bump), taken, the pool; in
 * a quiet check the runs against what the structures reached. */
static void
check_arena_runs(struct check *k, uint8_t *heads, uint8_t *listed)
{
    struct shm_arena *a = check_arena(k->seg);
    uint64_t by_state[4] = {0}, cached[SHM_MAX_WORKERS] = {0};
    uint32_t c = 1;

    if (shm_arena_lock(k->seg) != 0) {
        broken(k, "the arena's lock is unusable");
        return;
    }
    if (a->bump == 0 || a->bump > k->cap + 1) {
        broken(k, "the arena's bump %u is outside its %u cells", a->bump,
               k->cap);
        shm_arena_unlock(k->seg);
        return;
    }
    while (c < a->bump) {
        uint32_t t = check_tag(k->seg, c), len = SHM_TAG_LEN(t);
        if (len == 0 || len > a->bump - c) {
            broken(k, "arena cell %u is no run's head", c);
            break;
        }
        bit_test_set(heads, c);
        by_state[SHM_TAG_STATE(t)] += len;
        if (SHM_TAG_STATE(t) == SHM_TAG_CACHE)
            cached[(t >> 2) & 63] += len;
        if (k->quiet) {
            int reached = k->reached[c / 8] >> (c % 8) & 1;
            if (SHM_TAG_STATE(t) == SHM_TAG_LINKED && !reached)
                broken(k,
                       "LINKED run at cell %u (%u cells) is reached by "
                       "nothing: a leak",
                       c, len);
            if (SHM_TAG_STATE(t) == SHM_TAG_INFLIGHT)
                broken(k, "run at cell %u is INFLIGHT with no worker busy", c);
        }
        c += len;
    }
    uint64_t taken = a->bump - 1 - by_state[SHM_TAG_FREE];
    if (taken != LOAD(a->taken))
        broken(k, "the arena counts %u cells taken, its runs hold %llu",
               LOAD(a->taken), (unsigned long long)taken);
    uint64_t pooled = check_pool(k, a, heads, listed);
    if (pooled != by_state[SHM_TAG_FREE])
        broken(k, "the pool lists %llu free cells, the runs hold %llu",
               (unsigned long long)pooled,
               (unsigned long long)by_state[SHM_TAG_FREE]);
    shm_arena_unlock(k->seg);
    for (int w = 0; k->quiet && w < SHM_MAX_WORKERS; w++)
        if (cached[w] != LOAD(shm_slot(k->seg, w)->cache_count))
            broken(k, "worker slot %d caches %llu cells and counts %u", w,
                   (unsigned long long)cached[w],
                   LOAD(shm_slot(k->seg, w)->cache_count));
    if (k->quiet &&
        shm_arena_used_bytes(k->seg) !=
            (by_state[SHM_TAG_LINKED] + by_state[SHM_TAG_INFLIGHT]) *
                SHM_CELL_BYTES)
        broken(k, "the arena accounts %llu bytes, its allocated runs hold %llu",
               (unsigned long long)shm_arena_used_bytes(k->seg),
               (unsigned long long)(by_state[SHM_TAG_LINKED] +
                                    by_state[SHM_TAG_INFLIGHT]) *
                   SHM_CELL_BYTES);
    k->r->linked_cells = by_state[SHM_TAG_LINKED];
    k->r->free_cells = by_state[SHM_TAG_FREE];
    k->r->cached_cells = by_state[SHM_TAG_CACHE];
    k->r->inflight_cells = by_state[SHM_TAG_INFLIGHT];
}

/* ---- the catalog -------------------------------------------------------- */

struct catalog_walk {
    struct check *k;
    struct shm_catalog *c;
};

/* One entry: its lookup finds the same options. */
static void
check_catalog_entry(void *arg, const char *name, size_t len,
                    const struct shm_qopts *o)
{
    struct catalog_walk *cw = arg;
    struct shm_qopts got;

    if (!shm_catalog_lookup(cw->c, name, len, &got) ||
        memcmp(&got, o, sizeof(got)) != 0)
        broken(cw->k,
               "declared queue %.*s is not found by its lookup as "
               "listed",
               (int)(len > 64 ? 64 : len), name);
}

static void
check_catalog(struct check *k)
{
    struct catalog_walk cw = {k, k->seg->catalog};

    for (int tries = 0; tries < 3; tries++) {
        uint64_t gen = shm_catalog_generation(cw.c);
        uint64_t before = k->r->problems;
        if (shm_catalog_each(cw.c, check_catalog_entry, &cw) != 0)
            return;
        if (shm_catalog_generation(cw.c) == gen)
            return;
        k->r->problems = before; /* published meanwhile: look again */
        if (before == 0)
            k->r->first[0] = 0;
    }
}

/* ---- the horizon --------------------------------------------------------- */

/* What holds the horizon back (horizon.c): hold table entries naming
 * partitions; quiet, no push in flight in any slot and the hold counts at
 * least the holds the partitions showed (a process killed mid-way leaves
 * them high, never low). */
static void
check_horizon(struct check *k)
{
    struct shm_dir *d = shm_dir_of(k->seg);

    for (uint32_t i = 0; i < SHM_HOLD_TABLE; i++)
        if (LOAD(d->hold_parts[i]) > d->max_parts)
            broken(k,
                   "hold table entry %u names partition record %u, "
                   "outside the table",
                   i, LOAD(d->hold_parts[i]) - 1);
    if (!k->quiet)
        return;
    for (int w = 0; w < SHM_MAX_WORKERS; w++)
        if (LOAD(shm_slot(k->seg, w)->pushing) != 0)
            broken(k,
                   "worker slot %d has a push in flight in a quiet "
                   "segment",
                   w);
    if (LOAD(d->holds) < k->holds || LOAD(d->holds_over) < k->holds_over)
        broken(k,
               "%llu holds (%llu past the table) but the horizon counts "
               "%u (%u)",
               (unsigned long long)k->holds, (unsigned long long)k->holds_over,
               LOAD(d->holds), LOAD(d->holds_over));
}

/* ---- the whole ---------------------------------------------------------- */

/* shm_check - see check.h. */
int64_t
shm_check(struct shm_seg *seg, unsigned flags, struct shm_check_report *r)
{
    struct shm_dir *d = shm_dir_of(seg);
    struct check k = {.seg = seg, .r = r, .quiet = (flags & SHM_CHECK_QUIET)};
    size_t pbytes = (size_t)d->max_parts / 8 + 1,
           qbytes = (size_t)d->max_queues / 8 + 1;
    char why[160];

    memset(r, 0, sizeof(*r));
    k.cap = check_arena(seg)->cap;
    k.workers = shm_params_of(seg)->workers;
    size_t cbytes = (size_t)k.cap / 8 + 1;
    uint8_t *qfree = calloc(1, qbytes), *pfree = calloc(1, pbytes),
            *listed = calloc(1, pbytes), *heads = calloc(1, cbytes),
            *pooled = calloc(1, cbytes);
    k.reached = calloc(1, cbytes);
    if (!qfree || !pfree || !listed || !heads || !pooled || !k.reached) {
        free(qfree), free(pfree), free(listed), free(heads), free(pooled);
        free(k.reached);
        return -ENOMEM;
    }
    check_dir(&k, qfree, pfree, listed);
    for (uint32_t i = 0; i < atomic_load(&d->q_bump); i++)
        check_queue(&k, i);
    check_horizon(&k);
    check_arena_runs(&k, heads, pooled);
    if (shm_due_check(seg, why, sizeof(why)) != 0)
        broken(&k, "%s", why);
    if (seg->catalog != NULL)
        check_catalog(&k);
    free(qfree), free(pfree), free(listed), free(heads), free(pooled);
    free(k.reached);
    return (int64_t)r->problems;
}

/* The fd of pid's mayfly segment, opened through /proc; -errno. */
static int
check_open_segment(pid_t pid)
{
    char dir[64], path[64 + 256], link[128];
    struct dirent *e;
    int fd = -ENOENT;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return -errno;
    while (fd < 0 && (e = readdir(dp)) != NULL) {
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        if (strncmp(link, "/memfd:mayfly ", 14) == 0 ||
            strcmp(link, "/memfd:mayfly") == 0)
            fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd == -1)
            fd = -errno;
    }
    closedir(dp);
    return fd;
}

/* shm_check_attach - see check.h. */
int
shm_check_attach(pid_t pid, struct shm_seg *seg)
{
    struct stat st;
    int fd = check_open_segment(pid);

    memset(seg, 0, sizeof(*seg));
    if (fd < 0)
        return fd;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(struct shm_header)) {
        close(fd);
        return -EINVAL;
    }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return -errno;
    seg->base = base;
    seg->size = (size_t)st.st_size;
    seg->hdr = base;
    seg->memfd = -1;
    if (seg->hdr->magic != SHM_MAGIC || seg->hdr->version != SHM_VERSION ||
        seg->hdr->size > seg->size) {
        shm_check_detach(seg);
        return -EINVAL;
    }
    struct shm_arena *a = check_arena(seg);
    seg->cells = (unsigned char *)a + a->cells_off;
    return 0;
}

/* shm_check_detach - see check.h. */
void
shm_check_detach(struct shm_seg *seg)
{
    if (seg->base != NULL)
        munmap(seg->base, seg->size);
    memset(seg, 0, sizeof(*seg));
}
