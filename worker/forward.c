/*
 * forward.c - see forward.h.
 *
 * A forward is out (pending: its call to the owner not answered yet), then
 * either relays the owner's answer or, when the owner applied nothing and
 * time is left, waits as a parked call (parked.h: no wake handle, its
 * client's socket watched) until it is served again (again()): at once
 * when the board changes so that the old owner is no longer live (on_moved),
 * else when its backoff ends (5, 10, 20 ... ms, BACKOFF_MAX_MS at most: a
 * wait, never a spin), which routes it afresh by the board, to the same
 * owner while it is still listed live.  Serving it again runs the route's
 * handler on the same request, which makes a new forward or serves it
 * here; the old one is freed.  While the handler runs, the request's
 * deadlines and its tries so far are in `redo`, which start() and
 * worker_forward_wait_left() read, so they do not start over.  A keyed
 * push (worker_route_keyed) whose call timed out or broke off is served
 * again once, the same way, with FORWARD_MS more.
 *
 * Gray failures: an owner whose connection is not made within
 * FORWARD_CONNECT_MS (nothing was sent) is marked suspect in the board,
 * for every worker of this node: it owns nothing here until the mark ends
 * (SHM_SUSPECT_MS without another failure) or a forward reaches it; the
 * request is served again at once, routed without it; the forward says
 * whom it routes around (worker_view_around), and a peer that sees the
 * suspect live serves the partition in its stead rather than answer
 * owner_moved (worker_view_standin, view.c says why that is sound).  A
 * presence channel is never routed so: it has one table, its owner's
 * in the membership, and while that owner is suspect here its calls
 * answer 503 owner_moved (worker_route_member).  A
 * forward that fails after its request went out may have been applied:
 * its 503 says "applied": "unknown"; one that failed before says
 * "applied": false.
 *
 * A short forward (push, pop or ack, no wait) may go to its owner
 * together with others in one batch call (coalesce.h) when calls to that
 * owner are in flight already; each still gets its own answer, or its
 * own share of the batch call's failure, in answered(), and is cancelled
 * through coalesce.c, so every rule here holds for it as if it had gone
 * alone.
 */
#include "worker/forward.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/peer_answer.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "shm/presence.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/coalesce.h"
#include "worker/conn.h"
#include "worker/parked.h"
#include "worker/view.h"
#include "worker/worker_int.h"

#define RETRY_MIN_MS   100 /* less time left than this: not tried again */
#define BACKOFF_MIN_MS 5   /* the first wait before another try */
#define BACKOFF_MAX_MS 100 /* the waits double up to this */

/* Why the owner's answer may be followed by another try. */
enum again {
    AGAIN_NO,      /* relay it */
    AGAIN_GONE,    /* 503 draining, or refused: the owner serves no more */
    AGAIN_MOVED,   /* 503 owner_moved: the views differ for now */
    AGAIN_SUSPECT, /* no connection in time: the owner is suspect now */
};

/* A request on its way to the owner; lives as long as the client's
 * request (freed from its on_done), or until it is served again. */
struct forward {
    struct park park; /* while it waits to be served again */
    struct worker *w;
    struct http_request *req;
    int pending;       /* the owner has not answered yet */
    int fd;            /* the client's socket, watched for hang-ups; -1: not */
    int by_id;         /* routed by an id's node (worker_forward_to) */
    int keyed;         /* a push whose messages all carry keys, on a queue
                          with a dedupe window: sent once more if its call
                          times out (worker_route_keyed) */
    int resent;        /* it was (SPEC §13: once) */
    uint64_t wait_end; /* a long poll's end (shm_now_ms()); 0: not one */
    uint64_t deadline; /* no try starts after this */
    uint64_t give_up;  /* a wait to try again ends by this */
    uint64_t moved_since; /* the first owner_moved answer; 0: none */
    unsigned tries;       /* owners' answers that led to another try */
    enum again why;       /* what the owner answered, while parked */
    unsigned status;      /* that answer, relayed if no try follows */
    long retry_after_s;
    struct http_buf body;
    int err;
    int sent; /* that answer's http_client_resp.sent */
    char error[128];
    char owner[SHM_BOARD_ID_MAX];
    size_t qlen;  /* a long poll's queue name; 0: not a long poll */
    char names[]; /* the queue's (what an empty answer names) */
};

#define FORWARD_OF(p) ((struct forward *)(void *)(p))

