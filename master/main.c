/*
 * main.c - mayflyd: the master process.
 *
 * Start: configuration (file, environment, -o flags), logging, optional
 * daemonizing and pidfile, the shared segment, the listening socket, then one
 * fork per worker.  Then one epoll loop over a signalfd and a 100 ms timerfd:
 * signals are read as data (no handlers, nothing async-signal-unsafe), and
 * every tick runs maintenance, respawns and the watchdog.
 *
 * Signals: TERM/INT drain (workers stop accepting, answer parked pops, finish
 * in-flight requests, exit; then the master exits 0), QUIT stops at once,
 * HUP reopens logs and re-reads the settings that can change at run time,
 * CHLD reaps and replaces dead workers.
 */
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/config.h"
#include "master/daemon.h"
#include "master/listen.h"
#include "master/master.h"
#include "shm/broker.h"
#include "shm/log.h"

#define TICK_MS  100
#define DRAIN_MS 30000 /* workers still running then are killed */
#define VERSION  "0.1.0"

static void
usage(FILE *f)
{
    fprintf(f, "usage: mayflyd [-c FILE] [-d] [-t] [-o key=value]... [-h] "
               "[-v]\n"
               "  -c FILE       configuration file (key = value)\n"
               "  -d            run as a daemon (pidfile, log to file or "
               "syslog)\n"
               "  -t            check the configuration and exit\n"
               "  -o key=value  override one setting (repeatable)\n"
               "  -h            this help\n"
               "  -v            print the version\n"
               "See mayflyd(8).\n");
}

/* make_params - what the segment is sized and defaulted from. */
static void
make_params(const struct config *c, struct shm_params *p)
{
    p->max_bytes = c->max_bytes;
    p->implicit_idle_s = c->implicit_idle_s;
    p->queue_max_bytes = c->queue_max_bytes;
    p->queue_max_length = c->queue_max_length;
    p->defaults = (struct shm_qopts){
        .max_length = c->queue_max_length,
        .max_bytes = c->queue_max_bytes,
        .policy = SHM_POLICY_REJECT,
        .lease_s = c->lease_s,
        .retry_limit = c->retry_limit,
    };
}

/* raise_nofile - parked long-polls each hold a socket: allow many. */
static void
raise_nofile(uint32_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t target = (rlim_t)want + 1024;
    if (target > rl.rlim_max)
        target = rl.rlim_max;
    if (rl.rlim_cur < target) {
        rl.rlim_cur = target;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            log_warn(errno, "setrlimit(RLIMIT_NOFILE, %llu) failed",
                     (unsigned long long)target);
    }
}

/* start_node - segment, socket and workers.  Exits on failure. */
static void
start_node(struct master *m)
{
    struct shm_params p = {0};
    char err[512];
    int rc, fd;

    m->nworkers = m->cfg.workers > 0 ? m->cfg.workers
                                     : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (m->nworkers < 1)
        m->nworkers = 1;
    if (m->nworkers > SHM_MAX_WORKERS - 1)
        m->nworkers = SHM_MAX_WORKERS - 1;
    make_params(&m->cfg, &p);
    p.workers = (uint32_t)m->nworkers;
    if (getrandom(&p.incarnation, sizeof(p.incarnation), 0) !=
        (ssize_t)sizeof(p.incarnation))
        p.incarnation = (uint64_t)getpid() << 32 ^ shm_now_ms();
    if (mkdir(m->cfg.data_dir, 0750) == -1 && errno != EEXIST)
        log_fatal(errno, "mkdir(%s) failed", m->cfg.data_dir);
    raise_nofile(m->cfg.max_connections);
    fd = master_listen(m->cfg.listen, err, sizeof(err));
    if (fd < 0)
        log_fatal(0, "%s", err);
    rc = shm_segment_create(&p, &m->seg);
    if (rc != 0)
        log_fatal(-rc, "cannot create the shared segment (max_bytes=%llu)",
                  (unsigned long long)p.max_bytes);
    daemon_ready();
    m->ws = (struct worker_settings){
        .listen_fd = fd,
        .max_connections = m->cfg.max_connections,
        .max_body_bytes = m->cfg.max_body_bytes,
        .max_wait_ms = m->cfg.max_wait_ms,
    };
    snprintf(m->ws.node_id, sizeof(m->ws.node_id), "%s", m->cfg.node_id);
    log_info(0,
             "mayflyd %s node %s listening on %s:%d, %d workers, "
             "incarnation %016llx",
             VERSION, m->cfg.node_id, m->cfg.listen, master_listen_port(fd),
             m->nworkers, (unsigned long long)p.incarnation);
    for (int i = 0; i < m->nworkers; i++) {
        if (master_spawn(m, i) != 0)
            log_fatal(0, "cannot start worker %d", i);
    }
}

