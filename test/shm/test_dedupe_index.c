/*
 * test_dedupe_index.c - the dedupe window's hash index (shm/dd_index.c),
 * white box: lookups through it equal the list's walk over random
 * sequences of appends and trims, it grows, it is rebuilt after an adopt,
 * and a worker killed mid-update (a forked child holding the partition lock
 * leaves the update half done and dies) leaves what the repair makes sound.
 * The segment checker compares index and list after every step.
 */
#include <sys/wait.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/broker.h"
#include "shm/check.h"
#include "shm/dd_index.h"
#include "shm/dir.h"
#include "shm/maintain.h"
#include "shm/part_move.h"
#include "shm/queue_admin.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "test/shm/fixture.h"

#define T0 1000000ULL

static struct shm_seg seg, seg2;

static void
setup(void)
{
    struct shm_params p = fixture_params(8 << 20, 4, 77);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

TestSuite(shm_dedupe_index, .init = setup, .timeout = 60);

/* Queue q of s with a window of dedupe_s and room for max keys. */
static void
declare(struct shm_seg *s, const char *q, uint32_t dedupe_s, uint32_t max)
{
    struct shm_qopts o = {.max_length = max,
                          .max_bytes = 4 << 20,
                          .lease_s = 30,
                          .retry_limit = 5,
                          .dedupe_s = dedupe_s};

    cr_assert_eq(shm_queue_declare(s, 0, nm(q), &o), 0);
}

static uint64_t
key(uint32_t k)
{
    return 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
}

/* Push keys from..from+n-1 to (q, Default) of s, eight a call; returns
 * the duplicates. */
static uint32_t
push_keys(struct shm_seg *s, const char *q, uint32_t from, uint32_t n,
          uint64_t now, struct shm_push_id *ids)
{
    struct shm_msg_in in[8];
    struct shm_msg_extra ex[8];
    uint32_t total = 0;

    for (uint32_t i = 0; i < n; i += 8) {
        uint32_t k = n - i < 8 ? n - i : 8, dups, conflated;
        for (uint32_t j = 0; j < k; j++) {
            in[j] = (struct shm_msg_in){"\"m\"", 3};
            ex[j] = (struct shm_msg_extra){.key_hash = key(from + i + j),
                                           .has_key = 1};
        }
        cr_assert_eq(shm_push_keyed(s, 0, nm(q), nm("Default"), in, ex, k, now,
                                    ids + i, &dups, &conflated),
                     0);
        total += dups;
    }
    return total;
}

/* The partition (q, Default) of s as worker w at now. */
static struct shm_ring_ctx
ctx(struct shm_seg *s, const char *q, int w, uint64_t now)
{
    struct shm_ref qr, pr;

    cr_assert_eq(shm_dir_find_queue(s, 0, nm(q), 0, now, &qr), 0);
    cr_assert_eq(shm_dir_find_part(s, 0, qr, nm("Default"), 0, now, &pr), 0);
    return (struct shm_ring_ctx){
        s, w, shm_dir_part(s, pr.idx), shm_dir_queue(s, qr.idx), now, NULL};
}

/* The lookup as it was before the index: the list's walk. */
static const struct shm_dd *
walk_find(struct shm_ring_ctx *c, uint64_t hash, uint64_t window_ms)
{
    for (uint32_t d = c->p->dd_head; d != 0; d = shm_ring_dd(c->seg, d)->next) {
        const struct shm_dd *e = shm_ring_dd(c->seg, d);
        if (e->hash == hash && e->at_ms + window_ms > c->now)
            return e;
    }
    return NULL;
}

/* A key cell of hash seen at at, filled as a push fills it, appended. */
static void
append_key(struct shm_ring_ctx *c, uint64_t hash, uint64_t seq)
{
    uint32_t d;

    cr_assert_eq(shm_arena_alloc(c->seg, c->w, 1, &d), 0);
    struct shm_dd *e = shm_ring_dd(c->seg, d);
    *e = (struct shm_dd){.chain = e->chain,
                         .hash = hash,
                         .seq = seq,
                         .inc = 77,
                         .at_ms = c->now};
    shm_ring_dd_append_locked(c, d);
}

Test(shm_dedupe_index, lookups_equal_the_walk_over_random_appends_and_trims)
{
    struct shm_push_id id;

    declare(&seg, "q", 60, 100000);
    push_keys(&seg, "q", 100000, 1, T0, &id); /* the partition */
    srand(28);
    uint64_t now = T0, seq = 1;
    int indexed = 0;
    for (int round = 0; round < 40; round++) {
        struct shm_ring_ctx c = ctx(&seg, "q", 0, now);
        cr_assert_eq(shm_ring_lock(&seg, 0, c.p), 0);
        for (int op = 0; op < 200; op++) {
            int r = rand() % 100;
            /* a small key space: the same hash is often in the window
             * twice (a key appended after its own window), and windows
             * of several lengths probe both matches */
            uint64_t h = key((uint32_t)(rand() % 300));
            uint64_t window = (uint64_t)(rand() % 5000);
            if (r < 70)
                append_key(&c, h, seq++);
            else if (r < 75)
                shm_ring_dd_trim_locked(&c, window, UINT32_MAX);
            else if (r < 78)
                shm_ring_dd_trim_locked(&c, 60000,
                                        c.p->dd_count / 2 + rand() % 3);
            const struct shm_dd *a = shm_ring_dd_find_locked(&c, h, window);
            cr_assert_eq(a, walk_find(&c, h, window),
                         "round %d op %d: the index and the walk differ", round,
                         op);
            indexed |= c.p->dd_index != 0;
            c.now = now += (uint64_t)(rand() % 7);
        }
        shm_ring_unlock(c.p);
        fixture_check(&seg);
    }
    cr_assert(indexed, "the index was made");
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), now), 1);
    fixture_check(&seg);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0, "index and keys freed");
}

