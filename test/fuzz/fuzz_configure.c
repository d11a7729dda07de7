/*
 * fuzz_configure.c - the configure body (http/parse_configure.c, json-c):
 * no crash, no leak, only known option bits (SPEC §4 and §13), booleans
 * that are 0 or 1, a readable refusal (an unknown option is named in it:
 * the name must stay valid UTF-8).
 */
#include "http/parse.h"
#include "test/fuzz/fuzz.h"

/* Every option's presence bit (http/parse.h): the closed list. */
#define OPTION_BITS                                                            \
    (HTTP_OPT_MAX_LENGTH | HTTP_OPT_MAX_BYTES | HTTP_OPT_POLICY |              \
     HTTP_OPT_WINDOW_BUFFER | HTTP_OPT_TTL_SECONDS | HTTP_OPT_LEASE_SECONDS |  \
     HTTP_OPT_RETRY_LIMIT | HTTP_OPT_DEAD_LETTER | HTTP_OPT_DL_EXPIRED |       \
     HTTP_OPT_DEDUPE_S | HTTP_OPT_RETRY_DELAY | HTTP_OPT_CONFLATE)

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
    FUZZ_CHECK((c.present & ~OPTION_BITS) == 0, "present %#x", c.present);
    FUZZ_CHECK(c.policy == HTTP_POLICY_REJECT ||
                   c.policy == HTTP_POLICY_DROP_OLDEST,
               "policy %d", (int)c.policy);
    /* the booleans are 0 or 1, and 0 when not given */
    FUZZ_CHECK(c.dl_expired == 0 ||
                   (c.dl_expired == 1 && (c.present & HTTP_OPT_DL_EXPIRED)),
               "deadLetterExpired %d", c.dl_expired);
    FUZZ_CHECK(c.conflate == 0 ||
                   (c.conflate == 1 && (c.present & HTTP_OPT_CONFLATE)),
               "conflate %d", c.conflate);
    FUZZ_CHECK(!(c.present & HTTP_OPT_DEAD_LETTER) || c.dead_letter.len > 0,
               "an empty deadLetter");
    http_configure_free(&c);
    return 0;
}
