/*
 * test_ring.c - one partition, white box: a forked child takes the partition
 * lock, leaves a mutation half done exactly where a SIGKILL could, and dies;
 * the reap repairs it.  Each case checks what survives, the counters, and
 * that the arena returns to zero once the queue is drained and deleted.
 */
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/broker.h"
#include "shm/dir.h"
#include "shm/maintain.h"
#include "shm/queue_admin.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "test/shm/fixture.h"

#define T0 1000000ULL

static struct shm_seg seg;
static unsigned char sinkbuf[1 << 16];
static struct shm_sink sink;

static void
setup(void)
{
    struct shm_params p = fixture_params(1 << 20, 4, 1);

    p.defaults.max_bytes = 1 << 20;
    p.queue_max_bytes = 1 << 20;
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

static int
push(uint32_t n)
{
    struct shm_msg_in in[8];
    uint64_t s;

    for (uint32_t i = 0; i < n; i++)
        in[i] = (struct shm_msg_in){"\"m\"", 3};
    return shm_push(&seg, 0, nm("q"), nm("Default"), in, n, T0, &s);
}

static int
pop(uint32_t batch, uint64_t now)
{
    struct shm_pop_req r = {nm("q"), nm("Default"), nm("g"), batch,
                            0,       SHM_FROM_ALL,  0};

    sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    return shm_pop(&seg, 0, &r, now, &sink);
}

/* The partition (queue "q", "Default") and its queue. */
static struct shm_ring_ctx
ctx(int w)
{
    struct shm_ref qr, pr;

    cr_assert_eq(shm_dir_find_queue(&seg, 0, nm("q"), 0, T0, &qr), 0);
    cr_assert_eq(shm_dir_find_part(&seg, 0, qr, nm("Default"), 0, T0, &pr), 0);
    return (struct shm_ring_ctx){
        &seg, w,   shm_dir_part(&seg, pr.idx), shm_dir_queue(&seg, qr.idx),
        T0,   NULL};
}

/* Run fn in a child holding the partition lock as worker 1; it dies with
 * the lock held (nobody has repaired or reaped yet). */
static void
die_unreaped(void (*fn)(struct shm_ring_ctx *c))
{
    struct shm_ring_ctx c = ctx(1); /* in the parent: no cr_* in the child */
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
}

/* Whether the segment checker runs after repairs: off only where a test
 * builds a state no real operation makes (see its comment). */
static int check_after = 1;

static void
check_segment(void)
{
    if (check_after)
        fixture_check(&seg);
}

/* die_unreaped, then reap slot 1 as the master does. */
static void
die_holding(void (*fn)(struct shm_ring_ctx *c))
{
    die_unreaped(fn);
    shm_worker_reap(&seg, 1);
    check_segment();
}

/* Pop and ack everything (leases long expired), delete, expect zero. */
static uint32_t
drain_to_zero(void)
{
    uint64_t later = T0 + 3600 * 1000;
    uint32_t total = 0;
    int n;

    while ((n = pop(100, later)) > 0) {
        for (const struct shm_popped *r = shm_popped_next(&sink, NULL); r;
             r = shm_popped_next(&sink, r)) {
            struct shm_ack a = {.seq = r->seq};
            shm_ack(&seg, 0, nm("q"), nm("Default"), nm("g"), &a, 1, later);
            cr_assert_eq(a.outcome, SHM_OUT_ACKED);
        }
        total += (uint32_t)n;
    }
    cr_assert_eq(n, 0);
    struct shm_ring_ctx c = ctx(0);
    cr_assert_eq(atomic_load(&c.p->count), 0);
    cr_assert_eq(atomic_load(&c.p->leased), 0);
    check_segment();
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), later), 1);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);
    check_segment();
    return total;
}

static uint64_t
counter(enum shm_counter k)
{
    return fixture_counter(&seg, k);
}

TestSuite(shm_ring, .init = setup, .timeout = 30);

/* A new message published at the tail; tail, counts and tag not yet. */
static void
half_push(struct shm_ring_ctx *c)
{
    uint32_t ref;
    uint64_t cost;

    if (shm_ring_msg_new(c->seg, 1, "\"x\"", 3, 0, T0, &ref, &cost) != 0)
        _exit(2);
    shm_ring_msg(c->seg, ref)->seq =
        atomic_fetch_add(&shm_dir_of(c->seg)->next_seq, 1);
    shm_ring_msg(c->seg, c->p->tail)->next = ref;
}

