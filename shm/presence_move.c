/*
 * presence_move.c - the presence hand-over record (presence_move.h).
 *
 * The decoder walks the record twice: once to check every count and
 * length against the bytes that follow (nothing is imported from a record
 * that is not whole), then to import channel by channel, each member
 * pointing into the record itself (keys and data are not copied twice).
 */
#include "shm/presence_move.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "shm/presence.h"

#define PAD8(x) (((x) + 7) & ~(size_t)7)

/* grow - room for more bytes at the end of rec; 0 or -ENOMEM. */
static int
grow(struct shm_pm_rec *rec, size_t more)
{
    size_t cap = rec->cap ? rec->cap : 4096;
    unsigned char *b;

    if (rec->len + more <= rec->cap)
        return 0;
    while (cap < rec->len + more)
        cap *= 2;
    if ((b = realloc(rec->buf, cap)) == NULL)
        return -ENOMEM;
    memset(b + rec->cap, 0, cap - rec->cap); /* padding stays zero */
    rec->buf = b;
    rec->cap = cap;
    return 0;
}

/* put - n bytes of p at the end of rec, padded to 8 (room made before). */
static void
put(struct shm_pm_rec *rec, const void *p, size_t n)
{
    if (n > 0)
        memcpy(rec->buf + rec->len, p, n);
    rec->len += PAD8(n);
}

/* moved_bytes - what member o takes in the record. */
static size_t
moved_bytes(const struct shm_pres_moved *o)
{
    return sizeof(struct shm_pm_member) +
           (size_t)o->nconns * sizeof(struct shm_pm_conn) +
           PAD8(o->member.len) + PAD8(o->data.len);
}

/* put_member - member o at the end of rec (room made before). */
static void
put_member(struct shm_pm_rec *rec, const struct shm_pres_moved *o)
{
    struct shm_pm_member pm = {
        .key_len = (uint32_t)o->member.len,
        .data_len = (uint32_t)o->data.len,
        .nconns = o->nconns,
        .since = o->since,
        .version = o->version,
        .ttl_ms = o->ttl_ms > SHM_PM_TTL_MAX ? SHM_PM_TTL_MAX : o->ttl_ms,
        .grace_ms =
            o->grace_ms > SHM_PM_GRACE_MAX ? SHM_PM_GRACE_MAX : o->grace_ms,
    };

    put(rec, &pm, sizeof(pm));
    for (uint32_t k = 0; k < o->nconns; k++) {
        struct shm_pm_conn c = {.n = o->conns[k].n};
        size_t kl = strlen(o->conns[k].node);
        c.key_len = (uint32_t)kl;
        memcpy(c.key, o->conns[k].node, kl); /* < SHM_PRES_NODE_ID */
        put(rec, &c, sizeof(c));
    }
    put(rec, o->member.ptr, o->member.len);
    put(rec, o->data.ptr, o->data.len);
}

/* shm_presence_take - see presence_move.h. */
int
shm_presence_take(struct shm_seg *seg, struct shm_name channel,
                  const char *drop, uint64_t grace_ms, uint64_t now,
                  struct shm_pm_rec *rec)
{
    struct shm_pres_export e;
    struct shm_pm_chan ch = {.name_len = (uint32_t)channel.len};
    size_t need = sizeof(ch) + PAD8(channel.len);
    int rc = shm_presence_export(seg, channel, drop, grace_ms, now, &e);

    if (rc <= 0)
        return rc;
    for (uint32_t i = 0; i < e.n; i++)
        need += moved_bytes(&e.m[i]);
    if (rec->len == 0) {
        if (grow(rec, sizeof(struct shm_pm_hdr)) != 0) {
            shm_presence_export_free(&e);
            return -ENOMEM;
        }
        rec->len = sizeof(struct shm_pm_hdr);
    }
    if (grow(rec, need) != 0) {
        shm_presence_export_free(&e);
        return -ENOMEM;
    }
    ch.nmembers = e.n;
    put(rec, &ch, sizeof(ch));
    put(rec, channel.ptr, channel.len);
    for (uint32_t i = 0; i < e.n; i++)
        put_member(rec, &e.m[i]);
    rec->nchan++;
    rec->members += e.n;
    struct shm_pm_hdr h = {.magic = SHM_PM_MAGIC,
                           .version = SHM_PM_VERSION,
                           .nchan = rec->nchan,
                           .size = rec->len};
    memcpy(rec->buf, &h, sizeof(h));
    shm_presence_export_free(&e);
    return rc;
}

