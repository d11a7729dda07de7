/*
 * conflate.c - a conflating push's keys, before any lock (conflate.h).
 *
 * The hashes are sorted once (qsort) so that the walk under the partition
 * lock finds a message's key in O(log keys).  A message of the batch is
 * replaced by the batch itself when a later one carries its key and it
 * was not pushed with a delay (ring.c's rule: a delayed message is never
 * replaced); those are known here, so the bounds a push is checked
 * against count what will stay.  No locking.  Errors: 0 or -ENOMEM.
 */
#include "shm/conflate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Order of two hashes, for qsort. */
static int
hash_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* shm_conflate_alloc - see conflate.h: k hashes, then k scratch words
 * (the last index of each key in a batch, then
 * shm_ring_conflate_locked's). */
int
shm_conflate_alloc(struct shm_conflate *out, uint32_t k)
{
    memset(out, 0, sizeof(*out));
    if (k == 0)
        return 0;
    out->mem = malloc((size_t)k * (sizeof(uint64_t) + sizeof(uint32_t)));
    return out->mem != NULL ? 0 : -ENOMEM;
}

/* shm_conflate_sort - see conflate.h. */
void
shm_conflate_sort(struct shm_conflate *out, uint32_t k)
{
    uint64_t *h = out->mem;
    uint32_t d = 0;

    if (k == 0)
        return;
    qsort(h, k, sizeof(*h), hash_cmp);
    for (uint32_t i = 0; i < k; i++)
        if (i == 0 || h[i] != h[d - 1])
            h[d++] = h[i];
    out->keys =
        (struct shm_ring_keys){.hash = h, .last = (uint32_t *)(h + k), .n = d};
}

/* shm_conflate_prepare - see conflate.h. */
int
shm_conflate_prepare(const struct shm_msg_in *msgs,
                     const struct shm_msg_extra *ex, uint32_t n,
                     struct shm_conflate *out)
{
    uint32_t k = 0, d = 0, *last;

    for (uint32_t i = 0; i < n; i++)
        k += ex[i].has_key != 0;
    if (shm_conflate_alloc(out, k) != 0)
        return -ENOMEM;
    if (k == 0)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (ex[i].has_key)
            out->mem[d++] = ex[i].key_hash;
    shm_conflate_sort(out, k);
    last = out->keys.last;
    for (uint32_t i = 0; i < n; i++)
        if (ex[i].has_key)
            last[shm_ring_keys_find(&out->keys, ex[i].key_hash)] = i;
    for (uint32_t i = 0; i < n; i++)
        if (ex[i].has_key && ex[i].delay_ms == 0 &&
            last[shm_ring_keys_find(&out->keys, ex[i].key_hash)] > i) {
            out->self++;
            out->self_cost +=
                shm_ring_msg_cost((size_t)msgs[i].len + SHM_MSG_KEY_BYTES);
        }
    return 0;
}

/* shm_conflate_free - see conflate.h. */
void
shm_conflate_free(struct shm_conflate *c)
{
    free(c->mem);
    c->mem = NULL;
}
