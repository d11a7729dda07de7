/*
 * gather.h - answering from every live member's share: this node's share
 * now, each other live member's (the same route with scope=node, asked on
 * its client port at the address its master sends in heartbeats) as it
 * comes, all at once, GATHER_TIMEOUT_MS each.  Used by depth and the queue
 * listing with scope=cluster (their default in a cluster), and by reset
 * and delete, which every node
 * applies to its own share (gather_start_same).
 *
 * The request is suspended until the last member has answered or failed,
 * then the route's finish (struct gather_ops) answers it from g's shares,
 * nodes and missing.  A member whose address cannot reach it (unknown, this
 * node's own, 0.0.0.0 or [::]) or whose answer the route's classify refuses
 * (an error, another node answering, another queue) is missing, so a node
 * that reaches itself under a peer's address is never counted twice.  The
 * gather lives as long as the request; single-threaded, in the worker's
 * loop.
 */
#ifndef MAYFLY_WORKER_GATHER_H
#define MAYFLY_WORKER_GATHER_H

#include <stddef.h>

#include "http/buf.h"
#include "http/shares.h"
#include "shm/board.h"

#define GATHER_TIMEOUT_MS 2000

struct worker;
struct http_request;
struct http_client_resp;

/* What a member's answer is to the route. */
enum gather_share {
    GATHER_SHARE, /* its share: kept for finish */
    GATHER_NONE,  /* it holds nothing: named in nodes, no share */
    GATHER_BAD,   /* no answer: named in missing */
};

struct gather;
struct gather_peer {
    struct gather *g;
    char id[SHM_BOARD_ID_MAX];
};

/* What a route does with the members' answers. */
struct gather_ops {
    /* classify - what member node's answer r is to the route */
    enum gather_share (*classify)(struct gather *g,
                                  const struct http_client_resp *r,
                                  const char *node);
    /* finish - must answer g->req from g's shares, nodes and missing */
    void (*finish)(struct gather *g);
};

struct gather {
    struct worker *w;
    struct http_request *req;
    const struct gather_ops *ops;
    size_t max_body; /* a member's answer, at most */
    int same;        /* members get req itself, not a scope=node query */
    char self[SHM_BOARD_ID_MAX];
    int waiting; /* members asked that have not answered */
    int npeers, nshares, nnodes, nmissing;
    struct http_buf share[SHM_BOARD_MEMBERS]; /* shares, this node's first */
    const char *nodes[SHM_BOARD_MEMBERS];     /* whose shares are in */
    const char *missing[SHM_BOARD_MEMBERS];   /* who did not answer */
    struct gather_peer peer[SHM_BOARD_MEMBERS];
};

/*
 * gather_start - answer req from every live member: own is this node's
 * share (taken; NULL or empty when it holds nothing), path_query what each
 * other member is asked (percent-encoded), max_body the most a member's
 * answer may hold (0: the client's default).  On allocation failure req
 * gets a 500 at once.
 */
void gather_start(struct worker *w, struct http_request *req,
                  struct http_buf *own, const char *path_query, size_t max_body,
                  const struct gather_ops *ops);

/*
 * gather_start_same - the same for a change every member applies to its
 * own share (reset, delete): each other live member gets req itself
 * (method, URI, body) marked X-Mayfly-Forwarded, so it acts alone.
 */
void gather_start_same(struct worker *w, struct http_request *req,
                       struct http_buf *own, const struct gather_ops *ops);

/* gather_scope - req's scope query parameter: 1 for cluster, 0 for node;
 * when absent, cluster while other members are live (node alone, or for
 * a request a member forwarded); -1 once req has its 400 for anything
 * else. */
int gather_scope(struct worker *w, struct http_request *req);

/* gather_shares - s describes g's shares for a merge; body and len have
 * room for SHM_BOARD_MEMBERS each. */
void gather_shares(const struct gather *g, struct http_shares *s,
                   const char **body, size_t *len);

#endif
