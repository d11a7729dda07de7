/*
 * raft_role.c - what every part of the raft core shares: stepping down to
 * follower, the randomised election timer, the quorum, and the sticky store
 * failure that stops the core.
 *
 * raft.c (ticks and messages), raft_elect.c and raft_repl.c all call down
 * into this file; it calls only the store.  Election timeouts are drawn from
 * a splitmix64 stream seeded by the config, so a run is a pure function of
 * its inputs.  Single-threaded.
 */
#include "consensus/raft_core.h"
#include "consensus/store.h"
#include "shm/log.h"

/* splitmix64 - a small, well-mixed PRNG; its whole state is one word. */
static uint64_t
splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* raft_fail - remember the first store error; it stops the core. */
void
raft_fail(struct raft *r, int rc)
{
    if (r->failed == 0) {
        log_error(-rc, "raft: store write failed; consensus stops here");
        r->failed = rc;
    }
}

/* raft_quorum - a strict majority of the n voters. */
int
raft_quorum(const struct raft *r)
{
    return r->cfg.n / 2 + 1;
}

/* raft_reset_election - campaign in [election_ms, 2*election_ms). */
void
raft_reset_election(struct raft *r)
{
    r->election_at =
        r->now + r->cfg.election_ms + splitmix64(&r->rng) % r->cfg.election_ms;
}

/* raft_become_follower - a new term is persisted (vote cleared) first. */
void
raft_become_follower(struct raft *r, uint64_t term, int leader)
{
    int rc;

    if (term != r->term) {
        if ((rc = raft_store_set_vote(r->log.store, term, RAFT_NO_NODE))) {
            raft_fail(r, rc);
            return;
        }
        r->term = term;
        r->vote = RAFT_NO_NODE;
    }
    r->role = RAFT_FOLLOWER;
    r->leader = leader;
    r->transfer_to = RAFT_NO_NODE;
    raft_reset_election(r);
}
