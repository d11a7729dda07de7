/*
 * presence_stream.c - see presence_stream.h.
 */
#include "worker/presence_stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/errors.h"
#include "http/json_scan.h"
#include "http/names.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/sse.h"
#include "shm/owner.h"
#include "shm/presence.h"
#include "worker/forward.h"
#include "worker/presence.h"
#include "worker/presence_events.h"
#include "worker/stream_int.h"
#include "worker/worker_int.h"

#define BAD "ephemeral_bad_request"

/* What a member stream keeps: its channel's presence name and member,
 * and the worker's count it is one of (below). */
struct stream_pres {
    struct shm_name channel, member;
    struct announced *e;
    char buf[];
};

/*
 * A member of this worker's streams: how many are open, one absolute
 * count under this worker's key (<node>/<slot>), written to whichever
 * node owns the channel at the time (shm_owner_pick): into the table
 * here, or announced to the owner (a signed enter with node and
 * connections).  It is written when it changes and every ANNOUNCE_MS, so
 * an owner that lost the set (it crashed, its successor starts empty) or
 * that took the channel over (a drain's or a join's hand-over, which
 * leave the old owner's own keys out: its streams are its workers' to
 * say) has it again within a second, and a stream's end reaches the node
 * that owns the channel when it ends, wherever it began: no ghost of a
 * stream that opened on an older owner.  Only this worker writes its key,
 * so the counts never add up twice.
 * A count of 0 is kept, and written again, until an owner took it (the
 * table here, or a peer's 200 or 4xx), or for ZERO_KEEP_MS: one lost (an
 * owner that hands its set over answers 503 draining) would leave the
 * member with a connection there for good.
 * The owner is the membership's (worker_view_members): while this node
 * suspects it (it cannot connect to it, worker/forward.c), a count is
 * held (held) rather than written to the table here or to the node the
 * placement without the suspect names, which would make a second, partial
 * set of the channel: members split between two tables, events in the
 * wrong queue, ghosts and gaps once the suspicion ends (DESIGN §5: a
 * channel is never served in another's stead).  A held count is said to
 * the owner at the first tick after the mark ends, as every count is said
 * again each second; a held zero's ZERO_KEEP_MS starts then.  Holding
 * rather than ending the member's stream with retry: leaves neither a
 * ghost nor a gap: the count is absolute, so the one write that lands
 * says the whole truth, streams opened and closed meanwhile included; a
 * retry would only bring the stream back to a node that still cannot
 * reach the owner, and let its member flap.  The stream itself stays
 * open; its member is listed once the owner has the count.
 * Process memory: a list, as long as the worker's members.
 */
struct announced {
    struct announced *next;
    char *channel, *member, *data, *authz; /* channel: the presence name */
    size_t channel_len, member_len, data_len;
    uint32_t n;          /* streams open */
    uint64_t id;         /* names it to an answer (struct announcement) */
    uint64_t said;       /* announcements made: the last one's number */
    uint64_t zero_since; /* n is 0 since (ms) */
    int here;            /* the last write took, into the table here */
    int held;            /* the last write waits: the owner is suspect */
    int done;            /* a zero the table here took: goes at the tick */
};

/* What an announcement's answer needs: its body, and which count of
 * which entry it said. */
struct announcement {
    uint64_t id, said;
    uint32_t n;
    char body[];
};

#define ANNOUNCE_MS  1000
#define ZERO_KEEP_MS 30000

static struct announced *announced;
static uint64_t announced_at, announced_ids;

/* conn_key - what this worker's connections are counted under: its node
 * and slot, so the master drops them when the worker dies
 * (master/presence.h). */
static const char *
conn_key(const struct worker *w, char out[SHM_PRES_NODE_ID])
{
    snprintf(out, SHM_PRES_NODE_ID, "%.64s/%d", w->set.node_id, w->set.slot);
    return out;
}

static void
announced_free(struct announced *e)
{
    free(e->channel);
    free(e->member);
    free(e->data);
    free(e->authz);
    free(e);
}

/* announced_drop - entry id goes if its count is still 0 and its last
 * announcement was the one numbered said: an owner took that zero. */
