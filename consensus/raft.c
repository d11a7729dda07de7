/*
 * raft.c - the raft core's life cycle, timers and inputs: it hands each
 * message to raft_elect.c (votes) or raft_repl.c (appends, snapshots).
 *
 * Time only moves on raft_tick(); other inputs act at the last tick's time.
 * Election timeouts are drawn from a PRNG seeded by the config
 * (raft_role.c), so a run is a pure function of its inputs.  Outputs
 * accumulate in an outbox (raft_ready.c) until the caller takes them.  Term
 * and vote go to the store in the same call that changes them, before any
 * message reflecting them is queued.  Single-threaded.  Errors: 0 or -errno.
 */
#include <errno.h>
#include <stdlib.h>

#include "consensus/raft_core.h"
#include "consensus/store.h"
#include "shm/log.h"

/* config_check - fill defaults; false for an impossible configuration. */
static bool
config_check(struct raft_config *c)
{
    if (c->n < 1 || c->n > RAFT_MAX_NODES || c->self < 0 || c->self >= c->n)
        return false;
    if (c->election_ms == 0)
        c->election_ms = 1000;
    if (c->heartbeat_ms == 0)
        c->heartbeat_ms = 100;
    if (c->snapshot_threshold == 0)
        c->snapshot_threshold = 1024;
    if (c->max_append == 0)
        c->max_append = 64;
    return c->heartbeat_ms < c->election_ms;
}

/* raft_create - load the store, start as a follower. */
int
raft_create(const struct raft_config *cfg, struct raft_store *store,
            uint64_t now_ms, struct raft **out)
{
    struct raft *r;
    int rc;

    if ((r = calloc(1, sizeof(*r))) == NULL)
        return -ENOMEM;
    r->cfg = *cfg;
    if (!config_check(&r->cfg)) {
        free(r);
        return -EINVAL;
    }
    if ((rc = raft_store_get_vote(store, &r->term, &r->vote)) != 0 ||
        (rc = raft_log_load(&r->log, store)) != 0) {
        free(r);
        return rc;
    }
    r->role = RAFT_FOLLOWER;
    r->leader = RAFT_NO_NODE;
    r->transfer_to = RAFT_NO_NODE;
    r->commit = r->applied = r->log.snap_index;
    r->restore_pending = r->log.snap_index > 0;
    r->now = now_ms;
    r->rng = cfg->seed;
    r->reported.term = UINT64_MAX; /* the first ready reports the status */
    raft_reset_election(r);
    if (r->cfg.n == 1) /* nobody to wait for: lead at the first tick */
        r->election_at = now_ms;
    *out = r;
    return 0;
}

/* raft_free - the core and its pending outputs; not the store. */
void
raft_free(struct raft *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_out; i++)
        raft_msg_free(&r->out[i]);
    free(r->out);
    raft_log_free(&r->log);
    free(r);
}

/* check_quorum - a leader that has not heard from a majority for an
 * election timeout steps down: its followers may have elected another. */
static void
check_quorum(struct raft *r)
{
    int alive = 1;

    for (int p = 0; p < r->cfg.n; p++) {
        if (p != r->cfg.self)
            alive += r->peers[p].active;
        r->peers[p].active = false;
    }
    r->quorum_at = r->now + r->cfg.election_ms;
    if (alive < raft_quorum(r))
        raft_become_follower(r, r->term, RAFT_NO_NODE);
}

/* maybe_compact - snapshot the state machine once enough applied entries
 * sit in the log.  A failed snapshot callback is retried at a later tick. */
static void
maybe_compact(struct raft *r)
{
    void *data = NULL;
    size_t len = 0;
    int rc;

    if (r->cfg.snapshot == NULL ||
        r->applied - r->log.snap_index < r->cfg.snapshot_threshold)
        return;
    if ((rc = r->cfg.snapshot(r->cfg.arg, &data, &len)) != 0) {
        log_warn(-rc, "raft: state machine snapshot failed");
        return;
    }
    if ((rc = raft_log_compact(&r->log, r->applied, data, len)) != 0)
        raft_fail(r, rc);
    free(data);
}

/* raft_tick - fire whichever timers are due at now_ms. */
int
raft_tick(struct raft *r, uint64_t now_ms)
{
    if (r->failed)
        return r->failed;
    if (now_ms > r->now)
        r->now = now_ms;
    if (r->role == RAFT_LEADER) {
        if (r->now >= r->quorum_at)
            check_quorum(r);
        if (r->transfer_to != RAFT_NO_NODE && r->now >= r->transfer_until)
            r->transfer_to = RAFT_NO_NODE; /* target never took over */
        if (r->role == RAFT_LEADER && r->now >= r->heartbeat_at) {
            r->heartbeat_at = r->now + r->cfg.heartbeat_ms;
            raft_broadcast_append(r);
        }
    } else if (r->now >= r->election_at) {
        raft_campaign(r, true);
    }
    if (r->failed == 0)
        maybe_compact(r);
    return r->failed;
}

/* raft_deadline - the earliest timer: election, or heartbeat/quorum/transfer.
 */
