/*
 * test_conflate.c - conflation in the segment (SPEC §13; shm/ring.c,
 * shm/conflate.c, shm/broker.c, shm/part_move.c): on a queue with the
 * conflate flag, a keyed message replaces the older messages of its key
 * for every group that has not read them, takes the newest place, and the
 * bounds count what stays; a message one group alone read or leased, or a
 * delayed one, stays.  Across groups: a group that was away reads each
 * key's newest once while another read every value; a lease on a replaced
 * message acks, extends and fails as an answer says and is never
 * redelivered, and the message goes with its last lease; a stalled group
 * holds no more than the live keys and the fast group's leases; a tail
 * passes it over; a hand-over carries neither it nor its lease.  A
 * hand-over carries the keys, and a push during its hold wins over what
 * the record brings; a worker killed mid-push (or mid-ack) leaves a
 * partition the checker finds sound.  The clock is the test's, and the
 * segment checker runs after each step.
 */
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/broker.h"
#include "shm/check.h"
#include "shm/maintain.h"
#include "shm/part_move.h"
#include "shm/queue_admin.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "shm/tail.h"
#include "test/shm/fixture.h"

#define T0 1000000ULL /* a "now" far from zero */

static struct shm_seg seg, seg2;
static unsigned char sinkbuf[1 << 18];
static struct shm_sink sink;

static void
setup(void)
{
    struct shm_params p = fixture_params(8 << 20, 4, 77);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

TestSuite(shm_conflate, .init = setup, .timeout = 60);

/* declare - queue q that conflates, holding at most max_length. */
static void
declare(struct shm_seg *s, const char *q, uint32_t max_length)
{
    struct shm_qopts o = {.max_length = max_length,
                          .max_bytes = 1 << 20,
                          .lease_s = 30,
                          .retry_limit = 5,
                          .flags = SHM_QOPT_CONFLATE};

    cr_assert_eq(shm_queue_declare(s, 0, nm(q), &o), 0);
}

static uint64_t
key(int k)
{
    return 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
}

/* push - n messages to (q, Default): payload "<k>:<v>" with key k (none
 * when k < 0), v from *vals (or i); *conflated out. */
static int
push(struct shm_seg *s, const char *q, const int *keys, const int *vals,
     uint32_t n, uint64_t now, uint32_t *conflated)
{
    static char bufs[128][32];
    struct shm_msg_in in[128];
    struct shm_msg_extra ex[128];
    struct shm_push_id ids[128];
    uint32_t dups;

    cr_assert_leq(n, 128);
    for (uint32_t i = 0; i < n; i++) {
        int len = snprintf(bufs[i], sizeof(bufs[i]), "\"%d:%d\"", keys[i],
                           vals != NULL ? vals[i] : (int)i);
        in[i] = (struct shm_msg_in){bufs[i], (uint32_t)len};
        ex[i] = (struct shm_msg_extra){.key_hash = key(keys[i]),
                                       .has_key = keys[i] >= 0};
    }
    return shm_push_keyed(s, 0, nm(q), nm("Default"), in, ex, n, now, ids,
                          &dups, conflated);
}

/* push1 - one message of key k (-1: none) and value v. */
static uint32_t
push1(struct shm_seg *s, const char *q, int k, int v, uint64_t now)
{
    uint32_t conflated = 99;

    cr_assert_eq(push(s, q, &k, &v, 1, now, &conflated), 0);
    return conflated;
}

/* pop_as - up to batch for group g at now into the sink. */
static int
pop_as(struct shm_seg *s, const char *q, const char *g, uint32_t batch,
       int auto_ack, uint64_t now)
{
    struct shm_pop_req r = {nm(q),    nm("Default"), nm(g), batch,
                            auto_ack, SHM_FROM_ALL,  0};

    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    return shm_pop(s, 0, &r, now, &sink);
}

/* pop - pop_as with autoAck. */
static int
pop(struct shm_seg *s, const char *q, const char *g, uint32_t batch,
    uint64_t now)
{
    return pop_as(s, q, g, batch, 1, now);
}

/* held - messages the queue holds (the listing's depth). */
static uint64_t
held(struct shm_seg *s, const char *q)
{
    struct shm_queue_info qi;

    cr_assert_eq(shm_queue_depth(s, nm(q), NULL, T0, &qi, NULL, NULL, NULL), 0);
    return qi.depth;
}

Test(shm_conflate, a_thousand_pushes_over_ten_keys_leave_each_keys_newest)
{
    int keys[100], vals[100];
    uint32_t c, total = 0;

    declare(&seg, "q", 10000);
    /* ten batches of 100, keys in a scrambled order, each value rising */
    for (int b = 0; b < 10; b++) {
        for (int i = 0; i < 100; i++) {
            keys[i] = (i * 7 + b) % 10;
            vals[i] = b * 100 + i;
        }
        cr_assert_eq(push(&seg, "q", keys, vals, 100, T0 + (uint64_t)b, &c), 0);
        total += c;
        fixture_check(&seg);
    }
    cr_assert_eq(total, 990);
    cr_assert_eq(fixture_counter(&seg, SHM_C_CONFLATED), 990);
    cr_assert_eq(held(&seg, "q"), 10);
    cr_assert_eq(pop(&seg, "q", "g", 100, T0 + 10), 10);
    /* each key's newest, in the order the newest came */
    for (int i = 0; i < 10; i++) {
        int k = keys[90 + i], v = vals[90 + i];
        char want[32];
        snprintf(want, sizeof(want), "\"%d:%d\"", k, v);
        cr_assert_str_eq(payload(fixture_popped(&sink, i)), want);
    }
    fixture_check(&seg);
}

Test(shm_conflate, a_key_a_group_read_is_not_replaced)
{
    declare(&seg, "q", 100);
    cr_assert_eq(push1(&seg, "q", 1, 1, T0), 0);
    cr_assert_eq(pop_as(&seg, "q", "g", 10, 0, T0), 1); /* leased: it stays */
    cr_assert_eq(push1(&seg, "q", 1, 2, T0), 0, "read: a new message");
    cr_assert_eq(held(&seg, "q"), 2);
    cr_assert_eq(pop(&seg, "q", "g", 10, T0), 1);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"1:2\"");
    /* unread again: the next replaces it */
    cr_assert_eq(push1(&seg, "q", 1, 3, T0), 0);
    cr_assert_eq(push1(&seg, "q", 1, 4, T0), 1);
    cr_assert_eq(pop(&seg, "q", "g", 10, T0), 1);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"1:4\"");
    fixture_check(&seg);
}

