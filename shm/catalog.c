/*
 * catalog.c - the declared-queue catalog of catalog.h: two copies in a
 * memfd mapping, one writer (the master), lock-free readers.
 *
 * Why readers need no lock: the master only ever writes the copy the
 * generation does not name, and bumps the generation after.  A reader that
 * is slow enough to see the master come round to its copy again finds that
 * copy's seq changed (odd while being written) and starts over with the new
 * generation.  What a reader derives from a copy is used only once the
 * copy's seq is seen unchanged after the reads, so torn bytes are read but
 * never believed; reads are bounded by the copy's fixed layout, so torn
 * lengths cannot send them out of the mapping.  libcmph's packed search is
 * not bounded that way (it follows offsets inside the packed bytes), so it
 * only ever runs on a private copy taken and validated per generation.
 *
 * Locking: none (seqlock per copy).  Errors: 0 or -errno.
 */
#include "shm/catalog.h"

#include <sys/mman.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmph.h>

#include "shm/broker.h"
#include "shm/log.h"

#define CATALOG_MAGIC   0x4d415946434154ULL /* "MAYFCAT" */
#define CATALOG_VERSION 1
/* Largest packed hash accepted: CHD packs 4096 names in about 2.3 KiB. */
#define CATALOG_MPH_MAX ((size_t)64 << 10)
/* Slack after the private hash copy: packed readers may load whole words. */
#define CATALOG_MPH_SLACK 16
/* Attempts at building the hash: CHD picks random seeds and may fail. */
#define CATALOG_BUILD_TRIES 4

/*
 * struct catalog_rec - one declared queue in a copy, at the slot the hash
 * gives its name.
 *   off  size  field     meaning
 *     0     4  name_off  offset of the name in the copy's names area
 *     4     4  name_len  bytes, without the NUL that follows them
 *     8    48  opts      the queue's options
 */
struct catalog_rec {
    _Atomic uint32_t name_off;
    _Atomic uint32_t name_len;
    struct shm_qopts opts;
};
_Static_assert(offsetof(struct catalog_rec, opts) == 8, "catalog_rec layout");
_Static_assert(sizeof(struct catalog_rec) == 56, "catalog_rec layout");

/*
 * struct catalog_copy - one of the two copies; all of it written by the
 * master, under seq.
 *   off     size     field      meaning
 *     0        8     seq        odd while the master rewrites the copy
 *     8        8     gen        the generation the copy holds
 *    16        4     n          declared queues
 *    20        4     names_len  bytes used in the names area
 *    24        4     mph_len    bytes of the packed hash (0 when n == 0)
 *    64   4096*56    recs[]     by hash slot
 * 229440  4096*4     sorted[]   slots in name order (for listing)
 * 245824     64 Ki   mph[]      the packed hash (cmph_pack)
 * 311360     rest    names[]    names in name order, each NUL-terminated,
 *                               each followed by its deadLetter queue's
 *                               name and a NUL when its opts.flags give
 *                               that name a length
 * Readers load n, names_len, mph_len, gen and a record's name fields
 * racily, so they are relaxed atomics: each is loaded once and bounded
 * before use, never reloaded behind the check.
 */
struct catalog_copy {
    _Atomic uint64_t seq;
    _Atomic uint64_t gen;
    _Atomic uint32_t n;
    _Atomic uint32_t names_len;
    _Atomic uint32_t mph_len;
    uint32_t pad[9];
    struct catalog_rec recs[SHM_CATALOG_MAX_ENTRIES];
    uint32_t sorted[SHM_CATALOG_MAX_ENTRIES];
    _Alignas(64) unsigned char mph[CATALOG_MPH_MAX];
    unsigned char names[];
};
_Static_assert(offsetof(struct catalog_copy, n) == 16, "catalog_copy layout");
_Static_assert(offsetof(struct catalog_copy, recs) == 64,
               "catalog_copy layout");
