/*
 * test_wake.c - wake queues: posts from several processes all arrive, the
 * eventfd is written once per drain cycle, overflow is reported once, a
 * queue says whether it holds something until its drain.
 */
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/broker.h"
#include "shm/segment.h"
#include "shm/slot.h"
#include "shm/wake.h"

#define POSTERS   4
#define PER_CHILD 200 /* POSTERS * PER_CHILD < SHM_WAKE_SLOTS: no overflow */

static void
wake_setup(struct shm_seg *seg)
{
    struct shm_params p = {.max_bytes = 1 << 20, .workers = 2};

    cr_assert_eq(shm_segment_create(&p, seg), 0);
}

/* readable - is fd readable within ms? */
static int
readable(int fd, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};

    return poll(&pfd, 1, ms) == 1;
}

/* take - collect drained handles into seen[] (handle h -> seen[h]++). */
static int
take(struct shm_seg *seg, int w, int *seen, int nseen)
{
    uint64_t out[64];
    int total = 0, n;

    do {
        n = shm_wake_drain(seg, w, out, 64);
        cr_assert_geq(n, 0);
        for (int i = 0; i < n; i++) {
            cr_assert(out[i] > 0 && out[i] < (uint64_t)nseen);
            seen[out[i]]++;
        }
        total += n;
    } while (n == 64);
    return total;
}

static void
spawn_posters(struct shm_seg *seg, int kick)
{
    for (int c = 0; c < POSTERS; c++) {
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid != 0)
            continue;
        for (int i = 0; i < PER_CHILD; i++)
            if (shm_wake_post(seg, 0, (uint64_t)(c * PER_CHILD + i + 1)) &&
                kick)
                shm_wake_kick(seg, 0);
        _exit(0);
    }
}

static void
reap_posters(void)
{
    for (int c = 0; c < POSTERS; c++) {
        int st;
        cr_assert_neq(wait(&st), -1);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
}

Test(shm_wake, posts_from_many_processes_all_arrive)
{
    struct shm_seg seg;
    int seen[POSTERS * PER_CHILD + 1] = {0};

    wake_setup(&seg);
    spawn_posters(&seg, 0);
    reap_posters();
    cr_assert_eq(take(&seg, 0, seen, POSTERS * PER_CHILD + 1),
                 POSTERS * PER_CHILD);
    for (int h = 1; h <= POSTERS * PER_CHILD; h++)
        cr_assert_eq(seen[h], 1, "handle %d seen %d times", h, seen[h]);
    cr_assert_eq(take(&seg, 0, seen, POSTERS * PER_CHILD + 1), 0);
}

Test(shm_wake, concurrent_posts_wake_the_drainer, .timeout = 60)
{
    struct shm_seg seg;
    int seen[POSTERS * PER_CHILD + 1] = {0};
    int got = 0;
    uint64_t v;

    wake_setup(&seg);
    spawn_posters(&seg, 1);
    while (got < POSTERS * PER_CHILD) {
        cr_assert(readable(seg.wake_fd[0], 10000), "no wake-up after %d", got);
        cr_assert_eq(read(seg.wake_fd[0], &v, sizeof(v)), sizeof(v));
        got += take(&seg, 0, seen, POSTERS * PER_CHILD + 1);
    }
    reap_posters();
    for (int h = 1; h <= POSTERS * PER_CHILD; h++)
        cr_assert_eq(seen[h], 1, "handle %d seen %d times", h, seen[h]);
}

Test(shm_wake, eventfd_written_once_per_drain)
{
    struct shm_seg seg;
    uint64_t out[4], v;

    wake_setup(&seg);
    cr_assert_eq(shm_wake_post(&seg, 0, 7), 1, "a fresh queue is armed");
    cr_assert_eq(shm_wake_post(&seg, 0, 8), 0);
    cr_assert_not(readable(seg.wake_fd[0], 0));
    shm_wake_kick(&seg, 0);
    cr_assert(readable(seg.wake_fd[0], 1000));
    cr_assert_eq(read(seg.wake_fd[0], &v, sizeof(v)), sizeof(v));
    cr_assert_eq(v, 1);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 4), 2);
    cr_assert((out[0] == 7 && out[1] == 8) || (out[0] == 8 && out[1] == 7));
    cr_assert_eq(shm_wake_post(&seg, 0, 9), 1, "a drain re-arms");
    cr_assert_eq(shm_wake_post(&seg, 1, 9), 1, "queues are per worker");
}

