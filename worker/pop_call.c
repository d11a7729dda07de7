/*
 * pop_call.c - see pop_call.h: the life of a pop of any kind.
 *
 * A call takes what it can at once; when it may wait and found nothing
 * (or its window is not full) it parks (parked.h; shm_pop set the waiter
 * bit) until a push wakes it, its deadline passes, its client hangs up,
 * its token is revoked, what it waits on moves to another node, or the
 * worker drains; then it answers with what it holds, its kind's way.
 */
#include "worker/pop_call.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/edge_pool.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/board.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/pop_format.h"
#include "worker/worker_int.h"

#define SINK_MIN 2048 /* a small pop's answer; bigger ones grow as needed */
#define SINK_MAX (16 * 1024 * 1024)
/* An entry's bytes beside its payload, for the first reservation of a
 * 256-byte payload's answer: with a short partition name an entry takes
 * about 345, and room's bound about 390. */
#define ENTRY_EST 320
#define ENTRY_PAD 160

/* A long poll parked this long holding nothing gives back the pages of
 * its connection's MHD pool that hold only zeros (http/edge_pool.h): 17
 * KB of a 22 KB parked pop.  Not at once: a short wait (a reply coming
 * within microseconds) would pay the two system calls and the pages'
 * faults when MHD zeroes its pool again after the answer, for nothing. */
#define TRIM_AFTER_MS 100

#define CALL_OF(p) POP_KIND_OF(p, struct pop_call, park)

/* sink_reserve - make the sink hold at least want bytes.  0 or -ENOMEM. */
static int
sink_reserve(struct shm_sink *s, size_t want)
{
    if (s->cap >= want)
        return 0;
    unsigned char *b = realloc(s->buf, want);
    if (b == NULL)
        return -ENOMEM;
    s->buf = b;
    s->cap = want;
    return 0;
}

/* answer_room - the answer's room for n more entries, at first. */
static size_t
answer_room(uint32_t n)
{
    size_t room = (size_t)n * (ENTRY_EST + ENTRY_PAD) + SINK_MIN;

    return room < SINK_MAX ? room : SINK_MAX;
}

/*
 * pop_into - one shm_pop into sink, growing it (or, written as it takes,
 * the answer: room free for entries at first) when even one message would
 * not fit.  The answer stays within SINK_MAX but for a call holding
 * nothing yet: it takes one message past it (max_body_bytes may let a
 * push store one), else that message would block its partition, every
 * pop answering -ENOMEM, until its ttl.  Returns the count or -errno.
 */
static int
pop_into(struct pop_call *c, struct shm_sink *sink, uint32_t batch, int park,
         size_t room)
{
    struct shm_pop_req r = c->pop;
    size_t tail = 2 + c->results.len; /* "]}", and the results spliced */
    int rc;

    r.park = park;
    r.batch = batch;
    for (;;) {
        if (sink->fmt != NULL &&
            pop_fmt_begin(&c->fmt, c->pop.queue, room, tail) != 0)
            return -ENOMEM;
        rc = shm_pop(c->w->seg, c->w->set.slot, &r, shm_now_ms(), sink);
        if (rc != -ENOMEM)
            return rc;
        int grew = 0, first = c->sink.count == 0;
        if (sink->need > sink->cap) {
            if ((!first && sink->need > SINK_MAX) ||
                sink_reserve(sink, sink->need))
                return -ENOMEM;
            /* what a round of scratch takes, the answer's records have
             * room for before it (append cannot fail) */
            if (sink != &c->sink &&
                sink_reserve(&c->sink, c->sink.used + sink->cap) != 0)
                return -ENOMEM;
            grew = 1;
        }
        if (sink->fmt != NULL && c->fmt.hook.need > 0) {
            if (!first && c->fmt.out.len + c->fmt.hook.need > SINK_MAX)
                return -ENOMEM;
            room = c->fmt.hook.need;
            grew = 1;
        }
        if (!grew)
            return -ENOMEM;
    }
}

/* append - add the records scratch holds to the answer's, whose room
 * was reserved before the round (pop_call_take, pop_into): it cannot
 * fail once their entries are written. */
static void
append(struct pop_call *c)
{
    memcpy(c->sink.buf + c->sink.used, c->more.buf, c->more.used);
    c->sink.used += c->more.used;
    c->sink.count += c->more.count;
}

