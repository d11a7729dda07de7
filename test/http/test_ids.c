/*
 * test_ids.c - http/ids.c: message ids "e:<inc hex>:<partition>:<seq>",
 * whose partition may hold ':'.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "http/buf.h"
#include "http/ids.h"

Test(http_ids, format_is_fixed_width_hex_and_decimal)
{
    struct http_buf b;

    http_buf_init(&b);
    cr_assert_eq(http_id_format_json(&b, 0xff, "p", 1, 42), 0);
    cr_assert_str_eq(b.data, "\"e:00000000000000ff:p:42\"");
    http_buf_free(&b);
}

/* What a client reads from the JSON form parses back to the same parts. */
Test(http_ids, round_trip_with_colons_in_the_partition)
{
    static const char *const parts[] = {"Default", "a:b", ":",  "a:1:2",
                                        "::",      "7",   "é:", "room 7:0"};
    static const uint64_t incs[] = {0, 1, 0xdeadbeefcafef00dull, UINT64_MAX};
    static const uint64_t seqs[] = {0, 1, 1000000007ull, UINT64_MAX};
    size_t i, k;

    for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        for (k = 0; k < 4; k++) {
            struct http_buf b;
            struct json_object *o;
            const char *id;
            uint64_t inc, seq;
            const char *part;
            size_t plen;

            http_buf_init(&b);
            cr_assert_eq(http_id_format_json(&b, incs[k], parts[i],
                                             strlen(parts[i]), seqs[k]),
                         0);
            o = json_tokener_parse(b.data);
            cr_assert(json_object_is_type(o, json_type_string), "%s", b.data);
            id = json_object_get_string(o);
            cr_assert_eq(
                http_id_parse(id, strlen(id), &inc, &part, &plen, &seq), 0,
                "%s", id);
            cr_assert_eq(inc, incs[k]);
            cr_assert_eq(seq, seqs[k]);
            cr_assert_eq(plen, strlen(parts[i]));
            cr_assert(memcmp(part, parts[i], plen) == 0, "%s", id);
            json_object_put(o);
            http_buf_free(&b);
        }
    }
}

Test(http_ids, json_form_escapes_the_partition)
{
    struct http_buf b;
    struct json_object *o;

    http_buf_init(&b);
    cr_assert_eq(http_id_format_json(&b, 1, "a\"b\\c:\n", 7, 9), 0);
    cr_assert_str_eq(b.data, "\"e:0000000000000001:a\\\"b\\\\c:\\n:9\"");
    o = json_tokener_parse(b.data);
    cr_assert_not_null(o);
    cr_assert_str_eq(json_object_get_string(o),
                     "e:0000000000000001:a\"b\\c:\n:9");
    json_object_put(o);
    http_buf_free(&b);
}

Test(http_ids, parse_rejects_malformed_ids)
{
    static const char *const bad[] = {
        "",           "e",       "e:",
        "x:ff:p:1",   "e::p:1",  "e:0123456789abcdef0:p:1",
        "e:fg:p:1",   "e:ff:p:", "e:ff::1",
        "e:ff:p",     "e:ff:1",  "e:ff:p:18446744073709551616",
        "e:ff:p:12a", "e:ffp1",  "E:ff:p:1",
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t inc, seq;
        const char *part;
        size_t plen;

        cr_assert_eq(
            http_id_parse(bad[i], strlen(bad[i]), &inc, &part, &plen, &seq),
            -EINVAL, "accepted '%s'", bad[i]);
    }
}

Test(http_ids, parse_takes_short_hex_and_the_largest_sequence)
{
    uint64_t inc, seq;
    const char *part;
    size_t plen;

    cr_assert_eq(http_id_parse("e:A:p:18446744073709551615", 26, &inc, &part,
                               &plen, &seq),
                 0);
    cr_assert_eq(inc, 10);
    cr_assert_eq(seq, UINT64_MAX);
    cr_assert_eq(plen, 1);
}

/* The shared prefix plus a sequence is the id's JSON form, its length is
 * what HTTP_ID_PREFIX_LEN predicts, and the escaped partition sits at
 * HTTP_ID_PREFIX_HEAD (pop answers copy it from there). */
Test(http_ids, prefix_and_sequence_make_the_json_form)
{
    static const char *const parts[] = {"Default", "a\"b",        "c\\d",
                                        "x:y",     "caf\xc3\xa9", "\x7f"};
    static const uint64_t seqs[] = {0, 9, 10, 1234567, UINT64_MAX};

    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        size_t plen = strlen(parts[i]);
        size_t esc_len = http_json_esc_len(parts[i], plen);
        char esc[64];

        cr_assert_leq(esc_len, sizeof(esc));
        http_put_json_esc(esc, parts[i], plen);
        for (size_t k = 0; k < sizeof(seqs) / sizeof(seqs[0]); k++) {
            char buf[128], *o;
            struct http_buf b;

            o = http_id_put_prefix(buf, 0xabcdef, parts[i], plen);
            cr_assert_eq((size_t)(o - buf), HTTP_ID_PREFIX_LEN(esc_len));
            cr_assert(memcmp(buf + HTTP_ID_PREFIX_HEAD, esc, esc_len) == 0,
                      "%s", parts[i]);
            o = http_id_put_seq(o, seqs[k]);
            cr_assert_leq((size_t)(o - buf),
                          HTTP_ID_PREFIX_LEN(esc_len) + HTTP_ID_SEQ_MAX);
            *o = '\0';
            http_buf_init(&b);
            cr_assert_eq(
                http_id_format_json(&b, 0xabcdef, parts[i], plen, seqs[k]), 0);
            cr_assert_str_eq(buf, b.data);
            http_buf_free(&b);
        }
    }
}

/* A run of ids counted up in place reads as each id formatted on its own,
 * across the carries that add a digit and up to the largest sequence. */
Test(http_ids, run_equals_ids_formatted_one_by_one)
{
    static const uint64_t firsts[] = {
        0, 7, 95, 998, 99999, 1000000007ull, UINT64_MAX - 3};
    static const char *const parts[] = {"p", "a:\"b\""};

    for (size_t f = 0; f < sizeof(firsts) / sizeof(firsts[0]); f++) {
        for (size_t k = 0; k < 2; k++) {
            uint32_t n = firsts[f] > UINT64_MAX - 200 ? 4 : 200;
            size_t plen = strlen(parts[k]);
            static char run[200 * 64];
            struct http_buf b;
            char *end;

            http_buf_init(&b);
            for (uint32_t i = 0; i < n; i++) {
                if (i > 0)
                    cr_assert_eq(http_buf_append(&b, ",", 1), 0);
                cr_assert_eq(http_id_format_json(&b, 0xabc, parts[k], plen,
                                                 firsts[f] + i),
                             0);
            }
            end = http_id_put_run(run, 0xabc, parts[k], plen, firsts[f], n);
            cr_assert_eq((size_t)(end - run), b.len, "first %llu",
                         (unsigned long long)firsts[f]);
            cr_assert_eq(memcmp(run, b.data, b.len), 0, "first %llu",
                         (unsigned long long)firsts[f]);
            http_buf_free(&b);
        }
    }
}
