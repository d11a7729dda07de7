/*
 * test_parse.c - http/parse_*.c: every error path of the push scanner and
 * the json-c control parsers, and what they fill on success.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/parse.h"

#define S(lit) lit, sizeof(lit) - 1

static void
expect_err(const struct http_error *err, unsigned status, const char *code,
           const char *msg)
{
    cr_assert_eq(err->status, status, "status %u (%s)", err->status, err->msg);
    cr_assert_str_eq(err->code, code);
    cr_assert(strstr(err->msg, msg) != NULL, "'%s' lacks '%s'", err->msg, msg);
}

static void
str_eq(struct http_str s, const char *want)
{
    cr_assert_eq(s.len, strlen(want), "'%.*s' vs '%s'", (int)s.len, s.ptr,
                 want);
    cr_assert(memcmp(s.ptr, want, s.len) == 0, "'%.*s' vs '%s'", (int)s.len,
              s.ptr, want);
}

/* push_fails - the body is refused with 400 and a sentence holding msg. */
static void
push_fails(const char *body, const char *msg)
{
    struct http_push p;
    struct http_error err;

    cr_assert_eq(http_parse_push(body, strlen(body), &p, &err), -EINVAL,
                 "accepted: %s", body);
    expect_err(&err, 400, "ephemeral_bad_request", msg);
    http_push_free(&p);
}

Test(http_parse_push, fills_names_and_payload_spans)
{
    const char *body = " {\"queue\":\"q\\u00e9\", \"partition\" : \"room:7\","
                       "\"messages\":[{\"payload\": {\"a\" : [1, 2]} },"
                       "{\"id\": 1, \"payload\":\"x\"},{\"payload\":null}],"
                       "\"extra\": {\"ignored\": [true]}} \n";
    struct http_push p;
    struct http_error err;

    cr_assert_eq(http_parse_push(body, strlen(body), &p, &err), 0, "%s",
                 err.msg);
    str_eq(p.queue, "q\xc3\xa9");
    cr_assert(p.has_partition);
    str_eq(p.partition, "room:7");
    cr_assert_eq(p.n, 3);
    str_eq(p.payloads[0], "{\"a\" : [1, 2]}");
    str_eq(p.payloads[1], "\"x\"");
    str_eq(p.payloads[2], "null");
    cr_assert_eq(p.queue.ptr[p.queue.len], '\0');
    http_push_free(&p);
}

Test(http_parse_push, empty_list_and_null_partition)
{
    struct http_push p;
    struct http_error err;

    cr_assert_eq(http_parse_push(S("{\"queue\":\"q\",\"partition\":null,"
                                   "\"messages\":[]}"),
                                 &p, &err),
                 0);
    cr_assert_eq(p.n, 0);
    cr_assert(!p.has_partition);
    http_push_free(&p);
}

Test(http_parse_push, repeated_key_keeps_the_last_value)
{
    struct http_push p;
    struct http_error err;

    cr_assert_eq(http_parse_push(S("{\"queue\":5,\"messages\":{},"
                                   "\"queue\":\"b\",\"messages\":"
                                   "[{\"payload\":1}]}"),
                                 &p, &err),
                 0, "%s", err.msg);
    str_eq(p.queue, "b");
    cr_assert_eq(p.n, 1);
    http_push_free(&p);
}

Test(http_parse_push, malformed_json_names_the_byte)
{
    push_fails("", "malformed JSON at byte 0");
    push_fails("{", "malformed JSON at byte 1");
    push_fails("{\"queue\":\"q\",\"messages\":[]} x",
               "malformed JSON at byte 28: unexpected data");
    push_fails("{\"queue\":\"q\",\"messages\":[{\"payload\":01}]}",
               "invalid number");
    push_fails("{\"queue\":\"a\tb\",\"messages\":[]}",
               "control character in string");
    push_fails("{\"queue\":\"\xc0\xaf\",\"messages\":[]}", "invalid UTF-8");
    push_fails("{\"queue\":\"q\",\"messages\":[{\"payload\":[1,]}]}",
               "malformed JSON");
    push_fails("{\"queue\":\"q\",\"messages\":[{\"payload\":NaN}]}",
               "malformed JSON");
    /* a shape error comes only after the whole body is known valid */
    push_fails("{\"queue\":5,\"messages\":[tru]}", "malformed JSON");
}

