/*
 * stream_life.c - the life of an open stream (stream_int.h): parked, it
 * meets the loop's events (a wake marks subscriptions dirty and puts it
 * on the due list; a deadline is its keepalive, its token's expiry, or a
 * retry while a round left it holding more; a hang-up, a revocation, a
 * drain, a stale view, a change of who owns its subscriptions end it),
 * its out buffer feeds MHD, and it ends:
 * a last event says why, MHD sends what is left, and the request's end
 * frees it.
 *
 * Out buffer: bytes out.data[sent..len) are what MHD has not taken yet;
 * once it has taken all, the buffer is freed (an idle stream holds none).
 * Past stream_buffer_bytes of them the stream overflows: the unsent
 * events go but the one MHD took a part of, so the client's last id is
 * an event it has whole, and the memory returns at once (malloc_trim:
 * glibc keeps a freed block of that size otherwise).
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/request.h"
#include "http/sse.h"
#include "http/stream_body.h"
#include "shm/broker.h"
#include "shm/horizon.h"
#include "shm/log.h"
#include "shm/stats.h"
#include "worker/parked.h"
#include "worker/presence_stream.h"
#include "worker/stream.h"
#include "worker/stream_int.h"
#include "worker/worker_int.h"

#define TRIM_FROM (128 * 1024) /* a buffer freed this big: malloc_trim */

#define STREAM_OF(p) ((struct stream *)(void *)(p)) /* park is first */

_Static_assert(offsetof(struct stream, park) == 0, "park first");

/* due_unlink - s off its set's due list. */
static void
due_unlink(struct stream *s)
{
    struct stream_set *set = s->w->streams;

    if (!s->due)
        return;
    if (s->due_prev != NULL)
        s->due_prev->due_next = s->due_next;
    else
        set->due = s->due_next;
    if (s->due_next != NULL)
        s->due_next->due_prev = s->due_prev;
    s->due_prev = s->due_next = NULL;
    s->due = 0;
}

/* next_deadline - s's next keepalive, expiry, or retry (due). */
static uint64_t
next_deadline(const struct stream *s, uint64_t now)
{
    uint64_t t = s->written_at + (uint64_t)s->w->set.stream_keepalive_s * 1000;

    if (s->exp_at != 0 && s->exp_at < t)
        t = s->exp_at;
    if (s->due && now + 1 < t)
        t = now + 1;
    return t > now ? t : now + 1;
}

/* stream_due - see stream_int.h.  Before it is parked (its first round),
 * only noted.  The loop runs the due list's rounds at its next drain of
 * the wake queue, which every turn ends with. */
void
stream_due(struct stream *s)
{
    struct stream_set *set = s->w->streams;

    if (s->end || s->due)
        return;
    if (!s->park.parked) {
        s->due_later = 1;
        return;
    }
    s->due = 1;
    s->due_prev = NULL;
    s->due_next = set->due;
    if (set->due != NULL)
        set->due->due_prev = s;
    set->due = s;
}

/* stream_rehandle - see stream_int.h.  Parked, it leaves the index and
 * comes back with the new handle (no waiter bit is cleared on the way);
 * the old handle's bit goes once nothing of this worker waits there. */
void
stream_rehandle(struct stream *s, size_t i, uint64_t handle)
{
    struct worker *w = s->w;
    uint64_t old = s->waits[i].handle;

    if (!s->park.parked) {
        s->waits[i].handle = handle;
        return;
    }
    park_remove(&w->parks, &s->park);
    s->waits[i].handle = handle;
    if (park_add(&w->parks, &s->park) != 0)
        log_error(ENOMEM, "a stream left the parked index"); /* cannot:
                                                                 room freed */
    if (old != 0 && park_chain(&w->parks, old) == NULL)
        shm_unpark(w->seg, w->set.slot, old);
}

/* ent_add - the index of owner entry (inc, w) in c, added when new; NONE
 * when the cursor holds no more. */
