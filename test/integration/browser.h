/*
 * browser.h - the status page as a browser sees it: headless Chromium
 * (Debian's chromium) run once per look, with no other machinery.
 *
 * Each call starts chromium with a fresh profile under dir, lets the page
 * run for budget_ms of virtual time (timers run at once; the time spent
 * waiting on the network does not count, so a loaded machine does not cut
 * the page short), then dumps the DOM or takes a screenshot.  Console
 * output (console.log/error, uncaught exceptions, failed loads, blocked
 * requests) comes on Chromium's stderr as "...:CONSOLE:N] ..." lines,
 * which are kept apart from the browser's own noise.  Chromium runs in its
 * own process group, killed whole when it ends or overstays 90 s.
 */
#ifndef MAYFLY_TEST_INTEGRATION_BROWSER_H
#define MAYFLY_TEST_INTEGRATION_BROWSER_H

#include <stddef.h>

/* What every run passes (browser_live.c's too): the flags a root,
 * offline, headless Chromium needs to start quietly and fetch nothing but
 * the page; browser_nflags of them, at most BROWSER_NFLAGS_MAX. */
#define BROWSER_NFLAGS_MAX 16
extern const char *const browser_flags[];
extern const size_t browser_nflags;

/* What one run of chromium left. */
struct browser_run {
    char *dom;     /* --dump-dom's output, NUL-terminated ("" otherwise) */
    char *console; /* the CONSOLE lines of stderr, one a line ("" if none) */
    char *net;     /* browser_dump_dom's net log (Chromium's JSON), or "" */
    int exit_status;
};

/*
 * browser_dump_dom - load url in a w x h window, run budget_ms, fill r with
 * the DOM and the console lines.  Aborts the test when chromium is not
 * installed or does not finish.  Free r with browser_run_free().
 */
void browser_dump_dom(const char *dir, const char *url, int w, int h,
                      int budget_ms, struct browser_run *r);

/* browser_screenshot - load url in a w x h window, run budget_ms, write a
 * PNG to png; aborts the test unless a PNG was written. */
void browser_screenshot(const char *dir, const char *url, int w, int h,
                        int budget_ms, const char *png);

/* browser_run_free - release what a run filled in. */
void browser_run_free(struct browser_run *r);

/* browser_requests - how many requests the page of run r made (as its net
 * log says) whose URL holds needle. */
int browser_requests(const struct browser_run *r, const char *needle);

/* browser_count - how many times needle occurs in haystack. */
int browser_count(const char *haystack, const char *needle);

/*
 * browser_artifact - the path of name under the build's artifacts
 * directory (BUILD/artifacts, BUILD being where $MAYFLYD is), created if
 * need be: what a run keeps for people to look at.
 */
void browser_artifact(const char *name, char *out, size_t len);

#endif
