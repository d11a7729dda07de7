/*
 * fixture.h - what the shm suites build their segments from and check them
 * with: the usual parameters (a node's defaults: 10,000 messages and
 * 16 MiB a queue, 30 s leases, 5 attempts), a name from a C string, tagged
 * pushes, the records of a pop's sink, a slot's counters, a child killed
 * at a random moment, and the segment checker's verdict.
 */
#ifndef MAYFLY_TEST_SHM_FIXTURE_H
#define MAYFLY_TEST_SHM_FIXTURE_H

#include <sys/types.h>
#include <sys/wait.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "shm/broker.h"
#include "shm/check.h"
#include "shm/segment.h"
#include "shm/stats.h"

static inline struct shm_params
fixture_params(uint64_t max_bytes, uint32_t workers, uint64_t incarnation)
{
    struct shm_params p = {
        .max_bytes = max_bytes,
        .workers = workers,
        .implicit_idle_s = 300,
        .incarnation = incarnation,
        .defaults = {.max_length = 10000,
                     .max_bytes = 16 << 20,
                     .lease_s = 30,
                     .retry_limit = 5},
        .queue_max_bytes = 16 << 20,
        .queue_max_length = 10000,
    };
    return p;
}

static inline struct shm_name
nm(const char *s)
{
    return (struct shm_name){s, strlen(s)};
}

/* fixture_pushn - push n payloads "<tag><i>" to (q, p) of seg as worker 0;
 * returns shm_push's rc, the first seq in *seq unless seq is NULL. */
static inline int
fixture_pushn(struct shm_seg *seg, const char *q, const char *p,
              const char *tag, uint32_t n, uint64_t now, uint64_t *seq)
{
    static char bufs[64][32];
    struct shm_msg_in in[64];
    uint64_t s;

    cr_assert(n <= 64);
    for (uint32_t i = 0; i < n; i++) {
        int len = snprintf(bufs[i], sizeof(bufs[i]), "\"%s%u\"", tag, i);
        in[i] = (struct shm_msg_in){bufs[i], (uint32_t)len};
    }
    return shm_push(seg, 0, nm(q), nm(p), in, n, now, seq ? seq : &s);
}

/* fixture_popped - the i-th record of sink. */
static inline const struct shm_popped *
fixture_popped(const struct shm_sink *sink, int i)
{
    const struct shm_popped *r = shm_popped_next(sink, NULL);

    while (i-- > 0 && r != NULL)
        r = shm_popped_next(sink, r);
    cr_assert_not_null(r);
    return r;
}

/* payload - record r's payload as a C string (in a buffer the next call
 * overwrites); short, as nm(), for the assertions it sits in. */
static inline const char *
payload(const struct shm_popped *r)
{
    static char s[1024];

    memcpy(s, (const char *)(r + 1) + r->part_len, r->len);
    s[r->len] = 0;
    return s;
}

/* fixture_counter - counter c summed over every slot of seg. */
static inline uint64_t
fixture_counter(struct shm_seg *seg, enum shm_counter c)
{
    uint64_t v[SHM_C_COUNT];

    shm_counters_sum(seg, v);
    return v[c];
}

/* fixture_cmp_u64 - qsort/bsearch order of uint64_t values. */
static inline int
fixture_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* fixture_kill_after - let child pid run ns nanoseconds, then SIGKILL it
 * and reap it; returns its wait status. */
static inline int
fixture_kill_after(pid_t pid, long ns)
{
    struct timespec ts = {0, ns};
    int st;

    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return st;
}

/* fixture_check - the whole segment sound by shm_check (quiet: nothing else
 * runs), or the test fails with the first broken invariant. */
static inline void
fixture_check(struct shm_seg *seg)
{
    struct shm_check_report r;

    cr_assert_eq(shm_check(seg, SHM_CHECK_QUIET, &r), 0,
                 "segment check: %llu problems, first: %s",
                 (unsigned long long)r.problems, r.first);
}

#endif
