/*
 * test_http_edge.c - requests no well-behaved client sends, over raw
 * sockets (curl cannot send most of these bytes), each answered with the
 * JSON error body every answer carries (SPEC §2), never with silence or a
 * garbled response: smuggling-prone heads (two Content-Lengths, an unknown
 * Transfer-Encoding), HTTP/1.1 without Host, a NUL in the request line or a
 * query value, a long URI and large headers, many query parameters,
 * invalid UTF-8 that an answer would echo, a configure with a lone
 * surrogate name, and the node at max_connections; a Content-Length that
 * is not a number, a TLS ClientHello on the plain port, and half a
 * request followed by a write shutdown (closed at once, not held until the
 * 300 s idle timeout); and what libmicrohttpd refuses itself: an HTTP
 * version other than 1.x, a malformed chunked body, a head or request
 * line larger than its memory.  Smuggling (http/edge.h, D6-D9): a space
 * or tab before a header's colon, a folded header, a NUL in a header
 * value, two Authorization headers, each refused 400 with nothing of the
 * hidden request stored; a request that begins with a NUL or a space is
 * answered 400 at once; configure without options is 400.
 */
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"

/* The most an answer may take to come: generous, the machine is shared. */
#define ANSWER_MS 20000

/* An answer read to the server's close (or ANSWER_MS). */
struct raw_answer {
    char buf[65536];
    size_t len;
    int closed; /* the server closed the connection */
    long status;
    const char *body; /* after the head, or NULL */
};

/* send_bytes - all of p[0..n) to fd. */
static void
send_bytes(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        cr_assert_gt(k, 0, "send: %s", strerror(errno));
        p += k;
        n -= (size_t)k;
    }
}

/* read_answer - read until the server closes or the answer is whole and
 * want_close is 0. */
static void
read_answer(int fd, struct raw_answer *a, int want_close)
{
    int64_t until = itest_now_ms() + ANSWER_MS;
    char *sep;

    memset(a, 0, sizeof(*a));
    while (a->len < sizeof(a->buf) - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = until - itest_now_ms();
        ssize_t k;

        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            break;
        k = recv(fd, a->buf + a->len, sizeof(a->buf) - 1 - a->len, 0);
        if (k <= 0) {
            a->closed = k == 0 || errno == ECONNRESET;
            break;
        }
        a->len += (size_t)k;
        a->buf[a->len] = '\0';
        if (!want_close && itest_raw_complete(a->buf, a->len))
            break;
    }
    sscanf(a->buf, "HTTP/1.%*d %ld", &a->status);
    sep = strstr(a->buf, "\r\n\r\n");
    a->body = sep ? sep + 4 : NULL;
}

/* exchange - one request of n bytes on a new connection, the answer read
 * to the close. */
static void
exchange(struct itest_node *n, const char *req, size_t len,
         struct raw_answer *a)
{
    int fd = itest_raw_connect(n);

    cr_assert_geq(fd, 0);
    send_bytes(fd, req, len);
    read_answer(fd, a, 1);
    close(fd);
}

/* assert_json_error - the answer has status, closes, and carries one JSON
 * error object with code and a sentence holding word. */
static void
assert_json_error(const struct raw_answer *a, long status, const char *code,
                  const char *word)
{
    struct json_object *j, *c, *e;

    cr_assert_eq(a->status, status, "answer: %s", a->buf);
    cr_assert(a->closed, "the connection stayed open after: %s", a->buf);
    cr_assert(strstr(a->buf, "Content-Type: application/json"), "%s", a->buf);
    cr_assert_not_null(a->body);
    j = json_tokener_parse(a->body);
    cr_assert_not_null(j, "not one JSON object: %s", a->buf);
    cr_assert(json_object_object_get_ex(j, "code", &c));
    cr_assert_str_eq(json_object_get_string(c), code);
    cr_assert(json_object_object_get_ex(j, "error", &e));
    cr_assert(strstr(json_object_get_string(e), word), "%s", a->body);
    json_object_put(j);
}

