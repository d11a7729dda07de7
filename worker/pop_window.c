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
    struct pop_win win;
};

#define WINDOW_OF(c) POP_KIND_OF(c, struct pop_window, c)

/* pop_win_terms - see pop_window.h. */
void
pop_win_terms(struct pop_win *win, struct shm_pop_req *r, uint32_t window_ms,
              uint32_t window_count)
{
    win->ms = window_ms;
    win->ack_on_answer = r->auto_ack;
    r->auto_ack = 0;
    win->target =
        window_count && window_count < r->batch ? window_count : r->batch;
}

/* pop_win_until - see pop_window.h: short of the target, it waits on,
 * ms from now at the latest. */
uint64_t
pop_win_until(const struct pop_win *win, const struct pop_call *c, uint64_t now)
{
    if (c->sink.count == 0 || c->sink.count >= win->target)
        return 0;
    return win->ms != 0 ? now + win->ms : UINT64_MAX;
}

/* pop_win_complete - see pop_window.h. */
void
pop_win_complete(const struct pop_win *win, struct pop_call *c)
{
    const struct shm_popped *m = NULL;

    if (!win->ack_on_answer)
        return;
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

/* take - pop_kind.take: up to the target. */
static int
take(struct pop_call *c, int park)
{
    return pop_call_take(c, WINDOW_OF(c)->win.target, park);
}

/* window - pop_kind.window. */
static uint64_t
window(const struct pop_call *c, uint64_t now)
{
    return pop_win_until(&WINDOW_OF(c)->win, c, now);
}

/* answer - pop_kind.answer: with autoAck, what it held leased is
 * completed, then answered as any pop's. */
static void
answer(struct pop_call *c)
{
    pop_win_complete(&WINDOW_OF(c)->win, c);
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
    pop_win_terms(&WINDOW_OF(c)->win, &c->pop, window_ms, window_count);
    return c;
}
