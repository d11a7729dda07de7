/*
 * test_part_move.c - part_move.h on real segments: a partition taken from one
 * queue and adopted by another (or another segment) keeps its payloads,
 * order, ages and every group's position; the source is left empty; a
 * short buffer, a malformed record and the node cap change nothing; parked
 * pops are woken; an adopter killed at any moment leaves a sound partition.
 */
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/broker.h"
#include "shm/dir.h"
#include "shm/maintain.h"
#include "shm/part_move.h"
#include "shm/queue_admin.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "test/shm/fixture.h"

#define T0 1000000ULL       /* a "now" far from zero */
#define M  SHM_STATS_MASTER /* the master's slot: who calls take/adopt */
#define LS 30000ULL         /* the default lease, ms */

static struct shm_seg seg, seg2;
static unsigned char sinkbuf[1 << 20];
static struct shm_sink sink;
static unsigned char recbuf[1 << 20];
static struct shm_ho_sink ho;

/* A segment with max_bytes and the usual defaults. */
static void
mkseg(struct shm_seg *s, uint64_t max_bytes)
{
    struct shm_params p = fixture_params(max_bytes, 4, 77);

    cr_assert_eq(shm_segment_create(&p, s), 0);
}

static void
setup(void)
{
    mkseg(&seg, 4 << 20);
}

/* Push n payloads "<tag><i>" to (q, p) of s. */
static int
pushn(struct shm_seg *s, const char *q, const char *p, const char *tag,
      uint32_t n, uint64_t now)
{
    return fixture_pushn(s, q, p, tag, n, now, NULL);
}

/* Pop up to batch for group g of (q, p) of s into the static sink. */
static int
popx(struct shm_seg *s, int w, const char *q, const char *p, const char *g,
     uint32_t batch, int auto_ack, int park, uint64_t now)
{
    struct shm_pop_req r = {nm(q),    nm(p),        nm(g), batch,
                            auto_ack, SHM_FROM_ALL, park};

    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    return shm_pop(s, w, &r, now, &sink);
}

static int
pop(struct shm_seg *s, const char *q, const char *g, uint32_t batch,
    uint64_t now)
{
    return popx(s, 0, q, "p", g, batch, 0, 0, now);
}

/* The i-th record of the sink. */
static const struct shm_popped *
rec(int i)
{
    return fixture_popped(&sink, i);
}

/* One ack of (q, "p") for g; returns its outcome. */
static uint32_t
ack1(struct shm_seg *s, const char *q, const char *g, uint64_t seq,
     enum shm_ack_status st, uint64_t now)
{
    struct shm_ack a = {.seq = seq, .status = st};

    shm_ack(s, 0, nm(q), nm("p"), nm(g), &a, 1, now);
    return a.outcome;
}

/* complete_one - g pops one message of (q, "p") at T0 and completes it. */
static void
complete_one(struct shm_seg *s, const char *q, const char *g)
{
    cr_assert_eq(pop(s, q, g, 1, T0), 1);
    cr_assert_eq(ack1(s, q, g, rec(0)->seq, SHM_ACK_COMPLETED, T0),
                 SHM_OUT_ACKED);
}

static void
declare(struct shm_seg *s, const char *q, uint32_t ttl_s, uint32_t retry_limit)
{
    struct shm_qopts o = {.max_length = 10000,
                          .max_bytes = 1 << 20,
                          .ttl_s = ttl_s,
                          .lease_s = 30,
                          .retry_limit = retry_limit};
    cr_assert_eq(shm_queue_declare(s, 0, nm(q), &o), 0);
}

/* Take (q, "p") of s into the static record buffer. */
static int
take(struct shm_seg *s, const char *q, uint64_t now)
{
    ho = (struct shm_ho_sink){.buf = recbuf, .cap = sizeof(recbuf)};
    return shm_part_take(s, M, nm(q), nm("p"), now, &ho);
}

/* Adopt the static record into (q, "p") of s. */
static int
adopt(struct shm_seg *s, const char *q, uint64_t now)
{
    return shm_part_adopt(s, M, nm(q), nm("p"), ho.buf, ho.used, now);
}

static struct shm_queue_info
info(struct shm_seg *s, const char *q, uint64_t now)
{
    struct shm_queue_info qi;

    cr_assert_eq(shm_queue_depth(s, nm(q), NULL, now, &qi, NULL, NULL, NULL),
                 0);
    return qi;
}

/* Expect the sink to hold tag<from..from+n-1>, each with attempts. */
static void
expect(int at, const char *tag, int from, int n, uint32_t attempts)
{
    char want[32];

    for (int i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "\"%s%d\"", tag, from + i);
        cr_assert_str_eq(payload(rec(at + i)), want);
        cr_assert_eq(rec(at + i)->attempts, attempts, "%s: attempts %u", want,
                     rec(at + i)->attempts);
    }
}

TestSuite(shm_part_move, .init = setup, .timeout = 60);