/* ack1 - ack seq (delivered with attempts; 0: a bare id) for group g with
 * status; its outcome. */
static uint32_t
ack1(struct shm_seg *s, const char *q, const char *g, uint64_t seq,
     uint32_t attempts, uint32_t status, uint64_t now)
{
    struct shm_ack a = {.seq = seq, .attempts = attempts, .status = status};

    shm_ack(s, 0, nm(q), nm("Default"), nm(g), &a, 1, now);
    return a.outcome;
}

/* pending_of - what group g has still to read in q (depth's groups). */
static void
group_fn(void *arg, const struct shm_group_info *g)
{
    *(uint64_t *)arg = g->pending;
}

static uint64_t
pending_of(struct shm_seg *s, const char *q, const char *g, uint64_t now)
{
    struct shm_queue_info qi;
    struct shm_name n = nm(g);
    uint64_t pending = 99;

    cr_assert_eq(
        shm_queue_depth(s, nm(q), &n, now, &qi, NULL, group_fn, &pending), 0);
    return pending;
}

/* bytes_of - the bytes q holds (depth's). */
static uint64_t
bytes_of(struct shm_seg *s, const char *q)
{
    struct shm_queue_info qi;

    cr_assert_eq(shm_queue_depth(s, nm(q), NULL, T0, &qi, NULL, NULL, NULL), 0);
    return qi.bytes;
}

