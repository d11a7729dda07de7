/*
 * test_soak.c - the two-minute smoke of `make soak` (ops/soak/soak.sh):
 * three real nodes on 127.0.0.1-3 under ack, autoAck and rpc load at a low
 * rate, with the four faults in turn (kill -9 of a worker, SIGTERM and
 * restart, kill -9 and restart, SIGSTOP for 5 s).  It must end with the
 * CSV and the summary written and no ack-mode message lost beyond what the
 * killed node held (the driver's exit status says so).
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

Test(soak, two_minutes_with_faults_lose_nothing_acked_beyond_a_killed_share,
     .timeout = 900)
{
    static char out[1 << 16];
    char dir[256], cwd[512];

    cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
    itest_test_dir(dir, sizeof(dir));
    int port = itest_free_port(), cport = itest_free_port();
    int rc = sh(dir, out, sizeof(out),
                "cd %s && MINUTES=2 RATE=1500 PORT=%d CPORT=%d OUT=%s/run "
                "MAYFLYD=%s SOAK_BIN=build/soak/mayfly-soak ops/soak/soak.sh",
                cwd, port, cport, dir, getenv("MAYFLYD"));
    cr_log_info("%s", out);
    cr_assert_eq(rc, 0, "the soak failed (%d):\n%s", rc, out);
    cr_assert(strstr(out, "within their share") != NULL, "%s", out);
    cr_assert(strstr(out, "| soak-ack |") != NULL, "%s", out);
    /* Four faults, each logged; a CSV row per 10 s of the 2 minutes. */
    cr_assert_eq(sh(dir, out, sizeof(out), "wc -l < %s/run/faults.log", dir),
                 0);
    cr_assert_eq(atoi(out), 4, "faults logged: %s", out);
    cr_assert_eq(sh(dir, out, sizeof(out), "wc -l < %s/run/soak.csv", dir), 0);
    cr_assert_geq(atoi(out), 12, "CSV rows: %s", out);
}
