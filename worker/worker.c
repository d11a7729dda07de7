/*
 * worker.c - a worker process: one epoll loop over libmicrohttpd's epoll fd,
 * this worker's wake eventfd, a signalfd, the HTTP client's sockets, and the
 * client sockets a long poll has waited on, parked or forwarded (conn.h;
 * EPOLLRDHUP: a client that leaves while it waits takes nothing with it).
 *
 * The loop sleeps until the nearest of MHD's timer, libcurl's, the first
 * parked call's deadline, and the heartbeat interval (the master kills a
 * worker whose heartbeat stops).  SIGTERM drains: stop accepting, answer
 * parked pops, let in-flight requests finish, exit 0.
 *
 * A turn costs few system calls, since the workers are bound by them:
 * awake, the worker is disarmed (shm_wake_disarm), so pushes, its own
 * included, post wakes without writing its eventfd; it drains them before
 * it sleeps, answers the pops they woke and runs MHD again at once to send
 * the answers.  The eventfd is edge-triggered and never read (its count
 * means nothing).  MHD runs only when its epoll fired, a request resumed, or
 * its timer is due.  Before it sleeps, a worker polls for busy_poll_us
 * (wait_events): waking a halted virtual CPU costs more than a request.
 */
#include "worker/worker.h"

#include <sys/epoll.h>
#include <sys/signalfd.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/client.h"
#include "http/node_call.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/server.h"
#include "http/tls.h"
#include "shm/arena.h"
#include "shm/board.h"
#include "shm/log.h"
#include "shm/region.h"
#include "shm/stats.h"
#include "shm/wake.h"
#include "worker/ack.h"
#include "worker/admin.h"
#include "worker/authz.h"
#include "worker/coalesce.h"
#include "worker/conn.h"
#include "worker/declare.h"
#include "worker/depth.h"
#include "worker/forward.h"
#include "worker/health.h"
#include "worker/node_batch.h"
#include "worker/openapi.h"
#include "worker/parked.h"
#include "worker/pop.h"
#include "worker/pop_post.h"
#include "worker/presence.h"
#include "worker/presence_stream.h"
#include "worker/push.h"
#include "worker/redrive.h"
#include "worker/rpc.h"
#include "worker/status_page.h"
#include "worker/stream.h"
#include "worker/worker_int.h"

#define BEAT_MS        1000 /* heartbeat at least this often */
#define DRAIN_MAX_MS   5000 /* after TERM: exit then, requests in flight or not */
#define DRAIN_GRACE_MS 100
#define WAKE_BATCH     256
#define SETTLE_ROUNDS  8  /* drain-and-send rounds before sleeping */
#define ACCEPT_ROUNDS  64 /* MHD accepts up to 10 a round */
#define TAG_WAKE       ((uint64_t)1)
#define TAG_SIGNAL     ((uint64_t)2)
#define TAG_HTTP       ((uint64_t)3)
#define TAG_CLIENT     ((uint64_t)1 << 63) /* | fd: the client's sockets */
/* WORKER_TAG_CONN | fd (conn.h): client sockets watched for hang-ups. */

static void serve(struct worker *w, struct http_request *req,
                  enum http_route r);

/* always_served - the reads a draining or stale node still answers: what
 * the node says about itself, the page that shows it, and the API
 * description. */
static int
always_served(enum http_route r)
{
    return r == HTTP_ROUTE_HEALTH || r == HTTP_ROUTE_METRICS ||
           r == HTTP_ROUTE_STATUS_PAGE || r == HTTP_ROUTE_OPENAPI;
}

