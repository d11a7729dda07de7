/*
 * coalesce.c - see coalesce.h.
 *
 * Per owner (node id and address): the calls in flight from this worker
 * that went through here (alone, or batches), and the queue of requests
 * waiting.  A request is one struct co_req from its start to its done,
 * wherever it is: queued, alone in flight, or an entry of a batch in
 * flight.  Its header lines are copied, since a forward's are freed once
 * its start returns; its method, target and body are its client
 * request's, which lives until the forward's done or cancel.
 */
#include "worker/coalesce.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/batch.h"
#include "http/node_call.h"
#include "http/peer_answer.h"
#include "shm/board.h"
#include "shm/log.h"
#include "shm/stats.h"
#include "worker/worker_int.h"

#define HEADERS_MAX 8 /* a forward's lines: see forward.c's start() */
#define OWNERS_MAX  SHM_BOARD_MEMBERS

struct co_owner;
struct co_batch;

/* One forwarded request, from its start to its done. */
struct co_req {
    struct co_owner *o;
    struct co_req *prev, *next; /* in o's queue or its alone list */
    http_client_done_fn *done;
    void *arg; /* NULL once cancelled inside a batch */
    uint64_t deadline;
    const char *method, *target;
    const void *body;
    size_t body_len;
    unsigned connect_timeout_ms;
    size_t max_body;
    const char *headers[HEADERS_MAX];
    size_t nheaders;
    const char *authz;  /* the Authorization value, in lines; NULL: none */
    const char *around; /* the X-Mayfly-Around line, in lines; or NULL */
    char lines[];
};

/* A batch call in flight. */
struct co_batch {
    struct co_owner *o;
    struct co_batch *prev, *next; /* o's batches */
    struct http_buf body;
    size_t n;
    struct co_req *e[HTTP_BATCH_ENTRIES_MAX];
};

/* A list of requests, first in first out. */
struct co_list {
    struct co_req *first, *last;
};

/* An owner this worker forwards to. */
struct co_owner {
    char id[SHM_BOARD_ID_MAX];
    char addr[SHM_BOARD_ADDR_MAX];
    unsigned inflight;    /* calls through here in flight to it */
    struct co_list queue; /* waiting for a call to end */
    struct co_list alone; /* in flight alone */
    struct co_batch *batches;
};

static struct co_owner owners[OWNERS_MAX];
static int queued; /* a request was queued this turn */

static void flush(struct worker *w, struct co_owner *o);

/* The worker whose calls these are (one per process). */
static struct worker *self;

/* worker_coalesce_eligible - see coalesce.h. */
int
worker_coalesce_eligible(enum http_route r, unsigned wait_ms)
{
    return wait_ms == 0 &&
           (r == HTTP_ROUTE_PUSH || r == HTTP_ROUTE_POP || r == HTTP_ROUTE_ACK);
}

static void
push_back(struct co_list *l, struct co_req *q)
{
    q->next = NULL;
    q->prev = l->last;
    if (l->last != NULL)
        l->last->next = q;
    else
        l->first = q;
    l->last = q;
}

static void
unlink_req(struct co_list *l, struct co_req *q)
{
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        l->first = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    else
        l->last = q->prev;
    q->prev = q->next = NULL;
}

/* owner_of - id at addr's record; a free one taken when new (one with
 * nothing in flight, queued or still being answered); NULL when every
 * record is busy. */
static struct co_owner *
owner_of(const char *id, const char *addr)
{
    struct co_owner *idle = NULL;

    for (int i = 0; i < OWNERS_MAX; i++) {
        struct co_owner *o = &owners[i];
        /* a batch's record is in use until batch_free, after its
         * requests' dones (which may forward again): inflight is down
         * before they run */
        int busy = o->inflight > 0 || o->queue.first != NULL ||
                   o->alone.first != NULL || o->batches != NULL;
        if (strcmp(o->id, id) == 0 && strcmp(o->addr, addr) == 0)
            return o;
        if (!busy && (idle == NULL || o->id[0] == '\0'))
            idle = o;
    }
    if (idle == NULL || strlen(id) >= sizeof(idle->id) ||
        strlen(addr) >= sizeof(idle->addr))
        return NULL;
    memset(idle, 0, sizeof(*idle));
    snprintf(idle->id, sizeof(idle->id), "%s", id);
    snprintf(idle->addr, sizeof(idle->addr), "%s", addr);
    return idle;
}

/* req_new - q for r, its header lines copied; NULL when out of memory
 * or r has more lines than a forward makes. */
