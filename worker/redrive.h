/*
 * redrive.h - POST /api/v1/ephemeral/redrive (SPEC §13): a dead-letter
 * queue's dead letters back to their origin partitions, cluster-wide.
 */
#ifndef MAYFLY_WORKER_REDRIVE_H
#define MAYFLY_WORKER_REDRIVE_H

struct worker;
struct http_request;

/* worker_redrive - answer {"redriven": N} once every share was read and
 * every push it sent was answered. */
void worker_redrive(struct worker *w, struct http_request *req);

#endif
