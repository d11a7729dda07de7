/*
 * node.c - the integration-test harness (see node.h): start and stop real
 * mayflyd processes, send them HTTP requests, read their answers, metrics,
 * processes and connections.
 *
 * Runs inside Criterion test processes, except itest_report_fini(), which the
 * runner calls after each test.  No shared state but the thread-local curl
 * handle.  Start failures abort the test (cr_assert); the rest returns 0 or
 * -errno.
 */
#include "test/integration/node.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#define ITEST_START_MS 20000
#define ITEST_REQ_MS   90000

static _Thread_local CURL *itest_tl_handle;

int64_t
itest_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
itest_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/*
 * Ports come from below the kernel's ephemeral range (32768-60999 here) so
 * that client connections of parallel tests cannot take a port between the
 * moment it is picked and the moment the node binds it.  A port must be
 * free on 127.0.0.1, .2 and .3 alike: a cluster test's nodes listen on all
 * three, and one running beside it must not pick a port a node holds on
 * .2 only (seen: a node that could not bind, and a cluster whose peer
 * address reached another test's node).
 *
 * The test keeps the port reserved until it exits: its three sockets stay
 * bound, with SO_REUSEADDR set once bound.  A test beside it picking ports
 * (a plain bind) skips it, even before our node listens (seen: two cluster
 * tests that picked one port, "cannot listen ... Address already in use"),
 * while mayflyd, which binds with SO_REUSEADDR, still can: neither socket
 * listens.  Restarting a node on its port works the same way.
 */
int
itest_free_port(void)
{
    static unsigned seed;
    static int held[192];
    static int nheld;

    if (seed == 0)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)itest_now_ms();
    for (int i = 0; i < 1000; i++) {
        int port = 20000 + (int)(rand_r(&seed) % 12000), ok = 1, one = 1;
        int fds[3], k = 0;

        for (uint32_t host = 1; host <= 3 && ok; host++) {
            struct sockaddr_in a = {.sin_family = AF_INET,
                                    .sin_port = htons((uint16_t)port),
                                    .sin_addr.s_addr =
                                        htonl(INADDR_LOOPBACK - 1 + host)};
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

            if (fd == -1)
                return -errno;
            ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                 setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ==
                     0;
            fds[k++] = fd;
        }
        for (int j = 0; j < k; j++) {
            if (ok && nheld < (int)(sizeof(held) / sizeof(held[0])))
                held[nheld++] = fds[j];
            else
                close(fds[j]);
        }
        if (ok)
            return port;
    }
    return -EADDRINUSE;
}

long
itest_raise_nofile(long want)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
        return -errno;
    if (rl.rlim_max != RLIM_INFINITY && (rlim_t)want > rl.rlim_max)
        want = (long)rl.rlim_max;
    if ((rlim_t)want > rl.rlim_cur) {
        rl.rlim_cur = (rlim_t)want;
        if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
            return -errno;
    }
    return (long)rl.rlim_cur;
}

/* Test names become part of a path: keep [A-Za-z0-9_-]. */
static void
itest_sanitize(const char *in, char *out, size_t len)
{
    size_t i = 0;

    for (; in && *in && i + 1 < len; in++)
        out[i++] = (isalnum((unsigned char)*in) || *in == '-') ? *in : '_';
    out[i] = '\0';
}

/*
 * The data dir prefix of a test: the report hook finds dirs by it.  runner
 * is the pid of the Criterion runner (the test process's parent), so a run
 * never mistakes the dirs a failed earlier run kept for its own.
 */
static void
itest_dir_prefix(pid_t runner, const char *suite, const char *test, char *out,
                 size_t len)
{
    char s[64], t[96];

    itest_sanitize(suite ? suite : "none", s, sizeof(s));
    itest_sanitize(test ? test : "none", t, sizeof(t));
    snprintf(out, len, "/tmp/mayfly-it.%d.%s.%s.", (int)runner, s, t);
}

long itest_node_nofile;
char itest_ca_file[512];

/* In the child, before exec: why it gives up, on the log (fd 1 and 2). */
static void
itest_child_fail(const char *what, int err)
{
    char line[256];
    int n = snprintf(line, sizeof(line), "itest: node child: %s failed: %s\n",
                     what, strerror(err));

    if (n > 0)
        (void)!write(2, line, (size_t)n);
    _exit(127);
}

/*
 * In the child: become the server, or die trying.  The log is open
 * already (logfd, opened by the test process), so even a child that dies
 * before exec says why in it: a start that fails leaves a log to read.
 */
