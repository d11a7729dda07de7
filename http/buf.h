/*
 * buf.h - a growable byte buffer for building reply bodies.
 *
 * Appends never fail loudly: on allocation failure the buffer keeps what it
 * had, sets b->oom and ignores later appends, so a builder checks once at
 * the end (http_reply() answers 500 internal for an oom buffer).  Every
 * append also returns 0 or -ENOMEM for callers that want to stop early.
 * Not thread-safe; no locking.  A zeroed struct is an empty buffer.
 *
 * Hot replies (push ids, pop messages, ack results) know their size before
 * they write: they reserve once, then write through a raw pointer with the
 * http_put_* writers (no bounds check per field) and commit the
 * end.  The HTTP_PUT_*_MAX bounds say how much room each writer needs.
 */
#ifndef MAYFLY_HTTP_BUF_H
#define MAYFLY_HTTP_BUF_H

#include <stddef.h>
#include <stdint.h>

struct http_buf {
    char *data; /* NUL-terminated when len > 0; owned */
    size_t len;
    size_t cap;
    int oom; /* an append failed; contents are incomplete */
};

/* http_buf_init - an empty buffer (same as zeroing it).  Cannot fail. */
void http_buf_init(struct http_buf *b);

/* http_buf_free - release the bytes; b is empty and reusable after. */
void http_buf_free(struct http_buf *b);

/* http_buf_reserve - make room for extra more bytes.  0 or -ENOMEM. */
int http_buf_reserve(struct http_buf *b, size_t extra);

/* http_buf_append - append n raw bytes.  0 or -ENOMEM. */
int http_buf_append(struct http_buf *b, const void *p, size_t n);

/* http_buf_append_str - append a NUL-terminated string, raw.  0/-ENOMEM. */
int http_buf_append_str(struct http_buf *b, const char *s);

/* http_buf_append_json_strs - append s[0..n) (NUL-terminated) as a JSON
 * array of strings.  0/-ENOMEM. */
int http_buf_append_json_strs(struct http_buf *b, const char *const *s, int n);

/*
 * http_buf_append_json_str - append p[0..n) as a JSON string with its
 * quotes: '"' '\\' and C0 controls escaped (\n \t ... or \u00XX), DEL too.
 * Bytes >= 0x80 are copied as they are: the caller passes valid UTF-8
 * (names are validated; payloads never go through here).  0 or -ENOMEM.
 */
int http_buf_append_json_str(struct http_buf *b, const char *p, size_t n);

/* http_buf_append_u64 / _i64 - append a decimal integer.  0 or -ENOMEM. */
int http_buf_append_u64(struct http_buf *b, uint64_t v);
int http_buf_append_i64(struct http_buf *b, int64_t v);

/*
 * http_buf_tail - where the next byte goes, for raw writes after a
 * successful http_buf_reserve(b, n) (at most n bytes).  Cannot fail.
 */
static inline char *
http_buf_tail(struct http_buf *b)
{
    return b->data + b->len;
}

/*
 * http_buf_commit - the raw writes end at end (between http_buf_tail() and
 * the room reserved): take them into len and keep the NUL.  Cannot fail.
 */
static inline void
http_buf_commit(struct http_buf *b, char *end)
{
    b->len = (size_t)(end - b->data);
    b->data[b->len] = '\0';
}

/* Most bytes http_put_u64 writes (UINT64_MAX has 20 digits). */
#define HTTP_PUT_U64_MAX 20

/* http_put_u64 - write v in decimal at o; returns the end.  Cannot fail. */
char *http_put_u64(char *o, uint64_t v);

/* http_hex_value - the value of hex digit c (either case), or -1. */
int http_hex_value(char c);

/* http_put_hex16 - write v as 16 lower-case hex digits at o; returns the
 * end.  Cannot fail. */
char *http_put_hex16(char *o, uint64_t v);

/*
 * http_json_esc_len - how many bytes http_put_json_esc writes for
 * p[0..n): 1 per plain byte, 2 per short escape, 6 per \u00XX.
 */
size_t http_json_esc_len(const char *p, size_t n);

/*
 * http_put_json_esc - write p[0..n) escaped for the inside of a JSON
 * string (the rules of http_buf_append_json_str, no quotes) at o; returns
 * the end, o + http_json_esc_len(p, n).  Cannot fail.
 */
char *http_put_json_esc(char *o, const char *p, size_t n);

/* http_buf_printf - append formatted text.  0 or -ENOMEM. */
int http_buf_printf(struct http_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
