/*
 * fuzz_ack.c - the ack body (http/parse_ack.c on the json_scan scanner):
 * never reads outside the body, accepts only what json-c reads as JSON,
 * keeps the batch bound, and refuses with a readable 400.
 */
#include <json-c/json.h>

#include "http/parse.h"
#include "test/fuzz/fuzz.h"
#include "test/http/oracle.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct http_ack a;
    struct http_error err = {0};
    int rc = http_parse_ack(body, size, &a, &err), jc;

    if (rc != 0) {
        fuzz_check_refusal(rc, &err);
        return 0;
    }
    json_object_put(oracle_jc_parse(body, size, &jc));
    FUZZ_CHECK(jc, "ack accepted, json-c says it is not JSON: %.*s", (int)size,
               body);
    FUZZ_CHECK(a.n <= HTTP_BATCH_MAX, "%u entries", a.n);
    for (uint32_t i = 0; i < a.n; i++)
        FUZZ_CHECK(a.entries[i].id.len <= size, "entry %u longer than the body",
                   i);
    http_ack_free(&a);
    return 0;
}
