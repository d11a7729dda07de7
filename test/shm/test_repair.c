/*
 * test_repair.c - a worker SIGKILLed at any instruction: a forked child runs
 * the real push/pop/ack paths in a loop while the parent kills it at random
 * moments, then reaps its slot like the master does.  Afterwards every
 * message whose push returned is still there or was handed out (or is a
 * request it withdrew: those withdrawn unread never are), the
 * structures walk cleanly and the accounting returns to zero.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/broker.h"
#include "shm/inbox.h"
#include "shm/maintain.h"
#include "shm/queue_admin.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "test/shm/fixture.h"

#define LOG_MAX (1 << 20)
#define GROUPS  3

static const char *groups[GROUPS] = {"g", "h", "k"};

/* What the child reports, in memory shared with the parent: pushes that
 * returned, and per group the seqs it was about to ack completed. */
struct log {
    _Atomic uint64_t pushed_n;
    _Atomic uint64_t popped_n[GROUPS];
    _Atomic uint64_t meant_n, withdrawn_n;
    uint64_t pushed[LOG_MAX];
    uint64_t popped[GROUPS][LOG_MAX];
    uint64_t meant[LOG_MAX];     /* requests about to be withdrawn */
    uint64_t withdrawn[LOG_MAX]; /* ... and those withdrawn unread */
};

static int ngroups = 1;      /* groups the child pops for */
static int known_groups = 1; /* made before the first push: see everything */
static int requests;         /* the child also pushes and withdraws requests */

static struct shm_seg seg;
static struct log *lg;

/* note - append x to the list v of *n (the count stored after it). */
static void
note(uint64_t *v, _Atomic uint64_t *n, uint64_t x)
{
    uint64_t at = atomic_load(n);

    if (at < LOG_MAX)
        v[at] = x;
    atomic_store(n, at + 1);
}

/* request - with requests, one request to part now and then, withdrawn at
 * once half the time (noted before the call, and after it when it was
 * withdrawn unread). */
static void
request(const char *part)
{
    static const char inbox[] = "mayfly.inbox/n0/1.1.1.1";
    char data[64];
    uint64_t seq;

    if (!requests || rand() % 3 != 0)
        return;
    int len = snprintf(data, sizeof(data), "%s{\"r\":%d}", inbox, rand());
    struct shm_msg_in m = {data, (uint32_t)len};
    if (shm_push_request(&seg, 1, nm("q"), nm(part), &m, sizeof(inbox) - 1,
                         shm_now_ms(), &seq) != 0)
        return;
    note(lg->pushed, &lg->pushed_n, seq);
    if (rand() % 2)
        return;
    note(lg->meant, &lg->meant_n, seq);
    if (shm_withdraw(&seg, 1, nm("q"), nm(part), seq, shm_now_ms()) == 1)
        note(lg->withdrawn, &lg->withdrawn_n, seq);
}