static struct co_req *
req_new(struct co_owner *o, const struct http_client_req *r,
        http_client_done_fn *done, void *arg)
{
    size_t room = 0;
    struct co_req *q;
    char *at;

    if (r->nheaders > HEADERS_MAX)
        return NULL;
    for (size_t i = 0; i < r->nheaders; i++)
        room += strlen(r->headers[i]) + 1;
    if ((q = calloc(1, sizeof(*q) + room)) == NULL)
        return NULL;
    at = q->lines;
    for (size_t i = 0; i < r->nheaders; i++) {
        size_t n = strlen(r->headers[i]) + 1;
        q->headers[i] = memcpy(at, r->headers[i], n);
        if (strncasecmp(at, "Authorization:", 14) == 0)
            q->authz = at + 14 + strspn(at + 14, " ");
        else if (strncasecmp(at, HTTP_NODE_AROUND ":",
                             sizeof(HTTP_NODE_AROUND)) == 0)
            q->around = at;
        at += n;
    }
    q->nheaders = r->nheaders;
    q->o = o;
    q->done = done;
    q->arg = arg;
    q->deadline = shm_now_ms() + (r->timeout_ms > 0 ? r->timeout_ms : 1);
    q->method = r->method;
    q->target = r->target;
    q->body = r->body;
    q->body_len = r->body_len;
    q->connect_timeout_ms = r->connect_timeout_ms;
    q->max_body = r->max_body;
    return q;
}

/* as_call - q as a batch entry. */
static struct http_batch_call
as_call(const struct co_req *q)
{
    return (struct http_batch_call){
        q->method,         strlen(q->method), q->target,
        strlen(q->target), q->authz,          q->authz ? strlen(q->authz) : 0,
        q->body,           q->body_len,
    };
}

/* left_ms - the time a call with this deadline has, 1 ms at least. */
static unsigned
left_ms(uint64_t deadline)
{
    uint64_t now = shm_now_ms();

    return deadline > now + 1 ? (unsigned)(deadline - now) : 1;
}

/* fail - q's done with err and no answer (its call could not start). */
static void
fail(struct co_req *q, int err)
{
    struct http_client_resp r = {.err = err, .error = strerror(-err)};
    http_client_done_fn *done = q->done;
    void *arg = q->arg;

    free(q);
    done(arg, &r);
}

/* alone_done - a call that went alone ended: its done, and the queue
 * goes out. */
static void
alone_done(void *arg, struct http_client_resp *r)
{
    struct co_req *q = arg;
    struct co_owner *o = q->o;
    http_client_done_fn *done = q->done;
    void *darg = q->arg;

    unlink_req(&o->alone, q);
    o->inflight--;
    free(q);
    flush(self, o);
    done(darg, r);
}

/* send_alone - q as it would have gone without coalescing. */
static int
send_alone(struct worker *w, struct co_req *q)
{
    struct http_client_req r = {
        .method = q->method,
        .port = HTTP_CLIENT_PEER,
        .addr = q->o->addr,
        .target = q->target,
        .headers = q->headers,
        .nheaders = q->nheaders,
        .body = q->body,
        .body_len = q->body_len,
        .timeout_ms = left_ms(q->deadline),
        .connect_timeout_ms = q->connect_timeout_ms,
        .max_body = q->max_body,
    };
    int rc = http_client_request(w->client, &r, alone_done, q);

    if (rc == 0) {
        push_back(&q->o->alone, q);
        q->o->inflight++;
    }
    return rc;
}

/* copy_resp - what r says, for one request: its own copy of the body
 * (done may take it). */
static void
copy_resp(struct http_client_resp *to, const struct http_client_resp *r)
{
    *to = *r;
    http_buf_init(&to->body);
    if (r->body.len > 0)
        http_buf_append(&to->body, r->body.data, r->body.len);
}

/* batch_free - b and its requests (their done ran, or was dropped). */
static void
batch_free(struct co_batch *b)
{
    struct co_owner *o = b->o;

    if (b->prev != NULL)
        b->prev->next = b->next;
    else
        o->batches = b->next;
    if (b->next != NULL)
        b->next->prev = b->prev;
    for (size_t i = 0; i < b->n; i++)
        free(b->e[i]); /* NULL once sent again alone */
    http_buf_free(&b->body);
    free(b);
}

/* deliver - entry i of b gets resp. */
static void
deliver(struct co_batch *b, size_t i, struct http_client_resp *resp)
{
    struct co_req *q = b->e[i];

    if (q->arg != NULL) {
        void *arg = q->arg;
        q->arg = NULL;
        q->done(arg, resp);
    }
    http_buf_free(&resp->body);
}

