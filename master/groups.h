/*
 * groups.h - what the masters' heartbeats carry besides "alive": every
 * group this node's queues know, and, on the beat that announces a leave,
 * the partitions each peer is about to be handed (SPEC §5: groups are the
 * cluster's; a graceful move keeps order).
 *
 * A heartbeat's body is the sender's member index on the first line, then
 * one line per item (names hold no control characters, so a tab and a
 * newline delimit them):
 *   g <from> <idle ms> <queue> TAB <group> LF   a group the queue knows
 *   h <queue> TAB <partition> LF                 a hand-over coming to you
 *   J <incarnation> LF                           to that incarnation of
 *                                                you, which joined: the
 *   H <queue> TAB <partition> LF                 partitions I ship you,
 *                                                all of them (join.h)
 * Master only, single-threaded.
 */
#ifndef MAYFLY_MASTER_GROUPS_H
#define MAYFLY_MASTER_GROUPS_H

#include <stddef.h>
#include <stdint.h>

struct master;
struct http_buf;

/* How long a partition announced as coming waits for its hand-over before
 * pops read it again (the README says so). */
#define MASTER_HOLD_MS 5000

/* master_groups_beat - append this beat's group lines to b: the groups of
 * the next stretch of the queue table (all of it in one beat up to a few
 * thousand queues), but none idle for implicit_idle_s. */
void master_groups_beat(struct master *m, struct http_buf *b, uint64_t now);

/* master_groups_in - apply what peer (a member index) said in the lines
 * (len bytes) after its heartbeat's first: learn its groups, hold the
 * partitions it is about to hand over.  beat_ms is the heartbeat period.
 * A malformed line is skipped. */
void master_groups_in(struct master *m, int peer, const char *lines, size_t len,
                      uint64_t now, uint64_t beat_ms);

#endif
