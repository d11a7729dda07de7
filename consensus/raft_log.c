/*
 * raft_log.c - the in-memory log and its write-through to the LMDB store.
 *
 * Entries live in one array ordered by index; e[i] has index
 * snap_index + 1 + i.  Each entry owns a malloc'd copy of its data.  Memory
 * is prepared (grown, copied) before the store write, so a store failure
 * leaves both unchanged and an allocation failure never follows a write.
 * Single-threaded.  Errors: 0 or -errno.
 */
#include "consensus/raft_log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/store.h"
#include "shm/log.h"

/* log_reserve - room for n more entries. */
static int
log_reserve(struct raft_log *l, size_t n)
{
    size_t cap = l->cap ? l->cap : 16;
    struct raft_entry *e;

    if (l->n + n <= l->cap)
        return 0;
    while (cap < l->n + n)
        cap *= 2;
    if ((e = realloc(l->e, cap * sizeof(*e))) == NULL)
        return -ENOMEM;
    l->e = e;
    l->cap = cap;
    return 0;
}

/* log_drop - free entries [from, n) of the array (array positions). */
static void
log_drop(struct raft_log *l, size_t from)
{
    for (size_t i = from; i < l->n; i++)
        free(l->e[i].data);
    l->n = from;
}

/* log_push - the loader's callback: append one stored entry in memory. */
static int
log_push(void *arg, const struct raft_entry *e)
{
    struct raft_log *l = arg;
    int rc;

    if (e->index != raft_log_last_index(l) + 1) {
        log_error(0, "raft log: entry %llu after %llu",
                  (unsigned long long)e->index,
                  (unsigned long long)raft_log_last_index(l));
        return -EBADMSG;
    }
    if ((rc = log_reserve(l, 1)) != 0 ||
        (rc = raft_entry_dup(&l->e[l->n], e)) != 0)
        return rc;
    l->n++;
    return 0;
}

/* raft_log_load - snapshot meta, then every stored entry, in order. */
int
raft_log_load(struct raft_log *l, struct raft_store *store)
{
    int rc;

    memset(l, 0, sizeof(*l));
    l->store = store;
    rc = raft_store_snapshot_meta(store, &l->snap_index, &l->snap_term);
    if (rc == 0)
        rc = raft_store_load(store, log_push, l);
    if (rc != 0)
        raft_log_free(l);
    return rc;
}

/* raft_log_free - the entries and the array. */
void
raft_log_free(struct raft_log *l)
{
    log_drop(l, 0);
    free(l->e);
    l->e = NULL;
    l->cap = 0;
}

/* raft_log_last_index - the snapshot index when the log is empty. */
uint64_t
raft_log_last_index(const struct raft_log *l)
{
    return l->snap_index + l->n;
}

/* raft_log_last_term - the snapshot term when the log is empty. */
uint64_t
raft_log_last_term(const struct raft_log *l)
{
    return l->n > 0 ? l->e[l->n - 1].term : l->snap_term;
}

/* raft_log_term - 0 or -ENOENT; see raft_log.h. */
int
raft_log_term(const struct raft_log *l, uint64_t index, uint64_t *term)
{
    if (index == l->snap_index) {
        *term = l->snap_term;
        return 0;
    }
    if (index < l->snap_index || index > raft_log_last_index(l))
        return -ENOENT;
    *term = l->e[index - l->snap_index - 1].term;
    return 0;
}

/* raft_log_get - NULL for a compacted or future index. */
const struct raft_entry *
raft_log_get(const struct raft_log *l, uint64_t index)
{
    if (index <= l->snap_index || index > raft_log_last_index(l))
        return NULL;
    return &l->e[index - l->snap_index - 1];
}

/* raft_log_append - copies made, store written, then memory grows. */
int
raft_log_append(struct raft_log *l, const struct raft_entry *e, size_t n)
{
    size_t i;
    int rc;

    if ((rc = log_reserve(l, n)) != 0)
        return rc;
    for (i = 0; i < n; i++) {
        if ((rc = raft_entry_dup(&l->e[l->n + i], &e[i])) != 0)
            goto undo;
        l->e[l->n + i].index = raft_log_last_index(l) + 1 + i;
    }
    if ((rc = raft_store_append(l->store, &l->e[l->n], n)) != 0)
        goto undo;
    l->n += n;
    return 0;
undo:
    while (i-- > 0)
        free(l->e[l->n + i].data);
    return rc;
}

/* raft_log_truncate - store first, then memory. */
int
raft_log_truncate(struct raft_log *l, uint64_t index)
{
    int rc;

    if (index <= l->snap_index || index > raft_log_last_index(l))
        return index > raft_log_last_index(l) ? 0 : -EINVAL;
    if ((rc = raft_store_truncate(l->store, index)) != 0)
        return rc;
    log_drop(l, index - l->snap_index - 1);
    return 0;
}

/* log_shift - forget the first k array entries (now in the snapshot). */
static void
log_shift(struct raft_log *l, size_t k)
{
    for (size_t i = 0; i < k; i++)
        free(l->e[i].data);
    memmove(l->e, l->e + k, (l->n - k) * sizeof(*l->e));
    l->n -= k;
}

/* raft_log_compact - snapshot and prefix deletion in one transaction. */
int
raft_log_compact(struct raft_log *l, uint64_t index, const void *blob,
                 size_t len)
{
    uint64_t term;
    int rc;

    if (index <= l->snap_index || raft_log_term(l, index, &term) != 0)
        return -EINVAL;
    rc = raft_store_save_snapshot(l->store, index, term, blob, len, false);
    if (rc != 0)
        return rc;
    log_shift(l, index - l->snap_index);
    l->snap_index = index;
    l->snap_term = term;
    return 0;
}

/* raft_log_install - keep the suffix only if it follows the snapshot. */
int
raft_log_install(struct raft_log *l, uint64_t index, uint64_t term,
                 const void *blob, size_t len)
{
    uint64_t have;
    bool keep = raft_log_term(l, index, &have) == 0 && have == term &&
                index > l->snap_index;
    int rc;

    rc = raft_store_save_snapshot(l->store, index, term, blob, len, !keep);
    if (rc != 0)
        return rc;
    if (keep)
        log_shift(l, index - l->snap_index);
    else
        log_drop(l, 0);
    l->snap_index = index;
    l->snap_term = term;
    return 0;
}
