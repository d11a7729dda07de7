/*
 * charge.h - which kill -9 a lost ack-mode message is charged to, for
 * mayfly-soak (soak.c); a header of its own so that a test can hold the
 * rule to its cases (test/ops/test_soak_charge.c).
 *
 * A message's id names the incarnation that accepted it, and a killed
 * incarnation accepts nothing after its kill: an id of the incarnation a
 * kill -9 ended was accepted before that kill, however late its answer
 * reached the driver.  A push forwarded by another node is answered
 * through that node, so its 201 may arrive after the kill's stamp (which
 * soak.sh takes after the kill) though the owner stored it before: the
 * time to compare with the stamp is when the push was sent.  A push sent
 * after the kill and still answered by the killed incarnation cannot be,
 * and is not charged to it.
 */
#ifndef MAYFLY_OPS_SOAK_CHARGE_H
#define MAYFLY_OPS_SOAK_CHARGE_H

#include <stdint.h>

/* /proc/uptime counts in 10 ms and truncates: a kill stamped t by it was
 * over by t + SOAK_UPTIME_MS at the latest. */
#define SOAK_UPTIME_MS 10

/* soak_charged - whether a push sent at sent_ms (since the driver's
 * start) and accepted by incarnation by (an index + 1 in the driver's
 * table; 0 unknown) is lost by the kill -9 of incarnation killed_by, over
 * by kill_by_ms (its stamp, plus the stamp's resolution). */
static inline int
soak_charged(uint8_t by, int64_t sent_ms, uint8_t killed_by, int64_t kill_by_ms)
{
    return killed_by != 0 && by == killed_by && sent_ms < kill_by_ms;
}

#endif
