/*
 * presence.c - the presence table (presence.h).
 *
 * The mapping, in order (each part 64-byte aligned):
 *   header     struct shm_presence (below)
 *   cbucket[]  u32 heads of the channels' hash chains (cbuckets of them)
 *   channel[]  struct pres_channel, 1-based (index 0 is none)
 *   mbucket[]  u32 heads of the members' hash chains (mbuckets)
 *   record[]   struct pres_member + max_data bytes, rec_bytes each,
 *              1-based
 * Records and channels are handed out from a free list, else from the
 * high-water mark, so a table never used costs its header alone.
 */
#include "shm/presence.h"

#include <sys/mman.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "shm/arena.h"
#include "shm/lock.h"
#include "shm/region.h"
#include "shm/segment.h"
#include "shm/tenants.h"

#define RELAXED    memory_order_relaxed
#define FREE       0u
#define LIVE       1u
#define ALIGN64(x) (((x) + 63) & ~(uint64_t)63)

/*
 * struct pres_member - one member (rec_bytes: 136 + 512 + max_data,
 * rounded up to 64).
 *   off  size  field        protected by
 *     0     4  state        the lock; FREE or LIVE (the truth a repair
 *                             rebuilds from; published last, withdrawn
 *                             first)
 *     4     4  chan         lock: its channel's index
 *     8     8  prev, next   lock: the channel's list (derived)
 *    16     4  hnext        lock: its hash chain, or the free list (derived)
 *    20     4  key_len      lock
 *    24     4  data_len     lock (0: none)
 *    28     4  pad
 *    32     8  hash         lock: XXH3 of the key seeded with the channel's
 *    40     8  since        lock: wall clock ms of the enter
 *    48     8  version      lock: bumped on each change of data
 *    56     8  ttl_until    lock: monotonic ms, 0: no ttl
 *    64     8  grace_until  lock: monotonic ms, 0: no grace running
 *    72    64  conns[8]     lock: (1 + node table index, count); node 0
 *                             free
 *   136   512  key          lock
 *   648     -  data         lock (max_data bytes)
 */
struct pres_member {
    _Atomic uint32_t state;
    uint32_t chan;
    uint32_t prev, next;
    uint32_t hnext;
    uint32_t key_len;
    uint32_t data_len;
    uint32_t pad;
    uint64_t hash;
    uint64_t since;
    uint64_t version;
    uint64_t ttl_until;
    uint64_t grace_until;
    struct {
        uint32_t node;
        uint32_t n;
    } conns[SHM_PRES_NODES];
    char key[SHM_PRES_MEMBER_MAX];
    char data[];
};
_Static_assert(offsetof(struct pres_member, conns) == 72, "pres_member");
_Static_assert(offsetof(struct pres_member, key) == 136, "pres_member");
_Static_assert(sizeof(struct pres_member) == 648, "pres_member layout");

/*
 * struct pres_channel - one channel (544 bytes).
 *   off  size  field       protected by
 *     0     4  state       lock: FREE or LIVE
 *     4     4  count       lock: its members (derived)
 *     8     4  head        lock: its first member (derived)
 *    12     4  hnext       lock: its hash chain, or the free list (derived)
 *    16     8  hash        lock: XXH3 of the name
 *    24     4  name_len    lock
 *    28     4  copy_grace  lock: 0, or an older owner's copy not moved yet
 *                            (shm_presence_mark_copy): the grace (ms) its
 *                            connections get once it is written again
 *    32   512  name        lock: the internal name (tenant and channel)
 */
struct pres_channel {
    _Atomic uint32_t state;
    uint32_t count;
    uint32_t head;
    uint32_t hnext;
    uint64_t hash;
    uint32_t name_len;
    uint32_t copy_grace;
    char name[SHM_NAME_MAX];
};
_Static_assert(sizeof(struct pres_channel) == 544, "pres_channel layout");

/*
 * struct shm_presence - the header.
 *   off  size  field          written by / protected by
 *     0    64  lock           robust, pshared
 *    64    16  p              master at create; immutable
 *    80    16  rec_bytes, mbuckets, cbuckets, pad: immutable
 *    96    32  off_cb, off_ch, off_mb, off_rec: immutable
 *   128     8  map_size       immutable
 *   136    16  rec_hi, chan_hi, rec_free, chan_free: lock (the free
 *                lists are derived; the high-water marks are not)
 *   152     8  members, channels: lock, atomic stores (read lock-free)
 *   160     8  due            lock, atomic store: the earliest deadline
 *                             of a member without connections (0: none)
 *   168    32  events[4]      atomic adds: events by action
 *   200     4  nnodes         lock: node ids taken
 *   204     4  frozen         atomic store (master, once: a drain's
 *                             hand-over), read under the lock: writes
 *                             other than detach refused
 *   208 36864  nodes[512]     lock: connection keys (node/slot), never
 *                             taken back
 * 37072     8  settle_until   atomic store (master: a join's hand-over
 *                             awaited), read under the lock: monotonic
 *                             ms, 0: none
 */
struct shm_presence {
    union {
        pthread_mutex_t lock;
        unsigned char lock_pad[64];
    };
    struct shm_presence_params p;
    uint32_t rec_bytes, mbuckets, cbuckets, pad0;
    uint64_t off_cb, off_ch, off_mb, off_rec;
    uint64_t map_size;
    uint32_t rec_hi, chan_hi, rec_free, chan_free;
    _Atomic uint32_t members, channels;
    _Atomic uint64_t due;
    _Atomic uint64_t events[SHM_PRES_NACTIONS];
    uint32_t nnodes;
    _Atomic uint32_t frozen;
    char nodes[SHM_PRES_NODE_IDS][SHM_PRES_NODE_ID];
    _Atomic uint64_t settle_until;
};
_Static_assert(offsetof(struct shm_presence, p) == 64, "shm_presence");
_Static_assert(offsetof(struct shm_presence, rec_hi) == 136, "shm_presence");
_Static_assert(offsetof(struct shm_presence, due) == 160, "shm_presence");
_Static_assert(offsetof(struct shm_presence, nodes) == 208, "shm_presence");
_Static_assert(offsetof(struct shm_presence, settle_until) == 37072,
               "shm_presence");

static uint32_t *
cbucket(struct shm_presence *p)
{
    return (uint32_t *)((unsigned char *)p + p->off_cb);
}

static uint32_t *
mbucket(struct shm_presence *p)
{
    return (uint32_t *)((unsigned char *)p + p->off_mb);
}

static struct pres_channel *
chan_at(struct shm_presence *p, uint32_t i)
{
    return (struct pres_channel *)((unsigned char *)p + p->off_ch) + (i - 1);
}

static struct pres_member *
rec_at(struct shm_presence *p, uint32_t i)
{
    return (struct pres_member *)((unsigned char *)p + p->off_rec +
                                  (uint64_t)(i - 1) * p->rec_bytes);
}

static uint32_t
pow2_at_least(uint32_t n)
{
    uint32_t b = 64;

    while (b < n && b < (1u << 30))
        b <<= 1;
    return b;
}

/* shm_presence_record_bytes - see presence.h. */
uint64_t
shm_presence_record_bytes(uint32_t max_data)
{
    return ALIGN64(sizeof(struct pres_member) + (uint64_t)max_data);
}