_Static_assert(offsetof(struct catalog_copy, sorted) == 229440,
               "catalog_copy layout");
_Static_assert(offsetof(struct catalog_copy, mph) == 245824,
               "catalog_copy layout");
_Static_assert(offsetof(struct catalog_copy, names) == 311360,
               "catalog_copy layout");

/*
 * struct catalog_hdr - the start of the mapping; the copies follow it.
 *   off  size  field       written by          protected by
 *     0     8  magic       master, at create   immutable
 *     8     4  version     master, at create   immutable
 *    16     8  copy_bytes  master, at create   immutable
 *    24     8  names_cap   master, at create   immutable
 *    64     8  gen         master, publish     atomic (release/acquire)
 *   128        copies[2]   master, publish     each its own seq
 */
struct catalog_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t pad0;
    uint64_t copy_bytes;
    uint64_t names_cap;
    _Alignas(64) _Atomic uint64_t gen;
    _Alignas(64) unsigned char copies[];
};
_Static_assert(offsetof(struct catalog_hdr, copy_bytes) == 16,
               "catalog_hdr layout");
_Static_assert(offsetof(struct catalog_hdr, gen) == 64, "catalog_hdr layout");
_Static_assert(offsetof(struct catalog_hdr, copies) == 128,
               "catalog_hdr layout");
_Static_assert(SHM_CATALOG_BYTES(0) ==
                   sizeof(struct catalog_hdr) + 2 * sizeof(struct catalog_copy),
               "SHM_CATALOG_BYTES matches the layout");

/* The process's handle: the mapping plus a private copy of one
 * generation's hash (see the file comment). */
struct shm_catalog {
    struct catalog_hdr *hdr;
    size_t size;
    int memfd;
    uint64_t cache_gen; /* generation of mph; UINT64_MAX: none yet */
    uint32_t cache_n;   /* that generation's n */
    unsigned char *mph; /* CATALOG_MPH_MAX + CATALOG_MPH_SLACK bytes */
};

/* The copy of index i (0 or 1). */
static struct catalog_copy *
catalog_copy_at(const struct shm_catalog *c, uint64_t i)
{
    return (struct catalog_copy *)(c->hdr->copies +
                                   (i & 1) * c->hdr->copy_bytes);
}

/* shm_catalog_create - memfd, size, map, and the empty generation 0. */
int
shm_catalog_create(struct shm_catalog **out, size_t max_bytes)
{
    size_t copy_bytes;
    struct shm_catalog *c;
    int rc;

    if (max_bytes < SHM_CATALOG_BYTES(SHM_NAME_MAX + 1) ||
        max_bytes > UINT32_MAX)
        return -EINVAL;
    copy_bytes = (max_bytes - sizeof(struct catalog_hdr)) / 2 / 64 * 64;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    c->memfd = -1;
    c->mph = malloc(CATALOG_MPH_MAX + CATALOG_MPH_SLACK);
    if (c->mph == NULL) {
        rc = -ENOMEM;
        goto fail;
    }
    c->memfd = memfd_create("mayfly-catalog", MFD_CLOEXEC);
    if (c->memfd == -1) {
        rc = -errno;
        log_error(errno, "memfd_create(mayfly-catalog) failed");
        goto fail;
    }
    if (ftruncate(c->memfd, (off_t)max_bytes) == -1) {
        rc = -errno;
        log_error(errno, "ftruncate(catalog, %zu) failed", max_bytes);
        goto fail;
    }
    c->hdr =
        mmap(NULL, max_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd, 0);
    if (c->hdr == MAP_FAILED) {
        rc = -errno;
        log_error(errno, "mmap(MAP_SHARED, catalog, %zu) failed", max_bytes);
        c->hdr = NULL;
        goto fail;
    }
    c->size = max_bytes;
    c->cache_gen = UINT64_MAX;
    c->hdr->magic = CATALOG_MAGIC;
    c->hdr->version = CATALOG_VERSION;
    c->hdr->copy_bytes = copy_bytes;
    c->hdr->names_cap = copy_bytes - sizeof(struct catalog_copy);
    atomic_store_explicit(&c->hdr->gen, 0, memory_order_release);
    *out = c;
    return 0;
fail:
    shm_catalog_destroy(c);
    return rc;
}

