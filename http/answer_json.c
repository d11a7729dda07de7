/*
 * answer_json.c - see answer_json.h.
 */
#include "http/answer_json.h"

#include <string.h>

#include "http/buf.h"

/* http_health_json - see answer_json.h. */
unsigned
http_health_json(struct http_buf *b, const struct http_health *h)
{
    http_buf_append_str(b, "{\"status\":\"");
    http_buf_append_str(b, h->status);
    http_buf_append_str(b, "\",\"node\":");
    http_buf_append_json_str(b, h->node, strlen(h->node));
    http_buf_printf(b,
                    ",\"incarnation\":\"%016llx\",\"ready\":%s,"
                    "\"role\":\"%s\",\"term\":%llu,\"leader\":",
                    (unsigned long long)h->incarnation,
                    h->ready ? "true" : "false", h->role,
                    (unsigned long long)h->term);
    if (h->leader[0])
        http_buf_append_json_str(b, h->leader, strlen(h->leader));
    else
        http_buf_append_str(b, "null");
    http_buf_append_str(b, ",\"members\":[");
    for (uint32_t i = 0; i < h->nmembers; i++) {
        const struct http_health_member *m = &h->members[i];
        http_buf_append_str(b, i ? ",{\"node\":" : "{\"node\":");
        http_buf_append_json_str(b, m->node, m->node_len);
        http_buf_printf(b, ",\"state\":\"%s\",\"self\":%s%s}", m->state,
                        m->self ? "true" : "false",
                        m->suspect ? ",\"suspect\":true" : "");
    }
    http_buf_append_str(b, "]}");
    return h->ready ? 200 : 503;
}

/* http_options_json - see answer_json.h. */
void
http_options_json(struct http_buf *b, const struct http_qopts *o)
{
    http_buf_printf(b,
                    "{\"maxLength\":%u,\"maxBytes\":%llu,\"policy\":\"%s\","
                    "\"windowBuffer\":{\"ms\":%u,\"count\":%u},"
                    "\"ttlSeconds\":%u,\"leaseSeconds\":%u,\"retryLimit\":%u,"
                    "\"dedupeSeconds\":%u,\"retryDelayMs\":%u,"
                    "\"deadLetter\":",
                    o->max_length, (unsigned long long)o->max_bytes,
                    o->drop_oldest ? "dropOldest" : "reject", o->window_ms,
                    o->window_count, o->ttl_s, o->lease_s, o->retry_limit,
                    o->dedupe_s, o->retry_delay_ms);
    if (o->dead_letter != NULL && o->dl_len > 0)
        http_buf_append_json_str(b, o->dead_letter, o->dl_len);
    else
        http_buf_append_str(b, "null");
    http_buf_printf(b, ",\"deadLetterExpired\":%s,\"conflate\":%s}",
                    o->dl_expired ? "true" : "false",
                    o->conflate ? "true" : "false");
}