Test(shm_conflate, a_group_away_reads_each_keys_newest_once)
{
    declare(&seg, "q", 100);
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 0); /* known, away */
    /* active reads every value as it comes; back reads none */
    for (int v = 1; v <= 3; v++) {
        cr_assert_eq(push1(&seg, "q", 1, v, T0), v > 1 ? 1 : 0,
                     "value %d replaces the one back has not read", v);
        cr_assert_eq(push1(&seg, "q", 2, 10 + v, T0), v > 1 ? 1 : 0);
        cr_assert_eq(pop(&seg, "q", "active", 10, T0), 2);
        fixture_check(&seg);
    }
    cr_assert_eq(fixture_counter(&seg, SHM_C_CONFLATED), 4, "once each");
    cr_assert_eq(held(&seg, "q"), 2, "what back has still to read");
    cr_assert_eq(pending_of(&seg, "q", "back", T0), 2);
    cr_assert_eq(pending_of(&seg, "q", "active", T0), 0);
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 2, "each key's newest once");
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"1:3\"");
    cr_assert_str_eq(payload(fixture_popped(&sink, 1)), "\"2:13\"");
    cr_assert_eq(held(&seg, "q"), 0, "both groups are done");
    fixture_check(&seg);
}

Test(shm_conflate, a_superseded_lease_acks_as_before_and_never_comes_again)
{
    declare(&seg, "q", 100);
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 0);
    cr_assert_eq(push1(&seg, "q", 1, 1, T0), 0);
    cr_assert_eq(pop_as(&seg, "q", "active", 10, 0, T0), 1); /* leased */
    uint64_t old = fixture_popped(&sink, 0)->seq;
    cr_assert_eq(push1(&seg, "q", 1, 2, T0), 1, "replaced for back");
    fixture_check(&seg);
    cr_assert_eq(held(&seg, "q"), 2, "the lease holds the old one");
    cr_assert_eq(pending_of(&seg, "q", "back", T0), 1);
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 1);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"1:2\"");
    fixture_check(&seg);
    /* the holder extends and completes it as it would any lease */
    struct shm_ack e = {.seq = old, .attempts = 1, .seconds = 60};
    shm_extend(&seg, 0, nm("q"), nm("Default"), nm("active"), &e, 1, T0);
    cr_assert_eq(e.outcome, SHM_OUT_EXTENDED);
    cr_assert_eq(ack1(&seg, "q", "active", old, 1, SHM_ACK_COMPLETED, T0),
                 SHM_OUT_ACKED);
    cr_assert_eq(held(&seg, "q"), 1, "gone with its lease");
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "q", "active", 10, T0), 1);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"1:2\"");
    cr_assert_eq(held(&seg, "q"), 0);
    fixture_check(&seg);
}

Test(shm_conflate, a_failed_ack_or_a_lease_run_out_does_not_bring_it_back)
{
    declare(&seg, "q", 100);
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 0);
    cr_assert_eq(push1(&seg, "q", 1, 1, T0), 0);
    cr_assert_eq(push1(&seg, "q", 2, 1, T0), 0);
    cr_assert_eq(pop_as(&seg, "q", "active", 10, 0, T0), 2);
    uint64_t s1 = fixture_popped(&sink, 0)->seq;
    cr_assert_eq(push1(&seg, "q", 1, 2, T0), 1);
    cr_assert_eq(push1(&seg, "q", 2, 2, T0), 1);
    cr_assert_eq(held(&seg, "q"), 4);
    /* a retry of a replaced message: it will not come back, it says so */
    cr_assert_eq(ack1(&seg, "q", "active", s1, 1, SHM_ACK_RETRY, T0),
                 SHM_OUT_ACKED_DROPPED);
    cr_assert_eq(ack1(&seg, "q", "active", s1, 1, SHM_ACK_COMPLETED, T0),
                 SHM_OUT_UNKNOWN, "nothing held under it any more");
    cr_assert_eq(held(&seg, "q"), 3);
    fixture_check(&seg);
    /* key 2's old lease runs out: no redelivery, the message goes */
    uint64_t later = T0 + 31000;
    shm_maintain(&seg, later);
    fixture_check(&seg);
    cr_assert_eq(held(&seg, "q"), 2);
    cr_assert_eq(pop(&seg, "q", "active", 10, later), 2, "the new values");
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"1:2\"");
    cr_assert_str_eq(payload(fixture_popped(&sink, 1)), "\"2:2\"");
    cr_assert_eq(fixture_counter(&seg, SHM_C_DROP_RETRY_LIMIT), 0);
    cr_assert_eq(fixture_counter(&seg, SHM_C_REDELIVERY_LEASE_EXPIRED), 0);
    cr_assert_eq(pop(&seg, "q", "back", 10, later), 2);
    cr_assert_eq(held(&seg, "q"), 0);
    fixture_check(&seg);
}

