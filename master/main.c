/*
 * main.c - mayflyd: the master process.
 *
 * Start: configuration (file, environment, -o flags), logging, optional
 * daemonizing and pidfile, the shared segment, the listening socket, then one
 * fork per worker.  Then one epoll loop over a signalfd and a 100 ms timerfd:
 * signals are read as data (no handlers, nothing async-signal-unsafe), and
 * every tick runs the watchdog, then maintenance, respawns, heartbeats.
 *
 * A worker stopped or spinning with a segment lock held must not stop the
 * master: its watchdog is what kills that worker, and its heartbeats and
 * raft keep the node in its cluster.  So each round of the loop waits
 * MASTER_LOCK_WAIT_MS at most for segment locks in all (shm/lock.h), what
 * a held lock guards waits for a later round, and the watchdog, which takes
 * no lock, runs first.  What the master alone writes (the board, the
 * catalog: lock-free readers) takes no lock at all.
 *
 * Signals: TERM/INT drain (the client port closes at once, so a new
 * connection is refused, not held: the master closes its copy and each
 * worker its own once it has taken what was queued; workers answer parked
 * pops, finish in-flight requests and exit; then the master hands over
 * partitions and raft leadership and exits 0), QUIT stops at once,
 * HUP reopens logs, re-reads the settings that can change at run time and
 * the TLS certificates,
 * USR1 reopens logs only (logrotate), CHLD reaps and replaces dead workers.
 * Under systemd (Type=notify) the master says when it is ready, reloads and
 * drains, and beats the watchdog from its tick (notify.h).
 */
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/auth.h"
#include "http/cors.h"
#include "http/jwt.h"
#include "master/cluster.h"
#include "master/cluster_client.h"
#include "master/config.h"
#include "master/configure.h"
#include "master/daemon.h"
#include "master/handover.h"
#include "master/listen.h"
#include "master/master.h"
#include "master/membership.h"
#include "master/notify.h"
#include "master/prefault.h"
#include "master/presence.h"
#include "master/queue_sync.h"
#include "master/tls.h"
#include "master/view.h"
#include "shm/arena.h"
#include "shm/board.h"
#include "shm/catalog.h"
#include "shm/check.h"
#include "shm/dead.h"
#include "shm/lock.h"
#include "shm/log.h"
#include "shm/maintain.h"
#include "shm/nonce.h"
#include "shm/stats.h"
#include "shm/tenants.h"

#define DRAIN_KILL_MS  30000 /* after TERM: workers still running are killed */
#define HANDOFF_MS     3000  /* raft leadership transfer on a graceful stop */
#define LOCK_REPORT_MS 5000  /* locks held past the bound: one warning */
#define VERSION        "0.1.0"
/* descriptors a worker wants beyond its connections */
#define NOFILE_RESERVE 1024

static void
usage(FILE *f)
{
    fprintf(f, "usage: mayflyd [-c FILE] [-d] [-t] [-o key=value]... [-h] "
               "[-v]\n"
               "       mayflyd --hash-token < TOKEN\n"
               "       mayflyd --check-segment PID\n"
               "  -c FILE       configuration file (key = value)\n"
               "  -d            run as a daemon (pidfile, log to file or "
               "syslog)\n"
               "  -t            check the configuration and exit\n"
               "  -o key=value  override one setting (repeatable)\n"
               "  -h            this help\n"
               "  -v            print the version\n"
               "  --hash-token  print the sha256: form of the token on stdin, "
               "for auth_file\n"
               "  --check-segment PID\n"
               "                check the shared segment of the running node "
               "whose master is PID\n"
               "See mayflyd(8).\n");
}

/*
 * hash_token - --hash-token: the first line of in (its newline, and a
 * carriage return before it, are not part of the token) as the sha256: form
 * an auth_file line starts with.  1 with a sentence on stderr when there is
 * no token: a line of blanks is a mistake, never a token.
 */
static int
hash_token(FILE *in, FILE *out)
{
    char *line = NULL, hash[AUTH_HASH_TEXT];
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, in);

    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        n--;
    if (n <= 0 || strspn(line, " \t") == (size_t)n) {
        fprintf(stderr, "mayflyd: --hash-token: no token on standard input\n");
        free(line);
        return 1;
    }
    if (n > AUTH_TOKEN_MAX) {
        fprintf(stderr,
                "mayflyd: --hash-token: the token is longer than %d bytes\n",
                AUTH_TOKEN_MAX);
        free(line);
        return 1;
    }
    auth_hash_text(line, (size_t)n, hash);
    explicit_bzero(line, cap);
    free(line);
    fprintf(out, "%s\n", hash);
    return 0;
}

