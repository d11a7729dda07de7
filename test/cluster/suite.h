/*
 * suite.h - the cluster a cluster suite's every test starts from: three
 * nodes started in the suite's init (cl_up), waited on as the suite asks,
 * and killed in its fini.
 *
 * Criterion runs each test in a process of its own and calls the suite's
 * init and fini around it, so each test gets a fresh cluster.  CL_SUITE
 * writes the init, the fini and the TestSuite line that most suites
 * otherwise repeat word for word.
 */
#ifndef MAYFLY_TEST_CLUSTER_SUITE_H
#define MAYFLY_TEST_CLUSTER_SUITE_H

#include <criterion/criterion.h>

#include "test/cluster/cluster.h"

/* What the init waits for once every node answers /health (bits). */
#define CL_SUITE_STARTED 0u
#define CL_SUITE_VIEW    1u /* every node sees all three live (cl_wait_view) */
#define CL_SUITE_LEADER  2u /* the nodes agree on a raft leader (30 s) */

/*
 * cl_suite_up - cl_up(c, opts), the waits wait asks for (failing the test
 * when one does not come), then then() unless NULL: the suite's own last
 * step of set-up.
 */
void cl_suite_up(struct cl *c, const char *opts, unsigned wait,
                 void (*then)(void));

/*
 * CL_SUITE_THEN - criterion suite name whose tests start from cluster *cl
 * (a static of the suite's file), brought up by cl_suite_up(cl, opts,
 * wait, then) and killed after each test; the rest are TestSuite's own
 * fields (.timeout...).  CL_SUITE - the same with no step of the suite's
 * own.
 */
#define CL_SUITE_THEN(name, cl, opts, wait, then, ...)                         \
    static void name##_cl_up(void)                                             \
    {                                                                          \
        cl_suite_up((cl), (opts), (wait), (then));                             \
    }                                                                          \
    static void name##_cl_down(void)                                           \
    {                                                                          \
        cl_kill_all(cl);                                                       \
    }                                                                          \
    TestSuite(name, .init = name##_cl_up, .fini = name##_cl_down, __VA_ARGS__)

#define CL_SUITE(name, cl, opts, wait, ...)                                    \
    CL_SUITE_THEN(name, cl, opts, wait, NULL, __VA_ARGS__)

#endif
