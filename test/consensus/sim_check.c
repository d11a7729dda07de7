/*
 * sim_check.c - the simulator's safety checks and its state machine.
 *
 * Raft's four safety properties, and the durability they rest on, checked
 * on the live nodes' real state (through the internals in raft_core.h):
 *   election safety      at most one leader per term, ever;
 *   log matching         two logs with an entry of the same index and term
 *                        are identical up to it;
 *   leader completeness  a leader holds every entry committed at or before
 *                        its term;
 *   state-machine safety no two nodes apply different entries at an index;
 *   durability           term and vote never go back, even over a crash.
 * The state machine is a hash chain over applied entries; its snapshot is
 * (index, chain), so a restored snapshot is checked like an applied entry.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/raft_core.h"
#include "test/consensus/sim.h"

/* sim_fail - keep the first failure only: later ones are consequences. */
int
sim_fail(struct sim *s, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (s->failed)
        return -1;
    s->failed = true;
    n = snprintf(s->why, s->why_len,
                 "seed %llu t=%llums: ", (unsigned long long)s->seed,
                 (unsigned long long)s->now);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < s->why_len)
        vsnprintf(s->why + n, s->why_len - (size_t)n, fmt, ap);
    va_end(ap);
    sim_trace(s, "FAIL %s", s->why);
    return -1;
}

