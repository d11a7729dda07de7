/*
 * route.c - the routing table of SPEC §2 and its matcher.
 *
 * Patterns are literal paths in which "{}" stands for one non-empty path
 * segment (the still percent-encoded parameter).  Every path has one row,
 * whose methods are the Allow header of a 405; the reads that change
 * nothing also take HEAD (a health check's favourite: MHD sends the
 * headers alone).  A pop changes what it reads, so it takes no HEAD: GET,
 * or POST with its acks in the body (SPEC §14); a stream, whose answer
 * never ends, takes GET only.
 * Every client-port path takes OPTIONS too, for a browser's preflight
 * (SPEC §11), which its handler answers before anything else.  No state.
 */
#include "http/route.h"

#include <string.h>

struct route_row {
    const char *method; /* what Allow says */
    const char *pattern;
    enum http_route route;
    int cluster; /* served on the cluster port, not the client port */
};

#define GET_HEAD "GET, HEAD"
#define GET_POST "GET, POST"

static const struct route_row route_table[] = {
    {"POST", "/api/v1/ephemeral/push", HTTP_ROUTE_PUSH, 0},
    {GET_POST, "/api/v1/ephemeral/pop", HTTP_ROUTE_POP, 0},
    {"GET", "/api/v1/ephemeral/subscribe", HTTP_ROUTE_SUBSCRIBE, 0},
    /* before {}: a channel named "enter" or "leave" is listed by no one */
    {"POST", "/api/v1/presence/enter", HTTP_ROUTE_PRES_ENTER, 0},
    {"POST", "/api/v1/presence/leave", HTTP_ROUTE_PRES_LEAVE, 0},
    {GET_HEAD, "/api/v1/presence/{}", HTTP_ROUTE_PRES_LIST, 0},
    {"POST", "/api/v1/ephemeral/ack", HTTP_ROUTE_ACK, 0},
    {"POST", "/api/v1/ephemeral/extend", HTTP_ROUTE_EXTEND, 0},
    {"POST", "/api/v1/ephemeral/request", HTTP_ROUTE_REQUEST, 0},
    {"POST", "/api/v1/ephemeral/configure", HTTP_ROUTE_CONFIGURE, 0},
    {"POST", "/api/v1/ephemeral/reset", HTTP_ROUTE_RESET, 0},
    {"POST", "/api/v1/ephemeral/redrive", HTTP_ROUTE_REDRIVE, 0},
    {"DELETE", "/api/v1/ephemeral/queue/{}", HTTP_ROUTE_DELETE_QUEUE, 0},
    {"DELETE", "/api/v1/ephemeral/queues/{}", HTTP_ROUTE_DELETE_QUEUE, 0},
    {GET_HEAD, "/api/v1/ephemeral/queues", HTTP_ROUTE_LIST_QUEUES, 0},
    {GET_HEAD, "/api/v1/ephemeral/queues/{}/depth", HTTP_ROUTE_DEPTH, 0},
    {GET_HEAD, "/health", HTTP_ROUTE_HEALTH, 0},
    {GET_HEAD, "/metrics", HTTP_ROUTE_METRICS, 0},
    {GET_HEAD, "/api/v1/openapi.json", HTTP_ROUTE_OPENAPI, 0},
    /* a batch of forwarded requests (worker/node_batch.h): signed calls
     * between nodes only, so not in the API's description */
    {"POST", "/api/v1/node/batch", HTTP_ROUTE_NODE_BATCH, 0},
    {GET_HEAD, "/", HTTP_ROUTE_STATUS_PAGE, 0},
    {GET_HEAD, "/index.html", HTTP_ROUTE_STATUS_PAGE, 0},
    {"POST", "/cluster/v1/raft", HTTP_ROUTE_CLUSTER_RAFT, 1},
    {"POST", "/cluster/v1/configure", HTTP_ROUTE_CLUSTER_CONFIGURE, 1},
    {"POST", "/cluster/v1/delete", HTTP_ROUTE_CLUSTER_DELETE, 1},
    {"POST", "/cluster/v1/heartbeat", HTTP_ROUTE_CLUSTER_HEARTBEAT, 1},
    {"POST", "/cluster/v1/adopt", HTTP_ROUTE_CLUSTER_ADOPT, 1},
};