/* dispatch - the http/ handler: route to the worker's handler. */
static void
dispatch(void *ctx, struct http_request *req)
{
    struct worker *w = ctx;
    enum http_route r = http_request_route(req);
    /* A node's call is signed; a client may not pass for one. */
    enum http_node_call nc = http_node_call(req, w->set.secret, w->seg,
                                            w->seg->nonces, shm_now_ms());

    if (nc == HTTP_CALL_REFUSED)
        return;
    if (r == HTTP_ROUTE_NODE_BATCH && nc != HTTP_CALL_NODE) {
        http_reply_error(req, 401, "unauthorized",
                         "/api/v1/node/batch carries requests one node "
                         "forwards to another: it takes signed calls between "
                         "nodes only");
        return;
    }
    if (http_reply_preflight(req))
        return; /* OPTIONS: a browser's, before any token (SPEC §11) */
    /* Draining: what still arrives on open connections goes elsewhere.  The
     * master's flag counts too: /health says draining from the moment it is
     * set, before this worker has read its own SIGTERM. */
    if ((w->draining || shm_board_stopping(w->seg->board)) &&
        !always_served(r)) {
        if (r == HTTP_ROUTE_SUBSCRIBE)
            worker_subscribe_later(req); /* an EventSource retries */
        else
            http_reply_draining(req);
        return;
    }
    /* A master that stopped beating (stopped, stalled) leaves a view of
     * the members its peers may no longer share: who owns a partition,
     * where an ack goes, who a reset must reach.  Refuse until it beats
     * again; the client retries here or asks another node (SPEC §5). */
    if (!always_served(r) && shm_board_stale(w->seg->board)) {
        if (r == HTTP_ROUTE_SUBSCRIBE) {
            worker_subscribe_later(req);
            return;
        }
        http_reply_error(req, 503, "owner_moved",
                         "this node cannot tell who owns what now: its "
                         "view of the cluster is stale; retry, or ask "
                         "another node");
        return;
    }
    /* A batch's requests carry their own tokens, each checked as its
     * entry goes through here (node_batch.h). */
    if (r == HTTP_ROUTE_NODE_BATCH) {
        worker_node_batch(w, req);
        return;
    }
    if (!worker_auth_caller(w, req, r))
        return; /* 401 */
    /* Nor can a node that has heard none of its peers yet: serving every
     * partition itself, as a node alone does, it would keep what others
     * own, and free a message one group completed before it learns the
     * groups the cluster knows (SPEC §5), which another reads later. */
    if (!always_served(r) && worker_view_blind(w)) {
        if (r == HTTP_ROUTE_SUBSCRIBE) {
            worker_subscribe_later(req);
            return;
        }
        http_reply_error(req, 503, "owner_moved",
                         "this node is starting and has not heard from its "
                         "peers yet, so it cannot tell who owns what; retry, "
                         "or ask another node");
        return;
    }
    serve(w, req, r);
}

/* serve - the route's handler. */
static void
serve(struct worker *w, struct http_request *req, enum http_route r)
{
    switch (r) {
    case HTTP_ROUTE_PUSH:
        worker_push(w, req);
        break;
    case HTTP_ROUTE_POP:
        if (strcmp(http_request_method(req), "POST") == 0)
            worker_pop_post(w, req);
        else
            worker_pop(w, req);
        break;
    case HTTP_ROUTE_ACK:
        worker_ack(w, req);
        break;
    case HTTP_ROUTE_EXTEND:
        worker_extend(w, req);
        break;
    case HTTP_ROUTE_CONFIGURE:
        worker_configure(w, req);
        break;
    case HTTP_ROUTE_RESET:
        worker_reset(w, req);
        break;
    case HTTP_ROUTE_DELETE_QUEUE:
        worker_delete(w, req);
        break;
    case HTTP_ROUTE_LIST_QUEUES:
        worker_list(w, req);
        break;
    case HTTP_ROUTE_DEPTH:
        worker_depth(w, req);
        break;
    case HTTP_ROUTE_HEALTH:
        worker_health(w, req);
        break;
    case HTTP_ROUTE_METRICS:
        worker_metrics(w, req);
        break;
    case HTTP_ROUTE_STATUS_PAGE:
        worker_status_page(req);
        break;
    case HTTP_ROUTE_OPENAPI:
        worker_openapi(req);
        break;
    case HTTP_ROUTE_REQUEST:
        worker_request_verb(w, req);
        break;
    case HTTP_ROUTE_SUBSCRIBE:
        worker_subscribe(w, req);
        break;
    case HTTP_ROUTE_REDRIVE:
        worker_redrive(w, req);
        break;
    case HTTP_ROUTE_PRES_ENTER:
        worker_presence_enter(w, req);
        break;
    case HTTP_ROUTE_PRES_LEAVE:
        worker_presence_leave(w, req);
        break;
    case HTTP_ROUTE_PRES_LIST:
        worker_presence_list(w, req);
        break;
    default:
        break; /* http/ answers 404/405 itself */
    }
}

