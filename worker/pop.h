/*
 * pop.h - GET /api/v1/ephemeral/pop, and the parked pops the loop drives
 * (pop.c): woken by pushes, answered at their deadlines, when their clients
 * hang up, when their partitions move, and when the worker drains.
 */
#ifndef MAYFLY_WORKER_POP_H
#define MAYFLY_WORKER_POP_H

#include <stdint.h>

struct worker;
struct http_request;
struct park;

/* worker_pop - the pop route: answers req, or parks it (wait=true and
 * nothing there yet). */
void worker_pop(struct worker *w, struct http_request *req);

/* worker_pop_wake - retry the pops parked on handle (a push posted it). */
void worker_pop_wake(struct worker *w, uint64_t handle);

/* worker_pop_wake_all - the wake queue overflowed: retry every parked pop. */
void worker_pop_wake_all(struct worker *w);

/* worker_pop_expire - answer the parked pops whose deadline is now or
 * past, with what is there (possibly nothing). */
void worker_pop_expire(struct worker *w, uint64_t now);

/* worker_pop_answer_all - the worker drains: every parked pop is answered
 * at once, as at its deadline. */
void worker_pop_answer_all(struct worker *w);

/* worker_pop_moved - after the owners changed (w->owners refreshed): answer
 * the pops parked on a partition another node owns now, and those with no
 * partition that watch the peers (pop_cluster.h) of the old view (with
 * what they hold, usually nothing), so their clients ask again and reach
 * the owner, or watch the new members. */
void worker_pop_moved(struct worker *w);

/* worker_pop_let_go_all - every parked pop answered as worker_pop_moved()
 * answers a moved one: the view they were placed by no longer holds. */
void worker_pop_let_go_all(struct worker *w);

/* worker_pop_hangup - the client of the pop parked as p shut its side
 * (the loop found p in the socket's struct worker_conn): it is answered
 * now, or dropped. */
void worker_pop_hangup(struct park *p);

#endif
