/*
 * test_batch.c - http/batch.h: calls and answers go through encode and
 * decode unchanged, every cut of a body is refused, and the caps hold
 * (entries, version, lengths, bytes a field may not carry).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/batch.h"

static const struct http_batch_call three[] = {
    {"POST", 4, "/api/v1/ephemeral/push", 22, "Bearer t1", 9,
     "{\"queue\":\"q\",\"messages\":[{\"payload\":1}]}", 40},
    {"GET", 3, "/api/v1/ephemeral/pop?queue=q&batch=100", 39, NULL, 0, NULL, 0},
    {"POST", 4, "/api/v1/ephemeral/ack", 21, "", 0, "{\"ids\":[\"\\u0000\"]}",
     18},
};

/* encode_three - the three calls above into b. */
static void
encode_three(struct http_buf *b)
{
    cr_assert_eq(http_batch_begin(b), 0);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(http_batch_add_call(b, &three[i]), 0);
}

/* same - a and b are the same bytes (NULL and "" alike when empty). */
static void
same(const char *a, size_t alen, const char *b, size_t blen)
{
    cr_assert_eq(alen, blen);
    if (alen > 0)
        cr_assert_eq(memcmp(a, b, alen), 0);
}

Test(batch, calls_round_trip)
{
    struct http_buf b = {0};
    struct http_batch_call e[HTTP_BATCH_ENTRIES_MAX];
    char why[160];
    size_t n, size = HTTP_BATCH_HEAD;

    encode_three(&b);
    for (size_t i = 0; i < 3; i++)
        size += http_batch_call_size(&three[i]);
    cr_assert_eq(b.len, size);
    cr_assert_eq(http_batch_calls(b.data, b.len, e, HTTP_BATCH_ENTRIES_MAX, &n,
                                  why, sizeof(why)),
                 0, "%s", why);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < 3; i++) {
        same(e[i].method, e[i].method_len, three[i].method,
             three[i].method_len);
        same(e[i].target, e[i].target_len, three[i].target,
             three[i].target_len);
        same(e[i].body, e[i].body_len, three[i].body, three[i].body_len);
        cr_assert_eq(e[i].authz == NULL, three[i].authz == NULL);
        if (e[i].authz != NULL)
            same(e[i].authz, e[i].authz_len, three[i].authz,
                 three[i].authz_len);
    }
    http_buf_free(&b);
}

Test(batch, answers_round_trip)
{
    struct http_batch_answer in[] = {
        {201, 0, "{\"ids\":[\"a\"]}", 13},
        {503, 7, "{\"error\":\"x\",\"code\":\"draining\"}", 31},
        {204, 0, NULL, 0},
    };
    struct http_batch_answer out[3];
    struct http_buf b = {0};
    char why[160];
    size_t n;

    cr_assert_eq(http_batch_begin(&b), 0);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(http_batch_add_answer(&b, &in[i]), 0);
    cr_assert_eq(
        http_batch_answers(b.data, b.len, out, 3, &n, why, sizeof(why)), 0,
        "%s", why);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(out[i].status, in[i].status);
        cr_assert_eq(out[i].retry_after_s, in[i].retry_after_s);
        same(out[i].body, out[i].body_len, in[i].body, in[i].body_len);
    }
    http_buf_free(&b);
}

Test(batch, every_cut_refused)
{
    struct http_buf b = {0};
    struct http_batch_call e[HTTP_BATCH_ENTRIES_MAX];
    struct http_batch_answer a[HTTP_BATCH_ENTRIES_MAX];
    char why[160];
    size_t n;

    encode_three(&b);
    for (size_t cut = 0; cut < b.len; cut++) {
        cr_assert_neq(http_batch_calls(b.data, cut, e, HTTP_BATCH_ENTRIES_MAX,
                                       &n, why, sizeof(why)),
                      0, "a call cut at %zu taken", cut);
        cr_assert_eq(n, 0);
    }
    /* and a byte more */
    cr_assert_eq(http_buf_append(&b, "x", 1), 0);
    cr_assert_eq(http_batch_calls(b.data, b.len, e, HTTP_BATCH_ENTRIES_MAX, &n,
                                  why, sizeof(why)),
                 -EPROTO);
    http_buf_free(&b);

    struct http_batch_answer one = {200, 0, "{}", 2};
    cr_assert_eq(http_batch_begin(&b), 0);
    cr_assert_eq(http_batch_add_answer(&b, &one), 0);
    for (size_t cut = 0; cut < b.len; cut++)
        cr_assert_neq(http_batch_answers(b.data, cut, a, HTTP_BATCH_ENTRIES_MAX,
                                         &n, why, sizeof(why)),
                      0, "an answer cut at %zu taken", cut);
    http_buf_free(&b);
}

