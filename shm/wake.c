/*
 * wake.c - per-worker wake queues (wake.h) and their drain (broker.h).
 *
 * A wake queue is a bounded set, not a FIFO: SHM_WAKE_SLOTS words, 0 = empty.
 * A poster claims an empty word with one CAS, so a poster killed at any
 * instruction has either posted or not, and nothing waits on it.  It then
 * sets the word's bit in wake_hint so the drain visits only used words.  A
 * poster killed between the CAS and the bit leaves one handle unseen until
 * the next overflow or reset: a wake of the dead worker's own push is lost,
 * no other.  Order of handles is not kept (they are idempotent hints).
 *
 * Lost wake-ups: the drain arms first (wake_armed = 1), then reads; a poster
 * publishes first, then takes the arm (exchange to 0) and, if it got it,
 * writes the eventfd.  Either the poster sees the arm, or the drain sees the
 * handle (all seq_cst).  So the eventfd is written at most once per drain.
 * A worker that is awake disarms (shm_wake_disarm) and drains before it
 * sleeps again: posts meanwhile, its own pushes' among them, cost no write.
 * Locking: none (atomics only); posting is safe under any lock.
 */
#include "shm/wake.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "shm/broker.h"
#include "shm/slot.h"

/*
 * shm_wake_post - see wake.h.  Handle 0 (no such queue) cannot be stored:
 * it is posted as an overflow, which makes w retry every parked pop.
 */
int
shm_wake_post(struct shm_seg *seg, int w, uint64_t handle)
{
    struct shm_slot *s = shm_slot(seg, w);
    uint32_t start =
        atomic_fetch_add_explicit(&s->wake_pos, 1, memory_order_relaxed);

    for (uint32_t i = 0; handle != 0 && i < SHM_WAKE_SLOTS; i++) {
        uint32_t j = (start + i) % SHM_WAKE_SLOTS;
        uint64_t empty = 0;
        if (atomic_load_explicit(&s->wake_ring[j], memory_order_relaxed) ||
            !atomic_compare_exchange_strong(&s->wake_ring[j], &empty, handle))
            continue;
        atomic_fetch_or(&s->wake_hint[j / 64], (uint64_t)1 << (j % 64));
        return atomic_exchange(&s->wake_armed, 0) != 0;
    }
    atomic_store(&s->wake_overflow, 1);
    return atomic_exchange(&s->wake_armed, 0) != 0;
}

/* shm_wake_kick - see wake.h.  The eventfd is non-blocking, watched
 * edge-triggered and never read: every successful write wakes its epoll
 * again.  A write can only fail once 2^64 - 2 writes piled up (never in
 * practice), and then the worker's 1 s loop turn still drains the queue. */
void
shm_wake_kick(struct shm_seg *seg, int w)
{
    uint64_t one = 1;

    while (write(seg->wake_fd[w], &one, sizeof(one)) == -1 && errno == EINTR)
        ;
}

/* shm_wake_disarm - see wake.h.  A plain store: a poster that took the arm
 * first has written (or will write) the eventfd, which is harmless. */
void
shm_wake_disarm(struct shm_seg *seg, int w)
{
    atomic_store(&shm_slot(seg, w)->wake_armed, 0);
}

/* shm_wake_pending - see wake.h.  A poster sets a word's hint bit after
 * its handle, so a handle whose bit is not set yet is missed: the caller
 * only decides whether to wait for the drain, never whether to drain. */
int
shm_wake_pending(struct shm_seg *seg, int w)
{
    struct shm_slot *s = shm_slot(seg, w);

    if (atomic_load_explicit(&s->wake_overflow, memory_order_relaxed))
        return 1;
    for (int k = 0; k < SHM_WAKE_WORDS; k++)
        if (atomic_load_explicit(&s->wake_hint[k], memory_order_relaxed))
            return 1;
    return 0;
}

/* wake_clear - drop every handle in s's queue (consumer or reaper). */
static void
wake_clear(struct shm_slot *s)
{
    for (int k = 0; k < SHM_WAKE_WORDS; k++)
        atomic_store(&s->wake_hint[k], 0);
    for (int j = 0; j < SHM_WAKE_SLOTS; j++)
        if (atomic_load_explicit(&s->wake_ring[j], memory_order_relaxed))
            atomic_store(&s->wake_ring[j], 0);
}

/* shm_wake_reset - see wake.h: empty and re-armed, as a new slot. */
void
shm_wake_reset(struct shm_seg *seg, int w)
{
    struct shm_slot *s = shm_slot(seg, w);

    atomic_store(&s->wake_overflow, 0);
    wake_clear(s);
    atomic_store(&s->wake_armed, 1);
}

/*
 * shm_wake_drain - see broker.h.  Call it until it returns less than n: the
 * queue is armed on entry, so a post after the last call writes the eventfd
 * again.  After -EOVERFLOW the queue is empty (every parked pop is retried).
 */
int
shm_wake_drain(struct shm_seg *seg, int worker, uint64_t *out, int n)
{
    struct shm_slot *s = shm_slot(seg, worker);
    int got = 0;

    atomic_store(&s->wake_armed, 1);
    if (atomic_exchange(&s->wake_overflow, 0)) {
        wake_clear(s);
        return -EOVERFLOW;
    }
    for (int k = 0; k < SHM_WAKE_WORDS; k++) {
        if (atomic_load_explicit(&s->wake_hint[k], memory_order_relaxed) == 0)
            continue;
        uint64_t bits = atomic_exchange(&s->wake_hint[k], 0);
        for (; bits != 0; bits &= bits - 1) {
            if (got == n) {
                atomic_fetch_or(&s->wake_hint[k], bits);
                return got;
            }
            int j = k * 64 + __builtin_ctzll(bits);
            uint64_t h = atomic_load(&s->wake_ring[j]);
            if (h != 0) {
                out[got++] = h;
                atomic_store(&s->wake_ring[j], 0);
            }
        }
    }
    return got;
}
