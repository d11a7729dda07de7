/*
 * store.c - the raft log store on LMDB.
 *
 * Layout: one environment (data.mdb, lock.mdb in dir), three sub-databases,
 * every integer big-endian so that LMDB's memcmp order is numeric order:
 *   meta      "format" -> u32 STORE_FORMAT
 *             "term"   -> u64 current term
 *             "vote"   -> u32 node index voted for in that term, or ~0
 *   log       u64 index -> u64 term, u8 type, data bytes
 *   snapshot  "meta"   -> u64 index, u64 term (the last entry it covers)
 *             "data"   -> the state machine's blob
 * Appends use MDB_APPEND, so an out-of-order index fails with MDB_KEYEXIST
 * instead of silently reordering the log.  Commits are synchronous unless the
 * simulator asked for RAFT_STORE_UNSAFE_NOSYNC.
 *
 * Locking: none of ours; one thread of one process uses the handle.
 * Errors: LMDB codes become -errno: MDB_NOTFOUND -ENOENT, MDB_KEYEXIST
 * -EEXIST, MDB_MAP_FULL/MDB_DBS_FULL/MDB_TXN_FULL -ENOSPC, MDB_READERS_FULL
 * -EAGAIN, MDB_VERSION_MISMATCH/MDB_INVALID -EPROTO, other LMDB codes -EIO,
 * system errors -errno.  Failures are logged naming the call.
 */
#include "consensus/store.h"

#include <sys/stat.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lmdb.h>

#include "consensus/raft_msg.h"
#include "shm/log.h"

#define STORE_FORMAT    1u
#define STORE_VOTE_NONE 0xffffffffu
#define STORE_ENTRY_HDR 9 /* u64 term, u8 type */

struct raft_store {
    MDB_env *env;
    MDB_dbi meta;
    MDB_dbi log;
    MDB_dbi snap;
};

/* store_errno - an LMDB return code as -errno. */
static int
store_errno(int rc)
{
    switch (rc) {
    case MDB_NOTFOUND:
        return -ENOENT;
    case MDB_KEYEXIST:
        return -EEXIST;
    case MDB_MAP_FULL:
    case MDB_DBS_FULL:
    case MDB_TXN_FULL:
        return -ENOSPC;
    case MDB_READERS_FULL:
        return -EAGAIN;
    case MDB_VERSION_MISMATCH:
    case MDB_INVALID:
        return -EPROTO;
    default:
        return rc > 0 ? -rc : -EIO;
    }
}

/* store_fail - log a failed LMDB call and map its code to -errno. */
static int
store_fail(int rc, const char *call)
{
    log_error(0, "%s failed: %s", call, mdb_strerror(rc));
    return store_errno(rc);
}

/* val_of - an MDB_val over n bytes at p. */
static MDB_val
val_of(const void *p, size_t n)
{
    return (MDB_val){.mv_size = n, .mv_data = (void *)p};
}

/* load_u64 - a big-endian u64 from unaligned map memory. */
static uint64_t
load_u64(const void *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return be64toh(v);
}

/* store_begin - a transaction; rdonly for reads. */
static int
store_begin(struct raft_store *s, bool rdonly, MDB_txn **txn)
{
    int rc = mdb_txn_begin(s->env, NULL, rdonly ? MDB_RDONLY : 0, txn);

    return rc == 0 ? 0 : store_fail(rc, "mdb_txn_begin");
}

