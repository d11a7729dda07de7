/*
 * pop_inbox.c - see pop_inbox.h: the pop family's inbox kind (pop_call.h).
 * Its answer is the waiter's: the wait says why it ended, and the request
 * verb answers its own client.
 */
#include "worker/pop_inbox.h"

#include <errno.h>

#include "http/reply.h"
#include "http/request.h"
#include "worker/pop_call.h"
#include "worker/worker_int.h"

struct pop_inbox {
    struct pop_call c;
    const struct pop_waiter *how;
    void *arg;
    enum pop_wait_end why; /* what ended it early (HANGUP, REVOKED), or
                              TIMEOUT: nothing did */
    uint32_t max;          /* a gather's: replies it waits for (1: a wait) */
    uint32_t quiet_ms;     /* a gather's: answer this long after the last */
    uint64_t until;        /* a gather's: its timeout's end */
    int gather;            /* answered by how->end_many */
};

#define INBOX_OF(c) POP_KIND_OF(c, struct pop_inbox, c)

/* answer - pop_kind.answer: the waiter answers, told why. */
static void
answer(struct pop_call *c)
{
    struct pop_inbox *in = INBOX_OF(c);
    const struct shm_popped *m = shm_popped_next(&c->sink, NULL);
    enum pop_wait_end why = m != NULL                     ? POP_WAIT_GOT
                            : in->why != POP_WAIT_TIMEOUT ? in->why
                            : c->w->draining              ? POP_WAIT_DRAIN
                                                          : POP_WAIT_TIMEOUT;

    if (in->gather)
        in->how->end_many(in->arg, c->req, &c->sink, why);
    else
        in->how->end(in->arg, c->req, m, why);
}

/* take - pop_kind.take of a gather: up to max. */
static int
take(struct pop_call *c, int park)
{
    return pop_call_take(c, INBOX_OF(c)->max, park);
}

/* window - pop_kind.window of a gather: short of max, it waits on until
 * quiet_ms after this round, never past its timeout. */
static uint64_t
window(const struct pop_call *c, uint64_t now)
{
    const struct pop_inbox *in = INBOX_OF(c);

    if (c->sink.count == 0 || c->sink.count >= in->max)
        return 0;
    if (in->quiet_ms == 0 || now + in->quiet_ms >= in->until)
        return in->until;
    return now + in->quiet_ms;
}

/* done - pop_kind.done: the waiter frees what it holds. */
static void
done(struct pop_call *c)
{
    struct pop_inbox *in = INBOX_OF(c);

    in->how->done(in->arg);
}

/* end_early - the wait ends before its time, for why. */
static void
end_early(struct park *p, enum pop_wait_end why)
{
    struct pop_call *c = POP_KIND_OF(p, struct pop_call, park);

    pop_call_unpark(c);
    INBOX_OF(c)->why = why;
    pop_call_end(c, 0);
}

/* on_hangup - park_ops.on_hangup: the waiter hears of it. */
static void
on_hangup(struct park *p)
{
    end_early(p, POP_WAIT_HANGUP);
}

/* on_revoke - park_ops.on_revoke: the waiter withdraws the request. */
static void
on_revoke(struct park *p)
{
    end_early(p, POP_WAIT_REVOKED);
}

/* No on_stale: the inbox is this node's, and its reply can still come. */
static const struct park_ops events = {
    pop_call_on_wake,     pop_call_on_deadline, on_hangup, on_revoke,
    pop_call_on_deadline, pop_call_on_moved,    NULL,
};

static const struct pop_kind kind = {
    .events = &events,
    .answer = answer,
    .done = done,
    .raw = 1, /* the waiter reads the replies' payloads */
};

static const struct pop_kind gather_kind = {
    .events = &events,
    .take = take,
    .window = window,
    .slide = 1,
    .answer = answer,
    .done = done,
    .raw = 1, /* the waiter reads the replies' payloads */
};

/* inbox_wait - worker_pop_wait, or a gather of up to max (> 1). */
static int
inbox_wait(struct worker *w, struct http_request *req, struct shm_name inbox,
           uint32_t timeout_ms, uint32_t max, uint32_t quiet_ms, int gather,
           const struct pop_waiter *how, void *arg)
{
    struct shm_pop_req r = {
        .queue = inbox,
        .part = {"Default", 7},
        .group = {"", 0},
        .batch = max,
        .auto_ack = 1,
    };
    struct pop_call *c = pop_call_new(
        sizeof(struct pop_inbox), gather ? &gather_kind : &kind, w, req, &r);
    int may_park = timeout_ms > 0 && !w->draining, rc;

    if (c == NULL) {
        how->done(arg);
        http_reply_errno(req, -ENOMEM, "request");
        http_request_resume(req); /* a wait begun after a suspension */
        return -ENOMEM;
    }
    struct pop_inbox *in = INBOX_OF(c);
    in->how = how;
    in->arg = arg;
    in->why = POP_WAIT_TIMEOUT;
    in->max = max;
    in->gather = gather;
    in->quiet_ms = quiet_ms;
    in->until = shm_now_ms() + timeout_ms;
    rc = pop_call_try(c, may_park);
    if (rc < 0)
        http_reply_errno(req, rc, "request");
    else if ((rc > 0 && window(c, shm_now_ms()) == 0) || !may_park)
        answer(c);
    else if ((rc = pop_call_park(c, timeout_ms)) == 0)
        return 0; /* parked: suspended */
    else {
        if (rc == -EPIPE)
            in->why = POP_WAIT_HANGUP;
        answer(c);
    }
    /* Answered now; a wait begun after its request was suspended (its
     * store went to another node first) goes out with a resume. */
    http_request_resume(req);
    return 0;
}

/* worker_pop_wait - see pop_inbox.h. */
int
worker_pop_wait(struct worker *w, struct http_request *req,
                struct shm_name inbox, uint32_t timeout_ms,
                const struct pop_waiter *how, void *arg)
{
    return inbox_wait(w, req, inbox, timeout_ms, 1, 0, 0, how, arg);
}

/* worker_pop_gather - see pop_inbox.h. */
int
worker_pop_gather(struct worker *w, struct http_request *req,
                  struct shm_name inbox, uint32_t timeout_ms, uint32_t max,
                  uint32_t quiet_ms, const struct pop_waiter *how, void *arg)
{
    return inbox_wait(w, req, inbox, timeout_ms, max, quiet_ms, 1, how, arg);
}
