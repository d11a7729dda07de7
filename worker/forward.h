/*
 * forward.h - serving a partition from its owner (SPEC §5).
 *
 * Every node computes the owner of a (queue, partition) from the members
 * the master publishes (shm/owner.h).  A request for a partition another
 * node owns is sent there once, on the owner's client port, signed
 * (http/sign.h) and marked X-Mayfly-Forwarded; the client's connection waits, suspended, and gets
 * the owner's answer as it came (status, body, Retry-After).  A forwarded
 * request that reaches a node which does not own the partition either is
 * answered 503 owner_moved: never a second hop.
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

/* worker_forward_to - send req to node id at client address addr (not
 * this node) and relay its answer; wait_ms as above. */
void worker_forward_to(struct worker *w, struct http_request *req,
                       const char *id, const char *addr, unsigned wait_ms);

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
 * (dead, hung, leaving) are answered as worker_pop_moved() answers a
 * parked pop, empty, and their calls to that node dropped.  A live node
 * lets its own parked pop go; a hung one cannot. */
void worker_forward_moved(struct worker *w);

/* worker_forward_revoked - after the auth file was read again: the long
 * polls forwarded for a token that is gone are answered 401 and their
 * calls dropped. */
void worker_forward_revoked(struct worker *w);

#endif