Test(shm_part_move, round_trip_into_a_second_segment_keeps_bytes_and_order)
{
    static char pay[40][400];
    struct shm_msg_in in[40];
    uint64_t s;

    /* Lengths across cell and padding boundaries, every byte value. */
    for (int i = 0; i < 40; i++) {
        uint32_t len = (uint32_t)(i * 37) % 399 + 1;
        for (uint32_t j = 0; j < len; j++)
            pay[i][j] = (char)(i * 7 + j * 13);
        in[i] = (struct shm_msg_in){pay[i], len};
    }
    cr_assert_eq(shm_push(&seg, 0, nm("q"), nm("p"), in, 40, T0, &s), 0);
    cr_assert_eq(take(&seg, "q", T0), 40);
    mkseg(&seg2, 4 << 20);
    cr_assert_eq(adopt(&seg2, "q", T0), 40);
    cr_assert_eq(popx(&seg2, 0, "q", "p", "", 100, 1, 0, T0), 40);
    for (int i = 0; i < 40; i++) {
        const struct shm_popped *r = rec(i);
        cr_assert_eq(r->len, in[i].len);
        cr_assert_eq(
            memcmp((const char *)(r + 1) + r->part_len, pay[i], r->len), 0,
            "message %d differs", i);
        cr_assert_eq(r->attempts, 1);
    }
}

Test(shm_part_move, round_trip_into_another_queue_pops_in_order)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 5, T0), 0);
    cr_assert_eq(take(&seg, "q", T0), 5);
    cr_assert_eq(adopt(&seg, "q2", T0 + 10), 5);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 10), 5);
    expect(0, "m", 0, 5, 1);
}

Test(shm_part_move, group_positions_come_back_with_redeliveries_first)
{
    static const char *modes[] = {"A", ""};

    /* A, queue mode and B know the partition before the push. */
    cr_assert_eq(pop(&seg, "q", "A", 1, T0), 0);
    cr_assert_eq(pop(&seg, "q", "", 1, T0), 0);
    cr_assert_eq(pop(&seg, "q", "B", 1, T0), 0);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 10, T0), 0);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(pop(&seg, "q", modes[k], 3, T0), 3);
        for (int i = 0; i < 3; i++)
            cr_assert_eq(
                ack1(&seg, "q", modes[k], rec(i)->seq, SHM_ACK_COMPLETED, T0),
                SHM_OUT_ACKED);
        cr_assert_eq(pop(&seg, "q", modes[k], 2, T0), 2); /* leased */
    }
    cr_assert_eq(take(&seg, "q", T0 + 5), 10);
    cr_assert_eq(adopt(&seg, "q2", T0 + 5), 10);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(pop(&seg, "q2", modes[k], 100, T0 + 5), 7);
        expect(0, "m", 3, 2, 2); /* the leases, attempts + 1 */
        expect(2, "m", 5, 5, 1); /* then the unread */
        cr_assert_eq(pop(&seg, "q2", modes[k], 100, T0 + 5 + 2 * LS), 7,
                     "leases run out: all seven again, never the acked");
    }
    cr_assert_eq(pop(&seg, "q2", "B", 100, T0 + 5), 10);
    expect(0, "m", 0, 10, 1);
    uint64_t c[SHM_C_COUNT];
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_REDELIVERY_HANDOVER], 4);
}

Test(shm_part_move, released_lease_keeps_its_attempts)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 2, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1);
    cr_assert_eq(ack1(&seg, "q", "g", rec(0)->seq, SHM_ACK_FAILED, T0),
                 SHM_OUT_REDELIVERED);
    cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1);
    cr_assert_eq(rec(0)->attempts, 2);
    shm_release(&seg, 0, nm("q"), nm("g"), &sink, T0); /* READY_SAME */
    cr_assert_eq(take(&seg, "q", T0), 2);
    cr_assert_eq(adopt(&seg, "q2", T0), 2);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0), 2);
    expect(0, "m", 0, 1, 2);
    expect(1, "m", 1, 1, 1);
}

Test(shm_part_move, retry_limit_applies_across_the_move)
{
    uint64_t c[SHM_C_COUNT];

    declare(&seg, "q", 0, 3);
    declare(&seg, "q2", 0, 3);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 2, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 2, T0), 2);
    uint64_t s0 = rec(0)->seq, s1 = rec(1)->seq;
    /* m1 out with attempts 3 (the limit), m0 with 2. */
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ack1(&seg, "q", "g", s1, SHM_ACK_FAILED, T0),
                     SHM_OUT_REDELIVERED);
        cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1);
    }
    cr_assert_eq(rec(0)->attempts, 3);
    cr_assert_eq(ack1(&seg, "q", "g", s0, SHM_ACK_FAILED, T0),
                 SHM_OUT_REDELIVERED);
    cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1);
    cr_assert_eq(rec(0)->attempts, 2);
    /* m1 at the limit stays behind, dropped: no group needs it any more,
     * so it is not shipped either. */
    cr_assert_eq(take(&seg, "q", T0), 1);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_RETRY_LIMIT], 1, "m1 at the limit stays behind");
    cr_assert_eq(adopt(&seg, "q2", T0), 1);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0), 1);
    expect(0, "m", 0, 1, 3);
    cr_assert_eq(ack1(&seg, "q2", "g", rec(0)->seq, SHM_ACK_FAILED, T0),
                 SHM_OUT_ACKED_DROPPED);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 2 * LS), 0);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_RETRY_LIMIT], 2);
}

static uint64_t oldest_seen;

