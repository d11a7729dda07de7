/*
 * stream_body.c - see stream_body.h: an MHD response from a callback
 * (MHD_SIZE_UNKNOWN), which suspends its connection while the source has
 * nothing: MHD 0.9.75 in external polling mode calls a reader that
 * returned 0 again at its next run, so the suspension is what keeps an
 * idle stream from costing a call a run; a resume brings the call back.
 */
#include "http/stream_body.h"

#include <errno.h>
#include <stdlib.h>

#include <microhttpd.h>

#include "http/edge_pool.h"
#include "http/reply.h"
#include "http/request-t.h"
#include "http/request.h"

/* MHD's block: it callocs this much beside each response, though with
 * chunked encoding (HTTP/1.1) the reader writes straight into the
 * connection's memory and the block is never used (HTTP/1.0: one read of
 * at most this much a call).  Every stream holds one response: 4 KiB
 * was a fifth of an idle stream's cost (BENCHMARKS.md, memory). */
#define BLOCK 256

/* What MHD's reader is given: the request, and its source. */
struct body {
    struct http_request *req;
    struct http_body_src src;
    int trimmed; /* its connection's zeroed pages were given back */
};

/* reader - MHD's content reader: the source's bytes, its end, or a
 * suspension until it has more.  The first time it waits, MHD has zeroed
 * the free part of the connection's read buffer (the answer has started)
 * and holds little more than the head: the pages of zeros go back
 * (edge_pool.h), and what a waiting stream costs is what it holds. */
static ssize_t
reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct body *b = cls;
    ssize_t n;

    (void)pos;
    if (b->req->aborted)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    n = b->src.read(b->src.arg, buf, max);
    if (n > 0)
        return n;
    if (n < 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (!b->trimmed) {
        b->trimmed = 1;
        http_edge_pool_trim(b->req);
    }
    http_request_suspend(b->req);
    return 0;
}

/* http_reply_body - see stream_body.h. */
int
http_reply_body(struct http_request *req, unsigned status,
                const char *content_type, const struct http_body_src *src)
{
    struct body *b = malloc(sizeof(*b));
    struct MHD_Response *resp;

    if (b == NULL)
        return -ENOMEM;
    b->req = req;
    b->src = *src;
    b->trimmed = 0;
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK, reader, b,
                                             free);
    if (resp == NULL) {
        free(b);
        return -ENOMEM;
    }
    http_reply_text(req, status, content_type, NULL);
    if (req->resp != NULL)
        MHD_destroy_response(req->resp);
    req->resp = resp;
    return 0;
}

/* http_body_more - see stream_body.h. */
void
http_body_more(struct http_request *req)
{
    http_request_resume(req);
}
