/*
 * test_due.c - the due heap (due.h) and the maintenance it drives: keys
 * come off in time order and only when due, times only move earlier, the
 * master visits what is due and nothing else (however many queues exist),
 * and a holder killed inside the heap's lock leaves a heap that still works.
 */
#include <sys/wait.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/broker.h"
#include "shm/dir.h"
#include "shm/due.h"
#include "shm/lock.h"
#include "shm/maintain.h"
#include "shm/queue_admin.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "test/shm/fixture.h"

/* The tests' clock.  shm_queue_declare creates its queue at the real clock
 * (shm_now_ms), so the tests' "now" starts just behind it: a queue declared
 * during a test is then never due before one the test created itself at T0
 * with the same idle time, however long the machine has been up. */
static uint64_t T0;

static struct shm_seg seg;
static unsigned char sinkbuf[1 << 16];

static void
setup(void)
{
    struct shm_params p = fixture_params(64 << 20, 2, 5);

    T0 = shm_now_ms() - 2;
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

static void
teardown(void)
{
    shm_segment_destroy(&seg);
}

TestSuite(shm_due, .init = setup, .fini = teardown);

/* Push one message to queue q at now. */
static void
push1(const char *q, uint64_t now)
{
    struct shm_msg_in m = {"\"x\"", 3};
    uint64_t s;

    cr_assert_eq(shm_push(&seg, 0, nm(q), nm("Default"), &m, 1, now, &s), 0);
}

/* Pop up to batch of q for group g, leased (not autoAck). */
static int
pop(const char *q, const char *g, uint32_t batch, uint64_t now)
{
    struct shm_pop_req r = {nm(q), nm("Default"), nm(g), batch,
                            0,     SHM_FROM_ALL,  0};
    struct shm_sink sink = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};

    return shm_pop(&seg, 0, &r, now, &sink);
}

static uint64_t
counter(enum shm_counter c)
{
    return fixture_counter(&seg, c);
}

/* Records visited by one maintenance call at now. */
static uint64_t
visits(uint64_t now)
{
    uint64_t before = counter(SHM_C_MAINTAIN_VISITS);

    cr_assert_eq(shm_maintain(&seg, now), 0);
    return counter(SHM_C_MAINTAIN_VISITS) - before;
}

static int
depth(const char *q)
{
    struct shm_queue_info qi;
    int rc = shm_queue_depth(&seg, nm(q), NULL, T0, &qi, NULL, NULL, NULL);

    return rc == 0 ? (int)qi.depth : rc;
}

Test(shm_due, keys_come_off_in_time_order_and_only_when_due)
{
    uint32_t keys[64];

    shm_due_queue(&seg, 3, 500);
    shm_due_queue(&seg, 1, 100);
    shm_due_part(&seg, 2, 300);
    shm_due_queue(&seg, 7, 200);
    cr_assert_eq(shm_due_take(&seg, 99, keys, 64), 0);
    cr_assert_eq(shm_due_take(&seg, 300, keys, 64), 3);
    uint32_t idx;
    cr_assert_eq(shm_due_is_part(&seg, keys[0], &idx), 0);
    cr_assert_eq(idx, 1);
    cr_assert_eq(shm_due_is_part(&seg, keys[1], &idx), 0);
    cr_assert_eq(idx, 7);
    cr_assert_eq(shm_due_is_part(&seg, keys[2], &idx), 1);
    cr_assert_eq(idx, 2);
    cr_assert_eq(shm_due_take(&seg, 1000, keys, 64), 1);
    cr_assert_eq(shm_due_take(&seg, 1000, keys, 64), 0);
    /* four went on, four came off */
    cr_assert_eq(shm_due_take(&seg, UINT64_MAX - 1, keys, 64), 0);
}

