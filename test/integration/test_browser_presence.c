/*
 * test_browser_presence.c - presence in a real browser (SPEC §12, issue
 * 27): headless Chromium loads a page from another origin (a page server
 * of the test, named in the node's cors_origins) as two members, ada and
 * bob, and as a third tab of ada.  Each page's one EventSource is both
 * its member stream (presence=, member=, data=) and its watch of the
 * channel (presence_events=, from=last); the page keeps the members from
 * the sync and the enter/leave/update events and shows them.
 *
 * What must hold: each page shows the others; ada's second tab is one
 * member with two connections, and closing it changes nothing on any page
 * (watched past a whole grace); closing bob's page makes bob leave after
 * presence_grace_ms and not before, on the page and in the list route
 * alike.  A screenshot of bob's page is kept among the build's artifacts
 * (presence-browser.png).
 *
 * "Past a whole grace" is waited on, not slept: after the third tab's
 * stream is gone, a call member enters with a ttl longer than the grace;
 * its leave, which every page sees, comes after the moment ada would
 * wrongly have left, on the same ordered events of the channel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/browser.h"
#include "test/integration/browser_live.h"
#include "test/integration/node.h"

#define CHANNEL  "room-7"
#define GRACE_MS 1500
#define TIMER_S  3     /* the call member's ttl: past the grace */
#define LATE_MS  15000 /* how late after the grace a leave may still come */
#define WAIT_MS  60000
#define PRES     "/api/v1/presence/"

static struct itest_node n;
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

TestSuite(browser_presence, .fini = down, .timeout = 180);

/*
 * The page: the member and its name come in the query.  window.here maps
 * each present member to its data, window.log keeps every presence event
 * as {action, member}, others() lists the members but oneself.  The
 * server's own "open" event reaches the same listener as the
 * EventSource's open, but carries data: only the latter counts.
 */
static const char page_fmt[] =
    "<!doctype html><html><head><meta charset='utf-8'>"
    "<link rel='icon' href='data:,'><title>mayfly: presence</title>\n"
    "<style>\n"
    "body{font:14px system-ui,sans-serif;margin:16px;color:#222}\n"
    "h1{font-size:18px;margin:0 0 4px}h2{font-size:15px;margin:14px 0 6px}\n"
    "#state{color:#555;margin:0}\n"
    "#others li{display:inline-block;margin:2px 6px 2px 0;padding:4px 10px;\n"
    "  border-radius:12px;background:#dcfce7;list-style:none}\n"
    "#others{padding:0;margin:0}#log{color:#444;margin:0}\n"
    "</style></head><body>\n"
    "<h1>Channel <span id='ch'></span>, as <span id='me'></span></h1>\n"
    "<p id='state'>connecting</p>\n"
    "<h2>Also here</h2><ul id='others'></ul>\n"
    "<h2>Events</h2><ol id='log'></ol>\n"
    "<script>\n"
    "const node = '%s', channel = '%s';\n"
    "const q = new URLSearchParams(location.search);\n"
    "window.me = q.get('member');\n"
    "window.here = new Map(); window.log = [];\n"
    "window.opens = 0; window.errors = 0;\n"
    "window.others = () => [...here.keys()].filter(m => m !== me).sort();\n"
    "document.getElementById('ch').textContent = channel;\n"
    "document.getElementById('me').textContent = me;\n"
    "function show() {\n"
    "  document.getElementById('state').textContent =\n"
    "    'connections ' + opens + ', errors ' + errors + ', members ' +\n"
    "    here.size;\n"
    "  document.getElementById('others').innerHTML = '';\n"
    "  for (const m of others()) {\n"
    "    const li = document.createElement('li');\n"
    "    const d = here.get(m);\n"
    "    li.textContent = (d && d.name ? d.name : m) + ' (' + m + ')';\n"
    "    document.getElementById('others').appendChild(li);\n"
    "  }\n"
    "}\n"
    "const url = node + '/api/v1/ephemeral/subscribe?presence=' +\n"
    "  encodeURIComponent(channel) + '&member=' + encodeURIComponent(me) +\n"
    "  '&data=' + encodeURIComponent(JSON.stringify({name: q.get('name')})) +\n"
    "  '&presence_events=' + encodeURIComponent(channel) + '&from=last';\n"
    "window.es = new EventSource(url);\n"
    "es.addEventListener('open', e => {\n"
    "  if (!(e instanceof MessageEvent)) opens++;\n"
    "  show();\n"
    "});\n"
    "es.addEventListener('presence', e => {\n"
    "  const ev = JSON.parse(e.data);\n"
    "  if (ev.channel !== channel) throw new Error('channel ' + ev.channel);\n"
    "  log.push({action: ev.action, member: ev.member || ''});\n"
    "  const li = document.createElement('li');\n"
    "  if (ev.action === 'sync') {\n"
    "    here.clear();\n"
    "    for (const m of ev.members) here.set(m.member, m.data);\n"
    "    li.textContent = 'sync: ' + ev.members.map(m => m.member).join(', "
    "');\n"
    "  } else {\n"
    "    if (ev.action === 'leave') here.delete(ev.member);\n"
    "    else here.set(ev.member, ev.data);\n"
    "    li.textContent = ev.action + ' ' + ev.member;\n"
    "  }\n"
    "  document.getElementById('log').appendChild(li);\n"
    "  show();\n"
    "});\n"
    "es.onerror = () => { errors++; show(); };\n"
    "</script></body></html>\n";

