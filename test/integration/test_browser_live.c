/*
 * test_browser_live.c - the live-browser helper itself
 * (test/integration/browser_live.h), on pages of its own page server and no
 * node: tabs are apart and see each other close, as presence's pages must;
 * what a page logs or throws is kept; a value is waited for, not slept on;
 * a screenshot is a PNG.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/browser_live.h"
#include "test/integration/node.h"

#define WAIT_MS 60000

static struct browser_live *b;
static struct browser_live_site *site;

static void
down(void)
{
    browser_live_stop(b);
    b = NULL;
    browser_live_site_stop(site);
    site = NULL;
}

TestSuite(browser_live, .fini = down, .timeout = 120);

/* up - the page server with page at /p.html, a browser, and the page's
 * URL (with query) into url. */
static void
up(const char *page, const char *query, char *url, size_t len)
{
    char dir[256];

    site = browser_live_site_start();
    browser_live_site_page(site, "/p.html", page);
    itest_test_dir(dir, sizeof(dir));
    b = browser_live_start(dir, 800, 600);
    snprintf(url, len, "%s/p.html%s", browser_live_site_origin(site), query);
}

/* A page that says hello on a channel all its tabs share, and bye as it
 * goes; window.heard keeps what the others said. */
static const char channel_page[] =
    "<!doctype html><html><head><link rel='icon' href='data:,'></head>"
    "<body><script>\n"
    "window.me = location.search.slice(1); window.heard = [];\n"
    "const ch = new BroadcastChannel('room');\n"
    "ch.onmessage = e => heard.push(e.data);\n"
    "ch.postMessage('hello ' + me);\n"
    "addEventListener('pagehide', () => ch.postMessage('bye ' + me));\n"
    "document.body.textContent = 'tab ' + me;\n"
    "</script></body></html>\n";

Test(browser_live, tabs_are_apart_and_a_closed_tab_leaves)
{
    char url[160];
    struct json_object *v;
    int t[3];

    up(channel_page, "", url, sizeof(url));
    for (int i = 0; i < 3; i++) {
        char u[200], ready[64];
        snprintf(u, sizeof(u), "%s?%d", url, i);
        t[i] = browser_live_open(b, u);
        cr_assert_eq(t[i], i);
        snprintf(ready, sizeof(ready), "window.me === '%d'", i);
        browser_live_wait(b, t[i], ready, WAIT_MS, "the page loaded");
    }
    /* each tab runs its own page: tab 0 heard the two opened after it */
    browser_live_wait(b, t[0], "heard.join() == 'hello 1,hello 2'", WAIT_MS,
                      "tab 0 hears the others arrive");
    v = browser_live_eval(b, t[2],
                          "[me, heard.length, document.body.innerText]");
    cr_assert_str_eq(json_object_to_json_string(v), "[ \"2\", 0, \"tab 2\" ]");
    json_object_put(v);

    browser_live_close(b, t[1]);
    browser_live_wait(b, t[0], "heard.includes('bye 1')", WAIT_MS,
                      "tab 0 hears tab 1 go");
    browser_live_wait(b, t[2], "heard.includes('bye 1')", WAIT_MS,
                      "tab 2 hears tab 1 go");
    v = browser_live_eval(b, t[2], "heard.length");
    cr_assert_eq(json_object_get_int(v), 1,
                 "tab 2 heard more than tab 1's bye");
    json_object_put(v);
    /* a tab opened after a close takes the next number */
    cr_assert_eq(browser_live_open(b, url), 3);
}

Test(browser_live, what_a_page_logs_or_throws_is_kept)
{
    char url[160];
    struct json_object *v;

    up("<!doctype html><script>console.error('boom', 7);\n"
       "window.done = 0;\n"
       "setTimeout(() => { done = 1; undefinedCall(); }, 100);</script>",
       "", url, sizeof(url));
    browser_live_open(b, url);
    browser_live_wait(b, 0, "done", WAIT_MS, "the timer ran");
    /* a promise is awaited, and an evaluation reaches the console */
    v = browser_live_eval(b, 0,
                          "new Promise(r => setTimeout(() => "
                          "{ console.log('late'); r(42); }, 50))");
    cr_assert_eq(json_object_get_int(v), 42);
    json_object_put(v);
    v = browser_live_eval(b, 0, "undefined");
    cr_assert_null(v);
    /* the exception's event comes before the answer of a later command */
    browser_live_eval(b, 0, "null");
    const char *con = browser_live_console(b);
    cr_assert(strstr(con, "tab 0 console.error: boom 7"), "%s", con);
    cr_assert(strstr(con, "tab 0 console.log: late"), "%s", con);
    cr_assert(strstr(con, "undefinedCall is not defined"), "%s", con);
}

Test(browser_live, a_screenshot_is_a_png_of_the_page)
{
    char url[160], png[300], dir[256];
    unsigned char head[24];
    FILE *f;

    up("<!doctype html><body style='background:#0a0'>green</body>", "", url,
       sizeof(url));
    browser_live_open(b, url);
    browser_live_wait(b, 0, "document.readyState == 'complete'", WAIT_MS,
                      "the page loaded");
    itest_test_dir(dir, sizeof(dir));
    snprintf(png, sizeof(png), "%s/shot.png", dir);
    browser_live_screenshot(b, 0, png);
    f = fopen(png, "rb");
    cr_assert_not_null(f);
    cr_assert_eq(fread(head, 1, sizeof(head), f), sizeof(head));
    fclose(f);
    /* the IHDR's width and height: the window's */
    cr_assert_eq(head[16] << 24 | head[17] << 16 | head[18] << 8 | head[19],
                 800);
    cr_assert_gt(head[20] << 24 | head[21] << 16 | head[22] << 8 | head[23], 0);
}

Test(browser_live, an_unknown_path_is_404_and_a_page_can_change)
{
    char url[160];

    up("<!doctype html><script>window.v = 1</script>", "", url, sizeof(url));
    browser_live_open(b, url);
    browser_live_wait(b, 0, "window.v == 1", WAIT_MS, "the first page");
    browser_live_site_page(site, "/p.html",
                           "<!doctype html><script>window.v = 2</script>");
    browser_live_eval(b, 0, "location.reload()");
    browser_live_wait(b, 0, "window.v == 2", WAIT_MS, "the page set after");
    browser_live_wait(b, 0, "fetch('/nothing').then(r => r.status == 404)",
                      WAIT_MS, "a 404 for a path not set");
}