Test(shm_due, a_time_only_moves_earlier)
{
    uint32_t keys[4];

    shm_due_queue(&seg, 5, 1000);
    shm_due_queue(&seg, 5, 2000); /* later: ignored */
    cr_assert_eq(shm_due_take(&seg, 999, keys, 4), 0);
    shm_due_queue(&seg, 5, 10); /* earlier: moves */
    cr_assert_eq(shm_due_take(&seg, 10, keys, 4), 1);
    cr_assert_eq(keys[0], 5);
    /* The key was on the heap once (no entry left at 2000), and taken
     * keys are off the heap until scheduled again. */
    cr_assert_eq(shm_due_take(&seg, UINT64_MAX - 1, keys, 4), 0);
    shm_due_queue(&seg, 5, 3000);
    cr_assert_eq(shm_due_take(&seg, 3000, keys, 4), 1);
}

Test(shm_due, many_random_times_come_off_sorted)
{
    enum { N = 5000 };
    static uint64_t at[N];
    static uint32_t keys[N];
    unsigned seed = 12345;

    for (uint32_t k = 0; k < N; k++) {
        at[k] = 1 + (uint64_t)(rand_r(&seed) % 100000);
        shm_due_queue(&seg, k, at[k] + 50000);
        shm_due_queue(&seg, k, at[k]); /* decrease-key in the middle */
    }
    uint32_t n = shm_due_take(&seg, UINT64_MAX - 1, keys, N);
    cr_assert_eq(n, N);
    for (uint32_t i = 1; i < N; i++)
        cr_assert_leq(at[keys[i - 1]], at[keys[i]], "out of order at %u", i);
}

/* The point of the heap: thousands of quiet queues cost the master nothing
 * until one of them is due. */
Test(shm_due, maintenance_visits_only_what_is_due)
{
    char name[32];
    struct shm_qopts o = shm_params_of(&seg)->defaults;

    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof(name), "idle/%d", i);
        push1(name, T0);
    }
    o.ttl_s = 2;
    cr_assert_eq(shm_queue_declare(&seg, 0, nm("ttl"), &o), 0);
    push1("ttl", T0 + 10);
    push1("leased", T0);
    cr_assert_eq(pop("leased", "g", 1, T0), 1); /* lease: 30 s */

    for (uint64_t t = T0; t < T0 + 2010; t += 100)
        cr_assert_eq(visits(t), 0, "visited something at +%llu ms",
                     (unsigned long long)(t - T0));
    cr_assert_eq(visits(T0 + 2010), 1); /* the ttl partition */
    cr_assert_eq(depth("ttl"), 0);
    cr_assert_eq(counter(SHM_C_DROP_TTL), 1);
    cr_assert_eq(visits(T0 + 29999), 0);
    cr_assert_eq(visits(T0 + 30000), 1); /* the lease */
    cr_assert_eq(counter(SHM_C_REDELIVERY_LEASE_EXPIRED), 1);
    /* Idle time: every queue once (3000 idle ones, leased, and ttl, which
     * was declared with the real clock and is not due yet). */
    cr_assert_eq(visits(T0 + 300000), 3001);
    cr_assert_eq(visits(T0 + 300001), 0);
}

/* Pop one message of q with autoAck at now. */
static int
take(const char *q, uint64_t now)
{
    struct shm_pop_req r = {nm(q), nm("Default"), nm(""), 1,
                            1,     SHM_FROM_ALL,  0};
    struct shm_sink sink = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};

    return shm_pop(&seg, 0, &r, now, &sink);
}

Test(shm_due, an_active_queue_is_looked_at_again_and_collected_when_idle)
{
    push1("inbox", T0);
    cr_assert_eq(take("inbox", T0 + 200000), 1);
    /* Due at T0 + 300 s by creation; active since, so kept and due again
     * at T0 + 500 s, when it is collected. */
    cr_assert_eq(visits(T0 + 300000), 1);
    cr_assert_eq(depth("inbox"), 0);
    cr_assert_eq(visits(T0 + 499999), 0);
    cr_assert_eq(visits(T0 + 500000), 1);
    cr_assert_eq(depth("inbox"), -ENOENT);
}

Test(shm_due, an_idle_queue_holding_messages_is_kept_and_looked_at_again)
{
    push1("held", T0);
    cr_assert_eq(visits(T0 + 300000), 1);
    cr_assert_eq(depth("held"), 1);
    cr_assert_eq(visits(T0 + 599999), 0);
    cr_assert_eq(take("held", T0 + 500000), 1);
    cr_assert_eq(visits(T0 + 600000), 1); /* due then; active at 500 s */
    cr_assert_eq(depth("held"), 0);
    cr_assert_eq(visits(T0 + 800000), 1);
    cr_assert_eq(depth("held"), -ENOENT);
}

