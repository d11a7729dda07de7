/*
 * sign.h - the signature every call between nodes carries (SPEC §10), in
 * place of the cluster secret: an HMAC-SHA256, keyed by the secret, over
 *
 *   method "\n" target "\n" hex(SHA-256(body)) "\n" timestamp "\n" nonce
 *
 * where target is the request's path and query as sent, timestamp the
 * sender's wall clock in seconds (X-Mayfly-Timestamp) and nonce
 * "<sender>-<seq>" (X-Mayfly-Nonce): 16 hex digits that name one sending
 * process (random at its start) and a count that process never repeats.
 * The receiver refuses (401) a call whose signature does not match (any
 * part altered), whose timestamp is more than HTTP_SIGN_WINDOW_S from its
 * own clock, or whose nonce it has seen (shm/nonce.h: a replay).  Clocks
 * of the nodes must agree within that window.
 *
 * Pure functions over strings; no state, no locking.
 */
#ifndef MAYFLY_HTTP_SIGN_H
#define MAYFLY_HTTP_SIGN_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_SIGN_HEADER    "X-Mayfly-Signature"
#define HTTP_SIGN_TIME      "X-Mayfly-Timestamp"
#define HTTP_SIGN_NONCE     "X-Mayfly-Nonce"
#define HTTP_SIGN_WINDOW_S  30
#define HTTP_SIGN_HEX       65 /* 64 hex digits and a NUL */
#define HTTP_SIGN_NONCE_MAX 40 /* "<16 hex>-<up to 20 digits>" and a NUL */

/* One call's signature headers, as "Name: value" lines. */
struct http_sign_lines {
    char sig[sizeof(HTTP_SIGN_HEADER) + 2 + HTTP_SIGN_HEX];
    char time[sizeof(HTTP_SIGN_TIME) + 2 + 24];
    char nonce[sizeof(HTTP_SIGN_NONCE) + 2 + HTTP_SIGN_NONCE_MAX];
};

/*
 * http_sign - the hex HMAC of one call into out (HTTP_SIGN_HEX bytes),
 * keyed by key (the cluster secret, NUL-terminated).
 */
void http_sign(const char *key, const char *method, const char *target,
               const void *body, size_t len, const char *timestamp,
               const char *nonce, char *out);

/*
 * http_sign_lines - the three header lines for a call sent now (wall
 * clock) by sender with count seq.
 */
void http_sign_lines(const char *key, uint64_t sender, uint64_t seq,
                     const char *method, const char *target, const void *body,
                     size_t len, struct http_sign_lines *out);

/* What a call's signature headers say. */
enum http_sign_verdict {
    HTTP_SIGN_ABSENT, /* no X-Mayfly-Signature: not a node's call */
    HTTP_SIGN_OK,     /* signed by a holder of the key, within the window:
                         *sender and *seq are its nonce (check for replay) */
    HTTP_SIGN_BAD,    /* malformed, altered, or another key's */
    HTTP_SIGN_STALE,  /* timestamp outside the window */
};

/* One received call: what was signed, and its three headers (NULL when
 * absent). */
struct http_sign_call {
    const char *method, *target;
    const void *body;
    size_t len;
    const char *sig, *time, *nonce;
};

/*
 * http_sign_check - the verdict on call c at wall-clock second now_s, with
 * a sentence saying why in why when it is not OK.  The signature is
 * compared in constant time.
 */
enum http_sign_verdict http_sign_check(const struct http_sign_call *c,
                                       const char *key, int64_t now_s,
                                       uint64_t *sender, uint64_t *seq,
                                       char *why, size_t whylen);

/* http_sign_now - the wall clock in seconds, as timestamps are. */
int64_t http_sign_now(void);

#endif
