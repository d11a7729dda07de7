/*
 * redrive.c - POST /api/v1/ephemeral/redrive {"queue", "max"?} (SPEC §13):
 * the dead letters of a dead-letter queue go back to the queues and
 * partitions they came from; the answer says how many, {"redriven": N}.
 *
 * A dead letter sits on the node that dropped it (shm/dead.h), so the
 * queue's share here is read first, then each other live member's, one
 * after the other, each asked (signed, X-Mayfly-Forwarded) for its own
 * share and at most what max leaves: never more than max in all.  Each
 * dead letter is taken (autoAck, queue mode) and pushed to its origin
 * partition here when this node serves it, else to its owner (one hop,
 * with the caller's credentials); one its origin refused (full, gone,
 * unreachable) is put back into the dead-letter queue and not counted.
 * A message that is not a dead letter's envelope is dropped, uncounted.
 *
 * Locking: none of its own (shm's calls take theirs).  The call holds its
 * request until every push it sent was answered, even when the client
 * left (what a failed push puts back must not wait for nobody).
 * Errors: 400 for the body, 403, 503 ephemeral_unavailable (memory).
 */
#include "worker/redrive.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/errors.h"
#include "http/parse.h"
#include "http/parse_jsonc.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/broker.h"
#include "shm/owner.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/worker_int.h"

#define REDRIVE_BATCH 256 /* dead letters a pop takes here */
#define REDRIVE_SINK  ((size_t)1 << 20)

struct redrive {
    struct worker *w;
    struct http_request *req; /* NULL once its client left */
    struct worker_qname dlq;
    uint64_t max;      /* 0: every one */
    uint64_t redriven; /* here and the peers' answers */
    int pending;       /* pushes and peer calls out */
    int every_node;    /* a client's call: the peers' shares too */
    int peer;          /* the last member asked, -1 before any */
    int local_done;
    struct http_buf body; /* a peer call's: the client reads it late */
};

/* One push to another node, with what it puts back if refused. */
struct out_push {
    struct redrive *rd;
    char *env; /* the dead letter as it was */
    size_t env_len;
    char part[SHM_NAME_MAX];
    size_t part_len;
    struct http_buf body;
};

static void advance(struct redrive *rd);

/* release - free rd and what it holds. */
static void
release(struct redrive *rd)
{
    http_buf_free(&rd->body);
    free(rd);
}

/* left - what max leaves (UINT64_MAX: no max). */
static uint64_t
left(const struct redrive *rd)
{
    if (rd->max == 0)
        return UINT64_MAX;
    return rd->redriven < rd->max ? rd->max - rd->redriven : 0;
}

/* put_back - a dead letter its origin refused goes back where it was. */
static void
put_back(struct redrive *rd, const char *env, size_t len, struct shm_name part)
{
    struct shm_msg_in m = {env, (uint32_t)len};
    uint64_t seq;

    (void)shm_push(rd->w->seg, rd->w->set.slot, rd->dlq.name, part, &m, 1,
                   shm_now_ms(), &seq);
}

/* pushed - the origin's owner answered a push. */
static void
pushed(void *arg, struct http_client_resp *r)
{
    struct out_push *o = arg;
    struct redrive *rd = o->rd;

    if (r->err == 0 && r->status == 201)
        rd->redriven++;
    else
        put_back(rd, o->env, o->env_len,
                 (struct shm_name){o->part, o->part_len});
    free(o->env);
    http_buf_free(&o->body);
    free(o);
    rd->pending--;
    advance(rd);
}

/* push_there - send dead letter d (envelope env) to its origin's owner m.
 * 0, or -errno (nothing sent). */
