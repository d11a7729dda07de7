/*
 * presence.h - the members of the presence channels this node owns
 * (SPEC §12), shared by the node's processes.
 *
 * A channel lives on its HRW owner as a partition does; every worker of
 * that node may serve its calls and streams, so its members sit in a
 * mapping of their own (made by the master before the first fork, as the
 * tenants' counters are), not in one worker's heap.  A member is a key of
 * its channel, with its data, since (wall clock ms), a version (bumped on
 * every change of data), its connections counted per node (stream
 * members: the node that holds each stream) and deadlines: ttl_until (a
 * call member's `ttlSeconds`) and grace_until (presence_grace_ms after
 * its last connection closed).  It is present while it has a connection
 * or a deadline to come; shm_presence_expire (the master's tick) removes
 * the others.
 *
 * Bounds: max_members a channel (-ENOSPC: 429 presence_full), max_data
 * bytes of data (-E2BIG: 413), records (members node-wide) and channels
 * (the mapping's size, -ENOMEM), and the node's memory: a member's record
 * and a channel's record count against max_bytes with the arena's cells
 * (shm_presence_bytes; shm_cap_room adds them), past 31/32 of it an enter
 * is -ENOMEM as a push is 503.
 *
 * Locking: one robust lock over the whole mapping, a leaf (nothing is
 * taken under it but the arena's counters, read lock-free).  Nothing slow
 * under it: each call copies and links; listing copies keys under it,
 * sorts outside, and copies the page's members under it again.  Events
 * (what changed) are handed to the caller's function after the unlock.
 * The master's calls (expire) wait at most its bound (lock.h) and leave
 * what they did not reach for the next tick.
 *
 * Crash consistency: a record's state word is the truth.  A member is
 * published by one store of state = LIVE after its fields are written,
 * and withdrawn by one store of state = FREE before it is unlinked; the
 * hash chains, channel lists, counts, free lists and the earliest
 * deadline are derived, and the repair of a dead holder rebuilds them all
 * from the states (a channel no live member names is freed).  A holder
 * killed while writing a member's data leaves that data torn (a later
 * enter mends it); never a member lost or counted twice.
 */
#ifndef MAYFLY_SHM_PRESENCE_H
#define MAYFLY_SHM_PRESENCE_H

#include <stddef.h>
#include <stdint.h>

#include "shm/broker.h"
#include "shm/segment.h"

struct shm_seg;
struct shm_presence;

#define SHM_PRES_MEMBER_MAX 512 /* a member id: a name (1-512 bytes) */
#define SHM_PRES_NODES      8   /* nodes one member's streams may be on */
#define SHM_PRES_NODE_IDS   512 /* connection keys the table remembers */
#define SHM_PRES_NODE_ID    72  /* 64 bytes and a NUL, padded */

/* What the master sizes the mapping from (master/config.c's options). */
struct shm_presence_params {
    uint32_t max_members; /* a channel's members (presence_max_members) */
    uint32_t max_data;    /* a member's data bytes (presence_max_data) */
    uint32_t records;     /* members node-wide (the mapping's size) */
    uint32_t channels;    /* channels node-wide */
};

/* What changed, handed to a call's event function after the unlock. */
enum shm_pres_action {
    SHM_PRES_NONE = 0, /* nothing a watcher needs (a renewed ttl, one more
                          connection of a present member) */
    SHM_PRES_ENTER,
    SHM_PRES_LEAVE,
    SHM_PRES_UPDATE,
    SHM_PRES_NACTIONS
};

struct shm_pres_event {
    enum shm_pres_action action;
    struct shm_name channel; /* the internal name */
    struct shm_name member;
    struct shm_name data; /* len 0: none (null) */
    uint64_t version;     /* the member's, after the change */
};

/* An event function: called after the lock is released, once per event;
 * the event's bytes are valid during the call only. */
typedef void (*shm_pres_event_fn)(void *arg, const struct shm_pres_event *ev);