/* layout - fill the sizes and offsets of p's header from pp. */
static void
layout(struct shm_presence *p, const struct shm_presence_params *pp)
{
    uint64_t off = ALIGN64(sizeof(*p));

    p->p = *pp;
    p->rec_bytes = (uint32_t)shm_presence_record_bytes(pp->max_data);
    p->cbuckets = pow2_at_least(pp->channels);
    p->mbuckets = pow2_at_least(pp->records);
    p->off_cb = off;
    off = ALIGN64(off + (uint64_t)p->cbuckets * 4);
    p->off_ch = off;
    off = ALIGN64(off + (uint64_t)pp->channels * sizeof(struct pres_channel));
    p->off_mb = off;
    off = ALIGN64(off + (uint64_t)p->mbuckets * 4);
    p->off_rec = off;
    off += (uint64_t)pp->records * p->rec_bytes;
    p->map_size = ALIGN64(off);
}

/* shm_presence_map_size - see presence.h. */
size_t
shm_presence_map_size(const struct shm_presence_params *pp)
{
    struct shm_presence p;

    layout(&p, pp);
    return (size_t)p.map_size;
}

/* shm_presence_create - see presence.h. */
struct shm_presence *
shm_presence_create(const struct shm_presence_params *pp)
{
    struct shm_presence tmp, *p;

    if (pp->records == 0 || pp->channels == 0 || pp->max_members == 0) {
        errno = EINVAL;
        return NULL;
    }
    layout(&tmp, pp);
    p = mmap(NULL, (size_t)tmp.map_size, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    layout(p, pp);
    if (shm_lock_init(&p->lock) != 0) {
        munmap(p, (size_t)tmp.map_size);
        errno = EINVAL;
        return NULL;
    }
    return p;
}

/* shm_presence_destroy - see presence.h. */
void
shm_presence_destroy(struct shm_presence *p)
{
    if (p != NULL)
        munmap(p, (size_t)p->map_size);
}

/* member_due - when m leaves if nothing changes: 0 while it has a
 * connection (or nothing set). */
static uint64_t
member_due(const struct pres_member *m)
{
    for (int i = 0; i < SHM_PRES_NODES; i++)
        if (m->conns[i].node != 0 && m->conns[i].n > 0)
            return 0;
    return m->ttl_until > m->grace_until ? m->ttl_until : m->grace_until;
}

static uint32_t
member_conns(const struct pres_member *m)
{
    uint32_t n = 0;

    for (int i = 0; i < SHM_PRES_NODES; i++)
        n += m->conns[i].node != 0 ? m->conns[i].n : 0;
    return n;
}

/* due_at - the table's earliest deadline moves to t if that is earlier. */
static void
due_at(struct shm_presence *p, uint64_t t)
{
    uint64_t d = atomic_load_explicit(&p->due, RELAXED);

    if (t != 0 && (d == 0 || t < d))
        atomic_store_explicit(&p->due, t, RELAXED);
}

/* rebuild - the repair: every derived structure again from the states. */
static void
rebuild(struct shm_seg *seg, void *arg)
{
    struct shm_presence *p = arg;
    uint32_t members = 0, channels = 0;
    uint64_t due = 0;

    (void)seg;
    memset(cbucket(p), 0, (size_t)p->cbuckets * 4);
    memset(mbucket(p), 0, (size_t)p->mbuckets * 4);
    p->chan_free = p->rec_free = 0;
    for (uint32_t c = 1; c <= p->chan_hi; c++) {
        struct pres_channel *ch = chan_at(p, c);
        ch->count = 0;
        ch->head = 0;
        if (atomic_load(&ch->state) == LIVE) {
            uint32_t b = (uint32_t)ch->hash & (p->cbuckets - 1);
            ch->hnext = cbucket(p)[b];
            cbucket(p)[b] = c;
        }
    }
    for (uint32_t r = 1; r <= p->rec_hi; r++) {
        struct pres_member *m = rec_at(p, r);
        struct pres_channel *ch;
        if (atomic_load(&m->state) != LIVE || m->chan == 0 ||
            m->chan > p->chan_hi ||
            atomic_load(&(ch = chan_at(p, m->chan))->state) != LIVE ||
            m->key_len == 0 || m->key_len > SHM_PRES_MEMBER_MAX) {
            atomic_store(&m->state, FREE);
            m->hnext = p->rec_free;
            p->rec_free = r;
            continue;
        }
        for (int i = 0; i < SHM_PRES_NODES; i++)
            if (m->conns[i].node > p->nnodes)
                m->conns[i].node = 0;
        if (m->data_len > p->p.max_data)
            m->data_len = 0;
        uint32_t b = (uint32_t)m->hash & (p->mbuckets - 1);
        m->hnext = mbucket(p)[b];
        mbucket(p)[b] = r;
        m->prev = 0;
        m->next = ch->head;
        if (ch->head != 0)
            rec_at(p, ch->head)->prev = r;
        ch->head = r;
        ch->count++;
        members++;
        uint64_t t = member_due(m);
        if (t != 0 && (due == 0 || t < due))
            due = t;
    }
    /* channels no member names are free again (a holder died between
     * making one and linking its first member) */
    memset(cbucket(p), 0, (size_t)p->cbuckets * 4);
    for (uint32_t c = 1; c <= p->chan_hi; c++) {
        struct pres_channel *ch = chan_at(p, c);
        if (atomic_load(&ch->state) == LIVE && ch->count > 0) {
            uint32_t b = (uint32_t)ch->hash & (p->cbuckets - 1);
            ch->hnext = cbucket(p)[b];
            cbucket(p)[b] = c;
            channels++;
        } else {
            atomic_store(&ch->state, FREE);
            ch->hnext = p->chan_free;
            p->chan_free = c;
        }
    }
    atomic_store(&p->members, members);
    atomic_store(&p->channels, channels);
    atomic_store(&p->due, due);
}

static int
lock(struct shm_seg *seg, struct shm_presence *p)
{
    return shm_lock(seg, &p->lock, rebuild, p);
}

/* lock_open - lock for a write the freeze refuses: -ESHUTDOWN (not
 * locked) once the table is frozen.  Read under the lock, so a write
 * either lands before the hand-over's export or is refused. */
static int
lock_open(struct shm_seg *seg, struct shm_presence *p)
{
    int rc = lock(seg, p);

    if (rc == 0 && atomic_load(&p->frozen)) {
        shm_unlock(&p->lock);
        rc = -ESHUTDOWN;
    }
    return rc;
}

static uint64_t
chan_hash(struct shm_name c)
{
    return XXH3_64bits(c.ptr, c.len);
}

static uint64_t
member_hash(uint64_t ch, struct shm_name m)
{
    return XXH3_64bits_withSeed(m.ptr, m.len, ch);
}

/* find_chan - the channel's index, or 0. */
static uint32_t
find_chan(struct shm_presence *p, struct shm_name c, uint64_t h)
{
    for (uint32_t i = cbucket(p)[(uint32_t)h & (p->cbuckets - 1)]; i != 0;
         i = chan_at(p, i)->hnext) {
        struct pres_channel *ch = chan_at(p, i);
        if (ch->hash == h && ch->name_len == c.len &&
            memcmp(ch->name, c.ptr, c.len) == 0)
            return i;
    }
    return 0;
}

/* find_member - the member's record index in channel ci, or 0. */
static uint32_t
find_member(struct shm_presence *p, uint32_t ci, struct shm_name m, uint64_t h)
{
    for (uint32_t i = mbucket(p)[(uint32_t)h & (p->mbuckets - 1)]; i != 0;
         i = rec_at(p, i)->hnext) {
        struct pres_member *r = rec_at(p, i);
        if (r->hash == h && r->chan == ci && r->key_len == m.len &&
            memcmp(r->key, m.ptr, m.len) == 0)
            return i;
    }
    return 0;
}

/* room - whether extra bytes more still fit the node's memory, as
 * shm_cap_room says for a push (the last 1/32 kept). */
static int
room(struct shm_seg *seg, struct shm_presence *p, uint64_t extra)
{
    uint64_t cap = shm_params_of(seg)->max_bytes;

    return shm_arena_used_bytes(seg) + shm_presence_bytes(p) + extra +
               cap / 32 <=
           cap;
}

/* chan_get - channel c's index, made if need be (0: the table or the
 * node's memory is full). */
static uint32_t
chan_get(struct shm_seg *seg, struct shm_presence *p, struct shm_name c,
         uint64_t h)
{
    uint32_t i = find_chan(p, c, h), b;
    struct pres_channel *ch;

    if (i != 0)
        return i;
    if (!room(seg, p, sizeof(struct pres_channel) + p->rec_bytes))
        return 0;
    if (p->chan_free != 0) {
        i = p->chan_free;
        p->chan_free = chan_at(p, i)->hnext;
    } else if (p->chan_hi < p->p.channels) {
        i = ++p->chan_hi;
    } else {
        return 0;
    }
    ch = chan_at(p, i);
    ch->count = 0;
    ch->head = 0;
    ch->hash = h;
    ch->copy_grace = 0;
    ch->name_len = (uint32_t)c.len;
    memcpy(ch->name, c.ptr, c.len);
    b = (uint32_t)h & (p->cbuckets - 1);
    ch->hnext = cbucket(p)[b];
    atomic_store(&ch->state, LIVE);
    cbucket(p)[b] = i;
    atomic_store(&p->channels, atomic_load(&p->channels) + 1);
    return i;
}

/* chan_put - channel i lost its last member: free it. */
static void
chan_put(struct shm_presence *p, uint32_t i)
{
    struct pres_channel *ch = chan_at(p, i);
    uint32_t *at = &cbucket(p)[(uint32_t)ch->hash & (p->cbuckets - 1)];

    if (ch->count != 0)
        return;
    atomic_store(&ch->state, FREE);
    while (*at != 0 && *at != i)
        at = &chan_at(p, *at)->hnext;
    if (*at == i)
        *at = ch->hnext;
    ch->hnext = p->chan_free;
    p->chan_free = i;
    atomic_store(&p->channels, atomic_load(&p->channels) - 1);
}

/* member_new - a record for member m of channel ci, published (0: the
 * table is full). */
static uint32_t
member_new(struct shm_presence *p, uint32_t ci, struct shm_name m, uint64_t h,
           uint64_t now_wall)
{
    struct pres_channel *ch = chan_at(p, ci);
    struct pres_member *r;
    uint32_t i, b;

    if (p->rec_free != 0) {
        i = p->rec_free;
        p->rec_free = rec_at(p, i)->hnext;
    } else if (p->rec_hi < p->p.records) {
        i = ++p->rec_hi;
    } else {
        return 0;
    }
    r = rec_at(p, i);
    memset(r, 0, sizeof(*r));
    r->chan = ci;
    r->key_len = (uint32_t)m.len;
    memcpy(r->key, m.ptr, m.len);
    r->hash = h;
    r->since = now_wall;
    b = (uint32_t)h & (p->mbuckets - 1);
    r->hnext = mbucket(p)[b];
    r->next = ch->head;
    atomic_store(&r->state, LIVE);
    mbucket(p)[b] = i;
    if (ch->head != 0)
        rec_at(p, ch->head)->prev = i;
    ch->head = i;
    ch->count++;
    atomic_store(&p->members, atomic_load(&p->members) + 1);
    return i;
}

/* member_free - record i leaves: withdrawn, unlinked, its channel freed
 * when it was the last. */
static void
member_free(struct shm_presence *p, uint32_t i)
{
    struct pres_member *r = rec_at(p, i);
    struct pres_channel *ch = chan_at(p, r->chan);
    uint32_t *at = &mbucket(p)[(uint32_t)r->hash & (p->mbuckets - 1)];

    atomic_store(&r->state, FREE);
    while (*at != 0 && *at != i)
        at = &rec_at(p, *at)->hnext;
    if (*at == i)
        *at = r->hnext;
    if (r->prev != 0)
        rec_at(p, r->prev)->next = r->next;
    else
        ch->head = r->next;
    if (r->next != 0)
        rec_at(p, r->next)->prev = r->prev;
    ch->count--;
    r->hnext = p->rec_free;
    p->rec_free = i;
    atomic_store(&p->members, atomic_load(&p->members) - 1);
    chan_put(p, r->chan);
}

/*
 * distrust - channel ci is this node's again while it was an older
 * owner's copy not moved (copy_grace set): its connections are as old as
 * the move, so each goes, and a member that had one starts the copy's
 * grace; ttls stay.  Under the lock, before the write that found it
 * (shm_presence_mark_copy says why that is right).  The grace is set
 * before the counts are cleared: a holder killed between the two leaves
 * a member with a deadline, never one with neither.
 */
static void
distrust(struct shm_presence *p, uint32_t ci, uint64_t now)
{
    struct pres_channel *ch = ci != 0 ? chan_at(p, ci) : NULL;

    if (ch == NULL || ch->copy_grace == 0)
        return;
    for (uint32_t i = ch->head; i != 0; i = rec_at(p, i)->next) {
        struct pres_member *r = rec_at(p, i);
        if (member_conns(r) == 0)
            continue;
        r->grace_until = now + ch->copy_grace;
        memset(r->conns, 0, sizeof(r->conns));
        due_at(p, member_due(r));
    }
    ch->copy_grace = 0;
}

/* distrust_name - distrust channel c, found by its name. */
static void
distrust_name(struct shm_presence *p, struct shm_name c, uint64_t now)
{
    distrust(p, find_chan(p, c, chan_hash(c)), now);
}

/* set_data - data (NULL: keep) into r: 1 when it changed. */
static int
set_data(struct pres_member *r, const struct shm_name *data)
{
    if (data == NULL || (data->len == r->data_len &&
                         memcmp(r->data, data->ptr, data->len) == 0))
        return 0;
    memcpy(r->data, data->ptr, data->len);
    r->data_len = (uint32_t)data->len;
    r->version++;
    return 1;
}

/* node_index - 1 + node's index in the table, taken if new; 0: full. */
static uint32_t
node_index(struct shm_presence *p, const char *node)
{
    size_t len = strlen(node);

    if (len >= SHM_PRES_NODE_ID)
        return 0;
    for (uint32_t i = 0; i < p->nnodes; i++)
        if (strcmp(p->nodes[i], node) == 0)
            return i + 1;
    if (p->nnodes >= SHM_PRES_NODE_IDS)
        return 0;
    memcpy(p->nodes[p->nnodes], node, len + 1);
    return ++p->nnodes;
}

static uint64_t
wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
count_event(struct shm_presence *p, int action)
{
    if (action > SHM_PRES_NONE && action < SHM_PRES_NACTIONS)
        atomic_fetch_add_explicit(&p->events[action], 1, RELAXED);
}

/* names_ok - channel and member fit, data within max_data: 0 or -errno. */
static int
names_ok(struct shm_presence *p, struct shm_name c, struct shm_name m,
         const struct shm_name *data)
{
    if (c.len == 0 || c.len > SHM_NAME_MAX || m.len == 0 ||
        m.len > SHM_PRES_MEMBER_MAX)
        return -EINVAL;
    if (data != NULL && data->len > p->p.max_data)
        return -E2BIG;
    return 0;
}

/*
 * join - the common part of enter and attach, under the lock: the
 * member's record (made if new, counted against the bounds) in *idx and
 * the action.
 */
static int
join(struct shm_seg *seg, struct shm_presence *p, struct shm_name c,
     struct shm_name m, const struct shm_name *data, uint64_t wall,
     uint32_t *idx)
{
    uint64_t ch_h = chan_hash(c), m_h = member_hash(ch_h, m);
    uint32_t ci = find_chan(p, c, ch_h), i = 0;

    if (ci != 0 && (i = find_member(p, ci, m, m_h)) != 0) {
        *idx = i;
        return set_data(rec_at(p, i), data) ? SHM_PRES_UPDATE : SHM_PRES_NONE;
    }
    if (ci != 0 && chan_at(p, ci)->count >= p->p.max_members)
        return -ENOSPC;
    if (!room(seg, p, p->rec_bytes) || (ci = chan_get(seg, p, c, ch_h)) == 0)
        return -ENOMEM;
    if ((i = member_new(p, ci, m, m_h, wall)) == 0) {
        chan_put(p, ci);
        return -ENOMEM;
    }
    set_data(rec_at(p, i), data);
    rec_at(p, i)->version = 1;
    *idx = i;
    return SHM_PRES_ENTER;
}

static void
emit(struct shm_presence *p, int action, struct shm_name c, struct shm_name m,
     const struct shm_name *data, uint64_t version, shm_pres_event_fn fn,
     void *arg)
{
    struct shm_pres_event ev = {.action = (enum shm_pres_action)action,
                                .channel = c,
                                .member = m,
                                .version = version};

    if (action <= SHM_PRES_NONE)
        return;
    count_event(p, action);
    if (data != NULL)
        ev.data = *data;
    if (fn != NULL)
        fn(arg, &ev);
}

/* shm_presence_enter - see presence.h. */
int
shm_presence_enter(struct shm_seg *seg, struct shm_name c, struct shm_name m,
                   const struct shm_name *data, uint64_t ttl_ms, uint64_t now,
                   shm_pres_event_fn fn, void *arg)
{
    struct shm_presence *p = seg->presence;
    uint64_t wall = wall_ms(), version = 0;
    uint32_t i;
    int rc = names_ok(p, c, m, data), action;

    if (rc != 0)
        return rc;
    if ((rc = lock_open(seg, p)) != 0)
        return rc;
    distrust_name(p, c, now);
    action = join(seg, p, c, m, data, wall, &i);
    if (action >= 0) {
        struct pres_member *r = rec_at(p, i);
        r->ttl_until = now + ttl_ms;
        version = r->version;
        due_at(p, member_due(r));
    }
    shm_unlock(&p->lock);
    emit(p, action, c, m, data, version, fn, arg);
    return action;
}

/* shm_presence_attach - see presence.h. */
int
shm_presence_attach(struct shm_seg *seg, struct shm_name c, struct shm_name m,
                    const struct shm_name *data, const char *node, uint64_t now,
                    shm_pres_event_fn fn, void *arg)
{
    struct shm_presence *p = seg->presence;
    uint64_t wall = wall_ms(), version = 0;
    uint32_t i;
    int rc = names_ok(p, c, m, data), action;

    if (rc != 0)
        return rc;
    if ((rc = lock_open(seg, p)) != 0)
        return rc;
    distrust_name(p, c, now);
    uint32_t ni = node_index(p, node);
    action = ni == 0 ? -ENOSPC : join(seg, p, c, m, data, wall, &i);
    if (action >= 0) {
        struct pres_member *r = rec_at(p, i);
        int slot = -1;
        for (int k = 0; k < SHM_PRES_NODES && slot < 0; k++)
            if (r->conns[k].node == ni)
                slot = k;
        for (int k = 0; k < SHM_PRES_NODES && slot < 0; k++)
            if (r->conns[k].node == 0 || r->conns[k].n == 0)
                slot = k;
        if (slot < 0) {
            if (action == SHM_PRES_ENTER)
                member_free(p, i); /* cannot happen: a new one has room */
            action = -ENOSPC;
        } else {
            r->conns[slot].node = ni;
            r->conns[slot].n++;
            r->grace_until = 0;
            version = r->version;
        }
    }
    shm_unlock(&p->lock);
    emit(p, action, c, m, data, version, fn, arg);
    return action;
}

/* shm_presence_set - see presence.h. */
int
shm_presence_set(struct shm_seg *seg, struct shm_name c, struct shm_name m,
                 const struct shm_name *data, const char *node, uint32_t n,
                 uint64_t grace_ms, uint64_t now, shm_pres_event_fn fn,
                 void *arg)
{
    struct shm_presence *p = seg->presence;
    uint64_t wall = wall_ms(), version = 0, ch_h = chan_hash(c);
    uint32_t i = 0, ni, ci;
    int rc = names_ok(p, c, m, data), action = SHM_PRES_NONE;

    if (rc != 0)
        return rc;
    if ((rc = lock_open(seg, p)) != 0)
        return rc;
    distrust_name(p, c, now);
    ni = node_index(p, node);
    if (ni == 0) {
        action = -ENOSPC;
    } else if (now < atomic_load_explicit(&p->settle_until, RELAXED) &&
               ((ci = find_chan(p, c, ch_h)) == 0 ||
                find_member(p, ci, m, member_hash(ch_h, m)) == 0)) {
        action = -ESHUTDOWN; /* settling: the copy may bring it */
    } else if (n == 0) {
        ci = find_chan(p, c, ch_h);
        i = ci ? find_member(p, ci, m, member_hash(ch_h, m)) : 0;
    } else {
        action = join(seg, p, c, m, data, wall, &i);
    }
    if (action >= 0 && i != 0) {
        struct pres_member *r = rec_at(p, i);
        int slot = -1;
        for (int k = 0; k < SHM_PRES_NODES && slot < 0; k++)
            if (r->conns[k].node == ni)
                slot = k;
        for (int k = 0; n > 0 && k < SHM_PRES_NODES && slot < 0; k++)
            if (r->conns[k].node == 0 || r->conns[k].n == 0)
                slot = k;
        if (slot < 0 && n > 0) {
            if (action == SHM_PRES_ENTER)
                member_free(p, i);
            action = -ENOSPC;
        } else if (slot >= 0) {
            r->conns[slot].node = ni;
            r->conns[slot].n = n;
        }
        if (action >= 0 && n > 0)
            r->grace_until = 0;
        if (action >= 0 && member_conns(r) == 0 && slot >= 0 && n == 0) {
            r->grace_until = now + grace_ms;
            due_at(p, member_due(r));
        }
        version = r->version;
    }
    shm_unlock(&p->lock);
    emit(p, action, c, m, data, version, fn, arg);
    return action;
}

/* shm_presence_detach - see presence.h. */
int
shm_presence_detach(struct shm_seg *seg, struct shm_name c, struct shm_name m,
                    const char *node, uint64_t grace_ms, uint64_t now)
{
    struct shm_presence *p = seg->presence;
    uint64_t ch_h = chan_hash(c);
    int rc;

    if (names_ok(p, c, m, NULL) != 0)
        return -ENOENT;
    if ((rc = lock(seg, p)) != 0)
        return rc;
    uint32_t ci = find_chan(p, c, ch_h), i = 0, ni = 0;
    rc = -ENOENT;
    if (ci != 0 && (i = find_member(p, ci, m, member_hash(ch_h, m))) != 0) {
        struct pres_member *r = rec_at(p, i);
        for (uint32_t k = 0; k < p->nnodes; k++)
            if (strcmp(p->nodes[k], node) == 0)
                ni = k + 1;
        for (int k = 0; ni != 0 && k < SHM_PRES_NODES && rc != 0; k++)
            if (r->conns[k].node == ni && r->conns[k].n > 0) {
                r->conns[k].n--;
                rc = 0;
            }
        if (rc == 0 && member_conns(r) == 0) {
            r->grace_until = now + grace_ms;
            due_at(p, member_due(r));
        }
    }
    shm_unlock(&p->lock);
    return rc;
}

/* take_leave - copy record i's event into buf (rec_bytes + SHM_NAME_MAX
 * bytes) and free it; the event points into buf. */
static void
take_leave(struct shm_presence *p, uint32_t i, char *buf,
           struct shm_pres_event *ev)
{
    struct pres_member *r = rec_at(p, i);
    struct pres_channel *ch = chan_at(p, r->chan);
    char *at = buf;

    memcpy(at, ch->name, ch->name_len);
    ev->channel = (struct shm_name){at, ch->name_len};
    at += ch->name_len;
    memcpy(at, r->key, r->key_len);
    ev->member = (struct shm_name){at, r->key_len};
    at += r->key_len;
    memcpy(at, r->data, r->data_len);
    ev->data = (struct shm_name){at, r->data_len};
    ev->action = SHM_PRES_LEAVE;
    ev->version = r->version + 1;
    member_free(p, i);
}

static size_t
event_bytes(const struct shm_presence *p)
{
    return SHM_NAME_MAX + SHM_PRES_MEMBER_MAX + p->p.max_data;
}

/* shm_presence_leave - see presence.h. */
int
shm_presence_leave(struct shm_seg *seg, struct shm_name c, struct shm_name m,
                   uint64_t now, shm_pres_event_fn fn, void *arg)
{
    struct shm_presence *p = seg->presence;
    uint64_t ch_h = chan_hash(c);
    struct shm_pres_event ev;
    char *buf;
    int rc;

    if (names_ok(p, c, m, NULL) != 0)
        return 0;
    if ((buf = malloc(event_bytes(p))) == NULL)
        return -ENOMEM;
    if ((rc = lock_open(seg, p)) != 0) {
        free(buf);
        return rc;
    }
    uint32_t ci = find_chan(p, c, ch_h), i = 0;
    distrust(p, ci, now);
    if (ci != 0 && (i = find_member(p, ci, m, member_hash(ch_h, m))) != 0)
        take_leave(p, i, buf, &ev);
    shm_unlock(&p->lock);
    if (i != 0) {
        count_event(p, SHM_PRES_LEAVE);
        if (fn != NULL)
            fn(arg, &ev);
    }
    free(buf);
    return i != 0;
}

/* shm_presence_drop_node - see presence.h. */
int
shm_presence_drop_node(struct shm_seg *seg, const char *node, uint64_t grace_ms,
                       uint64_t now)
{
    struct shm_presence *p = seg->presence;
    uint32_t ni = 0;
    int rc, n = 0;

    size_t len = strlen(node);
    int prefix = len > 0 && node[len - 1] == '/';

    if ((rc = lock(seg, p)) != 0)
        return rc;
    for (uint32_t k = 0; k < p->nnodes; k++)
        if (prefix ? strncmp(p->nodes[k], node, len) == 0
                   : strcmp(p->nodes[k], node) == 0)
            ni = 1; /* one at least */
    for (uint32_t i = 1; ni != 0 && i <= p->rec_hi; i++) {
        struct pres_member *r = rec_at(p, i);
        int had = 0;
        if (atomic_load_explicit(&r->state, RELAXED) != LIVE)
            continue;
        for (int k = 0; k < SHM_PRES_NODES; k++)
            if (r->conns[k].node != 0 && r->conns[k].n > 0 &&
                (prefix
                     ? strncmp(p->nodes[r->conns[k].node - 1], node, len) == 0
                     : strcmp(p->nodes[r->conns[k].node - 1], node) == 0)) {
                r->conns[k].n = 0;
                had = 1;
            }
        if (had && member_conns(r) == 0) {
            r->grace_until = now + grace_ms;
            due_at(p, member_due(r));
        }
        n += had;
    }
    shm_unlock(&p->lock);
    return n;
}

/* shm_presence_expire - see presence.h. */
int
shm_presence_expire(struct shm_seg *seg, uint64_t now, uint32_t max,
                    shm_pres_event_fn fn, void *arg)
{
    struct shm_presence *p = seg->presence;
    uint64_t due = p ? atomic_load_explicit(&p->due, RELAXED) : 0, next = 0;
    struct shm_pres_event *ev;
    char *buf;
    uint32_t n = 0;
    int rc;

    /* frozen: the next owner has the deadlines (a hand-over), and lets
     * the members leave there */
    if (due == 0 || now < due || max == 0 || atomic_load(&p->frozen))
        return 0;
    ev = malloc((size_t)max * sizeof(*ev));
    buf = malloc((size_t)max * event_bytes(p));
    if (ev == NULL || buf == NULL) {
        free(ev);
        free(buf);
        return -ENOMEM;
    }
    if ((rc = lock(seg, p)) != 0) {
        free(ev);
        free(buf);
        return rc;
    }
    for (uint32_t i = 1; i <= p->rec_hi; i++) {
        struct pres_member *r = rec_at(p, i);
        uint64_t t;
        if (atomic_load_explicit(&r->state, RELAXED) != LIVE ||
            (t = member_due(r)) == 0)
            continue;
        if (t <= now && n < max) {
            take_leave(p, i, buf + (size_t)n * event_bytes(p), &ev[n]);
            n++;
        } else if (next == 0 || t < next) {
            next = t <= now ? now : t; /* past max: the next tick */
        }
    }
    atomic_store_explicit(&p->due, next, RELAXED);
    shm_unlock(&p->lock);
    for (uint32_t k = 0; k < n; k++) {
        count_event(p, SHM_PRES_LEAVE);
        if (fn != NULL)
            fn(arg, &ev[k]);
    }
    free(ev);
    free(buf);
    return (int)n;
}

/* shm_presence_due - see presence.h. */
uint64_t
shm_presence_due(struct shm_seg *seg)
{
    return seg->presence ? atomic_load_explicit(&seg->presence->due, RELAXED)
                         : 0;
}

/* shm_presence_count - see presence.h. */
uint32_t
shm_presence_count(struct shm_seg *seg, struct shm_name c)
{
    struct shm_presence *p = seg->presence;
    uint32_t n = 0, ci;

    if (c.len == 0 || c.len > SHM_NAME_MAX || lock(seg, p) != 0)
        return 0;
    if ((ci = find_chan(p, c, chan_hash(c))) != 0)
        n = chan_at(p, ci)->count;
    shm_unlock(&p->lock);
    return n;
}

/* A key copied out for sorting. */
struct key_ent {
    uint32_t idx;
    uint32_t len;
    const char *key;
};

static int
key_cmp(const void *a, const void *b)
{
    const struct key_ent *x = a, *y = b;
    int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);

    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

static int
after_key(const char *k, uint32_t len, const struct shm_name *after)
{
    struct key_ent x = {0, len, k}, y;

    if (after == NULL)
        return 1;
    y = (struct key_ent){0, (uint32_t)after->len, after->ptr};
    return key_cmp(&x, &y) > 0;
}

/* shm_presence_list - see presence.h: keys under the lock, sorted outside,
 * the page's members under it again (a member gone meanwhile is left
 * out). */
int
shm_presence_list(struct shm_seg *seg, struct shm_name c,
                  const struct shm_name *after, uint32_t limit,
                  struct shm_pres_list *out)
{
    struct shm_presence *p = seg->presence;
    uint64_t ch_h = chan_hash(c);
    struct key_ent *ents = NULL;
    char *keys = NULL;
    uint32_t cap = 0, n, count, ci;
    int rc;

    memset(out, 0, sizeof(*out));
    if (c.len == 0 || c.len > SHM_NAME_MAX || limit == 0)
        return 0;
    for (;;) {
        if ((rc = lock(seg, p)) != 0)
            goto fail;
        ci = find_chan(p, c, ch_h);
        count = ci ? chan_at(p, ci)->count : 0;
        if (count <= cap)
            break;
        shm_unlock(&p->lock);
        free(ents);
        free(keys);
        cap = count + 64;
        ents = malloc((size_t)cap * sizeof(*ents));
        keys = malloc((size_t)cap * SHM_PRES_MEMBER_MAX);
        if (ents == NULL || keys == NULL) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    n = 0;
    for (uint32_t i = ci ? chan_at(p, ci)->head : 0; i != 0;
         i = rec_at(p, i)->next) {
        struct pres_member *r = rec_at(p, i);
        if (!after_key(r->key, r->key_len, after))
            continue;
        char *k = keys + (size_t)n * SHM_PRES_MEMBER_MAX;
        memcpy(k, r->key, r->key_len);
        ents[n++] = (struct key_ent){i, r->key_len, k};
    }
    shm_unlock(&p->lock);
    out->count = count;
    if (n > 0)
        qsort(ents, n, sizeof(*ents), key_cmp);
    out->truncated = n > limit;
    n = n > limit ? limit : n;
    if (n == 0)
        goto done;
    out->m = calloc(n, sizeof(*out->m));
    out->blob = malloc((size_t)n * (SHM_PRES_MEMBER_MAX + p->p.max_data));
    if (out->m == NULL || out->blob == NULL) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = lock(seg, p)) != 0)
        goto fail;
    char *at = out->blob;
    for (uint32_t k = 0; k < n; k++) {
        struct pres_member *r = rec_at(p, ents[k].idx);
        struct shm_pres_info *o = &out->m[out->n];
        if (atomic_load_explicit(&r->state, RELAXED) != LIVE || r->chan != ci ||
            r->key_len != ents[k].len ||
            memcmp(r->key, ents[k].key, ents[k].len) != 0)
            continue;
        memcpy(at, r->key, r->key_len);
        o->member = (struct shm_name){at, r->key_len};
        at += r->key_len;
        memcpy(at, r->data, r->data_len);
        o->data = (struct shm_name){at, r->data_len};
        at += r->data_len;
        o->since = r->since;
        o->version = r->version;
        o->connections = member_conns(r);
        o->ttl_until = r->ttl_until;
        out->n++;
    }
    shm_unlock(&p->lock);
done:
    free(ents);
    free(keys);
    return 0;
fail:
    free(ents);
    free(keys);
    shm_presence_list_free(out);
    return rc;
}

