/*
 * ids.c - formatting and parsing message ids
 * "e:<incarnation, 16 hex>:<partition>:<seq, decimal>".  No state.
 */
#include "http/ids.h"

#include <errno.h>
#include <string.h>

#include "http/buf.h"

/* id_head - "e:" and the incarnation as 16 lower-case hex digits plus ':'
 * at o (19 bytes); returns the end. */
static char *
id_head(char *o, uint64_t incarnation)
{
    o[0] = 'e';
    o[1] = ':';
    o = http_put_hex16(o + 2, incarnation);
    *o++ = ':';
    return o;
}

/* http_id_put_prefix - '"', the head, the escaped partition, ':'. */
char *
http_id_put_prefix(char *o, uint64_t incarnation, const char *part, size_t plen)
{
    *o++ = '"';
    o = id_head(o, incarnation);
    o = http_put_json_esc(o, part, plen);
    *o++ = ':';
    return o;
}

/* http_id_put_seq - the decimal sequence and the closing quote. */
char *
http_id_put_seq(char *o, uint64_t seq)
{
    o = http_put_u64(o, seq);
    *o++ = '"';
    return o;
}

/* http_id_put_run - see ids.h. */
char *
http_id_put_run(char *o, uint64_t incarnation, const char *part, size_t plen,
                uint64_t first, uint32_t n)
{
    char *id = o, *digits, *d;

    digits = http_id_put_prefix(o, incarnation, part, plen);
    o = http_id_put_seq(digits, first);
    for (uint32_t i = 1; i < n; i++) {
        size_t len = (size_t)(o - id), head = (size_t)(digits - id);

        *o++ = ',';
        memcpy(o, id, len);
        id = o;
        digits = o + head;
        o += len;
        /* o[-1] is the closing quote: count up from the last digit. */
        for (d = o - 2; d >= digits && *d == '9'; d--)
            *d = '0';
        if (d >= digits)
            (*d)++;
        else /* all nines: one digit more (or a wrap past 2^64 - 1) */
            o = http_id_put_seq(digits, first + i);
    }
    return o;
}

/* http_id_format_json - the id as a JSON string: only the partition can
 * need escapes. */
int
http_id_format_json(struct http_buf *b, uint64_t incarnation, const char *part,
                    size_t plen, uint64_t seq)
{
    size_t esc_len = http_json_esc_len(part, plen);
    char *o;

    if (http_buf_reserve(b, HTTP_ID_PREFIX_LEN(esc_len) + HTTP_ID_SEQ_MAX) != 0)
        return -ENOMEM;
    o = http_id_put_prefix(http_buf_tail(b), incarnation, part, plen);
    http_buf_commit(b, http_id_put_seq(o, seq));
    return 0;
}

/* hex_digit - each hex digit's value + 1, 0 for any other byte: every id an
 * ack names goes through here, so one load a digit, not a call. */
static const unsigned char hex_digit[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
    ['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
    ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16, ['A'] = 11, ['B'] = 12,
    ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* http_id_parse - incarnation from the front, sequence from the back; what
 * is left between the two ':' is the partition. */
int
http_id_parse(const char *id, size_t len, uint64_t *incarnation,
              const char **part, size_t *plen, uint64_t *seq)
{
    uint64_t inc = 0, s = 0;
    size_t i, d, p;
    unsigned v;

    if (len < 2 || id[0] != 'e' || id[1] != ':')
        return -EINVAL;
    for (i = 2; i < len && (v = hex_digit[(unsigned char)id[i]]) != 0; i++) {
        if (i - 2 == 16)
            return -EINVAL;
        inc = inc << 4 | (uint64_t)(v - 1);
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
