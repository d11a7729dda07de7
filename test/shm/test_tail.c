/*
 * test_tail.c - tail.h and horizon.h on real segments: a tail read copies
 * a range of sequence numbers in order, takes, leases and frees nothing and
 * makes no group; its park is woken by a push from another process, its
 * gap says when messages after it left; the horizon never passes a push in
 * flight (a pusher stopped at set points, pushers racing a stream that
 * reads only what woke it and must read every number), a dead pusher is
 * let go by the reap, and a hand-over's hold keeps it below the numbers it
 * kept; the checker names each of the horizon's words broken.
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/broker.h"
#include "shm/broker_int.h"
#include "shm/dir.h"
#include "shm/horizon.h"
#include "shm/maintain.h"
#include "shm/part_move.h"
#include "shm/queue_admin.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "shm/tail.h"
#include "test/shm/fixture.h"

#define T0 1000000ULL       /* a "now" far from zero */
#define M  SHM_STATS_MASTER /* the master's slot: holds and adopts */

static struct shm_seg seg;
static unsigned char sinkbuf[1 << 20];
static struct shm_sink sink;
static struct shm_tail_res res;

static void
setup(void)
{
    struct shm_params p = fixture_params(4 << 20, 4, 77);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

TestSuite(shm_tail, .init = setup, .timeout = 60);

/* Tail (q, p) as worker w into the static sink: after < seq <= upto,
 * starting from *pos when not NULL (then updated). */
static int
tailx(int w, const char *q, const char *p, uint64_t after, uint64_t upto,
      int newest_only, int park, struct shm_tail_pos *pos, uint64_t now)
{
    struct shm_tail_req r = {.queue = nm(q),
                             .part = nm(p),
                             .after = after,
                             .upto = upto,
                             .newest_only = newest_only,
                             .park = park};
    int rc;

    if (pos != NULL)
        r.pos = *pos;
    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    rc = shm_tail(&seg, w, &r, now, &sink, &res);
    if (pos != NULL && rc >= 0)
        *pos = res.pos;
    return rc;
}

static int
tail(const char *q, const char *p, uint64_t after, uint64_t upto)
{
    return tailx(0, q, p, after, upto, 0, 0, NULL, T0);
}

static const struct shm_popped *
rec(int i)
{
    return fixture_popped(&sink, i);
}

static int
pushn(const char *q, const char *p, const char *tag, uint32_t n, uint64_t now,
      uint64_t *seq)
{
    return fixture_pushn(&seg, q, p, tag, n, now, seq);
}

/* Pop up to batch for group g of (q, p) as worker 0. */
static int
popx(const char *q, const char *p, const char *g, uint32_t batch, int auto_ack,
     int park, uint64_t now)
{
    struct shm_pop_req r = {nm(q),    nm(p),        nm(g), batch,
                            auto_ack, SHM_FROM_ALL, park};

    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    return shm_pop(&seg, 0, &r, now, &sink);
}

static struct shm_queue_info
info(const char *q)
{
    struct shm_queue_info qi;

    cr_assert_eq(shm_queue_depth(&seg, nm(q), NULL, T0, &qi, NULL, NULL, NULL),
                 0);
    return qi;
}

static void
declare(const char *q, uint32_t max_length, uint32_t policy, uint32_t ttl_s)
{
    struct shm_qopts o = {.max_length = max_length,
                          .policy = policy,
                          .max_bytes = 1 << 20,
                          .ttl_s = ttl_s,
                          .lease_s = 30,
                          .retry_limit = 5};

    cr_assert_eq(shm_queue_declare(&seg, 0, nm(q), &o), 0);
}

/* The handles worker w's wake queue holds now (up to n). */
static int
drain(int w, uint64_t *out, int n)
{
    int k = shm_wake_drain(&seg, w, out, n);

    cr_assert_geq(k, 0);
    return k;
}

/* Expect the sink to hold tag<from..from+n-1> in order, rising seqs. */
static void
expect(const char *tag, int from, int n)
{
    char want[32];

    cr_assert_eq(sink.count, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "\"%s%d\"", tag, from + i);
        cr_assert_str_eq(payload(rec(i)), want, "record %d", i);
        cr_assert_eq(rec(i)->attempts, 1);
        if (i > 0)
            cr_assert_gt(rec(i)->seq, rec(i - 1)->seq);
    }
}

static uint64_t
next_seq(void)
{
    return atomic_load(&shm_dir_of(&seg)->next_seq);
}

/* ---- reading ------------------------------------------------------------- */

