/*
 * test_sink_fmt.c - a pop whose sink has a fmt (broker.h): the records
 * carry no data, the fmt's put gets each message's data from its cells
 * under the partition lock, room's no stops the pop before it takes (or
 * leases) the message, a release reads the data-less records, and a
 * holder killed inside put leaves a partition the reap repairs soundly.
 */
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/broker.h"
#include "shm/maintain.h"
#include "shm/queue_admin.h"
#include "shm/segment.h"
#include "test/shm/fixture.h"

#define T0    1000000ULL
#define LATER (T0 + 3600 * 1000) /* every lease long expired */

static struct shm_seg seg;
static unsigned char sinkbuf[1 << 14];

/* A test fmt: "<seq>/<attempts>/<part>/<data>;" per message, room for
 * `left` messages of payloads of four bytes ("m<digit>" quoted) in a
 * partition named "p", and a kill inside its put before the die-th
 * record (0: never). */
#define T_FIXED 100
#define T_BOUND (T_FIXED + 12 * 1 + 4) /* what the ring counts a message */

struct tfmt {
    struct shm_sink_fmt hook;
    char out[1 << 14];
    size_t len;
    int puts; /* records put */
    int die;
};

static void
t_put(struct shm_sink_fmt *h, const struct shm_sink *k,
      const struct shm_popped *r, uint32_t n)
{
    struct tfmt *f = (struct tfmt *)(void *)h;

    for (uint32_t i = 0; i < n; i++) {
        if (++f->puts == f->die)
            kill(getpid(), SIGKILL);
        f->len += (size_t)snprintf(
            f->out + f->len, sizeof(f->out) - f->len, "%llu/%u/%.*s/%.*s;",
            (unsigned long long)r->seq, r->attempts, (int)r->part_len,
            (const char *)(r + 1), (int)r->len, shm_popped_data(r));
        r = (const void *)((const unsigned char *)r + shm_popped_size(k, r));
    }
}

/* tfmt_new - room for left messages. */
static void
tfmt_new(struct tfmt *f, int left)
{
    *f = (struct tfmt){0};
    f->hook = (struct shm_sink_fmt){
        .room = (size_t)left * T_BOUND, .fixed = T_FIXED, .put = t_put};
}

