/*
 * ring.h - one partition's contents: messages in push order, the per-group
 * states (cursor, leases, skipped) and the queue's group registry entries
 * they point to.  Everything lives in arena cells; the partition record
 * (struct shm_part, dir.h) holds the heads.  The messages are a singly
 * linked list in push order, each one run of cells: a 32-byte header, then
 * the payload as sent, so a pop copies it out without parsing.  The head
 * is freed once every group the queue knows is past it and some group has
 * read it.
 *
 * Locking: every _locked function runs under the partition's robust lock
 * (shm_ring_lock).  A dead holder is repaired by shm_ring_repair(), which
 * re-derives the partition from a validated walk or wipes it.
 * Errors: 0 or -errno.
 */
#ifndef MAYFLY_SHM_RING_H
#define MAYFLY_SHM_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/arena.h"
#include "shm/broker.h"
#include "shm/dir.h"

/*
 * struct shm_msg - head of a message's run of cells (first cell).
 *   off  size  field    written by             protected by
 *     0     4  chain    arena (run length)     -
 *     4     4  len      pusher, before link    immutable once linked
 *     8     8  seq      pusher, under lock     immutable once linked
 *    16     8  enq_ms   pusher, before link    immutable once linked
 *                          (bits 0-42: when it became, or becomes,
 *                          visible, ms: the push's time plus its
 *                          delayMs; bit 43: it carries a conflation
 *                          key; bits 44-62: its own ttlSeconds, 0:
 *                          the queue's; bit 63: pushed with a delay;
 *                          shm_msg_at, shm_msg_keyed, shm_msg_ttl,
 *                          shm_msg_hidden)
 *    24     4  next     pusher (link)          partition lock
 *    28     2  read     first delivery,        partition lock (1: some
 *                          withdrawal,           group has read it;
 *                          conflation            SHM_MSG_WITHDRAWN: its
 *                                                request gave up unread;
 *                                                SHM_MSG_SUPERSEDED: a
 *                                                later one of its key
 *                                                replaced it, and a lease
 *                                                still holds it)
 *    30     2  reply_len pusher, before link   immutable once linked
 * The data follows at data offset SHM_MSG_HDR (cell offset 32): reply_len
 * bytes of replyTo (a request's inbox, SPEC §9), then the payload as sent;
 * len counts both.  A keyed message (shm_msg_keyed: pushed with a key to a
 * queue that conflates, SPEC §13) has 8 more bytes after them, its key's
 * hash (shm_msg_key), which len does not count and the run does
 * (shm_msg_stored).  A message no group has read stays, whatever the
 * groups' positions; a request withdrawn unread leaves the list at once
 * (shm_ring_withdraw_locked), and one marked SHM_MSG_WITHDRAWN (past its
 * own ttl, or a request a lease still owed) or SHM_MSG_SUPERSEDED (a
 * later message of its key replaced it while a group held it leased) is
 * passed over by every group (shm_msg_passed).
 */
struct shm_msg {
    uint32_t chain;
    uint32_t len;
    uint64_t seq;
    uint64_t enq_ms;
    uint32_t next;
    uint16_t read;
    uint16_t reply_len;
};
_Static_assert(offsetof(struct shm_msg, read) == 28, "shm_msg layout");
_Static_assert(offsetof(struct shm_msg, reply_len) == 30, "shm_msg layout");

#define SHM_MSG_WITHDRAWN                                                      \
    2 /* shm_msg.read: a message past its own ttl, or a
                             * request withdrawn unread that a lease still
                             * owed (passed over) */
#define SHM_MSG_SUPERSEDED                                                     \
    3 /* shm_msg.read: a later message of its key replaced it
       * (SPEC §13) while a group held it leased: passed over by
       * every group and tail, never delivered again, its leases
       * only LEASED ones, and it leaves the list as the last of
       * them ends (shm_ring_conflate_locked) */

/* shm_msg_passed - does every group's cursor, and every tail, pass m over
 * (SHM_MSG_WITHDRAWN or SHM_MSG_SUPERSEDED)? */
static inline int
shm_msg_passed(const struct shm_msg *m)
{
    return m->read >= SHM_MSG_WITHDRAWN;
}

/* enq_ms packs a time, whether the message is keyed, its own ttl and
 * whether it was delayed (SPEC §13): 43 bits of ms of CLOCK_MONOTONIC
 * reach 278 years of uptime; a message's ttlSeconds is at most
 * SHM_MSG_TTL_MAX (six days).  Only a message pushed with a delay is ever
 * hidden: another worker's clock read a moment before a push must not
 * hide a message pushed without one. */
