/*
 * test_tenants.c - the tenants' counters (shm/tenants.h) on a real segment:
 * slots by name, a queue's tenant from its internal name, bytes that follow
 * every push, completion, reset and deletion of the tenant's queues alone
 * (and match what the queue lists), and pushes taken from a bucket
 * refilled at a rate.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

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

/* take - shm_tenants_take of n pushes of slot a at rate 5 at time now:
 * its result, and in *wait the ms it says to wait. */
static int
take(uint32_t a, uint32_t n, uint64_t now, uint64_t *wait)
{
    return shm_tenants_take(seg.tenants, a, n, 5, now, wait);
}

/* A bucket of 5 pushes refilled at 5 a second: one push is 200 ms. */
Test(shm_tenants, pushes_take_from_a_bucket_refilled_at_the_rate)
{
    uint32_t a = (uint32_t)shm_tenants_add(seg.tenants, "alpha");
    uint64_t wait = 99;

    cr_assert_eq(take(a, 3, 7000, &wait), 0);
    cr_assert_eq(wait, 0);
    cr_assert_eq(take(a, 2, 7000, &wait), 0, "five fit a full bucket");
    cr_assert_eq(take(a, 1, 7000, &wait), -EAGAIN);
    cr_assert_eq(wait, 200, "one comes back in 200 ms, not %llu",
                 (unsigned long long)wait);
    cr_assert_eq(take(a, 2, 7199, &wait), -EAGAIN);
    cr_assert_eq(wait, 201);
    cr_assert_eq(take(a, 1, 7200, &wait), 0, "the first one came back");
    cr_assert_eq(take(a, 5, 9000, &wait), 0, "full again after a second");
    cr_assert_eq(shm_tenants_take(seg.tenants, a, 100, 0, 9000, &wait), 0,
                 "no rate: no bound");
    cr_assert_eq(shm_tenants_take(seg.tenants, 0, 100, 5, 9000, &wait), 0,
                 "no tenant: no bound");
    /* pushes refused after all are given back */
    shm_tenants_untake(seg.tenants, a, 2, 5);
    cr_assert_eq(take(a, 2, 9000, &wait), 0, "two given back fit again");
    cr_assert_eq(take(a, 1, 9000, &wait), -EAGAIN);
    /* given back past a full bucket, it is no fuller */
    shm_tenants_untake(seg.tenants, a, 5, 5);
    shm_tenants_untake(seg.tenants, a, 50, 5);
    cr_assert_eq(take(a, 5, 9000, &wait), 0);
    cr_assert_eq(take(a, 1, 9000, &wait), -EAGAIN);
}

/* A batch larger than the bucket fits a full one and leaves it in debt:
 * it is not refused forever (SPEC §2: a 429's Retry-After promises a
 * later try can work), and the pushes after it wait until it is paid. */
Test(shm_tenants, a_batch_larger_than_the_rate_goes_into_debt)
{
    uint32_t a = (uint32_t)shm_tenants_add(seg.tenants, "alpha");
    uint64_t wait = 0;

    cr_assert_eq(take(a, 6, 7000, &wait), 0, "6 at 5 a second");
    cr_assert_eq(take(a, 1, 7000, &wait), -EAGAIN);
    cr_assert_eq(wait, 400,
                 "1.2 s of debt less the bucket's second, and "
                 "one push: %llu",
                 (unsigned long long)wait);
    cr_assert_eq(take(a, 6, 7000, &wait), -EAGAIN);
    cr_assert_eq(wait, 1200, "a batch over the rate waits for a full bucket");
    cr_assert_eq(take(a, 6, 8199, &wait), -EAGAIN);
    cr_assert_eq(wait, 1);
    cr_assert_eq(take(a, 6, 8200, &wait), 0, "the bucket is full again");
    cr_assert_eq(take(a, 10000, 9400, &wait), 0, "any batch, once full");
    cr_assert_eq(take(a, 1, 9400, &wait), -EAGAIN);
    cr_assert_eq(wait, 10000 * 200 + 200 - 1000, "2000 s of debt: %llu",
                 (unsigned long long)wait);
}

/* The bucket is one word in the shared table: workers (processes) that
 * take from it at once admit no more than it holds between them. */
Test(shm_tenants, workers_take_from_one_bucket)
{
    uint32_t a = (uint32_t)shm_tenants_add(seg.tenants, "alpha");
    _Atomic uint32_t *fit = mmap(NULL, sizeof(*fit), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t kid[4];

    cr_assert_neq(fit, MAP_FAILED);
    for (int k = 0; k < 4; k++) {
        kid[k] = fork();
        cr_assert_geq(kid[k], 0);
        if (kid[k] == 0) {
            uint64_t wait;
            for (int i = 0; i < 1000; i++)
                if (shm_tenants_take(seg.tenants, a, 1, 500, 7000, &wait) == 0)
                    atomic_fetch_add(fit, 1);
            _exit(0);
        }
    }
    for (int k = 0; k < 4; k++) {
        int st;
        cr_assert_eq(waitpid(kid[k], &st, 0), kid[k]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    cr_assert_eq(atomic_load(fit), 500, "%u pushes fit a bucket of 500",
                 atomic_load(fit));
    munmap(fit, sizeof(*fit));
}