/* shm_catalog_destroy - undo create, whatever part of it happened. */
void
shm_catalog_destroy(struct shm_catalog *c)
{
    if (c == NULL)
        return;
    if (c->hdr != NULL)
        munmap(c->hdr, c->size);
    if (c->memfd != -1)
        close(c->memfd);
    free(c->mph);
    free(c);
}

/* shm_catalog_generation - the generation readers see now. */
uint64_t
shm_catalog_generation(const struct shm_catalog *c)
{
    return atomic_load_explicit(&c->hdr->gen, memory_order_acquire);
}

/* ---- readers ---------------------------------------------------------- */

/* Relaxed loads of the fields readers bound their reads by: each is loaded
 * once, checked, and used as loaded. */
#define CATALOG_LOAD(p) atomic_load_explicit((p), memory_order_relaxed)

/*
 * catalog_begin - the copy the published generation names, with that
 * generation in *gen and the copy's even seq in *seq.  A copy found odd or
 * holding another generation is being rewritten, which means the generation
 * has moved on: load it again.  Never waits on the master.
 */
static const struct catalog_copy *
catalog_begin(const struct shm_catalog *c, uint64_t *gen, uint64_t *seq)
{
    for (;;) {
        uint64_t g = atomic_load_explicit(&c->hdr->gen, memory_order_acquire);
        const struct catalog_copy *cp = catalog_copy_at(c, g);
        uint64_t s = atomic_load_explicit(&cp->seq, memory_order_acquire);

        if ((s & 1) == 0 && CATALOG_LOAD(&cp->gen) == g) {
            *gen = g;
            *seq = s;
            return cp;
        }
    }
}

/* catalog_changed - whether cp was rewritten since catalog_begin() gave
 * seq: everything read from it in between must then be dropped. */
static int
catalog_changed(const struct catalog_copy *cp, uint64_t seq)
{
    atomic_thread_fence(memory_order_acquire);
    return CATALOG_LOAD(&cp->seq) != seq;
}

/*
 * catalog_cache - make c->mph a private copy of generation gen's packed
 * hash, taken from cp while its seq stays seq.  0, or -EAGAIN when the copy
 * changed meanwhile (the cache is then empty).  A copy that did not change
 * yet fails its bounds is corrupt shared state: panic.
 */
static int
catalog_cache(struct shm_catalog *c, const struct catalog_copy *cp,
              uint64_t gen, uint64_t seq)
{
    uint32_t n = CATALOG_LOAD(&cp->n);
    uint32_t len = CATALOG_LOAD(&cp->mph_len);
    int sane = n <= SHM_CATALOG_MAX_ENTRIES && len <= CATALOG_MPH_MAX &&
               (n == 0) == (len == 0);

    c->cache_gen = UINT64_MAX;
    if (sane)
        memcpy(c->mph, cp->mph, len);
    if (catalog_changed(cp, seq))
        return -EAGAIN;
    if (!sane)
        log_panic(0, "catalog generation %llu is corrupt (n %u, hash %u)",
                  (unsigned long long)gen, n, len);
    memset(c->mph + len, 0, CATALOG_MPH_SLACK);
    c->cache_n = n;
    c->cache_gen = gen;
    return 0;
}

/*
 * catalog_find - look name up in cp with the cached hash of cp's
 * generation.  1 and *out when found.  Reads of cp may be torn (the caller
 * validates after), so every offset is bounded before use.  A name never
 * published still hashes to some slot, or past n: the stored name decides.
 */
