/*
 * browser_live.c - see browser_live.h.
 *
 * One command at a time: bl_call writes a command and reads
 * messages until the answer with its id comes; the events read meanwhile
 * (console, exceptions, log entries) are kept as text, the others are
 * dropped.  The browser sends nothing the test must answer, so nothing is
 * lost by reading only while a command is out.
 */
#include "test/integration/browser_live.h"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <nettle/base64.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <microhttpd.h>

#include "test/integration/browser.h"
#include "test/integration/node.h"

#define BL_TABS        16
#define BL_CALL_MS     30000  /* one command's answer, at most */
#define BL_CONSOLE_MAX 262144 /* console text kept, at most */
#define BL_POLL_MS     50

/* Besides browser.c's flags: three that keep tabs in the background
 * running as the one in front (a presence test has several, and their
 * timers and streams must not be slowed down), and the pipe. */
static const char *const bl_flags[] = {
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--remote-debugging-pipe",
};

#define BL_NFLAGS (sizeof(bl_flags) / sizeof(bl_flags[0]))

struct bl_tab {
    char target[64];  /* targetId; "" once closed */
    char session[64]; /* sessionId of the flat attach */
};

struct browser_live {
    pid_t pid;          /* chromium, leader of its group (negated: reaped) */
    int fd;             /* our end of its fds 3 and 4 */
    int next_id;        /* the next command's id */
    char log[PATH_MAX]; /* its stderr */
    char *in;           /* bytes read, not yet a whole message */
    size_t in_len, in_cap;
    struct bl_tab tab[BL_TABS];
    int ntabs;
    char *console; /* kept console text, NUL-terminated */
    size_t con_len;
    char last_err[1024]; /* browser_live_poll's last exception */
};

/* bl_log_tail - print the end of chromium's log, when a call fails,
 * without its complaints about the D-Bus a container does not have. */
static void
bl_log_tail(const struct browser_live *b)
{
    char cmd[PATH_MAX + 64];

    snprintf(cmd, sizeof(cmd), "grep -v -e dbus -e D-Bus '%s' | tail -n 20 >&2",
             b->log);
    (void)!system(cmd);
}

/* bl_fail - abort the test with msg, the console and the log's tail. */
#define bl_fail(b, ...)                                                        \
    do {                                                                       \
        bl_log_tail(b);                                                        \
        cr_log_error("browser console:\n%s", (b)->console);                    \
        cr_assert_fail(__VA_ARGS__);                                           \
    } while (0)

/* bl_keep - append a line to the console text (past the bound, dropped). */
static void
bl_keep(struct browser_live *b, const char *line)
{
    size_t n = strlen(line);

    if (b->con_len + n + 2 > BL_CONSOLE_MAX)
        return;
    memcpy(b->console + b->con_len, line, n);
    b->con_len += n;
    b->console[b->con_len++] = '\n';
    b->console[b->con_len] = '\0';
}

/* bl_tab_of - the tab whose session is sid, or -1. */
static int
bl_tab_of(const struct browser_live *b, const char *sid)
{
    for (int t = 0; sid != NULL && t < b->ntabs; t++)
        if (strcmp(b->tab[t].session, sid) == 0)
            return t;
    return -1;
}

