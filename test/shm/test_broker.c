/*
 * test_broker.c - broker.h on a real segment: push/pop order and ids,
 * leases and redelivery, acks and fencing, groups and their start, bounds,
 * the node cap, ttl, collection, listing, parked pops, and a timing print.
 */
#include <sys/wait.h>

#include <errno.h>
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
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "test/shm/fixture.h"

#define T0 1000000ULL /* a "now" far from zero */

static struct shm_seg seg;
static unsigned char sinkbuf[1 << 20];
static struct shm_sink sink;

/* A segment with max_bytes and the usual defaults. */
static void
mkseg(uint64_t max_bytes)
{
    struct shm_params p = fixture_params(max_bytes, 4, 77);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

static void
setup(void)
{
    mkseg(4 << 20);
}

/* Push n payloads "<tag><i>" to (q, p); returns rc, first seq in *seq. */
static int
pushn(const char *q, const char *p, const char *tag, uint32_t n, uint64_t now,
      uint64_t *seq)
{
    return fixture_pushn(&seg, q, p, tag, n, now, seq);
}

/* Pop up to batch for group g of (q, p) into the static sink. */
static int
popx(int w, const char *q, const char *p, const char *g, uint32_t batch,
     int auto_ack, enum shm_from from, int park, uint64_t now)
{
    struct shm_pop_req r = {nm(q), nm(p), nm(g), batch, auto_ack, from, park};

    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    return shm_pop(&seg, w, &r, now, &sink);
}

static int
pop(const char *q, const char *g, uint32_t batch, uint64_t now)
{
    return popx(0, q, "Default", g, batch, 0, SHM_FROM_ALL, 0, now);
}

/* The i-th record of the sink. */
static const struct shm_popped *
rec(int i)
{
    return fixture_popped(&sink, i);
}

/* One ack; returns its outcome. */
static uint32_t
ack1(const char *q, const char *g, uint64_t seq, uint32_t attempts,
     enum shm_ack_status st, uint64_t now)
{
    struct shm_ack a = {.seq = seq, .attempts = attempts, .status = st};

    shm_ack(&seg, 0, nm(q), nm("Default"), nm(g), &a, 1, now);
    return a.outcome;
}

static void
declare(const char *q, uint32_t max_length, uint64_t max_bytes, uint32_t policy,
        uint32_t ttl_s, uint32_t retry_limit)
{
    struct shm_qopts o = {.max_length = max_length,
                          .policy = policy,
                          .max_bytes = max_bytes,
                          .ttl_s = ttl_s,
                          .lease_s = 30,
                          .retry_limit = retry_limit};
    cr_assert_eq(shm_queue_declare(&seg, 0, nm(q), &o), 0);
}

static uint64_t
depth(const char *q)
{
    struct shm_queue_info qi;

    if (shm_queue_depth(&seg, nm(q), NULL, T0, &qi, NULL, NULL, NULL) != 0)
        return (uint64_t)-1;
    return qi.depth;
}

TestSuite(shm_broker, .init = setup, .timeout = 30);

Test(shm_broker, push_then_pop_returns_push_order_and_consecutive_ids)
{
    uint64_t s1, s2;

    cr_assert_eq(pushn("q", "Default", "a", 3, T0, &s1), 0);
    cr_assert_eq(pushn("q", "Default", "b", 2, T0, &s2), 0);
    cr_assert_eq(s2, s1 + 3);
    cr_assert_eq(pop("q", "", 10, T0), 5);
    const char *want[] = {"\"a0\"", "\"a1\"", "\"a2\"", "\"b0\"", "\"b1\""};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(rec(i)->seq, s1 + (uint64_t)i);
        cr_assert_eq(rec(i)->attempts, 1);
        cr_assert_eq(rec(i)->part_len, 7);
        cr_assert_eq(memcmp(rec(i) + 1, "Default", 7), 0);
        cr_assert_str_eq(payload(rec(i)), want[i]);
    }
    cr_assert_null(shm_popped_next(&sink, rec(4)));
}

Test(shm_broker, pop_takes_at_most_batch)
{
    cr_assert_eq(pushn("q", "Default", "a", 5, T0, NULL), 0);
    cr_assert_eq(pop("q", "", 2, T0), 2);
    cr_assert_eq(pop("q", "", 2, T0), 2);
    cr_assert_eq(pop("q", "", 2, T0), 1);
    cr_assert_eq(pop("q", "", 2, T0), 0);
}

Test(shm_broker, empty_push_succeeds_and_pushes_nothing)
{
    uint64_t s;

    cr_assert_eq(shm_push(&seg, 0, nm("q"), nm("Default"), NULL, 0, T0, &s), 0);
    cr_assert_eq(depth("q"), (uint64_t)-1);
}

Test(shm_broker, expired_lease_redelivers_with_attempts_plus_one)
{
    uint64_t s;
    uint64_t c[SHM_C_COUNT];

    cr_assert_eq(pushn("q", "Default", "a", 2, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(pop("q", "g", 1, T0 + 1000), 1);
    cr_assert_eq(rec(0)->seq, s + 1);
    cr_assert_eq(pop("q", "g", 1, T0 + 29999), 0);
    cr_assert_eq(pop("q", "g", 5, T0 + 30000), 1);
    cr_assert_eq(rec(0)->seq, s);
    cr_assert_eq(rec(0)->attempts, 2);
    cr_assert_eq(pop("q", "g", 5, T0 + 31000), 1);
    cr_assert_eq(rec(0)->seq, s + 1);
    cr_assert_eq(rec(0)->attempts, 2);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_REDELIVERY_LEASE_EXPIRED], 2);
}

Test(shm_broker, maintain_expires_leases_before_the_next_pop)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "Default", "a", 1, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(shm_maintain(&seg, T0 + 30000), 0);
    struct shm_queue_info qi;
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), NULL, T0, &qi, NULL, NULL, NULL), 0);
    cr_assert_eq(pop("q", "g", 1, T0 + 30001), 1);
    cr_assert_eq(rec(0)->attempts, 2);
}

Test(shm_broker, completed_ack_frees_and_a_second_ack_is_unknown)
{
    uint64_t s, base = shm_arena_used_bytes(&seg);

    cr_assert_eq(pushn("q", "Default", "a", 1, T0, &s), 0);
    cr_assert_gt(shm_arena_used_bytes(&seg), base);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(ack1("q", "g", s, 0, SHM_ACK_COMPLETED, T0), SHM_OUT_ACKED);
    cr_assert_eq(ack1("q", "g", s, 0, SHM_ACK_COMPLETED, T0), SHM_OUT_UNKNOWN);
    cr_assert_eq(depth("q"), 0);
    cr_assert_eq(ack1("nope", "g", s, 0, SHM_ACK_COMPLETED, T0),
                 SHM_OUT_UNKNOWN);
    cr_assert_eq(ack1("q", "other", s, 0, SHM_ACK_COMPLETED, T0),
                 SHM_OUT_UNKNOWN);
}

Test(shm_broker, failed_ack_redelivers_until_the_retry_limit_drops)
{
    uint64_t s, c[SHM_C_COUNT];

    declare("q", 100, 1 << 20, SHM_POLICY_REJECT, 0, 2);
    cr_assert_eq(pushn("q", "Default", "a", 1, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(ack1("q", "g", s, 1, SHM_ACK_FAILED, T0), SHM_OUT_REDELIVERED);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(rec(0)->attempts, 2);
    cr_assert_eq(ack1("q", "g", s, 2, SHM_ACK_RETRY, T0),
                 SHM_OUT_ACKED_DROPPED);
    cr_assert_eq(pop("q", "g", 1, T0), 0);
    cr_assert_eq(depth("q"), 0);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_RETRY_LIMIT], 1);
    cr_assert_eq(c[SHM_C_REDELIVERY_FAILED], 1);
}