Test(shm_tail, copies_the_range_in_order)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "p", "a", 5, T0, &s), 0);
    cr_assert_eq(shm_horizon(&seg), s + 4, "no push in flight");
    cr_assert_eq(tail("q", "p", 0, shm_horizon(&seg)), 5);
    expect("a", 0, 5);
    cr_assert_eq(rec(0)->seq, s);
    cr_assert_eq(rec(0)->part_len, 1);
    cr_assert_eq(memcmp(rec(0) + 1, "p", 1), 0);
    cr_assert_eq(res.newest, s + 4);
    cr_assert_eq(res.handle, shm_pop_handle(&seg, nm("q"), nm("p")));
    cr_assert(!res.more && !res.gap);
    cr_assert_eq(tail("q", "p", s + 1, s + 3), 2);
    expect("a", 2, 2);
    cr_assert_eq(res.newest, s + 4, "more above upto");
    cr_assert_eq(tail("q", "p", s + 4, UINT64_MAX), 0);
    cr_assert_eq(tail("q", "other", 0, UINT64_MAX), 0);
    cr_assert_eq(res.handle, 0, "no such partition");
    fixture_check(&seg);
}

Test(shm_tail, newest_only_gives_the_last_at_or_below_upto)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "p", "a", 3, T0, &s), 0);
    cr_assert_eq(tailx(0, "q", "p", 0, s + 1, 1, 0, NULL, T0), 1);
    expect("a", 1, 1);
    cr_assert_eq(tailx(0, "q", "p", 0, UINT64_MAX, 1, 0, NULL, T0), 1);
    expect("a", 2, 1);
    cr_assert_eq(tailx(0, "q", "p", s + 2, UINT64_MAX, 1, 0, NULL, T0), 0);
}

Test(shm_tail, a_full_sink_stops_early_and_an_empty_one_says_what_it_needs)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "p", "a", 5, T0, &s), 0);
    sink = (struct shm_sink){.buf = sinkbuf, .cap = 8};
    struct shm_tail_req r = {
        .queue = nm("q"), .part = nm("p"), .upto = UINT64_MAX};
    cr_assert_eq(shm_tail(&seg, 0, &r, T0, &sink, &res), -ENOMEM);
    cr_assert_gt(sink.need, 8);
    size_t one = sink.need;
    sink = (struct shm_sink){.buf = sinkbuf, .cap = 2 * one};
    cr_assert_eq(shm_tail(&seg, 0, &r, T0, &sink, &res), 2);
    cr_assert(res.more);
    r.after = rec(1)->seq;
    r.pos = res.pos;
    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    cr_assert_eq(shm_tail(&seg, 0, &r, T0, &sink, &res), 3);
    expect("a", 2, 3);
    cr_assert(!res.more);
}

/* A tail takes nothing: a group made after it still gets everything, a
 * queue no group reads keeps every message, and the bytes do not move. */
Test(shm_tail, takes_leases_frees_and_makes_nothing)
{
    cr_assert_eq(pushn("q", "p", "a", 4, T0, NULL), 0);
    uint64_t used = shm_arena_used_bytes(&seg);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tailx(0, "q", "p", 0, UINT64_MAX, 0, 1, NULL, T0), 4);
    cr_assert_eq(shm_arena_used_bytes(&seg), used);
    struct shm_queue_info qi = info("q");
    cr_assert_eq(qi.depth, 4);
    cr_assert_eq(qi.groups, 0, "a tail makes no group");
    cr_assert_eq(qi.leased, 0);
    fixture_check(&seg);
    cr_assert_eq(popx("q", "p", "g", 10, 1, 0, T0), 4);
    expect("a", 0, 4);
    cr_assert_eq(info("q").depth, 0, "read by its one group: freed");
    cr_assert_eq(tail("q", "p", 0, UINT64_MAX), 0);
    fixture_check(&seg);
}

/* ---- parking --------------------------------------------------------------- */

