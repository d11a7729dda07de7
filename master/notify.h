/*
 * notify.h - tell systemd what the node does, when it runs as a
 * Type=notify unit (sd_notify(3); ops/mayflyd.service).
 *
 * systemd sets NOTIFY_SOCKET in the environment of the process it starts,
 * and WATCHDOG_USEC when the unit has WatchdogSec=.  The master is that
 * process (MAINPID: the unit runs mayflyd in the foreground) and the only
 * one that sends, so the default NotifyAccess=main suffices; workers
 * inherit the variables but never notify.  Without NOTIFY_SOCKET every
 * call here does nothing, so the init script and a shell see no change.
 *
 * What is sent, each message one datagram, in this order over a run:
 *   READY=1 and STATUS=...        when the node reports ready (view.c)
 *   STATUS=...                    when the role or the members change
 *   WATCHDOG=1                    from the master's tick, every half
 *                                 WATCHDOG_USEC, so a wedged loop is
 *                                 restarted by systemd
 *   RELOADING=1, MONOTONIC_USEC=  when HUP starts; READY=1 when it is done
 *   STOPPING=1                    when the drain (or a QUIT) starts
 * Master only, single-threaded.
 */
#ifndef MAYFLY_MASTER_NOTIFY_H
#define MAYFLY_MASTER_NOTIFY_H

#include <stdint.h>

struct master;

/* master_notify_start - read NOTIFY_SOCKET and the watchdog's interval
 * (sd_watchdog_enabled) once, after the log is open: what it found is
 * logged. */
void master_notify_start(const struct master *m);

/* master_notify_ready - the node reports ready: READY=1 with its status. */
void master_notify_ready(const struct master *m);

/* master_notify_reloading - HUP starts: RELOADING=1 with the monotonic
 * time systemd 253 and later want beside it.  Nothing before the node is
 * ready, or once it drains: systemd would wait for a READY=1 that, then,
 * belongs to the start or never comes. */
void master_notify_reloading(const struct master *m);

/* master_notify_reloaded - HUP is done: READY=1, when reloading said
 * RELOADING=1. */
void master_notify_reloaded(const struct master *m);

/* master_notify_stopping - the drain or stop starts: STOPPING=1, once. */
void master_notify_stopping(void);

/* master_notify_tick - every master tick: WATCHDOG=1 when due, and
 * STATUS= when the status text changed since the last one sent. */
void master_notify_tick(const struct master *m, uint64_t now);

#endif