static int
catalog_find(const struct shm_catalog *c, const struct catalog_copy *cp,
             const char *name, size_t len, struct shm_qopts *out, char *dl)
{
    const struct catalog_rec *rec;
    uint32_t slot, off, dlen;

    if (c->cache_n == 0)
        return 0;
    slot = cmph_search_packed(c->mph, name, (cmph_uint32)len);
    if (slot >= c->cache_n)
        return 0;
    rec = &cp->recs[slot];
    off = CATALOG_LOAD(&rec->name_off);
    if (CATALOG_LOAD(&rec->name_len) != len || len > c->hdr->names_cap ||
        off > c->hdr->names_cap - len ||
        memcmp(cp->names + off, name, len) != 0)
        return 0;
    memcpy(out, &rec->opts, sizeof(*out));
    /* The deadLetter name follows the name's NUL; bounded as the name. */
    dlen = SHM_QOPT_DL_LEN(out->flags);
    if (dl != NULL && dlen > 0) {
        if (dlen > SHM_NAME_MAX ||
            (size_t)off + len + 1 + dlen > c->hdr->names_cap)
            return 0;
        memcpy(dl, cp->names + off + len + 1, dlen);
    }
    return 1;
}

/* shm_catalog_lookup - hash, compare, copy; start over if the copy moved. */
int
shm_catalog_lookup(struct shm_catalog *c, const char *name, size_t len,
                   struct shm_qopts *out)
{
    const struct catalog_copy *cp;
    struct shm_qopts o;
    uint64_t gen, seq;
    int found;

    if (len == 0 || len > SHM_NAME_MAX)
        return 0;
    for (;;) {
        cp = catalog_begin(c, &gen, &seq);
        if (c->cache_gen != gen && catalog_cache(c, cp, gen, seq) != 0)
            continue;
        found = catalog_find(c, cp, name, len, &o, NULL);
        if (!catalog_changed(cp, seq))
            break;
    }
    if (found)
        *out = o;
    return found;
}

/* shm_catalog_dead_letter - as the lookup, with the name after it. */
size_t
shm_catalog_dead_letter(struct shm_catalog *c, const char *name, size_t len,
                        char *out)
{
    const struct catalog_copy *cp;
    struct shm_qopts o;
    uint64_t gen, seq;
    int found;

    if (len == 0 || len > SHM_NAME_MAX)
        return 0;
    for (;;) {
        cp = catalog_begin(c, &gen, &seq);
        if (c->cache_gen != gen && catalog_cache(c, cp, gen, seq) != 0)
            continue;
        found = catalog_find(c, cp, name, len, &o, out);
        if (!catalog_changed(cp, seq))
            break;
    }
    return found ? SHM_QOPT_DL_LEN(o.flags) : 0;
}

/* A private copy of one generation, for shm_catalog_each(). */
struct catalog_snap {
    unsigned char *buf;
    size_t cap;
    uint32_t n;
    uint32_t names_len;
    const struct catalog_rec *recs; /* [n], by slot */
    const uint32_t *sorted;         /* [n], slots in name order */
    const char *names;              /* [names_len] */
};

/* catalog_snap_take - copy the current generation into sn (grown as
 * needed).  0 or -ENOMEM. */
