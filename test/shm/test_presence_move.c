/*
 * test_presence_move.c - a presence channel handed over between two real
 * tables (shm/presence_move.h): the members, their data, since and
 * versions, their connections per key and what was left of each deadline
 * arrive with no event; the sender's own connections become a grace; a
 * frozen table refuses writes and lets nobody leave; the set handed over
 * replaces a receiver's old copy; a record cut anywhere changes nothing.
 */
#include <errno.h>
#include <stdlib.h>

#include "shm/presence.h"
#include "shm/presence_move.h"
#include "test/shm/fixture.h"

#define T0    1000000
#define GRACE 15000
#define ROOM  "\x1eroom"

static struct shm_seg from, to;

static void
make(struct shm_seg *seg)
{
    struct shm_params p = fixture_params(64 << 20, 2, 77);
    struct shm_presence_params pp = {
        .max_members = 1000, .max_data = 1024, .records = 4096, .channels = 64};

    cr_assert_eq(shm_segment_create(&p, seg), 0);
    seg->presence = shm_presence_create(&pp);
    cr_assert_not_null(seg->presence);
}

static void
setup(void)
{
    make(&from);
    make(&to);
}

TestSuite(shm_presence_move, .init = setup, .timeout = 60);

/* Events seen: any is a failure of "no event". */
static int events;

static void
count(void *arg, const struct shm_pres_event *ev)
{
    (void)arg;
    (void)ev;
    events++;
}

static void
check(struct shm_seg *seg)
{
    const char *why;

    cr_assert_eq(shm_presence_check(seg, &why), 0, "%s", why);
}

/* member_of - member m of l, or NULL. */
static const struct shm_pres_info *
member_of(const struct shm_pres_list *l, const char *m)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (l->m[i].member.len == strlen(m) &&
            memcmp(l->m[i].member.ptr, m, l->m[i].member.len) == 0)
            return &l->m[i];
    return NULL;
}

/* hand - take ROOM from `from` (its own keys "n1/") at now, adopt it in
 * `to` at now + later; the members adopted. */
static int
hand(uint64_t now, uint64_t later)
{
    struct shm_pm_rec rec = {0};
    int n = shm_presence_take(&from, nm(ROOM), "n1/", GRACE, now, &rec);

    cr_assert_geq(n, 0);
    n = shm_presence_adopt(&to, rec.buf, rec.len, GRACE, now + later);
    shm_pm_rec_free(&rec);
    return n;
}

