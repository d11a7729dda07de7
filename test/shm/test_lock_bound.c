/*
 * test_lock_bound.c - the master's bounded lock waits (lock.h) and what its
 * upkeep does when a lock is held past the bound by another process alive
 * (a worker stopped or spinning): a wait ends at the bound, the rest of
 * the round only tries, a dead owner is repaired as an unbounded wait
 * repairs it; and maintenance, a delete and a reap leave the segment sound
 * and finish what the held lock kept back once it is free.
 *
 * The holder is a child process that takes the lock and waits to be
 * killed; its death frees the lock with EOWNERDEAD, as the watchdog's kill
 * of a stopped worker does.
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/dir.h"
#include "shm/due.h"
#include "shm/lock.h"
#include "shm/maintain.h"
#include "shm/queue_admin.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "test/shm/fixture.h"

#define BOUND_MS 10
#define IDLE_MS  300000 /* fixture_params' implicit_idle_s */

static struct shm_seg seg;
static unsigned char sinkbuf[1 << 16];
static uint64_t T0;

static void
setup(void)
{
    struct shm_params p = fixture_params(64 << 20, 2, 7);

    T0 = shm_now_ms() - 2;
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

static void
teardown(void)
{
    shm_lock_bound(0);
    shm_segment_destroy(&seg);
}

TestSuite(lock_bound, .init = setup, .fini = teardown);

/* hold - a child that takes m and waits to be killed; returns once it
 * holds m. */
static pid_t
hold(pthread_mutex_t *m)
{
    int fds[2];
    char c;

    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves none */
        shm_lock_bound(0);
        if (shm_lock(NULL, m, NULL, NULL) != 0 || write(fds[1], "x", 1) != 1)
            _exit(2);
        for (;;)
            pause();
    }
    close(fds[1]);
    cr_assert_eq(read(fds[0], &c, 1), 1, "the holder took the lock");
    close(fds[0]);
    return pid;
}

/* end - kill holder pid and reap it: its lock is free, its owner dead. */
static void
end(pid_t pid)
{
    kill(pid, SIGKILL);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
}

static uint64_t
ms_since(uint64_t t0_us)
{
    return (shm_now_us() - t0_us) / 1000;
}

static void
count_repair(struct shm_seg *s, void *arg)
{
    (void)s;
    (*(int *)arg)++;
}

Test(lock_bound, a_wait_ends_at_the_bound_and_the_rest_of_the_round_tries)
{
    pthread_mutex_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int repaired = 0;

    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(shm_lock_init(&m[0]), 0);
    cr_assert_eq(shm_lock_init(&m[1]), 0);
    pid_t h0 = hold(&m[0]), h1 = hold(&m[1]);
    uint64_t before = shm_lock_timeouts();

    shm_lock_bound(50);
    uint64_t t = shm_now_us();
    cr_assert_eq(shm_lock(NULL, &m[0], NULL, NULL), -ETIMEDOUT);
    cr_assert_geq(ms_since(t), 45, "waited %llu ms",
                  (unsigned long long)ms_since(t));
    cr_assert_lt(ms_since(t), 5000);
    /* The round's wait is spent: the next lock only tries. */
    t = shm_now_us();
    cr_assert_eq(shm_lock(NULL, &m[1], NULL, NULL), -ETIMEDOUT);
    cr_assert_lt(ms_since(t), 40, "tried for %llu ms",
                 (unsigned long long)ms_since(t));
    cr_assert_eq(shm_lock_timeouts(), before + 2);
    /* A dead owner is repaired by the try as by a wait. */
    end(h0);
    cr_assert_eq(shm_lock(&seg, &m[0], count_repair, &repaired), 0);
    cr_assert_eq(repaired, 1);
    shm_unlock(&m[0]);
    /* A new round waits again, and repairs a dead owner at the end of it. */
    shm_lock_bound(50);
    t = shm_now_us();
    cr_assert_eq(shm_lock(NULL, &m[1], NULL, NULL), -ETIMEDOUT);
    cr_assert_geq(ms_since(t), 45);
    shm_lock_bound(50);
    end(h1);
    cr_assert_eq(shm_lock(&seg, &m[1], count_repair, &repaired), 0);
    cr_assert_eq(repaired, 2);
    shm_unlock(&m[1]);
    munmap(m, 4096);
}