Test(shm_due, a_shorter_idle_time_on_reload_takes_effect)
{
    struct shm_params p = *shm_params_of(&seg);

    push1("inbox", T0);
    cr_assert_eq(take("inbox", T0), 1);
    p.implicit_idle_s = 10;
    shm_segment_set_defaults(&seg, &p);
    cr_assert_eq(shm_maintain(&seg, T0 + 10000), 0);
    cr_assert_eq(depth("inbox"), -ENOENT);
}

/* A worker killed while it holds the heap's lock (it dies at a random point
 * of a burst of reschedules) leaves a heap the next locker repairs: keys
 * still come off sorted, each once, and new schedules still work. */
Test(shm_due, a_holder_killed_mid_sift_leaves_a_working_heap)
{
    char name[32];

    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof(name), "q/%d", i);
        push1(name, T0);
    }
    for (int round = 0; round < 30; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* Child: no cr_* calls.  Earlier and earlier times: every call
             * takes the lock and sifts. */
            for (uint64_t t = UINT64_MAX / 2;; t--)
                shm_due_queue(&seg, (uint32_t)(t % 500), t);
        }
        cr_assert_gt(pid, 0);
        struct timespec ts = {0, 200000 + (round * 37 % 50) * 20000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);

        static uint32_t keys[1024];
        static int seen[2][500];
        memset(seen, 0, sizeof(seen));
        shm_due_queue(&seg, 0, 1); /* takes the lock: repairs if needed */
        uint32_t n = shm_due_take(&seg, UINT64_MAX - 1, keys, 1024), idx;
        cr_assert_leq(n, 1000u);
        for (uint32_t i = 0; i < n; i++) {
            int part = shm_due_is_part(&seg, keys[i], &idx);
            cr_assert_lt(idx, 500u);
            cr_assert_eq(seen[part][idx]++, 0, "key %u twice", keys[i]);
        }
        cr_assert_eq(shm_due_take(&seg, UINT64_MAX - 1, keys, 1024), 0);
        for (uint32_t k = 0; k < 500; k++)
            shm_due_queue(&seg, k, 1000 - k);
        cr_assert_eq(shm_due_take(&seg, UINT64_MAX - 1, keys, 1024), 500);
        for (uint32_t i = 0; i < 500; i++)
            cr_assert_eq(keys[i], 499 - i);
    }
}

/* The partition "Default" of queue q. */
static struct shm_part *
part_of(const char *q, struct shm_ref *qr)
{
    struct shm_ref pr;

    cr_assert_eq(shm_dir_find_queue(&seg, 0, nm(q), 0, T0, qr), 0);
    cr_assert_eq(shm_dir_find_part(&seg, 0, *qr, nm("Default"), 0, T0, &pr), 0);
    return shm_dir_part(&seg, pr.idx);
}

/* A worker killed after it leased a message but before it told the heap:
 * the reap puts every record back on the heap once, so the lease still
 * expires on time. */
Test(shm_due, a_lease_whose_popper_died_before_scheduling_still_expires)
{
    push1("q", T0);
    push1("q", T0);
    cr_assert_eq(pop("q", "g", 1, T0), 1); /* due at +30 s */
    struct shm_ack a = {.seq = ((const struct shm_popped *)sinkbuf)->seq,
                        .status = SHM_ACK_COMPLETED};
    shm_ack(&seg, 0, nm("q"), nm("Default"), nm("g"), &a, 1, T0);
    cr_assert_eq(a.outcome, SHM_OUT_ACKED);
    cr_assert_eq(visits(T0 + 30000), 1); /* nothing leased: off the heap */
    struct shm_ref qr;
    struct shm_part *p = part_of("q", &qr);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        /* Worker 1 (no cr_* calls): the take of pop_part, then death. */
        struct shm_sink sink = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};
        if (shm_ring_lock(&seg, 1, p) != 0)
            _exit(1);
        struct shm_ring_ctx c = {
            &seg, 1, p, shm_dir_queue(&seg, qr.idx), T0 + 30000, NULL};
        shm_ring_take_locked(&c, p->groups, 1, 0, &sink);
        raise(SIGKILL);
    }
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    shm_worker_reap(&seg, 1);
    fixture_check(&seg);
    cr_assert_eq(atomic_load(&p->due), T0 + 60000);
    uint64_t before = counter(SHM_C_REDELIVERY_LEASE_EXPIRED);
    cr_assert_eq(shm_maintain(&seg, T0 + 60000), 0);
    cr_assert_eq(counter(SHM_C_REDELIVERY_LEASE_EXPIRED), before + 1);
}

