/*
 * ack_route.h - acks and extends whose ids another node delivered.
 *
 * An id names the incarnation of the node that delivered it, and only that
 * node holds the message (ids are never reused across incarnations).  So an
 * ack routes by the id, not by the partition's owner: an entry naming a
 * live member's incarnation goes to that member, one naming this node's is
 * applied here, and one naming no known member is stale.  A node answers
 * stale for every id it did not deliver, so the whole body can go to each
 * node named: each entry then takes its outcome from its own node's answer.
 */
#ifndef MAYFLY_WORKER_ACK_ROUTE_H
#define MAYFLY_WORKER_ACK_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "shm/board.h"

struct worker;
struct http_request;
struct http_str;
struct shm_ack;

enum ack_route {
    ACK_ROUTE_HERE, /* every entry is this node's, or nobody's: apply here */
    ACK_ROUTE_ONE,  /* every entry is one other node's: forward the request */
    ACK_ROUTE_FAN,  /* several nodes: apply here, ask the others, merge */
};

/* The members an ack names, besides this node. */
struct ack_routes {
    int n;
    int mine; /* entries naming this node's incarnation */
    struct {
        uint64_t inc;
        char id[SHM_BOARD_ID_MAX];
        char addr[SHM_BOARD_ADDR_MAX];
    } m[SHM_BOARD_MEMBERS];
};

/* What the ack's parse owns, handed to a fan that answers later. */
struct ack_hold {
    void *parse; /* the ids point into it */
    void (*free_parse)(void *parse);
    struct shm_ack *acks; /* outcomes, by request position */
    int taken;            /* the fan frees both, with the request */
};

/*
 * What runs once an ack's entries have their outcomes: the ack route
 * answers them; a pop that carries acks (SPEC §14) pops next.  fn runs
 * exactly once, with req NULL when req was answered otherwise (an error,
 * a node that did not answer) or its client left: then it only frees arg.
 * A pop's entries of other nodes go to target, the ack route's path (NULL:
 * the request's own, whose whole body goes along).
 */
struct ack_then {
    void (*fn)(void *arg, struct http_request *req, const struct http_str *ids,
               size_t stride, const struct shm_ack *acks, uint32_t n,
               const char *const *extra);
    void *arg;
    const char *target;
};

/* ack_route_plan - where the entries whose incarnations are incs go. */
enum ack_route ack_route_plan(struct worker *w, struct http_request *req,
                              const uint64_t *incs, uint32_t n,
                              struct ack_routes *rt);

/*
 * ack_route_fan - after this node applied its entries (acks[] hold their
 * outcomes), send the request to every member in rt, take each entry's
 * outcome from the answer of the node its id names, and run then.  Takes
 * hold; a member that does not answer fails the request (503
 * ephemeral_forward_failed, naming it): its entries' fate is unknown.
 * extra (NULL, or what each entry of this node adds: see ack_results.h)
 * is copied; the entries of other nodes take what their answers add
 * ("replied", "reason").  req may be suspended already.
 */
void ack_route_fan(struct worker *w, struct http_request *req,
                   const struct ack_routes *rt, const uint64_t *incs,
                   const struct http_str *ids, size_t stride, uint32_t n,
                   struct ack_hold *hold, const char *const *extra,
                   const struct ack_then *then);

#endif
