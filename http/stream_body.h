/*
 * stream_body.h - an answer whose body is made while it is sent (a
 * stream's events, SPEC §11): MHD asks the source for bytes as the socket
 * takes them; a source with none ready suspends the request until it has
 * more.  Status, Content-Type, extra headers and CORS are set as for every
 * reply (reply.h), and the body goes chunked (HTTP/1.1) or until the
 * close (HTTP/1.0).
 *
 * The source's read is called only from http_server_run(), and not after
 * the request ended (its on_done, request.h, has run then).  A request
 * aborted (http_request_abort) ends with the connection closed, whatever
 * the source holds.  Single-threaded, no locking.
 */
#ifndef MAYFLY_HTTP_STREAM_BODY_H
#define MAYFLY_HTTP_STREAM_BODY_H

#include <sys/types.h>

#include <stddef.h>

struct http_request;

/* Where the body comes from. */
struct http_body_src {
    /* read - copy at most max bytes of the body into buf: how many (> 0);
     * 0 when none is ready (the request waits, suspended, for
     * http_body_more); -1 when the body is over (the answer ends). */
    ssize_t (*read)(void *arg, char *buf, size_t max);
    void *arg;
};

/* http_reply_body - answer req with status, content_type (a literal) and
 * the body src gives.  0, or -ENOMEM (then nothing is set). */
int http_reply_body(struct http_request *req, unsigned status,
                    const char *content_type, const struct http_body_src *src);

/* http_body_more - src has bytes again, or its end: if req waits for
 * them, MHD asks on its next run. */
void http_body_more(struct http_request *req);

#endif