/* resend_alone - b's owner does not know batch calls (404 not_found: a
 * node of an older version, in a rolling upgrade): nothing was applied,
 * so each request goes again, alone, as it would have without
 * coalescing. */
static void
resend_alone(struct co_batch *b)
{
    struct co_owner *o = b->o;
    int rc;

    log_warn(0, "node %s does not take batch calls: its forwards go alone",
             o->id);
    for (size_t i = 0; i < b->n; i++) {
        struct co_req *q = b->e[i];
        b->e[i] = NULL;
        if (q->arg == NULL) {
            free(q); /* cancelled meanwhile */
            continue;
        }
        if ((rc = send_alone(self, q)) != 0)
            fail(q, rc);
    }
    batch_free(b);
}

/* batch_done - the batch call ended: each of its requests gets its own
 * answer from it (coalesce.h).  b stays findable while they run, so a
 * cancel from one of them marks an entry not yet told. */
static void
batch_done(void *arg, struct http_client_resp *r)
{
    struct co_batch *b = arg;
    struct co_owner *o = b->o;
    struct http_batch_answer a[HTTP_BATCH_ENTRIES_MAX];
    char why[160] = "";
    size_t n = 0;
    int split = r->err == 0 && r->status == 200;

    o->inflight--;
    if (split && (http_batch_answers(r->body.data, r->body.len, a,
                                     HTTP_BATCH_ENTRIES_MAX, &n, why,
                                     sizeof(why)) != 0 ||
                  n != b->n)) {
        if (n != b->n && why[0] == '\0')
            snprintf(why, sizeof(why), "%zu answers to %zu requests", n, b->n);
        log_warn(0, "a batch call to node %s: its answer cannot be read (%s)",
                 o->id, why);
        split = 0;
        r->err = -EPROTO;
        r->error = "the owner's batch answer could not be read";
        r->sent = 1;
    }
    if (!split && r->err == 0 && r->status == 404 &&
        http_peer_error_is(r->body.data, r->body.len, "not_found")) {
        resend_alone(b); /* an owner of a version before batch calls */
        return;
    }
    flush(self, o);
    for (size_t i = 0; i < b->n; i++) {
        struct http_client_resp one;
        if (split) {
            one = (struct http_client_resp){
                .error = "",
                .status = a[i].status,
                .content_type = "application/json",
                .retry_after_s = a[i].retry_after_s,
                .sent = 1,
            };
            if (a[i].body_len > 0)
                http_buf_append(&one.body, a[i].body, a[i].body_len);
        } else {
            copy_resp(&one, r);
        }
        deliver(b, i, &one);
    }
    batch_free(b);
}

/* send_batch - q[0..n) as one batch call. */
static int
send_batch(struct worker *w, struct co_owner *o, struct co_req **q, size_t n)
{
    const char *headers[3] = {HTTP_NODE_FORWARDED ": 1", "Content-Type:"};
    struct co_batch *b = calloc(1, sizeof(*b));
    uint64_t deadline = UINT64_MAX;
    int rc = b != NULL ? http_batch_begin(&b->body) : -ENOMEM;
    struct http_client_req r = {
        .method = "POST",
        .port = HTTP_CLIENT_PEER,
        .addr = o->addr,
        .target = COALESCE_TARGET,
        .max_body = HTTP_BATCH_HEAD,
        .headers = headers,
        .nheaders = 2,
        .connect_timeout_ms = q[0]->connect_timeout_ms,
    };

    for (size_t i = 0; i < n && rc == 0; i++) {
        struct http_batch_call c = as_call(q[i]);
        rc = http_batch_add_call(&b->body, &c);
        /* each answer may be as long as it could be alone (a pop's up to
         * its own bound), so the call's bound is their sum, framing and
         * all: one large answer must not fail the others' */
        r.max_body += (q[i]->max_body ? q[i]->max_body : HTTP_CLIENT_BODY_MAX) +
                      HTTP_BATCH_ANSWER_FRAME;
        if (q[i]->deadline < deadline)
            deadline = q[i]->deadline;
    }
    if (rc == 0) {
        if (q[0]->around != NULL)
            headers[r.nheaders++] = q[0]->around;
        r.body = b->body.data;
        r.body_len = b->body.len;
        r.timeout_ms = left_ms(deadline);
        rc = http_client_request(w->client, &r, batch_done, b);
    }
    if (rc != 0) {
        if (b != NULL)
            http_buf_free(&b->body);
        free(b);
        return rc;
    }
    b->o = o;
    b->n = n;
    for (size_t i = 0; i < n; i++)
        b->e[i] = q[i];
    b->next = o->batches;
    if (o->batches != NULL)
        o->batches->prev = b;
    o->batches = b;
    o->inflight++;
    shm_count(w->seg, w->set.slot, SHM_C_FORWARD_BATCHES, 1);
    shm_count(w->seg, w->set.slot, SHM_C_FORWARD_BATCHED, n);
    return 0;
}

