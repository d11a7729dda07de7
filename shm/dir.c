/*
 * dir.c - the queue and partition tables and their name index.
 *
 * Locking: dir->lock (robust) for the index, free lists, bump indexes and
 * the per-queue partition lists; only the arena's and the due heap's locks
 * (both leaves) are taken under it.  A dead holder's state is rebuilt from the records by
 * dir_repair(): the records (alive flag, names, queue links) are the truth,
 * the index and lists are derived.  Errors: 0 or -errno.
 */
#include "shm/dir.h"

#include <errno.h>
#include <string.h>

#include <xxhash.h>

#include "shm/arena.h"
#include "shm/due.h"
#include "shm/lock.h"
#include "shm/presence.h"
#include "shm/region.h"
#include "shm/tenants.h"

#define DIR_ALIGN(x) (((x) + 63) & ~(size_t)63)

/* Table capacities a segment of params p gets. */
static void
dir_sizes(const struct shm_params *p, uint32_t *maxq, uint32_t *maxp,
          uint32_t *slots)
{
    uint64_t n = p->max_bytes / 512;

    if (n < 1024)
        n = 1024;
    if (n > (1u << 24))
        n = 1u << 24;
    *maxq = (uint32_t)n;
    *maxp = (uint32_t)n;
    uint64_t s = 1;
    while (s < 2 * (n + n))
        s <<= 1;
    *slots = (uint32_t)s;
}

/* shm_dir_region_size - bytes the DIR region needs for params p. */
size_t
shm_dir_region_size(const struct shm_params *p)
{
    uint32_t mq, mp, s;

    dir_sizes(p, &mq, &mp, &s);
    return DIR_ALIGN(sizeof(struct shm_dir)) +
           DIR_ALIGN((size_t)mq * sizeof(struct shm_queue)) +
           DIR_ALIGN((size_t)mp * sizeof(struct shm_part)) +
           DIR_ALIGN((size_t)s * sizeof(struct shm_dir_slot)) +
           DIR_ALIGN(((size_t)mq + mp) * p->workers * sizeof(uint16_t)) +
           shm_due_size(mq + mp);
}

/* shm_dir_region_init - set up the header of a zeroed DIR region. */
int
shm_dir_region_init(struct shm_seg *seg, const struct shm_params *p)
{
    struct shm_dir *d = shm_region(seg, SHM_REGION_DIR);
    uint32_t mq, mp, s;

    dir_sizes(p, &mq, &mp, &s);
    d->max_queues = mq;
    d->max_parts = mp;
    d->index_slots = s;
    d->queues_off = DIR_ALIGN(sizeof(struct shm_dir));
    d->parts_off =
        d->queues_off + DIR_ALIGN((size_t)mq * sizeof(struct shm_queue));
    d->index_off =
        d->parts_off + DIR_ALIGN((size_t)mp * sizeof(struct shm_part));
    d->parked_off =
        d->index_off + DIR_ALIGN((size_t)s * sizeof(struct shm_dir_slot));
    d->parked_cols = p->workers;
    d->due_off = d->parked_off +
                 DIR_ALIGN(((size_t)mq + mp) * p->workers * sizeof(uint16_t));
    int rc = shm_due_init((unsigned char *)d + d->due_off, mq + mp);
    if (rc != 0)
        return rc;
    atomic_store(&d->next_seq, 1);
    rc = shm_lock_init(&d->lock);
    if (rc != 0)
        return rc;
    d->magic = SHM_DIR_MAGIC;
    return 0;
}

/* shm_dir_parked - see dir.h. */
_Atomic uint16_t *
shm_dir_parked(struct shm_seg *seg, int part, uint32_t idx)
{
    struct shm_dir *d = shm_region(seg, SHM_REGION_DIR);
    size_t row = (part ? (size_t)d->max_queues : 0) + idx;

    return (_Atomic uint16_t *)((unsigned char *)d + d->parked_off) +
           row * d->parked_cols;
}

