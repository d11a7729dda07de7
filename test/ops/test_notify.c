/*
 * test_notify.c - what a real mayflyd tells systemd (master/notify.h),
 * without systemd: the test binds the datagram socket systemd would,
 * points NOTIFY_SOCKET at it and reads every message the node sends, with
 * the sender's credentials (systemd's NotifyAccess=main takes messages
 * from the master only).
 *
 * Checked: the exact messages and their order around a start, a HUP and a
 * drain; WATCHDOG=1 at least every WATCHDOG_USEC; and that READY=1 comes
 * only once the node reports ready, with a peer that never answers (the
 * node waits for it first): /health says ready when READY=1 arrives, and
 * said "starting" before.  Every wait is a receive with a deadline.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define NT_MSG_MAX  1024
#define NT_MSGS_MAX 256
#define WD_USEC     2000000 /* WATCHDOG_USEC the tests give */

struct nt_msg {
    char text[NT_MSG_MAX];
    pid_t pid;        /* the sender, from SCM_CREDENTIALS */
    int64_t at_ms;    /* when it was read (itest_now_ms) */
    uint64_t mono_us; /* and on CLOCK_MONOTONIC, in microseconds */
};

static struct nt_msg nt_msgs[NT_MSGS_MAX];
static int nt_n;
static int nt_fd = -1;

/* nt_mono_us - CLOCK_MONOTONIC in microseconds, as MONOTONIC_USEC= is. */
static uint64_t
nt_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* nt_listen - bind an abstract datagram socket that receives the sender's
 * credentials, and point NOTIFY_SOCKET at it ("@name", as sd_notify(3)
 * reads it) for the nodes this test starts. */
static void
nt_listen(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char name[64];
    int on = 1;

    snprintf(name, sizeof(name), "mayfly-notify-test-%d", (int)getpid());
    memcpy(a.sun_path + 1, name, strlen(name));
    nt_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert_neq(nt_fd, -1, "socket: %s", strerror(errno));
    cr_assert_eq(setsockopt(nt_fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)),
                 0);
    cr_assert_eq(bind(nt_fd, (struct sockaddr *)&a,
                      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                                  strlen(name))),
                 0, "bind(@%s): %s", name, strerror(errno));
    char env[80];
    snprintf(env, sizeof(env), "@%s", name);
    setenv("NOTIFY_SOCKET", env, 1);
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    nt_n = 0;
}

static void
nt_close(void)
{
    if (nt_fd != -1)
        close(nt_fd);
    nt_fd = -1;
    unsetenv("NOTIFY_SOCKET");
}

TestSuite(notify, .init = nt_listen, .fini = nt_close, .timeout = 90);

/* nt_recv - the next message within timeout_ms, kept in nt_msgs: its
 * index, or -1 when none came in time. */
static int
nt_recv(int timeout_ms)
{
    struct pollfd p = {.fd = nt_fd, .events = POLLIN};
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } c;
    struct nt_msg *m;
    struct iovec iov;
    struct msghdr h = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = c.buf,
                       .msg_controllen = sizeof(c.buf)};
    ssize_t n;

    cr_assert_lt(nt_n, NT_MSGS_MAX, "more than %d notifications", nt_n);
    if (poll(&p, 1, timeout_ms) != 1)
        return -1;
    m = &nt_msgs[nt_n];
    iov = (struct iovec){m->text, sizeof(m->text) - 1};
    n = recvmsg(nt_fd, &h, MSG_DONTWAIT);
    cr_assert_gt(n, 0, "recvmsg: %s", strerror(errno));
    m->text[n] = '\0';
    m->pid = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&h); cm; cm = CMSG_NXTHDR(&h, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS) {
            struct ucred u;
            memcpy(&u, CMSG_DATA(cm), sizeof(u));
            m->pid = u.pid;
        }
    m->at_ms = itest_now_ms();
    m->mono_us = nt_mono_us();
    return nt_n++;
}

/* nt_is - message i is exactly text, or starts with text and a newline
 * (more assignments follow). */
static int
nt_is(int i, const char *text)
{
    size_t n = strlen(text);
    return strncmp(nt_msgs[i].text, text, n) == 0 &&
           (nt_msgs[i].text[n] == '\0' || nt_msgs[i].text[n] == '\n');
}

/* nt_field - the value of NAME= in message i (up to its newline, copied
 * into out), or NULL. */
static const char *
nt_field(int i, const char *name, char *out, size_t len)
{
    const char *t = nt_msgs[i].text;
    size_t n = strlen(name);

    for (;;) {
        if (strncmp(t, name, n) == 0 && t[n] == '=') {
            snprintf(out, len, "%.*s", (int)strcspn(t + n + 1, "\n"),
                     t + n + 1);
            return out;
        }
        if ((t = strchr(t, '\n')) == NULL)
            return NULL;
        t++;
    }
}

/* nt_event - whether message i is a state change (not a watchdog beat
 * nor a status line alone): the messages whose order is checked. */