/* same_around - whether a and b route around the same nodes. */
static int
same_around(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* send_next - the queue's head goes out, with those behind it that fit
 * one batch (same X-Mayfly-Around, the caps): alone when it is one. */
static void
send_next(struct worker *w, struct co_owner *o)
{
    struct co_req *pick[HTTP_BATCH_ENTRIES_MAX], *q, *next;
    size_t n = 0, bytes = HTTP_BATCH_HEAD;
    size_t cap = COALESCE_BYTES;
    int rc;

    if (w->set.max_body_bytes > 0 && w->set.max_body_bytes < cap)
        cap = w->set.max_body_bytes; /* the owner's limit, as this node's */
    for (q = o->queue.first; q != NULL && n < HTTP_BATCH_ENTRIES_MAX;
         q = next) {
        struct http_batch_call c = as_call(q);
        size_t size = http_batch_call_size(&c);
        next = q->next;
        if (n > 0 &&
            (!same_around(q->around, pick[0]->around) || bytes + size > cap))
            continue;
        unlink_req(&o->queue, q);
        pick[n++] = q;
        bytes += size;
    }
    rc = n == 1 ? send_alone(w, pick[0]) : send_batch(w, o, pick, n);
    if (rc == 0)
        return;
    log_warn(-rc, "a forward to node %s could not start", o->id);
    for (size_t i = 0; i < n; i++)
        fail(pick[i], rc);
}

/* flush - a call to o ended: what waits goes out while o has room. */
static void
flush(struct worker *w, struct co_owner *o)
{
    while (o->queue.first != NULL && o->inflight < COALESCE_INFLIGHT)
        send_next(w, o);
}

/* worker_coalesce_request - see coalesce.h. */
int
worker_coalesce_request(struct worker *w, const char *id,
                        const struct http_client_req *r,
                        http_client_done_fn *done, void *arg)
{
    struct co_owner *o = owner_of(id, r->addr);
    struct http_batch_call c;
    struct co_req *q;
    int rc;

    self = w;
    if (o == NULL)
        return http_client_request(w->client, r, done, arg);
    if ((q = req_new(o, r, done, arg)) == NULL)
        return -ENOMEM;
    c = as_call(q);
    if (!http_batch_call_ok(&c)) {
        free(q); /* a batch cannot carry it (a target of bytes it may not
                    hold): it goes alone, uncounted */
        return http_client_request(w->client, r, done, arg);
    }
    if (o->inflight < COALESCE_INFLIGHT && o->queue.first == NULL) {
        if ((rc = send_alone(w, q)) != 0)
            free(q);
        return rc;
    }
    push_back(&o->queue, q);
    queued = 1;
    return 0;
}

/* worker_coalesce_turn - see coalesce.h. */
void
worker_coalesce_turn(struct worker *w)
{
    if (!queued)
        return;
    queued = 0;
    for (int i = 0; i < OWNERS_MAX; i++)
        while (owners[i].queue.first != NULL)
            send_next(w, &owners[i]);
}

/* worker_coalesce_cancel - see coalesce.h. */
void
worker_coalesce_cancel(struct worker *w, void *arg)
{
    for (int i = 0; i < OWNERS_MAX; i++) {
        struct co_owner *o = &owners[i];
        struct co_req *q;
        struct co_batch *b;

        for (q = o->queue.first; q != NULL; q = q->next)
            if (q->arg == arg) {
                unlink_req(&o->queue, q);
                free(q);
                return;
            }
        for (q = o->alone.first; q != NULL; q = q->next)
            if (q->arg == arg) {
                http_client_cancel(w->client, q);
                unlink_req(&o->alone, q);
                free(q);
                o->inflight--;
                flush(w, o);
                return;
            }
        for (b = o->batches; b != NULL; b = b->next)
            for (size_t k = 0; k < b->n; k++)
                /* NULL: gone alone already, its batch in resend_alone,
                 * whose fail() runs dones that may cancel */
                if (b->e[k] != NULL && b->e[k]->arg == arg) {
                    b->e[k]->arg = NULL; /* its answer is dropped */
                    return;
                }
    }
    http_client_cancel(w->client, arg);
}
