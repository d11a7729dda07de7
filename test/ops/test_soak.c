/*
 * test_soak.c - the two-minute smoke of `make soak` (ops/soak/soak.sh):
 * three real nodes (in network namespaces of their own where the machine
 * allows, else on 127.0.0.1-3) under ack, autoAck and rpc load at a low
 * rate, with the five faults in turn (kill -9 of a worker, SIGTERM and
 * restart, kill -9 and restart, SIGSTOP for 5 s, a node cut off for 20 s
 * then healed, or that skipped without namespaces).  It must end with the
 * CSV and the summary written and, by message id, no ack-mode message lost
 * but ones the node killed with kill -9 had accepted before its kill (the
 * driver's exit status and its summary's numbers say so; faults.log must
 * name the incarnation killed, or nothing could be charged to it).
 *
 * Its budget: test/run-all.sh kills a binary after TEST_TIMEOUT (600 s by
 * default), so the test's own timeout is below that, and the soak's waits
 * fit well inside it on a loaded machine: 120 s of load, a drain of at most
 * DRAIN=30 s, pushes and polls cut at 10 s, each node's start waited for at
 * most 60 s (its first start, and the restarts, which run during the load).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"
#include "test/ops/shell.h"

/* Run a shell line in dir, output into out. */
static int sh(const char *dir, char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
sh(const char *dir, char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    int rc = ops_vsh(dir, out, cap, fmt, ap);
    va_end(ap);
    return rc;
}

/* line_after - the text after the first occurrence of key in s; fails the
 * test when there is none. */
static const char *
line_after(const char *s, const char *key)
{
    const char *at = strstr(s, key);

    cr_assert_not_null(at, "the summary has no '%s':\n%s", key, s);
    return at + strlen(key);
}

Test(soak, two_minutes_with_faults_lose_no_acked_message_a_live_node_held,
     .timeout = 540)
{
    static char out[1 << 16], sum[1 << 16];
    char dir[256], cwd[512];
    uint64_t lost, lost_killed, lost_live, k_lost, k_acc, acc, del, t_lost, dup,
        calls, replies;
    long long first_live;
    int steady, windows, node;
    double t;

    cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
    itest_test_dir(dir, sizeof(dir));
    int port = itest_free_port(), cport = itest_free_port();
    int rc =
        sh(dir, out, sizeof(out),
           "cd %s && MINUTES=2 RATE=1500 DRAIN=30 PORT=%d CPORT=%d OUT=%s/run "
           "MAYFLYD=%s SOAK_BIN=build/soak/mayfly-soak ops/soak/soak.sh",
           cwd, port, cport, dir, getenv("MAYFLYD"));
    cr_log_info("%s", out);
    cr_assert_eq(rc, 0, "the soak failed (%d):\n%s", rc, out);
    cr_assert_eq(sh(dir, sum, sizeof(sum), "cat %s/run/summary.md", dir), 0);

    /* Ack mode: every id lost was accepted by the node killed with kill -9
     * before its kill; none by a node that lived. */
    cr_assert_eq(sscanf(line_after(sum, "Ack-mode loss by id: "),
                        "%" SCNu64 " lost, %" SCNu64 " accepted by a node "
                        "before it was killed with kill -9, %" SCNu64
                        " accepted by a node that lived (first id %lld)",
                        &lost, &lost_killed, &lost_live, &first_live),
                 4, "%s", sum);
    cr_assert_eq(lost_live, 0,
                 "%" PRIu64 " ack-mode ids lost while their "
                 "node lived, the first %lld:\n%s",
                 lost_live, first_live, sum);
    cr_assert_eq(first_live, -1, "%s", sum);
    cr_assert_eq(lost, lost_killed, "%s", sum);
    /* The killed incarnation is known by its ids: it accepted some, and
     * lost no more than it accepted. */
    cr_assert_eq(sscanf(line_after(line_after(sum, "Ack-mode loss by id: "),
                                   "\n- node "),
                        "%d, killed %lf s in: lost %" SCNu64 " of the %" SCNu64,
                        &node, &t, &k_lost, &k_acc),
                 4, "no loss share for the killed node:\n%s", sum);
    cr_assert_eq(node, 3, "%s", sum);
    cr_assert_gt(k_acc, 0,
                 "the killed node's incarnation matched none of "
                 "its ids:\n%s",
                 sum);
    cr_assert_leq(k_lost, k_acc, "%s", sum);
    cr_assert_eq(k_lost, lost_killed, "%s", sum);
    /* The ack queue's row agrees: messages went through, the loss counted
     * the same; duplicates are allowed (at least once). */
    cr_assert_eq(sscanf(line_after(sum, "| soak-ack | "),
                        "%" SCNu64 " | %" SCNu64 " | %" SCNu64 " | %" SCNu64,
                        &acc, &del, &t_lost, &dup),
                 4, "%s", sum);
    cr_assert_gt(acc, 0, "%s", sum);
    cr_assert_gt(del, 0, "%s", sum);
    cr_assert_eq(t_lost, lost, "%s", sum);
    cr_assert_geq(del + t_lost, acc, "%s", sum);
    /* Requests were made and answered. */
    cr_assert_eq(sscanf(line_after(sum, "\nrpc: "),
                        "%" SCNu64 " calls, %" SCNu64 " replies", &calls,
                        &replies),
                 2, "%s", sum);
    cr_assert_gt(calls, 0, "%s", sum);
    cr_assert_gt(replies, 0, "%s", sum);
    cr_assert_leq(replies, calls, "%s", sum);
    /* A window of the CSV per 10 s of the 2 minutes. */
    cr_assert_eq(
        sscanf(line_after(sum, " msg/s | "), "%d of %d", &steady, &windows), 2,
        "%s", sum);
    cr_assert_geq(windows, 12, "%s", sum);
    cr_assert_leq(steady, windows, "%s", sum);

    /* Five faults, each logged (a heal too); the kill with its incarnation
     * and time; the partition of node 2, or its skip. */
    cr_assert_eq(sh(dir, out, sizeof(out),
                    "grep -vcE '^[0-9.]+ heal-node ' %s/run/faults.log", dir),
                 0);
    cr_assert_eq(atoi(out), 5, "faults logged: %s", out);
    cr_assert_eq(sh(dir, out, sizeof(out),
                    "grep -cE '^[0-9.]+ partition-(node|skipped) 2' "
                    "%s/run/faults.log",
                    dir),
                 0, "the partition is not logged");
    cr_assert_eq(sh(dir, out, sizeof(out),
                    "grep -cE '^[0-9.]+ kill-9-node 3 [0-9]+ [0-9a-f]{16} "
                    "[0-9.]+ [0-9]+\\.[0-9]{9}$' %s/run/faults.log",
                    dir),
                 0,
                 "the kill is logged without its incarnation and times (the "
                 "sample's, the kill's by the wall clock to the ns)");
    cr_assert_eq(sh(dir, out, sizeof(out), "wc -l < %s/run/soak.csv", dir), 0);
    cr_assert_geq(atoi(out), 12, "CSV rows: %s", out);
}
