/*
 * sign.c - signing and checking calls between nodes (sign.h), with
 * nettle's HMAC-SHA256 over the call, its UMAC-128 over the body, and
 * constant-time comparison.
 */
#include "http/sign.h"

#include <errno.h>
#include <inttypes.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <nettle/umac.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http/buf.h"

#define SIGN_TEXT_VERSION "mayfly-call-4\n"
#define SIGN_VALUE_TAG    "v4=" /* the signature value's first bytes */
#define SIGN_TAG_LEN      (sizeof(SIGN_VALUE_TAG) - 1)
#define SIGN_BODY_KEY     "mayfly body umac" /* HMAC'd into the UMAC key */
#define SIGN_PREFIX_LEN   (sizeof(HTTP_SIGN_PREFIX) - 1)

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

/* lower - ASCII only: what a header name's case means in HTTP, whatever
 * the locale. */
static int
lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* name_cmp - two header names compared as their lowercased bytes. */
static int
name_cmp(const char *a, const char *b)
{
    /* equal bytes first: names mostly agree in case (every call checks
     * its headers against the five it reads) */
    while (*a != '\0' &&
           (*a == *b || lower((unsigned char)*a) == lower((unsigned char)*b))) {
        a++;
        b++;
    }
    return lower((unsigned char)*a) - lower((unsigned char)*b);
}

/* ours - a header name in the X-Mayfly- family (signed). */
static int
ours(const char *name)
{
    for (size_t i = 0; i < SIGN_PREFIX_LEN; i++)
        if (name[i] == '\0' || lower((unsigned char)name[i]) !=
                                   lower((unsigned char)HTTP_SIGN_PREFIX[i]))
            return 0;
    return 1;
}

/* signed_name - a header the signature covers: the X-Mayfly- family
 * and Authorization, whose token the receiver authorizes the call by. */
static int
signed_name(const char *name)
{
    return ours(name) || name_cmp(name, HTTP_SIGN_AUTHZ) == 0;
}

/* trim - s[0..*n) without the spaces and tabs around it. */
static const char *
trim(const char *s, size_t *n)
{
    while (*n > 0 && (*s == ' ' || *s == '\t'))
        s++, (*n)--;
    while (*n > 0 && (s[*n - 1] == ' ' || s[*n - 1] == '\t'))
        (*n)--;
    return s;
}

/* mac_field - F(s) of sign.h: length, ':', the bytes (lowercased for a
 * name), '\n'.  No printf: a call has a dozen fields, and each is signed
 * and checked once per hop. */
static void
mac_field(struct hmac_sha256_ctx *c, const char *s, size_t n, int name)
{
    char len[HTTP_PUT_U64_MAX + 1], low[64];
    char *e = http_put_u64(len, n);

    *e++ = ':';
    hmac_sha256_update(c, (size_t)(e - len), (const uint8_t *)len);
    if (!name) {
        hmac_sha256_update(c, n, (const uint8_t *)s);
    } else {
        for (size_t i = 0; i < n; i += sizeof(low)) {
            size_t m = n - i < sizeof(low) ? n - i : sizeof(low);
            for (size_t j = 0; j < m; j++)
                low[j] = (char)lower((unsigned char)s[i + j]);
            hmac_sha256_update(c, m, (const uint8_t *)low);
        }
    }
    hmac_sha256_update(c, 1, (const uint8_t *)"\n");
}

/* signed_order - the indexes of c's signed headers (X-Mayfly-* but the
 * signature, and Authorization) in canonical order, idx holding
 * HTTP_SIGN_HEADERS_MAX + 1.  Their count, or -EINVAL (too many, or a
 * name twice). */
static int
signed_order(const struct http_sign_call *c, size_t *idx)
{
    size_t n = 0, nx = 0;

    for (size_t i = 0; i < c->nh; i++) {
        const char *name = c->h[i].name;
        size_t k;

        if (!signed_name(name) || name_cmp(name, HTTP_SIGN_HEADER) == 0)
            continue;
        /* HTTP_SIGN_HEADERS_MAX of ours, and one Authorization */
        if (n == HTTP_SIGN_HEADERS_MAX + 1 ||
            (ours(name) && nx++ == HTTP_SIGN_HEADERS_MAX))
            return -EINVAL;
        /* insertion: few headers, and a tie is a refusal */
        for (k = n; k > 0; k--) {
            int d = name_cmp(c->h[idx[k - 1]].name, name);
            if (d == 0)
                return -EINVAL;
            if (d < 0)
                break;
            idx[k] = idx[k - 1];
        }
        idx[k] = i;
        n++;
    }
    return (int)n;
}

