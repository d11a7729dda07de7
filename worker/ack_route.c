/*
 * ack_route.c - see ack_route.h.
 */
#include "worker/ack_route.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/client.h"
#include "http/peer_answer.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/log.h"
#include "shm/stats.h"
#include "worker/ack_results.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/view.h"
#include "worker/worker_int.h"

/* ack_route_plan - see ack_route.h. */
enum ack_route
ack_route_plan(struct worker *w, struct http_request *req, const uint64_t *incs,
               uint32_t n, struct ack_routes *rt)
{
    struct shm_board_view v;
    const char *own;
    int foreign = 0;

    rt->n = 0;
    rt->mine = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (incs[i] == w->incarnation)
            rt->mine++;
        else
            foreign = 1;
    }
    /* A forwarded ack is applied where it landed: never a second hop. */
    if (!foreign || http_request_header(req, FORWARD_HEADER) != NULL)
        return ACK_ROUTE_HERE;
    own = worker_view_read(w, &v);
    for (uint32_t k = 0; k < v.nmembers; k++) {
        const struct shm_member *mb = &v.members[k];
        int named = 0;

        /* A leaving member answers 503 draining and its ids go stale with
         * the hand-over: they are stale here at once.  So are those of one
         * that told us so itself before its master's word came (view.h). */
        if (mb->self || mb->state == SHM_MEMBER_DEAD ||
            mb->state == SHM_MEMBER_LEAVING || mb->incarnation == 0 ||
            worker_addr_unusable(mb->addr, own) ||
            worker_view_gone(w, mb->id, mb->incarnation))
            continue;
        for (uint32_t i = 0; i < n && !named; i++)
            named = incs[i] == mb->incarnation;
        if (!named)
            continue;
        rt->m[rt->n].inc = mb->incarnation;
        memcpy(rt->m[rt->n].id, mb->id, sizeof(rt->m[0].id));
        memcpy(rt->m[rt->n].addr, mb->addr, sizeof(rt->m[0].addr));
        rt->n++;
    }
    if (rt->n == 0)
        return ACK_ROUTE_HERE; /* nobody holds them: stale here */
    return rt->n == 1 && rt->mine == 0 ? ACK_ROUTE_ONE : ACK_ROUTE_FAN;
}

/* One ack spread over nodes. */
struct fan {
    struct worker *w;
    struct http_request *req;
    struct ack_routes rt;
    struct ack_hold hold;
    const struct http_str *ids;
    size_t stride;
    uint32_t n;
    uint64_t *incs;
    struct ack_then then;
    const char **extra; /* each entry's additions; NULL: none yet */
    char **own;         /* those taken from other nodes' answers */
    int waiting;
    char failed[SHM_BOARD_ID_MAX]; /* a member that did not answer */
    struct fan_peer {
        struct fan *f;
        int k;
        int pending;
    } peer[SHM_BOARD_MEMBERS];
};

/* fan_free - drop calls still out, free the rest. */
static void
fan_free(struct fan *f)
{
    for (int k = 0; k < f->rt.n; k++)
        if (f->peer[k].pending)
            http_client_cancel(f->w->client, &f->peer[k]);
    f->hold.free_parse(f->hold.parse);
    free(f->hold.acks);
    for (uint32_t i = 0; f->own != NULL && i < f->n; i++)
        free(f->own[i]);
    free(f->own);
    free(f->extra);
    free(f->incs);
    free(f);
}

/* fan_done - the request ended before the outcomes were all in. */
static void
fan_done(void *arg, int sent_ok)
{
    struct fan *f = arg;

    (void)sent_ok;
    f->then.fn(f->then.arg, NULL, NULL, 0, NULL, 0, NULL);
    fan_free(f);
}

/* take_replied - what entry i of another node's answer says of its reply
 * ("replied", "reason"), kept as JSON members for ack_results_reply. */
static void
take_replied(struct fan *f, uint32_t i, const struct http_peer_ack *e)
{
    char *s = NULL;

    if (e->replied < 0)
        return;
    if (f->own == NULL && (f->own = calloc(f->n, sizeof(*f->own))) == NULL)
        return;
    if (f->extra == NULL &&
        (f->extra = calloc(f->n, sizeof(*f->extra))) == NULL)
        return;
    if (e->replied)
        s = strdup(",\"replied\":true");
    else if (asprintf(&s, ",\"replied\":false,\"reason\":%s", e->reason) < 0)
        s = NULL;
    free(f->own[i]);
    f->own[i] = s;
    f->extra[i] = s;
}

/* take_outcomes - member k's answer into the entries its id names.
 * 0, or -1 when the answer is not a result per entry. */
static int
take_outcomes(struct fan *f, int k, const struct http_client_resp *r)
{
    struct http_peer_acks a;
    int rc = 0;

    if (r->err != 0 || r->status != 200 ||
        http_peer_acks(r->body.data, r->body.len, f->n, &a) != 0)
        return -1;
    for (uint32_t i = 0; i < f->n && rc == 0; i++) {
        int o;
        if (f->incs[i] != f->rt.m[k].inc)
            continue;
        o = ack_results_outcome(a.e[i].outcome, a.e[i].dropped);
        if (o < 0)
            rc = -1;
        else
            f->hold.acks[i].outcome = (uint32_t)o;
        f->hold.acks[i].count = a.e[i].count;
        take_replied(f, i, &a.e[i]);
    }
    http_peer_acks_free(&a);
    return rc;
}