/* short_of_room - the last round stopped for room (more may be there):
 * the answer's room refused (written as it takes), or, the best guess,
 * the records filled more than half their buffer. */
static int
short_of_room(const struct pop_call *c)
{
    return (c->sink.fmt != NULL && c->fmt.hook.need > 0) ||
           c->sink.used > c->sink.cap / 2;
}

/* answer_bytes - the answer's bytes so far (its records', raw). */
static size_t
answer_bytes(const struct pop_call *c)
{
    return c->sink.fmt != NULL ? c->fmt.out.len : c->sink.used;
}

/*
 * pop_call_take - see pop_call.h.  The first shm_pop goes straight into
 * the answer; more rounds, through scratch, follow only while the answer's
 * buffer was what stopped a round (big payloads) or a window still waits
 * for more.  A windowed round that finds nothing sets the waiter bit again
 * (park), so the next push wakes us.
 */
int
pop_call_take(struct pop_call *c, uint32_t target, int park)
{
    uint32_t want = target ? target : c->pop.batch;
    int rc;

    /* From the first message on, what the call holds is leased to it. */
    c->leased = !c->pop.auto_ack;
    if (c->sink.count == 0) {
        rc = pop_into(c, &c->sink, want, park, answer_room(want));
        if (rc <= 0)
            return rc;
    }
    while (c->sink.count < want && answer_bytes(c) < SINK_MAX &&
           (target || short_of_room(c))) {
        if (sink_reserve(&c->more, c->sink.cap) != 0 ||
            sink_reserve(&c->sink, c->sink.used + c->more.cap) != 0)
            break;
        rc = pop_into(c, &c->more, want - c->sink.count, target && park,
                      answer_room(want - c->sink.count));
        if (rc <= 0)
            break;
        append(c);
    }
    return (int)c->sink.count;
}

/* pop_call_try - see pop_call.h. */
int
pop_call_try(struct pop_call *c, int park)
{
    return c->kind->take ? c->kind->take(c, park) : pop_call_take(c, 0, park);
}

/* window - c holds some and waits for more (its kind's window): until
 * when; else 0. */
static uint64_t
window(const struct pop_call *c, uint64_t now)
{
    return c->kind->window ? c->kind->window(c, now) : 0;
}

/* pop_call_answer - see pop_call.h. */
void
pop_call_answer(struct pop_call *c)
{
    struct http_buf b = {0};

    c->leased = c->leased && c->sink.count > 0;
    pop_fmt_finish(&c->fmt, c->pop.queue, &b);
    pop_call_reply(c, &b);
}

/* pop_call_reply - see pop_call.h.  The results go last, in place of the
 * body's closing brace: the messages are not copied again. */
void
pop_call_reply(struct pop_call *c, struct http_buf *body)
{
    const struct http_buf *r = &c->results;

    while (r->len > 1 && body->len > 0 && body->data[body->len - 1] != '}')
        body->len--; /* trailing whitespace, if a peer wrote any */
    if (r->len > 1 && body->len > 0) {
        body->len--;
        http_buf_append(body, ",", 1);
        http_buf_append(body, r->data + 1, r->len - 1);
    }
    http_reply(c->req, 200, body);
}

/* pop_call_end - see pop_call.h. */
void
pop_call_end(struct pop_call *c, int rc)
{
    if (c->kind->leave)
        c->kind->leave(c);
    if (rc < 0)
        http_reply_errno(c->req, rc, "pop");
    else if (c->kind->answer)
        c->kind->answer(c);
    else
        pop_call_answer(c);
    http_request_resume(c->req);
}

/* pop_call_unpark - see pop_call.h. */
void
pop_call_unpark(struct pop_call *c)
{
    struct worker *w = c->w;

    if (!worker_unpark(w, &c->park))
        return;
    shm_park_count(w->seg, w->set.slot, c->wait.handle, -1);
    shm_parked_add(w->seg, w->set.slot, -1);
}

/* on_done - the request ended: release unsent leases, free the call. */
static void
on_done(void *arg, int sent_ok)
{
    struct pop_call *c = arg;

    pop_call_unpark(c);
    if (c->kind->done)
        c->kind->done(c);
    if (c->leased && !sent_ok)
        shm_release(c->w->seg, c->w->set.slot, c->pop.queue, c->pop.group,
                    &c->sink, shm_now_ms());
    free(c->sink.buf);
    free(c->more.buf);
    http_buf_free(&c->fmt.out);
    http_buf_free(&c->results);
    free(c->names);
    free(c); /* the kind's struct: c is its first member */
}

