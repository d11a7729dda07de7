/*
 * workers.c - fork, reap, respawn and watch the worker processes.
 *
 * A worker that dies while the node runs (a crash, an OOM kill, a SIGKILL
 * from an operator or from the watchdog) is repaired in the segment -- locks
 * it held, cells it had in flight, its waiter bits -- and forked again, after
 * a delay that doubles while it keeps dying young.  The node keeps serving on
 * the other workers meanwhile.  The repair waits for each lock within the
 * master's bound (shm/lock.h); one that another worker holds longer (stopped
 * too, say) leaves the slot unreaped, and each tick reaps it again until it
 * is done: only then is the slot forked again.
 *
 * The watchdog reads each worker's heartbeat (an atomic in its slot) and
 * kills with SIGKILL: no segment lock, so the master's tick runs it first,
 * and a worker stopped or spinning with a lock held is killed WATCHDOG_MS
 * after its last beat whatever that lock keeps from the rest of the tick.
 */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/master.h"
#include "master/presence.h"
#include "shm/lock.h"
#include "shm/log.h"
#include "shm/maintain.h"
#include "shm/stats.h"

#define RESPAWN_MIN_MS 50
#define RESPAWN_MAX_MS 5000
#define YOUNG_MS       2000  /* dying sooner than this doubles the backoff */
#define WATCHDOG_MS    15000 /* a worker silent this long is killed */

/* int_cmp - qsort's order of ints. */
static int
int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

/* close_span - close descriptors lo..hi: one close_range(), or one close()
 * each where the kernel lacks it (before 5.9) or a filter refuses it, below
 * the descriptor limit (no descriptor is numbered past it). */
static void
close_span(unsigned lo, unsigned hi)
{
    struct rlimit rl;
    rlim_t limit = 1u << 20; /* Linux's own ceiling (fs.nr_open default) */

    if (close_range(lo, hi, 0) == 0)
        return;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < limit)
        limit = rl.rlim_cur;
    for (rlim_t fd = lo; fd <= hi && fd < limit; fd++)
        close((int)fd);
}

/*
 * close_inherited - in a new worker, close every descriptor but the ones it
 * uses: the standard three, the client listening socket, the segment's
 * eventfds and a log file.  The rest are the master's (raft log, cluster
 * sockets, its epoll, signalfd and timer, the segment's memfds): a worker
 * holding a copy of a peer connection would keep it open after the master
 * closes it, and a respawned worker would inherit whatever the master had
 * open at that moment.
 */
static void
close_inherited(const struct master *m)
{
    int keep[SHM_MAX_WORKERS + 2], n = 0;
    unsigned lo = 3;

    keep[n++] = m->ws.listen_fd;
    keep[n++] = log_file_fd();
    for (int i = 0; i < m->nworkers; i++)
        keep[n++] = m->seg.wake_fd[i];
    qsort(keep, (size_t)n, sizeof(keep[0]), int_cmp);
    for (int i = 0; i < n; i++) {
        if (keep[i] < (int)lo)
            continue; /* -1, a standard stream, or a duplicate */
        if ((unsigned)keep[i] > lo)
            close_span(lo, (unsigned)keep[i] - 1);
        lo = (unsigned)keep[i] + 1;
    }
    close_span(lo, ~0u);
}

