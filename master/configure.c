/*
 * configure.c - declare and delete queues through the raft log, on behalf
 * of this node's workers and of peers (cluster port).
 *
 * The leader proposes and answers once the entry is applied here and on
 * every live member (master_raft_propose), so a push that follows the
 * answer finds the declaration on whichever node owns its partition.  A
 * follower passes the request to the leader once (X-Mayfly-Forwarded) and,
 * when the leader answers 201 with the entry's log index, waits until its
 * own log has applied that index (the leader waited for that, unless its
 * wait ran out): the entry, not the options it set, since a later
 * configure or delete of the queue may already have replaced them.  With no leader the
 * request waits for one, up to the deadline: then 503 no_leader (or 503 timeout
 * when a proposal did not commit in time), with Retry-After.  A leadership that
 * changes under a request (an entry lost to another leader's, a leader that
 * answers 503 or refuses the call) sends it to the next leader within the
 * same deadline: declarations and deletions are idempotent.
 *
 * A refusal stays a refusal.  The deadline is the caller's, when its call
 * names one (http/node_call.h: a worker's, or the follower's that passed
 * the request on), less CONFIGURE_RELAY_MS for the answer's way back: a
 * leader proposes only before it (master_raft_propose refuses later), since
 * an entry in the log commits whether anyone still waits for it or not.
 * A call that comes after its deadline is refused on arrival, and one
 * given up resets its connection (http/client.h), so a request answered
 * 503 here is not applied later, when a partition heals.  What remains:
 * the leader's answer lost in the instant between its append and its
 * reply (the entry then commits, answered 503 here).
 *
 * So 503 no_leader promises that nothing was proposed: once the entry
 * may have been (we proposed it, a leader took the request and its answer
 * did not come, or a leader answered 503 timeout) the call's end is 503
 * timeout, outcome unknown (SPEC §2), whatever happens after.
 */
#include "master/configure.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/answer_json.h"
#include "http/buf.h"
#include "http/client.h"
#include "http/errors.h"
#include "http/names.h"
#include "http/node_call.h"
#include "http/parse.h"
#include "http/peer_answer.h"
#include "http/reply.h"
#include "http/request.h"
#include "master/cluster_client.h"
#include "master/master.h"
#include "shm/log.h"
#include "worker/worker.h"

#define CONFIGURE_WAIT_MS 5000
/* A request a follower passed on gets this much less on the leader, so the
 * leader's answer (after a wait for the members to apply, say) comes back
 * before the follower's own deadline. */
#define CONFIGURE_RELAY_MS 1000

enum call_state {
    CALL_WAITING,   /* for a leader to appear */
    CALL_PROPOSED,  /* we lead: for our entry to apply everywhere */
    CALL_FORWARDED, /* for the leader's answer */
    CALL_CATCHING,  /* leader said 201: for our log to apply its index */
};

struct conf_call {
    struct master *m;
    struct http_request *req;
    struct decl_cmd cmd;
    char name[DECL_NAME_MAX];
    char dl[DECL_NAME_MAX]; /* cmd.dl's bytes */
    int forwarded_in;       /* came from a peer: no second hop */
    int maybe_proposed;     /* its entry may be in a log (then never
                               answered no_leader) */
    enum call_state state;
    uint64_t index;    /* the entry's log index, once proposed or answered */
    char *leader_opts; /* passed on: the options the leader answered with */
    uint64_t deadline;
    uint64_t ticked; /* the tick that last stepped it */
    struct conf_call *next;
};

static struct conf_call *calls; /* every call not yet answered */

static void advance(struct conf_call *c);

/* options_json - the effective options, as configure answers them; for
 * a follower that passed the request on, also the entry's log index
 * ("index" > 0), which it waits to apply. */
static void
options_json(struct http_buf *b, const struct decl_cmd *c, uint64_t index)
{
    http_buf_append_str(b, "{\"queue\":");
    http_buf_append_json_str(b, c->name, c->len);
    if (c->op == DECL_DELETE) {
        http_buf_append_str(b, ",\"deleted\":true");
    } else {
        struct http_qopts o = worker_options_view(&c->opts);
        o.dead_letter = c->dl;
        http_buf_append_str(b, ",\"options\":");
        http_options_json(b, &o);
    }
    if (index > 0)
        http_buf_printf(b, ",\"index\":%llu", (unsigned long long)index);
    http_buf_append_str(b, ",\"declared\":true}");
}

