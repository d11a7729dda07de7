/*
 * park.h - the worker's parked long-poll pops.
 *
 * A pop that found nothing and may wait is parked: its connection suspended,
 * its worker's waiter bit set in the segment (by shm_pop), and its record
 * kept here, findable two ways: by the wake handle a push posts (all parked
 * pops on one partition or queue), and by deadline (a binary heap, so the
 * loop's next timeout and each expiry cost O(log n) with 10,000 parked).
 * Process memory only; nothing here is shared.
 */
#ifndef MAYFLY_WORKER_PARK_H
#define MAYFLY_WORKER_PARK_H

#include <stddef.h>
#include <stdint.h>

#include "shm/broker.h"

struct http_request;

struct park {
    struct http_request *req;
    uint64_t handle;   /* what a push to our partition/queue posts */
    uint64_t deadline; /* shm_now_ms() when the pop answers anyway */
    size_t heap_idx;
    struct park *prev, *next; /* chain of parks with the same handle */
    int fd;                   /* client socket, watched for EPOLLRDHUP */
    struct shm_pop_req pop;   /* names point into names[] below */
    char *names;              /* queue, partition, group copied */
};

struct park_set {
    struct park **heap;
    size_t len, cap;
    struct park **buckets; /* handle hash -> chain */
    size_t nbuckets;
};

/* park_set_init - empty set; 0 or -ENOMEM. */
int park_set_init(struct park_set *s);

/* park_add - index p (handle and deadline set); 0 or -ENOMEM. */
int park_add(struct park_set *s, struct park *p);

/*
 * park_remove - unindex p.  Returns 1 when no other parked pop waits on p's
 * handle any more (the caller then clears its waiter bit: shm_unpark).
 */
int park_remove(struct park_set *s, struct park *p);

/* park_first - the parked pop with the nearest deadline, or NULL. */
struct park *park_first(const struct park_set *s);

/* park_chain - the first parked pop waiting on handle, or NULL. */
struct park *park_chain(const struct park_set *s, uint64_t handle);

/* park_chain_next - the next parked pop waiting on p's handle, or NULL. */
struct park *park_chain_next(const struct park *p);

/* park_update_deadline - re-sort p after its deadline changed. */
void park_update_deadline(struct park_set *s, struct park *p, uint64_t when);

/* park_count - how many are parked. */
size_t park_count(const struct park_set *s);

#endif
