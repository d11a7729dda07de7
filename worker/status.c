/*
 * status.c - GET /health and GET /metrics.
 *
 * Metrics are Prometheus text (version 0.0.4): counters summed over every
 * worker slot at scrape time, gauges read from the segment.  No per-queue
 * series for implicit queues: one inbox per request must not become one
 * time series per request.
 */
#include "shm/status.h"

#include <string.h>

#include "http/buf.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/stats.h"
#include "worker/worker_int.h"

void
worker_health(struct worker *w, struct http_request *req)
{
    struct shm_status_view v;
    struct http_buf b = {0};

    shm_status_read(w->seg->status, &v);
    int ready = v.ready && !w->draining;
    http_buf_append_str(&b, "{\"status\":");
    http_buf_append_str(&b, ready                    ? "\"ok\""
                            : w->draining || v.ready ? "\"draining\""
                                                     : "\"starting\"");
    http_buf_append_str(&b, ",\"node\":");
    http_buf_append_json_str(&b, w->set.node_id, strlen(w->set.node_id));
    http_buf_printf(&b,
                    ",\"incarnation\":\"%016llx\",\"ready\":%s,"
                    "\"role\":\"%s\",\"term\":%llu,\"leader\":",
                    (unsigned long long)w->incarnation,
                    ready ? "true" : "false", shm_role_name(v.role),
                    (unsigned long long)v.term);
    if (v.leader[0])
        http_buf_append_json_str(&b, v.leader, strlen(v.leader));
    else
        http_buf_append_str(&b, "null");
    http_buf_append_str(&b, ",\"members\":[");
    for (uint32_t i = 0; i < v.nmembers && i < SHM_STATUS_MEMBERS; i++) {
        static const char *const states[] = {"live", "dead", "leaving"};
        const struct shm_member *m = &v.members[i];
        http_buf_append_str(&b, i ? ",{\"node\":" : "{\"node\":");
        http_buf_append_json_str(&b, m->id, strnlen(m->id, sizeof(m->id)));
        http_buf_printf(&b, ",\"state\":\"%s\",\"self\":%s}",
                        states[m->state % 3], m->self ? "true" : "false");
    }
    http_buf_append_str(&b, "]}");
    http_reply(req, ready ? 200 : 503, &b);
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

static void
counters(struct http_buf *b, const uint64_t *c)
{
    metric(b, "mayfly_push_total", "counter",
           "Push outcomes (messages "
           "accepted, requests rejected).");
    series(b, "mayfly_push_total", "result=\"accepted\"",
           c[SHM_C_PUSH_ACCEPTED]);
    series(b, "mayfly_push_total", "result=\"rejected_full\"",
           c[SHM_C_PUSH_REJECTED_FULL]);
    series(b, "mayfly_push_total", "result=\"rejected_too_large\"",
           c[SHM_C_PUSH_REJECTED_TOO_LARGE]);
    series(b, "mayfly_push_total", "result=\"unavailable\"",
           c[SHM_C_PUSH_UNAVAILABLE]);
    metric(b, "mayfly_pop_total", "counter", "Messages delivered by pops.");
    series(b, "mayfly_pop_total", NULL, c[SHM_C_POP]);
    metric(b, "mayfly_ack_total", "counter", "Ack outcomes.");
    series(b, "mayfly_ack_total", "outcome=\"acked\"", c[SHM_C_ACK_ACKED]);
    series(b, "mayfly_ack_total", "outcome=\"redelivered\"",
           c[SHM_C_ACK_REDELIVERED]);
    series(b, "mayfly_ack_total", "outcome=\"stale\"", c[SHM_C_ACK_STALE]);
    series(b, "mayfly_ack_total", "outcome=\"unknown\"", c[SHM_C_ACK_UNKNOWN]);
    metric(b, "mayfly_redelivery_total", "counter",
           "Messages made deliverable again, by reason.");
    series(b, "mayfly_redelivery_total", "reason=\"lease_expired\"",
           c[SHM_C_REDELIVERY_LEASE_EXPIRED]);
    series(b, "mayfly_redelivery_total", "reason=\"failed\"",
           c[SHM_C_REDELIVERY_FAILED]);
    series(b, "mayfly_redelivery_total", "reason=\"handover\"",
           c[SHM_C_REDELIVERY_HANDOVER]);
    metric(b, "mayfly_dropped_total", "counter",
           "Messages dropped, by "
           "reason.");
    series(b, "mayfly_dropped_total", "reason=\"retry_limit\"",
           c[SHM_C_DROP_RETRY_LIMIT]);
    series(b, "mayfly_dropped_total", "reason=\"ttl\"", c[SHM_C_DROP_TTL]);
    series(b, "mayfly_dropped_total", "reason=\"drop_oldest\"",
           c[SHM_C_DROP_DROP_OLDEST]);
    series(b, "mayfly_dropped_total", "reason=\"deleted\"",
           c[SHM_C_DROP_DELETED]);
    metric(b, "mayfly_forward_total", "counter",
           "Requests forwarded to the owner node, by result.");
    series(b, "mayfly_forward_total", "result=\"ok\"", c[SHM_C_FORWARD_OK]);
    series(b, "mayfly_forward_total", "result=\"failed\"",
           c[SHM_C_FORWARD_FAILED]);
    series(b, "mayfly_forward_total", "result=\"owner_moved\"",
           c[SHM_C_FORWARD_OWNER_MOVED]);
    metric(b, "mayfly_handover_total", "counter",
           "Partition hand-overs, by direction and result.");
    series(b, "mayfly_handover_total", "direction=\"out\",result=\"ok\"",
           c[SHM_C_HANDOVER_OUT_OK]);
    series(b, "mayfly_handover_total", "direction=\"out\",result=\"failed\"",
           c[SHM_C_HANDOVER_OUT_FAILED]);
    series(b, "mayfly_handover_total", "direction=\"in\",result=\"ok\"",
           c[SHM_C_HANDOVER_IN_OK]);
    series(b, "mayfly_handover_total", "direction=\"in\",result=\"failed\"",
           c[SHM_C_HANDOVER_IN_FAILED]);
    metric(b, "mayfly_wipes_total", "counter",
           "Partitions whose contents were dropped by a failed hand-over or "
           "an unrepairable crash.");
    series(b, "mayfly_wipes_total", NULL, c[SHM_C_WIPES]);
    metric(b, "mayfly_worker_restarts_total", "counter",
           "Worker processes that died and were replaced.");
    series(b, "mayfly_worker_restarts_total", NULL, c[SHM_C_WORKER_RESTARTS]);
    metric(b, "mayfly_lock_repairs_total", "counter",
           "Partition locks repaired after their holder died.");
    series(b, "mayfly_lock_repairs_total", NULL, c[SHM_C_LOCK_REPAIRS]);
}

static void
gauges(struct http_buf *b, const struct shm_gauges *g)
{
    metric(b, "mayfly_messages", "gauge", "Messages held, by state.");
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
    metric(b, "mayfly_oldest_message_age_seconds", "gauge",
           "Age of the oldest message held.");
    http_buf_printf(b, "mayfly_oldest_message_age_seconds %.3f\n",
                    (double)g->oldest_age_ms / 1000.0);
}

/* cluster - raft and membership, from the master's status page. */
static void
cluster(struct http_buf *b, const struct shm_status_view *v)
{
    uint64_t n[3] = {0};

    metric(b, "mayfly_raft_term", "gauge", "Current raft term.");
    series(b, "mayfly_raft_term", NULL, v->term);
    metric(b, "mayfly_raft_commit_index", "gauge",
           "Highest raft log index known committed.");
    series(b, "mayfly_raft_commit_index", NULL, v->commit);
    metric(b, "mayfly_raft_leader", "gauge",
           "1 when this node is the raft leader.");
    series(b, "mayfly_raft_leader", NULL, v->role == SHM_ROLE_LEADER);
    for (uint32_t i = 0; i < v->nmembers && i < SHM_STATUS_MEMBERS; i++)
        n[v->members[i].state % 3]++;
    metric(b, "mayfly_members", "gauge", "Cluster members, by state.");
    series(b, "mayfly_members", "state=\"live\"", n[SHM_MEMBER_LIVE]);
    series(b, "mayfly_members", "state=\"dead\"", n[SHM_MEMBER_DEAD]);
    series(b, "mayfly_members", "state=\"leaving\"", n[SHM_MEMBER_LEAVING]);
}

void
worker_metrics(struct worker *w, struct http_request *req)
{
    uint64_t c[SHM_C_COUNT];
    struct shm_gauges g;
    struct http_buf b = {0};

    shm_counters_sum(w->seg, c);
    shm_gauges_read(w->seg, shm_now_ms(), &g);
    struct shm_status_view v;

    shm_status_read(w->seg->status, &v);
    counters(&b, c);
    gauges(&b, &g);
    cluster(&b, &v);
    http_reply_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}