/* finish - unlink c, resume its request, free it. */
static void
finish(struct conf_call *c)
{
    struct conf_call **pp = &calls;

    while (*pp != c)
        pp = &(*pp)->next;
    *pp = c->next;
    /* A forward or proposal still in flight must not call back into freed
     * memory. */
    master_cluster_client_cancel(c);
    master_raft_cancel(c->m, c);
    http_request_resume(c->req);
    free(c->leader_opts);
    free(c);
}

/* fail - answer 503 code and finish. */
static void
fail(struct conf_call *c, const char *code, const char *why)
{
    http_reply_error(c->req, 503, code, "%s queue '%.*s': %s",
                     c->cmd.op == DECL_DELETE ? "delete of" : "configure of",
                     (int)(c->cmd.len > 200 ? 200 : c->cmd.len), c->cmd.name,
                     why);
    finish(c);
}

/* succeed - answer with the effective options: the command's own, which
 * the leader committed (its answer to a follower adds the index); a
 * follower answers with the leader's, which its own defaults may not
 * match. */
static void
succeed(struct conf_call *c)
{
    struct http_buf b = {0};

    if (c->leader_opts != NULL && c->cmd.op != DECL_DELETE) {
        http_buf_append_str(&b, "{\"queue\":");
        http_buf_append_json_str(&b, c->cmd.name, c->cmd.len);
        http_buf_append_str(&b, ",\"options\":");
        http_buf_append_str(&b, c->leader_opts);
        http_buf_append_str(&b, ",\"declared\":true}");
    } else {
        options_json(&b, &c->cmd, c->forwarded_in ? c->index : 0);
    }
    http_reply(c->req, c->cmd.op == DECL_DELETE ? 200 : 201, &b);
    finish(c);
}

/* committed - the proposal's done callback. */
static void
committed(void *arg, int rc)
{
    struct conf_call *c = arg;

    if (rc == 0)
        succeed(c);
    else if (rc == -ECANCELED && !c->forwarded_in)
        /* Another leader's entry took its index: it was never applied, so
         * the next leader takes it, as the deadline allows (the tick). */
        c->state = CALL_WAITING;
    else if (rc == -ECANCELED)
        /* Passed to us by a follower: it tries the next leader. */
        fail(c, "no_leader", "leadership changed before it committed");
    else if (rc == -ETIMEDOUT)
        fail(c, "timeout", "the raft log did not commit it in time");
    else /* appended, not committed: it may commit yet */
        fail(c, "timeout", "this node stopped before it committed");
}

/* relayed - the leader answered a forwarded request. */
static void
relayed(void *arg, struct http_client_resp *r)
{
    struct conf_call *c = arg;

    if (r->err != 0) {
        /* No answer, or the call refused (-EACCES: an incarnation of the
         * leader we have not heard yet): whoever leads next, in time.  A
         * leader that took the request may have proposed it. */
        if (r->sent && r->err != -EACCES)
            c->maybe_proposed = 1;
        c->state = CALL_WAITING;
        return;
    }
    if (r->status == 201 || r->status == 200) {
        /* the options as the leader wrote them (none: the command's own
         * are answered) */
        struct http_peer_configured a;
        http_peer_configured(r->body.data, r->body.len, &a);
        c->index = a.index;
        free(c->leader_opts);
        c->leader_opts = a.options;
        c->state = CALL_CATCHING;
        advance(c);
        return;
    }
    if (r->status == 503) {
        /* The leader lost its leadership or is stopping: a declaration
         * applied twice is applied once, so the next leader takes it.
         * Only its no_leader says it proposed nothing. */
        if (!http_peer_error_is(r->body.data, r->body.len, "no_leader"))
            c->maybe_proposed = 1;
        c->state = CALL_WAITING;
        return;
    }
    http_reply(c->req, r->status, &r->body);
    finish(c);
}

