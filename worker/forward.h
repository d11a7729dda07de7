/*
 * forward.h - serving a partition from its owner (SPEC §5).
 *
 * Every node computes the owner of a (queue, partition) from the members
 * the master publishes (shm/owner.h).  A request for a partition another
 * node owns is sent there, on the owner's client port, signed
 * (http/sign.h) and marked X-Mayfly-Forwarded; the client's connection
 * waits, suspended, and gets the owner's answer as it came (status, body,
 * Retry-After).  A forwarded
 * request that reaches a node which does not own the partition either is
 * answered 503 owner_moved: never a second hop.
 *
 * A stop of the owner is not the client's to see.  When the owner answers
 * that it applied nothing -- 503 draining (it stops), a refused connection
 * (its port closed as its drain began), 503 owner_moved (it does not own the
 * partition, or cannot tell yet) -- the request is served again, within
 * its own deadline (a long poll's timeout, plus FORWARD_MS), by running its
 * route's handler once more (w->redispatch), which routes it afresh: to the
 * partition's next owner, or here.  Not at once: the next owner is the one
 * the board names once this node's master has heard the leave (the
 * stopping node's heartbeat says "leaving" before its workers stop), since
 * that is when the next owner holds the partition for the hand-over, so a
 * push stored there goes after what is handed over (DESIGN §6).  The
 * request waits, parked, and is routed afresh the moment the board changes
 * (the old owner no longer live, or the owners placed anew), or else when
 * its backoff ends (5, 10, 20 ... ms, 100 ms at most): while the board
 * still lists the old owner live (a crash is heard only after
 * member_ttl_ms), that is the old owner again, never a busy retry.  It
 * goes on so until its own deadline (owner_moved answers: for
 * FORWARD_MOVED_WAIT_MS at most, from the first), then the owner's last
 * answer goes to the client.  A long poll goes on waiting for the time its
 * first wait had left, never answered empty early.  A call that timed out
 * or broke off is not served again: the owner may have applied it; but for
 * a push whose messages all carry keys on a queue with a dedupe window
 * (SPEC §13), served again once, with FORWARD_MS more: the owner's window
 * answers a key it stored with the first id and stores nothing twice.  A call
 * routed by an id's node (an ack, worker_forward_to) is served again at
 * once, as the board would route it once the node is gone: its ids are
 * stale (ack_route.h, worker_view_mark_gone).
 */
#ifndef MAYFLY_WORKER_FORWARD_H
#define MAYFLY_WORKER_FORWARD_H

#include "http/node_call.h"
#include "shm/broker.h"
/* Forwarding starts from the view (who owns what, which addresses can be
 * called): its callers ask the view too. */
#include "worker/view.h"

struct worker;
struct http_request;
struct http_client_resp;
struct forward;

/* How long a forwarded call may take beyond the pop's own wait. */
#define FORWARD_MS 5000
/* How long a forward waits for its connection to the owner: far below
 * the request's own time, so that an owner this node cannot reach (a
 * one-way cut that drops its SYNs while the masters' beats flow) costs a
 * request this much, and is then suspect (shm_board_suspect): routed as
 * if dead here, the request served again at once. */
#define FORWARD_CONNECT_MS 1000
/* How long owner_moved answers are tried again, from the first one. */
#define FORWARD_MOVED_WAIT_MS 1500

/* The header that marks a forwarded request. */
#define FORWARD_HEADER HTTP_NODE_FORWARDED

/*
 * worker_route - where (queue, part) is served.  1: here (the caller goes
 * on).  0: req was taken: forwarded to the owner with its body and
 * answered later, or answered 503 owner_moved.  wait_ms is how long the
 * owner may hold the request (a long poll's timeout).
 */
int worker_route(struct worker *w, struct http_request *req,
                 struct shm_name queue, struct shm_name part, unsigned wait_ms);

/*
 * worker_route_member - worker_route of what is never served in another's
 * stead (a presence channel, queue its presence name): placed by the
 * membership, an owner this node suspects included (worker_view_members),
 * and answered 503 owner_moved with Retry-After while this node suspects
 * that owner.  A forwarded call that is not this node's is answered 503
 * owner_moved, even where the placement without a suspect names it.
 */
int worker_route_member(struct worker *w, struct http_request *req,
                        struct shm_name queue, struct shm_name part);

/* worker_route_keyed - worker_route of a push whose messages all carry
 * keys, on a queue with a dedupe window: a forward of it that times out is
 * sent once more. */
int worker_route_keyed(struct worker *w, struct http_request *req,
                       struct shm_name queue, struct shm_name part);

/* worker_forward_to - send req to node id at client address addr (not
 * this node) and relay its answer; wait_ms as above. */
void worker_forward_to(struct worker *w, struct http_request *req,
                       const char *id, const char *addr, unsigned wait_ms);

/* worker_forward_gone - whether r says its node serves no more and
 * applied nothing: 503 draining, or a refused connection. */
int worker_forward_gone(const struct http_client_resp *r);

/* worker_forward_wait_left - how long req may wait here: ms, or less when
 * req is being served again (see above) and its first wait had less left. */
unsigned worker_forward_wait_left(const struct http_request *req, unsigned ms);

/* worker_forward_hangup - the client of a forwarded request left (the
 * loop found f in the socket's struct worker_conn): drop the call to the
 * owner (its parked pop then leases nothing) and the request. */
void worker_forward_hangup(struct forward *f);

/* worker_forward_relay_headers - the headers of the owner's answer r that
 * go on to req's client with it: Retry-After, and WWW-Authenticate on a
 * 401 (the owner no longer knows the token). */
void worker_forward_relay_headers(struct http_request *req,
                                  const struct http_client_resp *r);

/* worker_forward_drain - the worker stops: the long polls it forwarded
 * are answered 503 draining at once, as its parked pops are answered. */
void worker_forward_drain(struct worker *w);

/* worker_forward_moved - after the owners changed (w->owners refreshed):
 * the long polls forwarded to a node that is no longer a live member
 * (dead, hung, leaving) have their calls to that node dropped and wait at
 * the partition's next owner for the time they have left (one whose time
 * is up is answered empty).  A live node that lost the partition lets its
 * own parked pop go, and that answer is relayed; a hung one cannot. */
void worker_forward_moved(struct worker *w);

/* worker_forward_revoked - after the auth file was read again: the long
 * polls forwarded for a token that is gone are answered 401 and their
 * calls dropped. */
void worker_forward_revoked(struct worker *w);

#endif
