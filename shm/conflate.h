/*
 * conflate.h - what a push to a queue that conflates (SPEC §13) knows
 * before it takes any lock: its keys, sorted and distinct (the set
 * shm_ring_conflate_locked looks for), and which of its own messages a
 * later one of the same batch replaces.  Process memory; no locking.
 * Errors: 0 or -ENOMEM.
 */
#ifndef MAYFLY_SHM_CONFLATE_H
#define MAYFLY_SHM_CONFLATE_H

#include <stdint.h>

#include "shm/broker.h"
#include "shm/ring.h"

struct shm_conflate {
    struct shm_ring_keys keys;
    uint64_t *mem;      /* owned: the hashes, then the scratch words */
    uint32_t self;      /* messages of the batch a later one replaces */
    uint64_t self_cost; /* and their bytes */
    uint32_t done;      /* messages replaced, once linked */
};

/*
 * shm_conflate_prepare - the keys of the n messages (ex[i] for msgs[i]);
 * a keyed message's bytes count its key (shm_msg_stored).  0 with *out
 * filled (out->keys.n 0 when none carries a key), or -ENOMEM.  Free with
 * shm_conflate_free either way.
 */
int shm_conflate_prepare(const struct shm_msg_in *msgs,
                         const struct shm_msg_extra *ex, uint32_t n,
                         struct shm_conflate *out);

/* shm_conflate_alloc - room for k hashes (out->mem[0..k)) and their
 * scratch, out zeroed first: 0 or -ENOMEM.  Fill the hashes, then
 * shm_conflate_sort makes them the key set. */
int shm_conflate_alloc(struct shm_conflate *out, uint32_t k);
void shm_conflate_sort(struct shm_conflate *out, uint32_t k);

void shm_conflate_free(struct shm_conflate *c);

#endif
