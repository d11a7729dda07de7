/*
 * group_join.c - see group_join.h: the announcement of a group new here to
 * the peers, and a peer's side of it.
 */
#include "worker/group_join.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/group_share.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/pop_call.h"
#include "worker/worker_int.h"

/* One announcement on its way to the peers. */
struct join {
    struct worker *w;
    struct http_request *req;
    const struct shm_pop_req *r; /* the caller's, valid until go runs */
    group_join_go *go;
    void *arg;
    int waiting; /* calls still out */
    struct join_peer {
        struct join *j;
        int pending;
        char id[SHM_BOARD_ID_MAX];
    } peer[SHM_BOARD_MEMBERS];
};

/* cancel_all - drop the calls still out. */
static void
cancel_all(struct join *j)
{
    for (int k = 0; k < SHM_BOARD_MEMBERS; k++)
        if (j->peer[k].pending)
            http_client_cancel(j->w->client, &j->peer[k]);
}

/* gone - the request ended while the peers were being told. */
static void
gone(void *arg, int sent_ok)
{
    struct join *j = arg;

    (void)sent_ok;
    cancel_all(j);
    j->go(j->arg, NULL);
    free(j);
}

/* answered - a peer answered (or gave up); the last one lets the pop go
 * on.  A peer that failed learns the group from the next heartbeats.
 * This node learns it now too, so its next pops need not ask again: a pop
 * with no partition makes no queue here (pop_cluster.h), and would
 * otherwise find the group unknown each time.  Not before the answers: a
 * second first pop meanwhile must not be served as if they were in. */
static void
answered(void *arg, struct http_client_resp *r)
{
    struct join_peer *p = arg;
    struct join *j = p->j;

    p->pending = 0;
    if (r->err != 0 || r->status != 200)
        log_debug(0,
                  "node %s did not take a new group at once (%s, status "
                  "%u): it learns it from the heartbeats",
                  p->id, r->err ? r->error : "answered", r->status);
    if (--j->waiting > 0)
        return;
    uint64_t now = shm_now_ms();
    (void)shm_group_learn(j->w->seg, j->w->set.slot, j->r->queue, j->r->group,
                          j->r->from, now, now, 1);
    http_request_on_done(j->req, NULL, NULL);
    j->go(j->arg, j->req);
    free(j);
}

/* target - the announcement's path and query (malloc'd), or NULL. */
static char *
target(const struct shm_pop_req *r)
{
    return pop_call_query(r, "/api/v1/ephemeral/pop?", "&announce=true");
}

/* tell - send the announcement to every live peer; how many calls went
 * out (0: none could, or there is none). */
static int
tell(struct join *j, const struct shm_pop_req *r)
{
    const struct shm_owners *o = &j->w->owners;
    char *authz = NULL, *path = target(r);
    const char *headers[2] = {FORWARD_HEADER ": 1"};

    if (path == NULL || worker_auth_header(j->req, &authz) != 0) {
        free(path);
        return 0;
    }
    headers[1] = authz; /* credentials go with it, as with a forward */
    for (int i = 0; i < o->n && i < SHM_BOARD_MEMBERS; i++) {
        struct join_peer *p = &j->peer[i];
        struct http_client_req c = {
            .method = "GET",
            .port = HTTP_CLIENT_PEER,
            .addr = o->m[i].addr,
            .target = path,
            .headers = headers,
            .nheaders = authz ? 2 : 1,
            .timeout_ms = GROUP_JOIN_MS,
            .connect_timeout_ms = FORWARD_CONNECT_MS,
        };
        if (i == o->self || worker_addr_unusable(o->m[i].addr, o->self_addr))
            continue;
        *p = (struct join_peer){.j = j};
        snprintf(p->id, sizeof(p->id), "%s", o->m[i].id);
        if (http_client_request(j->w->client, &c, answered, p) == 0) {
            p->pending = 1;
            j->waiting++;
        }
    }
    free(authz); /* the client copied it */
    free(path);
    return j->waiting;
}

/* worker_group_new - see group_join.h. */
int
worker_group_new(struct worker *w, struct http_request *req,
                 const struct shm_pop_req *r)
{
    return !worker_serves_all(w) &&
           (r->part.len != 0 ||
            http_request_header(req, FORWARD_HEADER) == NULL) &&
           !shm_group_known(w->seg, w->set.slot, r->queue, r->group);
}

/* worker_group_join - see group_join.h. */
int
worker_group_join(struct worker *w, struct http_request *req,
                  const struct shm_pop_req *r, group_join_go *go, void *arg)
{
    struct join *j;

    if ((j = calloc(1, sizeof(*j))) == NULL)
        return 1; /* no memory: the heartbeats tell them */
    *j = (struct join){.w = w, .req = req, .r = r, .go = go, .arg = arg};
    if (tell(j, r) == 0) {
        free(j);
        return 1;
    }
    http_request_on_done(req, gone, j);
    http_request_suspend(req);
    return 0;
}

/* worker_group_joined - see group_join.h. */
void
worker_group_joined(struct worker *w, struct http_request *req,
                    const struct shm_pop_req *r)
{
    uint64_t now = shm_now_ms();
    struct http_buf b = {0};
    int rc = shm_group_learn(w->seg, w->set.slot, r->queue, r->group, r->from,
                             now, now, 1);

    if (rc != 0) {
        http_reply_errno(req, rc, "pop");
        return;
    }
    struct shm_name shown = worker_client_name(r->queue);
    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, shown.ptr, shown.len);
    http_buf_append_str(&b, ",\"messages\":[]}");
    http_reply(req, 200, &b);
}
