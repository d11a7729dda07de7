/*
 * test_peer_answer.c - http/peer_answer.h: other nodes' answers decoded
 * into C structs, as a worker or the master reads them, and what is not
 * such an answer refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/peer_answer.h"

/* acks - decode body as the answer to n ids. */
static int
acks(const char *body, uint32_t n, struct http_peer_acks *a)
{
    return http_peer_acks(body, strlen(body), n, a);
}

Test(peer_answer, ack_results_each_entry_as_written)
{
    static const char body[] =
        "{\"results\":["
        "{\"id\":\"a\",\"outcome\":\"acked\"},"
        "{\"id\":\"b\",\"outcome\":\"acked\",\"dropped\":true},"
        "{\"id\":\"c\",\"outcome\":\"stale\",\"replied\":true},"
        "{\"id\":\"d\",\"outcome\":\"acked\",\"replied\":false,"
        "\"reason\":\"the requester left\"},"
        "{\"id\":\"e\",\"outcome\":\"acked\",\"replied\":false},"
        "7]}";
    struct http_peer_acks a;

    cr_assert_eq(acks(body, 6, &a), 0);
    cr_assert_eq(a.n, 6);
    cr_assert_str_eq(a.e[0].outcome, "acked");
    cr_assert_eq(a.e[0].dropped, 0);
    cr_assert_eq(a.e[0].replied, -1);
    cr_assert_null(a.e[0].reason);
    cr_assert_eq(a.e[1].dropped, 1);
    cr_assert_str_eq(a.e[2].outcome, "stale");
    cr_assert_eq(a.e[2].replied, 1);
    cr_assert_null(a.e[2].reason);
    cr_assert_eq(a.e[3].replied, 0);
    cr_assert_str_eq(a.e[3].reason, "\"the requester left\"");
    cr_assert_eq(a.e[4].replied, 0);
    cr_assert_str_eq(a.e[4].reason, "null");
    cr_assert_null(a.e[5].outcome, "an entry that is no object has none");
    cr_assert_eq(a.e[5].replied, -1);
    http_peer_acks_free(&a);
    cr_assert_null(a.e);
}

Test(peer_answer, ack_results_of_another_count_or_shape_are_refused)
{
    struct http_peer_acks a;

    cr_assert_eq(acks("{\"results\":[{\"outcome\":\"acked\"}]}", 2, &a),
                 -EINVAL);
    cr_assert_null(a.e);
    cr_assert_eq(acks("{\"results\":{}}", 0, &a), -EINVAL);
    cr_assert_eq(acks("{\"error\":\"x\",\"code\":\"y\"}", 1, &a), -EINVAL);
    cr_assert_eq(acks("[]", 0, &a), -EINVAL);
    cr_assert_eq(acks("{\"results\":[]} trailing", 0, &a), -EINVAL);
    cr_assert_eq(http_peer_acks(NULL, 0, 0, &a), -EINVAL);
    cr_assert_eq(acks("{\"results\":[]}", 0, &a), 0);
    cr_assert_eq(a.n, 0);
    http_peer_acks_free(&a);
}

Test(peer_answer, applied_share_count_flag_and_queue)
{
    static const char reset[] = "{\"queue\":\"q\\u00e9\",\"dropped\":12}";
    static const char del[] = "{\"queue\":\"q\",\"deleted\":true,"
                              "\"declared\":false}";
    struct http_peer_applied s;

    cr_assert_eq(http_peer_applied(reset, strlen(reset), "dropped", &s), 0);
    cr_assert_eq(s.has_queue, 1);
    cr_assert_str_eq(s.queue, "q\xc3\xa9");
    cr_assert_eq(s.count, 12);
    cr_assert_eq(http_peer_applied(del, strlen(del), "deleted", &s), 0);
    cr_assert_eq(s.flag, 1);
    cr_assert_eq(s.count, 0, "true is no count");
    cr_assert_eq(http_peer_applied("{}", 2, "dropped", &s), 0);
    cr_assert_eq(s.has_queue, 0);
    cr_assert_eq(s.count, 0);
    cr_assert_eq(http_peer_applied("nope", 4, "dropped", &s), -EINVAL);
}

Test(peer_answer, stored_id)
{
    char *id = http_peer_id("{\"id\":\"0a-1\"}", 13);

    cr_assert_str_eq(id, "0a-1");
    free(id);
    cr_assert_null(http_peer_id("{\"other\":1}", 11));
    cr_assert_null(http_peer_id("{\"id\":", 6));
    cr_assert_null(http_peer_id(NULL, 0));
}

Test(peer_answer, error_code)
{
    static const char e[] =
        "{\"error\": \"nobody listens\", \"code\": \"no_responders\"}";
    static const char named[] =
        "{\"error\": \"\\\"no_responders\\\"\", \"code\": \"timeout\"}";

    cr_assert(http_peer_error_is(e, strlen(e), "no_responders"));
    cr_assert_not(http_peer_error_is(e, strlen(e), "timeout"));
    cr_assert_not(http_peer_error_is(named, strlen(named), "no_responders"),
                  "the message is not the code");
    cr_assert_not(http_peer_error_is(NULL, 0, "no_responders"));
}

Test(peer_answer, configured_index_and_options)
{
    static const char put[] =
        "{\"queue\":\"q\",\"options\":{\"maxLength\":5,\"policy\":"
        "\"reject\"},\"index\":42,\"declared\":true}";
    static const char del[] =
        "{\"queue\":\"q\",\"deleted\":true,\"declared\":true}";
    struct http_peer_configured c;

    http_peer_configured(put, strlen(put), &c);
    cr_assert_eq(c.index, 42);
    cr_assert_str_eq(c.options, "{\"maxLength\":5,\"policy\":\"reject\"}");
    free(c.options);
    http_peer_configured(del, strlen(del), &c);
    cr_assert_eq(c.index, 0);
    cr_assert_null(c.options);
    http_peer_configured("{\"options\":[1]}", 15, &c);
    cr_assert_null(c.options, "options that are no object are none");
    http_peer_configured("", 0, &c);
    cr_assert_eq(c.index, 0);
    cr_assert_null(c.options);
}