Test(shm_presence_move, the_set_arrives_whole_with_no_event)
{
    struct shm_name d = nm("{\"name\":\"Ada\"}"), d2 = nm("2");
    struct shm_pres_list a, b;

    cr_assert_eq(shm_presence_attach(&from, nm(ROOM), nm("ada"), &d, "n2/0", T0,
                                     NULL, NULL),
                 SHM_PRES_ENTER);
    shm_presence_attach(&from, nm(ROOM), nm("ada"), NULL, "n3/1", T0, NULL,
                        NULL);
    shm_presence_attach(&from, nm(ROOM), nm("ada"), NULL, "n3/1", T0, NULL,
                        NULL);
    cr_assert_eq(shm_presence_enter(&from, nm(ROOM), nm("bot"), &d2, 30000, T0,
                                    NULL, NULL),
                 SHM_PRES_ENTER);
    /* a member whose last stream closed: its grace runs */
    shm_presence_attach(&from, nm(ROOM), nm("cy"), NULL, "n2/1", T0, NULL,
                        NULL);
    shm_presence_detach(&from, nm(ROOM), nm("cy"), "n2/1", 10000, T0 + 1000);
    shm_presence_freeze(&from, 1);
    events = 0;
    cr_assert_eq(hand(T0 + 4000, 100000), 3,
                 "taken at T0+4s, adopted much "
                 "later on another clock");
    cr_assert_eq(events, 0);
    cr_assert_eq(shm_presence_list(&from, nm(ROOM), NULL, 10, &a), 0);
    cr_assert_eq(shm_presence_list(&to, nm(ROOM), NULL, 10, &b), 0);
    cr_assert_eq(a.n, 3);
    cr_assert_eq(b.n, 3);
    for (uint32_t i = 0; i < a.n; i++) {
        cr_assert_eq(a.m[i].member.len, b.m[i].member.len);
        cr_assert_arr_eq(a.m[i].member.ptr, b.m[i].member.ptr,
                         a.m[i].member.len);
        cr_assert_eq(a.m[i].data.len, b.m[i].data.len);
        cr_assert_arr_eq(a.m[i].data.ptr, b.m[i].data.ptr, a.m[i].data.len);
        cr_assert_eq(a.m[i].since, b.m[i].since, "since is the enter's");
        cr_assert_eq(a.m[i].version, b.m[i].version);
        cr_assert_eq(a.m[i].connections, b.m[i].connections);
    }
    /* deadlines: what was left of them, from the receiver's now */
    cr_assert_eq(member_of(&b, "bot")->ttl_until, T0 + 104000 + 26000);
    shm_presence_list_free(&a);
    shm_presence_list_free(&b);
    uint64_t at = T0 + 104000; /* the adopt's now */
    cr_assert_eq(shm_presence_due(&to), at + 7000, "cy's grace: 7 s left");
    cr_assert_eq(shm_presence_expire(&to, at + 6999, 64, count, NULL), 0);
    cr_assert_eq(shm_presence_expire(&to, at + 7000, 64, count, NULL), 1);
    cr_assert_eq(shm_presence_expire(&to, at + 26000, 64, count, NULL), 1,
                 "bot's ttl");
    cr_assert_eq(shm_presence_count(&to, nm(ROOM)), 1, "ada stays");
    /* its connections are under their keys there: a node's next
     * announcement is no event, and its death starts the grace */
    events = 0;
    cr_assert_eq(shm_presence_set(&to, nm(ROOM), nm("ada"), NULL, "n3/1", 2,
                                  GRACE, at, count, NULL),
                 SHM_PRES_NONE);
    cr_assert_eq(shm_presence_drop_node(&to, "n2/", GRACE, at), 1);
    cr_assert_eq(shm_presence_drop_node(&to, "n3/", GRACE, at), 1);
    cr_assert_eq(shm_presence_due(&to), at + GRACE);
    cr_assert_eq(events, 0);
    check(&from);
    check(&to);
}

Test(shm_presence_move, the_senders_own_streams_become_a_grace)
{
    struct shm_pres_list l;

    shm_presence_attach(&from, nm(ROOM), nm("here"), NULL, "n1/0", T0, NULL,
                        NULL);
    shm_presence_attach(&from, nm(ROOM), nm("both"), NULL, "n1/1", T0, NULL,
                        NULL);
    shm_presence_attach(&from, nm(ROOM), nm("both"), NULL, "n2/0", T0, NULL,
                        NULL);
    shm_presence_freeze(&from, 1);
    cr_assert_eq(hand(T0, 0), 2);
    cr_assert_eq(shm_presence_list(&to, nm(ROOM), NULL, 10, &l), 0);
    cr_assert_eq(member_of(&l, "here")->connections, 0);
    cr_assert_eq(member_of(&l, "both")->connections, 1, "n2's alone");
    shm_presence_list_free(&l);
    cr_assert_eq(shm_presence_due(&to), T0 + GRACE,
                 "its stream ends with its node: the grace starts");
    /* a reconnect through another node within it: no event */
    events = 0;
    cr_assert_eq(shm_presence_attach(&to, nm(ROOM), nm("here"), NULL, "n2/0",
                                     T0 + 500, count, NULL),
                 SHM_PRES_NONE);
    cr_assert_eq(shm_presence_expire(&to, T0 + GRACE, 64, count, NULL), 0);
    cr_assert_eq(events, 0);
    check(&to);
}