#define SHM_MSG_TIME_BITS 44 /* where the ttl starts */
#define SHM_MSG_TIME_MASK ((1ULL << 43) - 1)
#define SHM_MSG_KEYED     (1ULL << 43)
#define SHM_MSG_KEY_BYTES 8
#define SHM_MSG_TTL_MAX   ((1u << 19) - 1)
#define SHM_MSG_DELAYED   (1ULL << 63)

/* shm_msg_keyed - does m carry a conflation key's hash after its data? */
static inline int
shm_msg_keyed(const struct shm_msg *m)
{
    return (m->enq_ms & SHM_MSG_KEYED) != 0;
}

/* shm_msg_stored - the data bytes m's run holds: len, and its key. */
static inline size_t
shm_msg_stored(const struct shm_msg *m)
{
    return (size_t)m->len + (shm_msg_keyed(m) ? SHM_MSG_KEY_BYTES : 0);
}

/* shm_msg_at - when m became (or becomes) visible, ms. */
static inline uint64_t
shm_msg_at(const struct shm_msg *m)
{
    return m->enq_ms & SHM_MSG_TIME_MASK;
}

/* shm_msg_ttl - m's own ttl in seconds (0: the queue's alone). */
static inline uint32_t
shm_msg_ttl(const struct shm_msg *m)
{
    return (uint32_t)(m->enq_ms >> SHM_MSG_TIME_BITS) & SHM_MSG_TTL_MAX;
}

/* shm_msg_hidden - is m not visible yet at now (pushed with a delay)? */
static inline int
shm_msg_hidden(const struct shm_msg *m, uint64_t now)
{
    return (m->enq_ms & SHM_MSG_DELAYED) != 0 && shm_msg_at(m) > now;
}

/* shm_msg_pack - the enq_ms of a message visible at at with its own ttl
 * (delayed: it was pushed with a delay). */
static inline uint64_t
shm_msg_pack(uint64_t at, uint32_t ttl_s, int delayed)
{
    return (at & SHM_MSG_TIME_MASK) |
           (uint64_t)(ttl_s & SHM_MSG_TTL_MAX) << SHM_MSG_TIME_BITS |
           (delayed ? SHM_MSG_DELAYED : 0);
}

/* shm_msg_expired - has m passed its own ttl at now? */
static inline int
shm_msg_expired(const struct shm_msg *m, uint64_t now)
{
    uint32_t ttl = shm_msg_ttl(m);

    return ttl != 0 && shm_msg_at(m) + (uint64_t)ttl * 1000 <= now;
}

/* shm_msg_outlived - has m passed its own ttl or its queue's (queue_ttl_s,
 * 0: none) at now?  Every reader passes over such a message; one that
 * passed its own is also marked (counted once when it expired). */
static inline int
shm_msg_outlived(const struct shm_msg *m, uint32_t queue_ttl_s, uint64_t now)
{
    return shm_msg_expired(m, now) ||
           (queue_ttl_s != 0 &&
            shm_msg_at(m) + (uint64_t)queue_ttl_s * 1000 <= now);
}

/*
 * struct shm_dd - one key of a partition's dedupe window (SPEC §13), a cell
 * of the list p->dd_head .. p->dd_tail, oldest first.
 *   off  size  field     written by        protected by
 *     0     4  chain     arena             -
 *     4     4  next      push (link)       partition lock
 *     8     8  hash      push, before link immutable once linked (XXH3 of
 *                                          the key)
 *    16     8  seq       push, before link the id the first push answered:
 *    24     8  inc                         its sequence and incarnation
 *                                          (another node's after a
 *                                          hand-over)
 *    32     8  at_ms     push, before link when the key was first seen
 *    40     4  bnext     index             partition lock: the next older
 *                                          key of its bucket in the window's
 *                                          hash index (dd_index.h), 0: none;
 *                                          meaningless without an index
 *    44     4  pad
 */
struct shm_dd {
    uint32_t chain;
    uint32_t next;
    uint64_t hash;
    uint64_t seq;
    uint64_t inc;
    uint64_t at_ms;
    uint32_t bnext;
    uint32_t pad;
};
_Static_assert(offsetof(struct shm_dd, bnext) == 40, "shm_dd layout");
_Static_assert(sizeof(struct shm_dd) <= SHM_CELL_BYTES, "shm_dd layout");
_Static_assert(sizeof(struct shm_msg) == 32, "shm_msg layout");