Test(shm_ring, push_published_before_the_tail_moved_is_kept)
{
    cr_assert_eq(push(3), 0);
    die_holding(half_push);
    struct shm_ring_ctx c = ctx(0);
    cr_assert_eq(atomic_load(&c.p->count), 4);
    cr_assert(shm_ring_tag_linked(&seg, c.p->tail));
    cr_assert_eq(counter(SHM_C_LOCK_REPAIRS), 1);
    cr_assert_eq(drain_to_zero(), 4);
}

/* A chain allocated, not linked: the reap returns it. */
static void
unlinked_push(struct shm_ring_ctx *c)
{
    uint32_t ref;
    uint64_t cost;

    if (shm_ring_msg_new(c->seg, 1, "\"x\"", 3, 0, T0, &ref, &cost) != 0)
        _exit(2);
}

Test(shm_ring, push_allocated_but_not_linked_is_reaped)
{
    cr_assert_eq(push(2), 0);
    die_holding(unlinked_push);
    cr_assert_eq(drain_to_zero(), 2);
}

/* A lease published; the cursor not moved, the message not marked read. */
static void
half_pop(struct shm_ring_ctx *c)
{
    struct shm_gs *s = shm_ring_gs(c->seg, c->p->groups);
    uint32_t l;

    if (shm_arena_alloc(c->seg, 1, 1, &l) != 0)
        _exit(2);
    struct shm_lease *L = shm_ring_lease(c->seg, l);
    L->next = 0;
    L->seq = shm_ring_msg(c->seg, s->cursor)->seq;
    L->deadline = T0 + 30000;
    L->attempts = 1;
    L->state = SHM_LEASE_LEASED;
    L->msg = s->cursor;
    if (s->ltail != 0)
        shm_ring_lease(c->seg, s->ltail)->next = l;
    else
        s->lhead = l;
}

Test(shm_ring, lease_published_before_the_cursor_moved_is_one_delivery)
{
    cr_assert_eq(push(3), 0);
    cr_assert_eq(pop(1, T0), 1);
    uint64_t first = ((const struct shm_popped *)sinkbuf)->seq;
    die_holding(half_pop);
    /* The half-leased message is not delivered twice at once: the next pop
     * gets the third; all three come back when their leases expire. */
    cr_assert_eq(pop(5, T0), 1);
    cr_assert_eq(((const struct shm_popped *)sinkbuf)->seq, first + 2);
    cr_assert_eq(pop(5, T0 + 29999), 0);
    cr_assert_eq(pop(5, T0 + 30000), 3);
    cr_assert_eq(drain_to_zero(), 3);
}

/* An acked lease unlinked under its intent, not yet freed. */
static void
half_ack(struct shm_ring_ctx *c)
{
    struct shm_gs *s = shm_ring_gs(c->seg, c->p->groups);
    uint32_t l = s->lhead;

    c->p->intent = l;
    s->lhead = shm_ring_lease(c->seg, l)->next;
}

Test(shm_ring, lease_unlinked_before_its_free_is_freed_by_the_repair)
{
    cr_assert_eq(push(2), 0);
    cr_assert_eq(pop(2, T0), 2);
    die_holding(half_ack);
    struct shm_ring_ctx c = ctx(0);
    cr_assert_eq(atomic_load(&c.p->leased), 1);
    cr_assert_eq(c.p->intent, 0);
    cr_assert_eq(drain_to_zero(), 1);
}

/* The head message unlinked under its intent, not yet freed. */
static void
half_free_head(struct shm_ring_ctx *c)
{
    c->p->intent = c->p->head;
    c->p->head = shm_ring_msg(c->seg, c->p->head)->next;
}

/* Push 3, deliver and ack the first: two unread messages stay. */
static void
two_unread(void)
{
    cr_assert_eq(push(3), 0);
    cr_assert_eq(pop(1, T0), 1);
    struct shm_ack a = {.seq = ((const struct shm_popped *)sinkbuf)->seq};
    shm_ack(&seg, 0, nm("q"), nm("Default"), nm("g"), &a, 1, T0);
    cr_assert_eq(a.outcome, SHM_OUT_ACKED);
    cr_assert_eq(atomic_load(&ctx(0).p->count), 2);
}

Test(shm_ring, head_unlinked_before_its_free_is_freed_by_the_repair)
{
    two_unread();
    die_holding(half_free_head);
    struct shm_ring_ctx c = ctx(0);
    cr_assert_eq(atomic_load(&c.p->count), 1);
    cr_assert_eq(c.p->intent, 0);
    cr_assert_eq(drain_to_zero(), 1);
}

/* A chain half handed to shm_arena_free: the reap owns it, not the repair. */
static void
inside_free(struct shm_ring_ctx *c)
{
    uint32_t h = c->p->head;

    c->p->intent = h;
    c->p->head = shm_ring_msg(c->seg, h)->next;
    shm_arena_free(c->seg, 1, h);
}

