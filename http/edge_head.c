/*
 * edge_head.c - see edge_head.h.  libmicrohttpd 0.9.75 takes the first
 * Content-Length and ignores a second (the request-smuggling ambiguity),
 * waits forever for the body of a Transfer-Encoding it does not know,
 * serves an HTTP/1.1 request without Host, and cuts the request line at a
 * NUL byte (edge.h, D3-D5); each is answered here instead, with the JSON
 * error body every answer carries.
 */
#include "http/edge_head.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "http/reply.h"
#include "http/request-t.h"

/* What the header walk counts. */
struct head_tally {
    size_t bytes;         /* names, values, ": " and CRLF */
    unsigned lengths;     /* Content-Length headers */
    unsigned encodings;   /* Transfer-Encoding headers */
    unsigned host;        /* Host headers */
    unsigned not_chunked; /* a Transfer-Encoding other than "chunked" */
};

/* tally_header - one header of the request into the tally. */
static enum MHD_Result
tally_header(void *cls, enum MHD_ValueKind kind, const char *key,
             const char *value)
{
    struct head_tally *t = cls;

    (void)kind;
    t->bytes += strlen(key) + (value ? strlen(value) : 0) + 4;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        t->lengths++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        t->host++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        t->encodings++;
        t->not_chunked |= value == NULL || strcasecmp(value, "chunked") != 0;
    }
    return MHD_YES;
}

/*
 * line_has_nul - MHD parsed the request line in place, writing a NUL over
 * the space after the method and the one before the version, so the
 * method, the raw URI and the version lie in one buffer with nothing but
 * spaces between them: a string shorter than its place there held a NUL.
 */
static int
line_has_nul(const char *method, const char *uri_at, size_t uri_len,
             const char *version)
{
    uintptr_t p = (uintptr_t)method + strlen(method) + 1;
    uintptr_t u = (uintptr_t)uri_at;

    if (u < p || (version[0] != '\0' && (uintptr_t)version != u + uri_len + 1))
        return 1;
    for (; p < u; p++)
        if (*(const char *)p != ' ')
            return 1;
    return 0;
}

/* refuse - the reply to a head that fails, closing the connection. */
static int
refuse(struct http_request *req, unsigned status, const char *sentence)
{
    http_reply_error(req, status, "ephemeral_bad_request", "%s", sentence);
    http_reply_header(req, "Connection", "close");
    req->discard = 1;
    return -1;
}

/* http_edge_head_uri - see edge_head.h.  MHD 0.9.75 calls its URI log
 * callback before it splits the query into a record per parameter in the
 * connection's memory, where some 460 parameters ran it out and left the
 * connection unanswered; a NUL after the '?' leaves it no parameter. */
void
http_edge_head_uri(const char *uri)
{
    char *q = strchr(uri, '?');

    if (q != NULL)
        q[1] = '\0';
}

/* http_edge_head_check - see edge_head.h. */
int
http_edge_head_check(struct http_request *req, const char *method,
                     const char *version)
{
    struct head_tally t = {0};
    size_t uri_len = strlen(req->uri);

    if (line_has_nul(method, req->uri_at, uri_len, version))
        return refuse(req, 400, "the request line holds a NUL byte");
    if (uri_len > HTTP_URI_MAX)
        return refuse(req, 414, "the request URI is longer than 8192 bytes");
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, tally_header, &t);
    if (t.bytes > HTTP_HEADERS_MAX)
        return refuse(req, 431, "the request headers exceed 8192 bytes");
    if (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && t.host != 1)
        return refuse(req, 400,
                      "an HTTP/1.1 request needs exactly one Host header");
    if (t.lengths > 1)
        return refuse(req, 400, "the request has more than one Content-Length");
    if (t.encodings > 1 || t.not_chunked)
        return refuse(req, 400,
                      "Transfer-Encoding must be chunked, alone, if present");
    if (t.encodings && t.lengths)
        return refuse(req, 400,
                      "the request has both Content-Length and "
                      "Transfer-Encoding");
    return 0;
}