/* The request whose handler runs again now, and its deadlines. */
static struct {
    const struct http_request *req;
    uint64_t wait_end, deadline, moved_since;
    unsigned tries;
    int resent;
} redo;

/* Set by worker_route_keyed for the forward it starts. */
static int route_keyed;

static const struct park_ops waiting;

/* unwatch - the client's socket no longer names f. */
static void
unwatch(struct forward *f)
{
    struct worker *w = f->w;

    if (f->fd >= 0 && (size_t)f->fd < w->nconns && w->conns[f->fd].fwd == f)
        w->conns[f->fd].fwd = NULL;
    f->fd = -1;
}

/* forward_free - f and what it kept of an answer. */
static void
forward_free(struct forward *f)
{
    http_buf_free(&f->body);
    free(f);
}

/* forward_done - the client's request ended: a call still out is dropped
 * (the owner sees its connection close, as a client's own hang-up). */
static void
forward_done(void *arg, int sent_ok)
{
    struct forward *f = arg;

    (void)sent_ok;
    unwatch(f);
    worker_unpark(f->w, &f->park);
    if (f->pending)
        worker_coalesce_cancel(f->w, f);
    forward_free(f);
}

/* worker_forward_hangup - see forward.h. */
void
worker_forward_hangup(struct forward *f)
{
    unwatch(f);
    if (f->pending) {
        worker_coalesce_cancel(f->w, f);
        f->pending = 0;
        http_request_abort(f->req); /* forward_done frees f */
    }
}

/* worker_forward_drain - see forward.h. */
void
worker_forward_drain(struct worker *w)
{
    for (size_t fd = 0; fd < w->nconns; fd++) {
        struct forward *f = w->conns[fd].fwd;
        if (f == NULL || !f->pending)
            continue;
        unwatch(f);
        worker_coalesce_cancel(w, f);
        f->pending = 0;
        http_reply_error(f->req, 503, "draining",
                         "this node is stopping; ask another node");
        http_request_resume(f->req);
    }
}

/* owner_gone - whether node id is no longer a live member (dead, hung,
 * leaving) as the board has it now. */
static int
owner_gone(struct worker *w, const char *id)
{
    shm_owners_refresh(&w->owners, w->seg->board);
    for (int i = 0; i < w->owners.n; i++)
        if (strcmp(w->owners.m[i].id, id) == 0)
            return 0;
    return 1;
}

/* answer_empty - the long poll f's answer when its time is up: empty. */
static void
answer_empty(struct forward *f)
{
    struct http_buf b = {0};
    struct shm_name shown =
        worker_client_name((struct shm_name){f->names, f->qlen});

    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, shown.ptr, shown.len);
    http_buf_append_str(&b, ",\"messages\":[]}");
    http_reply(f->req, 200, &b);
}

/*
 * again - serve f's request once more: its route's handler routes it
 * afresh (to the partition's owner now, or here), with the deadlines f
 * had; f is freed.  A long poll whose time is up is answered empty (it
 * waited its whole timeout).  The request stays suspended if the handler
 * left it waiting (a new forward, a parked pop), else it is resumed.
 */
static void
again(struct forward *f)
{
    struct worker *w = f->w;
    struct http_request *req = f->req;

    unwatch(f);
    worker_unpark(w, &f->park);
    if (f->pending) {
        worker_coalesce_cancel(w, f);
        f->pending = 0;
    }
    if (f->wait_end != 0 && shm_now_ms() >= f->wait_end) {
        answer_empty(f);
        http_request_resume(req); /* forward_done frees f */
        return;
    }
    http_request_on_done(req, NULL, NULL);
    redo.req = req;
    redo.wait_end = f->wait_end;
    redo.deadline = f->deadline;
    redo.moved_since = f->moved_since;
    redo.tries = f->tries;
    redo.resent = f->resent;
    forward_free(f);
    w->redispatch(w, req);
    redo.req = NULL;
    if (http_request_replied(req))
        http_request_resume(req);
}

/* fail_body - 503 ephemeral_forward_failed, the sentence and whether the
 * owner may have applied the request ("unknown") or not (false). */
static void
fail_body(struct http_request *req, const char *msg, int maybe)
{
    struct http_buf b;

    http_buf_init(&b);
    http_buf_append_str(&b, "{\"error\": ");
    http_buf_append_json_str(&b, msg, strlen(msg));
    http_buf_append_str(&b, ", \"code\": \"ephemeral_forward_failed\", "
                            "\"applied\": ");
    http_buf_append_str(&b, maybe ? "\"unknown\"}" : "false}");
    http_reply(req, 503, &b);
}