static void
announced_drop(uint64_t id, uint64_t said)
{
    struct announced **at = &announced, *e;

    while ((e = *at) != NULL && e->id != id)
        at = &e->next;
    if (e == NULL || e->n != 0 || e->said != said)
        return;
    *at = e->next;
    announced_free(e);
}

/* announced_answer - an announcement's answer: not waited for.  A zero
 * the owner took (200), or refused for good (4xx), ends its entry; any
 * other answer leaves it to the next round. */
static void
announced_answer(void *arg, struct http_client_resp *resp)
{
    struct announcement *a = arg;

    if (resp != NULL && a->n == 0 && resp->err == 0 && resp->status >= 200 &&
        resp->status < 500)
        announced_drop(a->id, a->said);
    free(a);
}

/* announce - e's count to the channel's owner: into the table here (its
 * answer, shm_presence_set's, returned; data only when it changed or the
 * last write was not here: a call's update stays), or posted to the
 * owner, its answer not waited for (0). */
static int
announce(struct worker *w, struct announced *e)
{
    struct shm_name c = {e->channel, e->channel_len};
    struct shm_name m = {e->member, e->member_len};
    struct shm_name d = {e->data, e->data_len};
    char key[SHM_PRES_NODE_ID];
    int o, rc;

    const struct shm_owners *all = worker_view_members(w);
    o = shm_owner_pick(all, c, WORKER_PRES_PART);
    e->held = 0;
    if (o >= 0 && o != all->self && shm_presence_is_copy(w->seg, c) == 1)
        return 0; /* held until the owner took this node's copy of the
                     channel (a join's hand-over, master/presence.c): said
                     before it, the count would enter a member the copy
                     brings (an event); the copy leaves this node's keys
                     out, so the next write after it is the one that
                     counts */
    if (o >= 0 && o != all->self && worker_view_suspect(w, all->m[o].id)) {
        e->held = 1; /* see the opening comment of struct announced */
        e->here = 0;
        return 0;
    }
    conn_key(w, key);
    e->said++;
    if (o < 0 || o == all->self) {
        rc = shm_presence_set(w->seg, c, m, e->data && !e->here ? &d : NULL,
                              key, e->n, w->set.presence_grace_ms, shm_now_ms(),
                              worker_presence_event, w);
        e->here = rc >= 0;
        e->done = rc >= 0 && e->n == 0;
        return rc;
    }
    e->here = 0;
    if (all->self < 0 && e->n > 0)
        return 0; /* this node is leaving: the owner dropped its keys when
                     it saw that (master/presence.c), and a count said now
                     would outlive it; its streams' ends are still said */
    struct shm_name shown = worker_presence_shown(c);
    struct http_buf b = {0};
    const char *headers[] = {FORWARD_HEADER ": 1",
                             "Content-Type: application/json", e->authz, NULL};
    http_buf_append_str(&b, "{\"channel\":");
    http_buf_append_json_str(&b, shown.ptr, shown.len);
    http_buf_append_str(&b, ",\"member\":");
    http_buf_append_json_str(&b, m.ptr, m.len);
    if (e->data != NULL) {
        http_buf_append_str(&b, ",\"data\":");
        http_buf_append(&b, e->data, e->data_len);
    }
    http_buf_append_str(&b, ",\"node\":");
    http_buf_append_json_str(&b, key, strlen(key));
    http_buf_printf(&b, ",\"connections\":%u}", e->n);
    struct http_client_req r = {.method = "POST",
                                .port = HTTP_CLIENT_PEER,
                                .addr = all->m[o].addr,
                                .target = "/api/v1/presence/enter",
                                .headers = headers,
                                .nheaders = e->authz ? 3 : 2,
                                .body = b.data,
                                .body_len = b.len,
                                .timeout_ms = FORWARD_MS};
    /* the answer is not waited for: the next announcement mends a lost
     * one (a 429 leaves the member out: the stream stays a listener) */
    struct announcement *a = b.oom ? NULL : malloc(sizeof(*a) + b.len);
    if (a != NULL) {
        a->id = e->id;
        a->said = e->said;
        a->n = e->n;
        memcpy(a->body, b.data, b.len);
        r.body = a->body;
        if (http_client_request(w->client, &r, announced_answer, a) != 0)
            free(a);
    }
    http_buf_free(&b);
    return 0;
}

