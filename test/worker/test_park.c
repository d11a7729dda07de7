/*
 * test_park.c - the index of parked calls (worker/park.c): by deadline, by
 * the handles a call waits on (several per call), and the walk list that
 * a call leaves when it is unparked, so a walk never reaches one that
 * ended meanwhile.
 */
#include <stdlib.h>

#include <criterion/criterion.h>

#include "worker/park.h"

/* A call waiting on two handles, as a stream on two partitions would. */
struct call {
    struct park park;
    struct park_wait waits[2];
};

static void
call_init(struct call *c, uint64_t deadline, uint64_t h1, uint64_t h2)
{
    *c = (struct call){0};
    c->park.deadline = deadline;
    c->park.waits = c->waits;
    c->park.nwaits = 2;
    c->waits[0].handle = h1;
    c->waits[1].handle = h2;
}

/* set_free - the worker never frees its set (it lives as long as the
 * process); a test does. */
static void
set_free(struct park_set *s)
{
    free(s->heap);
    free(s->buckets);
}

/* on_chain - how many waits on handle belong to p. */
static int
on_chain(const struct park_set *s, uint64_t handle, const struct park *p)
{
    int n = 0;

    for (struct park_wait *q = park_chain(s, handle); q; q = park_chain_next(q))
        n += q->park == p;
    return n;
}

Test(park, finds_a_call_by_each_handle_and_by_deadline)
{
    struct park_set s;
    struct call a, b;

    cr_assert_eq(park_set_init(&s), 0);
    call_init(&a, 200, 11, 12);
    call_init(&b, 100, 12, 13);
    cr_assert_eq(park_add(&s, &a.park), 0);
    cr_assert_eq(park_add(&s, &b.park), 0);
    cr_assert_eq(park_count(&s), 2);
    cr_assert_eq(park_first(&s), &b.park);
    cr_assert_eq(on_chain(&s, 11, &a.park), 1);
    cr_assert_eq(on_chain(&s, 12, &a.park) + on_chain(&s, 12, &b.park), 2);
    park_update_deadline(&s, &a.park, 50);
    cr_assert_eq(park_first(&s), &a.park);
    park_remove(&s, &a.park);
    cr_assert_not(a.park.parked);
    cr_assert_null(park_chain(&s, 11), "a's waits stay on the chains");
    cr_assert_eq(park_chain(&s, 12)->park, &b.park);
    cr_assert_null(park_chain_next(park_chain(&s, 12)));
    cr_assert_eq(park_first(&s), &b.park);
    set_free(&s);
}

Test(park, a_call_unparked_during_a_walk_is_not_reached)
{
    struct park_set s;
    struct call c[3];

    cr_assert_eq(park_set_init(&s), 0);
    for (int i = 0; i < 3; i++) {
        call_init(&c[i], 100 + (uint64_t)i, 7, 7);
        cr_assert_eq(park_add(&s, &c[i].park), 0);
    }
    for (int i = 0; i < 3; i++) {
        park_walk_add(&s, &c[i].park);
        park_walk_add(&s, &c[i].park); /* its second wait on 7: once */
    }
    cr_assert_eq(park_walk_next(&s), &c[0].park);
    park_remove(&s, &c[1].park); /* acting on c[0] ended c[1] */
    cr_assert_eq(park_walk_next(&s), &c[2].park);
    cr_assert_null(park_walk_next(&s));
    set_free(&s);
}

Test(park, the_walks_empty_note_goes_with_its_call)
{
    struct park_set s;
    struct call a;

    cr_assert_eq(park_set_init(&s), 0);
    call_init(&a, 100, 1, 2);
    cr_assert_eq(park_add(&s, &a.park), 0);
    s.walk_empty = &a.park;
    park_remove(&s, &a.park);
    cr_assert_null(s.walk_empty);
    set_free(&s);
}