/* shm_presence_list_free - see presence.h. */
void
shm_presence_list_free(struct shm_pres_list *l)
{
    free(l->m);
    free(l->blob);
    l->m = NULL;
    l->blob = NULL;
    l->n = 0;
}

/* shm_presence_bytes - see presence.h. */
uint64_t
shm_presence_bytes(const struct shm_presence *p)
{
    if (p == NULL)
        return 0;
    return (uint64_t)atomic_load_explicit(&((struct shm_presence *)p)->members,
                                          RELAXED) *
               p->rec_bytes +
           (uint64_t)atomic_load_explicit(&((struct shm_presence *)p)->channels,
                                          RELAXED) *
               sizeof(struct pres_channel);
}

/* shm_presence_totals - see presence.h. */
void
shm_presence_totals(struct shm_seg *seg, struct shm_pres_totals *t)
{
    struct shm_presence *p = seg->presence;

    memset(t, 0, sizeof(*t));
    if (p == NULL)
        return;
    t->members = atomic_load_explicit(&p->members, RELAXED);
    t->channels = atomic_load_explicit(&p->channels, RELAXED);
    t->bytes = shm_presence_bytes(p);
    for (int a = 0; a < SHM_PRES_NACTIONS; a++)
        t->events[a] = atomic_load_explicit(&p->events[a], RELAXED);
    t->max_members = p->p.max_members;
    t->max_data = p->p.max_data;
}

