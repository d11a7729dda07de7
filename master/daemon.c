/*
 * daemon.c - detaching from the terminal and owning the pidfile (mayflyd -d).
 *
 * The classic double fork: the daemon is not a session leader, so it can
 * never acquire a controlling terminal.  A pipe joins the daemon to the
 * process that started it: that process exits 0 when daemon_ready() writes
 * one byte, or 1 when the pipe closes without it (the daemon died starting),
 * so init scripts see a failed start.  Master only, before workers exist; no
 * locks.  Errors: -errno, logged here with the failed call.
 */
#include "master/daemon.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/log.h"

static int daemon_ready_fd = -1;   /* write end, held by the daemon */
static char daemon_pid_path[4096]; /* the pidfile we wrote */
static pid_t daemon_pid_owner;     /* the process that wrote it */

/* daemon_wait_ready - the foreground side: exit as the daemon's start did. */
static void
daemon_wait_ready(int fd)
{
    unsigned char ok;
    ssize_t n;

    do
        n = read(fd, &ok, 1);
    while (n == -1 && errno == EINTR);
    _exit(n == 1 ? 0 : 1);
}

/* daemon_null_fd - point fd at /dev/null. */
static int
daemon_null_fd(int fd)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);

    if (null == -1) {
        log_error(errno, "open(/dev/null) failed");
        return -errno;
    }
    if (dup2(null, fd) == -1) {
        int e = errno;
        log_error(e, "dup2(/dev/null, %d) failed", fd);
        close(null);
        return -e;
    }
    close(null);
    return 0;
}

int
daemon_detach(void)
{
    int pfd[2], rc;
    pid_t pid;

    if (pipe2(pfd, O_CLOEXEC) == -1) {
        log_error(errno, "pipe2() failed");
        return -errno;
    }
    pid = fork();
    if (pid == -1) {
        rc = -errno;
        log_error(errno, "fork() failed");
        close(pfd[0]);
        close(pfd[1]);
        return rc;
    }
    if (pid > 0) {
        close(pfd[1]);
        daemon_wait_ready(pfd[0]);
    }
    close(pfd[0]);
    if (setsid() == -1) {
        log_error(errno, "setsid() failed");
        return -errno;
    }
    pid = fork();
    if (pid == -1) {
        log_error(errno, "fork() failed");
        return -errno;
    }
    if (pid > 0)
        _exit(0);
    umask(027);
    if (chdir("/") == -1) {
        log_error(errno, "chdir(/) failed");
        return -errno;
    }
    if ((rc = daemon_null_fd(STDIN_FILENO)) != 0 ||
        (rc = daemon_null_fd(STDOUT_FILENO)) != 0)
        return rc;
    daemon_ready_fd = pfd[1];
    return 0;
}

void
daemon_ready(void)
{
    unsigned char ok = 0;

    if (daemon_ready_fd == -1)
        return;
    if (write(daemon_ready_fd, &ok, 1) != 1)
        log_warn(errno, "write(ready pipe) failed");
    close(daemon_ready_fd);
    daemon_ready_fd = -1;
    daemon_null_fd(STDERR_FILENO);
}

/* daemon_pidfile_read - the pid path names; 0 if none or unreadable text. */
static pid_t
daemon_pidfile_read(const char *path)
{
    char buf[32], *end;
    ssize_t n;
    long pid;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd == -1)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    errno = 0;
    pid = strtol(buf, &end, 10);
    if (errno != 0 || end == buf || pid <= 0 || pid > INT_MAX ||
        (*end != '\0' && *end != '\n'))
        return 0;
    return (pid_t)pid;
}

/* daemon_pidfile_remove - at exit: unlink the pidfile if it is still ours. */
static void
daemon_pidfile_remove(void)
{
    if (daemon_pid_path[0] == '\0' || daemon_pid_owner != getpid())
        return;
    if (daemon_pidfile_read(daemon_pid_path) == getpid() &&
        unlink(daemon_pid_path) == -1)
        log_warn(errno, "unlink(%s) failed", daemon_pid_path);
    daemon_pid_path[0] = '\0';
}

/* daemon_pidfile_write - "pid\n" into tmp, then rename it over path. */
static int
daemon_pidfile_write(const char *path, const char *tmp)
{
    char line[32];
    int n = snprintf(line, sizeof(line), "%d\n", (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = 0;

    if (fd == -1) {
        log_error(errno, "open(%s) failed", tmp);
        return -errno;
    }
    errno = 0;
    if (fchmod(fd, 0644) == -1 || write(fd, line, (size_t)n) != n) {
        rc = errno ? -errno : -EIO;
        log_error(-rc, "write(%s) failed", tmp);
    }
    if (close(fd) == -1 && rc == 0) {
        rc = -errno;
        log_error(errno, "close(%s) failed", tmp);
    }
    if (rc == 0 && rename(tmp, path) == -1) {
        rc = -errno;
        log_error(errno, "rename(%s, %s) failed", tmp, path);
    }
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/*
 * daemon_pid_alive - pid exists and is not a zombie (an orphan whose reaper
 * never waits, as in some containers, must not block a new start forever).
 */
static int
daemon_pid_alive(pid_t pid)
{
    char path[64], buf[256];
    const char *state;
    ssize_t n;
    int fd;

    if (kill(pid, 0) == -1 && errno != EPERM)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return 1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold spaces and parentheses. */
    state = strrchr(buf, ')');
    return state == NULL || state[1] == '\0' || state[2] != 'Z';
}

int
daemon_pidfile_claim(const char *path)
{
    static int registered;
    char tmp[sizeof(daemon_pid_path) + 32];
    pid_t other = daemon_pidfile_read(path);
    int rc;

    if (other > 0 && other != getpid() && daemon_pid_alive(other)) {
        log_error(0, "pidfile %s names running process %d: not starting", path,
                  (int)other);
        return -EEXIST;
    }
    if (strlen(path) >= sizeof(daemon_pid_path)) {
        log_error(ENAMETOOLONG, "pidfile %s", path);
        return -ENAMETOOLONG;
    }
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    if ((rc = daemon_pidfile_write(path, tmp)) != 0)
        return rc;
    snprintf(daemon_pid_path, sizeof(daemon_pid_path), "%s", path);
    daemon_pid_owner = getpid();
    if (!registered && atexit(daemon_pidfile_remove) == 0)
        registered = 1;
    return 0;
}
