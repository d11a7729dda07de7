/*
 * pop_format.h - the JSON a pop answers with (pop_format.c):
 * {"queue", "messages": [{"id", "partition", "payload", "replyTo"?,
 * "attempts"}]}, names as the client knows them.
 */
#ifndef MAYFLY_WORKER_POP_FORMAT_H
#define MAYFLY_WORKER_POP_FORMAT_H

#include <stdint.h>

#include "shm/broker.h"

struct http_buf;

/* pop_format - append the answer for what sink holds, popped from queue
 * (its internal name) by this node's incarnation, to b.  Without memory
 * b is left short (http_reply answers 500). */
void pop_format(struct http_buf *b, const struct shm_sink *sink,
                struct shm_name queue, uint64_t incarnation);

#endif
