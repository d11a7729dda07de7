/*
 * raft_repl.c - log replication, commit, and snapshot catch-up.
 *
 * The leader keeps, per follower, the next index to send and the highest
 * index known to match.  It sends from next on every heartbeat and after
 * each proposal, and moves next only on answers (no pipelining: the log
 * carries rare configuration changes, not a stream).  A follower that
 * rejects says where its log diverges (the first index of the conflicting
 * term, or its end), so the leader skips a whole term per round trip.  A
 * follower whose next entry was compacted away gets the snapshot instead.
 * Commit counts matches, and only for an entry of the leader's own term.
 * Single-threaded.
 */
#include <errno.h>
#include <stdlib.h>

#include "consensus/raft_core.h"
#include "consensus/store.h"
#include "shm/log.h"

/* send_snapshot - the stored snapshot, at most once per election timeout
 * while unanswered (a blob is big; the follower acks it). */
static void
send_snapshot(struct raft *r, int peer)
{
    struct raft_peer *pr = &r->peers[peer];
    struct raft_msg m = {
        .type = RAFT_MSG_SNAPSHOT,
        .from = r->cfg.self,
        .to = peer,
        .term = r->term,
        .index = r->log.snap_index,
        .log_term = r->log.snap_term,
    };
    int rc;

    if (r->now < pr->snap_wait)
        return;
    if ((rc = raft_store_snapshot_read(r->log.store, &m.data, &m.len)) != 0) {
        log_warn(-rc, "raft: snapshot for node %d not sent", peer);
        return;
    }
    pr->snap_wait = r->now + r->cfg.election_ms;
    raft_send(r, &m);
}

/* copy_entries - up to a batch of entries from index first into m. */
static int
copy_entries(struct raft *r, uint64_t first, struct raft_msg *m)
{
    uint64_t last = raft_log_last_index(&r->log);
    size_t n = 0, bytes = 0;

    while (first + n <= last && n < r->cfg.max_append &&
           bytes < RAFT_APPEND_BYTES)
        bytes += raft_log_get(&r->log, first + n++)->len;
    if (n == 0)
        return 0;
    if ((m->entries = calloc(n, sizeof(*m->entries))) == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (raft_entry_dup(&m->entries[i], raft_log_get(&r->log, first + i)))
            return -ENOMEM;
        m->n_entries = i + 1;
    }
    return 0;
}

/* raft_send_append - the snapshot instead if next-1 was compacted. */
void
raft_send_append(struct raft *r, int peer)
{
    struct raft_peer *pr = &r->peers[peer];
    struct raft_msg m = {
        .type = RAFT_MSG_APPEND,
        .from = r->cfg.self,
        .to = peer,
        .term = r->term,
        .index = pr->next - 1,
        .commit = r->commit,
    };

    if (raft_log_term(&r->log, m.index, &m.log_term) != 0) {
        send_snapshot(r, peer);
        return;
    }
    if (copy_entries(r, pr->next, &m) != 0) {
        raft_msg_free(&m); /* dropped; the next heartbeat retries */
        return;
    }
    raft_send(r, &m);
}

/* raft_broadcast_append - one append to every peer. */
void
raft_broadcast_append(struct raft *r)
{
    for (int p = 0; p < r->cfg.n; p++) {
        if (p != r->cfg.self)
            raft_send_append(r, p);
    }
}

/* cmp_desc - qsort order for match indices, highest first. */
static int
cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* raft_maybe_commit - the quorum-th highest match, if of our term. */
void
raft_maybe_commit(struct raft *r)
{
    uint64_t match[RAFT_MAX_NODES], n, term;

    for (int p = 0; p < r->cfg.n; p++) {
        match[p] =
            p == r->cfg.self ? raft_log_last_index(&r->log) : r->peers[p].match;
    }
    qsort(match, (size_t)r->cfg.n, sizeof(match[0]), cmp_desc);
    n = match[raft_quorum(r) - 1];
    /* An older term's entry is committed only under one of ours (§5.4.2):
     * counting its replicas could commit what a later leader overwrites. */
    if (n > r->commit && raft_log_term(&r->log, n, &term) == 0 &&
        term == r->term)
        r->commit = n;
    if (r->commit > 0 && raft_log_term(&r->log, r->commit, &term) == 0 &&
        term == r->term)
        r->caught_up = true;
}