/* check_segment - --check-segment PID: map that node's segment, check it
 * while it runs (check.h), print the verdict; 0 sound, 1 broken, 2 unable. */
static int
check_segment(const char *arg)
{
    struct shm_seg seg;
    struct shm_check_report r;
    char *end;
    long pid = strtol(arg, &end, 10);
    int rc;

    if (*arg == 0 || *end != 0 || pid <= 0) {
        fprintf(stderr,
                "mayflyd: --check-segment wants a master's pid, "
                "not '%s'\n",
                arg);
        return 2;
    }
    if ((rc = shm_check_attach((pid_t)pid, &seg)) != 0) {
        fprintf(stderr, "mayflyd: no mayfly segment in process %ld: %s\n", pid,
                strerror(-rc));
        return 2;
    }
    int64_t n = shm_check(&seg, 0, &r);
    shm_check_detach(&seg);
    if (n < 0) {
        fprintf(stderr, "mayflyd: check failed: %s\n", strerror((int)-n));
        return 2;
    }
    printf("%s: %llu queues, %llu partitions, %llu messages (%llu bytes), "
           "%llu leases, %llu groups; arena %llu cells linked, %llu free, "
           "%llu cached, %llu in flight; %llu partitions passed over\n",
           n == 0 ? "sound" : "BROKEN", (unsigned long long)r.queues,
           (unsigned long long)r.parts, (unsigned long long)r.messages,
           (unsigned long long)r.message_bytes, (unsigned long long)r.leases,
           (unsigned long long)r.groups, (unsigned long long)r.linked_cells,
           (unsigned long long)r.free_cells, (unsigned long long)r.cached_cells,
           (unsigned long long)r.inflight_cells, (unsigned long long)r.skipped);
    if (n > 0)
        printf("%llu problems; the first: %s\n", (unsigned long long)n,
               r.first);
    return n == 0 ? 0 : 1;
}

/* load_tokens - the auth_file's tokens into m->auth and the secret of
 * jwt_secret_file into the workers' settings, as the start and -t read
 * them (none without either).  0, or -1 with the sentence (the key, the
 * file, the line, the field) in err. */
static int
load_tokens(struct master *m, char *err, size_t errlen)
{
    if (m->cfg.jwt_secret_file[0] != '\0' &&
        http_jwt_key_load(m->cfg.jwt_secret_file, &m->ws.jwt, err, errlen) != 0)
        return -1;
    if (m->cfg.auth_file[0] == '\0')
        return 0;
    return auth_load(m->cfg.auth_file, &m->auth, err, errlen);
}

/* publish_tenants - give every tenant of the tokens its slot of counters
 * (shm/tenants.h); slots are never taken back, so a HUP only adds. */
static void
publish_tenants(struct master *m)
{
    if (m->seg.tenants == NULL)
        return;
    for (size_t i = 0; i < m->auth.ntokens; i++) {
        const char *t = m->auth.tokens[i].tenant;
        if (t[0] != '\0' && shm_tenants_add(m->seg.tenants, t) < 0)
            log_warn(0,
                     "tenant '%s' (auth_file line %u) gets no rate or "
                     "max_bytes: the node counts %d tenants at most",
                     t, m->auth.tokens[i].line, SHM_TENANTS_MAX - 1);
    }
}

/* loopback_only - whether the client address addr ("host:port") is on
 * the loopback interface alone. */
