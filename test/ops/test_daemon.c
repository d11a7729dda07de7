/*
 * test_daemon.c - master/daemon.c: the pidfile (atomic write, refusal while
 * a mayflyd holds it, removal at exit by its writer only) and the detach
 * (double fork, session, cwd, umask, stdio, the start-up handshake); then,
 * through a real mayflyd, the data directory lock, the order of data_dir and
 * pidfile, and start-up errors on standard error.
 *
 * Scenarios that end in exit() run in a forked child, so the checks after
 * exit happen in the test process; the daemon side of detach ends in _exit()
 * after writing what it saw to a file the test reads.  A forked child never
 * calls Criterion (an assert in a child blocks on the runner's socket): it
 * reports through its exit status.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "master/daemon.h"
#include "test/integration/node.h"
#include "test/ops/shell.h"

/*
 * Children forked from Criterion's threaded test process end in exit(), and
 * LeakSanitizer cannot suspend threads that no longer exist there ("False
 * leaks are possible").  daemon.c allocates nothing, so this binary runs
 * without leak detection; ASan reads the hook at start-up.
 */
const char *__asan_default_options(void);
const char *
__asan_default_options(void)
{
    return "detect_leaks=0";
}

static char dm_dir[64];
static char dm_pidfile[128];
static char dm_info[128];

/* dm_setup - a private directory holding the pidfile and the info file. */
static void
dm_setup(void)
{
    snprintf(dm_dir, sizeof(dm_dir), "/tmp/mayfly-test-daemon-XXXXXX");
    cr_assert_not_null(mkdtemp(dm_dir));
    snprintf(dm_pidfile, sizeof(dm_pidfile), "%s/mayflyd.pid", dm_dir);
    snprintf(dm_info, sizeof(dm_info), "%s/info", dm_dir);
}

/* dm_teardown - remove whatever the test left in dm_dir. */
static void
dm_teardown(void)
{
    unlink(dm_pidfile);
    unlink(dm_info);
    rmdir(dm_dir);
}

TestSuite(daemon, .init = dm_setup, .fini = dm_teardown, .timeout = 30);

/* dm_write - replace path's contents with text. */
static void
dm_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "fopen(%s): %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

/* dm_read_pid - the number in path, or -1 when it does not exist. */
static long
dm_read_pid(const char *path)
{
    long pid = -1;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    return pid;
}

/* dm_exit_status - wait for pid; its exit code, or 128 + signal. */
static int
dm_exit_status(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* dm_dead_pid - the pid of a process that has exited and been reaped. */
static pid_t
dm_dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    cr_assert_neq(pid, -1);
    dm_exit_status(pid);
    return pid;
}

/* dm_wait_file - poll for path to exist, up to 10 s. */
static int
dm_wait_file(const char *path)
{
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 1000; i++) {
        if (access(path, F_OK) == 0)
            return 1;
        nanosleep(&tick, NULL);
    }
    return 0;
}

Test(daemon, pidfile_holds_our_pid_and_goes_at_exit)
{
    pid_t pid = fork();

    if (pid == 0) {
        if (daemon_pidfile_claim(dm_pidfile) != 0)
            _exit(2);
        if (dm_read_pid(dm_pidfile) != getpid())
            _exit(3);
        exit(0);
    }
    cr_assert_neq(pid, -1);
    cr_assert_eq(dm_exit_status(pid), 0);
    cr_assert_eq(access(dm_pidfile, F_OK), -1, "pidfile left after exit");
}

