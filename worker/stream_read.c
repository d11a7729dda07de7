/*
 * stream_read.c - a stream's rounds (stream_int.h, DESIGN.md §4): what it
 * reads, in which order it emits, and where that leaves its cursor.
 *
 * A tail's round reads each dirty subscription's messages with W < seq <=
 * H (shm_tail: nothing taken, the waiter bit set in the same lock hold;
 * a whole queue raises the queue's bit first, then reads each partition),
 * sorts them by sequence and emits each as an event whose cursor says
 * "everything up to here": H was taken before the wake queue was drained,
 * so every push numbered <= H had posted its wake by then, and every
 * partition it touched is dirty in this round.  A partition holding more
 * above H stays dirty for a later round.  W becomes H.  A round whose
 * reads outgrow stream_buffer_bytes emits what is exact (up to the lowest
 * point a cut read reached) and ends the stream with overflow: the client
 * resumes from its cursor.
 *
 * A group stream pops (autoAck, so it holds no lease) while its out buffer
 * has room, and stops (paused) until the reader has taken it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/sse.h"
#include "shm/log.h"
#include "shm/presence.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/presence.h"
#include "worker/presence_stream.h"
#include "worker/stream_int.h"
#include "worker/worker_int.h"

#define GROUP_BATCH 256  /* messages a group stream pops a call */
#define SINK_FIRST  8192 /* the round sink's first size */

/* What one round gathers besides the records. */
struct round {
    uint64_t h;             /* the horizon it reads up to */
    uint64_t cut;           /* the lowest seq a read cut short reached, or H */
    int first;              /* the stream's first round */
    int resume;             /* ... with a cursor: gaps are missed partitions */
    size_t resumed;         /* subscriptions taken up */
    struct http_buf missed; /* the recovered event's entries */
};

/* set_of - w's streams. */
static struct stream_set *
set_of(const struct stream *s)
{
    return s->w->streams;
}

/* sink_grow - the round sink holds at least want bytes, at most max
 * (twice what it held, when that is more).  0, -ENOBUFS (it holds max
 * already), -ENOMEM. */
static int
sink_grow(struct shm_sink *k, size_t want, size_t max)
{
    size_t cap = k->cap < SINK_FIRST / 2 ? SINK_FIRST : k->cap * 2;
    unsigned char *b;

    if (k->cap >= max)
        return -ENOBUFS;
    cap = cap < want ? want : cap;
    cap = cap > max ? max : cap;
    if ((b = realloc(k->buf, cap)) == NULL)
        return -ENOMEM;
    k->buf = b;
    k->cap = cap;
    return 0;
}

/* recs_add - note the records a read put at off in the round sink, for
 * sub; drop: a gap made them unwanted. */
static int
recs_add(struct stream_set *set, size_t off, const struct shm_sink *k,
         uint32_t sub)
{
    const struct shm_popped *m = NULL;

    if (set->nrecs + k->count > set->recs_cap) {
        size_t cap = set->recs_cap ? set->recs_cap : 64;
        while (cap < set->nrecs + k->count)
            cap *= 2;
        struct stream_rec *r = realloc(set->recs, cap * sizeof(*r));
        if (r == NULL)
            return -ENOMEM;
        set->recs = r;
        set->recs_cap = cap;
    }
    while ((m = shm_popped_next(k, m)) != NULL)
        set->recs[set->nrecs++] = (struct stream_rec){
            .seq = m->seq,
            .off = off + (size_t)((const unsigned char *)m - k->buf),
            .sub = sub,
        };
    return 0;
}

/*
 * read_part - one shm_tail into the round sink (grown up to the stream's
 * budget, stream_buffer_bytes), its records noted for sub.  A read the
 * budget cuts short lowers rd->cut to the last seq it copied (to r->after
 * when not even one fits).  Returns the records or -errno.
 */
