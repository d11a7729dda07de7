/*
 * daemon.c - detaching from the terminal, owning the data directory and the
 * pidfile (mayflyd -d; the data directory lock in the foreground too).
 *
 * The classic double fork: the daemon is not a session leader, so it can
 * never acquire a controlling terminal.  A pipe joins the daemon to the
 * process that started it: that process exits 0 when daemon_ready() writes
 * one byte, or 1 when the pipe closes without it (the daemon died starting),
 * so init scripts see a failed start.  Master only, before workers exist; no
 * locks.  Errors: -errno, logged here with the failed call.
 */
#include "master/daemon.h"

#include <sys/file.h>
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
static int daemon_lock_fd = -1;    /* data_dir/lock, held until exit */

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

    log_mirror_stderr(0);
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
 * daemon_proc_stat - the command name (comm) and state letter of pid, from
 * /proc/PID/stat.  0, or -1 when it cannot be read.
 */
static int
daemon_proc_stat(pid_t pid, char *comm, size_t len, char *state)
{
    char path[64], buf[512];
    const char *open_paren, *close_paren;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold spaces and parentheses. */
    open_paren = strchr(buf, '(');
    close_paren = strrchr(buf, ')');
    if (open_paren == NULL || close_paren == NULL || close_paren < open_paren ||
        close_paren[1] == '\0' || close_paren[2] == '\0')
        return -1;
    snprintf(comm, len, "%.*s", (int)(close_paren - open_paren - 1),
             open_paren + 1);
    *state = close_paren[2];
    return 0;
}

/*
 * daemon_pid_mayflyd - pid runs, is not a zombie (an orphan whose reaper
 * never waits, as in some containers, must not block a new start forever)
 * and is a mayflyd.  After a kill -9 the pidfile stays, and its pid may be
 * reused by anything; that process must not keep the node down.  "A
 * mayflyd" is a process with our command name: /proc/PID/exe would be
 * stricter but cannot be read for another user's process, and after an
 * upgrade a running daemon's exe is the old, deleted binary.  When /proc
 * cannot tell, the process counts as a mayflyd: refusing is the safe side.
 * *comm receives the command name of a live process ("" otherwise).
 */
static int
daemon_pid_mayflyd(pid_t pid, char *comm, size_t len)
{
    char ours[64];
    char state, self_state;

    comm[0] = '\0';
    if (kill(pid, 0) == -1 && errno != EPERM)
        return 0;
    if (daemon_proc_stat(pid, comm, len, &state) != 0)
        return 1;
    if (state == 'Z' || state == 'X') {
        comm[0] = '\0'; /* gone: nothing to warn about */
        return 0;
    }
    if (daemon_proc_stat(getpid(), ours, sizeof(ours), &self_state) != 0)
        return 1;
    return strcmp(comm, ours) == 0;
}

int
daemon_pidfile_claim(const char *path)
{
    static int registered;
    char tmp[sizeof(daemon_pid_path) + 32];
    char comm[64];
    pid_t other = daemon_pidfile_read(path);
    int rc;

    if (other > 0 && other != getpid()) {
        if (daemon_pid_mayflyd(other, comm, sizeof(comm))) {
            log_error(0, "pidfile %s names running process %d: not starting",
                      path, (int)other);
            return -EEXIST;
        }
        if (comm[0] != '\0')
            log_warn(0,
                     "pidfile %s names process %d (%s), not a mayflyd: "
                     "replacing it",
                     path, (int)other, comm);
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

/*
 * The data directory lock.  flock() locks belong to the open file
 * description: the workers inherit the descriptor over fork() and close
 * their copy (close_inherited() in workers.c), which does not release the
 * lock while the master holds it.  So the lock lives exactly as long as the
 * master: a master killed -9 releases it at once, even if its workers are
 * still going for a moment (PR_SET_PDEATHSIG kills them).  That is enough to
 * keep a second node off the data: only the master opens data_dir (the raft
 * log in LMDB); workers never touch it, they serve from the anonymous shared
 * segment of their own node.  Holding the lock in the workers as well would
 * only make a restart after a crash fail while they die.  The descriptor is
 * close-on-exec and never closed: the kernel releases the lock at exit.
 */
int
daemon_datadir_lock(const char *dir)
{
    char path[4096], line[32];
    pid_t other;
    int fd, n, e;

    if (snprintf(path, sizeof(path), "%s/lock", dir) >= (int)sizeof(path)) {
        log_error(ENAMETOOLONG, "data_dir %s", dir);
        return -ENAMETOOLONG;
    }
    if (mkdir(dir, 0750) == -1 && errno != EEXIST) {
        e = errno;
        log_error(e, "cannot create data_dir: mkdir(%s) failed", dir);
        return -e;
    }
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd == -1) {
        e = errno;
        log_error(e, "open(%s) failed", path);
        return -e;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
        e = errno;
        close(fd);
        if (e != EWOULDBLOCK) {
            log_error(e, "flock(%s, LOCK_EX|LOCK_NB) failed", path);
            return -e;
        }
        /* The holder writes its pid once it has the lock: maybe not yet. */
        other = daemon_pidfile_read(path);
        if (other > 0)
            log_error(0,
                      "data_dir %s is in use by mayflyd process %d (it "
                      "holds %s): not starting",
                      dir, (int)other, path);
        else
            log_error(0,
                      "data_dir %s is in use by another mayflyd (it holds "
                      "%s): not starting",
                      dir, path);
        return -EBUSY;
    }
    /* The pid is for the message above only; the lock is what counts. */
    n = snprintf(line, sizeof(line), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) == -1 || pwrite(fd, line, (size_t)n, 0) != n)
        log_warn(errno, "cannot write our pid to %s", path);
    if (daemon_lock_fd != -1)
        close(daemon_lock_fd);
    daemon_lock_fd = fd;
    return 0;
}