/* The keys of the last secret used by this thread: the HMAC's schedule
 * (the padded key's inner and outer hashes) and the body's UMAC, keyed
 * (its L1 to L3 keys and the AES schedule of its nonce: ~1.5 KB made with
 * AES, more than the MAC of a small body).  Every call of a node signs and
 * checks with the one cluster secret, so they are made once, not twice a
 * call; a call copies them (~3 KB).  A key longer than the room is not
 * kept (made each time). */
static _Thread_local struct {
    size_t len; /* 0: nothing kept */
    char key[256];
    struct hmac_sha256_ctx ctx;
    struct umac128_ctx body; /* keyed; no nonce set */
} schedule;

/* body_key - u keyed for the body's MAC from m, the secret's HMAC:
 * HMAC-SHA256(secret, SIGN_BODY_KEY), its first UMAC_KEY_SIZE bytes. */
static void
body_key(const struct hmac_sha256_ctx *m, struct umac128_ctx *u)
{
    struct hmac_sha256_ctx d = *m;
    uint8_t k[SHA256_DIGEST_SIZE];

    hmac_sha256_update(&d, sizeof(SIGN_BODY_KEY) - 1,
                       (const uint8_t *)SIGN_BODY_KEY);
    hmac_sha256_digest(&d, sizeof(k), k);
    umac128_set_key(u, k); /* reads UMAC_KEY_SIZE (16) bytes */
    explicit_bzero(k, sizeof(k));
}

/* keys_start - m and u keyed by key, from the kept ones when they are
 * key's. */
static void
keys_start(const char *key, struct hmac_sha256_ctx *m, struct umac128_ctx *u)
{
    size_t len = strlen(key);

    if (len > 0 && len == schedule.len && memcmp(key, schedule.key, len) == 0) {
        *m = schedule.ctx; /* its state is the inner hash, as set_key left it */
        *u = schedule.body;
        return;
    }
    hmac_sha256_set_key(m, len, (const uint8_t *)key);
    body_key(m, u);
    if (len > 0 && len < sizeof(schedule.key)) {
        memcpy(schedule.key, key, len);
        schedule.len = len;
        schedule.ctx = *m;
        schedule.body = *u;
    }
}

/* body_mac - hex(UMAC-128(body)) under u with the nonce sender, seq (8
 * bytes each, most significant first: sign.h says why it is unique) into
 * out (2 * UMAC128_DIGEST_SIZE + 1 bytes).
 *
 * Why UMAC-128: measured on 27,000 bytes with nettle 3.8 (SHA-NI, AES-NI),
 * each with its key made once and its context copied per call: SHA-256
 * 16.6 us (no key), UMAC-128 3.1, UMAC-64 1.9, GMAC 6.2 (GHASH is slower
 * than UMAC's NH here), Poly1305-AES 9.3.  UMAC-64 would save 1.2 us an
 * end, 4 % of what the owner spends on such a push, for a forgery bound
 * of 2^-60 a try against UMAC-128's 2^-120: not worth the margin. */
