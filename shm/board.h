/*
 * board.h - the master's board: the node as the master knows it, for
 * workers to show in /health and /metrics and to pick owners by: readiness,
 * the raft role, term, leader and commit index, and the cluster members.
 *
 * A small MAP_SHARED page of its own, made by the master before forking.
 * One writer (the master) and lock-free readers over two copies of the
 * view (a seqlock latch): the master bumps seq to odd, writes copy 0, bumps
 * it to even, writes copy 1; a reader copies the copy seq's low bit names
 * and retries if seq changed meanwhile.  So a master stopped mid-write
 * (SIGSTOP, a stall) never makes readers spin: one copy is always whole.
 *
 * Beside the view, outside the seqlock, the members this node's workers
 * suspect (shm_board_suspect): a worker whose forward to a member could
 * not connect in time marks it for SHM_SUSPECT_MS, any worker may, and
 * every worker then routes as if it were dead (shm/owner.h); a forward
 * that reaches it clears the mark.  One word a member (its index in the
 * view, which never changes: members are static) and a mask of the
 * words set, so a node with none pays one atomic load.
 *
 * Beside them, the last time a worker served a partition in the stead of
 * its owner, for a peer that routes around that owner
 * (worker_view_standin): the master's hand-over ships what was served so
 * once that has been quiet a while (master/handover.c).
 *
 * Beside the view, outside the seqlock, the master's beat: the time its
 * view of the cluster was last known current, refreshed every tick.  A
 * worker checks it on every request (two atomic loads), so a node whose
 * master is stopped (SIGSTOP, a stall) stops serving from a view that its
 * peers no longer share (master/view.c says how long it may age).
 */
#ifndef MAYFLY_SHM_BOARD_H
#define MAYFLY_SHM_BOARD_H

#include <stdint.h>

#define SHM_BOARD_MEMBERS  17 /* the node and CONFIG_PEERS_MAX peers */
#define SHM_BOARD_ID_MAX   65
#define SHM_BOARD_ADDR_MAX 256  /* host:port and its NUL (CONFIG_ADDR_MAX) */
#define SHM_SUSPECT_MS     3000 /* a suspicion's life without a new failure */

enum shm_role {
    SHM_ROLE_FOLLOWER,
    SHM_ROLE_CANDIDATE,
    SHM_ROLE_LEADER,
};

/*
 * A member's state.  Only LIVE members own partitions (shm/owner.h): a node
 * that is STARTING (heard, not yet ready) or LEAVING (draining, or announced
 * its leave) is left out of the placement, a DEAD one was not heard for
 * member_ttl_ms.
 */
enum shm_member_state {
    SHM_MEMBER_LIVE,
    SHM_MEMBER_DEAD,
    SHM_MEMBER_LEAVING,
    SHM_MEMBER_STARTING,
    SHM_MEMBER_STATES
};

struct shm_member {
    char id[SHM_BOARD_ID_MAX];
    uint8_t state;                 /* enum shm_member_state */
    uint8_t self;                  /* this node */
    char addr[SHM_BOARD_ADDR_MAX]; /* its client address ("" unknown) */
    uint64_t incarnation;          /* the one it last named (0 unknown) */
};

/* What readers copy out. */
struct shm_board_view {
    uint32_t ready;     /* serving: started and not draining */
    uint32_t log_level; /* enum log_level workers apply on SIGHUP */
    uint32_t stopping;  /* the master is draining or stopping */
    uint32_t role;      /* enum shm_role */
    uint64_t term;
    uint64_t commit;
    char leader[SHM_BOARD_ID_MAX]; /* "" when none is known */
    uint32_t nmembers;
    struct shm_member members[SHM_BOARD_MEMBERS];
};

/*
 * struct shm_board - the shared page.
 *   off  size  field     written by  protected by
 *     0     8  seq       master      itself (odd: copy 0 being written)
 *     8     8  beat      master      itself (atomic; shm_now_ms() time)
 *    16     8  stale_ms  master      itself (atomic; 0: beat not checked)
 *    24   2xV  view[2]   master      seq (readers take view[seq & 1])
 *     -     8  suspects  workers     itself (atomic; bit i: suspect[i] set)
 *     -   8xM  suspect   workers     itself (atomic; shm_now_ms() its end)
 *     -     8  standin   workers     itself (atomic; shm_now_ms() the last)
 * beat and stale_ms are single words each, read apart from the view: a
 * reader that sees a new beat with an old stale_ms (or the reverse) at
 * most answers one request by the bound before.
 */
struct shm_board {
    _Atomic uint64_t seq;
    _Atomic uint64_t beat;
    _Atomic uint64_t stale_ms;
    struct shm_board_view view[2];
    _Atomic uint64_t suspects;
    _Atomic uint64_t suspect[SHM_BOARD_MEMBERS];
    _Atomic uint64_t standin;
};

/* shm_board_create - map the page (master, before forking).  NULL on
 * failure, errno set. */
struct shm_board *shm_board_create(void);

/* shm_board_publish - master: replace the view. */
void shm_board_publish(struct shm_board *s, const struct shm_board_view *v);

/* shm_board_read - a consistent copy of the view. */
void shm_board_read(const struct shm_board *s, struct shm_board_view *v);

/* shm_board_stopping - whether the master is draining or stopping (one
 * racy load: cheap enough for every request). */
int shm_board_stopping(const struct shm_board *s);

/* shm_board_beat - master: its view is current at now, and may age
 * stale_ms before workers stop trusting it (0: never, a node alone). */
void shm_board_beat(struct shm_board *s, uint64_t now, uint64_t stale_ms);

/* shm_board_stale - whether the master's view is older than its bound
 * now.  Two relaxed loads and, in a cluster only, a clock read. */
int shm_board_stale(const struct shm_board *s);

/* shm_board_suspect - member i (its index in the view) could not be
 * reached: suspect it until now + SHM_SUSPECT_MS. */
void shm_board_suspect(struct shm_board *s, uint32_t i, uint64_t now);

/* shm_board_unsuspect - member i was reached: no longer suspect. */
void shm_board_unsuspect(struct shm_board *s, uint32_t i);

/* shm_board_suspects - the mask of members suspect now (bit i: member
 * i); 0 at the cost of one atomic load when none was ever marked. */
uint64_t shm_board_suspects(const struct shm_board *s);

/* shm_board_standin - a worker served a partition in the stead of its
 * owner at now (worker_view_standin). */
void shm_board_standin(struct shm_board *s, uint64_t now);

/* shm_board_standin_at - when a worker last did (0: never). */
uint64_t shm_board_standin_at(const struct shm_board *s);

/* shm_role_name - "follower", "candidate", "leader". */
const char *shm_role_name(uint32_t role);

#endif
