/*
 * health.c - GET /health and GET /metrics.
 *
 * Metrics are Prometheus text (version 0.0.4): counters summed over every
 * worker slot at scrape time, gauges read from the segment.  No per-queue
 * series for implicit queues: one inbox per request must not become one
 * time series per request.
 */
#include "worker/health.h"

#include <string.h>

#include "http/answer_json.h"
#include "http/buf.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/board.h"
#include "shm/presence.h"
#include "shm/queue_admin.h"
#include "shm/stats.h"
#include "worker/worker_int.h"

/* worker_health_view - see worker.h. */
void
worker_health_view(struct http_health *h, struct http_health_member *mm,
                   const char *node_id, uint64_t incarnation,
                   enum worker_health_why why, const struct shm_board_view *v)
{
    static const char *const states[SHM_MEMBER_STATES] = {
        "live", "dead", "leaving", "starting"};
    int draining = why == WORKER_HEALTH_DRAINING || v->stopping;
    int ready = v->ready && why == WORKER_HEALTH_VIEW;

    *h = (struct http_health){
        .status = ready                        ? "ok"
                  : draining                   ? "draining"
                  : why == WORKER_HEALTH_STALE ? "stale"
                                               : "starting",
        .ready = ready,
        .node = node_id,
        .incarnation = incarnation,
        .role = shm_role_name(v->role),
        .term = v->term,
        .leader = v->leader,
        .members = mm,
    };
    for (uint32_t i = 0; i < v->nmembers && i < SHM_BOARD_MEMBERS; i++) {
        const struct shm_member *m = &v->members[i];
        mm[h->nmembers++] = (struct http_health_member){
            m->id, strnlen(m->id, sizeof(m->id)),
            states[m->state % SHM_MEMBER_STATES], m->self, 0};
    }
}

/* worker_health - see health.h. */
void
worker_health(struct worker *w, struct http_request *req)
{
    struct shm_board_view v;
    struct http_health h;
    struct http_health_member mm[SHM_BOARD_MEMBERS];
    struct http_buf b = {0};

    shm_board_read(w->seg->board, &v);
    worker_health_view(&h, mm, w->set.node_id, w->incarnation,
                       w->draining                      ? WORKER_HEALTH_DRAINING
                       : shm_board_stale(w->seg->board) ? WORKER_HEALTH_STALE
                                                        : WORKER_HEALTH_VIEW,
                       &v);
    /* what this node's workers could not reach (forward.c) */
    uint64_t suspects = shm_board_suspects(w->seg->board);
    for (size_t i = 0; i < h.nmembers; i++)
        mm[i].suspect = (int)(suspects >> i & 1);
    http_reply(req, http_health_json(&b, &h), &b);
}

