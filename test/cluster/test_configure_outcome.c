/*
 * test_configure_outcome.c - a configure whose entry may have been
 * proposed is never answered 503 no_leader, which says nothing was (SPEC
 * §2: no_leader "could not reach a leader", timeout "did not commit in
 * time"); it is answered 503 timeout, outcome unknown.
 *
 * Three nodes in network namespaces of their own (ns_cluster.h).  Two
 * real faults after the node took the call:
 *   - the leader's master stopped (SIGSTOP): its worker passes the
 *     configure on to it, the kernel takes the connection and the request,
 *     and nobody answers; the worker's wait for its master runs out.
 *   - the leader's answers to a follower dropped (a FORWARD rule on what
 *     the leader's cluster port sends the follower, but the SYN-ACKs; every
 *     other packet flows, the raft log's included): the follower passes the configure to the leader, which
 *     commits it and answers into the void; the follower's wait runs out,
 *     and the entry is applied everywhere all the same.
 * Each waits on conditions, never on the fault's timing.  Skipped, saying
 * so, only where the machine refuses a network namespace.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/cluster.h"
#include "test/cluster/ns_cluster.h"

static struct nsc C;
static int stopped = -1; /* a node whose master this test stopped */

static void
fini(void)
{
    if (stopped >= 0 && C.node[stopped].pid > 0)
        kill(C.node[stopped].pid, SIGCONT);
    nsc_stop_all(&C);
}

TestSuite(configure_outcome, .fini = fini, .timeout = 120);

/* configure - POST a configure of queue through node i. */
static long
configure(int i, const char *queue, int max_length, struct itest_resp *r)
{
    return itest_post(&C.node[i], r, "/api/v1/ephemeral/configure",
                      "{\"queue\":\"%s\",\"options\":{\"maxLength\":%d}}",
                      queue, max_length);
}

/* declared_length - maxLength node i lists for queue, -1 if not declared. */
static int64_t
declared_length(int i, const char *queue)
{
    return itest_listing_int(&C.node[i], queue, "options.maxLength", -1);
}

/* ipt - add ("-I") or take out ("-D") the switch's rule (the test runs
 * in the switch's namespace) that drops what node from's cluster port
 * sends node to, but the SYN-ACKs: to's connections to it open, and what
 * to sends arrives, but no answer comes back. */
static void
ipt(const char *op, int from, int to)
{
    char cmd[256];

    snprintf(cmd, sizeof(cmd),
             "iptables -w %s FORWARD -i s%d -o s%d -p tcp --sport 6633 "
             "! --tcp-flags SYN SYN -j DROP",
             op, from, to);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

/* The leader's master stops; a configure through the leader's own node
 * finds its worker, which passes it on and waits in vain: 503 timeout.
 * (member_ttl_ms is long so that the worker still trusts its master's
 * view when the call comes: nothing here races the stop.) */
Test(configure_outcome, the_leaders_master_stopped_after_taking_it)
{
    struct itest_resp r;
    int rc = nsc_start(&C, "member_ttl_ms=60000"), l;
    long st;

    NSC_SKIP_UNLESS(rc);
    l = nsc_wait_settled(&C, 30000);
    cr_assert_eq(configure(l, "co-before", 10, &r), 201, "%s", r.body);
    itest_resp_free(&r);

    cr_assert_eq(kill(C.node[l].pid, SIGSTOP), 0);
    stopped = l;
    int64_t t0 = itest_now_ms();
    st = configure(l, "co-stopped", 11, &r);
    fprintf(stderr, "stopped master: %ld after %lld ms: %s\n", st,
            (long long)(itest_now_ms() - t0), r.body);
    cr_expect_eq(st, 503, "%ld %s", st, r.body);
    cr_expect_str_eq(itest_jstr(r.json, "code"), "timeout",
                     "the master took the call: %s", r.body);
    cr_expect_neq(r.retry_after[0], '\0', "no Retry-After");
    itest_resp_free(&r);
    kill(C.node[l].pid, SIGCONT);
    stopped = -1;
}

/* The leader's answers to follower F are dropped; a configure through F
 * is committed by the leader, and F, which cannot hear that, answers 503
 * timeout; the queue is declared on every node after all. */
Test(configure_outcome, the_leaders_answer_lost_after_it_committed)
{
    struct itest_resp r;
    int rc = nsc_start(&C, NULL), l, f;
    long st;

    NSC_SKIP_UNLESS(rc);
    l = nsc_wait_settled(&C, 30000);
    f = (l + 1) % NSC_NODES;
    cr_assert_eq(configure(f, "co-before", 10, &r), 201, "%s", r.body);
    itest_resp_free(&r);

    ipt("-I", l, f);
    int64_t t0 = itest_now_ms();
    st = configure(f, "co-lost", 12, &r);
    fprintf(stderr, "lost answer: %ld after %lld ms: %s\n", st,
            (long long)(itest_now_ms() - t0), r.body);
    cr_expect_eq(st, 503, "%ld %s", st, r.body);
    cr_expect_str_eq(itest_jstr(r.json, "code"), "timeout",
                     "the leader took the call: %s", r.body);
    itest_resp_free(&r);
    /* it committed: every node holds it declared, F included */
    int64_t deadline = itest_now_ms() + 10000;
    for (int i = 0; i < NSC_NODES; i++)
        while (declared_length(i, "co-lost") != 12) {
            cr_assert_lt(itest_now_ms(), deadline,
                         "node %d does not hold co-lost declared", i);
            itest_sleep_ms(50);
        }
    ipt("-D", l, f);
}
