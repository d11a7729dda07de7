/*
 * admin.c - reset and the queue listing (delete is in configure.c, depth in
 * depth.c).
 *
 * These read or clear whole queues; shm/ takes one partition lock at a time,
 * so a listing is a sum of per-partition snapshots, not one atomic view.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/parse.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/arena.h"
#include "worker/worker_int.h"

void
worker_reset(struct worker *w, struct http_request *req)
{
    struct http_reset r;
    struct http_error err;
    struct http_buf b = {0};
    size_t len;
    const char *body = http_request_body(req, &len);

    if (http_parse_reset(body, len, &r, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if (worker_name_ok(req, "queue", r.queue.ptr, r.queue.len)) {
        int64_t n = shm_queue_reset(w->seg, w->set.slot,
                                    (struct shm_name){r.queue.ptr, r.queue.len},
                                    shm_now_ms());
        http_buf_append_str(&b, "{\"queue\":");
        http_buf_append_json_str(&b, r.queue.ptr, r.queue.len);
        http_buf_append_str(&b, ",\"dropped\":");
        http_buf_append_i64(&b, n < 0 ? 0 : n);
        http_buf_append_str(&b, "}");
        http_reply(req, 200, &b);
    }
    http_reset_free(&r);
}

/* append_options - the effective options object of a queue. */
static void
append_options(struct http_buf *b, const struct shm_qopts *o)
{
    http_buf_printf(b,
                    "{\"maxLength\":%u,\"maxBytes\":%llu,\"policy\":\"%s\","
                    "\"ttlSeconds\":%u,\"leaseSeconds\":%u,\"retryLimit\":%u",
                    o->max_length, (unsigned long long)o->max_bytes,
                    o->policy == SHM_POLICY_DROP_OLDEST ? "dropOldest"
                                                        : "reject",
                    o->ttl_s, o->lease_s, o->retry_limit);
    if (o->window_ms || o->window_count)
        http_buf_printf(b, ",\"windowBuffer\":{\"ms\":%u,\"count\":%u}",
                        o->window_ms, o->window_count);
    http_buf_append_str(b, "}");
}

struct listing {
    struct http_buf *b;
    uint32_t n;
};

static void
list_one(void *arg, const struct shm_queue_info *q)
{
    struct listing *l = arg;
    struct http_buf *b = l->b;

    http_buf_append_str(b, l->n++ ? ",{\"queue\":" : "{\"queue\":");
    http_buf_append_json_str(b, q->name, q->name_len);
    http_buf_printf(
        b,
        ",\"tier\":\"%s\",\"depth\":%llu,\"leased\":%llu,"
        "\"waiting\":%llu,\"bytes\":%llu,\"partitions\":%u,"
        "\"groups\":%u,\"drops\":{\"bounds\":%llu,\"ttl\":%llu,"
        "\"retry\":%llu},\"options\":",
        q->declared ? "declared" : "implicit", (unsigned long long)q->depth,
        (unsigned long long)q->leased, (unsigned long long)q->waiting,
        (unsigned long long)q->bytes, q->partitions, q->groups,
        (unsigned long long)q->drops_bounds, (unsigned long long)q->drops_ttl,
        (unsigned long long)q->drops_retry);
    append_options(b, &q->opts);
    http_buf_append_str(b, "}");
}

void
worker_list(struct worker *w, struct http_request *req)
{
    const struct http_query *q = http_request_args(req);
    struct http_error err;
    struct http_buf items = {0}, b = {0};
    struct listing l = {&items, 0};
    uint32_t limit;
    size_t plen = 0;
    const char *prefix = http_query_get(q, "prefix", &plen);

    if (http_query_u32(q, "limit", 1000, 1, 100000, &limit, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    shm_queue_list(w->seg, (struct shm_name){prefix ? prefix : "", plen}, limit,
                   shm_now_ms(), list_one, &l);
    http_buf_append_str(&b, "{\"node\":");
    http_buf_append_json_str(&b, w->set.node_id, strlen(w->set.node_id));
    http_buf_printf(&b, ",\"count\":%u,\"cellBytes\":%d,\"queues\":[", l.n,
                    SHM_CELL_BYTES);
    http_buf_append(&b, items.data ? items.data : "", items.len);
    http_buf_append_str(&b, "]}");
    http_buf_free(&items);
    http_reply(req, 200, &b);
}
