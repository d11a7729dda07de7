/*
 * daemon.h - detach from the terminal and own a pidfile, the way init
 * scripts expect of a classic Unix daemon (mayflyd -d).
 *
 * Order in main(): config_load(), log_open(), daemon_detach(),
 * daemon_pidfile_claim(), bind the listening sockets, daemon_ready(), then
 * fork the workers.  The foreground process started by the shell or the init
 * script waits until daemon_ready() and exits 0, or exits 1 if the daemon
 * dies first, so "mayflyd -d" fails visibly when the start fails.
 */
#ifndef MAYFLY_MASTER_DAEMON_H
#define MAYFLY_MASTER_DAEMON_H

/*
 * daemon_detach - fork, setsid, fork again, umask 027, chdir("/"), stdin and
 * stdout to /dev/null.  Returns 0 in the daemon (a new pid); the calling
 * process never returns: it waits for daemon_ready() or the daemon's death.
 * stderr stays open until daemon_ready() so start-up errors still reach the
 * terminal.  Returns -errno in the daemon, or in the caller if the first fork
 * fails.
 */
int daemon_detach(void);

/*
 * daemon_ready - the start succeeded: release the waiting foreground process
 * (exit 0) and point stderr at /dev/null.  Call it before forking workers,
 * which would otherwise inherit the terminal's stderr.  Does nothing when the
 * process did not detach.
 */
void daemon_ready(void);

/*
 * daemon_pidfile_claim - write our pid to path atomically (a temporary file
 * in the same directory, then rename).  Refuses with -EEXIST, logging the
 * pid, when path names another live process; a stale pidfile is replaced.
 * The file is removed at exit() by this process only (not by forked
 * children, nor when it no longer holds our pid).  Returns 0 or -errno,
 * having logged the failed call.
 */
int daemon_pidfile_claim(const char *path);

#endif