/* redispatch - a request a forward gave back (forward.h: its owner
 * stopped before applying it) goes to its route's handler again, which
 * routes it afresh; its caller's token is found again first, as dispatch
 * found it (the signature was checked, and its nonce taken, then). */
static void
redispatch(struct worker *w, struct http_request *req)
{
    enum http_route r = http_request_route(req);

    if (worker_auth_caller(w, req, r))
        serve(w, req, r);
}

/* watch - add fd to the loop's epoll under tag. */
static void
watch(struct worker *w, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) == -1)
        log_fatal(errno, "epoll_ctl(ADD, %d) failed", fd);
}

/* count_refused - a request past max_connections was refused (http/server.h:
 * on_refused): counted for mayfly_connections_refused_total. */
static void
count_refused(void *ctx)
{
    struct worker *w = ctx;

    shm_count(w->seg, w->set.slot, SHM_C_CONNECTIONS_REFUSED, 1);
}

/* setup - epoll, signals, the HTTP server.  Exits on failure. */
static void
setup(struct worker *w)
{
    sigset_t set;
    struct http_server_opts o = {
        .max_connections = w->set.max_connections,
        .max_body_bytes = w->set.max_body_bytes,
        /* answers are copies of messages: no more than the node holds */
        .max_unsent_bytes = shm_params_of(w->seg)->max_bytes,
        .connection_timeout_s = 300,
        .tls = w->set.tls,
        .on_refused = count_refused,
        .cors = &w->set.cors,
    };

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    /* A client that vanishes mid-reply must not kill the worker. */
    signal(SIGPIPE, SIG_IGN);
    w->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    if (w->sfd == -1 || w->ep == -1)
        log_fatal(errno, "signalfd/epoll_create1 failed");
    shm_owners_init(&w->owners);
    w->redispatch = redispatch;
    worker_auth_init(w);
    if (park_set_init(&w->parks) != 0)
        log_fatal(ENOMEM, "cannot allocate the parked-pop index");
    w->http = http_server_start(w->set.listen_fd, &o, dispatch, w);
    if (w->http == NULL)
        log_fatal(0, "cannot start the HTTP server");
    http_server_on_close(w->http, worker_conn_closed, w);
    http_server_on_open(w->http, worker_conn_opened, w);
    watch(w, http_server_fd(w->http), EPOLLIN, TAG_HTTP);
    /* Edge-triggered: each write wakes us once, and it is never read. */
    watch(w, w->seg->wake_fd[w->set.slot], EPOLLIN | EPOLLET, TAG_WAKE);
    watch(w, w->sfd, EPOLLIN, TAG_SIGNAL);
    /* libcurl's global state made here, in this process: a worker the
     * master respawned drops the copy it inherited (client.h). */
    if (http_client_global_init() != 0)
        log_fatal(0, "cannot initialise libcurl");
    w->client = http_client_new(w->ep, TAG_CLIENT);
    if (w->client == NULL || http_client_set_peers(w->client, &w->set.peers))
        log_fatal(ENOMEM, "cannot start the HTTP client");
}

/* on_wake - wake the parked calls (parked.h) that pushes woke; re-arms the
 * queue, so a push after this writes the eventfd.  Streams read up to the
 * horizon taken before the drain, once it is over (stream.h). */
static void
on_wake(struct worker *w)
{
    uint64_t handles[WAKE_BATCH];
    int got;

    worker_streams_before_drain(w);
    while ((got = shm_wake_drain(w->seg, w->set.slot, handles, WAKE_BATCH)) !=
           0) {
        if (got == -EOVERFLOW) {
            worker_parked_wake_all(w);
            continue;
        }
        for (int i = 0; i < got; i++)
            worker_parked_wake(w, handles[i]);
        if (got < WAKE_BATCH)
            break;
    }
    worker_streams_after_drain(w);
}

/* reload_tls - HUP: the client port's certificate and key read again;
 * the handshakes from now on present them (tls.h). */
static void
reload_tls(struct worker *w)
{
    char err[512];

    if (w->set.tls != NULL && http_tls_reload(w->set.tls, err, sizeof(err)))
        log_error(0, "reload: %s; keeping the running certificate", err);
}

