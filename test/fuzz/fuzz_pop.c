/*
 * fuzz_pop.c - the body of POST pop (http/parse_pop.c over the ack
 * parser, SPEC §14): never reads outside the body, accepts only what
 * json-c reads as JSON, keeps batch, timeout and the acks in their
 * bounds, and refuses with a readable 400.
 */
#include <json-c/json.h>

#include "http/parse.h"
#include "test/fuzz/fuzz.h"
#include "test/http/oracle.h"

#define MAX_WAIT_MS 60000

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct http_pop p;
    struct http_error err = {0};
    int rc = http_parse_pop(body, size, MAX_WAIT_MS, &p, &err), jc;

    if (rc != 0) {
        fuzz_check_refusal(rc, &err);
        return 0;
    }
    json_object_put(oracle_jc_parse(body, size, &jc));
    FUZZ_CHECK(jc, "pop accepted, json-c says it is not JSON: %.*s", (int)size,
               body);
    FUZZ_CHECK(p.batch >= 1 && p.batch <= HTTP_BATCH_MAX, "batch %u", p.batch);
    FUZZ_CHECK(p.timeout <= MAX_WAIT_MS, "timeout %u", p.timeout);
    FUZZ_CHECK(p.ack.n <= HTTP_BATCH_MAX, "%u acks", p.ack.n);
    FUZZ_CHECK(!p.has_partition || p.partition.len <= size,
               "partition longer than the body");
    for (uint32_t i = 0; i < p.ack.n; i++)
        FUZZ_CHECK(p.ack.entries[i].id.len <= size,
                   "entry %u longer than the body", i);
    http_pop_free(&p);
    return 0;
}
