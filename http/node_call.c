/*
 * node_call.c - see node_call.h.
 */
#include "http/node_call.h"

#include <errno.h>

#include "http/reply.h"
#include "http/request.h"
#include "http/sign.h"
#include "shm/log.h"
#include "shm/nonce.h"

/* refused - the 401 of a call that is not what it claims. */
static enum http_node_call
refused(struct http_request *req, const char *why)
{
    log_info(0, "refused a call between nodes (%s %s): %s",
             http_request_method(req), http_request_uri(req), why);
    http_reply_error(req, 401, "unauthorized", "%s", why);
    return HTTP_CALL_REFUSED;
}

enum http_node_call
http_node_call(struct http_request *req, const char *key, struct shm_seg *seg,
               struct shm_nonces *nonces, uint64_t now_ms)
{
    struct http_sign_call call = {
        .method = http_request_method(req),
        .target = http_request_uri(req),
        .sig = http_request_header(req, HTTP_SIGN_HEADER),
        .time = http_request_header(req, HTTP_SIGN_TIME),
        .nonce = http_request_header(req, HTTP_SIGN_NONCE),
    };
    char why[256];
    uint64_t sender = 0, seq = 0;
    int rc;

    call.body = http_request_body(req, &call.len);
    switch (http_sign_check(&call, key, http_sign_now(), &sender, &seq, why,
                            sizeof(why))) {
    case HTTP_SIGN_ABSENT:
        if (http_request_header(req, HTTP_NODE_FORWARDED) != NULL ||
            http_request_header(req, HTTP_NODE_WITHDRAW) != NULL)
            return refused(req, HTTP_NODE_FORWARDED
                           " and " HTTP_NODE_WITHDRAW
                           " are for calls between nodes, which are "
                           "signed (" HTTP_SIGN_HEADER ")");
        return HTTP_CALL_CLIENT;
    case HTTP_SIGN_OK:
        break;
    default:
        return refused(req, why);
    }
    rc = shm_nonce_take(seg, nonces, sender, seq, now_ms);
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