/* relay_failed - the call did not come back with an answer (err); sent:
 * its request had gone out (http_client_resp.sent). */
static void
relay_failed(struct forward *f, int err, const char *error, int sent)
{
    char msg[512];

    shm_count(f->w->seg, f->w->set.slot, SHM_C_FORWARD_FAILED, 1);
    log_info(0, "forward to node %s failed: %s", f->owner, error);
    /* Refused, or no connection: nothing reached the owner.  Otherwise
     * the request may have been applied before the answer was lost: say
     * so. */
    if (err == -ECONNREFUSED || !sent) {
        snprintf(msg, sizeof(msg),
                 "the partition's owner, node '%s', could not be reached "
                 "(%s); nothing was applied; retry",
                 f->owner, error);
        fail_body(f->req, msg, 0);
    } else {
        snprintf(msg, sizeof(msg),
                 "the partition's owner, node '%s', did not answer (%s); it "
                 "may have applied the request before that, so a retried "
                 "push can be stored twice",
                 f->owner, error);
        fail_body(f->req, msg, 1);
    }
}

/* relay_kept - no other try: the owner's answer f kept goes to the
 * client after all. */
static void
relay_kept(struct forward *f)
{
    struct worker *w = f->w;

    worker_unpark(w, &f->park);
    if (f->err != 0) {
        relay_failed(f, f->err, f->error, f->sent);
    } else {
        char ra[24];
        if (f->retry_after_s > 0) {
            snprintf(ra, sizeof(ra), "%ld", f->retry_after_s);
            http_reply_header(f->req, "Retry-After", ra);
        }
        http_reply(f->req, f->status, &f->body);
    }
    http_request_resume(f->req);
}

/* classify - whether the owner's answer r leaves room for another try. */
static enum again
classify(const struct http_client_resp *r)
{
    if (worker_forward_gone(r))
        return AGAIN_GONE;
    if (!r->sent && (r->err == -ETIMEDOUT || r->err == -EHOSTUNREACH ||
                     r->err == -ENETUNREACH))
        return AGAIN_SUSPECT;
    if (r->err == 0 && r->status == 503 &&
        http_peer_error_is(r->body.data, r->body.len, "owner_moved"))
        return AGAIN_MOVED;
    return AGAIN_NO;
}

/* backoff - how long f waits before its next try: 5, 10, 20 ... ms up
 * to BACKOFF_MAX_MS, by the tries it had. */
static uint64_t
backoff(const struct forward *f)
{
    unsigned n = f->tries > 0 ? f->tries - 1 : 0;

    return n >= 5 ? BACKOFF_MAX_MS
                  : (BACKOFF_MIN_MS << n < BACKOFF_MAX_MS ? BACKOFF_MIN_MS << n
                                                          : BACKOFF_MAX_MS);
}

/* look - f's wait ended: a long poll whose time is up is answered empty
 * (again() does), one past give_up gets the owner's answer it kept;
 * otherwise it is tried again, routed by the board as it is now. */
static void
look(struct forward *f)
{
    uint64_t now = shm_now_ms();

    if ((f->wait_end != 0 && now >= f->wait_end) ||
        (f->why == AGAIN_GONE && owner_gone(f->w, f->owner))) {
        again(f);
    } else if (now >= f->give_up) {
        log_info(0,
                 "forward to node %s: no other owner could take it in time; "
                 "its answer goes to the client",
                 f->owner);
        relay_kept(f);
    } else {
        again(f);
    }
}

/* hold - the owner applied nothing (why): keep its answer r and wait,
 * parked, to serve f again: its backoff, cut short by give_up (the
 * request's deadline, or FORWARD_MOVED_WAIT_MS after the first
 * owner_moved) and by a long poll's end.  0; -1 when f cannot wait (the
 * request is not answered then). */