static void
itest_exec_node(char **argv, int logfd, pid_t parent)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    struct rlimit nofile = {(rlim_t)itest_node_nofile,
                            (rlim_t)itest_node_nofile};
    sigset_t none;
    int fd;

    if (dup2(logfd, 1) == -1 || dup2(logfd, 2) == -1)
        _exit(127);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
        itest_child_fail("prctl(PR_SET_PDEATHSIG)", errno);
    if (getppid() != parent)
        itest_child_fail("getppid() (the test process is gone)", ESRCH);
    if (itest_node_nofile > 0 && setrlimit(RLIMIT_NOFILE, &nofile) != 0)
        itest_child_fail("setrlimit(RLIMIT_NOFILE)", errno);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    fd = open("/dev/null", O_RDONLY);
    if (fd != -1)
        dup2(fd, 0);
    close_range(3, ~0U, 0);
    execv(argv[0], argv);
    dprintf(2, "itest: execv(%s) failed: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Reap the node if it has exited; 1 if it has. */
static int
itest_node_reaped(struct itest_node *n)
{
    int st;

    if (n->pid == 0)
        return 1;
    if (waitpid(n->pid, &st, WNOHANG) != n->pid)
        return 0;
    n->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    n->pid = 0;
    return 1;
}

pid_t
itest_spawn(const char *const *own, int nown, const char *opts, const char *log)
{
    char *argv[80], *copy, *save = NULL;
    const char *bin = getenv("MAYFLYD");
    int argc = 0, logfd;
    pid_t parent = getpid(), pid;

    cr_assert(bin && *bin, "MAYFLYD is not set (test/run-all.sh sets it to "
                           "the server binary)");
    cr_assert(access(bin, X_OK) == 0, "MAYFLYD=%s is not executable", bin);
    cr_assert(nown <= 16, "itest_spawn: %d settings of its own", nown);
    argv[argc++] = (char *)bin;
    for (int i = 0; i < nown; i++) {
        argv[argc++] = "-o";
        argv[argc++] = (char *)own[i];
    }
    copy = strdup(opts ? opts : "");
    cr_assert(copy);
    for (char *t = strtok_r(copy, " ", &save); t && argc < 76;
         t = strtok_r(NULL, " ", &save)) {
        argv[argc++] = "-o";
        argv[argc++] = t;
    }
    argv[argc] = NULL;
    /* Opened here, not in the child: a log that cannot be opened fails the
     * test with the reason, instead of a child that exits 127 silently and
     * leaves no log (seen once: "node 1 exited during start", no log). */
    logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    cr_assert(logfd != -1, "cannot open the node's log %s: %s", log,
              strerror(errno));
    fflush(NULL);
    pid = fork();
    if (pid == 0) /* the child makes no Criterion call */
        itest_exec_node(argv, logfd, parent);
    close(logfd);
    cr_assert(pid != -1, "fork: %s", strerror(errno));
    free(copy);
    return pid;
}

/* itest_opts_tls - whether opts give the client port a certificate. */
static int
itest_opts_tls(const char *opts)
{
    return opts != NULL && (strncmp(opts, "tls_cert_file=", 14) == 0 ||
                            strstr(opts, " tls_cert_file=") != NULL);
}

/* Fork and exec one attempt; 0 once healthy, -EADDRINUSE to retry. */
static int
itest_node_try(struct itest_node *n, const char *opts)
{
    char buf[4][300];
    const char *own[4] = {buf[0], buf[1], buf[2], buf[3]};
    int64_t deadline;

    n->port = itest_free_port();
    n->cluster_port = itest_free_port();
    cr_assert(n->port > 0 && n->cluster_port > 0 && n->port != n->cluster_port);
    snprintf(n->base, sizeof(n->base), "%s://127.0.0.1:%d",
             itest_opts_tls(opts) ? "https" : "http", n->port);
    snprintf(buf[0], sizeof(buf[0]), "listen=127.0.0.1:%d", n->port);
    snprintf(buf[1], sizeof(buf[1]), "cluster_listen=127.0.0.1:%d",
             n->cluster_port);
    snprintf(buf[2], sizeof(buf[2]), "data_dir=%s", n->dir);
    snprintf(buf[3], sizeof(buf[3]), "workers=2");
    n->pid = itest_spawn(own, 4, opts, n->log);

    deadline = itest_now_ms() + ITEST_START_MS;
    for (;;) {
        struct itest_resp r;
        long st = itest_req(n, "GET", "/health", NULL, &r);

        itest_resp_free(&r);
        if (st == 200)
            return 0;
        if (itest_node_reaped(n)) {
            if (itest_node_log_contains(n, "in use"))
                return -EADDRINUSE;
            itest_node_log_tail(n, 40);
            cr_assert_fail("mayflyd exited during start with status %d "
                           "(log %s)",
                           n->exit_status, n->log);
        }
        if (itest_now_ms() > deadline) {
            itest_node_log_tail(n, 40);
            cr_assert_fail("mayflyd did not answer GET /health 200 within "
                           "%d ms (last status %ld, log %s)",
                           ITEST_START_MS, st, n->log);
        }
        itest_sleep_ms(20);
    }
}

void
itest_test_dir(char *out, size_t len)
{
    const struct criterion_test *t = criterion_current_test;
    char prefix[200];

    itest_dir_prefix(getppid(), t ? t->category : NULL, t ? t->name : NULL,
                     prefix, sizeof(prefix));
    snprintf(out, len, "%sXXXXXX", prefix);
    cr_assert(mkdtemp(out), "mkdtemp(%s): %s", out, strerror(errno));
}

void
itest_node_start(struct itest_node *n, const char *opts)
{
    memset(n, 0, sizeof(*n));
    itest_test_dir(n->dir, sizeof(n->dir));
    snprintf(n->log, sizeof(n->log), "%s/mayflyd.log", n->dir);
    for (int attempt = 0; attempt < 4; attempt++) {
        if (itest_node_try(n, opts) == 0)
            return;
        unlink(n->log);
    }
    cr_assert_fail("mayflyd could not bind a free port in 4 attempts");
}

int
itest_node_wait_exit(struct itest_node *n, int timeout_ms)
{
    int64_t deadline = itest_now_ms() + timeout_ms;

    while (!itest_node_reaped(n)) {
        if (itest_now_ms() > deadline)
            return -ETIMEDOUT;
        itest_sleep_ms(10);
    }
    return n->exit_status;
}

int
itest_node_stop(struct itest_node *n, int timeout_ms)
{
    int rc;

    if (n->pid == 0)
        return n->exit_status;
    kill(n->pid, SIGTERM);
    rc = itest_node_wait_exit(n, timeout_ms);
    if (rc == -ETIMEDOUT) {
        kill(n->pid, SIGKILL);
        itest_node_wait_exit(n, 10000);
        return -ETIMEDOUT;
    }
    return rc;
}

/* The last lines of the file at path, to stderr. */
static void
itest_tail_file(const char *path, int lines)
{
    FILE *f = fopen(path, "r");
    long size, pos;
    int seen = 0, c;

    if (!f) {
        fprintf(stderr, "itest: no log at %s\n", path);
        return;
    }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    for (pos = size - 1; pos >= 0; pos--) {
        fseek(f, pos, SEEK_SET);
        if (fgetc(f) == '\n' && pos != size - 1 && ++seen >= lines)
            break;
    }
    fseek(f, pos < 0 ? 0 : pos + 1, SEEK_SET);
    fprintf(stderr, "---- %s (last %d lines)\n", path, lines);
    while ((c = fgetc(f)) != EOF)
        fputc(c, stderr);
    fprintf(stderr, "---- end of %s\n", path);
    fclose(f);
}

void
itest_node_log_tail(const struct itest_node *n, int lines)
{
    itest_tail_file(n->log, lines);
}

long
itest_log_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

void
itest_node_why_exited(const struct itest_node *n, int status, long from,
                      int lines, char *out, size_t len)
{
    char text[4096], dir[sizeof(n->log)], *slash;
    size_t used, got = 0;
    long size = itest_log_size(n->log), at = from;
    FILE *f = fopen(n->log, "r");
    int seen = 0;

    if (WIFEXITED(status))
        used = (size_t)snprintf(out, len, "exit %d", WEXITSTATUS(status));
    else
        used = (size_t)snprintf(out, len, "signal %d (%s)", WTERMSIG(status),
                                strsignal(WTERMSIG(status)));
    if (used >= len)
        return;
    if (f == NULL) {
        int e = errno;
        snprintf(dir, sizeof(dir), "%s", n->log);
        slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        snprintf(out + used, len - used,
                 "; no log at %s (%s; its directory %s)", n->log, strerror(e),
                 access(dir, F_OK) == 0 ? "exists" : "is gone");
        return;
    }
    /* the last sizeof(text) - 1 bytes this start wrote at most */
    if (size - at > (long)sizeof(text) - 1)
        at = size - (long)sizeof(text) + 1;
    if (at >= 0 && fseek(f, at, SEEK_SET) == 0)
        got = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[got] = '\0';
    while (got > 0 && text[got - 1] == '\n')
        text[--got] = '\0';
    size_t start = got;
    while (start > 0 && seen < lines)
        if (text[--start] == '\n')
            seen++;
    if (start < got && text[start] == '\n')
        start++;
    snprintf(out + used, len - used, "; its log %s %s%s", n->log,
             got == 0 ? "gained nothing in this start"
                      : "ends, in this start:\n",
             text + start);
}

int
itest_check_segment(const struct itest_node *n, char *out, size_t len)
{
    char cmd[512];

    snprintf(cmd, sizeof(cmd), "%s --check-segment %d 2>&1", getenv("MAYFLYD"),
             (int)n->pid);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t got = fread(out, 1, len - 1, f);
    out[got] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int
itest_node_log_contains(const struct itest_node *n, const char *needle)
{
    FILE *f = fopen(n->log, "r");
    char line[4096];
    int found = 0;

    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static int
itest_cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

    return (x > y) - (x < y);
}

int
itest_node_workers(const struct itest_node *n, pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int count = 0;

    if (!d || n->pid == 0) {
        if (d)
            closedir(d);
        return 0;
    }
    while ((e = readdir(d)) && count < max) {
        char path[300], stat[1024], *p;
        FILE *f;
        int ppid = 0;

        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        p = fgets(stat, sizeof(stat), f) ? strrchr(stat, ')') : NULL;
        fclose(f);
        /* ") S ppid ...": state, then parent. */
        if (p && sscanf(p, ") %*c %d", &ppid) == 1 && ppid == n->pid &&
            p[2] != 'Z')
            out[count++] = atoi(e->d_name);
    }
    closedir(d);
    qsort(out, (size_t)count, sizeof(*out), itest_cmp_pid);
    return count;
}

/*
 * The inode of the server end of a loopback connection (0 if none), and the
 * bytes waiting in its receive queue.
 */
static unsigned long
itest_conn_inode(int server_port, int client_port, unsigned long *rxq)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    unsigned long found = 0;

    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned lport, rport;
        unsigned long inode, rx;

        if (sscanf(line,
                   " %*d: %*x:%x %*x:%x %*x %*x:%lx %*x:%*x %*x %*u "
                   "%*u %lu",
                   &lport, &rport, &rx, &inode) == 4 &&
            (int)lport == server_port && (int)rport == client_port) {
            found = inode;
            if (rxq)
                *rxq = rx;
        }
    }
    fclose(f);
    return found;
}

