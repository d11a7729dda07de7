/*
 * partition_check.h - the load and the checker of the partition tests
 * (issue 30): what the cluster accepted during a network fault is there
 * after the heal, counted by id.
 *
 * The load: through each node a pusher of ack-mode messages (5 a request,
 * each payload {"i": a unique id}, the partitions "p0".."p<nparts-1>" in
 * turn) and a consumer of group "g" (long polls without a partition, each
 * batch acked with the attempts it came with).  Every answer is recorded by
 * id: which pushes answered 201 (accepted), every delivery with its
 * attempts, every ack answered "acked".
 *
 * The checks, after the heal: every node sees every member live with one
 * leader, and no node holds a message of a partition it does not own
 * (cl_owner, the owner rule of shm/owner.c) - every partition has one owner
 * again and nothing is stranded; then a drain through every node; then: no
 * accepted id was never delivered (lost), no id was delivered to "g" after
 * an ack of it answered "acked" (a re-read beyond lease rules: a later
 * delivery has more attempts than the acked one, which would have made that
 * ack "stale"), every node lists the same declared queues with the same
 * options, and `mayflyd --check-segment` is sound on every node.  An ack
 * answered 503 may have been applied (its answer lost), so the drain ends
 * when the cluster holds nothing of the queue, not when every ack has
 * answered "acked".
 */
#ifndef MAYFLY_TEST_CLUSTER_PARTITION_CHECK_H
#define MAYFLY_TEST_CLUSTER_PARTITION_CHECK_H

#include <stdint.h>

#include "test/cluster/ns_cluster.h"

struct pc;

/* pc_new - bookkeeping for queue (declared by the caller) over c's nodes,
 * pushes spread over nparts partitions. */
struct pc *pc_new(struct nsc *c, const char *queue, int nparts);

/* pc_declare - configure the queue through node i with the options the
 * checker needs: 2 s leases (a delivery lost in a cut comes back soon) and
 * a retry limit no fault reaches. */
void pc_declare(struct pc *p, int i);

/* pc_load_start - a pusher and a consumer through each node in through (a
 * mask); pc_load_stop - end them (each finishes its request). */
void pc_load_start(struct pc *p, unsigned through);
void pc_load_stop(struct pc *p);

/* pc_accepted - pushes answered 201 so far (messages). */
long pc_accepted(struct pc *p);

/*
 * pc_wait_merged - from the heal at heal_ms (itest_now_ms), until every node
 * sees every member live and names one leader (ms into *views_ms), then
 * until no node holds anything of a partition it does not own (ms into
 * *merged_ms); fails the test past timeout_ms.
 */
void pc_wait_merged(struct pc *p, int64_t heal_ms, int timeout_ms,
                    int64_t *views_ms, int64_t *merged_ms);

/* pc_drain - pop and ack as "g" through every node in turn until every
 * accepted id has been delivered and the cluster holds nothing of the
 * queue, or timeout_ms. */
void pc_drain(struct pc *p, int timeout_ms);

/*
 * pc_check - the counts (nothing lost, no re-read), the catalogs (the same
 * declared queues everywhere, waited for up to 15 s) and the segments
 * (sound); fails the test on any, and prints the figures under name.
 */
void pc_check(struct pc *p, const char *name);

/* pc_free - the bookkeeping (the load stopped first). */
void pc_free(struct pc *p);

#endif