/* pop_call_park - see pop_call.h. */
int
pop_call_park(struct pop_call *c, uint32_t timeout_ms)
{
    struct worker *w = c->w;
    uint64_t now = shm_now_ms(), until;
    int rc;

    /* a long poll served again after its owner stopped (forward.h) waits
     * what its first wait had left */
    timeout_ms = worker_forward_wait_left(c->req, timeout_ms);
    c->wait.handle = shm_pop_handle(w->seg, c->pop.queue, c->pop.part);
    c->park.deadline = now + timeout_ms;
    c->answer_by = 0;
    if (c->sink.count > 0 && (until = window(c, now)) != 0 &&
        until < c->park.deadline)
        c->park.deadline = until;
    else if (c->sink.count == 0 && timeout_ms > 2 * TRIM_AFTER_MS) {
        c->answer_by = c->park.deadline; /* pop_call_on_deadline */
        c->park.deadline = now + TRIM_AFTER_MS;
    }
    if ((rc = worker_park(w, &c->park)) != 0)
        return rc;
    if (c->sink.count == 0) /* a long poll holds no answer while it waits */
        http_buf_free(&c->fmt.out);
    shm_parked_add(w->seg, w->set.slot, 1);
    shm_park_count(w->seg, w->set.slot, c->wait.handle, 1);
    http_request_suspend(c->req); /* no-op when the cluster pop did */
    return 0;
}

/* pop_call_serve - see pop_call.h.  Held only, the first take sets no
 * waiter bit (it would wake this worker for nothing once it answered
 * empty); a window it opened takes once more with the bit, so the next
 * push wakes it. */
int
pop_call_serve(struct pop_call *c, int may_park, uint32_t timeout_ms)
{
    int held = may_park == POP_PARK_HELD;
    int rc = pop_call_try(c, may_park && !held);

    if (held && rc > 0 && window(c, shm_now_ms()) != 0)
        rc = pop_call_try(c, 1);
    if (rc >= 0 && (rc == 0 ? !held : window(c, shm_now_ms()) != 0) &&
        may_park && pop_call_park(c, timeout_ms) == 0)
        return 1;
    pop_call_end(c, rc);
    return 0;
}

/* copy_names - c keeps its own copies of r's names. */
static int
copy_names(struct pop_call *c, const struct shm_pop_req *r)
{
    size_t ql = r->queue.len, pl = r->part.len, gl = r->group.len;
    char *n = malloc(ql + pl + gl + 3);

    if (n == NULL)
        return -ENOMEM;
    c->names = n;
    memcpy(n, r->queue.ptr, ql);
    c->pop.queue = (struct shm_name){n, ql};
    n += ql + 1;
    memcpy(n, r->part.ptr, pl);
    c->pop.part = (struct shm_name){n, pl};
    n += pl + 1;
    memcpy(n, r->group.ptr, gl);
    c->pop.group = (struct shm_name){n, gl};
    return 0;
}

/* pop_call_new - see pop_call.h. */
struct pop_call *
pop_call_new(size_t size, const struct pop_kind *kind, struct worker *w,
             struct http_request *req, const struct shm_pop_req *r)
{
    struct pop_call *c = calloc(1, size);
    /* raw records carry the payloads; else a record is its header, its
     * partition's name, which may be any's, and a pointer (broker.h; room
     * for two batches, so that one filled more than half means short of
     * room) */
    size_t rec = ((sizeof(struct shm_popped) +
                   (r->part.len > 0 ? r->part.len : 32) + 7) &
                  ~(size_t)7) +
                 sizeof(const char *);
    size_t want = kind->raw ? (size_t)r->batch * ENTRY_EST + SINK_MIN
                            : 2 * (size_t)r->batch * rec + 256;

    if (c == NULL)
        return NULL;
    c->pop = *r;
    if (!kind->raw) {
        pop_fmt_init(&c->fmt, w->incarnation, SINK_MAX);
        c->sink.fmt = &c->fmt.hook;
        c->more.fmt = &c->fmt.hook;
    }
    if (copy_names(c, r) != 0 ||
        sink_reserve(&c->sink, want < SINK_MAX ? want : SINK_MAX) != 0) {
        free(c->names);
        free(c);
        return NULL;
    }
    c->kind = kind;
    c->w = w;
    c->req = req;
    c->park.ops = kind->events;
    c->park.req = req;
    c->park.waits = &c->wait;
    c->park.nwaits = 1;
    c->park.fd = -1;
    http_request_on_done(req, on_done, c);
    return c;
}