/* unlink_at - take e off the list (at points to it) and free it. */
static void
unlink_at(struct announced **at, struct announced *e)
{
    *at = e->next;
    announced_free(e);
}

/* count_join - one more stream of p's member, counted (p->e) and
 * written.  0; or the table's refusal here (403-429 of
 * shm_presence_set, the count undone): a settle's (shm_presence_settle)
 * is no refusal, the tick writes it again. */
static int
count_join(struct worker *w, struct http_request *req, struct stream_pres *p,
           const struct shm_name *data)
{
    struct announced **at = &announced, *e;
    int rc, fresh = 0;

    while ((e = *at) != NULL &&
           !(e->channel_len == p->channel.len &&
             e->member_len == p->member.len &&
             memcmp(e->channel, p->channel.ptr, p->channel.len) == 0 &&
             memcmp(e->member, p->member.ptr, p->member.len) == 0))
        at = &e->next;
    if (e == NULL) {
        if ((e = calloc(1, sizeof(*e))) == NULL ||
            (e->channel = malloc(p->channel.len)) == NULL ||
            (e->member = malloc(p->member.len)) == NULL ||
            worker_auth_header(req, &e->authz) != 0) {
            if (e != NULL)
                announced_free(e);
            return -ENOMEM;
        }
        memcpy(e->channel, p->channel.ptr, p->channel.len);
        memcpy(e->member, p->member.ptr, p->member.len);
        e->channel_len = p->channel.len;
        e->member_len = p->member.len;
        e->id = ++announced_ids;
        e->next = announced;
        announced = e;
        at = &announced;
        fresh = 1;
    }
    if (data != NULL) {
        char *d = malloc(data->len ? data->len : 1);
        if (d == NULL)
            return -ENOMEM;
        memcpy(d, data->ptr, data->len);
        free(e->data);
        e->data = d;
        e->data_len = data->len;
        e->here = 0; /* said with the count */
    }
    e->n++;
    e->done = 0;
    rc = announce(w, e);
    if (rc >= 0 || (rc == -ESHUTDOWN && shm_presence_settling(w->seg))) {
        p->e = e;
        return 0;
    }
    if (--e->n == 0 && fresh) /* nothing of it was written: it goes */
        unlink_at(at, e);
    return rc;
}

/* count_leave - one stream fewer of p's member, written to the channel's
 * owner now (wherever the stream began); the last one's zero is kept
 * until an owner takes it. */
static void
count_leave(struct worker *w, const struct stream_pres *p)
{
    struct announced *e = p->e;

    if (e == NULL || e->n == 0)
        return;
    if (--e->n == 0)
        e->zero_since = shm_now_ms();
    announce(w, e); /* a zero taken here goes at the tick (done) */
}

/* worker_presence_stream_tick - see presence_stream.h. */
void
worker_presence_stream_tick(struct worker *w, uint64_t now)
{
    struct announced **at = &announced, *e;
    int alone;

    if (announced == NULL || now < announced_at + ANNOUNCE_MS)
        return;
    announced_at = now;
    alone = worker_serves_all(w); /* no other owner: what took here stays */
    while ((e = *at) != NULL) {
        if (e->n == 0 && (e->done || now >= e->zero_since + ZERO_KEEP_MS)) {
            unlink_at(at, e); /* taken, or no owner took it: given up */
            continue;
        }
        if (!(alone && e->here))
            announce(w, e);
        if (e->held && e->n == 0)
            e->zero_since = now; /* kept while its owner is suspect */
        at = &e->next;
    }
}

/* worker_presence_stream_wanted - see presence_stream.h. */
int
worker_presence_stream_wanted(const struct http_query *q)
{
    return http_query_get(q, "presence", NULL) != NULL ||
           http_query_get(q, "presence_events", NULL) != NULL;
}

/* SHOWN_MAX - at most this much of a refused channel's name goes into
 * its 400 (the sentence has HTTP_ERROR_MSG_MAX bytes). */
#define SHOWN_MAX 64