/* shm_presence_named - see presence.h. */
int
shm_presence_named(struct shm_name q)
{
    const char *sep = memchr(q.ptr, SHM_TENANT_SEP, q.len);
    size_t at = sep != NULL ? (size_t)(sep - q.ptr) + 1 : 0;

    return at < q.len && q.ptr[at] == SHM_PRES_MARK;
}

/* shm_presence_events_opts - see presence.h. */
void
shm_presence_events_opts(struct shm_name q, struct shm_qopts *o)
{
    if (!shm_presence_named(q))
        return;
    o->max_length = SHM_PRES_EVENTS_KEEP;
    o->policy = SHM_POLICY_DROP_OLDEST;
    o->ttl_s = SHM_PRES_EVENTS_TTL_S;
}

/* shm_presence_freeze - see presence.h.  No lock: a write checks the
 * flag under the lock, so it lands before an export that locks after this
 * store, or sees the flag. */
void
shm_presence_freeze(struct shm_seg *seg, int on)
{
    if (seg->presence != NULL)
        atomic_store(&seg->presence->frozen, on ? 1u : 0u);
}

/* shm_presence_settle - see presence.h. */
void
shm_presence_settle(struct shm_seg *seg, uint64_t until)
{
    if (seg->presence != NULL)
        atomic_store(&seg->presence->settle_until, until);
}

