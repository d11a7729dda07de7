/*
 * test_check.c - the segment checker (shm/check.h) on a fixture segment: a
 * sound segment with messages, groups, leases and parked pops passes, and
 * each kind of damage a repair must never leave is named, one at a time
 * (a count off, a leak, a run reached twice, a dangling lease, a due heap
 * out of order, a waiter bit of a worker slot not in use, a cycle in a
 * message list, a ref past the arena, a hold whose numbers a message
 * uses), and the check still ends.
 */
#include <stdatomic.h>
#include <string.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/broker.h"
#include "shm/check.h"
#include "shm/dir.h"
#include "shm/due.h"
#include "shm/layout.h"
#include "shm/part_move.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "test/shm/fixture.h"

static struct shm_seg seg;
static unsigned char buf[1 << 16];
static struct shm_sink sink;

/* A queue q with 10 messages in p, 3 of them leased to group g, and a
 * group h that has read nothing. */
static void
setup(void)
{
    struct shm_params p = fixture_params(8 << 20, 4, 1);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    cr_assert_eq(fixture_pushn(&seg, "q", "p", "m", 10, shm_now_ms(), NULL), 0);
    cr_assert_eq(
        fixture_pushn(&seg, "other", "Default", "o", 2, shm_now_ms(), NULL), 0);
    struct shm_pop_req r = {nm("q"), nm("p"), nm("g"), 3, 0, SHM_FROM_ALL, 0};
    sink = (struct shm_sink){.buf = buf, .cap = sizeof(buf)};
    cr_assert_eq(shm_pop(&seg, 0, &r, shm_now_ms(), &sink), 3);
    struct shm_pop_req r2 = {nm("q"), nm("p"), nm("h"), 0, 0, SHM_FROM_ALL, 0};
    sink = (struct shm_sink){.buf = buf, .cap = sizeof(buf)};
    cr_assert_geq(shm_pop(&seg, 0, &r2, shm_now_ms(), &sink), 0);
}

static void
teardown(void)
{
    shm_segment_destroy(&seg);
}

/* Partition p of queue q. */
static struct shm_part *
part_p(void)
{
    struct shm_ref qr, pr;

    cr_assert_eq(shm_dir_find_queue(&seg, 0, nm("q"), 0, 0, &qr), 0);
    cr_assert_eq(shm_dir_find_part(&seg, 0, qr, nm("p"), 0, 0, &pr), 0);
    return shm_dir_part(&seg, pr.idx);
}

/* The state of group g (the one with leases) in p. */
static struct shm_gs *
leased_state(struct shm_part *p)
{
    for (uint32_t g = p->groups; g != 0; g = shm_ring_gs(&seg, g)->next)
        if (shm_ring_gs(&seg, g)->lhead != 0)
            return shm_ring_gs(&seg, g);
    cr_assert_fail("no state with leases");
    return NULL;
}

/* The check finds exactly what contains says, first. */
static void
expect_broken(const char *contains)
{
    struct shm_check_report r;

    cr_assert_gt(shm_check(&seg, SHM_CHECK_QUIET, &r), 0,
                 "the check passed a damaged segment");
    cr_assert(strstr(r.first, contains) != NULL, "first problem: %s", r.first);
}

TestSuite(shm_check, .init = setup, .fini = teardown);

Test(shm_check, a_sound_segment_passes_with_its_figures)
{
    struct shm_check_report r;

    cr_assert_eq(shm_check(&seg, SHM_CHECK_QUIET, &r), 0, "%s", r.first);
    cr_assert_eq(r.queues, 2);
    cr_assert_eq(r.parts, 2);
    cr_assert_eq(r.messages, 12);
    cr_assert_eq(r.leases, 3);
    cr_assert_eq(r.groups, 2);
    cr_assert_eq(r.states, 2);
    cr_assert_eq(r.inflight_cells, 0);
    cr_assert_eq(r.linked_cells * SHM_CELL_BYTES, shm_arena_used_bytes(&seg));
    /* Live mode (no whole-segment accounting) agrees. */
    cr_assert_eq(shm_check(&seg, 0, &r), 0, "%s", r.first);
}

Test(shm_check, a_partition_count_off_by_one)
{
    atomic_fetch_add(&part_p()->count, 1);
    expect_broken("holds 10 messages");
}

Test(shm_check, a_message_unlinked_without_a_free_is_a_leak)
{
    struct shm_part *p = part_p();
    uint32_t tail = p->tail, prev = p->head;

    while (shm_ring_msg(&seg, prev)->next != tail)
        prev = shm_ring_msg(&seg, prev)->next;
    shm_ring_msg(&seg, prev)->next = 0;
    p->tail = prev;
    atomic_fetch_sub(&p->count, 1);
    atomic_fetch_sub(&p->cost,
                     shm_ring_msg_cost(shm_ring_msg(&seg, tail)->len));
    expect_broken("reached by nothing: a leak");
}

Test(shm_check, a_lease_naming_a_message_not_listed)
{
    struct shm_lease *l = shm_ring_lease(&seg, leased_state(part_p())->lhead);

    l->msg = part_p()->tail; /* a listed message, of another seq */
    expect_broken("names no listed message");
}

Test(shm_check, a_lease_counted_twice)
{
    leased_state(part_p())->nleases++;
    expect_broken("counts 4 leases");
}

Test(shm_check, a_cell_reached_from_two_structures)
{
    struct shm_part *p = part_p();
    struct shm_gs *s = leased_state(p);

    /* Both groups' states point at one registry entry. */
    for (uint32_t g = p->groups; g != 0; g = shm_ring_gs(&seg, g)->next)
        if (shm_ring_gs(&seg, g) != s) {
            shm_ring_gs(&seg, g)->grp = s->grp;
            shm_ring_gs(&seg, g)->name_hash = s->name_hash;
        }
    expect_broken("two states for one group");
}