/* shm_dir_parked_sum - see dir.h. */
uint64_t
shm_dir_parked_sum(struct shm_seg *seg, int part, uint32_t idx)
{
    _Atomic uint16_t *row = shm_dir_parked(seg, part, idx);
    uint32_t cols = shm_dir_of(seg)->parked_cols;
    uint64_t n = 0;

    for (uint32_t w = 0; w < cols; w++)
        n += atomic_load_explicit(&row[w], memory_order_relaxed);
    return n;
}

/* parked_zero - a record starts with no parked pops counted. */
static void
parked_zero(struct shm_seg *seg, int part, uint32_t idx)
{
    _Atomic uint16_t *row = shm_dir_parked(seg, part, idx);

    for (uint32_t w = 0; w < shm_dir_of(seg)->parked_cols; w++)
        atomic_store(&row[w], 0);
}

/* Queue record idx of the DIR region at d. */
static inline struct shm_queue *
dir_queue_at(struct shm_dir *d, uint32_t idx)
{
    return (struct shm_queue *)((unsigned char *)d + d->queues_off) + idx;
}

/* Partition record idx of the DIR region at d. */
static inline struct shm_part *
dir_part_at(struct shm_dir *d, uint32_t idx)
{
    return (struct shm_part *)((unsigned char *)d + d->parts_off) + idx;
}

/* The index slots. */
static struct shm_dir_slot *
dir_index(struct shm_dir *d)
{
    return (struct shm_dir_slot *)((unsigned char *)d + d->index_off);
}

/* shm_dir_name_hash - XXH3 of the name bytes under seed. */
uint64_t
shm_dir_name_hash(struct shm_name name, uint64_t seed)
{
    return XXH3_64bits_withSeed(name.ptr, name.len, seed);
}

/*
 * The queue and partition tables work alike: a record is taken from its
 * table's free list, else from the bump index; it is indexed by name; it
 * goes back on the free list when freed, or when a repair finds it dead.
 * One piece of code serves both, with kind (0 for a queue, SHM_DIR_PART_BIT
 * for a partition, as in an index slot) picking the table.  A record's
 * fields are reached by DIR_REC, a conditional on kind and the record's
 * address, no call: in the lookup loop (every push and pop runs it) kind
 * costs a well-predicted branch.
 */

/* A table's free list (index + 1, or 0), bump index and capacity. */
struct dir_table {
    uint32_t *free;
    _Atomic uint32_t *bump;
    uint32_t max;
};

/* The table of kind in the dir header. */
static inline struct dir_table
dir_table(struct shm_dir *d, uint32_t kind)
{
    if (kind)
        return (struct dir_table){&d->p_free, &d->p_bump, d->max_parts};
    return (struct dir_table){&d->q_free, &d->q_bump, d->max_queues};
}

/* Field f of record idx of kind, as an lvalue: SHM_DIR_RECORD_HEAD's fields
 * and next_free have the same name and type in both kinds' structs. */
#define DIR_REC(d, kind, idx, f)                                               \
    (*((kind) ? &dir_part_at(d, idx)->f : &dir_queue_at(d, idx)->f))

/* Whether queue record q.idx is alive and still of generation q.gen. */
static inline int
dir_queue_is(struct shm_dir *d, struct shm_ref q)
{
    struct shm_queue *r = dir_queue_at(d, q.idx);

    return atomic_load(&r->alive) && r->gen == q.gen;
}

/* Put partition idx at the head of queue q's list (dir lock held). */
static void
dir_list_part(struct shm_dir *d, struct shm_queue *q, uint32_t idx)
{
    dir_part_at(d, idx)->next_part = q->parts;
    q->parts = idx + 1;
    q->nparts++;
}

/* The hash an index slot of record ref (kind | idx) holds. */
static uint64_t
dir_ref_hash(struct shm_dir *d, uint32_t ref)
{
    return DIR_REC(d, ref & SHM_DIR_PART_BIT, ref & ~SHM_DIR_PART_BIT,
                   name_hash);
}

