/*
 * ack_reply.c - see ack_reply.h.  The replyTo is read from the message as
 * the segment holds it, not from the entry: a responder cannot send the
 * reply anywhere but to the requester's inbox.  A reply whose inbox is gone
 * (the request timed out, its requester hung up, its node left) is dropped
 * and counted by the node that answers the ack.
 */
#include "worker/ack_reply.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/parse.h"
#include "http/request.h"
#include "shm/inbox.h"
#include "shm/owner.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/worker_int.h"

#define REPLIED     ",\"replied\":true"
#define NOT_REPLIED ",\"replied\":false,\"reason\":"
#define GONE                                                                   \
    NOT_REPLIED "\"the requester has gone: its request timed out or it "       \
                "hung up\""

#define NOMEM NOT_REPLIED "\"the node is out of memory\""
#define NOT_HELD                                                               \
    NOT_REPLIED "\"the message is not held here: already completed, "          \
                "expired, or delivered by another node\""

/* One reply on its way to another node's inbox. */
struct reply_hop {
    struct ack_reply_out *out;
    uint32_t index;
    int pending;
    char addr[SHM_BOARD_ADDR_MAX];
    struct http_buf body; /* the push */
};

/* The replies of one ack bound for other nodes. */
struct ack_reply_out {
    struct worker *w;
    struct http_request *req; /* NULL once its client left */
    const char **extra;
    void (*then)(void *arg, struct http_request *req);
    void *arg;
    uint32_t n, cap, waiting;
    struct reply_hop *hops;
};

/* keep - the reply to inbox (node m of the owners) into *out. */
static const char *
keep(struct worker *w, struct ack_reply_out **out, uint32_t index, int m,
     struct shm_name inbox, const struct http_str *reply)
{
    struct ack_reply_out *o = *out;
    static const char *const nomem = NOMEM;

    if (o == NULL && (o = *out = calloc(1, sizeof(*o))) == NULL)
        return nomem;
    if (o->n == o->cap) {
        uint32_t cap = o->cap ? o->cap * 2 : 4;
        struct reply_hop *h = realloc(o->hops, cap * sizeof(*h));
        if (h == NULL)
            return nomem;
        o->hops = h;
        o->cap = cap;
    }
    struct reply_hop *h = &o->hops[o->n];
    *h = (struct reply_hop){.index = index};
    snprintf(h->addr, sizeof(h->addr), "%s", w->owners.m[m].addr);
    inbox = shm_inbox_bare(inbox); /* the inbox's node prefixes the tenant
                                      of the token the hop carries */
    http_buf_append_str(&h->body, "{\"queue\":");
    http_buf_append_json_str(&h->body, inbox.ptr, inbox.len);
    http_buf_append_str(&h->body, ",\"messages\":[{\"payload\":");
    http_buf_append(&h->body, reply->ptr, reply->len);
    http_buf_append_str(&h->body, "}]}");
    if (h->body.oom) {
        free(h->body.data);
        return nomem;
    }
    o->n++;
    return NULL;
}

/* ack_reply_read - see ack_reply.h. */
const char *
ack_reply_read(struct worker *w, struct shm_name queue, struct shm_name part,
               uint64_t seq, struct shm_name *inbox)
{
    char to[SHM_NAME_MAX];
    int n = shm_reply_to(w->seg, w->set.slot, queue, part, seq, shm_now_ms(),
                         to, sizeof(to));
    char *copy;

    *inbox = (struct shm_name){NULL, 0};
    if (n < 0)
        return NOT_HELD;
    if (n == 0)
        return NOT_REPLIED "\"the message has no replyTo: it is not a "
                           "request\"";
    if ((copy = malloc((size_t)n)) == NULL)
        return NOMEM;
    memcpy(copy, to, (size_t)n);
    *inbox = (struct shm_name){copy, (size_t)n};
    return NULL;
}