Test(shm_broker, fenced_ack_of_a_superseded_delivery_is_stale)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "Default", "a", 1, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(pop("q", "g", 1, T0 + 30000), 1);
    cr_assert_eq(rec(0)->attempts, 2);
    cr_assert_eq(ack1("q", "g", s, 1, SHM_ACK_COMPLETED, T0 + 30000),
                 SHM_OUT_STALE);
    cr_assert_eq(ack1("q", "g", s, 2, SHM_ACK_COMPLETED, T0 + 30000),
                 SHM_OUT_ACKED);
}

Test(shm_broker, bare_ack_acts_on_the_current_delivery)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "Default", "a", 1, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(pop("q", "g", 1, T0 + 30000), 1);
    cr_assert_eq(ack1("q", "g", s, 0, SHM_ACK_COMPLETED, T0 + 30000),
                 SHM_OUT_ACKED);
}

/* SPEC §14: a cumulative ack completes the group's leases out to
 * consumers up to seq, whatever their attempts; one the consumer failed
 * (waiting to be redelivered), and every lease of another group, stay. */
Test(shm_broker, upto_ack_completes_the_groups_leases_up_to_seq)
{
    uint64_t s, c[SHM_C_COUNT];
    struct shm_ack a = {.attempts = 7, .status = SHM_ACK_UPTO};

    cr_assert_eq(pushn("q", "Default", "a", 6, T0, &s), 0);
    cr_assert_eq(pop("q", "h", 6, T0), 6);
    cr_assert_eq(pop("q", "g", 4, T0), 4);
    cr_assert_eq(ack1("q", "g", s + 1, 1, SHM_ACK_FAILED, T0),
                 SHM_OUT_REDELIVERED);
    a.seq = s + 3;
    shm_ack(&seg, 0, nm("q"), nm("Default"), nm("g"), &a, 1, T0);
    cr_assert_eq(a.outcome, SHM_OUT_ACKED);
    cr_assert_eq(a.count, 3);
    fixture_check(&seg);
    /* the failed one comes back first, then what g never had */
    cr_assert_eq(pop("q", "g", 10, T0), 3);
    cr_assert_eq(rec(0)->seq, s + 1);
    cr_assert_eq(rec(0)->attempts, 2);
    cr_assert_eq(rec(1)->seq, s + 4);
    /* nothing of g's up to s is leased any more */
    a.seq = s;
    shm_ack(&seg, 0, nm("q"), nm("Default"), nm("g"), &a, 1, T0);
    cr_assert_eq(a.outcome, SHM_OUT_UNKNOWN);
    cr_assert_eq(a.count, 0);
    /* h's six are its own */
    a.seq = s + 5;
    shm_ack(&seg, 0, nm("q"), nm("Default"), nm("h"), &a, 1, T0);
    cr_assert_eq(a.count, 6);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_ACK_ACKED], 9);
    fixture_check(&seg);
}

/* A cumulative ack that comes after the leases ran out (the master's
 * upkeep made them wait for redelivery) completes them as plain acks
 * would, counted, instead of answering unknown and having the whole batch
 * sent again. */
Test(shm_broker, upto_ack_after_the_leases_expired_completes_them)
{
    uint64_t s, c[SHM_C_COUNT];
    struct shm_ack a = {.status = SHM_ACK_UPTO};

    cr_assert_eq(pushn("q", "Default", "a", 4, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 3, T0), 3);
    cr_assert_eq(shm_maintain(&seg, T0 + 31000), 0);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_REDELIVERY_LEASE_EXPIRED], 3);
    cr_assert_eq(ack1("q", "g", s, 0, SHM_ACK_COMPLETED, T0 + 31000),
                 SHM_OUT_ACKED);
    a.seq = s + 2;
    shm_ack(&seg, 0, nm("q"), nm("Default"), nm("g"), &a, 1, T0 + 31000);
    cr_assert_eq(a.outcome, SHM_OUT_ACKED);
    cr_assert_eq(a.count, 2);
    fixture_check(&seg);
    /* nothing comes back: only the 4th, never popped */
    cr_assert_eq(pop("q", "g", 10, T0 + 31000), 1);
    cr_assert_eq(rec(0)->seq, s + 3);
    cr_assert_eq(rec(0)->attempts, 1);
    cr_assert_eq(depth("q"), 1);
    fixture_check(&seg);
}

Test(shm_broker, auto_ack_leases_nothing)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "Default", "a", 2, T0, &s), 0);
    cr_assert_eq(popx(0, "q", "Default", "", 5, 1, SHM_FROM_ALL, 0, T0), 2);
    cr_assert_eq(ack1("q", "", s, 0, SHM_ACK_COMPLETED, T0), SHM_OUT_UNKNOWN);
    cr_assert_eq(depth("q"), 0);
    cr_assert_eq(pop("q", "", 5, T0 + 60000), 0);
}

Test(shm_broker, extend_prolongs_a_lease_and_fences)
{
    uint64_t s;
    struct shm_ack e[2] = {{.seq = 0, .seconds = 100},
                           {.seq = 0, .attempts = 9, .seconds = 100}};

    cr_assert_eq(pushn("q", "Default", "a", 1, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    e[0].seq = e[1].seq = s;
    shm_extend(&seg, 0, nm("q"), nm("Default"), nm("g"), e, 2, T0 + 20000);
    cr_assert_eq(e[0].outcome, SHM_OUT_EXTENDED);
    cr_assert_eq(e[1].outcome, SHM_OUT_STALE);
    cr_assert_eq(pop("q", "g", 1, T0 + 30000), 0);
    cr_assert_eq(pop("q", "g", 1, T0 + 119999), 0);
    cr_assert_eq(pop("q", "g", 1, T0 + 120000), 1);
    e[0].seq = s + 100;
    shm_extend(&seg, 0, nm("q"), nm("Default"), nm("g"), e, 1, T0);
    cr_assert_eq(e[0].outcome, SHM_OUT_UNKNOWN);
}

Test(shm_broker, new_group_starts_at_all_new_or_last)
{
    uint64_t s, s2;

    cr_assert_eq(pushn("q", "Default", "a", 3, T0, &s), 0);
    cr_assert_eq(popx(0, "q", "Default", "new", 5, 0, SHM_FROM_NEW, 0, T0), 0);
    cr_assert_eq(popx(0, "q", "Default", "last", 5, 0, SHM_FROM_LAST, 0, T0),
                 1);
    cr_assert_eq(rec(0)->seq, s + 2);
    cr_assert_eq(popx(0, "q", "Default", "all", 5, 0, SHM_FROM_ALL, 0, T0), 3);
    cr_assert_eq(rec(0)->seq, s);
    cr_assert_eq(pushn("q", "Default", "b", 1, T0, &s2), 0);
    cr_assert_eq(popx(0, "q", "Default", "new", 5, 0, SHM_FROM_ALL, 0, T0), 1);
    cr_assert_eq(rec(0)->seq, s2);
}

Test(shm_broker, groups_fan_out_and_consumers_of_a_group_compete)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "Default", "a", 4, T0, &s), 0);
    cr_assert_eq(popx(0, "q", "Default", "g1", 2, 0, SHM_FROM_ALL, 0, T0), 2);
    cr_assert_eq(rec(0)->seq, s);
    cr_assert_eq(popx(1, "q", "Default", "g1", 2, 0, SHM_FROM_ALL, 0, T0), 2);
    cr_assert_eq(rec(0)->seq, s + 2);
    cr_assert_eq(popx(1, "q", "Default", "g1", 2, 0, SHM_FROM_ALL, 0, T0), 0);
    cr_assert_eq(popx(2, "q", "Default", "g2", 10, 0, SHM_FROM_ALL, 0, T0), 4);
    cr_assert_eq(popx(2, "q", "Default", "", 10, 0, SHM_FROM_ALL, 0, T0), 4);
}