/* metric - one HELP/TYPE header. */
static void
metric(struct http_buf *b, const char *name, const char *type, const char *help)
{
    http_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* series - name{labels} value. */
static void
series(struct http_buf *b, const char *name, const char *labels, uint64_t v)
{
    http_buf_printf(b, "%s%s%s%s %llu\n", name, labels ? "{" : "",
                    labels ? labels : "", labels ? "}" : "",
                    (unsigned long long)v);
}

/* The counter families: one HELP/TYPE header, then its series. */
static const struct family {
    const char *name, *help;
    struct {
        const char *labels; /* NULL: the family's one series */
        enum shm_counter c;
    } series[5];
} families[] = {
    {"mayfly_push_total",
     "Push outcomes (messages accepted, requests rejected).",
     {{"result=\"accepted\"", SHM_C_PUSH_ACCEPTED},
      {"result=\"rejected_full\"", SHM_C_PUSH_REJECTED_FULL},
      {"result=\"rejected_too_large\"", SHM_C_PUSH_REJECTED_TOO_LARGE},
      {"result=\"unavailable\"", SHM_C_PUSH_UNAVAILABLE}}},
    {"mayfly_pop_total", "Messages delivered by pops.", {{NULL, SHM_C_POP}}},
    {"mayfly_ack_total",
     "Ack outcomes.",
     {{"outcome=\"acked\"", SHM_C_ACK_ACKED},
      {"outcome=\"redelivered\"", SHM_C_ACK_REDELIVERED},
      {"outcome=\"stale\"", SHM_C_ACK_STALE},
      {"outcome=\"unknown\"", SHM_C_ACK_UNKNOWN}}},
    {"mayfly_redelivery_total",
     "Messages made deliverable again, by reason.",
     {{"reason=\"lease_expired\"", SHM_C_REDELIVERY_LEASE_EXPIRED},
      {"reason=\"failed\"", SHM_C_REDELIVERY_FAILED},
      {"reason=\"handover\"", SHM_C_REDELIVERY_HANDOVER}}},
    {"mayfly_dropped_total",
     "Messages dropped, by reason (deleted: by DELETE or reset).",
     {{"reason=\"retry_limit\"", SHM_C_DROP_RETRY_LIMIT},
      {"reason=\"ttl\"", SHM_C_DROP_TTL},
      {"reason=\"drop_oldest\"", SHM_C_DROP_DROP_OLDEST},
      {"reason=\"deleted\"", SHM_C_DROP_DELETED}}},
    {"mayfly_dead_letters_total",
     "Messages a queue with deadLetter dropped into it, by reason.",
     {{"reason=\"retry_limit\"", SHM_C_DEAD_RETRY_LIMIT},
      {"reason=\"ttl\"", SHM_C_DEAD_TTL}}},
    {"mayfly_dead_letters_lost_total",
     "Dead letters the dead-letter queue could not store (full, the node "
     "cap, or its declaration gone).",
     {{NULL, SHM_C_DEAD_LOST}}},
    {"mayfly_forward_total",
     "Requests forwarded to the owner node, by result.",
     {{"result=\"ok\"", SHM_C_FORWARD_OK},
      {"result=\"failed\"", SHM_C_FORWARD_FAILED},
      {"result=\"owner_moved\"", SHM_C_FORWARD_OWNER_MOVED}}},
    {"mayfly_forward_batch_calls_total",
     "Batch calls to owner nodes: forwards that went together.",
     {{NULL, SHM_C_FORWARD_BATCHES}}},
    {"mayfly_forward_batch_requests_total",
     "Forwarded requests that went to their owner inside a batch call.",
     {{NULL, SHM_C_FORWARD_BATCHED}}},
    {"mayfly_handover_total",
     "Partition hand-overs, by direction and result.",
     {{"direction=\"out\",result=\"ok\"", SHM_C_HANDOVER_OUT_OK},
      {"direction=\"out\",result=\"failed\"", SHM_C_HANDOVER_OUT_FAILED},
      {"direction=\"in\",result=\"ok\"", SHM_C_HANDOVER_IN_OK},
      {"direction=\"in\",result=\"failed\"", SHM_C_HANDOVER_IN_FAILED}}},
    {"mayfly_wipes_total",
     "Partitions whose contents were dropped by a failed hand-over or an "
     "unrepairable crash.",
     {{NULL, SHM_C_WIPES}}},
    {"mayfly_worker_restarts_total",
     "Worker processes that died and were replaced.",
     {{NULL, SHM_C_WORKER_RESTARTS}}},
    {"mayfly_lock_repairs_total",
     "Partition locks repaired after their holder died.",
     {{NULL, SHM_C_LOCK_REPAIRS}}},
    {"mayfly_requests_total",
     "Requests of the request verb, by how they ended (withdrawn: the "
     "requester hung up, or the node drained).",
     {{"result=\"replied\"", SHM_C_REQUEST_REPLIED},
      {"result=\"timeout\"", SHM_C_REQUEST_TIMEOUT},
      {"result=\"no_responders\"", SHM_C_REQUEST_NO_RESPONDERS},
      {"result=\"withdrawn\"", SHM_C_REQUEST_WITHDRAWN}}},
    {"mayfly_replies_dropped_total",
     "Replies dropped because their request had ended (a late reply).",
     {{NULL, SHM_C_REPLY_DROPPED}}},
    {"mayfly_maintenance_visits_total",
     "Queues and partitions the master's maintenance visited because "
     "something in them was due.",
     {{NULL, SHM_C_MAINTAIN_VISITS}}},
    {"mayfly_connections_refused_total",
     "Requests answered 503 because their connection opened past "
     "max_connections.",
     {{NULL, SHM_C_CONNECTIONS_REFUSED}}},
    {"mayfly_stream_events_total",
     "Messages sent by streams (subscribe), one event each.",
     {{NULL, SHM_C_STREAM_EVENTS}}},
    {"mayfly_stream_overflows_total",
     "Streams ended with overflow: their unsent events passed "
     "stream_buffer_bytes.",
     {{NULL, SHM_C_STREAM_OVERFLOWS}}},
    {"mayfly_duplicates_total",
     "Keyed messages not stored again: their key was in the queue's "
     "dedupe window.",
     {{NULL, SHM_C_DUPLICATES}}},
    {"mayfly_conflated_total",
     "Messages replaced by a later one of the same key, read by no group "
     "yet, on a queue that conflates.",
     {{NULL, SHM_C_CONFLATED}}},
};

static void
counters(struct http_buf *b, const uint64_t *c)
{
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        const struct family *f = &families[i];
        metric(b, f->name, "counter", f->help);
        for (size_t k = 0; k < 5 && (k == 0 || f->series[k].labels); k++)
            series(b, f->name, f->series[k].labels, c[f->series[k].c]);
    }
}

