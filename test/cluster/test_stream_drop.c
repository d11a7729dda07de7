/*
 * test_stream_drop.c - a client whose network goes silent (no reset, no
 * FIN: every packet dropped) is noticed within a bounded time, and its
 * presence member leaves (SPEC §12: a dead browser does not stay as a
 * ghost).  The node ends a connection whose sent bytes wait
 * 2 x stream_keepalive_s unacknowledged (TCP_USER_TIMEOUT), and a
 * stream's keepalive makes sure it holds some: the member leaves within
 * 3 x stream_keepalive_s + presence_grace_ms of the drop.
 *
 * One node in a network namespace of its own (netns.h); the test, in the
 * switch, holds a presence stream and a second connection for listings,
 * then drops every packet of the stream's connection (iptables INPUT and
 * OUTPUT in the switch, by the client's port).  The kernel alone would
 * retransmit for ~15 minutes (tcp_retries2).
 *
 * Skipped, saying so, only where the machine refuses a network namespace.
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/cluster/ns_cluster.h"
#include "test/integration/presence_list.h"
#include "test/integration/sse.h"

#define SUB  "/api/v1/ephemeral/subscribe"
#define PRES "/api/v1/presence"

#define KEEPALIVE_S 1
#define GRACE_MS    300

static struct itest_node N;

static void
stop_node(void)
{
    if (N.pid > 0) {
        kill(N.pid, SIGKILL);
        waitpid(N.pid, NULL, 0);
        N.pid = 0;
    }
}

TestSuite(stream_drop, .fini = stop_node, .timeout = 60);

/* start - the node in namespace 0, listening on its address; 0, or
 * -errno when namespaces are refused. */
static int
start(void)
{
    char dir[200], addr[32], o[3][300], opts[200];
    const char *own[3] = {o[0], o[1], o[2]};
    int rc = netns_switch();
    int64_t end;

    if (rc != 0)
        return rc;
    netns_node_add(0);
    netns_addr(0, addr, sizeof(addr));
    itest_test_dir(dir, sizeof(dir));
    memset(&N, 0, sizeof(N));
    N.port = 6632;
    snprintf(N.dir, sizeof(N.dir), "%s", dir);
    snprintf(N.log, sizeof(N.log), "%s/mayflyd.log", dir);
    snprintf(N.base, sizeof(N.base), "http://%s:6632", addr);
    snprintf(o[0], sizeof(o[0]), "listen=%s:6632", addr);
    snprintf(o[1], sizeof(o[1]), "data_dir=%s", dir);
    snprintf(o[2], sizeof(o[2]), "workers=1");
    snprintf(opts, sizeof(opts), "presence_grace_ms=%d stream_keepalive_s=%d",
             GRACE_MS, KEEPALIVE_S);
    netns_enter(0);
    N.pid = itest_spawn(own, 3, opts, N.log);
    netns_leave();
    end = itest_now_ms() + 20000;
    for (;;) {
        struct itest_resp r = {0};
        long st = itest_get(&N, &r, "/health");
        itest_resp_free(&r);
        if (st == 200)
            return 0;
        cr_assert_lt(itest_now_ms(), end, "the node did not come up");
        itest_sleep_ms(50);
    }
}

/* drop - every packet of the connection from local port port to the
 * node, both ways, dropped in the switch. */
static void
drop(int port)
{
    char cmd[300];

    snprintf(cmd, sizeof(cmd),
             "iptables -w -I OUTPUT -o s0 -p tcp --sport %d -j DROP && "
             "iptables -w -I INPUT -i s0 -p tcp --dport %d -j DROP",
             port, port);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(stream_drop, a_silent_clients_member_leaves_within_the_bound)
{
    struct sse_client *a = calloc(1, sizeof(*a));
    struct sockaddr_in me;
    socklen_t len = sizeof(me);
    int64_t t0, left, bound = 3 * KEEPALIVE_S * 1000 + GRACE_MS;
    int rc = start();

    NSC_SKIP_UNLESS(rc);
    cr_assert_not_null(a);
    sse_open(a, &N, SUB "?presence=room&member=laptop", NULL);
    cr_assert_geq(sse_wait_events(a, 1, 5000), 1, "no open event");
    cr_assert_eq(a->status, 200);
    t0 = itest_now_ms() + 5000;
    while (itest_member_conns(&N, "room", "laptop") != 1 && itest_now_ms() < t0)
        itest_sleep_ms(10);
    cr_assert_eq(itest_member_conns(&N, "room", "laptop"), 1);
    cr_assert_eq(getsockname(a->fd, (struct sockaddr *)&me, &len), 0);
    drop(ntohs(me.sin_port));
    t0 = itest_now_ms();
    /* the node keeps sending keepalives nobody acknowledges */
    while (itest_member_conns(&N, "room", "laptop") != -1 &&
           itest_now_ms() < t0 + bound + 3000)
        itest_sleep_ms(20);
    left = itest_now_ms() - t0;
    cr_assert_eq(itest_member_conns(&N, "room", "laptop"), -1,
                 "still listed %lld ms after the drop", (long long)left);
    cr_assert_leq(left, bound + 1000,
                  "left %lld ms after the drop (bound %lld)", (long long)left,
                  (long long)bound);
    cr_assert_geq(left, 2 * KEEPALIVE_S * 1000,
                  "left %lld ms after the drop: before the timeout",
                  (long long)left);
    sse_close(a);
}
