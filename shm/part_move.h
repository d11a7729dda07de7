/*
 * part_move.h - a partition's contents moved between nodes: shm_part_take
 * serialises (queue, partition) into a binary record and empties it;
 * shm_part_adopt appends a record's messages to (queue, partition) here
 * and puts every group back where it was.  The master's hand-over driver
 * carries the record over the cluster port (SPEC §5: graceful stop, join
 * or return); shm/ knows nothing of that.
 *
 * The record is native byte order (both ends run the same build), 8-byte
 * aligned throughout, and self-describing: magic and version first, then
 * counts, each checked by the decoder against the bytes that follow.
 *
 *   struct shm_ho_hdr                       48 B
 *   nmsgs x  struct shm_ho_msg + payload     32 B + len, padded to 8
 *            [+ its key's hash]               8 B (SHM_HO_KEYED)
 *   ngroups x struct shm_ho_grp + name       24 B + name_len, padded to 8
 *             + nredo x struct shm_ho_redo   16 B each, indexes rising
 *   ndd x    struct shm_ho_dd                32 B each: the dedupe window
 *
 * Locking: each call takes and drops the partition lock (and, to create
 * groups, the queue lock first); no malloc, syscall or logging under a
 * lock.  Errors: a count or -errno, as listed per call, and -ETIMEDOUT
 * for a lock held past the master's bound (lock.h): nothing taken, held
 * or linked then (an adopt may have made the record's groups known).
 */
#ifndef MAYFLY_SHM_PART_MOVE_H
#define MAYFLY_SHM_PART_MOVE_H

#include <stddef.h>
#include <stdint.h>

#include "shm/broker.h"
#include "shm/segment.h"

#define SHM_HO_MAGIC     0x4f48594du /* "MYHO" */
#define SHM_HO_VERSION   3  /* 2: sequences; 3: delays, ttls, dedupe keys */
#define SHM_HO_READ      1u /* shm_ho_msg.flags: some group has read it */
#define SHM_HO_WITHDRAWN 2u /* a request withdrawn unread (shm/inbox.h) */
#define SHM_HO_KEYED                                                           \
    4u                        /* a conflation key's hash (u64) follows the
                               * padded payload (ring.h, shm_msg_keyed) */
#define SHM_HO_REPLY_SHIFT 16 /* flags >> 16: the message's reply_len */

/*
 * struct shm_ho_hdr - the record's head.
 *   off  size  field
 *     0     4  magic    SHM_HO_MAGIC
 *     4     4  version  SHM_HO_VERSION
 *     8     4  nmsgs    messages that follow, in push order
 *    12     4  ngroups  group entries after the messages
 *    16     8  size     bytes of the whole record, this header included
 *    24     8  inc      the sender's incarnation (0: unknown)
 *    32     8  gone     the highest number (the sender's) of a message of
 *                       the partition that left it and is not carried
 *                       (0: none): a stream there at or past it missed
 *                       nothing
 *    40     4  ndd      dedupe window keys after the groups (SPEC §13)
 *    44     4  pad      0
 */
struct shm_ho_hdr {
    uint32_t magic;
    uint32_t version;
    uint32_t nmsgs;
    uint32_t ngroups;
    uint64_t size;
    uint64_t inc;
    uint64_t gone;
    uint32_t ndd;
    uint32_t pad;
};
_Static_assert(sizeof(struct shm_ho_hdr) == 48, "shm_ho_hdr layout");

/*
 * struct shm_ho_msg - one message; its payload (len bytes, the JSON text as
 * stored) follows, zero-padded to 8.
 *   off  size  field
 *     0     4  len      payload bytes
 *     4     4  flags    SHM_HO_READ, SHM_HO_WITHDRAWN, SHM_HO_KEYED;
 *                          bits 16-31: reply_len (replyTo bytes leading
 *                          the payload)
 *     8     8  age_ms   now - the time it became visible, at the take: ttl
 *                       keeps counting; as int64, negative for a message
 *                       not visible yet (delayMs): what is left of it
 *    16     8  seq      its number at the sender (rising): the receiver
 *                       keeps the distances, so a stream's position there
 *                       still names a place here (tail.h, shm_tail_map)
 *    24     4  ttl_s    its own ttlSeconds (0: the queue's)
 *    28     4  pad      0
 */
