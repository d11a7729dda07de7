/*
 * fuzz_peer_answer.c - other nodes' answers (http/peer_answer.c, json-c),
 * every decoder on the same bytes: no crash, no leak, what comes back is
 * C strings the caller can use (a reason whenever "replied" is false, a
 * queue within its buffer).
 */
#include "http/peer_answer.h"
#include "test/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct http_peer_acks a;
    struct http_peer_applied s;
    struct http_peer_configured c;

    for (uint32_t n = 0; n < 4; n++) {
        if (http_peer_acks(body, size, n, &a) != 0) {
            FUZZ_CHECK(a.e == NULL && a.n == 0, "refused, yet %u entries", a.n);
            continue;
        }
        FUZZ_CHECK(a.n == n, "%u entries for %u", a.n, n);
        for (uint32_t i = 0; i < n; i++) {
            const struct http_peer_ack *e = &a.e[i];
            FUZZ_CHECK(e->replied >= -1 && e->replied <= 1, "replied %d",
                       e->replied);
            FUZZ_CHECK((e->reason != NULL) == (e->replied == 0),
                       "reason %s with replied %d",
                       e->reason ? e->reason : "(none)", e->replied);
            if (e->outcome != NULL)
                (void)strlen(e->outcome);
            if (e->reason != NULL)
                FUZZ_CHECK(strlen(e->reason) > 0, "an empty reason");
        }
        http_peer_acks_free(&a);
    }
    if (http_peer_applied(body, size, "dropped", &s) == 0 && s.has_queue)
        FUZZ_CHECK(strlen(s.queue) <= HTTP_NAME_MAX, "a queue of %zu bytes",
                   strlen(s.queue));
    free(http_peer_id(body, size));
    (void)http_peer_error_is(body, size, "no_responders");
    http_peer_configured(body, size, &c);
    if (c.options != NULL)
        FUZZ_CHECK(c.options[0] == '{', "options %s", c.options);
    free(c.options);
    return 0;
}