static int
read_part(struct stream *s, struct round *rd, uint32_t sub,
          const struct shm_tail_req *r, struct shm_tail_res *res)
{
    struct stream_set *set = set_of(s);
    struct shm_sink *all = &set->sink;
    size_t max = s->w->set.stream_buffer_bytes;
    int rc;

    for (;;) {
        size_t off = (all->used + 7) & ~(size_t)7;
        struct shm_sink k = {0};
        if (off < all->cap) {
            k = (struct shm_sink){.buf = all->buf + off, .cap = all->cap - off};
            rc = shm_tail(s->w->seg, s->w->set.slot, r, shm_now_ms(), &k, res);
        } else
            rc = -ENOMEM;
        if ((rc == -ENOMEM || (rc >= 0 && res->more)) &&
            sink_grow(all, off + k.need, max) == 0)
            continue;        /* read again, with room */
        if (rc == -ENOMEM) { /* not even one fits the budget */
            rd->cut = rd->cut < r->after ? rd->cut : r->after;
            return 0;
        }
        if (rc < 0)
            return rc;
        if (rc > 0 && recs_add(set, off, &k, sub) != 0)
            return -ENOMEM;
        all->used = off + k.used;
        if (res->more && res->pos.seq < rd->cut)
            rd->cut = res->pos.seq;
        return rc;
    }
}

/* stream_missed_add - see stream_int.h. */
void
stream_missed_add(struct stream *s, struct shm_name queue, const char *part,
                  size_t plen)
{
    struct shm_name q = worker_client_name(queue);
    struct http_buf *b = &s->missed;

    if (b->len > 0)
        http_buf_append_str(b, ",");
    if (shm_presence_named(queue)) {
        /* a presence_events channel: its events queue is no client's
         * (SPEC §12), so it is named as the channel the page asked for,
         * whose set it reloads (or the sync of from=last re-sends) */
        q = worker_presence_shown(queue);
        http_buf_append_str(b, "{\"channel\":");
        http_buf_append_json_str(b, q.ptr, q.len);
        http_buf_append_str(b, "}");
        return;
    }
    http_buf_append_str(b, "{\"queue\":");
    http_buf_append_json_str(b, q.ptr, q.len);
    if (part != NULL) {
        http_buf_append_str(b, ",\"partition\":");
        http_buf_append_json_str(b, part, plen);
    }
    http_buf_append_str(b, "}");
}

/* drop_from - the records of sub from index i on are not emitted (a gap
 * ended their partition's resume). */
static void
drop_from(struct stream_set *set, size_t i)
{
    for (; i < set->nrecs; i++)
        set->recs[i].drop = 1;
}

/* after_of - where sub reads from in this round: its start in the first
 * (from=last reads below W), then W, or its start while W is below it (a
 * resume that took it up further on: stream_int.h). */
static uint64_t
after_of(const struct stream *s, const struct stream_sub *sub,
         const struct round *rd)
{
    return rd->first || sub->after > s->wmark ? sub->after : s->wmark;
}

/* read_sub_part - a partition subscription's read: its bit set, its
 * handle followed, its gap (a resume) seen. */
static int
read_sub_part(struct stream *s, struct round *rd, uint32_t i)
{
    struct stream_sub *sub = &s->subs[i];
    struct shm_tail_req r = {
        .queue = sub->queue,
        .part = sub->part,
        .after = after_of(s, sub, rd),
        .upto = rd->h,
        .newest_only = rd->first && !rd->resume && s->from == SHM_FROM_LAST,
        .park = 1,
    };
    struct shm_tail_res res;
    size_t first_rec = set_of(s)->nrecs;
    int rc;

    if (sub->pos.seq <= r.after)
        r.pos = sub->pos;
    if ((rc = read_part(s, rd, i, &r, &res)) < 0)
        return rc;
    if (res.handle != 0 && res.handle != s->waits[i].handle)
        stream_rehandle(s, i, res.handle);
    sub->dirty = res.newest > rd->h;
    sub->pos = res.pos;
    if (rd->resume && !sub->missed && res.gap) {
        sub->missed = 1;
        drop_from(set_of(s), first_rec);
    }
    if (rd->resume && sub->missed)
        stream_missed_add(s, sub->queue, sub->part.ptr, sub->part.len);
    else if (rd->resume)
        s->resumed++;
    return 0;
}

/* part_name - shm_tail_parts: note a partition that may have more. */
static int
part_name(void *arg, struct shm_name part, uint64_t handle)
{
    struct stream_set *set = arg;

    if (set->nparts == set->parts_cap) {
        size_t cap = set->parts_cap ? set->parts_cap * 2 : 16;
        struct stream_part *p = realloc(set->parts, cap * sizeof(*p));
        if (p == NULL)
            return -ENOMEM;
        set->parts = p;
        set->parts_cap = cap;
    }
    memcpy(set->parts[set->nparts].name, part.ptr, part.len);
    set->parts[set->nparts].len = part.len;
    set->parts[set->nparts++].handle = handle;
    return 0;
}