Test(shm_ring, chain_already_being_freed_is_left_to_the_reap)
{
    two_unread();
    die_holding(inside_free);
    cr_assert_eq(atomic_load(&ctx(0).p->count), 1);
    cr_assert_eq(drain_to_zero(), 1);
}

/* An advance freeing a run of heads counts them once, after the run
 * (ring.c, ring_heads_gone): killed before that, both heads are freed
 * (the second still in its freer's cache) and the partition's count, cost
 * and oldest still say two. */
static void
freed_run_uncounted(struct shm_ring_ctx *c)
{
    for (int i = 0; i < 2; i++) {
        uint32_t h = c->p->head;
        c->p->intent = h;
        c->p->head = shm_ring_msg(c->seg, h)->next;
        if (c->p->head == 0)
            c->p->tail = 0;
        shm_arena_free(c->seg, 1, h);
    }
}

Test(shm_ring, an_advance_killed_before_counting_its_run_is_recounted)
{
    two_unread();
    die_holding(freed_run_uncounted);
    struct shm_ring_ctx c = ctx(0);
    cr_assert_eq(c.p->head, 0);
    cr_assert_eq(atomic_load(&c.p->count), 0);
    cr_assert_eq(atomic_load(&c.p->cost), 0);
    cr_assert_eq(drain_to_zero(), 0);
}

/* A cycle in the message list: impossible, so the partition is wiped. */
static void
corrupt(struct shm_ring_ctx *c)
{
    shm_ring_msg(c->seg, c->p->tail)->next = c->p->head;
}

Test(shm_ring, impossible_list_wipes_the_partition_only)
{
    struct shm_msg_in m = {"1", 1};
    uint64_t s;

    cr_assert_eq(push(3), 0);
    cr_assert_eq(shm_push(&seg, 0, nm("other"), nm("Default"), &m, 1, T0, &s),
                 0);
    cr_assert_eq(pop(1, T0), 1);
    die_holding(corrupt);
    cr_assert_eq(counter(SHM_C_WIPES), 1);
    struct shm_ring_ctx c = ctx(0);
    cr_assert_eq(atomic_load(&c.p->count), 0);
    cr_assert_eq(push(1), 0);
    cr_assert_eq(pop(5, T0), 1);
    struct shm_queue_info qi;
    cr_assert_eq(
        shm_queue_depth(&seg, nm("other"), NULL, T0, &qi, NULL, NULL, NULL), 0);
    cr_assert_eq(qi.depth, 1);
}

/* A wipe returns every cell it can reach: after it, emptying and deleting
 * the queue brings the arena back to zero. */
Test(shm_ring, a_wipe_frees_what_it_reaches_to_the_byte)
{
    cr_assert_eq(push(5), 0);
    cr_assert_eq(pop(2, T0), 2);
    die_holding(corrupt);
    cr_assert_eq(counter(SHM_C_WIPES), 1);
    cr_assert_eq(atomic_load(&ctx(0).p->leased), 0);
    cr_assert_eq(drain_to_zero(), 0);
}

/* A group state the dead worker linked but never tagged LINKED, in a
 * partition its repair then wipes: the wipe keeps the state (the registry
 * names it), so the reap must not free it too. */
static void
link_untagged_state_and_corrupt(struct shm_ring_ctx *c)
{
    uint32_t g;

    if (shm_arena_alloc(c->seg, 1, 1, &g) != 0)
        return;
    struct shm_gs *s = shm_ring_gs(c->seg, g);
    *s = *shm_ring_gs(c->seg, c->p->groups);
    s->chain = shm_ring_gs(c->seg, c->p->groups)->chain;
    s->lhead = s->ltail = s->nleases = s->nready = 0;
    s->next = c->p->groups;
    c->p->groups = g;
    c->p->ngs++;
    corrupt(c);
}

Test(shm_ring, a_wipe_keeps_an_untagged_state_from_the_reap)
{
    /* The extra state copies group g's, so the partition has two states
     * for one group, which no real pop makes: the checker would name it. */
    check_after = 0;
    cr_assert_eq(push(3), 0);
    cr_assert_eq(pop(1, T0), 1);
    die_holding(link_untagged_state_and_corrupt);
    cr_assert_eq(counter(SHM_C_WIPES), 1);
    cr_assert_eq(ctx(0).p->ngs, 2);
    for (uint32_t g = ctx(0).p->groups; g != 0; g = shm_ring_gs(&seg, g)->next)
        cr_assert(shm_ring_tag_linked(&seg, g), "state %u not LINKED", g);
    cr_assert_eq(drain_to_zero(), 0);
}

