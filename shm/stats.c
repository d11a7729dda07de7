/*
 * stats.c - the SLOTS region: per-worker counters, the parked and streams
 * gauges, pid and heartbeat (stats.h, slot.h).
 *
 * Each slot is written by its own worker (one writer: a load and a store,
 * no locked instruction) and read with relaxed loads by whoever sums.
 * Counters are cumulative for the node: a worker taking over a slot keeps
 * counting on top of its predecessor.  Locking: none.  Errors: none.
 */
#include "shm/stats.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "shm/layout.h"
#include "shm/region.h"
#include "shm/slot.h"

/* shm_slots_region_size - see region.h. */
size_t
shm_slots_region_size(const struct shm_params *p)
{
    (void)p;
    return SHM_MAX_WORKERS * sizeof(struct shm_slot);
}

/* shm_slots_region_init - see region.h: every wake queue starts armed, so
 * the first post to a worker that never drained still writes its eventfd. */
int
shm_slots_region_init(struct shm_seg *seg, const struct shm_params *p)
{
    (void)p;
    for (int w = 0; w < SHM_MAX_WORKERS; w++)
        atomic_store_explicit(&shm_slot(seg, w)->wake_armed, 1,
                              memory_order_relaxed);
    return 0;
}

/* shm_slot - see slot.h. */
struct shm_slot *
shm_slot(struct shm_seg *seg, int w)
{
    struct shm_slot *slots = shm_region(seg, SHM_REGION_SLOTS);

    return &slots[w];
}

/* shm_count - see stats.h. */
void
shm_count(struct shm_seg *seg, int w, enum shm_counter c, uint64_t n)
{
    _Atomic uint64_t *v = &shm_slot(seg, w)->counters[c];

    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* shm_counters_sum - see stats.h; lock repairs come from the header. */
void
shm_counters_sum(struct shm_seg *seg, uint64_t *out)
{
    for (int c = 0; c < SHM_C_COUNT; c++)
        out[c] = 0;
    for (int w = 0; w < SHM_MAX_WORKERS; w++) {
        struct shm_slot *s = shm_slot(seg, w);
        for (int c = 0; c < SHM_C_COUNT; c++)
            out[c] +=
                atomic_load_explicit(&s->counters[c], memory_order_relaxed);
    }
    out[SHM_C_LOCK_REPAIRS] +=
        atomic_load_explicit(&seg->hdr->lock_repairs, memory_order_relaxed);
}

/* gauge_add - a slot's gauge moved by delta: one writer, no RMW needed. */
static void
gauge_add(_Atomic int64_t *v, int64_t delta)
{
    atomic_store_explicit(v,
                          atomic_load_explicit(v, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

/* shm_parked_add - see stats.h. */
void
shm_parked_add(struct shm_seg *seg, int w, int64_t delta)
{
    gauge_add(&shm_slot(seg, w)->parked, delta);
}

/* shm_streams_reserve - see stats.h. */
int
shm_streams_reserve(struct shm_seg *seg, int w, uint64_t max)
{
    _Atomic int64_t *n = &seg->hdr->streams;
    int64_t v = atomic_load(n);

    do
        if (v >= 0 && (uint64_t)v >= max)
            return -EBUSY;
    while (!atomic_compare_exchange_weak(n, &v, v + 1));
    gauge_add(&shm_slot(seg, w)->streams, 1);
    return 0;
}

/* shm_streams_add - see stats.h. */
void
shm_streams_add(struct shm_seg *seg, int w, int64_t delta)
{
    gauge_add(&shm_slot(seg, w)->streams, delta);
    atomic_fetch_add(&seg->hdr->streams, delta);
}

/* shm_streams_sum - see stats.h. */
uint64_t
shm_streams_sum(struct shm_seg *seg)
{
    int64_t n = atomic_load_explicit(&seg->hdr->streams, memory_order_relaxed);

    return n > 0 ? (uint64_t)n : 0;
}

/*
 * shm_slot_claim - w now belongs to pid: its gauges restart at 0 and
 * its heartbeat at now, so the watchdog gives a fresh worker a full period.
 */
void
shm_slot_claim(struct shm_seg *seg, int w, int pid)
{
    struct shm_slot *s = shm_slot(seg, w);

    /* the streams of the worker that had it died with it */
    atomic_fetch_sub(
        &seg->hdr->streams,
        atomic_exchange_explicit(&s->streams, 0, memory_order_relaxed));
    atomic_store_explicit(&s->parked, 0, memory_order_relaxed);
    atomic_store_explicit(&s->beat_ms, shm_now_ms(), memory_order_relaxed);
    atomic_store_explicit(&s->pid, pid, memory_order_release);
}

/* shm_slot_heartbeat - w is making progress at now. */
void
shm_slot_heartbeat(struct shm_seg *seg, int w, uint64_t now)
{
    atomic_store_explicit(&shm_slot(seg, w)->beat_ms, now,
                          memory_order_relaxed);
}

/* shm_slot_last_beat - when w last beat (shm_now_ms), 0 if never. */
uint64_t
shm_slot_last_beat(struct shm_seg *seg, int w)
{
    return atomic_load_explicit(&shm_slot(seg, w)->beat_ms,
                                memory_order_relaxed);
}

const uint64_t shm_request_bucket_us[SHM_REQUEST_BUCKETS] = {
    250,   500,   1000,   2500,   5000,    10000,
    25000, 50000, 100000, 250000, 1000000, 5000000};

/* shm_request_observe - see stats.h. */
void
shm_request_observe(struct shm_seg *seg, int w, uint64_t us)
{
    _Atomic uint64_t *h = shm_slot(seg, w)->request_hist;
    int i = 0;

    while (i < SHM_REQUEST_BUCKETS && us > shm_request_bucket_us[i])
        i++;
    /* one writer: a load and a store, no locked instruction */
    atomic_store_explicit(&h[i],
                          atomic_load_explicit(&h[i], memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&h[SHM_REQUEST_BUCKETS + 1],
                          atomic_load_explicit(&h[SHM_REQUEST_BUCKETS + 1],
                                               memory_order_relaxed) +
                              us,
                          memory_order_relaxed);
}

/* shm_request_hist_sum - see stats.h. */
void
shm_request_hist_sum(struct shm_seg *seg, uint64_t *out, uint64_t *sum_us)
{
    memset(out, 0, (SHM_REQUEST_BUCKETS + 1) * sizeof(*out));
    *sum_us = 0;
    for (int w = 0; w < SHM_MAX_WORKERS; w++) {
        _Atomic uint64_t *h = shm_slot(seg, w)->request_hist;
        for (int i = 0; i <= SHM_REQUEST_BUCKETS; i++)
            out[i] += atomic_load_explicit(&h[i], memory_order_relaxed);
        *sum_us += atomic_load_explicit(&h[SHM_REQUEST_BUCKETS + 1],
                                        memory_order_relaxed);
    }
}
