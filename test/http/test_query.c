/*
 * test_query.c - http/query.c: percent-decoding, splitting, typed look-ups
 * and their 400s naming the parameter.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/errors.h"
#include "http/query.h"

static struct http_query q;

static void
parse(const char *raw)
{
    cr_assert_eq(http_query_parse(&q, raw, strlen(raw)), 0, "%s", raw);
}

static void
done(void)
{
    http_query_free(&q);
}

TestSuite(http_query, .fini = done);

Test(http_query, decodes_keys_and_values)
{
    size_t n;
    const char *v;

    parse("queue=inbox%2F7&group=ui+1&x=%00y&flag&&a=1&a=2&empty=");
    cr_assert_str_eq(http_query_get(&q, "queue", NULL), "inbox/7");
    cr_assert_str_eq(http_query_get(&q, "group", NULL), "ui 1");
    v = http_query_get(&q, "x", &n);
    cr_assert_eq(n, 2);
    cr_assert(memcmp(v, "\0y", 2) == 0);
    cr_assert_str_eq(http_query_get(&q, "flag", &n), "");
    cr_assert_eq(n, 0);
    cr_assert_str_eq(http_query_get(&q, "a", NULL), "1");
    cr_assert_str_eq(http_query_get(&q, "empty", NULL), "");
    cr_assert_null(http_query_get(&q, "missing", NULL));
}

Test(http_query, a_repeated_key_is_kept_in_order)
{
    const char *want[] = {"roomA", "roomB", "room C"};
    unsigned k = 0;

    parse("presence_events=roomA&from=last&presence_events=roomB"
          "&presence_events=room+C");
    cr_assert_eq(q.n, 4);
    cr_assert_str_eq(http_query_get(&q, "presence_events", NULL), "roomA");
    for (unsigned i = 0; i < q.n; i++)
        if (strcmp(q.args[i].key, "presence_events") == 0) {
            cr_assert_lt(k, 3);
            cr_assert_str_eq(q.args[i].val, want[k]);
            cr_assert_eq(q.args[i].val_len, strlen(want[k]));
            k++;
        }
    cr_assert_eq(k, 3);
}

Test(http_query, bad_escapes_are_refused)
{
    struct http_query bad;

    cr_assert_eq(http_query_parse(&bad, "a=%zz", 5), -EINVAL);
    cr_assert_eq(http_query_parse(&bad, "a=%4", 4), -EINVAL);
    cr_assert_eq(http_query_parse(&bad, "%=1", 3), -EINVAL);
    cr_assert_eq(bad.n, 0);
    http_query_free(&bad);
}

Test(http_query, pct_decode_keeps_plus_in_paths)
{
    char out[16];

    cr_assert_eq(http_pct_decode(out, "a+b%20c", 7, 0), 5);
    cr_assert_str_eq(out, "a+b c");
    cr_assert_eq(http_pct_decode(out, "%e2%82%AC", 9, 0), 3);
    cr_assert_str_eq(out, "\xe2\x82\xac");
}

Test(http_query, u32_clamps_and_defaults)
{
    struct http_error err;
    uint32_t v;

    parse("batch=5&zero=0&big=99999&huge=123456789012345678901234567890"
          "&neg=-1&hugeneg=-123456789012345678901234567890");
    cr_assert_eq(http_query_u32(&q, "batch", 1, 1, 10000, &v, &err), 0);
    cr_assert_eq(v, 5);
    cr_assert_eq(http_query_u32(&q, "zero", 1, 1, 10000, &v, &err), 0);
    cr_assert_eq(v, 1);
    cr_assert_eq(http_query_u32(&q, "big", 1, 1, 10000, &v, &err), 0);
    cr_assert_eq(v, 10000);
    cr_assert_eq(http_query_u32(&q, "huge", 1, 1, 60000, &v, &err), 0);
    cr_assert_eq(v, 60000);
    /* SPEC: batch is clamped to 1-10000, so a negative one is too. */
    cr_assert_eq(http_query_u32(&q, "neg", 1, 1, 10000, &v, &err), 0);
    cr_assert_eq(v, 1);
    cr_assert_eq(http_query_u32(&q, "hugeneg", 1, 1, 10000, &v, &err), 0);
    cr_assert_eq(v, 1);
    cr_assert_eq(http_query_u32(&q, "timeout", 30000, 0, 60000, &v, &err), 0);
    cr_assert_eq(v, 30000);
}

Test(http_query, u32_refuses_what_is_not_a_number)
{
    static const char *const bad[] = {"batch=",   "batch=-",   "batch=1.5",
                                      "batch=+3", "batch=abc", "batch=1%20",
                                      "batch=--1"};
    struct http_error err;
    uint32_t v;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct http_query one;

        cr_assert_eq(http_query_parse(&one, bad[i], strlen(bad[i])), 0);
        cr_assert_eq(http_query_u32(&one, "batch", 1, 1, 10, &v, &err), -EINVAL,
                     "%s", bad[i]);
        cr_assert_eq(err.status, 400);
        cr_assert_str_eq(err.code, "ephemeral_bad_request");
        cr_assert(strstr(err.msg, "'batch'") != NULL, "%s", err.msg);
        http_query_free(&one);
    }
}

Test(http_query, bool_words_and_digits)
{
    struct http_error err;
    int v;

    parse("a=true&b=FALSE&c=1&d=0&e=yes&f=");
    cr_assert_eq(http_query_bool(&q, "a", 0, &v, &err), 0);
    cr_assert_eq(v, 1);
    cr_assert_eq(http_query_bool(&q, "b", 1, &v, &err), 0);
    cr_assert_eq(v, 0);
    cr_assert_eq(http_query_bool(&q, "c", 0, &v, &err), 0);
    cr_assert_eq(v, 1);
    cr_assert_eq(http_query_bool(&q, "d", 1, &v, &err), 0);
    cr_assert_eq(v, 0);
    cr_assert_eq(http_query_bool(&q, "none", 1, &v, &err), 0);
    cr_assert_eq(v, 1);
    cr_assert_eq(http_query_bool(&q, "e", 0, &v, &err), -EINVAL);
    cr_assert(strstr(err.msg, "'e'") != NULL);
    cr_assert_eq(http_query_bool(&q, "f", 0, &v, &err), -EINVAL);
}