/* shm_pm_rec_start - see presence_move.h. */
int
shm_pm_rec_start(struct shm_pm_rec *rec)
{
    struct shm_pm_hdr h = {
        .magic = SHM_PM_MAGIC, .version = SHM_PM_VERSION, .size = sizeof(h)};

    if (rec->len > 0)
        return 0;
    if (grow(rec, sizeof(h)) != 0)
        return -ENOMEM;
    memcpy(rec->buf, &h, sizeof(h));
    rec->len = sizeof(h);
    return 0;
}

/* shm_pm_rec_free - see presence_move.h. */
void
shm_pm_rec_free(struct shm_pm_rec *rec)
{
    free(rec->buf);
    memset(rec, 0, sizeof(*rec));
}

/* A walk over the record's bytes. */
struct walk {
    const unsigned char *p, *end;
};

/* take_bytes - the next n bytes (padded to 8) of w, or NULL when the
 * record ends before them. */
static const unsigned char *
take_bytes(struct walk *w, size_t n)
{
    const unsigned char *at = w->p;

    if (PAD8(n) < n || (size_t)(w->end - w->p) < PAD8(n))
        return NULL;
    w->p += PAD8(n);
    return at;
}

/* member_at - decode the member at w into o (keys pointing into the
 * record); 0, or -EBADMSG. */
static int
member_at(struct walk *w, struct shm_pres_moved *o)
{
    const unsigned char *b = take_bytes(w, sizeof(struct shm_pm_member));
    struct shm_pm_member pm;

    if (b == NULL)
        return -EBADMSG;
    memcpy(&pm, b, sizeof(pm));
    if (pm.key_len == 0 || pm.key_len > SHM_PRES_MEMBER_MAX ||
        pm.data_len > SHM_PM_DATA_MAX || pm.nconns > SHM_PRES_NODES ||
        pm.pad != 0 || pm.ttl_ms > SHM_PM_TTL_MAX ||
        pm.grace_ms > SHM_PM_GRACE_MAX)
        return -EBADMSG;
    memset(o, 0, sizeof(*o));
    o->since = pm.since;
    o->version = pm.version;
    o->ttl_ms = pm.ttl_ms;
    o->grace_ms = pm.grace_ms;
    o->nconns = pm.nconns;
    for (uint32_t k = 0; k < pm.nconns; k++) {
        /* fields copied out: the body need not be aligned */
        const unsigned char *c = take_bytes(w, sizeof(struct shm_pm_conn));
        const char *key;
        uint32_t n, kl;
        if (c == NULL)
            return -EBADMSG;
        memcpy(&n, c + offsetof(struct shm_pm_conn, n), sizeof(n));
        memcpy(&kl, c + offsetof(struct shm_pm_conn, key_len), sizeof(kl));
        key = (const char *)c + offsetof(struct shm_pm_conn, key);
        if (n == 0 || kl == 0 || kl >= SHM_PRES_NODE_ID || key[kl] != '\0' ||
            memchr(key, '\0', kl) != NULL)
            return -EBADMSG;
        o->conns[k].node = key;
        o->conns[k].n = n;
    }
    if ((b = take_bytes(w, pm.key_len)) == NULL)
        return -EBADMSG;
    o->member = (struct shm_name){(const char *)b, pm.key_len};
    if ((b = take_bytes(w, pm.data_len)) == NULL)
        return -EBADMSG;
    o->data = (struct shm_name){(const char *)b, pm.data_len};
    return 0;
}

/* chan_at - decode the channel head at w: its name and member count;
 * 0, or -EBADMSG. */
static int
chan_at(struct walk *w, struct shm_name *name, uint32_t *n)
{
    const unsigned char *b = take_bytes(w, sizeof(struct shm_pm_chan));
    struct shm_pm_chan ch;

    if (b == NULL)
        return -EBADMSG;
    memcpy(&ch, b, sizeof(ch));
    if (ch.name_len == 0 || ch.name_len > SHM_NAME_MAX ||
        (b = take_bytes(w, ch.name_len)) == NULL)
        return -EBADMSG;
    *name = (struct shm_name){(const char *)b, ch.name_len};
    if (!shm_presence_named(*name))
        return -EBADMSG; /* a queue's name: not a channel */
    *n = ch.nmembers;
    /* each member takes 56 bytes at least: a count past what is left is
     * a lie, caught before any allocation it would size */
    if (*n > (size_t)(w->end - w->p) / (sizeof(struct shm_pm_member) + 8))
        return -EBADMSG;
    return 0;
}

