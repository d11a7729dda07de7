/*
 * fuzz_push.c - the push scanner (http/json_scan.c, http/parse_push.c)
 * against json-c: the scanner accepts a document exactly when json-c does
 * (but where json-c is laxer than RFC 8259), and http_parse_push() accepts
 * a push body exactly when json-c reads one, with the same names and payload
 * spans that re-parse to json-c's values (test/http/oracle.h).
 */
#include "test/fuzz/fuzz.h"
#include "test/http/oracle.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct oracle_tally t = {0};
    const char *doc = (const char *)data;
    char why[1024];

    FUZZ_CHECK(oracle_check_valid(doc, size, &t, why, sizeof(why)) == 0, "%s",
               why);
    FUZZ_CHECK(oracle_check_push(doc, size, &t, why, sizeof(why)) == 0, "%s",
               why);
    return 0;
}