/* One member as a listing shows it. */
struct shm_pres_info {
    struct shm_name member;
    struct shm_name data; /* len 0: none */
    uint64_t since;       /* wall clock ms of its enter */
    uint64_t version;
    uint32_t connections; /* open streams, every node's */
    uint64_t ttl_until;   /* monotonic ms; 0: not a call member */
};

struct shm_pres_list {
    uint32_t count;          /* the channel's members */
    uint32_t n;              /* in m[] */
    int truncated;           /* more after m[n - 1] */
    struct shm_pres_info *m; /* sorted by member (bytes) */
    char *blob;              /* what m[] points into */
};

/* shm_presence_map_size - bytes the mapping takes for p (virtual: a page
 * costs memory once touched). */
size_t shm_presence_map_size(const struct shm_presence_params *p);

/* shm_presence_record_bytes - what one member counts against max_bytes
 * with data of up to max_data bytes (its record). */
uint64_t shm_presence_record_bytes(uint32_t max_data);

/* shm_presence_create - master only, before forking: the empty table.
 * NULL with errno. */
struct shm_presence *shm_presence_create(const struct shm_presence_params *p);

/* shm_presence_destroy - unmap (master, after workers exit; tests). */
void shm_presence_destroy(struct shm_presence *p);

/*
 * shm_presence_enter - a call member (SPEC §12): present until leave or
 * until ttl_ms pass without another enter (ttl_ms > 0).  data NULL keeps
 * the member's data (a new member: none); data that differs from the
 * member's is an update.  The event (ENTER, UPDATE or NONE: renewed) goes
 * to fn (may be NULL).  Returns the action, or -ENOSPC (the channel has
 * max_members), -E2BIG (data over max_data), -ENOMEM (the table, or the
 * node's memory, is full), -EINVAL (an empty or too long name),
 * -ETIMEDOUT (the caller's lock bound), -ESHUTDOWN (the table is frozen
 * for its hand-over, below; so are attach, set and leave).
 */
int shm_presence_enter(struct shm_seg *seg, struct shm_name channel,
                       struct shm_name member, const struct shm_name *data,
                       uint64_t ttl_ms, uint64_t now, shm_pres_event_fn fn,
                       void *arg);

/*
 * shm_presence_attach - one more connection of member on node (a node id;
 * "" this node): a stream opened.  Enters the member if it is new, clears
 * a grace running, and updates the data as enter does (data NULL keeps
 * it).  Same returns as shm_presence_enter; -ENOSPC also when the member
 * is already on SHM_PRES_NODES nodes or the node table is full.
 */
int shm_presence_attach(struct shm_seg *seg, struct shm_name channel,
                        struct shm_name member, const struct shm_name *data,
                        const char *node, uint64_t now, shm_pres_event_fn fn,
                        void *arg);

/*
 * shm_presence_set - member has n connections on node (absolute: a
 * node's announcement of its streams, repeated): entered if new and n >
 * 0, data as enter; n 0 with no other connection starts the grace
 * (grace_ms).  Same returns as shm_presence_attach; n 0 of a member not
 * present is SHM_PRES_NONE and changes nothing.
 */
int shm_presence_set(struct shm_seg *seg, struct shm_name channel,
                     struct shm_name member, const struct shm_name *data,
                     const char *node, uint32_t n, uint64_t grace_ms,
                     uint64_t now, shm_pres_event_fn fn, void *arg);

/*
 * shm_presence_detach - one connection fewer of member on node: a stream
 * closed.  The last one (every node's) starts the grace: the member leaves
 * grace_ms from now unless a connection comes back (or its ttl runs
 * longer).  0, -ENOENT (no such member or connection), -ETIMEDOUT.
 */
int shm_presence_detach(struct shm_seg *seg, struct shm_name channel,
                        struct shm_name member, const char *node,
                        uint64_t grace_ms, uint64_t now);

/* shm_presence_leave - member leaves at now (a call's leave): LEAVE to
 * fn, then 1; 0 when it was not present; -ETIMEDOUT. */
int shm_presence_leave(struct shm_seg *seg, struct shm_name channel,
                       struct shm_name member, uint64_t now,
                       shm_pres_event_fn fn, void *arg);