/* store_end - commit txn if rc is 0, else abort it; returns the outcome. */
static int
store_end(MDB_txn *txn, int rc)
{
    int mrc;

    if (rc != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    if ((mrc = mdb_txn_commit(txn)) != 0)
        return store_fail(mrc, "mdb_txn_commit");
    return 0;
}

/* put - a value under a string key; logged on failure. */
static int
put(MDB_txn *txn, MDB_dbi dbi, const char *key, const void *v, size_t n)
{
    MDB_val k = val_of(key, strlen(key)), d = val_of(v, n);
    int rc = mdb_put(txn, dbi, &k, &d, 0);

    return rc == 0 ? 0 : store_fail(rc, "mdb_put");
}

/* get - a value by string key; -ENOENT (not logged) when absent. */
static int
get(MDB_txn *txn, MDB_dbi dbi, const char *key, MDB_val *out)
{
    MDB_val k = val_of(key, strlen(key));
    int rc = mdb_get(txn, dbi, &k, out);

    if (rc == MDB_NOTFOUND)
        return -ENOENT;
    return rc == 0 ? 0 : store_fail(rc, "mdb_get");
}

/* store_format - stamp a new environment, or check an existing stamp. */
static int
store_format(struct raft_store *s, MDB_txn *txn)
{
    uint32_t want = htobe32(STORE_FORMAT), have;
    MDB_val v;
    int rc = get(txn, s->meta, "format", &v);

    if (rc == -ENOENT)
        return put(txn, s->meta, "format", &want, sizeof(want));
    if (rc != 0)
        return rc;
    if (v.mv_size != sizeof(have))
        return -EPROTO;
    memcpy(&have, v.mv_data, sizeof(have));
    if (have != want) {
        log_error(0, "raft store format %u, expected %u", be32toh(have),
                  STORE_FORMAT);
        return -EPROTO;
    }
    return 0;
}

/* store_open_dbs - open (creating) the three sub-databases, check format. */
static int
store_open_dbs(struct raft_store *s)
{
    MDB_txn *txn;
    int rc;

    if ((rc = store_begin(s, false, &txn)) != 0)
        return rc;
    if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta)) != 0 ||
        (rc = mdb_dbi_open(txn, "log", MDB_CREATE, &s->log)) != 0 ||
        (rc = mdb_dbi_open(txn, "snapshot", MDB_CREATE, &s->snap)) != 0)
        rc = store_fail(rc, "mdb_dbi_open");
    else
        rc = store_format(s, txn);
    return store_end(txn, rc);
}

/* raft_store_open - mkdir, env with map size and 3 dbs, format check. */
int
raft_store_open(const char *dir, unsigned flags, struct raft_store **out)
{
    unsigned envflags = flags & RAFT_STORE_UNSAFE_NOSYNC ? MDB_NOSYNC : 0;
    struct raft_store *s;
    int rc;

    if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
        rc = -errno;
        log_error(-rc, "mkdir(%s) failed", dir);
        return rc;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return -ENOMEM;
    if ((rc = mdb_env_create(&s->env)) != 0) {
        rc = store_fail(rc, "mdb_env_create");
        free(s);
        return rc;
    }
    if ((rc = mdb_env_set_mapsize(s->env, RAFT_STORE_MAP_SIZE)) != 0 ||
        (rc = mdb_env_set_maxdbs(s->env, 3)) != 0) {
        rc = store_fail(rc, "mdb_env_set_mapsize/maxdbs");
        goto fail;
    }
    if ((rc = mdb_env_open(s->env, dir, envflags, 0600)) != 0) {
        log_error(0, "mdb_env_open(%s) failed: %s", dir, mdb_strerror(rc));
        rc = store_errno(rc);
        goto fail;
    }
    if ((rc = store_open_dbs(s)) != 0)
        goto fail;
    *out = s;
    return 0;
fail:
    raft_store_close(s);
    return rc;
}

/* raft_store_close - mdb_env_close; NULL is a no-op. */
void
raft_store_close(struct raft_store *s)
{
    if (s == NULL)
        return;
    mdb_env_close(s->env);
    free(s);
}

/* raft_store_wipe - drop all three databases, stamp the format again. */
int
raft_store_wipe(struct raft_store *s)
{
    MDB_txn *txn;
    int rc;

    if ((rc = store_begin(s, false, &txn)) != 0)
        return rc;
    if ((rc = mdb_drop(txn, s->log, 0)) != 0 ||
        (rc = mdb_drop(txn, s->snap, 0)) != 0 ||
        (rc = mdb_drop(txn, s->meta, 0)) != 0)
        rc = store_fail(rc, "mdb_drop");
    else
        rc = store_format(s, txn);
    return store_end(txn, rc);
}