/* Push n messages to (q, p) from a child process as worker 1. */
static void
push_from_child(const char *q, const char *p, uint32_t n)
{
    pid_t pid = fork();

    cr_assert_neq(pid, -1);
    if (pid == 0) {
        struct shm_msg_in m[8];
        uint64_t s;
        for (uint32_t i = 0; i < n; i++)
            m[i] = (struct shm_msg_in){"\"c\"", 3};
        _exit(shm_push(&seg, 1, nm(q), nm(p), m, n, T0, &s) == 0 ? 0 : 1);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

Test(shm_tail, a_parked_tail_is_woken_by_a_push_from_another_process)
{
    struct shm_tail_pos pos = {0};
    uint64_t out[8], s;

    cr_assert_eq(pushn("q", "p", "a", 2, T0, &s), 0);
    cr_assert_eq(tailx(0, "q", "p", 0, shm_horizon(&seg), 0, 1, &pos, T0), 2);
    uint64_t h = res.handle;
    cr_assert_neq(h, 0);
    push_from_child("q", "other", 1);
    cr_assert_eq(drain(0, out, 8), 0, "another partition's push");
    push_from_child("q", "p", 1);
    cr_assert_eq(drain(0, out, 8), 1);
    cr_assert_eq(out[0], h);
    cr_assert_eq(tailx(0, "q", "p", s + 1, shm_horizon(&seg), 0, 1, &pos, T0),
                 1);
    cr_assert_str_eq(payload(rec(0)), "\"c\"");
    push_from_child("q", "p", 2);
    cr_assert_eq(drain(0, out, 8), 1, "parked again by the read");
    cr_assert_eq(out[0], h);
    fixture_check(&seg);
}

/* A partition not there yet: a read makes nothing, a parked one makes it
 * (as a parked pop does), and its first push wakes the tail. */
Test(shm_tail, a_tail_parked_before_the_first_push_is_woken_by_it)
{
    struct shm_queue_info qi;
    uint64_t out[8];

    cr_assert_eq(tail("new", "p", 0, UINT64_MAX), 0);
    cr_assert_eq(res.handle, 0);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("new"), NULL, T0, &qi, NULL, NULL, NULL),
        -ENOENT, "a read without park makes no queue");
    cr_assert_eq(tailx(0, "new", "p", 0, shm_horizon(&seg), 0, 1, NULL, T0), 0);
    uint64_t h = res.handle;
    cr_assert_neq(h, 0);
    cr_assert_eq(h, shm_pop_handle(&seg, nm("new"), nm("p")));
    cr_assert_eq(info("new").groups, 0);
    push_from_child("new", "p", 1);
    cr_assert_eq(drain(0, out, 8), 1);
    cr_assert_eq(out[0], h);
    cr_assert_eq(tail("new", "p", 0, shm_horizon(&seg)), 1);
    fixture_check(&seg);
}

/* ---- the horizon ----------------------------------------------------------- */

/*
 * A push driven step by step as push_link (broker.c) does it, as worker
 * 1 in a child that stops itself (SIGSTOP) after linking under the lock,
 * and again after unlocking, before its wake-ups are kicked.
 */
static pid_t
stepped_pusher(const char *q, const char *p)
{
    pid_t pid = fork();

    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never left stopped */
        struct shm_ring_ctx c;
        struct shm_ref qr, pr;
        uint64_t cost, seq, kick = 0;
        uint32_t ref;
        if (shm_dir_find_queue(&seg, 1, nm(q), 1, T0, &qr) != 0 ||
            shm_dir_find_part(&seg, 1, qr, nm(p), 1, T0, &pr) != 0 ||
            shm_ring_msg_new(&seg, 1, "\"s\"", 3, 0, T0, &ref, &cost) != 0 ||
            shm_part_lock_ctx(&seg, 1, pr, shm_dir_queue(&seg, qr.idx), T0,
                              &c) != 0)
            _exit(1);
        shm_pushing_begin(&seg, 1, 0);
        shm_ring_link_locked(&c, ref, ref, 1, cost, &seq);
        shm_part_due_locked(&seg, pr.idx, c.p, c.q);
        shm_waiters_post_locked(&seg, qr, pr, &kick);
        raise(SIGSTOP);
        shm_ring_unlock(c.p);
        raise(SIGSTOP);
        shm_waiters_kick(&seg, kick);
        shm_pushing_end(&seg, 1);
        _exit(0);
    }
    return pid;
}

static void
wait_stopped(pid_t pid)
{
    int st;

    cr_assert_eq(waitpid(pid, &st, WUNTRACED), pid);
    cr_assert(WIFSTOPPED(st), "the pusher did not stop: %d", st);
}

Test(shm_tail, the_horizon_stays_below_a_push_in_flight)
{
    uint64_t out[8], s0, s2;

    cr_assert_eq(pushn("q", "p", "a", 2, T0, &s0), 0);
    cr_assert_eq(tailx(0, "q", "p", 0, UINT64_MAX, 0, 1, NULL, T0), 2);
    uint64_t h = res.handle, s = next_seq();
    pid_t pid = stepped_pusher("q", "p");
    wait_stopped(pid); /* linked, under the lock */
    cr_assert_eq(shm_horizon(&seg), s - 1);
    cr_assert_eq(pushn("q", "elsewhere", "b", 1, T0, &s2), 0);
    cr_assert_eq(s2, s + 1, "a later push completed meanwhile");
    cr_assert_eq(shm_horizon(&seg), s - 1, "still below the one in flight");
    kill(pid, SIGCONT);
    wait_stopped(pid); /* unlocked, wake-ups not kicked */
    cr_assert_eq(shm_horizon(&seg), s - 1);
    cr_assert_eq(tail("q", "p", s0 + 1, UINT64_MAX), 1, "linked already");
    cr_assert_eq(rec(0)->seq, s);
    kill(pid, SIGCONT);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert_eq(shm_horizon(&seg), s2);
    cr_assert_eq(drain(0, out, 8), 1);
    cr_assert_eq(out[0], h);
    fixture_check(&seg);
}