/* bl_str - the string at key of o, or "". */
static const char *
bl_str(struct json_object *o, const char *key)
{
    struct json_object *v;

    if (o == NULL || !json_object_object_get_ex(o, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return "";
    return json_object_get_string(v);
}

/* bl_obj - the member key of o, or NULL. */
static struct json_object *
bl_obj(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;

    if (o != NULL)
        json_object_object_get_ex(o, key, &v);
    return v;
}

/* bl_event - keep what an event says about a page, as text. */
static void
bl_event(struct browser_live *b, struct json_object *m)
{
    const char *method = bl_str(m, "method");
    struct json_object *p = bl_obj(m, "params");
    int tab = bl_tab_of(b, bl_str(m, "sessionId"));
    char line[2048];
    int n;

    if (strcmp(method, "Runtime.consoleAPICalled") == 0) {
        struct json_object *args = bl_obj(p, "args");
        n = snprintf(line, sizeof(line), "tab %d console.%s:", tab,
                     bl_str(p, "type"));
        for (size_t i = 0; args != NULL && i < json_object_array_length(args);
             i++) {
            struct json_object *a = json_object_array_get_idx(args, i);
            struct json_object *v = bl_obj(a, "value");
            const char *s = v != NULL ? json_object_get_string(v)
                                      : bl_str(a, "description");
            if (n > 0 && (size_t)n < sizeof(line))
                n += snprintf(line + n, sizeof(line) - (size_t)n, " %s", s);
        }
    } else if (strcmp(method, "Runtime.exceptionThrown") == 0) {
        struct json_object *d = bl_obj(p, "exceptionDetails");
        const char *desc = bl_str(bl_obj(d, "exception"), "description");
        snprintf(line, sizeof(line), "tab %d exception: %s", tab,
                 *desc ? desc : bl_str(d, "text"));
    } else if (strcmp(method, "Log.entryAdded") == 0) {
        struct json_object *e = bl_obj(p, "entry");
        snprintf(line, sizeof(line), "tab %d log %s: %s %s", tab,
                 bl_str(e, "level"), bl_str(e, "text"), bl_str(e, "url"));
    } else {
        return;
    }
    bl_keep(b, line);
}

/* bl_send - write command method with params (consumed; NULL: {}) for
 * session (NULL: the browser); returns its id. */
static int
bl_send(struct browser_live *b, const char *method, struct json_object *params,
        const char *session)
{
    struct json_object *m = json_object_new_object();
    const char *s;
    size_t len, off = 0;
    int id = ++b->next_id;

    json_object_object_add(m, "id", json_object_new_int(id));
    json_object_object_add(m, "method", json_object_new_string(method));
    json_object_object_add(m, "params",
                           params ? params : json_object_new_object());
    if (session != NULL)
        json_object_object_add(m, "sessionId", json_object_new_string(session));
    s = json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN);
    len = strlen(s) + 1; /* the NUL ends the message */
    while (off < len) {
        ssize_t k = send(b->fd, s + off, len - off, MSG_NOSIGNAL);
        if (k == -1 && errno == EINTR)
            continue;
        if (k == -1) {
            json_object_put(m);
            bl_fail(b, "sending %s to chromium: %s", method, strerror(errno));
        }
        off += (size_t)k;
    }
    json_object_put(m);
    return id;
}

/* bl_gone - chromium closed its end: fail the test, saying why if it is
 * not installed (the exec failed). */
static void
bl_gone(struct browser_live *b, const char *what)
{
    int64_t end = itest_now_ms() + 1000;
    int st;

    while (itest_now_ms() < end) {
        if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
            b->pid = -b->pid; /* reaped: browser_live_stop kills no one */
            cr_assert(!WIFEXITED(st) || WEXITSTATUS(st) != 127,
                      "chromium is not installed (ops/install-deps.sh test "
                      "installs it)");
            break;
        }
        itest_sleep_ms(20);
    }
    bl_fail(b, "chromium closed its pipe (waiting on %s)", what);
}

/* bl_next - the next whole message from chromium, read until deadline
 * (a new reference); fails the test past it or if chromium is gone. */