Test(shm_broker, message_stays_until_every_known_group_is_done)
{
    uint64_t s;

    cr_assert_eq(pushn("q", "Default", "a", 1, T0, &s), 0);
    cr_assert_eq(pop("q", "g1", 1, T0), 1);
    cr_assert_eq(pop("q", "g2", 1, T0), 1);
    cr_assert_eq(ack1("q", "g1", s, 0, SHM_ACK_COMPLETED, T0), SHM_OUT_ACKED);
    cr_assert_eq(depth("q"), 1);
    cr_assert_eq(ack1("q", "g2", s, 0, SHM_ACK_COMPLETED, T0), SHM_OUT_ACKED);
    cr_assert_eq(depth("q"), 0);
}

Test(shm_broker, unread_message_stays_with_no_group)
{
    cr_assert_eq(pushn("q", "Default", "a", 2, T0, NULL), 0);
    cr_assert_eq(shm_maintain(&seg, T0 + 1000), 0);
    cr_assert_eq(depth("q"), 2);
}

Test(shm_broker, reset_drops_messages_and_voids_leases)
{
    uint64_t s, c[SHM_C_COUNT];

    cr_assert_eq(pushn("q", "Default", "a", 3, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(shm_queue_reset(&seg, 0, nm("q"), T0), 3);
    cr_assert_eq(ack1("q", "g", s, 0, SHM_ACK_COMPLETED, T0), SHM_OUT_UNKNOWN);
    cr_assert_eq(pop("q", "g", 5, T0 + 60000), 0);
    cr_assert_eq(depth("q"), 0);
    cr_assert_eq(pushn("q", "Default", "b", 1, T0, NULL), 0);
    cr_assert_eq(pop("q", "g", 5, T0), 1);
    cr_assert_eq(shm_queue_reset(&seg, 0, nm("none"), T0), 0);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_DELETED], 3, "a reset's drops are counted");
}

Test(shm_broker, delete_returns_all_memory_and_says_whether_it_existed)
{
    uint64_t base = shm_arena_used_bytes(&seg), c[SHM_C_COUNT];

    cr_assert_eq(pushn("q", "Default", "a", 3, T0, NULL), 0);
    cr_assert_eq(pushn("q", "p2", "a", 2, T0, NULL), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), T0), 1);
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), T0), 0);
    cr_assert_eq(depth("q"), (uint64_t)-1);
    cr_assert_eq(shm_arena_used_bytes(&seg), base);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_DELETED], 5);
}

Test(shm_broker, max_length_with_reject_refuses_the_push)
{
    declare("q", 3, 1 << 20, SHM_POLICY_REJECT, 0, 5);
    cr_assert_eq(pushn("q", "Default", "a", 2, T0, NULL), 0);
    cr_assert_eq(pushn("q", "Default", "b", 2, T0, NULL), -ENOSPC);
    cr_assert_eq(pushn("q", "other", "b", 2, T0, NULL), -ENOSPC);
    cr_assert_eq(pushn("q", "Default", "c", 1, T0, NULL), 0);
    cr_assert_eq(depth("q"), 3);
    /* The refused push to "other" made no partition (SPEC §2: a request
     * that fails changes nothing). */
    struct shm_queue_info qi;
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), NULL, T0, &qi, NULL, NULL, NULL), 0);
    cr_assert_eq(qi.partitions, 1);
}

Test(shm_broker, max_length_with_drop_oldest_evicts_pushed_partition_first)
{
    uint64_t s1, s2, s3, c[SHM_C_COUNT];

    declare("q", 4, 1 << 20, SHM_POLICY_DROP_OLDEST, 0, 5);
    cr_assert_eq(pushn("q", "p1", "a", 2, T0, &s1), 0);
    cr_assert_eq(pushn("q", "p2", "b", 2, T0, &s2), 0);
    cr_assert_eq(pushn("q", "p2", "c", 1, T0, &s3), 0);
    cr_assert_eq(depth("q"), 4);
    cr_assert_eq(popx(0, "q", "p2", "g", 9, 0, SHM_FROM_ALL, 0, T0), 2);
    cr_assert_eq(rec(0)->seq, s2 + 1);
    cr_assert_eq(pushn("q", "p2", "d", 3, T0, NULL), 0);
    cr_assert_eq(depth("q"), 4);
    cr_assert_eq(popx(0, "q", "p1", "g", 9, 0, SHM_FROM_ALL, 0, T0), 1);
    cr_assert_eq(rec(0)->seq, s1 + 1);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_DROP_OLDEST], 4);
}

/* SPEC §4: dropOldest takes the queue's oldest messages (after the pushed
 * partition's own): a push to an empty partition evicts the oldest
 * partition's head, not the newest partition's. */
Test(shm_broker, drop_oldest_from_an_empty_partition_evicts_the_queues_oldest)
{
    uint64_t s_old, s_new;

    declare("q", 4, 1 << 20, SHM_POLICY_DROP_OLDEST, 0, 5);
    cr_assert_eq(pushn("q", "A", "old", 3, T0, &s_old), 0);
    cr_assert_eq(pushn("q", "B", "new", 1, T0 + 50, &s_new), 0);
    cr_assert_eq(pushn("q", "C", "t", 1, T0 + 100, NULL), 0);
    cr_assert_eq(depth("q"), 4);
    cr_assert_eq(popx(0, "q", "B", "g", 9, 0, SHM_FROM_ALL, 0, T0), 1);
    cr_assert_eq(rec(0)->seq, s_new, "B's newer message stays");
    cr_assert_eq(popx(0, "q", "A", "g", 9, 0, SHM_FROM_ALL, 0, T0), 2);
    cr_assert_eq(rec(0)->seq, s_old + 1, "A's oldest went");
    /* Two to evict, both from A (older than B's head), then B's. */
    cr_assert_eq(shm_queue_reset(&seg, 0, nm("q"), T0), 4);
    cr_assert_eq(pushn("q", "A", "a", 2, T0 + 200, &s_old), 0);
    cr_assert_eq(pushn("q", "B", "b", 2, T0 + 300, &s_new), 0);
    cr_assert_eq(pushn("q", "C", "c", 3, T0 + 400, NULL), 0);
    cr_assert_eq(popx(0, "q", "A", "h", 9, 0, SHM_FROM_ALL, 0, T0), 0);
    cr_assert_eq(popx(0, "q", "B", "h", 9, 0, SHM_FROM_ALL, 0, T0), 1);
    cr_assert_eq(rec(0)->seq, s_new + 1);
}

/* SPEC §4: under dropOldest a batch larger than the bounds is taken and
 * keeps its newest: the queue's older messages go first, then the batch's
 * own oldest, each counted as an eviction.  Under reject it could never
 * fit: -EFBIG, not the -ENOSPC a later try may pass. */