/*
 * reply - answer an APPEND or SNAPSHOT from the leader.  commit carries
 * ours: the ready that hands this answer out hands out every entry up to
 * it too, and the caller applies those before it sends (raft.h), so the
 * leader learns what this node has applied (master/raft_node.c waits for
 * it before answering a configure).
 */
static void
reply(struct raft *r, const struct raft_msg *m, bool reject, uint64_t index,
      uint64_t log_term, uint64_t hint)
{
    struct raft_msg resp = {
        .type = RAFT_MSG_APPEND_RESP,
        .from = r->cfg.self,
        .to = m->from,
        .term = r->term,
        .index = index,
        .log_term = log_term,
        .commit = r->commit,
        .hint = hint,
        .reject = reject,
    };

    raft_send(r, &resp);
}

/* heard_leader - an APPEND or SNAPSHOT of our term: its sender leads. */
static void
heard_leader(struct raft *r, int leader)
{
    if (r->role != RAFT_FOLLOWER || r->leader != leader)
        raft_become_follower(r, r->term, leader);
    r->leader_seen = r->now;
    raft_reset_election(r);
}

/* reject_append - say where our log diverges from the leader's prev. */
static void
reject_append(struct raft *r, const struct raft_msg *m)
{
    uint64_t last = raft_log_last_index(&r->log), ct, t, hint;

    if (m->index > last) {
        reply(r, m, true, m->index, 0, last + 1);
        return;
    }
    raft_log_term(&r->log, m->index, &ct);
    hint = m->index;
    while (hint - 1 > r->log.snap_index &&
           raft_log_term(&r->log, hint - 1, &t) == 0 && t == ct)
        hint--;
    reply(r, m, true, m->index, ct, hint);
}

/* first_new - index in m->entries of the first entry we lack; truncates a
 * conflicting suffix.  -EBADMSG if it would cut a committed entry. */
static int
first_new(struct raft *r, const struct raft_msg *m, size_t *first)
{
    uint64_t t;
    size_t i;
    int rc;

    for (i = 0; i < m->n_entries; i++) {
        const struct raft_entry *e = &m->entries[i];

        if (raft_log_term(&r->log, e->index, &t) != 0)
            break; /* past our end */
        if (t == e->term)
            continue;
        if (e->index <= r->commit) {
            log_error(0, "raft: leader %d conflicts with committed %llu",
                      m->from, (unsigned long long)e->index);
            return -EBADMSG;
        }
        if ((rc = raft_log_truncate(&r->log, e->index)) != 0) {
            raft_fail(r, rc);
            return rc;
        }
        break;
    }
    *first = i;
    return 0;
}

/*
 * note_caught_up - the leader says it has committed up to leader_commit:
 * once ours reaches it, and that entry is of the leader's term (its term's
 * first entry has committed, so its commit index covers every entry an
 * earlier leader committed), this node is as current as the cluster.  An
 * older-term commit index may lag what is committed: wait for the next.
 */
static void
note_caught_up(struct raft *r, uint64_t leader_commit)
{
    uint64_t t;

    if (!r->caught_up && leader_commit > 0 && r->commit >= leader_commit &&
        raft_log_term(&r->log, leader_commit, &t) == 0 && t == r->term)
        r->caught_up = true;
}

/* raft_on_append - check prev, cut a conflict, append, ack. */
void
raft_on_append(struct raft *r, const struct raft_msg *m)
{
    uint64_t t, last_new = m->index + m->n_entries;
    size_t i;
    int rc;

    heard_leader(r, m->from);
    if (m->index < r->commit) { /* all of ours up to commit matches */
        note_caught_up(r, m->commit);
        reply(r, m, false, r->commit, 0, 0);
        return;
    }
    if (raft_log_term(&r->log, m->index, &t) != 0 || t != m->log_term) {
        reject_append(r, m);
        return;
    }
    if (first_new(r, m, &i) != 0)
        return;
    if (i < m->n_entries &&
        (rc = raft_log_append(&r->log, m->entries + i, m->n_entries - i))) {
        raft_fail(r, rc);
        return;
    }
    /* Only what this message proved matching may be committed here. */
    if (m->commit > r->commit)
        r->commit = m->commit < last_new ? m->commit : last_new;
    note_caught_up(r, m->commit);
    reply(r, m, false, last_new, 0, 0);
}