static void
oldest_fn(void *arg, const struct shm_part_info *p)
{
    (void)arg;
    oldest_seen = p->oldest_age_ms;
}

Test(shm_part_move, ttl_keeps_counting_from_the_first_push)
{
    struct shm_queue_info qi;

    declare(&seg, "q2", 2, 5);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 1, T0), 0);
    cr_assert_eq(take(&seg, "q", T0 + 1500), 1);
    cr_assert_eq(adopt(&seg, "q2", T0 + 1600), 1);
    cr_assert_eq(shm_queue_depth(&seg, nm("q2"), NULL, T0 + 1700, &qi,
                                 oldest_fn, NULL, NULL),
                 0);
    cr_assert_eq(oldest_seen, 1600, "age 1500 at the take, +100 since");
    cr_assert_eq(shm_maintain(&seg, T0 + 1999), 0);
    cr_assert_eq(info(&seg, "q2", T0 + 1999).depth, 1);
    cr_assert_eq(shm_maintain(&seg, T0 + 2100), 0);
    qi = info(&seg, "q2", T0 + 2100);
    cr_assert_eq(qi.depth, 0);
    cr_assert_eq(qi.drops_ttl, 1);
}

static uint64_t part_bytes;

static void
bytes_fn(void *arg, const struct shm_part_info *p)
{
    (void)arg;
    part_bytes = p->bytes;
}

Test(shm_part_move, take_empties_the_source_and_frees_its_memory)
{
    struct shm_queue_info qi;
    struct shm_gauges g;
    uint64_t c[SHM_C_COUNT];

    /* The queue, partition and queue-mode group exist, empty. */
    cr_assert_eq(pushn(&seg, "q", "p", "x", 1, T0), 0);
    cr_assert_eq(popx(&seg, 0, "q", "p", "", 1, 1, 0, T0), 1);
    uint64_t base = shm_arena_used_bytes(&seg);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 10, T0), 0);
    cr_assert_eq(pop(&seg, "q", "", 3, T0), 3);
    cr_assert_eq(take(&seg, "q", T0), 10);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), NULL, T0, &qi, bytes_fn, NULL, NULL), 0);
    cr_assert_eq(qi.depth, 0);
    cr_assert_eq(qi.leased, 0);
    cr_assert_eq(part_bytes, SHM_PART_OVERHEAD);
    cr_assert_eq(qi.bytes, SHM_QUEUE_OVERHEAD + SHM_PART_OVERHEAD);
    /* Messages and leases went back, and the group's state cell. */
    cr_assert_eq(shm_arena_used_bytes(&seg), base - SHM_CELL_BYTES);
    shm_gauges_read(&seg, T0, &g);
    cr_assert_eq(g.memory_used, base - SHM_CELL_BYTES);
    cr_assert_eq(g.pending + g.leased, 0);
    shm_counters_sum(&seg, c);
    cr_assert_eq(c[SHM_C_DROP_TTL] + c[SHM_C_DROP_DROP_OLDEST] +
                     c[SHM_C_DROP_RETRY_LIMIT] + c[SHM_C_DROP_DELETED],
                 0, "moved, not dropped");
    cr_assert_eq(take(&seg, "q", T0), 0);
    cr_assert_eq(ho.used, sizeof(struct shm_ho_hdr), "no message, no state");
    cr_assert_eq(pop(&seg, "q", "", 10, T0 + 2 * LS), 0);
    cr_assert_eq(shm_part_take(&seg, M, nm("q"), nm("nope"), T0, &ho), -ENOENT);
    cr_assert_eq(shm_part_take(&seg, M, nm("nope"), nm("p"), T0, &ho), -ENOENT);
}

Test(shm_part_move, short_buffer_is_enomem_with_need_and_changes_nothing)
{
    unsigned char small[64];

    cr_assert_eq(pushn(&seg, "q", "p", "m", 10, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 2, T0), 2);
    uint64_t used = shm_arena_used_bytes(&seg);
    ho = (struct shm_ho_sink){.buf = small, .cap = sizeof(small)};
    cr_assert_eq(shm_part_take(&seg, M, nm("q"), nm("p"), T0, &ho), -ENOMEM);
    cr_assert_gt(ho.need, sizeof(small));
    cr_assert_eq(ho.used, 0);
    struct shm_queue_info qi = info(&seg, "q", T0);
    cr_assert_eq(qi.depth, 10);
    cr_assert_eq(qi.leased, 2);
    cr_assert_eq(shm_arena_used_bytes(&seg), used);
    size_t need = ho.need;
    ho = (struct shm_ho_sink){.buf = recbuf, .cap = need};
    cr_assert_eq(shm_part_take(&seg, M, nm("q"), nm("p"), T0, &ho), 10);
    cr_assert(ho.used > 0 && ho.used < need, "the record, then its keep map");
    cr_assert_eq(adopt(&seg, "q2", T0), 10);
    cr_assert_eq(pop(&seg, "q2", "g", 100, T0), 10);
    expect(0, "m", 0, 2, 2);
    expect(2, "m", 2, 8, 1);
}

