/*
 * test_sse.c - http/sse.c: events, comments and retry in the
 * text/event-stream format, a message's data on one line whatever line
 * ends its payload held, and that data valid JSON.
 */
#include <string.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "http/buf.h"
#include "http/sse.h"

Test(http_sse, an_event_has_its_id_name_and_data)
{
    struct http_buf b = {0};

    cr_assert_eq(http_sse_event(&b, "1abc", "open", "{\"subs\":2}", 10), 0);
    cr_assert_str_eq(b.data, "id: 1abc\nevent: open\ndata: {\"subs\":2}\n\n");
    http_buf_free(&b);
    cr_assert_eq(http_sse_event(&b, NULL, "error", "a\r\nb", 4), 0);
    cr_assert_str_eq(b.data, "event: error\ndata: a  b\n\n");
    http_buf_free(&b);
}

Test(http_sse, comments_and_retry)
{
    struct http_buf b = {0};

    http_sse_comment(&b, "keepalive");
    http_sse_retry(&b, 1000);
    cr_assert_str_eq(b.data, ": keepalive\n\nretry: 1000\n\n");
    http_buf_free(&b);
}

Test(http_sse, a_message_is_one_line_of_json)
{
    static const char payload[] = "{\n  \"a\": [1,\r\n 2],\"s\":\"x\\ny\"\n}";
    struct http_sse_msg m = {
        .queue = "room \"7\"",
        .queue_len = 8,
        .part = "p:1",
        .part_len = 3,
        .incarnation = 0xab,
        .seq = 42,
        .payload = payload,
        .payload_len = sizeof(payload) - 1,
        .reply_to = "inbox/1",
        .reply_len = 7,
    };
    struct http_buf b = {0};
    const char *data, *end;
    struct json_object *o, *v;

    cr_assert_eq(http_sse_message(&b, "1cur", &m), 0);
    cr_assert(strncmp(b.data, "id: 1cur\nevent: message\ndata: ", 30) == 0,
              "%s", b.data);
    data = b.data + 30;
    end = strchr(data, '\n');
    cr_assert_not_null(end);
    cr_assert_str_eq(end, "\n\n", "one data line, then the blank line");
    o = json_tokener_parse(data);
    cr_assert_not_null(o, "%s", data);
    cr_assert(json_object_object_get_ex(o, "queue", &v));
    cr_assert_str_eq(json_object_get_string(v), "room \"7\"");
    cr_assert(json_object_object_get_ex(o, "partition", &v));
    cr_assert_str_eq(json_object_get_string(v), "p:1");
    cr_assert(json_object_object_get_ex(o, "id", &v));
    cr_assert_str_eq(json_object_get_string(v), "e:00000000000000ab:p:1:42");
    cr_assert(json_object_object_get_ex(o, "replyTo", &v));
    cr_assert_str_eq(json_object_get_string(v), "inbox/1");
    cr_assert(json_object_object_get_ex(o, "payload", &v));
    cr_assert_str_eq(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
                     "{\"a\":[1,2],\"s\":\"x\\ny\"}");
    json_object_put(o);
    http_buf_free(&b);
    m.reply_to = NULL;
    cr_assert_eq(http_sse_message(&b, "1cur", &m), 0);
    cr_assert_null(strstr(b.data, "replyTo"));
    http_buf_free(&b);
}