Test(daemon, pidfile_is_world_readable_and_leaves_no_temporary)
{
    struct stat st;

    cr_assert_eq(daemon_pidfile_claim(dm_pidfile), 0);
    cr_assert_eq(stat(dm_pidfile, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644);
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", dm_pidfile, (int)getpid());
    cr_assert_eq(access(tmp, F_OK), -1);
}

Test(daemon, pidfile_naming_a_live_process_refuses_the_start)
{
    char text[32];

    snprintf(text, sizeof(text), "%d\n", (int)getppid());
    dm_write(dm_pidfile, text);
    cr_assert_eq(daemon_pidfile_claim(dm_pidfile), -EEXIST);
    cr_assert_eq(dm_read_pid(dm_pidfile), getppid());
}

Test(daemon, stale_or_garbled_pidfile_is_replaced)
{
    char text[32];

    snprintf(text, sizeof(text), "%d\n", (int)dm_dead_pid());
    dm_write(dm_pidfile, text);
    cr_assert_eq(daemon_pidfile_claim(dm_pidfile), 0);
    cr_assert_eq(dm_read_pid(dm_pidfile), getpid());
    dm_write(dm_pidfile, "not a pid\n");
    cr_assert_eq(daemon_pidfile_claim(dm_pidfile), 0);
    cr_assert_eq(dm_read_pid(dm_pidfile), getpid());
}

Test(daemon, pidfile_naming_a_zombie_is_stale)
{
    char text[32];
    pid_t zombie = fork();

    if (zombie == 0)
        _exit(0);
    cr_assert_neq(zombie, -1);
    siginfo_t si;
    cr_assert_eq(waitid(P_PID, (id_t)zombie, &si, WEXITED | WNOWAIT), 0);
    snprintf(text, sizeof(text), "%d\n", (int)zombie);
    dm_write(dm_pidfile, text);
    cr_assert_eq(daemon_pidfile_claim(dm_pidfile), 0);
    cr_assert_eq(dm_read_pid(dm_pidfile), getpid());
    dm_exit_status(zombie);
}

/* dm_comm - the command name of pid into buf ("" once it is gone). */
static void
dm_comm(pid_t pid, char *buf, size_t len)
{
    char path[64];
    FILE *f;

    buf[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return;
    if (fgets(buf, (int)len, f) == NULL)
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

/* dm_sleeper - a running `sleep 60` that is no mayflyd: the pid a stale
 * pidfile names after a kill -9 and pid reuse.  Returns once it runs. */
static pid_t
dm_sleeper(void)
{
    char comm[64];
    pid_t pid = fork();

    if (pid == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    cr_assert_neq(pid, -1);
    long long end = itest_now_ms() + 10000;
    for (dm_comm(pid, comm, sizeof(comm)); strcmp(comm, "sleep") != 0;
         dm_comm(pid, comm, sizeof(comm))) {
        cr_assert_lt(itest_now_ms(), end, "sleep never ran: '%s'", comm);
        itest_sleep_ms(10);
    }
    return pid;
}

Test(daemon, pidfile_naming_another_live_program_is_replaced)
{
    char text[32];
    pid_t other = dm_sleeper();

    snprintf(text, sizeof(text), "%d\n", (int)other);
    dm_write(dm_pidfile, text);
    int rc = daemon_pidfile_claim(dm_pidfile);
    kill(other, SIGKILL);
    dm_exit_status(other);
    cr_assert_eq(rc, 0, "a live 'sleep' blocked the start");
    cr_assert_eq(dm_read_pid(dm_pidfile), getpid());
}

Test(daemon, pidfile_in_a_missing_directory_fails)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/missing/mayflyd.pid", dm_dir);
    cr_assert_eq(daemon_pidfile_claim(path), -ENOENT);
}

Test(daemon, a_forked_child_exiting_leaves_the_pidfile)
{
    pid_t pid = fork();

    if (pid == 0) {
        if (daemon_pidfile_claim(dm_pidfile) != 0)
            _exit(2);
        pid_t child = fork();
        if (child == 0)
            exit(0);
        int st;
        if (waitpid(child, &st, 0) != child ||
            dm_read_pid(dm_pidfile) != getpid())
            _exit(3);
        exit(0);
    }
    cr_assert_neq(pid, -1);
    cr_assert_eq(dm_exit_status(pid), 0, "the child removed the pidfile");
    cr_assert_eq(access(dm_pidfile, F_OK), -1);
}

Test(daemon, a_pidfile_that_names_another_process_is_not_removed)
{
    pid_t pid = fork();
    char text[32];

    if (pid == 0) {
        if (daemon_pidfile_claim(dm_pidfile) != 0)
            _exit(2);
        int fd = open(dm_pidfile, O_WRONLY | O_TRUNC);
        int n = snprintf(text, sizeof(text), "%d\n", (int)getppid());
        if (fd == -1 || write(fd, text, (size_t)n) != n)
            _exit(3);
        close(fd);
        exit(0);
    }
    cr_assert_neq(pid, -1);
    cr_assert_eq(dm_exit_status(pid), 0);
    cr_assert_eq(dm_read_pid(dm_pidfile), getpid());
}

/*
 * dm_daemon_side - after daemon_detach(): record pid, session, cwd, umask
 * and whether stdin is /dev/null, then report ready and leave.
 */
static void
dm_daemon_side(pid_t foreground)
{
    struct stat in, null;
    char cwd[64] = "";
    mode_t mask = umask(0);
    int devnull = fstat(STDIN_FILENO, &in) == 0 &&
                  stat("/dev/null", &null) == 0 && in.st_rdev == null.st_rdev;
    char text[256];

    if (getcwd(cwd, sizeof(cwd)) == NULL)
        cwd[0] = '?';
    snprintf(text, sizeof(text), "%d %d %d %s %03o %d\n", (int)getpid(),
             (int)getsid(0), (int)foreground, cwd, (unsigned)mask, devnull);
    int fd = open(dm_info, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd == -1 || write(fd, text, strlen(text)) < 0)
        _exit(4);
    close(fd);
    daemon_ready();
    _exit(0);
}

Test(daemon, detach_runs_in_a_new_session_rooted_at_slash)
{
    pid_t pid = fork();
    int dpid, dsid, fg, devnull;
    unsigned mask;
    char cwd[64];

    if (pid == 0) {
        pid_t me = getpid();
        if (daemon_detach() != 0)
            _exit(5);
        dm_daemon_side(me);
    }
    cr_assert_neq(pid, -1);
    cr_assert_eq(dm_exit_status(pid), 0, "foreground did not see ready");
    FILE *f = fopen(dm_info, "r");
    cr_assert_not_null(f, "the daemon wrote nothing");
    cr_assert_eq(fscanf(f, "%d %d %d %63s %o %d", &dpid, &dsid, &fg, cwd, &mask,
                        &devnull),
                 6);
    fclose(f);
    cr_assert_eq(fg, pid);
    cr_assert_neq(dpid, pid);
    cr_assert_neq(dsid, getsid(0), "still in the caller's session");
    cr_assert_neq(dsid, dpid, "the daemon leads its session");
    cr_assert_str_eq(cwd, "/");
    cr_assert_eq(mask, 027);
    cr_assert_eq(devnull, 1, "stdin is not /dev/null");
}

Test(daemon, foreground_exits_1_when_the_daemon_dies_starting)
{
    pid_t pid = fork();

    if (pid == 0) {
        if (daemon_detach() != 0)
            _exit(5);
        _exit(7);
    }
    cr_assert_neq(pid, -1);
    cr_assert_eq(dm_exit_status(pid), 1);
}

Test(daemon, stderr_reaches_the_caller_until_ready)
{
    int pfd[2];
    char buf[256];
    size_t n = 0;
    ssize_t r;

    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], STDERR_FILENO);
        close(pfd[1]);
        if (daemon_detach() != 0)
            _exit(5);
        fputs("before ready\n", stderr);
        daemon_ready();
        fputs("after ready\n", stderr);
        int fd = open(dm_info, O_WRONLY | O_CREAT, 0644);
        close(fd);
        _exit(0);
    }
    cr_assert_neq(pid, -1);
    close(pfd[1]);
    cr_assert_eq(dm_exit_status(pid), 0);
    cr_assert(dm_wait_file(dm_info), "the daemon never finished");
    while ((r = read(pfd[0], buf + n, sizeof(buf) - 1 - n)) > 0)
        n += (size_t)r;
    close(pfd[0]);
    buf[n] = '\0';
    cr_assert_str_eq(buf, "before ready\n");
}

