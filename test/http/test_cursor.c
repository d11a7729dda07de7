/*
 * test_cursor.c - http/cursor.c: a stream's cursor round-trips, stays
 * within 512 characters for 256 subscriptions on a few owners, says
 * -ENOSPC rather than pass it, and refuses every text it would not write.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/cursor.h"

/* some - a cursor with n owners (large incarnations and watermarks) and k
 * partition subscriptions spread over them. */
static struct http_cursor
some(unsigned n, unsigned k)
{
    struct http_cursor c;

    memset(&c, 0, sizeof(c));
    c.hash = 0xdeadbeef;
    c.nowners = n;
    for (unsigned i = 0; i < n; i++) {
        c.inc[i] = 0x9e3779b97f4a7c15ull * (i + 1);
        c.w[i] = (1ull << 40) + i;
    }
    c.nparts = k;
    for (unsigned i = 0; i < k; i++)
        c.owner[i] = n ? (uint8_t)(i % n) : HTTP_CURSOR_NONE;
    return c;
}

/* same - a and b name the same positions. */
static void
same(const struct http_cursor *a, const struct http_cursor *b)
{
    cr_assert_eq(a->hash, b->hash);
    cr_assert_eq(a->nowners, b->nowners);
    for (unsigned i = 0; i < a->nowners; i++) {
        cr_assert_eq(a->inc[i], b->inc[i]);
        cr_assert_eq(a->w[i], b->w[i]);
    }
    cr_assert_eq(a->nparts, b->nparts);
    cr_assert(memcmp(a->owner, b->owner, a->nparts) == 0);
}

Test(http_cursor, round_trips_with_odd_and_even_counts)
{
    static const unsigned owners[] = {0, 1, 3, 8};
    static const unsigned parts[] = {0, 1, 2, 7, 256};
    char text[HTTP_CURSOR_MAX + 1];

    for (size_t i = 0; i < 4; i++)
        for (size_t k = 0; k < 5; k++) {
            struct http_cursor c = some(owners[i], parts[k]), d;
            int n = http_cursor_encode(&c, text);
            cr_assert(n > 1 && n <= HTTP_CURSOR_MAX, "%u owners, %u: %d",
                      owners[i], parts[k], n);
            cr_assert_eq((size_t)n, strlen(text));
            cr_assert_eq(text[0], '1');
            cr_assert_eq(http_cursor_decode(text, (size_t)n, &d), 0, "%s",
                         text);
            same(&c, &d);
            for (int j = 1; j < n; j++) /* base64url: no + / = */
                cr_assert(strchr("+/=", text[j]) == NULL, "%s", text);
        }
}

Test(http_cursor, watermarks_of_every_size)
{
    static const uint64_t ws[] = {
        0, 1, 127, 128, 16383, 16384, (1ull << 56) - 1, UINT64_MAX};
    char text[HTTP_CURSOR_MAX + 1];

    for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
        struct http_cursor c = some(1, 3), d;
        c.w[0] = ws[i];
        int n = http_cursor_encode(&c, text);
        cr_assert_gt(n, 0);
        cr_assert_eq(http_cursor_decode(text, (size_t)n, &d), 0);
        cr_assert_eq(d.w[0], ws[i]);
    }
}

Test(http_cursor, two_hundred_fifty_six_subscriptions_fit_eight_owners)
{
    struct http_cursor c = some(8, 256);
    char text[HTTP_CURSOR_MAX + 1];

    cr_assert_leq(http_cursor_encode(&c, text), HTTP_CURSOR_MAX);
    c = some(15, 256);
    for (unsigned i = 0; i < 15; i++)
        c.w[i] = UINT64_MAX; /* ten bytes each: past the bound */
    cr_assert_eq(http_cursor_encode(&c, text), -ENOSPC);
}

Test(http_cursor, encode_refuses_what_the_form_cannot_say)
{
    struct http_cursor c = some(2, 4);
    char text[HTTP_CURSOR_MAX + 1];

    c.owner[3] = 2; /* past nowners */
    cr_assert_eq(http_cursor_encode(&c, text), -EINVAL);
    c = some(2, 4);
    c.nowners = HTTP_CURSOR_OWNERS + 1;
    cr_assert_eq(http_cursor_encode(&c, text), -EINVAL);
}

Test(http_cursor, decode_refuses_what_encode_would_not_write)
{
    struct http_cursor c = some(1, 3), d;
    char text[HTTP_CURSOR_MAX + 1], bad[HTTP_CURSOR_MAX + 8];
    int n = http_cursor_encode(&c, text);
    static const char *const junk[] = {
        "",         "1",  "2AAAAAAA",  "1AAAA=",
        "1AA+A",    "1A", "1AAAAAAAB", /* stray bits */
        "1AAAAAAE",                    /* one owner, none there */
    };

    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        cr_assert_neq(http_cursor_decode(junk[i], strlen(junk[i]), &d), 0, "%s",
                      junk[i]);
    /* cut short, or a character more */
    cr_assert_neq(http_cursor_decode(text, (size_t)n - 1, &d), 0);
    snprintf(bad, sizeof(bad), "%sA", text);
    cr_assert_neq(http_cursor_decode(bad, strlen(bad), &d), 0);
    /* too long to be one */
    memset(bad, 'A', sizeof(bad) - 1);
    bad[0] = '1';
    cr_assert_neq(http_cursor_decode(bad, HTTP_CURSOR_MAX + 1, &d), 0);
}

Test(http_cursor, a_hash_tells_lists_apart)
{
    uint32_t a = http_cursor_hash(HTTP_CURSOR_SEED, "room-1", 6);
    uint32_t b = http_cursor_hash(HTTP_CURSOR_SEED, "room-2", 6);

    cr_assert_neq(a, b);
    cr_assert_eq(a, http_cursor_hash(HTTP_CURSOR_SEED, "room-1", 6));
    cr_assert_eq(http_cursor_hash(http_cursor_hash(HTTP_CURSOR_SEED, "ro", 2),
                                  "om-1", 4),
                 a, "incremental");
}