/* reload - HUP: reopen the log, re-read the settings that can change. */
static void
reload(struct master *m)
{
    struct config fresh;
    struct shm_params p = {0};
    char report[1024];

    if (log_reopen() != 0)
        log_error(errno, "cannot reopen the log");
    master_signal_workers(m, SIGHUP);
    if (config_reload(&m->cfg, &fresh, report, sizeof(report)) != 0) {
        log_error(0, "reload: %s; keeping the running settings", report);
        return;
    }
    log_info(0, "reload: %s", report);
    enum log_level lvl;
    if (log_parse_level(fresh.log_level, &lvl) == 0)
        log_set_level(lvl);
    make_params(&fresh, &p);
    shm_segment_set_defaults(&m->seg, &p);
    /* Settings that need a restart keep their running values. */
    m->cfg.implicit_idle_s = fresh.implicit_idle_s;
    m->cfg.lease_s = fresh.lease_s;
    m->cfg.retry_limit = fresh.retry_limit;
    m->cfg.queue_max_length = fresh.queue_max_length;
    m->cfg.queue_max_bytes = fresh.queue_max_bytes;
    memcpy(m->cfg.log_level, fresh.log_level, sizeof(m->cfg.log_level));
}

/* on_signal - act on one signal read from the signalfd. */
static void
on_signal(struct master *m, int sig, uint64_t now)
{
    switch (sig) {
    case SIGCHLD:
        master_reap(m, now);
        break;
    case SIGTERM:
    case SIGINT:
        if (m->state == MASTER_RUNNING) {
            log_info(0, "%s: draining", strsignal(sig));
            m->state = MASTER_DRAINING;
            m->drain_deadline = now + DRAIN_MS;
            master_signal_workers(m, SIGTERM);
        }
        break;
    case SIGQUIT:
        log_info(0, "SIGQUIT: stopping now");
        m->state = MASTER_STOPPING;
        master_signal_workers(m, SIGKILL);
        break;
    case SIGHUP:
        reload(m);
        break;
    default:
        break;
    }
}

/* on_tick - every TICK_MS: maintenance and supervision. */
static void
on_tick(struct master *m, uint64_t now)
{
    if (m->state == MASTER_RUNNING) {
        int rc = shm_maintain(&m->seg, now);
        if (rc != 0)
            log_error(-rc, "maintenance failed");
        master_respawn_due(m, now);
        master_watchdog(m, now);
    } else if (m->state == MASTER_DRAINING && now > m->drain_deadline) {
        log_warn(0, "drain took longer than %d ms; killing the workers",
                 DRAIN_MS);
        master_signal_workers(m, SIGKILL);
        m->state = MASTER_STOPPING;
    }
}

/* loop_fds - the signalfd and timerfd the master's loop waits on. */
static int
loop_fds(int *sfd, int *tfd)
{
    sigset_t set;
    struct itimerspec its = {.it_interval = {0, TICK_MS * 1000000L},
                             .it_value = {0, TICK_MS * 1000000L}};

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        return -errno;
    *sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (*sfd == -1)
        return -errno;
    *tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (*tfd == -1 || timerfd_settime(*tfd, 0, &its, NULL) == -1)
        return -errno;
    return 0;
}

/* run - the master's loop, until every worker has exited after a stop. */
static void
run(struct master *m, int sfd, int tfd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};

    if (ep == -1)
        log_fatal(errno, "epoll_create1() failed");
    ev.data.fd = sfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    ev.data.fd = tfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    while (m->state == MASTER_RUNNING || master_live_workers(m) > 0) {
        struct epoll_event evs[4];
        int n = epoll_wait(ep, evs, 4, -1);
        uint64_t now = shm_now_ms();
        for (int i = 0; i < n; i++) {
            if (evs[i].data.fd == sfd) {
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                    on_signal(m, (int)si.ssi_signo, now);
            } else {
                uint64_t ticks;
                if (read(tfd, &ticks, sizeof(ticks)) > 0)
                    on_tick(m, now);
            }
        }
    }
    close(ep);
}

int
main(int argc, char **argv)
{
    static struct master m;
    char err[512];
    int action = 0, sfd, tfd;
    enum log_level lvl;

    log_set_role("master");
    if (config_load(&m.cfg, argc, argv, &action, err, sizeof(err)) != 0) {
        fprintf(stderr, "mayflyd: %s\n", err);
        return 1;
    }
    if (action == 'h') {
        usage(stdout);
        return 0;
    }
    if (action == 'v') {
        printf("mayflyd %s\n", VERSION);
        return 0;
    }
    if (m.cfg.check_only) {
        printf("mayflyd: configuration %s is valid\n",
               m.cfg.config_file[0] ? m.cfg.config_file : "(defaults)");
        return 0;
    }
    if (log_parse_level(m.cfg.log_level, &lvl) == 0)
        log_set_level(lvl);
    if (m.cfg.daemonize && daemon_detach() != 0)
        log_fatal(errno, "cannot daemonize");
    if (log_open(m.cfg.log) != 0)
        log_fatal(errno, "cannot open the log '%s'", m.cfg.log);
    if (m.cfg.pidfile[0] && daemon_pidfile_claim(m.cfg.pidfile) != 0)
        return 1;
    /* Block the signals before forking so no worker inherits a handler gap. */
    if (loop_fds(&sfd, &tfd) != 0)
        log_fatal(errno, "cannot set up signals");
    start_node(&m);
    run(&m, sfd, tfd);
    shm_segment_destroy(&m.seg);
    log_info(0, "stopped");
    return 0;
}