/* open_member - a new tab of the page as member (named name); its number. */
static int
open_member(const char *member, const char *name)
{
    char url[256];

    snprintf(url, sizeof(url), "%s/room.html?member=%s&name=%s",
             browser_live_site_origin(site), member, name);
    return browser_live_open(b, url);
}

/* wait_others - until tab shows exactly the others want ("a,b"). */
static void
wait_others(int tab, const char *want)
{
    char expr[128], what[128];

    snprintf(expr, sizeof(expr), "window.others && others().join() == '%s'",
             want);
    snprintf(what, sizeof(what), "tab %d shows the others '%s'", tab, want);
    browser_live_wait(b, tab, expr, WAIT_MS, what);
}

/* log_from - tab's events from the from'th on, as "action member;..." */
static char *
log_from(int tab, int from)
{
    char expr[160];
    struct json_object *v;
    char *s;

    snprintf(expr, sizeof(expr),
             "log.slice(%d).map(e => e.action + ' ' + e.member).join(';')",
             from);
    v = browser_live_eval(b, tab, expr);
    s = strdup(v != NULL ? json_object_get_string(v) : "");
    cr_assert_not_null(s);
    json_object_put(v);
    return s;
}

/* log_len - how many events tab has had. */
static int
log_len(int tab)
{
    struct json_object *v = browser_live_eval(b, tab, "log.length");
    int len = json_object_get_int(v);

    json_object_put(v);
    return len;
}

/*
 * listed - the list route's count into *count and each member's
 * connections as "ada:1,bob:1" into out (the route lists in order).
 */
static void
listed(int64_t *count, char *out, size_t len)
{
    struct itest_resp r = {0};
    size_t at = 0;

    out[0] = '\0';
    cr_assert_eq(itest_get(&n, &r, PRES CHANNEL), 200, "%s", r.body);
    *count = itest_jint(r.json, "count");
    for (int i = 0; i < itest_jlen(r.json, "members"); i++) {
        char p[64], q[64];
        snprintf(p, sizeof(p), "members.%d.member", i);
        snprintf(q, sizeof(q), "members.%d.connections", i);
        at += (size_t)snprintf(out + at, len - at, "%s%s:%lld", i ? "," : "",
                               itest_jstr(r.json, p),
                               (long long)itest_jint(r.json, q));
        cr_assert_lt(at, len);
    }
    itest_resp_free(&r);
}

/* wait_listed - until the list route shows want ("ada:2,bob:1"), with a
 * count of its members. */
static void
wait_listed(const char *want, int64_t want_count)
{
    int64_t end = itest_now_ms() + WAIT_MS, count;
    char got[256];

    for (;;) {
        listed(&count, got, sizeof(got));
        if ((strcmp(got, want) == 0 && count == want_count) ||
            itest_now_ms() > end)
            break;
        itest_sleep_ms(20);
    }
    cr_assert_str_eq(got, want, "the list route");
    cr_assert_eq(count, want_count, "the list route's count");
}

/* What the poll for bob's leave watches: when the page and the list
 * route first saw bob gone, in ms after the close (-1: not yet). */
struct leave {
    int64_t closed;
    int64_t page_ms, route_ms;
};

/* bob_gone - done for browser_live_poll over tab 0's others(): notes when
 * bob went from the page and from the list route; fails the test at once
 * when either is before the grace.  1 once both. */
static int
bob_gone(struct json_object *v, void *arg)
{
    struct leave *l = arg;
    int64_t count, now;
    char got[256];

    if (v == NULL)
        return 0;
    listed(&count, got, sizeof(got));
    now = itest_now_ms() - l->closed;
    if (l->route_ms < 0 && strstr(got, "bob:") == NULL)
        l->route_ms = now;
    if (l->page_ms < 0 && strcmp(json_object_get_string(v), "") == 0)
        l->page_ms = now;
    cr_assert(l->route_ms < 0 || l->route_ms >= GRACE_MS,
              "bob left the list route %lld ms after the close, before the "
              "grace of %d",
              (long long)l->route_ms, GRACE_MS);
    cr_assert(l->page_ms < 0 || l->page_ms >= GRACE_MS,
              "bob left ada's page %lld ms after the close, before the grace "
              "of %d",
              (long long)l->page_ms, GRACE_MS);
    return l->route_ms >= 0 && l->page_ms >= 0;
}