static int
loopback_only(const char *addr)
{
    char host[CONFIG_ADDR_MAX];
    const char *colon = strrchr(addr, ':');
    size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
    struct in6_addr a6;
    struct in_addr a4;

    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    if (n >= sizeof(host))
        return 0;
    memcpy(host, addr, n);
    host[n] = '\0';
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return strcmp(host, "localhost") == 0;
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

/*
 * worker_connections - parked long-polls each hold a socket: raise the
 * descriptor limit to want connections a worker and its own descriptors,
 * as far as the hard limit allows, and return how many connections a
 * worker may take within it.  Under the limit libmicrohttpd stops at its
 * own connection limit, from which it recovers cleanly; a worker that runs
 * out of descriptors instead (EMFILE at accept) could lose the end of
 * connections it holds and stay deaf (seen with clients that sent half a
 * request and hung up).
 */
static uint32_t
worker_connections(uint32_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return want;
    rlim_t target = (rlim_t)want + NOFILE_RESERVE;
    if (target > rl.rlim_max)
        target = rl.rlim_max;
    if (rl.rlim_cur < target) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = target;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            log_warn(errno, "setrlimit(RLIMIT_NOFILE, %llu) failed",
                     (unsigned long long)target);
            rl.rlim_cur = was;
        }
    }
    /* a reserve for the worker's own: a quarter of a small limit */
    rlim_t reserve = rl.rlim_cur / 4 < 64 ? rl.rlim_cur / 4 : 64;
    if ((rlim_t)want + reserve <= rl.rlim_cur)
        return want;
    uint32_t fit =
        rl.rlim_cur > reserve + 1 ? (uint32_t)(rl.rlim_cur - reserve) : 1;
    log_warn(0,
             "max_connections %u lowered to %u a worker: the descriptor "
             "limit is %llu (raise the hard limit: ulimit -Hn, LimitNOFILE)",
             want, fit, (unsigned long long)rl.rlim_cur);
    return fit;
}

/* listen_or_die - bind addr; exit with the reason on failure. */
static int
listen_or_die(const char *key, const char *addr)
{
    char err[512];
    int fd = master_listen(addr, err, sizeof(err));

    if (fd < 0)
        log_fatal(0, "%s: %s", key, err);
    return fd;
}

/*
 * start_node - segment, board, catalog, sockets and workers; then,
 * in the master only, the raft log and the cluster port.  Exits on failure.
 */
static void
start_node(struct master *m, int ep)
{
    struct shm_params p = {0};
    const char *why = NULL;
    int rc, fd, cfd;
    uint32_t conns;

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
    m->incarnation = p.incarnation;
    shm_dead_init(p.incarnation); /* the origin ids dead letters carry */
    conns = worker_connections(m->cfg.max_connections);
    fd = listen_or_die("listen", m->cfg.listen);
    cfd = listen_or_die("cluster_listen", m->cfg.cluster_listen);
    if (master_cluster_secret(m) != 0)
        exit(1);
    master_tls_load(m);
    rc = shm_segment_create(&p, &m->seg);
    if (rc != 0)
        log_fatal(-rc, "cannot create the shared segment (max_bytes=%llu)",
                  (unsigned long long)p.max_bytes);
    m->seg.board = shm_board_create();
    if (m->seg.board == NULL)
        log_fatal(errno, "cannot map the board");
    m->seg.nonces = shm_nonces_create();
    if (m->seg.nonces == NULL)
        log_fatal(errno, "cannot map the table of nonces");
    rc = shm_catalog_create(&m->seg.catalog, SHM_CATALOG_DEFAULT_BYTES);
    if (rc != 0)
        log_fatal(-rc, "cannot create the catalog");
    if (m->cfg.auth_file[0] != '\0') {
        if ((m->seg.tenants = shm_tenants_create()) == NULL)
            log_fatal(errno, "cannot map the tenants' counters");
        publish_tenants(m);
    }
    master_presence_start(m);
    /* The members before the workers start: a worker of a node with peers
     * serves nothing until it sees one live (worker_view_blind). */
    if (master_membership_start(m) != 0)
        log_fatal(0, "cannot list the cluster's members");
    master_membership_publish(m);
    m->ws.listen_fd = fd;
    m->ws.max_connections = conns;
    m->ws.max_body_bytes = m->cfg.max_body_bytes;
    m->ws.max_wait_ms = m->cfg.max_wait_ms;
    m->ws.max_delay_ms = m->cfg.max_delay_ms;
    m->ws.responders_idle_ms = m->cfg.responders_idle_ms;
    m->ws.busy_poll_us = m->cfg.busy_poll_us;
    m->ws.stream_max = m->cfg.stream_max;
    m->ws.stream_max_subs = m->cfg.stream_max_subs;
    m->ws.stream_buffer_bytes = m->cfg.stream_buffer_bytes;
    m->ws.stream_keepalive_s = m->cfg.stream_keepalive_s;
    m->ws.presence_grace_ms = m->cfg.presence_grace_ms;
    snprintf(m->ws.auth_file, sizeof(m->ws.auth_file), "%s", m->cfg.auth_file);
    m->ws.metrics_auth = strcmp(m->cfg.metrics_auth, "on") == 0;
    m->ws.auth = &m->auth;
    snprintf(m->ws.jwt_secret_file, sizeof(m->ws.jwt_secret_file), "%s",
             m->cfg.jwt_secret_file);
    if (http_cors_parse(m->cfg.cors_origins, &m->ws.cors, &why) != 0)
        log_fatal(0, "cors_origins: %s", why); /* config_load checked it */
    snprintf(m->ws.node_id, sizeof(m->ws.node_id), "%s", m->cfg.node_id);
    if (master_listen_dial(cfd, m->ws.cluster_addr,
                           sizeof(m->ws.cluster_addr)) != 0)
        log_fatal(errno, "getsockname(cluster port) failed");
    log_info(0,
             "mayflyd %s node %s: clients on %s (port %d), cluster on %s "
             "(port %d), %d workers, incarnation %016llx",
             VERSION, m->cfg.node_id, m->cfg.listen, master_listen_port(fd),
             m->cfg.cluster_listen, master_listen_port(cfd), m->nworkers,
             (unsigned long long)p.incarnation);
    for (int i = 0; i < m->nworkers; i++) {
        if (master_spawn(m, i) != 0)
            log_fatal(0, "cannot start worker %d", i);
    }
    /* Workers run; the master alone opens LMDB and the cluster port.  It
     * keeps the client socket open (never accepting) for respawns.  From
     * now on a worker may hold a lock: the master's waits are bounded. */
    shm_lock_bound(MASTER_LOCK_WAIT_MS);
    if (master_raft_open(m, shm_now_ms()) != 0 ||
        master_cluster_start(m, ep, cfd) != 0 ||
        master_cluster_client_start(ep, master_view_serving, &m->ws.peers) != 0)
        log_fatal(0, "cannot start the consensus log and cluster port");
    daemon_ready();
    master_view_start(m, shm_now_ms());
    master_membership_publish(m);
}

