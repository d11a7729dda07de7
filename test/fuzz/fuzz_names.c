/*
 * fuzz_names.c - names (http/names.c) against an independent reading of
 * SPEC §1: a name is 1-512 bytes of UTF-8 by Unicode Table 3-7
 * (test/http/oracle.h) with no C0, DEL or C1 character; a node id is 1-64
 * bytes of [A-Za-z0-9._-].
 */
#include "http/names.h"
#include "test/fuzz/fuzz.h"

/* name_ok - the rule, read from the SPEC rather than from names.c. */
static int
name_ok(const unsigned char *p, size_t n)
{
    const unsigned char *end = p + n;

    if (n == 0 || n > HTTP_NAME_MAX)
        return 0;
    while (p < end) {
        if (!oracle_utf8_ok_at(p, end) || *p < 0x20 || *p == 0x7f ||
            (p[0] == 0xc2 && p[1] < 0xa0))
            return 0;
        p += *p < 0x80 ? 1 : *p < 0xe0 ? 2 : *p < 0xf0 ? 3 : 4;
    }
    return 1;
}

/* node_id_ok - 1-64 bytes of [A-Za-z0-9._-]. */
static int
node_id_ok(const char *p, size_t n)
{
    if (n == 0 || n > HTTP_NODE_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] == '\0' ||
            !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789._-",
                    p[i]))
            return 0;
    return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;

    FUZZ_CHECK(http_name_valid(p, size) == name_ok(data, size),
               "name %.*s: names.c says %d", (int)size, p,
               http_name_valid(p, size));
    FUZZ_CHECK(http_node_id_valid(p, size) == node_id_ok(p, size),
               "node id %.*s: names.c says %d", (int)size, p,
               http_node_id_valid(p, size));
    return 0;
}