/* 1 if process pid has an fd on socket inode. */
static int
itest_pid_has_socket(pid_t pid, unsigned long inode)
{
    char path[64], want[64], link[64];
    DIR *d;
    struct dirent *e;
    int found = 0;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    d = opendir(path);
    if (!d)
        return 0;
    while (!found && (e = readdir(d))) {
        char fdpath[400];
        ssize_t k;

        snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
        k = readlink(fdpath, link, sizeof(link) - 1);
        if (k > 0) {
            link[k] = '\0';
            found = strcmp(link, want) == 0;
        }
    }
    closedir(d);
    return found;
}

pid_t
itest_conn_worker(const struct itest_node *n, int client_port)
{
    pid_t w[ITEST_NODE_MAX_WORKERS];
    unsigned long inode = itest_conn_inode(n->port, client_port, NULL);
    int k;

    if (inode == 0)
        return 0;
    k = itest_node_workers(n, w, ITEST_NODE_MAX_WORKERS);
    for (int i = 0; i < k; i++)
        if (itest_pid_has_socket(w[i], inode))
            return w[i];
    return 0;
}

int
itest_workers_listening(const struct itest_node *n)
{
    pid_t w[ITEST_NODE_MAX_WORKERS];
    /* A listening socket's remote port reads 0 in /proc/net/tcp. */
    unsigned long inode = itest_conn_inode(n->port, 0, NULL);
    int k, count = 0;

    if (inode == 0)
        return 0;
    k = itest_node_workers(n, w, ITEST_NODE_MAX_WORKERS);
    for (int i = 0; i < k; i++)
        count += itest_pid_has_socket(w[i], inode);
    return count;
}

int
itest_port_listening(const struct itest_node *n)
{
    /* A listening socket's remote port reads 0 in /proc/net/tcp. */
    return itest_conn_inode(n->port, 0, NULL) != 0;
}

/* The server ends of the node's connections, sorted by client port. */
struct itest_srv_conn {
    unsigned long rport, inode, rx;
};

static int
itest_cmp_ulong(const void *a, const void *b)
{
    unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

    return (x > y) - (x < y);
}

