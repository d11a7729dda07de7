/*
 * push_peek.h - the queue and partition of a push body, found without
 * reading its messages: what a node needs to route a push it does not
 * own (worker/push_route.h).  The owner parses the body in full
 * (http_parse_push) and answers for it, so the node that forwards need
 * not: on a 27 KB push of 100 messages the full parse is ~67 k
 * instructions, this peek a few hundred plus a memchr per payload.
 *
 * It is not a validator.  It answers only for the plain shape clients
 * send, {"queue": "<name>", "partition"?: "<name>", "messages":
 * [{"payload": any}, ...]} (members in any order, each once, names and
 * member keys with no escapes, no other member, no message field but
 * "payload"), and it may accept a body that is not JSON at all: it only
 * finds where values end.  For every body http_parse_push accepts, a
 * peek that succeeds names the same queue and partition (the members are
 * unique and their names raw, so there is no last-one-wins or unescaping
 * to differ on).  Anything else is -EINVAL, and the caller parses in full
 * as before: a push with keys, delays or ttls (checked against ceilings
 * before a forward), a repeated or escaped member, a null partition.
 *
 * No allocation, no state.  Errors: 0 or -EINVAL.
 */
#ifndef MAYFLY_HTTP_PUSH_PEEK_H
#define MAYFLY_HTTP_PUSH_PEEK_H

#include <stddef.h>

/* What a peek found: spans of the body. */
struct http_push_peek {
    const char *queue;
    size_t queue_len;
    const char *partition; /* NULL: absent (Default) */
    size_t partition_len;
};

/* http_push_peek - body[0..len)'s queue and partition, as above. */
int http_push_peek(const char *body, size_t len, struct http_push_peek *out);

/*
 * http_push_peek_head - the same read stopped where "messages" begins: the
 * queue and partition named before it, in the order clients send them, for
 * a few hundred instructions whatever the body's size.  Only a guess (a
 * partition, or a second queue, may follow the messages; the messages are
 * not looked at), good to tell cheaply that this node owns the push, which
 * it then parses in full anyway.  partition NULL: none before "messages".
 * 0, or -EINVAL: no queue before "messages", or what the peek refuses.
 */
int http_push_peek_head(const char *body, size_t len,
                        struct http_push_peek *out);

#endif
