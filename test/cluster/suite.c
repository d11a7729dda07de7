/*
 * suite.c - a cluster suite's set-up (suite.h).
 */
#include "test/cluster/suite.h"

#define LEADER_MS 30000 /* as long as cl_wait_view waits */

void
cl_suite_up(struct cl *c, const char *opts, unsigned wait, void (*then)(void))
{
    cl_up(c, opts);
    if (wait & CL_SUITE_VIEW)
        cl_wait_view(c, CL_ALL);
    if (wait & CL_SUITE_LEADER)
        cr_assert_geq(cl_leader(c, LEADER_MS), 0,
                      "the nodes agree on no raft leader within %d ms",
                      LEADER_MS);
    if (then != NULL)
        then();
}