/* applied_here - our log has applied the command's entry; from a leader
 * that names no index, its effect is visible in our declared set. */
static int
applied_here(const struct conf_call *c)
{
    const struct decl_queue *q =
        decl_find(&c->m->raft.decl, c->cmd.name, c->cmd.len);

    if (c->index > 0)
        return c->m->raft.st.applied >= c->index;

    if (c->cmd.op == DECL_DELETE)
        return q == NULL;
    return q != NULL && memcmp(&q->opts, &c->cmd.opts, sizeof(q->opts)) == 0;
}

/* advance - move c as far as the raft state allows now. */
static void
advance(struct conf_call *c)
{
    struct master *m = c->m;
    const char *leader;
    int rc;

    switch (c->state) {
    case CALL_WAITING:
        if (master_raft_is_leader(m)) {
            /* A lone voter commits inside propose, and done frees c:
             * maybe_proposed is set before. */
            c->state = CALL_PROPOSED;
            int was = c->maybe_proposed;
            c->maybe_proposed = 1;
            rc = master_raft_propose(m, &c->cmd, c->deadline, committed, c,
                                     &c->index);
            if (rc != 0)
                c->maybe_proposed = was; /* not appended */
            if (rc == -ETIMEDOUT)
                fail(c, "timeout",
                     "its caller's deadline left no time to commit it");
            else if (rc != 0)
                c->state = CALL_WAITING;
        } else if (!c->forwarded_in && shm_now_ms() < c->deadline &&
                   (leader = master_raft_leader_addr(m)) != NULL) {
            /* (past the deadline a forward's timeout would be none, or
             * wrap: the tick answers the call instead) */
            size_t len;
            const char *body = http_request_body(c->req, &len);
            c->state = CALL_FORWARDED;
            master_cluster_client_post(
                m, leader,
                c->cmd.op == DECL_DELETE ? CLUSTER_PATH_DELETE
                                         : CLUSTER_PATH_CONFIGURE,
                body, len, c->deadline - shm_now_ms(), relayed, c);
        }
        break;
    case CALL_CATCHING:
        if (applied_here(c))
            succeed(c);
        break;
    default:
        break;
    }
}

/* dead_letter - deadLetter and deadLetterExpired into o's flags: 0, or
 * answers 400 invalid_option naming the option and returns -EINVAL (a name
 * that is not a queue's, the queue itself: its dead letters would come
 * back to it; deadLetterExpired without a deadLetter to send them to). */
static int
dead_letter(struct http_request *req, const struct http_configure *in,
            struct shm_qopts *o)
{
    const struct http_str *d = &in->dead_letter;

    if (in->present & HTTP_OPT_DEAD_LETTER) {
        if (!http_name_valid(d->ptr, d->len)) {
            http_reply_error(req, 400, "invalid_option",
                             "option 'deadLetter' must be a queue's name (%s)",
                             HTTP_NAME_RULE);
            return -EINVAL;
        }
        if (d->len == in->queue.len &&
            memcmp(d->ptr, in->queue.ptr, d->len) == 0) {
            http_reply_error(req, 400, "invalid_option",
                             "option 'deadLetter' must name another queue "
                             "than the one it is set on");
            return -EINVAL;
        }
        o->flags |= (uint32_t)d->len;
    }
    if ((in->present & HTTP_OPT_DL_EXPIRED) && in->dl_expired) {
        if (!(in->present & HTTP_OPT_DEAD_LETTER)) {
            http_reply_error(req, 400, "invalid_option",
                             "option 'deadLetterExpired' needs option "
                             "'deadLetter'");
            return -EINVAL;
        }
        o->flags |= SHM_QOPT_DL_EXPIRED;
    }
    return 0;
}

/* conflate - the conflate option into o's flags: 0, or answers 400
 * invalid_option naming it and returns -EINVAL beside a dedupe window.
 * Both read a message's key, for opposite ends: dedupeSeconds keeps a
 * key's first message and drops the later ones, conflation keeps its
 * last; together, a new value within the window would be dropped as a
 * duplicate, which is what conflation exists to avoid. */