/* Every server-side connection of port, from /proc/net/tcp; count in *k. */
static struct itest_srv_conn *
itest_srv_conns(int port, size_t *k)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    struct itest_srv_conn *v = NULL;
    size_t len = 0, cap = 0;
    char line[512];

    while (f && fgets(line, sizeof(line), f)) {
        unsigned lport, rport;
        unsigned long inode, rx;

        if (sscanf(line,
                   " %*d: %*x:%x %*x:%x %*x %*x:%lx %*x:%*x %*x %*u "
                   "%*u %lu",
                   &lport, &rport, &rx, &inode) != 4 ||
            (int)lport != port || inode == 0)
            continue;
        if (len == cap) {
            cap = cap ? 2 * cap : 1024;
            v = realloc(v, cap * sizeof(*v));
            cr_assert(v);
        }
        v[len++] = (struct itest_srv_conn){rport, inode, rx};
    }
    if (f)
        fclose(f);
    if (len)
        qsort(v, len, sizeof(*v), itest_cmp_ulong);
    *k = len;
    return v;
}

/* Every socket inode in the fd tables of the node's workers, sorted. */
static unsigned long *
itest_worker_sockets(const struct itest_node *n, size_t *k)
{
    pid_t w[ITEST_NODE_MAX_WORKERS];
    int nw = itest_node_workers(n, w, ITEST_NODE_MAX_WORKERS);
    unsigned long *v = NULL;
    size_t len = 0, cap = 0;

    for (int i = 0; i < nw; i++) {
        char path[64], link[64];
        DIR *d;
        struct dirent *e;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)w[i]);
        d = opendir(path);
        while (d && (e = readdir(d))) {
            char fdpath[400];
            ssize_t r;
            unsigned long inode;

            snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
            r = readlink(fdpath, link, sizeof(link) - 1);
            if (r <= 0)
                continue;
            link[r] = '\0';
            if (sscanf(link, "socket:[%lu]", &inode) != 1)
                continue;
            if (len == cap) {
                cap = cap ? 2 * cap : 1024;
                v = realloc(v, cap * sizeof(*v));
                cr_assert(v);
            }
            v[len++] = inode;
        }
        if (d)
            closedir(d);
    }
    if (len)
        qsort(v, len, sizeof(*v), itest_cmp_ulong);
    *k = len;
    return v;
}

int
itest_worker_conns(const struct itest_node *n, pid_t w)
{
    size_t nconn;
    struct itest_srv_conn *conns = itest_srv_conns(n->port, &nconn);
    int count = 0;

    for (size_t i = 0; i < nconn; i++)
        count += itest_pid_has_socket(w, conns[i].inode);
    free(conns);
    return count;
}

int
itest_conns_consumed(const struct itest_node *n, const int *fds, int k,
                     char *consumed)
{
    size_t nconn, nsock;
    struct itest_srv_conn *conns = itest_srv_conns(n->port, &nconn);
    unsigned long *socks = itest_worker_sockets(n, &nsock);
    int count = 0;

    for (int i = 0; i < k; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        unsigned long port;
        struct itest_srv_conn *c = NULL;
        int ok = 0;

        if (fds[i] >= 0 && (port = (unsigned long)itest_local_port(fds[i])) &&
            getsockopt(fds[i], IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
            ti.tcpi_bytes_acked > 1 && nconn)
            c = bsearch(&port, conns, nconn, sizeof(*conns), itest_cmp_ulong);
        if (c && nsock &&
            bsearch(&c->inode, socks, nsock, sizeof(*socks), itest_cmp_ulong))
            ok = c->rx == 0;
        if (consumed)
            consumed[i] = (char)ok;
        count += ok;
    }
    free(conns);
    free(socks);
    return count;
}

int
itest_conn_consumed(const struct itest_node *n, int fd)
{
    return itest_conns_consumed(n, &fd, 1, NULL);
}

CURL *
itest_handle(void)
{
    CURL *h = curl_easy_init();

    cr_assert(h, "curl_easy_init failed");
    return h;
}

CURL *
itest_handle_on_worker(const struct itest_node *n, pid_t want, pid_t *got)
{
    for (int attempt = 0; attempt < 200; attempt++) {
        CURL *h = itest_handle();
        struct itest_resp r;
        long port = 0;
        pid_t holder = 0;
        int64_t deadline = itest_now_ms() + 5000;

        itest_req_on(h, n, "GET", "/health", NULL, &r);
        cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
        itest_resp_free(&r);
        curl_easy_getinfo(h, CURLINFO_LOCAL_PORT, &port);
        while ((holder = itest_conn_worker(n, (int)port)) == 0 &&
               itest_now_ms() < deadline)
            itest_sleep_ms(2);
        if (holder != 0 && (want == 0 || holder == want)) {
            *got = holder;
            return h;
        }
        curl_easy_cleanup(h);
        cr_assert(want == 0 || kill(want, 0) == 0,
                  "worker %d exited before serving a connection", (int)want);
    }
    cr_assert_fail("200 keep-alive connections never reached worker %d "
                   "(or the node closes keep-alive connections)",
                   (int)want);
    return NULL;
}

static size_t
itest_on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct itest_resp *r = arg;
    size_t k = size * nmemb;
    char *grown = realloc(r->body, r->len + k + 1);

    if (!grown)
        return 0;
    memcpy(grown + r->len, data, k);
    r->body = grown;
    r->len += k;
    r->body[r->len] = '\0';
    return k;
}

/* Copy the value of header "name:" into out when line is that header. */
static void
itest_header_value(const char *line, size_t k, const char *name, char *out,
                   size_t len)
{
    size_t nl = strlen(name), v;

    if (k <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    for (v = nl + 1; v < k && (line[v] == ' ' || line[v] == '\t'); v++)
        ;
    while (k > v &&
           (line[k - 1] == '\r' || line[k - 1] == '\n' || line[k - 1] == ' '))
        k--;
    snprintf(out, len, "%.*s", (int)(k - v), line + v);
}

static size_t
itest_on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct itest_resp *r = arg;
    size_t k = size * nmemb;

    itest_header_value(data, k, "Retry-After", r->retry_after,
                       sizeof(r->retry_after));
    itest_header_value(data, k, "Allow", r->allow, sizeof(r->allow));
    itest_header_value(data, k, "Content-Type", r->content_type,
                       sizeof(r->content_type));
    itest_header_value(data, k, "WWW-Authenticate", r->www_authenticate,
                       sizeof(r->www_authenticate));
    return k;
}

