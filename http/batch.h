/*
 * batch.h - the wire format of a batch call between nodes: several
 * client requests forwarded to one owner in one signed call, and the
 * owner's answers to them in one body (worker/coalesce.h sends them,
 * worker/node_batch.h serves them).
 *
 * Length-prefixed, big-endian, so that bodies pass as bytes: the
 * forwarder never parses what its clients sent, nor what the owner
 * answered.  A version word comes first, so a later format is refused
 * whole rather than misread.
 *
 *   call:   <u32 version> <u32 n> n x entry
 *           entry: <u8 mlen> method <u32 tlen> target
 *                  <u32 alen> authorization  (alen 0xffffffff: absent)
 *                  <u32 blen> body
 *   answer: <u32 version> <u32 n> n x entry, in the calls' order
 *           entry: <u16 status> <u32 retry_after_s> <u32 blen> body
 *
 * The decoders are strict: a count past the caller's room, a length past
 * the end, a byte a method, target or header value may not hold, bytes
 * after the last entry: each is an error (-EPROTO, -E2BIG or
 * -EPROTONOSUPPORT, with a sentence), never an over-read.  Decoded
 * strings point into the input and are not NUL-terminated.  No state.
 */
#ifndef MAYFLY_HTTP_BATCH_H
#define MAYFLY_HTTP_BATCH_H

#include <stddef.h>

#include "http/buf.h"

#define HTTP_BATCH_VERSION     1u
#define HTTP_BATCH_ENTRIES_MAX 64u   /* entries in one call */
#define HTTP_BATCH_METHOD_MAX  15u   /* "DELETE" and the like */
#define HTTP_BATCH_TARGET_MAX  8192u /* a path and its query */
#define HTTP_BATCH_AUTHZ_MAX   8192u /* an Authorization value (a JWT) */
/* The header of a body (version, count). */
#define HTTP_BATCH_HEAD 8u
/* An answer entry's bytes besides its body (status, retry, length). */
#define HTTP_BATCH_ANSWER_FRAME 10u

/* One client request. */
struct http_batch_call {
    const char *method;
    size_t method_len;
    const char *target; /* path and query, as the client sent them */
    size_t target_len;
    const char *authz; /* the Authorization value; NULL: none */
    size_t authz_len;
    const char *body;
    size_t body_len;
};

/* The owner's answer to one. */
struct http_batch_answer {
    unsigned status;
    unsigned retry_after_s; /* 0: no Retry-After */
    const char *body;
    size_t body_len;
};

/* http_batch_begin - b holds the head of a body with no entries yet
 * (reset first).  0, or -ENOMEM. */
int http_batch_begin(struct http_buf *b);

/* http_batch_call_ok - whether c can be encoded (what the decoder takes:
 * method, target and Authorization within their caps and bytes). */
int http_batch_call_ok(const struct http_batch_call *c);

/* http_batch_call_size - the bytes c takes in a call's body. */
size_t http_batch_call_size(const struct http_batch_call *c);

/* http_batch_add_call / http_batch_add_answer - append one entry to b
 * (begun) and count it.  0; -EINVAL for what the decoder would refuse (a
 * method, target or value too long or holding a byte it may not, a
 * status out of 100..599, HTTP_BATCH_ENTRIES_MAX entries already), -ENOMEM. */
int http_batch_add_call(struct http_buf *b, const struct http_batch_call *c);
int http_batch_add_answer(struct http_buf *b,
                          const struct http_batch_answer *a);

/*
 * http_batch_calls / http_batch_answers - decode body p[0..len) into
 * out[0..max) and *n.  0; -EPROTONOSUPPORT (another version), -E2BIG
 * (more than max entries), -EPROTO (anything malformed), with why.
 */
int http_batch_calls(const char *p, size_t len, struct http_batch_call *out,
                     size_t max, size_t *n, char *why, size_t whylen);
int http_batch_answers(const char *p, size_t len, struct http_batch_answer *out,
                       size_t max, size_t *n, char *why, size_t whylen);

#endif
