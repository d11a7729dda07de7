/*
 * sse.h - Server-Sent Events as a stream writes them (SPEC §11): events,
 * comments and the retry field, appended to a byte buffer in the
 * text/event-stream format (WHATWG HTML, "Server-sent events").
 *
 * An event's data is one line: the JSON it carries may hold line ends
 * only as white space between tokens (inside a string they are escaped),
 * so each CR or LF in it is written as a space, which leaves the value as
 * it was.  Ids are cursors (http/cursor.h: base64url) and event names are
 * literals, so neither holds a line end.  Pure functions, no locking;
 * each returns 0 or -ENOMEM (the buffer's rule, http/buf.h).
 */
#ifndef MAYFLY_HTTP_SSE_H
#define MAYFLY_HTTP_SSE_H

#include <stddef.h>
#include <stdint.h>

struct http_buf;

/* One message as an event shows it: names as the client knows them. */
struct http_sse_msg {
    const char *queue, *part;
    size_t queue_len, part_len;
    uint64_t incarnation, seq; /* its id (http/ids.h) */
    const char *payload;       /* JSON as pushed */
    size_t payload_len;
    const char *reply_to; /* a request's inbox, or NULL */
    size_t reply_len;
};

/* http_sse_event - "id: <id>" (id NULL: none), "event: <event>", "data:
 * <data>" (CR and LF as spaces), then the blank line that ends it. */
int http_sse_event(struct http_buf *b, const char *id, const char *event,
                   const char *data, size_t len);

/*
 * http_sse_message - the event of one message: "event: message", the id,
 * and data {"queue", "partition", "id", "payload", "replyTo"?} on one
 * line.
 */
int http_sse_message(struct http_buf *b, const char *id,
                     const struct http_sse_msg *m);

/* http_sse_comment - ": <text>" and a blank line (a keepalive). */
int http_sse_comment(struct http_buf *b, const char *text);

/* http_sse_retry - "retry: <ms>" and a blank line: how long the client
 * waits before it reconnects. */
int http_sse_retry(struct http_buf *b, unsigned ms);

#endif