/* qpos_slot - where handle's position is (or goes) in t (cap > n). */
static struct shm_tail_pos *
qpos_slot(struct stream_qpos *t, uint64_t handle)
{
    size_t i = (size_t)(handle * 0x9e3779b97f4a7c15ULL >> 20) & (t->cap - 1);

    while (t->v[i].handle != 0 && t->v[i].handle != handle)
        i = (i + 1) & (t->cap - 1);
    return &t->v[i];
}

/* qpos_grow - u's table, made or doubled, while under STREAM_QPOS_MAX
 * entries; 0, or -1 (full, or no memory: reads go from the head). */
static int
qpos_grow(struct stream_sub *u)
{
    struct stream_qpos *t = u->qpos, n = {0};

    if (t == NULL && (t = u->qpos = calloc(1, sizeof(*t))) == NULL)
        return -1;
    if (t->cap > 2 * t->n)
        return 0;
    if (t->n >= STREAM_QPOS_MAX)
        return -1;
    n.cap = t->cap ? t->cap * 2 : 16;
    if ((n.v = calloc(n.cap, sizeof(*n.v))) == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->v[i].handle != 0)
            *qpos_slot(&n, t->v[i].handle) = t->v[i], n.n++;
    free(t->v);
    *t = n;
    return 0;
}

/* qpos_find - where u's reads of the partition with handle stopped
 * (NULL: not kept); made, zeroed, with add. */
static struct shm_tail_pos *
qpos_find(struct stream_sub *u, uint64_t handle, int add)
{
    struct shm_tail_pos *p;

    if (add && qpos_grow(u) != 0)
        add = 0;
    if (u->qpos == NULL || u->qpos->cap == 0)
        return NULL;
    p = qpos_slot(u->qpos, handle);
    if (p->handle == 0 && !add)
        return NULL;
    if (p->handle == 0) {
        *p = (struct shm_tail_pos){.handle = handle};
        u->qpos->n++;
    }
    return p;
}

/* stream_qpos_free - see stream_int.h. */
void
stream_qpos_free(struct stream_sub *u)
{
    if (u->qpos != NULL)
        free(u->qpos->v);
    free(u->qpos);
    u->qpos = NULL;
}

/* read_sub_queue - a whole queue's read: its bit raised first, then each
 * partition that may hold more than where the stream stands read (no
 * bit: the queue's covers them), from where its last read stopped.  A
 * resume that cannot take the queue up here names each partition held
 * here missed (none held: nothing to miss). */
static int
read_sub_queue(struct stream *s, struct round *rd, uint32_t i)
{
    struct stream_set *set = set_of(s);
    struct stream_sub *sub = &s->subs[i];
    uint64_t handle, now = shm_now_ms(), after = after_of(s, sub, rd);
    int rc =
        shm_tail_queue(s->w->seg, s->w->set.slot, sub->queue, now, &handle);

    if (rc != 0)
        return rc;
    if (handle != s->waits[i].handle)
        stream_rehandle(s, i, handle);
    set->nparts = 0;
    /* a missed queue names what it holds: every partition */
    if (shm_tail_parts(s->w->seg, sub->queue,
                       rd->resume && sub->missed ? 0 : after, now, part_name,
                       set) != 0)
        return -ENOMEM;
    sub->dirty = 0;
    for (size_t k = 0; k < set->nparts; k++) {
        struct stream_part *p = &set->parts[k];
        struct shm_tail_req r = {
            .queue = sub->queue,
            .part = {p->name, p->len},
            .after = after,
            .upto = rd->h,
            .newest_only = rd->first && !rd->resume && s->from == SHM_FROM_LAST,
        };
        struct shm_tail_res res;
        struct shm_tail_pos *pos = qpos_find(sub, p->handle, 1);
        size_t first_rec = set->nrecs;
        if (pos != NULL && pos->seq != 0 && pos->seq <= after)
            r.pos = *pos;
        if ((rc = read_part(s, rd, i, &r, &res)) < 0)
            return rc;
        if (pos != NULL && res.pos.handle == p->handle)
            *pos = res.pos;
        sub->dirty |= res.newest > rd->h;
        if (rd->resume && (sub->missed || res.gap)) { /* what it holds */
            drop_from(set, first_rec);
            if (res.newest != 0 || !sub->missed)
                stream_missed_add(s, sub->queue, p->name, p->len);
        }
    }
    if (rd->resume && !sub->missed)
        s->resumed++;
    return 0;
}