static int
push_there(struct redrive *rd, int m, const struct http_dead_letter *d,
           const char *env, size_t env_len, struct shm_name dpart)
{
    struct worker *w = rd->w;
    struct out_push *o = calloc(1, sizeof(*o));
    const char *headers[3] = {FORWARD_HEADER ": 1",
                              "Content-Type: application/json"};
    char *authz = NULL;
    int rc = -ENOMEM;

    if (o == NULL || (o->env = malloc(env_len)) == NULL) {
        free(o);
        return -ENOMEM;
    }
    o->rd = rd;
    memcpy(o->env, env, env_len);
    o->env_len = env_len;
    memcpy(o->part, dpart.ptr, dpart.len);
    o->part_len = dpart.len;
    /* The owner prefixes the caller's tenant again. */
    struct shm_name shown =
        worker_client_name((struct shm_name){d->queue, d->queue_len});
    http_buf_append_str(&o->body, "{\"queue\":");
    http_buf_append_json_str(&o->body, shown.ptr, shown.len);
    http_buf_append_str(&o->body, ",\"partition\":");
    http_buf_append_json_str(&o->body, d->partition, d->partition_len);
    http_buf_append_str(&o->body, ",\"messages\":[{\"payload\":");
    http_buf_append(&o->body, d->payload, d->payload_len);
    http_buf_append_str(&o->body, "}]}");
    struct http_client_req r = {
        .method = "POST",
        .port = HTTP_CLIENT_PEER,
        .addr = w->owners.m[m].addr,
        .target = "/api/v1/ephemeral/push",
        .headers = headers,
        .nheaders = 2,
        .body = o->body.data,
        .body_len = o->body.len,
        .timeout_ms = FORWARD_MS,
    };
    if (!o->body.oom &&
        (rd->req == NULL || worker_auth_header(rd->req, &authz) == 0)) {
        if (authz != NULL)
            headers[r.nheaders++] = authz;
        rc = http_client_request(w->client, &r, pushed, o);
    }
    free(authz);
    if (rc != 0) {
        free(o->env);
        http_buf_free(&o->body);
        free(o);
        return rc;
    }
    rd->pending++;
    return 0;
}

/* one - redrive the dead letter env (held in partition dpart). */
static void
one(struct redrive *rd, const char *env, size_t len, struct shm_name dpart)
{
    struct worker *w = rd->w;
    struct http_dead_letter d;
    struct shm_name q, p;
    int m;

    if (http_dead_letter_parse(env, len, &d) != 0 ||
        d.queue_len > SHM_NAME_MAX || d.partition_len > SHM_NAME_MAX) {
        http_dead_letter_free(&d);
        return; /* not a dead letter: nothing to send back */
    }
    q = (struct shm_name){d.queue, d.queue_len};
    p = (struct shm_name){d.partition, d.partition_len};
    if (!worker_may(w, AUTH_PUSH, worker_client_name(q))) {
        put_back(rd, env, len, dpart);
    } else if (worker_serves_all(w) || shm_owner_here(&w->owners, q, p)) {
        struct shm_msg_in msg = {d.payload, (uint32_t)d.payload_len};
        uint64_t seq;
        if (shm_push(w->seg, w->set.slot, q, p, &msg, 1, shm_now_ms(), &seq) ==
            0)
            rd->redriven++;
        else
            put_back(rd, env, len, dpart);
    } else if ((m = shm_owner_pick(&w->owners, q, p)) < 0 ||
               worker_addr_unusable(w->owners.m[m].addr, w->owners.self_addr) ||
               push_there(rd, m, &d, env, len, dpart) != 0) {
        put_back(rd, env, len, dpart);
    }
    http_dead_letter_free(&d);
}

/* local - take this node's share, at most what max leaves counting the
 * pushes still out (each may yet count). */
static void
local(struct redrive *rd)
{
    struct worker *w = rd->w;
    struct shm_sink k = {.buf = malloc(REDRIVE_SINK), .cap = REDRIVE_SINK};

    while (k.buf != NULL) {
        uint64_t room = left(rd);
        room = room > (uint64_t)rd->pending ? room - (uint64_t)rd->pending : 0;
        if (room == 0)
            break;
        struct shm_pop_req pr = {
            .queue = rd->dlq.name,
            .batch = room < REDRIVE_BATCH ? (uint32_t)room : REDRIVE_BATCH,
            .auto_ack = 1,
            .from = SHM_FROM_ALL,
        };
        k.used = 0;
        k.count = 0;
        int n = shm_pop(w->seg, w->set.slot, &pr, shm_now_ms(), &k);
        if (n == -ENOMEM && k.need > k.cap) {
            unsigned char *b = realloc(k.buf, k.need);
            if (b == NULL)
                break;
            k.buf = b;
            k.cap = k.need;
            continue;
        }
        if (n <= 0)
            break;
        for (const struct shm_popped *m = shm_popped_next(&k, NULL); m != NULL;
             m = shm_popped_next(&k, m)) {
            const char *part = (const char *)(m + 1);
            one(rd, part + m->part_len + m->reply_len, m->len - m->reply_len,
                (struct shm_name){part, m->part_len});
        }
    }
    free(k.buf);
}

/* answered - a peer's answer to its share: {"redriven": N}. */
static void
answered(void *arg, struct http_client_resp *r)
{
    struct redrive *rd = arg;

    if (r->err == 0 && r->status == 200) {
        struct json_object *o = http_jsonc_object(r->body.data, r->body.len);
        rd->redriven += http_jsonc_count(o, "redriven");
        json_object_put(o);
    }
    rd->pending--;
    advance(rd);
}