Test(browser_presence, two_members_a_third_tab_and_a_leave_after_the_grace)
{
    char opts[160], dir[256], png[512];
    char *page, *s;
    struct itest_resp r = {0};
    struct leave l = {.page_ms = -1, .route_ms = -1};
    struct json_object *v;
    int ada, bob, ada2, from_ada, from_bob;

    site = browser_live_site_start();
    snprintf(opts, sizeof(opts),
             "workers=2 presence_grace_ms=%d cors_origins=%s", GRACE_MS,
             browser_live_site_origin(site));
    itest_node_start(&n, opts);
    cr_assert(asprintf(&page, page_fmt, n.base, CHANNEL) > 0);
    browser_live_site_page(site, "/room.html", page);
    free(page);
    itest_test_dir(dir, sizeof(dir));
    b = browser_live_start(dir, 900, 600);

    /* Two members: each page shows the other, and the list route both,
     * one connection each. */
    ada = open_member("ada", "Ada");
    browser_live_wait(b, ada, "window.log && log.length >= 1", WAIT_MS,
                      "ada's page has its sync");
    bob = open_member("bob", "Bob");
    wait_others(ada, "bob");
    wait_others(bob, "ada");
    wait_listed("ada:1,bob:1", 2);
    s = log_from(ada, 0);
    cr_assert_str_eq(s, "sync ;enter bob", "ada's page: %s", s);
    free(s);
    s = log_from(bob, 0);
    cr_assert_str_eq(s, "sync ", "bob's page: %s", s);
    free(s);
    v = browser_live_eval(b, bob, "[...here.keys()].sort().join()");
    cr_assert_str_eq(json_object_get_string(v), "ada,bob",
                     "bob's sync holds both, himself too");
    json_object_put(v);
    from_ada = log_len(ada);
    from_bob = log_len(bob);

    /* A third tab of ada: the same member with two connections; it shows
     * bob, and the other pages hear nothing of it. */
    ada2 = open_member("ada", "Ada");
    wait_others(ada2, "bob");
    wait_listed("ada:2,bob:1", 2);

    /* It closes: ada is down to one connection at once, and stays, past
     * a whole grace (until the call member "timer", entered now with a
     * ttl longer than the grace, has left). */
    browser_live_close(b, ada2);
    wait_listed("ada:1,bob:1", 2);
    cr_assert_eq(itest_post(&n, &r, PRES "enter",
                            "{\"channel\":\"%s\",\"member\":\"timer\","
                            "\"ttlSeconds\":%d}",
                            CHANNEL, TIMER_S),
                 200, "%s", r.body);
    itest_resp_free(&r);
    browser_live_wait(b, bob,
                      "log.some(e => e.action == 'leave' && "
                      "e.member == 'timer')",
                      WAIT_MS, "bob's page sees the timer leave");
    browser_live_wait(b, ada,
                      "log.some(e => e.action == 'leave' && "
                      "e.member == 'timer')",
                      WAIT_MS, "ada's page sees the timer leave");
    s = log_from(ada, from_ada);
    cr_assert_str_eq(s, "enter timer;leave timer",
                     "ada's page after her third tab came and went: %s", s);
    free(s);
    s = log_from(bob, from_bob);
    cr_assert_str_eq(s, "enter timer;leave timer",
                     "bob's page after ada's third tab came and went: %s", s);
    free(s);
    wait_others(ada, "bob");
    wait_others(bob, "ada");
    wait_listed("ada:1,bob:1", 2);
    browser_artifact("presence-browser.png", png, sizeof(png));
    browser_live_screenshot(b, bob, png);
    from_ada = log_len(ada);

    /* Bob's page closes: bob leaves after the grace and not before, from
     * ada's page and from the list route. */
    l.closed = itest_now_ms();
    browser_live_close(b, bob);
    if (!browser_live_poll(b, ada, "others().join()", bob_gone, &l,
                           GRACE_MS + LATE_MS)) {
        cr_log_error("browser console:\n%s", browser_live_console(b));
        cr_assert_fail("bob did not leave within %d ms of his page's close "
                       "(page %lld, route %lld)",
                       GRACE_MS + LATE_MS, (long long)l.page_ms,
                       (long long)l.route_ms);
    }
    cr_log_info("bob left %lld ms (page) and %lld ms (list route) after his "
                "page closed; grace %d ms",
                (long long)l.page_ms, (long long)l.route_ms, GRACE_MS);
    s = log_from(ada, from_ada);
    cr_assert_str_eq(s, "leave bob", "ada's page after bob's close: %s", s);
    free(s);
    wait_listed("ada:1", 1);

    /* one stream all along on ada's page: no reconnect hid a flap */
    v = browser_live_eval(b, ada, "[opens, errors, es.readyState]");
    cr_assert_str_eq(json_object_to_json_string(v), "[ 1, 0, 1 ]",
                     "ada's page [opens, errors, readyState]");
    json_object_put(v);
    itest_node_stop(&n, 10000);
}