static int
nt_event(int i)
{
    return !nt_is(i, "WATCHDOG=1") && strncmp(nt_msgs[i].text, "STATUS=", 7);
}

/* nt_until - read until a message that is text arrives (within ms),
 * asserting that no other state change comes first; its index. */
static int
nt_until(const char *text, int ms, pid_t from)
{
    int64_t deadline = itest_now_ms() + ms;

    for (;;) {
        int left = (int)(deadline - itest_now_ms());
        int i = nt_recv(left > 0 ? left : 0);
        cr_assert_neq(i, -1, "no %s within %d ms (%d messages before)", text,
                      ms, nt_n);
        cr_assert_eq(nt_msgs[i].pid, from,
                     "'%s' came from process %d, not the master %d",
                     nt_msgs[i].text, (int)nt_msgs[i].pid, (int)from);
        if (nt_is(i, text))
            return i;
        cr_assert(!nt_event(i), "'%s' came while waiting for %s",
                  nt_msgs[i].text, text);
    }
}

/* nt_watchdog_gaps - assert that the WATCHDOG=1 beats among messages
 * [from, to) are never further apart than WATCHDOG_USEC; how many. */
static int
nt_watchdog_gaps(int from, int to)
{
    int64_t last = 0;
    int beats = 0;

    for (int i = from; i < to; i++) {
        if (!nt_is(i, "WATCHDOG=1"))
            continue;
        if (last != 0)
            cr_assert_lt(nt_msgs[i].at_ms - last, WD_USEC / 1000,
                         "WATCHDOG=1 %lld ms after the one before: systemd "
                         "would have killed the node",
                         (long long)(nt_msgs[i].at_ms - last));
        last = nt_msgs[i].at_ms;
        beats++;
    }
    return beats;
}

Test(notify, ready_watchdog_reload_and_stop_in_order)
{
    struct itest_node n;
    char status[NT_MSG_MAX], usec[32];
    uint64_t hup_us;
    int i, first;

    setenv("WATCHDOG_USEC", "2000000", 1);
    itest_node_start(&n, "workers=2");
    unsetenv("WATCHDOG_USEC");

    /* Start: READY=1 with the status line is the first state change. */
    first = nt_until("READY=1", 20000, n.pid);
    cr_assert_not_null(nt_field(first, "STATUS", status, sizeof(status)),
                       "READY=1 without STATUS=: '%s'", nt_msgs[first].text);
    cr_assert(strncmp(status, "ready; raft ", 12) == 0 &&
                  strstr(status, "; 1 member: 1 live"),
              "status: '%s'", status);

    /* The watchdog beats from the master's tick: wait for three more. */
    for (int beats = 0; beats < 3; beats++)
        nt_until("WATCHDOG=1", WD_USEC / 1000 + 2000, n.pid);

    /* HUP: RELOADING=1 with the monotonic time of the reload, then
     * READY=1 once it is done. */
    hup_us = nt_mono_us();
    cr_assert_eq(kill(n.pid, SIGHUP), 0);
    i = nt_until("RELOADING=1", 10000, n.pid);
    cr_assert_not_null(nt_field(i, "MONOTONIC_USEC", usec, sizeof(usec)),
                       "RELOADING=1 without MONOTONIC_USEC=: '%s'",
                       nt_msgs[i].text);
    cr_assert(strtoull(usec, NULL, 10) >= hup_us &&
                  strtoull(usec, NULL, 10) <= nt_msgs[i].mono_us,
              "MONOTONIC_USEC=%s is not the time of the reload (between %llu "
              "and %llu)",
              usec, (unsigned long long)hup_us,
              (unsigned long long)nt_msgs[i].mono_us);
    i = nt_until("READY=1", 10000, n.pid);
    cr_assert_not_null(nt_field(i, "STATUS", status, sizeof(status)));

    /* TERM: STOPPING=1 when the drain starts, then the node exits 0. */
    cr_assert_eq(kill(n.pid, SIGTERM), 0);
    i = nt_until("STOPPING=1", 10000, n.pid);
    pid_t master = n.pid;
    cr_assert_eq(itest_node_wait_exit(&n, 30000), 0);
    /* After it nothing but watchdog beats (the drain keeps the loop). */
    while ((i = nt_recv(0)) != -1) {
        cr_assert_eq(nt_msgs[i].pid, master);
        cr_assert(nt_is(i, "WATCHDOG=1"), "after STOPPING=1: '%s'",
                  nt_msgs[i].text);
    }

    /* The whole run: these state changes, in this order, and no other. */
    const char *want[] = {"READY=1", "RELOADING=1", "READY=1", "STOPPING=1"};
    size_t k = 0;
    for (i = 0; i < nt_n; i++) {
        if (!nt_event(i))
            continue;
        cr_assert_lt(k, sizeof(want) / sizeof(want[0]), "extra: '%s'",
                     nt_msgs[i].text);
        cr_assert(nt_is(i, want[k]), "message %d is '%s', not %s", i,
                  nt_msgs[i].text, want[k]);
        k++;
    }
    cr_assert_eq(k, sizeof(want) / sizeof(want[0]));
    cr_assert_geq(nt_watchdog_gaps(first, nt_n), 3);
}