/* ask_next - ask the next live member for its share: 1 when a call went
 * out, 0 when none is left. */
static int
ask_next(struct redrive *rd)
{
    struct worker *w = rd->w;
    const char *headers[3] = {FORWARD_HEADER ": 1",
                              "Content-Type: application/json"};
    struct shm_name shown = worker_client_name(rd->dlq.name);

    while (++rd->peer < w->owners.n) {
        struct http_buf *b = &rd->body;
        char *authz = NULL;
        int rc = -ENOMEM;

        if (rd->peer == w->owners.self ||
            worker_addr_unusable(w->owners.m[rd->peer].addr,
                                 w->owners.self_addr))
            continue;
        b->len = 0;
        http_buf_append_str(b, "{\"queue\":");
        http_buf_append_json_str(b, shown.ptr, shown.len);
        if (rd->max != 0)
            http_buf_printf(b, ",\"max\":%llu", (unsigned long long)left(rd));
        http_buf_append_str(b, "}");
        struct http_client_req r = {
            .method = "POST",
            .port = HTTP_CLIENT_PEER,
            .addr = w->owners.m[rd->peer].addr,
            .target = "/api/v1/ephemeral/redrive",
            .headers = headers,
            .nheaders = 2,
            .body = b->data,
            .body_len = b->len,
            /* its own pushes may take FORWARD_MS */
            .timeout_ms = 2 * FORWARD_MS,
        };
        if (!b->oom &&
            (rd->req == NULL || worker_auth_header(rd->req, &authz) == 0)) {
            if (authz != NULL)
                headers[r.nheaders++] = authz;
            rc = http_client_request(w->client, &r, answered, rd);
        }
        free(authz);
        if (rc == 0) {
            rd->pending++;
            return 1;
        }
    }
    return 0;
}

/* over - the client left: what is out still finishes, unanswered. */
static void
over(void *arg, int sent_ok)
{
    struct redrive *rd = arg;

    (void)sent_ok;
    rd->req = NULL;
    if (rd->pending == 0 && rd->local_done)
        release(rd);
}

/* answer - {"redriven": N}; rd is freed. */
static void
answer(struct redrive *rd)
{
    struct http_buf b = {0};

    http_buf_printf(&b, "{\"redriven\":%llu}",
                    (unsigned long long)rd->redriven);
    http_reply(rd->req, 200, &b);
    http_buf_free(&b);
    release(rd);
}

/* advance - once nothing is out: the next member's share, or the answer. */
static void
advance(struct redrive *rd)
{
    struct http_request *req;

    if (rd->pending > 0)
        return;
    if (rd->req != NULL && rd->every_node && left(rd) > 0 && ask_next(rd))
        return;
    if (rd->req == NULL) {
        release(rd);
        return;
    }
    http_request_on_done(rd->req, NULL, NULL);
    req = rd->req;
    answer(rd);
    http_request_resume(req);
}

/* worker_redrive - see redrive.h. */
void
worker_redrive(struct worker *w, struct http_request *req)
{
    struct http_redrive in;
    struct http_error err;
    struct redrive *rd;
    size_t len;
    const char *body = http_request_body(req, &len);

    if (http_parse_redrive(body, len, &in, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if ((rd = calloc(1, sizeof(*rd))) == NULL) {
        http_redrive_free(&in);
        http_reply_errno(req, -ENOMEM, "redrive");
        return;
    }
    if (!http_reply_name_ok(req, "queue", in.queue.ptr, in.queue.len) ||
        !worker_authz(w, req, AUTH_POP, "queue",
                      (struct shm_name){in.queue.ptr, in.queue.len},
                      &rd->dlq)) {
        http_redrive_free(&in);
        free(rd);
        return;
    }
    /* The name outlives the body: keep it in rd. */
    memmove(rd->dlq.buf, rd->dlq.name.ptr, rd->dlq.name.len);
    rd->dlq.name.ptr = rd->dlq.buf;
    rd->w = w;
    rd->req = req;
    rd->max = in.max;
    rd->peer = -1;
    rd->every_node = !worker_serves_all(w) &&
                     http_request_header(req, FORWARD_HEADER) == NULL;
    http_redrive_free(&in);
    local(rd);
    rd->local_done = 1;
    if (rd->pending == 0 && !(rd->every_node && left(rd) > 0 && ask_next(rd))) {
        answer(rd);
        return;
    }
    http_request_suspend(req);
    http_request_on_done(req, over, rd);
}
