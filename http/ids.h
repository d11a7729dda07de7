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

/* http_id_format - append the id as raw text.  0 or -ENOMEM. */
int http_id_format(struct http_buf *b, uint64_t incarnation, const char *part,
                   size_t plen, uint64_t seq);

/* http_id_format_json - append the id as a JSON string (quoted, the
 * partition escaped).  0 or -ENOMEM. */
int http_id_format_json(struct http_buf *b, uint64_t incarnation,
                        const char *part, size_t plen, uint64_t seq);

/*
 * http_id_parse - split id[0..len): "e:", 1-16 hex digits, ':', a
 * non-empty partition (pointer into id), ':', 1-20 decimal digits that fit
 * in 64 bits.  0, or -EINVAL for anything else.
 */
int http_id_parse(const char *id, size_t len, uint64_t *incarnation,
                  const char **part, size_t *plen, uint64_t *seq);

#endif