Test(shm_conflate, one_group_alone_keeps_its_redelivery)
{
    /* nobody waits for it: nothing is replaced, as before */
    declare(&seg, "q", 100);
    cr_assert_eq(push1(&seg, "q", 1, 1, T0), 0);
    cr_assert_eq(pop_as(&seg, "q", "g", 10, 0, T0), 1);
    cr_assert_eq(push1(&seg, "q", 1, 2, T0), 0);
    shm_maintain(&seg, T0 + 31000);
    cr_assert_eq(pop_as(&seg, "q", "g", 10, 0, T0 + 31000), 2);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"1:1\"");
    cr_assert_eq(fixture_popped(&sink, 0)->attempts, 2);
    fixture_check(&seg);
}

Test(shm_conflate, a_stalled_group_holds_no_more_than_live_keys_and_leases)
{
    enum { KEYS = 10, WINDOW = 5 };
    uint64_t out[WINDOW] = {0};
    uint64_t one = 0;

    declare(&seg, "q", 10000);
    cr_assert_eq(pop(&seg, "q", "stalled", 10, T0), 0);
    /* the fast group leases each message and acks it WINDOW pops later */
    for (int i = 0; i < 2000; i++) {
        push1(&seg, "q", i % KEYS, i, T0);
        cr_assert_eq(pop_as(&seg, "q", "fast", 1, 0, T0), 1);
        if (out[i % WINDOW] != 0)
            cr_assert_eq(ack1(&seg, "q", "fast", out[i % WINDOW], 1,
                              SHM_ACK_COMPLETED, T0),
                         SHM_OUT_ACKED);
        out[i % WINDOW] = fixture_popped(&sink, 0)->seq;
        cr_assert_leq(held(&seg, "q"), KEYS + WINDOW, "at %d", i);
        if (i == 0)
            one = bytes_of(&seg, "q");
        cr_assert_leq(bytes_of(&seg, "q"), (KEYS + WINDOW) * one);
        if (i % 100 == 0)
            fixture_check(&seg);
    }
    cr_assert_eq(pop(&seg, "q", "stalled", 100, T0), KEYS, "each newest");
    for (int k = 0; k < KEYS; k++) {
        char want[32];
        snprintf(want, sizeof(want), "\"%d:%d\"", k, 2000 - KEYS + k);
        cr_assert_str_eq(payload(fixture_popped(&sink, k)), want);
    }
    for (int j = 0; j < WINDOW; j++)
        ack1(&seg, "q", "fast", out[j], 1, SHM_ACK_COMPLETED, T0);
    cr_assert_eq(held(&seg, "q"), 0);
    fixture_check(&seg);
}

Test(shm_conflate, the_bounds_net_out_only_what_leaves_at_once)
{
    declare(&seg, "q", 2);
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 0);
    cr_assert_eq(push1(&seg, "q", 1, 1, T0), 0);
    cr_assert_eq(push1(&seg, "q", 2, 1, T0), 0);
    cr_assert_eq(pop_as(&seg, "q", "active", 1, 0, T0), 1); /* 1:1 leased */
    uint64_t s1 = fixture_popped(&sink, 0)->seq;
    cr_assert_eq(pop(&seg, "q", "active", 1, T0), 1); /* 2:1 done */
    /* 2:1 goes at once and makes room for 2:2 */
    cr_assert_eq(push1(&seg, "q", 2, 2, T0), 1);
    /* 1:1 would stay while it is out (as a leased message of one group
     * stays and counts): a full queue refuses 1:2 */
    int k = 1, v = 2;
    uint32_t c;
    cr_assert_eq(push(&seg, "q", &k, &v, 1, T0, &c), -ENOSPC);
    cr_assert_eq(held(&seg, "q"), 2, "a refused push changes nothing");
    cr_assert_eq(ack1(&seg, "q", "active", s1, 1, SHM_ACK_COMPLETED, T0),
                 SHM_OUT_ACKED);
    cr_assert_eq(held(&seg, "q"), 2, "back has still to read 1:1");
    cr_assert_eq(push1(&seg, "q", 1, 2, T0), 1, "unleased: it makes room");
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 2);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"2:2\"");
    cr_assert_str_eq(payload(fixture_popped(&sink, 1)), "\"1:2\"");
    fixture_check(&seg);
}