/* raft_store_get_vote - both keys, or the defaults when absent. */
int
raft_store_get_vote(struct raft_store *s, uint64_t *term, int *vote)
{
    MDB_txn *txn;
    MDB_val t, v;
    uint32_t who;
    int rc;

    *term = 0;
    *vote = RAFT_VOTE_NONE;
    if ((rc = store_begin(s, true, &txn)) != 0)
        return rc;
    rc = get(txn, s->meta, "term", &t);
    if (rc == 0)
        rc = get(txn, s->meta, "vote", &v);
    if (rc == 0 && (t.mv_size != 8 || v.mv_size != 4))
        rc = -EBADMSG;
    if (rc == 0) {
        *term = load_u64(t.mv_data);
        memcpy(&who, v.mv_data, 4);
        who = be32toh(who);
        *vote = who == STORE_VOTE_NONE ? RAFT_VOTE_NONE : (int)who;
    }
    mdb_txn_abort(txn);
    return rc == -ENOENT ? 0 : rc;
}

/* raft_store_set_vote - both keys in one synchronous transaction. */
int
raft_store_set_vote(struct raft_store *s, uint64_t term, int vote)
{
    uint64_t t = htobe64(term);
    uint32_t v = htobe32(vote < 0 ? STORE_VOTE_NONE : (uint32_t)vote);
    MDB_txn *txn;
    int rc;

    if ((rc = store_begin(s, false, &txn)) != 0)
        return rc;
    rc = put(txn, s->meta, "term", &t, sizeof(t));
    if (rc == 0)
        rc = put(txn, s->meta, "vote", &v, sizeof(v));
    return store_end(txn, rc);
}

/* append_one - one entry, reserved in place so its bytes are copied once. */
static int
append_one(struct raft_store *s, MDB_txn *txn, const struct raft_entry *e)
{
    uint64_t key = htobe64(e->index), term = htobe64(e->term);
    MDB_val k = val_of(&key, 8), d = val_of(NULL, STORE_ENTRY_HDR + e->len);
    unsigned char *p;
    int rc;

    if ((rc = mdb_put(txn, s->log, &k, &d, MDB_APPEND | MDB_RESERVE)) != 0)
        return store_fail(rc, "mdb_put(log, MDB_APPEND)");
    p = d.mv_data;
    memcpy(p, &term, 8);
    p[8] = (unsigned char)e->type;
    if (e->len > 0)
        memcpy(p + STORE_ENTRY_HDR, e->data, e->len);
    return 0;
}

/* raft_store_append - all n entries or none. */
int
raft_store_append(struct raft_store *s, const struct raft_entry *e, size_t n)
{
    MDB_txn *txn;
    int rc;

    if ((rc = store_begin(s, false, &txn)) != 0)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = append_one(s, txn, &e[i]);
    return store_end(txn, rc);
}

/*
 * delete_range - delete log keys in [from, to] with a cursor: after
 * mdb_cursor_del, MDB_NEXT returns the record that followed the deleted one.
 */
static int
delete_range(struct raft_store *s, MDB_txn *txn, uint64_t from, uint64_t to)
{
    uint64_t key = htobe64(from);
    MDB_val k = val_of(&key, 8), d;
    MDB_cursor *cur;
    int rc;

    if ((rc = mdb_cursor_open(txn, s->log, &cur)) != 0)
        return store_fail(rc, "mdb_cursor_open(log)");
    rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size == 8 && load_u64(k.mv_data) <= to) {
        if ((rc = mdb_cursor_del(cur, 0)) != 0)
            break;
        rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (rc == 0 || rc == MDB_NOTFOUND)
        return 0;
    return store_fail(rc, "mdb_cursor_del(log)");
}

/* raft_store_truncate - [from, end) in one transaction. */
int
raft_store_truncate(struct raft_store *s, uint64_t from)
{
    MDB_txn *txn;
    int rc;

    if ((rc = store_begin(s, false, &txn)) != 0)
        return rc;
    rc = delete_range(s, txn, from, UINT64_MAX);
    return store_end(txn, rc);
}

