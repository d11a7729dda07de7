/*
 * sse_parse.h - an incremental reader of Server-Sent Events (the WHATWG
 * HTML standard's "interpreting an event stream"), for a peer's stream that
 * arrives in pieces of any size.  Pure: no I/O, no clock, no locking.
 *
 * The rules, as a browser's EventSource follows them:
 *   - one leading byte order mark (EF BB BF) is dropped;
 *   - a line ends at CR LF, LF or CR (a CR LF split between two feeds is
 *     one line end);
 *   - a blank line dispatches the event being gathered;
 *   - a line starting with ':' is a comment, ignored;
 *   - "name:value" is a field, one space after the colon dropped; a line
 *     without a colon is a field named by the whole line, with value "";
 *   - data appends its value and a LF to the data buffer; event sets the
 *     event type; id sets the id buffer unless its value holds a NUL (then
 *     the field is ignored); retry, when its value is ASCII digits only
 *     (at least one), sets the reconnection time at once, event or not;
 *     other fields are ignored;
 *   - a dispatch first makes the id buffer the stream's last event id
 *     (which no dispatch resets: it stays until an id field changes it);
 *     then, with an empty data buffer (no data field since the last
 *     dispatch) it delivers nothing and forgets the event type; otherwise
 *     the data loses its last LF and the event goes out, its type
 *     "message" when none was set;
 *   - what follows the last blank line when the stream ends is dropped.
 * Bytes are passed on as they are: no UTF-8 decoding or replacement.
 *
 * Memory is bounded by the max given at init: a line longer than max bytes
 * (its end not counted), or an event whose data passes max bytes, fails
 * the parser with -EMSGSIZE as soon as the bytes are seen, so at most about
 * five times max is held (a line, the data, the type, two ids).
 *
 * Errors: 0 or -errno; once a feed failed (or its callback stopped it),
 * every later feed returns the same value.
 */
#ifndef MAYFLY_HTTP_SSE_PARSE_H
#define MAYFLY_HTTP_SSE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "http/buf.h"

/* An event as dispatched.  The strings are NUL-terminated (the data may
 * hold NULs of its own: trust data_len) and valid during the callback only.
 */
struct http_sse_parsed {
    const char *type; /* the event field, or "message" */
    size_t type_len;
    const char *data; /* the data lines joined with LF */
    size_t data_len;
    const char *id; /* the stream's last event id ("" when none) */
    size_t id_len;
    int64_t retry_ms; /* the reconnection time so far; -1 when none came */
};

/* Called for each event; a non-zero return stops the feed, which returns
 * it. */
typedef int http_sse_parse_fn(void *arg, const struct http_sse_parsed *ev);

/* A parser: see the fields only through the functions below. */
struct http_sse_parser {
    size_t max;              /* longest line; most data bytes of one event */
    struct http_buf line;    /* a line begun in an earlier feed */
    struct http_buf data;    /* the data buffer, each value LF-ended */
    struct http_buf type;    /* the event type buffer */
    struct http_buf id;      /* the id buffer: an id field's value */
    int id_set;              /* id holds a value not yet dispatched */
    struct http_buf last_id; /* the id as of the last dispatch */
    int64_t retry_ms;        /* -1: none yet */
    int err;                 /* sticky: an error, or a callback's stop */
    unsigned bom;            /* BOM bytes matched at the start; 3: past it */
    int cr;                  /* the last line ended with CR: skip one LF */
};

/* http_sse_parse_init - an empty parser holding lines and events of at most max
 * bytes.  Cannot fail; release it with http_sse_parse_free(). */
void http_sse_parse_init(struct http_sse_parser *p, size_t max);

/*
 * http_sse_parse_feed - the next len bytes of the stream: fn(arg, ev) runs for
 * every event they complete, in order.  Returns 0, -EMSGSIZE (a line or an
 * event over max), -ENOMEM, or what fn returned to stop; after a non-zero
 * return the parser takes no more bytes.
 */
int http_sse_parse_feed(struct http_sse_parser *p, const void *buf, size_t len,
                        http_sse_parse_fn *fn, void *arg);

/* http_sse_parse_last_id - the stream's last event id as of its last blank line
 * ("" when none), NUL-terminated, its length in *len (when len is not
 * NULL): the Last-Event-ID a browser would resume with. */
const char *http_sse_parse_last_id(const struct http_sse_parser *p,
                                   size_t *len);

/* http_sse_parse_retry_ms - the last valid retry field's value, or -1. */
int64_t http_sse_parse_retry_ms(const struct http_sse_parser *p);

/* http_sse_parse_free - release what p holds; p may be initialised again. */
void http_sse_parse_free(struct http_sse_parser *p);

#endif