Test(shm_dedupe_index, the_index_grows_with_the_window_and_goes_with_it)
{
    static struct shm_push_id ids[4096], again[4096];

    declare(&seg, "q", 10, 100000);
    cr_assert_eq(push_keys(&seg, "q", 0, 7, T0, ids), 0);
    struct shm_ring_ctx c = ctx(&seg, "q", 0, T0);
    cr_assert_eq(c.p->dd_index, 0, "a short window is walked");
    cr_assert_eq(push_keys(&seg, "q", 7, 1, T0, ids + 7), 0);
    cr_assert_neq(c.p->dd_index, 0, "made at SHM_DDX_MIN_KEYS");
    uint32_t nb = shm_ddx_of(&seg, c.p)->nb;
    cr_assert_eq(nb, SHM_DDX_MIN_BUCKETS);
    cr_assert_eq(push_keys(&seg, "q", 8, 4088, T0 + 1, ids + 8), 0);
    fixture_check(&seg);
    cr_assert_eq(c.p->dd_count, 4096);
    cr_assert_geq(shm_ddx_of(&seg, c.p)->nb, 4096 / 2, "grown");
    /* every key found again, with its first answer */
    cr_assert_eq(push_keys(&seg, "q", 0, 4096, T0 + 2, again), 4096);
    for (uint32_t i = 0; i < 4096; i++)
        cr_assert_eq(again[i].seq, ids[i].seq, "key %u", i);
    /* the window over: the keys go, and the index with the last of them */
    cr_assert_eq(push_keys(&seg, "q", 5000, 1, T0 + 20000, again), 0);
    cr_assert_eq(c.p->dd_count, 1);
    cr_assert_eq(c.p->dd_index, 0);
    fixture_check(&seg);
}

Test(shm_dedupe_index, an_adopted_window_is_indexed_with_the_keys_here)
{
    static struct shm_push_id ids[200], here[20], again[220];
    static unsigned char rec[1 << 18];
    struct shm_ho_sink out = {.buf = rec, .cap = sizeof(rec)};
    struct shm_params p = fixture_params(8 << 20, 4, 88);

    declare(&seg, "h", 60, 1000);
    cr_assert_eq(push_keys(&seg, "h", 0, 200, T0, ids), 0);
    cr_assert_eq(
        shm_part_take(&seg, 0, nm("h"), nm("Default"), T0 + 1000, &out), 200);
    fixture_check(&seg);

    cr_assert_eq(shm_segment_create(&p, &seg2), 0);
    declare(&seg2, "h", 60, 1000);
    cr_assert_eq(push_keys(&seg2, "h", 1000, 20, T0 + 1000, here), 0);
    struct shm_ring_ctx c = ctx(&seg2, "h", 0, T0 + 1000);
    cr_assert_neq(c.p->dd_index, 0);
    cr_assert_eq(shm_part_adopt(&seg2, 0, nm("h"), nm("Default"), rec, out.used,
                                T0 + 1000),
                 200);
    fixture_check(&seg2);
    cr_assert_eq(c.p->dd_count, 220);
    cr_assert_geq(shm_ddx_of(&seg2, c.p)->nb, 128, "rebuilt to fit");
    /* both windows answer, each with its first ids */
    cr_assert_eq(push_keys(&seg2, "h", 0, 200, T0 + 1001, again), 200);
    for (uint32_t i = 0; i < 200; i++) {
        cr_assert_eq(again[i].seq, ids[i].seq);
        cr_assert_eq(again[i].inc, 77);
    }
    cr_assert_eq(push_keys(&seg2, "h", 1000, 20, T0 + 1001, again), 20);
    for (uint32_t i = 0; i < 20; i++)
        cr_assert_eq(again[i].seq, here[i].seq);
    fixture_check(&seg2);
}

