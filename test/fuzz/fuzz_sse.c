/*
 * fuzz_sse.c - the Server-Sent Events reader (http/sse_parse.c): the input
 * fed whole, fed byte by byte and fed in three pieces cut where the input
 * says gives the same events, the same outcome, the same last event id and
 * retry; no event's type or id holds a line end, no id a NUL, and nothing
 * is longer than the bound.  Run with a large bound and with a small one,
 * so both the events and the refusals are exercised.
 */
#include <inttypes.h>

#include "http/buf.h"
#include "http/sse_parse.h"
#include "test/fuzz/fuzz.h"

/* What one run saw, to compare runs. */
struct seen {
    struct http_buf events; /* each event's parts, length-prefixed */
    size_t max;
};

/* put - n bytes with their length first, so no two sequences of parts
 * read the same. */
static void
put(struct http_buf *b, const char *p, size_t n)
{
    FUZZ_CHECK(http_buf_printf(b, "%zu:", n) == 0 &&
                   http_buf_append(b, p, n) == 0,
               "oom");
}

static int
record(void *arg, const struct http_sse_parsed *ev)
{
    struct seen *s = arg;
    char retry[24];

    FUZZ_CHECK(ev->type_len > 0 && ev->type_len <= s->max, "type %zu",
               ev->type_len);
    FUZZ_CHECK(memchr(ev->type, '\n', ev->type_len) == NULL &&
                   memchr(ev->type, '\r', ev->type_len) == NULL,
               "line end in the type");
    FUZZ_CHECK(ev->id_len <= s->max &&
                   memchr(ev->id, '\0', ev->id_len) == NULL &&
                   memchr(ev->id, '\n', ev->id_len) == NULL &&
                   memchr(ev->id, '\r', ev->id_len) == NULL,
               "bad id");
    FUZZ_CHECK(ev->data_len < s->max && ev->data[ev->data_len] == '\0' &&
                   memchr(ev->data, '\r', ev->data_len) == NULL,
               "bad data");
    snprintf(retry, sizeof(retry), "%" PRId64, ev->retry_ms);
    put(&s->events, ev->type, ev->type_len);
    put(&s->events, ev->id, ev->id_len);
    put(&s->events, ev->data, ev->data_len);
    put(&s->events, retry, strlen(retry));
    return 0;
}

/* run - feed data cut before each of cuts[0..ncuts) (ascending); the
 * outcome, last id and retry appended to s after the events. */
static void
run(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts,
    struct seen *s)
{
    struct http_sse_parser p;
    size_t at = 0, idlen;
    const char *id;
    int rc = 0;

    http_sse_parse_init(&p, s->max);
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : size;
        int r = http_sse_parse_feed(&p, data + at, to - at, record, s);

        FUZZ_CHECK(r == 0 || r == -EMSGSIZE || r == -ENOMEM, "rc %d", r);
        FUZZ_CHECK(rc == 0 || r == rc, "a failure did not stick");
        rc = r;
        at = to;
    }
    id = http_sse_parse_last_id(&p, &idlen);
    FUZZ_CHECK(strlen(id) == idlen, "last id length");
    FUZZ_CHECK(http_buf_printf(&s->events, "|%d|%" PRId64 "|", rc,
                               http_sse_parse_retry_ms(&p)) == 0,
               "oom");
    put(&s->events, id, idlen);
    http_sse_parse_free(&p);
}

/* same - run data whole, byte by byte and in three pieces with bound max;
 * all three must agree. */
static void
same(const uint8_t *data, size_t size, size_t max)
{
    struct seen whole = {.max = max}, bytes = {.max = max},
                three = {.max = max};
    size_t *cuts = malloc((size + 1) * sizeof(*cuts)), c[2];

    FUZZ_CHECK(cuts != NULL, "out of memory");
    for (size_t i = 0; i < size; i++)
        cuts[i] = i + 1;
    c[0] = size > 0 ? data[0] % (size + 1) : 0;
    c[1] = size > 1 ? c[0] + data[size - 1] % (size + 1 - c[0]) : c[0];
    run(data, size, NULL, 0, &whole);
    run(data, size, cuts, size, &bytes);
    run(data, size, c, 2, &three);
    FUZZ_CHECK(
        whole.events.len == bytes.events.len &&
            memcmp(whole.events.data, bytes.events.data, whole.events.len) == 0,
        "byte by byte differs (max %zu)", max);
    FUZZ_CHECK(
        whole.events.len == three.events.len &&
            memcmp(whole.events.data, three.events.data, whole.events.len) == 0,
        "cut at %zu and %zu differs (max %zu)", c[0], c[1], max);
    http_buf_free(&whole.events);
    http_buf_free(&bytes.events);
    http_buf_free(&three.events);
    free(cuts);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    same(data, size, 1 << 16);
    same(data, size, 24);
    return 0;
}
