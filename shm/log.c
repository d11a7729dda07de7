/*
 * log.c - format a line, write it in one write(2) to the current target.
 *
 * One write per line keeps lines whole when the master and its workers share
 * stderr or an O_APPEND file.  State is per process and set before workers
 * are forked, so a worker inherits its master's target.  Until the start is
 * over (log_mirror_stderr(0)), error lines also go to standard error when
 * the target is syslog or a file: whoever started mayflyd sees why it failed.
 * A URL's access_token (a browser's bearer token, SPEC §11) never reaches a
 * log: every line passes log_redact(), whoever logged the URL.
 */
#include "shm/log.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static char log_role[32] = "mayflyd";
static enum log_level log_min = LOG_LEVEL_INFO;
static int log_fd = STDERR_FILENO;
static int log_syslog;
static char log_path[4096];
static int log_mirror = 1; /* errors to stderr too: the start is not over */

static const char *const log_names[] = {"debug", "info", "warn", "error"};
static const int log_prio[] = {LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR};

static void log_write(enum log_level level, int err, const char *fmt,
                      va_list ap) __attribute__((format(printf, 3, 0)));

void
log_set_role(const char *role)
{
    snprintf(log_role, sizeof(log_role), "%s", role);
    if (log_syslog) {
        closelog();
        openlog("mayflyd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    }
}

void
log_mirror_stderr(int on)
{
    log_mirror = on;
}

int
log_file_fd(void)
{
    return log_fd == STDERR_FILENO ? -1 : log_fd;
}

void
log_set_level(enum log_level level)
{
    log_min = level;
}

int
log_parse_level(const char *name, enum log_level *out)
{
    for (size_t i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++) {
        if (strcmp(name, log_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* log_open_file - open path for appending; the fd is close-on-exec. */
static int
log_open_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    return fd == -1 ? -errno : fd;
}

int
log_open(const char *target)
{
    if (target == NULL || target[0] == '\0') {
        if (log_fd != STDERR_FILENO)
            close(log_fd);
        log_fd = STDERR_FILENO;
        log_syslog = 0;
        log_path[0] = '\0';
        return 0;
    }
    if (strcmp(target, "syslog") == 0) {
        openlog("mayflyd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
        log_syslog = 1;
        log_path[0] = '\0';
        return 0;
    }
    if (strlen(target) >= sizeof(log_path))
        return -ENAMETOOLONG;
    int fd = log_open_file(target);
    if (fd < 0)
        return fd;
    if (log_fd != STDERR_FILENO)
        close(log_fd);
    log_fd = fd;
    log_syslog = 0;
    snprintf(log_path, sizeof(log_path), "%s", target);
    return 0;
}

int
log_reopen(void)
{
    if (log_path[0] == '\0')
        return 0;
    int fd = log_open_file(log_path);
    if (fd < 0)
        return fd;
    /* dup2 keeps the descriptor number, so no other code holds a stale fd. */
    if (dup2(fd, log_fd) == -1) {
        int e = errno;
        close(fd);
        return -e;
    }
    close(fd);
    return 0;
}

/* log_secret_at - the length of a query key at p whose value is a token
 * (access_token=, or with the '_' percent-encoded), else 0. */
static size_t
log_secret_at(const char *p)
{
    static const char *const keys[] = {"access_token=", "access%5ftoken="};

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strncasecmp(p, keys[i], strlen(keys[i])) == 0)
            return strlen(keys[i]);
    return 0;
}

/*
 * log_redact - line[from..*n) with the value after each access_token=
 * replaced by "[redacted]" (up to the next byte that ends a query value or
 * a quoted URL); line has room for cap bytes, and a line that would grow
 * past it is cut.  A log line is no place for a credential, and a URL is
 * logged whole by whoever refuses it.
 */
static void
log_redact(char *line, size_t from, size_t *n, size_t cap)
{
    static const char mark[] = "[redacted]";
    const size_t m = sizeof(mark) - 1;

    for (size_t i = from; i < *n; i++) {
        size_t k = log_secret_at(line + i), end;
        if (k == 0)
            continue;
        i += k;
        end = i + strcspn(line + i, "& \t\r\n\"'#<>()[],;");
        if (end == i)
            continue;
        size_t tail = *n - end;
        if (i + m + tail > cap)
            tail = cap > i + m ? cap - i - m : 0;
        memmove(line + i + m, line + end, tail);
        memcpy(line + i, mark, i + m <= cap ? m : cap - i);
        *n = i + m + tail <= cap ? i + m + tail : cap;
        line[*n] = '\0';
        i += m - 1;
    }
}

static void
log_write(enum log_level level, int err, const char *fmt, va_list ap)
{
    char line[2048];
    size_t n, stamp;
    int saved = errno;
    struct timespec ts;
    struct tm tm;

    if (level < log_min)
        return;
    /* The time stamp is written always, for the stderr copy of an error;
     * syslog stamps its lines itself and is given what follows it. */
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ ",
                          ts.tv_nsec / 1000000);
    stamp = n;
    int w = snprintf(line + n, sizeof(line) - n, "%s[%d] %s: ", log_role,
                     (int)getpid(), log_names[level]);
    n = (w > 0 && (size_t)w < sizeof(line) - n) ? n + (size_t)w : n;
    w = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    n = (w > 0 && (size_t)w < sizeof(line) - n) ? n + (size_t)w
                                                : sizeof(line) - 2;
    if (err != 0 && n < sizeof(line) - 2) {
        w = snprintf(line + n, sizeof(line) - n, ": %s", strerror(err));
        n = (w > 0 && (size_t)w < sizeof(line) - n) ? n + (size_t)w
                                                    : sizeof(line) - 2;
    }
    line[n] = '\0';
    log_redact(line, stamp, &n, sizeof(line) - 2);
    if (log_syslog)
        syslog(log_prio[level], "%s", line + stamp);
    line[n++] = '\n';
    ssize_t rc = 0;
    if (!log_syslog)
        rc = write(log_fd, line, n);
    /* Once: a target that is stderr already has the line. */
    if (log_mirror && level >= LOG_LEVEL_ERROR &&
        (log_syslog || log_fd != STDERR_FILENO))
        rc = write(STDERR_FILENO, line, n);
    (void)rc; /* nowhere left to report a failed log write */
    errno = saved;
}

#define LOG_FN(name, level)                                                    \
    void name(int err, const char *fmt, ...)                                   \
    {                                                                          \
        va_list ap;                                                            \
        va_start(ap, fmt);                                                     \
        log_write(level, err, fmt, ap);                                        \
        va_end(ap);                                                            \
    }

LOG_FN(log_debug, LOG_LEVEL_DEBUG)
LOG_FN(log_info, LOG_LEVEL_INFO)
LOG_FN(log_warn, LOG_LEVEL_WARN)
LOG_FN(log_error, LOG_LEVEL_ERROR)

void
log_fatal(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_write(LOG_LEVEL_ERROR, err, fmt, ap);
    va_end(ap);
    exit(1);
}

void
log_panic(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_write(LOG_LEVEL_ERROR, err, fmt, ap);
    va_end(ap);
    abort();
}