static void
body_mac(struct umac128_ctx *u, uint64_t sender, uint64_t seq, const void *body,
         size_t len, char *out)
{
    uint8_t nonce[UMAC_MAX_NONCE_SIZE], tag[UMAC128_DIGEST_SIZE];

    for (int i = 0; i < 8; i++) {
        nonce[i] = (uint8_t)(sender >> (56 - 8 * i));
        nonce[8 + i] = (uint8_t)(seq >> (56 - 8 * i));
    }
    umac128_set_nonce(u, sizeof(nonce), nonce);
    umac128_update(u, len, body != NULL ? body : (const void *)"");
    umac128_digest(u, sizeof(tag), tag);
    hex(tag, sizeof(tag), out);
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

/* sign_nonce - the signature value of call c (sign.h) into out
 * (HTTP_SIGN_VALUE_MAX bytes), the body's MAC under the nonce sender,
 * seq.  0, or -EINVAL (a header twice, or too many). */
static int
sign_nonce(const char *key, const struct http_sign_call *c, uint64_t sender,
           uint64_t seq, char *out)
{
    struct hmac_sha256_ctx m;
    struct umac128_ctx u;
    uint8_t d[SHA256_DIGEST_SIZE];
    char body_hex[2 * UMAC128_DIGEST_SIZE + 1];
    size_t idx[HTTP_SIGN_HEADERS_MAX + 1];
    int n = signed_order(c, idx);

    if (n < 0)
        return n;
    keys_start(key, &m, &u);
    body_mac(&u, sender, seq, c->body, c->len, body_hex);
    hmac_sha256_update(&m, sizeof(SIGN_TEXT_VERSION) - 1,
                       (const uint8_t *)SIGN_TEXT_VERSION);
    mac_field(&m, c->method, strlen(c->method), 0);
    mac_field(&m, c->target, strlen(c->target), 0);
    mac_field(&m, body_hex, strlen(body_hex), 0);
    for (int i = 0; i < n; i++) {
        const struct http_sign_header *x = &c->h[idx[i]];
        size_t vn = strlen(x->value);
        const char *v = trim(x->value, &vn);
        mac_field(&m, x->name, strlen(x->name), 1);
        mac_field(&m, v, vn, 0);
    }
    hmac_sha256_digest(&m, sizeof(d), d);
    memcpy(out, SIGN_VALUE_TAG, SIGN_TAG_LEN);
    hex(d, sizeof(d), out + SIGN_TAG_LEN);
    return 0;
}

/* http_sign - see sign.h. */
int
http_sign(const char *key, const struct http_sign_call *c, char *out)
{
    uint64_t sender, seq;

    for (size_t i = 0; i < c->nh; i++)
        if (name_cmp(c->h[i].name, HTTP_SIGN_NONCE) == 0)
            return parse_nonce(c->h[i].value, &sender, &seq) == 0
                       ? sign_nonce(key, c, sender, seq, out)
                       : -EINVAL;
    return -EINVAL;
}

/* http_sign_now_ms - see sign.h. */
int64_t
http_sign_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* http_sign_ms - see sign.h. */
int
http_sign_ms(const char *s, int64_t *out)
{
    size_t n = strspn(s, "0123456789");

    if (n == 0 || n > 18 || s[n] != '\0')
        return -EINVAL;
    *out = (int64_t)strtoll(s, NULL, 10);
    return 0;
}

/* split_line - "Name: value" copied into buf (cap bytes) as name and
 * value, the value's surrounding spaces and tabs left out.  0 or -EINVAL. */
static int
split_line(const char *line, char *buf, size_t cap, struct http_sign_header *h)
{
    size_t len = strlen(line);
    char *colon, *v, *end;

    if (len >= cap)
        return -EINVAL;
    memcpy(buf, line, len + 1);
    if ((colon = strchr(buf, ':')) == NULL || colon == buf)
        return -EINVAL;
    *colon = '\0';
    for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
        ;
    for (end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t');
         end--)
        ;
    *end = '\0';
    h->name = buf;
    h->value = v;
    return 0;
}

/* own_header - a header the signer sets itself. */
static int
own_header(const char *name)
{
    static const char *const own[] = {HTTP_SIGN_HEADER, HTTP_SIGN_TIME,
                                      HTTP_SIGN_NONCE, HTTP_SIGN_TO,
                                      HTTP_SIGN_DEADLINE};

    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (name_cmp(name, own[i]) == 0)
            return 1;
    return 0;
}

/* The values the signer adds, and room for the caller's lines (its
 * Authorization is not copied: h points into its line). */
struct sign_scratch {
    struct http_sign_header h[HTTP_SIGN_HEADERS_MAX + 1];
    char lines[HTTP_SIGN_HEADERS_MAX][512];
    char ts[24], nonce[HTTP_SIGN_NONCE_MAX], to[HTTP_SIGN_TO_MAX], deadline[24];
};

/* authz_line - an "Authorization:" line's value (its spaces are the
 * signature's to trim), not copied: a JWT may be longer than a line of
 * the scratch; NULL when line is another header. */
static const char *
authz_line(const char *line)
{
    size_t n = sizeof(HTTP_SIGN_AUTHZ) - 1;

    return strncasecmp(line, HTTP_SIGN_AUTHZ, n) == 0 && line[n] == ':'
               ? line + n + 1
               : NULL;
}

/* caller_headers - r's X-Mayfly-* and Authorization lines into s->h;
 * their count, or -EINVAL. */
static int
caller_headers(const struct http_sign_req *r, struct sign_scratch *s)
{
    int n = 0, nl = 0, authz = 0;
    const char *v;

    for (size_t i = 0; i < r->nlines; i++) {
        if ((v = authz_line(r->lines[i])) != NULL) {
            if (authz++ > 0)
                return -EINVAL; /* a call carries one */
            s->h[n++] = (struct http_sign_header){HTTP_SIGN_AUTHZ, v};
            continue;
        }
        if (!ours(r->lines[i]))
            continue;
        if (nl == HTTP_SIGN_HEADERS_MAX - 4 ||
            split_line(r->lines[i], s->lines[nl], sizeof(s->lines[nl]),
                       &s->h[n]) != 0 ||
            own_header(s->h[n].name))
            return -EINVAL;
        nl++;
        n++;
    }
    return n;
}

/* put_i64 - v in decimal at o (a '-' first when negative); the end. */
static char *
put_i64(char *o, int64_t v)
{
    if (v < 0) {
        *o++ = '-';
        return http_put_u64(o, (uint64_t)0 - (uint64_t)v);
    }
    return http_put_u64(o, (uint64_t)v);
}

/* put_line - "name: value" into out (cap bytes), cut to fit as snprintf
 * would; without printf, which costs more than the HMAC of these lines. */
static void
put_line(char *out, size_t cap, const char *name, const char *value)
{
    size_t n = strlen(name), v = strlen(value);

    if (n + 2 + v >= cap) {
        snprintf(out, cap, "%s: %s", name, value);
        return;
    }
    memcpy(out, name, n);
    out[n] = ':';
    out[n + 1] = ' ';
    memcpy(out + n + 2, value, v + 1);
}

/* http_sign_lines - see sign.h. */
int
http_sign_lines(const char *key, const struct http_sign_req *r,
                struct http_sign_lines *out)
{
    /* not zeroed: 13 KB, and every field is written before it is read */
    struct sign_scratch *s = malloc(sizeof(*s));
    struct http_sign_call c = {r->method, r->target, r->body, r->len, NULL, 0};
    char sig[HTTP_SIGN_VALUE_MAX];
    int n, rc = -EINVAL;
    size_t len;
    char *p;

    if (s == NULL)
        return -ENOMEM;
    if ((n = caller_headers(r, s)) < 0)
        goto out;
    if (r->to.node_id != NULL && r->to.node_id[0] && r->to.incarnation != 0) {
        if ((len = strlen(r->to.node_id)) + 17 >= sizeof(s->to))
            goto out;
        memcpy(s->to, r->to.node_id, len);
        s->to[len] = '/';
        *http_put_hex16(s->to + len + 1, r->to.incarnation) = '\0';
    } else if (r->to.addr != NULL && r->to.addr[0]) {
        if ((len = strlen(r->to.addr)) >= sizeof(s->to))
            goto out;
        memcpy(s->to, r->to.addr, len + 1);
    } else {
        goto out;
    }
    *put_i64(s->ts, r->now_ms) = '\0';
    p = http_put_hex16(s->nonce, r->sender);
    *p++ = '-';
    *http_put_u64(p, r->seq) = '\0';
    s->h[n++] = (struct http_sign_header){HTTP_SIGN_TIME, s->ts};
    s->h[n++] = (struct http_sign_header){HTTP_SIGN_NONCE, s->nonce};
    s->h[n++] = (struct http_sign_header){HTTP_SIGN_TO, s->to};
    if (r->deadline_ms > 0) {
        *put_i64(s->deadline, r->deadline_ms) = '\0';
        s->h[n++] = (struct http_sign_header){HTTP_SIGN_DEADLINE, s->deadline};
    }
    c.h = s->h;
    c.nh = (size_t)n;
    if ((rc = sign_nonce(key, &c, r->sender, r->seq, sig)) != 0)
        goto out;
    put_line(out->sig, sizeof(out->sig), HTTP_SIGN_HEADER, sig);
    put_line(out->time, sizeof(out->time), HTTP_SIGN_TIME, s->ts);
    put_line(out->nonce, sizeof(out->nonce), HTTP_SIGN_NONCE, s->nonce);
    put_line(out->to, sizeof(out->to), HTTP_SIGN_TO, s->to);
    out->deadline[0] = '\0';
    if (r->deadline_ms > 0)
        put_line(out->deadline, sizeof(out->deadline), HTTP_SIGN_DEADLINE,
                 s->deadline);
out:
    free(s);
    return rc;
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

/* The headers the check reads, in the order find_all fills them. */
enum { FIND_SIG, FIND_TIME, FIND_NONCE, FIND_TO, FIND_DEADLINE, FIND_N };

/* find_all - the values of c's headers the check reads (NULL when absent)
 * and how many times each is there, in one pass: a header is compared in
 * full only with those whose first letter after the prefix is its own. */
static void
find_all(const struct http_sign_call *c, const char *v[FIND_N], int n[FIND_N])
{
    static const char *const names[FIND_N] = {HTTP_SIGN_HEADER, HTTP_SIGN_TIME,
                                              HTTP_SIGN_NONCE, HTTP_SIGN_TO,
                                              HTTP_SIGN_DEADLINE};

    for (int k = 0; k < FIND_N; k++) {
        v[k] = NULL;
        n[k] = 0;
    }
    for (size_t i = 0; i < c->nh; i++) {
        const char *name = c->h[i].name;

        if (!ours(name)) /* else name[SIGN_PREFIX_LEN] may be past it */
            continue;
        for (int k = 0; k < FIND_N; k++) {
            if (lower((unsigned char)name[SIGN_PREFIX_LEN]) !=
                    lower((unsigned char)names[k][SIGN_PREFIX_LEN]) ||
                name_cmp(name, names[k]) != 0)
                continue;
            if (n[k]++ == 0)
                v[k] = c->h[i].value;
            break;
        }
    }
}

/* addressed_here - OK when the X-Mayfly-To value to names self: its id
 * and incarnation, or, from a sender that had not heard it yet, one of
 * its addresses in a call made since it started (sent at sent_ms); else
 * ELSEWHERE, with a sentence in why. */
static enum http_sign_verdict
addressed_here(const char *to, const struct http_sign_self *self,
               int64_t sent_ms, char *why, size_t whylen)
{
    const char *slash = strchr(to, '/'),
               *id = self->node_id ? self->node_id : "";
    size_t idlen = slash != NULL ? (size_t)(slash - to) : 0;
    uint64_t inc;
    char *end;

    if (slash != NULL) {
        if (strlen(id) != idlen || memcmp(to, id, idlen) != 0)
            return refuse(HTTP_SIGN_ELSEWHERE, why, whylen,
                          "the call is for node '%.*s', not this one ('%s')",
                          (int)(idlen > 64 ? 64 : idlen), to, id);
        inc = strtoull(slash + 1, &end, 16);
        if (strlen(slash + 1) != 16 || *end != '\0' || inc != self->incarnation)
            return refuse(HTTP_SIGN_ELSEWHERE, why, whylen,
                          "the call is for incarnation %.16s of this node, "
                          "which is %016" PRIx64 " now",
                          slash + 1, self->incarnation);
        return HTTP_SIGN_OK;
    }
    for (int i = 0; i < 2; i++) {
        if (self->addr[i] == NULL || self->addr[i][0] == '\0' ||
            strcmp(to, self->addr[i]) != 0)
            continue;
        if (sent_ms < self->since_ms)
            return refuse(HTTP_SIGN_ELSEWHERE, why, whylen,
                          "the call was made before this node started "
                          "(for an earlier incarnation)");
        return HTTP_SIGN_OK;
    }
    return refuse(HTTP_SIGN_ELSEWHERE, why, whylen,
                  "the call is for %.255s, which is not this node's address",
                  to);
}

/* other_build - whether sig, a signature value, is one another build
 * makes: 64 hex digits alone (mayfly-call-2), or "v<n>=" with n not this
 * build's.  Then its text's name into out (cap bytes). */
static int
other_build(const char *sig, char *out, size_t cap)
{
    size_t n;

    if (strncmp(sig, SIGN_VALUE_TAG, SIGN_TAG_LEN) == 0)
        return 0;
    if (strlen(sig) == 64 && strspn(sig, "0123456789abcdef") == 64) {
        snprintf(out, cap, "mayfly-call-2");
        return 1;
    }
    if (sig[0] != 'v')
        return 0;
    n = strspn(sig + 1, "0123456789");
    if (n > 0 && n <= 9 && sig[1 + n] == '=') {
        snprintf(out, cap, "mayfly-call-%.*s", (int)n, sig + 1);
        return 1;
    }
    return 0;
}

/* The check's sentences said twice. */
#define SIGN_STR_(x) #x
#define SIGN_STR(x)  SIGN_STR_(x)
static const char once[] =
    "a signed call names each X-Mayfly- header once, " SIGN_STR(
        HTTP_SIGN_HEADERS_MAX) " of them at most";
static const char carries[] = "a signed call carries " HTTP_SIGN_TIME
                              " (ms), " HTTP_SIGN_NONCE " (<16 hex>-<count>) "
                              "and " HTTP_SIGN_TO;

/* http_sign_check - see sign.h. */
enum http_sign_verdict
http_sign_check(const struct http_sign_call *c, const char *key,
                const struct http_sign_self *self, int64_t now_ms,
                struct http_sign_seen *seen, char *why, size_t whylen)
{
    const char *v[FIND_N], *sig, *ts, *nonce, *to, *dl;
    char want[HTTP_SIGN_VALUE_MAX], other[24];
    int n[FIND_N];
    int64_t t;

    find_all(c, v, n);
    if ((sig = v[FIND_SIG]) == NULL)
        return HTTP_SIGN_ABSENT;
    if (n[FIND_SIG] > 1)
        return refuse(HTTP_SIGN_BAD, why, whylen, "%s", once);
    if (other_build(sig, other, sizeof(other)))
        return refuse(HTTP_SIGN_BAD, why, whylen,
                      "the call is signed as %s, this node checks "
                      "%.*s: the sender runs another build of mayfly, "
                      "and every node of a cluster runs one",
                      other, (int)sizeof(SIGN_TEXT_VERSION) - 2,
                      SIGN_TEXT_VERSION);
    ts = v[FIND_TIME];
    nonce = v[FIND_NONCE];
    to = v[FIND_TO];
    dl = v[FIND_DEADLINE];
    seen->deadline_ms = 0;
    /* the nonce before the signature: the body's MAC takes it */
    if (nonce == NULL || parse_nonce(nonce, &seen->sender, &seen->seq) != 0)
        return refuse(HTTP_SIGN_BAD, why, whylen, "%s", carries);
    if (sign_nonce(key, c, seen->sender, seen->seq, want) != 0)
        return refuse(HTTP_SIGN_BAD, why, whylen, "%s", once);
    if (strlen(sig) != HTTP_SIGN_VALUE_MAX - 1 ||
        !memeql_sec(sig, want, HTTP_SIGN_VALUE_MAX - 1))
        return refuse(HTTP_SIGN_BAD, why, whylen,
                      HTTP_SIGN_HEADER " does not match the call: altered, "
                                       "or signed with another secret");
    if (ts == NULL || to == NULL || http_sign_ms(ts, &t) ||
        (dl != NULL && http_sign_ms(dl, &seen->deadline_ms) != 0))
        return refuse(HTTP_SIGN_BAD, why, whylen, "%s", carries);
    if (t < now_ms - HTTP_SIGN_WINDOW_MS || t > now_ms + HTTP_SIGN_WINDOW_MS)
        return refuse(HTTP_SIGN_STALE, why, whylen,
                      HTTP_SIGN_TIME " %s is more than %d ms from this "
                                     "node's clock (%" PRId64 ")",
                      ts, HTTP_SIGN_WINDOW_MS, now_ms);
    return addressed_here(to, self, t, why, whylen);
}
