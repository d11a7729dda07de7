/*
 * raft_elect.c - pre-votes, votes and the candidate's count.
 *
 * A follower that hears no leader first asks for pre-votes at term + 1
 * without changing its own term, so a node cut off from the cluster does not
 * inflate terms and depose a healthy leader when it comes back.  A node
 * grants a pre-vote only outside its leader lease (no leader heard for an
 * election timeout) and for an up-to-date log.  A pre-vote majority starts
 * the real election: term + 1, vote for self, persisted before any
 * RequestVote leaves.  TimeoutNow (leader transfer) skips the pre-vote.
 * A vote majority makes this node leader: it appends its term's no-op and
 * starts replicating it (raft_repl.c).  Single-threaded.
 */
#include "consensus/raft_core.h"
#include "consensus/store.h"

/* up_to_date - the candidate's last (term, index) is at least ours. */
static bool
up_to_date(const struct raft *r, const struct raft_msg *m)
{
    uint64_t last_term = raft_log_last_term(&r->log);

    return m->log_term > last_term ||
           (m->log_term == last_term &&
            m->index >= raft_log_last_index(&r->log));
}

/* in_lease - a live leader was heard within an election timeout. */
static bool
in_lease(const struct raft *r)
{
    if (r->leader == r->cfg.self)
        return true;
    return r->leader != RAFT_NO_NODE &&
           r->now - r->leader_seen < r->cfg.election_ms;
}

/* become_leader - reset the peers, append and send the no-op. */
static void
become_leader(struct raft *r)
{
    struct raft_entry noop = {.term = r->term, .type = RAFT_ENTRY_NOOP};
    uint64_t last = raft_log_last_index(&r->log);
    int rc;

    r->role = RAFT_LEADER;
    r->leader = r->cfg.self;
    r->transfer_to = RAFT_NO_NODE;
    for (int p = 0; p < r->cfg.n; p++)
        r->peers[p] = (struct raft_peer){.next = last + 1};
    r->quorum_at = r->now + r->cfg.election_ms;
    r->heartbeat_at = r->now + r->cfg.heartbeat_ms;
    /* The no-op commits the previous terms' entries under this term. */
    if ((rc = raft_log_append(&r->log, &noop, 1)) != 0) {
        raft_fail(r, rc);
        return;
    }
    raft_broadcast_append(r);
    raft_maybe_commit(r);
}

/* tally - count this round; win or lose once a quorum has spoken. */
static void
tally(struct raft *r)
{
    int yes = __builtin_popcount(r->granted);
    int no = __builtin_popcount(r->refused);

    if (yes >= raft_quorum(r)) {
        if (r->role == RAFT_PRECANDIDATE)
            raft_campaign(r, false);
        else
            become_leader(r);
    } else if (no >= raft_quorum(r)) {
        raft_become_follower(r, r->term, RAFT_NO_NODE);
    }
}

/* raft_campaign - ask every peer for a (pre-)vote; count our own. */
void
raft_campaign(struct raft *r, bool prevote)
{
    struct raft_msg m = {0};
    int rc;

    if (prevote) {
        r->role = RAFT_PRECANDIDATE;
    } else {
        /* Durable before the first RequestVote: a restart must not vote
         * again in this term. */
        rc = raft_store_set_vote(r->log.store, r->term + 1, r->cfg.self);
        if (rc != 0) {
            raft_fail(r, rc);
            return;
        }
        r->term++;
        r->vote = r->cfg.self;
        r->role = RAFT_CANDIDATE;
    }
    r->leader = RAFT_NO_NODE;
    r->transfer_to = RAFT_NO_NODE;
    r->granted = 1u << r->cfg.self;
    r->refused = 0;
    raft_reset_election(r);
    for (int p = 0; p < r->cfg.n; p++) {
        if (p == r->cfg.self)
            continue;
        m.type = prevote ? RAFT_MSG_PREVOTE : RAFT_MSG_VOTE;
        m.from = r->cfg.self;
        m.to = p;
        m.term = prevote ? r->term + 1 : r->term;
        m.index = raft_log_last_index(&r->log);
        m.log_term = raft_log_last_term(&r->log);
        raft_send(r, &m);
    }
    tally(r);
}

/* raft_on_vote - a PREVOTE or VOTE request, already at a term >= ours. */
void
raft_on_vote(struct raft *r, const struct raft_msg *m)
{
    bool prevote = m->type == RAFT_MSG_PREVOTE;
    bool can = r->vote == m->from ||
               (r->vote == RAFT_NO_NODE && r->leader == RAFT_NO_NODE) ||
               (prevote && m->term > r->term);
    bool grant = can && up_to_date(r, m) && !(prevote && in_lease(r));
    struct raft_msg resp = {
        .type = prevote ? RAFT_MSG_PREVOTE_RESP : RAFT_MSG_VOTE_RESP,
        .from = r->cfg.self,
        .to = m->from,
        /* A granted pre-vote answers at the asked term so the asker can
         * match it to its round; a refusal carries ours to catch it up. */
        .term = prevote && grant ? m->term : r->term,
        .reject = !grant,
    };
    int rc;

    if (grant && !prevote) {
        if ((rc = raft_store_set_vote(r->log.store, r->term, m->from)) != 0) {
            raft_fail(r, rc);
            return;
        }
        r->vote = m->from;
        raft_reset_election(r);
    }
    raft_send(r, &resp);
}

/* raft_on_vote_resp - a PREVOTE_RESP or VOTE_RESP for the current round. */
void
raft_on_vote_resp(struct raft *r, const struct raft_msg *m)
{
    bool prevote = m->type == RAFT_MSG_PREVOTE_RESP;

    if (prevote ? r->role != RAFT_PRECANDIDATE : r->role != RAFT_CANDIDATE)
        return;
    if (!m->reject && m->term != (prevote ? r->term + 1 : r->term))
        return; /* an answer to an earlier round */
    if (m->reject)
        r->refused |= 1u << m->from;
    else
        r->granted |= 1u << m->from;
    tally(r);
}