/* reload_tokens - HUP: the auth file and the secret of signed tokens
 * again, for the workers forked from now on (each running worker reads
 * them itself); a file that no longer loads leaves what was loaded. */
static void
reload_tokens(struct master *m)
{
    struct auth_table fresh;
    char err[1400];

    if (m->cfg.jwt_secret_file[0] != '\0' &&
        http_jwt_key_load(m->cfg.jwt_secret_file, &m->ws.jwt, err,
                          sizeof(err)) != 0)
        log_error(0, "reload: %s; keeping the secret loaded before", err);
    if (m->cfg.auth_file[0] == '\0')
        return;
    if (auth_load(m->cfg.auth_file, &fresh, err, sizeof(err)) != 0) {
        log_error(0, "reload: %s; keeping the tokens loaded before", err);
        return;
    }
    auth_free(&m->auth);
    m->auth = fresh;
    publish_tenants(m);
    log_info(0, "reload: auth_file %s: %zu tokens", m->cfg.auth_file,
             m->auth.ntokens);
}

/* reload - HUP: reopen the log, re-read the settings that can change, and
 * have the workers reopen theirs and take the new log level. */
static void
reload(struct master *m)
{
    struct config fresh;
    struct shm_params p = {0};
    char report[1024];
    enum log_level lvl;

    master_notify_reloading(m);
    if (log_reopen() != 0)
        log_error(errno, "cannot reopen the log");
    if (config_reload(&m->cfg, &fresh, report, sizeof(report)) != 0) {
        log_error(0, "reload: %s; keeping the running settings", report);
    } else {
        log_info(0, "reload: %s", report);
        /* fresh keeps the running values of restart-only keys. */
        m->cfg = fresh;
        if (log_parse_level(m->cfg.log_level, &lvl) == 0)
            log_set_level(lvl);
        make_params(&m->cfg, &p);
        shm_segment_set_defaults(&m->seg, &p);
        master_membership_publish(m);
    }
    reload_tokens(m);
    master_tls_reload(m);
    master_signal_workers(m, SIGHUP);
    master_notify_reloaded(m);
}

/* reopen_logs - USR1, after logrotate renamed the file: the master and the
 * workers reopen the log path; no setting is read again. */
static void
reopen_logs(struct master *m)
{
    int rc = log_reopen();

    if (rc != 0)
        log_error(-rc, "SIGUSR1: cannot reopen the log");
    else
        log_info(0, "SIGUSR1: log reopened");
    master_signal_workers(m, SIGUSR1);
}

/* Set by a SIGTERM while the presence channels are on their way. */
static int handing;

/* drain_when_handed - once the presence hand-over is done (at once for a
 * node alone), the drain: not ready, "leaving", the client port closed,
 * the workers TERMed. */
