/*
 * stream.c - GET /api/v1/ephemeral/subscribe (stream.h): the request read
 * (stream_parse.c), the permissions and the node's bounds checked, who
 * serves each subscription (stream_watch.c: here, or an owner's watch),
 * the start positions (from, or a resume's cursor), the `open` event and
 * the first round (stream_read.c; both after the watches said where they
 * start), and the answer, whose body the stream's out buffer feeds
 * (stream_life.c).  Nothing is opened when anything fails before the
 * answer: the client gets 400, 403, 500 or 503.
 */
#include "worker/stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/sse.h"
#include "http/stream_body.h"
#include "shm/horizon.h"
#include "shm/stats.h"
#include "shm/tail.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/presence_stream.h"
#include "worker/stream_int.h"
#include "worker/worker_int.h"

/* stream_set_of - w's streams, made at the first. */
static struct stream_set *
stream_set_of(struct worker *w)
{
    if (w->streams == NULL)
        w->streams = calloc(1, sizeof(*w->streams));
    return w->streams;
}

/*
 * take_names - the caller may subscribe to every queue a lists (and pop
 * it, for a group): each internal name, partition and the group go into
 * s->names, and s->subs point there.  0; or -EACCES with req answered
 * (403), -ENOMEM.
 */
static int
take_names(struct worker *w, struct http_request *req,
           const struct stream_args *a, struct stream *s)
{
    struct http_buf b = {0};
    struct worker_qname qn;
    size_t *off = calloc(a->nsubs + 1, sizeof(*off));

    if (off == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < a->nsubs; i++) {
        const struct stream_sub *c = &a->subs[i];
        if (c->presence) {
            if (!worker_presence_stream_name(w, req, c->queue, &qn)) {
                free(off);
                http_buf_free(&b);
                return -EACCES;
            }
        } else if (!worker_authz(w, req, AUTH_SUBSCRIBE, "queue", c->queue,
                                 &qn) ||
                   (a->grouped &&
                    !worker_authz(w, req, AUTH_POP, "queue", c->queue, &qn))) {
            free(off);
            http_buf_free(&b);
            return -EACCES;
        }
        off[i] = b.len;
        s->subs[i].queue.len = qn.name.len;
        s->subs[i].presence = c->presence;
        s->subs[i].part.len = c->part.len;
        http_buf_append(&b, qn.name.ptr, qn.name.len);
        http_buf_append(&b, c->part.ptr, c->part.len);
    }
    off[a->nsubs] = b.len;
    http_buf_append(&b, a->group.ptr, a->group.len);
    http_buf_append(&b, "", 1); /* never empty: names point into it */
    if (b.oom) {
        free(off);
        http_buf_free(&b);
        return -ENOMEM;
    }
    /* the buffer grew to 256 bytes at least: a stream keeps what it
     * needs (realloc only shrinks it) */
    s->names = realloc(b.data, b.len);
    s->names = s->names != NULL ? s->names : b.data;
    for (size_t i = 0; i < a->nsubs; i++) {
        struct stream_sub *u = &s->subs[i];
        u->queue.ptr = s->names + off[i];
        u->part.ptr = u->part.len > 0 ? u->queue.ptr + u->queue.len : NULL;
    }
    s->group = (struct shm_name){s->names + off[a->nsubs], a->group.len};
    free(off);
    return 0;
}

/* stream_new - the stream a asks for, its names authorised; NULL with
 * req answered. */
static struct stream *
stream_new(struct worker *w, struct http_request *req,
           const struct stream_args *a)
{
    struct stream *s = calloc(1, sizeof(*s));
    int rc = -ENOMEM;

    if (s != NULL && (s->subs = calloc(a->nsubs, sizeof(*s->subs))) != NULL &&
        (s->waits = calloc(a->nsubs, sizeof(*s->waits))) != NULL)
        rc = take_names(w, req, a, s);
    if (rc != 0) {
        if (rc == -ENOMEM)
            http_reply_errno(req, rc, "subscribe");
        if (s != NULL)
            stream_release(s);
        return NULL;
    }
    s->w = w;
    s->req = req;
    s->forwarded = http_request_header(req, FORWARD_HEADER) != NULL;
    s->nsubs = a->nsubs;
    s->grouped = a->grouped;
    s->from = a->from;
    s->hash = stream_hash(a);
    s->park.req = req;
    s->park.waits = s->waits;
    s->park.nwaits = a->nsubs;
    s->park.fd = -1;
    return s;
}

/* expiry - when the caller's signed token expires, shm_now_ms() terms
 * (0: it does not).  Copied now: the caller's token goes at the next
 * dispatch. */
static uint64_t
expiry(const struct worker *w, uint64_t now)
{
    int64_t left;

    if (w->caller == NULL || w->caller->exp <= 0)
        return 0;
    left = w->caller->exp - (int64_t)time(NULL);
    return now + (left > 0 ? (uint64_t)left * 1000 : 0);
}

/* start_from - where each subscription starts without a cursor: after h
 * (new), after 0 (all; last reads each partition's newest <= h). */
