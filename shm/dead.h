/*
 * dead.h - dead letters (SPEC §13): what a queue with a deadLetter option
 * drops at its retryLimit (and, with deadLetterExpired, by its ttl) is
 * pushed to that queue as {"queue", "partition", "id", "attempts",
 * "reason", "payload"} instead of vanishing.
 *
 * A drop happens under a partition lock, where nothing slow may run: the
 * ring copies the dropped message into this process's dead-letter sink
 * (struct shm_ring_ctx.dead) as a pop copies into its sink, and the caller
 * pushes the sink's records with shm_dead_flush() once every lock is
 * released.  A message that does not fit the sink is not dropped then: an
 * ack answers it SHM_OUT_DEFER and is applied again after the flush grew
 * the sink; the master's upkeep finds it due again on its next round.
 *
 * The sink is process memory, one per process (one thread each).
 * Errors: none returned; a dead letter that cannot be stored (the queue
 * full, the node cap, no declaration left) is counted as lost.
 */
#ifndef MAYFLY_SHM_DEAD_H
#define MAYFLY_SHM_DEAD_H

#include <stdint.h>

#include "shm/broker.h"
#include "shm/segment.h"

/* In a dead-letter sink, shm_popped.reply_len carries the reason above the
 * replyTo's length (which fits 16 bits). */
#define SHM_DEAD_TTL       (1u << 16)
#define SHM_DEAD_REPLY_LEN 0xffffu

/* shm_dead_init - the incarnation the origin ids name.  The master calls it
 * once before forking; the workers inherit it. */
void shm_dead_init(uint64_t incarnation);

/* shm_dead_sink - this process's sink, emptied by each flush. */
struct shm_sink *shm_dead_sink(void);

/*
 * shm_dead_flush - push every record of this process's sink, dropped from
 * queue, to the queue's deadLetter queue (the catalog's), on the partition
 * of the message's origin, as slot w; then empty the sink and grow it to
 * what a message that did not fit needs.  Takes no lock itself but
 * shm_push's: call it with none held.  Returns the records that were in it.
 */
uint32_t shm_dead_flush(struct shm_seg *seg, int w, struct shm_name queue,
                        uint64_t now);

#endif
