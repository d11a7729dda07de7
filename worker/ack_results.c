/*
 * ack_results.c - see ack_results.h.
 */
#include "worker/ack_results.h"

#include <errno.h>
#include <string.h>

#include "http/buf.h"
#include "http/parse.h"
#include "http/reply.h"
#include "shm/broker.h"

/* outcome_text - what follows an entry's id: the outcome (and the drop)
 * as JSON text, up to the entry's closing brace (ack_results_outcome()
 * reads them back). */
static const char *
outcome_text(uint32_t o)
{
    switch (o) {
    case SHM_OUT_ACKED:
        return ",\"outcome\":\"acked\"}";
    case SHM_OUT_ACKED_DROPPED:
        return ",\"outcome\":\"acked\",\"dropped\":true}";
    case SHM_OUT_REDELIVERED:
        return ",\"outcome\":\"redelivered\"}";
    case SHM_OUT_STALE:
        return ",\"outcome\":\"stale\"}";
    case SHM_OUT_EXTENDED:
        return ",\"outcome\":\"extended\"}";
    default:
        return ",\"outcome\":\"unknown\"}";
    }
}

/* The longest outcome_text(). */
#define OUTCOME_MAX sizeof(",\"outcome\":\"acked\",\"dropped\":true}")

/* The longest ",\"count\":N" a cumulative ack adds. */
#define COUNT_MAX (sizeof(",\"count\":") + HTTP_PUT_U64_MAX)

/*
 * ack_results_format - see ack_results.h.  The answer is sized first (each
 * id's escaped length) so that it is reserved once.
 */
int
ack_results_format(struct http_buf *b, const struct http_str *ids,
                   size_t stride, const struct shm_ack *acks, uint32_t n,
                   const char *const *extra)
{
    static const char head[] = "{\"results\":[", id_key[] = "{\"id\":\"",
                      count_key[] = ",\"count\":";
    size_t need = sizeof(head) + 2;
    char *o;

    for (uint32_t i = 0; i < n; i++) {
        const struct http_str *id =
            (const struct http_str *)((const char *)ids + i * stride);
        need += sizeof(id_key) + 2 + http_json_esc_len(id->ptr, id->len) +
                OUTCOME_MAX + COUNT_MAX;
        if (extra != NULL && extra[i] != NULL)
            need += strlen(extra[i]);
    }
    if (http_buf_reserve(b, need) != 0)
        return -ENOMEM;
    o = http_buf_tail(b);
    memcpy(o, head, sizeof(head) - 1);
    o += sizeof(head) - 1;
    for (uint32_t i = 0; i < n; i++) {
        const struct http_str *id =
            (const struct http_str *)((const char *)ids + i * stride);
        const char *text = outcome_text(acks[i].outcome);
        size_t tlen = strlen(text);

        if (i)
            *o++ = ',';
        memcpy(o, id_key, sizeof(id_key) - 1);
        o = http_put_json_esc(o + sizeof(id_key) - 1, id->ptr, id->len);
        *o++ = '"';
        /* before the object's closing brace: the count, then extra */
        memcpy(o, text, tlen - 1);
        o += tlen - 1;
        if (acks[i].status == SHM_ACK_UPTO) {
            memcpy(o, count_key, sizeof(count_key) - 1);
            o = http_put_u64(o + sizeof(count_key) - 1, acks[i].count);
        }
        if (extra != NULL && extra[i] != NULL) {
            memcpy(o, extra[i], strlen(extra[i]));
            o += strlen(extra[i]);
        }
        *o++ = '}';
    }
    *o++ = ']';
    *o++ = '}';
    http_buf_commit(b, o);
    return 0;
}

/* ack_results_reply - see ack_results.h. */
void
ack_results_reply(struct http_request *req, const struct http_str *ids,
                  size_t stride, const struct shm_ack *acks, uint32_t n,
                  const char *const *extra)
{
    struct http_buf b = {0};

    ack_results_format(&b, ids, stride, acks, n, extra);
    http_reply(req, 200, &b); /* oom: answered 500 */
}

/* ack_results_outcome - see ack_results.h. */
int
ack_results_outcome(const char *s, int dropped)
{
    if (s == NULL)
        return -1;
    if (strcmp(s, "acked") == 0)
        return dropped ? SHM_OUT_ACKED_DROPPED : SHM_OUT_ACKED;
    if (strcmp(s, "redelivered") == 0)
        return SHM_OUT_REDELIVERED;
    if (strcmp(s, "stale") == 0)
        return SHM_OUT_STALE;
    if (strcmp(s, "extended") == 0)
        return SHM_OUT_EXTENDED;
    if (strcmp(s, "unknown") == 0)
        return SHM_OUT_UNKNOWN;
    return -1;
}