static void
drain_when_handed(struct master *m, uint64_t now)
{
    if (!handing || m->state != MASTER_RUNNING || master_presence_drain(m, now))
        return;
    handing = 0;
    m->state = MASTER_DRAINING;
    m->drain_deadline = now + DRAIN_KILL_MS;
    master_notify_stopping();
    master_membership_publish(m);
    master_membership_heartbeat(m, now, 1); /* "leaving" */
    /* Nothing is forked from now on: our copy of the client socket goes
     * before the workers close theirs (listen.h). */
    master_listen_stop(&m->ws.listen_fd);
    master_signal_workers(m, SIGTERM);
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
        if (m->state == MASTER_RUNNING && !handing) {
            log_info(0, "%s: draining", strsignal(sig));
            /* The presence channels go first, while the peers still
             * route here (master/presence.h); then the drain. */
            handing = 1;
            drain_when_handed(m, now);
        }
        break;
    case SIGQUIT:
        log_info(0, "SIGQUIT: stopping now");
        m->state = MASTER_STOPPING;
        master_notify_stopping();
        master_signal_workers(m, SIGKILL);
        break;
    case SIGHUP:
        reload(m);
        break;
    case SIGUSR1:
        reopen_logs(m);
        break;
    default:
        break;
    }
}

/* lock_report - at most every LOCK_REPORT_MS, a warning when segment
 * locks were held past the master's bound since the last one. */
static void
lock_report(uint64_t now)
{
    static uint64_t seen, next;
    uint64_t t = shm_lock_timeouts();

    if (t == seen || now < next)
        return;
    log_warn(0,
             "%llu segment lock waits reached their bound (%d ms) since the "
             "last report: a worker holds a lock (stopped or spinning?); "
             "the master leaves what it guards for a later round, and its "
             "watchdog kills a worker that stopped beating",
             (unsigned long long)(t - seen), MASTER_LOCK_WAIT_MS);
    seen = t;
    next = now + LOCK_REPORT_MS;
}

/* on_tick - every MASTER_TICK_MS: the watchdog first (no lock: lock.h),
 * then maintenance and supervision. */
static void
on_tick(struct master *m, uint64_t now)
{
    if (m->state == MASTER_RUNNING) {
        master_watchdog(m, now);
        int rc = shm_maintain(&m->seg, now);
        if (rc != 0)
            log_error(-rc, "maintenance failed");
        shm_arena_flush(&m->seg, SHM_STATS_MASTER);
        master_presence_tick(m, now);
        master_respawn_due(m, now);
        master_queue_sync_tick(m);
        master_configure_tick(m, now);
        master_membership_heartbeat(m, now, 0);
        master_handover_tick(m, now);
        master_view_check_ready(m, now);
        master_membership_publish(m); /* liveness ages with the clock */
        master_view_beat(m, now);     /* after: the view workers trust is new */
    } else if (m->state == MASTER_DRAINING) {
        /* Keep saying "leaving" (one lost heartbeat must not keep us in
         * the peers' placement) and keep the members' view fresh for the
         * hand-over. */
        master_membership_heartbeat(m, now, 0);
        master_membership_publish(m);
        master_respawn_due(m, now); /* only reaps: nothing is forked now */
        master_queue_sync_tick(m);
        if (now > m->drain_deadline && !m->drain_killed) {
            /* The reap repairs what they held: the hand-over still runs. */
            log_warn(0, "drain took longer than %d ms; killing the workers",
                     DRAIN_KILL_MS);
            master_signal_workers(m, SIGKILL);
            m->drain_killed = 1;
        }
    }
    lock_report(now);
    master_notify_tick(m, now); /* the systemd watchdog: the loop runs */
}

