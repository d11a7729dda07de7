/*
 * pop_call.h - what the parked kinds that pop share (pop_call.c): the
 * call, its take, its answer, its parking, and the parked-call events
 * (parked.h) as a pop meets them.
 *
 * A kind is a struct pop_call (its first member) with fields of its own,
 * and a const struct pop_kind: where it differs, a hook, and the events
 * table its calls are parked with (pop_call_events, or one of its own
 * built from the pop_call_on_* handlers).  The kinds: pop.c (a plain pop),
 * pop_window.c, pop_watch.c, pop_cluster.c, pop_inbox.c.
 *
 * Each call is freed when its request ends; if the reply carried leased
 * messages and did not go out whole, the leases are released at once
 * without counting an attempt.
 */
#ifndef MAYFLY_WORKER_POP_CALL_H
#define MAYFLY_WORKER_POP_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "http/buf.h"
#include "shm/broker.h"
#include "worker/parked.h"
#include "worker/pop_format.h"

struct worker;
struct http_request;
struct pop_kind;

struct pop_call {
    struct park park;      /* park.ops: the kind's events */
    struct park_wait wait; /* the one handle it waits on */
    const struct pop_kind *kind;
    struct worker *w;
    struct http_request *req;
    struct shm_pop_req pop; /* names point into names */
    char *names;
    int leased;              /* the reply carries leases: release if unsent */
    struct shm_sink sink;    /* what the answer carries */
    struct shm_sink more;    /* scratch a second round lands in first */
    struct pop_fmt fmt;      /* the answer, written as it takes (the
                                sinks' fmt; a raw kind's: unused) */
    uint64_t answer_by;      /* parked holding nothing: its own deadline,
                                while park.deadline is when it gives its
                                connection's zeroed pages back (0: no
                                such wait) */
    struct http_buf results; /* a POST pop's: its acks' {"results": [...]},
                                spliced into the answer (SPEC §14) */
};

/* What sets a kind apart.  NULL hooks do as a plain pop does. */
struct pop_kind {
    const struct park_ops *events; /* parked with these */
    /* take - what c may take now, setting the waiter bit when nothing
     * (park); how many it holds, or -errno.  NULL: pop_call_take(c, 0). */
    int (*take)(struct pop_call *c, int park);
    /* window - c holds messages and waits for more: the time by which it
     * answers anyway (UINT64_MAX: its own deadline); 0 when it answers
     * what it holds now.  NULL: never waits for more. */
    uint64_t (*window)(const struct pop_call *c, uint64_t now);
    /* slide - the window moves with each round that brings more (a
     * request's gather: quietMs after the last reply), not only with the
     * first. */
    int slide;
    /* answer - reply with what c holds.  NULL: pop_call_answer. */
    void (*answer)(struct pop_call *c);
    /* leave - c is being answered or dropped: stop what it has out
     * elsewhere (a cluster pop's calls to its peers). */
    void (*leave)(struct pop_call *c);
    /* done - c's request ended: free what the kind holds besides (the
     * call itself is freed next). */
    void (*done)(struct pop_call *c);
    /* raw - the sink's records carry their data, for an answer of the
     * kind's own (pop_inbox.c: a raw kind has its answer, never
     * pop_call_answer); else the answer is written as the call takes
     * (pop_format.h), each payload copied once. */
    int raw;
};

/* POP_KIND_OF - the struct of type whose member ptr points to (a kind's
 * struct from its pop_call, a pop_call from its park). */
#define POP_KIND_OF(ptr, type, member)                                         \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* The events as a pop meets them (pop_call.c), for the kinds' tables;
 * pop_call_on_drain answers now with what is there, as
 * pop_call_on_deadline does, but a forwarded long poll holding nothing
 * 503 draining (its forwarder serves it again elsewhere); so do
 * pop_call_on_moved, when the partition left this node, and
 * pop_call_on_stale (503 owner_moved, or draining when this node stops),
 * never an empty answer early. */
extern const struct park_ops pop_call_events;
int pop_call_on_wake(struct park *p, uint64_t handle, const struct park *empty);
void pop_call_on_deadline(struct park *p);
void pop_call_on_drain(struct park *p);
void pop_call_on_hangup(struct park *p);
void pop_call_on_revoke(struct park *p);
void pop_call_on_moved(struct park *p);
void pop_call_on_stale(struct park *p);

/*
 * pop_call_new - a call of kind (size bytes: its struct, whose first
 * member is the struct pop_call) popping r for req, with its own copies of
 * r's names and an answer buffer sized for r's batch; freed when req ends
 * (http_request_on_done).  NULL without memory.
 */
struct pop_call *pop_call_new(size_t size, const struct pop_kind *kind,
                              struct worker *w, struct http_request *req,
                              const struct shm_pop_req *r);

/* pop_call_take - take what c may now, up to its batch, or target when
 * not 0 (a window).  How many c holds, or -errno. */
int pop_call_take(struct pop_call *c, uint32_t target, int park);

/* pop_call_try - the kind's take. */
int pop_call_try(struct pop_call *c, int park);

/* pop_call_park - suspend c until an event, or timeout_ms (a window that
 * holds some: its own time, if sooner).  0; -EPIPE: the client has shut
 * its side already; -ENOMEM. */
int pop_call_park(struct pop_call *c, uint32_t timeout_ms);

/* pop_call_unpark - c is parked no more (it may not have been). */
void pop_call_unpark(struct pop_call *c);

/*
 * pop_call_serve - take what c may (parking it when may_park), and park it
 * for timeout_ms when it found nothing or its window is not full; else
 * answer it (pop_call_end).  may_park POP_PARK_HELD parks it only while
 * its window is not full: finding nothing, it answers at once (a pop
 * another node passed here, pop_cluster.h).  1 when parked.
 */
#define POP_PARK_HELD 2
int pop_call_serve(struct pop_call *c, int may_park, uint32_t timeout_ms);

/* pop_call_answer - the pop's answer: the messages c holds, possibly none
 * (a plain pop's answer; not a raw kind's). */
void pop_call_answer(struct pop_call *c);

/* pop_call_reply - answer c 200 with body, a pop's answer (its own, or a
 * peer's), and beside its messages the results of the acks c carried, if
 * any. */
void pop_call_reply(struct pop_call *c, struct http_buf *body);

/* pop_call_end - answer c: an error rc < 0, else the kind's answer; then
 * its request is resumed (if suspended). */
void pop_call_end(struct pop_call *c, int rc);

/* pop_call_let_go - unpark c and answer with what it holds, taking
 * nothing more here (what it waited on is another node's now). */
void pop_call_let_go(struct pop_call *c);

/*
 * pop_call_query - head, then pop r's queue (by the name its client
 * knows: the peer prefixes the tenant again), its from and its group (when
 * it has one), percent-encoded as a query string, then tail: what a peer
 * is asked about r (pop_cluster.c, group_join.c).  malloc'd; NULL when out
 * of memory.
 */
char *pop_call_query(const struct shm_pop_req *r, const char *head,
                     const char *tail);

#endif
