/*
 * fuzz_cursor.c - a stream's cursor (http/cursor.c), the Last-Event-ID a
 * client sends back: whatever text decodes encodes again to that very
 * text (decoding is strict, so a cursor has one spelling), within
 * HTTP_CURSOR_MAX; and a cursor built from the bytes (owners, watermarks,
 * subscriptions' owners) encodes to base64url text that decodes to it, or
 * is refused for a reason the form gives (-EINVAL, -ENOSPC).
 */
#include "http/cursor.h"
#include "test/fuzz/fuzz.h"

/* check_text - data as a cursor's text. */
static void
check_text(const uint8_t *data, size_t size)
{
    struct http_cursor c;
    char out[HTTP_CURSOR_MAX + 1];
    int n;

    if (http_cursor_decode((const char *)data, size, &c) != 0)
        return;
    FUZZ_CHECK(size <= HTTP_CURSOR_MAX, "a text of %zu decoded", size);
    n = http_cursor_encode(&c, out);
    FUZZ_CHECK(n >= 0, "a decoded cursor does not encode: %d", n);
    FUZZ_CHECK((size_t)n == size && memcmp(out, data, size) == 0,
               "decoded and encoded again, it reads %s", out);
}

/* take - the next k bytes of data as an integer (0 past the end). */
static uint64_t
take(const uint8_t **p, const uint8_t *end, int k)
{
    uint64_t v = 0;

    for (int i = 0; i < k && *p < end; i++)
        v = v << 8 | *(*p)++;
    return v;
}

/* check_built - a cursor built from data encodes and decodes back. */
static void
check_built(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    struct http_cursor c, d;
    char out[HTTP_CURSOR_MAX + 1];
    int n;

    memset(&c, 0, sizeof(c));
    c.hash = (uint32_t)take(&p, end, 4);
    c.nowners = (unsigned)take(&p, end, 1) % (HTTP_CURSOR_OWNERS + 2);
    for (unsigned i = 0; i < c.nowners && i < HTTP_CURSOR_OWNERS; i++) {
        c.inc[i] = take(&p, end, 8);
        c.w[i] = take(&p, end, (int)(take(&p, end, 1) % 9));
    }
    c.nparts = (unsigned)take(&p, end, 2) % (HTTP_CURSOR_PARTS + 1);
    for (unsigned i = 0; i < c.nparts; i++)
        c.owner[i] = (uint8_t)(p < end ? *p++ % 16 : HTTP_CURSOR_NONE);
    n = http_cursor_encode(&c, out);
    if (n == -EINVAL) {
        int bad = c.nowners > HTTP_CURSOR_OWNERS;
        for (unsigned i = 0; i < c.nparts; i++)
            bad |= c.owner[i] != HTTP_CURSOR_NONE && c.owner[i] >= c.nowners;
        FUZZ_CHECK(bad, "a sound cursor refused");
        return;
    }
    if (n == -ENOSPC)
        return;
    FUZZ_CHECK(n > 0 && n <= HTTP_CURSOR_MAX && (size_t)n == strlen(out),
               "length %d", n);
    for (int i = 1; i < n; i++)
        FUZZ_CHECK(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                          "0123456789-_",
                          out[i]) != NULL,
                   "character %d of %s", i, out);
    FUZZ_CHECK(http_cursor_decode(out, (size_t)n, &d) == 0, "%s refused", out);
    FUZZ_CHECK(d.hash == c.hash && d.nowners == c.nowners &&
                   d.nparts == c.nparts &&
                   memcmp(d.inc, c.inc, c.nowners * sizeof(*c.inc)) == 0 &&
                   memcmp(d.w, c.w, c.nowners * sizeof(*c.w)) == 0 &&
                   memcmp(d.owner, c.owner, c.nparts) == 0,
               "%s reads otherwise", out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_text(data, size);
    check_built(data, size);
    return 0;
}
