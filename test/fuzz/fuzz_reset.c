/*
 * fuzz_reset.c - the reset body (http/parse_reset.c, json-c): no crash, no
 * leak, the queue name inside the parser's own memory, a readable refusal.
 */
#include "http/parse.h"
#include "test/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_reset r;
    struct http_error err = {0};
    int rc = http_parse_reset((const char *)data, size, &r, &err);

    if (rc != 0) {
        fuzz_check_refusal(rc, &err);
        return 0;
    }
    FUZZ_CHECK(r.queue.ptr != NULL && r.queue.len <= size, "queue of %zu bytes",
               r.queue.len);
    http_reset_free(&r);
    return 0;
}