/* ---- a worker killed mid-update ---------------------------------------- */

/* Run fn in a child holding the partition lock as worker 1; it dies with
 * the lock held; then the master's reap (repair, then free the dead
 * worker's runs) and the checker. */
static void
die_holding(void (*fn)(struct shm_ring_ctx *c))
{
    struct shm_ring_ctx c = ctx(&seg, "q", 1, T0 + 5);
    pid_t pid = fork();

    cr_assert_neq(pid, -1);
    if (pid == 0) {
        if (shm_ring_lock(&seg, 1, c.p) != 0)
            _exit(1);
        fn(&c);
        kill(getpid(), SIGKILL);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st));
    cr_assert_eq(shm_worker_reap(&seg, 1), 0);
    fixture_check(&seg);
}

/* A key linked into the list (and counted), not yet into the index. */
static void
half_insert(struct shm_ring_ctx *c)
{
    uint32_t d;

    if (shm_arena_alloc(c->seg, 1, 1, &d) != 0)
        _exit(2);
    *shm_ring_dd(c->seg, d) = (struct shm_dd){
        .chain = 1, .hash = key(900), .seq = 900, .inc = 77, .at_ms = c->now};
    shm_ring_dd(c->seg, c->p->dd_tail)->next = d;
    c->p->dd_tail = d;
    c->p->dd_count++;
}

/* The oldest key taken out of its bucket, still on the list. */
static void
half_remove(struct shm_ring_ctx *c)
{
    c->p->intent = c->p->dd_head;
    shm_ddx_remove(c->seg, shm_ddx_of(c->seg, c->p), c->p->dd_head);
}

/* A bigger index built and filled (every key's bnext rewritten for it),
 * not yet named: the old one is stale. */
static void
grow_unnamed(struct shm_ring_ctx *c)
{
    uint32_t r, nb = 256;

    if (shm_arena_alloc(c->seg, 1, shm_ddx_cells(nb), &r) != 0)
        _exit(2);
    struct shm_ddx *x = shm_cell(c->seg, r);
    x->nb = nb;
    shm_ddx_fill(c->seg, x, c->p->dd_head, UINT64_MAX);
    c->p->intent = c->p->dd_index;
}

/* The bigger index named, not yet tagged LINKED, the old one not freed. */
static void
grow_named(struct shm_ring_ctx *c)
{
    uint32_t r, nb = 256;

    if (shm_arena_alloc(c->seg, 1, shm_ddx_cells(nb), &r) != 0)
        _exit(2);
    struct shm_ddx *x = shm_cell(c->seg, r);
    x->nb = nb;
    shm_ddx_fill(c->seg, x, c->p->dd_head, UINT64_MAX);
    c->p->intent = c->p->dd_index;
    c->p->dd_index = r;
}

/* The window emptied, its index unnamed, not yet freed. */
static void
drop_unfreed(struct shm_ring_ctx *c)
{
    while (c->p->dd_head != 0) {
        uint32_t d = c->p->dd_head;
        c->p->dd_head = shm_ring_dd(c->seg, d)->next;
        c->p->dd_count--;
        shm_arena_free(c->seg, 1, d);
    }
    c->p->dd_tail = 0;
    c->p->intent = c->p->dd_index;
    c->p->dd_index = 0;
}

static uint64_t
counter_repairs(void)
{
    return fixture_counter(&seg, SHM_C_LOCK_REPAIRS);
}

/* After a repair: every key found through the index, as by the walk; the
 * queue deleted, the arena back to zero (nothing leaked, nothing freed
 * twice). */
static void
sound_after(uint32_t keys, const struct shm_push_id *ids)
{
    struct shm_push_id again[64];
    struct shm_ring_ctx c = ctx(&seg, "q", 0, T0 + 6);

    cr_assert_eq(c.p->intent, 0);
    cr_assert_eq(counter_repairs(), 1);
    cr_assert_eq(push_keys(&seg, "q", 0, keys, T0 + 6, again), keys);
    for (uint32_t i = 0; i < keys; i++)
        cr_assert_eq(again[i].seq, ids[i].seq, "key %u", i);
    fixture_check(&seg);
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), T0 + 7), 1);
    fixture_check(&seg);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);
}