/* count_events - n events s sent (mayfly_stream_events_total): once a
 * client's stream, so a peer's watch (forwarded) counts none: the stream
 * that relays them counts each (stream_watch.c). */
static void
count_events(const struct stream *s, uint64_t n)
{
    if (n > 0 && !s->forwarded)
        shm_count(s->w->seg, s->w->set.slot, SHM_C_STREAM_EVENTS, n);
}

/* rec_cmp - by sequence (qsort). */
static int
rec_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct stream_rec *)a)->seq;
    uint64_t y = ((const struct stream_rec *)b)->seq;

    return x < y ? -1 : x > y;
}

/* emit - the message event of m, read for subs[sub], with cursor id. */
static void
emit(struct stream *s, const struct shm_popped *m, uint32_t sub, const char *id)
{
    const char *part = (const char *)(m + 1), *data = part + m->part_len;
    struct shm_name q = worker_client_name(s->subs[sub].queue), to = {0};

    if (s->subs[sub].presence) { /* a channel's event (presence_stream.h) */
        worker_presence_stream_event(&s->out, id, data + m->reply_len,
                                     m->len - m->reply_len);
        return;
    }
    if (m->reply_len > 0)
        to = worker_client_name((struct shm_name){data, m->reply_len});
    struct http_sse_msg e = {
        .queue = q.ptr,
        .queue_len = q.len,
        .part = part,
        .part_len = m->part_len,
        .incarnation = s->w->incarnation,
        .seq = m->seq,
        .payload = data + m->reply_len,
        .payload_len = m->len - m->reply_len,
        .reply_to = m->reply_len > 0 ? to.ptr : NULL,
        .reply_len = to.len,
    };
    http_sse_message(&s->out, id, &e);
}

/* pending - what the watches relayed while the stream waited for them,
 * after its open (and recovered) event. */
static void
pending(struct stream *s)
{
    if (s->pending.len > 0)
        http_buf_append(&s->out, s->pending.data, s->pending.len);
    s->out.oom |= s->pending.oom;
    http_buf_free(&s->pending);
}

/* opening - the open event and the presence sync that start a stream: on
 * a resume after its recovered event, which SPEC §11 sends first (it has
 * no id: a client that drops before open resumes from its old cursor
 * again, and is told again what was missed). */
static void
opening(struct stream *s)
{
    stream_open_event(s);
    worker_presence_stream_sync(s);
}

/* recovered - the recovered event of a resume, before its messages: this
 * node's and its watches'. */
static void
recovered(struct stream *s)
{
    struct http_buf b = {0};

    http_buf_printf(&b, "{\"partitions\":%zu,\"missed\":[", s->resumed);
    if (s->missed.len > 0)
        http_buf_append(&b, s->missed.data, s->missed.len);
    http_buf_append_str(&b, "]}");
    if (!b.oom && !s->missed.oom)
        http_sse_event(&s->out, NULL, "recovered", b.data, b.len);
    else
        s->out.oom = 1;
    http_buf_free(&b);
    http_buf_free(&s->missed);
}

/* tail_round - see the file's comment.  0 or -errno (a read failed: the
 * stream cannot go on). */
static int
tail_round(struct stream *s, struct round *rd)
{
    struct stream_set *set = set_of(s);
    size_t n = 0;
    int rc = 0, any = 0;

    set->sink.used = 0;
    set->nrecs = 0;
    rd->cut = rd->h;
    for (uint32_t i = 0; i < s->nsubs && rc == 0; i++) {
        if (!s->subs[i].dirty || s->subs[i].watch >= 0)
            continue; /* read by its owner's watch */
        rc = s->subs[i].part.len > 0 ? read_sub_part(s, rd, i)
                                     : read_sub_queue(s, rd, i);
    }
    if (rc != 0)
        return rc;
    if (set->nrecs > 1)
        qsort(set->recs, set->nrecs, sizeof(*set->recs), rec_cmp);
    if (rd->resume)
        recovered(s);
    if (rd->first) {
        opening(s);
        pending(s);
    }
    for (size_t k = 0; k < set->nrecs; k++) {
        const struct stream_rec *r = &set->recs[k];
        char id[HTTP_CURSOR_MAX + 1];
        if (r->seq > rd->cut)
            break;
        if (r->drop)
            continue;
        stream_cursor(s, r->seq, 0, id); /* everything up to it delivered */
        emit(s, (const struct shm_popped *)(set->sink.buf + r->off), r->sub,
             id);
        n++;
    }
    if (rd->cut > s->wmark)
        s->wmark = rd->cut;
    for (uint32_t i = 0; i < s->nsubs; i++) {
        any |= s->subs[i].dirty && s->subs[i].watch < 0;
        if (s->subs[i].pos.seq > s->wmark)
            s->subs[i].pos = (struct shm_tail_pos){0};
    }
    count_events(s, n);
    if (rd->cut < rd->h)
        return -ENOBUFS; /* the budget cut it: overflow */
    if (any)
        stream_due(s);
    return 0;
}

