/*
 * test_json_scan.c - the push scanner (http/json_scan.c, parse_push.c)
 * against json-c as the oracle.
 *
 * A seeded generator writes push bodies with nested payloads, escapes,
 * \u escapes (pairs and lone surrogates), raw UTF-8, number edge cases and
 * random whitespace; a mutator then flips, inserts, deletes, truncates and
 * appends bytes.  For every document:
 *   - http_json_* accepts the document exactly when json-c (strict, UTF-8
 *     checked, same depth) does;
 *   - http_parse_push() accepts exactly when json-c accepts and the tree has
 *     the push shape; accepted names equal json-c's strings, and every
 *     payload span re-parses with json-c to a value equal to the tree's.
 * The only allowed difference is where json-c is laxer than RFC 8259 and
 * the scanner rejects; each such case is confirmed by an independent check
 * of the reported byte (a raw control character, a UTF-8 sequence outside
 * Unicode Table 3-7, a number outside the RFC grammar, NaN/Infinity).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "http/errors.h"
#include "http/json_scan.h"
#include "http/parse.h"
#include "test/http/gen.h"
#include "test/http/oracle.h"

/* ---- random documents ------------------------------------------------ */

static void
ws(struct test_gen *g)
{
    static const char *const w[] = {"", "", "", " ", "\n", "\t", "\r\n  "};

    test_gen_puts(g, w[test_gen_pick(g, 7)]);
}

static void
gen_string(struct test_gen *g)
{
    static const char *const pieces[] = {"a",
                                         "queue",
                                         " ",
                                         "\\\"",
                                         "\\\\",
                                         "\\/",
                                         "\\b",
                                         "\\f",
                                         "\\n",
                                         "\\r",
                                         "\\t",
                                         "\\u0041",
                                         "\\u00e9",
                                         "\\u0000",
                                         "\\u20AC",
                                         "\\ud834\\udd1e",
                                         "\\uD800",
                                         "\\udc00",
                                         "\\ud800\\u0041",
                                         "\xc3\xa9",
                                         "\xe2\x82\xac",
                                         "\xf0\x9f\x98\x80",
                                         "\xef\xbf\xbf",
                                         "\xf4\x8f\xbf\xbf",
                                         "{",
                                         "]",
                                         ":",
                                         ",",
                                         "'",
                                         "x y z"};
    unsigned k = test_gen_pick(g, 6);

    test_gen_puts(g, "\"");
    while (k-- > 0)
        test_gen_puts(
            g, pieces[test_gen_pick(g, sizeof(pieces) / sizeof(pieces[0]))]);
    test_gen_puts(g, "\"");
}

static void
gen_number(struct test_gen *g)
{
    static const char *const nums[] = {"0",
                                       "-0",
                                       "1",
                                       "-1",
                                       "42",
                                       "0.5",
                                       "-0.0",
                                       "1e5",
                                       "1E-5",
                                       "2e+10",
                                       "1.25e3",
                                       "123456789012345678901234567890",
                                       "-9223372036854775809",
                                       "18446744073709551616",
                                       "1e400",
                                       "-1e-400",
                                       "9007199254740993",
                                       "0.1e1",
                                       "10"};

    test_gen_puts(g, nums[test_gen_pick(g, sizeof(nums) / sizeof(nums[0]))]);
}

static void gen_value(struct test_gen *g, int depth);

static void
gen_container(struct test_gen *g, int depth, int object)
{
    unsigned i, n = test_gen_pick(g, 5);

    test_gen_puts(g, object ? "{" : "[");
    for (i = 0; i < n; i++) {
        if (i > 0)
            test_gen_puts(g, ",");
        ws(g);
        if (object) {
            gen_string(g);
            ws(g);
            test_gen_puts(g, ":");
            ws(g);
        }
        gen_value(g, depth + 1);
        ws(g);
    }
    test_gen_puts(g, object ? "}" : "]");
}

