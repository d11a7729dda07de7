/*
 * test_sim_check.c - the simulator's checker catches planted violations,
 * so a clean simulator run means something.
 *
 * Two idle cores over real stores; the test breaks one property by hand
 * through the internals (raft_core.h) and expects sim_check or sim_apply to
 * name it.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "consensus/raft_core.h"
#include "consensus/store.h"
#include "test/consensus/sim.h"

static struct sim_env env;
static struct sim s;
static char why[256];

static void
setup(void)
{
    struct raft_config cfg = {.n = 3};

    cr_assert_eq(sim_env_open(&env), 0);
    s = (struct sim){.n = 2, .why = why, .why_len = sizeof(why), .env = &env};
    for (int i = 0; i < 2; i++) {
        cfg.self = i;
        cr_assert_eq(raft_store_open(env.dir[i], RAFT_STORE_UNSAFE_NOSYNC,
                                     &env.store[i]),
                     0);
        cr_assert_eq(raft_create(&cfg, env.store[i], 0, &s.node[i].raft), 0);
        s.node[i].seen_vote = RAFT_NO_NODE;
    }
}

static void
teardown(void)
{
    for (int i = 0; i < 2; i++)
        raft_free(s.node[i].raft);
    sim_free_records(&s);
    sim_env_close(&env);
}

/* put - one DATA entry with term t and byte b at the end of node i's log. */
static void
put(int i, uint64_t t, char b)
{
    struct raft_entry e = {
        .term = t, .type = RAFT_ENTRY_DATA, .len = 1, .data = &b};

    cr_assert_eq(raft_log_append(&s.node[i].raft->log, &e, 1), 0);
}

TestSuite(sim_check, .init = setup, .fini = teardown);

Test(sim_check, idle_cluster_passes)
{
    cr_assert_eq(sim_check(&s), 0, "%s", why);
}

Test(sim_check, two_leaders_in_one_term_fail_election_safety)
{
    for (int i = 0; i < 2; i++) {
        s.node[i].raft->role = RAFT_LEADER;
        s.node[i].raft->term = 1;
    }
    cr_assert_eq(sim_check(&s), -1);
    cr_assert_not_null(strstr(why, "election safety"), "%s", why);
}

Test(sim_check, same_term_different_bytes_fail_log_matching)
{
    put(0, 1, 'a');
    put(1, 1, 'b');
    cr_assert_eq(sim_check(&s), -1);
    cr_assert_not_null(strstr(why, "log matching"), "%s", why);
}

Test(sim_check, different_entries_applied_at_one_index_fail)
{
    struct raft_entry a = {
        .index = 1, .term = 1, .type = RAFT_ENTRY_DATA, .len = 1, .data = "a"};
    struct raft_entry b = a;
    struct raft_ready rd = {.n_entries = 1};

    b.data = "b";
    rd.entries = &a;
    cr_assert_eq(sim_apply(&s, 0, &rd), 0);
    rd.entries = &b;
    cr_assert_eq(sim_apply(&s, 1, &rd), -1);
    cr_assert_not_null(strstr(why, "state-machine safety"), "%s", why);
}

Test(sim_check, leader_missing_a_committed_entry_fails_completeness)
{
    struct raft_entry a = {
        .index = 1, .term = 1, .type = RAFT_ENTRY_DATA, .len = 1, .data = "a"};
    struct raft_ready rd = {.entries = &a, .n_entries = 1};

    cr_assert_eq(sim_apply(&s, 0, &rd), 0);
    s.node[1].raft->role = RAFT_LEADER;
    s.node[1].raft->term = 2;
    cr_assert_eq(sim_check(&s), -1);
    cr_assert_not_null(strstr(why, "leader completeness"), "%s", why);
}

Test(sim_check, term_going_back_fails_durability)
{
    s.node[0].seen_term = 3;
    cr_assert_eq(sim_check(&s), -1);
    cr_assert_not_null(strstr(why, "durability"), "%s", why);
}