/* peer_answered - one member's answer came (or not); the last one lets
 * the request answer.  A member that stops (it answers 503 draining, or
 * its port refuses the connection) applied nothing and never will: its
 * entries keep the outcome this node gave them, stale, as they would
 * once the board shows it leaving (the hand-over brings those messages
 * back under new ids). */
static void
peer_answered(void *arg, struct http_client_resp *r)
{
    struct fan_peer *p = arg;
    struct fan *f = p->f;

    p->pending = 0;
    if (worker_forward_gone(r)) {
        worker_view_mark_gone(f->w, f->rt.m[p->k].id);
        log_debug(0,
                  "ack forwarded to node %s: it stops (%s); its entries "
                  "are stale",
                  f->rt.m[p->k].id, r->err ? r->error : "503 draining");
    } else if (take_outcomes(f, p->k, r) != 0) {
        shm_count(f->w->seg, f->w->set.slot, SHM_C_FORWARD_FAILED, 1);
        log_info(0, "ack forwarded to node %s failed: %s (status %u)",
                 f->rt.m[p->k].id, r->err ? r->error : "bad answer", r->status);
        snprintf(f->failed, sizeof(f->failed), "%s", f->rt.m[p->k].id);
    } else {
        shm_count(f->w->seg, f->w->set.slot, SHM_C_FORWARD_OK, 1);
    }
    if (--f->waiting > 0)
        return;
    /* the fan goes now, whatever then does with the request next */
    http_request_on_done(f->req, NULL, NULL);
    if (f->failed[0]) {
        http_reply_error(f->req, 503, "ephemeral_forward_failed",
                         "node '%s', which delivered some of these messages, "
                         "did not answer; the entries of this node were "
                         "applied; retry",
                         f->failed);
        http_request_resume(f->req);
        f->then.fn(f->then.arg, NULL, NULL, 0, NULL, 0, NULL);
    } else {
        f->then.fn(f->then.arg, f->req, f->ids, f->stride, f->hold.acks, f->n,
                   (const char *const *)f->extra);
    }
    fan_free(f);
}

/* ack_route_fan - see ack_route.h. */
void
ack_route_fan(struct worker *w, struct http_request *req,
              const struct ack_routes *rt, const uint64_t *incs,
              const struct http_str *ids, size_t stride, uint32_t n,
              struct ack_hold *hold, const char *const *extra,
              const struct ack_then *then)
{
    struct fan *f = calloc(1, sizeof(*f));
    char *authz = NULL;
    const char *headers[] = {FORWARD_HEADER ": 1",
                             "Content-Type: application/json", NULL};
    size_t len;
    const char *body = http_request_body(req, &len);
    int rc = worker_auth_header(req, &authz);

    headers[2] = authz; /* credentials go with the request */
    if (rc != 0 || f == NULL ||
        (f->incs = malloc((n ? n : 1) * sizeof(*incs))) == NULL) {
        free(f);
        free(authz);
        http_reply_errno(req, -ENOMEM, "ack");
        http_request_resume(req); /* suspended when replies went first */
        then->fn(then->arg, NULL, NULL, 0, NULL, 0, NULL);
        return;
    }
    memcpy(f->incs, incs, n * sizeof(*incs));
    if (extra != NULL && (f->extra = malloc(n * sizeof(*extra))) != NULL)
        memcpy(f->extra, extra, n * sizeof(*extra));
    f->w = w;
    f->req = req;
    f->then = *then;
    f->rt = *rt;
    f->hold = *hold;
    f->ids = ids;
    f->stride = stride;
    f->n = n;
    hold->taken = 1;
    http_request_on_done(req, fan_done, f);
    for (int k = 0; k < rt->n; k++) {
        struct http_client_req r = {
            .method = "POST",
            .port = HTTP_CLIENT_PEER,
            .addr = rt->m[k].addr,
            .target = then->target ? then->target : http_request_uri(req),
            .headers = headers,
            .nheaders = authz ? 3 : 2,
            .body = body,
            .body_len = len,
            .timeout_ms = FORWARD_MS,
        };

        f->peer[k] = (struct fan_peer){f, k, 0};
        if (http_client_request(w->client, &r, peer_answered, &f->peer[k]) ==
            0) {
            f->peer[k].pending = 1;
            f->waiting++;
        } else {
            snprintf(f->failed, sizeof(f->failed), "%s", rt->m[k].id);
        }
    }
    free(authz); /* the client copied it */
    if (f->waiting > 0) {
        http_request_suspend(req);
    } else {
        http_reply_error(req, 503, "ephemeral_forward_failed",
                         "node '%s', which delivered some of these messages, "
                         "cannot be asked; retry",
                         f->failed);
        http_request_resume(req); /* suspended already: waited on replies */
    }
}