/* shm_presence_settling - see presence.h. */
int
shm_presence_settling(struct shm_seg *seg)
{
    return seg->presence != NULL &&
           atomic_load(&seg->presence->settle_until) != 0;
}

/* shm_presence_channels - see presence.h: the names' bytes counted under
 * the lock, copied under it again into what was allocated outside (a
 * channel made meanwhile is left out). */
int
shm_presence_channels(struct shm_seg *seg, struct shm_pres_names *out)
{
    struct shm_presence *p = seg->presence;
    size_t bytes = 0, at = 0;
    uint32_t n = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if (p == NULL)
        return 0;
    if ((rc = lock(seg, p)) != 0)
        return rc;
    for (uint32_t c = 1; c <= p->chan_hi; c++)
        if (atomic_load_explicit(&chan_at(p, c)->state, RELAXED) == LIVE) {
            n++;
            bytes += chan_at(p, c)->name_len;
        }
    shm_unlock(&p->lock);
    if (n == 0)
        return 0;
    out->name = calloc(n, sizeof(*out->name));
    out->blob = malloc(bytes);
    if (out->name == NULL || out->blob == NULL) {
        shm_presence_names_free(out);
        return -ENOMEM;
    }
    if ((rc = lock(seg, p)) != 0) {
        shm_presence_names_free(out);
        return rc;
    }
    for (uint32_t c = 1; c <= p->chan_hi && out->n < n; c++) {
        struct pres_channel *ch = chan_at(p, c);
        if (atomic_load_explicit(&ch->state, RELAXED) != LIVE ||
            at + ch->name_len > bytes)
            continue;
        memcpy(out->blob + at, ch->name, ch->name_len);
        out->name[out->n++] = (struct shm_name){out->blob + at, ch->name_len};
        at += ch->name_len;
    }
    shm_unlock(&p->lock);
    return 0;
}