/* take_queued - accept what the kernel queued on the client socket (MHD
 * accepts in its run), a few rounds at most. */
static void
take_queued(struct worker *w)
{
    for (int i = 0; i < ACCEPT_ROUNDS && http_server_accept_pending(w->http);
         i++)
        http_server_run(w->http);
}

/* stop_listening - SIGTERM: the client port closes now, so a new
 * connection is refused at once rather than held (master/listen.h).  What
 * the kernel queued is accepted first, and answered 503 draining like
 * every request on an open connection: a close with connections still
 * queued resets them, and their clients cannot tell that nothing was read.
 * Then the kernel completes no new handshake (a socket filter drops bare
 * SYNs: one caught in the instant before the close is sent again a second
 * later, and refused), what completed meanwhile is accepted too, and MHD
 * hands the socket back to be closed. */
static void
stop_listening(struct worker *w)
{
    take_queued(w);
    http_server_refuse_new(w->http);
    take_queued(w);
    http_server_quiesce(w->http);
}

/* on_signal - TERM/INT start the drain, HUP reopens the log, takes the
 * log level the master published, re-reads the auth file (SPEC §10) and
 * reads the certificate again, USR1 reopens the log only. */
static void
on_signal(struct worker *w, uint64_t now)
{
    struct signalfd_siginfo si;
    int rc;

    while (read(w->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP || si.ssi_signo == SIGUSR1) {
            struct shm_board_view v;
            if (si.ssi_signo == SIGHUP) {
                shm_board_read(w->seg->board, &v);
                log_set_level((enum log_level)v.log_level);
                if (worker_auth_reload(w)) {
                    /* a revoked token's long polls end now */
                    worker_parked_revoked(w);
                    worker_forward_revoked(w);
                }
                reload_tls(w);
            }
            if ((rc = log_reopen()) != 0)
                log_error(-rc, "cannot reopen the log");
        } else if (!w->draining) {
            w->draining = 1;
            w->drain_since = now;
            stop_listening(w);
            worker_parked_drain(w);
            worker_forward_drain(w);
        }
    }
}

/* settle - before sleeping: drain the wakes (the last drain arms the
 * queue) and run MHD again while it has work at once (answers to send,
 * connections it still counts as ready), a few rounds at most: each round
 * spares an epoll_wait of ours that would return at once. */
static void
settle(struct worker *w)
{
    for (int i = 0;; i++) {
        on_wake(w);
        if (i + 1 == SETTLE_ROUNDS || (!http_server_resume_pending(w->http) &&
                                       http_server_timeout_ms(w->http) != 0))
            return;
        shm_wake_disarm(w->seg, w->set.slot);
        http_server_run(w->http);
    }
}

/* on_conn - events on client socket fd (conn.h).  When the client shut
 * its side (EPOLLRDHUP, or an error), what waits on it, a request
 * forwarded to the owner or a parked pop, is dropped or answered; with
 * nothing waiting, MHD is shown the end after its run. */
static void
on_conn(struct worker *w, int fd, uint32_t events)
{
    struct worker_conn *k = worker_conn_event(w, fd, events);

    if (k == NULL)
        return;
    if (k->fwd != NULL)
        worker_forward_hangup(k->fwd);
    else if (k->park != NULL)
        worker_parked_hangup(k->park);
    else
        worker_conn_poke_later(w, fd);
}

/* owners_moved - the long polls waiting on owners that changed are let go:
 * parked here, and forwarded elsewhere.  Requests refresh w->owners too:
 * compare with what the pops were last checked against, not with the last
 * refresh. */
static void
owners_moved(struct worker *w)
{
    shm_owners_refresh(&w->owners, w->seg->board);
    if (w->owners.sig == w->parks_sig)
        return;
    w->parks_sig = w->owners.sig;
    worker_parked_moved(w);
    worker_forward_moved(w);
}

/* view_stale - when the master's view goes stale (dispatch refuses new
 * requests from then on), the pops parked by it are let go too: a frozen
 * master's peers soon serve its partitions, and pushes go there, so these
 * would wait out their timeouts for nothing.  Asked again, their clients
 * meet 503 owner_moved and try another node. */