#define SHM_MSG_HDR 28 /* payload's data offset in the run */

/*
 * struct shm_grp - a group the queue knows (one cell, registry list).
 *   off  size  field        written by       protected by
 *     0     4  chain        arena (run length) -
 *     4     4  next         registry         queue lock
 *     8     8  name_hash    creator          immutable
 *    16     4  name_ref     creator          immutable
 *    20     4  name_len     creator          immutable
 *    24     8  last_active  pop/ack          atomic
 *    32     8  start_seq    creator          immutable (from=new/last)
 *    40     4  from         creator          immutable
 */
struct shm_grp {
    uint32_t chain;
    uint32_t next;
    uint64_t name_hash;
    uint32_t name_ref;
    uint32_t name_len;
    _Atomic uint64_t last_active;
    uint64_t start_seq;
    uint32_t from;
    uint32_t pad;
};
_Static_assert(sizeof(struct shm_grp) <= SHM_CELL_BYTES, "shm_grp layout");

/*
 * struct shm_gs - one group's state in one partition (one cell).
 *   off  size  field      meaning (all under the partition lock)
 *     0     4  chain      arena (run length)
 *     4     4  next       next state of the partition
 *     8     8  name_hash  copy of the registry entry's
 *    16     4  grp        registry entry cell
 *    20     4  cursor     message of the next first delivery, 0: none yet
 *    24     8  skipped    dropped before this group read them
 *    32     4  lhead      leases, sorted by seq
 *    36     4  ltail
 *    40     4  nleases
 *    44     4  nready     leases ready for redelivery
 *    48     8  due        lower bound of the earliest lease deadline
 *    56     8  last       seq the cursor moved past last; the cursor is the
 *                         first message above it (what repair re-derives)
 */
struct shm_gs {
    uint32_t chain;
    uint32_t next;
    uint64_t name_hash;
    uint32_t grp;
    uint32_t cursor;
    uint64_t skipped;
    uint32_t lhead;
    uint32_t ltail;
    uint32_t nleases;
    uint32_t nready;
    uint64_t due;
    uint64_t last;
};
_Static_assert(sizeof(struct shm_gs) <= SHM_CELL_BYTES, "shm_gs layout");

enum shm_lease_state {
    SHM_LEASE_LEASED = 1,
    SHM_LEASE_READY_INC,  /* redeliver with attempts + 1 */
    SHM_LEASE_READY_SAME, /* redeliver with the same attempts (release) */
    SHM_LEASE_DELAYED,    /* not before deadline, then READY_INC: a message
                           * not visible yet (attempts 0) or a retry with a
                           * delay; neither leased nor ready */
};

/*
 * struct shm_lease - one delivered, unacknowledged message of a group.
 *   off  size  field
 *     0     4  chain     arena (run length)
 *     4     4  next      next lease of the group (higher seq)
 *     8     8  seq
 *    16     8  deadline  ms (a ready one: 0 when the consumer gave it
 *                        back, else the lease's, run out)
 *    24     4  attempts  of the last delivery (0: none yet)
 *    28     4  state     enum shm_lease_state (DELAYED: deadline is
 *                        when it becomes ready)
 *    32     4  msg       the message chain
 */
struct shm_lease {
    uint32_t chain;
    uint32_t next;
    uint64_t seq;
    uint64_t deadline;
    uint32_t attempts;
    uint32_t state;
    uint32_t msg;
};
_Static_assert(sizeof(struct shm_lease) <= SHM_CELL_BYTES, "shm_lease layout");

/* Groups a queue may know (so a partition has at most this many states). */
#define SHM_RING_GROUPS_MAX 1024

/* Why messages leave a partition early. */
enum shm_drop_why { SHM_DROP_TTL, SHM_DROP_EVICT, SHM_DROP_RESET };

/* Everything a _locked operation needs besides the partition. */
struct shm_ring_ctx {
    struct shm_seg *seg;
    int w;
    struct shm_part *p;
    struct shm_queue *q;
    uint64_t now;
    /* Where a queue with a deadLetter copies what it drops (shm/dead.h);
     * NULL: such a drop waits for a caller with a sink (the master's upkeep
     * finds it due), and an ack of one answers SHM_OUT_DEFER. */
    struct shm_sink *dead;
};

