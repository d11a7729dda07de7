/*
 * raft_log.h - the raft log in memory, written through to the store.
 *
 * The log holds the entries after the last snapshot (at most the compaction
 * threshold plus what is not yet applied), so the core reads terms and
 * entries without touching LMDB.  Every mutation writes the store first and
 * changes memory only once the store said yes, so memory never runs ahead
 * of disk.  Internal to consensus/.  Single-threaded.  Errors: 0 or -errno.
 */
#ifndef MAYFLY_CONSENSUS_RAFT_LOG_H
#define MAYFLY_CONSENSUS_RAFT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "consensus/raft_msg.h"

struct raft_store;

/* struct raft_log - entries snap_index+1 .. snap_index+n. */
struct raft_log {
    struct raft_store *store;
    uint64_t snap_index; /* last index the snapshot covers (0: none) */
    uint64_t snap_term;
    struct raft_entry *e;
    size_t n;
    size_t cap;
};

/* raft_log_load - fill l from store (snapshot meta, then entries). */
int raft_log_load(struct raft_log *l, struct raft_store *store);

/* raft_log_free - release the entries; the store stays open. */
void raft_log_free(struct raft_log *l);

uint64_t raft_log_last_index(const struct raft_log *l);
uint64_t raft_log_last_term(const struct raft_log *l);

/*
 * raft_log_term - term of the entry at index: the snapshot's term at
 * snap_index, 0 at index 0.  -ENOENT when compacted away or past the end.
 */
int raft_log_term(const struct raft_log *l, uint64_t index, uint64_t *term);

/* raft_log_get - the entry at index, or NULL if not held in memory. */
const struct raft_entry *raft_log_get(const struct raft_log *l, uint64_t index);

/*
 * raft_log_append - copy n entries (indices following the last) to the
 * store and then to memory.
 */
int raft_log_append(struct raft_log *l, const struct raft_entry *e, size_t n);

/* raft_log_truncate - drop entries from index on (index > snap_index). */
int raft_log_truncate(struct raft_log *l, uint64_t index);

/*
 * raft_log_compact - save blob as the snapshot at index (held in the log)
 * and drop the entries up to it.
 */
int raft_log_compact(struct raft_log *l, uint64_t index, const void *blob,
                     size_t len);

/*
 * raft_log_install - a leader's snapshot (index, term): keep the entries
 * after index if the log holds (index, term), else drop the whole log.
 */
int raft_log_install(struct raft_log *l, uint64_t index, uint64_t term,
                     const void *blob, size_t len);

#endif
