/*
 * queue_sync.h - the declares and deletes the raft log applies, carried
 * into the segment: at once when its locks are free, else on later ticks,
 * in the order applied.
 *
 * The master's lock waits are bounded (shm/lock.h): a worker stopped with
 * a queue's, a partition's or the dir lock held would otherwise make the
 * segment miss an entry the log holds.  One that a held lock kept out
 * waits here, and so does every one applied after it (a delete, then a
 * declare of the same name, must land in that order).  Master only,
 * single-threaded.
 */
#ifndef MAYFLY_MASTER_QUEUE_SYNC_H
#define MAYFLY_MASTER_QUEUE_SYNC_H

#include "shm/broker.h"

struct master;

/* master_queue_declare - declare queue with opts in the segment
 * (shm_queue_declare), now or once the ones owed before it are done. */
void master_queue_declare(struct master *m, struct shm_name queue,
                          const struct shm_qopts *opts);

/* master_queue_delete - delete queue from the segment (shm_queue_delete),
 * now or once the ones owed before it are done. */
void master_queue_delete(struct master *m, struct shm_name queue);

/* master_queue_sync_tick - every tick: carry out what is owed, in order,
 * until a held lock keeps one back again. */
void master_queue_sync_tick(struct master *m);

/* master_queue_sync_stop - forget what is owed (the node stops). */
void master_queue_sync_stop(void);

#endif