/* An extend may shorten a lease (its seconds count from now). */
Test(shm_due, a_shortening_extend_expires_at_its_new_deadline)
{
    push1("q", T0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    uint64_t seq = ((const struct shm_popped *)sinkbuf)->seq;
    struct shm_ack e = {.seq = seq, .seconds = 3600};
    shm_extend(&seg, 0, nm("q"), nm("Default"), nm("g"), &e, 1, T0);
    cr_assert_eq(e.outcome, SHM_OUT_EXTENDED);
    cr_assert_eq(visits(T0 + 30000), 1); /* next due at +3600 s */
    e = (struct shm_ack){.seq = seq, .seconds = 1};
    shm_extend(&seg, 0, nm("q"), nm("Default"), nm("g"), &e, 1, T0 + 30000);
    cr_assert_eq(e.outcome, SHM_OUT_EXTENDED);
    uint64_t before = counter(SHM_C_REDELIVERY_LEASE_EXPIRED);
    cr_assert_eq(visits(T0 + 31000), 1);
    cr_assert_eq(counter(SHM_C_REDELIVERY_LEASE_EXPIRED), before + 1);
}

/* A queue table past 7/8 full: empty queues read in queue mode and unpolled
 * for a second go before their idle time, in table order, down to 3/4; a
 * queue holding a message stays, and so does one touched within the last
 * second. */
Test(shm_due, a_full_queue_table_collects_empty_queues_idle_a_second)
{
    struct shm_params p = *shm_params_of(&seg);
    struct shm_dir *d;
    char name[32];

    shm_segment_destroy(&seg);
    p.max_bytes = 1 << 20; /* 2048 queues: relief past 1792, down to 1536 */
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    d = shm_dir_of(&seg);
    cr_assert_eq(d->max_queues, 2048);
    push1("held", T0);
    for (int i = 0; i < 1800; i++) {
        snprintf(name, sizeof(name), "inbox/%d", i);
        push1(name, T0 + (uint64_t)i);
        cr_assert_eq(take(name, T0 + (uint64_t)i), 1);
    }
    cr_assert_eq(d->nqueues, 1801);
    /* At +1.2 s only inbox/0..200 have been idle a second. */
    cr_assert_eq(shm_maintain(&seg, T0 + 1200), 0);
    cr_assert_eq(d->nqueues, 1600);
    cr_assert_eq(depth("inbox/0"), -ENOENT);
    cr_assert_eq(depth("inbox/200"), -ENOENT);
    cr_assert_eq(depth("inbox/201"), 0);
    cr_assert_eq(depth("held"), 1);
    /* Below 7/8 now: nothing more goes before its idle time. */
    cr_assert_eq(shm_maintain(&seg, T0 + 5000), 0);
    cr_assert_eq(d->nqueues, 1600);
    /* Past 7/8 again: down to 3/4. */
    for (int i = 1800; i < 2000; i++) {
        snprintf(name, sizeof(name), "inbox/%d", i);
        push1(name, T0 + 5000);
        cr_assert_eq(take(name, T0 + 5000), 1);
    }
    cr_assert_eq(d->nqueues, 1800);
    cr_assert_eq(shm_maintain(&seg, T0 + 7000), 0);
    cr_assert_eq(d->nqueues, 1536);
    cr_assert_eq(depth("held"), 1);
}

/* Resize the suite's segment to 1 MiB: a queue table of 2048, relieved past
 * 1792 down to 1536. */
static void
small_table(void)
{
    struct shm_params p = *shm_params_of(&seg);

    shm_segment_destroy(&seg);
    p.max_bytes = 1 << 20;
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

/* Past 7/8 with 1800 inboxes read in queue mode, made at T0 + 1 ms on (idle
 * a second from T0 + 1.8 s); relief meets the queues made before them
 * first. */
static void
fill_inboxes(void)
{
    char name[32];

    for (int i = 0; i < 1800; i++) {
        snprintf(name, sizeof(name), "inbox/%d", i);
        push1(name, T0 + 1 + (uint64_t)i);
        cr_assert_eq(take(name, T0 + 1 + (uint64_t)i), 1);
    }
}

/* Pop one of q for group g (created from where), autoAck. */
static int
popg(const char *q, const char *g, enum shm_from from, uint64_t now)
{
    struct shm_pop_req r = {nm(q), nm("Default"), nm(g), 1, 1, from, 0};
    struct shm_sink sink = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};

    return shm_pop(&seg, 0, &r, now, &sink);
}

/* Fan-out (two groups) and a group that started at new messages: empty and
 * idle, but forgetting them early would lose the next message for one of
 * them, so the relief keeps them (found in review). */
Test(shm_due, the_relief_keeps_queues_whose_groups_a_reader_would_miss)
{
    small_table();
    cr_assert_eq(popg("events", "A", SHM_FROM_ALL, T0), 0);
    cr_assert_eq(popg("events", "B", SHM_FROM_ALL, T0), 0);
    cr_assert_eq(popg("feed", "C", SHM_FROM_NEW, T0), 0);
    cr_assert_eq(popg("solo", "D", SHM_FROM_ALL, T0), 0);
    fill_inboxes();
    cr_assert_eq(shm_maintain(&seg, T0 + 5000), 0);
    /* Down to 3/4 with inboxes; the three, met first, stay. */
    cr_assert_eq(shm_dir_of(&seg)->nqueues, 1536);
    cr_assert_eq(depth("events"), 0);
    cr_assert_eq(depth("feed"), 0);
    cr_assert_eq(depth("solo"), 0);
    /* A lone named group would lose what a group that joins reads first
     * (found in a second review). */
    push1("solo", T0 + 5001);
    cr_assert_eq(popg("solo", "E", SHM_FROM_ALL, T0 + 5002), 1);
    cr_assert_eq(popg("solo", "D", SHM_FROM_ALL, T0 + 5003), 1,
                 "group D lost a message");
    push1("events", T0 + 5001);
    cr_assert_eq(popg("events", "A", SHM_FROM_ALL, T0 + 5002), 1);
    cr_assert_eq(popg("events", "B", SHM_FROM_ALL, T0 + 5003), 1,
                 "group B lost a message");
    push1("feed", T0 + 5004);
    cr_assert_eq(popg("feed", "C", SHM_FROM_NEW, T0 + 5005), 1,
                 "group C lost a message");
}

/* A queue only polled, never pushed to (no partition), holds no position
 * a reader could miss: relief takes it whatever group polled it, as before
 * an empty poll registered its group (found in review). */
Test(shm_due, the_relief_takes_queues_only_polled_whatever_the_group)
{
    struct shm_pop_req r = {nm("polled"), nm(""), nm("replies"), 1, 1,
                            SHM_FROM_NEW, 0};
    struct shm_sink sink = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};

    small_table();
    cr_assert_eq(shm_pop(&seg, 0, &r, T0, &sink), 0);
    cr_assert_eq(depth("polled"), 0);
    fill_inboxes();
    cr_assert_eq(shm_maintain(&seg, T0 + 5000), 0);
    cr_assert_eq(shm_dir_of(&seg)->nqueues, 1536);
    cr_assert_eq(depth("polled"), -ENOENT);
}