static uint8_t
ent_add(struct http_cursor *c, uint64_t inc, uint64_t w)
{
    for (unsigned o = 0; o < c->nowners; o++)
        if (c->inc[o] == inc && c->w[o] == w)
            return (uint8_t)o;
    if (c->nowners == HTTP_CURSOR_OWNERS)
        return HTTP_CURSOR_NONE;
    c->inc[c->nowners] = inc;
    c->w[c->nowners] = w;
    return (uint8_t)c->nowners++;
}

/* stream_cursor - see stream_int.h.  Each owner's own entry comes first
 * of its incarnation's (this node's at wmark, then each watch's first),
 * so that a whole queue resumes from it (stream.c: resume_from); the
 * entries a partition still stands at follow (stream_sub).  A group
 * stream's names no owner: the group's place is the broker's to keep. */
void
stream_cursor(const struct stream *s, uint64_t wmark, int open, char *out)
{
    struct http_cursor c;

    unsigned mains;

    c.hash = s->hash;
    c.nowners = 0;
    c.nparts = 0;
    if (!s->grouped) {
        ent_add(&c, s->w->incarnation, wmark);
        for (size_t k = 0; k < s->nwatches; k++) {
            const struct stream_ents *e =
                open ? &s->watches[k].open : &s->watches[k].cur;
            if (e->n > 0)
                ent_add(&c, e->inc[0], e->w[0]);
        }
    }
    mains = c.nowners;
    for (size_t i = 0; i < s->nsubs; i++) {
        const struct stream_sub *u = &s->subs[i];
        uint8_t o = HTTP_CURSOR_NONE;
        if (u->part.len == 0)
            continue;
        if (s->grouped)
            ;
        else if (u->watch < 0)
            o = u->after <= wmark ? 0 : ent_add(&c, u->name_inc, u->name_w);
        else {
            const struct stream_ents *e =
                open ? &s->watches[u->watch].open : &s->watches[u->watch].cur;
            uint8_t j = open ? u->went_open : u->went;
            if (j < e->n)
                o = ent_add(&c, e->inc[j], e->w[j]);
        }
        c.owner[c.nparts++] = o;
    }
    if (http_cursor_encode(&c, out) >= 0)
        return;
    /* Too long: the partitions still at other places are named by none
     * (a resume from here misses them). */
    for (unsigned k = 0; k < c.nparts; k++)
        if (c.owner[k] != HTTP_CURSOR_NONE && c.owner[k] >= mains)
            c.owner[k] = HTTP_CURSOR_NONE;
    c.nowners = mains;
    if (http_cursor_encode(&c, out) < 0)
        out[0] = '\0'; /* cannot: stream_max_subs keeps it short */
}

/* stream_open_event - see stream_int.h. */
void
stream_open_event(struct stream *s)
{
    char id[HTTP_CURSOR_MAX + 1], data[32];
    int n = snprintf(data, sizeof(data), "{\"subs\":%zu}", s->nsubs);

    stream_cursor(s, s->wmark, 1, id);
    http_sse_event(&s->out, id, "open", data, (size_t)n);
}

/* stop - no more events or waits: off the index and the due list, its
 * watches dropped. */
static void
stop(struct stream *s)
{
    s->end = 1;
    due_unlink(s);
    worker_unpark(s->w, &s->park);
    stream_watch_stop(s);
}

/* stream_emitted - see stream_int.h. */
void
stream_emitted(struct stream *s)
{
    size_t unsent = s->out.len - s->sent;

    if (s->out.oom || unsent > s->w->set.stream_buffer_bytes) {
        stream_overflow(s);
        return;
    }
    if (s->sent > 0 && s->sent >= s->out.len / 2) { /* keep it compact */
        memmove(s->out.data, s->out.data + s->sent, unsent + 1);
        s->out.len = unsent;
        s->sent = 0;
    }
    if (unsent > 0) {
        s->written_at = shm_now_ms();
        http_body_more(s->req);
    }
}

/* event_end - where the event that holds byte at ends in b. */
static size_t
event_end(const struct http_buf *b, size_t at)
{
    const char *e;

    if (at == 0 ||
        (at >= 2 && b->data[at - 1] == '\n' && b->data[at - 2] == '\n'))
        return at;
    e = memmem(b->data + at - 1, b->len - at + 1, "\n\n", 2);
    return e != NULL ? (size_t)(e - b->data) + 2 : b->len;
}

