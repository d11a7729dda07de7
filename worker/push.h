/*
 * push.h - POST /api/v1/ephemeral/push (push.c).
 */
#ifndef MAYFLY_WORKER_PUSH_H
#define MAYFLY_WORKER_PUSH_H

struct worker;
struct http_request;

/* worker_push - the push route: stores every message of req or none, here
 * or at the partition's owner, and answers with their ids. */
void worker_push(struct worker *w, struct http_request *req);

#endif