static struct json_object *
bl_next(struct browser_live *b, int64_t deadline, const char *what)
{
    for (;;) {
        char *end = b->in_len ? memchr(b->in, 0, b->in_len) : NULL;
        if (end != NULL) {
            size_t n = (size_t)(end - b->in) + 1;
            struct json_object *m = json_tokener_parse(b->in);
            memmove(b->in, b->in + n, b->in_len - n);
            b->in_len -= n;
            if (m == NULL)
                bl_fail(b, "chromium sent what is not JSON (waiting on %s)",
                        what);
            return m;
        }
        int64_t left = deadline - itest_now_ms();
        if (left <= 0)
            bl_fail(b, "chromium did not answer %s within %d s", what,
                    BL_CALL_MS / 1000);
        struct pollfd pfd = {.fd = b->fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r == -1 && errno != EINTR)
            bl_fail(b, "poll: %s", strerror(errno));
        if (r <= 0)
            continue;
        if (b->in_cap - b->in_len < 65536) {
            b->in_cap = b->in_cap ? 2 * b->in_cap : 262144;
            b->in = realloc(b->in, b->in_cap);
            cr_assert_not_null(b->in);
        }
        ssize_t k = recv(b->fd, b->in + b->in_len, b->in_cap - b->in_len, 0);
        if (k == 0 || (k == -1 && errno != EINTR && errno != EAGAIN))
            bl_gone(b, what);
        if (k > 0)
            b->in_len += (size_t)k;
    }
}

/*
 * bl_call - send method with params (consumed) to session and wait for its
 * answer: the answer's "result" (a new reference) or, when chromium
 * refused the command, NULL with its message in err (NULL: fail the test
 * instead).
 */
static struct json_object *
bl_call(struct browser_live *b, const char *method, struct json_object *params,
        const char *session, char *err, size_t errlen)
{
    int id = bl_send(b, method, params, session);
    int64_t deadline = itest_now_ms() + BL_CALL_MS;

    for (;;) {
        struct json_object *m = bl_next(b, deadline, method), *v;
        if (!json_object_object_get_ex(m, "id", &v) ||
            json_object_get_int(v) != id) {
            bl_event(b, m);
            json_object_put(m);
            continue;
        }
        struct json_object *e = bl_obj(m, "error");
        if (e != NULL) {
            if (err == NULL) {
                char msg[512];
                snprintf(msg, sizeof(msg), "%s", json_object_to_json_string(e));
                json_object_put(m);
                bl_fail(b, "chromium refused %s: %s", method, msg);
            }
            snprintf(err, errlen, "%s", bl_str(e, "message"));
            json_object_put(m);
            return NULL;
        }
        struct json_object *res = json_object_get(bl_obj(m, "result"));
        json_object_put(m);
        return res ? res : json_object_new_object();
    }
}

/* bl_child - become chromium: its own process group, sock as fds 3 and 4,
 * stdout and stderr to log, home and caches under profile.  Does not
 * return. */
static void
bl_child(int sock, const char *log, const char *profile,
         const char *const *argv)
{
    int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    /* above 4, so that the dup2s below cannot close it */
    int s = fcntl(sock, F_DUPFD, 10);

    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (out == -1 || in == -1 || s == -1)
        _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    dup2(s, 3);
    dup2(s, 4);
    close_range(5, ~0u, 0); /* no socket of the test's leaks in */
    setenv("HOME", profile, 1);
    setenv("XDG_CONFIG_HOME", profile, 1);
    setenv("XDG_CACHE_HOME", profile, 1);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

struct browser_live *
browser_live_start(const char *dir, int w, int h)
{
    static int runs;
    struct browser_live *b = calloc(1, sizeof(*b));
    char profile[PATH_MAX], user_dir[PATH_MAX + 32], size[64];
    const char *argv[BROWSER_NFLAGS_MAX + BL_NFLAGS + 6];
    size_t a = 0;
    int sv[2], run = runs++;

    cr_assert_not_null(b);
    b->console = calloc(1, BL_CONSOLE_MAX);
    cr_assert_not_null(b->console);
    snprintf(profile, sizeof(profile), "%s/chromium-live-%d", dir, run);
    cr_assert(mkdir(profile, 0700) == 0 || errno == EEXIST, "mkdir %s: %s",
              profile, strerror(errno));
    snprintf(b->log, sizeof(b->log), "%s/chromium-live-%d.log", dir, run);
    snprintf(user_dir, sizeof(user_dir), "--user-data-dir=%s/profile", profile);
    snprintf(size, sizeof(size), "--window-size=%d,%d", w, h);
    argv[a++] = "chromium";
    for (size_t i = 0; i < browser_nflags; i++)
        argv[a++] = browser_flags[i];
    for (size_t i = 0; i < BL_NFLAGS; i++)
        argv[a++] = bl_flags[i];
    argv[a++] = user_dir;
    argv[a++] = size;
    argv[a++] = "about:blank";
    argv[a] = NULL;

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0,
                 "socketpair: %s", strerror(errno));
    b->pid = fork();
    cr_assert(b->pid != -1, "fork: %s", strerror(errno));
    if (b->pid == 0)
        bl_child(sv[1], b->log, profile, argv);
    setpgid(b->pid, b->pid); /* whichever of the two runs first */
    close(sv[1]);
    b->fd = sv[0];

    /* The first answer says it runs; a chromium that is not installed
     * never answers, and its exit status says why. */
    char err[256];
    struct json_object *v =
        bl_call(b, "Browser.getVersion", NULL, NULL, err, sizeof(err));
    cr_assert_not_null(v, "chromium: %s", err);
    json_object_put(v);
    return b;
}

