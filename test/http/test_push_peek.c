/*
 * test_push_peek.c - http/push_peek.c: the queue and partition of the plain
 * push bodies it reads, every shape it leaves to the full parse, and the
 * one promise it makes: where it and http_parse_push both accept a body,
 * they name the same queue and partition.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/errors.h"
#include "http/parse.h"
#include "http/push_peek.h"

#define S(lit) lit, sizeof(lit) - 1

/* agrees - when the full parse accepts body too, it names what the peek
 * found. */
static void
agrees(const char *body, const struct http_push_peek *pk)
{
    struct http_push p;
    struct http_error err;

    if (http_parse_push(body, strlen(body), &p, &err) != 0)
        return;
    cr_assert_eq(p.queue.len, pk->queue_len, "%s", body);
    cr_assert(memcmp(p.queue.ptr, pk->queue, pk->queue_len) == 0, "%s", body);
    cr_assert_eq(p.has_partition, pk->partition != NULL, "%s", body);
    if (p.has_partition) {
        cr_assert_eq(p.partition.len, pk->partition_len, "%s", body);
        cr_assert(memcmp(p.partition.ptr, pk->partition, pk->partition_len) ==
                      0,
                  "%s", body);
    }
    http_push_free(&p);
}

/* reads - the peek takes body and finds queue and part (NULL: none). */
static void
reads(const char *body, const char *queue, const char *part)
{
    struct http_push_peek pk;

    cr_assert_eq(http_push_peek(body, strlen(body), &pk), 0, "%s", body);
    cr_assert_eq(pk.queue_len, strlen(queue), "%s", body);
    cr_assert(memcmp(pk.queue, queue, pk.queue_len) == 0, "%s", body);
    if (part == NULL) {
        cr_assert_null(pk.partition, "%s", body);
    } else {
        cr_assert_not_null(pk.partition, "%s", body);
        cr_assert_eq(pk.partition_len, strlen(part), "%s", body);
        cr_assert(memcmp(pk.partition, part, pk.partition_len) == 0, "%s",
                  body);
    }
    agrees(body, &pk);
}

/* leaves - the peek does not answer for body: the caller parses it. */
static void
leaves(const char *body)
{
    struct http_push_peek pk;

    cr_assert_eq(http_push_peek(body, strlen(body), &pk), -EINVAL, "%s", body);
}

Test(push_peek, reads_the_plain_shape)
{
    reads("{\"queue\":\"q\",\"partition\":\"p1\",\"messages\":"
          "[{\"payload\":\"a\"},{\"payload\":2}]}",
          "q", "p1");
    reads(" {\n \"queue\" : \"orders\" ,\t\"messages\" : [ ] } \r\n", "orders",
          NULL);
    reads("{\"messages\":[{\"payload\":null}],\"partition\":\"p\","
          "\"queue\":\"q\"}",
          "q", "p");
    reads("{\"queue\":\"caf\xc3\xa9\",\"messages\":[]}", "caf\xc3\xa9", NULL);
}

Test(push_peek, skips_payloads_by_where_they_end)
{
    /* brackets and quotes inside strings, escapes, nesting, numbers */
    reads("{\"queue\":\"q\",\"messages\":["
          "{\"payload\":\"]}\\\"{[\"},"
          "{\"payload\":\"\\\\\"},"
          "{\"payload\":{\"a\":[1,{\"b\":\"}\"}],\"queue\":\"x\"}},"
          "{\"payload\":[[],[[]],{}]},"
          "{\"payload\":-1.5e+3},{\"payload\":true},{\"payload\":false}"
          "],\"partition\":\"p\"}",
          "q", "p");
    /* not checked: the owner's parse finds these */
    reads("{\"queue\":\"q\",\"messages\":[{\"payload\":tru}]}", "q", NULL);
    reads("{\"queue\":\"q\",\"messages\":[{\"payload\":\"\xff\x01\"}]}", "q",
          NULL);
    reads("{\"queue\":\"q\",\"messages\":[{\"payload\":{\"a\":}}]}", "q", NULL);
}

