/*
 * sim.h - a deterministic simulator for the raft core.
 *
 * One process runs 3 or 5 raft cores over the real LMDB store, a fake clock
 * and a fake network that drops, delays, duplicates and reorders messages
 * and splits the nodes into partitions; nodes crash and restart.  Every
 * random choice comes from one seed, so a failing seed replays exactly.
 * After every input to any node, sim_check() verifies election safety, log
 * matching, leader completeness and that term and vote survive restarts;
 * sim_apply() checks state-machine safety as entries are applied.
 * Single-threaded.
 */
#ifndef MAYFLY_TEST_CONSENSUS_SIM_H
#define MAYFLY_TEST_CONSENSUS_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct raft;
struct raft_ready;
struct raft_store;

#define SIM_MAX_NODES 5

/* struct sim_record - what was first applied at one index. */
struct sim_record {
    bool set;
    uint64_t term;      /* the entry's term */
    uint64_t data_hash; /* hash of its bytes */
    uint64_t chain;     /* state machine hash after applying it */
    uint64_t seen_term; /* applier's term: it was committed by then */
};

/*
 * struct sim_env - one open store per node slot, for a whole test process:
 * schedules wipe and reuse them, because opening an LMDB environment costs
 * milliseconds under ASan (it callocs and frees megabytes).
 */
struct sim_env {
    char base[128]; /* mkdtemp directory, removed by sim_env_close */
    char dir[SIM_MAX_NODES][160];
    struct raft_store *store[SIM_MAX_NODES]; /* NULL: closed */
};

/* struct sim_node - one raft core and its state machine. */
struct sim_node {
    struct raft *raft; /* NULL while crashed */
    unsigned restarts;
    uint64_t seen_term; /* highest term seen, across restarts */
    int seen_vote;      /* the vote seen in that term (-1 none) */
    uint64_t sm_index;  /* the state machine: last index applied */
    uint64_t sm_chain;  /* and a hash over every entry applied */
};

/* struct sim_packet - one encoded message in flight. */
struct sim_packet {
    uint64_t at;  /* delivery time */
    uint64_t seq; /* tie-break: the order it was sent */
    int to;
    size_t len;
    unsigned char *bytes;
};

struct sim {
    uint64_t seed;
    uint64_t rng;
    uint64_t now;
    int n;
    bool verbose;
    bool failed;
    char *why; /* first failure, for the report */
    size_t why_len;
    struct sim_env *env;
    struct sim_node node[SIM_MAX_NODES];
    int group[SIM_MAX_NODES]; /* partition: messages stay in a group */
    unsigned drop_pct;
    unsigned dup_pct;
    unsigned delay_ms;
    struct sim_packet *net;
    size_t n_net;
    size_t cap_net;
    uint64_t seq;
    struct sim_record *rec; /* by log index */
    size_t cap_rec;
    int *leader_of; /* by term: leader + 1, 0 unknown */
    size_t cap_terms;
};

/* struct sim_params - the shape of one schedule. */
struct sim_params {
    int steps;    /* time steps with faults, before the healed phase */
    bool verbose; /* trace every event to stderr */
};

/*
 * sim_nodes_for - cluster size of a seed: 3 for even seeds, 5 for odd, so
 * one number names a whole schedule.
 */
int sim_nodes_for(uint64_t seed);

/* sim_env_open - a fresh base directory under $TMPDIR (or /tmp). */
int sim_env_open(struct sim_env *env);

/* sim_env_close - close the stores, remove their files and directories. */
void sim_env_close(struct sim_env *env);

/*
 * sim_run - run the schedule of seed over env's (wiped) stores.  Returns
 * 0, or -1 with the first violated property (and the time) in why.
 */
int sim_run(struct sim_env *env, uint64_t seed, const struct sim_params *p,
            char *why, size_t why_len);

/* sim_fail - record the first failure (printf-style); returns -1. */
int sim_fail(struct sim *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* sim_trace - print an event when verbose. */
void sim_trace(const struct sim *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* sim_hash - FNV-1a over bytes, folded into h. */
uint64_t sim_hash(uint64_t h, const void *p, size_t len);

/* sim_check - the cross-node invariants, on every live node. */
int sim_check(struct sim *s);

/* sim_apply - apply a ready's snapshot and entries to node i's state
 * machine, checking them against what every other node applied. */
int sim_apply(struct sim *s, int i, const struct raft_ready *rd);

/* sim_snapshot - the raft snapshot callback: arg is a struct sim_node. */
int sim_snapshot(void *arg, void **data, size_t *len);

/* sim_free_records - release the checker's history. */
void sim_free_records(struct sim *s);

#endif