static int
catalog_snap_take(const struct shm_catalog *c, struct catalog_snap *sn)
{
    const struct catalog_copy *cp;
    uint64_t gen, seq;
    size_t rec_bytes, need;
    uint32_t n, names_len;

    for (;;) {
        cp = catalog_begin(c, &gen, &seq);
        n = CATALOG_LOAD(&cp->n);
        names_len = CATALOG_LOAD(&cp->names_len);
        if (n > SHM_CATALOG_MAX_ENTRIES || names_len > c->hdr->names_cap) {
            if (catalog_changed(cp, seq))
                continue;
            log_panic(0, "catalog generation %llu is corrupt (n %u)",
                      (unsigned long long)gen, n);
        }
        rec_bytes = (size_t)n * sizeof(struct catalog_rec);
        /* + 1: never a zero-byte buffer, never memcpy to NULL. */
        need = rec_bytes + (size_t)n * sizeof(uint32_t) + names_len + 1;
        if (need > sn->cap) {
            unsigned char *p = realloc(sn->buf, need);

            if (p == NULL)
                return -ENOMEM;
            sn->buf = p;
            sn->cap = need;
        }
        memcpy(sn->buf, cp->recs, rec_bytes);
        memcpy(sn->buf + rec_bytes, cp->sorted, (size_t)n * sizeof(uint32_t));
        memcpy(sn->buf + rec_bytes + (size_t)n * sizeof(uint32_t), cp->names,
               names_len);
        if (!catalog_changed(cp, seq))
            break;
    }
    sn->n = n;
    sn->names_len = names_len;
    sn->recs = (const struct catalog_rec *)sn->buf;
    sn->sorted = (const uint32_t *)(sn->buf + rec_bytes);
    sn->names = (const char *)sn->sorted + (size_t)n * sizeof(uint32_t);
    return 0;
}

/* shm_catalog_each - snapshot, then call fn per entry in name order. */
int
shm_catalog_each(const struct shm_catalog *c,
                 void (*fn)(void *arg, const char *name, size_t len,
                            const struct shm_qopts *o),
                 void *arg)
{
    struct catalog_snap sn = {0};
    int rc;

    if ((rc = catalog_snap_take(c, &sn)) != 0)
        return rc;
    for (uint32_t k = 0; k < sn.n; k++) {
        const struct catalog_rec *rec;
        uint32_t slot = sn.sorted[k], off, len;
        struct shm_qopts o;

        if (slot >= sn.n)
            log_panic(0, "catalog entry %u has slot %u of %u", k, slot, sn.n);
        rec = &sn.recs[slot];
        off = rec->name_off;
        len = rec->name_len;
        if (off >= sn.names_len || len >= sn.names_len - off)
            log_panic(0, "catalog entry %u has name %u+%u of %u", k, off, len,
                      sn.names_len);
        memcpy(&o, &rec->opts, sizeof(o));
        fn(arg, sn.names + off, len, &o);
    }
    free(sn.buf);
    return 0;
}

/* ---- the writer (master) ---------------------------------------------- */

/* Name order: bytes, then the shorter first; equal names by position in the
 * caller's array, so the last of a run is the one that wins. */
static int
catalog_cmp(const void *a, const void *b)
{
    const struct shm_catalog_entry *x =
        *(const struct shm_catalog_entry *const *)a;
    const struct shm_catalog_entry *y =
        *(const struct shm_catalog_entry *const *)b;
    int d = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);

    if (d != 0)
        return d;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Whether two entries name the same queue. */
static int
catalog_same(const struct shm_catalog_entry *x,
             const struct shm_catalog_entry *y)
{
    return x->len == y->len && memcmp(x->name, y->name, x->len) == 0;
}

/*
 * catalog_unique - check entries, sort them by name and keep the last of
 * each name: *out (malloc'd, *m of them).  cmph_new() fails on duplicate
 * keys, hence this.  -EINVAL, -EOVERFLOW (too many, or names over
 * names_cap bytes with their NULs), -ENOMEM.
 */
