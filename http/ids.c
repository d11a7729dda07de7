/*
 * ids.c - formatting and parsing message ids
 * "e:<incarnation, 16 hex>:<partition>:<seq, decimal>".  No state.
 */
#include "http/ids.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "http/buf.h"

/* id_head - "e:" and the incarnation as 16 lower-case hex digits plus ':'. */
static int
id_head(struct http_buf *b, uint64_t incarnation)
{
    char head[24];

    snprintf(head, sizeof(head), "e:%016" PRIx64 ":", incarnation);
    return http_buf_append(b, head, 19);
}

/* http_id_format - the raw id text. */
int
http_id_format(struct http_buf *b, uint64_t incarnation, const char *part,
               size_t plen, uint64_t seq)
{
    id_head(b, incarnation);
    http_buf_append(b, part, plen);
    http_buf_append(b, ":", 1);
    return http_buf_append_u64(b, seq);
}

/* http_id_format_json - the id as a JSON string: only the partition can
 * need escapes. */
int
http_id_format_json(struct http_buf *b, uint64_t incarnation, const char *part,
                    size_t plen, uint64_t seq)
{
    http_buf_append(b, "\"", 1);
    id_head(b, incarnation);
    http_buf_append_json_esc(b, part, plen);
    http_buf_append(b, ":", 1);
    http_buf_append_u64(b, seq);
    return http_buf_append(b, "\"", 1);
}

/* hex_val - value of a hex digit, or -1. */
static int
hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* http_id_parse - incarnation from the front, sequence from the back; what
 * is left between the two ':' is the partition. */
int
http_id_parse(const char *id, size_t len, uint64_t *incarnation,
              const char **part, size_t *plen, uint64_t *seq)
{
    uint64_t inc = 0, s = 0;
    size_t i, d, p;
    int v;

    if (len < 2 || id[0] != 'e' || id[1] != ':')
        return -EINVAL;
    for (i = 2; i < len && (v = hex_val(id[i])) >= 0; i++) {
        if (i - 2 == 16)
            return -EINVAL;
        inc = inc << 4 | (uint64_t)v;
    }
    if (i == 2 || i == len || id[i] != ':')
        return -EINVAL;
    i++;
    for (d = len; d > i && id[d - 1] >= '0' && id[d - 1] <= '9'; d--)
        ;
    if (d == len || d <= i + 1 || id[d - 1] != ':')
        return -EINVAL;
    for (p = d; p < len; p++) {
        uint64_t digit = (uint64_t)(id[p] - '0');

        if (s > (UINT64_MAX - digit) / 10)
            return -EINVAL;
        s = s * 10 + digit;
    }
    *incarnation = inc;
    *part = id + i;
    *plen = d - 1 - i;
    *seq = s;
    return 0;
}
