/*
 * sign.h - the signature every call between nodes carries (SPEC §10), in
 * place of the cluster secret: an HMAC-SHA256, keyed by the secret, over
 * everything in the call that carries meaning:
 *
 *   "mayfly-call-4\n" F(method) F(target) F(hex(UMAC-128(body)))
 *   then, for every X-Mayfly-* header but X-Mayfly-Signature and for
 *   Authorization, sorted by name (ASCII, case-insensitive):
 *   F(lowercased name) F(value)
 *
 * where F(s) is s's length in decimal, ':', s and '\n' (so no value can
 * pass for two fields), target is the request's path and query as sent,
 * and a value is the header's, spaces and tabs around it left out.  A
 * call names one header at most once.  The signature header's value is
 * "v4=" and the HMAC in 64 hex digits.
 *
 * Authorization is signed because the receiver authorizes a forwarded
 * call by it (tenant, permissions: SPEC §5, §10): a token swapped, added
 * or dropped on the way is an altered call (401), as a changed target or
 * body is.  (mayfly-call-3 left it out.)  A batch call's entries carry
 * theirs in the body, which the UMAC covers.  Among the other signed
 * headers:
 *
 *   X-Mayfly-Timestamp  the sender's wall clock, ms since the epoch
 *   X-Mayfly-Nonce      "<sender>-<seq>": 16 hex digits naming one sending
 *                       process (random at its start) and a count it
 *                       never repeats
 *   X-Mayfly-To         the node the call is for: "<node id>/<incarnation,
 *                       16 hex>" when the sender has heard it, else the
 *                       "host:port" it dialled
 *   X-Mayfly-Deadline   (optional) the sender's wall clock, ms, at which it
 *                       stops waiting for the answer
 *
 * and the sender's own (X-Mayfly-Node, -Client, -Incarnation, -State,
 * -Forwarded, -Withdraw...): a header added, dropped or changed on the way
 * breaks the signature.
 *
 * The body's MAC.  UMAC-128 (RFC 4418, nettle) keyed by the first 16 bytes
 * of HMAC-SHA256(secret, "mayfly body umac"), its 16-byte nonce the
 * call's: sender then seq, 8 bytes each, most significant first.  Not a
 * plain hash: SHA-256 of a forwarded push's 27 KB took 17.7 us at each
 * end, the UMAC 4.3 (its key's tables made once per secret and thread).
 * UMAC asks that a nonce never repeat under one key: a sender is 64 random
 * bits drawn once per client (http/client.c), never 0, and its seq counts
 * up from 1 and never wraps, so two calls share a nonce only when two
 * clients drew the same sender (about n^2 / 2^65 for n clients under one
 * secret) and reached the same count.  Even then nothing leaks: the tag is
 * never sent, only hashed into the HMAC above, so an attacker without the
 * secret sees neither the tag nor the pad and can only guess a body whose
 * UMAC collides (about 2^-120 a try for UMAC-128).  A call whose nonce is
 * missing or does not parse cannot be checked and is refused (BAD).
 *
 * The receiver refuses (401) a call whose signature does not match, whose
 * timestamp is more than HTTP_SIGN_WINDOW_MS from its own clock, or that
 * is addressed to another node or to another incarnation of this one (an
 * address names this node only for calls made after it started); then
 * (http/node_call.h) one whose nonce it has seen, and one whose deadline
 * passed.  Clocks of the nodes must agree within the window; deadlines
 * ask more (node_call.h).
 *
 * Another build.  Every node of a cluster runs one build (DESIGN §6).  A
 * call signed by a build of mayfly-call-2 (a signature of 64 hex digits,
 * no "v<n>=") or of another "v<n>=" (v3: mayfly-call-3) is refused with a
 * sentence saying the sender runs another build; a build of
 * mayfly-call-2 receiving this build's calls refuses them as altered or
 * signed with another secret.
 *
 * Functions over strings; the only state is a per-thread copy of the last
 * key's HMAC schedule and keyed UMAC (sign.c), so no locking.  Errors: 0
 * or -errno.
 */
#ifndef MAYFLY_HTTP_SIGN_H
#define MAYFLY_HTTP_SIGN_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_SIGN_PREFIX    "X-Mayfly-"
#define HTTP_SIGN_HEADER    "X-Mayfly-Signature"
#define HTTP_SIGN_TIME      "X-Mayfly-Timestamp"
#define HTTP_SIGN_NONCE     "X-Mayfly-Nonce"
#define HTTP_SIGN_TO        "X-Mayfly-To"
#define HTTP_SIGN_DEADLINE  "X-Mayfly-Deadline"
#define HTTP_SIGN_AUTHZ     "Authorization" /* signed too */
#define HTTP_SIGN_WINDOW_MS 30000
#define HTTP_SIGN_VALUE_MAX 68  /* "v4=", 64 hex digits and a NUL */
#define HTTP_SIGN_NONCE_MAX 40  /* "<16 hex>-<up to 20 digits>" and a NUL */
#define HTTP_SIGN_TO_MAX    260 /* a host:port (255) or "<id>/<16 hex>" */
#define HTTP_SIGN_HEADERS_MAX                                                  \
    24 /* X-Mayfly-* headers one call may carry
                                     (and an Authorization besides) */

