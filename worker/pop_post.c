/*
 * pop_post.c - see pop_post.h.
 *
 * The body is parsed whole (names, numbers, every ack entry) before
 * anything applies.  A pop on a partition another node owns goes there
 * whole, acks and all, as a GET pop would (forward.h): its ids are
 * usually that owner's, since it delivered them; one delivered by another
 * node answers stale there (a forwarded ack takes no second hop) and
 * comes back when its lease ends.  Served here, the acks apply as the ack
 * route applies them (ack.h: those of other nodes go to them, on the ack
 * route, and the pop waits for their answers), then the pop runs as a GET
 * pop would, and its answer carries the acks' results.
 */
#include "worker/pop_post.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/parse.h"
#include "http/reply.h"
#include "http/request.h"
#include "worker/ack.h"
#include "worker/ack_results.h"
#include "worker/ack_route.h"
#include "worker/pop.h"
#include "worker/worker_int.h"

/* The pop, kept while its acks settle. */
struct post {
    struct worker *w;
    struct pop_args a; /* the names point into a.in and names */
    char names[];      /* the partition, then the group */
};

/* args - the parsed body p into a; answers req on error (a bad name, a
 * queue the caller may not pop). */
static int
args(struct worker *w, struct http_request *req, const struct http_pop *p,
     struct pop_args *a)
{
    static const enum shm_from from[] = {
        [HTTP_POP_FROM_ALL] = SHM_FROM_ALL,
        [HTTP_POP_FROM_NEW] = SHM_FROM_NEW,
        [HTTP_POP_FROM_LAST] = SHM_FROM_LAST,
    };
    const struct http_ack *k = &p->ack;

    if (!http_reply_name_ok(req, "queue", k->queue.ptr, k->queue.len) ||
        (p->has_partition &&
         !http_reply_name_ok(req, "partition", p->partition.ptr,
                             p->partition.len)) ||
        (k->has_group &&
         !http_reply_name_ok(req, "group", k->group.ptr, k->group.len)) ||
        !worker_authz(w, req, AUTH_POP, "queue",
                      (struct shm_name){k->queue.ptr, k->queue.len}, &a->in))
        return -EINVAL;
    a->r = (struct shm_pop_req){
        .queue = a->in.name,
        .part = {p->has_partition ? p->partition.ptr : "",
                 p->has_partition ? p->partition.len : 0},
        .group = {k->has_group ? k->group.ptr : "",
                  k->has_group ? k->group.len : 0},
        .batch = p->batch,
        .auto_ack = p->auto_ack,
        .from = from[p->from],
    };
    a->wait = p->wait;
    a->timeout = p->timeout;
    a->watch = 0;
    a->announce = 0;
    a->window_pass = 0;
    a->anywhere = 0;
    return 0;
}

/* keep - a copy of a whose names outlive the request's parse; NULL
 * without memory. */
static struct post *
keep(struct worker *w, const struct pop_args *a)
{
    size_t pl = a->r.part.len, gl = a->r.group.len;
    struct post *p = malloc(sizeof(*p) + pl + gl + 1);

    if (p == NULL)
        return NULL;
    p->w = w;
    p->a = *a;
    memcpy(p->a.in.buf, a->r.queue.ptr, a->r.queue.len);
    p->a.r.queue = (struct shm_name){p->a.in.buf, a->r.queue.len};
    p->a.in.name = p->a.r.queue;
    memcpy(p->names, a->r.part.ptr, pl);
    memcpy(p->names + pl, a->r.group.ptr, gl);
    p->a.r.part = (struct shm_name){p->names, pl};
    p->a.r.group = (struct shm_name){p->names + pl, gl};
    return p;
}

/* acked - ack_then.fn: the acks have their outcomes: pop, the answer
 * carrying them. */
static void
acked(void *arg, struct http_request *req, const struct http_str *ids,
      size_t stride, const struct shm_ack *acks, uint32_t n,
      const char *const *extra)
{
    struct post *p = arg;
    struct http_buf results = {0};

    if (req != NULL) {
        if (ack_results_format(&results, ids, stride, acks, n, extra) != 0) {
            http_buf_free(&results);
            http_reply_errno(req, -ENOMEM, "pop");
            http_request_resume(req);
        } else {
            worker_pop_serve(p->w, req, &p->a, &results);
        }
    }
    free(p);
}

/* worker_pop_post - see pop_post.h. */
void
worker_pop_post(struct worker *w, struct http_request *req)
{
    static const char no_results[] = "{\"results\":[]}";
    struct http_pop p;
    struct http_error err;
    struct pop_args a;
    size_t len;
    const char *body = http_request_body(req, &len);

    if (http_parse_pop(body, len, w->set.max_wait_ms, &p, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if (args(w, req, &p, &a) != 0 || !worker_pop_route(w, req, &a))
        goto out;
    if (p.ack.n == 0) {
        struct http_buf results = {0};
        http_buf_append(&results, no_results, sizeof(no_results) - 1);
        worker_pop_serve(w, req, &a, &results);
        goto out;
    }
    struct post *kept = keep(w, &a);
    struct http_ack *acks = malloc(sizeof(*acks));
    if (kept == NULL || acks == NULL) {
        free(kept);
        free(acks);
        http_reply_errno(req, -ENOMEM, "pop");
        goto out;
    }
    *acks = p.ack; /* taken by worker_ack_pop */
    p.ack = (struct http_ack){0};
    struct ack_then then = {acked, kept, "/api/v1/ephemeral/ack"};
    worker_ack_pop(w, req, acks, &then);
out:
    http_pop_free(&p);
}
