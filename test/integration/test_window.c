/*
 * test_window.c - a long poll on a queue declared with windowBuffer (SPEC
 * §4): it holds what came until it has `count` messages, or `ms` after the
 * first, never later than its own timeout; what it holds is leased to it,
 * so a client that leaves gives it back at once (no attempt counted), and
 * with autoAck it is completed as it is answered.
 */
#include <sys/socket.h>

#include <unistd.h>

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

Test(window, answers_once_it_holds_count_messages, .timeout = 60)
{
    struct itest_node n;
    struct itest_multi *m = itest_multi_new();
    struct itest_resp r, *a;

    itest_node_start(&n, "workers=1");
    declare(&n, "wc", 60000, 3);
    itest_multi_add(m, &n, "GET",
                    POP "?queue=wc&batch=10&wait=true&timeout=30000", NULL);
    itest_multi_until_parked(&n, m, 20000);
    itest_push_ok(&n, &r, "wc", NULL, "[1]", 1);
    itest_resp_free(&r);
    until_leased(&n, m, "wc", 1);
    itest_push_ok(&n, &r, "wc", NULL, "[2]", 1);
    itest_resp_free(&r);
    until_leased(&n, m, "wc", 2);
    itest_push_ok(&n, &r, "wc", NULL, "[3]", 1);
    itest_resp_free(&r);
    cr_assert_eq(itest_multi_run(m, 20000), 0, "no answer at the count");
    a = itest_multi_resp(m, 0);
    cr_assert_eq(a->status, 200, "%ld %s", a->status, a->body);
    cr_assert_eq(itest_jlen(a->json, "messages"), 3, "%s", a->body);
    itest_multi_free(m);
}

Test(window, answers_ms_after_its_first_message, .timeout = 60)
{
    struct itest_node n;
    struct itest_multi *m = itest_multi_new();
    struct itest_resp r, *a;
    int64_t pushed, took;

    itest_node_start(&n, "workers=1");
    declare(&n, "wm", 400, 100);
    itest_multi_add(m, &n, "GET",
                    POP "?queue=wm&batch=10&wait=true&timeout=30000", NULL);
    itest_multi_until_parked(&n, m, 20000);
    pushed = itest_now_ms();
    itest_push_ok(&n, &r, "wm", NULL, "[1]", 1);
    itest_resp_free(&r);
    cr_assert_eq(itest_multi_run(m, 20000), 0, "no answer after the window");
    took = itest_now_ms() - pushed;
    a = itest_multi_resp(m, 0);
    cr_assert_eq(a->status, 200, "%ld %s", a->status, a->body);
    cr_assert_eq(itest_jlen(a->json, "messages"), 1, "%s", a->body);
    /* not at once, as a pop without a window; nor at its timeout */
    cr_assert(took >= 350 && took < 15000, "answered %lld ms after the push",
              (long long)took);
    itest_multi_free(m);
}

Test(window, auto_ack_completes_what_it_answers, .timeout = 60)
{
    struct itest_node n;
    struct itest_multi *m = itest_multi_new();
    struct itest_resp r, *a;

    itest_node_start(&n, "workers=1");
    declare(&n, "wa", 60000, 2);
    itest_multi_add(m, &n, "GET",
                    POP "?queue=wa&batch=5&autoAck=true&wait=true"
                        "&timeout=30000",
                    NULL);
    itest_multi_until_parked(&n, m, 20000);
    itest_push_ok(&n, &r, "wa", NULL, "[1,2]", 2);
    itest_resp_free(&r);
    cr_assert_eq(itest_multi_run(m, 20000), 0, "no answer at the count");
    a = itest_multi_resp(m, 0);
    cr_assert_eq(a->status, 200, "%ld %s", a->status, a->body);
    cr_assert_eq(itest_jlen(a->json, "messages"), 2, "%s", a->body);
    cr_assert_eq(itest_listing_int(&n, "wa", "leased", -1), 0,
                 "autoAck left what it answered leased");
    cr_assert_eq(itest_depth_pending(&n, "wa", NULL), 0);
    itest_multi_free(m);
}

Test(window, a_client_that_leaves_gives_back_what_it_held, .timeout = 60)
{
    struct itest_node n;
    struct itest_multi *m = itest_multi_new();
    struct itest_resp r;
    int64_t deadline;

    itest_node_start(&n, "workers=1 lease_s=60");
    declare(&n, "wl", 60000, 5);
    itest_multi_add(m, &n, "GET",
                    POP "?queue=wl&batch=5&autoAck=true&wait=true"
                        "&timeout=30000",
                    NULL);
    itest_multi_until_parked(&n, m, 20000);
    itest_push_ok(&n, &r, "wl", NULL, "[1]", 1);
    itest_resp_free(&r);
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