Test(shm_wake, a_disarmed_worker_gets_posts_without_a_write)
{
    struct shm_seg seg;
    uint64_t out[4];

    wake_setup(&seg);
    shm_wake_disarm(&seg, 0);
    cr_assert_eq(shm_wake_post(&seg, 0, 7), 0, "awake: no eventfd write");
    cr_assert_eq(shm_wake_post(&seg, 1, 7), 1, "only worker 0 is awake");
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 4), 1, "the post is kept");
    cr_assert_eq(out[0], 7);
    cr_assert_eq(shm_wake_post(&seg, 0, 8), 1, "the drain armed it again");
}

Test(shm_wake, drain_stops_at_n_and_keeps_the_rest)
{
    struct shm_seg seg;
    uint64_t out[3];
    int seen[11] = {0};

    wake_setup(&seg);
    for (uint64_t h = 1; h <= 10; h++)
        shm_wake_post(&seg, 0, h);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 3), 3);
    for (int i = 0; i < 3; i++)
        seen[out[i]]++;
    cr_assert_eq(take(&seg, 0, seen, 11), 7);
    for (int h = 1; h <= 10; h++)
        cr_assert_eq(seen[h], 1);
}

Test(shm_wake, overflow_is_reported_once)
{
    struct shm_seg seg;
    uint64_t out[8];

    wake_setup(&seg);
    for (uint64_t h = 1; h <= SHM_WAKE_SLOTS; h++)
        shm_wake_post(&seg, 0, h);
    cr_assert_eq(shm_wake_post(&seg, 0, 5000), 0);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), -EOVERFLOW);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), 0, "emptied, cleared");
    cr_assert_eq(shm_wake_post(&seg, 0, 42), 1);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), 1);
    cr_assert_eq(out[0], 42);
    shm_wake_post(&seg, 0, 0);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), -EOVERFLOW,
                 "handle 0 cannot be stored");
}

Test(shm_wake, reset_empties_and_rearms)
{
    struct shm_seg seg;
    uint64_t out[8];

    wake_setup(&seg);
    shm_wake_post(&seg, 1, 3);
    shm_wake_post(&seg, 1, 4);
    shm_wake_reset(&seg, 1);
    cr_assert_eq(shm_wake_post(&seg, 1, 5), 1);
    cr_assert_eq(shm_wake_drain(&seg, 1, out, 8), 1);
    cr_assert_eq(out[0], 5);
}

/* A worker's own push asks whether it woke something here: pending from
 * a post (or an overflow) until the drain, and only for that worker. */
Test(shm_wake, pending_from_post_until_drain)
{
    struct shm_seg seg;
    uint64_t out[8];

    wake_setup(&seg);
    cr_assert_eq(shm_wake_pending(&seg, 0), 0);
    shm_wake_post(&seg, 0, 7);
    cr_assert_eq(shm_wake_pending(&seg, 0), 1);
    cr_assert_eq(shm_wake_pending(&seg, 1), 0, "another worker's queue");
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), 1);
    cr_assert_eq(shm_wake_pending(&seg, 0), 0, "drained");
    shm_wake_post(&seg, 0, 0); /* stored as an overflow */
    cr_assert_eq(shm_wake_pending(&seg, 0), 1, "an overflow wakes all");
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), -EOVERFLOW);
    cr_assert_eq(shm_wake_pending(&seg, 0), 0);
}
