/*
 * sse.c - see sse.h: the text/event-stream lines of a stream.
 *
 * A message's event is sized first and written through a raw pointer, as
 * a pop's answer is (http/buf.h): it is the hot one.
 */
#include "http/sse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http/buf.h"
#include "http/ids.h"

/* put_line_data - p[0..n) at o with each CR and LF as a space; the end. */
static char *
put_line_data(char *o, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        *o++ = p[i] == '\n' || p[i] == '\r' ? ' ' : p[i];
    return o;
}

/* put_str - the literal s at o; the end. */
static char *
put_str(char *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

#define PUT(o, lit) put_str(o, lit, sizeof(lit) - 1)

/* http_sse_event - see sse.h. */
int
http_sse_event(struct http_buf *b, const char *id, const char *event,
               const char *data, size_t len)
{
    size_t il = id != NULL ? strlen(id) : 0, el = strlen(event);
    char *o;

    if (http_buf_reserve(b, il + el + len + 32) != 0)
        return -ENOMEM;
    o = http_buf_tail(b);
    if (id != NULL) {
        o = PUT(o, "id: ");
        o = put_str(o, id, il);
        *o++ = '\n';
    }
    o = PUT(o, "event: ");
    o = put_str(o, event, el);
    o = PUT(o, "\ndata: ");
    o = put_line_data(o, data, len);
    o = PUT(o, "\n\n");
    http_buf_commit(b, o);
    return 0;
}

/* http_sse_message - see sse.h. */
int
http_sse_message(struct http_buf *b, const char *id,
                 const struct http_sse_msg *m)
{
    static const char head[] = "event: message\ndata: {\"queue\":\"",
                      part_key[] = "\",\"partition\":\"",
                      id_key[] = "\",\"id\":", payload_key[] = ",\"payload\":",
                      reply_key[] = ",\"replyTo\":\"";
    size_t il = strlen(id), ql = http_json_esc_len(m->queue, m->queue_len),
           pl = http_json_esc_len(m->part, m->part_len),
           rl = m->reply_to != NULL
                    ? http_json_esc_len(m->reply_to, m->reply_len)
                    : 0;
    size_t need = 4 + il + 1 + sizeof(head) + ql + sizeof(part_key) + pl +
                  sizeof(id_key) + HTTP_ID_PREFIX_LEN(pl) + HTTP_ID_SEQ_MAX +
                  sizeof(payload_key) + m->payload_len + sizeof(reply_key) +
                  rl + 8;
    char *o;

    if (http_buf_reserve(b, need) != 0)
        return -ENOMEM;
    o = http_buf_tail(b);
    o = PUT(o, "id: ");
    o = put_str(o, id, il);
    *o++ = '\n';
    o = PUT(o, head);
    o = http_put_json_esc(o, m->queue, m->queue_len);
    o = PUT(o, part_key);
    o = http_put_json_esc(o, m->part, m->part_len);
    o = PUT(o, id_key);
    o = http_id_put_prefix(o, m->incarnation, m->part, m->part_len);
    o = http_id_put_seq(o, m->seq);
    o = PUT(o, payload_key);
    o = put_line_data(o, m->payload, m->payload_len);
    if (m->reply_to != NULL) {
        o = PUT(o, reply_key);
        o = http_put_json_esc(o, m->reply_to, m->reply_len);
        *o++ = '"';
    }
    o = PUT(o, "}\n\n");
    http_buf_commit(b, o);
    return 0;
}

/* http_sse_comment - see sse.h. */
int
http_sse_comment(struct http_buf *b, const char *text)
{
    return http_buf_printf(b, ": %s\n\n", text);
}

/* http_sse_retry - see sse.h. */
int
http_sse_retry(struct http_buf *b, unsigned ms)
{
    return http_buf_printf(b, "retry: %u\n\n", ms);
}