/* One header of a call. */
struct http_sign_header {
    const char *name, *value;
};

/* A call, as sent or received: headers lists its X-Mayfly-* headers, the
 * signature's included or not, and every Authorization it carries, in any
 * order (other headers listed are ignored). */
struct http_sign_call {
    const char *method, *target;
    const void *body;
    size_t len;
    const struct http_sign_header *h;
    size_t nh;
};

/*
 * http_sign - the signature of call c, the X-Mayfly-Signature value
 * ("v3=<64 hex>"), into out (HTTP_SIGN_VALUE_MAX bytes), keyed by key (the
 * cluster secret, NUL-terminated).  0, or -EINVAL when c names a header
 * twice, has more than HTTP_SIGN_HEADERS_MAX of them, or has no
 * X-Mayfly-Nonce that parses (the body's MAC takes it).
 */
int http_sign(const char *key, const struct http_sign_call *c, char *out);

/* Where a call goes: the address dialled, and the node's id and
 * incarnation when known (node_id NULL or "", or incarnation 0: not). */
struct http_sign_to {
    const char *addr;
    const char *node_id;
    uint64_t incarnation;
};

/* One call to sign. */
struct http_sign_req {
    const char *method, *target;
    const void *body;
    size_t len;
    const char *const *lines; /* the call's own "Name: value" header lines;
                                 the X-Mayfly-* and Authorization ones are
                                 signed */
    size_t nlines;
    struct http_sign_to to;
    uint64_t sender, seq; /* the nonce */
    int64_t now_ms;       /* the wall clock (http_sign_now_ms) */
    int64_t deadline_ms;  /* the same clock; 0: none */
};

/* The header lines the signer adds, "Name: value"; deadline is "" when the
 * call has none. */
struct http_sign_lines {
    char sig[sizeof(HTTP_SIGN_HEADER) + 2 + HTTP_SIGN_VALUE_MAX];
    char time[sizeof(HTTP_SIGN_TIME) + 2 + 24];
    char nonce[sizeof(HTTP_SIGN_NONCE) + 2 + HTTP_SIGN_NONCE_MAX];
    char to[sizeof(HTTP_SIGN_TO) + 2 + HTTP_SIGN_TO_MAX];
    char deadline[sizeof(HTTP_SIGN_DEADLINE) + 2 + 24];
};

/*
 * http_sign_lines - the lines that sign call r.  0, or -EINVAL: a line of
 * r without a colon, one of the signer's own headers among r's lines, two
 * Authorization lines, a destination too long, or what http_sign
 * refuses.
 */
int http_sign_lines(const char *key, const struct http_sign_req *r,
                    struct http_sign_lines *out);

/* What a call's signature headers say. */
enum http_sign_verdict {
    HTTP_SIGN_ABSENT,    /* no X-Mayfly-Signature: not a node's call */
    HTTP_SIGN_OK,        /* signed by a holder of the key, within the
                            window, for this node (check the nonce) */
    HTTP_SIGN_BAD,       /* malformed, altered, or another key's */
    HTTP_SIGN_STALE,     /* timestamp outside the window */
    HTTP_SIGN_ELSEWHERE, /* for another node, or another incarnation */
};

/* Who receives: this node's id and incarnation, the addresses peers dial
 * it at (NULL or "": none), and when this incarnation started (wall ms). */
struct http_sign_self {
    const char *node_id;
    uint64_t incarnation;
    const char *addr[2];
    int64_t since_ms;
};

/* What an OK call says of itself. */
struct http_sign_seen {
    uint64_t sender, seq; /* its nonce: check for replay */
    int64_t deadline_ms;  /* 0: none */
};

/*
 * http_sign_check - the verdict on call c for self at wall-clock now_ms,
 * with a sentence saying why in why when it is not OK.  The signature is
 * compared in constant time.
 */
enum http_sign_verdict
http_sign_check(const struct http_sign_call *c, const char *key,
                const struct http_sign_self *self, int64_t now_ms,
                struct http_sign_seen *seen, char *why, size_t whylen);

/* http_sign_ms - a decimal count of ms (a timestamp or deadline) into out:
 * digits only, at most 18.  0 or -EINVAL. */
int http_sign_ms(const char *s, int64_t *out);

/* http_sign_now_ms - the wall clock in ms, as timestamps are. */
int64_t http_sign_now_ms(void);

#endif
