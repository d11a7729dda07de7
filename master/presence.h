/*
 * presence.h - the master's part of presence (SPEC §12): it makes the
 * table (shm/presence.h) before the first fork, sized from the options,
 * and its tick lets the members whose grace or ttl passed leave.
 */
#ifndef MAYFLY_MASTER_PRESENCE_H
#define MAYFLY_MASTER_PRESENCE_H

#include <stdint.h>

struct master;
struct http_request;

/* master_presence_start - map the table; exits (logged) when it cannot. */
void master_presence_start(struct master *m);

/* master_presence_worker_gone - worker slot died: the connections its
 * streams held (presence_stream.c keys them "<node id>/<slot>") are
 * dropped, and a member left with none starts its grace (now, or at a
 * later tick when the lock could not be taken). */
void master_presence_worker_gone(struct master *m, int slot);

/* master_presence_tick - the members due leave (one load when none is),
 * and a join's records not taken are sent again once their backoff ran
 * out (master_presence_rehome). */
void master_presence_tick(struct master *m, uint64_t now);

/*
 * master_presence_drain - a SIGTERM's first step, before the node says
 * "leaving" (main.c): the first call freezes the table (shm/presence.h)
 * and posts each channel this node owns to its next owner (the HRW owner
 * once this node is out), one record per peer (shm/presence_move.h) to
 * /cluster/v1/adopt?presence=1.  Returns 1 while records are out (each
 * sent again every 200 ms until answered 200, for PRES_DRAIN_MS at most),
 * 0 once all are answered or that time passed (logged: those channels are
 * rebuilt there from the streams' announcements).  A node alone hands
 * nothing over.  The peers route to this node meanwhile, and its frozen
 * table answers their writes 503 draining: they come again once it says
 * "leaving", to the next owner, which has the set by then.
 */
int master_presence_drain(struct master *m, uint64_t now);

/*
 * master_presence_rehome - a change of the live members' scan (handover.c:
 * at the change, 1 s and 5 s on): each channel this table holds that
 * another member owns now (HRW over the live members, as partitions are
 * placed: a node joined or came back) is marked a copy
 * (shm_presence_mark_copy) and goes to its owner, one record per peer, to
 * /cluster/v1/adopt?presence=1&merge=1 (shm_presence_merge: no event
 * there), this node's own connections left out (its workers write their
 * counts to the owner once the copy moved: worker/presence_stream.c);
 * every other live peer gets an empty record (its settle awaits one from
 * each).  Once a record is answered 200 its channels go from here (those
 * this node owns again by then stay).  One that is not (refused 503,
 * timed out, unreachable) is sent again by the tick after a backoff, 200
 * ms doubling to 5 s, for as long as another live member owns channels
 * held here; a 4xx (a record of another build) drops them here.  Until
 * then the copy serves nothing: the workers route every call and read of
 * a channel to its owner, and a forwarded one that finds a non-owner is
 * answered 503 owner_moved; only the metrics count it.  A copy whose
 * channel is this node's again before it moved is distrusted
 * (shm_presence_distrust): its members' connections are what the streams
 * say from then on, so a member whose streams ended elsewhere meanwhile
 * leaves one grace later, no ghost.  Never waits: posts are answered
 * through the loop.
 */
void master_presence_rehome(struct master *m, uint64_t now);

/* master_presence_in - POST /cluster/v1/adopt?presence=1: a peer's
 * presence channels (shm_presence_adopt; with &merge=1, a join's:
 * shm_presence_adopt_merge), with no event. */
void master_presence_in(struct master *m, struct http_request *req);

/* master_presence_stop - at exit, after the cluster client is freed:
 * free what the drain left. */
void master_presence_stop(void);

#endif