static int
hold(struct forward *f, enum again why, struct http_client_resp *r)
{
    struct worker *w = f->w;
    uint64_t now = shm_now_ms();

    f->why = why;
    f->tries++;
    f->status = r->status;
    f->retry_after_s = r->retry_after_s;
    f->err = r->err;
    f->sent = r->sent;
    snprintf(f->error, sizeof(f->error), "%s", r->error ? r->error : "");
    http_buf_free(&f->body);
    f->body = r->body;
    r->body = (struct http_buf){0};
    f->give_up = f->deadline;
    if (why == AGAIN_MOVED) {
        if (f->moved_since == 0)
            f->moved_since = now;
        if (f->moved_since + FORWARD_MOVED_WAIT_MS < f->give_up)
            f->give_up = f->moved_since + FORWARD_MOVED_WAIT_MS;
    }
    f->park.deadline = now + backoff(f);
    if (f->park.deadline > f->give_up)
        f->park.deadline = f->give_up;
    if (f->wait_end != 0 && f->park.deadline > f->wait_end)
        f->park.deadline = f->wait_end;
    f->park.ops = &waiting;
    f->park.req = f->req;
    f->park.fd = -1;
    return worker_park(w, &f->park) == 0 ? 0 : -1;
}

/* suspect - mark node id suspect in the board (on), or clear its mark: it
 * was reached.  Clearing costs one atomic load when nobody is suspect. */
static void
suspect(struct worker *w, const char *id, int on)
{
    struct shm_board_view v;
    uint64_t mask = on ? 0 : shm_board_suspects(w->seg->board);

    if (!on && mask == 0)
        return;
    worker_view_read(w, &v);
    for (uint32_t k = 0; k < v.nmembers && k < SHM_BOARD_MEMBERS; k++) {
        if (v.members[k].self || strcmp(v.members[k].id, id) != 0)
            continue;
        if (on) {
            if ((shm_board_suspects(w->seg->board) >> k & 1) == 0)
                log_warn(0,
                         "node %s: no connection in %d ms; suspect, its "
                         "partitions served as if it were dead",
                         id, FORWARD_CONNECT_MS);
            shm_board_suspect(w->seg->board, k, shm_now_ms());
        } else if (mask >> k & 1) {
            log_info(0, "node %s reached again: no longer suspect", id);
            shm_board_unsuspect(w->seg->board, k);
        }
    }
}

/* answered - relay the owner's answer, or say it did not come; or, when
 * the owner applied nothing and time is left, serve the request again. */
static void
answered(void *arg, struct http_client_resp *r)
{
    struct forward *f = arg;
    struct worker *w = f->w;
    enum again why = classify(r);
    uint64_t now = shm_now_ms();

    f->pending = 0;
    unwatch(f);
    if (why == AGAIN_SUSPECT && f->by_id)
        why = AGAIN_NO; /* an id's node is the only place it can go */
    if (why == AGAIN_SUSPECT)
        suspect(w, f->owner, 1);
    else if (r->err == 0 || r->sent)
        suspect(w, f->owner, 0);
    if (why != AGAIN_NO && !w->draining && now + RETRY_MIN_MS < f->deadline &&
        w->redispatch != NULL) {
        log_debug(0, "forward to node %s: %s; served again", f->owner,
                  r->err              ? r->error
                  : why == AGAIN_GONE ? "503 draining"
                                      : "503 owner_moved");
        if (why == AGAIN_GONE && f->by_id) {
            /* its ids are stale from now on (ack_route.h) */
            worker_view_mark_gone(w, f->owner);
            again(f);
            return;
        }
        if (why == AGAIN_SUSPECT) {
            again(f); /* routed without the suspect now */
            return;
        }
        if (hold(f, why, r) != 0) {
            relay_kept(f);
            return;
        }
        if (why == AGAIN_GONE && owner_gone(w, f->owner))
            again(f); /* the board says so already */
        return;
    }
    if (r->err != 0 && f->keyed && !f->resent && !w->draining &&
        w->redispatch != NULL) {
        /* The owner may have stored it: its window answers the same
         * keys with the first ids then, and stores nothing twice. */
        log_info(0,
                 "forward to node %s failed (%s); a push whose messages all "
                 "carry keys is sent once more",
                 f->owner, r->error ? r->error : "no answer");
        shm_count(w->seg, w->set.slot, SHM_C_FORWARD_FAILED, 1);
        f->resent = 1;
        f->deadline = now + FORWARD_MS;
        again(f);
        return;
    }
    if (r->err != 0) {
        relay_failed(f, r->err, r->error, r->sent);
    } else {
        shm_count(w->seg, w->set.slot, SHM_C_FORWARD_OK, 1);
        worker_forward_relay_headers(f->req, r);
        http_reply(f->req, r->status, &r->body);
    }
    http_request_resume(f->req);
}

