/*
 * fuzz_batch.c - batch bodies between nodes (http/batch.c), both
 * decoders on the same bytes: no crash, no over-read (ASan), entries
 * only when the body was taken whole, every string within the input and
 * of the bytes the format allows, and what was taken encodes back to the
 * same bytes.
 */
#include "http/batch.h"
#include "test/fuzz/fuzz.h"

/* within - p[0..n) lies in data[0..size). */
static int
within(const char *p, size_t n, const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;

    return n == 0 || (p >= d && n <= size && p - d <= (ptrdiff_t)(size - n));
}

/* calls - decode as a call; re-encode what was taken. */
static void
calls(const uint8_t *data, size_t size)
{
    struct http_batch_call e[HTTP_BATCH_ENTRIES_MAX];
    struct http_buf b = {0};
    char why[160];
    size_t n;
    int rc = http_batch_calls((const char *)data, size, e,
                              HTTP_BATCH_ENTRIES_MAX, &n, why, sizeof(why));

    if (rc != 0) {
        FUZZ_CHECK(n == 0, "refused (%d), yet %zu entries", rc, n);
        FUZZ_CHECK(strlen(why) > 0, "refused without a sentence");
        return;
    }
    FUZZ_CHECK(http_batch_begin(&b) == 0, "begin");
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(within(e[i].method, e[i].method_len, data, size) &&
                       within(e[i].target, e[i].target_len, data, size) &&
                       within(e[i].body, e[i].body_len, data, size) &&
                       (e[i].authz == NULL ||
                        within(e[i].authz, e[i].authz_len, data, size)),
                   "entry %zu points outside the input", i);
        FUZZ_CHECK(memchr(e[i].target, '\0', e[i].target_len) == NULL &&
                       (e[i].authz == NULL ||
                        memchr(e[i].authz, '\n', e[i].authz_len) == NULL),
                   "entry %zu: a NUL or LF taken", i);
        FUZZ_CHECK(http_batch_add_call(&b, &e[i]) == 0, "entry %zu re-encoded",
                   i);
    }
    FUZZ_CHECK(b.len == size && memcmp(b.data, data, size) == 0,
               "%zu entries re-encoded differ", n);
    http_buf_free(&b);
}

/* answers - decode as an answer; re-encode what was taken. */
static void
answers(const uint8_t *data, size_t size)
{
    struct http_batch_answer a[4];
    struct http_buf b = {0};
    char why[160];
    size_t n;
    int rc = http_batch_answers((const char *)data, size, a, 4, &n, why,
                                sizeof(why));

    if (rc != 0) {
        FUZZ_CHECK(n == 0, "refused (%d), yet %zu answers", rc, n);
        return;
    }
    FUZZ_CHECK(http_batch_begin(&b) == 0, "begin");
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(a[i].status >= 100 && a[i].status <= 599, "status %u",
                   a[i].status);
        FUZZ_CHECK(within(a[i].body, a[i].body_len, data, size),
                   "answer %zu points outside the input", i);
        FUZZ_CHECK(http_batch_add_answer(&b, &a[i]) == 0,
                   "answer %zu re-encoded", i);
    }
    FUZZ_CHECK(b.len == size && memcmp(b.data, data, size) == 0,
               "%zu answers re-encoded differ", n);
    http_buf_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    calls(data, size);
    answers(data, size);
    return 0;
}
