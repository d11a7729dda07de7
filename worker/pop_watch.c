/*
 * pop_watch.c - see pop_watch.h.
 *
 * The watch only peeks (shm_peek: nothing taken, leased or marked read),
 * so a request it saw is still unread: its requester giving up withdraws
 * it (shm_withdraw).
 */
#include "worker/pop_watch.h"

#include "http/buf.h"
#include "http/reply.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/pop_call.h"
#include "worker/worker_int.h"

struct pop_watch {
    struct pop_call c;
    int ready; /* the last peek found something */
};

#define WATCH_OF(c) POP_KIND_OF(c, struct pop_watch, c)

/* take - pop_kind.take: a peek. */
static int
take(struct pop_call *c, int park)
{
    struct shm_pop_req r = c->pop;
    int rc;

    r.park = park;
    rc = shm_peek(c->w->seg, c->w->set.slot, &r, shm_now_ms());
    WATCH_OF(c)->ready = rc > 0;
    return rc;
}

/* answer - pop_kind.answer: "ready" says whether a pop would find
 * something. */
static void
answer(struct pop_call *c)
{
    struct http_buf b = {0};

    struct shm_name shown = worker_client_name(c->pop.queue);
    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, shown.ptr, shown.len);
    http_buf_append_str(&b, WATCH_OF(c)->ready
                                ? ",\"messages\":[],\"ready\":true}"
                                : ",\"messages\":[],\"ready\":false}");
    http_reply(c->req, 200, &b);
}

static const struct pop_kind kind = {
    .events = &pop_call_events,
    .take = take,
    .answer = answer,
};

/* pop_watch_new - see pop_watch.h. */
struct pop_call *
pop_watch_new(struct worker *w, struct http_request *req,
              const struct shm_pop_req *r)
{
    return pop_call_new(sizeof(struct pop_watch), &kind, w, req, r);
}