/* The parked events of a forward waiting to be served again. */

/* on_wake - it waits on no handle; a wake of all finds nothing for it. */
static int
fw_on_wake(struct park *p, uint64_t handle, const struct park *empty)
{
    (void)p;
    (void)handle;
    (void)empty;
    return 1;
}

static void
fw_on_deadline(struct park *p)
{
    look(FORWARD_OF(p));
}

static void
fw_on_hangup(struct park *p)
{
    struct forward *f = FORWARD_OF(p);

    worker_unpark(f->w, p);
    http_request_abort(f->req); /* forward_done frees f */
}

static void
fw_on_revoke(struct park *p)
{
    struct forward *f = FORWARD_OF(p);

    worker_unpark(f->w, p);
    worker_auth_refuse(f->req, "the bearer token was revoked while this "
                               "request waited");
    http_request_resume(f->req);
}

/* on_drain - this node stops: its client goes to another node. */
static void
fw_on_drain(struct park *p)
{
    struct forward *f = FORWARD_OF(p);

    worker_unpark(f->w, p);
    http_reply_draining(f->req);
    http_request_resume(f->req);
}

/* on_moved - the board changed: the old owner may be gone from it, or
 * the partition placed elsewhere: routed afresh now, not after the
 * backoff.  An owner that stops and is still listed live waits on. */
static void
fw_on_moved(struct park *p)
{
    struct forward *f = FORWARD_OF(p);

    if (f->why == AGAIN_MOVED || owner_gone(f->w, f->owner))
        again(f);
}

/* on_stale - this node cannot tell who owns what now: no other try. */
static void
fw_on_stale(struct park *p)
{
    relay_kept(FORWARD_OF(p));
}

static const struct park_ops waiting = {
    fw_on_wake,  fw_on_deadline, fw_on_hangup, fw_on_revoke,
    fw_on_drain, fw_on_moved,    fw_on_stale,
};

/* worker_forward_moved - see forward.h. */
void
worker_forward_moved(struct worker *w)
{
    unsigned n = 0;

    for (size_t fd = 0; fd < w->nconns; fd++) {
        struct forward *f = w->conns[fd].fwd;
        if (f != NULL && f->pending && f->qlen > 0 && owner_gone(w, f->owner)) {
            shm_count(w->seg, w->set.slot, SHM_C_FORWARD_OWNER_MOVED, 1);
            again(f);
            n++;
        }
    }
    if (n > 0)
        log_info(0,
                 "%u long polls forwarded to nodes no longer live wait at "
                 "the partitions' next owners",
                 n);
}

/* worker_forward_revoked - see forward.h. */
void
worker_forward_revoked(struct worker *w)
{
    for (size_t fd = 0; fd < w->nconns; fd++) {
        struct forward *f = w->conns[fd].fwd;
        if (f == NULL || !f->pending || f->qlen == 0 ||
            worker_auth_valid(w, f->req))
            continue;
        unwatch(f);
        worker_coalesce_cancel(w, f);
        f->pending = 0;
        worker_auth_refuse(f->req, "the bearer token was revoked while "
                                   "this pop waited");
        http_request_resume(f->req);
    }
}

/* worker_forward_gone - see forward.h. */
int
worker_forward_gone(const struct http_client_resp *r)
{
    if (r->err != 0)
        return r->err == -ECONNREFUSED;
    return r->status == 503 &&
           http_peer_error_is(r->body.data, r->body.len, "draining");
}

/* worker_forward_wait_left - see forward.h. */
unsigned
worker_forward_wait_left(const struct http_request *req, unsigned ms)
{
    uint64_t now = shm_now_ms();

    if (req != redo.req || redo.wait_end == 0)
        return ms;
    if (now >= redo.wait_end)
        return 0;
    return redo.wait_end - now < ms ? (unsigned)(redo.wait_end - now) : ms;
}

/* watch - a long poll: a client that hangs up must drop the forward, or
 * the pop stays parked at the owner and takes a message for nobody. */
static void
watch(struct forward *f)
{
    struct worker_conn *k;
    int fd = http_request_fd(f->req), rc;

    if (fd < 0)
        return;
    rc = worker_conn_watch(f->w, fd, &k);
    if (rc == 0) {
        k->fwd = f;
        f->fd = fd;
    } else if (rc == -EPIPE) {
        worker_forward_hangup(f); /* gone already */
    }
}