static void
setup(void)
{
    struct shm_params p = fixture_params(8 << 20, 4, 1);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    lg = mmap(NULL, sizeof(*lg), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(lg, MAP_FAILED);
}

/* The child's loop as worker 1: pushes, pops (one partition or any), acks
 * (mostly completed, sometimes failed), forever; reports what returned. */
static void
child(unsigned seed, uint64_t maxlen)
{
    static const char *parts[] = {"Default", "p1", "p2"};
    unsigned char buf[1 << 14];
    char pay[64];
    struct shm_msg_in in[5];

    srand(seed);
    for (;;) {
        const char *part = parts[rand() % 3];
        uint32_t n = 1 + (uint32_t)(rand() % 5);
        uint64_t first;
        for (uint32_t i = 0; i < n; i++) {
            int len = snprintf(pay, sizeof(pay), "{\"n\":%d}", rand());
            in[i] = (struct shm_msg_in){pay, (uint32_t)len};
        }
        uint64_t held =
            atomic_load(&lg->pushed_n) - atomic_load(&lg->popped_n[0]);
        if (held < maxlen && shm_push(&seg, 1, nm("q"), nm(part), in, n,
                                      shm_now_ms(), &first) == 0) {
            uint64_t at = atomic_load(&lg->pushed_n);
            for (uint32_t i = 0; i < n && at + i < LOG_MAX; i++)
                lg->pushed[at + i] = first + i;
            atomic_store(&lg->pushed_n, at + n);
        }
        request(part);
        int gi = rand() % ngroups;
        struct shm_pop_req r = {nm("q"),
                                nm(rand() % 2 ? part : ""),
                                nm(groups[gi]),
                                4,
                                0,
                                SHM_FROM_ALL,
                                0};
        struct shm_sink k = {.buf = buf, .cap = sizeof(buf)};
        if (shm_pop(&seg, 1, &r, shm_now_ms(), &k) <= 0)
            continue;
        for (const struct shm_popped *p = shm_popped_next(&k, NULL); p;
             p = shm_popped_next(&k, p)) {
            struct shm_ack a = {.seq = p->seq,
                                .attempts = p->attempts,
                                .status = rand() % 8 ? SHM_ACK_COMPLETED
                                                     : SHM_ACK_FAILED};
            struct shm_name pn = {(const char *)(p + 1), p->part_len};
            if (a.status == SHM_ACK_COMPLETED) {
                uint64_t at = atomic_load(&lg->popped_n[gi]);
                if (at < LOG_MAX)
                    lg->popped[gi][at] = p->seq;
                atomic_store(&lg->popped_n[gi], at + 1);
            }
            shm_ack(&seg, 1, nm("q"), pn, nm(groups[gi]), &a, 1, shm_now_ms());
        }
    }
}

static int
has(const uint64_t *v, uint64_t n, uint64_t x)
{
    return bsearch(&x, v, n, sizeof(x), fixture_cmp_u64) != NULL;
}

/* Kill the child `rounds` times at random moments, reaping after each. */
static void
kill_rounds(unsigned seed, int rounds, uint64_t maxlen)
{
    srand(seed);
    for (int i = 0; i < rounds; i++) {
        unsigned cs = (unsigned)rand();
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0)
            child(cs, maxlen);
        fixture_kill_after(pid, 200000 + (rand() % 3000) * 1000);
        shm_worker_reap(&seg, 1);
        fixture_check(&seg);
    }
}

/* Drain group gi (leases long expired); for a group known before the first
 * push, check that each push that returned reached it.  Returns how many it
 * drained. */
static uint64_t
drain_group(int gi, uint64_t later)
{
    static unsigned char buf[1 << 20];
    uint64_t pn = atomic_load(&lg->pushed_n);
    uint64_t an = atomic_load(&lg->popped_n[gi]);
    uint64_t mn = atomic_load(&lg->meant_n), wn = atomic_load(&lg->withdrawn_n);
    uint64_t *got = malloc(sizeof(uint64_t) * LOG_MAX), ng = 0;

    cr_assert_not_null(got);
    qsort(lg->popped[gi], an, sizeof(uint64_t), fixture_cmp_u64);
    qsort(lg->meant, mn, sizeof(uint64_t), fixture_cmp_u64);
    qsort(lg->withdrawn, wn, sizeof(uint64_t), fixture_cmp_u64);
    for (;;) {
        struct shm_pop_req r = {nm("q"),      nm(""), nm(groups[gi]), 10000, 0,
                                SHM_FROM_ALL, 0};
        struct shm_sink k = {.buf = buf, .cap = sizeof(buf)};
        int n = shm_pop(&seg, 0, &r, later, &k);
        cr_assert_geq(n, 0);
        if (n == 0)
            break;
        for (const struct shm_popped *p = shm_popped_next(&k, NULL); p;
             p = shm_popped_next(&k, p)) {
            struct shm_ack a = {.seq = p->seq};
            struct shm_name part = {(const char *)(p + 1), p->part_len};
            got[ng++] = p->seq;
            shm_ack(&seg, 0, nm("q"), part, nm(groups[gi]), &a, 1, later);
            cr_assert_eq(a.outcome, SHM_OUT_ACKED);
        }
    }
    qsort(got, ng, sizeof(uint64_t), fixture_cmp_u64);
    for (uint64_t i = 1; i < ng; i++)
        cr_assert_neq(got[i], got[i - 1], "seq %llu twice",
                      (unsigned long long)got[i]);
    for (uint64_t i = 0; i < pn && gi < known_groups; i++)
        cr_assert(has(got, ng, lg->pushed[i]) ||
                      has(lg->popped[gi], an, lg->pushed[i]) ||
                      has(lg->meant, mn, lg->pushed[i]),
                  "pushed seq %llu lost for group %s",
                  (unsigned long long)lg->pushed[i], groups[gi]);
    for (uint64_t i = 0; i < wn; i++)
        cr_assert(!has(got, ng, lg->withdrawn[i]) &&
                      !has(lg->popped[gi], an, lg->withdrawn[i]),
                  "withdrawn request %llu delivered to group %s",
                  (unsigned long long)lg->withdrawn[i], groups[gi]);
    free(got);
    return ng;
}