/*
 * shm_presence_drop_node - node died (or its announcements stopped): its
 * connections (a key, or with a trailing '/' every key it starts) are
 * gone from every member; a member left with none starts
 * its grace now.  Returns the members that had connections there, or
 * -ETIMEDOUT.
 */
int shm_presence_drop_node(struct shm_seg *seg, const char *node,
                           uint64_t grace_ms, uint64_t now);

/*
 * shm_presence_expire - the master's tick: every member with no
 * connection whose deadlines have passed leaves (LEAVE to fn each), at
 * most max of them a call.  One atomic load when nothing is due.
 * Returns how many left, or -ETIMEDOUT (what it did not reach waits).
 */
int shm_presence_expire(struct shm_seg *seg, uint64_t now, uint32_t max,
                        shm_pres_event_fn fn, void *arg);

/* shm_presence_due - the earliest deadline to come (monotonic ms), 0:
 * none.  Lock-free. */
uint64_t shm_presence_due(struct shm_seg *seg);

/*
 * A drain's hand-over (SPEC §12: SIGTERM hands the set over; the record is
 * shm/presence_move.h).  The master freezes the table first: from then on
 * enter, attach, set, leave and import answer -ESHUTDOWN (a node's
 * announcement or a forwarded call is sent again, to the next owner) and
 * expire lets nobody leave (the next owner has the deadlines); detach,
 * drop_node and the reads go on.  Then it exports each channel it owns and
 * its next owner imports it: the same members, data, since and versions,
 * the connections per node key and what was left of each deadline, with
 * no event.
 */

/* One member as a hand-over carries it.  Deadlines are what is left of
 * them, in ms (0: none), never clock readings: clocks differ. */
struct shm_pres_moved {
    struct shm_name member;
    struct shm_name data; /* len 0: none */
    uint64_t since;       /* wall clock ms of its enter (shown, not timed) */
    uint64_t version;
    uint64_t ttl_ms;   /* a call member's ttl left */
    uint64_t grace_ms; /* a grace running: what is left of it */
    uint32_t nconns;
    struct {
        const char *node; /* its connection key, NUL-terminated */
        uint32_t n;
    } conns[SHM_PRES_NODES];
};

struct shm_pres_export {
    uint32_t n;
    struct shm_pres_moved *m;
    char *blob; /* what m[] points into */
};

struct shm_pres_names {
    uint32_t n;
    struct shm_name *name;
    char *blob;
};

/* shm_presence_freeze - freeze the table (on) for its hand-over, or thaw
 * it (tests). */
void shm_presence_freeze(struct shm_seg *seg, int on);

/*
 * shm_presence_settle - a node that starts while its peers run awaits
 * their copies of the channels it owns (a join's hand-over,
 * shm_presence_merge) until until (monotonic ms; 0: no longer): meanwhile
 * shm_presence_set of a member the table does not have answers -ESHUTDOWN
 * (503: the announcement is sent again, as during a freeze), so a member
 * that a copy brings is not entered first by an announcement (an enter
 * event: a storm), and a stream's end announced before its member came
 * is not lost.  A stream of this node's that opens meanwhile stays open,
 * its count written at the worker's next tick.  Calls and the rest go
 * on.
 */
void shm_presence_settle(struct shm_seg *seg, uint64_t until);

/* shm_presence_settling - whether a settle is set (lock-free). */
int shm_presence_settling(struct shm_seg *seg);

/* shm_presence_channels - the channels' names (internal: presence names)
 * into out (free with shm_presence_names_free).  0, -ENOMEM, -ETIMEDOUT. */
int shm_presence_channels(struct shm_seg *seg, struct shm_pres_names *out);
void shm_presence_names_free(struct shm_pres_names *l);

/*
 * shm_presence_export - channel's members as a hand-over carries them,
 * into out (free with shm_presence_export_free).  Connections whose key
 * starts with drop (NULL: none; this node's "<id>/", whose streams end
 * with it) are left out: a member that had only those starts its grace,
 * grace_ms, as their end would start it.  The count, or -ENOMEM,
 * -ETIMEDOUT.
 */
