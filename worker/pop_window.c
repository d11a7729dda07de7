/*
 * pop_window.c - see pop_window.h.
 *
 * What the call holds is taken leased even with autoAck, so a client that
 * leaves while it waits gives it back (pop_call_on_hangup, on_done); with
 * autoAck it is completed just before the answer.
 */
#include "worker/pop_window.h"

#include "shm/stats.h"
#include "worker/park.h"
#include "worker/pop_call.h"
#include "worker/worker_int.h"

struct pop_window {
    struct pop_call c;
    uint32_t target;    /* answer once it holds this many */
    uint32_t window_ms; /* ... or this long after the first came */
    int ack_on_answer;  /* autoAck: complete what it holds as it answers */
};

#define WINDOW_OF(c) POP_KIND_OF(c, struct pop_window, c)

/* take - pop_kind.take: up to the target. */
static int
take(struct pop_call *c, int park)
{
    return pop_call_take(c, WINDOW_OF(c)->target, park);
}

/* window - pop_kind.window: short of the target, it waits on, window_ms
 * from now at the latest. */
static uint64_t
window(const struct pop_call *c, uint64_t now)
{
    const struct pop_window *pw = WINDOW_OF(c);

    if (c->sink.count == 0 || c->sink.count >= pw->target)
        return 0;
    return pw->window_ms != 0 ? now + pw->window_ms : UINT64_MAX;
}

/* answer - pop_kind.answer: with autoAck, what it held leased is
 * completed, then answered as any pop's. */
static void
answer(struct pop_call *c)
{
    const struct shm_popped *m = NULL;

    if (WINDOW_OF(c)->ack_on_answer) {
        while ((m = shm_popped_next(&c->sink, m)) != NULL) {
            struct shm_ack a = {.seq = m->seq,
                                .attempts = m->attempts,
                                .status = SHM_ACK_COMPLETED};
            shm_ack(c->w->seg, c->w->set.slot, c->pop.queue,
                    (struct shm_name){(const char *)(m + 1), m->part_len},
                    c->pop.group, &a, 1, shm_now_ms());
        }
        c->leased = 0;
    }
    pop_call_answer(c);
}

static const struct pop_kind kind = {
    .events = &pop_call_events,
    .take = take,
    .window = window,
    .answer = answer,
};

/* pop_window_new - see pop_window.h. */
struct pop_call *
pop_window_new(struct worker *w, struct http_request *req,
               const struct shm_pop_req *r, uint32_t window_ms,
               uint32_t window_count)
{
    struct pop_call *c =
        pop_call_new(sizeof(struct pop_window), &kind, w, req, r);

    if (c == NULL)
        return NULL;
    struct pop_window *pw = WINDOW_OF(c);
    pw->window_ms = window_ms;
    pw->ack_on_answer = c->pop.auto_ack;
    c->pop.auto_ack = 0;
    pw->target = window_count && window_count < c->pop.batch ? window_count
                                                             : c->pop.batch;
    return c;
}
