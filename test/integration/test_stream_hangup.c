/*
 * test_stream_hangup.c - a stream whose client goes without a clean close
 * is ended at once (SPEC §12: a dead browser does not stay as a ghost):
 * a reset (SO_LINGER 0, then close) ends a presence stream, and its
 * member leaves presence_grace_ms after, not at the next keepalive; and
 * the bound on a silent client (TCP_USER_TIMEOUT, worker/conn.h) spares a
 * slow reader.  (A client that vanishes without a word:
 * test/cluster/test_stream_drop.c.)  A client that closes its socket while
 * another of its threads is blocked reading it sends no reset until that
 * read returns (the kernel keeps the socket until then): such a "reset"
 * reaches the node with the next keepalive, and no server can see it
 * sooner.
 */
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"
#include "test/integration/presence_list.h"
#include "test/integration/sse.h"

#define SUB  "/api/v1/ephemeral/subscribe"
#define PRES "/api/v1/presence"

TestSuite(stream_hangup, .timeout = 60);

/* wait_conns - until member has want connections (-1: gone) or
 * timeout_ms pass; whether it came. */
static int
wait_conns(const struct itest_node *n, const char *channel, const char *member,
           int64_t want, int timeout_ms)
{
    int64_t end = itest_now_ms() + timeout_ms;

    while (itest_member_conns(n, channel, member) != want &&
           itest_now_ms() < end)
        itest_sleep_ms(10);
    return itest_member_conns(n, channel, member) == want;
}

/* reset - close c's socket with a reset (SO_LINGER 0), as a crashed
 * client's kernel or a middlebox does, and free c. */
static void
reset(struct sse_client *c)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};

    cr_assert_eq(setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)), 0);
    sse_close(c);
}

/* The keepalive is 60 s, so only the hang-up itself can end the stream
 * in time: the member leaves the grace after the reset. */
Test(stream_hangup, a_reset_presence_stream_leaves_after_the_grace)
{
    struct itest_node n;
    struct sse_client *a = calloc(1, sizeof(*a));
    int64_t t0, left;

    cr_assert_not_null(a);
    itest_node_start(&n, "workers=2 presence_grace_ms=1500 "
                         "stream_keepalive_s=60");
    sse_open(a, &n, SUB "?presence=room&member=laptop", NULL);
    cr_assert_geq(sse_wait_events(a, 1, 5000), 1, "no open event");
    cr_assert_eq(a->status, 200);
    cr_assert(wait_conns(&n, "room", "laptop", 1, 5000));
    reset(a);
    t0 = itest_now_ms();
    cr_assert(wait_conns(&n, "room", "laptop", -1, 6000),
              "still listed %lld ms after the reset",
              (long long)(itest_now_ms() - t0));
    left = itest_now_ms() - t0;
    cr_assert_leq(left, 1500 + 1000, "left %lld ms after the reset",
                  (long long)left);
    cr_assert_geq(left, 1400, "left %lld ms after the reset: the grace",
                  (long long)left);
    itest_node_stop(&n, 10000);
}

/* A plain stream (no presence) reset by its client: the node's count of
 * streams falls at once, not at the next keepalive. */
Test(stream_hangup, a_reset_stream_ends_at_once)
{
    struct itest_node n;
    struct sse_client *a = calloc(1, sizeof(*a));
    double open = -1;
    int64_t end;

    cr_assert_not_null(a);
    itest_node_start(&n, "workers=1 stream_keepalive_s=60");
    sse_open(a, &n, SUB "?queue=q&partition=p", NULL);
    cr_assert_geq(sse_wait_events(a, 1, 5000), 1, "no open event");
    cr_assert_eq(itest_metric(&n, "mayfly_streams", &open), 0);
    cr_assert_eq(open, 1);
    reset(a);
    end = itest_now_ms() + 3000;
    while (itest_now_ms() < end &&
           (itest_metric(&n, "mayfly_streams", &open) != 0 || open != 0))
        itest_sleep_ms(10);
    cr_assert_eq(open, 0, "the stream still counts 3 s after the reset");
    itest_node_stop(&n, 10000);
}

/* A live client that reads slowly (a small receive buffer, read every
 * 200 ms: its window closes and opens again) for longer than the node's
 * TCP_USER_TIMEOUT (2 x stream_keepalive_s) is not cut: every event
 * comes, and the stream is still open.  (One that reads nothing at all
 * for that long, while the node's bytes wait on its closed window, is
 * ended: the kernel counts a zero window that never opens as no
 * progress.) */
Test(stream_hangup, a_slow_reader_is_not_cut)
{
    struct itest_node n;
    struct itest_resp r = {0};
    struct sse_client *a = calloc(1, sizeof(*a));
    static char batch[8 * 102400 + 64];
    int small = 16384;
    int64_t t0, end;
    size_t len = 0;

    cr_assert_not_null(a);
    itest_node_start(&n, "workers=1 stream_keepalive_s=1 "
                         "stream_buffer_bytes=64M");
    sse_open(a, &n, SUB "?queue=q&partition=p", NULL);
    cr_assert_eq(
        setsockopt(a->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    cr_assert_geq(sse_wait_events(a, 1, 5000), 1, "no open event");
    /* 8 messages of 100 KB */
    batch[len++] = '[';
    for (int i = 0; i < 8; i++) {
        if (i)
            batch[len++] = ',';
        batch[len++] = '"';
        memset(batch + len, 'a' + i, 102400);
        len += 102400;
        batch[len++] = '"';
    }
    batch[len++] = ']';
    batch[len] = '\0';
    itest_push_ok(&n, &r, "q", "p", batch, 8);
    itest_resp_free(&r);
    t0 = itest_now_ms();
    end = t0 + 60000;
    while (sse_count(a, "message") < 8 && !a->closed && itest_now_ms() < end) {
        itest_sleep_ms(200); /* the pace of a slow reader */
        sse_pump(a);
    }
    cr_assert_eq(sse_count(a, "message"), 8, "%zu messages, closed %d",
                 sse_count(a, "message"), a->closed);
    cr_assert_geq(itest_now_ms() - t0, 2000,
                  "read within the timeout: the test shows nothing");
    cr_assert_not(a->closed, "the stream was ended");
    sse_close(a);
    itest_node_stop(&n, 10000);
}