Test(shm_conflate, a_tail_passes_a_superseded_message_over)
{
    struct shm_tail_req r = {
        .queue = nm("q"), .part = nm("Default"), .upto = UINT64_MAX};
    struct shm_tail_res res;

    declare(&seg, "q", 100);
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 0);
    cr_assert_eq(push1(&seg, "q", 1, 1, T0), 0);
    cr_assert_eq(pop_as(&seg, "q", "active", 10, 0, T0), 1);
    cr_assert_eq(push1(&seg, "q", 1, 2, T0), 1);
    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    cr_assert_eq(shm_tail(&seg, 0, &r, T0, &sink, &res), 1);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"1:2\"");
    cr_assert(res.gap, "a tail from before it missed it, as an unlinked one");
    fixture_check(&seg);
}

Test(shm_conflate, messages_without_a_key_are_never_replaced)
{
    int keys[6] = {-1, 2, -1, 2, -1, 2};
    uint32_t c;

    declare(&seg, "q", 100);
    cr_assert_eq(push(&seg, "q", keys, NULL, 6, T0, &c), 0);
    cr_assert_eq(c, 2, "the key's first two");
    cr_assert_eq(held(&seg, "q"), 4);
    cr_assert_eq(push1(&seg, "q", -1, 9, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 10, T0), 5);
    cr_assert_str_eq(payload(fixture_popped(&sink, 3)), "\"2:5\"");
    fixture_check(&seg);
}

Test(shm_conflate, a_queue_that_does_not_conflate_keeps_every_keyed_message)
{
    struct shm_qopts o = {.max_length = 100,
                          .max_bytes = 1 << 20,
                          .lease_s = 30,
                          .retry_limit = 5};

    cr_assert_eq(shm_queue_declare(&seg, 0, nm("plain"), &o), 0);
    cr_assert_eq(push1(&seg, "plain", 1, 1, T0), 0);
    cr_assert_eq(push1(&seg, "plain", 1, 2, T0), 0);
    cr_assert_eq(held(&seg, "plain"), 2);
    fixture_check(&seg);
}

Test(shm_conflate, a_delayed_message_is_not_replaced_and_may_replace)
{
    struct shm_msg_in in = {"\"d\"", 3};
    struct shm_msg_extra ex = {
        .key_hash = key(1), .has_key = 1, .delay_ms = 1000};
    struct shm_push_id id;
    uint32_t dups, c = 99;

    declare(&seg, "q", 100);
    cr_assert_eq(push1(&seg, "q", 1, 1, T0), 0);
    cr_assert_eq(shm_push_keyed(&seg, 0, nm("q"), nm("Default"), &in, &ex, 1,
                                T0, &id, &dups, &c),
                 0);
    cr_assert_eq(c, 1, "the visible one gives way to the delayed one");
    cr_assert_eq(pop(&seg, "q", "g", 10, T0), 0,
                 "the group's cursor passes it");
    cr_assert_eq(push1(&seg, "q", 1, 2, T0), 0, "owed to g: it stays");
    shm_maintain(&seg, T0 + 1000);
    cr_assert_eq(pop(&seg, "q", "g", 10, T0 + 1000), 2);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"d\"");
    fixture_check(&seg);
}

