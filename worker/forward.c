/*
 * forward.c - see forward.h.
 */
#include "worker/forward.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/conn.h"
#include "worker/view.h"
#include "worker/worker_int.h"

/* A request on its way to the owner; lives as long as the client's
 * request (freed from its on_done). */
struct forward {
    struct worker *w;
    struct http_request *req;
    int pending; /* the owner has not answered yet */
    int fd;      /* the client's socket, watched for hang-ups; -1: not */
    char owner[SHM_BOARD_ID_MAX];
    size_t qlen;  /* a long poll's queue name; 0: not a long poll */
    char names[]; /* the queue's (what an empty answer names) */
};

/* unwatch - the client's socket no longer names f. */
static void
unwatch(struct forward *f)
{
    struct worker *w = f->w;

    if (f->fd >= 0 && (size_t)f->fd < w->nconns && w->conns[f->fd].fwd == f)
        w->conns[f->fd].fwd = NULL;
    f->fd = -1;
}

/* forward_done - the client's request ended: a call still out is dropped
 * (the owner sees its connection close, as a client's own hang-up). */
static void
forward_done(void *arg, int sent_ok)
{
    struct forward *f = arg;

    (void)sent_ok;
    unwatch(f);
    if (f->pending)
        http_client_cancel(f->w->client, f);
    free(f);
}

/* worker_forward_hangup - see forward.h. */
void
worker_forward_hangup(struct forward *f)
{
    unwatch(f);
    if (f->pending) {
        http_client_cancel(f->w->client, f);
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
        http_client_cancel(w->client, f);
        f->pending = 0;
        http_reply_error(f->req, 503, "draining",
                         "this node is stopping; ask another node");
        http_request_resume(f->req);
    }
}

/* owner_gone - whether the node the long poll f waits at is no longer a
 * live member (dead, hung, leaving).  A live one that lost the partition
 * lets its own parked pop go (worker_pop_moved) and that answer is relayed:
 * cancelling the call could drop an answer already on its way, and with
 * autoAck the message in it. */
static int
owner_gone(const struct worker *w, const struct forward *f)
{
    for (int i = 0; i < w->owners.n; i++)
        if (strcmp(w->owners.m[i].id, f->owner) == 0)
            return 0;
    return 1;
}

/* let_go - answer the long poll f as a parked pop whose partition moved is
 * answered: empty, so that its client asks again and reaches the owner.
 * The call to the old owner is dropped: should it resume, it sees the
 * connection closed and leases nothing for it, as after a hang-up. */
static void
let_go(struct forward *f)
{
    struct worker *w = f->w;
    struct http_buf b = {0};

    unwatch(f);
    http_client_cancel(w->client, f);
    f->pending = 0;
    shm_count(w->seg, w->set.slot, SHM_C_FORWARD_OWNER_MOVED, 1);
    struct shm_name shown =
        worker_client_name((struct shm_name){f->names, f->qlen});
    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, shown.ptr, shown.len);
    http_buf_append_str(&b, ",\"messages\":[]}");
    http_reply(f->req, 200, &b);
    http_request_resume(f->req);
}

/* worker_forward_moved - see forward.h. */
void
worker_forward_moved(struct worker *w)
{
    unsigned n = 0;

    for (size_t fd = 0; fd < w->nconns; fd++) {
        struct forward *f = w->conns[fd].fwd;
        if (f != NULL && f->pending && f->qlen > 0 && owner_gone(w, f)) {
            let_go(f);
            n++;
        }
    }
    if (n > 0)
        log_info(0,
                 "%u long polls forwarded to nodes no longer live were let "
                 "go (answered empty)",
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
        http_client_cancel(w->client, f);
        f->pending = 0;
        worker_auth_refuse(f->req, "the bearer token was revoked while "
                                   "this pop waited");
        http_request_resume(f->req);
    }
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

/* answered - relay the owner's answer, or say it did not come. */
static void
answered(void *arg, struct http_client_resp *r)
{
    struct forward *f = arg;

    f->pending = 0;
    unwatch(f);
    if (r->err != 0) {
        shm_count(f->w->seg, f->w->set.slot, SHM_C_FORWARD_FAILED, 1);
        log_info(0, "forward to node %s failed: %s", f->owner, r->error);
        /* Refused: nothing reached the owner.  Otherwise the request may
         * have been applied before the answer was lost: say so. */
        if (r->err == -ECONNREFUSED)
            http_reply_error(f->req, 503, "ephemeral_forward_failed",
                             "the partition's owner, node '%s', could not be "
                             "reached (%s); nothing was applied; retry",
                             f->owner, r->error);
        else
            http_reply_error(f->req, 503, "ephemeral_forward_failed",
                             "the partition's owner, node '%s', did not answer "
                             "(%s); it may have applied the request before "
                             "that, so a retried push can be stored twice",
                             f->owner, r->error);
    } else {
        shm_count(f->w->seg, f->w->set.slot, SHM_C_FORWARD_OK, 1);
        worker_forward_relay_headers(f->req, r);
        http_reply(f->req, r->status, &r->body);
    }
    http_request_resume(f->req);
}

/* own_addr - this node's client address as the board has it ("" when
 * unknown). */
static const char *
own_addr(const struct worker *w)
{
    return w->owners.self_addr;
}

/* start - worker_forward_to(); a long poll names its queue (empty
 * otherwise), so that a change of owners can let it go with an answer. */
static void
start(struct worker *w, struct http_request *req, const char *id,
      const char *addr, unsigned wait_ms, struct shm_name queue)
{
    const char *own = own_addr(w);
    const char *uri = http_request_uri(req);
    char *authz = NULL;
    const char *headers[3] = {FORWARD_HEADER ": 1",
                              "Content-Type: application/json"};
    struct forward *f = calloc(1, sizeof(*f) + queue.len);
    size_t len;

    if (f != NULL) {
        f->fd = -1;
        f->qlen = queue.len;
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
        .timeout_ms = wait_ms + FORWARD_MS,
        .connect_timeout_ms = FORWARD_MS,
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
    if (authz != NULL)
        headers[r.nheaders++] = authz; /* credentials go with the request */
    f->w = w;
    f->req = req;
    snprintf(f->owner, sizeof(f->owner), "%s", id);
    if (http_client_request(w->client, &r, answered, f) != 0) {
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
    start(w, req, id, addr, wait_ms, (struct shm_name){"", 0});
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
        struct shm_name shown = worker_client_name(queue);
        shm_count(w->seg, w->set.slot, SHM_C_FORWARD_OWNER_MOVED, 1);
        http_reply_error(req, 503, "owner_moved",
                         "this node does not own partition '%.*s' of queue "
                         "'%.*s' (membership is changing); retry",
                         (int)part.len, part.ptr, (int)shown.len, shown.ptr);
        return 0;
    }
    m = shm_owner_pick(&w->owners, queue, part);
    start(w, req, w->owners.m[m].id, w->owners.m[m].addr, wait_ms,
          wait_ms > 0 ? queue : (struct shm_name){"", 0});
    return 0;
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
