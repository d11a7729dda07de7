/*
 * dir.h - the DIR region: the queue and partition tables, their name index
 * and the node-wide sequence counter.
 *
 * Records are fixed-size slots in two arrays, handed out by a bump index and
 * a free list, so untouched slots never get a page.  A record is only ever
 * reused for another record of its kind; its generation is bumped at create
 * and at free, so a worker that looked a record up, dropped the dir lock and
 * then took the record's own lock re-checks (gen, alive) and retries.
 *
 * Locking: dir->lock (robust) guards the index, the free lists, the bump
 * indexes and each queue's partition list.  Its critical sections are a
 * lookup or an insert.
 * Lock order: queue lock -> one partition lock -> arena lock; queue lock ->
 * dir lock.  Under the dir lock only the arena's and the due heap's locks
 * are taken (a new queue's first due time); those two are leaves.  A dead holder's dir state
 * is rebuilt from the records (shm_dir_repair).
 */
#ifndef MAYFLY_SHM_DIR_H
#define MAYFLY_SHM_DIR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/broker.h"
#include "shm/region.h"
#include "shm/segment.h"

#define SHM_DIR_MAGIC 0x4d41594449523031ULL /* "MAYDIR01" */

/*
 * SHM_DIR_RECORD_HEAD - the fields a queue record and a partition record
 * both open with (offsets 0-63, as each layout below shows).  dir.c takes,
 * indexes, looks up and frees the records of either table through these
 * (and next_free) by name, so their names and types must agree: they are
 * declared once.
 */
#define SHM_DIR_RECORD_HEAD                                                    \
    pthread_mutex_t lock;                                                      \
    uint32_t gen;                                                              \
    _Atomic uint32_t alive;                                                    \
    uint64_t name_hash;                                                        \
    uint32_t name_ref;                                                         \
    uint32_t name_len

/*
 * struct shm_queue - one queue; lives in the DIR region's queue table.
 *   off  size  field        written by           protected by
 *     0    40  lock         -                    robust: group registry
 *    40     4  gen          creator / freer      dir lock
 *    44     4  alive        creator / freer      dir lock (read racy)
 *    48     8  name_hash    creator              immutable while alive
 *    56     4  name_ref     creator              immutable while alive
 *    60     4  name_len     creator              immutable while alive
 *    64     4  parts        partition creators   dir lock (index + 1 list)
 *    68     4  nparts       partition creators   dir lock
 *    72     4  groups       group creators       queue lock (cell list)
 *    76     4  ngroups      group creators       queue lock, read racy
 *    80     8  waiters      any-partition pops   atomic
 *    88     8  last_active  push/pop             atomic
 *    96     4  rr           any-partition pops   atomic
 *   100     2  declared     configure            racy
 *   102     2  tenant       creator              immutable while alive
 *                                                (slot in shm/tenants.h;
 *                                                0: none)
 *   104    24  drops[3]     bounds, ttl, retry   atomic
 *   128    48  opts         configure            racy (declared only)
 *   176     4  next_free    freer                dir lock
 *   180     4  intent       group forgetter      queue lock (cell freeing)
 *   184     8  any_popped   any-partition pops   atomic: when a pop (or a
 *                             and peeks            peer's watch) last read
 *                                                  the whole queue, ms
 */
struct shm_queue {
    SHM_DIR_RECORD_HEAD;
    uint32_t parts;
    uint32_t nparts;
    uint32_t groups;
    _Atomic uint32_t ngroups;
    _Atomic uint64_t waiters;
    _Atomic uint64_t last_active;
    _Atomic uint32_t rr;
    uint16_t declared;
    uint16_t tenant;
    _Atomic uint64_t drops[3];
    struct shm_qopts opts;
    uint32_t next_free;
    uint32_t intent;
    _Atomic uint64_t any_popped;
};
_Static_assert(offsetof(struct shm_queue, gen) == 40, "shm_queue layout");
_Static_assert(offsetof(struct shm_queue, parts) == 64, "shm_queue layout");
_Static_assert(offsetof(struct shm_queue, waiters) == 80, "shm_queue layout");
_Static_assert(offsetof(struct shm_queue, opts) == 128, "shm_queue layout");
_Static_assert(sizeof(struct shm_queue) == 192, "shm_queue layout");