static const char *const route_names[HTTP_ROUTE_COUNT] = {
    [HTTP_ROUTE_NONE] = "none",
    [HTTP_ROUTE_PUSH] = "push",
    [HTTP_ROUTE_POP] = "pop",
    [HTTP_ROUTE_ACK] = "ack",
    [HTTP_ROUTE_EXTEND] = "extend",
    [HTTP_ROUTE_CONFIGURE] = "configure",
    [HTTP_ROUTE_RESET] = "reset",
    [HTTP_ROUTE_DELETE_QUEUE] = "delete_queue",
    [HTTP_ROUTE_LIST_QUEUES] = "list_queues",
    [HTTP_ROUTE_DEPTH] = "depth",
    [HTTP_ROUTE_HEALTH] = "health",
    [HTTP_ROUTE_METRICS] = "metrics",
    [HTTP_ROUTE_STATUS_PAGE] = "status_page",
    [HTTP_ROUTE_REQUEST] = "request",
    [HTTP_ROUTE_SUBSCRIBE] = "subscribe",
    [HTTP_ROUTE_OPENAPI] = "openapi",
    [HTTP_ROUTE_REDRIVE] = "redrive",
    [HTTP_ROUTE_PRES_ENTER] = "presence_enter",
    [HTTP_ROUTE_PRES_LEAVE] = "presence_leave",
    [HTTP_ROUTE_PRES_LIST] = "presence_list",
    [HTTP_ROUTE_NODE_BATCH] = "node_batch",
    [HTTP_ROUTE_CLUSTER_RAFT] = "cluster_raft",
    [HTTP_ROUTE_CLUSTER_CONFIGURE] = "cluster_configure",
    [HTTP_ROUTE_CLUSTER_DELETE] = "cluster_delete",
    [HTTP_ROUTE_CLUSTER_HEARTBEAT] = "cluster_heartbeat",
    [HTTP_ROUTE_CLUSTER_ADOPT] = "cluster_adopt",
};

/*
 * pattern_match - 1 if path[0..n) fits pattern; a "{}" takes the bytes up
 * to the next '/' (at least one), reported in *param / *plen.
 */
static int
pattern_match(const char *pattern, const char *path, size_t n,
              const char **param, size_t *plen)
{
    size_t i = 0, start;

    *param = NULL;
    *plen = 0;
    for (; *pattern != '\0'; pattern++) {
        if (pattern[0] == '{' && pattern[1] == '}') {
            start = i;
            while (i < n && path[i] != '/')
                i++;
            if (i == start)
                return 0;
            *param = path + start;
            *plen = i - start;
            pattern++;
            continue;
        }
        if (i == n || path[i] != *pattern)
            return 0;
        i++;
    }
    return i == n;
}

/* listed - method is one of list's ("GET, HEAD"). */
static int
listed(const char *method, const char *list)
{
    size_t n = strlen(method);
    const char *p = list;

    for (;;) {
        p += strspn(p, " ");
        if (strncmp(p, method, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
        if ((p = strchr(p, ',')) == NULL)
            return 0;
        p++;
    }
}

/* http_route_match - first row whose pattern fits; its methods decide. */
void
http_route_match(const char *method, const char *path, size_t path_len,
                 int cluster, struct http_route_match *m)
{
    size_t i;

    memset(m, 0, sizeof(*m));
    for (i = 0; i < sizeof(route_table) / sizeof(route_table[0]); i++) {
        const struct route_row *r = &route_table[i];

        if (r->cluster != cluster || !pattern_match(r->pattern, path, path_len,
                                                    &m->param, &m->param_len))
            continue;
        m->route = r->route;
        m->allow = r->method;
        m->method_ok = listed(method, r->method) ||
                       (!cluster && strcmp(method, "OPTIONS") == 0);
        return;
    }
    m->param = NULL;
    m->param_len = 0;
}

/* http_route_allow - the method of route's first row (a route's rows
 * share theirs). */
const char *
http_route_allow(enum http_route route)
{
    for (size_t i = 0; i < sizeof(route_table) / sizeof(route_table[0]); i++)
        if (route_table[i].route == route)
            return route_table[i].method;
    return "GET";
}

/* http_route_name - a static name for logs. */
const char *
http_route_name(enum http_route route)
{
    if ((unsigned)route >= HTTP_ROUTE_COUNT)
        return "none";
    return route_names[route];
}