Test(push_peek, leaves_every_other_shape_to_the_parse)
{
    leaves("");
    leaves("[]");
    leaves("{}");
    leaves("{\"queue\":\"q\"}"); /* no messages */
    leaves("{\"messages\":[]}"); /* no queue */
    leaves("{\"queue\":\"q\",\"messages\":[{\"payload\":1,\"key\":\"k\"}]}");
    leaves("{\"queue\":\"q\",\"messages\":[{\"key\":\"k\",\"payload\":1}]}");
    leaves("{\"queue\":\"q\",\"messages\":[{\"payload\":1,\"delayMs\":5}]}");
    leaves("{\"queue\":\"q\",\"messages\":[{}]}");
    leaves("{\"queue\":\"q\",\"messages\":[1]}");
    leaves("{\"queue\":\"q\",\"messages\":null}");
    leaves("{\"queue\":\"q\",\"messages\":{}}");
    leaves("{\"queue\":\"q\",\"queue\":\"r\",\"messages\":[]}");
    leaves("{\"queue\":\"q\",\"messages\":[],\"messages\":[]}");
    leaves("{\"queue\":\"q\",\"partition\":null,\"messages\":[]}");
    leaves("{\"queue\":\"q\",\"partition\":7,\"messages\":[]}");
    leaves("{\"queue\":null,\"messages\":[]}");
    leaves("{\"queue\":\"q\\u0041\",\"messages\":[]}");
    leaves("{\"qu\\u0065ue\":\"q\",\"messages\":[]}");
    leaves("{\"queue\":\"q\",\"messages\":[],\"extra\":1}");
    leaves("{\"queue\":\"q\",\"messages\":[]} x");
    leaves("{\"queue\":\"q\",\"messages\":[]},");
    leaves("{\"queue\":\"q\",\"messages\":[]");
    leaves("{\"queue\":\"q\",\"messages\":[{\"payload\":\"open]}");
    leaves("{\"queue\":\"q\",\"messages\":[{\"payload\":[1,2}]}");
    leaves("{\"queue\":\"q\",\"messages\":[{\"payload\":}]}");
    leaves("{\"queue\":\"q\",\"messages\":[{\"payload\":1},]}");
    leaves("{\"queue\":\"q\",\"messages\":[{\"payload\":1}],}");
    leaves("{\"queue\":\"q\" \"messages\":[]}");
}

Test(push_peek, reads_only_within_the_body)
{
    /* the bytes past len are not the body's: a peek that looked there
     * would find the closing quote and bracket */
    static const char buf[] = "{\"queue\":\"q\",\"messages\":[{\"payload\":"
                              "\"abc\"}]}";
    struct http_push_peek pk;

    for (size_t len = 0; len < sizeof(buf) - 1; len++) {
        char *cut = malloc(len ? len : 1);

        cr_assert_not_null(cut);
        memcpy(cut, buf, len);
        cr_assert_eq(http_push_peek(cut, len, &pk), -EINVAL, "len %zu", len);
        free(cut);
    }
    cr_assert_eq(http_push_peek(buf, sizeof(buf) - 1, &pk), 0);
    cr_assert_eq(http_push_peek(NULL, 0, &pk), -EINVAL);
}

/* head - the head peek of body finds queue and part (NULL: none). */
static void
head(const char *body, const char *queue, const char *part)
{
    struct http_push_peek pk;

    cr_assert_eq(http_push_peek_head(body, strlen(body), &pk), 0, "%s", body);
    cr_assert_eq(pk.queue_len, strlen(queue), "%s", body);
    cr_assert(memcmp(pk.queue, queue, pk.queue_len) == 0, "%s", body);
    cr_assert_eq(pk.partition == NULL, part == NULL, "%s", body);
    if (part != NULL)
        cr_assert(pk.partition_len == strlen(part) &&
                      memcmp(pk.partition, part, pk.partition_len) == 0,
                  "%s", body);
}

Test(push_peek, the_head_reads_up_to_the_messages_only)
{
    struct http_push_peek pk;

    head("{\"queue\":\"q\",\"partition\":\"p\",\"messages\":[{\"payload\":1}]}",
         "q", "p");
    /* what follows is not read: not checked, nor the names after it */
    head("{\"queue\":\"q\",\"messages\":[{\"payload\":tru},{\"key\":1}", "q",
         NULL);
    head("{\"queue\":\"q\",\"messages\":[],\"partition\":\"p\"}", "q", NULL);
    cr_assert_eq(
        http_push_peek_head(S("{\"messages\":[],\"queue\":\"q\"}"), &pk),
        -EINVAL);
    cr_assert_eq(http_push_peek_head(S("{\"queue\":\"q\",\"x\":1,"
                                       "\"messages\":[]}"),
                                     &pk),
                 -EINVAL);
    cr_assert_eq(http_push_peek_head(S("{\"queue\":\"q\""), &pk), -EINVAL);
}
