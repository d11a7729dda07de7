/*
 * nfq_delay.h - a packet delayer for tests: the packets iptables sends to
 * an NFQUEUE queue are held a fixed time, then let through, in order.
 *
 * This kernel has no netem (tc qdisc netem is refused), but it has
 * nfnetlink_queue: a rule "-j NFQUEUE --queue-num Q" hands each packet to
 * the process bound to queue Q, which answers a verdict.  The delayer binds
 * Q over a raw netlink socket (no libnetfilter_queue here), asks for the
 * packets' metadata only, and accepts each one delay_ms after it came: a
 * fixed one-way delay.  Loss is iptables' "-m statistic --mode random"
 * (netns.c); the two make a flaky link.
 *
 * A thread of the calling process, in the calling thread's network
 * namespace (where the rules are).  The rules should say --queue-bypass so
 * that packets pass when no delayer is bound.
 */
#ifndef MAYFLY_TEST_CLUSTER_NFQ_DELAY_H
#define MAYFLY_TEST_CLUSTER_NFQ_DELAY_H

struct nfq_delay;

/* nfq_delay_start - bind queue num and hold what it gets delay_ms; fails
 * the test when the kernel refuses. */
struct nfq_delay *nfq_delay_start(int num, int delay_ms);

/* nfq_delay_stop - let everything held through at once, unbind, free. */
void nfq_delay_stop(struct nfq_delay *d);

/* nfq_delay_count - packets delayed so far (to show the rules matched). */
long nfq_delay_count(struct nfq_delay *d);

#endif