static void
setup(void)
{
    struct shm_params p = fixture_params(1 << 20, 4, 1);

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

static void
teardown(void)
{
    shm_segment_destroy(&seg);
}

TestSuite(shm_sink_fmt, .init = setup, .fini = teardown);

/* pop batch from (q, p) into sink, with f as its fmt (NULL: none). */
static int
pop(int w, struct shm_sink *sink, struct tfmt *f, uint32_t batch, int auto_ack,
    uint64_t now)
{
    struct shm_pop_req r = {nm("q"),  nm("p"),      nm("g"), batch,
                            auto_ack, SHM_FROM_ALL, 0};

    *sink = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    if (f != NULL)
        sink->fmt = &f->hook;
    return shm_pop(&seg, w, &r, now, sink);
}

/* The expected text of messages from first, i from .. to-1, tag m. */
static void
expect(const struct tfmt *f, uint64_t first, int from, int to, unsigned att)
{
    char want[1024];
    size_t n = 0;

    for (int i = from; i < to; i++)
        n +=
            (size_t)snprintf(want + n, sizeof(want) - n, "%llu/%u/p/\"m%d\";",
                             (unsigned long long)(first + (uint64_t)i), att, i);
    cr_assert_eq(f->len, n);
    cr_assert_eq(memcmp(f->out, want, n), 0, "%.*s", (int)f->len, f->out);
}

Test(shm_sink_fmt, records_carry_no_data_and_put_gets_it_in_order)
{
    struct tfmt f;
    tfmt_new(&f, 100);
    struct shm_sink k;
    uint64_t first;

    cr_assert_eq(fixture_pushn(&seg, "q", "p", "m", 5, T0, &first), 0);
    cr_assert_eq(pop(0, &k, &f, 10, 0, T0), 5);
    expect(&f, first, 0, 5, 1);
    cr_assert_eq(k.count, 5);
    /* each record: the header and the name "p" to the next 8 bytes, then
     * where its data lay */
    cr_assert_eq(k.used, 5 * (((sizeof(struct shm_popped) + 1 + 7) & ~7u) +
                              sizeof(const char *)));
    /* the ring counted each against the room by its bound */
    cr_assert_eq(f.hook.room, 95 * T_BOUND);
    cr_assert_eq(f.hook.need, 0);
    int i = 0;
    for (const struct shm_popped *r = shm_popped_next(&k, NULL); r != NULL;
         r = shm_popped_next(&k, r), i++) {
        cr_assert_eq(r->seq, first + (uint64_t)i);
        cr_assert_eq(r->attempts, 1);
        cr_assert_eq(r->part_len, 1);
        cr_assert_eq(memcmp(r + 1, "p", 1), 0);
        cr_assert_eq(r->len, (uint32_t)strlen("\"m0\""));
    }
    cr_assert_eq(i, 5);
    fixture_check(&seg);
}

Test(shm_sink_fmt, room_refusing_the_first_takes_nothing)
{
    struct tfmt f;
    tfmt_new(&f, 0);
    struct shm_sink k;
    uint64_t first;

    cr_assert_eq(fixture_pushn(&seg, "q", "p", "m", 3, T0, &first), 0);
    cr_assert_eq(pop(0, &k, &f, 10, 0, T0), -ENOMEM);
    cr_assert_eq(k.count, 0);
    cr_assert_eq(f.len, 0);
    cr_assert_neq(k.need, 0);
    cr_assert_eq(f.hook.need, T_BOUND); /* what the first message wanted */
    /* nothing was leased or read: all three come, first deliveries */
    struct tfmt g;
    tfmt_new(&g, 100);
    cr_assert_eq(pop(0, &k, &g, 10, 0, T0), 3);
    expect(&g, first, 0, 3, 1);
    fixture_check(&seg);
}

Test(shm_sink_fmt, room_refusing_later_stops_before_the_message)
{
    struct tfmt f;
    tfmt_new(&f, 2);
    struct shm_sink k;
    uint64_t first;

    cr_assert_eq(fixture_pushn(&seg, "q", "p", "m", 5, T0, &first), 0);
    cr_assert_eq(pop(0, &k, &f, 10, 0, T0), 2);
    expect(&f, first, 0, 2, 1);
    cr_assert_eq(f.hook.need, T_BOUND); /* the third's, refused */
    struct tfmt g;
    tfmt_new(&g, 100);
    cr_assert_eq(pop(0, &k, &g, 10, 0, T0), 3);
    expect(&g, first, 2, 5, 1);
    fixture_check(&seg);
}

Test(shm_sink_fmt, redeliveries_and_a_release_from_data_less_records)
{
    struct tfmt f, g, h;

    tfmt_new(&f, 100);
    tfmt_new(&g, 100);
    tfmt_new(&h, 100);
    struct shm_sink k;
    uint64_t first;

    cr_assert_eq(fixture_pushn(&seg, "q", "p", "m", 3, T0, &first), 0);
    cr_assert_eq(pop(0, &k, &f, 10, 0, T0), 3);
    /* the leases run out: the next pop is their second attempt */
    cr_assert_eq(pop(0, &k, &g, 10, 0, LATER), 3);
    expect(&g, first, 0, 3, 2);
    /* the answer could not go out: released without counting one */
    shm_release(&seg, 0, nm("q"), nm("g"), &k, LATER);
    cr_assert_eq(pop(0, &k, &h, 10, 0, LATER), 3);
    expect(&h, first, 0, 3, 2);
    fixture_check(&seg);
}

Test(shm_sink_fmt, auto_ack_frees_what_it_wrote)
{
    struct tfmt f;
    tfmt_new(&f, 100);
    struct shm_sink k;
    uint64_t first;

    cr_assert_eq(fixture_pushn(&seg, "q", "p", "m", 4, T0, &first), 0);
    cr_assert_eq(pop(0, &k, &f, 10, 1, T0), 4);
    expect(&f, first, 0, 4, 1);
    fixture_check(&seg);
    cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), T0), 1);
    cr_assert_eq(shm_arena_used_bytes(&seg), 0);
}

/* A holder killed inside put (the partition lock held, every message of
 * its take leased, or read with autoAck, none freed yet): the reap
 * repairs the partition and it checks sound; what it took was delivered
 * (autoAck: gone; else leased, so it comes again once the leases run
 * out), and its cells go back. */
Test(shm_sink_fmt, a_holder_killed_inside_put_leaves_a_sound_partition)
{
    for (int i = 0; i < 4; i++) {
        int die = 1 + 2 * (i / 2), auto_ack = i % 2;
        uint64_t first;
        cr_assert_eq(fixture_pushn(&seg, "q", "p", "m", 4, T0, &first), 0);
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            struct tfmt f;
            struct shm_sink k;
            tfmt_new(&f, 100);
            f.die = die;
            (void)pop(1, &k, &f, 10, auto_ack, T0);
            _exit(0); /* not reached */
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFSIGNALED(st));
        shm_worker_reap(&seg, 1);
        fixture_check(&seg);
        struct tfmt g;
        struct shm_sink k;
        tfmt_new(&g, 100);
        int n = pop(0, &k, &g, 10, 1, LATER);
        if (auto_ack) {
            cr_assert_eq(n, 0, "die %d: %d delivered again", die, n);
        } else {
            cr_assert_eq(n, 4, "die %d: %d delivered again", die, n);
            expect(&g, first, 0, 4, 2);
        }
        fixture_check(&seg);
        cr_assert_eq(shm_queue_delete(&seg, 0, nm("q"), LATER), 1);
        cr_assert_eq(shm_arena_used_bytes(&seg), 0);
    }
}
