/*
 * node_call.h - telling a call from another node of the cluster from a
 * client's (SPEC §10): a node's call is signed (http/sign.h) for this node
 * and this incarnation, its nonce is taken once in the node's table
 * (shm/nonce.h), and its deadline has not passed; only such a call may
 * carry the headers nodes act on (X-Mayfly-Forwarded: answer for this
 * node alone; X-Mayfly-Withdraw: the rpc store's withdrawal;
 * X-Mayfly-Around: the members the sender routes around).  The
 * forwarded client's own headers (Authorization) pass untouched.
 *
 * Deadlines.  A call's X-Mayfly-Deadline is the sender's wall clock when
 * it stops waiting; one that arrives later (its segments held in a
 * kernel's queue through a partition, say) is refused 503 timeout, so
 * what its sender answered as failed stays failed.  This asks the nodes'
 * clocks to agree within much less than the shortest timeout of a call
 * (a heartbeat's 2 beats, 1 s by default; NTP keeps them within a few ms):
 * a receiver ahead by more refuses calls still awaited, one behind lets a
 * call in as much later.
 *
 * Who this node is comes once per process tree (http_node_call_self,
 * before the fork: the workers inherit it).  Single-threaded per process.
 */
#ifndef MAYFLY_HTTP_NODE_CALL_H
#define MAYFLY_HTTP_NODE_CALL_H

#include <stdint.h>

struct http_request;
struct http_sign_self;
struct shm_nonces;
struct shm_seg;

#define HTTP_NODE_FORWARDED "X-Mayfly-Forwarded"
#define HTTP_NODE_WITHDRAW  "X-Mayfly-Withdraw"
/* On a forward: the node ids, comma-separated, that its sender leaves out
 * of the placement (dead or suspect in its view; worker/view.h). */
#define HTTP_NODE_AROUND "X-Mayfly-Around"
/* On the 401 of a node's call refused here: its sender reads it as a call
 * that did not go through (http/client.h), not as a client's refusal. */
#define HTTP_NODE_REFUSED "X-Mayfly-Refused"

enum http_node_call {
    HTTP_CALL_REFUSED = -1, /* answered: 401 for a bad, stale, misdirected
                               or replayed signature, or node headers
                               unsigned; 503 for a deadline passed */
    HTTP_CALL_CLIENT = 0,   /* unsigned, without node headers */
    HTTP_CALL_NODE = 1,     /* signed by a node for this one, first seen
                               now, awaited still */
};

/*
 * http_node_call_self - who this node is from now on, for this process
 * and those it forks (strings copied; an id or address too long for its
 * room is cut, and matches nothing).
 */
void http_node_call_self(const struct http_sign_self *s);

/*
 * http_node_call - what req is, with the cluster secret key, at now_ms
 * (shm_now_ms(): the nonce table's clock); a refused call is answered here
 * (a sentence saying why).  seg may be NULL (it only counts lock repairs).
 */
enum http_node_call http_node_call(struct http_request *req, const char *key,
                                   struct shm_seg *seg,
                                   struct shm_nonces *nonces, uint64_t now_ms);

/* http_node_call_left_ms - ms until the deadline of a node's call (one
 * http_node_call admitted), by this node's clock; INT64_MAX when it names
 * none. */
int64_t http_node_call_left_ms(struct http_request *req);

#endif
