/*
 * stream_watch.c - a stream's subscriptions that other nodes own
 * (stream_int.h, DESIGN.md §4): who serves what (the plan), one
 * watch per owner, and the relay of its events.
 *
 * A watch is a signed call (http/client.h, a stream) to the owner's own
 * subscribe route, marked forwarded: that node serves the partitions it
 * owns only, with its cursor's slice (the client's cursor, with the
 * watch's subscriptions and their hash) as Last-Event-ID.  Its events
 * come back as Server-Sent Events (http/sse_parse.h): `open` names the
 * owner's incarnation and watermark, each message moves that watermark
 * and is relayed with this stream's cursor, `recovered` adds what the
 * owner could not resume to this stream's one recovered event (the first
 * round waits for every watch's), `error` and `overflow` end the stream.
 * A watch that ends, or a change of who owns the subscriptions (on_moved),
 * ends the stream with retry: the client comes back and resumes, at once
 * where the owners are the same, with the moved partitions missed where
 * they are not.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/json_scan.h"
#include "http/sse.h"
#include "shm/horizon.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/presence_stream.h"
#include "worker/stream_int.h"
#include "worker/worker_int.h"

/* hash_add - FNV-1a over p[0..n) and a separator, continuing from h. */
static uint64_t
hash_add(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i <= n; i++) {
        h ^= i < n ? (unsigned char)p[i] : 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* owner_of - the member that serves partition sub u elsewhere, or NULL
 * when it is served here.  A channel's events go by the membership's
 * placement, an owner this node suspects counted in: they are never
 * served in another's stead (worker_route_member says why); a watch to
 * an owner that cannot be reached ends, and the stream with it (retry:),
 * and a suspicion that comes or goes does not move them. */
static const struct shm_owner *
owner_of(const struct stream *s, const struct stream_sub *u)
{
    const struct shm_owners *o;
    int m;

    if (u->part.len == 0 || (!u->presence && worker_serves_all(s->w)))
        return NULL;
    o = u->presence ? worker_view_members(s->w) : &s->w->owners;
    m = shm_owner_pick(o, u->queue, u->part);
    return m < 0 || m == o->self ? NULL : &o->m[m];
}

/* others - whether a whole queue is read by watches too: every other
 * owner holds partitions of it. */
static int
others(const struct stream *s)
{
    return !s->forwarded && !worker_serves_all(s->w);
}

/* stream_plan_hash - see stream_int.h. */
uint64_t
stream_plan_hash(const struct stream *s)
{
    const struct shm_owners *o = &s->w->owners;
    uint64_t h = 0xcbf29ce484222325ULL;
    int whole = 0;

    for (size_t i = 0; i < s->nsubs; i++) {
        const struct shm_owner *m = owner_of(s, &s->subs[i]);
        whole |= s->subs[i].part.len == 0;
        h = m == NULL ? hash_add(h, "", 0) : hash_add(h, m->id, strlen(m->id));
    }
    if (whole && others(s))
        for (int m = 0; m < o->n; m++)
            if (m != o->self)
                h = hash_add(h, o->m[m].id, strlen(o->m[m].id));
    return h;
}

/* watch_for - the watch of member o, made at its first subscription. */
static int
watch_for(struct stream *s, const struct shm_owner *o)
{
    struct stream_watch *x;

    for (size_t k = 0; k < s->nwatches; k++)
        if (strcmp(s->watches[k].id, o->id) == 0)
            return (int)k;
    x = realloc(s->watches, (s->nwatches + 1) * sizeof(*x));
    if (x == NULL)
        return -1;
    s->watches = x;
    x = &s->watches[s->nwatches];
    memset(x, 0, sizeof(*x));
    x->s = s;
    snprintf(x->id, sizeof(x->id), "%s", o->id);
    snprintf(x->addr, sizeof(x->addr), "%s", o->addr);
    return (int)s->nwatches++;
}

/* stream_plan - see stream_int.h. */
int64_t
stream_plan(struct stream *s)
{
    const struct shm_owners *o = &s->w->owners;
    int whole = 0;

    for (size_t i = 0; i < s->nsubs; i++) {
        struct stream_sub *u = &s->subs[i];
        const struct shm_owner *m = owner_of(s, u);
        u->watch = -1;
        whole |= u->part.len == 0;
        if (m == NULL)
            continue;
        if (s->forwarded)
            return 0; /* no second hop: its client asks again */
        if ((u->watch = (int16_t)watch_for(s, m)) < 0)
            return -1;
    }
    if (whole && others(s))
        for (int m = 0; m < o->n; m++)
            if (m != o->self && watch_for(s, &o->m[m]) < 0)
                return -1;
    s->plan = stream_plan_hash(s);
    return 1;
}

/* in_watch - whether sub u is read by watch k. */
static int
in_watch(const struct stream_sub *u, size_t k)
{
    return u->part.len == 0 || u->watch == (int16_t)k;
}

/* slice - the client's cursor c cut to watch k's subscriptions (its
 * own list's hash), as its owner resumes from it. */
static int
slice(struct stream *s, size_t k, const struct http_cursor *c, uint32_t hash)
{
    struct stream_watch *x = &s->watches[k];
    struct http_cursor *d = malloc(sizeof(*d));
    unsigned part = 0;
    int n;

    if (d == NULL || (x->cursor = malloc(HTTP_CURSOR_MAX + 1)) == NULL) {
        free(d);
        return -ENOMEM;
    }
    *d = *c;
    d->hash = hash;
    d->nparts = 0;
    for (size_t i = 0; i < s->nsubs; i++) {
        const struct stream_sub *u = &s->subs[i];
        if (u->part.len == 0)
            continue;
        if (u->watch == (int16_t)k) {
            unsigned o = c->owner[part];
            d->owner[d->nparts++] = (uint8_t)o;
            s->subs[i].went = s->subs[i].went_open = (uint8_t)o;
        }
        part++;
    }
    /* its places, until its events say */
    x->cur.n = c->nowners;
    memcpy(x->cur.inc, c->inc, sizeof(c->inc));
    memcpy(x->cur.w, c->w, sizeof(c->w));
    x->open = x->cur;
    n = http_cursor_encode(d, x->cursor);
    free(d);
    if (n < 0) { /* cannot: a slice is shorter than the whole */
        free(x->cursor);
        x->cursor = NULL;
    }
    return 0;
}

/* target - watch k's subscribe: its subscriptions by the client's names
 * in the request's order, from, group; and with the client's cursor c,
 * its slice. */
static int
target(struct stream *s, size_t k, const struct http_cursor *c)
{
    static const char *const from[] = {"all", "new", "last"};
    struct stream_watch *x = &s->watches[k];
    struct stream_args a = {.grouped = s->grouped};
    struct http_buf j = {0}, t = {0};
    char *subs, *group = NULL;
    int rc = -ENOMEM;

    a.subs = calloc(s->nsubs, sizeof(*a.subs));
    if (a.subs == NULL)
        return -ENOMEM;
    http_buf_append_str(&j, "[");
    for (size_t i = 0; i < s->nsubs; i++) {
        const struct stream_sub *u = &s->subs[i];
        if (!in_watch(u, k))
            continue;
        struct shm_name q = worker_client_name(u->queue);
        a.subs[a.nsubs].queue = q;
        a.subs[a.nsubs].part = u->part;
        /* a presence sub goes marked; its hash is its channel's */
        worker_presence_stream_watched(&a.subs[a.nsubs++], u);
        http_buf_append_str(&j, j.len > 1 ? ",[" : "[");
        http_buf_append_json_str(&j, q.ptr, q.len);
        if (u->part.len > 0) {
            http_buf_append_str(&j, ",");
            http_buf_append_json_str(&j, u->part.ptr, u->part.len);
        }
        http_buf_append_str(&j, "]");
    }
    http_buf_append_str(&j, "]");
    a.group = s->group;
    subs = j.oom ? NULL : http_client_escape(j.data, j.len);
    if (s->grouped)
        group = http_client_escape(s->group.ptr, s->group.len);
    if (subs != NULL && (!s->grouped || group != NULL)) {
        http_buf_printf(&t, "/api/v1/ephemeral/subscribe?subs=%s&from=%s%s%s",
                        subs, from[s->from], group ? "&group=" : "",
                        group ? group : "");
        if (!t.oom) {
            x->target = t.data;
            t.data = NULL;
            rc = c != NULL ? slice(s, k, c, stream_hash(&a)) : 0;
        }
    }
    http_buf_free(&t);
    http_buf_free(&j);
    free(subs);
    free(group);
    free(a.subs);
    return rc;
}

/* stream_watch_prepare - see stream_int.h. */
int
stream_watch_prepare(struct stream *s, const struct http_cursor *c)
{
    for (size_t k = 0; k < s->nwatches; k++) {
        int rc = target(s, k, c);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- the relay -------------------------------------------------------- */

/* recovered_of - a watch's recovered {"partitions": N, "missed": [...]}
 * added to s's. */
static void
recovered_of(struct stream *s, const char *p, size_t n)
{
    struct http_json j;
    int more;

    http_json_init(&j, p, n);
    if (http_json_peek(&j) != '{')
        return;
    for (more = http_json_enter(&j); more > 0; more = http_json_next(&j, '}')) {
        http_json_ws(&j);
        const char *k = j.p;
        if (http_json_key(&j, NULL, NULL) != 0)
            return;
        http_json_ws(&j);
        const char *v = j.p;
        if (http_json_value(&j) != 0)
            return;
        size_t vl = (size_t)(j.p - v);
        if (strncmp(k, "\"partitions\":", 13) == 0 && vl < 20 && v[0] >= '0' &&
            v[0] <= '9')
            s->resumed += strtoull(v, NULL, 10);
        else if (strncmp(k, "\"missed\":", 9) == 0 && v[0] == '[' && vl > 2) {
            if (s->missed.len > 0)
                http_buf_append_str(&s->missed, ",");
            http_buf_append(&s->missed, v + 1, vl - 2);
        }
    }
}

/* watch_of_cursor - where watch x stands, as its event's id names it: the
 * owner's entries (its own first) and, per partition of the watch in the
 * list's order, the entry it stands at. */
static void
watch_of_cursor(struct stream_watch *x, const struct http_sse_parsed *ev)
{
    struct stream *s = x->s;
    struct http_cursor c;
    unsigned j = 0;

    if (ev->id_len == 0 || http_cursor_decode(ev->id, ev->id_len, &c) != 0 ||
        c.nowners == 0)
        return;
    x->cur.n = c.nowners;
    memcpy(x->cur.inc, c.inc, sizeof(c.inc));
    memcpy(x->cur.w, c.w, sizeof(c.w));
    for (size_t i = 0; i < s->nsubs; i++) {
        struct stream_sub *u = &s->subs[i];
        if (u->part.len == 0 || u->watch != (int16_t)(x - s->watches))
            continue;
        u->went = j < c.nparts ? c.owner[j] : HTTP_CURSOR_NONE;
        j++;
    }
}

/* start_now - every watch has said where it starts: the first round here
 * (stream_first_round: recovered, open, what they relayed meanwhile). */
static void
start_now(struct stream *s)
{
    struct stream_set *set = s->w->streams;
    uint64_t h = shm_horizon(s->w->seg);
    int rc;

    if (h < set->horizon)
        h = set->horizon;
    set->horizon = h;
    if ((rc = stream_first_round(s, h, s->resume)) != 0) {
        log_error(-rc, "a stream's first read failed; the stream ends");
        stream_finish(s, STREAM_END_RETRY);
    }
}

/* reported - watch x has said where it starts: once all have, the stream
 * starts. */
static void
reported(struct stream_watch *x)
{
    struct stream *s = x->s;

    if (x->reported || s->starting == 0)
        return;
    x->reported = 1;
    if (--s->starting == 0)
        start_now(s);
}

/* relay - a message (or presence event) of watch x, with this stream's
 * cursor: to the client, or kept while the first round waits.  A
 * presence sync has no id, and goes without one. */
static void
relay(struct stream_watch *x, const struct http_sse_parsed *ev,
      const char *type)
{
    struct stream *s = x->s;
    char id[HTTP_CURSOR_MAX + 1];
    struct http_buf *b = s->starting ? &s->pending : &s->out;

    watch_of_cursor(x, ev);
    stream_cursor(s, s->wmark, 0, id);
    http_sse_event(b, ev->id_len ? id : NULL, type, ev->data, ev->data_len);
    shm_count(s->w->seg, s->w->set.slot, SHM_C_STREAM_EVENTS, 1);
    if (s->starting && s->pending.len > s->w->set.stream_buffer_bytes)
        stream_overflow(s);
}

/* is - the event's type is t. */
static int
is(const struct http_sse_parsed *ev, const char *t)
{
    return ev->type_len == strlen(t) && memcmp(ev->type, t, ev->type_len) == 0;
}

/* on_event - one event of watch x's stream (http_sse_parse_fn); non-zero
 * once the stream has ended. */
static int
on_event(void *arg, const struct http_sse_parsed *ev)
{
    struct stream_watch *x = arg;
    struct stream *s = x->s;

    if (is(ev, "message"))
        relay(x, ev, "message");
    else if (is(ev, "presence"))
        relay(x, ev, "presence");
    else if (is(ev, "open")) {
        watch_of_cursor(x, ev);
        x->open = x->cur;
        for (size_t i = 0; i < s->nsubs; i++)
            if (s->subs[i].watch == (int16_t)(x - s->watches))
                s->subs[i].went_open = s->subs[i].went;
        x->opened = 1;
        /* no recovered comes, or it came first (SPEC §11; an owner
         * of an older version sends it after open) */
        if (!s->resume || x->cursor == NULL || x->recovered)
            reported(x);
    } else if (is(ev, "recovered")) {
        recovered_of(s, ev->data, ev->data_len);
        x->recovered = 1;
        if (x->opened) /* where it starts is known: the open came */
            reported(x);
    } else if (is(ev, "error"))
        stream_finish(s, memmem(ev->data, ev->data_len, "token_expired", 13)
                             ? STREAM_END_EXPIRED
                             : STREAM_END_REVOKED);
    else if (is(ev, "overflow"))
        stream_finish(s, STREAM_END_RETRY);
    return s->end ? -ECANCELED : 0;
}

/* on_chunk - bytes of watch x's stream (http_client_chunk_fn). */
static int
on_chunk(void *arg, const char *p, size_t len)
{
    struct stream_watch *x = arg;
    struct stream *s = x->s;
    int rc = http_sse_parse_feed(&x->parser, p, len, on_event, x);

    if (s->end)
        return -ECANCELED;
    if (rc != 0) {
        log_info(-rc, "a stream's watch of node %s sent what it cannot read",
                 x->id);
        stream_finish(s, STREAM_END_RETRY);
        return rc;
    }
    stream_emitted(s);
    return 0;
}

/* on_end - watch x's stream is over (http_client_done_fn): the owner
 * closed it, or refused it, or cannot be reached.  The client comes back
 * (retry:) and the next watch goes where the owners say then. */
static void
on_end(void *arg, struct http_client_resp *r)
{
    struct stream_watch *x = arg;
    struct stream *s = x->s;

    x->call = NULL;
    if (s->end)
        return;
    if (r->status == 401 || r->status == 403)
        stream_finish(s, STREAM_END_REVOKED);
    else {
        if (r->err != 0 || r->status != 200)
            log_info(-r->err, "a stream's watch of node %s ended (%u)", x->id,
                     r->status);
        stream_finish(s, STREAM_END_RETRY);
    }
}

/* stream_watch_start - see stream_int.h. */
int
stream_watch_start(struct stream *s)
{
    struct worker *w = s->w;
    char last[HTTP_CURSOR_MAX + 32];

    for (size_t k = 0; k < s->nwatches; k++) {
        struct stream_watch *x = &s->watches[k];
        const char *headers[4] = {FORWARD_HEADER ": 1",
                                  "Accept: text/event-stream"};
        struct http_client_req r = {
            .method = "GET",
            .port = HTTP_CLIENT_PEER,
            .addr = x->addr,
            .target = x->target,
            .headers = headers,
            .nheaders = 2,
            .connect_timeout_ms = FORWARD_MS,
            .idle_s = 2 * w->set.stream_keepalive_s + 5,
        };
        if (s->authz != NULL)
            headers[r.nheaders++] = s->authz;
        if (x->cursor != NULL) {
            snprintf(last, sizeof(last), "Last-Event-ID: %s", x->cursor);
            headers[r.nheaders++] = last;
        }
        if (worker_addr_unusable(x->addr, w->owners.self_addr))
            return -EHOSTUNREACH;
        http_sse_parse_init(&x->parser, w->set.stream_buffer_bytes + 4096);
        int rc =
            http_client_stream(w->client, &r, on_chunk, on_end, x, &x->call);
        if (rc != 0) {
            x->call = NULL;
            return rc;
        }
    }
    return 0;
}

/* stream_watch_stop - see stream_int.h. */
void
stream_watch_stop(struct stream *s)
{
    for (size_t k = 0; k < s->nwatches; k++) {
        struct stream_watch *x = &s->watches[k];
        if (x->call != NULL)
            http_client_stream_cancel(x->call);
        x->call = NULL;
    }
}