/* load_entry - decode one log record into e (data points into the map). */
static int
load_entry(const MDB_val *k, const MDB_val *d, struct raft_entry *e)
{
    const unsigned char *p = d->mv_data;

    if (k->mv_size != 8 || d->mv_size < STORE_ENTRY_HDR)
        return -EBADMSG;
    e->index = load_u64(k->mv_data);
    e->term = load_u64(p);
    e->type = p[8];
    if (e->type != RAFT_ENTRY_NOOP && e->type != RAFT_ENTRY_DATA)
        return -EBADMSG;
    e->len = d->mv_size - STORE_ENTRY_HDR;
    e->data = e->len > 0 ? (void *)(p + STORE_ENTRY_HDR) : NULL;
    return 0;
}

/* raft_store_load - a read transaction over the whole log. */
int
raft_store_load(struct raft_store *s,
                int (*fn)(void *arg, const struct raft_entry *e), void *arg)
{
    struct raft_entry e;
    MDB_cursor *cur;
    MDB_txn *txn;
    MDB_val k, d;
    int rc, mrc;

    if ((rc = store_begin(s, true, &txn)) != 0)
        return rc;
    if ((mrc = mdb_cursor_open(txn, s->log, &cur)) != 0) {
        mdb_txn_abort(txn);
        return store_fail(mrc, "mdb_cursor_open(log)");
    }
    mrc = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
    while (rc == 0 && mrc == 0) {
        if ((rc = load_entry(&k, &d, &e)) == 0)
            rc = fn(arg, &e);
        mrc = mdb_cursor_get(cur, &k, &d, MDB_NEXT);
    }
    if (rc == -EBADMSG)
        log_error(0, "raft store: malformed log record");
    if (rc == 0 && mrc != MDB_NOTFOUND)
        rc = store_fail(mrc, "mdb_cursor_get(log)");
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rc;
}

/* raft_store_save_snapshot - blob, meta, deletion: one transaction. */
int
raft_store_save_snapshot(struct raft_store *s, uint64_t index, uint64_t term,
                         const void *blob, size_t len, bool discard_log)
{
    uint64_t meta[2] = {htobe64(index), htobe64(term)};
    MDB_txn *txn;
    int rc;

    if ((rc = store_begin(s, false, &txn)) != 0)
        return rc;
    rc = put(txn, s->snap, "data", blob, len);
    if (rc == 0)
        rc = put(txn, s->snap, "meta", meta, sizeof(meta));
    if (rc == 0)
        rc = delete_range(s, txn, 0, discard_log ? UINT64_MAX : index);
    return store_end(txn, rc);
}

/* raft_store_snapshot_meta - (0, 0) when there is none. */
int
raft_store_snapshot_meta(struct raft_store *s, uint64_t *index, uint64_t *term)
{
    MDB_txn *txn;
    MDB_val v;
    int rc;

    *index = *term = 0;
    if ((rc = store_begin(s, true, &txn)) != 0)
        return rc;
    rc = get(txn, s->snap, "meta", &v);
    if (rc == 0 && v.mv_size != 16)
        rc = -EBADMSG;
    if (rc == 0) {
        *index = load_u64(v.mv_data);
        *term = load_u64((const unsigned char *)v.mv_data + 8);
    }
    mdb_txn_abort(txn);
    return rc == -ENOENT ? 0 : rc;
}

/* raft_store_snapshot_read - a copy out of the map. */
int
raft_store_snapshot_read(struct raft_store *s, void **blob, size_t *len)
{
    MDB_txn *txn;
    MDB_val v;
    int rc;

    *blob = NULL;
    *len = 0;
    if ((rc = store_begin(s, true, &txn)) != 0)
        return rc;
    if ((rc = get(txn, s->snap, "data", &v)) == 0 && v.mv_size > 0) {
        if ((*blob = malloc(v.mv_size)) == NULL)
            rc = -ENOMEM;
        else
            memcpy(*blob, v.mv_data, *len = v.mv_size);
    }
    mdb_txn_abort(txn);
    return rc;
}