Test(daemon, ready_without_detach_does_nothing)
{
    daemon_ready();
    cr_assert_neq(fcntl(STDERR_FILENO, F_GETFD), -1, "stderr was closed");
}

/*
 * The mayflyd suite: a real mayflyd ($MAYFLYD, which test/run-all.sh sets),
 * run by sh with its output to a file (a daemon must not hold a pipe of
 * ours) and bounded by timeout(1), on free loopback ports.  A daemon is not
 * our child: it counts as gone once /proc shows it absent or a zombie (PID
 * 1 of a container need not reap).  fini kills what a failed test left.
 */
#define MD_MAX_PIDS 8

static char md_bin[PATH_MAX];
static char md_dir[64];            /* scratch, removed at fini */
static char md_out[16384];         /* stdout and stderr of the last md_sh() */
static pid_t md_pids[MD_MAX_PIDS]; /* masters to kill at fini */
static int md_npids;

/* md_setup - the binary and a scratch directory. */
static void
md_setup(void)
{
    const char *bin = getenv("MAYFLYD");

    cr_assert_not_null(bin, "MAYFLYD is not set (test/run-all.sh sets it)");
    cr_assert_not_null(realpath(bin, md_bin), "%s: %s", bin, strerror(errno));
    snprintf(md_dir, sizeof(md_dir), "/tmp/mayfly-test-md-XXXXXX");
    cr_assert_not_null(mkdtemp(md_dir));
}

