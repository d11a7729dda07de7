/*
 * test_extras.c - SPEC §13 in the segment (shm/broker.c, shm/ring.c,
 * shm/part_move.c): the dedupe window of a partition, messages hidden by a
 * delay, retries with a delay, a message's own ttl, and a hand-over that
 * carries all of them (an emptied partition's window included).  The clock is the test's: each call gets its now,
 * and the segment checker runs after every step that changes a partition.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include "shm/broker.h"
#include "shm/check.h"
#include "shm/maintain.h"
#include "shm/part_move.h"
#include "shm/queue_admin.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "test/shm/fixture.h"

#define T0 1000000ULL /* a "now" far from zero */

static struct shm_seg seg, seg2;
static unsigned char sinkbuf[1 << 16];
static struct shm_sink sink;

static void
setup(void)
{
    struct shm_params p = fixture_params(4 << 20, 4, 77);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

TestSuite(shm_extras, .init = setup, .timeout = 30);

/* declare - queue q with a window of dedupe_s and the usual bounds. */
static void
declare(struct shm_seg *s, const char *q, uint32_t dedupe_s, uint32_t ttl_s)
{
    struct shm_qopts o = {.max_length = 100,
                          .max_bytes = 1 << 20,
                          .ttl_s = ttl_s,
                          .lease_s = 30,
                          .retry_limit = 5,
                          .dedupe_s = dedupe_s};

    cr_assert_eq(shm_queue_declare(s, 0, nm(q), &o), 0);
}

/* push - n messages "m" to (q, Default) with the extras ex; ids out. */
static int
push(struct shm_seg *s, const char *q, const struct shm_msg_extra *ex,
     uint32_t n, uint64_t now, struct shm_push_id *ids, uint32_t *dups)
{
    struct shm_msg_in in[8];
    uint32_t conflated;

    cr_assert_leq(n, 8);
    for (uint32_t i = 0; i < n; i++)
        in[i] = (struct shm_msg_in){"\"m\"", 3};
    return shm_push_keyed(s, 0, nm(q), nm("Default"), in, ex, n, now, ids, dups,
                          &conflated);
}

/* pop - up to batch for group g at now into the sink. */
static int
pop(struct shm_seg *s, const char *q, uint32_t batch, uint64_t now)
{
    struct shm_pop_req r = {nm(q), nm("Default"), nm("g"), batch,
                            0,     SHM_FROM_ALL,  0};

    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    return shm_pop(s, 0, &r, now, &sink);
}

/* ack - one retry (delay_ms) or completion of seq for group g. */
static uint32_t
ack(struct shm_seg *s, const char *q, uint64_t seq, enum shm_ack_status st,
    uint32_t delay_ms, uint64_t now)
{
    struct shm_ack a = {.seq = seq, .status = st, .delay_ms = delay_ms};

    shm_ack(s, 0, nm(q), nm("Default"), nm("g"), &a, 1, now);
    return a.outcome;
}

static uint64_t
key(int k)
{
    return 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
}

Test(shm_extras, a_key_in_the_window_is_not_stored_again)
{
    struct shm_msg_extra ex[3] = {{.key_hash = key(1), .has_key = 1},
                                  {.key_hash = key(2), .has_key = 1},
                                  {.key_hash = key(1), .has_key = 1}};
    struct shm_push_id ids[3], again[3];
    uint32_t dups;

    declare(&seg, "q", 10, 0);
    cr_assert_eq(push(&seg, "q", ex, 3, T0, ids, &dups), 0);
    cr_assert_eq(dups, 1, "the batch's own repeat");
    cr_assert_eq(ids[2].seq, ids[0].seq);
    cr_assert_eq(ids[0].inc, 77);
    cr_assert_neq(ids[1].seq, ids[0].seq);
    fixture_check(&seg);
    cr_assert_eq(push(&seg, "q", ex, 2, T0 + 9999, again, &dups), 0);
    cr_assert_eq(dups, 2);
    cr_assert_eq(again[0].seq, ids[0].seq);
    cr_assert_eq(again[1].seq, ids[1].seq);
    cr_assert_eq(pop(&seg, "q", 10, T0), 2, "two stored");
    cr_assert_eq(fixture_counter(&seg, SHM_C_DUPLICATES), 3);
    /* the window is over: new messages */
    cr_assert_eq(push(&seg, "q", ex, 1, T0 + 10000, again, &dups), 0);
    cr_assert_eq(dups, 0);
    cr_assert_gt(again[0].seq, ids[1].seq);
    fixture_check(&seg);
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), T0 + 10000), 1);
    fixture_check(&seg);
}