/* A locker without a slot (depth) that finds a partition unsound cannot
 * free: it leaves the wipe to the next locker with a slot, and the cells
 * come back then. */
Test(shm_ring, a_slotless_repair_leaves_the_wipe_to_a_locker_with_a_slot)
{
    struct shm_queue_info qi;

    cr_assert_eq(push(4), 0);
    cr_assert_eq(pop(1, T0), 1);
    die_unreaped(corrupt);
    cr_assert_eq(
        shm_queue_depth(&seg, nm("q"), NULL, T0, &qi, NULL, NULL, NULL), 0);
    cr_assert_eq(counter(SHM_C_WIPES), 0);
    cr_assert_eq(ctx(0).p->wipe, 1);
    shm_worker_reap(&seg, 1);
    fixture_check(&seg);
    cr_assert_eq(counter(SHM_C_WIPES), 1);
    cr_assert_eq(ctx(0).p->wipe, 0);
    cr_assert_eq(drain_to_zero(), 0);
}

/* A repairer killed in the middle of a wipe (at a random point of a long
 * one) leaves the next repair a list it can walk: nothing is freed twice
 * and every cell comes back. */
Test(shm_ring, a_repairer_killed_mid_wipe_loses_and_doubles_nothing)
{
    for (int round = 0; round < 12; round++) {
        for (int i = 0; i < 500; i++)
            cr_assert_eq(push(8), 0);
        cr_assert_eq(pop(3, T0), 3);
        die_unreaped(corrupt);
        int fds[2];
        cr_assert_eq(pipe(fds), 0);
        struct shm_ring_ctx c = ctx(2);
        pid_t b = fork();
        cr_assert_neq(b, -1);
        if (b == 0) {
            /* The repairer: no cr_* calls.  It tells the parent it is about
             * to lock, then repairs (wipes) and dies holding the lock. */
            if (write(fds[1], "x", 1) != 1)
                _exit(1);
            shm_ring_lock(&seg, 2, c.p);
            kill(getpid(), SIGKILL);
        }
        char x;
        cr_assert_eq(read(fds[0], &x, 1), 1);
        struct timespec ts = {0, (long)(round % 6) * 150000};
        nanosleep(&ts, NULL);
        kill(b, SIGKILL);
        cr_assert_eq(waitpid(b, NULL, 0), b);
        close(fds[0]);
        close(fds[1]);
        shm_worker_reap(&seg, 2);
        shm_worker_reap(&seg, 1);
        cr_assert_eq(atomic_load(&ctx(0).p->count), 0);
        fixture_check(&seg);
    }
    cr_assert_geq(counter(SHM_C_WIPES), 12);
    cr_assert_eq(drain_to_zero(), 0);
}

/* A long message (more cells than the per-worker size classes) freed by a
 * holder that dies before it clears its intent must not be reusable by a
 * live worker before the dead one's repair: the repair would free the run
 * the other queue now holds.  (Found in review.) */
static char bigmsg[2002];

static int
push_big(int w, const char *q)
{
    struct shm_msg_in in = {bigmsg, 2000};
    uint64_t s;

    return shm_push(&seg, w, nm(q), nm("Default"), &in, 1, T0, &s);
}

Test(shm_ring, a_long_run_freed_by_a_dying_holder_is_not_reused_before_repair)
{
    struct shm_msg_in small = {"\"m\"", 3};
    struct shm_ref qr, pr;
    uint64_t s;

    memset(bigmsg, 'a', 2000);
    bigmsg[0] = bigmsg[1999] = '"';
    cr_assert_eq(shm_push(&seg, 2, nm("q2"), nm("Default"), &small, 1, T0, &s),
                 0);
    while (shm_slot(&seg, 2)->ext_len >= 32) /* long runs: from the pool */
        cr_assert_eq(push_big(2, "q2"), 0);
    cr_assert_eq(push_big(0, "q"), 0);
    uint32_t r = ctx(0).p->head;
    die_unreaped(inside_free); /* worker 1 dies just after freeing r */
    cr_assert_eq(push_big(2, "q2"), 0);
    cr_assert_eq(shm_dir_find_queue(&seg, 0, nm("q2"), 0, T0, &qr), 0);
    cr_assert_eq(shm_dir_find_part(&seg, 0, qr, nm("Default"), 0, T0, &pr), 0);
    uint32_t r2 = shm_dir_part(&seg, pr.idx)->tail;
    cr_assert_neq(r2, r, "the dying holder's run was handed out again");
    shm_worker_reap(&seg, 1);
    cr_assert(shm_ring_tag_linked(&seg, r2), "q2's message %u was freed", r2);
}