void
itest_resp_from_body(struct itest_resp *r, long status, const char *body,
                     size_t len)
{
    memset(r, 0, sizeof(*r));
    r->status = status;
    r->body = malloc(len + 1);
    cr_assert(r->body);
    memcpy(r->body, body, len);
    r->body[len] = '\0';
    r->len = len;
    r->json = json_tokener_parse(r->body);
}

/* itest_req_hdrs - itest_req_on() sending the NULL-terminated headers too
 * (NULL for none). */
static long
itest_req_hdrs(CURL *h, const struct itest_node *n, const char *method,
               const char *path, const char *body, const char *const *headers,
               struct itest_resp *r)
{
    char url[16384];
    struct curl_slist *hdr = NULL;
    int64_t t0 = itest_now_ms();

    memset(r, 0, sizeof(*r));
    snprintf(url, sizeof(url), "%s%s", n->base, path);
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ITEST_REQ_MS);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, itest_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, itest_on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    if (itest_ca_file[0] != '\0')
        curl_easy_setopt(h, CURLOPT_CAINFO, itest_ca_file);
    hdr = curl_slist_append(hdr, "Expect:");
    for (int k = 0; headers && headers[k]; k++)
        hdr = curl_slist_append(hdr, headers[k]);
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)strlen(body));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    if (strcmp(method, "GET") != 0 || body)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    r->curl_code = (int)curl_easy_perform(h);
    curl_slist_free_all(hdr);
    if (r->curl_code == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    if (!r->body) {
        r->body = calloc(1, 1);
        cr_assert(r->body);
    }
    r->json = json_tokener_parse(r->body);
    r->seconds = (double)(itest_now_ms() - t0) / 1000.0;
    return r->status;
}

long
itest_req_on(CURL *h, const struct itest_node *n, const char *method,
             const char *path, const char *body, struct itest_resp *r)
{
    return itest_req_hdrs(h, n, method, path, body, NULL, r);
}

long
itest_req_with(const struct itest_node *n, const char *method, const char *path,
               const char *body, const char *const *headers,
               struct itest_resp *r)
{
    if (!itest_tl_handle)
        itest_tl_handle = itest_handle();
    return itest_req_hdrs(itest_tl_handle, n, method, path, body, headers, r);
}

long
itest_req(const struct itest_node *n, const char *method, const char *path,
          const char *body, struct itest_resp *r)
{
    if (!itest_tl_handle)
        itest_tl_handle = itest_handle();
    return itest_req_on(itest_tl_handle, n, method, path, body, r);
}

void
itest_req_thread_end(void)
{
    if (itest_tl_handle)
        curl_easy_cleanup(itest_tl_handle);
    itest_tl_handle = NULL;
}

long
itest_get(const struct itest_node *n, struct itest_resp *r, const char *pathfmt,
          ...)
{
    char path[16384];
    va_list ap;

    va_start(ap, pathfmt);
    vsnprintf(path, sizeof(path), pathfmt, ap);
    va_end(ap);
    return itest_req(n, "GET", path, NULL, r);
}

long
itest_post(const struct itest_node *n, struct itest_resp *r, const char *path,
           const char *bodyfmt, ...)
{
    char *body = NULL;
    va_list ap;
    long st;
    int k;

    va_start(ap, bodyfmt);
    k = vasprintf(&body, bodyfmt, ap);
    va_end(ap);
    cr_assert(k >= 0, "vasprintf failed");
    st = itest_req(n, "POST", path, body, r);
    free(body);
    return st;
}

void
itest_resp_free(struct itest_resp *r)
{
    free(r->body);
    if (r->json)
        json_object_put(r->json);
    memset(r, 0, sizeof(*r));
}

char *
itest_esc(const char *s, char *out, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (; *s && o + 4 < len; s++) {
        unsigned char c = (unsigned char)*s;

        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return out;
}

struct json_object *
itest_jget(struct json_object *o, const char *path)
{
    char key[256];
    const char *p = path;

    while (o && *p) {
        size_t k = strcspn(p, ".");

        snprintf(key, sizeof(key), "%.*s", (int)k, p);
        p += k + (p[k] == '.');
        if (json_object_is_type(o, json_type_array)) {
            char *end;
            long i = strtol(key, &end, 10);

            o = (*end == '\0' && i >= 0)
                    ? json_object_array_get_idx(o, (size_t)i)
                    : NULL;
        } else if (json_object_is_type(o, json_type_object)) {
            struct json_object *v = NULL;

            o = json_object_object_get_ex(o, key, &v) ? v : NULL;
        } else {
            o = NULL;
        }
    }
    return o;
}

const char *
itest_jstr(struct json_object *o, const char *path)
{
    struct json_object *v = itest_jget(o, path);

    return json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                    : "";
}

int64_t
itest_jint(struct json_object *o, const char *path)
{
    struct json_object *v = itest_jget(o, path);

    return json_object_is_type(v, json_type_int) ? json_object_get_int64(v)
                                                 : INT64_MIN;
}

int
itest_jlen(struct json_object *o, const char *path)
{
    struct json_object *v = itest_jget(o, path);

    return json_object_is_type(v, json_type_array)
               ? (int)json_object_array_length(v)
               : -1;
}

int
itest_jbool(struct json_object *o, const char *path)
{
    struct json_object *v = itest_jget(o, path);

    return json_object_is_type(v, json_type_boolean)
               ? json_object_get_boolean(v)
               : -1;
}

/* 1 if label pair (k="v") appears in the label block of a sample. */
static int
itest_has_label(const char *labels, size_t llen, const char *pair, size_t plen)
{
    for (size_t i = 1; i + plen < llen + 1; i++)
        if ((labels[i - 1] == '{' || labels[i - 1] == ',') &&
            memcmp(labels + i, pair, plen) == 0 &&
            (labels[i + plen] == ',' || labels[i + plen] == '}'))
            return 1;
    return 0;
}

/* 1 if every label pair of want ("{a=\"x\",b=\"y\"}") is in labels. */
static int
itest_labels_match(const char *labels, size_t llen, const char *want)
{
    const char *p = want + 1;

    while (*p && *p != '}') {
        const char *q = p;
        int quoted = 0;

        while (*q && (quoted || (*q != ',' && *q != '}'))) {
            if (*q == '"' && q[-1] != '\\')
                quoted = !quoted;
            q++;
        }
        if (!itest_has_label(labels, llen, p, (size_t)(q - p)))
            return 0;
        p = *q == ',' ? q + 1 : q;
    }
    return 1;
}

int
itest_metrics_match(const char *text, const char *series, double *out)
{
    const char *want = strchr(series, '{');
    size_t nlen = want ? (size_t)(want - series) : strlen(series);
    const char *line = text;
    double sum = 0;
    int matched = 0;

    for (; line && *line;
         line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *sp, *labels = NULL;
        size_t llen = 0;

        if (*line == '#' || strncmp(line, series, nlen) != 0)
            continue;
        sp = line + nlen;
        if (*sp == '{') {
            const char *end = strchr(sp, '}');

            if (!end)
                continue;
            labels = sp;
            llen = (size_t)(end - sp + 1);
            sp = end + 1;
        }
        if (*sp != ' ')
            continue;
        if (want && (!labels || !itest_labels_match(labels, llen, want)))
            continue;
        sum += strtod(sp + 1, NULL);
        matched++;
    }
    if (matched)
        *out = sum;
    return matched;
}

int
itest_metric(const struct itest_node *n, const char *series, double *out)
{
    struct itest_resp r;
    int k;

    if (itest_req(n, "GET", "/metrics", NULL, &r) != 200) {
        itest_resp_free(&r);
        return -EIO;
    }
    k = itest_metrics_match(r.body, series, out);
    itest_resp_free(&r);
    return k > 0 ? 0 : -ENOENT;
}

long
itest_push(const struct itest_node *n, struct itest_resp *r, const char *queue,
           const char *partition, const char *payloads)
{
    struct json_object *arr = json_tokener_parse(payloads);
    struct json_object *msgs = json_object_new_array();
    struct json_object *req = json_object_new_object();
    long st;

    cr_assert(json_object_is_type(arr, json_type_array),
              "itest_push: payloads is not a JSON array: %s", payloads);
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        struct json_object *m = json_object_new_object();

        json_object_object_add(
            m, "payload", json_object_get(json_object_array_get_idx(arr, i)));
        json_object_array_add(msgs, m);
    }
    json_object_object_add(req, "queue", json_object_new_string(queue));
    if (partition)
        json_object_object_add(req, "partition",
                               json_object_new_string(partition));
    json_object_object_add(req, "messages", msgs);
    st = itest_req(
        n, "POST", "/api/v1/ephemeral/push",
        json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN |
                                                JSON_C_TO_STRING_NOSLASHESCAPE),
        r);
    json_object_put(req);
    json_object_put(arr);
    return st;
}

