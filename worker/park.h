/*
 * park.h - the index of a worker's parked calls (parked.h says what they
 * are): by deadline, a binary heap, so the loop's next timeout and each
 * expiry cost O(log n) with 10,000 parked; by the wake handles they wait
 * on, a hash, so a push's wake finds the calls it concerns; and a walk
 * list, on which parked.c gathers the calls one event concerns before it
 * acts on any of them.
 *
 * Intrusive: a call's links live in its struct park and struct park_wait,
 * so parking allocates only when the heap must grow.  Process memory only;
 * nothing here is shared.  Errors: -ENOMEM.
 */
#ifndef MAYFLY_WORKER_PARK_H
#define MAYFLY_WORKER_PARK_H

#include <stddef.h>
#include <stdint.h>

struct http_request;
struct park;
struct park_ops;

/* One wake handle a parked call waits on (shm_pop_handle: a partition, or
 * a queue for a pop of any partition); an entry of the handle hash. */
struct park_wait {
    uint64_t handle;               /* what a push there posts */
    struct park_wait *prev, *next; /* the hash chain */
    struct park *park;             /* the call that waits */
};

/* The head every kind of parked call embeds (parked.h). */
struct park {
    const struct park_ops *ops; /* the kind's handlers (parked.h) */
    struct http_request *req;   /* its request: its token, its socket */
    uint64_t deadline;          /* shm_now_ms() of its on_deadline */
    struct park_wait *waits;    /* the handles it waits on, nwaits of them */
    size_t nwaits;
    int fd;     /* client socket watched for a hang-up, or -1 (parked.c) */
    int parked; /* in the set now */
    size_t heap_idx;
    struct park *walk_prev, *walk_next; /* on the walk list */
    int on_walk;
};

struct park_set {
    struct park **heap;
    size_t len, cap;
    struct park_wait **buckets; /* handle hash -> chain */
    size_t nbuckets;
    struct park *walk_head, *walk_tail;
    /* the call a wake's walk found empty last (parked.c); cleared when it
     * leaves the set, so the walk never compares with freed memory */
    struct park *walk_empty;
};

/* park_set_init - empty set; 0 or -ENOMEM. */
int park_set_init(struct park_set *s);

/* park_add - index p (deadline and waits set); 0 or -ENOMEM. */
int park_add(struct park_set *s, struct park *p);

/* park_remove - unindex p, and take it off the walk list. */
void park_remove(struct park_set *s, struct park *p);

/* park_first - the parked call with the nearest deadline, or NULL. */
struct park *park_first(const struct park_set *s);

/* park_at - the i-th parked call (i < park_count), in the heap's order. */
struct park *park_at(const struct park_set *s, size_t i);

/* park_chain - the first wait on handle, or NULL. */
struct park_wait *park_chain(const struct park_set *s, uint64_t handle);

/* park_chain_next - the next wait on q's handle, or NULL. */
struct park_wait *park_chain_next(const struct park_wait *q);

/* park_update_deadline - re-sort p after its deadline changed. */
void park_update_deadline(struct park_set *s, struct park *p, uint64_t when);

/* park_count - how many are parked. */
size_t park_count(const struct park_set *s);

/* park_walk_add - put p at the end of the walk list, unless it is on it. */
void park_walk_add(struct park_set *s, struct park *p);

/* park_walk_next - take the first call off the walk list; NULL when the
 * list is empty.  A call unparked meanwhile has left it (park_remove). */
struct park *park_walk_next(struct park_set *s);

#endif
