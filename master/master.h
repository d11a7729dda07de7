/*
 * master.h - the master process's state, shared by its files.
 *
 * The master parses the configuration, creates the segment and the listening
 * socket, forks and supervises the workers, runs maintenance on the segment,
 * and drains on SIGTERM.  It never serves the client port: on SIGTERM it
 * closes its copy of that socket (listen.h).
 */
#ifndef MAYFLY_MASTER_MASTER_H
#define MAYFLY_MASTER_MASTER_H

#include <sys/types.h>

#include <stdint.h>

#include "http/auth.h"
#include "master/config.h"
#include "master/membership.h"
#include "master/raft_node.h"
#include "shm/segment.h"
#include "worker/worker.h"

#define MASTER_TICK_MS 100 /* the master's loop: maintenance, beats */
/* What one round of the master's loop waits for segment locks at most
 * (shm/lock.h): a worker's hold is microseconds; one this long is stopped
 * or spinning, and the master skips what it guards until the next round. */
#define MASTER_LOCK_WAIT_MS 10

/* Epoll tags of the master's loop (the cluster client owns
 * MASTER_TAG_CLIENT|fd). */
#define MASTER_TAG_SIGNAL  1u
#define MASTER_TAG_TIMER   2u
#define MASTER_TAG_CLUSTER 3u
#define MASTER_TAG_CLIENT  (1ull << 32)

struct http_server;
struct http_tls;

enum master_state { MASTER_RUNNING, MASTER_DRAINING, MASTER_STOPPING };

struct master_child {
    pid_t pid;           /* 0: not running */
    uint64_t started_ms; /* when it was forked */
    uint64_t respawn_at; /* when to fork it again (0: not pending) */
    uint32_t backoff_ms; /* next respawn delay after a quick death */
    int unreaped;        /* dead, its slot not repaired yet (a lock was
                            held past the bound): not forked again */
};

struct master {
    struct config cfg;
    struct auth_table auth; /* the auth_file's tokens (SPEC §10); workers
                               get them as forked and re-read on HUP */
    struct shm_seg seg;
    struct worker_settings ws; /* template; slot set per child */
    int nworkers;
    struct master_child child[SHM_MAX_WORKERS];
    enum master_state state;
    /* Ready: started (raft open, workers forked) and, with peers, the raft
     * log applied up to a leader's commit index (view.c). */
    int ready;
    uint64_t ready_since; /* with peers: when the wait to be ready
                             began (view.c) */
    uint64_t woke_at;     /* the loop's last wake-up (view.c) */
    uint64_t stalled_at;  /* after a stall: the wake-up before it */
    uint64_t resumed_at;  /* and the one after it; 0: no stall */
    uint64_t incarnation; /* this start's, in every message id */
    uint64_t drain_deadline;
    int drain_killed; /* the drain outlived DRAIN_KILL_MS (main.c): workers killed */
    uint64_t handoff_until; /* drain: raft hand-off deadline, 0 before */
    struct master_members members;
    struct master_raft raft;
    struct http_server *cluster_srv; /* the cluster port */
    struct http_tls *cluster_tls;    /* the cluster port's certificate, or
                                        NULL (the client port's: ws.tls) */
};

/* master_spawn - fork worker slot; the child never returns.  0 or -errno. */
int master_spawn(struct master *m, int slot);

/*
 * master_reap - collect exited children; a worker that died while the node
 * runs is repaired in the segment and scheduled for respawn with backoff.
 */
void master_reap(struct master *m, uint64_t now);

/* master_respawn_due - reap again the slots not yet repaired, and fork
 * the workers whose respawn time has come. */
void master_respawn_due(struct master *m, uint64_t now);

/* master_watchdog - SIGKILL a worker whose heartbeat stopped.  Takes no
 * segment lock: the tick runs it first. */
void master_watchdog(struct master *m, uint64_t now);

/* master_signal_workers - send sig to every live worker. */
void master_signal_workers(struct master *m, int sig);

/* master_live_workers - how many workers are running. */
int master_live_workers(const struct master *m);

#endif
