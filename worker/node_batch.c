/*
 * node_batch.c - see node_batch.h.
 */
#include "worker/node_batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/batch.h"
#include "http/buf.h"
#include "http/inner.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/log.h"

struct batch;

/* One entry: its inner request and, once there, its answer. */
struct entry {
    struct batch *b;
    struct http_request *inner; /* NULL: none could be made */
    unsigned status, retry_after_s;
    struct http_buf body;
    int replied;
};

/* One batch call being served. */
struct batch {
    struct http_request *req;
    size_t n, left; /* entries, those without their answer yet */
    struct entry e[];
};

/* take - entry e's answer from its inner request. */
static void
take(struct entry *e)
{
    e->status = http_inner_reply(e->inner, &e->retry_after_s, &e->body);
    e->replied = 1;
    e->b->left--;
}

/* answer - every entry answered: the call's 200, their answers in order. */
static void
answer(struct batch *b)
{
    struct http_buf out = {0};
    int rc = http_batch_begin(&out);

    for (size_t i = 0; i < b->n && rc == 0; i++) {
        struct entry *e = &b->e[i];
        struct http_batch_answer a = {e->status, e->retry_after_s, e->body.data,
                                      e->body.len};
        rc = http_batch_add_answer(&out, &a);
        http_buf_free(&e->body);
    }
    if (rc != 0) {
        http_buf_free(&out);
        http_reply_errno(b->req, rc, "batch answer");
        return;
    }
    http_reply_text(b->req, 200, "application/octet-stream", &out);
}

/* on_reply - an entry that waited has its answer (http/inner.h). */
static void
on_reply(void *arg, struct http_request *inner)
{
    struct entry *e = arg;
    struct batch *b = e->b;

    (void)inner;
    take(e);
    if (b->left == 0) {
        answer(b);
        http_request_resume(b->req);
    }
}

/* done - the call is over: so are its inner requests (an entry that got
 * no answer, or whose answer did not go out, is told it was not sent). */
static void
done(void *arg, int sent_ok)
{
    struct batch *b = arg;

    for (size_t i = 0; i < b->n; i++) {
        struct entry *e = &b->e[i];
        if (e->inner != NULL)
            http_inner_end(e->inner, sent_ok && e->replied);
        http_buf_free(&e->body);
    }
    free(b);
}

/* carried - the routes a batch carries: those a forward coalesces. */
static int
carried(enum http_route r)
{
    return r == HTTP_ROUTE_PUSH || r == HTTP_ROUTE_POP || r == HTTP_ROUTE_ACK;
}

/* start - entry i: made, routed, and served, or answered at once. */
static void
start(struct batch *b, size_t i, const struct http_batch_call *c)
{
    struct entry *e = &b->e[i];

    e->b = b;
    e->inner = http_inner_new(b->req, c, on_reply, e);
    if (e->inner == NULL) {
        e->status = 500;
        http_buf_append_str(&e->body, "{\"error\": \"out of memory\", "
                                      "\"code\": \"internal\"}");
        e->replied = 1;
        b->left--;
        return;
    }
    if (!http_request_replied(e->inner) &&
        !carried(http_request_route(e->inner)))
        http_reply_error(e->inner, 400, "ephemeral_bad_request",
                         "a batch call between nodes carries push, pop and "
                         "ack requests only, not %s %.*s",
                         http_request_method(e->inner), (int)c->target_len,
                         c->target);
    if (http_inner_run(e->inner))
        take(e);
}

/* worker_node_batch - see node_batch.h. */
void
worker_node_batch(struct worker *w, struct http_request *req)
{
    struct http_batch_call calls[HTTP_BATCH_ENTRIES_MAX];
    struct batch *b;
    char why[160];
    size_t len, n;
    const char *body = http_request_body(req, &len);
    int rc = http_batch_calls(body, len, calls, HTTP_BATCH_ENTRIES_MAX, &n, why,
                              sizeof(why));

    (void)w; /* each entry goes through the server's handler */
    if (rc != 0) {
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "the batch call's body: %s", why);
        return;
    }
    b = calloc(1, sizeof(*b) + n * sizeof(b->e[0]));
    if (b == NULL) {
        http_reply_errno(req, -ENOMEM, "batch");
        return;
    }
    b->req = req;
    b->n = b->left = n;
    http_request_on_done(req, done, b);
    for (size_t i = 0; i < n; i++)
        start(b, i, &calls[i]);
    if (b->left == 0)
        answer(b);
    else
        http_request_suspend(req);
}
