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
    return itest_listing_int(n, queue, "waiting", 0);
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
    itest_multi_until_parked(&n, m, 20000);
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
