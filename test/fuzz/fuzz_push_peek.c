/*
 * fuzz_push_peek.c - the push peek (http/push_peek.c) against the full
 * parse (http/parse_push.c): it reads only within the body, and where both
 * accept a body they name the same queue and partition, so a push that a
 * node forwards unparsed goes where the owner, parsing it, files it.
 */
#include "http/parse.h"
#include "http/push_peek.h"
#include "test/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes: ASan catches a read past the body */
    char *body = malloc(size ? size : 1);
    struct http_push_peek pk;
    struct http_push p;
    struct http_error err;

    FUZZ_CHECK(body != NULL, "out of memory");
    memcpy(body, data, size);
    (void)http_push_peek_head(body, size, &pk); /* reads within the body */
    if (http_push_peek(body, size, &pk) == 0 &&
        http_parse_push(body, size, &p, &err) == 0) {
        FUZZ_CHECK(p.queue.len == pk.queue_len &&
                       memcmp(p.queue.ptr, pk.queue, pk.queue_len) == 0,
                   "queue '%.*s' peeked as '%.*s'", (int)p.queue.len,
                   p.queue.ptr, (int)pk.queue_len, pk.queue);
        FUZZ_CHECK(p.has_partition == (pk.partition != NULL), "partition %s",
                   p.has_partition ? "named" : "absent");
        FUZZ_CHECK(!p.has_partition || (p.partition.len == pk.partition_len &&
                                        memcmp(p.partition.ptr, pk.partition,
                                               pk.partition_len) == 0),
                   "partition '%.*s' peeked as '%.*s'", (int)p.partition.len,
                   p.partition.ptr, (int)pk.partition_len, pk.partition);
        http_push_free(&p);
    }
    free(body);
    return 0;
}