/* Offset of group entry i in a checked record. */
static size_t
group_off(const unsigned char *r, uint32_t i)
{
    struct shm_ho_hdr h;
    size_t off = sizeof(h);

    memcpy(&h, r, sizeof(h));
    for (uint32_t k = 0; k < h.nmsgs; k++) {
        struct shm_ho_msg m;
        memcpy(&m, r + off, sizeof(m));
        off += sizeof(m) + ((m.len + 7) & ~7u);
    }
    for (uint32_t k = 0; k < i; k++) {
        struct shm_ho_grp g;
        memcpy(&g, r + off, sizeof(g));
        off += sizeof(g) + ((g.name_len + 7) & ~7u) +
               g.nredo * sizeof(struct shm_ho_redo);
    }
    return off;
}

/* Adopt (b, len) from an exact-size heap copy (ASan sees any overread) and
 * expect -EBADMSG with nothing changed on seg2. */
static void
adopt_bad(const void *b, size_t len, const char *why)
{
    unsigned char *copy = malloc(len ? len : 1);
    uint64_t used = shm_arena_used_bytes(&seg2);
    struct shm_queue_info qi;

    cr_assert_not_null(copy);
    memcpy(copy, b, len);
    cr_assert_eq(shm_part_adopt(&seg2, M, nm("q"), nm("p"), copy, len, T0),
                 -EBADMSG, "%s (len %zu)", why, len);
    free(copy);
    cr_assert_eq(shm_arena_used_bytes(&seg2), used, "%s", why);
    cr_assert_eq(
        shm_queue_depth(&seg2, nm("q"), NULL, T0, &qi, NULL, NULL, NULL),
        -ENOENT, "%s", why);
}

/* A record with 4 messages and groups g (2 redeliveries) and h. */
static void
record_with_groups(void)
{
    cr_assert_eq(pop(&seg, "q", "h", 1, T0), 0);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 4, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 3, T0), 3);
    cr_assert_eq(take(&seg, "q", T0), 4);
    mkseg(&seg2, 4 << 20);
}

Test(shm_part_move, malformed_records_are_ebadmsg_and_change_nothing)
{
    static unsigned char r[4096];
    struct shm_ho_hdr h;
    struct shm_ho_grp g, g0;
    struct shm_ho_msg m;
    struct shm_ho_redo d;

    record_with_groups();
    size_t n = ho.used;
    cr_assert_lt(n, sizeof(r));
    for (size_t len = 0; len < n; len++)
        adopt_bad(recbuf, len, "truncated");
    memcpy(r, recbuf, n);
    r[n] = 0;
    adopt_bad(r, n + 1, "a byte past the size");
#define MUTATE(what, field, value, why)                                        \
    do {                                                                       \
        memcpy(r, recbuf, n);                                                  \
        memcpy(&what, r + at, sizeof(what));                                   \
        what.field = value;                                                    \
        memcpy(r + at, &what, sizeof(what));                                   \
        adopt_bad(r, n, why);                                                  \
    } while (0)
    size_t at = 0;
    MUTATE(h, magic, 0x12345678, "bad magic");
    MUTATE(h, version, SHM_HO_VERSION + 1, "bad version");
    MUTATE(h, size, n + 8, "size says more");
    MUTATE(h, nmsgs, 5, "one message more than there is");
    MUTATE(h, nmsgs, 0x7fffffff, "messages past the end");
    MUTATE(h, ngroups, 3, "a group past the end");
    MUTATE(h, ngroups, 1000000, "groups past the end");
    at = sizeof(h);
    MUTATE(m, len, 1u << 30, "payload past the end");
    MUTATE(m, flags, 4, "unknown flag"); /* 1 read, 2 withdrawn */
    for (uint32_t gi = 0; gi < 2; gi++) {
        at = group_off(recbuf, gi);
        memcpy(&g0, recbuf + at, sizeof(g0));
        MUTATE(g, cursor, 5, "cursor past the messages");
        MUTATE(g, from, 9, "bad from");
        MUTATE(g, name_len, SHM_NAME_MAX + 1, "name too long");
        MUTATE(g, name_len, 500, "name past the end");
        MUTATE(g, nredo, g0.nredo + 1, "a redelivery more than there is");
        MUTATE(g, nredo, 0xffffffffu, "redeliveries past the end");
        if (g0.nredo >= 2) {
            at += sizeof(g0) + ((g0.name_len + 7) & ~7u);
            MUTATE(d, index, g0.cursor, "redelivery at the cursor");
            MUTATE(d, attempts, 0, "attempts 0");
            at += sizeof(d);
            MUTATE(d, index, 0, "indexes not rising");
        }
    }
    /* The same group twice. */
    size_t o0 = group_off(recbuf, 0), o1 = group_off(recbuf, 1);
    memcpy(r, recbuf, o1);
    memcpy(r + o1, recbuf + o0, o1 - o0);
    memcpy(&h, r, sizeof(h));
    h.size = o1 + (o1 - o0);
    memcpy(r, &h, sizeof(h));
    adopt_bad(r, h.size, "a group twice");
#undef MUTATE
    /* And the record itself is fine. */
    cr_assert_eq(shm_part_adopt(&seg2, M, nm("q"), nm("p"), recbuf, n, T0), 4);
}

