/*
 * fuzz_presence.c - the presence enter and leave bodies
 * (http/parse_presence.c), each input read both ways: no crash, no leak,
 * a readable refusal; what is accepted names a channel and a member
 * inside the parser's memory, a data span inside the input that is one
 * JSON value, a ttlSeconds in range for an enter (unless it is a node's
 * announcement, whose connections come with a node), nothing of that for
 * a leave.
 */
#include "http/json_scan.h"
#include "http/parse_presence.h"
#include "test/fuzz/fuzz.h"

/* check - one reading of the input as an enter (enter 1) or a leave. */
static void
check(const uint8_t *data, size_t size, int enter)
{
    struct http_presence p;
    struct http_error err = {0};
    int rc = http_parse_presence((const char *)data, size, enter, &p, &err);

    if (rc != 0) {
        fuzz_check_refusal(rc, &err);
        return;
    }
    FUZZ_CHECK(p.channel.ptr != NULL && p.channel.len <= size,
               "channel of %zu bytes", p.channel.len);
    FUZZ_CHECK(p.member.ptr != NULL && p.member.len <= size,
               "member of %zu bytes", p.member.len);
    if (p.has_data) {
        struct http_json j;
        const char *d = p.data.ptr;
        FUZZ_CHECK(d >= (const char *)data &&
                       d + p.data.len <= (const char *)data + size,
                   "data span outside the body");
        http_json_init(&j, d, p.data.len);
        FUZZ_CHECK(http_json_value(&j) == 0 && j.p == j.end,
                   "data is not one JSON value");
    }
    if (p.has_connections)
        FUZZ_CHECK(p.node.ptr != NULL, "connections without a node");
    else if (enter)
        FUZZ_CHECK(p.ttl_s >= 1 && p.ttl_s <= HTTP_PRESENCE_TTL_MAX,
                   "ttlSeconds %u", p.ttl_s);
    http_presence_free(&p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, 1);
    check(data, size, 0);
    return 0;
}
