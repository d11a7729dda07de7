/*
 * store.h - the raft log, term, vote and snapshot in LMDB.
 *
 * One environment per node, a directory under data_dir, opened by the
 * process that uses it (the master, after it forked its workers) and never
 * inherited across fork.  Every write is one synchronous LMDB transaction:
 * when a call returns 0 the change is on disk.  Single-threaded: one caller.
 * Errors: 0 or -errno (LMDB codes mapped, see store.c), logged with the call.
 */
#ifndef MAYFLY_CONSENSUS_STORE_H
#define MAYFLY_CONSENSUS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct raft_entry;
struct raft_store;

#define RAFT_STORE_MAP_SIZE (1ull << 30) /* sparse; the ceiling, not usage */
#define RAFT_VOTE_NONE      (-1)

/*
 * RAFT_STORE_UNSAFE_NOSYNC - skip fsync on commit.  For the simulator only,
 * which models process crashes (the page cache survives them) and would
 * spend its time budget in fsync; a production open never passes it.
 */
#define RAFT_STORE_UNSAFE_NOSYNC 1u

/*
 * raft_store_open - open (creating if needed, mode 0700) the environment in
 * directory dir.  -EPROTO when it holds another format version.
 */
int raft_store_open(const char *dir, unsigned flags, struct raft_store **out);

/* raft_store_close - close the environment; s may be NULL. */
void raft_store_close(struct raft_store *s);

/*
 * raft_store_wipe - empty the store (log, term, vote, snapshot) as if just
 * created.  Only tests call it: the simulator reuses one environment per
 * node slot across its schedules, as opening one costs milliseconds under
 * ASan.
 */
int raft_store_wipe(struct raft_store *s);

/* raft_store_get_vote - persisted term and vote (0, RAFT_VOTE_NONE if new). */
int raft_store_get_vote(struct raft_store *s, uint64_t *term, int *vote);

/* raft_store_set_vote - persist term and vote together, durably. */
int raft_store_set_vote(struct raft_store *s, uint64_t term, int vote);

/*
 * raft_store_append - add n entries whose indices follow the last stored
 * one (or the snapshot).  -EEXIST if an index is not above the last key.
 */
int raft_store_append(struct raft_store *s, const struct raft_entry *e,
                      size_t n);

/* raft_store_truncate - delete every entry with index >= from. */
int raft_store_truncate(struct raft_store *s, uint64_t from);

/*
 * raft_store_load - call fn for every entry in index order; data points into
 * the map and is valid only during the call.  A non-zero return from fn
 * stops the walk and is returned.
 */
int raft_store_load(struct raft_store *s,
                    int (*fn)(void *arg, const struct raft_entry *e),
                    void *arg);

/*
 * raft_store_save_snapshot - in one transaction: store blob as the snapshot
 * covering entries up to (index, term), and delete the entries it covers
 * (all entries when discard_log: the log conflicted with the snapshot).
 */
int raft_store_save_snapshot(struct raft_store *s, uint64_t index,
                             uint64_t term, const void *blob, size_t len,
                             bool discard_log);

/* raft_store_snapshot_meta - (index, term) of the snapshot; 0, 0 if none. */
int raft_store_snapshot_meta(struct raft_store *s, uint64_t *index,
                             uint64_t *term);

/*
 * raft_store_snapshot_read - a malloc'd copy of the snapshot blob in *blob
 * (NULL when it is empty).  -ENOENT when there is no snapshot.
 */
int raft_store_snapshot_read(struct raft_store *s, void **blob, size_t *len);

#endif