void
itest_push_ok(const struct itest_node *n, struct itest_resp *r,
              const char *queue, const char *partition, const char *payloads,
              int count)
{
    itest_push(n, r, queue, partition, payloads);
    cr_assert_eq(r->status, 201, "push %s: %ld %s", payloads, r->status,
                 r->body);
    cr_assert_eq(itest_jint(r->json, "pushed"), count, "%s", r->body);
}

int64_t
itest_depth_pending(const struct itest_node *n, const char *queue,
                    const char *group)
{
    char q[2048], g[2048];
    struct itest_resp r;
    int64_t v = -1;

    if (group)
        itest_get(
            n, &r, "/api/v1/ephemeral/queues/%s/depth?scope=node&group=%s",
            itest_esc(queue, q, sizeof(q)), itest_esc(group, g, sizeof(g)));
    else
        itest_get(n, &r, "/api/v1/ephemeral/queues/%s/depth?scope=node",
                  itest_esc(queue, q, sizeof(q)));
    if (r.status == 200)
        v = itest_jint(r.json, "pending");
    itest_resp_free(&r);
    return v;
}

struct json_object *
itest_listing_find(const struct itest_node *n, const char *queue)
{
    char q[2048];
    struct itest_resp r;
    struct json_object *found = NULL;
    int k;

    itest_get(n, &r, "/api/v1/ephemeral/queues?prefix=%s",
              itest_esc(queue, q, sizeof(q)));
    k = itest_jlen(r.json, "queues");
    for (int i = 0; i < k; i++) {
        struct json_object *e =
            json_object_array_get_idx(itest_jget(r.json, "queues"), (size_t)i);

        if (strcmp(itest_jstr(e, "queue"), queue) == 0)
            found = json_object_get(e);
    }
    itest_resp_free(&r);
    return found;
}

int64_t
itest_listing_int(const struct itest_node *n, const char *queue,
                  const char *path, int64_t absent)
{
    struct json_object *q = itest_listing_find(n, queue);
    int64_t v = q ? itest_jint(q, path) : absent;

    json_object_put(q);
    return v;
}

int
itest_raw_connect(const struct itest_node *n)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)n->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd == -1)
        return -errno;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == -1) {
        int e = errno;

        close(fd);
        return -e;
    }
    return fd;
}

int
itest_connect_within(const char *ip, int port, int bound_ms, int64_t *took_ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc, e = 0;
    socklen_t el = sizeof(e);
    int64_t t0 = itest_now_ms();

    if (fd == -1)
        return -errno;
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        close(fd);
        return -EINVAL;
    }
    rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
    if (rc == -1 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, bound_ms) == 1 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0)
            rc = e == 0 ? 0 : -e;
        else
            rc = -ETIMEDOUT;
    } else if (rc == -1) {
        rc = -errno;
    }
    *took_ms = itest_now_ms() - t0;
    close(fd);
    return rc;
}

int
itest_raw_send(int fd, const char *s)
{
    size_t len = strlen(s), off = 0;

    while (off < len) {
        ssize_t k = send(fd, s + off, len - off, MSG_NOSIGNAL);

        if (k == -1 && errno == EINTR)
            continue;
        if (k == -1)
            return -errno;
        off += (size_t)k;
    }
    return 0;
}

/* Decode a chunked body in place; returns its length. */
static size_t
itest_unchunk(char *b, size_t len)
{
    size_t in = 0, out = 0;

    while (in < len) {
        char *end;
        unsigned long k = strtoul(b + in, &end, 16);
        char *crlf = strstr(b + in, "\r\n");

        if (!crlf || end == b + in || k == 0)
            break;
        in = (size_t)(crlf - b) + 2;
        if (in + k > len)
            k = len - in;
        memmove(b + out, b + in, k);
        out += k;
        in += k + 2;
    }
    b[out] = '\0';
    return out;
}

