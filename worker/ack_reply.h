/*
 * ack_reply.h - an ack entry's "reply" (SPEC §9), by ack_reply.c: the
 * reply goes to the message's replyTo before the entry completes it.
 */
#ifndef MAYFLY_WORKER_ACK_REPLY_H
#define MAYFLY_WORKER_ACK_REPLY_H

#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct http_str;

/*
 * ack_reply_deliver - push reply (JSON text) to the replyTo of message seq
 * of (queue, part), held here.  Returns what the entry's result says of it:
 * ",\"replied\":true", or ",\"replied\":false,\"reason\":..." (static text).
 */
const char *ack_reply_deliver(struct worker *w, struct shm_name queue,
                              struct shm_name part, uint64_t seq,
                              const struct http_str *reply);

#endif