static void
start_from(struct stream *s, uint64_t h)
{
    uint64_t after = s->from == SHM_FROM_NEW ? h : 0;

    for (size_t i = 0; i < s->nsubs; i++)
        s->subs[i].after = after;
    s->wmark = s->from == SHM_FROM_ALL ? 0 : h;
}

/*
 * resume_part - where partition subscription u (read here) starts with
 * cursor c, whose entry o names it: after that entry's watermark when it
 * is this incarnation's; where a hand-over from that incarnation put it
 * (shm_tail_map); else nowhere (-1: missed).  -EINPROGRESS: a hand-over
 * announced to this node is on its way, and where it will put it is not
 * known yet (resume_from).
 */
static int
resume_part(struct stream *s, struct stream_sub *u, const struct http_cursor *c,
            unsigned o, uint64_t h)
{
    uint64_t after;
    int rc;

    if (o >= c->nowners)
        return -1;
    if (c->inc[o] == s->w->incarnation) {
        if (c->w[o] > h)
            return -1; /* a place this node has not reached: not its */
        after = c->w[o];
    } else if ((rc = shm_tail_map(s->w->seg, s->w->set.slot, u->queue, u->part,
                                  c->inc[o], c->w[o], shm_now_ms(), &after)) !=
               0)
        return rc == -EINPROGRESS ? rc : -1;
    u->after = after;
    u->name_inc = c->inc[o];
    u->name_w = c->w[o];
    return 0;
}

/*
 * resume_from - where each subscription read here starts with cursor c
 * (its list's: else missed): a partition at its own entry (resume_part),
 * a whole queue after the watermark of this incarnation's first entry
 * (its own, stream_cursor).  One that cannot is missed, and starts after
 * h.  W starts at the lowest start (each partition is named by its own
 * entry until W passes its start: stream_int.h).  Returns whether c is
 * this list's (else its watches' part is missed too, and they start
 * anew).  *wait is set when a partition's hand-over here is on its way
 * (resume_part): the stream is not opened then (stream_open).
 */
static int
resume_from(struct stream *s, const struct http_cursor *c, uint64_t h,
            int *wait)
{
    unsigned me = HTTP_CURSOR_NONE, k = 0, nparts = 0;
    uint64_t low = h;

    for (size_t i = 0; i < s->nsubs; i++)
        nparts += s->subs[i].part.len > 0;
    for (unsigned o = c->nowners; o-- > 0;)
        if (c->inc[o] == s->w->incarnation)
            me = o;
    int list = c->hash == s->hash && c->nparts == nparts;
    for (size_t i = 0; i < s->nsubs; i++) {
        struct stream_sub *u = &s->subs[i];
        unsigned o = u->part.len > 0 ? c->owner[k++] : me;
        if (!list && (u->watch >= 0 || u->part.len == 0)) /* its owners */
            stream_missed_add(s, u->queue, u->part.ptr, u->part.len);
        if (u->watch >= 0)
            continue; /* cannot tell: missed here, and read anew */
        int rc = list ? resume_part(s, u, c, o, h) : -1;
        if (rc == -EINPROGRESS)
            *wait = 1;
        u->missed = rc != 0;
        if (u->missed) {
            u->after = h;
            u->name_inc = s->w->incarnation;
            u->name_w = h;
        }
        low = u->after < low ? u->after : low;
    }
    s->wmark = low;
    return list;
}

/* credentials - the caller's token as an Authorization line for the
 * watches (an access_token becomes a bearer token); NULL when none.  A
 * token with a control character or a space is not sent on. */
static char *
credentials(struct http_request *req)
{
    const char *auth = http_request_header(req, "Authorization"), *t = NULL;
    size_t n = 0;
    char *out = NULL;

    if (auth != NULL)
        t = auth, n = strlen(auth);
    else if ((t = http_query_get(http_request_args(req), "access_token", &n)) ==
             NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f ||
            (auth == NULL && t[i] == ' '))
            return NULL;
    if (asprintf(&out, "Authorization: %s%.*s", auth ? "" : "Bearer ", (int)n,
                 t) < 0)
        return NULL;
    return out;
}

/*
 * stream_open - s's plan (who serves what), its first events, its
 * watches, its answer, its park.  0; else -errno with nothing answered
 * and s still the caller's: -EREMOTE (a forwarded stream asked for a
 * partition this node does not own), -EHOSTUNREACH (an owner cannot be
 * called), -EINPROGRESS (a resumed partition's hand-over here is on its
 * way), -ENOMEM.
 */