enum { SHM_DROPS_BOUNDS, SHM_DROPS_TTL, SHM_DROPS_RETRY };

/*
 * struct shm_part - one partition (ring); lives in the partition table.
 *   off  size  field        written by           protected by
 *     0    40  lock         -                    robust: everything below
 *    40     4  gen          creator / freer      dir lock + lock
 *    44     4  alive        creator / freer      dir lock + lock
 *    48     8  name_hash    creator              immutable while alive
 *    56     4  name_ref     creator              immutable while alive
 *    60     4  name_len     creator              immutable while alive
 *    64     4  queue        creator              immutable while alive
 *    68     4  queue_gen    creator              immutable while alive
 *    72     4  next_part    creator              dir lock
 *    76     4  head         push/drop            lock (first message chain)
 *    80     4  tail         push/drop            lock (last message chain)
 *    84     4  groups       pop                  lock (group-state cells)
 *    88     4  ngs          pop                  lock
 *    92     4  intent       ack/drop             lock (chain being freed)
 *    96     8  count        push/drop            lock, read racy
 *   104     8  cost         push/drop            lock, read racy
 *   112     8  waiters      parking pops         lock to set, atomic
 *   120     8  last_active  push/pop             lock
 *   128     8  leased       pop/ack              lock, read racy (live
 *                                                  leases: not those
 *                                                  awaiting redelivery)
 *   136     8  due          pop/maintain         lock: earliest deadline
 *   144     8  oldest_ms    push/drop            lock, read racy
 *   152     4  next_free    freer                dir lock
 *   156     4  wipe         wipers, slotless     lock: a wipe is owed (set
 *                             repair               as one starts, cleared
 *                                                  when it is done)
 *   160     8  hold_seq     hold / adopt         lock: first of the
 *                                                  SHM_HOLD_SEQS sequence
 *                                                  numbers kept for a
 *                                                  hand-over on its way
 *                                                  here (0: none); read
 *                                                  racy (the horizon)
 *   168     8  hold_until   hold / adopt         lock: pops read nothing
 *                                                  here before this (ms)
 *   176     8  gone_seq     free/drop/wipe       lock, read racy: the
 *                                                  highest seq of a message
 *                                                  that left the list (0:
 *                                                  none yet); a tail's gap
 *                                                  (shm/tail.h)
 *   184     8  popped       pop/peek             atomic: when a group last
 *                                                  popped here, ms (the
 *                                                  request verb's
 *                                                  responders, inbox.h)
 *   192     8  adopt_inc    adopt                lock: the incarnation the
 *                                                  last hand-over here came
 *                                                  from (0: none, or one
 *                                                  whose numbers were not
 *                                                  kept); streams resume
 *                                                  its cursors (tail.h)
 *   200     8  adopt_lo     adopt                lock: the lowest number
 *                                                  (there) it accounts for
 *   208     8  adopt_hi     adopt                lock: and the highest
 *   216     8  adopt_base   adopt                lock: the number here of
 *                                                  adopt_lo: a message
 *                                                  numbered o there is
 *                                                  adopt_base + o - adopt_lo
 *                                                  here, less adopt_cut_len
 *                                                  past adopt_cut_at
 *   224     8  adopt_cut_at adopt                lock: the one gap between
 *   232     8  adopt_cut_len                       its numbers longer than
 *                                                  SHM_ADOPT_GAP (a hold's,
 *                                                  part_move.h) is cut to
 *                                                  it: after cut_at, cut_len
 *                                                  numbers are left out (0:
 *                                                  none).  A fixed 48 bytes
 *                                                  a partition, whatever it
 *                                                  holds
 *   240     8  last_seq     push/adopt/repair    atomic, raised under lock
 *                                                  before a link publishes:
 *                                                  at or above every number
 *                                                  the list ever held (and
 *                                                  gone_seq), so a whole-
 *                                                  queue tail past it skips
 *                                                  the partition (tail.h)
 *   248     4  dd_head      push                 lock: the dedupe window's
 *                                                  oldest key (ring.h,
 *                                                  struct shm_dd), 0: none
 *   252     4  dd_tail      push                 lock: its newest key
 *   256     4  dd_count     push                 lock: keys in the window
 *   260     4  dd_index     push/trim/adopt/     lock: the window's hash
 *                             repair               index (dd_index.h, one
 *                                                  run), 0: none (a lookup
 *                                                  walks the list)
 *   264     8  delayed      push/maintain        lock, read racy: messages
 *                                                  not visible yet (delayMs)
 *                                                  at the last count
 * A worker killed holding lock leaves EOWNERDEAD to the next locker:
 * shm_ring_repair() re-derives the partition from a validated walk.
 */
