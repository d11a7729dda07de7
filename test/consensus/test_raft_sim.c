/*
 * test_raft_sim.c - seeded simulator schedules over the raft core.
 *
 * Even seeds run 3 nodes, odd seeds 5 (sim_nodes_for).  make test runs
 * SIM_SEEDS of each; the environment reshapes the run:
 *   MAYFLY_SIM_SEED=S    replay seed S alone, tracing every event
 *   MAYFLY_SIM_SEEDS=N   seeds per cluster size (make sim SEEDS=N)
 *   MAYFLY_SIM_FIRST=F   start at the F-th seed (soak beyond make test's)
 *   MAYFLY_SIM_STEPS=K   faulty steps per schedule
 * A failure names its seed and the line that replays it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/consensus/sim.h"

#define SIM_SEEDS 5000 /* per cluster size: 10,000 schedules in make test */
#define SIM_STEPS 120

/*
 * __asan_default_options - ASan's settings for this binary only.  The
 * simulator churns through millions of small allocations; the default
 * 256 MiB quarantine makes each land on a fresh page (a fault, a fill, and
 * later an munmap), tripling the run time.  A 16 MiB quarantine still
 * holds thousands of schedules' steps of freed memory.
 */
const char *__asan_default_options(void);
const char *
__asan_default_options(void)
{
    return "quarantine_size_mb=16";
}

static uint64_t
env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? strtoull(v, NULL, 10) : dflt;
}

/* run_seeds - the seeds of one parity in [first, first + count). */
static void
run_seeds(uint64_t parity, uint64_t first, uint64_t count)
{
    struct sim_params p = {.steps =
                               (int)env_u64("MAYFLY_SIM_STEPS", SIM_STEPS)};
    const char *one = getenv("MAYFLY_SIM_SEED");
    struct sim_env env;
    char why[512];
    int rc;

    if ((rc = sim_env_open(&env)) != 0)
        cr_assert_fail("sim_env_open: %s", strerror(-rc));
    if (one != NULL && *one != '\0') {
        uint64_t seed = strtoull(one, NULL, 10);

        p.verbose = true;
        rc = seed % 2 == parity ? sim_run(&env, seed, &p, why, sizeof(why)) : 0;
        sim_env_close(&env);
        cr_assert(rc == 0, "%s", why);
        return;
    }
    for (uint64_t k = first; k < first + count && rc == 0; k++) {
        uint64_t seed = 2 * k + parity;

        rc = sim_run(&env, seed, &p, why, sizeof(why));
        if (rc != 0)
            cr_log_error("%s\n  replay: MAYFLY_SIM_SEED=%llu "
                         "build/asan/test/consensus/test_raft_sim",
                         why, (unsigned long long)seed);
    }
    sim_env_close(&env);
    cr_assert(rc == 0, "%s", why);
}

Test(raft_sim, three_nodes_keep_safety_under_faults)
{
    uint64_t first = env_u64("MAYFLY_SIM_FIRST", 0);

    run_seeds(0, first, env_u64("MAYFLY_SIM_SEEDS", SIM_SEEDS));
}

/* Five-node schedules cost about twice as much: two halves run in
 * parallel under criterion -j2. */
Test(raft_sim, five_nodes_keep_safety_under_faults_first_half)
{
    uint64_t first = env_u64("MAYFLY_SIM_FIRST", 0);
    uint64_t n = env_u64("MAYFLY_SIM_SEEDS", SIM_SEEDS);

    run_seeds(1, first, n / 2);
}

Test(raft_sim, five_nodes_keep_safety_under_faults_second_half)
{
    uint64_t first = env_u64("MAYFLY_SIM_FIRST", 0);
    uint64_t n = env_u64("MAYFLY_SIM_SEEDS", SIM_SEEDS);

    if (getenv("MAYFLY_SIM_SEED") == NULL)
        run_seeds(1, first + n / 2, n - n / 2);
}
