/*
 * test_presence.c - the presence table (shm/presence.h) on a real
 * segment: enter, update and renew; a member of many connections on many
 * nodes; the grace after the last one and the ttl of a call member,
 * expired by the master's call; a dead node's connections; the bounds
 * (members a channel, data, the table, the node's memory); listing sorted
 * and paged; and a holder killed at random moments, repaired.
 */
#include <errno.h>
#include <stdlib.h>

#include "shm/presence.h"
#include "test/shm/fixture.h"

#define T0 1000000

static struct shm_seg seg;

static void
make(uint64_t max_bytes, uint32_t max_members, uint32_t records)
{
    struct shm_params p = fixture_params(max_bytes, 2, 77);
    struct shm_presence_params pp = {.max_members = max_members,
                                     .max_data = 1024,
                                     .records = records,
                                     .channels = 64};

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    seg.presence = shm_presence_create(&pp);
    cr_assert_not_null(seg.presence);
}

static void
setup(void)
{
    make(64 << 20, 10000, 20000);
}

TestSuite(shm_presence, .timeout = 60);

/* Events seen, as "<action>:<member>:<data>" lines. */
static char seen[8192];

static void
record(void *arg, const struct shm_pres_event *ev)
{
    static const char *names[] = {"none", "enter", "leave", "update"};
    size_t at = strlen(seen);

    (void)arg;
    snprintf(seen + at, sizeof(seen) - at, "%s:%.*s:%.*s\n", names[ev->action],
             (int)ev->member.len, ev->member.ptr, (int)ev->data.len,
             ev->data.ptr);
}

static void
check(void)
{
    const char *why;

    cr_assert_eq(shm_presence_check(&seg, &why), 0, "%s", why);
}

static int
enter(const char *c, const char *m, const char *data, uint64_t ttl,
      uint64_t now)
{
    struct shm_name d = data ? nm(data) : (struct shm_name){0};

    return shm_presence_enter(&seg, nm(c), nm(m), data ? &d : NULL, ttl, now,
                              record, NULL);
}

Test(shm_presence, enter_update_renew_and_leave, .init = setup)
{
    seen[0] = '\0';
    cr_assert_eq(enter("room", "ada", "{\"a\":1}", 5000, T0), SHM_PRES_ENTER);
    cr_assert_eq(enter("room", "ada", "{\"a\":1}", 5000, T0 + 1),
                 SHM_PRES_NONE);
    cr_assert_eq(enter("room", "ada", NULL, 5000, T0 + 2), SHM_PRES_NONE);
    cr_assert_eq(enter("room", "ada", "{\"a\":2}", 5000, T0 + 3),
                 SHM_PRES_UPDATE);
    cr_assert_eq(enter("other", "ada", NULL, 5000, T0), SHM_PRES_ENTER);
    cr_assert_eq(shm_presence_count(&seg, nm("room")), 1);
    cr_assert_eq(shm_presence_count(&seg, nm("other")), 1);
    cr_assert_eq(shm_presence_count(&seg, nm("none")), 0);
    cr_assert_eq(
        shm_presence_leave(&seg, nm("room"), nm("ada"), T0, record, NULL), 1);
    cr_assert_eq(
        shm_presence_leave(&seg, nm("room"), nm("ada"), T0, record, NULL), 0);
    cr_assert_str_eq(seen, "enter:ada:{\"a\":1}\nupdate:ada:{\"a\":2}\n"
                           "enter:ada:\nleave:ada:{\"a\":2}\n");
    cr_assert_eq(shm_presence_count(&seg, nm("room")), 0);
    struct shm_pres_totals t;
    shm_presence_totals(&seg, &t);
    cr_assert_eq(t.members, 1);
    cr_assert_eq(t.channels, 1);
    cr_assert_eq(t.events[SHM_PRES_ENTER], 2);
    cr_assert_eq(t.events[SHM_PRES_UPDATE], 1);
    cr_assert_eq(t.events[SHM_PRES_LEAVE], 1);
    cr_assert_eq(t.bytes, shm_presence_record_bytes(1024) + 544);
    check();
}

Test(shm_presence, a_call_member_leaves_when_its_ttl_passes, .init = setup)
{
    seen[0] = '\0';
    enter("room", "bot", "1", 5000, T0);
    cr_assert_eq(shm_presence_due(&seg), T0 + 5000);
    cr_assert_eq(shm_presence_expire(&seg, T0 + 4999, 64, record, NULL), 0);
    enter("room", "bot", NULL, 5000, T0 + 4000); /* the heartbeat */
    cr_assert_eq(shm_presence_expire(&seg, T0 + 5000, 64, record, NULL), 0);
    cr_assert_eq(shm_presence_count(&seg, nm("room")), 1);
    cr_assert_eq(shm_presence_expire(&seg, T0 + 9000, 64, record, NULL), 1);
    cr_assert_str_eq(seen, "enter:bot:1\nleave:bot:1\n");
    cr_assert_eq(shm_presence_count(&seg, nm("room")), 0);
    cr_assert_eq(shm_presence_due(&seg), 0);
    check();
}