static void
gen_value(struct test_gen *g, int depth)
{
    unsigned k = test_gen_pick(g, depth > 6 ? 5 : 8);

    switch (k) {
    case 0:
        gen_string(g);
        break;
    case 1:
        gen_number(g);
        break;
    case 2:
        test_gen_puts(g, test_gen_pick(g, 2) ? "true" : "false");
        break;
    case 3:
        test_gen_puts(g, "null");
        break;
    case 4:
        gen_string(g);
        break;
    case 5:
    case 6:
        gen_container(g, depth, 1);
        break;
    default:
        gen_container(g, depth, 0);
        break;
    }
}

/* gen_deep - n nested arrays or objects around a small value. */
static void
gen_deep(struct test_gen *g, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++)
        test_gen_puts(g, i % 2 ? "{\"k\":" : "[");
    gen_number(g);
    for (i = n; i-- > 0;)
        test_gen_puts(g, i % 2 ? "}" : "]");
}

static void
gen_message(struct test_gen *g)
{
    int payload_first = test_gen_pick(g, 2), extra = test_gen_pick(g, 4) == 0;

    test_gen_puts(g, "{");
    ws(g);
    if (extra && !payload_first) {
        test_gen_puts(g, "\"id\": ");
        gen_value(g, 3);
        test_gen_puts(g, ",");
    }
    if (test_gen_pick(g, 50) != 0) {
        test_gen_puts(g, "\"payload\"");
        ws(g);
        test_gen_puts(g, ":");
        ws(g);
        if (test_gen_pick(g, 40) == 0)
            gen_deep(g, 58 + test_gen_pick(g, 6));
        else
            gen_value(g, 3);
    } else {
        test_gen_puts(g, "\"pay\": 1");
    }
    if (extra && payload_first) {
        test_gen_puts(g, ", \"attempts\": ");
        gen_value(g, 3);
    }
    ws(g);
    test_gen_puts(g, "}");
}

/* gen_push - a push body, shuffled keys, sometimes an odd member. */
static void
gen_push(struct test_gen *g)
{
    unsigned order[4] = {0, 1, 2, 3}, i, n, first = 1;

    for (i = 3; i > 0; i--) {
        unsigned j = test_gen_pick(g, i + 1), t = order[i];

        order[i] = order[j];
        order[j] = t;
    }
    ws(g);
    test_gen_puts(g, "{");
    for (i = 0; i < 4; i++) {
        if (order[i] == 1 && test_gen_pick(g, 2))
            continue;
        if (order[i] == 3 && test_gen_pick(g, 3))
            continue;
        if (!first)
            test_gen_puts(g, ",");
        first = 0;
        ws(g);
        switch (order[i]) {
        case 0:
            test_gen_puts(g, "\"queue\":");
            ws(g);
            if (test_gen_pick(g, 30) == 0)
                gen_value(g, 1);
            else
                gen_string(g);
            break;
        case 1:
            test_gen_puts(g, "\"partition\":");
            ws(g);
            if (test_gen_pick(g, 20) == 0)
                test_gen_puts(g, "null");
            else
                gen_string(g);
            break;
        case 2:
            test_gen_puts(g, "\"messages\":");
            ws(g);
            if (test_gen_pick(g, 40) == 0) {
                gen_value(g, 1);
                break;
            }
            test_gen_puts(g, "[");
            n = test_gen_pick(g, 6);
            for (unsigned k = 0; k < n; k++) {
                if (k > 0)
                    test_gen_puts(g, ",");
                ws(g);
                if (test_gen_pick(g, 60) == 0)
                    gen_value(g, 2);
                else
                    gen_message(g);
            }
            ws(g);
            test_gen_puts(g, "]");
            break;
        default:
            gen_string(g);
            test_gen_puts(g, ":");
            gen_value(g, 1);
            break;
        }
        ws(g);
    }
    test_gen_puts(g, "}");
    ws(g);
}

/* find_from - the first c at or after at (wrapping), or g->n. */
static size_t
find_from(struct test_gen *g, size_t at, char c)
{
    size_t d;

    for (d = 0; d < g->n; d++)
        if (g->p[(at + d) % g->n] == c)
            return (at + d) % g->n;
    return g->n;
}