/* shm_presence_names_free - see presence.h. */
void
shm_presence_names_free(struct shm_pres_names *l)
{
    free(l->name);
    free(l->blob);
    memset(l, 0, sizeof(*l));
}

/* left_ms - what is left of deadline t at now: 0 for none, at least 1 for
 * one that has passed (due at once, there too). */
static uint64_t
left_ms(uint64_t t, uint64_t now)
{
    return t == 0 ? 0 : t > now ? t - now : 1;
}

/* export_one - record r as out carries it, its strings copied to *at.
 * Connections whose key starts with drop are left out; a member that
 * had only those starts its grace (grace_ms) as their end would. */
static void
export_one(struct shm_presence *p, const struct pres_member *r,
           const char *drop, uint64_t grace_ms, uint64_t now,
           struct shm_pres_moved *o, char **at)
{
    size_t dl = drop ? strlen(drop) : 0;
    int dropped = 0;

    memcpy(*at, r->key, r->key_len);
    o->member = (struct shm_name){*at, r->key_len};
    *at += r->key_len;
    memcpy(*at, r->data, r->data_len);
    o->data = (struct shm_name){*at, r->data_len};
    *at += r->data_len;
    o->since = r->since;
    o->version = r->version;
    o->ttl_ms = left_ms(r->ttl_until, now);
    o->grace_ms = left_ms(r->grace_until, now);
    o->nconns = 0;
    for (int k = 0; k < SHM_PRES_NODES; k++) {
        const char *key;
        size_t kl;
        if (r->conns[k].node == 0 || r->conns[k].n == 0 ||
            r->conns[k].node > p->nnodes)
            continue;
        key = p->nodes[r->conns[k].node - 1];
        if (dl > 0 && strncmp(key, drop, dl) == 0) {
            dropped = 1;
            continue;
        }
        kl = strlen(key) + 1;
        memcpy(*at, key, kl);
        o->conns[o->nconns].node = *at;
        o->conns[o->nconns++].n = r->conns[k].n;
        *at += kl;
    }
    if (dropped && o->nconns == 0)
        o->grace_ms = grace_ms;
}