/* name_eq - the same name. */
static int
name_eq(struct shm_name a, struct shm_name b)
{
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* same_take - a and b would find the same messages (what batch and
 * autoAck change is how many are taken and how, not whether any are). */
static int
same_take(const struct shm_pop_req *a, const struct shm_pop_req *b)
{
    return a->from == b->from && name_eq(a->queue, b->queue) &&
           name_eq(a->part, b->part) && name_eq(a->group, b->group);
}

/*
 * pop_call_on_wake - parked.h: try again, unless the client left while
 * the loop could not see it (worker_parked_gone: then as on a hang-up).
 * Once one found nothing, the others of this wake asking for the same
 * (responders long-polling one queue in one group) would find nothing
 * too: they stay parked without a try, and the waiter bit the empty try
 * set again wakes them all next time.
 */
int
pop_call_on_wake(struct park *p, uint64_t handle, const struct park *empty)
{
    struct pop_call *c = CALL_OF(p);
    uint32_t held = c->sink.count;
    uint64_t until;

    (void)handle; /* a pop waits on one */
    if (empty != NULL && empty->ops->on_wake == pop_call_on_wake &&
        same_take(&CALL_OF(empty)->pop, &c->pop))
        return 1;
    if (worker_parked_gone(p)) { /* its client left unheard: take nothing */
        p->ops->on_hangup(p);
        return 0;
    }
    int rc = pop_call_try(c, 1);
    if (rc == 0)
        return 1; /* someone else took it; still parked, bit set again */
    if (rc > 0 && (until = window(c, shm_now_ms())) != 0) {
        if (c->answer_by != 0) { /* its own deadline, as the window's bound */
            park_update_deadline(&c->w->parks, p, c->answer_by);
            c->answer_by = 0;
        }
        if (held == 0 && until < p->deadline) /* the window starts */
            park_update_deadline(&c->w->parks, p, until);
        else if (c->kind->slide && c->sink.count > held &&
                 until != p->deadline) /* it moves with what came */
            park_update_deadline(&c->w->parks, p, until);
        return 0;
    }
    pop_call_unpark(c);
    pop_call_end(c, rc);
    return 0;
}

/* answer_now - answer with what is there now, possibly nothing. */
static void
answer_now(struct pop_call *c)
{
    pop_call_unpark(c);
    pop_call_end(c, pop_call_try(c, 0));
}

/* pop_call_on_deadline - parked.h (and on_drain): answer with what is
 * there now, possibly nothing; but a long poll parked TRIM_AFTER_MS ago
 * holding nothing gives its connection's zeroed pages back and waits on
 * until its own deadline (a draining worker answers at once). */
void
pop_call_on_deadline(struct park *p)
{
    struct pop_call *c = CALL_OF(p);
    uint64_t by = c->answer_by;

    c->answer_by = 0;
    if (by > shm_now_ms() && !c->w->draining) {
        (void)http_edge_pool_trim(c->req);
        park_update_deadline(&c->w->parks, p, by);
        return;
    }
    answer_now(c);
}

/*
 * pop_call_on_drain - parked.h: answered now with what it holds, as at
 * its deadline; but a long poll another node forwarded here that holds
 * nothing is answered 503 draining without a try: nothing taken, so the
 * node it came through serves it again at the partition's next owner for
 * the time it has left (forward.h), where this partition's messages are
 * about to be handed over.  Taking some here would lease them to a
 * client whose acks come back to a node that has gone.
 */
void
pop_call_on_drain(struct park *p)
{
    struct pop_call *c = CALL_OF(p);

    if (c->sink.count > 0 ||
        http_request_header(c->req, FORWARD_HEADER) == NULL) {
        answer_now(c);
        return;
    }
    pop_call_unpark(c);
    if (c->kind->leave)
        c->kind->leave(c);
    http_reply_draining(c->req);
    http_request_resume(c->req);
}

/* pop_call_let_go - see pop_call.h. */
void
pop_call_let_go(struct pop_call *c)
{
    pop_call_unpark(c);
    pop_call_end(c, 0);
}

/*
 * give_back - a long poll another node forwarded here for one partition,
 * holding nothing, is answered 503 (1), nothing taken, so that the node it
 * came through serves it again at the partition's owner for the time it has
 * left (forward.h) rather than relaying an empty answer before its
 * timeout: 503 draining when this node's master stops (its board names
 * this node leaving before this worker has read its own SIGTERM), 503
 * owner_moved otherwise.  0: c is not such a pop (left as it was).
 */
static int
give_back(struct pop_call *c, const char *why)
{
    struct worker *w = c->w;

    if (c->pop.part.len == 0 || c->sink.count > 0 ||
        http_request_header(c->req, FORWARD_HEADER) == NULL)
        return 0;
    pop_call_unpark(c);
    if (c->kind->leave)
        c->kind->leave(c);
    if (w->draining || shm_board_stopping(w->seg->board))
        http_reply_draining(c->req);
    else
        http_reply_error(c->req, 503, "owner_moved",
                         "%s while the pop waited; nothing was taken", why);
    http_request_resume(c->req);
    return 1;
}

/* pop_call_on_moved - parked.h: a pop on a partition another node owns
 * now is let go, so its client asks again and reaches the owner; a
 * forwarded long poll goes back to its node (give_back). */
void
pop_call_on_moved(struct park *p)
{
    struct pop_call *c = CALL_OF(p);

    if (c->pop.part.len == 0 ||
        shm_owner_here(&c->w->owners, c->pop.queue, c->pop.part))
        return;
    if (!give_back(c, "this node no longer owns the partition (membership "
                      "changed)"))
        pop_call_let_go(c);
}

/* pop_call_on_stale - parked.h: let go, asked again the client meets
 * 503 owner_moved and tries another node; a forwarded long poll goes back
 * to its node (give_back). */
void
pop_call_on_stale(struct park *p)
{
    struct pop_call *c = CALL_OF(p);

    if (!give_back(c, "this node's view of the cluster went stale"))
        pop_call_let_go(c);
}

/* pop_call_on_revoke - parked.h: 401, and what a windowed pop holds goes
 * back at once (no attempt counted): its client is not served. */
void
pop_call_on_revoke(struct park *p)
{
    struct pop_call *c = CALL_OF(p);
    struct worker *w = c->w;

    pop_call_unpark(c);
    if (c->kind->leave)
        c->kind->leave(c);
    if (c->leased && c->sink.count > 0)
        shm_release(w->seg, w->set.slot, c->pop.queue, c->pop.group, &c->sink,
                    shm_now_ms());
    c->leased = 0;
    worker_auth_refuse(c->req, "the bearer token was revoked while "
                               "this pop waited");
    http_request_resume(c->req);
}

/*
 * pop_call_on_hangup - parked.h.  The client may only have half-closed, so
 * it gets an answer, empty, since nothing is taken for a client that may be
 * gone; a windowed pop holding leased messages gives them back instead (the
 * connection closes).
 */
void
pop_call_on_hangup(struct park *p)
{
    struct pop_call *c = CALL_OF(p);

    pop_call_unpark(c);
    if (c->sink.count > 0) {
        if (c->kind->leave)
            c->kind->leave(c);
        http_request_abort(c->req); /* on_done releases the leases */
        return;
    }
    pop_call_end(c, 0);
}

/* The events of a pop that needs no others: pop.c, pop_window.c,
 * pop_watch.c. */
const struct park_ops pop_call_events = {
    pop_call_on_wake,   pop_call_on_deadline, pop_call_on_hangup,
    pop_call_on_revoke, pop_call_on_drain,    pop_call_on_moved,
    pop_call_on_stale,
};

/* pop_call_query - pop_call.h. */
char *
pop_call_query(const struct shm_pop_req *r, const char *head, const char *tail)
{
    static const char *const from[] = {"all", "new", "last"};
    struct shm_name shown = worker_client_name(r->queue); /* the peer
                                                  prefixes the tenant again */
    char *q = http_client_escape(shown.ptr, shown.len);
    char *g =
        r->group.len ? http_client_escape(r->group.ptr, r->group.len) : NULL;
    char *out = NULL;

    if (q != NULL && (r->group.len == 0 || g != NULL) &&
        asprintf(&out, "%squeue=%s&from=%s%s%s%s", head, q, from[r->from],
                 g ? "&group=" : "", g ? g : "", tail) < 0)
        out = NULL;
    free(q);
    free(g);
    return out;
}
