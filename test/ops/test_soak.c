/*
 * test_soak.c - the two-minute smoke of `make soak` (ops/soak/soak.sh):
 * three real nodes on 127.0.0.1-3 under ack, autoAck and rpc load at a low
 * rate, with the four faults in turn (kill -9 of a worker, SIGTERM and
 * restart, kill -9 and restart, SIGSTOP for 5 s).  It must end with the
 * CSV and the summary written and, by message id, no ack-mode message lost
 * but ones the node killed with kill -9 had accepted before its kill (the
 * driver's exit status and its summary say so; faults.log must name the
 * incarnation killed, or nothing could be charged to it).
 *
 * Its budget: test/run-all.sh kills a binary after TEST_TIMEOUT (600 s by
 * default), so the test's own timeout is below that, and the soak's waits
 * fit well inside it on a loaded machine: 120 s of load, a drain of at most
 * DRAIN=30 s, pushes and polls cut at 10 s, each node's start waited for at
 * most 60 s (its first start, and the restarts, which run during the load).
 */
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

Test(soak, two_minutes_with_faults_lose_no_acked_message_a_live_node_held,
     .timeout = 540)
{
    static char out[1 << 16];
    char dir[256], cwd[512];

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
    cr_assert(strstr(out, "Ack-mode loss by id: ") != NULL, "%s", out);
    cr_assert(strstr(out, ", 0 accepted by a node that lived (first id -1): "
                          "nothing lost that a live node held.") != NULL,
              "%s", out);
    /* The killed incarnation is known by its ids: it accepted some. */
    const char *share = strstr(out, "- node 3, killed ");
    cr_assert_not_null(share, "no loss share for the killed node:\n%s", out);
    const char *of = strstr(share, " of the ");
    cr_assert(of != NULL && atoll(of + 8) > 0,
              "the killed node's incarnation matched none of its ids:\n%s",
              out);
    cr_assert(strstr(out, "| soak-ack |") != NULL, "%s", out);
    /* Four faults, each logged; a CSV row per 10 s of the 2 minutes. */
    cr_assert_eq(sh(dir, out, sizeof(out), "wc -l < %s/run/faults.log", dir),
                 0);
    cr_assert_eq(atoi(out), 4, "faults logged: %s", out);
    cr_assert_eq(sh(dir, out, sizeof(out),
                    "grep -cE '^[0-9.]+ kill-9-node 3 [0-9]+ [0-9a-f]{16} "
                    "[0-9.]+$' %s/run/faults.log",
                    dir),
                 0, "the kill is logged without its incarnation and time");
    cr_assert_eq(sh(dir, out, sizeof(out), "wc -l < %s/run/soak.csv", dir), 0);
    cr_assert_geq(atoi(out), 12, "CSV rows: %s", out);
}