Test(shm_part_move, node_cap_is_enobufs_and_adopts_nothing)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 60, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 5, T0), 5);
    cr_assert_eq(take(&seg, "q", T0), 60);
    mkseg(&seg2, 256 << 10);
    int rc, pushed = 0;
    while ((rc = pushn(&seg2, "fill", "p", "f", 10, T0)) == 0)
        pushed += 10;
    cr_assert_eq(rc, -ENOBUFS);
    uint64_t used = shm_arena_used_bytes(&seg2);
    cr_assert_eq(adopt(&seg2, "q", T0), -ENOBUFS);
    cr_assert_eq(shm_arena_used_bytes(&seg2), used);
    struct shm_queue_info qi;
    cr_assert_eq(
        shm_queue_depth(&seg2, nm("q"), NULL, T0, &qi, NULL, NULL, NULL),
        -ENOENT);
    /* Room made: the same record goes in whole. */
    cr_assert_eq(popx(&seg2, 0, "fill", "p", "", 10000, 1, 0, T0), pushed);
    cr_assert_eq(adopt(&seg2, "q", T0), 60);
    cr_assert_eq(pop(&seg2, "q", "g", 100, T0), 60);
    expect(0, "m", 0, 5, 2);
}

Test(shm_part_move, adopt_ignores_the_queue_bounds)
{
    struct shm_qopts o = {
        .max_length = 2, .max_bytes = 1 << 20, .lease_s = 30, .retry_limit = 5};

    cr_assert_eq(shm_queue_declare(&seg, 0, nm("q2"), &o), 0);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 5, T0), 0);
    cr_assert_eq(take(&seg, "q", T0), 5);
    cr_assert_eq(adopt(&seg, "q2", T0), 5);
    cr_assert_eq(info(&seg, "q2", T0).depth, 5);
}

Test(shm_part_move, adopt_wakes_a_parked_pop_and_take_wakes_one_too)
{
    uint64_t out[8];

    /* A pop parked on the adopting partition. */
    cr_assert_eq(popx(&seg, 0, "q2", "p", "g", 1, 0, 1, T0), 0);
    uint64_t h2 = shm_pop_handle(&seg, nm("q2"), nm("p"));
    /* One parked on the source: its group read everything, h has not. */
    cr_assert_eq(pop(&seg, "q", "h", 1, T0), 0);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 3, T0), 0);
    cr_assert_eq(popx(&seg, 1, "q", "p", "k", 3, 1, 0, T0), 3);
    cr_assert_eq(popx(&seg, 1, "q", "p", "k", 3, 1, 1, T0), 0);
    uint64_t h1 = shm_pop_handle(&seg, nm("q"), nm("p"));
    cr_assert_eq(shm_wake_drain(&seg, 1, out, 8), 0);
    cr_assert_eq(take(&seg, "q", T0), 3);
    cr_assert_eq(shm_wake_drain(&seg, 1, out, 8), 1);
    cr_assert_eq(out[0], h1);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), 0);
    cr_assert_eq(adopt(&seg, "q2", T0), 3);
    cr_assert_eq(shm_wake_drain(&seg, 0, out, 8), 1);
    cr_assert_eq(out[0], h2);
    cr_assert_eq(popx(&seg, 0, "q2", "p", "g", 10, 0, 0, T0), 3);
}

/* A group that read here already is placed all the same: what it had left
 * here first, then its lease with attempts + 1, then its own position; it
 * never reads m0 (completed) again. */
Test(shm_part_move, group_that_read_here_already_keeps_its_place)
{
    /* On q2: g has two messages unread, c has read everything. */
    cr_assert_eq(pop(&seg, "q2", "c", 1, T0), 0);
    cr_assert_eq(pushn(&seg, "q2", "p", "local", 2, T0), 0);
    cr_assert_eq(pop(&seg, "q2", "c", 2, T0), 2);
    cr_assert_eq(pop(&seg, "q", "g", 1, T0), 0);
    complete_one(&seg, "q2", "g");
    /* On q: g read and acked m0, leased m1. */
    cr_assert_eq(pushn(&seg, "q", "p", "m", 4, T0), 0);
    complete_one(&seg, "q", "g");
    cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1);
    cr_assert_eq(take(&seg, "q", T0), 3); /* m0 was freed once acked */
    cr_assert_eq(adopt(&seg, "q2", T0), 3);
    fixture_check(&seg);
    /* g: its unread local one, its lease again, then from its position. */
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0), 4);
    expect(0, "local", 1, 1, 1);
    expect(1, "m", 1, 1, 2);
    expect(2, "m", 2, 2, 1);
    /* c, not in the record: the adopted ones as any push. */
    cr_assert_eq(pop(&seg, "q2", "c", 10, T0), 3);
    expect(0, "m", 1, 3, 1);
}

/* What a group placed by an adopt had left to read here is owed as first
 * deliveries; one no group has read yet is owed all the same, and the
 * segment checker finds the segment sound with it. */
Test(shm_part_move, a_message_nobody_read_is_owed_to_a_group_placed)
{
    /* On q2: g read and acked local0; local1 no group has read. */
    cr_assert_eq(pop(&seg, "q2", "g", 1, T0), 0);
    cr_assert_eq(pushn(&seg, "q2", "p", "local", 2, T0), 0);
    complete_one(&seg, "q2", "g");
    /* On q: g read and acked m0. */
    cr_assert_eq(pushn(&seg, "q", "p", "m", 2, T0), 0);
    complete_one(&seg, "q", "g");
    cr_assert_eq(take(&seg, "q", T0), 1);
    cr_assert_eq(adopt(&seg, "q2", T0), 1);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0), 2);
    expect(0, "local", 1, 1, 1);
    expect(1, "m", 1, 1, 1);
    fixture_check(&seg);
}