Test(shm_check, a_run_tagged_free_while_listed)
{
    struct shm_arena *a = shm_region(&seg, SHM_REGION_ARENA);
    _Atomic uint32_t *tags =
        (_Atomic uint32_t *)((unsigned char *)a + a->tags_off);
    uint32_t h = part_p()->head;

    atomic_store(&tags[h], SHM_TAG_RUN(SHM_TAG_FREE, 0,
                                       SHM_TAG_LEN(atomic_load(&tags[h]))));
    expect_broken("not LINKED");
}

Test(shm_check, a_lease_left_off_the_due_heap)
{
    uint32_t keys[64];

    /* The master took every key and visited none. */
    while (shm_due_take(&seg, UINT64_MAX - 1, keys, 64) > 0)
        ;
    expect_broken("not on the due heap");
}

Test(shm_check, a_waiter_bit_of_a_slot_not_in_use)
{
    atomic_fetch_or(&part_p()->waiters, 1ULL << 9);
    expect_broken("waiter bits");
}

Test(shm_check, a_queue_record_dead_but_not_free)
{
    struct shm_ref qr;

    cr_assert_eq(shm_dir_find_queue(&seg, 0, nm("other"), 0, 0, &qr), 0);
    atomic_store(&shm_dir_queue(&seg, qr.idx)->alive, 0);
    expect_broken("neither alive nor free");
}

Test(shm_check, the_arena_taken_count_off)
{
    struct shm_arena *a = shm_region(&seg, SHM_REGION_ARENA);

    atomic_fetch_add(&a->taken, 1);
    expect_broken("cells taken");
}

/* The n-th message of p (1: the head). */
static uint32_t
nth_msg(struct shm_part *p, int n)
{
    uint32_t r = p->head;

    while (--n > 0)
        r = shm_ring_msg(&seg, r)->next;
    return r;
}

/* A cycle among the messages group g has read: the list walk names it, and
 * the cursor and lease walks (whose messages all lie at or below the group's
 * last delivery) are not made to go round it for ever. */
Test(shm_check, a_message_list_with_a_cycle, .timeout = 30)
{
    struct shm_part *p = part_p();

    shm_ring_msg(&seg, nth_msg(p, 3))->next = p->head;
    expect_broken("do not rise in seq");
    struct shm_check_report r;
    cr_assert_gt(shm_check(&seg, 0, &r), 0, "the live check passed a cycle");
}

/* A message's next past the arena's last cell is named, not followed. */
Test(shm_check, a_message_ref_past_the_arena, .timeout = 30)
{
    struct shm_part *p = part_p();

    shm_ring_msg(&seg, nth_msg(p, 2))->next = 0xfffffff0u;
    expect_broken("points at cell 4294967280, outside the arena");
}

/* So is a lease's next. */
Test(shm_check, a_lease_ref_past_the_arena, .timeout = 30)
{
    shm_ring_lease(&seg, leased_state(part_p())->lhead)->next = 0xfffffff0u;
    expect_broken("a lease in partition");
    expect_broken("outside the arena");
}

/* And a partition's chain to free. */
Test(shm_check, a_chain_to_free_past_the_arena, .timeout = 30)
{
    part_p()->intent = 0xfffffff0u;
    expect_broken("a chain to free points at cell 4294967280");
}

/* A hold on p (a hand-over announced): sound as shm_part_hold leaves it,
 * then a message numbered inside what it keeps is named. */
Test(shm_check, a_message_numbered_inside_a_hold)
{
    struct shm_check_report r;
    struct shm_part *p = part_p();

    cr_assert_eq(shm_part_hold(&seg, SHM_STATS_MASTER, nm("q"), nm("p"),
                               shm_now_ms(), 5000),
                 0);
    cr_assert_eq(shm_check(&seg, SHM_CHECK_QUIET, &r), 0, "%s", r.first);
    shm_ring_msg(&seg, p->tail)->seq = p->hold_seq + 1;
    expect_broken("a number its hold keeps");
}

/* A hold's time without its numbers (or the reverse) is named. */
Test(shm_check, a_hold_with_a_time_and_no_numbers)
{
    part_p()->hold_until = shm_now_ms() + 5000;
    expect_broken("hold has a time but no numbers");
}

/* A hold's numbers without its time (a holder killed between the two
 * stores) are named, and the lock's repair ends such a hold: nothing else
 * would, and the horizon would stay below it. */
Test(shm_check, a_hold_with_numbers_and_no_time_is_repaired)
{
    struct shm_check_report r;
    struct shm_part *p = part_p();

    cr_assert_eq(shm_part_hold(&seg, SHM_STATS_MASTER, nm("q"), nm("p"),
                               shm_now_ms(), 5000),
                 0);
    p->hold_until = 0;
    expect_broken("no time");
    shm_ring_repair(&seg, &(struct shm_ring_repairer){p, 0});
    cr_assert_eq(shm_check(&seg, SHM_CHECK_QUIET, &r), 0, "%s", r.first);
    cr_assert_eq(p->hold_seq, 0);
}

/* A lease that went out with attempts 0 is named: only a first delivery
 * owed (READY_INC) has none yet. */
Test(shm_check, a_lease_out_with_attempts_0)
{
    shm_ring_lease(&seg, leased_state(part_p())->lhead)->attempts = 0;
    expect_broken("went out with attempts 0");
}
