/*
 * test_sse_parse.c - http/sse_parse.c: the WHATWG event stream rules on a
 * sample stream that uses each of them, the same events wherever the
 * stream is cut into feeds, and the bounds on lines and events.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/buf.h"
#include "http/sse_parse.h"

/* Every event as one line of text: "type|id|retry|data" with the data's
 * LFs written "\n", for comparing runs. */
static int
record(void *arg, const struct http_sse_parsed *ev)
{
    struct http_buf *b = arg;

    cr_assert_eq(strlen(ev->type), ev->type_len);
    cr_assert_eq(strlen(ev->id), ev->id_len);
    cr_assert_eq(ev->data[ev->data_len], '\0');
    http_buf_append(b, ev->type, ev->type_len);
    http_buf_printf(b, "|%s|%" PRId64 "|", ev->id, ev->retry_ms);
    for (size_t i = 0; i < ev->data_len; i++)
        http_buf_append(b, ev->data[i] == '\n' ? "\\n" : &ev->data[i],
                        ev->data[i] == '\n' ? 2 : 1);
    http_buf_append(b, "\n", 1);
    return 0;
}

/* The sample: a BOM, every line end, comments, fields without a colon or
 * with a second space, an id holding a NUL, bad retries, unknown fields, a
 * dispatch without data, and an event the stream's end cuts off. */
static const char sample[] = "\xef\xbb\xbf: a comment\r\n"
                             "retry: 3000\n"
                             "data: first\r\n"
                             "data:second\r"
                             "data\n"
                             "\n"
                             "id: 1\n"
                             "event: add\n"
                             "data:  two spaces\n"
                             "\r\n"
                             "id: 2\0x\n"
                             "data: three\n"
                             "unknown: field\n"
                             ":data: commented out\n"
                             "\r"
                             "id\n"
                             "event: gone\n"
                             "\n"
                             "retry: 12x\n"
                             "data: four\n"
                             "retry\n"
                             "\n"
                             "id: 4\n"
                             "data: five\r\r"
                             "id: 5\n"
                             "data: dropped at the end\n";

static const char sample_events[] = "message||3000|first\\nsecond\\n\n"
                                    "add|1|3000| two spaces\n"
                                    "message|1|3000|three\n"
                                    "message||3000|four\n"
                                    "message|4|3000|five\n";

/* run - feed s[0..n) cut at the cuts (ascending), recording into out;
 * returns the last feed's result and leaves the parser's last id in id. */
static int
run(const char *s, size_t n, const size_t *cuts, int ncuts, size_t max,
    struct http_buf *out, char *id, size_t idcap)
{
    struct http_sse_parser p;
    size_t at = 0;
    int rc = 0;

    http_sse_parse_init(&p, max);
    for (int i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : n;

        rc = http_sse_parse_feed(&p, s + at, to - at, record, out);
        at = to;
    }
    snprintf(id, idcap, "%s", http_sse_parse_last_id(&p, NULL));
    http_sse_parse_free(&p);
    return rc;
}

/* expect - the events and id of a run, as the whole sample gives them. */
static void
expect(const struct http_buf *out, const char *id, const char *what)
{
    cr_assert_str_eq(out->len ? out->data : "", sample_events, "%s", what);
    cr_assert_str_eq(id, "4", "%s", what);
}

Test(http_sse_parse, the_sample_gives_its_events)
{
    struct http_buf out = {0};
    char id[16];

    cr_assert_eq(
        run(sample, sizeof(sample) - 1, NULL, 0, 4096, &out, id, sizeof(id)),
        0);
    expect(&out, id, "whole");
    http_buf_free(&out);
}

Test(http_sse_parse, every_cut_gives_the_same_events)
{
    size_t n = sizeof(sample) - 1;

    for (size_t i = 0; i <= n; i++) {
        struct http_buf out = {0};
        char id[16], what[32];

        snprintf(what, sizeof(what), "cut at %zu", i);
        cr_assert_eq(run(sample, n, &i, 1, 4096, &out, id, sizeof(id)), 0);
        expect(&out, id, what);
        http_buf_free(&out);
    }
}

Test(http_sse_parse, every_two_cuts_give_the_same_events)
{
    size_t n = sizeof(sample) - 1;

    for (size_t i = 0; i <= n; i++)
        for (size_t j = i; j <= n; j++) {
            struct http_buf out = {0};
            size_t cuts[2] = {i, j};
            char id[16], what[48];

            snprintf(what, sizeof(what), "cuts at %zu and %zu", i, j);
            cr_assert_eq(run(sample, n, cuts, 2, 4096, &out, id, sizeof(id)),
                         0);
            expect(&out, id, what);
            http_buf_free(&out);
        }
}

Test(http_sse_parse, byte_by_byte_gives_the_same_events)
{
    size_t n = sizeof(sample) - 1, cuts[sizeof(sample)];
    struct http_buf out = {0};
    char id[16];

    for (size_t i = 0; i < n; i++)
        cuts[i] = i + 1;
    cr_assert_eq(run(sample, n, cuts, (int)n, 4096, &out, id, sizeof(id)), 0);
    expect(&out, id, "byte by byte");
    http_buf_free(&out);
}

/* One BOM only, and a start that merely looks like one is content. */
Test(http_sse_parse, only_one_whole_leading_bom_is_dropped)
{
    static const char two[] = "\xef\xbb\xbf\xef\xbb\xbf"
                              "data: a\n\n"
                              "data: b\n\n";
    static const char part[] = "\xef\xbb"
                               "data: a\n\n"
                               "data: b\n\n";
    struct http_buf out = {0};
    char id[16];

    run(two, sizeof(two) - 1, NULL, 0, 4096, &out, id, sizeof(id));
    cr_assert_str_eq(out.data, "message||-1|b\n");
    http_buf_free(&out);
    run(part, sizeof(part) - 1, NULL, 0, 4096, &out, id, sizeof(id));
    cr_assert_str_eq(out.data, "message||-1|b\n");
    http_buf_free(&out);
}