Test(shm_conflate, the_bounds_count_what_stays)
{
    int keys[10];
    uint32_t c;

    declare(&seg, "q", 10);
    for (int i = 0; i < 10; i++)
        keys[i] = i;
    cr_assert_eq(push(&seg, "q", keys, NULL, 10, T0, &c), 0);
    cr_assert_eq(push1(&seg, "q", 3, 7, T0), 1, "full, but it replaces one");
    int k = 10, v = 0;
    cr_assert_eq(push(&seg, "q", &k, &v, 1, T0, &c), -ENOSPC, "a new key");
    /* a batch over the bound whose own repeats leave it within */
    int many[40];
    for (int i = 0; i < 40; i++)
        many[i] = i % 10;
    cr_assert_eq(push(&seg, "q", many, NULL, 40, T0, &c), 0);
    cr_assert_eq(c, 40);
    cr_assert_eq(held(&seg, "q"), 10);
    fixture_check(&seg);
}

/* Under dropOldest a batch larger than the bound, net of what it
 * replaces of itself, is taken: the newest stay (SPEC §4). */
Test(shm_conflate, a_batch_past_the_bound_keeps_its_newest_under_drop_oldest)
{
    struct shm_qopts o = {.max_length = 3,
                          .max_bytes = 1 << 20,
                          .lease_s = 30,
                          .retry_limit = 5,
                          .policy = SHM_POLICY_DROP_OLDEST,
                          .flags = SHM_QOPT_CONFLATE};
    int first[3] = {0, 1, 2}, batch[7] = {0, 1, 5, 6, 7, 8, 0};
    const char *want[3] = {"\"7:4\"", "\"8:5\"", "\"0:6\""};
    uint32_t c;

    cr_assert_eq(shm_queue_declare(&seg, 0, nm("d"), &o), 0);
    cr_assert_eq(push(&seg, "d", first, NULL, 3, T0, &c), 0);
    cr_assert_eq(push(&seg, "d", batch, NULL, 7, T0 + 1, &c), 0);
    cr_assert_eq(held(&seg, "d"), 3);
    cr_assert_eq(pop(&seg, "d", "g", 10, T0 + 2), 3);
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(payload(fixture_popped(&sink, i)), want[i]);
    fixture_check(&seg);
}

/* take - (q, Default) of s into rec; the record's length. */
static size_t
take(struct shm_seg *s, const char *q, unsigned char *rec, size_t cap,
     uint64_t now)
{
    struct shm_ho_sink out = {.buf = rec, .cap = cap};

    cr_assert_geq(shm_part_take(s, 0, nm(q), nm("Default"), now, &out), 0);
    fixture_check(s);
    return out.used;
}

Test(shm_conflate, a_hand_over_carries_the_keys)
{
    struct shm_params p = fixture_params(4 << 20, 4, 88);
    static unsigned char rec[1 << 16];
    int keys[3] = {1, 2, -1};

    declare(&seg, "q", 100);
    uint32_t c;
    cr_assert_eq(push(&seg, "q", keys, NULL, 3, T0, &c), 0);
    size_t len = take(&seg, "q", rec, sizeof(rec), T0 + 10);

    cr_assert_eq(shm_segment_create(&p, &seg2), 0);
    declare(&seg2, "q", 100);
    cr_assert_eq(
        shm_part_adopt(&seg2, 0, nm("q"), nm("Default"), rec, len, T0 + 10), 3);
    fixture_check(&seg2);
    cr_assert_eq(push1(&seg2, "q", 1, 5, T0 + 10), 1, "the key came along");
    cr_assert_eq(push1(&seg2, "q", -1, 6, T0 + 10), 0);
    cr_assert_eq(pop(&seg2, "q", "g", 10, T0 + 10), 4);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"2:1\"");
    cr_assert_str_eq(payload(fixture_popped(&sink, 1)), "\"-1:2\"");
    cr_assert_str_eq(payload(fixture_popped(&sink, 2)), "\"1:5\"");
    fixture_check(&seg2);
}

