/*
 * ack_results.h - the answer to an ack or an extend, {"results": [{"id",
 * "outcome", "dropped"?}, ...]} in request order (ack_results.c): written
 * by the node that answers, and read back (http/peer_answer.h decodes it)
 * by one that sent the request on to the node that delivered the ids
 * (ack_route.c).
 */
#ifndef MAYFLY_WORKER_ACK_RESULTS_H
#define MAYFLY_WORKER_ACK_RESULTS_H

#include <stddef.h>
#include <stdint.h>

struct http_buf;
struct http_request;
struct http_str;
struct shm_ack;

/*
 * ack_results_format - what ack_results_reply answers, appended to b (a
 * cumulative entry's says its "count").  0, or -ENOMEM with b oom.
 */
int ack_results_format(struct http_buf *b, const struct http_str *ids,
                       size_t stride, const struct shm_ack *acks, uint32_t n,
                       const char *const *extra);

/*
 * ack_results_reply - answer req 200 with each entry's id and outcome:
 * ids[i] is at (char *)ids + i * stride, its outcome in acks[i], and, when
 * extra and extra[i] are not NULL, extra[i] (JSON members, each after a
 * comma) at the end of its object.
 */
void ack_results_reply(struct http_request *req, const struct http_str *ids,
                       size_t stride, const struct shm_ack *acks, uint32_t n,
                       const char *const *extra);

/* ack_results_outcome - one entry of an answer's "results" (its
 * "outcome" text, NULL when absent, and whether "dropped" is true; see
 * http/peer_answer.h) back to enum shm_outcome; -1 when it is none of
 * them. */
int ack_results_outcome(const char *outcome, int dropped);

#endif