/* A window of 40 keys (indexed) of queue q. */
static void
window(struct shm_push_id *ids)
{
    declare(&seg, "q", 60, 1000);
    cr_assert_eq(push_keys(&seg, "q", 0, 40, T0, ids), 0);
    cr_assert_neq(ctx(&seg, "q", 0, T0).p->dd_index, 0);
}

Test(shm_dedupe_index, killed_mid_insert_the_repair_indexes_the_key)
{
    struct shm_push_id ids[64], one;

    window(ids);
    die_holding(half_insert);
    struct shm_ring_ctx c = ctx(&seg, "q", 0, T0 + 6);
    cr_assert_eq(c.p->dd_count, 41);
    struct shm_msg_extra ex = {.key_hash = key(900), .has_key = 1};
    struct shm_msg_in in = {"\"m\"", 3};
    uint32_t dups, conflated;
    cr_assert_eq(shm_push_keyed(&seg, 0, nm("q"), nm("Default"), &in, &ex, 1,
                                T0 + 6, &one, &dups, &conflated),
                 0);
    cr_assert_eq(dups, 1, "the half-inserted key is found");
    cr_assert_eq(one.seq, 900);
    sound_after(40, ids);
}

Test(shm_dedupe_index, killed_mid_removal_the_repair_rebuilds)
{
    struct shm_push_id ids[64];

    window(ids);
    die_holding(half_remove);
    cr_assert_eq(ctx(&seg, "q", 0, T0).p->dd_count, 40,
                 "the list is the truth");
    sound_after(40, ids);
}

Test(shm_dedupe_index, killed_mid_growth_before_naming_the_new_index)
{
    struct shm_push_id ids[64];

    window(ids);
    uint32_t old = ctx(&seg, "q", 0, T0).p->dd_index;
    die_holding(grow_unnamed);
    cr_assert_eq(ctx(&seg, "q", 0, T0).p->dd_index, old,
                 "the old one, rebuilt");
    sound_after(40, ids);
}

Test(shm_dedupe_index, killed_mid_growth_after_naming_the_new_index)
{
    struct shm_push_id ids[64];

    window(ids);
    uint32_t old = ctx(&seg, "q", 0, T0).p->dd_index;
    die_holding(grow_named);
    struct shm_ring_ctx c = ctx(&seg, "q", 0, T0);
    cr_assert_neq(c.p->dd_index, old, "the new one, linked; the old freed");
    cr_assert_eq(shm_ddx_of(&seg, c.p)->nb, 256);
    sound_after(40, ids);
}

Test(shm_dedupe_index, killed_freeing_the_index_of_an_empty_window)
{
    struct shm_push_id ids[64];

    window(ids);
    die_holding(drop_unfreed);
    struct shm_ring_ctx c = ctx(&seg, "q", 0, T0);
    cr_assert_eq(c.p->dd_index, 0);
    cr_assert_eq(c.p->dd_count, 0);
    cr_assert_eq(counter_repairs(), 1);
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), T0 + 7), 1);
    fixture_check(&seg);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0, "the index was freed");
}

/* The child's loop as worker 1: keyed pushes of random keys, forever (a
 * window of a second: keys trimmed as well as added, the index grown and
 * freed). */
static void
keyed_child(unsigned seed)
{
    struct shm_msg_in in[8];
    struct shm_msg_extra ex[8];
    struct shm_push_id ids[8];
    uint32_t dups, conflated;

    srand(seed);
    for (;;) {
        uint32_t n = 1 + (uint32_t)(rand() % 8);
        for (uint32_t j = 0; j < n; j++) {
            in[j] = (struct shm_msg_in){"\"m\"", 3};
            ex[j] = (struct shm_msg_extra){
                .key_hash = key((uint32_t)(rand() % 3000)), .has_key = 1};
        }
        (void)shm_push_keyed(&seg, 1, nm("q"), nm("Default"), in, ex, n,
                             shm_now_ms(), ids, &dups, &conflated);
    }
}