/* shm_presence_export - see presence.h. */
int
shm_presence_export(struct shm_seg *seg, struct shm_name c, const char *drop,
                    uint64_t grace_ms, uint64_t now,
                    struct shm_pres_export *out)
{
    struct shm_presence *p = seg->presence;
    uint64_t ch_h = chan_hash(c);
    uint32_t count, ci;
    size_t each;
    char *at;
    int rc;

    memset(out, 0, sizeof(*out));
    if (p == NULL || c.len == 0 || c.len > SHM_NAME_MAX)
        return 0;
    if ((rc = lock(seg, p)) != 0)
        return rc;
    ci = find_chan(p, c, ch_h);
    count = ci ? chan_at(p, ci)->count : 0;
    shm_unlock(&p->lock);
    if (count == 0)
        return 0;
    each = SHM_PRES_MEMBER_MAX + p->p.max_data +
           (size_t)SHM_PRES_NODES * SHM_PRES_NODE_ID;
    out->m = calloc(count, sizeof(*out->m));
    out->blob = malloc((size_t)count * each);
    if (out->m == NULL || out->blob == NULL) {
        shm_presence_export_free(out);
        return -ENOMEM;
    }
    if ((rc = lock(seg, p)) != 0) {
        shm_presence_export_free(out);
        return rc;
    }
    at = out->blob;
    ci = find_chan(p, c, ch_h); /* freed and made again meanwhile: moved */
    for (uint32_t i = ci ? chan_at(p, ci)->head : 0; i != 0 && out->n < count;
         i = rec_at(p, i)->next)
        export_one(p, rec_at(p, i), drop, grace_ms, now, &out->m[out->n++],
                   &at);
    shm_unlock(&p->lock);
    return (int)out->n;
}

/* shm_presence_export_free - see presence.h. */
void
shm_presence_export_free(struct shm_pres_export *e)
{
    free(e->m);
    free(e->blob);
    memset(e, 0, sizeof(*e));
}

/* has_prefix - whether key starts with prefix (NULL or "": never). */
static int
has_prefix(const char *key, const char *prefix)
{
    size_t n = prefix ? strlen(prefix) : 0;

    return n > 0 && strncmp(key, prefix, n) == 0;
}

/* conn_slot - r's slot of node index ni (whatever its count), or -1. */
static int
conn_slot(const struct pres_member *r, uint32_t ni)
{
    for (int k = 0; k < SHM_PRES_NODES; k++)
        if (r->conns[k].node == ni)
            return k;
    return -1;
}

/*
 * merge_one - what o says of member r that r lacks, under the merge rules
 * (shm_presence_merge): keys r has keep r's count, a key r lacks comes
 * with o's; the later ttl; the earlier since; the higher version; o's
 * data only when r has none.  Keys starting with self are left out.
 */
static void
merge_one(struct shm_presence *p, struct pres_member *r,
          const struct shm_pres_moved *o, const char *self, uint64_t now)
{
    uint32_t add[SHM_PRES_NODES], nadd = 0;

    if (o->since != 0 && (r->since == 0 || o->since < r->since))
        r->since = o->since;
    if (o->version > r->version)
        r->version = o->version;
    if (r->data_len == 0 && o->data.len > 0 && o->data.len <= p->p.max_data) {
        memcpy(r->data, o->data.ptr, o->data.len);
        r->data_len = (uint32_t)o->data.len;
    }
    if (o->ttl_ms != 0 && now + o->ttl_ms > r->ttl_until)
        r->ttl_until = now + o->ttl_ms;
    /* the keys to add are found first: a slot that a key here holds at 0
     * (its stream's end announced here) must not be taken by another key
     * before that key's turn comes */
    for (uint32_t k = 0; k < o->nconns && k < SHM_PRES_NODES; k++) {
        uint32_t ni;
        if (o->conns[k].n == 0 || has_prefix(o->conns[k].node, self) ||
            (ni = node_index(p, o->conns[k].node)) == 0 ||
            conn_slot(r, ni) >= 0)
            continue;
        add[nadd++] = k;
    }
    for (uint32_t a = 0; a < nadd; a++) {
        uint32_t ni = node_index(p, o->conns[add[a]].node);
        for (int k = 0; k < SHM_PRES_NODES; k++)
            if (r->conns[k].node == 0 || r->conns[k].n == 0) {
                r->conns[k].node = ni;
                r->conns[k].n = o->conns[add[a]].n;
                break;
            }
    }
}

/* import_one - member o into channel c (its record made or found), its
 * deadlines from now; 1, or 0 when it was left out (bad names, the
 * channel's or the table's bounds, the node's memory: *full then).  With
 * merge, a member already here is merged (merge_one), and o's keys that
 * start with self are left out of a new one as well. */
static int
import_one(struct shm_seg *seg, struct shm_presence *p, struct shm_name c,
           const struct shm_pres_moved *o, int merge, const char *self,
           uint64_t grace_ms, uint64_t now, int *full)
{
    uint64_t ch_h = chan_hash(c), m_h;
    uint32_t ci, i;
    struct pres_member *r;

    if (o->member.len == 0 || o->member.len > SHM_PRES_MEMBER_MAX)
        return 0;
    m_h = member_hash(ch_h, o->member);
    ci = find_chan(p, c, ch_h);
    if (ci == 0 || (i = find_member(p, ci, o->member, m_h)) == 0) {
        if (ci != 0 && chan_at(p, ci)->count >= p->p.max_members)
            return 0;
        if (!room(seg, p, p->rec_bytes) ||
            (ci = chan_get(seg, p, c, ch_h)) == 0) {
            *full = 1;
            return 0;
        }
        if ((i = member_new(p, ci, o->member, m_h, o->since)) == 0) {
            chan_put(p, ci);
            *full = 1;
            return 0;
        }
    } else if (merge) {
        r = rec_at(p, i);
        merge_one(p, r, o, self, now);
        if (member_conns(r) > 0)
            r->grace_until = 0;
        else if (member_due(r) == 0)
            r->grace_until = now + grace_ms;
        due_at(p, member_due(r));
        return 1;
    }
    r = rec_at(p, i);
    r->since = o->since;
    r->version = o->version;
    if (o->data.len <= p->p.max_data) { /* else: the sender's bound was
                                           higher; kept without */
        memcpy(r->data, o->data.ptr, o->data.len);
        r->data_len = (uint32_t)o->data.len;
    } else {
        r->data_len = 0;
    }
    r->ttl_until = o->ttl_ms ? now + o->ttl_ms : 0;
    r->grace_until = o->grace_ms ? now + o->grace_ms : 0;
    memset(r->conns, 0, sizeof(r->conns));
    for (uint32_t k = 0, slot = 0; k < o->nconns && k < SHM_PRES_NODES; k++) {
        uint32_t ni =
            o->conns[k].n && !(merge && has_prefix(o->conns[k].node, self))
                ? node_index(p, o->conns[k].node)
                : 0;
        if (ni == 0)
            continue;
        r->conns[slot].node = ni;
        r->conns[slot++].n = o->conns[k].n;
    }
    if (member_conns(r) > 0)
        r->grace_until = 0;
    else if (member_due(r) == 0)
        r->grace_until = now + grace_ms; /* nothing keeps it: as a stream's
                                            end would */
    due_at(p, member_due(r));
    return 1;
}