Test(shm_conflate, a_push_during_the_hold_wins_over_the_record)
{
    struct shm_params p = fixture_params(4 << 20, 4, 88);
    static unsigned char rec[1 << 16];
    int keys[2] = {1, 2};
    uint32_t c;

    declare(&seg, "q", 100);
    cr_assert_eq(push(&seg, "q", keys, NULL, 2, T0, &c), 0);
    size_t len = take(&seg, "q", rec, sizeof(rec), T0 + 10);

    cr_assert_eq(shm_segment_create(&p, &seg2), 0);
    declare(&seg2, "q", 100);
    cr_assert_eq(shm_part_hold(&seg2, 0, nm("q"), nm("Default"), T0, 5000), 0);
    cr_assert_eq(push1(&seg2, "q", 1, 9, T0 + 10), 0);
    cr_assert_eq(
        shm_part_adopt(&seg2, 0, nm("q"), nm("Default"), rec, len, T0 + 10), 2);
    fixture_check(&seg2);
    cr_assert_eq(fixture_counter(&seg2, SHM_C_CONFLATED), 1);
    cr_assert_eq(pop(&seg2, "q", "g", 10, T0 + 10), 2);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"2:1\"");
    cr_assert_str_eq(payload(fixture_popped(&sink, 1)), "\"1:9\"");
    fixture_check(&seg2);
}

Test(shm_conflate, a_hand_over_carries_neither_it_nor_its_lease)
{
    struct shm_params p = fixture_params(4 << 20, 4, 88);
    static unsigned char rec[1 << 16];

    declare(&seg, "q", 100);
    cr_assert_eq(pop(&seg, "q", "back", 10, T0), 0);
    cr_assert_eq(push1(&seg, "q", 1, 1, T0), 0);
    cr_assert_eq(push1(&seg, "q", 2, 1, T0), 0);
    cr_assert_eq(pop_as(&seg, "q", "active", 10, 0, T0), 2);
    cr_assert_eq(push1(&seg, "q", 1, 2, T0), 1);
    size_t len = take(&seg, "q", rec, sizeof(rec), T0 + 10);
    cr_assert_eq(fixture_counter(&seg, SHM_C_REDELIVERY_HANDOVER), 1,
                 "key 2's lease goes, key 1's old one does not");

    cr_assert_eq(shm_segment_create(&p, &seg2), 0);
    declare(&seg2, "q", 100);
    cr_assert_eq(
        shm_part_adopt(&seg2, 0, nm("q"), nm("Default"), rec, len, T0 + 10), 2,
        "2:1 (owed to both) and 1:2");
    fixture_check(&seg2);
    cr_assert_eq(pop(&seg2, "q", "active", 10, T0 + 10), 2);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"2:1\"");
    cr_assert_eq(fixture_popped(&sink, 0)->attempts, 2, "its redelivery");
    cr_assert_str_eq(payload(fixture_popped(&sink, 1)), "\"1:2\"");
    cr_assert_eq(pop(&seg2, "q", "back", 10, T0 + 10), 2);
    cr_assert_str_eq(payload(fixture_popped(&sink, 0)), "\"2:1\"");
    cr_assert_str_eq(payload(fixture_popped(&sink, 1)), "\"1:2\"");
    fixture_check(&seg2);
}

/* The child's loop as worker 1: keyed pushes over 10 keys, now and then a
 * pop of group g, forever. */
static void
child(unsigned seed)
{
    int keys[8], vals[8];
    uint32_t c;

    srand(seed);
    for (int v = 0;; v++) {
        uint32_t n = 1 + (uint32_t)(rand() % 8);
        for (uint32_t i = 0; i < n; i++) {
            keys[i] = rand() % 10;
            vals[i] = v;
        }
        static char bufs[8][32];
        struct shm_msg_in in[8];
        struct shm_msg_extra ex[8];
        struct shm_push_id ids[8];
        uint32_t dups;
        for (uint32_t i = 0; i < n; i++) {
            int len = snprintf(bufs[i], sizeof(bufs[i]), "\"%d:%d\"", keys[i],
                               vals[i]);
            in[i] = (struct shm_msg_in){bufs[i], (uint32_t)len};
            ex[i] =
                (struct shm_msg_extra){.key_hash = key(keys[i]), .has_key = 1};
        }
        shm_push_keyed(&seg, 1, nm("q"), nm("Default"), in, ex, n, shm_now_ms(),
                       ids, &dups, &c);
        if (rand() % 4 == 0) {
            static unsigned char buf[1 << 14];
            struct shm_pop_req r = {nm("q"), nm("Default"), nm("g"), 3,
                                    1,       SHM_FROM_ALL,  0};
            struct shm_sink k = {.buf = buf, .cap = sizeof(buf)};
            shm_pop(&seg, 1, &r, shm_now_ms(), &k);
        }
    }
}

