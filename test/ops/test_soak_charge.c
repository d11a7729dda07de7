/*
 * test_soak_charge.c - the soak driver's rule for charging a lost
 * ack-mode message to a kill -9 (ops/soak/charge.h), on the cases the
 * soaks met: a push forwarded to the owner just before its kill, whose
 * 201 reached the driver after the kill's stamp, is the killed node's
 * share (the 30-minute soak of issue 30 most likely counted such a batch
 * as lost by a live node; 5-minute soaks of kill -9s met several).
 */
#include <criterion/criterion.h>

#include "ops/soak/charge.h"

/* A 5-minute soak's batch: sent 30.601 s in through node 3, stored by
 * node 1's incarnation #2 before its kill -9, over by 30.606 s, answered
 * at 30.614 s. */
Test(soak_charge, a_push_sent_before_the_kill_is_the_killed_nodes_share)
{
    cr_assert(soak_charged(2, 30601, 2, 30606));
    cr_assert(soak_charged(2, 30605, 2, 30606));
}

/* Another: sent 240.665 s in, answered 1 ms later by node 2's incarnation
 * #8, whose kill /proc/uptime stamped 240.66 s, truncating to 10 ms. */
Test(soak_charge, an_uptime_stamp_counts_to_the_end_of_its_10_ms)
{
    cr_assert(soak_charged(8, 240665, 8, 240660 + SOAK_UPTIME_MS));
    cr_assert_not(soak_charged(8, 240670, 8, 240660 + SOAK_UPTIME_MS));
}

Test(soak_charge, a_push_sent_after_the_kill_is_never_the_killed_nodes)
{
    /* the killed incarnation cannot have accepted it: a loss to report */
    cr_assert_not(soak_charged(2, 30606, 2, 30606));
    cr_assert_not(soak_charged(2, 31000, 2, 30606));
}

Test(soak_charge, another_incarnations_push_is_not_charged_to_the_kill)
{
    cr_assert_not(soak_charged(3, 30601, 2, 30606));
    cr_assert_not(soak_charged(0, 30601, 2, 30606), "incarnation unread");
    cr_assert_not(soak_charged(0, 30601, 0, 30606),
                  "a kill of an incarnation that accepted nothing");
}