static int
conflate(struct http_request *req, const struct http_configure *in,
         struct shm_qopts *o)
{
    if (!(in->present & HTTP_OPT_CONFLATE) || !in->conflate)
        return 0;
    if (o->dedupe_s != 0) {
        http_reply_error(req, 400, "invalid_option",
                         "option 'conflate' cannot go with option "
                         "'dedupeSeconds' (a key's first message or its "
                         "last: one of the two)");
        return -EINVAL;
    }
    o->flags |= SHM_QOPT_CONFLATE;
    return 0;
}

/* effective - the options a declaration commits: given ones over the node
 * defaults.  0, or answers 400 invalid_option naming a value outside its
 * range (the node's ceilings included) and returns -EINVAL. */
static int
effective(struct master *m, struct http_request *req,
          const struct http_configure *in, struct shm_qopts *o)
{
    const struct config *cfg = &m->cfg;
    const struct {
        unsigned bit;
        const char *name;
        uint64_t value, min, max;
    } range[] = {
        {HTTP_OPT_MAX_LENGTH, "maxLength", in->max_length, 1,
         cfg->queue_max_length},
        {HTTP_OPT_MAX_BYTES, "maxBytes", in->max_bytes, 1,
         cfg->queue_max_bytes},
        {HTTP_OPT_WINDOW_BUFFER, "windowBuffer.ms", in->window_ms, 0, 60000},
        {HTTP_OPT_WINDOW_BUFFER, "windowBuffer.count", in->window_count, 0,
         10000},
        {HTTP_OPT_TTL_SECONDS, "ttlSeconds", in->ttl_seconds, 0, UINT32_MAX},
        {HTTP_OPT_LEASE_SECONDS, "leaseSeconds", in->lease_seconds, 1,
         HTTP_LEASE_MAX_S},
        {HTTP_OPT_RETRY_LIMIT, "retryLimit", in->retry_limit, 1, 1000000},
        {HTTP_OPT_DEDUPE_S, "dedupeSeconds", in->dedupe_s, 0,
         HTTP_DEDUPE_MAX_S},
        {HTTP_OPT_RETRY_DELAY, "retryDelayMs", in->retry_delay_ms, 0,
         HTTP_RETRY_DELAY_MAX},
    };

    for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
        if (!(in->present & range[i].bit) ||
            (range[i].value >= range[i].min && range[i].value <= range[i].max))
            continue;
        if (range[i].min == 0)
            http_reply_error(req, 400, "invalid_option",
                             "option '%s' must be at most %llu", range[i].name,
                             (unsigned long long)range[i].max);
        else
            http_reply_error(req, 400, "invalid_option",
                             "option '%s' must be between %llu and %llu",
                             range[i].name, (unsigned long long)range[i].min,
                             (unsigned long long)range[i].max);
        return -EINVAL;
    }
    *o = (struct shm_qopts){
        .max_length = (uint32_t)(in->present & HTTP_OPT_MAX_LENGTH
                                     ? in->max_length
                                     : cfg->queue_max_length),
        .max_bytes = in->present & HTTP_OPT_MAX_BYTES ? in->max_bytes
                                                      : cfg->queue_max_bytes,
        .policy = (in->present & HTTP_OPT_POLICY) &&
                          in->policy == HTTP_POLICY_DROP_OLDEST
                      ? SHM_POLICY_DROP_OLDEST
                      : SHM_POLICY_REJECT,
        .ttl_s = (uint32_t)in->ttl_seconds,
        .lease_s =
            (uint32_t)(in->present & HTTP_OPT_LEASE_SECONDS ? in->lease_seconds
                                                            : cfg->lease_s),
        .retry_limit =
            (uint32_t)(in->present & HTTP_OPT_RETRY_LIMIT ? in->retry_limit
                                                          : cfg->retry_limit),
        .window_ms = (uint32_t)in->window_ms,
        .window_count = (uint32_t)in->window_count,
        .dedupe_s = (uint32_t)in->dedupe_s,
        .retry_delay_ms = (uint32_t)in->retry_delay_ms,
    };
    if (dead_letter(req, in, o) != 0)
        return -EINVAL;
    return conflate(req, in, o);
}