Test(shm_broker, a_batch_past_the_bounds_keeps_its_newest_under_drop_oldest)
{
    uint64_t s, c[SHM_C_COUNT];

    declare("q", 4, 1 << 20, SHM_POLICY_DROP_OLDEST, 0, 5);
    cr_assert_eq(pushn("q", "A", "old", 2, T0, NULL), 0);
    cr_assert_eq(pushn("q", "B", "was", 1, T0, NULL), 0);
    cr_assert_eq(pushn("q", "B", "new", 7, T0 + 1, &s), 0);
    cr_assert_eq(depth("q"), 4);
    cr_assert_eq(popx(0, "q", "B", "g", 9, 1, SHM_FROM_ALL, 0, T0), 4);
    cr_assert_eq(rec(0)->seq, s + 3);
    cr_assert_str_eq(payload(rec(0)), "\"new3\"");
    cr_assert_str_eq(payload(rec(3)), "\"new6\"");
    cr_assert_eq(popx(0, "q", "A", "g", 9, 1, SHM_FROM_ALL, 0, T0), 0);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_DROP_OLDEST], 6);
    cr_assert_eq(c[SHM_C_PUSH_ACCEPTED], 10);
    cr_assert_eq(c[SHM_C_PUSH_REJECTED_FULL] + c[SHM_C_PUSH_REJECTED_TOO_LARGE],
                 0);
    /* maxBytes: 256 bytes hold four messages of one cell */
    declare("b", 100, 256, SHM_POLICY_DROP_OLDEST, 0, 5);
    cr_assert_eq(pushn("b", "Default", "x", 6, T0, &s), 0);
    cr_assert_eq(depth("b"), 4);
    cr_assert_eq(popx(0, "b", "Default", "g", 9, 1, SHM_FROM_ALL, 0, T0), 4);
    cr_assert_str_eq(payload(rec(0)), "\"x2\"");
    fixture_check(&seg);
    declare("r", 4, 1 << 20, SHM_POLICY_REJECT, 0, 5);
    cr_assert_eq(pushn("r", "A", "x", 5, T0, NULL), -EFBIG);
    declare("rb", 100, 256, SHM_POLICY_REJECT, 0, 5);
    cr_assert_eq(pushn("rb", "A", "x", 5, T0, NULL), -EFBIG);
    cr_assert_eq(pushn("rb", "A", "x", 4, T0, NULL), 0);
    cr_assert_eq(pushn("rb", "A", "x", 1, T0, NULL), -ENOSPC);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_PUSH_REJECTED_TOO_LARGE], 2);
    cr_assert_eq(c[SHM_C_PUSH_REJECTED_FULL], 1);
}

/* SPEC §2: a request that fails changes nothing; a refused push to a
 * queue that did not exist leaves no queue behind. */
Test(shm_broker, refused_push_to_a_missing_queue_makes_no_queue)
{
    static char big[20 << 20];
    struct shm_msg_in m = {big, sizeof(big)};
    struct shm_msg_in many[1] = {{"1", 1}};
    uint64_t s, base = shm_arena_used_bytes(&seg);

    memset(big, 'x', sizeof(big));
    cr_assert_eq(shm_push(&seg, 0, nm("q"), nm("Default"), &m, 1, T0, &s),
                 -EMSGSIZE);
    cr_assert_eq(depth("q"), (uint64_t)-1, "no queue after EMSGSIZE");
    cr_assert_eq(shm_push(&seg, 0, nm("q"), nm("Default"), many, 1, T0, &s), 0);
    cr_assert_eq(depth("q"), 1);
    cr_assert(shm_arena_used_bytes(&seg) > base);
}

/* SPEC §3: each group sees every message.  A group that polls a queue
 * that has nothing yet (or no partition yet) is known to it from then on. */
Test(shm_broker, group_polling_an_empty_queue_holds_the_next_push)
{
    cr_assert_eq(popx(0, "q", "", "worker", 5, 0, SHM_FROM_ALL, 0, T0), 0);
    cr_assert_eq(popx(0, "q", "", "audit", 5, 0, SHM_FROM_ALL, 1, T0), 0);
    shm_unpark(&seg, 0, shm_pop_handle(&seg, nm("q"), nm("")));
    cr_assert_eq(pushn("q", "Default", "order", 1, T0 + 1, NULL), 0);
    cr_assert_eq(popx(0, "q", "", "worker", 5, 0, SHM_FROM_ALL, 0, T0 + 2), 1);
    cr_assert_eq(ack1("q", "worker", rec(0)->seq, 1, SHM_ACK_COMPLETED, T0 + 2),
                 SHM_OUT_ACKED);
    cr_assert_eq(popx(0, "q", "", "audit", 5, 0, SHM_FROM_ALL, 0, T0 + 3), 1,
                 "audit polled first: the message waited for it");
    cr_assert_str_eq(payload(rec(0)), "\"order0\"");
}

/* from=new on an empty queue starts at the next push, not after it. */
Test(shm_broker, from_new_on_an_empty_queue_gets_the_next_push)
{
    declare("d", 100, 1 << 20, SHM_POLICY_REJECT, 0, 5);
    cr_assert_eq(popx(0, "n", "", "g", 5, 0, SHM_FROM_NEW, 0, T0), 0);
    cr_assert_eq(popx(0, "d", "", "g", 5, 0, SHM_FROM_NEW, 0, T0), 0);
    cr_assert_eq(pushn("n", "Default", "m", 1, T0 + 1, NULL), 0);
    cr_assert_eq(pushn("d", "p", "m", 1, T0 + 1, NULL), 0);
    cr_assert_eq(popx(0, "n", "", "g", 5, 0, SHM_FROM_NEW, 0, T0 + 2), 1);
    cr_assert_eq(popx(0, "d", "", "g", 5, 0, SHM_FROM_NEW, 0, T0 + 2), 1,
                 "a declared queue with no partition yet");
}

Test(shm_broker, max_bytes_counts_cells_and_one_oversized_message_is_emsgsize)
{
    char big[300];
    struct shm_msg_in m = {big, sizeof(big)};
    uint64_t s;

    memset(big, 'x', sizeof(big));
    declare("q", 100, 256, SHM_POLICY_REJECT, 0, 5);
    cr_assert_eq(shm_push(&seg, 0, nm("q"), nm("Default"), &m, 1, T0, &s),
                 -EMSGSIZE);
    cr_assert_eq(pushn("q", "Default", "a", 2, T0, NULL), 0); /* 2 x 64 */
    cr_assert_eq(pushn("q", "Default", "a", 2, T0, NULL), 0); /* 256 */
    cr_assert_eq(pushn("q", "Default", "a", 1, T0, NULL), -ENOSPC);
}

Test(shm_broker, node_cap_refuses_then_accepts_once_acks_free_memory)
{
    uint64_t s;
    int rc = 0, pushed = 0;

    shm_segment_destroy(&seg);
    mkseg(256 << 10);
    while ((rc = pushn("q", "Default", "a", 10, T0, &s)) == 0)
        pushed += 10;
    cr_assert_eq(rc, -ENOBUFS);
    cr_assert_gt(pushed, 100);
    /* The lease reserve lets consumers of a full node lease, then ack. */
    cr_assert_eq(popx(0, "q", "Default", "", 100, 0, SHM_FROM_ALL, 0, T0), 100);
    for (int i = 0; i < 100; i++) {
        struct shm_ack a = {.seq = rec(i)->seq};
        shm_ack(&seg, 0, nm("q"), nm("Default"), nm(""), &a, 1, T0);
        cr_assert_eq(a.outcome, SHM_OUT_ACKED);
    }
    int n = popx(0, "q", "Default", "", 100000, 1, SHM_FROM_ALL, 0, T0);
    cr_assert_eq(n, pushed - 100);
    cr_assert_eq(pushn("q", "Default", "a", 10, T0, &s), 0);
}

