/*
 * node_call.h - telling a call from another node of the cluster from a
 * client's (SPEC §10): a node's call is signed (http/sign.h) and its nonce
 * is taken once in the node's table (shm/nonce.h); only such a call may
 * carry the headers nodes act on (X-Mayfly-Forwarded: answer for this
 * node alone; X-Mayfly-Withdraw: the rpc store's withdrawal).  The
 * forwarded client's own headers (Authorization) pass untouched.
 *
 * Stateless beyond the nonce table; single-threaded per process.
 */
#ifndef MAYFLY_HTTP_NODE_CALL_H
#define MAYFLY_HTTP_NODE_CALL_H

#include <stdint.h>

struct http_request;
struct shm_nonces;
struct shm_seg;

#define HTTP_NODE_FORWARDED "X-Mayfly-Forwarded"
#define HTTP_NODE_WITHDRAW  "X-Mayfly-Withdraw"

enum http_node_call {
    HTTP_CALL_REFUSED = -1, /* answered 401: a bad, stale or replayed
                               signature, or node headers unsigned */
    HTTP_CALL_CLIENT = 0,   /* unsigned, without node headers */
    HTTP_CALL_NODE = 1,     /* signed by a node, first seen now */
};

/*
 * http_node_call - what req is, with the cluster secret key, at now_ms
 * (shm_now_ms(): the nonce table's clock); a refused call is answered here
 * (401 unauthorized, a sentence saying why).  seg may be NULL (it only
 * counts lock repairs).
 */
enum http_node_call http_node_call(struct http_request *req, const char *key,
                                   struct shm_seg *seg,
                                   struct shm_nonces *nonces, uint64_t now_ms);

#endif
