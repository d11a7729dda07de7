/*
 * declared.c - encode, decode and apply declare/delete commands.
 *
 * Command, all integers big-endian:
 *   u8 version (2) | u8 op | u16 name_len | name bytes
 *   declare only:   u32 max_length | u64 max_bytes | u32 policy | u32 ttl_s
 *                   | u32 lease_s | u32 retry_limit | u32 window_ms
 *                   | u32 window_count | u32 dedupe_s | u32 retry_delay_ms
 *                   [| u32 flags | deadLetter name bytes]  (only when
 *                   flags are not 0: what older nodes wrote and read)
 *   dedupe_s and retry_delay_ms are there since version 2 (SPEC §13); a
 *   version 1 command, written before, declares them 0 (and may carry the
 *   flags and deadLetter name right after window_count).
 * Snapshot: u32 count, then count declare commands each prefixed by u32 len.
 */
#include "master/declared.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DECL_VERSION     2
#define DECL_VERSION_V0  1 /* options without dedupe_s and retry_delay_ms */
#define DECL_HEAD        4
#define DECL_OPTS_LEN    44
#define DECL_OPTS_LEN_V0 36 /* before dedupe_s and retry_delay_ms */

static void
put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t
get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

int
decl_encode(const struct decl_cmd *c, void **buf, size_t *len)
{
    size_t dlen = SHM_QOPT_DL_LEN(c->opts.flags);
    size_t n = DECL_HEAD + c->len +
               (c->op == DECL_DECLARE
                    ? DECL_OPTS_LEN + (c->opts.flags != 0 ? 4 + dlen : 0)
                    : 0);
    unsigned char *p;

    if (c->len == 0 || c->len > DECL_NAME_MAX || dlen > DECL_NAME_MAX ||
        (dlen > 0 && c->dl == NULL))
        return -EINVAL;
    if ((p = malloc(n)) == NULL)
        return -ENOMEM;
    p[0] = DECL_VERSION;
    p[1] = (unsigned char)c->op;
    p[2] = (unsigned char)(c->len >> 8);
    p[3] = (unsigned char)c->len;
    memcpy(p + DECL_HEAD, c->name, c->len);
    if (c->op == DECL_DECLARE) {
        unsigned char *o = p + DECL_HEAD + c->len;
        const struct shm_qopts *q = &c->opts;
        put32(o, q->max_length);
        put32(o + 4, (uint32_t)(q->max_bytes >> 32));
        put32(o + 8, (uint32_t)q->max_bytes);
        put32(o + 12, q->policy);
        put32(o + 16, q->ttl_s);
        put32(o + 20, q->lease_s);
        put32(o + 24, q->retry_limit);
        put32(o + 28, q->window_ms);
        put32(o + 32, q->window_count);
        put32(o + 36, q->dedupe_s);
        put32(o + 40, q->retry_delay_ms);
        if (q->flags != 0)
            put32(o + DECL_OPTS_LEN, q->flags);
        if (dlen > 0)
            memcpy(o + DECL_OPTS_LEN + 4, c->dl, dlen);
    }
    *buf = p;
    *len = n;
    return 0;
}

int
decl_decode(const void *buf, size_t len, struct decl_cmd *c)
{
    const unsigned char *p = buf;

    if (len < DECL_HEAD || (p[0] != DECL_VERSION && p[0] != DECL_VERSION_V0))
        return -EINVAL;
    int v0 = p[0] == DECL_VERSION_V0;
    c->op = (enum decl_op)p[1];
    c->len = (size_t)p[2] << 8 | p[3];
    c->name = (const char *)p + DECL_HEAD;
    if (c->len == 0 || c->len > DECL_NAME_MAX)
        return -EINVAL;
    if (c->op == DECL_DELETE)
        return len == DECL_HEAD + c->len ? 0 : -EINVAL;
    size_t olen = v0 ? DECL_OPTS_LEN_V0 : DECL_OPTS_LEN;
    if (c->op != DECL_DECLARE || len < DECL_HEAD + c->len + olen)
        return -EINVAL;
    const unsigned char *o = p + DECL_HEAD + c->len;
    size_t rest = len - (DECL_HEAD + c->len + olen);
    uint32_t flags = rest >= 4 ? get32(o + olen) : 0;
    if ((rest != 0 && (flags == 0 || rest != 4 + SHM_QOPT_DL_LEN(flags))) ||
        SHM_QOPT_DL_LEN(flags) > DECL_NAME_MAX)
        return -EINVAL;
    c->dl = SHM_QOPT_DL_LEN(flags) > 0 ? (const char *)o + olen + 4 : NULL;
    c->opts = (struct shm_qopts){
        .max_length = get32(o),
        .max_bytes = (uint64_t)get32(o + 4) << 32 | get32(o + 8),
        .policy = get32(o + 12),
        .ttl_s = get32(o + 16),
        .lease_s = get32(o + 20),
        .retry_limit = get32(o + 24),
        .window_ms = get32(o + 28),
        .window_count = get32(o + 32),
        .dedupe_s = v0 ? 0 : get32(o + 36),
        .retry_delay_ms = v0 ? 0 : get32(o + 40),
        .flags = flags,
    };
    return c->opts.policy <= SHM_POLICY_DROP_OLDEST ? 0 : -EINVAL;
}