Test(shm_presence_move, a_frozen_table_refuses_writes_and_keeps_deadlines)
{
    struct shm_name d = nm("1");

    shm_presence_enter(&from, nm(ROOM), nm("bot"), NULL, 1000, T0, NULL, NULL);
    shm_presence_attach(&from, nm(ROOM), nm("ada"), NULL, "n2/0", T0, NULL,
                        NULL);
    shm_presence_freeze(&from, 1);
    cr_assert_eq(shm_presence_enter(&from, nm(ROOM), nm("new"), NULL, 1000, T0,
                                    NULL, NULL),
                 -ESHUTDOWN);
    cr_assert_eq(shm_presence_attach(&from, nm(ROOM), nm("ada"), &d, "n2/0", T0,
                                     NULL, NULL),
                 -ESHUTDOWN);
    cr_assert_eq(shm_presence_set(&from, nm(ROOM), nm("ada"), NULL, "n2/0", 0,
                                  GRACE, T0, NULL, NULL),
                 -ESHUTDOWN);
    cr_assert_eq(shm_presence_leave(&from, nm(ROOM), nm("bot"), T0, NULL, NULL),
                 -ESHUTDOWN);
    cr_assert_eq(shm_presence_import(&from, nm(ROOM), NULL, 0, GRACE, T0),
                 -ESHUTDOWN);
    cr_assert_eq(shm_presence_expire(&from, T0 + 5000, 64, NULL, NULL), 0,
                 "the next owner lets bot leave");
    cr_assert_eq(
        shm_presence_detach(&from, nm(ROOM), nm("ada"), "n2/0", GRACE, T0), 0,
        "a stream's end is no write the hand-over needs");
    cr_assert_eq(shm_presence_count(&from, nm(ROOM)), 2);
    shm_presence_freeze(&from, 0);
    cr_assert_eq(shm_presence_expire(&from, T0 + 5000, 64, NULL, NULL), 1);
    check(&from);
}

Test(shm_presence_move, the_set_handed_over_replaces_an_old_copy)
{
    struct shm_pres_list l;
    struct shm_pres_totals t0, t1;

    /* `to` owned the channel once: what it kept of it is no one's now */
    shm_presence_attach(&to, nm(ROOM), nm("ghost"), NULL, "n3/0", T0, NULL,
                        NULL);
    shm_presence_attach(&to, nm(ROOM), nm("ada"), NULL, "n3/0", T0, NULL, NULL);
    shm_presence_attach(&from, nm(ROOM), nm("ada"), NULL, "n2/0", T0, NULL,
                        NULL);
    shm_presence_totals(&to, &t0);
    cr_assert_eq(hand(T0, 0), 1);
    shm_presence_totals(&to, &t1);
    for (int a = 0; a < SHM_PRES_NACTIONS; a++)
        cr_assert_eq(t1.events[a], t0.events[a], "no event (%d)", a);
    cr_assert_eq(shm_presence_list(&to, nm(ROOM), NULL, 10, &l), 0);
    cr_assert_eq(l.n, 1);
    cr_assert_not_null(member_of(&l, "ada"));
    cr_assert_eq(member_of(&l, "ada")->connections, 1, "n2's, not n3's");
    shm_presence_list_free(&l);
    check(&to);
}

Test(shm_presence_move, a_record_cut_anywhere_changes_nothing)
{
    struct shm_pm_rec rec = {0};
    struct shm_name d = nm("{\"a\":[1,2,3]}");
    struct shm_pres_totals t;
    char m[16];

    for (int i = 0; i < 20; i++) {
        snprintf(m, sizeof(m), "m%d", i);
        shm_presence_attach(&from, nm(ROOM), nm(m), &d, i % 2 ? "n2/0" : "n3/1",
                            T0, NULL, NULL);
    }
    shm_presence_enter(&from, nm("\x1elobby"), nm("bot"), NULL, 1000, T0, NULL,
                       NULL);
    cr_assert_eq(shm_presence_take(&from, nm(ROOM), NULL, GRACE, T0, &rec), 20);
    cr_assert_eq(
        shm_presence_take(&from, nm("\x1elobby"), NULL, GRACE, T0, &rec), 1);
    cr_assert_eq(
        shm_presence_take(&from, nm("\x1enone"), NULL, GRACE, T0, &rec), 0);
    for (size_t len = 0; len < rec.len; len++) {
        unsigned char *cut = malloc(len ? len : 1);
        memcpy(cut, rec.buf, len);
        cr_assert_eq(shm_presence_adopt(&to, cut, len, GRACE, T0), -EBADMSG,
                     "cut at %zu", len);
        free(cut);
    }
    shm_presence_totals(&to, &t);
    cr_assert_eq(t.members, 0);
    cr_assert_eq(shm_presence_adopt(&to, rec.buf, rec.len, GRACE, T0), 21);
    /* a queue's name is not a channel */
    memcpy(rec.buf + sizeof(struct shm_pm_hdr) + sizeof(struct shm_pm_chan),
           "x", 1);
    cr_assert_eq(shm_presence_adopt(&to, rec.buf, rec.len, GRACE, T0),
                 -EBADMSG);
    shm_pm_rec_free(&rec);
    check(&to);
}

