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
/* The most header bytes (names, values and their ": \r\n") answered;
 * more: 431. */
#define HTTP_HEADERS_MAX (8u << 10)
/* libmicrohttpd's per-connection memory (MHD_OPTION_CONNECTION_MEMORY_LIMIT):
 * its read buffer takes half, so a head within our limits fits, and a
 * record per header.  MHD zeroes all of it after every request (and so
 * touches every page): twice its default, not more. */
#define HTTP_MHD_CONN_MEMORY (64u << 10)

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
 * the request line, a URI over HTTP_URI_MAX, headers over
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