/* mutate - one to three random edits. */
static void
mutate(struct test_gen *g)
{
    static const char bytes[] = "{}[],:\"\\ 0123456789eE.+-tfnulNI\x01\x1f"
                                "\x7f\x80\xbf\xc0\xc3\xed\xf0\xf4\xf5\xff"
                                "\t\n\r\v\f";
    unsigned k = 1 + test_gen_pick(g, 3);

    while (k-- > 0 && g->n > 0) {
        size_t at = test_gen_pick(g, (unsigned)g->n);
        char c = bytes[test_gen_pick(g, sizeof(bytes) - 1)];

        switch (test_gen_pick(g, 9)) {
        case 6: /* a ',' before a closer: "[1,]" */
            at = find_from(g, at, test_gen_pick(g, 2) ? ']' : '}');
            if (at < g->n) {
                test_gen_put(g, " ", 1);
                memmove(g->p + at + 1, g->p + at, g->n - at - 1);
                g->p[at] = ',';
            }
            break;
        case 7: /* drop a separator: "[1 2]" */
            at = find_from(g, at, test_gen_pick(g, 2) ? ',' : ':');
            if (at < g->n) {
                memmove(g->p + at, g->p + at + 1, g->n - at - 1);
                g->n--;
            }
            break;
        case 8: /* drop a run of letters or digits (a token) */
            while (at < g->n && strchr("truefalsn0123456789.eE-+", g->p[at]) &&
                   g->p[at] != '\0') {
                memmove(g->p + at, g->p + at + 1, g->n - at - 1);
                g->n--;
            }
            break;
        case 0:
            g->p[at] = c;
            break;
        case 1:
            test_gen_put(g, " ", 1);
            memmove(g->p + at + 1, g->p + at, g->n - at - 1);
            g->p[at] = c;
            break;
        case 2:
            memmove(g->p + at, g->p + at + 1, g->n - at - 1);
            g->n--;
            break;
        case 3:
            g->n = at;
            break;
        case 4:
            test_gen_put(g, &c, 1);
            break;
        default:
            g->p[at] ^= (char)(1u << test_gen_pick(g, 8));
            break;
        }
        g->p[g->n] = '\0';
    }
}

Test(http_json_scan, differential_against_json_c)
{
    struct test_gen g = {.s = 0x9e3779b97f4a7c15ull};
    struct oracle_tally t = {0};
    char why[512];
    unsigned i;

    for (i = 0; i < 30000; i++) {
        g.n = 0;
        if (i % 10 == 9) {
            gen_value(&g, 0);
        } else {
            gen_push(&g);
        }
        if (i % 3 != 0)
            mutate(&g);
        t.docs++;
        cr_assert_eq(oracle_check_valid(g.p, g.n, &t, why, sizeof(why)), 0,
                     "%s", why);
        cr_assert_eq(oracle_check_push(g.p, g.n, &t, why, sizeof(why)), 0, "%s",
                     why);
    }
    fprintf(stderr,
            "json_scan differential: %u docs, both accept %u, both reject %u, "
            "json-c-lax gaps %u; push accepted %u, rejected %u, "
            "left out (NUL in a key) %u\n",
            t.docs, t.both_ok, t.both_bad, t.gaps, t.push_ok, t.push_bad,
            t.nul_keys);
    cr_assert_gt(t.push_ok, t.docs / 5, "the generator must make valid pushes");
    cr_assert_gt(t.push_bad, t.docs / 5, "the mutator must break some");
    cr_assert_gt(t.gaps, 0);
    free(g.p);
}

/* ---- fixed cases ------------------------------------------------------- */

static int
scanner_ok(const char *s, size_t n)
{
    return http_json_valid(s, n);
}

static int
json_c_ok(const char *s, size_t n)
{
    int ok;

    json_object_put(oracle_jc_parse(s, n, &ok));
    return ok;
}