int shm_presence_export(struct shm_seg *seg, struct shm_name channel,
                        const char *drop, uint64_t grace_ms, uint64_t now,
                        struct shm_pres_export *out);
void shm_presence_export_free(struct shm_pres_export *e);

/*
 * shm_presence_import - channel's members are m[0..n) from now on (what
 * this node held of it goes: an older owner's copy), with no event:
 * deadlines from now, connections under their keys; a member with no
 * connection and no deadline gets a grace of grace_ms.  A member whose
 * name is invalid, or past max_members, is left out; one whose data is
 * over max_data comes without it; at the table's or the node's memory's
 * end the rest are left out.  The channel's count after, or -ESHUTDOWN
 * (frozen), -EINVAL (the channel's name), -ETIMEDOUT.
 */
int shm_presence_import(struct shm_seg *seg, struct shm_name channel,
                        const struct shm_pres_moved *m, uint32_t n,
                        uint64_t grace_ms, uint64_t now);

/*
 * shm_presence_merge - a join's hand-over (master/presence.h): an older
 * owner's copy of channel, m[0..n), merged into what this node (its owner
 * now) holds, with no event.  A member this node lacks comes whole, as
 * import brings it; one it has keeps what it has and gains what it lacks:
 * each connection key it has keeps its count (even a 0), a key it lacks
 * comes with the copy's; the later ttl, the earlier since, the higher
 * version, the copy's data only when it has none.  Keys starting with self
 * ("<this node's id>/") are left out.  Same returns as import.
 *
 * Why that is right: a connection key (<node>/<slot>) is one worker's
 * count of its streams, absolute, which that worker alone writes, to
 * whichever node owns the channel, at each change and every second
 * (worker/presence_stream.c).  The copy carries no key of its sender
 * (taken with them left out, as a drain's: its workers say them here) and
 * this node leaves out its own; a third node's key this node has came
 * from its worker after this node became the owner, so it is newer than
 * the copy's (a 0 too: those streams ended), and adding the two would
 * count those streams twice.  A key it lacks is one whose worker's next
 * write has not come yet: the copy's count stands for it until then.  A
 * call's enter sets the ttl from its own time: the later ttl is the later
 * enter's.  A member the copy has and this node lacks is a call member
 * whose next enter has not come (ttlSeconds away), or one whose streams
 * are not said here yet (a member whose only connections were the
 * sender's comes in its grace, and their next write ends that).  While
 * the node settles (shm_presence_settle) a write of a member not here yet
 * waits for the copies: none enters a member a copy brings (an event),
 * and no stream's end is lost because its member came after it.  Past the
 * settle (a copy later than that, a node back without a restart) a member
 * may enter twice (an event, no double count), and a third node's zero
 * said of a member not here yet is lost: the copy's count under that key
 * stays until that node goes.  A call's leave that comes before the copy
 * is undone by it until the member's ttl.
 */
int shm_presence_merge(struct shm_seg *seg, struct shm_name channel,
                       const struct shm_pres_moved *m, uint32_t n,
                       const char *self, uint64_t grace_ms, uint64_t now);

/* shm_presence_drop_channel - channel's members are gone from this table,
 * with no event (a join's hand-over: its owner took the copy).  The
 * members dropped, or -ETIMEDOUT. */
int shm_presence_drop_channel(struct shm_seg *seg, struct shm_name channel);