struct shm_ho_msg {
    uint32_t len;
    uint32_t flags;
    uint64_t age_ms;
    uint64_t seq;
    uint32_t ttl_s;
    uint32_t pad;
};
_Static_assert(sizeof(struct shm_ho_msg) == 32, "shm_ho_msg layout");

/*
 * struct shm_ho_grp - one group's position in the partition; its name
 * (name_len bytes, 0: queue mode) follows, zero-padded to 8, then nredo
 * struct shm_ho_redo.
 *   off  size  field
 *     0     4  name_len   <= SHM_NAME_MAX
 *     4     4  from       enum shm_from the group was made with
 *     8     8  skipped    messages dropped before this group read them
 *    16     4  cursor     index of the first message it has not had a
 *                         first delivery of (nmsgs: none)
 *    20     4  nredo      redeliveries owed
 * Messages before the cursor that are not redeliveries are done for this
 * group: it never gets them again.
 */
struct shm_ho_grp {
    uint32_t name_len;
    uint32_t from;
    uint64_t skipped;
    uint32_t cursor;
    uint32_t nredo;
};
_Static_assert(sizeof(struct shm_ho_grp) == 24, "shm_ho_grp layout");

/*
 * struct shm_ho_redo - a message the group gets again before new ones.
 *   off  size  field
 *     0     4  index     into the messages, < the group's cursor, rising
 *     4     4  attempts  what its next delivery carries (>= 1): a lease
 *                        taken while out comes back with attempts + 1, a
 *                        released one with the same
 *     8     4  delay_ms  not before this long (a retry's delay, or a
 *                        message not visible yet); 0: at once
 *    12     4  pad       0
 */
struct shm_ho_redo {
    uint32_t index;
    uint32_t attempts;
    uint32_t delay_ms;
    uint32_t pad;
};
_Static_assert(sizeof(struct shm_ho_redo) == 16, "shm_ho_redo layout");

/*
 * struct shm_ho_dd - one key of the partition's dedupe window (ring.h,
 * struct shm_dd): the id it names keeps its incarnation.
 *   off  size  field
 *     0     8  hash
 *     8     8  seq
 *    16     8  inc
 *    24     8  age_ms   now - when the key was first seen, at the take
 */
struct shm_ho_dd {
    uint64_t hash;
    uint64_t seq;
    uint64_t inc;
    uint64_t age_ms;
};
_Static_assert(sizeof(struct shm_ho_dd) == 32, "shm_ho_dd layout");

/* Caller-owned buffer the take writes the record into (like struct
 * shm_sink): used is the record's length on success; need the bytes it
 * requires with -ENOMEM. */
struct shm_ho_sink {
    unsigned char *buf;
    size_t cap;
    size_t used; /* out */
    size_t need; /* out, with -ENOMEM */
};

/*
 * shm_part_take - serialise (queue, part) into out and empty it: its
 * messages, leases and group states are freed as a reset frees them (not
 * counted as drops: they moved), the queue's registry is left alone, and
 * pops parked on it are woken (they find it empty and park again, or go to
 * the new owner).  A lease at the queue's retryLimit is not carried: its
 * next failure would drop it, so it is dropped here and counted as a
 * retry-limit drop.  A superseded message (ring.h, SHM_MSG_SUPERSEDED)
 * is not carried, nor its leases: no group would read it again, there
 * or here (counted as conflated when it was replaced).  Each leased message carried counts as a hand-over
 * redelivery.  w is a worker slot or SHM_STATS_MASTER.
 * Returns the messages taken (>= 0); -ENOENT when this node holds no such
 * queue or partition; -ENOMEM with out->need set, nothing changed, when
 * out->cap is too small (grow it and call again).
 */
int shm_part_take(struct shm_seg *seg, int w, struct shm_name queue,
                  struct shm_name part, uint64_t now, struct shm_ho_sink *out);