Test(http_json_scan, rejects_what_json_c_lets_through)
{
    static const char *const lax[] = {"[\"a\tb\"]",
                                      "[\"\x01\"]",
                                      "[\"\x1f\"]",
                                      "[\"\xc0\x80\"]",
                                      "[\"\xe0\x80\xaf\"]",
                                      "[\"\xed\xa0\x80\"]",
                                      "[\"\xf4\x90\x80\x80\"]",
                                      "[NaN]",
                                      "[Infinity]",
                                      "[-Infinity]",
                                      "[1.]",
                                      "[0.]",
                                      "[-.5]",
                                      "[-01]",
                                      "[00]",
                                      "[1.e5]",
                                      "[-0.e1]"};
    size_t i;

    for (i = 0; i < sizeof(lax) / sizeof(lax[0]); i++) {
        size_t n = strlen(lax[i]);

        cr_assert(json_c_ok(lax[i], n), "json-c now rejects %s", lax[i]);
        cr_assert(!scanner_ok(lax[i], n), "scanner accepts %s", lax[i]);
    }
}

Test(http_json_scan, accepts_the_rfc_edge_cases)
{
    static const char *const ok[] = {"0",
                                     "-0",
                                     "1",
                                     "\"x\"",
                                     "true",
                                     " null ",
                                     "[-0]",
                                     "[0e0]",
                                     "[1E+2]",
                                     "[1e-2]",
                                     "[-1.5E-3]",
                                     "[\"\\u0000\"]",
                                     "[\"\\/\"]",
                                     "[\"\\ud834\\udd1e\"]",
                                     "[\"\\ud800\"]",
                                     "[\"\\udc00\\ud800\"]",
                                     "[\"\xf4\x8f\xbf\xbf\"]",
                                     "[\"\xef\xbf\xbf\"]",
                                     "{\"\":{}}",
                                     "\t[\r\n]\n",
                                     "[123456789012345678901234567890]",
                                     "[1e400]"};
    size_t i;

    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        size_t n = strlen(ok[i]);

        cr_assert(scanner_ok(ok[i], n), "scanner rejects %s", ok[i]);
        cr_assert(json_c_ok(ok[i], n), "json-c rejects %s", ok[i]);
    }
}

Test(http_json_scan, rejects_the_malformed)
{
    static const char *const bad[] = {
        "",           " ",           "[",
        "]",          "[1,]",        "{\"a\":1,}",
        "[1 2]",      "{\"a\" 1}",   "{1:1}",
        "'a'",        "\"a",         "\"\\x\"",
        "\"\\u12\"",  "\"\\u12G4\"", "tru",
        "truex",      "nul",         "01",
        "-",          "1e",          "1e+",
        ".5",         "+1",          "0x1",
        "[1]]",       "{}{}",        "1 2",
        "[1]\v",      "\f[1]",       "\xef\xbb\xbf{}",
        "[\"\xff\"]", "[\"\xc3\"]",  "[\"\x80\"]",
        "/*c*/1"};
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t n = strlen(bad[i]);

        cr_assert(!scanner_ok(bad[i], n), "scanner accepts %s", bad[i]);
        cr_assert(!json_c_ok(bad[i], n), "json-c accepts %s", bad[i]);
    }
    cr_assert(!scanner_ok("[1]\0", 4), "a NUL after the text");
    cr_assert(!scanner_ok("[\"a\0\"]", 6), "a raw NUL in a string");
}

/* nest - k arrays around inner (NULL: empty innermost array). */
static char *
nest(unsigned k, const char *inner)
{
    char *b = malloc(2 * k + 8);
    size_t o = 0;
    unsigned i;

    for (i = 0; i < k; i++)
        b[o++] = '[';
    if (inner != NULL)
        o += (size_t)sprintf(b + o, "%s", inner);
    for (i = 0; i < k; i++)
        b[o++] = ']';
    b[o] = '\0';
    return b;
}

Test(http_json_scan, depth_is_bounded_as_json_c_bounds_it)
{
    struct {
        unsigned k;
        const char *inner;
        int ok;
    } cases[] = {
        {HTTP_JSON_MAX_DEPTH, NULL, 1},
        {HTTP_JSON_MAX_DEPTH + 1, NULL, 0},
        {HTTP_JSON_MAX_DEPTH - 1, "1", 1},
        {HTTP_JSON_MAX_DEPTH, "1", 0},
        {HTTP_JSON_MAX_DEPTH - 1, "{}", 1},
        {HTTP_JSON_MAX_DEPTH - 1, "{\"a\":1}", 0},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *b = nest(cases[i].k, cases[i].inner);
        size_t n = strlen(b);

        cr_assert_eq(scanner_ok(b, n), cases[i].ok, "case %zu", i);
        cr_assert_eq(json_c_ok(b, n), cases[i].ok, "json-c, case %zu", i);
        free(b);
    }
}

