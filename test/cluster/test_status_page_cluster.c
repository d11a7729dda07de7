/*
 * test_status_page_cluster.c - the status page of one node of three
 * (127.0.0.1-3) in headless Chromium shows the whole cluster: the three
 * members live, one of them the leader, and a queue whose messages another
 * node holds.  Keeps screenshots (desktop and phone widths) in
 * BUILD/artifacts/status-page.png and status-page-phone.png.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/cluster.h"
#include "test/integration/browser.h"

static struct cl c;

static void
up(void)
{
    cl_up(&c, NULL);
}

static void
down(void)
{
    cl_kill_all(&c);
}

TestSuite(status_page_cluster, .init = up, .fini = down, .timeout = 240);

Test(status_page_cluster, any_node_shows_three_members_and_the_queues)
{
    struct itest_resp r;
    struct browser_run b;
    char part[32], url[128], png[512], want[128];
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
    browser_run_free(&b);

    browser_artifact("status-page.png", png, sizeof(png));
    browser_screenshot(c.node[page].dir, url, 1280, 900, 5000, png);
    browser_artifact("status-page-phone.png", png, sizeof(png));
    browser_screenshot(c.node[page].dir, url, 390, 844, 5000, png);
}
