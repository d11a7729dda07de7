/*
 * test_buf.c - http/buf.c: growth, numbers, printf, and JSON escaping
 * checked against json-c.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "http/buf.h"

Test(http_buf, appends_grow_and_stay_terminated)
{
    struct http_buf b;
    int i;

    http_buf_init(&b);
    for (i = 0; i < 10000; i++)
        cr_assert_eq(http_buf_append(&b, "0123456789", 10), 0);
    cr_assert_eq(b.len, 100000);
    cr_assert_eq(b.data[b.len], '\0');
    cr_assert_eq(b.oom, 0);
    http_buf_free(&b);
    cr_assert_eq(b.len, 0);
    cr_assert_null(b.data);
}

Test(http_buf, numbers_at_their_limits)
{
    struct http_buf b;

    http_buf_init(&b);
    http_buf_append_u64(&b, 0);
    http_buf_append_str(&b, " ");
    http_buf_append_u64(&b, UINT64_MAX);
    http_buf_append_str(&b, " ");
    http_buf_append_i64(&b, INT64_MIN);
    http_buf_append_str(&b, " ");
    http_buf_append_i64(&b, INT64_MAX);
    http_buf_append_str(&b, " ");
    http_buf_append_i64(&b, -1);
    cr_assert_str_eq(b.data, "0 18446744073709551615 -9223372036854775808 "
                             "9223372036854775807 -1");
    http_buf_free(&b);
}

Test(http_buf, printf_grows_past_the_spare_room)
{
    struct http_buf b;
    char big[1000];

    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    http_buf_init(&b);
    cr_assert_eq(http_buf_printf(&b, "<%s>%d", big, 7), 0);
    cr_assert_eq(b.len, 1002);
    cr_assert_eq(b.data[0], '<');
    cr_assert_str_eq(b.data + 1000, ">7");
    http_buf_free(&b);
}

Test(http_buf, json_escapes_quotes_backslashes_and_controls)
{
    struct http_buf b;

    http_buf_init(&b);
    http_buf_append_json_str(&b, "a\"b\\c\n\t\r\b\f\x01\x1f\x7f\xc3\xa9", 15);
    cr_assert_str_eq(b.data, "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f"
                             "\\u007f\xc3\xa9\"");
    http_buf_free(&b);
    http_buf_append_json_str(&b, "x\0y", 3);
    cr_assert_eq(b.len, 10);
    cr_assert(memcmp(b.data, "\"x\\u0000y\"", 10) == 0);
    http_buf_free(&b);
}

/* Every byte string of ASCII (all 128 values) and some UTF-8 escapes into
 * a JSON string that json-c reads back as the same bytes. */
Test(http_buf, json_escape_round_trips_through_json_c)
{
    uint64_t s = 12345;
    int round;

    for (round = 0; round < 2000; round++) {
        char in[64];
        size_t n = 0, k;
        struct http_buf b;
        struct json_object *o;

        while (n < sizeof(in) - 4) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            if (s % 8 == 0) {
                memcpy(in + n, "\xe2\x82\xac", 3);
                n += 3;
            } else {
                in[n++] = (char)(s % 128);
            }
            if (s % 29 == 0)
                break;
        }
        http_buf_init(&b);
        http_buf_append_json_str(&b, in, n);
        o = json_tokener_parse(b.data);
        cr_assert_not_null(o, "%s", b.data);
        k = (size_t)json_object_get_string_len(o);
        cr_assert_eq(k, n);
        cr_assert(memcmp(json_object_get_string(o), in, n) == 0);
        json_object_put(o);
        http_buf_free(&b);
    }
}

/* http_put_u64 at every digit count (each power of ten and its
 * neighbours) and on scattered values writes what printf writes. */
Test(http_buf, put_u64_writes_what_printf_writes)
{
    char got[HTTP_PUT_U64_MAX + 1], want[32];
    uint64_t p = 1, s = 88172645463325252ull;
    int i;

    for (i = 0; i < 20; i++, p *= 10) {
        uint64_t vs[] = {p - 1, p, p + 1, p * 9 + 9 / (p % 7 + 1)};

        for (size_t k = 0; k < sizeof(vs) / sizeof(vs[0]); k++) {
            char *end = http_put_u64(got, vs[k]);

            *end = '\0';
            snprintf(want, sizeof(want), "%" PRIu64, vs[k]);
            cr_assert_str_eq(got, want);
        }
    }
    for (i = 0; i < 100000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        *http_put_u64(got, s >> (s % 64)) = '\0';
        snprintf(want, sizeof(want), "%" PRIu64, s >> (s % 64));
        cr_assert_str_eq(got, want);
    }
    *http_put_u64(got, UINT64_MAX) = '\0';
    cr_assert_str_eq(got, "18446744073709551615");
}