int
itest_raw_complete(const char *buf, size_t len)
{
    const char *sep = strstr(buf, "\r\n\r\n"), *cl;
    size_t want;

    if (!sep)
        return 0;
    cl = strcasestr(buf, "\r\nContent-Length:");
    if (!cl || cl > sep)
        return 0;
    want = (size_t)strtoul(cl + 17, NULL, 10);
    return len >= (size_t)(sep + 4 - buf) + want;
}

long
itest_raw_response(int fd, struct itest_resp *r)
{
    char *buf = NULL, *sep, *line;
    size_t len = 0, cap = 0;
    long status = 0;

    memset(r, 0, sizeof(*r));
    for (;;) {
        ssize_t k;

        if (cap - len < 65536) {
            cap = cap ? 2 * cap : 131072;
            buf = realloc(buf, cap);
            cr_assert(buf);
        }
        k = recv(fd, buf + len, cap - len - 1, 0);
        if (k == -1 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
        buf[len] = '\0';
        if (itest_raw_complete(buf, len))
            break;
    }
    if (buf)
        buf[len] = '\0';
    sep = buf ? strstr(buf, "\r\n\r\n") : NULL;
    if (!sep) {
        itest_resp_from_body(r, 0, "", 0);
        free(buf);
        return 0;
    }
    *sep = '\0';
    sscanf(buf, "HTTP/1.%*d %ld", &status);
    itest_resp_from_body(r, status, sep + 4, len - (size_t)(sep + 4 - buf));
    for (line = strstr(buf, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
        const char *h = line + 2;
        size_t k = strcspn(h, "\r");

        itest_header_value(h, k, "Retry-After", r->retry_after,
                           sizeof(r->retry_after));
        itest_header_value(h, k, "Allow", r->allow, sizeof(r->allow));
        itest_header_value(h, k, "Content-Type", r->content_type,
                           sizeof(r->content_type));
        itest_header_value(h, k, "WWW-Authenticate", r->www_authenticate,
                           sizeof(r->www_authenticate));
        if (strncasecmp(h, "Transfer-Encoding: chunked", 26) == 0) {
            r->len = itest_unchunk(r->body, r->len);
            if (r->json)
                json_object_put(r->json);
            r->json = json_tokener_parse(r->body);
        }
    }
    free(buf);
    return status;
}

int
itest_local_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);

    if (getsockname(fd, (struct sockaddr *)&a, &len) == -1)
        return -errno;
    return ntohs(a.sin_port);
}

struct itest_multi_req {
    CURL *h;
    struct curl_slist *hdr;
    char *body;
    int fd;
    int done;
    int64_t t0;
    struct itest_resp resp;
};

struct itest_multi {
    CURLM *m;
    struct itest_multi_req **reqs;
    int count;
    int cap;
};

struct itest_multi *
itest_multi_new(void)
{
    struct itest_multi *m = calloc(1, sizeof(*m));

    cr_assert(m);
    m->m = curl_multi_init();
    cr_assert(m->m);
    return m;
}

/* Remember the socket of a request so its local port can be read. */
static int
itest_multi_on_sockopt(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    struct itest_multi_req *q = arg;

    if (purpose == CURLSOCKTYPE_IPCXN)
        q->fd = fd;
    return CURL_SOCKOPT_OK;
}

int
itest_multi_add(struct itest_multi *m, const struct itest_node *n,
                const char *method, const char *path, const char *body)
{
    struct itest_multi_req *q = calloc(1, sizeof(*q));
    char url[16384];

    cr_assert(q);
    if (m->count == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->reqs = realloc(m->reqs, (size_t)m->cap * sizeof(*m->reqs));
        cr_assert(m->reqs);
    }
    q->fd = -1;
    q->h = itest_handle();
    snprintf(url, sizeof(url), "%s%s", n->base, path);
    curl_easy_setopt(q->h, CURLOPT_URL, url);
    curl_easy_setopt(q->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(q->h, CURLOPT_TIMEOUT_MS, (long)ITEST_REQ_MS);
    curl_easy_setopt(q->h, CURLOPT_CONNECTTIMEOUT_MS, (long)ITEST_REQ_MS);
    curl_easy_setopt(q->h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(q->h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(q->h, CURLOPT_WRITEFUNCTION, itest_on_body);
    curl_easy_setopt(q->h, CURLOPT_WRITEDATA, &q->resp);
    curl_easy_setopt(q->h, CURLOPT_HEADERFUNCTION, itest_on_header);
    curl_easy_setopt(q->h, CURLOPT_HEADERDATA, &q->resp);
    curl_easy_setopt(q->h, CURLOPT_SOCKOPTFUNCTION, itest_multi_on_sockopt);
    curl_easy_setopt(q->h, CURLOPT_SOCKOPTDATA, q);
    curl_easy_setopt(q->h, CURLOPT_PRIVATE, q);
    q->hdr = curl_slist_append(NULL, "Expect:");
    if (body) {
        q->body = strdup(body);
        cr_assert(q->body);
        q->hdr = curl_slist_append(q->hdr, "Content-Type: application/json");
        curl_easy_setopt(q->h, CURLOPT_POSTFIELDS, q->body);
        curl_easy_setopt(q->h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)strlen(q->body));
    }
    curl_easy_setopt(q->h, CURLOPT_HTTPHEADER, q->hdr);
    if (strcmp(method, "GET") != 0 || body)
        curl_easy_setopt(q->h, CURLOPT_CUSTOMREQUEST, method);
    q->t0 = itest_now_ms();
    cr_assert_eq(curl_multi_add_handle(m->m, q->h), CURLM_OK);
    m->reqs[m->count] = q;
    return m->count++;
}

/* Collect the answers of finished transfers. */
static void
itest_multi_reap(struct itest_multi *m)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(m->m, &left))) {
        struct itest_multi_req *q = NULL;

        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
        q->resp.curl_code = (int)msg->data.result;
        if (msg->data.result == CURLE_OK)
            curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->resp.status);
        if (!q->resp.body) {
            q->resp.body = calloc(1, 1);
            cr_assert(q->resp.body);
        }
        q->resp.json = json_tokener_parse(q->resp.body);
        q->resp.seconds = (double)(itest_now_ms() - q->t0) / 1000.0;
        q->done = 1;
        q->fd = -1;
        curl_multi_remove_handle(m->m, q->h);
    }
}