/* request_hist - mayfly_request_duration_seconds, from every slot. */
static void
request_hist(struct http_buf *b, struct shm_seg *seg)
{
    static const char name[] = "mayfly_request_duration_seconds";
    uint64_t n[SHM_REQUEST_BUCKETS + 1], sum_us, cum = 0;

    shm_request_hist_sum(seg, n, &sum_us);
    metric(b, name, "histogram",
           "Time from a request's arrival to its answer, replied or not.");
    for (int i = 0; i < SHM_REQUEST_BUCKETS; i++) {
        cum += n[i];
        http_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name,
                        (double)shm_request_bucket_us[i] / 1e6,
                        (unsigned long long)cum);
    }
    cum += n[SHM_REQUEST_BUCKETS];
    http_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                    (unsigned long long)cum);
    http_buf_printf(b, "%s_sum %.6f\n%s_count %llu\n", name,
                    (double)sum_us / 1e6, name, (unsigned long long)cum);
}

static void
gauges(struct http_buf *b, const struct shm_gauges *g, uint64_t streams)
{
    metric(b, "mayfly_messages", "gauge",
           "Messages held, by state (leased: deliveries awaiting an ack, one "
           "per group; pending: the rest).");
    series(b, "mayfly_messages", "state=\"pending\"", g->pending);
    series(b, "mayfly_messages", "state=\"leased\"", g->leased);
    metric(b, "mayfly_memory_used_bytes", "gauge",
           "Accounted bytes held: payloads plus per-message and per-queue "
           "overhead.");
    series(b, "mayfly_memory_used_bytes", NULL, g->memory_used);
    metric(b, "mayfly_memory_limit_bytes", "gauge",
           "The node cap "
           "(max_bytes).");
    series(b, "mayfly_memory_limit_bytes", NULL, g->memory_limit);
    metric(b, "mayfly_queues", "gauge", "Queues held, by kind.");
    series(b, "mayfly_queues", "kind=\"implicit\"", g->queues_implicit);
    series(b, "mayfly_queues", "kind=\"declared\"", g->queues_declared);
    metric(b, "mayfly_parked_pops", "gauge", "Long-poll pops waiting.");
    series(b, "mayfly_parked_pops", NULL, g->parked_pops);
    metric(b, "mayfly_delayed_messages", "gauge",
           "Messages pushed with delayMs that are not visible yet.");
    series(b, "mayfly_delayed_messages", NULL, g->delayed);
    metric(b, "mayfly_streams", "gauge", "Streams (subscribe) open.");
    series(b, "mayfly_streams", NULL, streams);
    metric(b, "mayfly_oldest_message_age_seconds", "gauge",
           "Age of the oldest message held.");
    http_buf_printf(b, "mayfly_oldest_message_age_seconds %.3f\n",
                    (double)g->oldest_age_ms / 1000.0);
}

