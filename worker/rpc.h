/*
 * rpc.h - POST /api/v1/ephemeral/request: request/reply in one call
 * (SPEC §9), served by rpc.c.
 */
#ifndef MAYFLY_WORKER_RPC_H
#define MAYFLY_WORKER_RPC_H

struct worker;
struct http_request;

/* worker_request_verb - the request verb's route (SPEC §9): answers req with the reply, 504
 * request_timeout, 503 no_responders or an error; waits parked, never
 * blocking the loop. */
void worker_request_verb(struct worker *w, struct http_request *req);

#endif