Test(http_json_scan, string_unescapes_to_utf8)
{
    const char *s = "\"a\\u00e9\\ud834\\udd1e\\ud800x\\n\\\"\\\\\\/\xc3\xa9\"";
    char out[64];
    size_t n;
    struct http_json j;

    http_json_init(&j, s, strlen(s));
    cr_assert_eq(http_json_string(&j, out, &n), 0);
    cr_assert_eq(j.p, j.end);
    cr_assert_eq(n, 17);
    cr_assert(memcmp(out,
                     "a\xc3\xa9\xf0\x9d\x84\x9e\xed\xa0\x80x\n\"\\/\xc3\xa9",
                     n) == 0);
}

Test(http_json_scan, decodes_the_pairs_json_c_replaces)
{
    const char *s = "\"\\ud837\\udd1e\"";
    struct json_object *o = json_tokener_parse(s);
    struct http_json j;
    char out[8];
    size_t n;

    cr_assert(oracle_pair_bug(s, strlen(s)));
    cr_assert_str_eq(json_object_get_string(o), "\xef\xbf\xbd",
                     "json-c fixed?");
    json_object_put(o);
    http_json_init(&j, s, strlen(s));
    cr_assert_eq(http_json_string(&j, out, &n), 0);
    cr_assert_eq(n, 4);
    cr_assert(memcmp(out, "\xf0\x9d\xb4\x9e", 4) == 0); /* U+1DD1E */
}

/* ---- throughput (printed, not asserted) --------------------------------- */

/* bench_body - 100 messages of 256-byte payloads: objects with strings,
 * numbers, an escape and a non-ASCII character, padded to size. */
static char *
bench_body(size_t *len)
{
    struct test_gen g = {0};
    char payload[300];
    int i, n;

    test_gen_puts(&g, "{\"queue\":\"presence\",\"partition\":\"room-7\","
                      "\"messages\":[");
    for (i = 0; i < 100; i++) {
        n = snprintf(payload, sizeof(payload),
                     "{\"user\":\"ada-%03d\",\"typing\":true,\"seq\":%d,"
                     "\"score\":-12.5e-3,\"tags\":[\"a\",\"b\\n\",null],"
                     "\"text\":\"caf\xc3\xa9 \\\"quoted\\\" ",
                     i, i * 7919);
        for (; n < 254; n++)
            payload[n] = (char)('a' + n % 26);
        payload[n++] = '"';
        payload[n++] = '}';
        payload[n] = '\0';
        test_gen_puts(&g, i ? ",{\"payload\":" : "{\"payload\":");
        test_gen_put(&g, payload, (size_t)n);
        test_gen_puts(&g, "}");
    }
    test_gen_puts(&g, "]}");
    *len = g.n;
    return g.p;
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* jc_push - what the push path would cost with json-c: parse the tree and
 * print each payload back to text to store it. */
static size_t
jc_push(const char *body, size_t len)
{
    struct json_tokener *t = json_tokener_new_ex(HTTP_JSON_MAX_DEPTH);
    struct json_object *o, *m;
    size_t i, n, bytes = 0;

    json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    o = json_tokener_parse_ex(t, body, (int)len);
    json_tokener_free(t);
    json_object_object_get_ex(o, "messages", &m);
    n = json_object_array_length(m);
    for (i = 0; i < n; i++) {
        struct json_object *p;

        json_object_object_get_ex(json_object_array_get_idx(m, i), "payload",
                                  &p);
        bytes +=
            strlen(json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN));
    }
    json_object_put(o);
    return bytes;
}

/* bench - CPU seconds per call of fn over iters calls, the best of 5
 * rounds (the machine is shared); *sink keeps the work observable. */
