/*
 * browser.c - see browser.h.
 */
#include "test/integration/browser.h"

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"

#define BROWSER_TIMEOUT_MS 90000

const char *const browser_flags[] = {
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
};

const size_t browser_nflags = sizeof(browser_flags) / sizeof(browser_flags[0]);
_Static_assert(sizeof(browser_flags) / sizeof(browser_flags[0]) <=
                   BROWSER_NFLAGS_MAX,
               "browser.h's BROWSER_NFLAGS_MAX is too small");

/* slurp - the whole of path, NUL-terminated ("" when it cannot be read). */
static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *s = NULL;
    size_t len = 0, cap = 0, k;

    do {
        if (cap - len < 65536) {
            cap = cap ? 2 * cap : 131072;
            s = realloc(s, cap);
            cr_assert_not_null(s);
        }
        k = f ? fread(s + len, 1, cap - len - 1, f) : 0;
        len += k;
    } while (k > 0);
    s[len] = '\0';
    if (f)
        fclose(f);
    return s;
}

/* console_lines - the lines of text that carry console output. */
static char *
console_lines(const char *text)
{
    char *out = calloc(1, strlen(text) + 1);
    const char *line = text;

    cr_assert_not_null(out);
    while (*line != '\0') {
        size_t n = strcspn(line, "\n");
        const char *c = memmem(line, n, ":CONSOLE", 8);

        if (c != NULL) {
            strncat(out, line, n);
            strcat(out, "\n");
        }
        line += n + (line[n] == '\n');
    }
    return out;
}

/* child - become chromium: its own process group, home and profile in
 * profile, stdout to out and stderr to err.  Does not return. */
static void
child(const char *profile, const char *out, const char *err,
      const char *const *argv)
{
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);

    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (o == -1 || e == -1 || in == -1)
        _exit(126);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    /* Its caches and config go under the profile, removed with the test. */
    setenv("HOME", profile, 1);
    setenv("XDG_CONFIG_HOME", profile, 1);
    setenv("XDG_CACHE_HOME", profile, 1);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

/*
 * run - chromium with the common flags, a window of w x h, budget_ms of
 * virtual time, then action (--dump-dom, --screenshot=...) on url; its
 * stdout into out, stderr into err and its net log into net (NULL:
 * none).  Returns its exit status.
 */
static int
run(const char *dir, const char *url, int w, int h, int budget_ms,
    const char *action, const char *out, const char *err, const char *net)
{
    static int runs;
    char profile[PATH_MAX], size[64], budget[64], user_dir[PATH_MAX + 32];
    char netlog[PATH_MAX + 32];
    const char *argv[BROWSER_NFLAGS_MAX + 8];
    size_t a = 0;
    int64_t deadline;
    int st = 0;
    pid_t pid;

    snprintf(profile, sizeof(profile), "%s/chromium-%d", dir, runs++);
    cr_assert(mkdir(profile, 0700) == 0 || errno == EEXIST, "mkdir %s: %s",
              profile, strerror(errno));
    snprintf(user_dir, sizeof(user_dir), "--user-data-dir=%s/profile", profile);
    snprintf(size, sizeof(size), "--window-size=%d,%d", w, h);
    snprintf(budget, sizeof(budget), "--virtual-time-budget=%d", budget_ms);
    argv[a++] = "chromium";
    for (size_t i = 0; i < browser_nflags; i++)
        argv[a++] = browser_flags[i];
    argv[a++] = user_dir;
    argv[a++] = size;
    argv[a++] = budget;
    if (net != NULL) {
        snprintf(netlog, sizeof(netlog), "--log-net-log=%s", net);
        argv[a++] = netlog;
    }
    argv[a++] = action;
    argv[a++] = url;
    argv[a] = NULL;

    pid = fork();
    cr_assert(pid != -1, "fork: %s", strerror(errno));
    if (pid == 0)
        child(profile, out, err, argv);
    deadline = itest_now_ms() + BROWSER_TIMEOUT_MS;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (itest_now_ms() > deadline) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            cr_assert_fail("chromium %s %s took over %d s", action, url,
                           BROWSER_TIMEOUT_MS / 1000);
        }
        itest_sleep_ms(20);
    }
    /* Helpers (renderer, zygote) that outlive the browser go too. */
    kill(-pid, SIGKILL);
    st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    cr_assert_neq(st, 127,
                  "chromium is not installed (ops/install-deps.sh test "
                  "installs it)");
    return st;
}