/* A batch larger than what the node's memory holds for pushes could never
 * be stored: -EFBIG (413), not the -ENOBUFS (503) of a node that is full
 * for now; whatever the policy, as the batch is held whole first. */
Test(shm_broker, a_batch_past_the_node_cap_is_efbig)
{
    static char big[3][100 << 10];
    struct shm_msg_in m[3];
    uint64_t s, c[SHM_C_COUNT];

    shm_segment_destroy(&seg);
    mkseg(256 << 10);
    for (int i = 0; i < 3; i++) {
        memset(big[i], 'x', sizeof(big[i]));
        big[i][0] = big[i][sizeof(big[i]) - 1] = '"';
        m[i] = (struct shm_msg_in){big[i], sizeof(big[i])};
    }
    declare("q", 100, 1 << 20, SHM_POLICY_REJECT, 0, 5);
    declare("d", 100, 1 << 20, SHM_POLICY_DROP_OLDEST, 0, 5);
    cr_assert_eq(shm_push(&seg, 0, nm("q"), nm("Default"), m, 3, T0, &s),
                 -EFBIG);
    cr_assert_eq(shm_push(&seg, 0, nm("d"), nm("Default"), m, 3, T0, &s),
                 -EFBIG);
    cr_assert_eq(depth("q"), 0);
    cr_assert_eq(shm_push(&seg, 0, nm("q"), nm("Default"), m, 2, T0, &s), 0);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_PUSH_REJECTED_TOO_LARGE], 2);
    cr_assert_eq(c[SHM_C_PUSH_UNAVAILABLE], 0);
}

Test(shm_broker, ttl_drops_pending_and_leased_messages)
{
    uint64_t s, c[SHM_C_COUNT];

    declare("q", 100, 1 << 20, SHM_POLICY_REJECT, 2, 5);
    cr_assert_eq(pushn("q", "Default", "a", 2, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(shm_maintain(&seg, T0 + 1999), 0);
    cr_assert_eq(depth("q"), 2);
    cr_assert_eq(shm_maintain(&seg, T0 + 2000), 0);
    cr_assert_eq(depth("q"), 0);
    cr_assert_eq(ack1("q", "g", s, 0, SHM_ACK_COMPLETED, T0), SHM_OUT_UNKNOWN);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_TTL], 2);
}

Test(shm_broker, idle_implicit_queue_is_collected_to_the_byte)
{
    uint64_t s, base = shm_arena_used_bytes(&seg);
    struct shm_queue_info qi;

    cr_assert_eq(pushn("inbox/7", "Default", "a", 2, T0, &s), 0);
    cr_assert_eq(pushn("inbox/7", "room 2", "a", 1, T0, NULL), 0);
    cr_assert_eq(popx(0, "inbox/7", "", "g", 9, 0, SHM_FROM_ALL, 0, T0), 3);
    for (int i = 0; i < 3; i++) {
        struct shm_ack a = {.seq = rec(i)->seq};
        struct shm_name part = {(const char *)(rec(i) + 1), rec(i)->part_len};
        shm_ack(&seg, 0, nm("inbox/7"), part, nm("g"), &a, 1, T0);
        cr_assert_eq(a.outcome, SHM_OUT_ACKED);
    }
    cr_assert_eq(shm_maintain(&seg, T0 + 299999), 0);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("inbox/7"), NULL, T0, &qi, NULL, NULL, NULL),
        0);
    cr_assert_eq(shm_maintain(&seg, T0 + 300000), 0);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("inbox/7"), NULL, T0, &qi, NULL, NULL, NULL),
        -ENOENT);
    cr_assert_eq(shm_arena_used_bytes(&seg), base);
}

Test(shm_broker, declared_queue_is_never_collected)
{
    declare("q", 100, 1 << 20, SHM_POLICY_REJECT, 0, 5);
    cr_assert_eq(shm_maintain(&seg, T0 + 10000000), 0);
    cr_assert_eq(depth("q"), 0);
}

Test(shm_broker, any_partition_pop_serves_partitions_round_robin)
{
    int seen[3] = {0};

    cr_assert_eq(pushn("q", "p0", "a", 3, T0, NULL), 0);
    cr_assert_eq(pushn("q", "p1", "a", 3, T0, NULL), 0);
    cr_assert_eq(pushn("q", "p2", "a", 3, T0, NULL), 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(popx(0, "q", "", "g", 1, 0, SHM_FROM_ALL, 0, T0), 1);
        cr_assert_eq(rec(0)->part_len, 2);
        seen[((const char *)(rec(0) + 1))[1] - '0']++;
    }
    cr_assert_eq(seen[0] + seen[1] + seen[2], 3);
    cr_assert_eq(seen[0], 1);
    cr_assert_eq(seen[1], 1);
    cr_assert_eq(popx(0, "q", "", "g", 100, 0, SHM_FROM_ALL, 0, T0), 6);
}

/* Parked pop on a partition (or queue), then a push from another process. */
static void
park_then_push(const char *part)
{
    uint64_t out[8];

    cr_assert_eq(popx(0, "q", part, "g", 1, 0, SHM_FROM_ALL, 1, T0), 0);
    uint64_t h = shm_pop_handle(&seg, nm("q"), nm(part));
    cr_assert_neq(h, 0);
    shm_park_count(&seg, 0, h, 1); /* as the worker does when it parks */
    struct shm_queue_info qi;
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), NULL, T0, &qi, NULL, NULL, NULL), 0);
    cr_assert_eq(qi.waiting, 1);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        struct shm_msg_in m = {"1", 1};
        uint64_t s;
        _exit(shm_push(&seg, 1, nm("q"), nm("Default"), &m, 1, T0, &s) == 0
                  ? 0
                  : 1);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), 1);
    cr_assert_eq(out[0], h);
    cr_assert_eq(popx(0, "q", part, "g", 1, 0, SHM_FROM_ALL, 0, T0), 1);
}

Test(shm_broker, parked_pop_on_a_partition_is_woken_by_a_push_elsewhere)
{
    park_then_push("Default");
}

Test(shm_broker, parked_any_partition_pop_is_woken_by_a_push_elsewhere)
{
    cr_assert_eq(pushn("q", "Default", "a", 1, T0, NULL), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    park_then_push("");
}

Test(shm_broker, unpark_clears_the_waiter)
{
    uint64_t out[8];

    cr_assert_eq(popx(0, "q", "Default", "g", 1, 0, SHM_FROM_ALL, 1, T0), 0);
    shm_unpark(&seg, 0, shm_pop_handle(&seg, nm("q"), nm("Default")));
    cr_assert_eq(pushn("q", "Default", "a", 1, T0, NULL), 0);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), 0);
}

Test(shm_broker, sink_too_small_is_enomem_with_need_and_leases_nothing)
{
    unsigned char small[16];
    struct shm_pop_req r = {nm("q"), nm("Default"), nm("g"), 1,
                            0,       SHM_FROM_ALL,  0};
    struct shm_sink k = {.buf = small, .cap = sizeof(small)};

    cr_assert_eq(pushn("q", "Default", "a", 1, T0, NULL), 0);
    cr_assert_eq(shm_pop(&seg, 0, &r, T0, &k), -ENOMEM);
    cr_assert_eq(k.need, 40); /* 24 + "Default" + "\"a0\"" rounded to 8 */
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(rec(0)->attempts, 1);
}