/* worker_presence_stream_subs - see presence_stream.h.  Each repeated
 * presence_events is one more subscription, in the query's order (the
 * cursor's hash follows that order, as the watch's subs list keeps it). */
int
worker_presence_stream_subs(const struct http_query *q, struct stream_args *a,
                            unsigned max_subs, struct http_error *err)
{
    size_t more = 0;
    struct stream_sub *subs;

    for (unsigned i = 0; i < q->n; i++)
        more += strcmp(q->args[i].key, "presence_events") == 0;
    if (more == 0)
        return 0;
    if ((subs = realloc(a->subs, (a->nsubs + more) * sizeof(*subs))) == NULL) {
        http_error_set(err, 500, "internal", "out of memory");
        return -ENOMEM;
    }
    a->subs = subs;
    for (unsigned i = 0; i < q->n; i++) {
        const struct http_query_arg *v = &q->args[i];
        int shown = (int)(v->val_len > SHOWN_MAX ? SHOWN_MAX : v->val_len);
        if (strcmp(v->key, "presence_events") != 0)
            continue;
        if (!http_name_valid(v->val, v->val_len)) {
            http_error_set(err, 400, "invalid_name",
                           "query parameter 'presence_events' names channel "
                           "'%.*s': a channel must be 1-512 bytes of UTF-8 "
                           "without control characters",
                           shown, v->val);
            return -EINVAL;
        }
        for (size_t k = 0; k < a->nsubs; k++)
            if (subs[k].presence && subs[k].queue.len == v->val_len &&
                memcmp(subs[k].queue.ptr, v->val, v->val_len) == 0) {
                http_error_set(err, 400, BAD,
                               "query parameter 'presence_events' names "
                               "channel '%.*s' twice",
                               shown, v->val);
                return -EINVAL;
            }
        if (a->nsubs == max_subs) {
            http_error_set(err, 400, BAD,
                           "query parameter 'presence_events' names channel "
                           "'%.*s' past stream_max_subs (%u) subscriptions "
                           "(with 'queue' or 'subs')",
                           shown, v->val, max_subs);
            return -EINVAL;
        }
        memset(&subs[a->nsubs], 0, sizeof(subs[a->nsubs]));
        subs[a->nsubs].queue = (struct shm_name){v->val, v->val_len};
        subs[a->nsubs].part = WORKER_PRES_PART;
        subs[a->nsubs].presence = 1;
        a->nsubs++;
    }
    return 0;
}

/* worker_presence_stream_unmark - see presence_stream.h. */
void
worker_presence_stream_unmark(struct stream_sub *s)
{
    if (s->queue.len < 2 || s->queue.ptr[0] != SHM_PRES_MARK)
        return;
    s->queue.ptr++;
    s->queue.len--;
    s->presence = 1;
}

/* worker_presence_stream_watched - see presence_stream.h. */
void
worker_presence_stream_watched(struct stream_sub *out,
                               const struct stream_sub *u)
{
    if (u->presence)
        worker_presence_stream_unmark(out);
}

/* worker_presence_stream_name - see presence_stream.h. */
int
worker_presence_stream_name(struct worker *w, struct http_request *req,
                            struct shm_name channel, struct worker_qname *out)
{
    return worker_presence_name(w, req, AUTH_READ, "presence_events", channel,
                                out);
}

/* data_ok - data= is one JSON value within max_data; else req answered. */
static int
data_ok(struct worker *w, struct http_request *req, const char *d, size_t n)
{
    struct http_json j;
    struct shm_pres_totals t;

    http_json_init(&j, d, n);
    if (n == 0 || http_json_value(&j) != 0 ||
        (http_json_ws(&j), j.p != j.end)) {
        http_reply_error(req, 400, BAD,
                         "query parameter 'data' must be one JSON value");
        return 0;
    }
    shm_presence_totals(w->seg, &t);
    if (n > t.max_data) {
        http_reply_error(req, 413, "presence_data_too_large",
                         "query parameter 'data' is %zu bytes; "
                         "presence_max_data is %u",
                         n, t.max_data);
        return 0;
    }
    return 1;
}