Test(lock_bound, without_a_bound_a_wait_lasts_as_long_as_the_holder)
{
    pthread_mutex_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(shm_lock_init(m), 0);
    pid_t h = hold(m);
    pid_t killer = fork();
    cr_assert_neq(killer, -1);
    if (killer == 0) {
        usleep(200000);
        kill(h, SIGKILL);
        _exit(0);
    }
    shm_lock_bound(50);
    shm_lock_bound(0);
    uint64_t t = shm_now_us();
    cr_assert_eq(shm_lock(&seg, m, NULL, NULL), 0);
    cr_assert_geq(ms_since(t), 150, "waited %llu ms",
                  (unsigned long long)ms_since(t));
    shm_unlock(m);
    waitpid(h, NULL, 0);
    waitpid(killer, NULL, 0);
    munmap(m, 4096);
}

/* ---- the segment ------------------------------------------------------- */

static void
push1(const char *q, const char *p, uint64_t now)
{
    cr_assert_eq(fixture_pushn(&seg, q, p, "m", 1, now, NULL), 0);
}

/* pop1 - one pop of (q, p) for group g: leased, or auto-acked. */
static int
pop1(const char *q, const char *p, const char *g, int auto_ack, uint64_t now)
{
    struct shm_pop_req r = {nm(q), nm(p), nm(g), 1, auto_ack, SHM_FROM_ALL, 0};
    struct shm_sink sink = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};

    return shm_pop(&seg, 0, &r, now, &sink);
}

static struct shm_ref
queue_ref(const char *q)
{
    struct shm_ref qr;

    cr_assert_eq(shm_dir_find_queue(&seg, 0, nm(q), 0, T0, &qr), 0);
    return qr;
}

static int
queue_exists(const char *q)
{
    struct shm_ref qr;

    return shm_dir_find_queue(&seg, 0, nm(q), 0, T0, &qr) == 0;
}

static struct shm_part *
part_of(const char *q, const char *p, uint32_t *idx)
{
    struct shm_ref pr;

    cr_assert_eq(shm_dir_find_part(&seg, 0, queue_ref(q), nm(p), 0, T0, &pr),
                 0);
    if (idx != NULL)
        *idx = pr.idx;
    return shm_dir_part(&seg, pr.idx);
}

/* due_lock - the due heap's lock: first in its header (due.c's layout). */
static pthread_mutex_t *
due_lock(void)
{
    struct shm_dir *d = shm_dir_of(&seg);

    return (pthread_mutex_t *)((unsigned char *)d + d->due_off);
}

/* maintain - one maintenance call at now, as the master's round makes it. */
static void
maintain(uint64_t now)
{
    shm_lock_bound(BOUND_MS);
    cr_assert_eq(shm_maintain(&seg, now), 0);
}

/* check - the segment sound, looked at without a bound. */
static void
check(void)
{
    shm_lock_bound(0);
    fixture_check(&seg);
}

Test(lock_bound, a_lease_behind_a_held_partition_lock_runs_out_once_it_is_free)
{
    uint32_t idx;

    push1("q", "p", T0);
    cr_assert_eq(pop1("q", "p", "", 0, T0), 1);
    struct shm_part *p = part_of("q", "p", &idx);
    uint64_t end_at = T0 + 30000; /* lease_s */
    uint64_t repairs = fixture_counter(&seg, SHM_C_LOCK_REPAIRS);
    pid_t h = hold(&p->lock);

    maintain(end_at + 1);
    cr_assert_eq(atomic_load(&p->leased), 1, "not expired behind the lock");
    cr_assert_eq(shm_due_when(&seg, shm_dir_of(&seg)->max_queues + idx),
                 end_at + 1 + 100, "looked at again 100 ms on");
    end(h);
    maintain(end_at + 101);
    cr_assert_eq(atomic_load(&p->leased), 0, "expired once free");
    cr_assert_eq(fixture_counter(&seg, SHM_C_LOCK_REPAIRS), repairs + 1);
    check();
}

