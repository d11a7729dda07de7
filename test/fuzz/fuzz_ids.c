/*
 * fuzz_ids.c - message ids (http/ids.c): what http_id_parse() accepts
 * written again in SPEC §2's form (raw_id, here) parses to the same parts,
 * and, when its partition is a valid name, the id's JSON form is valid
 * JSON that reads back as that raw id.
 */
#include "http/buf.h"
#include "http/ids.h"
#include "http/json_scan.h"
#include "http/names.h"
#include "test/fuzz/fuzz.h"

/* raw_id - "e:<16 hex>:<partition>:<seq>" into b (the partition's bytes
 * as they are, NUL included). */
static void
raw_id(struct http_buf *b, uint64_t inc, const char *part, size_t plen,
       uint64_t seq)
{
    char head[24], tail[24];

    snprintf(head, sizeof(head), "e:%016llx:", (unsigned long long)inc);
    snprintf(tail, sizeof(tail), ":%llu", (unsigned long long)seq);
    FUZZ_CHECK(http_buf_append(b, head, strlen(head)) == 0 &&
                   http_buf_append(b, part, plen) == 0 &&
                   http_buf_append(b, tail, strlen(tail)) == 0,
               "oom");
}

/* check_json - the id's JSON string is valid and reads as its raw text. */
static void
check_json(const struct http_buf *raw, uint64_t inc, const char *part,
           size_t plen, uint64_t seq)
{
    struct http_buf b;
    struct http_json j;
    size_t n;
    char *text;

    http_buf_init(&b);
    FUZZ_CHECK(http_id_format_json(&b, inc, part, plen, seq) == 0, "oom");
    FUZZ_CHECK(http_json_valid(b.data, b.len), "not JSON: %s", b.data);
    text = malloc(b.len);
    FUZZ_CHECK(text != NULL, "out of memory");
    http_json_init(&j, b.data, b.len);
    FUZZ_CHECK(http_json_string(&j, text, &n) == 0, "not a string");
    FUZZ_CHECK(n == raw->len && memcmp(text, raw->data, n) == 0,
               "JSON id reads otherwise");
    free(text);
    http_buf_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t inc, seq, inc2, seq2;
    const char *part, *part2;
    size_t plen, plen2;
    struct http_buf b;

    if (http_id_parse((const char *)data, size, &inc, &part, &plen, &seq) != 0)
        return 0;
    FUZZ_CHECK(plen > 0 && part >= (const char *)data &&
                   part + plen <= (const char *)data + size,
               "partition outside the id");
    http_buf_init(&b);
    raw_id(&b, inc, part, plen, seq);
    FUZZ_CHECK(http_id_parse(b.data, b.len, &inc2, &part2, &plen2, &seq2) == 0,
               "formatted id refused: %s", b.data);
    FUZZ_CHECK(inc == inc2 && seq == seq2 && plen == plen2 &&
                   memcmp(part, part2, plen) == 0,
               "formatted id reads otherwise: %s", b.data);
    if (http_name_valid(part, plen))
        check_json(&b, inc, part, plen, seq);
    http_buf_free(&b);
    return 0;
}