static int
catalog_unique(const struct shm_catalog_entry *e, uint32_t n, size_t names_cap,
               const struct shm_catalog_entry ***out, uint32_t *m)
{
    const struct shm_catalog_entry **u;
    size_t bytes = 0;
    uint32_t i, k = 0;

    if (n > SHM_CATALOG_MAX_ENTRIES)
        return -EOVERFLOW;
    for (i = 0; i < n; i++)
        if (e[i].len == 0 || e[i].len > SHM_NAME_MAX || e[i].name == NULL)
            return -EINVAL;
    u = malloc((n > 0 ? n : 1) * sizeof(*u));
    if (u == NULL)
        return -ENOMEM;
    for (i = 0; i < n; i++)
        u[i] = &e[i];
    qsort(u, n, sizeof(*u), catalog_cmp);
    for (i = 0; i < n; i++) {
        if (i + 1 < n && catalog_same(u[i], u[i + 1]))
            continue;
        u[k++] = u[i];
        bytes += u[i]->len + 1;
        if (SHM_QOPT_DL_LEN(u[i]->opts.flags) > 0) {
            if (u[i]->dl == NULL ||
                SHM_QOPT_DL_LEN(u[i]->opts.flags) > SHM_NAME_MAX) {
                free(u);
                return -EINVAL;
            }
            bytes += SHM_QOPT_DL_LEN(u[i]->opts.flags) + 1;
        }
    }
    if (bytes > names_cap) {
        free(u);
        return -EOVERFLOW;
    }
    *out = u;
    *m = k;
    return 0;
}

/* libcmph reads keys through an adapter; ours hands out the names in place
 * (cmph only reads them, and dispose has nothing to free). */
struct catalog_keys {
    const struct shm_catalog_entry **u;
    uint32_t pos;
};

static int
catalog_key_read(void *data, char **key, cmph_uint32 *len)
{
    struct catalog_keys *k = data;
    const struct shm_catalog_entry *e = k->u[k->pos++];

    *key = (char *)e->name;
    *len = (cmph_uint32)e->len;
    return (int)e->len;
}

static void
catalog_key_dispose(void *data, char *key, cmph_uint32 len)
{
    (void)data;
    (void)key;
    (void)len;
}

static void
catalog_key_rewind(void *data)
{
    ((struct catalog_keys *)data)->pos = 0;
}

/*
 * catalog_build - a CHD minimal perfect hash over u[0..m) (m > 0, unique),
 * packed into *mph (malloc'd, *len bytes plus zeroed slack).  CHD draws
 * random seeds and may fail on a bad draw: try a few times.  -EIO (logged)
 * when it never succeeds, -EOVERFLOW past CATALOG_MPH_MAX, -ENOMEM.
 */
static int
catalog_build(const struct shm_catalog_entry **u, uint32_t m,
              unsigned char **mph, uint32_t *len)
{
    struct catalog_keys keys = {u, 0};
    cmph_io_adapter_t io = {&keys, m, catalog_key_read, catalog_key_dispose,
                            catalog_key_rewind};
    cmph_t *h = NULL;
    cmph_uint32 size;

    for (int try = 0; h == NULL && try < CATALOG_BUILD_TRIES; try++) {
        cmph_config_t *cfg = cmph_config_new(&io);

        if (cfg == NULL)
            return -ENOMEM;
        cmph_config_set_algo(cfg, CMPH_CHD);
        keys.pos = 0;
        h = cmph_new(cfg);
        cmph_config_destroy(cfg);
    }
    if (h == NULL) {
        log_error(0, "cmph_new(CHD, %u names) failed %d times", m,
                  CATALOG_BUILD_TRIES);
        return -EIO;
    }
    size = cmph_packed_size(h);
    if (size == 0 || size > CATALOG_MPH_MAX) {
        cmph_destroy(h);
        return -EOVERFLOW;
    }
    *mph = calloc(1, size + CATALOG_MPH_SLACK);
    if (*mph == NULL) {
        cmph_destroy(h);
        return -ENOMEM;
    }
    cmph_pack(h, *mph);
    cmph_destroy(h);
    *len = size;
    return 0;
}

/*
 * catalog_slots - each name's slot under the packed hash, computed the way
 * readers will compute it, into *slot (malloc'd).  A hash that is not a
 * bijection onto [0, m) would be a libcmph bug: -EIO (logged), -ENOMEM.
 */