Test(shm_conflate, a_worker_killed_mid_push_leaves_it_sound)
{
    uint64_t v[SHM_C_COUNT];

    declare(&seg, "q", 10000);
    srand(4242);
    for (int i = 0; i < 30; i++) {
        unsigned cs = (unsigned)rand();
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0)
            child(cs);
        fixture_kill_after(pid, 100000 + (rand() % 2000) * 1000);
        shm_worker_reap(&seg, 1);
        fixture_check(&seg);
    }
    /* every key at most twice (a kill between a link and its
     * replacements leaves one more), nothing wiped */
    cr_assert_leq(held(&seg, "q"), 20);
    shm_counters_sum(&seg, v);
    cr_assert_eq(v[SHM_C_WIPES], 0);
    cr_assert_gt(v[SHM_C_CONFLATED], 0);
    pop(&seg, "q", "g", 100, shm_now_ms());
    fixture_check(&seg);
}

/* The child's loop as worker 1 with two groups: keyed pushes over 10 keys;
 * "fast" leases what comes and acks each lease a few pops later; "slow",
 * known, never reads: every replacement supersedes or unlinks, and acks
 * free superseded messages, all while a kill may come. */
static void
child_leases(unsigned seed)
{
    static unsigned char buf[1 << 14];
    uint64_t out[16] = {0};
    uint32_t nout = 0, c;

    srand(seed);
    for (int v = 0;; v++) {
        int k = rand() % 10;
        char b[32];
        int len = snprintf(b, sizeof(b), "\"%d:%d\"", k, v);
        struct shm_msg_in in = {b, (uint32_t)len};
        struct shm_msg_extra ex = {.key_hash = key(k), .has_key = 1};
        struct shm_push_id id;
        uint32_t dups;
        shm_push_keyed(&seg, 1, nm("q"), nm("Default"), &in, &ex, 1,
                       shm_now_ms(), &id, &dups, &c);
        struct shm_pop_req r = {nm("q"), nm("Default"), nm("fast"), 2,
                                0,       SHM_FROM_ALL,  0};
        struct shm_sink sk = {.buf = buf, .cap = sizeof(buf)};
        if (shm_pop(&seg, 1, &r, shm_now_ms(), &sk) > 0)
            for (const struct shm_popped *p = shm_popped_next(&sk, NULL);
                 p != NULL; p = shm_popped_next(&sk, p))
                out[nout++ % 16] = p->seq;
        if (nout >= 8 && rand() % 2 == 0) {
            struct shm_ack a = {.seq = out[(nout - 8) % 16],
                                .status = rand() % 5 == 0 ? SHM_ACK_FAILED
                                                          : SHM_ACK_COMPLETED};
            shm_ack(&seg, 1, nm("q"), nm("Default"), nm("fast"), &a, 1,
                    shm_now_ms());
        }
    }
}

Test(shm_conflate,
     a_worker_killed_mid_ack_of_a_superseded_lease_leaves_it_sound)
{
    uint64_t v[SHM_C_COUNT];

    declare(&seg, "q", 10000);
    cr_assert_eq(pop(&seg, "q", "slow", 1, shm_now_ms()), 0);
    srand(4343);
    for (int i = 0; i < 30; i++) {
        unsigned cs = (unsigned)rand();
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0)
            child_leases(cs);
        fixture_kill_after(pid, 100000 + (rand() % 2000) * 1000);
        shm_worker_reap(&seg, 1);
        fixture_check(&seg);
    }
    shm_counters_sum(&seg, v);
    cr_assert_eq(v[SHM_C_WIPES], 0);
    cr_assert_gt(v[SHM_C_CONFLATED], 0);
    /* slow reads no key twice (a kill between a link and its replacements
     * may leave an older value before the newest: never after it) */
    int n = pop(&seg, "q", "slow", 1000, shm_now_ms());
    cr_assert_gt(n, 0);
    cr_assert_leq(n, 20);
    fixture_check(&seg);
}