/* shm_ring_lock - take p's lock as worker w, repairing after a dead holder
 * (what the repair frees goes to w's cache; w < 0: a reader without a slot,
 * whose repair leaves an unlinked chain to the next locker with one). */
int shm_ring_lock(struct shm_seg *seg, int w, struct shm_part *p);
void shm_ring_unlock(struct shm_part *p);

/* What the partition lock's repair callback gets. */
struct shm_ring_repairer {
    struct shm_part *p;
    int w;
};

/* shm_ring_repair - the partition lock's repair callback. */
void shm_ring_repair(struct shm_seg *seg, void *arg);

/* shm_ring_tag_linked - is chain ref's head tagged LINKED?  (Repair: a chain
 * its dead holder had started to free is INFLIGHT or CACHE, and
 * shm_arena_reap() returns it, so repair must not free it again.) */
int shm_ring_tag_linked(struct shm_seg *seg, uint32_t ref);

/* shm_ring_msg_new - allocate and fill one INFLIGHT message chain (no lock),
 * with spare bytes after the payload (SHM_MSG_KEY_BYTES for a keyed one, or
 * 0): -ENOBUFS at the node cap.  *cost is its accounted bytes. */
int shm_ring_msg_new(struct shm_seg *seg, int w, const char *payload,
                     uint32_t len, uint32_t spare, uint64_t now, uint32_t *ref,
                     uint64_t *cost);

/* shm_ring_msg_cost - accounted bytes of a message of len payload bytes
 * (a keyed one's: len + SHM_MSG_KEY_BYTES). */
uint64_t shm_ring_msg_cost(size_t len);

/* shm_ring_msg_key_set - mark the INFLIGHT chain ref (shm_ring_msg_new made
 * it with SHM_MSG_KEY_BYTES to spare) keyed by hash; set enq_ms first. */
void shm_ring_msg_key_set(struct shm_seg *seg, uint32_t ref, uint64_t hash);

/* shm_ring_msg_key - the key hash of keyed message ref. */
uint64_t shm_ring_msg_key(struct shm_seg *seg, uint32_t ref);

/* shm_ring_link_locked - append the chains first..last (already joined by
 * their next fields, n of them, cost bytes), numbering them from the node
 * counter; *first_seq gets the first number. */
void shm_ring_link_locked(struct shm_ring_ctx *c, uint32_t first, uint32_t last,
                          uint32_t n, uint64_t cost, uint64_t *first_seq);

/* shm_ring_last_seq_locked - raise p's last_seq to seq (dir.h), before
 * the link that publishes a message numbered seq. */
void shm_ring_last_seq_locked(struct shm_part *p, uint64_t seq);

/* shm_ring_append_locked - the same for chains numbered already (rising,
 * above every number the partition lists, taken from the node counter). */
void shm_ring_append_locked(struct shm_ring_ctx *c, uint32_t first,
                            uint32_t last, uint32_t n, uint64_t cost);

/* shm_ring_delayed_note_locked - count the messages not visible yet among
 * the n linked from first in p->delayed, and make the partition due when
 * the first becomes visible: the maintenance then wakes parked pops
 * (shm_ring_expire_locked), with no polling. */
void shm_ring_delayed_note_locked(struct shm_ring_ctx *c, uint32_t first,
                                  uint32_t n);

/* shm_ring_gs_find_locked - the partition's state of group name, or 0. */
uint32_t shm_ring_gs_find_locked(struct shm_ring_ctx *c, struct shm_name name,
                                 uint64_t h);

/* shm_ring_gs_add_locked - give the partition a state for registry entry
 * grp (cursor per its from/start_seq).  0, -ENOBUFS. */
int shm_ring_gs_add_locked(struct shm_ring_ctx *c, uint32_t grp);

/* shm_ring_gs_remove_locked - forget registry entry grp's state here. */
void shm_ring_gs_remove_locked(struct shm_ring_ctx *c, uint32_t grp);

/* shm_ring_lease_append_locked - link lease cell l (INFLIGHT) for message
 * ref, the newest s has leased, at the end of s's sorted list; counts it
 * in s, and in the partition when it is LEASED (the caller schedules its
 * deadline). */
void shm_ring_lease_append_locked(struct shm_ring_ctx *c, struct shm_gs *s,
                                  uint32_t l, uint32_t ref, uint64_t deadline,
                                  uint32_t attempts,
                                  enum shm_lease_state state);

