/*
 * pop_format.c - see pop_format.h.
 *
 * A first walk over the sink sizes the reply so it is reserved once; the
 * second writes it through a raw pointer.  Consecutive messages of one
 * partition (the usual batch) share the id prefix and the escaped
 * partition name: both are escaped once per run and copied from the
 * previous message's id; a sequence one past the previous one is that
 * id's digits plus one, counted in place.  The walks step over the sink's
 * records themselves (broker.h's layout), and the second compares
 * partition names only when the first found more than one.
 */
#include "worker/pop_format.h"

#include <string.h>

#include "http/buf.h"
#include "http/ids.h"
#include "worker/authz.h"

/* next - the record after m in sink (broker.h: the next one starts at
 * the following 8-byte boundary), or NULL; m NULL: the first. */
static inline const struct shm_popped *
next(const struct shm_sink *sink, const struct shm_popped *m)
{
    const unsigned char *r =
        m == NULL ? sink->buf
                  : (const unsigned char *)m +
                        ((sizeof(*m) + m->part_len + m->len + 7) & ~(size_t)7);

    return r < sink->buf + sink->used ? (const struct shm_popped *)r : NULL;
}

/* seq_after - the id prev_id (len bytes: its prefix, then the sequence's
 * digits from digits on, then '"') of the message before, whose sequence
 * was one less, copied to o with the digits counted up by one; NULL when
 * a carry would need another digit (all nines). */
static char *
seq_after(char *o, const char *prev_id, size_t len, size_t digits)
{
    char *d = o + len - 2; /* the last digit */

    memcpy(o, prev_id, len);
    while (*d == '9') {
        if (d == o + digits)
            return NULL;
        *d-- = '0';
    }
    (*d)++;
    return o + len;
}

/* pop_format - see pop_format.h. */
void
pop_format(struct http_buf *b, const struct shm_sink *sink,
           struct shm_name queue, uint64_t incarnation)
{
    static const char id_key[] = "{\"id\":", part_key[] = ",\"partition\":\"",
                      payload_key[] = "\",\"payload\":",
                      attempts_key[] = ",\"attempts\":",
                      reply_key[] = ",\"replyTo\":\"";
    const size_t fixed = sizeof(id_key) + sizeof(part_key) +
                         sizeof(payload_key) + sizeof(attempts_key) +
                         HTTP_ID_SEQ_MAX + HTTP_PUT_U64_MAX + 1;
    const struct shm_popped *m = NULL;
    const char *run_part = NULL, *prev_id = NULL;
    size_t need, esc_len = 0, prefix_len = 0, run_len = 0, id_len = 0;
    uint64_t prev_seq = 0;
    int runs = 0;
    char *o;

    struct shm_name shown = worker_client_name(queue);

    need = sizeof("{\"queue\":,\"messages\":[]}") + 2 +
           http_json_esc_len(shown.ptr, shown.len);
    while ((m = next(sink, m)) != NULL) {
        const char *part = (const char *)(m + 1);

        if (run_part == NULL || m->part_len != run_len ||
            memcmp(part, run_part, run_len) != 0) {
            run_part = part;
            run_len = m->part_len;
            esc_len = http_json_esc_len(part, run_len);
            runs++;
        }
        need += fixed + HTTP_ID_PREFIX_LEN(esc_len) + esc_len + m->len;
        if (m->reply_len > 0) { /* a request: its inbox beside the payload */
            struct shm_name to = worker_client_name(
                (struct shm_name){part + m->part_len, m->reply_len});
            need += sizeof(reply_key) + 1 + http_json_esc_len(to.ptr, to.len);
        }
    }
    if (http_buf_reserve(b, need) != 0)
        return; /* oom: http_reply answers 500 */
    o = http_buf_tail(b);
    memcpy(o, "{\"queue\":\"", 10);
    o = http_put_json_esc(o + 10, shown.ptr, shown.len);
    memcpy(o, "\",\"messages\":[", 14);
    o += 14;
    run_part = NULL;
    while ((m = next(sink, m)) != NULL) {
        const char *part = (const char *)(m + 1);
        const char *payload = part + m->part_len;
        char *id, *end;

        if (prev_id != NULL)
            *o++ = ',';
        memcpy(o, id_key, sizeof(id_key) - 1);
        o += sizeof(id_key) - 1;
        id = o;
        if (run_part == NULL ||
            (runs > 1 && (m->part_len != run_len ||
                          memcmp(part, run_part, run_len) != 0))) {
            run_part = part;
            run_len = m->part_len;
            o = http_id_put_prefix(o, incarnation, part, run_len);
            prefix_len = (size_t)(o - id);
            o = http_id_put_seq(o, m->seq);
        } else if (m->seq == prev_seq + 1 &&
                   (end = seq_after(o, prev_id, id_len, prefix_len)) != NULL) {
            o = end;
        } else {
            memcpy(o, prev_id, prefix_len);
            o = http_id_put_seq(o + prefix_len, m->seq);
        }
        prev_id = id;
        prev_seq = m->seq;
        id_len = (size_t)(o - id);
        memcpy(o, part_key, sizeof(part_key) - 1);
        o += sizeof(part_key) - 1;
        /* the escaped partition, as the id's prefix holds it */
        memcpy(o, prev_id + HTTP_ID_PREFIX_HEAD,
               prefix_len - HTTP_ID_PREFIX_LEN(0));
        o += prefix_len - HTTP_ID_PREFIX_LEN(0);
        memcpy(o, payload_key, sizeof(payload_key) - 1);
        o += sizeof(payload_key) - 1;
        memcpy(o, payload + m->reply_len, m->len - m->reply_len);
        o += m->len - m->reply_len;
        if (m->reply_len > 0) { /* as its requester's tenant knows it */
            struct shm_name to =
                worker_client_name((struct shm_name){payload, m->reply_len});
            memcpy(o, reply_key, sizeof(reply_key) - 1);
            o = http_put_json_esc(o + sizeof(reply_key) - 1, to.ptr, to.len);
            *o++ = '"';
        }
        memcpy(o, attempts_key, sizeof(attempts_key) - 1);
        o += sizeof(attempts_key) - 1;
        if (m->attempts < 10) /* nearly always: a first delivery */
            *o++ = (char)('0' + m->attempts);
        else
            o = http_put_u64(o, m->attempts);
        *o++ = '}';
    }
    *o++ = ']';
    *o++ = '}';
    http_buf_commit(b, o);
}