/* Messages every group completed, held only behind a lease (a partition
 * frees from its head), are not shipped: a group the adoption cannot place
 * (it has unread messages on the new owner) used to read them all again as
 * new (found in a rolling restart under load). */
Test(shm_part_move, completed_messages_behind_a_lease_are_not_shipped)
{
    /* On q2: g has a message unread, so the adoption cannot place it. */
    cr_assert_eq(pop(&seg, "q2", "g", 1, T0), 0);
    cr_assert_eq(pushn(&seg, "q2", "p", "local", 1, T0), 0);
    /* On q: g leased m0, then took and acked m1..m3. */
    cr_assert_eq(pushn(&seg, "q", "p", "m", 4, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1);
    cr_assert_eq(pop(&seg, "q", "g", 3, T0), 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ack1(&seg, "q", "g", rec(i)->seq, SHM_ACK_COMPLETED, T0),
                     SHM_OUT_ACKED);
    cr_assert_eq(info(&seg, "q", T0).depth, 4, "held behind m0's lease");
    cr_assert_eq(take(&seg, "q", T0), 1, "only m0, which g still owes");
    cr_assert_eq(adopt(&seg, "q2", T0), 1);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0), 2);
    expect(0, "local", 0, 1, 1);
    cr_assert_str_eq(payload(rec(1)), "\"m0\"", "then m0, and no m1..m3");
}

/* A group the queue knows that has not read this partition yet may still
 * read all of it: then nothing is left out. */
Test(shm_part_move, a_group_yet_to_read_the_partition_keeps_everything)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 3, T0), 0);
    cr_assert_eq(popx(&seg, 0, "q", "x", "late", 1, 0, 0, T0),
                 0); /* not in p */
    cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1);
    cr_assert_eq(pop(&seg, "q", "g", 2, T0), 2);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(ack1(&seg, "q", "g", rec(i)->seq, SHM_ACK_COMPLETED, T0),
                     SHM_OUT_ACKED);
    cr_assert_eq(take(&seg, "q", T0), 3, "late still needs every one");
}

/* A message no group has read stays for the group that may come for it,
 * also past every cursor (a from=new group starts after it): shipped
 * (found in review). */
Test(shm_part_move, messages_no_group_has_read_are_shipped)
{
    struct shm_pop_req r = {nm("q"), nm("p"), nm("g"), 10, 0, SHM_FROM_NEW, 0};

    cr_assert_eq(pushn(&seg, "q", "p", "m", 3, T0), 0);
    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    cr_assert_eq(shm_pop(&seg, 0, &r, T0, &sink), 0);
    cr_assert_eq(take(&seg, "q", T0), 3, "nobody read them yet");
    cr_assert_eq(adopt(&seg, "q2", T0), 3);
    cr_assert_eq(pop(&seg, "q2", "late", 10, T0), 3);
}

/* With every message it holds left out (completed, or a lease at the
 * retry limit dropped), a take still carries the group's position: the
 * record has no message but a group, and the master ships it. */
Test(shm_part_move, a_take_with_no_message_left_still_carries_the_groups)
{
    declare(&seg, "q", 0, 3);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 2, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 2, T0), 2);
    uint64_t s0 = rec(0)->seq, s1 = rec(1)->seq;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ack1(&seg, "q", "g", s0, SHM_ACK_FAILED, T0),
                     SHM_OUT_REDELIVERED);
        cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1);
    }
    cr_assert_eq(ack1(&seg, "q", "g", s1, SHM_ACK_COMPLETED, T0),
                 SHM_OUT_ACKED);
    cr_assert_eq(take(&seg, "q", T0), 0);
    cr_assert_gt(ho.used, sizeof(struct shm_ho_hdr), "g's position is in it");
    cr_assert_eq(adopt(&seg, "q2", T0), 0);
    struct shm_queue_info qi = info(&seg, "q2", T0);
    cr_assert_eq(qi.groups, 1, "g is known where it went");
}

/* Adopt the static record as worker 1 into a<round>.<k>, k < 20, then
 * wait to be killed. */
static void
adopter(int round)
{
    char q[32];

    for (int k = 0; k < 20; k++) {
        snprintf(q, sizeof(q), "a%d.%d", round, k);
        if (shm_part_adopt(&seg, 1, nm(q), nm("p"), ho.buf, ho.used,
                           shm_now_ms()) < 0)
            _exit(2);
    }
    pause();
    _exit(0);
}

static char adopted[2000][32];
static int nadopted;

static void
name_fn(void *arg, const struct shm_queue_info *q)
{
    (void)arg;
    cr_assert_lt(nadopted, 2000);
    memcpy(adopted[nadopted], q->name, q->name_len);
    adopted[nadopted++][q->name_len] = 0;
}