int
itest_multi_run(struct itest_multi *m, int timeout_ms)
{
    int64_t deadline = itest_now_ms() + timeout_ms;
    int running = 0;

    for (;;) {
        int64_t left;

        curl_multi_perform(m->m, &running);
        itest_multi_reap(m);
        left = deadline - itest_now_ms();
        if (running == 0 || left <= 0)
            return running;
        curl_multi_poll(m->m, NULL, 0, left < 100 ? (int)left : 100, NULL);
    }
}

int
itest_multi_done(const struct itest_multi *m, int i)
{
    return m->reqs[i]->done;
}

struct itest_resp *
itest_multi_resp(struct itest_multi *m, int i)
{
    return &m->reqs[i]->resp;
}

int
itest_multi_local_port(const struct itest_multi *m, int i)
{
    int port;

    if (m->reqs[i]->fd < 0)
        return -1;
    port = itest_local_port(m->reqs[i]->fd);
    return port > 0 ? port : -1;
}

int
itest_multi_fd(const struct itest_multi *m, int i)
{
    return m->reqs[i]->fd;
}

int
itest_multi_count(const struct itest_multi *m)
{
    return m->count;
}

void
itest_multi_free(struct itest_multi *m)
{
    for (int i = 0; i < m->count; i++) {
        struct itest_multi_req *q = m->reqs[i];

        if (!q->done)
            curl_multi_remove_handle(m->m, q->h);
        curl_easy_cleanup(q->h);
        curl_slist_free_all(q->hdr);
        free(q->body);
        itest_resp_free(&q->resp);
        free(q);
    }
    free(m->reqs);
    curl_multi_cleanup(m->m);
    free(m);
}

void
itest_assert_error(const struct itest_resp *r, long status, const char *code,
                   const char *field, const char *what)
{
    const char *msg = itest_jstr(r->json, "error");

    cr_assert_eq(r->status, status, "%s: want status %ld, got %ld: %s", what,
                 status, r->status, r->body);
    cr_assert_str_eq(itest_jstr(r->json, "code"), code, "%s: want code %s: %s",
                     what, code, r->body);
    cr_assert(*msg, "%s: no error sentence: %s", what, r->body);
    if (field) {
        char alt[256], *save = NULL;
        int named = 0;

        snprintf(alt, sizeof(alt), "%s", field);
        for (char *f = strtok_r(alt, "|", &save); f && !named;
             f = strtok_r(NULL, "|", &save))
            named = strstr(msg, f) != NULL;
        cr_assert(named, "%s: the error does not name %s: %s", what, field,
                  r->body);
    }
}

/* 1 if s is one or more hex digits. */
static int
itest_is_hex(const char *s, size_t len)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

int
itest_id_parse(const char *id, char *inc, size_t inclen, char *part,
               size_t partlen, char *seq, size_t seqlen)
{
    const char *a, *z;

    if (strncmp(id, "e:", 2) != 0)
        return -EINVAL;
    a = strchr(id + 2, ':');
    z = strrchr(id, ':');
    if (!a || z <= a || !itest_is_hex(id + 2, (size_t)(a - id - 2)) ||
        !itest_is_hex(z + 1, strlen(z + 1)) || z == a + 1)
        return -EINVAL;
    snprintf(inc, inclen, "%.*s", (int)(a - id - 2), id + 2);
    snprintf(part, partlen, "%.*s", (int)(z - a - 1), a + 1);
    snprintf(seq, seqlen, "%s", z + 1);
    return 0;
}

static int
itest_rm_entry(const char *path, const struct stat *st, int flag,
               struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/*
 * In the runner, after each test: a failed test shows the tail of each of its
 * nodes' logs and keeps their dirs; a passing test's dirs are removed.
 */
ReportHook(POST_FINI)(struct criterion_test_stats *stats)
{
    char prefix[256], pattern[300];
    glob_t g;
    int failed = stats->test_status == CR_STATUS_FAILED || stats->crashed ||
                 stats->timed_out;

    itest_dir_prefix(getpid(), stats->test->category, stats->test->name, prefix,
                     sizeof(prefix));
    snprintf(pattern, sizeof(pattern), "%s*", prefix);
    if (glob(pattern, 0, NULL, &g) != 0)
        return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char logs[400];
        glob_t lg;

        if (!failed) {
            nftw(g.gl_pathv[i], itest_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
            continue;
        }
        /* a node's log, or each of a cluster's (cluster.c: nK/) */
        snprintf(logs, sizeof(logs), "%s/{mayflyd.log,*/mayflyd.log}",
                 g.gl_pathv[i]);
        if (glob(logs, GLOB_BRACE, NULL, &lg) == 0) {
            for (size_t k = 0; k < lg.gl_pathc; k++)
                itest_tail_file(lg.gl_pathv[k], 30);
            globfree(&lg);
        }
    }
    globfree(&g);
}

/* itest_multi_until_parked - see node.h. */
void
itest_multi_until_parked(const struct itest_node *n, struct itest_multi *m,
                         int ms)
{
    int64_t deadline = itest_now_ms() + ms;
    int k = itest_multi_count(m), parked = 0;
    int *fds = calloc((size_t)k, sizeof(*fds));

    cr_assert(fds);
    while (parked < k) {
        itest_multi_run(m, 20);
        for (int i = 0; i < k; i++) {
            cr_assert(!itest_multi_done(m, i),
                      "pop %d answered before any push: %ld %s", i,
                      itest_multi_resp(m, i)->status,
                      itest_multi_resp(m, i)->body);
            fds[i] = itest_multi_fd(m, i);
        }
        parked = itest_conns_consumed(n, fds, k, NULL);
        cr_assert(parked == k || itest_now_ms() < deadline,
                  "%d of %d pops read after %d ms", parked, k, ms);
    }
    free(fds);
}