/* own_addr - this node's client address as the board has it ("" when
 * unknown). */
static const char *
own_addr(const struct worker *w)
{
    return w->owners.self_addr;
}

/* start - worker_forward_to(); a long poll names its queue (empty
 * otherwise), so that a change of owners can let it go with an answer.
 * A request served again keeps the deadlines it had (redo). */
static void
start(struct worker *w, struct http_request *req, const char *id,
      const char *addr, unsigned wait_ms, struct shm_name queue, int by_id)
{
    const char *own = own_addr(w);
    const char *uri = http_request_uri(req);
    char *authz = NULL;
    /* No Content-Type (the empty line keeps libcurl from adding its
     * form type): a node reads none, and each byte of a call's head costs
     * libcurl 7.88 ~110 instructions, its printf writing them one by one
     * (http/client.c; hop2 measured ~45 k for a ~410-byte head). */
    const char *headers[4] = {FORWARD_HEADER ": 1", "Content-Type:"};
    const char *around = by_id ? NULL : worker_view_around(w);
    struct forward *f = calloc(1, sizeof(*f) + queue.len);
    uint64_t now = shm_now_ms();
    uint64_t deadline = now + wait_ms + FORWARD_MS;
    size_t len;
    int together;

    if (redo.req == req) {
        wait_ms = worker_forward_wait_left(req, wait_ms);
        deadline = redo.deadline;
        if (f != NULL) {
            f->moved_since = redo.moved_since;
            f->tries = redo.tries;
            f->resent = redo.resent;
        }
    }
    if (f != NULL) {
        f->fd = -1;
        f->park.fd = -1;
        f->by_id = by_id;
        f->keyed = route_keyed;
        f->qlen = queue.len;
        f->wait_end = wait_ms > 0 ? now + wait_ms : 0;
        f->deadline = deadline;
        memcpy(f->names, queue.ptr, queue.len);
    }
    const char *body = http_request_body(req, &len);
    struct http_client_req r = {
        .method = http_request_method(req),
        .port = HTTP_CLIENT_PEER,
        .addr = addr,
        .target = uri,
        .headers = headers,
        .nheaders = 2,
        .body = body,
        .body_len = len,
        .timeout_ms = deadline > now ? (unsigned)(deadline - now) : 1,
        .connect_timeout_ms = FORWARD_CONNECT_MS,
    };

    if (f == NULL || worker_auth_header(req, &authz) != 0 ||
        worker_addr_unusable(addr, own)) {
        free(f);
        free(authz);
        shm_count(w->seg, w->set.slot, SHM_C_FORWARD_FAILED, 1);
        http_reply_error(req, 503, "ephemeral_forward_failed",
                         "the partition's owner, node '%s', cannot be reached "
                         "at its address '%s'",
                         id, addr);
        return;
    }
    if (around != NULL)
        headers[r.nheaders++] = around;
    if (authz != NULL)
        headers[r.nheaders++] = authz; /* credentials go with the request */
    f->w = w;
    f->req = req;
    snprintf(f->owner, sizeof(f->owner), "%s", id);
    /* With calls to the owner in flight already, a short one may wait to
     * go with others (coalesce.h); its answer comes to answered() all the
     * same.  A keyed push sent once more goes alone. */
    together = worker_coalesce_eligible(http_request_route(req), wait_ms) &&
               !f->resent;
    if ((together ? worker_coalesce_request(w, id, &r, answered, f)
                  : http_client_request(w->client, &r, answered, f)) != 0) {
        free(f);
        shm_count(w->seg, w->set.slot, SHM_C_FORWARD_FAILED, 1);
        http_reply_errno(req, -ENOMEM, "forward");
    } else {
        f->pending = 1;
        http_request_on_done(req, forward_done, f);
        http_request_suspend(req);
        if (wait_ms > 0)
            watch(f);
    }
    free(authz); /* the client copied it */
}

/* worker_forward_to - see forward.h. */
void
worker_forward_to(struct worker *w, struct http_request *req, const char *id,
                  const char *addr, unsigned wait_ms)
{
    start(w, req, id, addr, wait_ms, (struct shm_name){"", 0}, 1);
}

/* shown_name - queue's name as its client knows it: a presence
 * channel's without its mark (worker/presence.h). */
