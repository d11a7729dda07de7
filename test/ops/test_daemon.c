/*
 * test_daemon.c - master/daemon.c: the pidfile (atomic write, refusal while
 * its pid lives, removal at exit by its writer only) and the detach (double
 * fork, session, cwd, umask, stdio, the start-up handshake).
 *
 * Scenarios that end in exit() run in a forked child, so the checks after
 * exit happen in the test process; the daemon side of detach ends in _exit()
 * after writing what it saw to a file the test reads.  A forked child never
 * calls Criterion (an assert in a child blocks on the runner's socket): it
 * reports through its exit status.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "master/daemon.h"

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
