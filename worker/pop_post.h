/*
 * pop_post.h - POST /api/v1/ephemeral/pop (pop_post.c, SPEC §14): a pop
 * whose body carries its parameters and the acks of the batch before, so
 * a consumer in ack mode drains in one exchange a batch.
 */
#ifndef MAYFLY_WORKER_POP_POST_H
#define MAYFLY_WORKER_POP_POST_H

struct worker;
struct http_request;

/* worker_pop_post - the route: the acks applied first, then the pop; the
 * answer carries "results" beside "messages".  A bad body answers 400
 * naming the field and changes nothing. */
void worker_pop_post(struct worker *w, struct http_request *req);

#endif
