/*
 * route.h - the routing table: method and raw path to a route (SPEC §2).
 *
 * Pure functions over the request line; http/access.c answers 404 not_found
 * and 405 method_not_allowed itself, so handlers only ever see the routes
 * below with the right method -- or OPTIONS on a client-port path, a
 * browser's CORS preflight, which the handler answers first
 * (http_reply_preflight).  No state, no locking.
 */
#ifndef MAYFLY_HTTP_ROUTE_H
#define MAYFLY_HTTP_ROUTE_H

#include <stddef.h>

enum http_route {
    HTTP_ROUTE_NONE = 0,     /* no such path: 404 not_found */
    HTTP_ROUTE_PUSH,         /* POST   /api/v1/ephemeral/push */
    HTTP_ROUTE_POP,          /* GET, POST /api/v1/ephemeral/pop */
    HTTP_ROUTE_ACK,          /* POST   /api/v1/ephemeral/ack */
    HTTP_ROUTE_EXTEND,       /* POST   /api/v1/ephemeral/extend */
    HTTP_ROUTE_CONFIGURE,    /* POST   /api/v1/ephemeral/configure */
    HTTP_ROUTE_RESET,        /* POST   /api/v1/ephemeral/reset */
    HTTP_ROUTE_DELETE_QUEUE, /* DELETE /api/v1/ephemeral/queue{,s}/{q} */
    HTTP_ROUTE_LIST_QUEUES,  /* GET    /api/v1/ephemeral/queues */
    HTTP_ROUTE_DEPTH,        /* GET    /api/v1/ephemeral/queues/{q}/depth */
    HTTP_ROUTE_HEALTH,       /* GET    /health */
    HTTP_ROUTE_METRICS,      /* GET    /metrics */
    HTTP_ROUTE_STATUS_PAGE,  /* GET    / and /index.html */
    HTTP_ROUTE_REQUEST,      /* POST   /api/v1/ephemeral/request */
    HTTP_ROUTE_SUBSCRIBE,    /* GET    /api/v1/ephemeral/subscribe */
    HTTP_ROUTE_OPENAPI,      /* GET    /api/v1/openapi.json */
    HTTP_ROUTE_REDRIVE,      /* POST   /api/v1/ephemeral/redrive */
    HTTP_ROUTE_PRES_ENTER,   /* POST   /api/v1/presence/enter */
    HTTP_ROUTE_PRES_LEAVE,   /* POST   /api/v1/presence/leave */
    HTTP_ROUTE_PRES_LIST,    /* GET    /api/v1/presence/{channel} */
    HTTP_ROUTE_NODE_BATCH,   /* POST   /api/v1/node/batch: nodes only */
    /* the cluster port (masters only) */
    HTTP_ROUTE_CLUSTER_RAFT,      /* POST /cluster/v1/raft */
    HTTP_ROUTE_CLUSTER_CONFIGURE, /* POST /cluster/v1/configure */
    HTTP_ROUTE_CLUSTER_DELETE,    /* POST /cluster/v1/delete */
    HTTP_ROUTE_CLUSTER_HEARTBEAT, /* POST /cluster/v1/heartbeat */
    HTTP_ROUTE_CLUSTER_ADOPT,     /* POST /cluster/v1/adopt */
    HTTP_ROUTE_COUNT
};

/* The outcome of matching one request line. */
struct http_route_match {
    enum http_route route; /* HTTP_ROUTE_NONE when the path is unknown */
    int method_ok;         /* 0: known path, wrong method (405) */
    const char *allow;     /* the Allow header value for the path, static */
    const char *param;     /* raw (still percent-encoded) {q}, or NULL */
    size_t param_len;
};

/*
 * http_route_match - match method ("GET", ...) and the raw path (no query
 * string, not percent-decoded, path_len bytes) against the client port's
 * table, or the cluster port's when cluster is set.  A path
 * parameter must be one non-empty segment (an encoded '/' is %2F).  HEAD is
 * not served.  Cannot fail: unknown paths give route HTTP_ROUTE_NONE.
 */
void http_route_match(const char *method, const char *path, size_t path_len,
                      int cluster, struct http_route_match *m);

/* http_route_allow - the methods route takes, as Allow says them
 * ("POST", "GET, HEAD"); static. */
const char *http_route_allow(enum http_route route);

/* http_route_name - "push", "pop", ... for logs and metrics; static. */
const char *http_route_name(enum http_route route);

#endif