/* ack_reply_deliver - see ack_reply.h. */
const char *
ack_reply_deliver(struct worker *w, struct shm_name inbox,
                  const struct http_str *reply, struct ack_reply_out **out,
                  uint32_t index)
{
    uint64_t now = shm_now_ms(), first;
    struct shm_name deflt = {"Default", 7};

    if (!worker_serves_all(w) && !shm_owner_here(&w->owners, inbox, deflt))
        return keep(w, out, index, shm_owner_pick(&w->owners, inbox, deflt),
                    inbox, reply);
    struct shm_name node;
    if (shm_inbox_node(inbox, &node) &&
        (node.len != strlen(w->set.node_id) ||
         memcmp(node.ptr, w->set.node_id, node.len) != 0)) {
        /* named for a node that is no live member: it left, and its
         * requests with it */
        shm_count(w->seg, w->set.slot, SHM_C_REPLY_DROPPED, 1);
        return GONE;
    }
    struct shm_msg_in m = {reply->ptr, (uint32_t)reply->len};
    int rc = shm_push(w->seg, w->set.slot, inbox, deflt, &m, 1, now, &first);
    if (rc == 0)
        return REPLIED;
    if (rc == -ENOENT) {
        shm_count(w->seg, w->set.slot, SHM_C_REPLY_DROPPED, 1);
        return GONE;
    }
    return NOT_REPLIED "\"the reply could not be stored in the requester's "
                       "inbox (too large, or the node is full)\"";
}

/* ack_reply_free - see ack_reply.h. */
void
ack_reply_free(struct ack_reply_out *o)
{
    if (o == NULL)
        return;
    for (uint32_t i = 0; i < o->n; i++)
        free(o->hops[i].body.data);
    free(o->hops);
    free(o);
}

/* finish - every hop answered: go on, and free out. */
static void
finish(struct ack_reply_out *o)
{
    if (o->req != NULL)
        http_request_on_done(o->req, NULL, NULL); /* o goes now */
    o->then(o->arg, o->req);
    ack_reply_free(o);
}

/* hop_answered - the inbox's node answered the push (201), said the inbox
 * is gone (404), or did not answer. */
static void
hop_answered(void *arg, struct http_client_resp *r)
{
    struct reply_hop *h = arg;
    struct ack_reply_out *o = h->out;
    struct worker *w = o->w;

    h->pending = 0;
    if (r->err == 0 && r->status == 201) {
        o->extra[h->index] = REPLIED;
    } else if (r->err == 0 && r->status == 404) {
        shm_count(w->seg, w->set.slot, SHM_C_REPLY_DROPPED, 1);
        o->extra[h->index] = GONE;
    } else {
        shm_count(w->seg, w->set.slot, SHM_C_FORWARD_FAILED, 1);
        o->extra[h->index] =
            NOT_REPLIED "\"the requester's node did not take the reply\"";
    }
    if (--o->waiting == 0)
        finish(o);
}

/* client_left - the ack's client hung up: the hops still go on (their
 * replies are on their way), nothing is answered. */
static void
client_left(void *arg, int sent_ok)
{
    struct ack_reply_out *o = arg;

    (void)sent_ok;
    o->req = NULL;
}

/* ack_reply_send - see ack_reply.h. */
void
ack_reply_send(struct worker *w, struct http_request *req,
               struct ack_reply_out *o, const char **extra,
               void (*then)(void *arg, struct http_request *req), void *arg)
{
    char *authz = NULL;
    const char *headers[] = {FORWARD_HEADER ": 1",
                             "Content-Type: application/json", NULL};

    o->w = w;
    o->req = req;
    o->extra = extra;
    o->then = then;
    o->arg = arg;
    o->waiting = 1; /* until every hop is out */
    if (worker_auth_header(req, &authz) != 0)
        authz = NULL;
    headers[2] = authz; /* credentials go with the reply */
    http_request_on_done(req, client_left, o);
    http_request_suspend(req);
    for (uint32_t i = 0; i < o->n; i++) {
        struct reply_hop *h = &o->hops[i];
        struct http_client_req r = {.method = "POST",
                                    .port = HTTP_CLIENT_PEER,
                                    .addr = h->addr,
                                    .target = "/api/v1/ephemeral/push",
                                    .headers = headers,
                                    .nheaders = authz ? 3 : 2,
                                    .body = h->body.data,
                                    .body_len = h->body.len,
                                    .timeout_ms = FORWARD_MS};

        h->out = o;
        extra[h->index] =
            NOT_REPLIED "\"the requester's node cannot be reached\"";
        if (h->addr[0] != '\0' &&
            http_client_request(w->client, &r, hop_answered, h) == 0) {
            h->pending = 1;
            o->waiting++;
        }
    }
    free(authz);
    if (--o->waiting == 0)
        finish(o);
}
