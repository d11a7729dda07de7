/*
 * raft_ready.c - the raft core's outputs: the outbox, the status, and the
 * hand-over of everything pending to the caller in a struct raft_ready.
 *
 * Messages queue as inputs produce them; committed entries and a snapshot
 * to restore are not queued but read from the log when the caller takes
 * the ready, so a failed allocation loses nothing: it is all still there
 * on the next take.  Single-threaded.  Errors: 0 or -errno.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/raft_core.h"
#include "consensus/store.h"

/* raft_send - append to the outbox, growing it by doubling. */
void
raft_send(struct raft *r, struct raft_msg *m)
{
    struct raft_msg *out;
    size_t cap;

    if (r->n_out == r->cap_out) {
        cap = r->cap_out ? 2 * r->cap_out : 16;
        if ((out = realloc(r->out, cap * sizeof(*out))) == NULL) {
            raft_msg_free(m);
            return;
        }
        r->out = out;
        r->cap_out = cap;
    }
    r->out[r->n_out++] = *m;
    memset(m, 0, sizeof(*m));
}

/* raft_status - a copy of the volatile state. */
void
raft_status(const struct raft *r, struct raft_status *st)
{
    st->role = r->role;
    st->term = r->term;
    st->leader = r->leader;
    st->commit = r->commit;
    st->applied = r->applied;
    st->last_index = raft_log_last_index(&r->log);
    st->caught_up = r->caught_up;
}

/* take_entries - copies of applied+1 .. commit into rd. */
static int
take_entries(struct raft *r, struct raft_ready *rd)
{
    size_t n = (size_t)(r->commit - r->applied);

    if (n == 0)
        return 0;
    if ((rd->entries = calloc(n, sizeof(*rd->entries))) == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct raft_entry *e = raft_log_get(&r->log, r->applied + 1 + i);

        if (raft_entry_dup(&rd->entries[i], e) != 0)
            return -ENOMEM;
        rd->n_entries = i + 1;
    }
    return 0;
}

/* raft_ready_take - snapshot, entries, then messages and status. */
int
raft_ready_take(struct raft *r, struct raft_ready *rd)
{
    struct raft_status *st = &rd->status;
    int rc;

    memset(rd, 0, sizeof(*rd));
    if (r->restore_pending) {
        rc = raft_store_snapshot_read(r->log.store, &rd->snapshot,
                                      &rd->snapshot_len);
        if (rc != 0)
            return rc;
        rd->has_snapshot = true;
        rd->snapshot_index = r->log.snap_index;
    }
    if ((rc = take_entries(r, rd)) != 0) {
        raft_ready_release(rd);
        return rc;
    }
    r->restore_pending = false;
    r->applied = r->commit;
    rd->msgs = r->out;
    rd->n_msgs = r->n_out;
    r->out = NULL;
    r->n_out = r->cap_out = 0;
    raft_status(r, st);
    rd->status_changed = st->role != r->reported.role ||
                         st->term != r->reported.term ||
                         st->leader != r->reported.leader;
    r->reported = *st;
    return 0;
}

/* raft_ready_release - everything the ready owns. */
void
raft_ready_release(struct raft_ready *rd)
{
    for (size_t i = 0; i < rd->n_msgs; i++)
        raft_msg_free(&rd->msgs[i]);
    free(rd->msgs);
    for (size_t i = 0; i < rd->n_entries; i++)
        free(rd->entries[i].data);
    free(rd->entries);
    free(rd->snapshot);
    memset(rd, 0, sizeof(*rd));
}