/* A pusher killed in flight holds the horizon back until the reap, which
 * wakes every parked reader first (its wake-ups may never have gone). */
Test(shm_tail, the_reap_lets_the_horizon_pass_a_killed_pusher)
{
    uint64_t out[8];

    cr_assert_eq(pushn("q", "p", "a", 1, T0, NULL), 0);
    cr_assert_eq(tailx(0, "q", "watched", 0, UINT64_MAX, 0, 1, NULL, T0), 0);
    uint64_t h = res.handle, s = next_seq();
    pid_t pid = stepped_pusher("q", "p");
    wait_stopped(pid);
    kill(pid, SIGKILL);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st));
    cr_assert_eq(shm_horizon(&seg), s - 1);
    cr_assert_neq(shm_pushing_of(&seg, 1), 0);
    shm_worker_reap(&seg, 1);
    cr_assert_eq(shm_pushing_of(&seg, 1), 0);
    cr_assert_eq(shm_horizon(&seg), s);
    cr_assert_eq(drain(0, out, 8), 1, "the parked tail was woken");
    cr_assert_eq(out[0], h);
    cr_assert_eq(tail("q", "p", s - 1, s), 1, "what it linked is kept");
    fixture_check(&seg);
}

#define RACERS    3
#define RACE_MSGS 2000
#define RACE_PART 4

/* The round of a stream (DESIGN.md §4) on parts: the horizon first, then
 * the wake-ups, then a read of every partition woken or left with more,
 * up to the horizon, from the watermark *w, parking again.  Each number
 * read is counted in seen[]; returns how many were read. */
static uint64_t
stream_round(const char **parts, const uint64_t *handle, int *dirty,
             struct shm_tail_pos *pos, uint64_t *w, uint64_t *seen)
{
    uint64_t h = shm_horizon(&seg), out[64], n = 0;
    int k;

    if (h <= *w)
        return 0;
    while ((k = shm_wake_drain(&seg, 0, out, 64)) != 0) {
        for (int i = 0; i < RACE_PART; i++) {
            dirty[i] |= k < 0; /* overflowed: all of them */
            for (int j = 0; j < k; j++)
                dirty[i] |= out[j] == handle[i];
        }
    }
    for (int i = 0; i < RACE_PART; i++) {
        if (!dirty[i])
            continue;
        cr_assert_geq(tailx(0, "q", parts[i], *w, h, 0, 1, &pos[i], T0), 0);
        cr_assert(!res.more);
        for (const struct shm_popped *r = shm_popped_next(&sink, NULL);
             r != NULL; r = shm_popped_next(&sink, r)) {
            cr_assert(r->seq > *w && r->seq <= h);
            cr_assert_eq(seen[r->seq]++, 0, "%llu read twice",
                         (unsigned long long)r->seq);
            n++;
        }
        dirty[i] = res.newest > h;
    }
    cr_assert_eq(n, h - *w,
                 "numbers %llu..%llu: %llu read from the partitions woken",
                 (unsigned long long)*w + 1, (unsigned long long)h,
                 (unsigned long long)n);
    *w = h;
    return n;
}

/* Pushers race a stream that reads only the partitions its wake-ups name:
 * every time the horizon moves, each number up to it must be read (nothing
 * frees here).  Without the pushing word, a push that took its number but
 * had not yet posted its wake-up would be passed for good. */