/* wait_ms - how long req may wait here: CONFIGURE_WAIT_MS (less the
 * relay's margin for a follower's), and never past its caller's deadline
 * less that margin; <= 0 when no time is left. */
static int64_t
wait_ms(struct http_request *req, int forwarded_in)
{
    int64_t own = CONFIGURE_WAIT_MS - (forwarded_in ? CONFIGURE_RELAY_MS : 0);
    int64_t left = http_node_call_left_ms(req);

    if (left != INT64_MAX && left - CONFIGURE_RELAY_MS < own)
        return left - CONFIGURE_RELAY_MS;
    return own;
}

/* start - park req as a call for cmd and move it along. */
static void
start(struct master *m, struct http_request *req, const struct decl_cmd *cmd)
{
    int forwarded_in = http_request_header(req, CLUSTER_FWD_HEADER) != NULL;
    int64_t wait = wait_ms(req, forwarded_in);
    struct conf_call *c;

    if (wait <= 0) {
        http_reply_error(req, 503, "timeout",
                         "the caller's deadline leaves no time to commit it");
        return;
    }
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        http_reply_errno(req, -ENOMEM, "configure");
        return;
    }
    c->m = m;
    c->req = req;
    c->cmd = *cmd;
    memcpy(c->name, cmd->name, cmd->len);
    c->cmd.name = c->name;
    if (SHM_QOPT_DL_LEN(cmd->opts.flags) > 0) {
        memcpy(c->dl, cmd->dl, SHM_QOPT_DL_LEN(cmd->opts.flags));
        c->cmd.dl = c->dl;
    }
    c->forwarded_in = forwarded_in;
    c->deadline = shm_now_ms() + (uint64_t)wait;
    c->next = calls;
    calls = c;
    http_request_suspend(req);
    advance(c);
}

void
master_configure(struct master *m, struct http_request *req)
{
    struct http_configure in;
    struct http_error err;
    struct decl_cmd cmd = {.op = DECL_DECLARE};
    size_t len;
    const char *body = http_request_body(req, &len);

    if (http_parse_configure(body, len, &in, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if (http_reply_qname_ok(req, "queue", in.queue.ptr, in.queue.len) &&
        effective(m, req, &in, &cmd.opts) == 0) {
        cmd.name = in.queue.ptr;
        cmd.len = in.queue.len;
        cmd.dl = in.dead_letter.ptr;
        start(m, req, &cmd);
    }
    http_configure_free(&in);
}

void
master_undeclare(struct master *m, struct http_request *req)
{
    struct http_reset in;
    struct http_error err;
    size_t len;
    const char *body = http_request_body(req, &len);

    if (http_parse_reset(body, len, &in, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if (http_reply_qname_ok(req, "queue", in.queue.ptr, in.queue.len))
        start(m, req,
              &(struct decl_cmd){
                  DECL_DELETE, in.queue.ptr, in.queue.len, {0}, NULL});
    http_reset_free(&in);
}

void
master_configure_tick(struct master *m, uint64_t now)
{
    struct conf_call *c;

    (void)m;
    /* advance() can commit, and so answer and free, any call (ours or
     * another): after each step the walk starts over, and each call is
     * stepped once per tick. */
restart:
    for (c = calls; c != NULL; c = c->next) {
        if (c->state == CALL_PROPOSED || c->state == CALL_FORWARDED ||
            c->ticked == now)
            continue; /* a proposal's or forward's own end answers it */
        c->ticked = now;
        if (now >= c->deadline && c->state == CALL_CATCHING)
            fail(c, "timeout", "this node did not apply it in time");
        else if (now >= c->deadline && c->maybe_proposed)
            fail(c, "timeout",
                 "it may have been proposed, and no raft leader said it "
                 "committed in time");
        else if (now >= c->deadline)
            fail(c, "no_leader", "no raft leader could be reached");
        else
            advance(c);
        goto restart;
    }
}

void
master_configure_stop(struct master *m)
{
    (void)m;
    while (calls != NULL)
        fail(calls, "draining", "this node is stopping");
}