/* stream_overflow - see stream_int.h. */
void
stream_overflow(struct stream *s)
{
    struct http_buf b = {0};
    size_t keep = event_end(&s->out, s->sent), cap = s->out.cap;
    char data[64];
    int n = snprintf(data, sizeof(data), "{\"limit\":%llu}",
                     (unsigned long long)s->w->set.stream_buffer_bytes);

    if (s->end)
        return;
    if (keep > s->sent)
        http_buf_append(&b, s->out.data + s->sent, keep - s->sent);
    http_sse_event(&b, NULL, "overflow", data, (size_t)n);
    http_buf_free(&s->out);
    s->out = b;
    s->sent = 0;
    if (cap >= TRIM_FROM)
        malloc_trim(0);
    shm_count(s->w->seg, s->w->set.slot, SHM_C_STREAM_OVERFLOWS, 1);
    stop(s);
    http_body_more(s->req);
}

/* stream_finish - see stream_int.h. */
void
stream_finish(struct stream *s, enum stream_end why)
{
    if (s->end)
        return;
    if (why == STREAM_END_RETRY)
        http_sse_retry(&s->out, STREAM_RETRY_MS);
    else
        http_sse_event(&s->out, NULL, "error",
                       why == STREAM_END_EXPIRED
                           ? "{\"code\":\"token_expired\"}"
                           : "{\"code\":\"unauthorized\"}",
                       why == STREAM_END_EXPIRED ? 24 : 23);
    stop(s);
    http_body_more(s->req);
}

/* stream_body_read - see stream_int.h. */
ssize_t
stream_body_read(void *arg, char *buf, size_t max)
{
    struct stream *s = arg;
    size_t n = s->out.len - s->sent;

    if (n == 0)
        return s->end ? -1 : 0;
    n = n < max ? n : max;
    memcpy(buf, s->out.data + s->sent, n);
    s->sent += n;
    if (s->sent < s->out.len)
        return (ssize_t)n;
    http_buf_free(&s->out); /* an idle stream holds no buffer */
    s->sent = 0;
    if (s->paused && !s->end) { /* a group stream pops again */
        s->paused = 0;
        for (size_t i = 0; i < s->nsubs; i++)
            s->subs[i].dirty = s->subs[i].watch < 0;
        stream_due(s);
    }
    return (ssize_t)n;
}

/* stream_release - see stream_int.h. */
void
stream_release(struct stream *s)
{
    worker_presence_stream_end(s); /* its member's grace starts */
    stream_watch_stop(s);
    for (size_t k = 0; k < s->nwatches; k++) {
        http_sse_parse_free(&s->watches[k].parser);
        free(s->watches[k].target);
        free(s->watches[k].cursor);
    }
    free(s->watches);
    http_buf_free(&s->out);
    http_buf_free(&s->pending);
    http_buf_free(&s->missed);
    free(s->authz);
    for (size_t i = 0; s->subs != NULL && i < s->nsubs; i++)
        stream_qpos_free(&s->subs[i]);
    free(s->subs);
    free(s->waits);
    free(s->names);
    free(s);
}

/* stream_done - see stream_int.h. */
void
stream_done(void *arg, int sent_ok)
{
    struct stream *s = arg;
    struct worker *w = s->w;

    (void)sent_ok;
    stop(s);
    shm_streams_add(w->seg, w->set.slot, -1);
    w->streams->open--;
    stream_release(s);
}

/* on_wake - parked.h: the subscriptions that wait on handle (0: all) are
 * read at the next round.  A grouped stream's round takes messages
 * (autoAck): not for a client that left while the loop could not see it
 * (parked.h, worker_parked_gone). */
static int
on_wake(struct park *p, uint64_t handle, const struct park *empty)
{
    struct stream *s = STREAM_OF(p);

    (void)empty;
    if (s->grouped && worker_parked_gone(p)) { /* as on_hangup */
        stop(s);
        http_request_abort(s->req);
        return 0;
    }
    for (size_t i = 0; i < s->nsubs; i++)
        if (s->subs[i].watch < 0 &&
            (handle == 0 || s->waits[i].handle == handle))
            s->subs[i].dirty = 1;
    s->woken = 1;
    stream_due(s);
    return 0;
}