int
browser_live_open(struct browser_live *b, const char *url)
{
    struct json_object *p = json_object_new_object(), *r;
    struct bl_tab *t;

    cr_assert_lt(b->ntabs, BL_TABS, "more than %d tabs", BL_TABS);
    t = &b->tab[b->ntabs];
    json_object_object_add(p, "url", json_object_new_string(url));
    r = bl_call(b, "Target.createTarget", p, NULL, NULL, 0);
    snprintf(t->target, sizeof(t->target), "%s", bl_str(r, "targetId"));
    json_object_put(r);
    cr_assert_neq(t->target[0], '\0', "Target.createTarget gave no targetId");

    p = json_object_new_object();
    json_object_object_add(p, "targetId", json_object_new_string(t->target));
    json_object_object_add(p, "flatten", json_object_new_boolean(1));
    r = bl_call(b, "Target.attachToTarget", p, NULL, NULL, 0);
    snprintf(t->session, sizeof(t->session), "%s", bl_str(r, "sessionId"));
    json_object_put(r);
    cr_assert_neq(t->session[0], '\0', "Target.attachToTarget gave no session");
    b->ntabs++;

    /* What the page says and what the browser refuses it, from now on. */
    json_object_put(bl_call(b, "Runtime.enable", NULL, t->session, NULL, 0));
    json_object_put(bl_call(b, "Log.enable", NULL, t->session, NULL, 0));
    return b->ntabs - 1;
}

/* bl_tab - tab's entry, failing the test if there is no such open tab. */
static struct bl_tab *
bl_tab(struct browser_live *b, int tab)
{
    cr_assert(tab >= 0 && tab < b->ntabs && b->tab[tab].target[0] != '\0',
              "no open tab %d", tab);
    return &b->tab[tab];
}

void
browser_live_close(struct browser_live *b, int tab)
{
    struct bl_tab *t = bl_tab(b, tab);
    struct json_object *p = json_object_new_object();

    json_object_object_add(p, "targetId", json_object_new_string(t->target));
    json_object_put(bl_call(b, "Target.closeTarget", p, NULL, NULL, 0));
    t->target[0] = '\0';
    t->session[0] = '\0';
}

/*
 * bl_eval - evaluate expr in tab: 0 with its value in *out (a new reference
 * or NULL), or -1 with the exception or the refusal in err.
 */
static int
bl_eval(struct browser_live *b, int tab, const char *expr,
        struct json_object **out, char *err, size_t errlen)
{
    struct bl_tab *t = bl_tab(b, tab);
    struct json_object *p = json_object_new_object(), *r, *x;

    json_object_object_add(p, "expression", json_object_new_string(expr));
    json_object_object_add(p, "returnByValue", json_object_new_boolean(1));
    json_object_object_add(p, "awaitPromise", json_object_new_boolean(1));
    *out = NULL;
    r = bl_call(b, "Runtime.evaluate", p, t->session, err, errlen);
    if (r == NULL)
        return -1;
    if ((x = bl_obj(r, "exceptionDetails")) != NULL) {
        const char *d = bl_str(bl_obj(x, "exception"), "description");
        snprintf(err, errlen, "%s", *d ? d : bl_str(x, "text"));
        json_object_put(r);
        return -1;
    }
    *out = json_object_get(bl_obj(bl_obj(r, "result"), "value"));
    json_object_put(r);
    return 0;
}