/* loop_fds - the signalfd and timerfd the master's loop waits on. */
static int
loop_fds(int *sfd, int *tfd)
{
    sigset_t set;
    struct itimerspec its = {.it_interval = {0, MASTER_TICK_MS * 1000000L},
                             .it_value = {0, MASTER_TICK_MS * 1000000L}};

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
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

/* loop_timeout - ms until the nearest raft or cluster deadline. */
static int
loop_timeout(struct master *m, uint64_t now)
{
    uint64_t due = master_raft_deadline(m);
    int t = due == UINT64_MAX ? MASTER_TICK_MS
            : due > now       ? (int)(due - now)
                              : 0;
    int others[] = {
        master_cluster_timeout_ms(m),
        master_cluster_client_timeout_ms(),
        master_prefault_timeout_ms(now),
    };

    if (t > MASTER_TICK_MS)
        t = MASTER_TICK_MS;
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        if (others[i] >= 0 && others[i] < t)
            t = others[i];
    return t;
}

/* stopped - whether the loop is done: workers gone and, on a drain,
 * raft leadership handed over (or the hand-off timed out). */
static int
stopped(struct master *m, uint64_t now)
{
    if (m->state == MASTER_RUNNING || master_live_workers(m) > 0)
        return 0;
    if (m->state == MASTER_STOPPING)
        return 1;
    if (m->handoff_until == 0 && master_handover_drain(m, now))
        return 0; /* partitions on their way to their next owners */
    if (m->handoff_until == 0) {
        if (!master_raft_hand_off(m))
            return 1;
        log_info(0, "handing raft leadership over");
        m->handoff_until = now + HANDOFF_MS;
    }
    return !master_raft_is_leader(m) || now >= m->handoff_until;
}

/* watch - add fd to ep under tag. */
static void
watch(int ep, int fd, uint64_t tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == -1)
        log_fatal(errno, "epoll_ctl(ADD, %d) failed", fd);
}

/* run - the master's loop, until every worker has exited after a stop. */
static void
run(struct master *m, int ep, int sfd, int tfd)
{
    for (;;) {
        struct epoll_event evs[32];
        uint64_t now = shm_now_ms();
        int n = epoll_wait(ep, evs, 32, loop_timeout(m, now));

        now = shm_now_ms();
        shm_lock_bound(MASTER_LOCK_WAIT_MS); /* this round's, afresh */
        master_view_woke(m, now); /* before anything reads the view */
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == MASTER_TAG_SIGNAL) {
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                    on_signal(m, (int)si.ssi_signo, now);
            } else if (tag == MASTER_TAG_TIMER) {
                uint64_t ticks;
                if (read(tfd, &ticks, sizeof(ticks)) > 0)
                    on_tick(m, now);
            } else {
                master_cluster_client_event(tag, evs[i].events);
            }
        }
        if (now >= master_raft_deadline(m))
            master_raft_tick(m, now);
        if (m->state == MASTER_RUNNING)
            master_prefault(&m->seg, m->cfg.max_bytes, now);
        master_cluster_client_run();
        master_cluster_run(m);
        drain_when_handed(m, now);
        if (stopped(m, now))
            return;
    }
}

int
main(int argc, char **argv)
{
    static struct master m;
    char err[512];
    int action = 0, sfd = -1, tfd = -1, ep;
    enum log_level lvl;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--check-segment") == 0) {
            if (i == 1 && argc == 3)
                return check_segment(argv[2]);
            fprintf(stderr, "mayflyd: --check-segment takes one argument, "
                            "a master's pid, and no other option: "
                            "mayflyd --check-segment PID\n");
            return 2;
        }
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
    if (action == CONFIG_ACTION_HASH_TOKEN)
        return hash_token(stdin, stdout);
    if (load_tokens(&m, err, sizeof(err)) != 0) {
        fprintf(stderr, "mayflyd: %s\n", err);
        return 1;
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
    master_notify_start(&m);
    if (m.cfg.auth_file[0] == '\0' && m.cfg.jwt_secret_file[0] == '\0' &&
        !loopback_only(m.cfg.listen))
        log_warn(0,
                 "listen %s reaches beyond loopback and no auth_file is set: "
                 "anyone who reaches the port may push, pop, reset and "
                 "delete any queue (SPEC §10)",
                 m.cfg.listen);
    /* data_dir first: it is created there, and the pidfile may live in it. */
    if (daemon_datadir_lock(m.cfg.data_dir) != 0)
        return 1;
    if (m.cfg.pidfile[0] && daemon_pidfile_claim(m.cfg.pidfile) != 0)
        return 1;
    /* Block the signals before forking: workers unblock their own. */
    if (loop_fds(&sfd, &tfd) != 0)
        log_fatal(errno, "cannot set up signals");
    if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1)
        log_fatal(errno, "epoll_create1() failed");
    watch(ep, sfd, MASTER_TAG_SIGNAL);
    watch(ep, tfd, MASTER_TAG_TIMER);
    start_node(&m, ep);
    run(&m, ep, sfd, tfd);
    master_cluster_stop(&m);
    master_cluster_client_stop();
    master_handover_stop();
    master_presence_stop();
    master_queue_sync_stop();
    master_raft_close(&m);
    master_tls_free(&m);
    shm_segment_destroy(&m.seg);
    log_info(0, "stopped");
    return 0;
}