/* Raw bytes that are not UTF-8 make the body not JSON (RFC 8259 §8.1):
 * malformed JSON, as any other, and the sentence names the field they are
 * in (SPEC §2).  A lone surrogate escape is valid JSON and a bad name:
 * that is invalid_name, judged later (test_names.c, worker). */
Test(http_parse_push, invalid_utf8_in_a_name_names_the_field)
{
    push_fails("{\"queue\":\"a\xff"
               "b\",\"messages\":[]}",
               "malformed JSON at byte 11: invalid UTF-8 in field 'queue'");
    push_fails("{\"queue\":\"q\",\"partition\":\"\xc0\xaf\","
               "\"messages\":[]}",
               "malformed JSON at byte 26: invalid UTF-8 in field 'partition'");
}

Test(http_parse_push, shape_errors_name_the_field)
{
    push_fails("[]", "the body must be a JSON object");
    push_fails("{\"messages\":[]}", "field 'queue' is required");
    push_fails("{\"queue\":null,\"messages\":[]}", "field 'queue' is required");
    push_fails("{\"queue\":5,\"messages\":[]}",
               "field 'queue' must be a string");
    push_fails("{\"queue\":\"q\",\"partition\":[],\"messages\":[]}",
               "field 'partition' must be a string");
    push_fails("{\"queue\":\"q\"}", "field 'messages' is required");
    push_fails("{\"queue\":\"q\",\"messages\":{}}",
               "field 'messages' must be an array");
    push_fails("{\"queue\":\"q\",\"messages\":[{\"payload\":1},2]}",
               "field 'messages[1]' must be an object");
    push_fails("{\"queue\":\"q\",\"messages\":[{\"payload\":1},{\"pay\":1}]}",
               "field 'messages[1].payload' is required");
}

/* many - a push body with n messages. */
static char *
many(unsigned n, size_t *len)
{
    char *b = malloc(64 + (size_t)n * 24);
    size_t o = 0;
    unsigned i;

    o += (size_t)sprintf(b, "{\"queue\":\"q\",\"messages\":[");
    for (i = 0; i < n; i++)
        o += (size_t)sprintf(b + o, "%s{\"payload\":%u}", i ? "," : "", i);
    o += (size_t)sprintf(b + o, "]}");
    *len = o;
    return b;
}