Test(notify, ready_only_once_the_node_reports_ready)
{
    struct itest_node n;
    char secret[300], o[5][320], status[NT_MSG_MAX];
    const char *own[5] = {o[0], o[1], o[2], o[3], o[4]};
    int saw_starting = 0, ready = -1, st;
    FILE *f;

    /* One peer configured that never answers: the node serves /health
     * 503 "starting" until it stops waiting for a leader (master/view.c),
     * and systemd must not hear READY=1 before that. */
    memset(&n, 0, sizeof(n));
    itest_test_dir(n.dir, sizeof(n.dir));
    snprintf(n.log, sizeof(n.log), "%s/mayflyd.log", n.dir);
    snprintf(secret, sizeof(secret), "%s/secret", n.dir);
    cr_assert_not_null(f = fopen(secret, "w"));
    fprintf(f, "notify-secret-%d\n", (int)getpid());
    fclose(f);
    n.port = itest_free_port();
    n.cluster_port = itest_free_port();
    snprintf(n.base, sizeof(n.base), "http://127.0.0.1:%d", n.port);
    snprintf(o[0], sizeof(o[0]), "listen=127.0.0.1:%d", n.port);
    snprintf(o[1], sizeof(o[1]), "cluster_listen=127.0.0.1:%d", n.cluster_port);
    snprintf(o[2], sizeof(o[2]), "data_dir=%s", n.dir);
    snprintf(o[3], sizeof(o[3]), "peers=127.0.0.1:%d", itest_free_port());
    snprintf(o[4], sizeof(o[4]), "cluster_secret_file=%s", secret);
    n.pid = itest_spawn(own, 5, "workers=1", n.log);

    int64_t deadline = itest_now_ms() + 30000;
    while (ready == -1) {
        struct itest_resp r;
        int i = nt_recv(20);

        cr_assert_lt(itest_now_ms(), deadline, "no READY=1 within 30 s");
        cr_assert_neq(waitpid(n.pid, &st, WNOHANG), n.pid,
                      "mayflyd exited (log %s)", n.log);
        if (i != -1) {
            cr_assert_eq(nt_msgs[i].pid, n.pid, "'%s' from %d", nt_msgs[i].text,
                         (int)nt_msgs[i].pid);
            cr_assert(!nt_is(i, "WATCHDOG=1"),
                      "a watchdog beat without WATCHDOG_USEC");
            if (nt_is(i, "READY=1")) {
                ready = i;
                break;
            }
            cr_assert(strncmp(nt_msgs[i].text, "STATUS=starting; ", 17) == 0,
                      "before READY=1: '%s'", nt_msgs[i].text);
            continue;
        }
        long code = itest_req(&n, "GET", "/health", NULL, &r);
        if (code == 503 && itest_jbool(r.json, "ready") == 0 &&
            strcmp(itest_jstr(r.json, "status"), "starting") == 0)
            saw_starting = 1;
        itest_resp_free(&r);
        /* Ready on /health: READY=1 follows at once (view.c sends it
         * right after publishing), maybe just after the receive above. */
        if (code == 200)
            ready = nt_until("READY=1", 2000, n.pid);
    }

    /* READY=1 is sent after the board says ready: /health agrees now. */
    struct itest_resp r;
    cr_assert_eq(itest_req(&n, "GET", "/health", NULL, &r), 200, "%s", r.body);
    cr_assert_eq(itest_jbool(r.json, "ready"), 1, "%s", r.body);
    itest_resp_free(&r);
    cr_assert(saw_starting, "the node never said \"starting\" on /health "
                            "before READY=1");
    cr_assert_not_null(nt_field(ready, "STATUS", status, sizeof(status)));
    cr_assert(strncmp(status, "ready; ", 7) == 0 &&
                  strstr(status, "; 2 members: "),
              "status: '%s'", status);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(notify, without_notify_socket_nothing_is_sent)
{
    /* Without NOTIFY_SOCKET (a shell, the init script) the node sends
     * nothing, even with WATCHDOG_USEC set, and the socket stays empty. */
    struct itest_node n;

    unsetenv("NOTIFY_SOCKET");
    setenv("WATCHDOG_USEC", "2000000", 1);
    itest_node_start(&n, "workers=1");
    cr_assert_eq(kill(n.pid, SIGHUP), 0);
    while (!itest_node_log_contains(&n, "reload: "))
        itest_sleep_ms(20); /* the test's timeout bounds it */
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
    int i = nt_recv(0);
    cr_assert_eq(i, -1, "'%s' sent without NOTIFY_SOCKET",
                 i == -1 ? "" : nt_msgs[i].text);
    cr_assert(!itest_node_log_contains(&n, "systemd:"));
}