/* cmp - order of names: bytes, then length. */
static int
cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* lower_bound - index of the first queue not ordered before name. */
static size_t
lower_bound(const struct decl_set *s, const char *name, size_t len)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp(s->q[mid].name, s->q[mid].len, name, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const struct decl_queue *
decl_find(const struct decl_set *s, const char *name, size_t len)
{
    size_t i = lower_bound(s, name, len);
    if (i < s->n && cmp(s->q[i].name, s->q[i].len, name, len) == 0)
        return &s->q[i];
    return NULL;
}

/* dl_copy - a malloc'd copy of c's deadLetter name into *out (NULL when
 * it has none).  0 or -ENOMEM. */
static int
dl_copy(const struct decl_cmd *c, char **out)
{
    size_t dlen = SHM_QOPT_DL_LEN(c->opts.flags);

    *out = NULL;
    if (dlen == 0)
        return 0;
    if ((*out = malloc(dlen)) == NULL)
        return -ENOMEM;
    memcpy(*out, c->dl, dlen);
    return 0;
}

/* insert - add or update name at its place. */
static int
insert(struct decl_set *s, const struct decl_cmd *c, int *changed)
{
    size_t i = lower_bound(s, c->name, c->len);
    char *dl;

    if (dl_copy(c, &dl) != 0)
        return -ENOMEM;
    if (i < s->n && cmp(s->q[i].name, s->q[i].len, c->name, c->len) == 0) {
        size_t dlen = SHM_QOPT_DL_LEN(c->opts.flags);
        *changed = memcmp(&s->q[i].opts, &c->opts, sizeof(c->opts)) != 0 ||
                   (dlen > 0 && memcmp(s->q[i].dl, dl, dlen) != 0);
        s->q[i].opts = c->opts;
        free(s->q[i].dl);
        s->q[i].dl = dl;
        return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct decl_queue *q = realloc(s->q, cap * sizeof(*q));
        if (q == NULL) {
            free(dl);
            return -ENOMEM;
        }
        s->q = q;
        s->cap = cap;
    }
    char *name = malloc(c->len);
    if (name == NULL) {
        free(dl);
        return -ENOMEM;
    }
    memcpy(name, c->name, c->len);
    memmove(&s->q[i + 1], &s->q[i], (s->n - i) * sizeof(*s->q));
    s->q[i] = (struct decl_queue){name, c->len, c->opts, dl};
    s->n++;
    *changed = 1;
    return 0;
}

int
decl_apply(struct decl_set *s, const struct decl_cmd *c, int *changed)
{
    *changed = 0;
    if (c->op == DECL_DECLARE)
        return insert(s, c, changed);
    size_t i = lower_bound(s, c->name, c->len);
    if (i < s->n && cmp(s->q[i].name, s->q[i].len, c->name, c->len) == 0) {
        free(s->q[i].name);
        free(s->q[i].dl);
        memmove(&s->q[i], &s->q[i + 1], (s->n - i - 1) * sizeof(*s->q));
        s->n--;
        *changed = 1;
    }
    return 0;
}

int
decl_snapshot(const struct decl_set *s, void **buf, size_t *len)
{
    size_t total = 4;
    for (size_t i = 0; i < s->n; i++)
        total +=
            4 + DECL_HEAD + s->q[i].len + DECL_OPTS_LEN +
            (s->q[i].opts.flags != 0 ? 4 + SHM_QOPT_DL_LEN(s->q[i].opts.flags)
                                     : 0);
    unsigned char *out = malloc(total), *p = out + 4;
    if (out == NULL)
        return -ENOMEM;
    put32(out, (uint32_t)s->n);
    for (size_t i = 0; i < s->n; i++) {
        struct decl_cmd c = {DECL_DECLARE, s->q[i].name, s->q[i].len,
                             s->q[i].opts, s->q[i].dl};
        void *e;
        size_t elen;
        if (decl_encode(&c, &e, &elen) != 0) {
            free(out);
            return -ENOMEM;
        }
        put32(p, (uint32_t)elen);
        memcpy(p + 4, e, elen);
        p += 4 + elen;
        free(e);
    }
    *buf = out;
    *len = total;
    return 0;
}

int
decl_restore(struct decl_set *s, const void *buf, size_t len)
{
    const unsigned char *p = buf, *end = p + len;
    struct decl_set fresh = {0};
    int changed;

    if (len < 4)
        return len == 0 ? (decl_free(s), 0) : -EINVAL;
    uint32_t n = get32(p);
    p += 4;
    for (uint32_t i = 0; i < n; i++) {
        struct decl_cmd c;
        if (end - p < 4 || (size_t)(end - p - 4) < get32(p) ||
            decl_decode(p + 4, get32(p), &c) != 0 || c.op != DECL_DECLARE ||
            decl_apply(&fresh, &c, &changed) != 0) {
            decl_free(&fresh);
            return -EINVAL;
        }
        p += 4 + get32(p);
    }
    if (p != end) {
        decl_free(&fresh);
        return -EINVAL;
    }
    decl_free(s);
    *s = fresh;
    return 0;
}

void
decl_free(struct decl_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->q[i].name);
        free(s->q[i].dl);
    }
    free(s->q);
    *s = (struct decl_set){0};
}