static int
catalog_slots(const struct shm_catalog_entry **u, uint32_t m,
              unsigned char *mph, uint32_t **slot)
{
    uint32_t *s = malloc(m * sizeof(*s));
    unsigned char *seen = calloc(m, 1);
    int rc = 0;

    if (s == NULL || seen == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    for (uint32_t k = 0; k < m && rc == 0; k++) {
        s[k] = cmph_search_packed(mph, u[k]->name, (cmph_uint32)u[k]->len);
        if (s[k] >= m || seen[s[k]]++) {
            log_error(0,
                      "cmph: name %u of %u hashes to slot %u twice or "
                      "out of range",
                      k, m, s[k]);
            rc = -EIO;
        }
    }
out:
    free(seen);
    if (rc == 0)
        *slot = s;
    else
        free(s);
    return rc;
}

/*
 * catalog_write - fill copy cp with generation gen: seq odd, names in
 * order, records at their slots, the packed hash, seq even.  The caller
 * publishes gen afterwards.
 */
static void
catalog_write(struct catalog_copy *cp, uint64_t gen,
              const struct shm_catalog_entry **u, const uint32_t *slot,
              uint32_t m, const unsigned char *mph, uint32_t mph_len)
{
    uint64_t seq = atomic_load_explicit(&cp->seq, memory_order_relaxed);
    uint32_t off = 0;

    atomic_store_explicit(&cp->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (uint32_t k = 0; k < m; k++) {
        struct catalog_rec *rec = &cp->recs[slot[k]];

        memcpy(cp->names + off, u[k]->name, u[k]->len);
        cp->names[off + u[k]->len] = '\0';
        atomic_store_explicit(&rec->name_off, off, memory_order_relaxed);
        atomic_store_explicit(&rec->name_len, (uint32_t)u[k]->len,
                              memory_order_relaxed);
        memcpy(&rec->opts, &u[k]->opts, sizeof(rec->opts));
        cp->sorted[k] = slot[k];
        off += (uint32_t)u[k]->len + 1;
        if (SHM_QOPT_DL_LEN(u[k]->opts.flags) > 0) {
            uint32_t dlen = SHM_QOPT_DL_LEN(u[k]->opts.flags);

            memcpy(cp->names + off, u[k]->dl, dlen);
            cp->names[off + dlen] = '\0';
            off += dlen + 1;
        }
    }
    if (mph_len > 0)
        memcpy(cp->mph, mph, mph_len);
    atomic_store_explicit(&cp->n, m, memory_order_relaxed);
    atomic_store_explicit(&cp->names_len, off, memory_order_relaxed);
    atomic_store_explicit(&cp->mph_len, mph_len, memory_order_relaxed);
    atomic_store_explicit(&cp->gen, gen, memory_order_relaxed);
    atomic_store_explicit(&cp->seq, seq + 2, memory_order_release);
}

/* shm_catalog_publish - dedupe, hash, fill the spare copy, flip. */
int
shm_catalog_publish(struct shm_catalog *c,
                    const struct shm_catalog_entry *entries, uint32_t n)
{
    const struct shm_catalog_entry **u = NULL;
    unsigned char *mph = NULL;
    uint32_t *slot = NULL, m, mph_len = 0;
    uint64_t gen;
    int rc;

    rc = catalog_unique(entries, n, c->hdr->names_cap, &u, &m);
    if (rc != 0)
        return rc;
    if (m > 0 && (rc = catalog_build(u, m, &mph, &mph_len)) == 0)
        rc = catalog_slots(u, m, mph, &slot);
    if (rc == 0) {
        gen = atomic_load_explicit(&c->hdr->gen, memory_order_relaxed) + 1;
        catalog_write(catalog_copy_at(c, gen), gen, u, slot, m, mph, mph_len);
        atomic_store_explicit(&c->hdr->gen, gen, memory_order_release);
    }
    free(slot);
    free(mph);
    free(u);
    return rc;
}
