/*
 * sim.c - the simulator's world: clock, network, faults, and the run.
 *
 * A schedule is `steps` rounds of: advance the clock 1-20 ms, deliver the
 * packets due (in delivery time, then send order), tick every live node,
 * then maybe one fault or action (propose, crash, restart, partition, heal,
 * leader transfer, a new drop/duplicate/delay rate).  Then the healed
 * phase: every node up, no drops, no partition; a leader must emerge and a
 * last proposal must reach every state machine, or the run fails for lack
 * of progress.  Messages cross the network encoded, so the codec is on the
 * path.  Stores come from a struct sim_env that outlives the schedule.
 */
#include "test/consensus/sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consensus/raft.h"
#include "consensus/store.h"

#define SIM_ELECTION_MS  100
#define SIM_HEARTBEAT_MS 20
#define SIM_SNAP_EVERY   5 /* compact often, so snapshots get exercised */
#define SIM_MAX_APPEND   2 /* small batches: catch-up takes several rounds */
#define SIM_HEAL_MS      (60 * SIM_ELECTION_MS)

/* rnd - the schedule's one random stream (splitmix64). */
static uint64_t
rnd(struct sim *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* chance - true with probability per_mille / 1000. */
static bool
chance(struct sim *s, unsigned per_mille)
{
    return rnd(s) % 1000 < per_mille;
}

/* sim_nodes_for - the seed's parity picks the cluster size. */
int
sim_nodes_for(uint64_t seed)
{
    return seed % 2 ? 5 : 3;
}

/* net_send - encode m and put it on the wire, unless the network eats it. */
static void
net_send(struct sim *s, const struct raft_msg *m)
{
    int copies = 1 + chance(s, s->dup_pct * 10);
    size_t len = raft_msg_size(m);

    if (s->group[m->from] != s->group[m->to] || chance(s, s->drop_pct * 10))
        return;
    for (int c = 0; c < copies; c++) {
        struct sim_packet *p;

        if (s->n_net == s->cap_net) {
            size_t cap = s->cap_net ? 2 * s->cap_net : 64;
            void *net = realloc(s->net, cap * sizeof(*s->net));

            if (net == NULL) {
                sim_fail(s, "out of memory");
                return;
            }
            s->net = net;
            s->cap_net = cap;
        }
        p = &s->net[s->n_net];
        /* At least 1 ms in flight: a step's deliveries then end, even if
         * two nodes answered each other forever. */
        *p = (struct sim_packet){.at = s->now + 1 + rnd(s) % s->delay_ms,
                                 .seq = s->seq++,
                                 .to = m->to,
                                 .len = len};
        if ((p->bytes = malloc(len)) == NULL ||
            raft_msg_encode(m, p->bytes, len) != 0) {
            free(p->bytes);
            sim_fail(s, "encode failed");
            return;
        }
        s->n_net++;
    }
}

/* drain - after an input to node i: apply, route, check. */
static void
drain(struct sim *s, int i, int rc)
{
    struct raft_ready rd;
    bool quiet;

    if (rc != 0) {
        sim_fail(s, "node %d: input failed: %s", i, strerror(-rc));
        return;
    }
    if ((rc = raft_ready_take(s->node[i].raft, &rd)) != 0) {
        sim_fail(s, "node %d: raft_ready_take: %s", i, strerror(-rc));
        return;
    }
    if (rd.status_changed)
        sim_trace(s, "node %d role %d term %llu leader %d", i, rd.status.role,
                  (unsigned long long)rd.status.term, rd.status.leader);
    /* An input with no output changed no role, term or entry (a
     * compaction only drops applied entries): nothing new to check. */
    quiet = rd.n_msgs == 0 && rd.n_entries == 0 && !rd.has_snapshot &&
            !rd.status_changed;
    if (sim_apply(s, i, &rd) == 0) {
        for (size_t k = 0; k < rd.n_msgs; k++)
            net_send(s, &rd.msgs[k]);
    }
    raft_ready_release(&rd);
    if (!quiet)
        sim_check(s);
}

/* store_open - (re)open node i's environment if a hard crash closed it. */
static int
store_open(struct sim_env *env, int i)
{
    if (env->store[i] != NULL)
        return 0;
    /* UNSAFE_NOSYNC: a simulated crash is a process crash, which keeps
     * the page cache; fsync on every write would eat the time budget. */
    return raft_store_open(env->dir[i], RAFT_STORE_UNSAFE_NOSYNC,
                           &env->store[i]);
}

/* node_start - a core over the node's store; its state machine is empty. */
static void
node_start(struct sim *s, int i)
{
    struct sim_node *nd = &s->node[i];
    struct raft_config cfg = {
        .self = i,
        .n = s->n,
        .election_ms = SIM_ELECTION_MS,
        .heartbeat_ms = SIM_HEARTBEAT_MS,
        .snapshot_threshold = SIM_SNAP_EVERY,
        .max_append = SIM_MAX_APPEND,
        .seed = s->seed * 977 + (uint64_t)i * 131 + nd->restarts,
        .snapshot = sim_snapshot,
        .arg = nd,
    };
    int rc;

    if ((rc = store_open(s->env, i)) != 0 ||
        (rc = raft_create(&cfg, s->env->store[i], s->now, &nd->raft)) != 0) {
        sim_fail(s, "node %d: start: %s", i, strerror(-rc));
        return;
    }
    nd->sm_index = 0; /* the state machine lives in memory: gone */
    nd->sm_chain = 0;
    sim_trace(s, "node %d starts", i);
    drain(s, i, 0);
}

/* node_crash - lose the core and its state machine; what the store
 * committed stays.  A hard crash also closes the environment, so the next
 * start goes through raft_store_open again. */
static void
node_crash(struct sim *s, int i, bool hard)
{
    struct sim_node *nd = &s->node[i];

    raft_free(nd->raft);
    nd->raft = NULL;
    nd->restarts++;
    if (hard) {
        raft_store_close(s->env->store[i]);
        s->env->store[i] = NULL;
    }
    sim_trace(s, "node %d crashes%s", i, hard ? " (store closed)" : "");
}

/* next_packet - index of the packet to deliver first, or -1 if none due. */
static long
next_packet(const struct sim *s)
{
    long best = -1;

    for (size_t k = 0; k < s->n_net; k++) {
        const struct sim_packet *p = &s->net[k];

        if (p->at <= s->now &&
            (best < 0 || p->at < s->net[best].at ||
             (p->at == s->net[best].at && p->seq < s->net[best].seq)))
            best = (long)k;
    }
    return best;
}

/* deliver - hand every packet due to its node (if up), decoding first. */
static void
deliver(struct sim *s)
{
    long k;

    while (!s->failed && (k = next_packet(s)) >= 0) {
        struct sim_packet p = s->net[k];
        struct raft_msg m;
        int rc;

        s->net[k] = s->net[--s->n_net];
        if (s->node[p.to].raft != NULL) {
            if ((rc = raft_msg_decode(p.bytes, p.len, &m)) != 0) {
                sim_fail(s, "decode: %s", strerror(-rc));
            } else {
                drain(s, p.to, raft_step(s->node[p.to].raft, &m));
                raft_msg_free(&m);
            }
        }
        free(p.bytes);
    }
}

/* tick_all - every live node sees the new time. */
static void
tick_all(struct sim *s)
{
    for (int i = 0; i < s->n && !s->failed; i++) {
        if (s->node[i].raft != NULL)
            drain(s, i, raft_tick(s->node[i].raft, s->now));
    }
}

/* propose - a client command to node i; only a leader takes it. */
static int
propose(struct sim *s, int i, uint64_t *index)
{
    unsigned char data[24];
    size_t len = 8 + rnd(s) % 16;
    int rc;

    for (size_t k = 0; k < len; k++)
        data[k] = (unsigned char)rnd(s);
    rc = raft_propose(s->node[i].raft, data, len, index);
    if (rc == 0) {
        sim_trace(s, "node %d takes proposal %llu", i,
                  (unsigned long long)*index);
        drain(s, i, 0);
    } else if (rc != -EPERM && rc != -EBUSY) {
        sim_fail(s, "node %d: propose: %s", i, strerror(-rc));
    }
    return rc;
}

/* leader - the live leader with the highest term, or -1. */
static int
leader(const struct sim *s)
{
    struct raft_status st;
    uint64_t term = 0;
    int who = -1;

    for (int i = 0; i < s->n; i++) {
        if (s->node[i].raft == NULL)
            continue;
        raft_status(s->node[i].raft, &st);
        if (st.role == RAFT_LEADER && st.term >= term) {
            term = st.term;
            who = i;
        }
    }
    return who;
}

/* partition - each node lands on one of two sides. */
static void
partition(struct sim *s)
{
    for (int i = 0; i < s->n; i++)
        s->group[i] = (int)(rnd(s) % 2);
    sim_trace(s, "partition");
}

/* heal - one side again. */
static void
heal(struct sim *s)
{
    memset(s->group, 0, sizeof(s->group));
    sim_trace(s, "heal");
}

/* net_profile - a new drop, duplicate and delay rate for the network. */
static void
net_profile(struct sim *s)
{
    s->drop_pct = (unsigned)(rnd(s) % 30);
    s->dup_pct = (unsigned)(rnd(s) % 10);
    s->delay_ms = 1 + (unsigned)(rnd(s) % 30);
    sim_trace(s, "network drop %u%% dup %u%% delay %ums", s->drop_pct,
              s->dup_pct, s->delay_ms);
}

/* fault - at most one action this step, drawn from the seed.  Clients
 * mostly find the leader (they follow its hint), sometimes not. */
static void
fault(struct sim *s)
{
    int i = (int)(rnd(s) % (uint64_t)s->n), l = leader(s);
    unsigned roll = (unsigned)(rnd(s) % 1000);
    uint64_t index;

    if (roll < 150 && l >= 0 && roll % 4 != 0)
        i = l;
    if (roll < 150 && s->node[i].raft != NULL) {
        propose(s, i, &index);
    } else if (roll < 165 && s->node[i].raft != NULL) {
        node_crash(s, i, roll == 150);
    } else if (roll < 230 && s->node[i].raft == NULL) {
        node_start(s, i);
    } else if (roll < 245) {
        partition(s);
    } else if (roll < 265) {
        heal(s);
    } else if (roll < 275 && l >= 0) {
        sim_trace(s, "node %d transfers leadership", l);
        drain(s, l,
              raft_transfer_leadership(s->node[l].raft, RAFT_TRANSFER_AUTO));
    } else if (roll < 290) {
        net_profile(s);
    }
}

/* step - time passes, packets land, timers fire, maybe a fault. */
static void
step(struct sim *s)
{
    s->now += 1 + rnd(s) % 20;
    deliver(s);
    tick_all(s);
    if (!s->failed)
        fault(s);
}

/* converged - every state machine has applied the entry (index, term). */
static bool
converged(const struct sim *s, uint64_t index, uint64_t term)
{
    if (index >= s->cap_rec || !s->rec[index].set || s->rec[index].term != term)
        return false;
    for (int i = 0; i < s->n; i++) {
        if (s->node[i].sm_index < index)
            return false;
    }
    return true;
}

/* dump - every node's indices, when a run fails for lack of progress. */
static void
dump(const struct sim *s)
{
    struct raft_status st;

    for (int i = 0; i < s->n; i++) {
        raft_status(s->node[i].raft, &st);
        sim_trace(s,
                  "node %d: role %d term %llu commit %llu last %llu "
                  "applied %llu",
                  i, st.role, (unsigned long long)st.term,
                  (unsigned long long)st.commit,
                  (unsigned long long)st.last_index,
                  (unsigned long long)s->node[i].sm_index);
    }
}

/* healed - all up, clean network: a last proposal must reach everyone.
 * A proposal dies with its leader's term; then the next leader gets one. */
static void
healed(struct sim *s)
{
    uint64_t until = s->now + SIM_HEAL_MS, index = 0, term = 0;
    struct raft_status st;
    int l, by = -1;

    heal(s);
    s->drop_pct = s->dup_pct = 0;
    for (int i = 0; i < s->n && !s->failed; i++) {
        if (s->node[i].raft == NULL)
            node_start(s, i);
    }
    while (!s->failed && s->now < until) {
        s->now += 1 + rnd(s) % 20;
        deliver(s);
        tick_all(s);
        if (s->failed || (index != 0 && converged(s, index, term)))
            return;
        if ((l = leader(s)) < 0)
            continue;
        raft_status(s->node[l].raft, &st);
        if (index != 0 && l == by && st.term == term)
            continue; /* still in flight under the same leader */
        by = l;
        term = st.term;
        if (propose(s, l, &index) != 0)
            index = 0;
    }
    dump(s);
    if (!s->failed)
        sim_fail(s, "no progress: healed cluster did not commit %llu in %dms",
                 (unsigned long long)index, SIM_HEAL_MS);
}

/* sim_env_open - the base directory; stores open lazily. */
int
sim_env_open(struct sim_env *env)
{
    const char *tmp = getenv("TMPDIR");
    char base[sizeof(env->base)];

    memset(env, 0, sizeof(*env));
    snprintf(base, sizeof(base), "%s/mayfly-sim-XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(base) == NULL)
        return -errno;
    memcpy(env->base, base, sizeof(base));
    for (int i = 0; i < SIM_MAX_NODES; i++)
        snprintf(env->dir[i], sizeof(env->dir[i]), "%s/n%d", base, i);
    return 0;
}

/* sim_env_close - stores, their files, the directories. */
void
sim_env_close(struct sim_env *env)
{
    char path[200];

    for (int i = 0; i < SIM_MAX_NODES; i++) {
        raft_store_close(env->store[i]);
        env->store[i] = NULL;
        snprintf(path, sizeof(path), "%s/data.mdb", env->dir[i]);
        unlink(path);
        snprintf(path, sizeof(path), "%s/lock.mdb", env->dir[i]);
        unlink(path);
        rmdir(env->dir[i]);
    }
    rmdir(env->base);
}

/* sim_setup - every node's store open and empty. */
static int
sim_setup(struct sim *s)
{
    int rc;

    for (int i = 0; i < s->n; i++) {
        if ((rc = store_open(s->env, i)) != 0 ||
            (rc = raft_store_wipe(s->env->store[i])) != 0)
            return sim_fail(s, "node %d: store: %s", i, strerror(-rc));
    }
    return 0;
}

/* sim_cleanup - the cores, packets and history of one schedule. */
static void
sim_cleanup(struct sim *s)
{
    for (int i = 0; i < s->n; i++)
        raft_free(s->node[i].raft);
    for (size_t k = 0; k < s->n_net; k++)
        free(s->net[k].bytes);
    free(s->net);
    sim_free_records(s);
}

/* sim_run - setup, faulty steps, healed phase, cleanup. */
int
sim_run(struct sim_env *env, uint64_t seed, const struct sim_params *p,
        char *why, size_t why_len)
{
    struct sim s = {
        .seed = seed,
        .rng = seed,
        .n = sim_nodes_for(seed),
        .verbose = p->verbose,
        .why = why,
        .why_len = why_len,
        .env = env,
    };

    for (int i = 0; i < SIM_MAX_NODES; i++)
        s.node[i].seen_vote = RAFT_NO_NODE;

    why[0] = '\0';
    if (sim_setup(&s) == 0) {
        net_profile(&s);
        for (int i = 0; i < s.n && !s.failed; i++)
            node_start(&s, i);
        for (int k = 0; k < p->steps && !s.failed; k++)
            step(&s);
        if (!s.failed)
            healed(&s);
    }
    sim_cleanup(&s);
    return s.failed ? -1 : 0;
}