static double
bench(size_t (*fn)(const char *, size_t), const char *body, size_t len,
      size_t iters, size_t *sink)
{
    double best = 1e9;
    int round;

    for (round = 0; round < 5; round++) {
        double t0 = now_s(), t;
        size_t i;

        for (i = 0; i < iters; i++)
            *sink += fn(body, len);
        t = (now_s() - t0) / (double)iters;
        best = t < best ? t : best;
    }
    return best;
}

static size_t
scan_push(const char *body, size_t len)
{
    struct http_push p;
    struct http_error err;
    size_t n;

    http_parse_push(body, len, &p, &err);
    n = p.n;
    http_push_free(&p);
    return n;
}

static size_t
jc_only(const char *body, size_t len)
{
    int ok;

    json_object_put(oracle_jc_parse(body, len, &ok));
    return (size_t)ok;
}

Test(http_json_scan, throughput_of_a_100_message_push)
{
    size_t len, i, sink = 0;
    char *body = bench_body(&len);
    struct http_push p;
    struct http_error err;
    double scan, jc, jc_print;

    cr_assert_eq(http_parse_push(body, len, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(p.n, 100);
    for (i = 0; i < 100; i++)
        cr_assert_eq(p.payloads[i].len, 256);
    http_push_free(&p);
    scan = bench(scan_push, body, len, 400, &sink);
    jc = bench(jc_only, body, len, 40, &sink);
    jc_print = bench(jc_push, body, len, 40, &sink);
    cr_assert_gt(sink, 0);
    fprintf(stderr,
            "push body %zu bytes, 100 x 256-byte payloads, CPU time, best of "
            "5: scanner %.1f us (%.0f MB/s, %.2f M msg/s); json-c parse "
            "%.1f us (%.1fx); json-c parse + print payloads %.1f us (%.1fx)\n",
            len, scan * 1e6, (double)len / scan / 1e6, 100.0 / scan / 1e6,
            jc * 1e6, jc / scan, jc_print * 1e6, jc_print / scan);
    free(body);
}

/* The string loop takes 32 and 16 bytes a step: a byte that needs a look
 * (an escape, UTF-8, a control) is found exactly at every offset, with
 * every length of plain bytes around it, blocks and tail alike. */
Test(http_json_scan, string_stops_at_every_offset)
{
    static const char *const mids[] = {"\\n", "\xc3\xa9", "\x01", "\\q",
                                       "\xc3"};
    static const char *const outs[] = {"\n", "\xc3\xa9", NULL, NULL, NULL};

    for (size_t m = 0; m < sizeof(mids) / sizeof(mids[0]); m++) {
        for (size_t k = 0; k < 70; k++) {
            for (size_t t = 0; t < 40; t += 3) {
                char in[256], want[256], out[256];
                size_t n = 0, w = 0, len = 0;
                struct http_json j;

                in[n++] = '"';
                for (size_t i = 0; i < k; i++)
                    in[n++] = want[w++] = (char)('a' + i % 26);
                memcpy(in + n, mids[m], strlen(mids[m]));
                n += strlen(mids[m]);
                if (outs[m] != NULL) {
                    memcpy(want + w, outs[m], strlen(outs[m]));
                    w += strlen(outs[m]);
                }
                for (size_t i = 0; i < t; i++)
                    in[n++] = want[w++] = (char)('A' + i % 26);
                in[n++] = '"';
                http_json_init(&j, in, n);
                if (outs[m] != NULL) {
                    cr_assert_eq(http_json_string(&j, out, &len), 0,
                                 "m %zu k %zu t %zu", m, k, t);
                    cr_assert_eq(len, w);
                    cr_assert_eq(memcmp(out, want, w), 0);
                    cr_assert_eq(j.p, in + n);
                } else {
                    cr_assert_eq(http_json_string(&j, out, &len), -EINVAL,
                                 "m %zu k %zu t %zu", m, k, t);
                    cr_assert_eq(j.p, in + 1 + k, "m %zu k %zu t %zu", m, k, t);
                }
            }
        }
    }
}