/*
 * shm_presence_mark_copy - channel is an older owner's copy that a join's
 * hand-over has not moved yet (master/presence.c, while another node owns
 * it): marked so, with grace_ms (0: the mark goes: the owner drains, and
 * its own set comes here).  1, 0 (no such channel), -ETIMEDOUT.  The
 * mark goes with the channel (moved, or its last member gone), with a
 * drain's set (shm_presence_import: the newer owner's whole set replaces
 * it), and at the first write of an owner here: enter, attach, set,
 * leave and merge take every connection out of the channel first, and a
 * member that had one starts grace_ms (ttls stay); shm_presence_distrust
 * does the same for the master's scan that sees the channel this node's
 * again with no write yet.
 *
 * Why that is right.  The copy holds members by connection key
 * ("<node>/<slot>": one worker's absolute count of its streams) and ttl.
 * Once another node owns the channel, every worker writes its count there
 * (worker/presence_stream.c): a stream that ended since, on any node,
 * was said to that owner, never here, so each count the copy holds is as
 * old as the move.  Should the channel be this node's again before the
 * copy moved (its owner gone without a drain), every worker with a
 * stream of it open writes its count here within a second (it writes to
 * the owner of the moment at each change and every ANNOUNCE_MS): those
 * members are here already, in their grace, so the write is no event;
 * a member whose streams all ended meanwhile is written by nobody and
 * leaves when the grace ends (one leave, no ghost).  No count written
 * after the node owns the channel again is lost: the connections go
 * under the lock before the first such write, and only then.  Nothing
 * writes a marked channel while another node owns it (workers route by
 * owner; a forwarded call that finds a non-owner is 503 owner_moved).  A
 * call member keeps its ttl: no call is said again, its next enter renews
 * it, and one that left at the other owner stays until its ttl.
 */
int shm_presence_mark_copy(struct shm_seg *seg, struct shm_name channel,
                           uint64_t grace_ms);

/* shm_presence_is_copy - channel is marked a copy not moved (1), or not
 * (0), or -ETIMEDOUT: a worker holds its own streams' counts back from
 * the owner until the copy moved (worker/presence_stream.c). */
int shm_presence_is_copy(struct shm_seg *seg, struct shm_name channel);

/* shm_presence_distrust - channel, if marked a copy, is this node's again
 * (shm_presence_mark_copy): its connections go, those members start the
 * mark's grace, the mark goes.  1 when it was marked, 0, -ETIMEDOUT. */
int shm_presence_distrust(struct shm_seg *seg, struct shm_name channel,
                          uint64_t now);

/* shm_presence_count - channel's members (0: none, or no such channel).
 * Lock-free of the members: one lookup under the lock. */
uint32_t shm_presence_count(struct shm_seg *seg, struct shm_name channel);

/*
 * shm_presence_list - channel's members sorted by member id, those after
 * after (NULL: from the first), at most limit (>= 1), into out (free it
 * with shm_presence_list_free).  0, -ENOMEM, -ETIMEDOUT.
 */
int shm_presence_list(struct shm_seg *seg, struct shm_name channel,
                      const struct shm_name *after, uint32_t limit,
                      struct shm_pres_list *out);
void shm_presence_list_free(struct shm_pres_list *l);

/*
 * A channel's events are the messages of an internal queue named as the
 * channel's table key is: the tenant's prefix, SHM_PRES_MARK, the
 * channel (worker/presence.h); no client can name it (names exclude
 * control characters).  Streams read it as a tail, so it keeps only the
 * last SHM_PRES_EVENTS_KEEP events (dropOldest) for SHM_PRES_EVENTS_TTL_S.
 */
#define SHM_PRES_MARK         '\x1e'
#define SHM_PRES_EVENTS_KEEP  64
#define SHM_PRES_EVENTS_TTL_S 60

/* shm_presence_named - queue is a channel's presence name (of any
 * tenant). */
int shm_presence_named(struct shm_name queue);

/* shm_presence_events_opts - the bounds a channel's events queue gets
 * instead of the node's defaults (o unchanged for another queue). */
void shm_presence_events_opts(struct shm_name queue, struct shm_qopts *o);

/* The table's totals, lock-free (metrics). */
struct shm_pres_totals {
    uint32_t members, channels;
    uint64_t bytes; /* what they count against max_bytes */
    uint64_t events[SHM_PRES_NACTIONS];
    uint32_t max_members, max_data;
};
void shm_presence_totals(struct shm_seg *seg, struct shm_pres_totals *t);

/* shm_presence_bytes - what the table counts against max_bytes (p NULL:
 * 0).  Lock-free. */
uint64_t shm_presence_bytes(const struct shm_presence *p);

/* shm_presence_check - 0 if the derived structures agree with the
 * records (tests, after a repair), else -EUCLEAN; why names the first
 * disagreement. */
int shm_presence_check(struct shm_seg *seg, const char **why);

#endif
