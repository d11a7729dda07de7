/*
 * declare.c - POST /api/v1/ephemeral/configure and the declared half of
 * DELETE /api/v1/ephemeral/queue/{q}: both go through the raft log, which
 * this node's master runs (master/configure.c answers them there).
 *
 * The worker passes the request to its master's cluster port (signed with
 * the cluster secret, http/sign.h) and relays the answer as it is: the master answers once
 * the entry has committed and been applied on this node, or 503 no_leader /
 * timeout.  The request stays suspended meanwhile.
 */
#include "worker/declare.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/reply.h"
#include "http/request.h"
#include "worker/worker_int.h"

#define MASTER_TIMEOUT_MS 10000

struct relay {
    struct http_request *req;
    struct http_buf body; /* what we send, when not the request's own */
};

/* relayed - the master answered (or did not). */
static void
relayed(void *arg, struct http_client_resp *r)
{
    struct relay *x = arg;

    if (r->err != 0) {
        http_reply_error(x->req, 503, "no_leader",
                         "this node's master did not answer: %s", r->error);
    } else {
        if (r->status >= 500 || r->status == 429)
            http_reply_header(x->req, "Retry-After", "1");
        http_reply(x->req, r->status, &r->body);
    }
    http_request_resume(x->req);
    http_buf_free(&x->body);
    free(x);
}

/* to_master - POST body (the request's, or own: taken) to this node's
 * master at path, and relay the answer. */
static void
to_master(struct worker *w, struct http_request *req, const char *path,
          struct http_buf *own)
{
    struct relay *x = calloc(1, sizeof(*x));
    size_t len;
    const char *body = http_request_body(req, &len);
    const char *headers[] = {"Content-Type: application/json"};
    struct http_client_req r = {
        .method = "POST",
        .port = HTTP_CLIENT_CLUSTER,
        .addr = w->set.cluster_addr,
        .target = path,
        .headers = headers,
        .nheaders = 1,
        .body = body,
        .body_len = len,
        .timeout_ms = MASTER_TIMEOUT_MS,
    };

    if (x == NULL) {
        http_buf_free(own);
        http_reply_errno(req, -ENOMEM, "configure");
        return;
    }
    x->req = req;
    if (own != NULL) {
        x->body = *own;
        *own = (struct http_buf){0};
        r.body = x->body.data;
        r.body_len = x->body.len;
    }
    http_request_suspend(req);
    if (http_client_request(w->client, &r, relayed, x) != 0) {
        struct http_client_resp fail = {.err = -EIO, .error = "no request"};
        relayed(x, &fail);
    }
}

/* worker_configure - see declare.h. */
void
worker_configure(struct worker *w, struct http_request *req)
{
    /* The master parses and validates: one parser, one set of errors. */
    to_master(w, req, "/cluster/v1/configure", NULL);
}

/* worker_declare_delete - see declare.h.  Every node drops the queue's
 * contents when the deletion applies. */
void
worker_declare_delete(struct worker *w, struct http_request *req, const char *q,
                      size_t len)
{
    struct http_buf b = {0};

    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, q, len);
    http_buf_append_str(&b, "}");
    to_master(w, req, "/cluster/v1/delete", &b);
}