struct shm_part {
    SHM_DIR_RECORD_HEAD;
    uint32_t queue;
    uint32_t queue_gen;
    uint32_t next_part;
    uint32_t head;
    uint32_t tail;
    uint32_t groups;
    uint32_t ngs;
    uint32_t intent;
    _Atomic uint64_t count;
    _Atomic uint64_t cost;
    _Atomic uint64_t waiters;
    uint64_t last_active;
    _Atomic uint64_t leased;
    _Atomic uint64_t due;
    _Atomic uint64_t oldest_ms;
    uint32_t next_free;
    uint32_t wipe;
    _Atomic uint64_t hold_seq;
    uint64_t hold_until;
    _Atomic uint64_t gone_seq;
    _Atomic uint64_t popped;
    uint64_t adopt_inc;
    uint64_t adopt_lo;
    uint64_t adopt_hi;
    uint64_t adopt_base;
    uint64_t adopt_cut_at;
    uint64_t adopt_cut_len;
    _Atomic uint64_t last_seq;
    uint32_t dd_head;
    uint32_t dd_tail;
    uint32_t dd_count;
    uint32_t dd_index;
    _Atomic uint64_t delayed;
};
_Static_assert(offsetof(struct shm_part, queue) == 64, "shm_part layout");
_Static_assert(offsetof(struct shm_part, head) == 76, "shm_part layout");
_Static_assert(offsetof(struct shm_part, count) == 96, "shm_part layout");
_Static_assert(offsetof(struct shm_part, next_free) == 152, "shm_part layout");
_Static_assert(offsetof(struct shm_part, hold_seq) == 160, "shm_part layout");
_Static_assert(offsetof(struct shm_part, gone_seq) == 176, "shm_part layout");
_Static_assert(offsetof(struct shm_part, adopt_inc) == 192, "shm_part layout");
_Static_assert(offsetof(struct shm_part, last_seq) == 240, "shm_part layout");
_Static_assert(offsetof(struct shm_part, dd_head) == 248, "shm_part layout");
_Static_assert(offsetof(struct shm_part, dd_index) == 260, "shm_part layout");
_Static_assert(offsetof(struct shm_part, delayed) == 264, "shm_part layout");
_Static_assert(sizeof(struct shm_part) == 272, "shm_part layout");

/* Sequence numbers a hold keeps for the hand-over it waits for: more than
 * a partition can hold, so an adopt always fits below what came after. */
#define SHM_HOLD_SEQS (1ULL << 32)

/* The longest gap between two numbers of a partition a hand-over keeps
 * (a longer one, as a hold leaves between what it brought and the pushes
 * after it, is cut to this): what one partition's messages span, with one
 * gap cut, stays under SHM_HOLD_SEQS. */
#define SHM_ADOPT_GAP (1ULL << 31)