Test(http_buf, put_hex16_is_fixed_width_lower_case)
{
    char got[17];

    *http_put_hex16(got, 0) = '\0';
    cr_assert_str_eq(got, "0000000000000000");
    *http_put_hex16(got, 0xdeadBEEFcafe01ull) = '\0';
    cr_assert_str_eq(got, "00deadbeefcafe01");
    *http_put_hex16(got, UINT64_MAX) = '\0';
    cr_assert_str_eq(got, "ffffffffffffffff");
}

/* Every byte value alone: RFC 8259's mandatory escapes ('"', '\\', U+0000
 * to U+001F, the short forms where there is one), DEL as \u007f, anything
 * else as it is; and the length the sizing pass predicts is what the
 * writer writes. */
Test(http_buf, escape_of_every_byte_and_its_predicted_length)
{
    for (int c = 0; c < 256; c++) {
        char in = (char)c, got[8], want[8] = {(char)c, '\0'};
        size_t n;

        switch (c) {
        case '"':
        case '\\':
            snprintf(want, sizeof(want), "\\%c", c);
            break;
        case '\b':
            snprintf(want, sizeof(want), "\\b");
            break;
        case '\f':
            snprintf(want, sizeof(want), "\\f");
            break;
        case '\n':
            snprintf(want, sizeof(want), "\\n");
            break;
        case '\r':
            snprintf(want, sizeof(want), "\\r");
            break;
        case '\t':
            snprintf(want, sizeof(want), "\\t");
            break;
        default:
            if (c < 0x20 || c == 0x7f)
                snprintf(want, sizeof(want), "\\u%04x", (unsigned)c);
            else if (c >= 0x80) /* alone, never well-formed UTF-8 */
                snprintf(want, sizeof(want), "\\ufffd");
        }
        n = (size_t)(http_put_json_esc(got, &in, 1) - got);
        got[n] = '\0';
        cr_assert_str_eq(got, want, "byte 0x%02x", (unsigned)c);
        cr_assert_eq(http_json_esc_len(&in, 1), n, "byte 0x%02x", (unsigned)c);
    }
}

/* Well-formed UTF-8 goes as it is; each byte of what is not (a stray
 * continuation, an overlong form, a surrogate's three-byte form, a cut
 * sequence) goes as \ufffd, so the answer stays UTF-8. */
Test(http_buf, escape_keeps_utf8_and_replaces_what_is_not)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"p\xed\xb0\x80q", "p\\ufffd\\ufffd\\ufffdq"},
        {"\xc0\xaf", "\\ufffd\\ufffd"},
        {"a\xe2\x82", "a\\ufffd\\ufffd"},
        {"\x80x", "\\ufffdx"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char got[64];
        size_t len = strlen(cases[i].in);
        size_t n = (size_t)(http_put_json_esc(got, cases[i].in, len) - got);

        got[n] = '\0';
        cr_assert_str_eq(got, cases[i].want, "case %zu", i);
        cr_assert_eq(http_json_esc_len(cases[i].in, len), n, "case %zu", i);
    }
}

/* A byte that needs a look stops the 16-byte stride wherever it sits in a
 * long plain name: each byte at each place of a 40-byte string comes out
 * as its own escape between the plain bytes around it. */
Test(http_buf, escape_finds_every_byte_inside_long_plain_runs)
{
    for (unsigned c = 0; c < 256; c++) {
        char one[8], want[64], got[320], in[40];
        size_t ol = (size_t)(http_put_json_esc(one, &(char){(char)c}, 1) - one);

        for (size_t at = 0; at < sizeof(in); at++) {
            memset(in, 'a', sizeof(in));
            in[at] = (char)c;
            memset(want, 'a', at);
            memcpy(want + at, one, ol);
            memset(want + at + ol, 'a', sizeof(in) - at - 1);
            size_t wl = sizeof(in) - 1 + ol;
            size_t n = (size_t)(http_put_json_esc(got, in, sizeof(in)) - got);

            cr_assert_eq(n, wl, "byte 0x%02x at %zu", c, at);
            cr_assert(memcmp(got, want, wl) == 0, "byte 0x%02x at %zu", c, at);
            cr_assert_eq(http_json_esc_len(in, sizeof(in)), wl,
                         "byte 0x%02x at %zu", c, at);
        }
    }
}