/* group_sub - pop subs[i] for the group while out has room. */
static int
group_sub(struct stream *s, uint32_t i)
{
    struct stream_set *set = set_of(s);
    struct stream_sub *sub = &s->subs[i];
    struct shm_pop_req r = {
        .queue = sub->queue,
        .part = sub->part,
        .group = s->group,
        .batch = GROUP_BATCH,
        .auto_ack = 1,
        .from = s->from,
        .park = 1,
    };
    size_t room = s->w->set.stream_buffer_bytes / 2;
    char id[HTTP_CURSOR_MAX + 1];
    int rc;

    stream_cursor(s, 0, 0, id);
    while (sub->dirty) {
        if (s->out.len - s->sent >= room) {
            s->paused = 1;
            return 0;
        }
        rc = shm_pop(s->w->seg, s->w->set.slot, &r, shm_now_ms(), &set->sink);
        if (rc == -ENOMEM) {
            if ((rc = sink_grow(&set->sink, set->sink.need, SIZE_MAX)) != 0)
                return rc;
            continue;
        }
        if (rc < 0)
            return rc;
        if (rc == 0) {
            uint64_t h = shm_pop_handle(s->w->seg, sub->queue, sub->part);
            if (h != 0 && h != s->waits[i].handle)
                stream_rehandle(s, i, h);
            sub->dirty = 0;
            break;
        }
        for (const struct shm_popped *m = NULL;
             (m = shm_popped_next(&set->sink, m)) != NULL;)
            emit(s, m, i, id);
        count_events(s, (uint64_t)rc);
    }
    return 0;
}

/* group_round - each dirty subscription popped. */
static int
group_round(struct stream *s)
{
    int rc = 0;

    s->paused = 0;
    for (uint32_t i = 0; i < s->nsubs && rc == 0 && !s->paused; i++)
        if (s->subs[i].watch < 0)
            rc = group_sub(s, i);
    return rc;
}

/* finish - after a round: send what it emitted, or end the stream. */
static void
finish(struct stream *s, int rc)
{
    if (rc == -ENOBUFS)
        stream_overflow(s);
    else if (rc != 0) {
        log_error(-rc, "a stream's read failed; the stream ends");
        stream_finish(s, STREAM_END_RETRY);
    } else
        stream_emitted(s);
}

/* stream_first_round - see stream_int.h. */
int
stream_first_round(struct stream *s, uint64_t h, int resume)
{
    struct round rd = {.h = h, .first = 1, .resume = resume};
    int rc;

    for (size_t i = 0; i < s->nsubs; i++)
        s->subs[i].dirty = s->subs[i].watch < 0;
    if (s->grouped) {
        opening(s);
        pending(s);
    }
    rc = s->grouped ? group_round(s) : tail_round(s, &rd);
    s->started = 1;
    s->round_h = h;
    if (rc == -ENOBUFS || rc == 0) {
        finish(s, rc);
        return 0;
    }
    return rc;
}

/* stream_round - see stream_int.h. */
void
stream_round(struct stream *s, uint64_t h)
{
    struct round rd = {.h = h};
    int rc;

    if (s->end || !s->started)
        return; /* the first round, when it comes, reads everything */
    if (!s->grouped && !s->woken && h <= s->round_h) {
        stream_due(s); /* dirty, and the horizon has not moved: later */
        return;
    }
    s->woken = 0;
    s->round_h = h;
    rc = s->grouped ? group_round(s) : tail_round(s, &rd);
    finish(s, rc);
}

/* stream_set_free - see stream_int.h. */
void
stream_set_free(struct stream_set *set)
{
    free(set->sink.buf);
    free(set->recs);
    free(set->parts);
    memset(set, 0, sizeof(*set));
}
