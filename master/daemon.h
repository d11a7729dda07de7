/*
 * daemon.h - detach from the terminal and own a pidfile, the way init
 * scripts expect of a classic Unix daemon (mayflyd -d).
 *
 * Order in main(): config_load(), daemon_detach(), log_open(),
 * daemon_datadir_lock(), daemon_pidfile_claim(), bind the listening
 * sockets, fork the workers, daemon_ready().  The foreground process started
 * by the shell or the init script waits until daemon_ready() and exits 0, or
 * exits 1 if the daemon dies first, so "mayflyd -d" fails visibly when the
 * start fails.
 */
#ifndef MAYFLY_MASTER_DAEMON_H
#define MAYFLY_MASTER_DAEMON_H

/*
 * daemon_detach - fork, setsid, fork again, umask 027, chdir("/"), stdin and
 * stdout to /dev/null.  Returns 0 in the daemon (a new pid); the calling
 * process never returns: it waits for daemon_ready() or the daemon's death.
 * stderr stays open until daemon_ready() so start-up errors still reach the
 * terminal (log_mirror_stderr() copies them there whatever the log target).
 * Returns -errno in the daemon, or in the caller if the first fork fails.
 */
int daemon_detach(void);

/*
 * daemon_ready - the start succeeded: stop copying errors to stderr
 * (log_mirror_stderr(0)); when detached, release the waiting foreground
 * process (exit 0) and point stderr at /dev/null.  Workers forked before it
 * point their own stderr at /dev/null (workers.c).
 */
void daemon_ready(void);

/*
 * daemon_pidfile_claim - write our pid to path atomically (a temporary file
 * in the same directory, then rename).  Refuses with -EEXIST, logging the
 * pid, when path names another live mayflyd; a stale pidfile is replaced,
 * with a warning when its pid now belongs to another program.
 * The file is removed at exit() by this process only (not by forked
 * children, nor when it no longer holds our pid).  Returns 0 or -errno,
 * having logged the failed call.
 */
int daemon_pidfile_claim(const char *path);

/*
 * daemon_datadir_lock - create dir if missing (one level, mode 0750) and
 * take an exclusive flock() on dir/lock, held until this process exits, so
 * that a second node cannot use the same data directory.  Our pid is
 * written into the file for the message a refused start gives.  Returns 0;
 * -EBUSY when another process holds the lock (logged, naming dir and, when
 * it wrote one, the holder's pid); or -errno, logged with the failed call.
 */
int daemon_datadir_lock(const char *dir);

#endif