/* worker_presence_stream_join - see presence_stream.h. */
int
worker_presence_stream_join(struct stream *s)
{
    struct worker *w = s->w;
    struct http_request *req = s->req;
    const struct http_query *q = http_request_args(req);
    size_t cl = 0, ml = 0, dl = 0;
    const char *c = http_query_get(q, "presence", &cl);
    const char *m = http_query_get(q, "member", &ml);
    const char *d = http_query_get(q, "data", &dl);
    const char *sub = w->caller != NULL ? w->caller->sub : NULL;
    struct shm_name data = {d, dl};
    struct worker_qname pn;
    struct stream_pres *p;
    int rc;

    if (c == NULL)
        return 1;
    if (m == NULL && sub != NULL)
        m = sub, ml = strlen(sub);
    if (m == NULL) {
        http_reply_error(req, 400, BAD,
                         "query parameter 'member' is required with "
                         "'presence' (or a signed token's sub)");
        return 0;
    }
    if (!http_reply_name_ok(req, "member", m, ml) ||
        (d != NULL && !data_ok(w, req, d, dl)) ||
        !worker_presence_name(w, req, AUTH_PRESENCE, "presence",
                              (struct shm_name){c, cl}, &pn))
        return 0;
    if (sub != NULL && (strlen(sub) != ml || memcmp(sub, m, ml) != 0)) {
        http_reply_error(req, 403, "forbidden",
                         "query parameter 'member' must be the signed "
                         "token's sub");
        return 0;
    }
    if ((p = malloc(sizeof(*p) + pn.name.len + ml)) == NULL) {
        http_reply_errno(req, -ENOMEM, "presence");
        return 0;
    }
    memcpy(p->buf, pn.name.ptr, pn.name.len);
    memcpy(p->buf + pn.name.len, m, ml);
    p->channel = (struct shm_name){p->buf, pn.name.len};
    p->member = (struct shm_name){p->buf + pn.name.len, ml};
    p->e = NULL;
    rc = count_join(w, req, p, d != NULL ? &data : NULL);
    if (rc < 0) {
        free(p);
        worker_presence_refused(w, req, rc, dl);
        return 0;
    }
    s->pres = p;
    return 1;
}

/* worker_presence_stream_start - see presence_stream.h. */
void
worker_presence_stream_start(struct stream *s, unsigned long long h)
{
    if (s->from != SHM_FROM_LAST)
        return;
    for (size_t i = 0; i < s->nsubs; i++)
        if (s->subs[i].presence)
            s->subs[i].after = h;
}

/* worker_presence_stream_sync - see presence_stream.h. */
void
worker_presence_stream_sync(struct stream *s)
{
    struct shm_pres_totals t;

    if (s->from != SHM_FROM_LAST)
        return;
    shm_presence_totals(s->w->seg, &t);
    for (size_t i = 0; i < s->nsubs; i++) {
        struct stream_sub *u = &s->subs[i];
        struct shm_name shown;
        struct shm_pres_list l;
        struct http_buf b = {0};
        if (!u->presence || u->watch >= 0 || /* the owner's watch syncs */
            shm_presence_list(s->w->seg, u->queue, NULL,
                              t.max_members ? t.max_members : 1, &l) != 0)
            continue;
        shown = worker_presence_shown(u->queue);
        http_buf_append_str(&b, "{\"channel\":");
        http_buf_append_json_str(&b, shown.ptr, shown.len);
        http_buf_append_str(&b, ",\"action\":\"sync\"");
        worker_presence_members_json(&b, &l);
        http_buf_append_str(&b, "}");
        if (b.oom)
            s->out.oom = 1;
        else
            http_sse_event(&s->out, NULL, "presence", b.data, b.len);
        http_buf_free(&b);
        shm_presence_list_free(&l);
    }
}

/* worker_presence_stream_event - see presence_stream.h. */
void
worker_presence_stream_event(struct http_buf *out, const char *id,
                             const char *payload, size_t len)
{
    http_sse_event(out, id, "presence", payload, len);
}

/* worker_presence_stream_end - see presence_stream.h. */
void
worker_presence_stream_end(struct stream *s)
{
    struct stream_pres *p = s->pres;

    if (p == NULL)
        return;
    count_leave(s->w, p);
    free(p);
    s->pres = NULL;
}
