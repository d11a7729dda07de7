/*
 * test_parked_count.c - the queue listing's "waiting" and the metric
 * mayfly_parked_pops count every parked pop (SPEC §2, §7), also when many
 * pops park on one partition of one worker.
 */
#include <stdlib.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define POP "/api/v1/ephemeral/pop"

static int64_t
waiting(const struct itest_node *n, const char *queue)
{
    struct json_object *q = itest_listing_find(n, queue);
    int64_t v = q ? itest_jint(q, "waiting") : 0;

    json_object_put(q);
    return v;
}

/* Drive m until each of its requests has been read and none answered. */
static void
run_until_parked(const struct itest_node *n, struct itest_multi *m, int ms)
{
    int64_t deadline = itest_now_ms() + ms;
    int k = itest_multi_count(m), parked = 0;
    int *fds = calloc((size_t)k, sizeof(*fds));

    cr_assert(fds);
    while (parked < k) {
        itest_multi_run(m, 20);
        for (int i = 0; i < k; i++) {
            cr_assert(!itest_multi_done(m, i), "pop %d answered: %s", i,
                      itest_multi_resp(m, i)->body);
            fds[i] = itest_multi_fd(m, i);
        }
        parked = itest_conns_consumed(n, fds, k, NULL);
        cr_assert(parked == k || itest_now_ms() < deadline,
                  "%d of %d pops read after %d ms", parked, k, ms);
    }
    free(fds);
}

Test(parked, listing_and_metric_count_every_parked_pop, .timeout = 60)
{
    enum { POPS = 12 };
    struct itest_node n;
    struct itest_multi *m = itest_multi_new();
    struct itest_resp r;
    int64_t deadline, w = -1;
    double parked = -1;

    itest_node_start(&n, "workers=2");
    for (int i = 0; i < POPS; i++)
        itest_multi_add(m, &n, "GET",
                        POP "?queue=count&wait=true&timeout=50000", NULL);
    run_until_parked(&n, m, 20000);
    deadline = itest_now_ms() + 10000;
    for (;;) {
        w = waiting(&n, "count");
        if (itest_metric(&n, "mayfly_parked_pops", &parked) != 0)
            parked = -1;
        if (w == POPS && parked == POPS)
            break;
        itest_multi_run(m, 20);
        cr_assert(itest_now_ms() < deadline,
                  "%d pops parked on one partition: the listing says "
                  "waiting %lld, mayfly_parked_pops says %g",
                  POPS, (long long)w, parked);
    }
    itest_push(&n, &r, "count", NULL, "[1,2,3,4,5,6,7,8,9,10,11,12]");
    cr_assert_eq(r.status, 201);
    itest_resp_free(&r);
    cr_assert_eq(itest_multi_run(m, 10000), 0);
    cr_assert_eq(waiting(&n, "count"), 0);
    itest_multi_free(m);
}