/* retry_from - where to resume after a reject: past the leader's last
 * entry of the follower's conflicting term, else the follower's hint. */
static uint64_t
retry_from(const struct raft *r, const struct raft_msg *m)
{
    uint64_t j = m->index, t;

    if (m->log_term == 0)
        return m->hint;
    if (j > raft_log_last_index(&r->log))
        j = raft_log_last_index(&r->log);
    while (j > r->log.snap_index && raft_log_term(&r->log, j, &t) == 0 &&
           t > m->log_term)
        j--;
    if (raft_log_term(&r->log, j, &t) == 0 && t == m->log_term)
        return j + 1;
    return m->hint;
}

/*
 * log_went_back - m rejects an index its sender had acknowledged: its log
 * went back (a data_dir emptied or restored from an older copy; raft
 * assumes it never does).  Nothing it holds is known to match any more, nor
 * to be applied there: probe it from its hint, a snapshot if that was
 * compacted.  Left as it was, its match kept every append at or above it,
 * each one rejected, until the leader changed.  Lowering a match is always
 * safe: the commit index never goes back.  A reject overtaken by an ack of
 * the same index reads the same way, and costs one probe.
 */
static void
log_went_back(struct raft *r, const struct raft_msg *m)
{
    struct raft_peer *pr = &r->peers[m->from];

    pr->match = 0;
    pr->applied = m->commit;
    pr->snap_wait = 0;
}

/*
 * raft_on_append_resp - move the peer on (ack) or back (reject).  A commit
 * that moves is sent to every peer at once, not at the next heartbeat: the
 * master waits for every member to apply a configure before answering it.
 */
void
raft_on_append_resp(struct raft *r, const struct raft_msg *m)
{
    struct raft_peer *pr = &r->peers[m->from];
    uint64_t last = raft_log_last_index(&r->log), next, was = r->commit;

    if (r->role != RAFT_LEADER)
        return;
    pr->active = true;
    /* A node of an earlier build sends 0 here: it never counts as applied. */
    if (m->commit > pr->applied)
        pr->applied = m->commit;
    if (m->reject) {
        if (m->index != pr->next - 1)
            return; /* answers an append we have since moved past */
        if (m->index <= pr->match && m->index > 0)
            log_went_back(r, m);
        next = retry_from(r, m);
        if (next >= pr->next)
            next = pr->next - 1; /* always move back at least one */
        if (next <= pr->match)
            next = pr->match + 1; /* never below what is known to match */
        pr->next = next;
        raft_send_append(r, m->from);
        return;
    }
    if (m->index <= pr->match || m->index > last)
        return; /* duplicate or stale ack: nothing new */
    pr->match = m->index;
    pr->next = m->index + 1;
    pr->snap_wait = 0;
    raft_maybe_commit(r);
    if (r->commit > was)
        raft_broadcast_append(r); /* m->from's next entries included */
    else if (pr->match < last)
        raft_send_append(r, m->from);
    if (r->transfer_to == m->from && pr->match == last) {
        struct raft_msg tn = {.type = RAFT_MSG_TIMEOUT_NOW,
                              .from = r->cfg.self,
                              .to = m->from,
                              .term = r->term};

        raft_send(r, &tn);
    }
}

/* raft_peer_applied - what peer last said it applied, as a leader saw. */
uint64_t
raft_peer_applied(const struct raft *r, int peer)
{
    if (r->role != RAFT_LEADER || peer < 0 || peer >= r->cfg.n ||
        peer == r->cfg.self)
        return 0;
    return r->peers[peer].applied;
}

/* raft_on_snapshot - install what we do not have yet, then ack. */
void
raft_on_snapshot(struct raft *r, const struct raft_msg *m)
{
    int rc;

    heard_leader(r, m->from);
    if (m->index <= r->commit) {
        reply(r, m, false, r->commit, 0, 0);
        return;
    }
    rc = raft_log_install(&r->log, m->index, m->log_term, m->data, m->len);
    if (rc != 0) {
        raft_fail(r, rc);
        return;
    }
    r->commit = r->applied = m->index;
    r->restore_pending = true;
    reply(r, m, false, m->index, 0, 0);
}