Test(batch, caps)
{
    struct http_buf b = {0};
    struct http_batch_call e[HTTP_BATCH_ENTRIES_MAX];
    struct http_batch_call c = three[1];
    char why[160], big[HTTP_BATCH_TARGET_MAX + 2];
    size_t n;

    /* HTTP_BATCH_ENTRIES_MAX entries, not one more */
    cr_assert_eq(http_batch_begin(&b), 0);
    for (unsigned i = 0; i < HTTP_BATCH_ENTRIES_MAX; i++)
        cr_assert_eq(http_batch_add_call(&b, &c), 0);
    cr_assert_eq(http_batch_add_call(&b, &c), -EINVAL);
    cr_assert_eq(http_batch_calls(b.data, b.len, e, HTTP_BATCH_ENTRIES_MAX, &n,
                                  why, sizeof(why)),
                 0);
    cr_assert_eq(n, HTTP_BATCH_ENTRIES_MAX);
    /* the reader's room */
    cr_assert_eq(http_batch_calls(b.data, b.len, e, 2, &n, why, sizeof(why)),
                 -E2BIG);
    cr_assert_eq(n, 0);
    /* another version */
    b.data[3] = 2;
    cr_assert_eq(http_batch_calls(b.data, b.len, e, HTTP_BATCH_ENTRIES_MAX, &n,
                                  why, sizeof(why)),
                 -EPROTONOSUPPORT);
    cr_assert(strstr(why, "version") != NULL);
    http_buf_free(&b);

    /* what a field may not carry */
    cr_assert_eq(http_batch_begin(&b), 0);
    c = three[0];
    c.authz = "Bearer a\r\nX-Mayfly-Forwarded: 1";
    c.authz_len = strlen(c.authz);
    cr_assert_eq(http_batch_add_call(&b, &c), -EINVAL);
    c = three[0];
    c.target = "/a b";
    c.target_len = 4;
    cr_assert_eq(http_batch_add_call(&b, &c), -EINVAL);
    c = three[0];
    c.method = "post";
    cr_assert_eq(http_batch_add_call(&b, &c), -EINVAL);
    memset(big, 'a', sizeof(big));
    big[0] = '/';
    c = three[0];
    c.target = big;
    c.target_len = HTTP_BATCH_TARGET_MAX + 1;
    cr_assert_eq(http_batch_add_call(&b, &c), -EINVAL);
    c.target_len = HTTP_BATCH_TARGET_MAX;
    cr_assert_eq(http_batch_add_call(&b, &c), 0);
    /* a NUL in a target that came on the wire */
    b.data[HTTP_BATCH_HEAD + 1 + 4 + 4 + 5] = '\0';
    cr_assert_eq(http_batch_calls(b.data, b.len, e, HTTP_BATCH_ENTRIES_MAX, &n,
                                  why, sizeof(why)),
                 -EPROTO);
    http_buf_free(&b);
}

Test(batch, status_out_of_range_refused)
{
    struct http_batch_answer a = {99, 0, NULL, 0}, out[1];
    struct http_buf b = {0};
    char why[160];
    size_t n;

    cr_assert_eq(http_batch_begin(&b), 0);
    cr_assert_eq(http_batch_add_answer(&b, &a), -EINVAL);
    a.status = 200;
    cr_assert_eq(http_batch_add_answer(&b, &a), 0);
    b.data[HTTP_BATCH_HEAD] = 0x7f; /* status 0x7fc8 */
    cr_assert_eq(
        http_batch_answers(b.data, b.len, out, 1, &n, why, sizeof(why)),
        -EPROTO);
    http_buf_free(&b);
}