Test(shm_broker, release_makes_leases_deliverable_without_an_attempt)
{
    cr_assert_eq(pushn("q", "Default", "a", 2, T0, NULL), 0);
    cr_assert_eq(pop("q", "g", 2, T0), 2);
    shm_release(&seg, 0, nm("q"), nm("g"), &sink, T0);
    cr_assert_eq(pop("q", "g", 5, T0), 2);
    cr_assert_eq(rec(0)->attempts, 1);
    cr_assert_eq(rec(1)->attempts, 1);
}

/* Listing callback: count and check order. */
static void
list_fn(void *arg, const struct shm_queue_info *q)
{
    char *out = arg;

    strncat(out, q->name, q->name_len);
    strcat(out, q->declared ? "*," : ",");
}

Test(shm_broker, list_is_sorted_prefixed_and_limited)
{
    char out[256] = "";

    cr_assert_eq(pushn("b", "Default", "a", 1, T0, NULL), 0);
    cr_assert_eq(pushn("ab", "Default", "a", 1, T0, NULL), 0);
    declare("a", 100, 1 << 20, SHM_POLICY_REJECT, 0, 5);
    cr_assert_eq(pushn("c", "Default", "a", 1, T0, NULL), 0);
    cr_assert_eq(
        shm_queue_list_after(&seg, nm(""), nm(""), 3, T0, list_fn, out), 3);
    cr_assert_str_eq(out, "a*,ab,b,");
    out[0] = 0;
    cr_assert_eq(
        shm_queue_list_after(&seg, nm("a"), nm(""), 10, T0, list_fn, out), 2);
    cr_assert_str_eq(out, "a*,ab,");
}

static uint64_t dep_pending[4];

static void
dep_part(void *arg, const struct shm_part_info *p)
{
    (void)arg;
    dep_pending[0] += p->pending;
    dep_pending[1] += p->leased;
}

static void
dep_group(void *arg, const struct shm_group_info *g)
{
    (void)arg;
    dep_pending[2] += g->pending;
    dep_pending[3]++;
}

Test(shm_broker, depth_reports_pending_and_leased_per_group)
{
    struct shm_queue_info qi;
    struct shm_name g = nm("g");

    cr_assert_eq(pushn("q", "Default", "a", 5, T0, NULL), 0);
    cr_assert_eq(pop("q", "g", 2, T0), 2);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), &g, T0, &qi, dep_part, dep_group, NULL),
        0);
    cr_assert_eq(qi.depth, 5);
    cr_assert_eq(qi.leased, 2);
    cr_assert_eq(qi.groups, 1);
    cr_assert_eq(dep_pending[0], 3);
    cr_assert_eq(dep_pending[1], 2);
    cr_assert_eq(dep_pending[2], 3);
    cr_assert_eq(dep_pending[3], 1);
}

/* SPEC §3: a group is forgotten when it neither pops nor acks; a pop
 * parked longer than implicit_idle_s is still a pop going on.  Forgetting
 * it made a from=new group miss the push that woke it. */
Test(shm_broker, a_group_waiting_in_a_parked_pop_is_not_forgotten)
{
    uint64_t h = 0;

    cr_assert_eq(popx(0, "q", "", "n", 5, 0, SHM_FROM_NEW, 1, T0), 0);
    h = shm_pop_handle(&seg, nm("q"), nm(""));
    shm_park_count(&seg, 0, h, 1);
    cr_assert_eq(shm_maintain(&seg, T0 + 301000), 0);
    cr_assert_eq(pushn("q", "Default", "m", 1, T0 + 301001, NULL), 0);
    shm_park_count(&seg, 0, h, -1);
    shm_unpark(&seg, 0, h);
    cr_assert_eq(popx(0, "q", "", "n", 5, 0, SHM_FROM_NEW, 0, T0 + 301002), 1,
                 "the waiting group was forgotten and missed the push");
    /* Once nobody waits, an idle group goes as before. */
    cr_assert_eq(ack1("q", "n", rec(0)->seq, 1, SHM_ACK_COMPLETED, T0 + 301002),
                 SHM_OUT_ACKED);
    cr_assert_eq(shm_maintain(&seg, T0 + 700000), 0);
    struct shm_queue_info qi;
    cr_assert_eq(shm_queue_depth(&seg, nm("q"), NULL, T0 + 700000, &qi, NULL,
                                 NULL, NULL),
                 -ENOENT, "the idle, empty queue is collected");
}

/* mayfly_messages{state="leased"} counts live leases: one whose lease ran
 * out (or was failed or released) waits as pending until it goes out. */
Test(shm_broker, leased_gauge_leaves_out_expired_leases)
{
    struct shm_gauges g;
    uint64_t s;

    cr_assert_eq(pushn("q", "Default", "a", 3, T0, &s), 0);
    cr_assert_eq(pop("q", "g", 3, T0), 3);
    shm_gauges_read(&seg, T0, &g);
    cr_assert_eq(g.leased, 3);
    cr_assert_eq(g.pending, 0);
    cr_assert_eq(shm_maintain(&seg, T0 + 31000), 0);
    shm_gauges_read(&seg, T0 + 31000, &g);
    cr_assert_eq(g.leased, 0, "expired leases are not leased");
    cr_assert_eq(g.pending, 3);
    cr_assert_eq(pop("q", "g", 1, T0 + 31000), 1);
    cr_assert_eq(ack1("q", "g", s + 1, 0, SHM_ACK_FAILED, T0 + 31000),
                 SHM_OUT_REDELIVERED);
    shm_gauges_read(&seg, T0 + 31000, &g);
    cr_assert_eq(g.leased, 1);
    cr_assert_eq(g.pending, 2);
    cr_assert_eq(ack1("q", "g", s, 0, SHM_ACK_COMPLETED, T0 + 31000),
                 SHM_OUT_ACKED);
    shm_gauges_read(&seg, T0 + 31000, &g);
    cr_assert_eq(g.leased, 0);
    cr_assert_eq(g.pending, 2);
}

static uint64_t
ns_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

Test(shm_broker, timing_of_push_100_and_pop_100)
{
    static char pay[256];
    struct shm_msg_in in[100];
    static struct shm_ack acks[100];
    enum { ROUNDS = 200 };
    static uint64_t t[4][ROUNDS];
    uint64_t s;

    shm_segment_destroy(&seg);
    mkseg(64 << 20);
    memset(pay, 'x', sizeof(pay));
    for (int i = 0; i < 100; i++)
        in[i] = (struct shm_msg_in){pay, sizeof(pay)};
    for (int r = -50; r < ROUNDS; r++) { /* 50 rounds warm the pages up */
        uint64_t t0 = ns_now();
        cr_assert_eq(
            shm_push(&seg, 0, nm("bench"), nm("Default"), in, 100, T0, &s), 0);
        uint64_t t1 = ns_now();
        cr_assert_eq(
            popx(0, "bench", "Default", "", 100, 1, SHM_FROM_ALL, 0, T0), 100);
        uint64_t t2 = ns_now();
        cr_assert_eq(
            shm_push(&seg, 0, nm("bench2"), nm("Default"), in, 100, T0, &s), 0);
        uint64_t t3 = ns_now();
        cr_assert_eq(
            popx(0, "bench2", "Default", "g", 100, 0, SHM_FROM_ALL, 0, T0),
            100);
        uint64_t t4 = ns_now();
        const struct shm_popped *m = NULL;
        for (int i = 0; (m = shm_popped_next(&sink, m)) != NULL; i++)
            acks[i] = (struct shm_ack){.seq = m->seq, .attempts = 1};
        shm_ack(&seg, 0, nm("bench2"), nm("Default"), nm("g"), acks, 100, T0);
        uint64_t t5 = ns_now();
        cr_assert_eq(acks[99].outcome, SHM_OUT_ACKED);
        if (r >= 0) {
            t[0][r] = t1 - t0;
            t[1][r] = t2 - t1;
            t[2][r] = t4 - t3;
            t[3][r] = t5 - t4;
        }
    }
    for (int k = 0; k < 4; k++)
        qsort(t[k], ROUNDS, sizeof(uint64_t), fixture_cmp_u64);
    printf("shm_broker timing (median of %d): push 100 x 256 B %llu ns, pop "
           "100 (autoAck) %llu ns, pop 100 leased %llu ns, ack 100 %llu ns\n",
           ROUNDS, (unsigned long long)t[0][ROUNDS / 2],
           (unsigned long long)t[1][ROUNDS / 2],
           (unsigned long long)t[2][ROUNDS / 2],
           (unsigned long long)t[3][ROUNDS / 2]);
}