Test(shm_presence, connections_merge_and_the_grace_follows_the_last,
     .init = setup)
{
    struct shm_name d = nm("\"x\"");

    seen[0] = '\0';
    cr_assert_eq(shm_presence_attach(&seg, nm("room"), nm("ada"), &d, "n1", T0,
                                     record, NULL),
                 SHM_PRES_ENTER);
    cr_assert_eq(shm_presence_attach(&seg, nm("room"), nm("ada"), NULL, "n2",
                                     T0, record, NULL),
                 SHM_PRES_NONE);
    cr_assert_eq(shm_presence_attach(&seg, nm("room"), nm("ada"), NULL, "n1",
                                     T0, record, NULL),
                 SHM_PRES_NONE);
    struct shm_pres_list l;
    cr_assert_eq(shm_presence_list(&seg, nm("room"), NULL, 10, &l), 0);
    cr_assert_eq(l.n, 1);
    cr_assert_eq(l.m[0].connections, 3);
    shm_presence_list_free(&l);
    cr_assert_eq(
        shm_presence_detach(&seg, nm("room"), nm("ada"), "n1", 100, T0 + 10),
        0);
    cr_assert_eq(
        shm_presence_detach(&seg, nm("room"), nm("ada"), "n1", 100, T0 + 10),
        0);
    cr_assert_eq(
        shm_presence_detach(&seg, nm("room"), nm("ada"), "n1", 100, T0 + 10),
        -ENOENT);
    cr_assert_eq(shm_presence_due(&seg), 0, "n2 still holds one");
    cr_assert_eq(
        shm_presence_detach(&seg, nm("room"), nm("ada"), "n2", 100, T0 + 20),
        0);
    cr_assert_eq(shm_presence_due(&seg), T0 + 120);
    /* a reconnect within the grace: no event, no leave */
    cr_assert_eq(shm_presence_attach(&seg, nm("room"), nm("ada"), NULL, "n2",
                                     T0 + 50, record, NULL),
                 SHM_PRES_NONE);
    cr_assert_eq(shm_presence_expire(&seg, T0 + 200, 64, record, NULL), 0);
    cr_assert_eq(shm_presence_count(&seg, nm("room")), 1);
    cr_assert_eq(
        shm_presence_detach(&seg, nm("room"), nm("ada"), "n2", 100, T0 + 300),
        0);
    cr_assert_eq(shm_presence_expire(&seg, T0 + 399, 64, record, NULL), 0);
    cr_assert_eq(shm_presence_expire(&seg, T0 + 400, 64, record, NULL), 1);
    cr_assert_str_eq(seen, "enter:ada:\"x\"\nleave:ada:\"x\"\n");
    check();
}

Test(shm_presence, a_dead_nodes_connections_are_dropped, .init = setup)
{
    shm_presence_attach(&seg, nm("room"), nm("a"), NULL, "n1", T0, NULL, NULL);
    shm_presence_attach(&seg, nm("room"), nm("b"), NULL, "n1", T0, NULL, NULL);
    shm_presence_attach(&seg, nm("room"), nm("b"), NULL, "n2", T0, NULL, NULL);
    cr_assert_eq(shm_presence_drop_node(&seg, "n1", 1000, T0 + 1), 2);
    cr_assert_eq(shm_presence_drop_node(&seg, "n9", 1000, T0 + 1), 0);
    cr_assert_eq(shm_presence_expire(&seg, T0 + 1001, 64, NULL, NULL), 1);
    struct shm_pres_list l;
    cr_assert_eq(shm_presence_list(&seg, nm("room"), NULL, 10, &l), 0);
    cr_assert_eq(l.n, 1);
    cr_assert_arr_eq(l.m[0].member.ptr, "b", 1);
    shm_presence_list_free(&l);
    check();
}

Test(shm_presence, bounds_members_data_and_table)
{
    char big[1100], m[32];

    make(64 << 20, 3, 5);
    memset(big, 'x', sizeof(big));
    struct shm_name d = {big, 1025};
    cr_assert_eq(
        shm_presence_enter(&seg, nm("c"), nm("a"), &d, 1000, T0, NULL, NULL),
        -E2BIG);
    d.len = 1024;
    cr_assert_eq(
        shm_presence_enter(&seg, nm("c"), nm("a"), &d, 1000, T0, NULL, NULL),
        SHM_PRES_ENTER);
    cr_assert_eq(enter("c", "b", NULL, 1000, T0), SHM_PRES_ENTER);
    cr_assert_eq(enter("c", "c", NULL, 1000, T0), SHM_PRES_ENTER);
    cr_assert_eq(enter("c", "d", NULL, 1000, T0), -ENOSPC);
    cr_assert_eq(enter("c", "a", NULL, 1000, T0), SHM_PRES_NONE,
                 "one already in still renews");
    cr_assert_eq(enter("e", "a", NULL, 1000, T0), SHM_PRES_ENTER);
    cr_assert_eq(enter("e", "b", NULL, 1000, T0), SHM_PRES_ENTER);
    cr_assert_eq(enter("f", "a", NULL, 1000, T0), -ENOMEM, "5 records");
    cr_assert_eq(shm_presence_count(&seg, nm("f")), 0);
    snprintf(m, sizeof(m), "%s", "");
    cr_assert_eq(enter("c", m, NULL, 1000, T0), -EINVAL);
    check();
}