/* import_set - shm_presence_import (merge 0) or shm_presence_merge. */
static int
import_set(struct shm_seg *seg, struct shm_name c,
           const struct shm_pres_moved *m, uint32_t n, int merge,
           const char *self, uint64_t grace_ms, uint64_t now)
{
    struct shm_presence *p = seg->presence;
    uint32_t ci;
    int rc, full = 0;

    if (c.len == 0 || c.len > SHM_NAME_MAX)
        return -EINVAL;
    if ((rc = lock_open(seg, p)) != 0)
        return rc;
    /* a drain's set: what this node held of the channel is an old
     * owner's (or nobody's), and the set handed over replaces it */
    ci = find_chan(p, c, chan_hash(c));
    if (merge) /* an owner's write: what a copy here says is old */
        distrust(p, ci, now);
    else if (ci != 0)
        chan_at(p, ci)->copy_grace = 0; /* the newer owner's whole set */
    if (!merge && ci != 0)
        while (chan_at(p, ci)->count > 0 &&
               atomic_load_explicit(&chan_at(p, ci)->state, RELAXED) == LIVE)
            member_free(p, chan_at(p, ci)->head);
    for (uint32_t k = 0; k < n && !full; k++)
        import_one(seg, p, c, &m[k], merge, self, grace_ms, now, &full);
    ci = find_chan(p, c, chan_hash(c));
    rc = ci ? (int)chan_at(p, ci)->count : 0;
    shm_unlock(&p->lock);
    return rc;
}

/* shm_presence_import - see presence.h. */
int
shm_presence_import(struct shm_seg *seg, struct shm_name c,
                    const struct shm_pres_moved *m, uint32_t n,
                    uint64_t grace_ms, uint64_t now)
{
    return import_set(seg, c, m, n, 0, NULL, grace_ms, now);
}

/* shm_presence_merge - see presence.h. */
int
shm_presence_merge(struct shm_seg *seg, struct shm_name c,
                   const struct shm_pres_moved *m, uint32_t n, const char *self,
                   uint64_t grace_ms, uint64_t now)
{
    return import_set(seg, c, m, n, 1, self, grace_ms, now);
}

/* shm_presence_mark_copy - see presence.h. */
int
shm_presence_mark_copy(struct shm_seg *seg, struct shm_name c,
                       uint64_t grace_ms)
{
    struct shm_presence *p = seg->presence;
    uint32_t ci;
    int rc;

    if (p == NULL || c.len == 0 || c.len > SHM_NAME_MAX)
        return 0;
    if ((rc = lock(seg, p)) != 0)
        return rc;
    if ((ci = find_chan(p, c, chan_hash(c))) != 0)
        chan_at(p, ci)->copy_grace =
            grace_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)grace_ms;
    shm_unlock(&p->lock);
    return ci != 0;
}

/* shm_presence_is_copy - see presence.h. */
int
shm_presence_is_copy(struct shm_seg *seg, struct shm_name c)
{
    struct shm_presence *p = seg->presence;
    uint32_t ci;
    int rc;

    if (p == NULL || c.len == 0 || c.len > SHM_NAME_MAX ||
        atomic_load_explicit(&p->channels, RELAXED) == 0)
        return 0; /* no lock for a node that holds no channel */
    if ((rc = lock(seg, p)) != 0)
        return rc;
    ci = find_chan(p, c, chan_hash(c));
    rc = ci != 0 && chan_at(p, ci)->copy_grace != 0;
    shm_unlock(&p->lock);
    return rc;
}

/* shm_presence_distrust - see presence.h. */
int
shm_presence_distrust(struct shm_seg *seg, struct shm_name c, uint64_t now)
{
    struct shm_presence *p = seg->presence;
    uint32_t ci;
    int rc;

    if (p == NULL || c.len == 0 || c.len > SHM_NAME_MAX)
        return 0;
    if ((rc = lock(seg, p)) != 0)
        return rc;
    ci = find_chan(p, c, chan_hash(c));
    rc = ci != 0 && chan_at(p, ci)->copy_grace != 0;
    distrust(p, ci, now);
    shm_unlock(&p->lock);
    return rc;
}

/* shm_presence_drop_channel - see presence.h. */
int
shm_presence_drop_channel(struct shm_seg *seg, struct shm_name c)
{
    struct shm_presence *p = seg->presence;
    uint32_t ci;
    int rc, n = 0;

    if (p == NULL || c.len == 0 || c.len > SHM_NAME_MAX)
        return 0;
    if ((rc = lock(seg, p)) != 0)
        return rc;
    if ((ci = find_chan(p, c, chan_hash(c))) != 0)
        while (chan_at(p, ci)->count > 0 &&
               atomic_load_explicit(&chan_at(p, ci)->state, RELAXED) == LIVE) {
            member_free(p, chan_at(p, ci)->head);
            n++;
        }
    shm_unlock(&p->lock);
    return n;
}

/* shm_presence_check - see presence.h. */
int
shm_presence_check(struct shm_seg *seg, const char **why)
{
    struct shm_presence *p = seg->presence;
    uint32_t members = 0, channels = 0;
    int rc = 0;

    *why = NULL;
    if (lock(seg, p) != 0) {
        *why = "the lock could not be taken";
        return -EUCLEAN;
    }
    for (uint32_t c = 1; c <= p->chan_hi && rc == 0; c++) {
        struct pres_channel *ch = chan_at(p, c);
        uint32_t n = 0;
        if (atomic_load(&ch->state) != LIVE)
            continue;
        channels++;
        if (find_chan(p, (struct shm_name){ch->name, ch->name_len}, ch->hash) !=
            c)
            *why = "a live channel is not found by its name";
        for (uint32_t i = ch->head; i != 0 && n <= ch->count;
             i = rec_at(p, i)->next) {
            struct pres_member *r = rec_at(p, i);
            n++;
            if (atomic_load(&r->state) != LIVE || r->chan != c)
                *why = "a channel lists a member not live in it";
            else if (find_member(p, c, (struct shm_name){r->key, r->key_len},
                                 r->hash) != i)
                *why = "a live member is not found by its key";
        }
        if (n != ch->count)
            *why = "a channel's count is not its list's length";
        if (ch->count == 0)
            *why = "a live channel has no member";
        rc = *why ? -EUCLEAN : 0;
    }
    for (uint32_t i = 1; i <= p->rec_hi && rc == 0; i++)
        members += atomic_load(&rec_at(p, i)->state) == LIVE;
    if (rc == 0 && members != atomic_load(&p->members))
        *why = "the member count is not the live records'";
    if (*why == NULL && channels != atomic_load(&p->channels))
        *why = "the channel count is not the live channels'";
    shm_unlock(&p->lock);
    return *why ? -EUCLEAN : 0;
}