Test(shm_part_move, killed_adopter_leaves_sound_partitions, .timeout = 120)
{
    /* The adopters adopt at the real clock; later is an hour past both it
     * and T0 + the 30 s leases, however long the machine has been up. */
    uint64_t later = shm_now_ms() + 3600 * 1000, c[SHM_C_COUNT];
    static const char *gs[] = {"g", "h", ""};

    shm_segment_destroy(&seg);
    mkseg(&seg, 32 << 20);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pop(&seg, "q", gs[i], 1, T0), 0);
    cr_assert_eq(pushn(&seg, "q", "p", "m", 12, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 6, T0), 6);
    cr_assert_eq(ack1(&seg, "q", "g", rec(1)->seq, SHM_ACK_COMPLETED, T0),
                 SHM_OUT_ACKED);
    cr_assert_eq(pop(&seg, "q", "", 3, T0), 3);
    cr_assert_eq(take(&seg, "q", T0), 12);
    uint64_t base = shm_arena_used_bytes(&seg);
    srand(5);
    for (int i = 0; i < 60; i++) {
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0)
            adopter(i);
        int st = fixture_kill_after(pid, 100000 + (rand() % 2000) * 1000);
        cr_assert(WIFSIGNALED(st), "the adopter failed: %d", st);
        shm_worker_reap(&seg, 1);
        fixture_check(&seg);
    }
    shm_queue_list_after(&seg, nm("a"), nm(""), 1000000, later, name_fn, NULL);
    cr_assert_gt(nadopted, 0);
    cr_log_info("%d adopts started", nadopted);
    /* Every adopted partition drains for each group, and holds nothing
     * afterwards; the repairs wiped nothing. */
    for (int k = 0; k < nadopted; k++) {
        const char *q = adopted[k];
        for (int i = 0; i < 3; i++) {
            int n;
            while ((n = pop(&seg, q, gs[i], 1000, later)) > 0)
                for (int j = 0; j < n; j++)
                    ack1(&seg, q, gs[i], rec(j)->seq, SHM_ACK_COMPLETED, later);
            cr_assert_eq(n, 0);
        }
        struct shm_queue_info qi = info(&seg, q, later);
        cr_assert_eq(qi.depth, 0, "%s holds %llu", q,
                     (unsigned long long)qi.depth);
        cr_assert_eq(qi.leased, 0);
        cr_assert_eq(shm_queue_delete(&seg, 0, nm(q), later), 1);
    }
    shm_counters_sum(&seg, c);
    cr_log_info("lock repairs %llu", (unsigned long long)c[SHM_C_LOCK_REPAIRS]);
    cr_assert_eq(c[SHM_C_WIPES], 0);
    cr_assert_eq(shm_arena_used_bytes(&seg), base);
}

/* A hold (a hand-over announced): pops read nothing meanwhile, pushes are
 * kept, and the adopted messages go before them, numbered below them, with
 * every group placed; the hold ends with the adopt. */
Test(shm_part_move, pushes_during_a_hold_come_after_the_adopted_messages)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 3, T0), 0);
    cr_assert_eq(pop(&seg, "q", "g", 1, T0), 1); /* m0 leased */
    cr_assert_eq(take(&seg, "q", T0), 3);
    cr_assert_eq(shm_part_hold(&seg, M, nm("q2"), nm("p"), T0, 5000), 0);
    cr_assert_eq(pushn(&seg, "q2", "p", "w", 2, T0), 0);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 1), 0, "held");
    cr_assert_eq(pop(&seg, "q2", "h", 10, T0 + 1), 0, "held");
    fixture_check(&seg);
    cr_assert_eq(adopt(&seg, "q2", T0 + 2), 3);
    fixture_check(&seg);
    /* g: its lease again, then m1, m2, then what came during the hold. */
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 3), 5);
    expect(0, "m", 0, 1, 2);
    expect(1, "m", 1, 2, 1);
    expect(3, "w", 0, 2, 1);
    for (int i = 1; i < 5; i++)
        cr_assert_gt(rec(i)->seq, rec(i - 1)->seq, "ids in list order");
    /* h, not in the record: everything, in that order too. */
    cr_assert_eq(pop(&seg, "q2", "h", 10, T0 + 3), 5);
    expect(0, "m", 0, 3, 1);
    expect(3, "w", 0, 2, 1);
}

/* A hold that ran out ends with the first pop after, even one whose
 * reads are all completed and freed by the time its hand-over comes: the
 * adopt goes after what is held then, as a push would. */
Test(shm_part_move, a_hold_that_ran_out_ends_with_the_next_pop)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 2, T0), 0);
    cr_assert_eq(take(&seg, "q", T0), 2);
    cr_assert_eq(shm_part_hold(&seg, M, nm("q2"), nm("p"), T0, 100), 0);
    cr_assert_eq(pushn(&seg, "q2", "p", "w", 1, T0), 0);
    cr_assert_eq(pop(&seg, "q2", "h", 1, T0 + 200), 1);
    cr_assert_eq(
        ack1(&seg, "q2", "h", rec(0)->seq, SHM_ACK_COMPLETED, T0 + 200),
        SHM_OUT_ACKED);
    cr_assert_eq(info(&seg, "q2", T0 + 200).depth, 0, "w0 freed");
    cr_assert_eq(pushn(&seg, "q2", "p", "x", 1, T0 + 200), 0);
    cr_assert_eq(adopt(&seg, "q2", T0 + 300), 2);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "q2", "h", 10, T0 + 300), 3);
    expect(0, "x", 0, 1, 1);
    expect(1, "m", 0, 2, 1);
}

