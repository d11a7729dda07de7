/*
 * handover.h - moving partitions between nodes (SPEC §5 "Graceful stop",
 * "Join or return").
 *
 * The master ships what this node holds but no longer owns: after a change
 * in the live members (a node joined, came back, or left) or in those its
 * workers suspect, after its workers served partitions in their owners'
 * stead for a peer that routes around them (worker_view_standin: once
 * that stopped a while), and, on a drain, everything, once the workers
 * have exited.  A shipment is one partition:
 * shm_part_take() empties it into a record (messages, every group's
 * position), which is posted to the new owner's cluster port
 * (/cluster/v1/adopt); the owner's master adopts it with shm_part_adopt()
 * and answers {"adopted": n}.  A shipment that fails is never dropped in
 * silence: on a membership change it is adopted back here and shipped
 * again by a later scan; on a drain it goes again, every 200 ms, to the
 * owner as the members are seen then, and only at the drain's deadline is
 * it logged ("hand-over failed; the partition's contents are dropped") and
 * counted in mayfly_wipes_total.  The owner of a partition is chosen when
 * it is sent, not when a scan finds it; a drain's shipment out to a member
 * that the view declares dead meanwhile (hung: it took the connection but
 * does not answer) is sent again to the owner as seen then.
 * Master only, single-threaded.
 */
#ifndef MAYFLY_MASTER_HANDOVER_H
#define MAYFLY_MASTER_HANDOVER_H

#include <stdint.h>

struct master;
struct http_request;
struct http_buf;

#define CLUSTER_PATH_ADOPT "/cluster/v1/adopt"

/* master_handover_in - POST /cluster/v1/adopt?queue=&partition=: a peer
 * hands a partition over; the body is the shm_part_take() record.  With
 * ?presence=1 instead, a drain's presence channels (master/presence.h). */
void master_handover_in(struct master *m, struct http_request *req);

/* master_handover_tick - each tick while running: notice a change of the
 * live members and ship what now belongs elsewhere (scanned at once and
 * again a little later, for pushes that raced the change); likewise a
 * while after the workers last served in an owner's stead. */
void master_handover_tick(struct master *m, uint64_t now);

/*
 * master_handover_drain - the drain's hand-over, after the workers exited:
 * the first call ships every partition held to its next owner; returns 1
 * while shipments are out, 0 once all are answered or the deadline passed
 * (then it logs the summary line).
 */
int master_handover_drain(struct master *m, uint64_t now);

/* master_handover_holds - append to body[i], for each peer i, an "h" line
 * (groups.h) per partition held here that peer i owns once this node is
 * out: what a drain is about to ship it.  The owners are as the board
 * says now (published "leaving" already). */
void master_handover_holds(struct master *m, struct http_buf *body);

/* master_handover_join_news - whether a peer is live as a new
 * incarnation that master_handover_joins has not told yet (the beat then
 * goes at once).  Notes it. */
int master_handover_join_news(struct master *m, uint64_t now);

/* master_handover_joins - append to body[i], for each peer i seen live as
 * a new incarnation within the last JOIN_WINDOW_MS, a "J" line and an
 * "H" line (groups.h) per partition this node ships it: held here and
 * owned by i as shipments pick owners, on its way, or waiting to go
 * (join.h).  While running only.  Returns the peers told (bit i). */
uint64_t master_handover_joins(struct master *m, struct http_buf *body,
                               uint64_t now);

/* master_handover_stop - at exit, after the cluster client is freed (no
 * answer can come any more): free what is left. */
void master_handover_stop(void);

#endif