Test(shm_broker, idle_group_is_forgotten_and_stops_holding_messages)
{
    uint64_t s;
    struct shm_queue_info qi;

    cr_assert_eq(pushn("q", "Default", "a", 2, T0, &s), 0);
    cr_assert_eq(pop("q", "slow", 2, T0), 2);
    cr_assert_eq(pop("q", "fast", 2, T0 + 1000), 2);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(
            ack1("q", "fast", s + (uint64_t)i, 0, SHM_ACK_COMPLETED, T0 + 1000),
            SHM_OUT_ACKED);
    cr_assert_eq(depth("q"), 2);
    cr_assert_eq(shm_maintain(&seg, T0 + 300000), 0);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), NULL, T0, &qi, NULL, NULL, NULL), 0);
    cr_assert_eq(qi.groups, 1);
    cr_assert_eq(qi.depth, 0);
    cr_assert_eq(ack1("q", "slow", s, 0, SHM_ACK_COMPLETED, T0 + 300000),
                 SHM_OUT_UNKNOWN);
}

/* A consumer inside a lease longer than the idle time keeps its group. */
Test(shm_broker, group_inside_a_long_lease_is_not_forgotten)
{
    uint64_t s;
    struct shm_queue_info qi;
    struct shm_qopts o = shm_params_of(&seg)->defaults;

    o.lease_s = 3600;
    cr_assert_eq(shm_queue_declare(&seg, 0, nm("q"), &o), 0);
    cr_assert_eq(pushn("q", "Default", "a", 1, T0, &s), 0);
    cr_assert_eq(pop("q", "slow", 1, T0), 1);
    cr_assert_eq(shm_maintain(&seg, T0 + 300000), 0);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), NULL, T0, &qi, NULL, NULL, NULL), 0);
    cr_assert_eq(qi.groups, 1);
    cr_assert_eq(ack1("q", "slow", s, 0, SHM_ACK_COMPLETED, T0 + 300000),
                 SHM_OUT_ACKED, "the lease survived");
}

/* Two processes push 1000 messages each while this one pops them in
 * competing batches with two worker slots: each arrives exactly once. */
Test(shm_broker, concurrent_pushers_and_poppers_deliver_each_message_once)
{
    enum { PER = 1000 };
    pid_t kid[2];
    static unsigned char seen[2 * PER + 64];
    int got = 0;

    for (int k = 0; k < 2; k++) {
        kid[k] = fork();
        cr_assert_neq(kid[k], -1);
        if (kid[k] == 0) {
            for (int i = 0; i < PER; i++) {
                char b[32];
                int len = snprintf(b, sizeof(b), "%d", k * PER + i);
                struct shm_msg_in m = {b, (uint32_t)len};
                uint64_t s;
                if (shm_push(&seg, 1 + k, nm("q"), nm(i % 2 ? "a" : "b"), &m, 1,
                             T0, &s) != 0)
                    _exit(1);
            }
            _exit(0);
        }
    }
    for (int spins = 0; got < 2 * PER && spins < 10000000; spins++) {
        int n = popx(spins % 2 ? 3 : 0, "q", "", "", 7, 1, SHM_FROM_ALL, 0, T0);
        cr_assert_geq(n, 0);
        for (int i = 0; i < n; i++) {
            int v = atoi(payload(rec(i)));
            cr_assert(v >= 0 && v < 2 * PER);
            cr_assert_eq(seen[v], 0, "message %d twice", v);
            seen[v] = 1;
        }
        got += n;
    }
    for (int k = 0; k < 2; k++) {
        int st;
        cr_assert_eq(waitpid(kid[k], &st, 0), kid[k]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    cr_assert_eq(got, 2 * PER);
}

Test(shm_broker, node_cap_push_reclaims_expired_messages_first)
{
    uint64_t s, c[SHM_C_COUNT];
    int rc;

    shm_segment_destroy(&seg);
    mkseg(256 << 10);
    declare("q", 10000, 1 << 20, SHM_POLICY_REJECT, 1, 5);
    while ((rc = pushn("q", "Default", "a", 10, T0, &s)) == 0)
        ;
    cr_assert_eq(rc, -ENOBUFS);
    cr_assert_eq(pushn("q", "Default", "b", 10, T0 + 999, &s), -ENOBUFS);
    cr_assert_eq(pushn("q", "Default", "b", 10, T0 + 1000, &s), 0);
    cr_assert_eq(depth("q"), 10);
    shm_counters_sum(&seg, c);
    cr_assert_gt(c[SHM_C_DROP_TTL], 0);
    cr_assert_eq(c[SHM_C_PUSH_UNAVAILABLE], 2);
}

/* A peek (a peer's watch) takes nothing and marks nothing read, so the
 * request it saw can still be withdrawn, by its replyTo; withdrawn, no
 * peek or pop finds it. */
Test(shm_broker, a_peek_leaves_a_request_withdrawable)
{
    static const char inbox[] = "mayfly.inbox/n0/1.0.1.1";
    char data[64];
    uint64_t seq;
    struct shm_pop_req r = {nm("q"), nm("Default"), nm("g"), 10,
                            0,       SHM_FROM_ALL,  0};

    snprintf(data, sizeof(data), "%s{\"n\":1}", inbox);
    struct shm_msg_in m = {data, (uint32_t)strlen(data)};
    cr_assert_eq(shm_push_request(&seg, 0, nm("q"), nm("Default"), &m,
                                  sizeof(inbox) - 1, T0, &seq),
                 0);
    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    cr_assert_eq(shm_peek(&seg, 0, &r, T0), 1);
    cr_assert_eq(shm_withdraw_reply(&seg, 0, nm("q"), nm("Default"),
                                    nm("mayfly.inbox/n0/1.0.1.2"), T0),
                 0, "another inbox's request");
    cr_assert_eq(
        shm_withdraw_reply(&seg, 0, nm("q"), nm("Default"), nm(inbox), T0), 1,
        "the peek left it unread");
    cr_assert_eq(shm_peek(&seg, 0, &r, T0), 0);
    cr_assert_eq(pop("q", "g", 10, T0), 0);
    cr_assert_eq(shm_withdraw(&seg, 0, nm("q"), nm("Default"), seq, T0), 0);
}

/* push_req - a request of payload to (q, Default) with replyTo inbox;
 * returns shm_push_request's rc, its sequence in *seq. */
static int
push_req(const char *q, const char *inbox, const char *pl, uint64_t *seq)
{
    char data[128];
    int n = snprintf(data, sizeof(data), "%s%s", inbox, pl);
    struct shm_msg_in m = {data, (uint32_t)n};

    return shm_push_request(&seg, 0, nm(q), nm("Default"), &m,
                            (uint32_t)strlen(inbox), T0, seq);
}

/* queue_bytes - q's accounted bytes. */
static uint64_t
queue_bytes(const char *q)
{
    struct shm_queue_info qi;

    cr_assert_eq(shm_queue_depth(&seg, nm(q), NULL, T0, &qi, NULL, NULL, NULL),
                 0);
    return qi.bytes;
}

/* A request withdrawn unread in the middle of its partition (messages
 * before and after it, two groups that read neither yet) is dropped at
 * once: out of depth, bytes and the arena, no group is given it, and the
 * messages around it are delivered to each group in order. */
Test(shm_broker, a_request_withdrawn_unread_in_the_middle_is_dropped_at_once)
{
    static const char inbox[] = "mayfly.inbox/n0/1.0.1.1";
    uint64_t a, b, seq;
    const char *g[] = {"g1", "g2"};

    for (int i = 0; i < 2; i++)
        cr_assert_eq(pop("q", g[i], 10, T0), 0); /* both groups known */
    cr_assert_eq(pushn("q", "Default", "a", 2, T0, &a), 0);
    uint64_t bytes0 = queue_bytes("q");
    cr_assert_eq(push_req("q", inbox, "{\"n\":1}", &seq), 0);
    uint64_t req = queue_bytes("q") - bytes0;
    cr_assert_eq(pushn("q", "Default", "b", 2, T0, &b), 0);
    uint64_t bytes1 = queue_bytes("q"), used1 = shm_arena_used_bytes(&seg);
    cr_assert_eq(depth("q"), 5);
    cr_assert_eq(shm_withdraw(&seg, 0, nm("q"), nm("Default"), seq, T0), 1);
    cr_assert_eq(depth("q"), 4);
    cr_assert_eq(queue_bytes("q"), bytes1 - req, "the request's bytes left");
    cr_assert_lt(shm_arena_used_bytes(&seg), used1, "its cells were freed");
    fixture_check(&seg);
    cr_assert_eq(shm_withdraw(&seg, 0, nm("q"), nm("Default"), seq, T0), 0,
                 "gone: nothing to withdraw twice");
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pop("q", g[i], 10, T0), 4);
        const char *want[] = {"\"a0\"", "\"a1\"", "\"b0\"", "\"b1\""};
        for (int k = 0; k < 4; k++) {
            cr_assert_str_eq(payload(rec(k)), want[k]);
            cr_assert_eq(rec(k)->reply_len, 0);
        }
    }
    fixture_check(&seg);
}

