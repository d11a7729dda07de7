/*
 * node_call.c - see node_call.h.
 */
#include "http/node_call.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "http/reply.h"
#include "http/request.h"
#include "http/sign.h"
#include "shm/log.h"
#include "shm/nonce.h"

/* Who this node is (http_node_call_self). */
static struct {
    char node_id[72];
    char addr[2][264];
    struct http_sign_self s;
} self;

/* http_node_call_self - see node_call.h. */
void
http_node_call_self(const struct http_sign_self *s)
{
    snprintf(self.node_id, sizeof(self.node_id), "%s",
             s->node_id ? s->node_id : "");
    for (int i = 0; i < 2; i++)
        snprintf(self.addr[i], sizeof(self.addr[i]), "%s",
                 s->addr[i] ? s->addr[i] : "");
    self.s = (struct http_sign_self){self.node_id,
                                     s->incarnation,
                                     {self.addr[0], self.addr[1]},
                                     s->since_ms};
}

/* refused - the 401 of a call that is not what it claims. */
static enum http_node_call
refused(struct http_request *req, const char *why)
{
    log_info(0, "refused a call between nodes (%s %s): %s",
             http_request_method(req), http_request_uri(req), why);
    http_reply_header(req, HTTP_NODE_REFUSED, "1");
    http_reply_error(req, 401, "unauthorized", "%s", why);
    return HTTP_CALL_REFUSED;
}

/* late - the 503 of a node's call that came after its sender gave up. */
static enum http_node_call
late(struct http_request *req, int64_t by_ms)
{
    log_info(0,
             "refused a call between nodes (%s %s): its deadline passed "
             "%" PRId64 " ms before it came (this node's clock)",
             http_request_method(req), http_request_uri(req), by_ms);
    http_reply_error(req, 503, "timeout",
                     "the call came %" PRId64 " ms after its deadline "
                     "(" HTTP_SIGN_DEADLINE "), by this node's clock: its "
                     "sender no longer waits",
                     by_ms);
    return HTTP_CALL_REFUSED;
}

/* unsigned_call - a call with no signature: a client's, unless it
 * carries what only nodes may. */
static enum http_node_call
unsigned_call(struct http_request *req)
{
    if (http_request_header(req, HTTP_NODE_FORWARDED) != NULL ||
        http_request_header(req, HTTP_NODE_WITHDRAW) != NULL ||
        http_request_header(req, HTTP_NODE_AROUND) != NULL)
        return refused(req, HTTP_NODE_FORWARDED
                       ", " HTTP_NODE_WITHDRAW " and " HTTP_NODE_AROUND
                       " are for calls between nodes, which are "
                       "signed (" HTTP_SIGN_HEADER ")");
    return HTTP_CALL_CLIENT;
}

/* take_nonce - the call's nonce, taken once for the whole node. */
static enum http_node_call
take_nonce(struct http_request *req, struct shm_seg *seg,
           struct shm_nonces *nonces, const struct http_sign_seen *seen,
           uint64_t now_ms)
{
    int rc = shm_nonce_take(seg, nonces, seen->sender, seen->seq, now_ms);

    if (rc == -EALREADY || rc == -ERANGE || rc == -EINVAL)
        return refused(req, HTTP_SIGN_NONCE
                       " was seen before (or is too "
                       "old to tell): a call between nodes is taken "
                       "once");
    if (rc != 0) {
        http_reply_error(req, 503, "ephemeral_unavailable",
                         "this node tracks too many senders of calls "
                         "between nodes: retry");
        return HTTP_CALL_REFUSED;
    }
    return HTTP_CALL_NODE;
}

enum http_node_call
http_node_call(struct http_request *req, const char *key, struct shm_seg *seg,
               struct shm_nonces *nonces, uint64_t now_ms)
{
    const char *names[HTTP_SIGN_HEADERS_MAX + 3],
        *values[HTTP_SIGN_HEADERS_MAX + 3];
    struct http_sign_header h[HTTP_SIGN_HEADERS_MAX + 3];
    struct http_sign_call call = {
        .method = http_request_method(req),
        .target = http_request_uri(req),
        .h = h,
    };
    struct http_sign_seen seen = {0};
    char why[320];
    int64_t now = http_sign_now_ms();
    enum http_node_call v;
    size_t n, na;

    /* the call that carried it was checked (inner.h) */
    if (http_request_is_inner(req))
        return HTTP_CALL_NODE;
    n = http_request_headers(req, HTTP_SIGN_PREFIX, names, values,
                             HTTP_SIGN_HEADERS_MAX + 1);
    if (http_request_header(req, HTTP_SIGN_HEADER) == NULL)
        return unsigned_call(req);
    if (n > HTTP_SIGN_HEADERS_MAX + 1) {
        snprintf(why, sizeof(why),
                 "a signed call carries at most %d X-Mayfly- headers "
                 "besides its signature",
                 HTTP_SIGN_HEADERS_MAX);
        return refused(req, why);
    }
    /* and its Authorization (signed: sign.h), which a second would make
     * ambiguous; the look-up is by prefix, so more than two names that
     * start so are refused rather than looked through */
    if ((na = http_request_headers(req, HTTP_SIGN_AUTHZ, names + n, values + n,
                                   2)) > 2)
        return refused(req, "a signed call carries one " HTTP_SIGN_AUTHZ
                            " header at most");
    n += na;
    for (size_t i = 0; i < n; i++)
        h[i] = (struct http_sign_header){names[i], values[i]};
    call.nh = n;
    call.body = http_request_body(req, &call.len);
    switch (
        http_sign_check(&call, key, &self.s, now, &seen, why, sizeof(why))) {
    case HTTP_SIGN_OK:
        break;
    case HTTP_SIGN_ABSENT: /* cannot be: the look-up above found it */
        return unsigned_call(req);
    default:
        return refused(req, why);
    }
    /* The nonce first: a replay is a replay (401), late or not. */
    if ((v = take_nonce(req, seg, nonces, &seen, now_ms)) != HTTP_CALL_NODE)
        return v;
    if (seen.deadline_ms != 0 && now > seen.deadline_ms)
        return late(req, now - seen.deadline_ms);
    return HTTP_CALL_NODE;
}

int64_t
http_node_call_left_ms(struct http_request *req)
{
    const char *v = http_request_header(req, HTTP_SIGN_DEADLINE);
    int64_t d;

    if (v == NULL || http_sign_ms(v, &d) != 0)
        return INT64_MAX;
    return d - http_sign_now_ms();
}
