/*
 * ids.h - message ids: "e:<incarnation, 16 hex digits>:<partition>:<seq>"
 * (SPEC §2).  The partition may contain ':', so parsing takes the
 * incarnation from the front and the sequence from the back.
 * Pure functions, no locking.
 */
#ifndef MAYFLY_HTTP_IDS_H
#define MAYFLY_HTTP_IDS_H

#include <stddef.h>
#include <stdint.h>

struct http_buf;

/* http_id_format_json - append the id as a JSON string (quoted, the
 * partition escaped).  0 or -ENOMEM. */
int http_id_format_json(struct http_buf *b, uint64_t incarnation,
                        const char *part, size_t plen, uint64_t seq);

/*
 * Replies that carry many ids of one partition write the part they share
 * once and copy it per id: the prefix '"e:<16 hex>:<escaped partition>:'
 * takes HTTP_ID_PREFIX_LEN(esc_len) bytes, where esc_len is
 * http_json_esc_len() of the partition, which starts HTTP_ID_PREFIX_HEAD
 * bytes in; an id after it adds at most
 * HTTP_ID_SEQ_MAX bytes (the sequence and the closing quote).
 */
#define HTTP_ID_PREFIX_HEAD         (1 + 2 + 16 + 1) /* '"e:<16 hex>:' */
#define HTTP_ID_PREFIX_LEN(esc_len) (HTTP_ID_PREFIX_HEAD + (esc_len) + 1)
#define HTTP_ID_SEQ_MAX             (20 + 1)

/*
 * http_id_put_prefix - write the JSON prefix of the partition's ids at o
 * (room for HTTP_ID_PREFIX_LEN(http_json_esc_len(part, plen)) bytes);
 * returns the end.  Cannot fail.
 */
char *http_id_put_prefix(char *o, uint64_t incarnation, const char *part,
                         size_t plen);

/* http_id_put_seq - finish an id after its prefix: the sequence and the
 * closing quote (at most HTTP_ID_SEQ_MAX bytes); returns the end. */
char *http_id_put_seq(char *o, uint64_t seq);

/*
 * http_id_put_run - n >= 1 ids of one partition with the sequences first,
 * first + 1, ..., comma-separated, at o (room for n times
 * HTTP_ID_PREFIX_LEN + HTTP_ID_SEQ_MAX + 1 bytes); returns the end.  Each
 * id after the first is the one before copied and its decimal sequence
 * counted up in place, which is cheaper than formatting it again.
 */
char *http_id_put_run(char *o, uint64_t incarnation, const char *part,
                      size_t plen, uint64_t first, uint32_t n);

/*
 * http_id_parse - split id[0..len): "e:", 1-16 hex digits, ':', a
 * non-empty partition (pointer into id), ':', 1-20 decimal digits that fit
 * in 64 bits.  0, or -EINVAL for anything else.
 */
int http_id_parse(const char *id, size_t len, uint64_t *incarnation,
                  const char **part, size_t *plen, uint64_t *seq);

#endif
