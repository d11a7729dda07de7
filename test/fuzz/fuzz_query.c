/*
 * fuzz_query.c - query strings and percent-decoding (http/query.c): no read
 * outside the input, decoding in place equals decoding into another buffer,
 * never longer than its input, every value NUL-terminated at its length,
 * and the typed look-ups refuse with a readable 400.
 */
#include "http/query.h"
#include "test/fuzz/fuzz.h"

/* The parameters the handlers look up (SPEC §2). */
static const char *const keys[] = {"queue",   "partition", "group", "batch",
                                   "wait",    "autoAck",   "from",  "scope",
                                   "timeout", ""};

/* check_decode - percent-decoding s[0..n), into a copy and in place. */
static void
check_decode(const char *s, size_t n, int plus_space)
{
    char *out = malloc(n + 1), *in_place = malloc(n + 1);
    long a, b;

    FUZZ_CHECK(out != NULL && in_place != NULL, "out of memory");
    memcpy(in_place, s, n);
    a = http_pct_decode(out, s, n, plus_space);
    b = http_pct_decode(in_place, in_place, n, plus_space);
    FUZZ_CHECK(a == b, "%ld vs %ld in place", a, b);
    if (a >= 0) {
        FUZZ_CHECK((size_t)a <= n && out[a] == '\0', "decoded %ld of %zu", a,
                   n);
        FUZZ_CHECK(memcmp(out, in_place, (size_t)a) == 0, "in place differs");
    } else {
        FUZZ_CHECK(a == -EINVAL, "%ld", a);
    }
    free(out);
    free(in_place);
}

/* check_lookups - every typed look-up of q either reads or refuses. */
static void
check_lookups(const struct http_query *q)
{
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        struct http_error err = {0};
        uint32_t u;
        int b, rc;
        size_t len;
        const char *v = http_query_get(q, keys[k], &len);

        FUZZ_CHECK(v == NULL || v[len] == '\0', "%s not terminated", keys[k]);
        rc = http_query_u32(q, keys[k], 7, 1, 1000, &u, &err);
        if (rc != 0)
            fuzz_check_refusal(rc, &err);
        else
            FUZZ_CHECK(v == NULL ? u == 7 : u >= 1 && u <= 1000, "%s = %u",
                       keys[k], u);
        memset(&err, 0, sizeof(err));
        rc = http_query_bool(q, keys[k], 0, &b, &err);
        if (rc != 0)
            fuzz_check_refusal(rc, &err);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *raw = (const char *)data;
    struct http_query q = {0};
    int rc;

    check_decode(raw, size, 0);
    check_decode(raw, size, 1);
    rc = http_query_parse(&q, raw, size);
    if (rc == 0) {
        for (unsigned i = 0; i < q.n; i++) {
            const struct http_query_arg *a = &q.args[i];

            FUZZ_CHECK(a->key[a->key_len] == '\0' && a->val[a->val_len] == '\0',
                       "argument %u not terminated", i);
            FUZZ_CHECK(a->key_len + a->val_len <= size, "argument %u too long",
                       i);
        }
        check_lookups(&q);
    } else {
        FUZZ_CHECK(rc == -EINVAL && q.n == 0, "rc %d with %u arguments", rc,
                   q.n);
    }
    http_query_free(&q);
    return 0;
}