/* The request is found by its replyTo too (a requester whose store's
 * answer never came), in the middle, and dropped the same way. */
Test(shm_broker, a_request_withdrawn_by_its_reply_to_is_dropped_at_once)
{
    static const char inbox[] = "mayfly.inbox/n0/1.0.1.7";
    uint64_t seq;

    cr_assert_eq(pop("q", "g", 10, T0), 0);
    cr_assert_eq(pushn("q", "Default", "a", 1, T0, NULL), 0);
    cr_assert_eq(push_req("q", "mayfly.inbox/n0/1.0.1.6", "1", &seq), 0);
    cr_assert_eq(push_req("q", inbox, "2", &seq), 0);
    cr_assert_eq(pushn("q", "Default", "b", 1, T0, NULL), 0);
    cr_assert_eq(
        shm_withdraw_reply(&seg, 0, nm("q"), nm("Default"), nm(inbox), T0), 1);
    cr_assert_eq(depth("q"), 3);
    fixture_check(&seg);
    cr_assert_eq(pop("q", "g", 10, T0), 3);
    cr_assert_str_eq(payload(rec(0)), "\"a0\"");
    cr_assert_eq(rec(1)->reply_len, sizeof(inbox) - 1, "the other request");
    cr_assert_str_eq(payload(rec(2)), "\"b0\"");
    fixture_check(&seg);
}

/* SPEC §4: withdrawn requests no longer count against maxLength, so the
 * queue they filled takes a push again without any pop. */
Test(shm_broker, withdrawn_requests_free_their_place_under_max_length)
{
    uint64_t s1, s2;

    declare("q", 2, 1 << 20, SHM_POLICY_REJECT, 0, 5);
    cr_assert_eq(pop("q", "w", 10, T0), 0);
    uint64_t bytes0 = queue_bytes("q"); /* the queue's and group's own */
    cr_assert_eq(push_req("q", "mayfly.inbox/n0/1.0.1.1", "1", &s1), 0);
    cr_assert_eq(push_req("q", "mayfly.inbox/n0/1.0.1.2", "1", &s2), 0);
    cr_assert_eq(pushn("q", "Default", "x", 1, T0, NULL), -ENOSPC);
    cr_assert_eq(shm_withdraw(&seg, 0, nm("q"), nm("Default"), s1, T0), 1);
    cr_assert_eq(shm_withdraw(&seg, 0, nm("q"), nm("Default"), s2, T0), 1);
    cr_assert_eq(depth("q"), 0);
    cr_assert_eq(queue_bytes("q"), bytes0);
    cr_assert_eq(pushn("q", "Default", "x", 2, T0, NULL), 0);
    fixture_check(&seg);
}

/* A request at the head held read messages behind it (a from=new group
 * read those): withdrawn, it goes, and so do they. */
Test(shm_broker, a_withdrawn_head_request_frees_what_it_held_behind_it)
{
    uint64_t seq, x;

    cr_assert_eq(push_req("q", "mayfly.inbox/n0/1.0.1.1", "1", &seq), 0);
    cr_assert_eq(popx(0, "q", "Default", "late", 10, 0, SHM_FROM_NEW, 0, T0),
                 0);
    /* what stays: the queue's, partition's and group's own */
    uint64_t bytes0 = queue_bytes("q") -
                      shm_ring_msg_cost(strlen("mayfly.inbox/n0/1.0.1.11"));
    cr_assert_eq(pushn("q", "Default", "x", 1, T0, &x), 0);
    cr_assert_eq(popx(0, "q", "Default", "late", 10, 1, SHM_FROM_NEW, 0, T0),
                 1);
    cr_assert_eq(depth("q"), 2, "the unread request holds x");
    cr_assert_eq(shm_withdraw(&seg, 0, nm("q"), nm("Default"), seq, T0), 1);
    cr_assert_eq(depth("q"), 0);
    cr_assert_eq(queue_bytes("q"), bytes0);
    fixture_check(&seg);
}

/* A request a responder already holds stays as it is: not withdrawn, its
 * lease acked as any. */
Test(shm_broker, a_request_already_read_is_not_withdrawn)
{
    uint64_t seq;

    cr_assert_eq(push_req("q", "mayfly.inbox/n0/1.0.1.1", "1", &seq), 0);
    cr_assert_eq(pushn("q", "Default", "b", 1, T0, NULL), 0);
    cr_assert_eq(pop("q", "g", 1, T0), 1);
    cr_assert_eq(shm_withdraw(&seg, 0, nm("q"), nm("Default"), seq, T0), 0);
    cr_assert_eq(depth("q"), 2);
    fixture_check(&seg);
    cr_assert_eq(ack1("q", "g", seq, 0, SHM_ACK_COMPLETED, T0), SHM_OUT_ACKED);
    cr_assert_eq(pop("q", "g", 10, T0), 1);
    cr_assert_str_eq(payload(rec(0)), "\"b0\"");
}
