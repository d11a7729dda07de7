/*
 * stats.h - per-worker counters in the worker slots, summed at scrape time.
 *
 * Each worker increments only its own slot (plain stores from one process,
 * relaxed atomic loads by readers), so no counter is a shared hot line.
 * The master has a slot of its own (SHM_STATS_MASTER) for what it counts.
 */
#ifndef MAYFLY_SHM_STATS_H
#define MAYFLY_SHM_STATS_H

#include <stdint.h>

#include "shm/segment.h"

/* Index of the master's own counters; workers use 0..workers-1. */
#define SHM_STATS_MASTER (SHM_MAX_WORKERS - 1)

enum shm_counter {
    SHM_C_PUSH_ACCEPTED,      /* messages */
    SHM_C_PUSH_REJECTED_FULL, /* requests */
    SHM_C_PUSH_REJECTED_TOO_LARGE,
    SHM_C_PUSH_UNAVAILABLE,
    SHM_C_POP, /* messages delivered */
    SHM_C_ACK_ACKED,
    SHM_C_ACK_REDELIVERED,
    SHM_C_ACK_STALE,
    SHM_C_ACK_UNKNOWN,
    SHM_C_REDELIVERY_LEASE_EXPIRED,
    SHM_C_REDELIVERY_FAILED,
    SHM_C_REDELIVERY_HANDOVER,
    SHM_C_DROP_RETRY_LIMIT,
    SHM_C_DROP_TTL,
    SHM_C_DROP_DROP_OLDEST,
    SHM_C_DROP_DELETED,
    SHM_C_FORWARD_OK,
    SHM_C_FORWARD_FAILED,
    SHM_C_FORWARD_OWNER_MOVED,
    SHM_C_HANDOVER_OUT_OK,
    SHM_C_HANDOVER_OUT_FAILED,
    SHM_C_HANDOVER_IN_OK,
    SHM_C_HANDOVER_IN_FAILED,
    SHM_C_WIPES,
    SHM_C_WORKER_RESTARTS,
    SHM_C_LOCK_REPAIRS,
    SHM_C_MAINTAIN_VISITS,     /* records the master's maintenance visited */
    SHM_C_CONNECTIONS_REFUSED, /* requests answered 503 past max_connections */
    SHM_C_REQUEST_REPLIED,     /* requests (SPEC §9), by how they ended */
    SHM_C_REQUEST_TIMEOUT,
    SHM_C_REQUEST_NO_RESPONDERS,
    SHM_C_REQUEST_WITHDRAWN, /* the requester hung up, or the node drains */
    SHM_C_REPLY_DROPPED,     /* replies that found their inbox gone */
    SHM_C_STREAM_EVENTS,     /* messages streams sent (SPEC §11) */
    SHM_C_STREAM_OVERFLOWS,  /* streams ended for a slow reader */
    SHM_C_DEAD_RETRY_LIMIT,  /* dead letters (SPEC §13), by reason */
    SHM_C_DEAD_TTL,
    SHM_C_DEAD_LOST,  /* of those, not stored: the dead-letter queue refused */
    SHM_C_DUPLICATES, /* keyed messages not stored again (SPEC §13) */
    SHM_C_CONFLATED,  /* messages a later one of their key replaced */
    SHM_C_FORWARD_BATCHES, /* batch calls to owners (worker/coalesce.h) */
    SHM_C_FORWARD_BATCHED, /* the forwarded requests they carried */
    SHM_C_COUNT
};

/* Gauges computed from the segment at scrape time (shm_gauges_read,
 * queue_admin.h). */
struct shm_gauges {
    uint64_t messages;     /* held, however many groups read them */
    uint64_t pending;      /* messages not leased */
    uint64_t leased;       /* live leases: one per group a message is out to */
    uint64_t memory_used;  /* accounted bytes */
    uint64_t memory_limit; /* max_bytes */
    uint64_t queues_implicit;
    uint64_t queues_declared;
    uint64_t parked_pops;
    uint64_t oldest_age_ms; /* oldest message held, 0 if none */
    uint64_t delayed;       /* messages not visible yet (delayMs) */
};

/* shm_count - add n to counter c of slot w (the caller's own slot). */
void shm_count(struct shm_seg *seg, int w, enum shm_counter c, uint64_t n);

/* shm_counters_sum - sum every slot's counters into out[SHM_C_COUNT]. */
void shm_counters_sum(struct shm_seg *seg, uint64_t *out);

/* Upper bounds (µs) of the request-duration histogram's buckets; one more
 * bucket above the last holds the rest (+Inf). */
#define SHM_REQUEST_BUCKETS 12
extern const uint64_t shm_request_bucket_us[SHM_REQUEST_BUCKETS];

/* shm_request_observe - one request of slot w took us microseconds. */
void shm_request_observe(struct shm_seg *seg, int w, uint64_t us);

/* shm_request_hist_sum - every slot's histogram: out[i] counts requests in
 * bucket i (not cumulative; out[SHM_REQUEST_BUCKETS] the +Inf one), *sum_us
 * their total time. */
void shm_request_hist_sum(struct shm_seg *seg, uint64_t *out, uint64_t *sum_us);

/* shm_parked_add - adjust this worker's parked-pop gauge by delta. */
void shm_parked_add(struct shm_seg *seg, int w, int64_t delta);

/* shm_streams_reserve - one more stream open on worker w, when the node
 * holds fewer than max (one CAS on the node's count: exact whichever
 * worker asks): 0, or -EBUSY with nothing counted. */
int shm_streams_reserve(struct shm_seg *seg, int w, uint64_t max);

/* shm_streams_add - adjust this worker's open-streams gauge and the
 * node's count by delta (-1: a reserved stream ended or never opened). */
void shm_streams_add(struct shm_seg *seg, int w, int64_t delta);

/* shm_streams_sum - the streams open on the node now (SPEC §11:
 * mayfly_streams, and stream_max); a dead worker's are taken off when its
 * slot is claimed again, as its streams died with it. */
uint64_t shm_streams_sum(struct shm_seg *seg);

/* Worker heartbeat and pid, for the master's watchdog. */
void shm_slot_claim(struct shm_seg *seg, int w, int pid);
void shm_slot_heartbeat(struct shm_seg *seg, int w, uint64_t now);
uint64_t shm_slot_last_beat(struct shm_seg *seg, int w);

#endif