/* sim_trace - one line per event, prefixed by the simulated time. */
void
sim_trace(const struct sim *s, const char *fmt, ...)
{
    va_list ap;

    if (!s->verbose)
        return;
    fprintf(stderr, "%8llu ", (unsigned long long)s->now);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* sim_hash - FNV-1a; h == 0 starts a new hash. */
uint64_t
sim_hash(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;

    if (h == 0)
        h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* grow - make a zeroed array hold index i. */
static int
grow(void **a, size_t *cap, size_t size, size_t i)
{
    size_t n = *cap ? *cap : 64;
    void *p;

    if (i < *cap)
        return 0;
    while (n <= i)
        n *= 2;
    if ((p = realloc(*a, n * size)) == NULL)
        return -1;
    memset((char *)p + *cap * size, 0, (n - *cap) * size);
    *a = p;
    *cap = n;
    return 0;
}

/* check_election - record the leader of each term; a second one fails. */
static int
check_election(struct sim *s, int i)
{
    const struct raft *r = s->node[i].raft;

    if (r->role != RAFT_LEADER)
        return 0;
    if (grow((void **)&s->leader_of, &s->cap_terms, sizeof(int), r->term))
        return sim_fail(s, "out of memory");
    if (s->leader_of[r->term] == 0) {
        s->leader_of[r->term] = i + 1;
        sim_trace(s, "node %d leads term %llu", i, (unsigned long long)r->term);
    } else if (s->leader_of[r->term] != i + 1) {
        return sim_fail(s, "election safety: nodes %d and %d lead term %llu",
                        s->leader_of[r->term] - 1, i,
                        (unsigned long long)r->term);
    }
    return 0;
}

/* check_durable - a node's term never goes back, nor its vote within a
 * term, even across a crash: both must have reached the store in time. */
static int
check_durable(struct sim *s, int i)
{
    struct sim_node *nd = &s->node[i];
    const struct raft *r = nd->raft;

    if (r->term < nd->seen_term)
        return sim_fail(s, "durability: node %d back at term %llu from %llu", i,
                        (unsigned long long)r->term,
                        (unsigned long long)nd->seen_term);
    if (r->term == nd->seen_term && nd->seen_vote != RAFT_NO_NODE &&
        r->vote != nd->seen_vote)
        return sim_fail(s, "durability: node %d voted %d then %d in term %llu",
                        i, nd->seen_vote, r->vote, (unsigned long long)r->term);
    nd->seen_term = r->term;
    nd->seen_vote = r->vote;
    return 0;
}

/* same_entry - term, type and bytes. */
static bool
same_entry(const struct raft_entry *a, const struct raft_entry *b)
{
    return a->term == b->term && a->type == b->type && a->len == b->len &&
           (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* check_matching - from the highest index where a and b agree on the term
 * down to what both still hold, every entry is the same. */
static int
check_matching(struct sim *s, int i, int j)
{
    const struct raft_log *a = &s->node[i].raft->log;
    const struct raft_log *b = &s->node[j].raft->log;
    uint64_t lo =
        (a->snap_index > b->snap_index ? a->snap_index : b->snap_index) + 1;
    uint64_t hi = raft_log_last_index(a) < raft_log_last_index(b)
                      ? raft_log_last_index(a)
                      : raft_log_last_index(b);
    bool agreed = false;

    for (uint64_t k = hi; k >= lo && k > 0; k--) {
        const struct raft_entry *x = raft_log_get(a, k),
                                *y = raft_log_get(b, k);

        if (!agreed && x->term != y->term)
            continue;
        agreed = true;
        if (!same_entry(x, y))
            return sim_fail(s, "log matching: nodes %d and %d differ at %llu",
                            i, j, (unsigned long long)k);
    }
    return 0;
}

/* check_complete - leader i holds every entry committed by its term. */
static int
check_complete(struct sim *s, int i)
{
    const struct raft *r = s->node[i].raft;

    if (r->role != RAFT_LEADER)
        return 0;
    for (uint64_t k = r->log.snap_index + 1; k < s->cap_rec; k++) {
        const struct sim_record *c = &s->rec[k];
        const struct raft_entry *e = raft_log_get(&r->log, k);

        if (!c->set || c->seen_term > r->term)
            continue;
        if (e == NULL || e->term != c->term ||
            sim_hash(0, e->data, e->len) != c->data_hash)
            return sim_fail(s,
                            "leader completeness: leader %d of term %llu "
                            "lacks committed %llu",
                            i, (unsigned long long)r->term,
                            (unsigned long long)k);
    }
    return 0;
}

/* sim_check - every live node, every pair of live nodes. */
int
sim_check(struct sim *s)
{
    for (int i = 0; i < s->n && !s->failed; i++) {
        if (s->node[i].raft == NULL)
            continue;
        check_election(s, i);
        check_complete(s, i);
        check_durable(s, i);
        for (int j = i + 1; j < s->n && !s->failed; j++) {
            if (s->node[j].raft != NULL)
                check_matching(s, i, j);
        }
    }
    return s->failed ? -1 : 0;
}

/* restore - replace node i's state machine with a snapshot blob. */
static int
restore(struct sim *s, int i, const struct raft_ready *rd)
{
    struct sim_node *nd = &s->node[i];
    uint64_t v[2];

    if (rd->snapshot_len != sizeof(v))
        return sim_fail(s, "node %d: snapshot of %zu bytes", i,
                        rd->snapshot_len);
    memcpy(v, rd->snapshot, sizeof(v));
    if (v[0] != rd->snapshot_index)
        return sim_fail(s, "node %d: snapshot index %llu, blob says %llu", i,
                        (unsigned long long)rd->snapshot_index,
                        (unsigned long long)v[0]);
    if (v[0] >= s->cap_rec || !s->rec[v[0]].set || s->rec[v[0]].chain != v[1])
        return sim_fail(s,
                        "state-machine safety: node %d restores a "
                        "snapshot at %llu nobody applied",
                        i, (unsigned long long)v[0]);
    nd->sm_index = v[0];
    nd->sm_chain = v[1];
    sim_trace(s, "node %d restores snapshot %llu", i, (unsigned long long)v[0]);
    return 0;
}

/* apply_one - one committed entry, checked against the first applier. */
static int
apply_one(struct sim *s, int i, const struct raft_entry *e)
{
    struct sim_node *nd = &s->node[i];
    struct sim_record *c;
    uint64_t dh = sim_hash(0, e->data, e->len);

    if (e->index != nd->sm_index + 1)
        return sim_fail(s, "node %d applies %llu after %llu", i,
                        (unsigned long long)e->index,
                        (unsigned long long)nd->sm_index);
    if (e->type == RAFT_ENTRY_DATA)
        nd->sm_chain = sim_hash(nd->sm_chain ^ e->index, e->data, e->len);
    nd->sm_index = e->index;
    if (grow((void **)&s->rec, &s->cap_rec, sizeof(*s->rec), e->index))
        return sim_fail(s, "out of memory");
    c = &s->rec[e->index];
    if (!c->set) {
        *c = (struct sim_record){true, e->term, dh, nd->sm_chain,
                                 nd->raft->term};
        return 0;
    }
    if (c->term != e->term || c->data_hash != dh || c->chain != nd->sm_chain)
        return sim_fail(s,
                        "state-machine safety: node %d applies another "
                        "entry at %llu",
                        i, (unsigned long long)e->index);
    if (nd->raft->term < c->seen_term)
        c->seen_term = nd->raft->term;
    return 0;
}

/* sim_apply - the snapshot first, then the entries in order. */
int
sim_apply(struct sim *s, int i, const struct raft_ready *rd)
{
    if (rd->has_snapshot && restore(s, i, rd) != 0)
        return -1;
    for (size_t k = 0; k < rd->n_entries; k++) {
        if (apply_one(s, i, &rd->entries[k]) != 0)
            return -1;
    }
    return 0;
}

/* sim_snapshot - (applied index, chain hash) as the blob. */
int
sim_snapshot(void *arg, void **data, size_t *len)
{
    struct sim_node *nd = arg;
    uint64_t *v = malloc(2 * sizeof(*v));

    if (v == NULL)
        return -ENOMEM;
    v[0] = nd->sm_index;
    v[1] = nd->sm_chain;
    *data = v;
    *len = 2 * sizeof(*v);
    return 0;
}

/* sim_free_records - the per-index and per-term histories. */
void
sim_free_records(struct sim *s)
{
    free(s->rec);
    free(s->leader_of);
    s->rec = NULL;
    s->leader_of = NULL;
    s->cap_rec = s->cap_terms = 0;
}
