/*
 * notify.c - tell systemd what the node does (notify.h), through
 * libsystemd's sd_notify().
 *
 * The status line is built from the board, which the master has just
 * published when it calls here: what /health shows is what systemctl
 * status shows.  It is sent only when its text changes (an election, a
 * member coming or going), not every tick: each datagram wakes systemd.
 *
 * A failed send is logged once: systemd gone away must not fill the log
 * ten times a second, and the node serves on regardless.
 */
#include "master/notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "master/master.h"
#include "shm/board.h"
#include "shm/log.h"

#define NOTIFY_STATUS_MAX 256

static int notify_on;           /* NOTIFY_SOCKET was set at start */
static uint64_t notify_wd_ms;   /* WATCHDOG=1 this often; 0: none */
static uint64_t notify_wd_next; /* when the next one is due */
static int notify_reloading;    /* RELOADING=1 sent, READY=1 owed */
static int notify_stopping;     /* STOPPING=1 sent */
static int notify_failed;       /* a send failed (logged once) */
static char notify_status[NOTIFY_STATUS_MAX]; /* the last STATUS= sent */

/* notify_send - one message; a failure is logged the first time only. */
static void
notify_send(const char *text)
{
    int rc = sd_notify(0, text);

    if (rc < 0 && !notify_failed) {
        log_warn(-rc,
                 "sd_notify(%.*s) failed; systemd may not see the "
                 "node's state (said once)",
                 (int)strcspn(text, "\n"), text);
        notify_failed = 1;
    }
}

/* notify_count - append ", N what" to out when n is not 0. */
static void
notify_count(char *out, size_t len, unsigned n, const char *what, int *first)
{
    size_t used = strlen(out);

    if (n == 0 || used >= len)
        return;
    snprintf(out + used, len - used, "%s%u %s", *first ? "" : ", ", n, what);
    *first = 0;
}

/* notify_status_text - "ready; raft leader, term 2, leader n0; 3 members:
 * 2 live, 1 dead" from the board (and draining from the master's state). */
static void
notify_status_text(const struct master *m, char *out, size_t len)
{
    static const char *const names[SHM_MEMBER_STATES] = {"live", "dead",
                                                         "leaving", "starting"};
    unsigned n[SHM_MEMBER_STATES] = {0};
    struct shm_board_view v;
    int first = 1;
    size_t used;

    shm_board_read(m->seg.board, &v);
    for (uint32_t i = 0; i < v.nmembers && i < SHM_BOARD_MEMBERS; i++)
        n[v.members[i].state % SHM_MEMBER_STATES]++;
    snprintf(out, len, "%s; raft %s, term %llu, leader %s; %u member%s: ",
             m->state != MASTER_RUNNING ? "draining"
             : v.ready                  ? "ready"
                                        : "starting",
             shm_role_name(v.role), (unsigned long long)v.term,
             v.leader[0] ? v.leader : "none", (unsigned)v.nmembers,
             v.nmembers == 1 ? "" : "s");
    for (int s = 0; s < SHM_MEMBER_STATES; s++)
        notify_count(out, len, n[s], names[s], &first);
    used = strlen(out);
    if (used >= 2 && out[used - 2] == ':') /* no members listed */
        out[used - 2] = '\0';
}

void
master_notify_start(const struct master *m)
{
    uint64_t usec = 0;
    int rc;

    notify_on = getenv("NOTIFY_SOCKET") != NULL;
    if (!notify_on)
        return;
    /* -d forks: the daemon is not the process systemd started, which
     * exits once it serves, so systemd ignores (NotifyAccess=main) what
     * the daemon says and counts the service as stopped. */
    if (m->cfg.daemonize)
        log_warn(0, "NOTIFY_SOCKET is set and mayflyd runs with -d: under "
                    "Type=notify run it in the foreground (no -d)");
    rc = sd_watchdog_enabled(0, &usec);
    if (rc < 0)
        log_warn(-rc, "WATCHDOG_USEC is not a number of microseconds; no "
                      "watchdog");
    if (rc > 0) {
        /* Twice per interval, as sd_watchdog_enabled(3) advises; the tick
         * (MASTER_TICK_MS) is the finest step the master can keep. */
        notify_wd_ms = usec / 2000;
        if (notify_wd_ms < MASTER_TICK_MS)
            notify_wd_ms = MASTER_TICK_MS;
    }
    log_info(0, "systemd: notifying %s; watchdog %s%llu ms",
             getenv("NOTIFY_SOCKET"), notify_wd_ms ? "every " : "off",
             (unsigned long long)notify_wd_ms);
}

void
master_notify_ready(const struct master *m)
{
    char msg[NOTIFY_STATUS_MAX + 32];

    if (!notify_on)
        return;
    notify_status_text(m, notify_status, sizeof(notify_status));
    snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", notify_status);
    notify_send(msg);
}

void
master_notify_reloading(const struct master *m)
{
    struct timespec ts;
    char msg[96];

    if (!notify_on || !m->ready || m->state != MASTER_RUNNING)
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ull +
                 (unsigned long long)ts.tv_nsec / 1000);
    notify_send(msg);
    notify_reloading = 1;
}

void
master_notify_reloaded(const struct master *m)
{
    if (!notify_reloading)
        return;
    notify_reloading = 0;
    master_notify_ready(m);
}

void
master_notify_stopping(void)
{
    if (!notify_on || notify_stopping)
        return;
    notify_stopping = 1;
    notify_send("STOPPING=1\nSTATUS=draining");
}

void
master_notify_tick(const struct master *m, uint64_t now)
{
    char text[NOTIFY_STATUS_MAX], msg[NOTIFY_STATUS_MAX + 16];

    if (!notify_on)
        return;
    if (notify_wd_ms != 0 && now >= notify_wd_next) {
        notify_send("WATCHDOG=1");
        notify_wd_next = now + notify_wd_ms;
    }
    /* Before ready too: a node waiting for its peers says so in
     * systemctl status.  After STOPPING=1 the line stays "draining". */
    if (notify_stopping)
        return;
    notify_status_text(m, text, sizeof(text));
    if (strcmp(text, notify_status) == 0)
        return;
    snprintf(notify_status, sizeof(notify_status), "%s", text);
    snprintf(msg, sizeof(msg), "STATUS=%s", text);
    notify_send(msg);
}