Test(shm_presence, members_count_against_the_nodes_memory)
{
    char m[32];
    int i, rc = 0;

    make(256 << 10, 10000, 10000);
    for (i = 0; i < 1000 && rc >= 0; i++) {
        snprintf(m, sizeof(m), "m%d", i);
        rc = enter("c", m, NULL, 1000, T0);
    }
    cr_assert_eq(rc, -ENOMEM);
    cr_assert(i > 50 && i < 200, "%d members in 256 KiB", i);
    struct shm_pres_totals t;
    shm_presence_totals(&seg, &t);
    cr_assert_leq(t.bytes, (256 << 10) - (256 << 10) / 32);
    check();
}

Test(shm_presence, listing_is_sorted_and_paged, .init = setup)
{
    static const char *names[] = {"zed", "ada", "bob", "ab", "b", "carl"};
    struct shm_pres_list l;
    struct shm_name after;

    for (int i = 0; i < 6; i++)
        enter("room", names[i], "true", 1000, T0);
    cr_assert_eq(shm_presence_list(&seg, nm("room"), NULL, 4, &l), 0);
    cr_assert_eq(l.count, 6);
    cr_assert_eq(l.n, 4);
    cr_assert(l.truncated);
    const char *want[] = {"ab", "ada", "b", "bob", "carl", "zed"};
    for (uint32_t i = 0; i < l.n; i++) {
        cr_assert_eq(l.m[i].member.len, strlen(want[i]));
        cr_assert_arr_eq(l.m[i].member.ptr, want[i], strlen(want[i]));
        cr_assert_arr_eq(l.m[i].data.ptr, "true", 4);
        cr_assert_gt(l.m[i].since, 1600000000000ull, "wall clock ms");
    }
    after = nm("bob");
    shm_presence_list_free(&l);
    cr_assert_eq(shm_presence_list(&seg, nm("room"), &after, 4, &l), 0);
    cr_assert_eq(l.n, 2);
    cr_assert_not(l.truncated);
    cr_assert_arr_eq(l.m[0].member.ptr, "carl", 4);
    cr_assert_arr_eq(l.m[1].member.ptr, "zed", 3);
    shm_presence_list_free(&l);
    cr_assert_eq(shm_presence_list(&seg, nm("empty"), NULL, 4, &l), 0);
    cr_assert_eq(l.count, 0);
    cr_assert_eq(l.n, 0);
    check();
}

Test(shm_presence, ten_thousand_members_then_presence_full, .init = setup)
{
    char m[32];

    for (int i = 0; i < 10000; i++) {
        snprintf(m, sizeof(m), "member-%05d", i);
        cr_assert_eq(enter("big", m, NULL, 60000, T0), SHM_PRES_ENTER);
    }
    cr_assert_eq(enter("big", "one-more", NULL, 60000, T0), -ENOSPC);
    cr_assert_eq(shm_presence_count(&seg, nm("big")), 10000);
    struct shm_pres_list l;
    cr_assert_eq(shm_presence_list(&seg, nm("big"), NULL, 1000, &l), 0);
    cr_assert_eq(l.n, 1000);
    cr_assert_arr_eq(l.m[999].member.ptr, "member-00999", 12);
    shm_presence_list_free(&l);
    check();
}

/* A child entering, attaching, detaching and leaving is killed at random
 * moments, lock held or not; the next locker repairs, and the table
 * checks sound and keeps serving. */
Test(shm_presence, a_holder_killed_anywhere_is_repaired, .init = setup)
{
    srand(7);
    for (int round = 0; round < 30; round++) {
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            char m[32];
            for (unsigned i = 0;; i++) {
                snprintf(m, sizeof(m), "m%u", i % 500);
                struct shm_name d = nm("{\"v\":12345}");
                switch (i % 4) {
                case 0:
                    shm_presence_enter(&seg, nm("c"), nm(m), &d, 10, T0, NULL,
                                       NULL);
                    break;
                case 1:
                    shm_presence_attach(&seg, nm("c"), nm(m), NULL, "n1", T0,
                                        NULL, NULL);
                    break;
                case 2:
                    shm_presence_detach(&seg, nm("c"), nm(m), "n1", 0, T0);
                    break;
                default:
                    shm_presence_leave(&seg, nm("c"), nm(m), T0, NULL, NULL);
                }
                if (i % 97 == 0)
                    shm_presence_expire(&seg, T0 + 20, 16, NULL, NULL);
            }
        }
        fixture_kill_after(pid, 200000 + rand() % 2000000);
        check();
        cr_assert_geq(enter("c", "after", NULL, 1000, T0), 0);
        shm_presence_leave(&seg, nm("c"), nm("after"), T0, NULL, NULL);
    }
    check();
}