Test(shm_dedupe_index, a_worker_killed_at_random_while_pushing_keys)
{
    struct shm_push_id id;

    declare(&seg, "q", 1, 2000);
    push_keys(&seg, "q", 0, 1, shm_now_ms(), &id);
    srand(2828);
    for (int i = 0; i < 60; i++) {
        unsigned cs = (unsigned)rand();
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0)
            keyed_child(cs);
        fixture_kill_after(pid, 2000000 + (rand() % 40) * 1000000L);
        cr_assert_eq(shm_worker_reap(&seg, 1), 0);
        fixture_check(&seg);
        /* every key of the window found through the index as by a walk */
        struct shm_ring_ctx c = ctx(&seg, "q", 0, shm_now_ms());
        cr_assert_eq(shm_ring_lock(&seg, 0, c.p), 0);
        for (uint32_t d = c.p->dd_head; d != 0;
             d = shm_ring_dd(&seg, d)->next) {
            uint64_t h = shm_ring_dd(&seg, d)->hash;
            cr_assert_eq(shm_ring_dd_find_locked(&c, h, 1000),
                         walk_find(&c, h, 1000));
        }
        shm_ring_unlock(c.p);
    }
    cr_log_info("lock repairs %llu, wipes %llu",
                (unsigned long long)counter_repairs(),
                (unsigned long long)fixture_counter(&seg, SHM_C_WIPES));
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), shm_now_ms()), 1);
    fixture_check(&seg);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);
}

Test(shm_dedupe_index, the_checker_finds_an_index_that_misses_a_key)
{
    struct shm_push_id ids[64];
    struct shm_check_report r;

    window(ids);
    struct shm_ring_ctx c = ctx(&seg, "q", 0, T0);
    struct shm_ddx *x = shm_ddx_of(&seg, c.p);
    uint32_t *b = &x->b[key(3) & (x->nb - 1)], saved = *b;
    *b = shm_ring_dd(&seg, saved)->bnext; /* its newest key left out */
    cr_assert_gt(shm_check(&seg, SHM_CHECK_QUIET, &r), 0);
    cr_assert(strstr(r.first, "dedupe index") != NULL, "%s", r.first);
    *b = saved;
    fixture_check(&seg);
}

/* ---- a key stored on both sides of a gap (issue 28) --------------------- */

/* Keys 0..9 taken from seg, keys 5..14 pushed to seg2 meanwhile (read
 * there first if read), then the adopt: the copies of 5..9 here. */
static struct shm_ring_ctx
gap_adopt(int read, struct shm_push_id *ids)
{
    static struct shm_push_id here[10];
    static unsigned char rec[1 << 16], out_buf[1 << 16];
    struct shm_ho_sink out = {.buf = rec, .cap = sizeof(rec)};
    struct shm_params p = fixture_params(8 << 20, 4, 88);

    declare(&seg, "g", 60, 1000);
    cr_assert_eq(push_keys(&seg, "g", 0, 10, T0, ids), 0);
    cr_assert_eq(
        shm_part_take(&seg, 0, nm("g"), nm("Default"), T0 + 1000, &out), 10);
    cr_assert_eq(shm_segment_create(&p, &seg2), 0);
    declare(&seg2, "g", 60, 1000);
    cr_assert_eq(push_keys(&seg2, "g", 5, 10, T0 + 1000, here), 0);
    if (read) {
        struct shm_pop_req r = {nm("g"), nm("Default"), nm(""), 10,
                                0,       SHM_FROM_ALL,  0};
        struct shm_sink k = {.buf = out_buf, .cap = sizeof(out_buf)};
        cr_assert_eq(shm_pop(&seg2, 0, &r, T0 + 1000, &k), 10);
    }
    cr_assert_eq(shm_part_adopt(&seg2, 0, nm("g"), nm("Default"), rec, out.used,
                                T0 + 1000),
                 10);
    fixture_check(&seg2);
    return ctx(&seg2, "g", 0, T0 + 1000);
}

Test(shm_dedupe_index, an_unread_key_stored_during_the_gap_gives_way)
{
    static struct shm_push_id ids[10], again[10];
    struct shm_ring_ctx c = gap_adopt(0, ids);

    cr_assert_eq(atomic_load(&c.p->count), 15, "the 5 copies here went");
    cr_assert_eq(c.p->dd_count, 15);
    cr_assert_eq(push_keys(&seg2, "g", 0, 10, T0 + 1001, again), 10);
    for (uint32_t i = 0; i < 10; i++) {
        cr_assert_eq(again[i].seq, ids[i].seq, "the first id");
        cr_assert_eq(again[i].inc, 77);
    }
}

Test(shm_dedupe_index, a_read_key_stored_during_the_gap_stays)
{
    static struct shm_push_id ids[10];
    struct shm_ring_ctx c = gap_adopt(1, ids);

    cr_assert_eq(atomic_load(&c.p->count), 20, "at-least-once: both kept");
    cr_assert_eq(c.p->dd_count, 20);
}