struct json_object *
browser_live_eval(struct browser_live *b, int tab, const char *expr)
{
    struct json_object *v;
    char err[1024];

    if (bl_eval(b, tab, expr, &v, err, sizeof(err)) != 0)
        bl_fail(b, "tab %d: %s threw: %s", tab, expr, err);
    return v;
}

int
browser_live_poll(struct browser_live *b, int tab, const char *expr,
                  int (*done)(struct json_object *v, void *arg), void *arg,
                  int timeout_ms)
{
    int64_t deadline = itest_now_ms() + timeout_ms;
    struct json_object *v;
    int ok;

    for (;;) {
        /* A page still loading may not define what expr reads yet: an
         * exception is "not yet", and the last one is kept for the end. */
        if (bl_eval(b, tab, expr, &v, b->last_err, sizeof(b->last_err)) != 0)
            v = NULL;
        else
            b->last_err[0] = '\0';
        ok = done(v, arg);
        json_object_put(v);
        if (ok)
            return ok;
        if (itest_now_ms() > deadline) {
            if (b->last_err[0] != '\0') {
                char line[1200];
                snprintf(line, sizeof(line), "tab %d: %s threw: %s", tab, expr,
                         b->last_err);
                bl_keep(b, line);
            }
            return ok;
        }
        itest_sleep_ms(BL_POLL_MS);
    }
}

/* bl_truthy - done for browser_live_wait: the value is JavaScript-true,
 * and kept (as JSON) in arg for the failure message. */
static int
bl_truthy(struct json_object *v, void *arg)
{
    char *last = arg;

    snprintf(last, 512, "%s", v ? json_object_to_json_string(v) : "null");
    if (v == NULL)
        return 0;
    switch (json_object_get_type(v)) {
    case json_type_boolean:
        return json_object_get_boolean(v);
    case json_type_int:
        return json_object_get_int64(v) != 0;
    case json_type_double:
        return json_object_get_double(v) != 0;
    case json_type_string:
        return json_object_get_string_len(v) > 0;
    default:
        return 1;
    }
}

void
browser_live_wait(struct browser_live *b, int tab, const char *expr,
                  int timeout_ms, const char *what)
{
    char last[512] = "";

    if (!browser_live_poll(b, tab, expr, bl_truthy, last, timeout_ms))
        bl_fail(b, "tab %d: %s not within %d s (%s was %s)", tab, what,
                timeout_ms / 1000, expr, last);
}

void
browser_live_screenshot(struct browser_live *b, int tab, const char *png)
{
    static const unsigned char magic[8] = {0x89, 'P',  'N',  'G',
                                           '\r', '\n', 0x1a, '\n'};
    struct bl_tab *t = bl_tab(b, tab);
    struct json_object *p = json_object_new_object(), *r;
    struct base64_decode_ctx ctx;
    const char *data;
    uint8_t *bytes;
    size_t len, got;
    FILE *f;

    /* the tab in front: a tab behind others may not be painted */
    json_object_object_add(p, "targetId", json_object_new_string(t->target));
    json_object_put(bl_call(b, "Target.activateTarget", p, NULL, NULL, 0));
    p = json_object_new_object();
    json_object_object_add(p, "format", json_object_new_string("png"));
    r = bl_call(b, "Page.captureScreenshot", p, t->session, NULL, 0);
    data = bl_str(r, "data");
    len = strlen(data);
    bytes = malloc(BASE64_DECODE_LENGTH(len) + 1);
    cr_assert_not_null(bytes);
    got = BASE64_DECODE_LENGTH(len);
    base64_decode_init(&ctx);
    cr_assert(base64_decode_update(&ctx, &got, bytes, len, data) &&
                  base64_decode_final(&ctx),
              "Page.captureScreenshot's data is not base64");
    json_object_put(r);
    cr_assert(got > sizeof(magic) && memcmp(bytes, magic, sizeof(magic)) == 0,
              "Page.captureScreenshot gave no PNG (%zu bytes)", got);
    f = fopen(png, "wb");
    cr_assert_not_null(f, "%s: %s", png, strerror(errno));
    cr_assert_eq(fwrite(bytes, 1, got, f), got, "%s: %s", png, strerror(errno));
    cr_assert_eq(fclose(f), 0, "%s: %s", png, strerror(errno));
    free(bytes);
}