/* What shm_part_each lists, counted. */
static void
count_one(void *arg, struct shm_name queue, struct shm_name part)
{
    (void)queue;
    (void)part;
    (*(int *)arg)++;
}

/* A partition whose messages were all consumed is still listed for the
 * hand-over while its window holds a key inside dedupeSeconds (SPEC §13:
 * the window travels), and no longer once the newest key is older.  The
 * walk reads the segment's clock: the pushes here use it too. */
Test(shm_extras, an_emptied_partition_is_listed_while_its_window_lives)
{
    struct shm_msg_extra ex[1] = {{.key_hash = key(1), .has_key = 1}};
    struct shm_push_id ids[1];
    uint64_t now = shm_now_ms();
    uint32_t dups;
    int n = 0;

    cr_assert_gt(now, 120000, "the clock is too young for this test");
    declare(&seg, "live", 60, 0);
    declare(&seg, "old", 60, 0);
    declare(&seg, "none", 0, 0);
    cr_assert_eq(push(&seg, "live", ex, 1, now, ids, &dups), 0);
    cr_assert_eq(push(&seg, "old", ex, 1, now - 61000, ids, &dups), 0);
    cr_assert_eq(push(&seg, "none", ex, 1, now, ids, &dups), 0);
    cr_assert_eq(shm_part_each(&seg, count_one, &n), 3, "each holds one");
    const char *qs[] = {"live", "old", "none"};
    for (int i = 0; i < 3; i++) {
        struct shm_pop_req r = {nm(qs[i]), nm("Default"), nm("g"), 10,
                                1,         SHM_FROM_ALL,  0};
        sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
        cr_assert_eq(shm_pop(&seg, 0, &r, now, &sink), 1, "%s", qs[i]);
    }
    fixture_check(&seg);
    n = 0;
    cr_assert_eq(shm_part_each(&seg, count_one, &n), 1, "only the live window");
    cr_assert_eq(n, 1);
}

Test(shm_extras, a_hidden_message_lets_the_next_go_and_comes_when_due)
{
    struct shm_msg_extra ex[2] = {{.delay_ms = 500}, {0}};
    struct shm_push_id ids[2];
    struct shm_queue_info qi;
    uint32_t dups;

    cr_assert_eq(push(&seg, "d", ex, 2, T0, ids, &dups), 0);
    cr_assert_eq(pop(&seg, "d", 10, T0 + 1), 1);
    cr_assert_eq(fixture_popped(&sink, 0)->seq, ids[1].seq);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "d", 10, T0 + 499), 0, "not before its time");
    shm_maintain(&seg, T0 + 500);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "d", 10, T0 + 500), 1);
    cr_assert_eq(fixture_popped(&sink, 0)->seq, ids[0].seq);
    cr_assert_eq(fixture_popped(&sink, 0)->attempts, 1);
    cr_assert_eq(ack(&seg, "d", ids[0].seq, SHM_ACK_COMPLETED, 0, T0 + 501),
                 SHM_OUT_ACKED);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("d"), NULL, T0 + 501, &qi, NULL, NULL, NULL),
        0);
    fixture_check(&seg);
}