/* cluster - raft and membership, from the master's board, and the
 * members this node suspects (suspects: shm_board_suspects()). */
static void
cluster(struct http_buf *b, const struct shm_board_view *v, uint64_t suspects)
{
    uint64_t n[SHM_MEMBER_STATES] = {0};

    metric(b, "mayfly_raft_term", "gauge", "Current raft term.");
    series(b, "mayfly_raft_term", NULL, v->term);
    metric(b, "mayfly_raft_commit_index", "gauge",
           "Highest raft log index known committed.");
    series(b, "mayfly_raft_commit_index", NULL, v->commit);
    metric(b, "mayfly_raft_leader", "gauge",
           "1 when this node is the raft leader.");
    series(b, "mayfly_raft_leader", NULL, v->role == SHM_ROLE_LEADER);
    for (uint32_t i = 0; i < v->nmembers && i < SHM_BOARD_MEMBERS; i++)
        n[v->members[i].state % SHM_MEMBER_STATES]++;
    metric(b, "mayfly_members", "gauge", "Cluster members, by state.");
    series(b, "mayfly_members", "state=\"live\"", n[SHM_MEMBER_LIVE]);
    series(b, "mayfly_members", "state=\"dead\"", n[SHM_MEMBER_DEAD]);
    series(b, "mayfly_members", "state=\"leaving\"", n[SHM_MEMBER_LEAVING]);
    series(b, "mayfly_members", "state=\"starting\"", n[SHM_MEMBER_STARTING]);
    metric(b, "mayfly_peers_suspect", "gauge",
           "Members this node's forwards could not reach in time, routed "
           "around here.");
    series(b, "mayfly_peers_suspect", NULL,
           (uint64_t)__builtin_popcountll(suspects));
}

/* presence - SPEC §12's metrics: the table's members and channels on
 * this node (the channels it owns), and its events by action. */
static void
presence(struct http_buf *b, struct shm_seg *seg)
{
    struct shm_pres_totals t;

    shm_presence_totals(seg, &t);
    metric(b, "mayfly_presence_members", "gauge",
           "Presence members of the channels this node owns.");
    series(b, "mayfly_presence_members", NULL, t.members);
    metric(b, "mayfly_presence_channels", "gauge",
           "Presence channels with members on this node.");
    series(b, "mayfly_presence_channels", NULL, t.channels);
    metric(b, "mayfly_presence_events_total", "counter",
           "Presence events, by action.");
    series(b, "mayfly_presence_events_total", "action=\"enter\"",
           t.events[SHM_PRES_ENTER]);
    series(b, "mayfly_presence_events_total", "action=\"leave\"",
           t.events[SHM_PRES_LEAVE]);
    series(b, "mayfly_presence_events_total", "action=\"update\"",
           t.events[SHM_PRES_UPDATE]);
}

/* worker_metrics - see health.h. */
void
worker_metrics(struct worker *w, struct http_request *req)
{
    uint64_t c[SHM_C_COUNT];
    struct shm_gauges g;
    struct http_buf b = {0};

    shm_counters_sum(w->seg, c);
    shm_gauges_read(w->seg, shm_now_ms(), &g);
    struct shm_board_view v;

    shm_board_read(w->seg->board, &v);
    counters(&b, c);
    request_hist(&b, w->seg);
    gauges(&b, &g, shm_streams_sum(w->seg));
    cluster(&b, &v, shm_board_suspects(w->seg->board));
    presence(&b, w->seg);
    http_reply_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}