/* A join's hand-over (shm_presence_adopt_merge, "n2" the owner now): what
 * the owner has stays (a key's count is never added to, its data stays),
 * what it lacks comes (a third node's key, a call member), neither the
 * sender's keys ("n1/", taken out) nor the owner's own ("n2/") travel,
 * no event; the sender's copy then drops whole (drop_moved). */
Test(shm_presence_move, a_joins_merge_keeps_what_the_owner_has)
{
    struct shm_name d = nm("\"old\""), d2 = nm("\"new\"");
    struct shm_pm_rec rec = {0};
    struct shm_pres_list l;
    struct shm_pres_totals t;

    /* the older owner, n1 */
    shm_presence_attach(&from, nm(ROOM), nm("ada"), &d, "n1/0", T0, NULL, NULL);
    shm_presence_set(&from, nm(ROOM), nm("ada"), NULL, "n3/1", 2, GRACE, T0,
                     NULL, NULL);
    shm_presence_enter(&from, nm(ROOM), nm("bot"), NULL, 30000, T0, NULL, NULL);
    shm_presence_set(&from, nm(ROOM), nm("cy"), NULL, "n2/0", 1, GRACE, T0,
                     NULL, NULL);
    shm_presence_set(&from, nm(ROOM), nm("cy"), NULL, "n3/0", 1, GRACE, T0,
                     NULL, NULL);
    shm_presence_attach(&from, nm(ROOM), nm("solo"), NULL, "n1/1", T0, NULL,
                        NULL);
    /* the owner now, n2: its workers' and n3's writes came first */
    shm_presence_set(&to, nm(ROOM), nm("ada"), &d2, "n3/1", 1, GRACE, T0, NULL,
                     NULL);
    shm_presence_set(&to, nm(ROOM), nm("ada"), NULL, "n2/0", 3, GRACE, T0, NULL,
                     NULL);

    cr_assert_eq(shm_presence_take(&from, nm(ROOM), "n1/", GRACE, T0, &rec), 4);
    events = 0;
    cr_assert_eq(
        shm_presence_adopt_merge(&to, rec.buf, rec.len, "n2/", GRACE, T0 + 100),
        4);
    cr_assert_eq(events, 0);
    cr_assert_eq(shm_presence_list(&to, nm(ROOM), NULL, 10, &l), 0);
    cr_assert_eq(l.n, 4);
    cr_assert_eq(member_of(&l, "ada")->connections, 1 + 3,
                 "n3/1 and n2/0 as the owner has them; n1/0 not carried");
    cr_assert_eq(member_of(&l, "ada")->data.len, d2.len, "its data stays");
    cr_assert_eq(member_of(&l, "bot")->ttl_until, T0 + 100 + 30000);
    cr_assert_eq(member_of(&l, "cy")->connections, 1, "n3/0; n2/0 not taken");
    cr_assert_eq(member_of(&l, "solo")->connections, 0,
                 "the sender's stream: its worker says it next");
    shm_presence_list_free(&l);
    cr_assert_eq(shm_presence_due(&to), T0 + 100 + GRACE, "solo's grace");
    /* the sender's worker writes its count: solo stays, with no event */
    cr_assert_eq(shm_presence_set(&to, nm(ROOM), nm("solo"), NULL, "n1/1", 1,
                                  GRACE, T0 + 200, count, NULL),
                 SHM_PRES_NONE);
    cr_assert_eq(shm_presence_expire(&to, T0 + 100 + GRACE, 64, count, NULL),
                 0);
    /* merged again: nothing changes */
    cr_assert_eq(
        shm_presence_adopt_merge(&to, rec.buf, rec.len, "n2/", GRACE, T0 + 300),
        4);
    cr_assert_eq(shm_presence_list(&to, nm(ROOM), NULL, 10, &l), 0);
    cr_assert_eq(member_of(&l, "ada")->connections, 4);
    cr_assert_eq(member_of(&l, "solo")->connections, 1);
    shm_presence_list_free(&l);
    cr_assert_eq(events, 0);
    check(&to);
    /* the sender lets its copy go */
    cr_assert_eq(shm_presence_drop_moved(&from, rec.buf, rec.len, NULL, NULL),
                 4);
    shm_presence_totals(&from, &t);
    cr_assert_eq(t.members, 0);
    check(&from);
    shm_pm_rec_free(&rec);
}