static void
view_stale(struct worker *w)
{
    int stale = shm_board_stale(w->seg->board);

    if (stale && !w->stale)
        worker_parked_stale(w);
    w->stale = stale;
}

/* next_timeout - ms the loop may sleep; notes when MHD's timer is due. */
static int
next_timeout(struct worker *w, uint64_t now, uint64_t *mhd_due)
{
    int t = BEAT_MS;
    int mt = http_server_timeout_ms(w->http);
    int ct = http_client_timeout_ms(w->client);
    struct park *p = park_first(&w->parks);

    *mhd_due = mt >= 0 ? now + (uint64_t)mt : UINT64_MAX;
    if (mt >= 0 && mt < t)
        t = mt;
    if (ct >= 0 && ct < t)
        t = ct;
    if (p != NULL) {
        int d = p->deadline > now ? (int)(p->deadline - now) : 0;
        if (d < t)
            t = d;
    }
    if (w->draining)
        t = t > 10 ? 10 : t;
    return t;
}

/*
 * wait_events - epoll_wait; but a worker with nothing due at once first
 * polls for up to busy_poll_us.  On a virtual machine an idle CPU halts,
 * and waking it for the next event costs tens of microseconds, more than
 * serving a request; a worker that has just served one often gets the
 * next within that time (the responder's ack after the request it woke,
 * the reply to a request parked here).  With nothing by then it sleeps
 * as before, so an idle worker spends busy_poll_us after each event.
 */
static int
wait_events(struct worker *w, struct epoll_event *evs, int max, int timeout)
{
    if (timeout != 0 && w->set.busy_poll_us > 0) {
        uint64_t until = shm_now_us() + w->set.busy_poll_us;
        do {
            int n = epoll_wait(w->ep, evs, max, 0);
            if (n != 0)
                return n;
        } while (shm_now_us() < until);
    }
    return epoll_wait(w->ep, evs, max, timeout);
}

/* worker_main - see worker.h. */
void
worker_main(struct shm_seg *seg, const struct worker_settings *s)
{
    static struct worker w;

    w.seg = seg;
    w.set = *s;
    w.incarnation = shm_params_of(seg)->incarnation;
    shm_slot_claim(seg, s->slot, (int)getpid());
    setup(&w);
    for (;;) {
        struct epoll_event evs[64];
        uint64_t mhd_due, now = shm_now_ms();
        int n = wait_events(&w, evs, 64, next_timeout(&w, now, &mhd_due));
        int mhd_ready = 0;

        shm_wake_disarm(seg, s->slot);
        now = shm_now_ms();
        shm_slot_heartbeat(seg, s->slot, now);
        shm_arena_flush(seg, s->slot);
        worker_presence_stream_tick(&w, now);
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == TAG_HTTP)
                mhd_ready = 1;
            else if (tag == TAG_SIGNAL)
                on_signal(&w, now);
            else if (tag & TAG_CLIENT)
                http_client_on_event(w.client, (int)(tag & ~TAG_CLIENT),
                                     evs[i].events);
            else if (tag & WORKER_TAG_CONN)
                on_conn(&w, (int)(tag & ~WORKER_TAG_CONN), evs[i].events);
            /* TAG_WAKE: settle() drains the queue below. */
        }
        worker_parked_expire(&w, now);
        owners_moved(&w);
        view_stale(&w);
        http_client_on_timeout(w.client);
        if (mhd_ready || now >= mhd_due || w.draining ||
            http_server_resume_pending(w.http))
            http_server_run(w.http);
        settle(&w);
        /* the forwards this turn queued go out together (coalesce.h) */
        worker_coalesce_turn(&w);
        /* Done draining once no request is in flight and every connection
         * accepted has begun its first: idle keep-alive connections close
         * with the server (DRAIN_GRACE_MS at least). */
        if (w.draining && (http_server_connections(w.http) == 0 ||
                           (http_server_busy(w.http) == 0 &&
                            now >= w.drain_since + DRAIN_GRACE_MS) ||
                           now >= w.drain_since + DRAIN_MAX_MS))
            break;
    }
    http_server_stop(w.http);
    log_debug(0, "drained");
    exit(0);
}