static int
stream_open(struct stream *s, const struct stream_args *a)
{
    struct worker *w = s->w;
    struct stream_set *set = w->streams;
    uint64_t h = shm_horizon(w->seg), now = shm_now_ms();
    int rc, resume = !s->grouped && a->has_cursor, list = 0;
    int64_t plan;

    shm_owners_refresh(&w->owners, w->seg->board);
    if ((plan = stream_plan(s)) <= 0)
        return plan == 0 ? -EREMOTE : -ENOMEM;
    if (h < set->horizon)
        h = set->horizon; /* a later read may give less (horizon.h) */
    set->horizon = h;
    if (resume) {
        int wait = 0;
        list = resume_from(s, &a->cursor, h, &wait);
        /*
         * A partition of the cursor whose hand-over to this node was
         * announced (the leaving node's beat held it here) but has not
         * arrived: a client that came back at once from a drained node
         * (SIGTERM ends its streams before its rings go) would find no
         * place for it and get it missed and re-sent whole.  The resume
         * waits for the rings instead, as pops read nothing there
         * meanwhile: the stream is not opened, and the answer is the
         * drain's own (retry:, closed), so the client comes back and
         * resumes once the rings are here (or the hold ran out: then it
         * is missed, as it is).  Chosen over keeping the draining node's
         * streams open until its rings are adopted: that would keep its
         * workers serving while the master takes the rings out from under
         * them, where now they exit first so that nothing lands there
         * after the take (main.c).  A watch asked by another node answers
         * the same: that node's stream ends with retry: as for any watch
         * that ends.
         */
        if (wait)
            return -EINPROGRESS;
    } else {
        start_from(s, h);
    }
    worker_presence_stream_start(s, h);
    if (stream_watch_prepare(s, list ? &a->cursor : NULL) != 0)
        return -ENOMEM;
    if (s->nwatches > 0 && (s->authz = credentials(s->req)) == NULL &&
        w->auth_on)
        return -EACCES;
    s->resume = resume;
    s->h0 = h;
    s->starting = s->nwatches; /* each says where it starts first */
    if ((rc = stream_watch_start(s)) != 0)
        return rc;
    if (!s->starting) {
        if ((rc = stream_first_round(s, h, resume)) != 0)
            return rc;
    }
    struct http_body_src src = {stream_body_read, s};
    if (s->out.oom || http_reply_body(s->req, 200, "text/event-stream", &src))
        return -ENOMEM;
    http_reply_header(s->req, "Cache-Control", "no-cache");
    http_reply_header(s->req, "X-Accel-Buffering", "no");
    http_request_on_done(s->req, stream_done, s);
    set->open++;
    s->exp_at = expiry(w, now);
    s->written_at = now;
    stream_park(s);
    return 0;
}

/* refuse - what stream_open's -errno says to the client. */
static void
refuse(struct http_request *req, int rc)
{
    if (rc == -EINPROGRESS)
        worker_subscribe_later(req); /* a hand-over on its way: come back */
    else if (rc == -EREMOTE)
        http_reply_error(req, 503, "owner_moved",
                         "this node does not own every partition the "
                         "forwarded stream names (membership is changing); "
                         "retry");
    else if (rc == -EHOSTUNREACH || rc == -EINVAL)
        http_reply_error(req, 503, "ephemeral_forward_failed",
                         "a node that owns partitions of this stream cannot "
                         "be called now; retry");
    else if (rc == -EACCES)
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "the token cannot be passed on to the nodes that own "
                         "the stream's partitions (a control character)");
    else
        http_reply_errno(req, rc, "subscribe");
}

/*
 * subscribe_accept - s's slot toward stream_max taken, its presence
 * member joined and s opened: 0, s then counting toward stream_max until
 * it ends (stream_done).  Else -1 with the refusal answered and the slot,
 * if it was taken, given back: this is the one place a refusal gives it
 * back, so no refusal path can keep it.
 */
static int
subscribe_accept(struct stream *s, const struct stream_args *a)
{
    struct worker *w = s->w;
    int rc;

    if (shm_streams_reserve(w->seg, w->set.slot, w->set.stream_max) != 0) {
        http_reply_error(s->req, 503, "ephemeral_unavailable",
                         "this node holds stream_max (%u) streams: retry "
                         "later, or ask another node",
                         w->set.stream_max);
        return -1;
    }
    if (stream_set_of(w) == NULL)
        http_reply_errno(s->req, -ENOMEM, "subscribe");
    else if (!worker_presence_stream_join(s))
        ; /* answered: 400, 403, 413, 429 */
    else if ((rc = stream_open(s, a)) != 0)
        refuse(s->req, rc);
    else
        return 0;
    shm_streams_add(w->seg, w->set.slot, -1);
    return -1;
}

/* worker_subscribe - see stream.h. */
void
worker_subscribe(struct worker *w, struct http_request *req)
{
    struct stream_args a;
    struct http_error err;
    struct stream *s;

    if (stream_parse(req, w->set.stream_max_subs, &a, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if ((s = stream_new(w, req, &a)) != NULL && subscribe_accept(s, &a) != 0)
        stream_release(s);
    free(a.mem);
    free(a.subs);
}

/* worker_subscribe_later - see stream.h. */
void
worker_subscribe_later(struct http_request *req)
{
    struct http_buf b = {0};

    http_sse_retry(&b, STREAM_RETRY_MS);
    http_reply_text(req, 200, "text/event-stream", &b);
    http_reply_header(req, "Cache-Control", "no-cache");
    http_reply_header(req, "Connection", "close");
}