/* md_teardown - kill the masters still running, remove the scratch tree. */
static void
md_teardown(void)
{
    char cmd[128];

    for (int i = 0; i < md_npids; i++)
        if (ops_pid_ours(md_pids[i], md_dir))
            kill(md_pids[i], SIGKILL);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", md_dir);
    if (md_dir[0] != '\0' && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", md_dir);
}

TestSuite(mayflyd, .init = md_setup, .fini = md_teardown, .timeout = 120);

/* md_sh - run a shell command (printf-style); its output lands in md_out. */
static int md_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int
md_sh(const char *fmt, ...)
{
    va_list ap;
    int st;

    va_start(ap, fmt);
    st = ops_vsh(md_dir, md_out, sizeof(md_out), fmt, ap);
    va_end(ap);
    return st;
}

/* md_count - how many times needle occurs in hay. */
static int
md_count(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* md_ports - two distinct free loopback ports. */
static void
md_ports(int *port, int *cport)
{
    *port = itest_free_port(); /* reserved: the next pick differs */
    *cport = itest_free_port();
    cr_assert(*port > 0 && *cport > 0);
}

/* md_read_pid - the pid in path, or 0. */
static pid_t
md_read_pid(const char *path)
{
    long pid = dm_read_pid(path);
    return pid > 0 ? (pid_t)pid : 0;
}

/* md_health - GET /health on port: the status, 0 when none came. */
static int
md_health(int port)
{
    char cmd[256];
    int code = 0;

    snprintf(cmd, sizeof(cmd),
             "curl -s -m 5 -o /dev/null -w '%%{http_code}' "
             "http://127.0.0.1:%d/health",
             port);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return 0;
    if (fscanf(p, "%d", &code) != 1)
        code = 0;
    pclose(p);
    return code;
}

/* md_wait_healthy - /health on port answers 200 within 30 s. */
static void
md_wait_healthy(int port)
{
    long long end = itest_now_ms() + 30000;

    while (md_health(port) != 200) {
        cr_assert_lt(itest_now_ms(), end, "/health on %d never answered 200",
                     port);
        itest_sleep_ms(50);
    }
}

/* md_wait_gone - pid is gone (or a zombie) within 30 s. */
static void
md_wait_gone(pid_t pid)
{
    long long end = itest_now_ms() + 30000;

    while (ops_pid_alive(pid)) {
        cr_assert_lt(itest_now_ms(), end, "pid %d still runs", (int)pid);
        itest_sleep_ms(20);
    }
}

/*
 * md_start - mayflyd -d with data_dir, pidfile and the two ports: exit
 * status 0, a live master named by the pidfile, serving.  Returns its pid.
 */
static pid_t
md_start(const char *data_dir, const char *pidfile, int port, int cport)
{
    int rc = md_sh("timeout -k 5 60 %s -d -o data_dir=%s -o pidfile=%s "
                   "-o listen=127.0.0.1:%d -o cluster_listen=127.0.0.1:%d "
                   "-o workers=1",
                   md_bin, data_dir, pidfile, port, cport);
    cr_assert_eq(rc, 0, "mayflyd -d exited %d: %s", rc, md_out);
    pid_t pid = md_read_pid(pidfile);
    cr_assert_gt(pid, 0, "no pid in %s", pidfile);
    if (md_npids < MD_MAX_PIDS)
        md_pids[md_npids++] = pid;
    cr_assert(ops_pid_alive(pid), "pid %d from %s is not running", (int)pid,
              pidfile);
    md_wait_healthy(port);
    return pid;
}

/* md_stop - TERM the master; it is gone, with its pidfile, within 30 s. */
static void
md_stop(pid_t pid, const char *pidfile)
{
    cr_assert_eq(kill(pid, SIGTERM), 0);
    md_wait_gone(pid);
    cr_assert_eq(access(pidfile, F_OK), -1, "%s left after the stop", pidfile);
}

Test(mayflyd, d_creates_a_missing_data_dir_before_its_pidfile)
{
    char cwd[128], data[160], pidfile[192];
    int port, cport;

    /* The default data_dir, ./mayfly-data, does not exist yet; the default
     * pidfile under -d lives in it. */
    md_ports(&port, &cport);
    snprintf(cwd, sizeof(cwd), "%s/start", md_dir);
    snprintf(data, sizeof(data), "%s/mayfly-data", cwd);
    snprintf(pidfile, sizeof(pidfile), "%s/mayflyd.pid", data);
    cr_assert_eq(mkdir(cwd, 0755), 0);
    int rc = md_sh("cd %s && timeout -k 5 60 %s -d -o listen=127.0.0.1:%d "
                   "-o cluster_listen=127.0.0.1:%d -o workers=1",
                   cwd, md_bin, port, cport);
    pid_t pid = md_read_pid(pidfile);
    if (pid > 0 && md_npids < MD_MAX_PIDS)
        md_pids[md_npids++] = pid;
    cr_assert_eq(rc, 0, "mayflyd -d in a new directory exited %d: %s", rc,
                 md_out);
    cr_assert_gt(pid, 0, "no pidfile %s", pidfile);
    md_wait_healthy(port);
    md_stop(pid, pidfile);
}

Test(mayflyd, a_second_node_on_the_same_data_dir_is_refused)
{
    char data[128], pa[128], pb[128], want[256];
    int port, cport, port2, cport2;

    md_ports(&port, &cport);
    md_ports(&port2, &cport2);
    snprintf(data, sizeof(data), "%s/data", md_dir);
    snprintf(pa, sizeof(pa), "%s/a.pid", md_dir);
    snprintf(pb, sizeof(pb), "%s/b.pid", md_dir);
    pid_t a = md_start(data, pa, port, cport);
    snprintf(want, sizeof(want), "data_dir %s is in use by mayflyd process %d",
             data, (int)a);
    /* Under -d: the start fails at once and says why on stderr. */
    long long t0 = itest_now_ms();
    int rc = md_sh("timeout -k 5 60 %s -d -o data_dir=%s -o pidfile=%s "
                   "-o listen=127.0.0.1:%d -o cluster_listen=127.0.0.1:%d "
                   "-o workers=1",
                   md_bin, data, pb, port2, cport2);
    pid_t b = md_read_pid(pb);
    if (b > 0 && md_npids < MD_MAX_PIDS)
        md_pids[md_npids++] = b;
    cr_assert_eq(rc, 1, "a second node on %s: exit %d: %s", data, rc, md_out);
    cr_assert_lt(itest_now_ms() - t0, 20000, "the refusal took too long");
    cr_assert_not_null(strstr(md_out, want), "stderr lacks '%s': %s", want,
                       md_out);
    cr_assert_eq(b, 0, "the refused node wrote its pidfile");
    /* In the foreground too. */
    rc = md_sh("timeout -k 5 60 %s -o data_dir=%s -o listen=127.0.0.1:%d "
               "-o cluster_listen=127.0.0.1:%d -o workers=1",
               md_bin, data, port2, cport2);
    cr_assert_eq(rc, 1, "a second node in the foreground: exit %d: %s", rc,
                 md_out);
    cr_assert_eq(md_count(md_out, want), 1, "%s", md_out);
    cr_assert_eq(md_health(port), 200, "the first node stopped serving");
    md_stop(a, pa);
}

Test(mayflyd, a_master_killed_9_leaves_its_data_dir_to_the_next_start)
{
    char data[128], pidfile[128];
    int port, cport;

    md_ports(&port, &cport);
    snprintf(data, sizeof(data), "%s/data", md_dir);
    snprintf(pidfile, sizeof(pidfile), "%s/m.pid", md_dir);
    pid_t a = md_start(data, pidfile, port, cport);
    cr_assert_eq(kill(a, SIGKILL), 0);
    md_wait_gone(a);
    /* The pidfile and data_dir/lock stay; neither blocks the start. */
    md_ports(&port, &cport);
    pid_t b = md_start(data, pidfile, port, cport);
    cr_assert_neq(b, a);
    md_stop(b, pidfile);
}

Test(mayflyd, start_errors_under_d_reach_stderr)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    char data[128], pidfile[128], file[128], path[160];
    int port, cport, busy;

    /* A port somebody else listens on. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 1), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    busy = ntohs(sa.sin_port);
    md_ports(&port, &cport);
    snprintf(data, sizeof(data), "%s/data", md_dir);
    snprintf(pidfile, sizeof(pidfile), "%s/m.pid", md_dir);
    int rc = md_sh("timeout -k 5 60 %s -d -o data_dir=%s -o pidfile=%s "
                   "-o listen=127.0.0.1:%d -o cluster_listen=127.0.0.1:%d",
                   md_bin, data, pidfile, busy, cport);
    cr_assert_eq(rc, 1, "%s", md_out);
    cr_assert_eq(md_count(md_out, "Address already in use"), 1, "%s", md_out);
    cr_assert_not_null(strstr(md_out, "listen: cannot listen on"), "%s",
                       md_out);
    close(fd);
    /* A data_dir that cannot be created: its parent is a file. */
    snprintf(file, sizeof(file), "%s/file", md_dir);
    dm_write(file, "x\n");
    snprintf(path, sizeof(path), "%s/data", file);
    rc = md_sh("timeout -k 5 60 %s -d -o data_dir=%s -o listen=127.0.0.1:%d "
               "-o cluster_listen=127.0.0.1:%d",
               md_bin, path, port, cport);
    cr_assert_eq(rc, 1, "%s", md_out);
    cr_assert_not_null(strstr(md_out, path), "%s", md_out);
    cr_assert_not_null(strstr(md_out, "Not a directory"), "%s", md_out);
    /* A pidfile a running mayflyd holds. */
    pid_t a = md_start(data, pidfile, port, cport);
    char other[128], want[256];
    int port2, cport2;
    md_ports(&port2, &cport2);
    snprintf(other, sizeof(other), "%s/other", md_dir);
    rc = md_sh("timeout -k 5 60 %s -d -o data_dir=%s -o pidfile=%s "
               "-o listen=127.0.0.1:%d -o cluster_listen=127.0.0.1:%d",
               md_bin, other, pidfile, port2, cport2);
    cr_assert_eq(rc, 1, "%s", md_out);
    snprintf(want, sizeof(want), "pidfile %s names running process %d", pidfile,
             (int)a);
    cr_assert_not_null(strstr(md_out, want), "%s", md_out);
    cr_assert_eq(md_read_pid(pidfile), a);
    md_stop(a, pidfile);
}

Test(mayflyd, a_foreground_start_error_is_written_once)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    char data[128], log[128], text[4096];
    int port, cport;

    md_ports(&port, &cport);
    snprintf(data, sizeof(data), "%s/data", md_dir);
    snprintf(log, sizeof(log), "%s/m.log", md_dir);
    /* A port somebody else listens on. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 1), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    int busy = ntohs(sa.sin_port);
    /* log = stderr: the line is written there once, not twice. */
    int rc = md_sh("timeout -k 5 60 %s -o data_dir=%s -o listen=127.0.0.1:%d "
                   "-o cluster_listen=127.0.0.1:%d",
                   md_bin, data, busy, cport);
    cr_assert_eq(rc, 1, "%s", md_out);
    cr_assert_eq(md_count(md_out, "Address already in use"), 1, "%s", md_out);
    /* log = a file: the file has it, and so has stderr, once each. */
    rc = md_sh("timeout -k 5 60 %s -o data_dir=%s -o log=%s "
               "-o listen=127.0.0.1:%d -o cluster_listen=127.0.0.1:%d",
               md_bin, data, log, busy, cport);
    cr_assert_eq(rc, 1, "%s", md_out);
    cr_assert_eq(md_count(md_out, "Address already in use"), 1, "%s", md_out);
    FILE *f = fopen(log, "r");
    cr_assert_not_null(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    cr_assert_eq(md_count(text, "Address already in use"), 1, "%s", text);
    close(fd);
}

Test(mayflyd, a_pidfile_naming_another_program_does_not_block_the_start)
{
    char data[128], pidfile[128], text[32];
    int port, cport;
    pid_t other = dm_sleeper();

    md_ports(&port, &cport);
    snprintf(data, sizeof(data), "%s/data", md_dir);
    snprintf(pidfile, sizeof(pidfile), "%s/m.pid", md_dir);
    snprintf(text, sizeof(text), "%d\n", (int)other);
    dm_write(pidfile, text);
    pid_t a = md_start(data, pidfile, port, cport);
    cr_assert_neq(a, other);
    cr_assert(ops_pid_alive(other), "the other program was harmed");
    kill(other, SIGKILL);
    dm_exit_status(other);
    md_stop(a, pidfile);
}
