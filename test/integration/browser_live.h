/*
 * browser_live.h - a headless Chromium kept open for a whole test, driven
 * over the Chrome DevTools Protocol, and a page server for what it loads.
 *
 * browser.h runs Chromium once per look; a test that restarts a node under
 * an open page (an EventSource that must reconnect by itself, a presence
 * channel whose members come and go) needs the page to stay.  Here
 * Debian's chromium runs headless with --remote-debugging-pipe: the test
 * writes DevTools commands on the browser's fd 3 and reads its answers and
 * events on fd 4, JSON messages each ended by a NUL byte (one socket
 * stands for both).  Tabs are targets (Target.createTarget) attached in
 * flat mode (Target.attachToTarget, flatten), so a command names its tab
 * by session id.  Console output, uncaught exceptions and the browser's
 * own log entries (failed loads, CORS refusals) of every tab are kept, to
 * be shown when a test fails.
 *
 * Tests wait on the page's state, never on time: browser_live_wait and
 * browser_live_poll evaluate an expression in the tab until it holds.
 * Every function aborts the test on what it cannot do (no chromium, a
 * command refused or unanswered in 30 s, an exception browser_live_eval
 * met), with the console so far.  Chromium runs in its own process group,
 * killed whole by browser_live_stop or when the test process dies.
 *
 * The page server (browser_live_site) is libmicrohttpd on 127.0.0.1 and a
 * free port, in a thread of the test: pages are HTML strings the test
 * sets by path, so a node's cors_origins can name the site's origin and
 * the browser takes the real cross-origin path.
 */
#ifndef MAYFLY_TEST_INTEGRATION_BROWSER_LIVE_H
#define MAYFLY_TEST_INTEGRATION_BROWSER_LIVE_H

#include <json-c/json.h>

struct browser_live;
struct browser_live_site;

/*
 * browser_live_start - start chromium with a fresh profile under dir (which
 * must exist; its log goes to dir/chromium-live-N.log) and a window of w x
 * h, and wait until it answers over its pipe.
 */
struct browser_live *browser_live_start(const char *dir, int w, int h);

/* browser_live_open - open url in a new tab; returns the tab's number
 * (0, 1, ... in the order opened) once it is attached, not loaded. */
int browser_live_open(struct browser_live *b, const char *url);

/* browser_live_close - close tab (Target.closeTarget), as a user closing
 * it would: its page unloads and its connections close. */
void browser_live_close(struct browser_live *b, int tab);

/*
 * browser_live_eval - the value of the JavaScript expression expr in tab
 * (a promise is awaited), as a new json-c reference the caller puts; NULL
 * for undefined and null.  An exception thrown fails the test.
 */
struct json_object *browser_live_eval(struct browser_live *b, int tab,
                                      const char *expr);

/*
 * browser_live_poll - evaluate expr in tab every 50 ms and hand its value
 * (possibly NULL) to done, until done returns nonzero or timeout_ms pass;
 * returns done's last answer.  An exception (a page still loading) is
 * NULL, and the last one goes to the console at the timeout.  done may
 * fail the test itself (a message seen twice need not wait for the
 * timeout).
 */
int browser_live_poll(struct browser_live *b, int tab, const char *expr,
                      int (*done)(struct json_object *v, void *arg), void *arg,
                      int timeout_ms);

/* browser_live_wait - until expr is truthy in tab; past timeout_ms fails
 * the test, naming what it waited for, the last value and the console. */
void browser_live_wait(struct browser_live *b, int tab, const char *expr,
                       int timeout_ms, const char *what);

/* browser_live_screenshot - a PNG of tab's viewport (Page.captureScreenshot)
 * into png. */
void browser_live_screenshot(struct browser_live *b, int tab, const char *png);

/* browser_live_console - the console lines, exceptions and log entries of
 * every tab so far, one a line ("" if none); owned by b. */
const char *browser_live_console(const struct browser_live *b);

/* browser_live_stop - kill chromium's process group and free b (NULL is
 * nothing). */
void browser_live_stop(struct browser_live *b);

/* browser_live_site_start - serve pages on 127.0.0.1 and a free port, with
 * none yet (every path answers 404 until set). */
struct browser_live_site *browser_live_site_start(void);

/* browser_live_site_origin - "http://127.0.0.1:PORT", what cors_origins
 * names and page URLs begin with. */
const char *browser_live_site_origin(const struct browser_live_site *s);

/* browser_live_site_page - serve html (copied) at path ("/room.html"; the
 * query is not part of it), replacing what was there. */
void browser_live_site_page(struct browser_live_site *s, const char *path,
                            const char *html);

/* browser_live_site_stop - stop serving and free s (NULL is nothing). */
void browser_live_site_stop(struct browser_live_site *s);

#endif
