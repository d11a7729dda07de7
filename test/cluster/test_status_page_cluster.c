/*
 * test_status_page_cluster.c - the status page of one node of three
 * (127.0.0.1-3) in headless Chromium shows the whole cluster: the three
 * members live, one of them the leader, and a queue whose messages another
 * node holds; under "This node", the presence members of the channels it
 * owns, entered through another node; and a node whose view went stale (its master stopped) still
 * serves the page, which says so.  Keeps screenshots (desktop and phone
 * widths) in BUILD/artifacts/status-page.png and status-page-phone.png.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"
#include "test/integration/browser.h"

static struct cl c;

CL_SUITE(status_page_cluster, &c, NULL, CL_SUITE_STARTED, .timeout = 240);

Test(status_page_cluster, any_node_shows_three_members_and_the_queues)
{
    struct itest_resp r;
    struct browser_run b;
    char part[32], url[sizeof(c.node[0].base) + 2], png[512], want[128];
    char chan[32];
    int leader, page, holder, via;

    cl_wait_view(&c, CL_ALL);
    leader = cl_leader(&c, 30000);
    cr_assert_geq(leader, 0, "no leader");
    /* The page from a follower; the messages held by another node and
     * pushed through the third. */
    page = (leader + 1) % CL_NODES;
    holder = (leader + 2) % CL_NODES;
    via = leader;
    cl_part_owned_by("orders", holder, 64, part, sizeof(part));
    itest_push_ok(&c.node[via], &r, "orders", part, "[1,2,3,4,5]", 5);
    itest_resp_free(&r);
    /* Two presence members of a channel the page's node owns, entered
     * through another: the page shows them under this node. */
    chan[0] = '\0';
    for (int k = 0; k < 64 && chan[0] == '\0'; k++) {
        snprintf(want, sizeof(want), "\x1elobby%d", k);
        if (cl_owner(want, "Default", CL_ALL) == page)
            snprintf(chan, sizeof(chan), "lobby%d", k);
    }
    cr_assert_neq(chan[0], '\0', "no channel lobby0-63 owned by n%d", page);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(itest_post(&c.node[via], &r, "/api/v1/presence/enter",
                                "{\"channel\":\"%s\",\"member\":\"m%d\","
                                "\"ttlSeconds\":120}",
                                chan, i),
                     200, "enter through n%d: %s", via, r.body);
        itest_resp_free(&r);
    }

    snprintf(url, sizeof(url), "%s/", c.node[page].base);
    browser_dump_dom(c.node[page].dir, url, 1280, 900, 5000, &b);
    cr_assert_str_eq(b.console, "", "the page logged to the console:\n%s",
                     b.console);
    cr_assert(strstr(b.dom, "<body data-state=\"ready\">"),
              "the page never finished a refresh:\n%.2000s", b.dom);
    cr_assert_eq(browser_count(b.dom, "<tr data-member="), 3,
                 "want three members:\n%s", b.dom);
    cr_assert_eq(browser_count(b.dom, "data-state=\"live\""), 3,
                 "want three live members:\n%s", b.dom);
    for (int i = 0; i < CL_NODES; i++) {
        snprintf(want, sizeof(want), "<tr data-member=\"n%d\"", i);
        cr_assert(strstr(b.dom, want), "no member n%d:\n%s", i, b.dom);
    }
    cr_assert(strstr(b.dom, "3 of 3 live"), "%s", b.dom);
    cr_assert_eq(browser_count(b.dom, "<td class=\"leader\">leader</td>"), 1,
                 "want one leader:\n%s", b.dom);
    cr_assert_eq(browser_count(b.dom, "<td class=\"follower\">follower</td>"),
                 2, "want two followers:\n%s", b.dom);
    cr_assert(strstr(b.dom, "<tr data-queue=\"orders\" data-depth=\"5\">"),
              "no row for orders with depth 5 (held by n%d):\n%s", holder,
              b.dom);
    cr_assert(strstr(b.dom, "1 queue, 5 messages in the cluster"), "%s", b.dom);
    cr_assert(strstr(b.dom, "<dt>presence</dt><dd>2 members in 1 channel</dd>"),
              "the two members of %s (owned by n%d) not shown:\n%s", chan, page,
              b.dom);
    browser_run_free(&b);

    browser_artifact("status-page.png", png, sizeof(png));
    browser_screenshot(c.node[page].dir, url, 1280, 900, 5000, png);
    browser_artifact("status-page-phone.png", png, sizeof(png));
    browser_screenshot(c.node[page].dir, url, 390, 844, 5000, png);
}

Test(status_page_cluster, a_stale_node_serves_the_page_and_says_why)
{
    struct itest_resp r;
    struct browser_run b;
    char url[sizeof(c.node[0].base) + 2];
    int64_t deadline;
    const int v = 1; /* a follower or the leader: either serves the page */

    cl_wait_view(&c, CL_ALL);
    /* Its master stopped, the node's workers refuse what needs the view
     * within member_ttl_ms / 2; /health and the page still answer. */
    cr_assert_eq(kill(c.node[v].pid, SIGSTOP), 0);
    deadline = itest_now_ms() + 20000;
    for (;;) {
        itest_get(&c.node[v], &r, "/api/v1/ephemeral/queues");
        if (r.status == 503)
            break;
        itest_resp_free(&r);
        cr_assert_lt(itest_now_ms(), deadline, "node %d never went stale", v);
        itest_sleep_ms(100);
    }
    itest_assert_error(&r, 503, "owner_moved", NULL, "the listing, stale");
    itest_resp_free(&r);
    itest_get(&c.node[v], &r, "/");
    cr_assert_eq(r.status, 200, "GET / on a stale node: %ld", r.status);
    itest_resp_free(&r);

    snprintf(url, sizeof(url), "%s/", c.node[v].base);
    browser_dump_dom(c.node[v].dir, url, 1280, 900, 3000, &b);
    /* The 503s show in the console as failed loads; no script error may. */
    cr_assert_null(strstr(b.console, "Uncaught"), "%s", b.console);
    cr_assert(
        strstr(b.dom, "<span id=\"status\" class=\"pill stale\">stale</span>"),
        "the page does not say stale:\n%s", b.dom);
    cr_assert(strstr(b.dom, "The node answers, but the queue listing: this "
                            "node cannot tell who owns what now"),
              "the page does not say why:\n%s", b.dom);
    cr_assert_eq(browser_count(b.dom, "<tr data-member="), 3, "%s", b.dom);
    browser_run_free(&b);
    kill(c.node[v].pid, SIGCONT);
}
