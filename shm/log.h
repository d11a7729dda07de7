/*
 * log.h - the one logger every mayfly process uses.
 *
 * Lines look like "2026-11-30T02:48:37.123Z master[1234] info: text: strerror".
 * The role names the process kind (master, worker0...), set once per process
 * with log_set_role().  Never call these from a signal handler or while a
 * shared-memory lock is held: they format and write(2).
 */
#ifndef MAYFLY_SHM_LOG_H
#define MAYFLY_SHM_LOG_H

#include <stdnoreturn.h>

enum log_level {
    LOG_LEVEL_DEBUG,
    LOG_LEVEL_INFO,
    LOG_LEVEL_WARN,
    LOG_LEVEL_ERROR,
};

/* log_set_role - name this process in every line it logs ("master"). */
void log_set_role(const char *role);

/* log_set_level - drop lines below level. */
void log_set_level(enum log_level level);

/* log_parse_level - "debug".."error" to a level; -EINVAL if unknown. */
int log_parse_level(const char *name, enum log_level *out);

/*
 * log_open - send lines to stderr (NULL or ""), syslog ("syslog", LOG_DAEMON)
 * or append to a file path.  Reopening the same target after a rotation is
 * log_reopen().  Returns 0 or -errno; on error the previous target stays.
 */
int log_open(const char *target);
int log_reopen(void);

/*
 * log_mirror_stderr - while on (from the start of the process), error and
 * fatal lines also go to standard error when the target is syslog or a file,
 * so that whoever started mayflyd (a terminal, an init script, a unit's
 * journal) sees why a start failed.  daemon_ready() turns it off once the
 * node serves, and a worker at its fork: their stderr is not the caller's.
 */
void log_mirror_stderr(int on);

/* log_file_fd - the descriptor of a log file this process opened, else -1
 * (stderr is 2; syslog's socket is the C library's, made again by
 * log_set_role()). */
int log_file_fd(void);

/*
 * err is an errno value (0 for none): its strerror is appended.  Passing it
 * apart keeps errno from being clobbered by the formatting itself.
 */
void log_debug(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_info(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_warn(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_error(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* log_fatal - log and exit(1). */
noreturn void log_fatal(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* log_panic - log and abort(): shared state is corrupt beyond repair. */
noreturn void log_panic(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