const char *
browser_live_console(const struct browser_live *b)
{
    return b->console;
}

void
browser_live_stop(struct browser_live *b)
{
    if (b == NULL)
        return;
    /* the renderers and the zygote are in its group: all of it goes */
    if (b->pid > 0) {
        kill(-b->pid, SIGKILL);
        waitpid(b->pid, NULL, 0);
    } else {
        kill(b->pid, SIGKILL); /* the leader is reaped, its group may live */
    }
    close(b->fd);
    free(b->in);
    free(b->console);
    free(b);
}

/* ---- the page server ---- */

#define BL_PAGES 16

struct browser_live_site {
    struct MHD_Daemon *d;
    char origin[64];
    pthread_mutex_t mu; /* pages change while the daemon's thread serves */
    struct {
        char path[256];
        char *html;
    } page[BL_PAGES];
    int npages;
};

/* bl_site_answer - MHD's handler: the page set for the path, or 404. */
static enum MHD_Result
bl_site_answer(void *cls, struct MHD_Connection *conn, const char *url,
               const char *method, const char *version, const char *upload,
               size_t *upload_len, void **req)
{
    struct browser_live_site *s = cls;
    struct MHD_Response *resp;
    const char *body = "not found\n";
    unsigned status = MHD_HTTP_NOT_FOUND;
    enum MHD_Result ret;

    (void)method, (void)version, (void)upload, (void)upload_len, (void)req;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->npages; i++)
        if (strcmp(s->page[i].path, url) == 0) {
            body = s->page[i].html;
            status = MHD_HTTP_OK;
        }
    resp = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                           MHD_RESPMEM_MUST_COPY);
    pthread_mutex_unlock(&s->mu);
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            status == MHD_HTTP_OK ? "text/html; charset=utf-8"
                                                  : "text/plain");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

struct browser_live_site *
browser_live_site_start(void)
{
    struct browser_live_site *s = calloc(1, sizeof(*s));
    struct sockaddr_in a = {.sin_family = AF_INET};
    int port = itest_free_port();

    cr_assert_not_null(s);
    pthread_mutex_init(&s->mu, NULL);
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                            (uint16_t)port, NULL, NULL, bl_site_answer, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
                            MHD_OPTION_END);
    cr_assert_not_null(s->d, "the page server could not listen on %d", port);
    snprintf(s->origin, sizeof(s->origin), "http://127.0.0.1:%d", port);
    return s;
}

const char *
browser_live_site_origin(const struct browser_live_site *s)
{
    return s->origin;
}

void
browser_live_site_page(struct browser_live_site *s, const char *path,
                       const char *html)
{
    char *copy = strdup(html);
    int i;

    cr_assert_not_null(copy);
    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->npages; i++)
        if (strcmp(s->page[i].path, path) == 0)
            break;
    if (i == s->npages && s->npages < BL_PAGES) {
        snprintf(s->page[i].path, sizeof(s->page[i].path), "%s", path);
        s->npages++;
    }
    if (i < s->npages) {
        free(s->page[i].html);
        s->page[i].html = copy;
        copy = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    cr_assert_null(copy, "more than %d pages", BL_PAGES);
}

void
browser_live_site_stop(struct browser_live_site *s)
{
    if (s == NULL)
        return;
    MHD_stop_daemon(s->d);
    for (int i = 0; i < s->npages; i++)
        free(s->page[i].html);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