/* Insert record ref with hash h into the index (dir lock held). */
static void
dir_index_insert(struct shm_dir *d, uint32_t ref, uint64_t h)
{
    struct shm_dir_slot *ix = dir_index(d);
    uint32_t mask = d->index_slots - 1;

    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (ix[i].ref == 0) {
            ix[i].hash = (uint32_t)(h >> 32);
            ix[i].ref = ref + 1;
            return;
        }
    }
}

/* Remove record ref from the index by backward shift (dir lock held). */
static void
dir_index_remove(struct shm_dir *d, uint32_t ref, uint64_t h)
{
    struct shm_dir_slot *ix = dir_index(d);
    uint32_t mask = d->index_slots - 1;
    uint32_t i = (uint32_t)h & mask;

    while (ix[i].ref != ref + 1) {
        if (ix[i].ref == 0)
            return;
        i = (i + 1) & mask;
    }
    for (uint32_t j = (i + 1) & mask; ix[j].ref != 0; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)dir_ref_hash(d, ix[j].ref - 1) & mask;
        /* j's entry may move to i if its home is not in (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            ix[i] = ix[j];
            i = j;
        }
    }
    ix[i].ref = 0;
    ix[i].hash = 0;
}

/* Push record idx of kind on its table's free list (dir lock held). */
static inline void
dir_free_push(struct shm_dir *d, uint32_t kind, uint32_t idx)
{
    struct dir_table t = dir_table(d, kind);

    DIR_REC(d, kind, idx, next_free) = *t.free;
    *t.free = idx + 1;
}

/* Repair record idx of kind: a dead one goes on its free list, a live one
 * is indexed and its name re-tagged LINKED.  Returns whether it is alive. */
static inline int
dir_repair_record(struct shm_seg *seg, struct shm_dir *d, uint32_t kind,
                  uint32_t idx)
{
    if (!atomic_load(&DIR_REC(d, kind, idx, alive))) {
        dir_free_push(d, kind, idx);
        return 0;
    }
    shm_arena_link(seg, DIR_REC(d, kind, idx, name_ref));
    dir_index_insert(d, idx | kind, DIR_REC(d, kind, idx, name_hash));
    return 1;
}

/* Repair after a dead dir-lock holder: rebuild index, free lists and the
 * queues' partition lists from the records; re-tag live names LINKED. */
static void
dir_repair(struct shm_seg *seg, void *arg)
{
    struct shm_dir *d = arg;
    uint32_t qb = atomic_load(&d->q_bump), pb = atomic_load(&d->p_bump);

    memset(dir_index(d), 0,
           (size_t)d->index_slots * sizeof(struct shm_dir_slot));
    d->q_free = 0;
    d->p_free = 0;
    d->nqueues = 0;
    for (uint32_t i = qb; i-- > 0;) {
        struct shm_queue *q = shm_dir_queue(seg, i);
        q->parts = 0;
        q->nparts = 0;
        if (dir_repair_record(seg, d, 0, i))
            d->nqueues++;
    }
    for (uint32_t i = pb; i-- > 0;) {
        struct shm_part *p = shm_dir_part(seg, i);
        struct shm_ref q = {p->queue, p->queue_gen};
        if (dir_repair_record(seg, d, SHM_DIR_PART_BIT, i) &&
            dir_queue_is(d, q))
            dir_list_part(d, dir_queue_at(d, q.idx), i);
    }
}

/* shm_dir_lock - take the dir lock. */
int
shm_dir_lock(struct shm_seg *seg)
{
    struct shm_dir *d = shm_dir_of(seg);

    return shm_lock(seg, &d->lock, dir_repair, d);
}

/* shm_dir_unlock - release the dir lock. */
void
shm_dir_unlock(struct shm_seg *seg)
{
    shm_unlock(&shm_dir_of(seg)->lock);
}

/* Whether partition record idx belongs to queue q. */
static inline int
dir_part_of(struct shm_dir *d, uint32_t idx, struct shm_ref q)
{
    struct shm_part *p = dir_part_at(d, idx);

    return p->queue == q.idx && p->queue_gen == q.gen;
}

/* Find a live record of kind named name with hash h; for a partition, of
 * queue q.  Returns idx + 1 or 0.  Dir lock held. */
static inline uint32_t
dir_lookup(struct shm_seg *seg, uint32_t kind, struct shm_ref q,
           struct shm_name name, uint64_t h)
{
    struct shm_dir *d = shm_dir_of(seg);
    struct shm_dir_slot *ix = dir_index(d);
    uint32_t mask = d->index_slots - 1;

    for (uint32_t i = (uint32_t)h & mask; ix[i].ref != 0; i = (i + 1) & mask) {
        uint32_t ref = ix[i].ref - 1;
        if (ix[i].hash != (uint32_t)(h >> 32) ||
            (ref & SHM_DIR_PART_BIT) != kind)
            continue;
        uint32_t idx = ref & ~SHM_DIR_PART_BIT;
        if (atomic_load(&DIR_REC(d, kind, idx, alive)) &&
            DIR_REC(d, kind, idx, name_hash) == h &&
            (!kind || dir_part_of(d, idx, q)) &&
            DIR_REC(d, kind, idx, name_len) == name.len &&
            shm_arena_equal(seg, DIR_REC(d, kind, idx, name_ref), name.ptr,
                            name.len))
            return idx + 1;
    }
    return 0;
}

/* Copy name into a fresh INFLIGHT chain. */
static int
dir_name_alloc(struct shm_seg *seg, int w, struct shm_name name, uint32_t *ref)
{
    int rc = shm_arena_alloc(seg, w, shm_cells_for(name.len), ref);

    if (rc == 0)
        shm_arena_write(seg, *ref, 0, name.ptr, name.len);
    return rc;
}

/* Take a record of kind: from the free list, else the bump index;
 * -EOVERFLOW when the table is full.  Dir lock held. */
static inline int
dir_take(struct shm_dir *d, uint32_t kind, uint32_t *idx)
{
    struct dir_table t = dir_table(d, kind);

    if (*t.free != 0) {
        *idx = *t.free - 1;
        *t.free = DIR_REC(d, kind, *idx, next_free);
        return 0;
    }
    uint32_t b = atomic_load(t.bump);
    if (b >= t.max)
        return -EOVERFLOW;
    int rc = shm_lock_init(&DIR_REC(d, kind, b, lock));
    if (rc != 0)
        return rc;
    *idx = b;
    atomic_store(t.bump, b + 1);
    return 0;
}

/* Fill and publish queue record idx of tenant slot tenant (dir lock
 * held). */
static void
dir_init_queue(struct shm_seg *seg, uint32_t idx, uint64_t h, uint32_t nref,
               struct shm_name name, uint32_t tenant, uint64_t now)
{
    struct shm_queue *q = shm_dir_queue(seg, idx);

    q->gen++;
    q->name_hash = h;
    q->name_ref = nref;
    q->name_len = (uint32_t)name.len;
    q->parts = 0;
    q->nparts = 0;
    q->groups = 0;
    atomic_store(&q->ngroups, 0);
    atomic_store(&q->waiters, 0);
    atomic_store(&q->last_active, now);
    atomic_store(&q->any_popped, 0);
    atomic_store(&q->rr, 0);
    q->declared = 0;
    q->tenant = (uint16_t)tenant;
    for (int i = 0; i < 3; i++)
        atomic_store(&q->drops[i], 0);
    q->opts = shm_params_of(seg)->defaults;
    shm_presence_events_opts(name, &q->opts); /* a channel's events */
    q->intent = 0;
    parked_zero(seg, 0, idx);
    atomic_store_explicit(&q->alive, 1, memory_order_release);
}

/* Count new queue idx, and first look at it once it could be idle (dir
 * lock held; after it is indexed). */
static void
dir_queue_created(struct shm_seg *seg, struct shm_dir *d, uint32_t idx,
                  uint64_t now)
{
    d->nqueues++;
    shm_due_queue(seg, idx,
                  now + (uint64_t)shm_params_of(seg)->implicit_idle_s * 1000);
}

/* Fill and publish partition record idx of queue q (dir lock held). */
static void
dir_init_part(struct shm_seg *seg, uint32_t idx, struct shm_ref qr, uint64_t h,
              uint32_t nref, uint32_t len, uint64_t now)
{
    struct shm_part *p = shm_dir_part(seg, idx);

    p->gen++;
    p->name_hash = h;
    p->name_ref = nref;
    p->name_len = len;
    p->queue = qr.idx;
    p->queue_gen = qr.gen;
    p->head = p->tail = p->groups = p->ngs = p->intent = p->wipe = 0;
    atomic_store(&p->hold_seq, 0);
    p->hold_until = 0;
    atomic_store(&p->gone_seq, 0);
    atomic_store(&p->popped, 0);
    p->adopt_inc = p->adopt_lo = p->adopt_hi = p->adopt_base = 0;
    p->adopt_cut_at = p->adopt_cut_len = 0;
    atomic_store(&p->last_seq, 0);
    atomic_store(&p->count, 0);
    atomic_store(&p->cost, 0);
    atomic_store(&p->waiters, 0);
    atomic_store(&p->leased, 0);
    atomic_store(&p->due, UINT64_MAX);
    atomic_store(&p->oldest_ms, 0);
    p->last_active = now;
    parked_zero(seg, 1, idx);
    atomic_store_explicit(&p->alive, 1, memory_order_release);
    dir_list_part(shm_dir_of(seg), shm_dir_queue(seg, qr.idx), idx);
}

/*
 * Look the record of kind named name up (a partition: of queue q, -ESTALE
 * when q is gone); with create, make it when missing.  The name is copied
 * into the arena with the dir lock dropped, then looked up again.
 */
static int
dir_find(struct shm_seg *seg, int w, uint32_t kind, struct shm_ref q,
         struct shm_name name, int create, uint64_t now, struct shm_ref *out)
{
    struct shm_dir *d = shm_dir_of(seg);
    uint64_t h =
        shm_dir_name_hash(name, kind ? ((uint64_t)q.idx << 32) | q.gen : 0);
    uint32_t nref = 0, idx;
    int rc;

    for (;;) {
        /* dir lock: index lookup, and insert on the second pass. */
        if ((rc = shm_dir_lock(seg)) != 0)
            break;
        if (kind && !dir_queue_is(d, q)) {
            shm_dir_unlock(seg);
            rc = -ESTALE;
            break;
        }
        uint32_t f = dir_lookup(seg, kind, q, name, h);
        if (f != 0) {
            out->idx = f - 1;
            out->gen = DIR_REC(d, kind, f - 1, gen);
            shm_dir_unlock(seg);
            rc = 0;
            break;
        }
        if (!create) {
            shm_dir_unlock(seg);
            rc = -ENOENT;
            break;
        }
        if (nref == 0) {
            shm_dir_unlock(seg);
            if ((rc = dir_name_alloc(seg, w, name, &nref)) != 0)
                return rc;
            continue;
        }
        if ((rc = dir_take(d, kind, &idx)) == 0) {
            if (kind)
                dir_init_part(seg, idx, q, h, nref, (uint32_t)name.len, now);
            else
                dir_init_queue(
                    seg, idx, h, nref, name,
                    shm_tenants_of_queue(seg->tenants, name.ptr, name.len),
                    now);
            dir_index_insert(d, idx | kind, h);
            shm_arena_link(seg, nref);
            if (!kind)
                dir_queue_created(seg, d, idx, now);
            out->idx = idx;
            out->gen = DIR_REC(d, kind, idx, gen);
            nref = 0;
        }
        shm_dir_unlock(seg);
        break;
    }
    if (nref != 0)
        shm_arena_free(seg, w, nref);
    return rc;
}

/* shm_dir_find_queue - see dir.h. */
int
shm_dir_find_queue(struct shm_seg *seg, int w, struct shm_name name, int create,
                   uint64_t now, struct shm_ref *out)
{
    struct shm_ref none = {0, 0};

    return dir_find(seg, w, 0, none, name, create, now, out);
}

/* shm_dir_find_part - see dir.h. */
int
shm_dir_find_part(struct shm_seg *seg, int w, struct shm_ref q,
                  struct shm_name name, int create, uint64_t now,
                  struct shm_ref *out)
{
    return dir_find(seg, w, SHM_DIR_PART_BIT, q, name, create, now, out);
}

/* Unindex record idx of kind, detach its name and put it on its free list;
 * returns the name's chain, for the caller to free.  Dir lock held. */
static inline uint32_t
dir_release(struct shm_dir *d, uint32_t kind, uint32_t idx)
{
    uint32_t nref = DIR_REC(d, kind, idx, name_ref);

    dir_index_remove(d, idx | kind, DIR_REC(d, kind, idx, name_hash));
    DIR_REC(d, kind, idx, name_ref) = 0;
    dir_free_push(d, kind, idx);
    return nref;
}

/* shm_dir_free_part - see dir.h.  The partition was marked dead (alive 0,
 * gen bumped) under its own lock by the caller. */
void
shm_dir_free_part(struct shm_seg *seg, int w, uint32_t idx)
{
    struct shm_dir *d = shm_dir_of(seg);
    struct shm_part *p = shm_dir_part(seg, idx);

    /* dir lock: unindex, unlist, free-list push; the name is a leaf free. */
    if (shm_dir_lock(seg) != 0)
        return;
    struct shm_queue *q = shm_dir_queue(seg, p->queue);
    uint32_t *link = &q->parts;
    while (*link != 0 && *link != idx + 1)
        link = &shm_dir_part(seg, *link - 1)->next_part;
    if (atomic_load(&p->alive) || *link != idx + 1) {
        shm_dir_unlock(seg); /* alive, or freed already */
        return;
    }
    *link = p->next_part;
    q->nparts--;
    uint32_t nref = dir_release(d, SHM_DIR_PART_BIT, idx);
    if (nref != 0)
        shm_arena_free(seg, w, nref);
    shm_dir_unlock(seg);
}

/* shm_dir_free_queue - see dir.h.  Queue lock held by the caller. */
int
shm_dir_free_queue(struct shm_seg *seg, int w, uint32_t idx)
{
    struct shm_dir *d = shm_dir_of(seg);
    struct shm_queue *q = shm_dir_queue(seg, idx);
    int rc;

    /* dir lock: unindex, free-list push; the name is a leaf free. */
    if ((rc = shm_dir_lock(seg)) != 0)
        return rc;
    if (q->parts != 0) {
        shm_dir_unlock(seg);
        return -EBUSY;
    }
    atomic_store(&q->alive, 0);
    q->gen++;
    uint32_t nref = dir_release(d, 0, idx);
    d->nqueues--;
    if (nref != 0)
        shm_arena_free(seg, w, nref);
    shm_dir_unlock(seg);
    return 0;
}

/* shm_dir_queue_parts - see dir.h. */
int64_t
shm_dir_queue_parts(struct shm_seg *seg, struct shm_ref q, struct shm_ref *out,
                    uint32_t n)
{
    uint32_t k = 0;
    int rc;

    /* dir lock: walk the queue's partition list. */
    if ((rc = shm_dir_lock(seg)) != 0)
        return rc;
    if (dir_queue_is(shm_dir_of(seg), q)) {
        for (uint32_t i = shm_dir_queue(seg, q.idx)->parts; i != 0;
             i = shm_dir_part(seg, i - 1)->next_part, k++) {
            if (k < n) {
                out[k].idx = i - 1;
                out[k].gen = shm_dir_part(seg, i - 1)->gen;
            }
        }
    }
    shm_dir_unlock(seg);
    return k;
}