void
browser_dump_dom(const char *dir, const char *url, int w, int h, int budget_ms,
                 struct browser_run *r)
{
    char out[PATH_MAX], err[PATH_MAX], net[PATH_MAX];
    char *log;

    snprintf(out, sizeof(out), "%s/dom.html", dir);
    snprintf(err, sizeof(err), "%s/chromium.log", dir);
    snprintf(net, sizeof(net), "%s/net.json", dir);
    unlink(net);
    r->exit_status =
        run(dir, url, w, h, budget_ms, "--dump-dom", out, err, net);
    r->dom = slurp(out);
    r->net = slurp(net);
    log = slurp(err);
    r->console = console_lines(log);
    free(log);
    cr_assert_eq(r->exit_status, 0, "chromium --dump-dom %s exited %d", url,
                 r->exit_status);
}

void
browser_screenshot(const char *dir, const char *url, int w, int h,
                   int budget_ms, const char *png)
{
    char action[PATH_MAX + 32], out[PATH_MAX], err[PATH_MAX];
    static const unsigned char magic[8] = {0x89, 'P',  'N',  'G',
                                           '\r', '\n', 0x1a, '\n'};
    unsigned char head[8] = {0};
    FILE *f;
    int st;

    snprintf(action, sizeof(action), "--screenshot=%s", png);
    snprintf(out, sizeof(out), "%s/screenshot.out", dir);
    snprintf(err, sizeof(err), "%s/screenshot.log", dir);
    unlink(png);
    st = run(dir, url, w, h, budget_ms, action, out, err, NULL);
    f = fopen(png, "rb");
    cr_assert_not_null(f, "chromium --screenshot wrote no %s (exit %d)", png,
                       st);
    cr_assert_eq(fread(head, 1, sizeof(head), f), sizeof(head));
    fclose(f);
    cr_assert_eq(memcmp(head, magic, sizeof(magic)), 0, "%s is not a PNG", png);
}

void
browser_run_free(struct browser_run *r)
{
    free(r->dom);
    free(r->console);
    free(r->net);
    r->dom = r->console = r->net = NULL;
}

int
browser_count(const char *haystack, const char *needle)
{
    int n = 0;

    for (const char *p = haystack; (p = strstr(p, needle)) != NULL;
         p += strlen(needle))
        n++;
    return n;
}

void
browser_artifact(const char *name, char *out, size_t len)
{
    const char *bin = getenv("MAYFLYD");
    char build[PATH_MAX], dir[PATH_MAX + 16];

    cr_assert_not_null(bin, "MAYFLYD is not set (test/run-all.sh sets it)");
    cr_assert_not_null(realpath(bin, build), "%s: %s", bin, strerror(errno));
    snprintf(dir, sizeof(dir), "%s/artifacts", dirname(build));
    cr_assert(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir,
              strerror(errno));
    snprintf(out, len, "%s/%s", dir, name);
}

/* browser_requests - see browser.h. */
int
browser_requests(const struct browser_run *r, const char *needle)
{
    struct json_object *log = json_tokener_parse(r->net), *v, *events;
    int start = -1, n = 0;

    cr_assert_not_null(log, "chromium's net log is not JSON");
    if (json_object_object_get_ex(log, "constants", &v) &&
        json_object_object_get_ex(v, "logEventTypes", &v) &&
        json_object_object_get_ex(v, "URL_REQUEST_START_JOB", &v))
        start = json_object_get_int(v);
    cr_assert_geq(start, 0, "the net log names no URL_REQUEST_START_JOB");
    cr_assert(json_object_object_get_ex(log, "events", &events));
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        struct json_object *e = json_object_array_get_idx(events, i), *p, *u;
        if (json_object_object_get_ex(e, "type", &v) &&
            json_object_get_int(v) == start &&
            json_object_object_get_ex(e, "params", &p) &&
            json_object_object_get_ex(p, "url", &u) &&
            strstr(json_object_get_string(u), needle) != NULL)
            n++;
    }
    json_object_put(log);
    return n;
}
