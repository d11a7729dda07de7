/*
 * ack_reply.h - an ack entry's "reply" (SPEC §9), by ack_reply.c: the
 * message's replyTo is read before the entry applies, and the reply goes
 * there once the entry ended the delivery it names (never for a stale one).  An
 * inbox on another node gets it in one hop, a push marked forwarded to the
 * node its name carries; the ack's answer waits for that push's.
 */
#ifndef MAYFLY_WORKER_ACK_REPLY_H
#define MAYFLY_WORKER_ACK_REPLY_H

#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct http_str;
struct http_request;
struct ack_reply_out;

/*
 * ack_reply_read - the replyTo of message seq of (queue, part), held here,
 * into *inbox (malloc'd, the caller frees inbox->ptr): read before the
 * entry applies, which frees the message.  NULL, or what the entry's
 * result says instead (",\"replied\":false,\"reason\":...", static text)
 * with *inbox empty.
 */
const char *ack_reply_read(struct worker *w, struct shm_name queue,
                           struct shm_name part, uint64_t seq,
                           struct shm_name *inbox);

/*
 * ack_reply_deliver - push reply (JSON text) to inbox, once its entry
 * completed the delivery that carried the request.  Returns what the
 * entry's result says of it: ",\"replied\":true", or
 * ",\"replied\":false,\"reason\":..." (static text); NULL when the inbox is
 * another node's: the reply is kept in *out (made at the first) as entry
 * index's, to go with ack_reply_send().
 */
const char *ack_reply_deliver(struct worker *w, struct shm_name inbox,
                              const struct http_str *reply,
                              struct ack_reply_out **out, uint32_t index);

/*
 * ack_reply_send - send the replies out holds (takes out) on behalf of req
 * and suspend req; once each has its answer (FORWARD_MS at most), its
 * entry's text is in extra[index] and then(arg, req) runs, with req NULL
 * when its client left meanwhile.  Every reply is sent before this returns
 * or fails in extra; then runs once in any case, later.
 */
void ack_reply_send(struct worker *w, struct http_request *req,
                    struct ack_reply_out *out, const char **extra,
                    void (*then)(void *arg, struct http_request *req),
                    void *arg);

/* ack_reply_free - out, its replies unsent (NULL: nothing). */
void ack_reply_free(struct ack_reply_out *out);

#endif