/* Check every group, then that nothing is held and nothing leaks. */
static void
check_and_drain(void)
{
    uint64_t later = shm_now_ms() + 3600 * 1000, c[SHM_C_COUNT];

    for (int g = 0; g < ngroups; g++) {
        uint64_t n = drain_group(g, later);
        cr_log_info("group %s: pushed %llu, acked by the child %llu, "
                    "drained %llu",
                    groups[g], (unsigned long long)atomic_load(&lg->pushed_n),
                    (unsigned long long)atomic_load(&lg->popped_n[g]),
                    (unsigned long long)n);
    }
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_WIPES], 0);
    cr_log_info("lock repairs %llu", (unsigned long long)c[SHM_C_LOCK_REPAIRS]);
    struct shm_queue_info qi;
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), NULL, later, &qi, NULL, NULL, NULL), 0);
    cr_assert_eq(qi.depth, 0);
    cr_assert_eq(qi.leased, 0);
    cr_assert_eq(qi.waiting, 0);
    fixture_check(&seg);
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), later), 1);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);
    fixture_check(&seg);
}

/* Declare q, and make groups known in every partition before any push. */
static void
declare_q(int known)
{
    static const char *parts[] = {"Default", "p1", "p2"};
    struct shm_qopts o = {.max_length = 10000,
                          .max_bytes = 4 << 20,
                          .lease_s = 30,
                          .retry_limit = 1000000};
    unsigned char buf[256];

    known_groups = known;
    cr_assert_eq(shm_queue_declare(&seg, 0, nm("q"), &o), 0);
    for (int g = 0; g < known; g++)
        for (int p = 0; p < 3; p++) {
            struct shm_pop_req r = {
                nm("q"), nm(parts[p]), nm(groups[g]), 1, 0, SHM_FROM_ALL, 0};
            struct shm_sink k = {.buf = buf, .cap = sizeof(buf)};
            cr_assert_eq(shm_pop(&seg, 0, &r, shm_now_ms(), &k), 0);
        }
}

TestSuite(shm_repair, .init = setup, .timeout = 120);

Test(shm_repair, killed_worker_loses_no_pushed_message_and_leaks_nothing)
{
    declare_q(1);
    kill_rounds(7, 40, 2000);
    check_and_drain();
}

Test(shm_repair, killed_worker_on_a_busy_queue_with_many_rounds)
{
    declare_q(1);
    kill_rounds(1234, 80, 200);
    check_and_drain();
}

/* Requests withdrawn unread leave the middle of their partitions (ring.c's
 * unlink) under the kills: none is delivered afterwards, nothing else is
 * lost, and the accounting returns to zero. */
Test(shm_repair, killed_worker_withdrawing_requests_loses_nothing_else)
{
    requests = 1;
    ngroups = 2;
    declare_q(2);
    kill_rounds(4242, 60, 500);
    cr_log_info("requests withdrawn unread: %llu",
                (unsigned long long)atomic_load(&lg->withdrawn_n));
    cr_assert_gt(atomic_load(&lg->withdrawn_n), 0);
    check_and_drain();
}

Test(shm_repair, killed_worker_with_fan_out_groups_made_on_the_fly)
{
    /* g and h are known before the first push, so each must see every
     * message; k is made by the child, in each partition on its first
     * pop there, under the kills. */
    ngroups = 3;
    declare_q(2);
    kill_rounds(99, 60, 500);
    check_and_drain();
}