/* shm_ring_take_locked - the pop: redeliveries, then new messages, into the
 * sink (with a fmt, broker.h: each message's data through it, read from
 * its cells under this lock, before the next is taken); returns the number
 * taken, -ENOMEM (sink->need) or -ENOBUFS. */
int shm_ring_take_locked(struct shm_ring_ctx *c, uint32_t gs, uint32_t batch,
                         int auto_ack, struct shm_sink *sink);

/* shm_ring_peek_locked - 1 when a take for gs would find something (a
 * redelivery due, or a message not withdrawn past its cursor), else 0;
 * changes nothing, so a message it sees stays unread (withdrawable). */
int shm_ring_peek_locked(struct shm_ring_ctx *c, uint32_t gs);

/* shm_ring_ack_locked - apply acks (outcome set in each). */
void shm_ring_ack_locked(struct shm_ring_ctx *c, uint32_t gs,
                         struct shm_ack *acks, uint32_t n);

/* shm_ring_extend_locked - prolong leases (outcome set in each). */
void shm_ring_extend_locked(struct shm_ring_ctx *c, uint32_t gs,
                            struct shm_ack *ents, uint32_t n);

/* shm_ring_release_locked - lease seq delivered with attempts goes back to
 * ready without counting an attempt; 1 if it did. */
int shm_ring_release_locked(struct shm_ring_ctx *c, uint32_t gs, uint64_t seq,
                            uint32_t attempts);

/* shm_ring_drop_locked - drop up to n oldest messages (leased or not) for
 * why; returns how many went. */
uint64_t shm_ring_drop_locked(struct shm_ring_ctx *c, uint64_t n,
                              enum shm_drop_why why);

/* shm_ring_ttl_locked - drop messages older than the queue's ttl (ttl_s) or
 * their own: from the head, and behind a head pushed with a delay those no
 * group owes anything (SPEC §4: expired messages never hold up a push). */
uint64_t shm_ring_ttl_locked(struct shm_ring_ctx *c, uint32_t ttl_s);

/* shm_ring_expire_locked - turn expired leases into redeliveries (or drops
 * at the retry limit), and end a hold that ran out; returns how many
 * became deliverable (a hold's end that frees messages for pops counts
 * one). */
uint64_t shm_ring_expire_locked(struct shm_ring_ctx *c, uint32_t retry_limit);

/* shm_ring_copy_locked - copy message ref into sink as a pop's record
 * (struct shm_popped) with attempts, taking and marking nothing; -ENOMEM
 * when it does not fit (need set when the sink is empty). */
int shm_ring_copy_locked(struct shm_ring_ctx *c, struct shm_sink *k,
                         uint32_t ref, uint32_t attempts);

/* shm_ring_hold_end_locked - end the partition's hold (shm_part_hold), if
 * any: its numbers are no longer kept, and the horizon forgets it. */
void shm_ring_hold_end_locked(struct shm_ring_ctx *c);

/* shm_ring_join_hold_locked - a push about to take numbers in c's
 * partition (index idx), inside its pushing word's P..C (horizon.c):
 * while a join's window is open (shm_dir.join_until) and no hold is on,
 * hold the partition as shm_part_hold does, until the window's end, so a
 * hand-over on its way here still goes first (part_move.h says when it
 * ends).  Under the partition lock. */
void shm_ring_join_hold_locked(struct shm_ring_ctx *c, uint32_t idx);

/* shm_ring_reset_locked - drop everything, void leases, rewind cursors. */
uint64_t shm_ring_reset_locked(struct shm_ring_ctx *c);

/* shm_ring_clear_locked - free everything the partition holds, group states
 * and a hold included (before the record is freed). */
uint64_t shm_ring_clear_locked(struct shm_ring_ctx *c);

/* shm_ring_advance_locked - free head messages no group needs any more. */
void shm_ring_advance_locked(struct shm_ring_ctx *c);

/* shm_ring_withdraw_locked - request message ref (after prev; 0: it is the
 * head) gave up (SPEC §9): while no group has read it or owes it, it is
 * unlinked and freed at once (out of the count, the bytes and the bounds),
 * as a replaced message is, and 1; else 0 and nothing changes. */
int shm_ring_withdraw_locked(struct shm_ring_ctx *c, uint32_t prev,
                             uint32_t ref);

/* ---- the dedupe window (SPEC §13): keys of the partition, oldest first */

/* shm_ring_dd_trim_locked - forget the keys first seen window_ms or more
 * before now, and the oldest past max keys. */