Test(shm_extras, a_retry_with_a_delay_waits_it_out)
{
    struct shm_msg_extra ex[2] = {{0}, {0}};
    struct shm_push_id ids[2];
    uint32_t dups;

    cr_assert_eq(push(&seg, "r", ex, 2, T0, ids, &dups), 0);
    cr_assert_eq(pop(&seg, "r", 1, T0), 1);
    cr_assert_eq(ack(&seg, "r", ids[0].seq, SHM_ACK_RETRY, 400, T0 + 10),
                 SHM_OUT_REDELIVERED);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "r", 10, T0 + 11), 1, "the next at once");
    cr_assert_eq(fixture_popped(&sink, 0)->seq, ids[1].seq);
    cr_assert_eq(pop(&seg, "r", 10, T0 + 409), 0);
    shm_maintain(&seg, T0 + 410);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "r", 10, T0 + 410), 1);
    cr_assert_eq(fixture_popped(&sink, 0)->seq, ids[0].seq);
    cr_assert_eq(fixture_popped(&sink, 0)->attempts, 2);
    fixture_check(&seg);
}

Test(shm_extras, a_message_past_its_own_ttl_is_passed_over)
{
    struct shm_msg_extra ex[3] = {{0}, {.ttl_s = 1}, {0}};
    struct shm_push_id ids[3];
    uint32_t dups;

    declare(&seg, "t", 0, 60);
    cr_assert_eq(push(&seg, "t", ex, 3, T0, ids, &dups), 0);
    cr_assert_eq(pop(&seg, "t", 10, T0 + 1000), 2);
    cr_assert_eq(fixture_popped(&sink, 0)->seq, ids[0].seq);
    cr_assert_eq(fixture_popped(&sink, 1)->seq, ids[2].seq);
    cr_assert_eq(fixture_counter(&seg, SHM_C_DROP_TTL), 1);
    fixture_check(&seg);
}

Test(shm_extras, a_hand_over_carries_delays_retries_and_the_window)
{
    struct shm_msg_extra ex[3] = {
        {.key_hash = key(1), .has_key = 1},
        {.key_hash = key(2), .has_key = 1, .delay_ms = 3000},
        {0}};
    struct shm_push_id ids[3], again[2];
    struct shm_params p = fixture_params(4 << 20, 4, 88);
    static unsigned char rec[1 << 16];
    struct shm_ho_sink out = {.buf = rec, .cap = sizeof(rec)};
    uint32_t dups;

    declare(&seg, "h", 60, 0);
    cr_assert_eq(push(&seg, "h", ex, 3, T0, ids, &dups), 0);
    cr_assert_eq(pop(&seg, "h", 1, T0), 1); /* the first, then a retry */
    cr_assert_eq(ack(&seg, "h", ids[0].seq, SHM_ACK_RETRY, 2000, T0),
                 SHM_OUT_REDELIVERED);
    cr_assert_eq(
        shm_part_take(&seg, 0, nm("h"), nm("Default"), T0 + 1000, &out), 3);
    fixture_check(&seg);

    cr_assert_eq(shm_segment_create(&p, &seg2), 0);
    declare(&seg2, "h", 60, 0);
    cr_assert_eq(shm_part_adopt(&seg2, 0, nm("h"), nm("Default"), rec, out.used,
                                T0 + 1000),
                 3);
    fixture_check(&seg2);
    /* the window came along, with the first answer's ids */
    cr_assert_eq(push(&seg2, "h", ex, 2, T0 + 1000, again, &dups), 0);
    cr_assert_eq(dups, 2);
    cr_assert_eq(again[0].seq, ids[0].seq);
    cr_assert_eq(again[0].inc, 77, "the id the first push was answered");
    /* only the third now; the retry at 2000, the delayed at 3000 */
    cr_assert_eq(pop(&seg2, "h", 10, T0 + 1000), 1);
    cr_assert_eq(pop(&seg2, "h", 10, T0 + 1999), 0);
    shm_maintain(&seg2, T0 + 2000);
    cr_assert_eq(pop(&seg2, "h", 10, T0 + 2000), 1);
    cr_assert_eq(fixture_popped(&sink, 0)->attempts, 2);
    cr_assert_eq(pop(&seg2, "h", 10, T0 + 2999), 0);
    shm_maintain(&seg2, T0 + 3000);
    cr_assert_eq(pop(&seg2, "h", 10, T0 + 3000), 1);
    cr_assert_eq(fixture_popped(&sink, 0)->attempts, 1);
    cr_assert_eq(pop(&seg2, "h", 10, T0 + 5000), 0, "each once");
    fixture_check(&seg2);
}
