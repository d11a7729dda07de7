/*
 * fuzz_configure.c - the configure body (http/parse_configure.c, json-c):
 * no crash, no leak, only known option bits, a readable refusal (an
 * unknown option is named in it: the name must stay valid UTF-8).
 */
#include "http/parse.h"
#include "test/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_configure c;
    struct http_error err = {0};
    int rc = http_parse_configure((const char *)data, size, &c, &err);

    if (rc != 0) {
        fuzz_check_refusal(rc, &err);
        return 0;
    }
    FUZZ_CHECK((c.present & ~0x7fu) == 0, "present %#x", c.present);
    FUZZ_CHECK(c.policy == HTTP_POLICY_REJECT ||
                   c.policy == HTTP_POLICY_DROP_OLDEST,
               "policy %d", (int)c.policy);
    http_configure_free(&c);
    return 0;
}
