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

    in->how->end(in->arg, c->req, m, why);
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
};

/* worker_pop_wait - see pop_inbox.h. */
int
worker_pop_wait(struct worker *w, struct http_request *req,
                struct shm_name inbox, uint32_t timeout_ms,
                const struct pop_waiter *how, void *arg)
{
    struct shm_pop_req r = {
        .queue = inbox,
        .part = {"Default", 7},
        .group = {"", 0},
        .batch = 1,
        .auto_ack = 1,
    };
    struct pop_call *c =
        pop_call_new(sizeof(struct pop_inbox), &kind, w, req, &r);
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
    rc = pop_call_try(c, may_park);
    if (rc < 0)
        http_reply_errno(req, rc, "request");
    else if (rc > 0 || !may_park)
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