static struct shm_name
shown_name(struct shm_name queue)
{
    struct shm_name s = worker_client_name(queue);

    if (s.len > 0 && s.ptr[0] == SHM_PRES_MARK)
        s = (struct shm_name){s.ptr + 1, s.len - 1};
    return s;
}

/* moved - a forwarded request for (queue, part), which this node does
 * not serve: 503 owner_moved (never a second hop). */
static void
moved(struct worker *w, struct http_request *req, struct shm_name queue,
      struct shm_name part)
{
    struct shm_name shown = shown_name(queue);

    shm_count(w->seg, w->set.slot, SHM_C_FORWARD_OWNER_MOVED, 1);
    http_reply_error(req, 503, "owner_moved",
                     "this node does not own partition '%.*s' of queue "
                     "'%.*s' (membership is changing); retry",
                     (int)part.len, part.ptr, (int)shown.len, shown.ptr);
}

/* worker_route - see forward.h. */
int
worker_route(struct worker *w, struct http_request *req, struct shm_name queue,
             struct shm_name part, unsigned wait_ms)
{
    int m;

    if (worker_serves_all(w) || shm_owner_here(&w->owners, queue, part))
        return 1;
    if (http_request_header(req, FORWARD_HEADER) != NULL) {
        if (worker_view_standin(w, req, queue, part))
            return 1; /* its sender routes around the owner */
        moved(w, req, queue, part);
        return 0;
    }
    m = shm_owner_pick(&w->owners, queue, part);
    start(w, req, w->owners.m[m].id, w->owners.m[m].addr, wait_ms,
          wait_ms > 0 ? queue : (struct shm_name){"", 0}, 0);
    return 0;
}

/*
 * worker_route_member - see forward.h.  Served where the membership
 * places (queue, part), a suspect owner counted in: a presence channel
 * has one table, its owner's, and a second one here (what the placement
 * without the suspect would make this node) would split the members
 * between two sets, its events between two queues, and leave ghosts and
 * gaps once the suspicion ends.  An owner this node suspects cannot be
 * reached now (a connection tried in vain within FORWARD_CONNECT_MS, and
 * the mark lasts SHM_SUSPECT_MS without another failure): the call is
 * answered 503 owner_moved at once, Retry-After 1 s, as a peer that
 * sees the owner live answers one routed around it (worker_view_standin);
 * a forward that finds no connection marks the owner suspect and is
 * served again (answered()), which ends so too.
 */
int
worker_route_member(struct worker *w, struct http_request *req,
                    struct shm_name queue, struct shm_name part)
{
    const struct shm_owners *all;
    struct shm_name shown;
    int m;

    all = worker_view_members(w); /* not worker_serves_all: it leaves
                                     suspects out */
    m = shm_owner_pick(all, queue, part);
    if (m < 0 || m == all->self)
        return 1; /* this node's, or nobody owns anything */
    if (http_request_header(req, FORWARD_HEADER) != NULL) {
        moved(w, req, queue, part);
        return 0;
    }
    if (worker_view_suspect(w, all->m[m].id)) {
        shown = shown_name(queue);
        shm_count(w->seg, w->set.slot, SHM_C_FORWARD_OWNER_MOVED, 1);
        http_reply_header(req, "Retry-After", "1");
        http_reply_error(req, 503, "owner_moved",
                         "channel '%.*s' is served by node '%s' alone, which "
                         "this node cannot reach now; retry",
                         (int)shown.len, shown.ptr, all->m[m].id);
        return 0;
    }
    start(w, req, all->m[m].id, all->m[m].addr, 0, (struct shm_name){"", 0}, 0);
    return 0;
}

/* worker_route_keyed - see forward.h. */
int
worker_route_keyed(struct worker *w, struct http_request *req,
                   struct shm_name queue, struct shm_name part)
{
    route_keyed = 1;
    int rc = worker_route(w, req, queue, part, 0);
    route_keyed = 0;
    return rc;
}

/* worker_forward_relay_headers - see forward.h. */
void
worker_forward_relay_headers(struct http_request *req,
                             const struct http_client_resp *r)
{
    char ra[24];

    if (r->retry_after_s > 0) {
        snprintf(ra, sizeof(ra), "%ld", r->retry_after_s);
        http_reply_header(req, "Retry-After", ra);
    }
    if (r->status == 401) /* the owner refused the token: SPEC §10 */
        http_reply_header(req, "WWW-Authenticate", "Bearer");
}
