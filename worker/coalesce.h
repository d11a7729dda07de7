/*
 * coalesce.h - forwards to one owner that go together as one call.
 *
 * Each forward is a call of its own to the partition's owner: libcurl's
 * work here and a request of libmicrohttpd's there, with the signature's
 * check, for each client request (neither library can have several
 * requests in flight on one connection).  So when this worker already
 * has COALESCE_INFLIGHT calls in flight to an owner, a forward that may
 * go together -- push, pop or ack, no long-poll wait -- waits in that
 * owner's queue instead, until a call to the owner ends or the loop's
 * turn does, whichever comes first: then the queue goes out, one request
 * alone, as it would have, or several as one signed batch call
 * (http/batch.h; the owner's side is worker/node_batch.h), up to
 * HTTP_BATCH_ENTRIES_MAX requests and COALESCE_BYTES of body each.  The
 * turn's end bounds the wait: with the queue held until a call ended, the
 * owner and this worker took turns idling (two calls in flight carry too
 * little), and the hop measured slower than with no coalescing at all
 * (BENCHMARKS.md, Cluster).  At low load nothing changes: a forward that
 * finds fewer calls in flight goes alone at once.
 *
 * The batch call carries X-Mayfly-Forwarded and the X-Mayfly-Around of
 * its requests (those with another wait for another call), and its
 * timeout is its requests' earliest deadline.  Its answer is split, and
 * each request's done runs with an http_client_resp of its own, so the
 * forward's rules hold per request as if it had gone alone: a 200
 * batch answer gives each its own status, body and Retry-After (sent);
 * any other answer (a refused signature, 503 draining, owner_moved, a
 * deadline passed) goes to each as it came; no answer gives each the
 * same err and sent.  A cancelled request leaves the queue, or, inside
 * a batch in flight, has its answer dropped.  Single-threaded, process
 * memory (one worker per process).
 */
#ifndef MAYFLY_WORKER_COALESCE_H
#define MAYFLY_WORKER_COALESCE_H

#include "http/client.h"
#include "http/route.h"

struct worker;

/* Calls in flight to an owner from which on forwards wait to go
 * together (BENCHMARKS.md, Cluster, measured 1, 2 and 4). */
#ifndef COALESCE_INFLIGHT
#define COALESCE_INFLIGHT 2
#endif
/* The body bytes a batch call carries at most (its requests' bodies and
 * their framing; a request larger goes alone). */
#define COALESCE_BYTES ((size_t)1 << 20)
/* Where a batch call goes. */
#define COALESCE_TARGET "/api/v1/node/batch"

/* worker_coalesce_eligible - whether a forward of route r that may wait
 * wait_ms at the owner may go together with others. */
int worker_coalesce_eligible(enum http_route r, unsigned wait_ms);

/*
 * worker_coalesce_request - send r (a forward, as it would go alone with
 * http_client_request: its header lines name the client's Authorization
 * and the X-Mayfly-Around, if any) to node id at r->addr, alone or
 * together; done(arg, resp) runs once as for http_client_request, never
 * from inside this call.  r's strings, target and body must stay valid
 * until done runs or arg is cancelled; its header lines are copied.  0,
 * or http_client_request's errors (done is not called then).
 */
int worker_coalesce_request(struct worker *w, const char *id,
                            const struct http_client_req *r,
                            http_client_done_fn *done, void *arg);

/* worker_coalesce_turn - the end of the loop's turn: what was queued
 * goes out now, in batch calls (those that fit one each), whatever is in
 * flight, so a request waits at most the rest of the turn that read it. */
void worker_coalesce_turn(struct worker *w);

/* worker_coalesce_cancel - drop what was sent for arg (queued, alone or
 * inside a batch): its done never runs.  Calls not sent through here are
 * cancelled with http_client_cancel. */
void worker_coalesce_cancel(struct worker *w, void *arg);

#endif
