/*
 * edge_head.c - see edge_head.h.  libmicrohttpd 0.9.75 takes the first
 * Content-Length and ignores a second (the request-smuggling ambiguity),
 * waits forever for the body of a Transfer-Encoding it does not know,
 * serves an HTTP/1.1 request without Host, cuts the request line at a NUL
 * byte (edge.h, D3-D5), keeps whitespace before a colon in the header's
 * name, joins a folded line to the name above it, cuts a header value at
 * a NUL byte and takes the first of two Authorization headers (D6-D9);
 * each is answered here instead, with the JSON error body every answer
 * carries.
 *
 * The last four need the head as it came: MHD parsed it in place, in its
 * read buffer, and the header records it keeps point into that buffer.
 * Its parse wrote a NUL over each line end (CRLF: two, a bare LF: one)
 * and over the colon of each header line, and changed nothing else there;
 * so the records, walked in order, must account for every byte of the
 * head (walk_header): a byte they do not (a NUL MHD cut a value at, and
 * what followed it) or a record from outside the head (a folded line's
 * name, which MHD moved to join) is a head MHD did not read as sent.
 */
#include "http/edge_head.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "http/reply.h"
#include "http/request-t.h"
#include "http/route.h"
#include "http/server-t.h"

/* What is wrong with the header lines, first found (edge.h, D6-D8). */
enum head_fault {
    HEAD_FAULT_NONE,
    HEAD_FAULT_NAME, /* a name that is not a token: whitespace before the
                        colon (D6), or an empty one */
    HEAD_FAULT_FOLD, /* a folded line (D7) */
    HEAD_FAULT_NUL,  /* bytes the records skip: a NUL in a value (D8) */
    HEAD_FAULT_CTL,  /* a control character in a value */
};

/* What the header walk counts and checks. */
struct head_tally {
    size_t bytes;         /* names, values, ": " and CRLF */
    unsigned lengths;     /* Content-Length headers */
    unsigned encodings;   /* Transfer-Encoding headers */
    unsigned host;        /* Host headers */
    unsigned auth;        /* Authorization headers */
    unsigned not_chunked; /* a Transfer-Encoding other than "chunked" */
    const char *start;    /* the head in MHD's read buffer: [start, end) */
    const char *end;
    const char *line_end; /* the first NUL of the last line walked's end */
    enum head_fault fault;
};

/* http_edge_token_char - see edge_head.h. */
int
http_edge_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* value_fault - a value byte RFC 9110 does not allow: a control character
 * other than HTAB (CR alone included), or DEL. */
static int
value_fault(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 1;
    }
    return 0;
}

/*
 * walk_header - the next header record, name and value where MHD keeps
 * them: the line must begin right after the last line's end (one NUL or
 * two), inside the head; the name is a token, ended by the NUL that was
 * its colon; only spaces and tabs lie between that and the value.
 */
static enum head_fault
walk_header(struct head_tally *t, const char *key, size_t klen,
            const char *value, size_t vlen)
{
    const char *e = t->line_end, *p;

    if (key < t->start || key >= t->end)
        return HEAD_FAULT_FOLD;
    if (key != e + 1 && !(key == e + 2 && e[1] == '\0'))
        return HEAD_FAULT_NUL;
    if (klen == 0)
        return HEAD_FAULT_NAME;
    for (size_t i = 0; i < klen; i++)
        if (!http_edge_token_char((unsigned char)key[i]))
            return HEAD_FAULT_NAME;
    for (p = key + klen + 1; p < value && (*p == ' ' || *p == '\t'); p++)
        ;
    if (p != value || value + vlen >= t->end)
        return HEAD_FAULT_NUL;
    if (value_fault(value, vlen))
        return HEAD_FAULT_CTL;
    t->line_end = value + vlen;
    return HEAD_FAULT_NONE;
}

/* tally_header - one header of the request into the tally. */
static enum MHD_Result
tally_header(void *cls, enum MHD_ValueKind kind, const char *key,
             size_t key_size, const char *value, size_t value_size)
{
    struct head_tally *t = cls;

    (void)kind;
    t->bytes += key_size + value_size + 4;
    if (t->fault == HEAD_FAULT_NONE)
        t->fault = walk_header(t, key, key_size, value, value_size);
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        t->lengths++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        t->host++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
        t->auth++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        t->encodings++;
        t->not_chunked |= value == NULL || strcasecmp(value, "chunked") != 0;
    }
    return MHD_YES;
}

/* head_tail_fault - after the last header line: its end and the empty
 * line that ends the head (each one NUL or two), nothing else. */
static enum head_fault
head_tail_fault(const struct head_tally *t)
{
    const char *p = t->line_end;

    if (t->end - p < 2 || t->end - p > 4)
        return HEAD_FAULT_NUL;
    for (; p < t->end; p++)
        if (*p != '\0')
            return HEAD_FAULT_NUL;
    return HEAD_FAULT_NONE;
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

/* walk_headers - the tally of req's headers, walked against the head as
 * MHD read it (from method, its start, for the size MHD gives; without
 * it nothing can be walked, and nothing passes). */
static void
walk_headers(struct http_request *req, const char *method, const char *version,
             struct head_tally *t)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
        req->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);

    t->start = method;
    t->end = ci != NULL ? method + ci->header_size : method;
    t->line_end = version + strlen(version);
    MHD_get_connection_values_n(req->conn, MHD_HEADER_KIND, tally_header, t);
    if (t->fault == HEAD_FAULT_NONE)
        t->fault = head_tail_fault(t);
}

/* fault_sentence - what the refusal of a head with fault f says. */
static const char *
fault_sentence(enum head_fault f)
{
    switch (f) {
    case HEAD_FAULT_NAME:
        return "a header name is not a token (whitespace before its colon?)";
    case HEAD_FAULT_FOLD:
        return "a header line is folded (it begins with a space or tab): "
               "obs-fold is refused";
    case HEAD_FAULT_CTL:
        return "a header value holds a control character";
    default:
        return "a header holds a NUL byte";
    }
}

/* uri_max - the longest URI req's route answers (edge_head.h). */
static size_t
uri_max(const struct http_request *req, const char *method)
{
    const char *q = strchr(req->uri, '?');
    size_t plen = q != NULL ? (size_t)(q - req->uri) : strlen(req->uri);
    struct http_route_match m;

    http_route_match(method, req->uri, plen, req->server->opts.cluster, &m);
    return m.route == HTTP_ROUTE_SUBSCRIBE && m.method_ok
               ? HTTP_URI_MAX_SUBSCRIBE
               : HTTP_URI_MAX;
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
    size_t max = uri_max(req, method);
    if (uri_len > max) {
        char said[96];
        snprintf(said, sizeof(said),
                 "the request URI is longer than %zu bytes%s", max,
                 max == HTTP_URI_MAX_SUBSCRIBE ? " (a subscribe's)" : "");
        return refuse(req, 414, said);
    }
    walk_headers(req, method, version, &t);
    if (t.bytes > HTTP_HEADERS_MAX)
        return refuse(req, 431, "the request headers exceed 8192 bytes");
    if (t.fault != HEAD_FAULT_NONE)
        return refuse(req, 400, fault_sentence(t.fault));
    if (t.host > 1 || (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && !t.host))
        return refuse(req, 400,
                      "a request has one Host header at most, and an "
                      "HTTP/1.1 request exactly one");
    if (t.auth > 1)
        return refuse(req, 400, "the request has more than one Authorization");
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