/* on_deadline - parked.h: the token's expiry ends it; a keepalive after
 * stream_keepalive_s without a byte; then the next deadline. */
static void
on_deadline(struct park *p)
{
    struct stream *s = STREAM_OF(p);
    uint64_t now = shm_now_ms();

    if (s->exp_at != 0 && now >= s->exp_at) {
        stream_finish(s, STREAM_END_EXPIRED);
        return;
    }
    if (now >= s->written_at + (uint64_t)s->w->set.stream_keepalive_s * 1000) {
        http_sse_comment(&s->out, "keepalive");
        stream_emitted(s);
        if (s->end)
            return;
    }
    park_update_deadline(&s->w->parks, p, next_deadline(s, now));
}

/* on_hangup - parked.h: the client left; the connection closes. */
static void
on_hangup(struct park *p)
{
    struct stream *s = STREAM_OF(p);

    stop(s);
    http_request_abort(s->req);
}

/* on_revoke - parked.h: the token is gone. */
static void
on_revoke(struct park *p)
{
    stream_finish(STREAM_OF(p), STREAM_END_REVOKED);
}

/* on_moved - parked.h: who owns its subscriptions changed; the client
 * comes back and asks the owners there are now. */
static void
on_moved(struct park *p)
{
    struct stream *s = STREAM_OF(p);

    if (stream_plan_hash(s) != s->plan)
        stream_finish(s, STREAM_END_RETRY);
}

/* on_drain - parked.h (and on_stale): the client reconnects elsewhere,
 * or here later. */
static void
on_drain(struct park *p)
{
    stream_finish(STREAM_OF(p), STREAM_END_RETRY);
}

static const struct park_ops stream_events = {
    .on_wake = on_wake,
    .on_deadline = on_deadline,
    .on_hangup = on_hangup,
    .on_revoke = on_revoke,
    .on_drain = on_drain,
    .on_moved = on_moved,
    .on_stale = on_drain,
};

/* stream_park - see stream_int.h. */
void
stream_park(struct stream *s)
{
    struct worker *w = s->w;
    uint64_t now = shm_now_ms();

    if (s->end)
        return;
    s->park.ops = &stream_events;
    s->park.deadline = next_deadline(s, now);
    if (worker_park(w, &s->park) != 0) {
        stop(s);
        http_request_abort(s->req); /* gone already, or no memory */
        return;
    }
    if (s->due_later) {
        s->due_later = 0;
        stream_due(s);
    }
}

/* worker_streams_before_drain - see stream.h. */
void
worker_streams_before_drain(struct worker *w)
{
    struct stream_set *set = w->streams;
    uint64_t h;

    if (set == NULL || set->open == 0)
        return;
    if ((h = shm_horizon(w->seg)) > set->horizon)
        set->horizon = h;
}

/* worker_streams_after_drain - see stream.h.  The list is taken whole
 * first: a round that leaves its stream holding more above the horizon
 * puts it on the next one, and its deadline a millisecond away, so the
 * loop comes back for it (nothing wakes a stream when the horizon moves). */
void
worker_streams_after_drain(struct worker *w)
{
    struct stream_set *set = w->streams;
    struct stream *s, *next;
    uint64_t now;

    if (set == NULL || set->due == NULL)
        return;
    s = set->due;
    set->due = NULL;
    for (; s != NULL; s = next) {
        next = s->due_next;
        s->due = 0;
        s->due_prev = s->due_next = NULL;
        if (next != NULL)
            next->due_prev = NULL;
        stream_round(s, set->horizon);
    }
    now = shm_now_ms();
    for (s = set->due; s != NULL; s = s->due_next)
        if (s->park.deadline > now + 1)
            park_update_deadline(&w->parks, &s->park, now + 1);
    if (set->sink.cap > TRIM_FROM) { /* a big round's scratch goes */
        free(set->sink.buf);
        set->sink = (struct shm_sink){0};
    }
}
