/*
 * fuzz_extend.c - the extend body (http/parse_extend.c, json-c): no crash,
 * no leak, the batch and lease bounds kept, a readable refusal.
 */
#include "http/parse.h"
#include "test/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_extend e;
    struct http_error err = {0};
    int rc = http_parse_extend((const char *)data, size, &e, &err);

    if (rc != 0) {
        fuzz_check_refusal(rc, &err);
        return 0;
    }
    FUZZ_CHECK(e.n <= HTTP_BATCH_MAX, "%u entries", e.n);
    for (uint32_t i = 0; i < e.n; i++)
        FUZZ_CHECK(e.entries[i].seconds <= HTTP_LEASE_MAX_S, "entry %u: %u s",
                   i, e.entries[i].seconds);
    http_extend_free(&e);
    return 0;
}