/* Holds the horizon finds without scanning the partition table (more at
 * once are counted in shm_dir.holds_over and found by a scan). */
#define SHM_HOLD_TABLE 256

/* Accounted overhead of a record (what a queue's bytes include). */
#define SHM_QUEUE_OVERHEAD sizeof(struct shm_queue)
#define SHM_PART_OVERHEAD  sizeof(struct shm_part)

/* One slot of the name index: record (kind bit 31 | index) + 1, or 0. */
struct shm_dir_slot {
    uint32_t ref;
    uint32_t hash;
};

#define SHM_DIR_PART_BIT 0x80000000u

/*
 * struct shm_dir - head of the DIR region; the tables follow it.
 *   off  size  field        protected by
 *     0     8  magic        immutable
 *     8    40  lock         robust: index, free lists, bumps, part lists
 *    48     8  next_seq     atomic (fetch_add under a partition lock)
 *    56     4  max_queues   immutable
 *    60     4  max_parts    immutable
 *    64     4  index_slots  immutable (power of two)
 *    68     4  q_bump       dir lock
 *    72     4  q_free       dir lock (index + 1 list)
 *    76     4  p_bump       dir lock
 *    80     4  p_free       dir lock
 *    84     4  nqueues      dir lock, read racy
 *    88     8  queues_off   immutable, from the region start
 *    96     8  parts_off    immutable
 *   104     8  index_off    immutable
 *   112     8  parked_off   immutable (parked-pop counts)
 *   120     4  parked_cols  immutable
 *   128     8  due_off      immutable (the due heap, due.h)
 *   136     8  relief_after master only (no queue-table relief before this
 *                           time, ms: the last pass collected nothing)
 *   144     4  relief_next  master only (the queue record relief looks at
 *                           next: it scans the table in turn)
 *   152     4  holds        atomic: hand-over holds outstanding (hold_seq
 *                           set), at least (horizon.c: a holder killed
 *                           between two steps leaves it high, never low)
 *   156     4  holds_over   atomic: outstanding holds not in hold_parts[], at
 *                           least (the horizon then scans the partitions)
 *   160  1024  hold_parts[] atomic: partition idx + 1 of a hold (0: free);
 *                           set before its hold_seq, freed after it is 0
 *  1184     8  join_until   atomic, master writes: a join's window (ms, 0:
 *                           none): until then a push holds the partition
 *                           it lands in for the hand-over that may be on
 *                           its way (part_move.h, shm_part_join_hold_locked)
 */
struct shm_dir {
    uint64_t magic;
    pthread_mutex_t lock;
    _Atomic uint64_t next_seq;
    uint32_t max_queues;
    uint32_t max_parts;
    uint32_t index_slots;
    _Atomic uint32_t q_bump;
    uint32_t q_free;
    _Atomic uint32_t p_bump;
    uint32_t p_free;
    uint32_t nqueues;
    uint64_t queues_off;
    uint64_t parts_off;
    uint64_t index_off;
    uint64_t parked_off;  /* uint16 counts: [queues + parts][parked_cols] */
    uint32_t parked_cols; /* one column per worker slot */
    uint32_t pad;
    uint64_t due_off; /* the due heap (due.h), immutable */
    uint64_t relief_after;
    uint32_t relief_next;
    uint32_t pad2;
    _Atomic uint32_t holds;
    _Atomic uint32_t holds_over;
    _Atomic uint32_t hold_parts[SHM_HOLD_TABLE];
    _Atomic uint64_t join_until;
};
_Static_assert(offsetof(struct shm_dir, next_seq) == 48, "shm_dir layout");
_Static_assert(offsetof(struct shm_dir, queues_off) == 88, "shm_dir layout");
_Static_assert(offsetof(struct shm_dir, due_off) == 128, "shm_dir layout");
_Static_assert(offsetof(struct shm_dir, relief_after) == 136, "shm_dir layout");
_Static_assert(offsetof(struct shm_dir, relief_next) == 144, "shm_dir layout");
_Static_assert(offsetof(struct shm_dir, holds) == 152, "shm_dir layout");
_Static_assert(offsetof(struct shm_dir, hold_parts) == 160, "shm_dir layout");
_Static_assert(offsetof(struct shm_dir, join_until) == 1184, "shm_dir layout");