Test(shm_tail, a_stream_reading_what_woke_it_misses_no_number, .timeout = 120)
{
    static const char *parts[RACE_PART] = {"p0", "p1", "p2", "p3"};
    static uint64_t seen[RACERS * RACE_MSGS + 1];
    struct shm_tail_pos pos[RACE_PART] = {{0}};
    uint64_t handle[RACE_PART], w = 0, total = RACERS * RACE_MSGS;
    int dirty[RACE_PART] = {0}, rounds = 0;
    /* The pushers start together once all are forked (each fork pauses). */
    _Atomic int *go = mmap(NULL, sizeof(*go), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    cr_assert_neq(go, MAP_FAILED);
    for (int i = 0; i < RACE_PART; i++) {
        cr_assert_eq(tailx(0, "q", parts[i], 0, 0, 0, 1, NULL, T0), 0);
        handle[i] = res.handle;
    }
    for (int c = 0; c < RACERS; c++) {
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid != 0)
            continue;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        while (!atomic_load(go))
            sched_yield();
        for (int i = 0; i < RACE_MSGS; i++) {
            struct shm_msg_in m = {"\"r\"", 3};
            uint64_t s;
            if (shm_push(&seg, 1 + c, nm("q"), nm(parts[(c + i) % RACE_PART]),
                         &m, 1, T0, &s) != 0)
                _exit(1);
            if (i % 4 == 0)
                sched_yield(); /* the reader shares the cores */
        }
        _exit(0);
    }
    atomic_store(go, 1);
    while (w < total)
        rounds += stream_round(parts, handle, dirty, pos, &w, seen) > 0;
    for (int c = 0; c < RACERS; c++) {
        int st;
        cr_assert_neq(wait(&st), -1);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    cr_log_info("%d rounds", rounds);
    fixture_check(&seg);
}

/* ---- hand-over holds --------------------------------------------------- */

/* Take (src, p) with n messages into rec_buf: a hand-over record. */
static unsigned char rec_buf[1 << 16];
static struct shm_ho_sink ho;

static void
record_of(const char *src, const char *tag, uint32_t n)
{
    cr_assert_eq(pushn(src, "p", tag, n, T0, NULL), 0);
    ho = (struct shm_ho_sink){.buf = rec_buf, .cap = sizeof(rec_buf)};
    cr_assert_eq(shm_part_take(&seg, M, nm(src), nm("p"), T0, &ho), (int)n);
}

/* The numbers a hold keeps hold the horizon below them until the adopt
 * that uses them has linked; a tail reads by number meanwhile, and reads
 * the adopted messages before what was pushed during the hold. */
Test(shm_tail, a_hold_keeps_the_horizon_below_its_numbers)
{
    struct shm_tail_pos pos = {0};
    uint64_t sa, sw, sx;

    record_of("src", "m", 2);
    cr_assert_eq(pushn("q2", "p", "a", 1, T0, &sa), 0);
    uint64_t kept = next_seq();
    cr_assert_eq(shm_part_hold(&seg, M, nm("q2"), nm("p"), T0, 5000), 0);
    cr_assert_eq(shm_horizon(&seg), kept - 1);
    cr_assert_eq(pushn("q2", "p", "w", 1, T0, &sw), 0);
    cr_assert_eq(pushn("other", "p", "x", 1, T0, &sx), 0);
    cr_assert_geq(sw, kept + SHM_HOLD_SEQS);
    cr_assert_eq(shm_horizon(&seg), kept - 1, "pushes after it wait");
    fixture_check(&seg);
    cr_assert_eq(tailx(0, "q2", "p", 0, shm_horizon(&seg), 0, 0, &pos, T0), 1);
    expect("a", 0, 1);
    cr_assert_eq(res.newest, sw);
    cr_assert_eq(
        shm_part_adopt(&seg, M, nm("q2"), nm("p"), ho.buf, ho.used, T0 + 1), 2);
    cr_assert_eq(shm_horizon(&seg), sx, "the adopt linked: it passes");
    cr_assert_eq(tailx(0, "q2", "p", sa, shm_horizon(&seg), 0, 0, &pos, T0 + 1),
                 3);
    cr_assert_str_eq(payload(rec(0)), "\"m0\"");
    cr_assert_eq(rec(0)->seq, kept);
    cr_assert_str_eq(payload(rec(1)), "\"m1\"");
    cr_assert_str_eq(payload(rec(2)), "\"w0\"");
    cr_assert_eq(atomic_load(&shm_dir_of(&seg)->holds), 0);
    fixture_check(&seg);
}

/* A hold that runs out with no adopt ends with the maintenance due then,
 * which wakes the pops it kept waiting; the horizon passes it. */
Test(shm_tail, a_hold_that_ran_out_ends_with_the_maintenance)
{
    uint64_t out[8], sw;

    uint64_t kept = next_seq();
    cr_assert_eq(shm_part_hold(&seg, M, nm("q3"), nm("p"), T0, 100), 0);
    cr_assert_eq(pushn("q3", "p", "w", 1, T0, &sw), 0);
    cr_assert_eq(popx("q3", "p", "g", 1, 0, 1, T0 + 1), 0, "held");
    uint64_t h = shm_pop_handle(&seg, nm("q3"), nm("p"));
    cr_assert_eq(drain(0, out, 8), 0);
    cr_assert_eq(shm_maintain(&seg, T0 + 99), 0);
    cr_assert_eq(shm_horizon(&seg), kept - 1);
    cr_assert_eq(shm_maintain(&seg, T0 + 100), 0);
    cr_assert_eq(shm_horizon(&seg), sw);
    cr_assert_eq(drain(0, out, 8), 1, "the held pop is woken");
    cr_assert_eq(out[0], h);
    cr_assert_eq(popx("q3", "p", "g", 1, 0, 0, T0 + 100), 1);
    fixture_check(&seg);
}

/* More holds than the table: those past it are found by a scan, and the
 * counts come back to 0 as they end. */
Test(shm_tail, holds_past_the_table_still_hold_the_horizon)
{
    struct shm_dir *d = shm_dir_of(&seg);
    char name[16];

    for (int i = 0; i < SHM_HOLD_TABLE; i++) {
        snprintf(name, sizeof(name), "h%d", i);
        cr_assert_eq(shm_part_hold(&seg, M, nm("hq"), nm(name), T0, 100), 0);
    }
    uint64_t kept = next_seq();
    cr_assert_eq(shm_part_hold(&seg, M, nm("hq"), nm("late"), T0, 5000), 0);
    cr_assert_eq(atomic_load(&d->holds), SHM_HOLD_TABLE + 1);
    cr_assert_eq(atomic_load(&d->holds_over), 1);
    fixture_check(&seg);
    cr_assert_eq(shm_maintain(&seg, T0 + 100), 0);
    cr_assert_eq(atomic_load(&d->holds), 1);
    cr_assert_eq(atomic_load(&d->holds_over), 1,
                 "the one past the table is left");
    uint64_t s;
    cr_assert_eq(pushn("q", "p", "a", 1, T0, &s), 0);
    cr_assert_eq(shm_horizon(&seg), kept - 1, "found by the scan");
    cr_assert_eq(shm_maintain(&seg, T0 + 5000), 0);
    cr_assert_eq(atomic_load(&d->holds), 0);
    cr_assert_eq(atomic_load(&d->holds_over), 0);
    cr_assert_eq(shm_horizon(&seg), s);
    fixture_check(&seg);
}

/* ---- gaps -------------------------------------------------------------- */

Test(shm_tail, no_gap_when_nothing_left)
{
    uint64_t s;

    declare("r", 3, SHM_POLICY_REJECT, 0);
    cr_assert_eq(pushn("r", "p", "a", 3, T0, &s), 0);
    cr_assert_eq(pushn("r", "p", "b", 1, T0, NULL), -ENOSPC);
    cr_assert_eq(tail("r", "p", 0, UINT64_MAX), 3);
    cr_assert(!res.gap);
    cr_assert_eq(tail("r", "p", s + 1, UINT64_MAX), 1);
    cr_assert(!res.gap);
}

Test(shm_tail, a_gap_after_bounds_drop_messages)
{
    uint64_t s;

    declare("b", 3, SHM_POLICY_DROP_OLDEST, 0);
    cr_assert_eq(pushn("b", "p", "a", 3, T0, &s), 0);
    cr_assert_eq(pushn("b", "p", "b", 2, T0, NULL), 0);
    cr_assert_eq(tail("b", "p", 0, UINT64_MAX), 3);
    cr_assert_str_eq(payload(rec(0)), "\"a2\"");
    cr_assert_str_eq(payload(rec(2)), "\"b1\"");
    cr_assert(res.gap, "a0 and a1 were dropped");
    cr_assert_eq(tail("b", "p", s, UINT64_MAX), 3);
    cr_assert(res.gap, "a1 was dropped");
    cr_assert_eq(tail("b", "p", s + 1, UINT64_MAX), 3);
    cr_assert(!res.gap, "nothing after a1 was");
}

Test(shm_tail, a_gap_after_ttl_drops_messages)
{
    uint64_t s;

    declare("t", 100, SHM_POLICY_REJECT, 1);
    cr_assert_eq(pushn("t", "p", "a", 2, T0, &s), 0);
    cr_assert_eq(tailx(0, "t", "p", 0, UINT64_MAX, 0, 0, NULL, T0 + 999), 2);
    cr_assert(!res.gap);
    cr_assert_eq(shm_maintain(&seg, T0 + 1000), 0);
    cr_assert_eq(tailx(0, "t", "p", 0, UINT64_MAX, 0, 0, NULL, T0 + 1000), 0);
    cr_assert(res.gap);
    cr_assert_eq(tailx(0, "t", "p", s + 1, UINT64_MAX, 0, 0, NULL, T0 + 1000),
                 0);
    cr_assert(!res.gap);
    /* Expired at the read itself: dropped by it, and said. */
    cr_assert_eq(pushn("t", "p", "b", 1, T0 + 1000, NULL), 0);
    cr_assert_eq(tailx(0, "t", "p", s + 1, UINT64_MAX, 0, 0, NULL, T0 + 2000),
                 0);
    cr_assert(res.gap);
    cr_assert_eq(info("t").depth, 0);
    fixture_check(&seg);
}

Test(shm_tail, a_gap_when_every_group_is_done_or_a_reset_emptied_it)
{
    uint64_t s, s2;

    cr_assert_eq(pushn("q", "p", "a", 2, T0, &s), 0);
    cr_assert_eq(popx("q", "p", "g", 10, 1, 0, T0), 2);
    cr_assert_eq(tail("q", "p", 0, UINT64_MAX), 0);
    cr_assert(res.gap, "freed once its one group read it");
    cr_assert_eq(tail("q", "p", s + 1, UINT64_MAX), 0);
    cr_assert(!res.gap);
    cr_assert_eq(pushn("q", "p", "b", 1, T0, &s2), 0);
    cr_assert_eq(shm_queue_reset(&seg, 0, nm("q"), T0), 1);
    cr_assert_eq(tail("q", "p", s + 1, UINT64_MAX), 0);
    cr_assert(res.gap);
    fixture_check(&seg);
}

/* ---- positions ------------------------------------------------------------- */

/* A position is a start only while its message is listed: one whose
 * message left, one of another partition, or one past after is ignored. */
Test(shm_tail, a_stale_position_is_ignored)
{
    struct shm_tail_pos pos = {0}, other = {0};
    uint64_t s, s2;

    cr_assert_eq(pushn("q", "p", "a", 4, T0, &s), 0);
    cr_assert_eq(pushn("q", "o", "o", 1, T0, NULL), 0);
    cr_assert_eq(tailx(0, "q", "o", 0, UINT64_MAX, 0, 0, &other, T0), 1);
    cr_assert_eq(tailx(0, "q", "p", 0, s + 1, 0, 0, &pos, T0), 2);
    cr_assert_eq(pos.seq, s + 1);
    struct shm_tail_pos keep = pos;
    cr_assert_eq(tailx(0, "q", "p", s + 1, UINT64_MAX, 0, 0, &pos, T0), 2);
    expect("a", 2, 2);
    pos = keep;
    cr_assert_eq(tailx(0, "q", "p", s, UINT64_MAX, 0, 0, &pos, T0), 3,
                 "after below the position: from the oldest");
    expect("a", 1, 3);
    pos = other;
    cr_assert_eq(tailx(0, "q", "p", s + 1, UINT64_MAX, 0, 0, &pos, T0), 2);
    expect("a", 2, 2);
    /* Its message freed, then more pushed: the walk starts over. */
    cr_assert_eq(popx("q", "p", "g", 10, 1, 0, T0), 4);
    cr_assert_eq(pushn("q", "p", "b", 2, T0, &s2), 0);
    pos = keep;
    cr_assert_eq(tailx(0, "q", "p", s + 1, UINT64_MAX, 0, 0, &pos, T0), 2);
    expect("b", 0, 2);
    cr_assert_eq(pos.seq, s2 + 1);
    fixture_check(&seg);
}

/* ---- the checker ------------------------------------------------------- */

/* The first problem a quiet check finds, "" when sound. */
static const char *
check_first(void)
{
    static struct shm_check_report r;

    cr_assert_geq(shm_check(&seg, SHM_CHECK_QUIET, &r), 0);
    return r.first;
}

/* What the checker says of the horizon's words when they are broken. */
Test(shm_tail, the_checker_names_a_broken_horizon)
{
    struct shm_dir *d = shm_dir_of(&seg);
    uint64_t s;

    cr_assert_eq(pushn("q", "p", "a", 2, T0, &s), 0);
    cr_assert_eq(shm_part_hold(&seg, M, nm("q"), nm("held"), T0, 5000), 0);
    cr_assert_str_eq(check_first(), "");
    uint32_t i = 0;
    while (atomic_load(&d->hold_parts[i]) == 0)
        i++;
    uint32_t e = atomic_exchange(&d->hold_parts[i], 0);
    cr_assert(strstr(check_first(), "unknown to the horizon"), "%s",
              check_first());
    atomic_store(&d->hold_parts[i], e);
    struct shm_part *p = shm_dir_part(&seg, e - 1);
    atomic_store(&p->gone_seq, next_seq());
    cr_assert(strstr(check_first(), "a number not given yet"), "%s",
              check_first());
    atomic_store(&p->gone_seq, 0);
    shm_pushing_begin(&seg, 2, 0);
    cr_assert(strstr(check_first(), "push in flight"), "%s", check_first());
    shm_pushing_end(&seg, 2);
    cr_assert_str_eq(check_first(), "");
}

/* An adopt keeps the sender's numbers apart as they were (a record that
 * names its incarnation): a position there maps to one here, and what
 * follows it is what the sender held after it; another incarnation, or a
 * message here from before the adopt, maps nowhere. */
Test(shm_tail, an_adopt_keeps_the_senders_places)
{
    uint64_t s[3], after, h;

    for (int i = 0; i < 3; i++) {
        cr_assert_eq(pushn("from", "p",
                           i == 0   ? "a"
                           : i == 1 ? "b"
                                    : "c",
                           1, T0, &s[i]),
                     0);
        cr_assert_eq(pushn("noise", "p", "n", 5, T0, NULL), 0);
    }
    ho = (struct shm_ho_sink){.buf = rec_buf, .cap = sizeof(rec_buf)};
    cr_assert_eq(shm_part_take(&seg, M, nm("from"), nm("p"), T0, &ho), 3);
    cr_assert_eq(
        shm_part_adopt(&seg, M, nm("to"), nm("p"), ho.buf, ho.used, T0 + 1), 3);
    h = shm_horizon(&seg);
    cr_assert_eq(shm_tail_map(&seg, 0, nm("to"), nm("p"), 77, s[0], T0, &after),
                 0);
    cr_assert_eq(tail("to", "p", after, h), 2);
    cr_assert_str_eq(payload(rec(0)), "\"b0\"");
    cr_assert_str_eq(payload(rec(1)), "\"c0\"");
    cr_assert_eq(rec(1)->seq - rec(0)->seq, s[2] - s[1], "apart as there");
    cr_assert_eq(
        shm_tail_map(&seg, 0, nm("to"), nm("p"), 77, s[0] - 1, T0, &after), 0);
    cr_assert_eq(tail("to", "p", after, h), 3);
    cr_assert_eq(
        shm_tail_map(&seg, 0, nm("to"), nm("p"), 77, s[1] + 1, T0, &after), 0);
    cr_assert_eq(tail("to", "p", after, h), 1, "between two: after the first");
    cr_assert_eq(
        shm_tail_map(&seg, 0, nm("to"), nm("p"), 77, s[2] + 9, T0, &after), 0);
    cr_assert_eq(tail("to", "p", after, h), 0);
    cr_assert_eq(res.gap, 0);
    cr_assert_eq(shm_tail_map(&seg, 0, nm("to"), nm("p"), 78, s[0], T0, &after),
                 -ENOENT, "another incarnation");
    cr_assert_eq(
        shm_tail_map(&seg, 0, nm("from"), nm("p"), 77, s[0], T0, &after),
        -ENOENT, "no adopt there");
    /* one pushed here before the adopt: the place says nothing of it */
    cr_assert_eq(pushn("early", "p", "e", 1, T0, NULL), 0);
    cr_assert_eq(pushn("from", "p", "d", 1, T0, NULL), 0);
    ho = (struct shm_ho_sink){.buf = rec_buf, .cap = sizeof(rec_buf)};
    cr_assert_eq(shm_part_take(&seg, M, nm("from"), nm("p"), T0, &ho), 1);
    cr_assert_eq(
        shm_part_adopt(&seg, M, nm("early"), nm("p"), ho.buf, ho.used, T0 + 1),
        1);
    cr_assert_eq(
        shm_tail_map(&seg, 0, nm("early"), nm("p"), 77, s[0], T0, &after),
        -ENOENT);
    fixture_check(&seg);
}

/* What left the sender uncarried past a position is a gap here. */
Test(shm_tail, what_left_the_sender_is_a_gap_here)
{
    uint64_t s[2], after;

    cr_assert_eq(pushn("gf", "p", "a", 1, T0, &s[0]), 0);
    cr_assert_eq(pushn("gf", "p", "b", 1, T0, &s[1]), 0);
    cr_assert_eq(popx("gf", "p", "g", 1, 1, 0, T0), 1); /* a completed */
    ho = (struct shm_ho_sink){.buf = rec_buf, .cap = sizeof(rec_buf)};
    cr_assert_eq(shm_part_take(&seg, M, nm("gf"), nm("p"), T0, &ho), 1);
    cr_assert_eq(
        shm_part_adopt(&seg, M, nm("gt"), nm("p"), ho.buf, ho.used, T0 + 1), 1);
    cr_assert_eq(
        shm_tail_map(&seg, 0, nm("gt"), nm("p"), 77, s[0] - 1, T0, &after), 0);
    cr_assert_eq(tail("gt", "p", after, shm_horizon(&seg)), 1);
    cr_assert_eq(res.gap, 1, "a left before it was read");
    cr_assert_eq(shm_tail_map(&seg, 0, nm("gt"), nm("p"), 77, s[0], T0, &after),
                 0);
    cr_assert_eq(tail("gt", "p", after, shm_horizon(&seg)), 1);
    cr_assert_eq(res.gap, 0);
    expect("b", 0, 1);
}