struct racer {
    uint64_t now;
    struct shm_pop_req req;
    atomic_int done;
    int rc;
};

static void *
maintain_thread(void *arg)
{
    struct racer *r = arg;

    r->rc = shm_maintain(&seg, r->now);
    atomic_store(&r->done, 1);
    return NULL;
}

static void *
pop_thread(void *arg)
{
    static unsigned char buf[4096];
    struct racer *r = arg;
    struct shm_sink sink = {.buf = buf, .cap = sizeof(buf)};

    r->rc = shm_pop(&seg, 1, &r->req, r->now, &sink);
    atomic_store(&r->done, 1);
    return NULL;
}

/* Until the robust mutex word shows a waiter (the other thread blocks on
 * it) or the thread finished. */
static void
wait_blocked(pthread_mutex_t *m, struct racer *r, const char *who)
{
    for (int i = 0; !atomic_load(&r->done) &&
                    !(__atomic_load_n(&m->__data.__lock, __ATOMIC_SEQ_CST) &
                      (int)0x80000000);
         i++) {
        cr_assert(i < 200000, "%s never reached the queue lock", who);
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

/* A long-poll that times out and polls again while the relief is about to
 * collect its queue (held here at the queue lock, as a master preempted
 * there would be): whichever gets the lock first, the pop ends parked on a
 * live queue, and the next push wakes it (found in review). */
Test(shm_due, a_pop_racing_the_relief_is_woken_by_the_next_push)
{
    struct shm_pop_req req = {nm("rpc"), nm(""), nm(""), 1, 1, SHM_FROM_ALL, 1};
    struct shm_sink sink = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    struct racer m = {.now = T0 + 5000}, p = {.now = T0 + 5000, .req = req};
    pthread_t mt, pt;
    struct shm_ref qr;
    uint64_t out[8], h;

    small_table();
    /* The first long-poll makes "rpc", parks, and times out. */
    cr_assert_eq(shm_pop(&seg, 1, &req, T0, &sink), 0);
    h = shm_pop_handle(&seg, nm("rpc"), nm(""));
    cr_assert_neq(h, 0);
    shm_park_count(&seg, 1, h, 1);
    shm_unpark(&seg, 1, h);
    shm_park_count(&seg, 1, h, -1);
    fill_inboxes();
    cr_assert_eq(shm_dir_find_queue(&seg, 0, nm("rpc"), 0, m.now, &qr), 0);
    struct shm_queue *q = shm_dir_queue(&seg, qr.idx);
    cr_assert_eq(shm_lock(&seg, &q->lock, NULL, NULL), 0);
    cr_assert_eq(pthread_create(&mt, NULL, maintain_thread, &m), 0);
    wait_blocked(&q->lock, &m, "the master");
    /* The consumer's new long-poll raises its bit, finds nothing, and
     * checks the queue under its lock before parking. */
    cr_assert_eq(pthread_create(&pt, NULL, pop_thread, &p), 0);
    for (int i = 0; !(atomic_load(&q->waiters) & 2) && !atomic_load(&p.done);
         i++) {
        cr_assert(i < 200000, "the pop never raised its waiter bit");
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
    shm_unlock(&q->lock);
    cr_assert_eq(pthread_join(mt, NULL), 0);
    cr_assert_eq(pthread_join(pt, NULL), 0);
    cr_assert_eq(m.rc, 0);
    cr_assert_eq(p.rc, 0, "the pop took %d", p.rc);
    h = shm_pop_handle(&seg, nm("rpc"), nm("")); /* worker/pop.c park() */
    cr_assert_neq(h, 0);
    push1("rpc", m.now + 1);
    int n = shm_wake_drain(&seg, 1, out, 8), woken = 0;
    for (int i = 0; i < n; i++)
        woken |= out[i] == h;
    cr_assert(woken, "the parked pop (handle %#llx) was not woken (%d wakes)",
              (unsigned long long)h, n);
}

/* A table past 7/8 full of queues in use (each holds a message): a relief
 * pass that collects nothing pauses relief for a second instead of taking
 * every record off the heap again each tick. */
Test(shm_due, a_relief_in_vain_pauses_for_a_second)
{
    struct shm_params p = *shm_params_of(&seg);
    char name[32];

    shm_segment_destroy(&seg);
    p.max_bytes = 1 << 20;
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    for (int i = 0; i < 1800; i++) {
        snprintf(name, sizeof(name), "held/%d", i);
        push1(name, T0);
    }
    cr_assert_eq(visits(T0 + 2000), 1800, "no relief pass");
    cr_assert_eq(shm_dir_of(&seg)->nqueues, 1800);
    cr_assert_eq(visits(T0 + 2100), 0);
    cr_assert_eq(visits(T0 + 2200), 0);
    cr_assert_eq(visits(T0 + 2900), 0);
    cr_assert_eq(visits(T0 + 3000), 1800, "relief did not come back");
}

/* A pass that frees queues while workers make more than it freed (the load
 * relief exists for) is not a pass in vain: relief does not pause.  The
 * master is held at the first queue it looks at, as a master preempted
 * there would be, while 20 queues are made (found in a second review). */
Test(shm_due, a_pass_that_collected_does_not_pause_relief)
{
    struct racer m = {.now = T0 + 5000};
    char name[32];
    pthread_t mt;
    struct shm_ref qr;

    small_table();
    for (int i = 0; i < 10; i++) { /* idle a second at T0 + 5000 */
        snprintf(name, sizeof(name), "inbox/%d", i);
        push1(name, T0 + (uint64_t)i);
        cr_assert_eq(take(name, T0 + (uint64_t)i), 1);
    }
    for (int i = 0; i < 1790; i++) {
        snprintf(name, sizeof(name), "held/%d", i);
        push1(name, T0 + 100);
    }
    for (int i = 0; i < 10; i++) { /* emptied: idle a second at T0 + 5050 */
        snprintf(name, sizeof(name), "held/%d", i);
        cr_assert_eq(take(name, T0 + 4050), 1);
    }
    cr_assert_eq(shm_dir_of(&seg)->nqueues, 1800);
    cr_assert_eq(shm_dir_find_queue(&seg, 0, nm("inbox/0"), 0, T0, &qr), 0);
    struct shm_queue *q = shm_dir_queue(&seg, qr.idx);
    cr_assert_eq(shm_lock(&seg, &q->lock, NULL, NULL), 0);
    cr_assert_eq(pthread_create(&mt, NULL, maintain_thread, &m), 0);
    wait_blocked(&q->lock, &m, "the master");
    for (int i = 0; i < 20; i++) { /* workers make queues meanwhile */
        snprintf(name, sizeof(name), "late/%d", i);
        push1(name, T0 + 5000);
    }
    shm_unlock(&q->lock);
    cr_assert_eq(pthread_join(mt, NULL), 0);
    cr_assert_eq(depth("inbox/9"), -ENOENT, "the pass collected nothing");
    cr_assert_eq(shm_dir_of(&seg)->nqueues, 1810);
    /* Still past 7/8; held/0..9 idle a second now. */
    cr_assert_eq(shm_maintain(&seg, T0 + 5100), 0);
    cr_assert_eq(depth("held/0"), -ENOENT,
                 "relief paused after a pass "
                 "that collected 10 queues");
}

/* 16,384 queues that cannot go early (each holds a message), older than
 * the inboxes: relief scans the table in turn, so the idle inboxes behind
 * them are reached (found in a second review). */
Test(shm_due, relief_reaches_idle_inboxes_behind_queues_it_keeps,
     .timeout = 120)
{
    struct shm_params p = *shm_params_of(&seg);
    struct shm_dir *d;
    char name[32];

    shm_segment_destroy(&seg);
    p.max_bytes = 16 << 20; /* 32768 queues: relief past 28672, to 24576 */
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    d = shm_dir_of(&seg);
    cr_assert_eq(d->max_queues, 32768);
    for (int i = 0; i < 16384; i++) {
        snprintf(name, sizeof(name), "held/%d", i);
        push1(name, T0);
    }
    for (int i = 0; i < 13000; i++) {
        snprintf(name, sizeof(name), "inbox/%d", i);
        push1(name, T0 + 1);
        cr_assert_eq(take(name, T0 + 1), 1);
    }
    cr_assert_eq(d->nqueues, 29384);
    for (uint64_t t = T0 + 5000; t <= T0 + 20000 && d->nqueues > 24576;
         t += 100)
        cr_assert_eq(shm_maintain(&seg, t), 0);
    cr_assert_eq(d->nqueues, 24576, "%u queues left", d->nqueues);
}