/* A hold whose time ran out, with the pushes read meanwhile: the adopt
 * goes after them, as a push would. */
Test(shm_part_move, an_adopt_after_a_read_hold_goes_to_the_tail)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 2, T0), 0);
    cr_assert_eq(take(&seg, "q", T0), 2);
    cr_assert_eq(shm_part_hold(&seg, M, nm("q2"), nm("p"), T0, 100), 0);
    cr_assert_eq(pushn(&seg, "q2", "p", "w", 2, T0), 0);
    cr_assert_eq(pop(&seg, "q2", "h", 1, T0 + 200), 1);
    expect(0, "w", 0, 1, 1);
    cr_assert_eq(adopt(&seg, "q2", T0 + 300), 2);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "q2", "h", 10, T0 + 300), 3);
    expect(0, "w", 1, 1, 1);
    expect(1, "m", 0, 2, 1);
}

/* A join's window: a push holds the partition it lands in, so what a
 * hand-over brings later goes first, numbered below; the adopt ends that
 * hold.  A partition nobody ships is let go by shm_part_unhold; once the
 * window is closed a push holds nothing. */
Test(shm_part_move, a_join_window_holds_what_a_push_lands_in)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 3, T0), 0);
    cr_assert_eq(take(&seg, "q", T0), 3);
    shm_part_join_window(&seg, T0 + 5000);
    cr_assert_eq(pushn(&seg, "q2", "p", "w", 2, T0), 0);
    cr_assert_eq(pushn(&seg, "q3", "p", "n", 1, T0), 0);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 1), 0, "held");
    cr_assert_eq(pop(&seg, "q3", "g", 10, T0 + 1), 0, "held");
    fixture_check(&seg);
    cr_assert_eq(adopt(&seg, "q2", T0 + 2), 3);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 3), 5);
    expect(0, "m", 0, 3, 1);
    expect(3, "w", 0, 2, 1);
    for (int i = 1; i < 5; i++)
        cr_assert_gt(rec(i)->seq, rec(i - 1)->seq, "ids in list order");
    /* Nobody ships q3: closed, and let go. */
    shm_part_join_window(&seg, 0);
    cr_assert_eq(pop(&seg, "q3", "g", 10, T0 + 4), 0, "still held");
    cr_assert_eq(shm_part_unhold(&seg, M, nm("q3"), nm("p"), T0 + 5000, T0 + 4),
                 0);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "q3", "g", 10, T0 + 4), 1);
    expect(0, "n", 0, 1, 1);
    cr_assert_eq(pushn(&seg, "q3", "p", "x", 1, T0 + 5), 0);
    cr_assert_eq(pop(&seg, "q3", "g", 10, T0 + 5), 1, "no hold any more");
    expect(0, "x", 0, 1, 1);
    /* and one with no hold, or no such partition, is left as it is */
    cr_assert_eq(shm_part_unhold(&seg, M, nm("q3"), nm("p"), T0 + 5000, T0 + 6),
                 0);
    cr_assert_eq(shm_part_unhold(&seg, M, nm("q9"), nm("p"), T0 + 5000, T0 + 6),
                 0);
}

/* The window's close ends only its own holds: one a draining peer's "h"
 * line made (shm_part_hold) stays until its adopt or its time, so what
 * that peer ships still goes first. */
Test(shm_part_move, a_join_close_leaves_a_drains_hold)
{
    cr_assert_eq(pushn(&seg, "q", "p", "m", 2, T0), 0);
    cr_assert_eq(take(&seg, "q", T0), 2);
    shm_part_join_window(&seg, T0 + 5000);
    cr_assert_eq(shm_part_hold(&seg, M, nm("q2"), nm("p"), T0, 4000), 0);
    cr_assert_eq(pushn(&seg, "q2", "p", "w", 1, T0 + 1), 0);
    shm_part_join_window(&seg, 0);
    cr_assert_eq(shm_part_unhold(&seg, M, nm("q2"), nm("p"), T0 + 5000, T0 + 2),
                 0);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 2), 0, "the drain's hold stays");
    cr_assert_eq(adopt(&seg, "q2", T0 + 3), 2);
    fixture_check(&seg);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 3), 3);
    expect(0, "m", 0, 2, 1);
    expect(2, "w", 0, 1, 1);
}

/* A join's hold that nobody ends runs out with the window, as a drain's
 * does: the next pop reads what came. */
Test(shm_part_move, a_join_hold_runs_out_with_its_window)
{
    shm_part_join_window(&seg, T0 + 100);
    cr_assert_eq(pushn(&seg, "q2", "p", "w", 1, T0), 0);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 50), 0, "held");
    cr_assert_eq(pushn(&seg, "q2", "p", "x", 1, T0 + 200), 0);
    cr_assert_eq(pop(&seg, "q2", "g", 10, T0 + 200), 2);
    expect(0, "w", 0, 1, 1);
    expect(1, "x", 0, 1, 1);
    fixture_check(&seg);
}