/* check - the whole record, as adopt will read it: 0, or -EBADMSG. */
static int
check(const void *rec, size_t len, uint32_t *nchan)
{
    struct shm_pm_hdr h;
    struct walk w = {rec, (const unsigned char *)rec + len};
    struct shm_pres_moved o;

    if (len < sizeof(h))
        return -EBADMSG;
    memcpy(&h, rec, sizeof(h));
    if (h.magic != SHM_PM_MAGIC || h.version != SHM_PM_VERSION || h.pad != 0 ||
        h.size != len)
        return -EBADMSG;
    w.p += sizeof(h);
    for (uint32_t c = 0; c < h.nchan; c++) {
        struct shm_name name;
        uint32_t n;
        if (chan_at(&w, &name, &n) != 0)
            return -EBADMSG;
        for (uint32_t i = 0; i < n; i++)
            if (member_at(&w, &o) != 0)
                return -EBADMSG;
    }
    if (w.p != w.end)
        return -EBADMSG; /* bytes after the last channel */
    *nchan = h.nchan;
    return 0;
}

/* adopt - shm_presence_adopt (self NULL) or shm_presence_adopt_merge. */
static int
adopt(struct shm_seg *seg, const void *rec, size_t len, int merge,
      const char *self, uint64_t grace_ms, uint64_t now)
{
    struct walk w = {(const unsigned char *)rec + sizeof(struct shm_pm_hdr),
                     (const unsigned char *)rec + len};
    uint32_t nchan;
    int64_t total = 0;
    int rc = check(rec, len, &nchan);

    if (rc != 0)
        return rc;
    for (uint32_t c = 0; c < nchan; c++) {
        struct shm_pres_moved *m = NULL;
        struct shm_name name;
        uint32_t n;
        chan_at(&w, &name, &n); /* checked */
        if (n > 0 && (m = calloc(n, sizeof(*m))) == NULL)
            return -ENOMEM;
        for (uint32_t i = 0; i < n; i++)
            member_at(&w, &m[i]);
        rc = merge ? shm_presence_merge(seg, name, m, n, self, grace_ms, now)
                   : shm_presence_import(seg, name, m, n, grace_ms, now);
        free(m);
        if (rc < 0)
            return rc;
        total += rc;
    }
    return total > INT32_MAX ? INT32_MAX : (int)total;
}

/* shm_presence_adopt - see presence_move.h. */
int
shm_presence_adopt(struct shm_seg *seg, const void *rec, size_t len,
                   uint64_t grace_ms, uint64_t now)
{
    return adopt(seg, rec, len, 0, NULL, grace_ms, now);
}

/* shm_presence_adopt_merge - see presence_move.h. */
int
shm_presence_adopt_merge(struct shm_seg *seg, const void *rec, size_t len,
                         const char *self, uint64_t grace_ms, uint64_t now)
{
    return adopt(seg, rec, len, 1, self, grace_ms, now);
}

/* shm_presence_drop_moved - see presence_move.h. */
int
shm_presence_drop_moved(struct shm_seg *seg, const void *rec, size_t len,
                        int (*keep)(void *arg, struct shm_name channel),
                        void *arg)
{
    struct walk w = {(const unsigned char *)rec + sizeof(struct shm_pm_hdr),
                     (const unsigned char *)rec + len};
    struct shm_pres_moved o;
    uint32_t nchan;
    int64_t total = 0;
    int rc = check(rec, len, &nchan);

    if (rc != 0)
        return rc;
    for (uint32_t c = 0; c < nchan; c++) {
        struct shm_name name;
        uint32_t n;
        chan_at(&w, &name, &n); /* checked */
        for (uint32_t i = 0; i < n; i++)
            member_at(&w, &o);
        if (keep != NULL && keep(arg, name))
            continue;
        if ((rc = shm_presence_drop_channel(seg, name)) < 0)
            return rc;
        total += rc;
    }
    return total > INT32_MAX ? INT32_MAX : (int)total;
}