Test(http_sse_parse, keepalive_comments_give_nothing)
{
    static const char s[] = ": keepalive\n\n: keepalive\n\n";
    struct http_buf out = {0};
    char id[16];

    cr_assert_eq(run(s, sizeof(s) - 1, NULL, 0, 64, &out, id, sizeof(id)), 0);
    cr_assert_eq(out.len, 0);
    cr_assert_str_eq(id, "");
}

/* An id with no data still becomes the last event id at the blank line;
 * before it, the id is only pending. */
Test(http_sse_parse, an_id_counts_from_its_blank_line)
{
    struct http_sse_parser p;
    struct http_buf out = {0};
    size_t len;

    http_sse_parse_init(&p, 64);
    cr_assert_eq(
        http_sse_parse_feed(&p, "event: open\nid: c1\n", 19, record, &out), 0);
    cr_assert_str_eq(http_sse_parse_last_id(&p, &len), "");
    cr_assert_eq(len, 0);
    cr_assert_eq(http_sse_parse_feed(&p, "\n", 1, record, &out), 0);
    cr_assert_str_eq(http_sse_parse_last_id(&p, &len), "c1");
    cr_assert_eq(len, 2);
    cr_assert_eq(out.len, 0);
    cr_assert_eq(http_sse_parse_feed(&p, "retry: 250\n", 11, record, &out), 0);
    cr_assert_eq(http_sse_parse_retry_ms(&p), 250);
    http_sse_parse_free(&p);
}

/* A line of max bytes passes, one more fails, however it arrives, and the
 * failure sticks. */
Test(http_sse_parse, a_line_over_max_fails_and_stays_failed)
{
    static const char ok[] = "data: 0123456789\n\n"; /* 16 bytes a line */
    static const char big[] = "data: 0123456789a\n\n";
    size_t n = sizeof(big) - 1, cuts[sizeof(big)];
    struct http_sse_parser p;
    struct http_buf out = {0};
    char id[16];

    cr_assert_eq(run(ok, sizeof(ok) - 1, NULL, 0, 16, &out, id, sizeof(id)), 0);
    cr_assert_str_eq(out.data, "message||-1|0123456789\n");
    http_buf_free(&out);
    for (size_t i = 0; i < n; i++)
        cuts[i] = i + 1;
    cr_assert_eq(run(big, n, NULL, 0, 16, &out, id, sizeof(id)), -EMSGSIZE);
    cr_assert_eq(run(big, n, cuts, (int)n, 16, &out, id, sizeof(id)),
                 -EMSGSIZE);
    cr_assert_eq(out.len, 0);
    /* An unended line fails too, once it passes max. */
    http_sse_parse_init(&p, 16);
    cr_assert_eq(http_sse_parse_feed(&p, big, 17, record, &out), -EMSGSIZE);
    cr_assert_eq(http_sse_parse_feed(&p, "\n\ndata: x\n\n", 11, record, &out),
                 -EMSGSIZE);
    cr_assert_eq(out.len, 0);
    http_sse_parse_free(&p);
}

/* The data of one event is bounded too, lines each within max or not. */
Test(http_sse_parse, an_event_over_max_fails)
{
    static const char fits[] = "data: 0123456\ndata: 0123456\n\n";
    static const char over[] = "data: 0123456\ndata: 0123456\ndata: 0\n\n";
    struct http_buf out = {0};
    char id[16];

    cr_assert_eq(run(fits, sizeof(fits) - 1, NULL, 0, 16, &out, id, sizeof(id)),
                 0);
    cr_assert_str_eq(out.data, "message||-1|0123456\\n0123456\n");
    http_buf_free(&out);
    cr_assert_eq(run(over, sizeof(over) - 1, NULL, 0, 16, &out, id, sizeof(id)),
                 -EMSGSIZE);
    cr_assert_eq(out.len, 0);
}

static int
stop_at_first(void *arg, const struct http_sse_parsed *ev)
{
    (*(int *)arg)++;
    (void)ev;
    return 7;
}

Test(http_sse_parse, a_callback_stops_the_feed)
{
    static const char s[] = "data: a\n\ndata: b\n\n";
    struct http_sse_parser p;
    int calls = 0;

    http_sse_parse_init(&p, 64);
    cr_assert_eq(
        http_sse_parse_feed(&p, s, sizeof(s) - 1, stop_at_first, &calls), 7);
    cr_assert_eq(calls, 1);
    cr_assert_eq(
        http_sse_parse_feed(&p, s, sizeof(s) - 1, stop_at_first, &calls), 7);
    cr_assert_eq(calls, 1);
    http_sse_parse_free(&p);
}

/* retry takes digits only, saturating instead of wrapping. */
Test(http_sse_parse, retry_wants_digits_and_saturates)
{
    static const char s[] = "retry: 99999999999999999999999\n"
                            "retry: -5\n"
                            "retry:  7\n";
    struct http_sse_parser p;

    http_sse_parse_init(&p, 64);
    cr_assert_eq(http_sse_parse_feed(&p, s, sizeof(s) - 1, record, NULL), 0);
    cr_assert_eq(http_sse_parse_retry_ms(&p), INT64_MAX);
    http_sse_parse_free(&p);
}