Test(http_parse_push, ten_thousand_messages_and_no_more)
{
    struct http_push p;
    struct http_error err;
    size_t len;
    char *b = many(HTTP_BATCH_MAX, &len);

    cr_assert_eq(http_parse_push(b, len, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(p.n, HTTP_BATCH_MAX);
    str_eq(p.payloads[9999], "9999");
    http_push_free(&p);
    free(b);
    b = many(HTTP_BATCH_MAX + 1, &len);
    cr_assert_eq(http_parse_push(b, len, &p, &err), -EINVAL);
    expect_err(&err, 400, "ephemeral_bad_request",
               "field 'messages' holds more than 10000 messages");
    http_push_free(&p);
    free(b);
}

/* ---- ack ---------------------------------------------------------------- */

static void
ack_fails(const char *body, const char *msg)
{
    struct http_ack a;
    struct http_error err;

    cr_assert_eq(http_parse_ack(body, strlen(body), &a, &err), -EINVAL,
                 "accepted: %s", body);
    expect_err(&err, 400, "ephemeral_bad_request", msg);
    http_ack_free(&a);
}

Test(http_parse_ack, entries_statuses_and_popped_messages)
{
    const char *body =
        "{\"queue\":\"q\",\"group\":\"g\",\"acks\":[\"e:1:p:1\","
        "{\"id\":\"e:1:p:2\",\"status\":\"retry\",\"attempts\":2},"
        "{\"id\":\"e:1:p:3\",\"status\":\"failed\"},"
        "{\"id\":\"e:1:p:4\",\"status\":\"ok\"},"
        "{\"id\":\"e:1:p:5\",\"status\":\"success\"},"
        "{\"id\":\"e:1:p:6\",\"status\":\"acked\"},"
        "{\"id\":\"e:1:p:7\",\"status\":\"completed\"},"
        "{\"id\":\"e:1:p:8\",\"status\":\"nope\"},"
        "{\"id\":\"e:1:p:9\",\"partition\":\"p\",\"payload\":{\"x\":[1]},"
        "\"attempts\":1}]}";
    static const enum http_ack_status want[] = {
        HTTP_ACK_COMPLETED, HTTP_ACK_RETRY,     HTTP_ACK_FAILED,
        HTTP_ACK_COMPLETED, HTTP_ACK_COMPLETED, HTTP_ACK_COMPLETED,
        HTTP_ACK_COMPLETED, HTTP_ACK_FAILED,    HTTP_ACK_COMPLETED};
    struct http_ack a;
    struct http_error err;
    char id[32];
    unsigned i;

    cr_assert_eq(http_parse_ack(body, strlen(body), &a, &err), 0, "%s",
                 err.msg);
    str_eq(a.queue, "q");
    cr_assert(a.has_group);
    str_eq(a.group, "g");
    cr_assert_eq(a.n, 9);
    for (i = 0; i < a.n; i++) {
        snprintf(id, sizeof(id), "e:1:p:%u", i + 1);
        str_eq(a.entries[i].id, id);
        cr_assert_eq(a.entries[i].status, want[i], "entry %u", i);
    }
    cr_assert(!a.entries[0].has_attempts);
    cr_assert(a.entries[1].has_attempts);
    cr_assert_eq(a.entries[1].attempts, 2);
    cr_assert(a.entries[8].has_attempts);
    cr_assert_eq(a.entries[8].attempts, 1);
    http_ack_free(&a);
}

Test(http_parse_ack, messages_is_an_alias_and_group_is_optional)
{
    struct http_ack a;
    struct http_error err;

    cr_assert_eq(http_parse_ack(S("{\"queue\":\"q\",\"group\":null,"
                                  "\"messages\":[\"x\"]}"),
                                &a, &err),
                 0, "%s", err.msg);
    cr_assert(!a.has_group);
    cr_assert_eq(a.n, 1);
    str_eq(a.entries[0].id, "x");
    http_ack_free(&a);
}

Test(http_parse_ack, errors_name_the_field)
{
    ack_fails("{\"queue\":\"q\",\"acks\":[}", "malformed JSON");
    ack_fails("{\"queue\":\"q\",\"acks\":[]} x", "malformed JSON");
    ack_fails("[1]", "the body must be a JSON object");
    ack_fails("{\"acks\":[]}", "field 'queue' is required");
    ack_fails("{\"queue\":1,\"acks\":[]}", "field 'queue' must be a string");
    ack_fails("{\"queue\":\"q\",\"group\":[],\"acks\":[]}",
              "field 'group' must be a string");
    ack_fails("{\"queue\":\"q\"}", "field 'acks' is required");
    ack_fails("{\"queue\":\"q\",\"acks\":{}}", "field 'acks' must be an array");
    ack_fails("{\"queue\":\"q\",\"acks\":[5]}",
              "field 'acks[0]' must be an id string or an object");
    ack_fails("{\"queue\":\"q\",\"messages\":[\"a\",{}]}",
              "field 'messages[1].id' is required");
    ack_fails("{\"queue\":\"q\",\"acks\":[{\"id\":7}]}",
              "field 'acks[0].id' must be a string");
    ack_fails("{\"queue\":\"q\",\"acks\":[{\"id\":\"a\",\"status\":1}]}",
              "field 'acks[0].status' must be a string");
    ack_fails("{\"queue\":\"q\",\"acks\":[{\"id\":\"a\",\"attempts\":-1}]}",
              "field 'acks[0].attempts' must be an integer from 0 to");
    ack_fails("{\"queue\":\"q\",\"acks\":[{\"id\":\"a\",\"attempts\":1.5}]}",
              "field 'acks[0].attempts' must be an integer");
}

Test(http_parse_ack, more_than_ten_thousand_entries_is_refused)
{
    size_t n = HTTP_BATCH_MAX + 1, o = 0, i;
    char *b = malloc(64 + n * 4);
    struct http_ack a;
    struct http_error err;

    o += (size_t)sprintf(b, "{\"queue\":\"q\",\"acks\":[");
    for (i = 0; i < n; i++)
        o += (size_t)sprintf(b + o, "%s\"x\"", i ? "," : "");
    o += (size_t)sprintf(b + o, "]}");
    cr_assert_eq(http_parse_ack(b, o, &a, &err), -EINVAL);
    expect_err(&err, 400, "ephemeral_bad_request", "more than 10000");
    http_ack_free(&a);
    free(b);
}

/* ---- extend ------------------------------------------------------------- */

static void
extend_fails(const char *body, const char *msg)
{
    struct http_extend e;
    struct http_error err;

    cr_assert_eq(http_parse_extend(body, strlen(body), &e, &err), -EINVAL,
                 "accepted: %s", body);
    expect_err(&err, 400, "ephemeral_bad_request", msg);
    http_extend_free(&e);
}

Test(http_parse_extend, fills_entries)
{
    struct http_extend e;
    struct http_error err;

    cr_assert_eq(http_parse_extend(S("{\"queue\":\"q\",\"messages\":["
                                     "{\"id\":\"a\",\"seconds\":30},"
                                     "{\"id\":\"b\",\"attempts\":3,"
                                     "\"seconds\":0}]}"),
                                   &e, &err),
                 0, "%s", err.msg);
    cr_assert(!e.has_group);
    cr_assert_eq(e.n, 2);
    str_eq(e.entries[0].id, "a");
    cr_assert_eq(e.entries[0].seconds, 30);
    cr_assert(!e.entries[0].has_attempts);
    cr_assert(e.entries[1].has_attempts);
    cr_assert_eq(e.entries[1].attempts, 3);
    cr_assert_eq(e.entries[1].seconds, 0);
    http_extend_free(&e);
}

Test(http_parse_extend, errors_name_the_field)
{
    extend_fails("{", "malformed JSON");
    extend_fails("{\"messages\":[]}", "field 'queue' is required");
    extend_fails("{\"queue\":\"q\"}", "field 'messages' is required");
    extend_fails("{\"queue\":\"q\",\"messages\":[\"a\"]}",
                 "field 'messages[0]' must be an object");
    extend_fails("{\"queue\":\"q\",\"messages\":[{\"seconds\":1}]}",
                 "field 'messages[0].id' is required");
    extend_fails("{\"queue\":\"q\",\"messages\":[{\"id\":\"a\"}]}",
                 "field 'messages[0].seconds' is required");
    extend_fails("{\"queue\":\"q\",\"messages\":[{\"id\":\"a\","
                 "\"seconds\":-5}]}",
                 "field 'messages[0].seconds' must be an integer");
    extend_fails("{\"queue\":\"q\",\"messages\":[{\"id\":\"a\","
                 "\"seconds\":\"5\"}]}",
                 "field 'messages[0].seconds' must be an integer");
    extend_fails("{\"queue\":\"q\",\"messages\":[{\"id\":\"a\","
                 "\"seconds\":5,\"attempts\":4294967296}]}",
                 "field 'messages[0].attempts' must be an integer");
}

/* ---- reset -------------------------------------------------------------- */

Test(http_parse_reset, queue_only)
{
    struct http_reset r;
    struct http_error err;

    cr_assert_eq(http_parse_reset(S("{\"queue\":\"inbox/7\"}"), &r, &err), 0);
    str_eq(r.queue, "inbox/7");
    http_reset_free(&r);
    cr_assert_eq(http_parse_reset(S("{}"), &r, &err), -EINVAL);
    expect_err(&err, 400, "ephemeral_bad_request", "field 'queue' is required");
    http_reset_free(&r);
    cr_assert_eq(http_parse_reset(S("{\"queue\":true}"), &r, &err), -EINVAL);
    expect_err(&err, 400, "ephemeral_bad_request",
               "field 'queue' must be a string");
    http_reset_free(&r);
    cr_assert_eq(http_parse_reset(S("\"q\""), &r, &err), -EINVAL);
    expect_err(&err, 400, "ephemeral_bad_request", "must be a JSON object");
    http_reset_free(&r);
}

/* json-c reads a lone surrogate escape as U+FFFD: "\ud800" and "\udc00"
 * would name one queue.  The json-c bodies refuse one; pairs, and escaped
 * backslashes before a 'u', pass. */
Test(http_parse_reset, a_lone_surrogate_escape_is_refused)
{
    static const char *const bad[] = {
        "{\"queue\":\"\\ud800\"}",         "{\"queue\":\"\\udc00x\"}",
        "{\"queue\":\"a\\ud800\\u0041\"}", "{\"queue\":\"\\udbff\\ud800\"}",
        "{\"queue\":\"\\uDFFF\"}",
    };
    static const char *const good[] = {
        "{\"queue\":\"\\ud834\\udd1e\"}",
        "{\"queue\":\"\\\\ud800\"}",
        "{\"queue\":\"\\u00e9\"}",
    };
    struct http_reset r;
    struct http_error err;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(http_parse_reset(bad[i], strlen(bad[i]), &r, &err),
                     -EINVAL, "%s", bad[i]);
        expect_err(&err, 400, "ephemeral_bad_request", "surrogate");
        http_reset_free(&r);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        cr_assert_eq(http_parse_reset(good[i], strlen(good[i]), &r, &err), 0,
                     "%s", good[i]);
        http_reset_free(&r);
    }
}

/* ---- configure ---------------------------------------------------------- */

static void
configure_fails(const char *body, const char *code, const char *msg)
{
    struct http_configure c;
    struct http_error err;

    cr_assert_eq(http_parse_configure(body, strlen(body), &c, &err), -EINVAL,
                 "accepted: %s", body);
    expect_err(&err, 400, code, msg);
    http_configure_free(&c);
}

/* json-c's strict mode lets through what the RFC does not; the json-c
 * bodies refuse it as the push scanner does, naming the byte, so no name
 * read from one is echoed as invalid UTF-8 (found by fuzz_configure). */
Test(http_parse_configure, what_json_c_lets_through_is_refused)
{
    static const char *const lax[] = {
        "{\"queue\":\"\xc1\x8a\"}",     /* overlong UTF-8 */
        "{\"queue\":\"\xed\xa0\x80\"}", /* a surrogate as UTF-8 */
        "{\"queue\":\"a\tb\"}",         /* a raw control character */
        "{\"queue\":\"q\",\"x\":1.}",   /* a number the RFC has not */
    };
    struct http_reset r;
    struct http_error err;

    for (size_t i = 0; i < sizeof(lax) / sizeof(lax[0]); i++) {
        cr_assert_eq(http_parse_reset(lax[i], strlen(lax[i]), &r, &err),
                     -EINVAL, "%s", lax[i]);
        expect_err(&err, 400, "ephemeral_bad_request",
                   "malformed JSON at byte");
        http_reset_free(&r);
    }
    configure_fails("{\"queue\":\"q\",\"options\":{\"window\xc1\x8a\":1}}",
                    "ephemeral_bad_request", "invalid UTF-8");
}

Test(http_parse_configure, every_option_and_its_presence_bit)
{
    struct http_configure c;
    struct http_error err;

    cr_assert_eq(
        http_parse_configure(
            S("{\"queue\":\"q\",\"options\":{\"maxLength\":100,"
              "\"maxBytes\":1048576,\"policy\":\"dropOldest\","
              "\"windowBuffer\":{\"ms\":50,\"count\":10},\"ttlSeconds\":60,"
              "\"leaseSeconds\":15,\"retryLimit\":3}}"),
            &c, &err),
        0, "%s", err.msg);
    str_eq(c.queue, "q");
    cr_assert_eq(c.present, HTTP_OPT_MAX_LENGTH | HTTP_OPT_MAX_BYTES |
                                HTTP_OPT_POLICY | HTTP_OPT_WINDOW_BUFFER |
                                HTTP_OPT_TTL_SECONDS | HTTP_OPT_LEASE_SECONDS |
                                HTTP_OPT_RETRY_LIMIT);
    cr_assert_eq(c.max_length, 100);
    cr_assert_eq(c.max_bytes, 1048576);
    cr_assert_eq(c.policy, HTTP_POLICY_DROP_OLDEST);
    cr_assert_eq(c.window_ms, 50);
    cr_assert_eq(c.window_count, 10);
    cr_assert_eq(c.ttl_seconds, 60);
    cr_assert_eq(c.lease_seconds, 15);
    cr_assert_eq(c.retry_limit, 3);
    http_configure_free(&c);
}

Test(http_parse_configure, options_are_required_and_absent_ones_set_no_bits)
{
    struct http_configure c;
    struct http_error err;

    configure_fails("{\"queue\":\"q\"}", "ephemeral_bad_request",
                    "field 'options' is required");
    configure_fails("{\"queue\":\"q\",\"options\":null}",
                    "ephemeral_bad_request", "field 'options' is required");
    cr_assert_eq(
        http_parse_configure(S("{\"queue\":\"q\",\"options\":{}}"), &c, &err),
        0);
    cr_assert_eq(c.present, 0);
    http_configure_free(&c);
    cr_assert_eq(http_parse_configure(S("{\"queue\":\"q\",\"options\":{"
                                        "\"policy\":\"reject\"}}"),
                                      &c, &err),
                 0);
    cr_assert_eq(c.present, HTTP_OPT_POLICY);
    cr_assert_eq(c.policy, HTTP_POLICY_REJECT);
    http_configure_free(&c);
}

Test(http_parse_configure, renamed_body_has_one_queue_the_new_name)
{
    static const char in[] = "{\"queue\":\"q\",\"queue\":\"r\",\"options\":"
                             "{\"maxLength\":3}}";
    struct http_buf out = {0};

    cr_assert_eq(http_configure_renamed(in, strlen(in), "t\x1fq", 3, &out), 0);
    cr_assert_str_eq(out.data, "{\"queue\":\"t\\u001fq\",\"options\":{"
                               "\"maxLength\":3}}");
    http_buf_free(&out);
    cr_assert_eq(http_configure_renamed("{", 1, "q", 1, &out), -ENOMEM);
}

Test(http_parse_configure, errors_name_the_option)
{
    configure_fails("{\"queue\":\"q\",\"options\":{\"maxLenght\":5}}",
                    "unknown_option", "unknown option 'maxLenght'");
    configure_fails("{\"queue\":\"q\",\"options\":{\"windowBuffer\":"
                    "{\"size\":5}}}",
                    "unknown_option", "unknown option 'windowBuffer.size'");
    configure_fails("{\"queue\":\"q\",\"options\":{\"maxLength\":\"5\"}}",
                    "invalid_option", "option 'maxLength' must be");
    configure_fails("{\"queue\":\"q\",\"options\":{\"maxBytes\":-1}}",
                    "invalid_option", "option 'maxBytes' must be");
    configure_fails("{\"queue\":\"q\",\"options\":{\"ttlSeconds\":1.5}}",
                    "invalid_option", "option 'ttlSeconds' must be");
    configure_fails("{\"queue\":\"q\",\"options\":{\"leaseSeconds\":null}}",
                    "invalid_option", "option 'leaseSeconds' must be");
    configure_fails("{\"queue\":\"q\",\"options\":{\"retryLimit\":true}}",
                    "invalid_option", "option 'retryLimit' must be");
    configure_fails("{\"queue\":\"q\",\"options\":{\"policy\":\"drop\"}}",
                    "invalid_option", "option 'policy' must be");
    configure_fails("{\"queue\":\"q\",\"options\":{\"policy\":1}}",
                    "invalid_option", "option 'policy' must be");
    configure_fails("{\"queue\":\"q\",\"options\":{\"windowBuffer\":5}}",
                    "invalid_option", "option 'windowBuffer' must be");
    configure_fails("{\"queue\":\"q\",\"options\":{\"windowBuffer\":"
                    "{\"ms\":-1}}}",
                    "invalid_option", "option 'windowBuffer.ms' must be");
    configure_fails("{\"queue\":\"q\",\"options\":[]}", "ephemeral_bad_request",
                    "field 'options' must be an object");
    configure_fails("{\"options\":{}}", "ephemeral_bad_request",
                    "field 'queue' is required");
    configure_fails("{\"queue\":\"q\",\"options\":{}", "ephemeral_bad_request",
                    "malformed JSON");
}
