/*
 * sign.c - signing and checking calls between nodes (sign.h), with
 * nettle's HMAC-SHA256 and constant-time comparison.
 */
#include "http/sign.h"

#include <errno.h>
#include <inttypes.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* hex - n bytes as 2n lowercase hex digits and a NUL. */
static void
hex(const uint8_t *d, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * n] = '\0';
}

/* mac_field - one field of the signed text and its line end. */
static void
mac_field(struct hmac_sha256_ctx *c, const char *s, int last)
{
    hmac_sha256_update(c, strlen(s), (const uint8_t *)s);
    if (!last)
        hmac_sha256_update(c, 1, (const uint8_t *)"\n");
}

/* http_sign - see sign.h. */
void
http_sign(const char *key, const char *method, const char *target,
          const void *body, size_t len, const char *timestamp,
          const char *nonce, char *out)
{
    struct sha256_ctx h;
    struct hmac_sha256_ctx c;
    uint8_t d[SHA256_DIGEST_SIZE];
    char body_hex[HTTP_SIGN_HEX];

    sha256_init(&h);
    sha256_update(&h, len, body);
    sha256_digest(&h, sizeof(d), d);
    hex(d, sizeof(d), body_hex);
    hmac_sha256_set_key(&c, strlen(key), (const uint8_t *)key);
    mac_field(&c, method, 0);
    mac_field(&c, target, 0);
    mac_field(&c, body_hex, 0);
    mac_field(&c, timestamp, 0);
    mac_field(&c, nonce, 1);
    hmac_sha256_digest(&c, sizeof(d), d);
    hex(d, sizeof(d), out);
}

/* http_sign_now - see sign.h. */
int64_t
http_sign_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

/* http_sign_lines - see sign.h. */
void
http_sign_lines(const char *key, uint64_t sender, uint64_t seq,
                const char *method, const char *target, const void *body,
                size_t len, struct http_sign_lines *out)
{
    char ts[24], nonce[HTTP_SIGN_NONCE_MAX], sig[HTTP_SIGN_HEX];

    snprintf(ts, sizeof(ts), "%" PRId64, http_sign_now());
    snprintf(nonce, sizeof(nonce), "%016" PRIx64 "-%" PRIu64, sender, seq);
    http_sign(key, method, target, body, len, ts, nonce, sig);
    snprintf(out->sig, sizeof(out->sig), HTTP_SIGN_HEADER ": %s", sig);
    snprintf(out->time, sizeof(out->time), HTTP_SIGN_TIME ": %s", ts);
    snprintf(out->nonce, sizeof(out->nonce), HTTP_SIGN_NONCE ": %s", nonce);
}

static enum http_sign_verdict refuse(enum http_sign_verdict v, char *why,
                                     size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* refuse - a verdict with its sentence. */
static enum http_sign_verdict
refuse(enum http_sign_verdict v, char *why, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (len > 0) {
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return v;
}

/* parse_nonce - "<16 hex>-<decimal>" into sender and seq; 0 or -1. */
static int
parse_nonce(const char *s, uint64_t *sender, uint64_t *seq)
{
    char *end;

    if (strlen(s) < 18 || s[16] != '-' || strspn(s, "0123456789abcdef") != 16)
        return -1;
    *sender = strtoull(s, NULL, 16);
    if (s[17] < '0' || s[17] > '9')
        return -1;
    errno = 0;
    *seq = strtoull(s + 17, &end, 10);
    return errno == 0 && *end == '\0' ? 0 : -1;
}

/* parse_time - a decimal second count, optionally negative; 0 or -1. */
static int
parse_time(const char *s, int64_t *out)
{
    char *end;

    if (s[0] == '\0' || strspn(s, "-0123456789") != strlen(s))
        return -1;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno == 0 && *end == '\0' ? 0 : -1;
}

/* http_sign_check - see sign.h. */
enum http_sign_verdict
http_sign_check(const struct http_sign_call *c, const char *key, int64_t now_s,
                uint64_t *sender, uint64_t *seq, char *why, size_t whylen)
{
    const char *sig = c->sig, *ts = c->time, *nonce = c->nonce;
    char want[HTTP_SIGN_HEX];
    int64_t t;

    if (sig == NULL)
        return HTTP_SIGN_ABSENT;
    if (ts == NULL || nonce == NULL || parse_time(ts, &t) != 0 ||
        parse_nonce(nonce, sender, seq) != 0)
        return refuse(HTTP_SIGN_BAD, why, whylen,
                      "a signed call carries " HTTP_SIGN_TIME
                      " (seconds) and " HTTP_SIGN_NONCE " (<16 hex>-<count>)");
    http_sign(key, c->method, c->target, c->body != NULL ? c->body : "",
              c->body != NULL ? c->len : 0, ts, nonce, want);
    if (strlen(sig) != HTTP_SIGN_HEX - 1 ||
        !memeql_sec(sig, want, HTTP_SIGN_HEX - 1))
        return refuse(HTTP_SIGN_BAD, why, whylen,
                      HTTP_SIGN_HEADER " does not match the call: altered, "
                                       "or signed with another secret");
    if (t < now_s - HTTP_SIGN_WINDOW_S || t > now_s + HTTP_SIGN_WINDOW_S)
        return refuse(HTTP_SIGN_STALE, why, whylen,
                      HTTP_SIGN_TIME " %s is more than %d s from this "
                                     "node's clock (%" PRId64 ")",
                      ts, HTTP_SIGN_WINDOW_S, now_s);
    return HTTP_SIGN_OK;
}
