/*
 * test_tenants.c - the tenants' counters (shm/tenants.h) on a real segment:
 * slots by name, a queue's tenant from its internal name, bytes that follow
 * every push, completion, reset and deletion of the tenant's queues alone
 * (and match what the queue lists), and pushes counted a second against a
 * rate.
 */
#include <errno.h>

#include "shm/dir.h"
#include "shm/queue_admin.h"
#include "shm/tenants.h"
#include "test/shm/fixture.h"

#define T0 1000000

static struct shm_seg seg;
static unsigned char sinkbuf[1 << 16];

static void
setup(void)
{
    struct shm_params p = fixture_params(4 << 20, 4, 77);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    seg.tenants = shm_tenants_create();
    cr_assert_not_null(seg.tenants);
}

TestSuite(shm_tenants, .init = setup, .timeout = 30);

/* held - what the listing says queue q holds, its records included. */
static uint64_t
held(const char *q)
{
    struct shm_queue_info qi;

    cr_assert_eq(shm_queue_depth(&seg, nm(q), NULL, T0, &qi, NULL, NULL, NULL),
                 0);
    return qi.bytes;
}

Test(shm_tenants, slots_are_found_by_name_and_never_move)
{
    int a = shm_tenants_add(seg.tenants, "alpha");
    int b = shm_tenants_add(seg.tenants, "beta");

    cr_assert_eq(a, 1, "slot 0 is no tenant's");
    cr_assert_eq(b, 2);
    cr_assert_eq(shm_tenants_add(seg.tenants, "alpha"), a);
    cr_assert_eq(shm_tenants_find(seg.tenants, "beta", 4), (uint32_t)b);
    cr_assert_eq(shm_tenants_find(seg.tenants, "bet", 3), 0);
    cr_assert_eq(shm_tenants_find(seg.tenants, "gamma", 5), 0);
    cr_assert_eq(shm_tenants_of_queue(seg.tenants, "alpha\x1fjobs", 10),
                 (uint32_t)a);
    cr_assert_eq(shm_tenants_of_queue(seg.tenants, "jobs", 4), 0);
    cr_assert_eq(shm_tenants_of_queue(seg.tenants, "gamma\x1fjobs", 10), 0);
    cr_assert_eq(shm_tenants_of_queue(NULL, "alpha\x1fjobs", 10), 0);
}

Test(shm_tenants, bytes_follow_the_tenants_queues_alone)
{
    uint32_t a = (uint32_t)shm_tenants_add(seg.tenants, "alpha");
    uint32_t b = (uint32_t)shm_tenants_add(seg.tenants, "beta");
    struct shm_sink sink = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    struct shm_pop_req r = {
        nm("alpha\x1fjobs"), nm("Default"), nm(""), 2, 1, SHM_FROM_ALL, 0};

    cr_assert_eq(
        fixture_pushn(&seg, "alpha\x1fjobs", "Default", "a", 5, T0, NULL), 0);
    cr_assert_eq(fixture_pushn(&seg, "alpha\x1fmore", "p1", "m", 3, T0, NULL),
                 0);
    cr_assert_eq(fixture_pushn(&seg, "jobs", "Default", "x", 7, T0, NULL), 0);
    uint64_t jobs =
                 held("alpha\x1fjobs") - SHM_QUEUE_OVERHEAD - SHM_PART_OVERHEAD,
             more =
                 held("alpha\x1fmore") - SHM_QUEUE_OVERHEAD - SHM_PART_OVERHEAD;
    cr_assert_gt(jobs, 0);
    cr_assert_eq(shm_tenants_bytes(seg.tenants, a), jobs + more);
    cr_assert_eq(shm_tenants_bytes(seg.tenants, b), 0);

    /* two taken with autoAck: their bytes go */
    cr_assert_eq(shm_pop(&seg, 0, &r, T0, &sink), 2);
    cr_assert_eq(shm_tenants_bytes(seg.tenants, a),
                 held("alpha\x1fjobs") - SHM_QUEUE_OVERHEAD -
                     SHM_PART_OVERHEAD + more);
    cr_assert_gt(shm_queue_reset(&seg, 0, nm("alpha\x1fjobs"), T0), 0);
    cr_assert_eq(shm_tenants_bytes(seg.tenants, a), more);
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("alpha\x1fmore"), T0), 1);
    cr_assert_eq(shm_tenants_bytes(seg.tenants, a), 0);
    struct shm_check_report rep;
    cr_assert_eq(shm_check(&seg, 0, &rep), 0, "%s", rep.first);
}

Test(shm_tenants, pushes_count_against_a_rate_each_second)
{
    uint32_t a = (uint32_t)shm_tenants_add(seg.tenants, "alpha");

    cr_assert_eq(shm_tenants_take(seg.tenants, a, 6, 5, 7000), -EAGAIN,
                 "a batch over the rate never fits");
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 3, 5, 7000), 0);
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 2, 5, 7999), 0);
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 1, 5, 7999), -EAGAIN);
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 5, 5, 8000), 0,
                 "a new second starts over");
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 100, 0, 8000), 0,
                 "no rate: no bound");
    cr_assert_eq(shm_tenants_take(seg.tenants, 0, 100, 5, 8000), 0,
                 "no tenant: no bound");
    /* pushes refused after all are given back within their second only */
    shm_tenants_untake(seg.tenants, a, 2, 5, 8500);
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 2, 5, 8600), 0,
                 "two given back fit again");
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 1, 5, 8600), -EAGAIN);
    shm_tenants_untake(seg.tenants, a, 5, 5, 9000);
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 5, 5, 9000), 0,
                 "a new second starts over, whatever came back late");
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 1, 5, 9000), -EAGAIN);
}
