/*
 * test_window.c - a long poll on a queue declared with windowBuffer (SPEC
 * §4): it holds what came until it has `count` messages, or `ms` after the
 * first, never later than its own timeout; what it holds is leased to it,
 * so a client that leaves gives it back at once (no attempt counted), and
 * with autoAck it is completed as it is answered.
 */
#include <sys/socket.h>

#include <stdio.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define POP "/api/v1/ephemeral/pop"

/* declare - queue with windowBuffer {ms, count}, applied by the node. */
static void
declare(const struct itest_node *n, const char *queue, int ms, int count)
{
    struct itest_resp r;
    int64_t deadline = itest_now_ms() + 10000;

    itest_post(n, &r, "/api/v1/ephemeral/configure",
               "{\"queue\":\"%s\",\"options\":{\"windowBuffer\":"
               "{\"ms\":%d,\"count\":%d}}}",
               queue, ms, count);
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    while (itest_listing_int(n, queue, "options.windowBuffer.count", 0) !=
           count)
        cr_assert(itest_now_ms() < deadline, "the declaration never showed");
}

/* until_leased - wait until queue has want messages leased; m's pops run
 * meanwhile, and none may be answered before. */
static void
until_leased(const struct itest_node *n, struct itest_multi *m,
             const char *queue, int64_t want)
{
    int64_t deadline = itest_now_ms() + 10000, got;

    while ((got = itest_listing_int(n, queue, "leased", -1)) != want) {
        itest_multi_run(m, 20);
        cr_assert(!itest_multi_done(m, 0),
                  "the windowed pop answered holding %lld of its window: "
                  "%s",
                  (long long)got, itest_multi_resp(m, 0)->body);
        cr_assert(itest_now_ms() < deadline, "%lld leased, not %lld",
                  (long long)got, (long long)want);
    }
}

/* parked_pop - start n with one worker (leases of 60 s), declare queue
 * with windowBuffer {ms, count}, and park a pop of it (batch, autoAck) in
 * a new set, returned. */
static struct itest_multi *
parked_pop(struct itest_node *n, const char *queue, int ms, int count,
           int batch, int auto_ack)
{
    struct itest_multi *m = itest_multi_new();
    char path[256];

    itest_node_start(n, "workers=1 lease_s=60");
    declare(n, queue, ms, count);
    snprintf(path, sizeof(path),
             POP "?queue=%s&batch=%d&autoAck=%s&wait=true&timeout=30000", queue,
             batch, auto_ack ? "true" : "false");
    itest_multi_add(m, n, "GET", path, NULL);
    itest_multi_until_parked(n, m, 20000);
    return m;
}

/* push - one push of payloads (count of them) to queue. */
static void
push(const struct itest_node *n, const char *queue, const char *payloads,
     int count)
{
    struct itest_resp r;

    itest_push_ok(n, &r, queue, NULL, payloads, count);
    itest_resp_free(&r);
}

/* answered - the parked pop's answer: 200 with want messages. */
static void
answered(struct itest_multi *m, int want)
{
    struct itest_resp *a;

    cr_assert_eq(itest_multi_run(m, 20000), 0,
                 "the windowed pop never "
                 "answered");
    a = itest_multi_resp(m, 0);
    cr_assert_eq(a->status, 200, "%ld %s", a->status, a->body);
    cr_assert_eq(itest_jlen(a->json, "messages"), want, "%s", a->body);
}

Test(window, answers_once_it_holds_count_messages, .timeout = 60)
{
    struct itest_node n;
    struct itest_multi *m = parked_pop(&n, "wc", 60000, 3, 10, 0);

    push(&n, "wc", "[1]", 1);
    until_leased(&n, m, "wc", 1);
    push(&n, "wc", "[2]", 1);
    until_leased(&n, m, "wc", 2);
    push(&n, "wc", "[3]", 1);
    answered(m, 3);
    itest_multi_free(m);
}

Test(window, answers_ms_after_its_first_message, .timeout = 60)
{
    struct itest_node n;
    struct itest_multi *m = parked_pop(&n, "wm", 400, 100, 10, 0);
    int64_t pushed = itest_now_ms(), took;

    push(&n, "wm", "[1]", 1);
    answered(m, 1);
    took = itest_now_ms() - pushed;
    /* not at once, as a pop without a window; nor at its timeout */
    cr_assert(took >= 350 && took < 15000, "answered %lld ms after the push",
              (long long)took);
    itest_multi_free(m);
}

Test(window, auto_ack_completes_what_it_answers, .timeout = 60)
{
    struct itest_node n;
    struct itest_multi *m = parked_pop(&n, "wa", 60000, 2, 5, 1);

    push(&n, "wa", "[1,2]", 2);
    answered(m, 2);
    cr_assert_eq(itest_listing_int(&n, "wa", "leased", -1), 0,
                 "autoAck left what it answered leased");
    cr_assert_eq(itest_depth_pending(&n, "wa", NULL), 0);
    itest_multi_free(m);
}

Test(window, a_client_that_leaves_gives_back_what_it_held, .timeout = 60)
{
    struct itest_node n;
    struct itest_multi *m = parked_pop(&n, "wl", 60000, 5, 5, 1);
    struct itest_resp r;
    int64_t deadline;

    push(&n, "wl", "[1]", 1);
    until_leased(&n, m, "wl", 1);
    shutdown(itest_multi_fd(m, 0), SHUT_RDWR);
    /* back at once (the lease is 60 s), its attempt not counted */
    deadline = itest_now_ms() + 10000;
    for (;;) {
        itest_get(&n, &r, POP "?queue=wl");
        cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
        if (itest_jlen(r.json, "messages") == 1)
            break;
        itest_resp_free(&r);
        cr_assert(itest_now_ms() < deadline,
                  "a message stayed held for a client that left");
        itest_sleep_ms(20);
    }
    cr_assert_eq(itest_jint(r.json, "messages.0.attempts"), 1, "%s", r.body);
    itest_resp_free(&r);
    itest_multi_free(m);
}
