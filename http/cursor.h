/*
 * cursor.h - a stream's cursor (SPEC §11, DESIGN.md §4): the opaque text a
 * stream gives as each event's id, and takes back in Last-Event-ID.
 *
 * It names, for each owner incarnation whose partitions the stream reads,
 * a watermark W: every message of those partitions that owner held with
 * a sequence <= W was delivered (sequences come from one counter a node,
 * so one number covers all of its partitions), and, per partition
 * subscription in the order the request lists them, which of those owners
 * it was read on.  A hash of the subscription list ties it to its URL.
 *
 * Text: "1" (the form's version) and base64url, no padding, of
 *   u32   hash of the subscription list (big-endian)
 *   u8    n owners (0..HTTP_CURSOR_OWNERS)
 *   n x   u64 incarnation (big-endian), varint W (LEB128, shortest form)
 *   varint n partition subscriptions
 *   (n + 1) / 2 bytes: a nibble each, the owner's index (high nibble
 *         first; HTTP_CURSOR_NONE: none), an odd count padded with 0xF
 * at most HTTP_CURSOR_MAX characters.  Decoding is strict (the alphabet,
 * no stray bits, shortest varints, the pad), so encoding a decoded cursor
 * gives back its text.  Pure functions, no allocation, no locking.
 */
#ifndef MAYFLY_HTTP_CURSOR_H
#define MAYFLY_HTTP_CURSOR_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_CURSOR_MAX    512         /* characters of text, at most */
#define HTTP_CURSOR_OWNERS 15          /* owners a cursor names, at most */
#define HTTP_CURSOR_NONE   15          /* a subscription on no owner it names */
#define HTTP_CURSOR_PARTS  768         /* nibbles the longest text can hold */
#define HTTP_CURSOR_SEED   2166136261u /* http_cursor_hash's start */

struct http_cursor {
    uint32_t hash; /* of the subscription list (http_cursor_hash) */
    unsigned nowners;
    uint64_t inc[HTTP_CURSOR_OWNERS]; /* each owner's incarnation */
    uint64_t w[HTTP_CURSOR_OWNERS];   /* and watermark */
    unsigned nparts;                  /* partition subscriptions */
    uint8_t owner[HTTP_CURSOR_PARTS]; /* an index into inc, or _NONE */
};

/* http_cursor_hash - FNV-1a over p[0..n), continuing from h (start with
 * HTTP_CURSOR_SEED).  Not a secret: it only tells one list from another. */
uint32_t http_cursor_hash(uint32_t h, const void *p, size_t n);

/*
 * http_cursor_encode - c's text into out (room for HTTP_CURSOR_MAX + 1
 * bytes, NUL-terminated).  Returns its length, or -EINVAL (more owners or
 * parts than the form holds, an owner index past nowners), -ENOSPC (past
 * HTTP_CURSOR_MAX: the caller names fewer owners).
 */
int http_cursor_encode(const struct http_cursor *c, char *out);

/* http_cursor_decode - the cursor text s[0..len) into *c.  0, or -EINVAL
 * for anything encode would not have written. */
int http_cursor_decode(const char *s, size_t len, struct http_cursor *c);

#endif