/* A copy marked (a join's hand-over not taken yet) that is written as
 * this node's again: the first write takes every older connection out
 * (their members start the mark's grace), then counts; a member said
 * again stays with no event, one said by nobody leaves one grace later,
 * a call member keeps its ttl.  A drain's set replaces a copy and its
 * mark; the master's distrust does what a write would. */
Test(shm_presence_move, a_copy_written_as_the_owners_again_is_distrusted)
{
    uint64_t t = T0 + 1000;

    shm_presence_attach(&from, nm(ROOM), nm("ada"), NULL, "n2/0", T0, NULL,
                        NULL);
    shm_presence_attach(&from, nm(ROOM), nm("gone"), NULL, "n3/0", T0, NULL,
                        NULL);
    shm_presence_enter(&from, nm(ROOM), nm("bot"), NULL, 60000, T0, NULL, NULL);
    cr_assert_eq(shm_presence_is_copy(&from, nm(ROOM)), 0);
    cr_assert_eq(shm_presence_mark_copy(&from, nm(ROOM), 5000), 1);
    cr_assert_eq(shm_presence_mark_copy(&from, nm("\x1enone"), 5000), 0);
    cr_assert_eq(shm_presence_is_copy(&from, nm(ROOM)), 1);

    events = 0;
    cr_assert_eq(shm_presence_set(&from, nm(ROOM), nm("ada"), NULL, "n2/0", 1,
                                  GRACE, t, count, NULL),
                 SHM_PRES_NONE, "ada is said again: no event");
    cr_assert_eq(shm_presence_is_copy(&from, nm(ROOM)), 0, "the mark went");
    cr_assert_eq(shm_presence_due(&from), t + 5000, "gone's grace");
    cr_assert_eq(shm_presence_expire(&from, t + 4999, 64, count, NULL), 0);
    cr_assert_eq(shm_presence_expire(&from, t + 5000, 64, count, NULL), 1,
                 "gone, said by nobody, leaves");
    cr_assert_eq(events, 1);
    cr_assert_eq(shm_presence_count(&from, nm(ROOM)), 2, "ada and bot stay");
    cr_assert_eq(shm_presence_due(&from), T0 + 60000, "bot's ttl");

    /* the master's distrust, with no write: once */
    cr_assert_eq(shm_presence_mark_copy(&from, nm(ROOM), 5000), 1);
    cr_assert_eq(shm_presence_distrust(&from, nm(ROOM), t), 1);
    cr_assert_eq(shm_presence_distrust(&from, nm(ROOM), t), 0);
    cr_assert_eq(shm_presence_count(&from, nm(ROOM)), 2, "in their grace");

    /* a drain's set replaces a copy and its mark */
    cr_assert_eq(shm_presence_mark_copy(&from, nm(ROOM), 5000), 1);
    struct shm_pres_moved m = {
        .member = nm("cy"), .data = nm(""), .ttl_ms = 30000};
    cr_assert_eq(shm_presence_import(&from, nm(ROOM), &m, 1, GRACE, t), 1);
    cr_assert_eq(shm_presence_is_copy(&from, nm(ROOM)), 0);
    /* and 0 takes a mark off */
    cr_assert_eq(shm_presence_mark_copy(&from, nm(ROOM), 5000), 1);
    cr_assert_eq(shm_presence_mark_copy(&from, nm(ROOM), 0), 1);
    cr_assert_eq(shm_presence_is_copy(&from, nm(ROOM)), 0);
    check(&from);
}