void shm_ring_dd_trim_locked(struct shm_ring_ctx *c, uint64_t window_ms,
                             uint32_t max);

/* shm_ring_dd_find_locked - the window's oldest key of hash seen within
 * window_ms of now, or NULL.  O(1) through the window's hash index
 * (dd_index.h); O(keys in the window) without one. */
const struct shm_dd *shm_ring_dd_find_locked(struct shm_ring_ctx *c,
                                             uint64_t hash, uint64_t window_ms);

/* shm_ring_dd_append_locked - link cell d (INFLIGHT, filled, next 0) as
 * the newest key (and into the index: made, or grown, as the count asks). */
void shm_ring_dd_append_locked(struct shm_ring_ctx *c, uint32_t d);

/* shm_ring_dd_undo_locked - the window's key of hash (seen within
 * window_ms, pushed here: incarnation inc) and its message, if that is
 * still unread (no group has read it or owes it: a withdrawal's rule),
 * both unlinked and freed.  1 if so, else 0 (nothing changes).  For an
 * adopt whose record carries the same key, first seen on the other node. */
int shm_ring_dd_undo_locked(struct shm_ring_ctx *c, uint64_t hash,
                            uint64_t window_ms, uint64_t inc);

/* shm_ring_dd_reindex_locked - the index rebuilt from the window's list
 * (after keys were linked around it: an adopt), grown to fit if it can. */
void shm_ring_dd_reindex_locked(struct shm_ring_ctx *c);

/* ---- conflation (SPEC §13): a keyed message replaces older ones ------- */

/*
 * struct shm_ring_keys - the keys a conflation looks for: n distinct
 * hashes, sorted, and beside each a word the walk uses (process memory,
 * made before the lock: no malloc under it).
 */
struct shm_ring_keys {
    const uint64_t *hash;
    uint32_t *last; /* [n] scratch */
    uint32_t n;
};

/*
 * shm_ring_conflate_locked - replace (SPEC §13): every replaceable message
 * of a key of k that a later message of the partition carries the same
 * key as is replaced for every group that has not read it yet, the later
 * one keeping its place, and counted once in SHM_C_CONFLATED.
 * Replaceable: keyed, not pushed with a delay, not passed over already,
 * and not yet had by some group: read by none, or not yet reached by a
 * group's cursor, or owed a first delivery (an adopt's lease of attempts
 * 0), or the queue knows a group with no state here.  One every group has had
 * is left to the head's advance.  Replaced: each lease waiting for a
 * redelivery of it is voided (the group reads the newer value anyway);
 * then, when no group holds it leased, it is unlinked and freed at once;
 * else it is marked SHM_MSG_SUPERSEDED and stays, passed over, until the
 * last lease ends (ack, expiry, release), which unlinks it.  Returns how
 * many were replaced.  With count_only nothing changes: it counts (and
 * adds their bytes to *cost) only those a message of each key of k
 * appended now would free at once: what a push's bounds may net out.
 */
uint32_t shm_ring_conflate_locked(struct shm_ring_ctx *c,
                                  const struct shm_ring_keys *k, int count_only,
                                  uint64_t *cost);

/* shm_ring_keys_find - the index of hash in k, or k->n. */
uint32_t shm_ring_keys_find(const struct shm_ring_keys *k, uint64_t hash);

/* Depth figures of the partition for a group state (0: for none). */
struct shm_ring_depth {
    uint64_t pending, leased, skipped, oldest_age_ms;
    uint64_t delayed; /* not visible yet, or a retry waiting out its delay */
};
void shm_ring_depth_locked(struct shm_ring_ctx *c, uint32_t gs,
                           struct shm_ring_depth *out);

/* Accessors. */
static inline struct shm_msg *
shm_ring_msg(struct shm_seg *seg, uint32_t ref)
{
    return shm_cell(seg, ref);
}

static inline struct shm_gs *
shm_ring_gs(struct shm_seg *seg, uint32_t ref)
{
    return shm_cell(seg, ref);
}

static inline struct shm_grp *
shm_ring_grp(struct shm_seg *seg, uint32_t ref)
{
    return shm_cell(seg, ref);
}

static inline struct shm_lease *
shm_ring_lease(struct shm_seg *seg, uint32_t ref)
{
    return shm_cell(seg, ref);
}

static inline struct shm_dd *
shm_ring_dd(struct shm_seg *seg, uint32_t ref)
{
    return shm_cell(seg, ref);
}

#endif
