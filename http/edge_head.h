/*
 * edge_head.h - the checks of a request's head (request line and headers)
 * that libmicrohttpd 0.9.75 does not make, or makes with an HTML answer
 * (edge.h lists which): run by access.c on the access handler's first
 * call, before routing.  A head that fails gets a JSON error reply and
 * "Connection: close" (the body, if any, is not read: its length is not
 * to be trusted).  No state, no locking.
 */
#ifndef MAYFLY_HTTP_EDGE_HEAD_H
#define MAYFLY_HTTP_EDGE_HEAD_H

#include <stddef.h>

struct http_request;

/* The longest request URI (path and query) answered; longer: 414. */
#define HTTP_URI_MAX (8u << 10)
/* ... on the subscribe route: its `subs` list (SPEC §11, up to
 * stream_max_subs 256 pairs, URL-encoded) has no other way in, since a
 * browser's EventSource sends no body, and 256 ordinary pairs
 * (["presence","room-1000"]: 41 bytes encoded) pass 8 KiB.  The head
 * still fits HTTP_MHD_CONN_MEMORY with the few KiB of headers a browser
 * sends; one that does not is MHD's own 431, in JSON (edge.h, D10, D12).
 * A stream keeps its head resident for its life (edge_pool.h gives back
 * only zeroed pages): a long list costs its stream what it is long. */
#define HTTP_URI_MAX_SUBSCRIBE (16u << 10)
/* The most header bytes (names, values and their ": \r\n") answered;
 * more: 431. */
#define HTTP_HEADERS_MAX (8u << 10)
/* libmicrohttpd's per-connection memory (MHD_OPTION_CONNECTION_MEMORY_LIMIT):
 * what a request within our limits needs, not more.  It holds the head in
 * its read buffer (which starts at half of it and grows to nearly all of
 * it when a head needs that: a request line of HTTP_URI_MAX and
 * HTTP_HEADERS_MAX of headers fit, with a record per header at its end),
 * the head of the answer, and a body as it arrives (access.c copies it
 * out, so a larger one comes in several reads).  MHD zeroes all of it
 * after every request, and the read buffer's free part when an answer
 * starts (a stream's, at once): what each connection, a parked one too,
 * keeps resident, but a stream, which gives those pages back once its
 * body waits (edge_pool.h).  Pools up to 32 KiB are malloc'd, larger ones
 * mmap'd.  BENCHMARKS.md gives the bytes a parked long poll and an idle
 * stream cost. */
#define HTTP_MHD_CONN_MEMORY (24u << 10)

/* http_edge_token_char - c may be part of an RFC 9110 token (a header
 * name, a method). */
int http_edge_token_char(unsigned char c);

/*
 * http_edge_head_uri - MHD's URI log callback got uri, a request's raw
 * URI in MHD's read buffer (writable): MHD's own parse of its query is cut
 * short (edge.h, D11), the query being ours to parse from a copy made
 * first.
 */
void http_edge_head_uri(const char *uri);

/*
 * http_edge_head_check - req's head, given MHD's method and version strings
 * (which point into the same buffer as the raw URI req->uri_at): a NUL in
 * the request line, a URI over HTTP_URI_MAX (HTTP_URI_MAX_SUBSCRIBE on
 * the subscribe route), headers over
 * HTTP_HEADERS_MAX, a header name that is not a token (whitespace before
 * its colon), a folded header line, a NUL or another control character
 * in a header value, an HTTP/1.1 request without Host, more than one
 * Host, Authorization or Content-Length, a Transfer-Encoding other than
 * chunked or one beside Content-Length.  Returns 0, or -1 with the reply
 * set (400, 414 or 431).
 */
int http_edge_head_check(struct http_request *req, const char *method,
                         const char *version);

#endif