int
master_spawn(struct master *m, int slot)
{
    struct master_child *c = &m->child[slot];
    pid_t parent = getpid();
    pid_t pid = fork();

    if (pid == -1) {
        int e = errno;
        log_error(e, "fork() for worker %d failed", slot);
        return -e;
    }
    if (pid == 0) {
        char role[16];
        sigset_t back;

        /* The worker dies with its master, whatever killed the master. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* the master died before prctl() */
            _exit(1);
        /* The start-up terminal (or init script's pipe) is the master's
         * until daemon_ready(); a worker logs to the log target only. */
        log_mirror_stderr(0);
        if (m->cfg.daemonize) {
            int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
            if (null != -1) {
                dup2(null, STDERR_FILENO);
                close(null);
            }
        }
        /* TERM, INT, HUP and USR1 stay blocked: the worker reads them from
         * its signalfd, and one sent before its loop is set up must wait
         * for it rather than kill it (their default action). */
        sigemptyset(&back);
        sigaddset(&back, SIGCHLD);
        sigaddset(&back, SIGQUIT);
        sigprocmask(SIG_UNBLOCK, &back, NULL);
        close_inherited(m);
        snprintf(role, sizeof(role), "worker%d", slot);
        log_set_role(role);
        shm_lock_bound(0); /* a worker waits for a lock as long as it takes */
        struct worker_settings ws = m->ws;
        ws.slot = slot;
        worker_main(&m->seg, &ws);
    }
    c->pid = pid;
    c->started_ms = shm_now_ms();
    c->respawn_at = 0;
    shm_slot_heartbeat(&m->seg, slot, c->started_ms);
    log_debug(0, "worker %d started, pid %d", slot, (int)pid);
    return 0;
}

/* child_slot - the slot of worker pid, or -1. */
static int
child_slot(const struct master *m, pid_t pid)
{
    for (int i = 0; i < m->nworkers; i++) {
        if (m->child[i].pid == pid)
            return i;
    }
    return -1;
}

/* describe - "exit 3" or "signal 9 (Killed)" for a wait status. */
static void
describe(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exit %d", WEXITSTATUS(status));
    else
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
}

void
master_reap(struct master *m, uint64_t now)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int slot = child_slot(m, pid);
        char why[64];

        if (slot < 0)
            continue;
        struct master_child *c = &m->child[slot];
        c->pid = 0;
        describe(status, why, sizeof(why));
        /* Repair before anyone can take the slot again. */
        c->unreaped = shm_worker_reap(&m->seg, slot) != 0;
        master_presence_worker_gone(m, slot); /* its streams' members */
        if (m->state != MASTER_RUNNING) {
            log_info(0, "worker %d (pid %d) stopped: %s", slot, (int)pid, why);
            continue;
        }
        if (now - c->started_ms < YOUNG_MS)
            c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : RESPAWN_MIN_MS;
        else
            c->backoff_ms = RESPAWN_MIN_MS;
        if (c->backoff_ms > RESPAWN_MAX_MS)
            c->backoff_ms = RESPAWN_MAX_MS;
        c->respawn_at = now + c->backoff_ms;
        shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_WORKER_RESTARTS, 1);
        log_warn(0, "worker %d (pid %d) died: %s; respawning in %u ms", slot,
                 (int)pid, why, c->backoff_ms);
    }
}

void
master_respawn_due(struct master *m, uint64_t now)
{
    for (int i = 0; i < m->nworkers; i++) {
        struct master_child *c = &m->child[i];
        if (c->pid == 0 && c->unreaped) {
            c->unreaped = shm_worker_reap(&m->seg, i) != 0;
            if (!c->unreaped)
                log_info(0, "worker %d's slot repaired", i);
        }
        if (c->pid == 0 && !c->unreaped && c->respawn_at != 0 &&
            now >= c->respawn_at && m->state == MASTER_RUNNING) {
            if (master_spawn(m, i) != 0)
                c->respawn_at = now + RESPAWN_MAX_MS;
        }
    }
}

void
master_watchdog(struct master *m, uint64_t now)
{
    for (int i = 0; i < m->nworkers; i++) {
        struct master_child *c = &m->child[i];
        uint64_t beat = shm_slot_last_beat(&m->seg, i);
        if (c->pid != 0 && beat != 0 && now > beat + WATCHDOG_MS) {
            log_error(0,
                      "worker %d (pid %d) made no progress for %llu ms; "
                      "killing it",
                      i, (int)c->pid, (unsigned long long)(now - beat));
            kill(c->pid, SIGKILL);
        }
    }
}

void
master_signal_workers(struct master *m, int sig)
{
    for (int i = 0; i < m->nworkers; i++) {
        if (m->child[i].pid != 0)
            kill(m->child[i].pid, sig);
    }
}

int
master_live_workers(const struct master *m)
{
    int n = 0;
    for (int i = 0; i < m->nworkers; i++)
        n += m->child[i].pid != 0;
    return n;
}