Test(lock_bound, a_schedule_that_misses_the_due_lock_is_not_lost)
{
    char why[200];
    uint32_t keys[64], n;
    int found = 0;

    push1("q", "p", T0); /* its queue is due an idle time on */
    uint32_t q = queue_ref("q").idx;
    cr_assert_eq(shm_due_when(&seg, q), T0 + IDLE_MS);
    pid_t h = hold(due_lock());

    shm_lock_bound(BOUND_MS);
    shm_due_queue(&seg, q, T0 + 5); /* misses the lock */
    cr_assert_eq(shm_due_take(&seg, T0 + 10, keys, 64), 0);
    end(h);
    shm_lock_bound(BOUND_MS);
    n = shm_due_take(&seg, T0 + 10, keys, 64);
    for (uint32_t i = 0; i < n; i++)
        found |= keys[i] == q;
    cr_assert(found, "the queue came off the heap (%u keys)", n);
    shm_lock_bound(0);
    cr_assert_eq(shm_due_check(&seg, why, sizeof(why)), 0, "%s", why);
}

Test(lock_bound, an_idle_queue_behind_a_held_partition_lock_is_collected_later)
{
    push1("q", "p1", T0);
    push1("q", "p2", T0);
    cr_assert_eq(pop1("q", "p1", "", 1, T0), 1);
    cr_assert_eq(pop1("q", "p2", "", 1, T0), 1);
    uint32_t q = queue_ref("q").idx;
    pid_t h = hold(&part_of("q", "p2", NULL)->lock);

    maintain(T0 + IDLE_MS + 1);
    cr_assert(queue_exists("q"), "kept while a partition is held");
    cr_assert_eq(shm_due_when(&seg, q), T0 + IDLE_MS + 1 + 100);
    end(h);
    check();
    maintain(T0 + IDLE_MS + 101);
    cr_assert_not(queue_exists("q"), "collected once free");
    check();
}

Test(lock_bound, an_idle_group_behind_a_held_partition_lock_is_forgotten_later)
{
    push1("q", "p1", T0);
    push1("q", "p2", T0);
    cr_assert_eq(pop1("q", "p1", "g", 1, T0), 1);
    cr_assert_eq(pop1("q", "p2", "g", 1, T0), 1);
    push1("q", "p1", T0); /* the queue holds a message: not collected */
    struct shm_queue *q = shm_dir_queue(&seg, queue_ref("q").idx);
    cr_assert_eq(atomic_load(&q->ngroups), 1);
    pid_t h = hold(&part_of("q", "p2", NULL)->lock);

    maintain(T0 + IDLE_MS + 1);
    cr_assert_eq(atomic_load(&q->ngroups), 1,
                 "registered while a partition holds its state");
    end(h);
    check();
    maintain(T0 + IDLE_MS + 101);
    cr_assert_eq(atomic_load(&q->ngroups), 0, "forgotten once free");
    cr_assert(queue_exists("q"));
    check();
}

Test(lock_bound, a_delete_a_held_partition_lock_kept_back_is_finished_later)
{
    push1("q", "p1", T0);
    push1("q", "p2", T0);
    pid_t h = hold(&part_of("q", "p2", NULL)->lock);

    shm_lock_bound(BOUND_MS);
    cr_assert_eq(shm_queue_delete(&seg, SHM_STATS_MASTER, nm("q"), T0),
                 -ETIMEDOUT);
    end(h);
    check();
    cr_assert(queue_exists("q"), "the queue stays until all of it can go");
    shm_lock_bound(BOUND_MS);
    cr_assert_eq(shm_queue_delete(&seg, SHM_STATS_MASTER, nm("q"), T0), 1);
    cr_assert_not(queue_exists("q"));
    check();
}

Test(lock_bound, a_reap_waits_for_every_lock_to_be_free)
{
    push1("q", "p", T0);
    pid_t h = hold(&part_of("q", "p", NULL)->lock);

    shm_lock_bound(BOUND_MS);
    cr_assert_eq(shm_worker_reap(&seg, 1), -ETIMEDOUT);
    end(h);
    shm_lock_bound(BOUND_MS);
    cr_assert_eq(shm_worker_reap(&seg, 1), 0);
    check();
}