uint64_t
raft_deadline(const struct raft *r)
{
    uint64_t t;

    if (r->role != RAFT_LEADER)
        return r->election_at;
    t = r->heartbeat_at < r->quorum_at ? r->heartbeat_at : r->quorum_at;
    if (r->transfer_to != RAFT_NO_NODE && r->transfer_until < t)
        t = r->transfer_until;
    return t;
}

/* answer_stale - a message from an older term: tell the sender ours, so a
 * deposed leader or a lagging candidate catches up.  Others are dropped. */
static void
answer_stale(struct raft *r, const struct raft_msg *m)
{
    struct raft_msg resp = {
        .from = r->cfg.self, .to = m->from, .term = r->term, .reject = true};

    if (m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_SNAPSHOT)
        resp.type = RAFT_MSG_APPEND_RESP;
    else if (m->type == RAFT_MSG_PREVOTE)
        resp.type = RAFT_MSG_PREVOTE_RESP;
    else if (m->type == RAFT_MSG_VOTE)
        resp.type = RAFT_MSG_VOTE_RESP;
    else
        return;
    raft_send(r, &resp);
}

/* newer_term - m's term is above ours and really means a new term: a
 * pre-vote request and a granted pre-vote answer only speculate. */
static bool
newer_term(const struct raft *r, const struct raft_msg *m)
{
    if (m->term <= r->term || m->type == RAFT_MSG_PREVOTE)
        return false;
    return !(m->type == RAFT_MSG_PREVOTE_RESP && !m->reject);
}

/* raft_step - settle the term first, then hand m to its handler. */
int
raft_step(struct raft *r, const struct raft_msg *m)
{
    if (r->failed)
        return r->failed;
    if (m->to != r->cfg.self || m->from < 0 || m->from >= r->cfg.n ||
        m->from == r->cfg.self)
        return -EINVAL;
    if (newer_term(r, m)) {
        bool leads = m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_SNAPSHOT;

        raft_become_follower(r, m->term, leads ? m->from : RAFT_NO_NODE);
    } else if (m->term < r->term) {
        answer_stale(r, m);
        return r->failed;
    }
    if (r->failed)
        return r->failed;
    switch (m->type) {
    case RAFT_MSG_PREVOTE:
    case RAFT_MSG_VOTE:
        raft_on_vote(r, m);
        break;
    case RAFT_MSG_PREVOTE_RESP:
    case RAFT_MSG_VOTE_RESP:
        raft_on_vote_resp(r, m);
        break;
    case RAFT_MSG_APPEND:
        raft_on_append(r, m);
        break;
    case RAFT_MSG_APPEND_RESP:
        raft_on_append_resp(r, m);
        break;
    case RAFT_MSG_SNAPSHOT:
        raft_on_snapshot(r, m);
        break;
    case RAFT_MSG_TIMEOUT_NOW:
        if (r->role != RAFT_LEADER)
            raft_campaign(r, false);
        break;
    }
    return r->failed;
}

/* raft_propose - persist the entry, then replicate it. */
int
raft_propose(struct raft *r, const void *data, size_t len, uint64_t *index_out)
{
    struct raft_entry e = {.term = r->term,
                           .type = RAFT_ENTRY_DATA,
                           .len = len,
                           .data = (void *)data};
    int rc;

    if (r->failed)
        return r->failed;
    if (r->role != RAFT_LEADER)
        return -EPERM;
    if (r->transfer_to != RAFT_NO_NODE)
        return -EBUSY;
    if (len > RAFT_ENTRY_MAX)
        return -EMSGSIZE;
    if ((rc = raft_log_append(&r->log, &e, 1)) != 0) {
        raft_fail(r, rc);
        return rc;
    }
    *index_out = raft_log_last_index(&r->log);
    raft_broadcast_append(r);
    raft_maybe_commit(r);
    return 0;
}

/* raft_transfer_leadership - catch the target up, then TimeoutNow. */
int
raft_transfer_leadership(struct raft *r, int target)
{
    if (r->failed)
        return r->failed;
    if (r->role != RAFT_LEADER)
        return -EPERM;
    if (r->cfg.n == 1)
        return -ENOENT;
    if (target == RAFT_TRANSFER_AUTO) {
        for (int p = 0; p < r->cfg.n; p++) {
            if (p != r->cfg.self &&
                (target == RAFT_TRANSFER_AUTO ||
                 r->peers[p].match > r->peers[target].match))
                target = p;
        }
    }
    if (target < 0 || target >= r->cfg.n || target == r->cfg.self)
        return -EINVAL;
    r->transfer_to = target;
    r->transfer_until = r->now + r->cfg.election_ms;
    if (r->peers[target].match == raft_log_last_index(&r->log)) {
        struct raft_msg tn = {.type = RAFT_MSG_TIMEOUT_NOW,
                              .from = r->cfg.self,
                              .to = target,
                              .term = r->term};

        raft_send(r, &tn);
    } else {
        raft_send_append(r, target);
    }
    return 0;
}