/* A record looked up: index and the generation it had. */
struct shm_ref {
    uint32_t idx;
    uint32_t gen;
};

/* shm_dir_of - the DIR region's header (inline: due.c, whose heap lives in
 * this region, reads it without calling back into dir.c). */
static inline struct shm_dir *
shm_dir_of(struct shm_seg *seg)
{
    return shm_region(seg, SHM_REGION_DIR);
}

/*
 * shm_dir_parked - the parked-pop counts of a queue record (part 0) or a
 * partition record (part 1): one counter per worker, which only that worker
 * changes (atomically) and the master zeroes when the worker dies, so the
 * counts stay exact across a crash.  The row is zeroed when the record is
 * (re)used.
 */
_Atomic uint16_t *shm_dir_parked(struct shm_seg *seg, int part, uint32_t idx);

/* shm_dir_parked_sum - the row's total: pops parked on the record. */
uint64_t shm_dir_parked_sum(struct shm_seg *seg, int part, uint32_t idx);

/* shm_dir_queue - queue record idx (inline: every request reaches its
 * records through it). */
static inline struct shm_queue *
shm_dir_queue(struct shm_seg *seg, uint32_t idx)
{
    struct shm_dir *d = shm_dir_of(seg);

    return (struct shm_queue *)((unsigned char *)d + d->queues_off) + idx;
}

/* shm_dir_part - partition record idx. */
static inline struct shm_part *
shm_dir_part(struct shm_seg *seg, uint32_t idx)
{
    struct shm_dir *d = shm_dir_of(seg);

    return (struct shm_part *)((unsigned char *)d + d->parts_off) + idx;
}

/* shm_dir_lock - take the dir lock (repairing after a dead holder). */
int shm_dir_lock(struct shm_seg *seg);
void shm_dir_unlock(struct shm_seg *seg);

/*
 * shm_dir_find_queue - look queue up; with create, make it (implicit) when
 * missing.  0 with *out, -ENOENT, -EOVERFLOW (table full), -ENOBUFS (name).
 */
int shm_dir_find_queue(struct shm_seg *seg, int w, struct shm_name name,
                       int create, uint64_t now, struct shm_ref *out);

/* shm_dir_find_part - same for a partition of queue q. */
int shm_dir_find_part(struct shm_seg *seg, int w, struct shm_ref q,
                      struct shm_name name, int create, uint64_t now,
                      struct shm_ref *out);

/*
 * shm_dir_free_part - unindex partition idx and free its record and name
 * (its contents are already gone; call with its lock NOT held).  Without
 * the dir lock (a bounded wait, lock.h) the record stays dead on its
 * queue's list, as a deleter killed in between leaves it: the next free of
 * the queue's partitions finds it (-ESTALE) and frees it.
 */
void shm_dir_free_part(struct shm_seg *seg, int w, uint32_t idx);

/* shm_dir_free_queue - unindex and free queue idx; -EBUSY when it still
 * has partitions (one was created meanwhile).  Queue lock held. */
int shm_dir_free_queue(struct shm_seg *seg, int w, uint32_t idx);

/* shm_dir_queue_parts - copy up to n partition refs of queue q (dir lock
 * briefly); returns how many the queue has (may exceed n), or -errno when
 * the dir lock was not taken (-ETIMEDOUT: lock.h). */
int64_t shm_dir_queue_parts(struct shm_seg *seg, struct shm_ref q,
                            struct shm_ref *out, uint32_t n);

/* shm_dir_name_hash - the hash the index keys a name by. */
uint64_t shm_dir_name_hash(struct shm_name name, uint64_t seed);

#endif