/* queue_empty - the queue q holds nothing (the refused push stored none). */
static void
assert_nothing_stored(struct itest_node *n, const char *q)
{
    struct itest_resp r;
    char path[128];

    snprintf(path, sizeof(path), "/api/v1/ephemeral/pop?queue=%s&max=10", q);
    cr_assert_eq(itest_req(n, "GET", path, NULL, &r), 200, "%s", r.body);
    cr_assert_str_eq(r.body, "{\"queue\":\""
                             "edge\",\"messages\":[]}");
    itest_resp_free(&r);
}

#define S(lit) lit, sizeof(lit) - 1
#define PUSH   "POST /api/v1/ephemeral/push HTTP/1.1\r\nHost: x\r\n"
#define BODY   "{\"queue\":\"edge\",\"messages\":[{\"payload\":1}]}"

TestSuite(http_edge, .timeout = 120);

Test(http_edge, two_content_lengths_are_refused_and_nothing_is_stored)
{
    struct itest_node n;
    struct raw_answer a;

    itest_node_start(&n, "workers=1");
    exchange(&n, S(PUSH "Content-Length: 43\r\nContent-Length: 5\r\n\r\n" BODY),
             &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Content-Length");
    exchange(&n,
             S(PUSH "Content-Length: 43\r\nContent-Length: 43\r\n\r\n" BODY),
             &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Content-Length");
    exchange(&n,
             S(PUSH "Content-Length: 43\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "2b\r\n" BODY "\r\n0\r\n\r\n"),
             &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Transfer-Encoding");
    assert_nothing_stored(&n, "edge");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, transfer_encodings_other_than_chunked_are_refused)
{
    struct itest_node n;
    struct raw_answer a;

    itest_node_start(&n, "workers=1");
    exchange(&n, S(PUSH "Transfer-Encoding: gzip\r\n\r\n"), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Transfer-Encoding");
    exchange(&n, S(PUSH "Transfer-Encoding: gzip, chunked\r\n\r\n"), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Transfer-Encoding");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, http11_without_host_is_refused_http10_is_served)
{
    struct itest_node n;
    struct raw_answer a;

    itest_node_start(&n, "workers=1");
    exchange(&n, S("GET /health HTTP/1.1\r\n\r\n"), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Host");
    exchange(&n, S("GET /health HTTP/1.0\r\n\r\n"), &a);
    cr_assert_eq(a.status, 200, "%s", a.buf);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, a_nul_in_the_request_line_is_refused)
{
    struct itest_node n;
    struct raw_answer a;

    itest_node_start(&n, "workers=1");
    exchange(&n, S("GET /hea\0lth HTTP/1.1\r\nHost: x\r\n\r\n"), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "NUL");
    exchange(&n, S("GE\0T /health HTTP/1.1\r\nHost: x\r\n\r\n"), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "NUL");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, a_nul_in_a_query_value_is_refused_naming_the_parameter)
{
    struct itest_node n;
    struct raw_answer a;

    itest_node_start(&n, "workers=1");
    exchange(&n,
             S("GET /api/v1/ephemeral/pop?queue=edge&from=new%00x HTTP/1.1\r\n"
               "Host: x\r\nConnection: close\r\n\r\n"),
             &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "'from'");
    exchange(&n,
             S("GET /api/v1/ephemeral/queues?scope=node%00junk HTTP/1.1\r\n"
               "Host: x\r\nConnection: close\r\n\r\n"),
             &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "'scope'");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, long_uris_large_headers_and_many_parameters_are_answered)
{
    struct itest_node n;
    struct raw_answer a;
    size_t cap = 64 << 10, len;
    char *req = malloc(cap);

    cr_assert_not_null(req);
    itest_node_start(&n, "workers=1");
    /* 600 parameters, about 5 KB of URL: served. */
    len = (size_t)snprintf(req, cap, "GET /api/v1/ephemeral/pop?queue=edge");
    for (int i = 0; i < 600; i++)
        len += (size_t)snprintf(req + len, cap - len, "&p%d=1", i);
    len +=
        (size_t)snprintf(req + len, cap - len,
                         " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    exchange(&n, req, len, &a);
    cr_assert_eq(a.status, 200, "%.300s", a.buf);
    /* 3000 one-letter parameters: served (MHD's own parse of them ran its
     * memory out and left the connection silent). */
    len = (size_t)snprintf(req, cap, "GET /api/v1/ephemeral/pop?queue=edge");
    for (int i = 0; i < 3000; i++)
        len += (size_t)snprintf(req + len, cap - len, "&a");
    len +=
        (size_t)snprintf(req + len, cap - len,
                         " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    exchange(&n, req, len, &a);
    cr_assert_eq(a.status, 200, "%.300s", a.buf);
    /* A 20 KB URI: 414 in JSON. */
    len = (size_t)snprintf(req, cap, "GET /api/v1/ephemeral/pop?queue=");
    memset(req + len, 'a', 20000);
    len += 20000;
    len +=
        (size_t)snprintf(req + len, cap - len, " HTTP/1.1\r\nHost: x\r\n\r\n");
    exchange(&n, req, len, &a);
    assert_json_error(&a, 414, "ephemeral_bad_request", "URI");
    /* 30 KB of headers: 431 in JSON (MHD's memory holds them). */
    len = (size_t)snprintf(req, cap, "GET /health HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 30; i++) {
        len += (size_t)snprintf(req + len, cap - len, "X-%d: ", i);
        memset(req + len, 'b', 1000);
        len += 1000;
        len += (size_t)snprintf(req + len, cap - len, "\r\n");
    }
    len += (size_t)snprintf(req + len, cap - len, "\r\n");
    exchange(&n, req, len, &a);
    assert_json_error(&a, 431, "ephemeral_bad_request", "headers");
    free(req);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* count_status - answers in buf with that status. */
static int
count_status(const char *buf, int status)
{
    char line[24];
    int k = 0;

    snprintf(line, sizeof(line), "HTTP/1.1 %d ", status);
    for (const char *p = buf; (p = strstr(p, line)) != NULL; p++)
        k++;
    return k;
}

/* A head at both our limits (a URI of nearly HTTP_URI_MAX, nearly
 * HTTP_HEADERS_MAX of headers in 100 of them, a record each) fits MHD's
 * memory per connection (HTTP_MHD_CONN_MEMORY, sized to that): served,
 * on a connection that then serves the next request too. */
Test(http_edge, a_head_at_both_limits_is_served)
{
    struct itest_node n;
    struct raw_answer a;
    size_t cap = 32 << 10, len, one;
    char *req = malloc(cap);

    cr_assert_not_null(req);
    itest_node_start(&n, "workers=1");
    len = (size_t)snprintf(req, cap, "GET /api/v1/ephemeral/pop?queue=edge&x=");
    memset(req + len, 'a', 8100 - (len - 4));
    len += 8100 - (len - 4);
    len += (size_t)snprintf(req + len, cap - len, " HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 98; i++) {
        len += (size_t)snprintf(req + len, cap - len, "X-%02d: ", i);
        memset(req + len, 'b', 72);
        len += 72;
        len += (size_t)snprintf(req + len, cap - len, "\r\n");
    }
    len += (size_t)snprintf(req + len, cap - len, "\r\n");
    one = len;
    /* the same request again, then one that closes */
    memcpy(req + len, req, one);
    len += one;
    len += (size_t)snprintf(req + len, cap - len,
                            "GET /health HTTP/1.1\r\nHost: x\r\n"
                            "Connection: close\r\n\r\n");
    exchange(&n, req, len, &a);
    cr_assert_eq(a.status, 200, "%.300s", a.buf);
    cr_assert_eq(count_status(a.buf, 200), 3, "%.600s", a.buf);
    free(req);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* utf8_valid - s is well-formed UTF-8 (json-c validates, strictly). */
static int
json_valid_utf8(const char *s)
{
    struct json_tokener *t = json_tokener_new();
    struct json_object *j;
    int ok;

    json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    j = json_tokener_parse_ex(t, s, (int)strlen(s));
    ok = j != NULL && json_tokener_get_error(t) == json_tokener_success;
    json_object_put(j);
    json_tokener_free(t);
    return ok;
}

Test(http_edge, an_ack_of_an_id_with_a_lone_surrogate_is_answered_in_utf8)
{
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, "workers=1");
    itest_req(&n, "POST", "/api/v1/ephemeral/ack",
              "{\"queue\":\"edge\",\"acks\":[{\"id\":"
              "\"e:0123456789abcdef:p\\udc00q:1\",\"status\":\"completed\"}]}",
              &r);
    cr_assert(r.status == 200 || r.status == 400, "%ld %s", r.status, r.body);
    cr_assert(json_valid_utf8(r.body), "not UTF-8 JSON: %s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, configure_with_a_lone_surrogate_name_is_invalid_name)
{
    struct itest_node n;
    struct itest_resp r;
    struct json_object *c;

    itest_node_start(&n, "workers=1");
    cr_assert_eq(itest_req(&n, "POST", "/api/v1/ephemeral/configure",
                           "{\"queue\":\"a\\udc00b\"}", &r),
                 400, "%s", r.body);
    cr_assert(json_object_object_get_ex(r.json, "code", &c));
    cr_assert_str_eq(json_object_get_string(c), "invalid_name");
    cr_assert(strstr(r.body, "'queue'"), "%s", r.body);
    itest_resp_free(&r);
    /* push answers the same */
    cr_assert_eq(itest_req(&n, "POST", "/api/v1/ephemeral/push",
                           "{\"queue\":\"a\\udc00b\",\"messages\":"
                           "[{\"payload\":1}]}",
                           &r),
                 400, "%s", r.body);
    cr_assert(json_object_object_get_ex(r.json, "code", &c));
    cr_assert_str_eq(json_object_get_string(c), "invalid_name");
    itest_resp_free(&r);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* metric - the value of a counter family with no labels, or -1. */
static long long
metric(struct itest_node *n, const char *name)
{
    struct itest_resp r;
    char key[128];
    const char *p;
    long long v = -1;

    itest_req(n, "GET", "/metrics", NULL, &r);
    snprintf(key, sizeof(key), "\n%s ", name);
    if ((p = strstr(r.body, key)) != NULL)
        v = atoll(p + strlen(key));
    itest_resp_free(&r);
    return v;
}

Test(http_edge, past_max_connections_a_request_gets_503_and_health_passes)
{
    struct itest_node n;
    struct raw_answer a;
    int held[8], nheld = 0, fd;

    itest_node_start(&n, "workers=1 max_connections=4");
    /* Four long polls parked: the worker is full. */
    for (int i = 0; i < 4; i++) {
        held[nheld] = itest_raw_connect(&n);
        cr_assert_geq(held[nheld], 0);
        cr_assert_eq(itest_raw_send(held[nheld],
                                    "GET /api/v1/ephemeral/pop?queue=full&"
                                    "wait=true&timeout=60000 HTTP/1.1\r\n"
                                    "Host: x\r\n\r\n"),
                     0);
        nheld++;
    }
    /* Wait until all four are parked (the harness's own keep-alive
     * connection may hold a fifth place). */
    int64_t until = itest_now_ms() + ANSWER_MS;
    struct raw_answer b;
    for (;;) {
        fd = itest_raw_connect(&n);
        cr_assert_geq(fd, 0);
        send_bytes(fd, S(PUSH "Content-Length: 43\r\n\r\n" BODY));
        read_answer(fd, &b, 0);
        if (b.status == 503) {
            struct raw_answer rest; /* nothing more: the server closes */
            read_answer(fd, &rest, 1);
            b.closed = rest.closed && rest.len == 0;
        }
        close(fd);
        if (b.status == 503 || itest_now_ms() > until)
            break;
        itest_sleep_ms(50);
    }
    assert_json_error(&b, 503, "ephemeral_unavailable", "max_connections");
    cr_assert(strstr(b.buf, "Retry-After: "), "%s", b.buf);
    cr_assert(strstr(b.buf, "Connection: close"), "%s", b.buf);
    /* /health on a new connection is served while the worker is full. */
    exchange(&n,
             S("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
             &a);
    cr_assert_eq(a.status, 200, "%s", a.buf);
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    /* Once they are gone, the refusals are counted. */
    until = itest_now_ms() + ANSWER_MS;
    long long refused;
    while ((refused = metric(&n, "mayfly_connections_refused_total")) < 1 &&
           itest_now_ms() < until)
        itest_sleep_ms(50);
    cr_assert_geq(refused, 1);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, a_content_length_that_is_not_a_number_is_refused_in_json)
{
    struct itest_node n;
    struct raw_answer a;

    itest_node_start(&n, "workers=1");
    exchange(&n, S(PUSH "Content-Length: abc\r\n\r\n" BODY), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Content-Length");
    exchange(&n, S(PUSH "Content-Length: -1\r\n\r\n"), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Content-Length");
    exchange(&n, S(PUSH "Content-Length: 5, 5\r\n\r\n"), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "Content-Length");
    exchange(&n, S(PUSH "Content-Length: 123456789012345678901234\r\n\r\n"),
             &a);
    assert_json_error(&a, 413, "payload_too_large", "Content-Length");
    /* One answer, not a second head after the first. */
    cr_assert_null(strstr(a.body, "HTTP/1."), "%s", a.buf);
    assert_nothing_stored(&n, "edge");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, a_tls_client_hello_on_the_plain_port_is_answered_400)
{
    /* The start of a TLS 1.2 ClientHello: a handshake record (22, 3.1),
     * its length, then the hello; no line end in it, so MHD alone would
     * wait for one until its idle timeout. */
    static const unsigned char hello[] = {
        0x16, 0x03, 0x01, 0x00, 0x31, 0x01, 0x00, 0x00, 0x2d, 0x03, 0x03,
        0x5a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x71, 0x82, 0x93, 0xa4,
        0xb5, 0xc6, 0xd7, 0xe8, 0xf9, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
        0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01, 0x00,
        0x00, 0x04, 0x13, 0x01, 0xc0, 0x2f, 0x01, 0x00, 0x00, 0x00};
    struct itest_node n;
    struct raw_answer a;
    struct itest_resp r;

    itest_node_start(&n, "workers=1");
    exchange(&n, (const char *)hello, sizeof(hello), &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "TLS");
    cr_assert_eq(itest_req(&n, "GET", "/health", NULL, &r), 200);
    itest_resp_free(&r);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* half_then_shut - part of a request, then the write side shut: the node
 * closes the connection well inside ANSWER_MS (its idle timeout is 300 s),
 * answering nothing or a JSON error. */
static void
half_then_shut(struct itest_node *n, const char *req, size_t len)
{
    struct raw_answer a;
    int fd = itest_raw_connect(n);

    cr_assert_geq(fd, 0);
    send_bytes(fd, req, len);
    cr_assert_eq(shutdown(fd, SHUT_WR), 0);
    read_answer(fd, &a, 1);
    close(fd);
    cr_assert(a.closed, "no close within %d ms after: %.*s", ANSWER_MS,
              (int)len, req);
    if (a.len > 0)
        cr_assert_eq(a.status, 400, "%s", a.buf);
}

Test(http_edge, half_a_request_then_a_write_shutdown_is_closed_at_once)
{
    struct itest_node n;
    struct raw_answer a;
    int fd;

    itest_node_start(&n, "workers=1");
    half_then_shut(&n, S(PUSH "Content-Length: 43\r\n\r\n{\"queue\":\"ed"));
    half_then_shut(&n, S(PUSH "Content-Len"));
    half_then_shut(&n, S("POST /api/v1/ephemeral/pu"));
    assert_nothing_stored(&n, "edge");
    /* A whole request before the shutdown is still served. */
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    send_bytes(fd, S(PUSH "Content-Length: 43\r\n\r\n" BODY));
    cr_assert_eq(shutdown(fd, SHUT_WR), 0);
    read_answer(fd, &a, 1);
    close(fd);
    cr_assert_eq(a.status, 201, "%s", a.buf);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, an_http_version_other_than_1x_is_answered_505_in_json)
{
    struct itest_node n;
    struct raw_answer a;

    itest_node_start(&n, "workers=1");
    exchange(&n, S("GET /health HTTP/2.0\r\nHost: x\r\n\r\n"), &a);
    assert_json_error(&a, 505, "ephemeral_bad_request", "HTTP version");
    cr_assert_null(strstr(a.body, "\r\n"), "one answer: %s", a.buf);
    exchange(&n, S("GET /health HTTP/0.9\r\n\r\n"), &a);
    assert_json_error(&a, 505, "ephemeral_bad_request", "HTTP version");
    exchange(&n,
             S("POST /api/v1/ephemeral/push HTTP/3.0\r\nHost: x\r\n"
               "Content-Length: 43\r\n\r\n" BODY),
             &a);
    assert_json_error(&a, 505, "ephemeral_bad_request", "HTTP version");
    assert_nothing_stored(&n, "edge");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, a_bad_chunk_size_is_answered_400_in_json)
{
    struct itest_node n;
    struct raw_answer a;

    itest_node_start(&n, "workers=1");
    exchange(&n,
             S(PUSH "Transfer-Encoding: chunked\r\n\r\n"
                    "zz\r\n" BODY "\r\n0\r\n\r\n"),
             &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "chunked");
    cr_assert_null(strstr(a.body, "\r\n"), "one answer: %s", a.buf);
    /* A good first chunk, then a size that is not hexadecimal. */
    exchange(&n,
             S(PUSH "Transfer-Encoding: chunked\r\n\r\n"
                    "2b\r\n" BODY "\r\n-5\r\nxxxxx\r\n0\r\n\r\n"),
             &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", "chunked");
    assert_nothing_stored(&n, "edge");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* send_until_refused - p[0..n) to fd, stopping where the server, having
 * answered, no longer reads. */
static void
send_until_refused(int fd, const char *p, size_t n)
{
    while (n > 0) {
        struct pollfd w = {.fd = fd, .events = POLLOUT};
        ssize_t k;

        if (poll(&w, 1, ANSWER_MS) != 1 || (w.revents & ~POLLOUT))
            return;
        k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k <= 0 && errno != EAGAIN)
            return;
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        }
    }
}

Test(http_edge, a_head_that_outgrows_the_connection_memory_is_answered_431)
{
    struct itest_node n;
    struct raw_answer a;
    size_t cap = 96 << 10, len;
    char *req = malloc(cap);
    int fd;

    cr_assert_not_null(req);
    itest_node_start(&n, "workers=1");
    /* 15,000 tiny headers: 75 KB, a record each in MHD's 24 KiB. */
    len = (size_t)snprintf(req, cap, PUSH "Content-Length: 43\r\n");
    for (int i = 0; i < 15000; i++)
        len += (size_t)snprintf(req + len, cap - len, "a:b\r\n");
    len += (size_t)snprintf(req + len, cap - len, "\r\n" BODY);
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    send_until_refused(fd, req, len);
    read_answer(fd, &a, 1);
    close(fd);
    assert_json_error(&a, 431, "ephemeral_bad_request", "head");
    cr_assert_null(strstr(a.body, "\r\n"), "one answer: %s", a.buf);
    /* A 70 KB request line: 414 from MHD, in JSON. */
    len = (size_t)snprintf(req, cap, "GET /api/v1/ephemeral/pop?queue=");
    memset(req + len, 'a', 70000);
    len += 70000;
    len += (size_t)snprintf(req + len, cap - len, " HTTP/1.1\r\n\r\n");
    fd = itest_raw_connect(&n);
    cr_assert_geq(fd, 0);
    send_until_refused(fd, req, len);
    read_answer(fd, &a, 1);
    close(fd);
    assert_json_error(&a, 414, "ephemeral_bad_request", "request line");
    assert_nothing_stored(&n, "edge");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
    free(req);
}

/* A push of one message to queue "edge", whole: what a smuggler hides in
 * the body of the request around it. */
#define SMUGGLED PUSH "Content-Length: 43\r\n\r\n" BODY
/* Its length, the Content-Length of a body that is SMUGGLED. */
#define SMUGGLED_LEN "112"

/* refused_unstored - req, sent whole on a new connection, is answered 400
 * in JSON with a sentence holding word, the connection closes, and queue
 * "edge" stays empty: no body ran as a second request. */
static void
refused_unstored(struct itest_node *n, const char *req, size_t len,
                 const char *word)
{
    struct raw_answer a;

    exchange(n, req, len, &a);
    assert_json_error(&a, 400, "ephemeral_bad_request", word);
    cr_assert_null(strstr(a.body, "}HTTP/1."), "a second answer: %s", a.buf);
    assert_nothing_stored(n, "edge");
}

Test(http_edge, whitespace_before_a_header_colon_is_refused_not_smuggled)
{
    struct itest_node n;

    cr_assert_eq(strlen(SMUGGLED), 112);
    itest_node_start(&n, "workers=1");
    refused_unstored(
        &n, S(PUSH "Content-Length : " SMUGGLED_LEN "\r\n\r\n" SMUGGLED),
        "header name");
    refused_unstored(
        &n, S(PUSH "Content-Length\t: " SMUGGLED_LEN "\r\n\r\n" SMUGGLED),
        "header name");
    refused_unstored(&n, S(PUSH "X-A : b\r\n\r\n"), "header name");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, an_obs_folded_header_is_refused_not_smuggled)
{
    struct itest_node n;

    itest_node_start(&n, "workers=1");
    /* libmicrohttpd joins a folded line to the name above it: the
     * Content-Length would be lost, or be a header named otherwise */
    refused_unstored(
        &n, S(PUSH "Content-Length: " SMUGGLED_LEN "\r\n x\r\n\r\n" SMUGGLED),
        "folded");
    refused_unstored(
        &n,
        S(PUSH "X-A: b\r\n Content-Length: " SMUGGLED_LEN "\r\n\r\n" SMUGGLED),
        "folded");
    refused_unstored(&n,
                     S(PUSH "X-A: b\r\n\tc\r\nContent-Length: 43\r\n\r\n" BODY),
                     "folded");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, a_nul_in_a_header_value_is_refused)
{
    struct itest_node n;

    itest_node_start(&n, "workers=1");
    refused_unstored(&n,
                     S(PUSH "Authorization: Bearer tok\0junk\r\n"
                            "Content-Length: 43\r\n\r\n" BODY),
                     "NUL");
    refused_unstored(&n,
                     S(PUSH "Transfer-Encoding: chunked\0\r\n\r\n"
                            "0\r\n\r\n" SMUGGLED),
                     "NUL");
    /* the NUL hides a Content-Length from libmicrohttpd */
    refused_unstored(
        &n, S(PUSH "X-A: b\0Content-Length: " SMUGGLED_LEN "\r\n\r\n" SMUGGLED),
        "NUL");
    /* the last header, then the end of the head */
    refused_unstored(&n, S("GET /health HTTP/1.1\r\nHost: x\0y\r\n\r\n"),
                     "NUL");
    /* a control character other than a tab */
    refused_unstored(&n, S(PUSH "X-A: b\rc\r\nContent-Length: 43\r\n\r\n" BODY),
                     "control character");
    /* what is allowed still passes: a tab and UTF-8 in a value, empty
     * values, bare LF line ends, mixed with CRLF */
    struct raw_answer a;
    exchange(&n,
             S("POST /api/v1/ephemeral/push HTTP/1.1\nHost: x\r\n"
               "X-A: a\tb \xc3\xa9 \nX-B:\r\nX-C:   \n"
               "Content-Length: 43\r\nConnection: close\n\n" BODY),
             &a);
    cr_assert_eq(a.status, 201, "%s", a.buf);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, two_authorization_headers_are_refused)
{
    struct itest_node n;

    itest_node_start(&n, "workers=1");
    refused_unstored(&n,
                     S(PUSH "Authorization: Bearer a\r\n"
                            "Authorization: Bearer b\r\n"
                            "Content-Length: 43\r\n\r\n" BODY),
                     "Authorization");
    refused_unstored(&n, S(PUSH "Host: y\r\nContent-Length: 43\r\n\r\n" BODY),
                     "Host");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, a_bad_head_after_a_good_request_on_one_connection_is_refused)
{
    struct itest_node n;
    struct raw_answer a;
    const char *second;

    itest_node_start(&n, "workers=1");
    /* both in one write: the second is in libmicrohttpd's buffer already */
    exchange(&n,
             S("GET /health HTTP/1.1\r\nHost: x\r\n\r\n" PUSH
               "Content-Length : " SMUGGLED_LEN "\r\n\r\n" SMUGGLED),
             &a);
    cr_assert_eq(a.status, 200, "%s", a.buf);
    second = strstr(a.buf + 1, "HTTP/1.1 400 ");
    cr_assert_not_null(second, "%s", a.buf);
    cr_assert(strstr(second, "header name") != NULL, "%s", second);
    cr_assert(a.closed);
    assert_nothing_stored(&n, "edge");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* refused_at_once - as refused_unstored, and the answer comes at once,
 * not after the 30 s a new connection has to send its request line. */
static void
refused_at_once(struct itest_node *n, const char *req, size_t len,
                const char *word)
{
    int64_t t0 = itest_now_ms();

    refused_unstored(n, req, len, word);
    cr_assert_lt(itest_now_ms() - t0, 10000, "answered after %lld ms",
                 (long long)(itest_now_ms() - t0));
}

Test(http_edge, a_request_starting_with_a_nul_byte_is_answered_400_at_once)
{
    struct itest_node n;

    itest_node_start(&n, "workers=1");
    /* libmicrohttpd takes the line for an empty one, then waits */
    refused_at_once(&n, S("\0GET /health HTTP/1.1\r\n\r\n"), "request line");
    refused_at_once(&n, S("\0"), "request line");
    refused_at_once(&n, S("\0" SMUGGLED), "request line");
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, a_request_line_with_a_leading_space_is_answered_400)
{
    struct itest_node n;

    itest_node_start(&n, "workers=1");
    /* libmicrohttpd closes it without a word */
    refused_at_once(&n, S(" " SMUGGLED), "request line");
    refused_at_once(&n, S("\t" SMUGGLED), "request line");
    /* empty lines before a request line are allowed (RFC 9112 2.2) */
    struct raw_answer a;
    exchange(&n,
             S("\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               "\r\n"),
             &a);
    cr_assert_eq(a.status, 200, "%s", a.buf);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

Test(http_edge, configure_without_options_is_refused_and_declares_nothing)
{
    struct itest_node n;
    struct itest_resp r;
    struct json_object *c;

    itest_node_start(&n, "workers=1");
    cr_assert_eq(itest_req(&n, "POST", "/api/v1/ephemeral/configure",
                           "{\"queue\":\"cfg\"}", &r),
                 400, "%s", r.body);
    cr_assert(json_object_object_get_ex(r.json, "code", &c));
    cr_assert_str_eq(json_object_get_string(c), "ephemeral_bad_request");
    cr_assert(strstr(r.body, "'options'"), "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(
        itest_req(&n, "GET", "/api/v1/ephemeral/queues/cfg/depth", NULL, &r),
        404, "%s", r.body);
    itest_resp_free(&r);
    /* empty options declare it */
    cr_assert_eq(itest_req(&n, "POST", "/api/v1/ephemeral/configure",
                           "{\"queue\":\"cfg\",\"options\":{}}", &r),
                 201, "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}