/*
 * shm_part_adopt - check the record (rec, len) whole, then append its
 * messages to (queue, part) in order, all or nothing, creating the queue
 * (implicit, node defaults) and the partition as a push does.  They get new
 * ids from this node's counter and enqueue time now - age, and keep their
 * conflation keys: on a queue that conflates, a message of a key the
 * record carries gives way to a later one of that key in the partition
 * once all is placed (a push here during a hold is later than what the
 * record brings), as a push's would (ring.h, shm_ring_conflate_locked).
 * A record that
 * names its sender's incarnation keeps the distances between the sender's
 * numbers (the message numbered o there is base + o - lo here, the range
 * taken from the counter, or the hold's, whole) and the partition notes
 * (incarnation, lo, hi, base): a stream's position at the sender maps to
 * one here (shm_tail_map).  A span past SHM_HOLD_SEQS numbers is
 * numbered on end to end, and noted as no adoption.  The queue's
 * maxLength, maxBytes and policy are not applied (a hand-over must not lose
 * messages to them); the node cap is, as for a push.
 *
 * Each group of the record is made known to the queue and given a state
 * here, and put where it was, whatever it read here before: what it had
 * still to read here comes first (as first deliveries), then its
 * redeliveries, in order, with the attempts recorded (the retry limit
 * applies when they fail again), then first deliveries from its cursor;
 * what it was done with it never gets again.  Groups the record does not
 * name see the messages as any push.  Parked pops are woken.
 *
 * After shm_part_hold, the messages go before those pushed since the hold
 * (numbered from what it kept), unless the hold ran out and a pop or the
 * maintenance came since (either ends it), or a group has read one of
 * those: then after them, as a push.  Either way the hold ends.
 *
 * Returns the messages adopted (>= 0); -EBADMSG for a malformed or
 * truncated record (nothing changed); -ENOBUFS at the node cap (nothing
 * adopted); -ENOMEM (malloc); -EOVERFLOW (a table or a queue's groups are
 * full).  On the last three an empty queue, partition or group the call
 * created may remain, to be collected as any idle one.
 */
int shm_part_adopt(struct shm_seg *seg, int w, struct shm_name queue,
                   struct shm_name part, const void *rec, size_t len,
                   uint64_t now);

/*
 * shm_part_hold - a hand-over of (queue, part) is on its way here (its
 * sender said so before it announced its leave): keep SHM_HOLD_SEQS
 * sequence numbers for the messages it brings and let pops read nothing
 * here for ms, so pushes that arrive first are read after it (the adopt
 * ends the hold; once ms ran out, the first pop or the maintenance, for
 * which the partition is due then).  The horizon (shm/horizon.h) stays
 * below the kept numbers until the hold ends.  Creates the queue and
 * partition as a push does.  w is a slot (a worker's or SHM_STATS_MASTER):
 * the numbers are taken under its pushing word, as a push takes them.
 * 0, or -errno as shm_dir_find_queue.
 */
int shm_part_hold(struct shm_seg *seg, int w, struct shm_name queue,
                  struct shm_name part, uint64_t now, uint64_t ms);

/*
 * A join's window (SPEC §5, join or return; master/join.c says why order
 * holds).  A node that has just become live owns partitions whose old
 * owners have still to ship them, and does not know which: until the
 * window ends, every push that lands in a partition here holds it first,
 * as shm_part_hold does (SHM_HOLD_SEQS numbers kept below the push's own,
 * pops held) up to the window's end (ring.h, shm_ring_join_hold_locked).
 * An adopt ends such a hold as any; the master ends those nobody ships
 * once every peer has said what it ships (shm_part_unhold).
 *
 * shm_part_join_window - open the window until until (ms), or close it
 * (0).  Master only.
 */
void shm_part_join_window(struct shm_seg *seg, uint64_t until);

/*
 * shm_part_unhold - end the hold on (queue, part) that a join's window of
 * end until made (its hold_until is until: not one a draining peer's
 * "h" line or a naming made), as one that ran out ends (what it kept the
 * numbers for comes after what is there, as a push would), and wake its
 * readers.  0 (also when there is no such partition or hold), or
 * -ETIMEDOUT (lock.h).
 */
int shm_part_unhold(struct shm_seg *seg, int w, struct shm_name queue,
                    struct shm_name part, uint64_t until, uint64_t now);

#endif
