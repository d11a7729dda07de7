/*
 * test_sign.c - the signature of calls between nodes (http/sign.h): a
 * call verifies with the key it was signed with, and any part altered,
 * another key, a timestamp outside the window or a malformed header is
 * refused.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/sign.h"

#define KEY "cluster-secret"

/* value - the value part of a "Name: value" line. */
static const char *
value(const char *line)
{
    return strchr(line, ':') + 2;
}

/* call_of - a received call as lines l signed it. */
static struct http_sign_call
call_of(const char *method, const char *target, const char *body,
        const struct http_sign_lines *l)
{
    return (struct http_sign_call){.method = method,
                                   .target = target,
                                   .body = body,
                                   .len = body ? strlen(body) : 0,
                                   .sig = value(l->sig),
                                   .time = value(l->time),
                                   .nonce = value(l->nonce)};
}

Test(sign, a_call_verifies_with_its_key_and_names_its_nonce)
{
    struct http_sign_lines l;
    uint64_t sender = 0, seq = 0;
    char why[200] = "";

    http_sign_lines(KEY, 0xabcdefull, 42, "POST", "/a?b=c", "{\"x\":1}", 7, &l);
    cr_assert(strncmp(l.sig, HTTP_SIGN_HEADER ": ", 20) == 0, "%s", l.sig);
    cr_assert_str_eq(value(l.nonce), "0000000000abcdef-42");
    struct http_sign_call c = call_of("POST", "/a?b=c", "{\"x\":1}", &l);
    cr_assert_eq(http_sign_check(&c, KEY, http_sign_now(), &sender, &seq, why,
                                 sizeof(why)),
                 HTTP_SIGN_OK, "%s", why);
    cr_expect_eq(sender, 0xabcdefull);
    cr_expect_eq(seq, 42);
}

Test(sign, anything_altered_is_refused)
{
    struct http_sign_lines l;
    uint64_t s, q;
    char why[200];
    const char *body = "{\"x\":1}";

    http_sign_lines(KEY, 7, 1, "POST", "/a?b=c", body, strlen(body), &l);
    struct http_sign_call c[] = {
        call_of("PUT", "/a?b=c", body, &l),
        call_of("POST", "/a?b=d", body, &l),
        call_of("POST", "/a", body, &l),
        call_of("POST", "/a?b=c", "{\"x\":2}", &l),
        call_of("POST", "/a?b=c", NULL, &l),
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        cr_expect_eq(http_sign_check(&c[i], KEY, http_sign_now(), &s, &q, why,
                                     sizeof(why)),
                     HTTP_SIGN_BAD, "alteration %zu", i);
    struct http_sign_call good = call_of("POST", "/a?b=c", body, &l);
    cr_expect_eq(http_sign_check(&good, "another", http_sign_now(), &s, &q, why,
                                 sizeof(why)),
                 HTTP_SIGN_BAD);
    cr_expect(strstr(why, HTTP_SIGN_HEADER), "%s", why);
    good.nonce = "0000000000000007-2"; /* another nonce, same signature */
    cr_expect_eq(
        http_sign_check(&good, KEY, http_sign_now(), &s, &q, why, sizeof(why)),
        HTTP_SIGN_BAD);
}

Test(sign, a_timestamp_outside_the_window_is_stale)
{
    struct http_sign_lines l;
    uint64_t s, q;
    char why[200];
    int64_t now = http_sign_now();

    http_sign_lines(KEY, 7, 1, "GET", "/", NULL, 0, &l);
    struct http_sign_call c = call_of("GET", "/", NULL, &l);
    cr_expect_eq(http_sign_check(&c, KEY, now + HTTP_SIGN_WINDOW_S - 2, &s, &q,
                                 why, sizeof(why)),
                 HTTP_SIGN_OK, "%s", why);
    cr_expect_eq(http_sign_check(&c, KEY, now + HTTP_SIGN_WINDOW_S + 5, &s, &q,
                                 why, sizeof(why)),
                 HTTP_SIGN_STALE);
    cr_expect(strstr(why, HTTP_SIGN_TIME), "%s", why);
    cr_expect_eq(http_sign_check(&c, KEY, now - HTTP_SIGN_WINDOW_S - 5, &s, &q,
                                 why, sizeof(why)),
                 HTTP_SIGN_STALE);
}

Test(sign, missing_or_malformed_headers)
{
    struct http_sign_lines l;
    uint64_t s, q;
    char why[200];

    http_sign_lines(KEY, 7, 1, "GET", "/", NULL, 0, &l);
    struct http_sign_call c = call_of("GET", "/", NULL, &l);
    c.sig = NULL;
    cr_expect_eq(
        http_sign_check(&c, KEY, http_sign_now(), &s, &q, why, sizeof(why)),
        HTTP_SIGN_ABSENT);
    const char *nonces[] = {"7-1", "000000000000000g-1", "0000000000000007-",
                            "0000000000000007-x", "0000000000000007-1x"};
    for (size_t i = 0; i < sizeof(nonces) / sizeof(nonces[0]); i++) {
        c = call_of("GET", "/", NULL, &l);
        c.nonce = nonces[i];
        cr_expect_eq(
            http_sign_check(&c, KEY, http_sign_now(), &s, &q, why, sizeof(why)),
            HTTP_SIGN_BAD, "%s", nonces[i]);
    }
    c = call_of("GET", "/", NULL, &l);
    c.time = "12a";
    cr_expect_eq(
        http_sign_check(&c, KEY, http_sign_now(), &s, &q, why, sizeof(why)),
        HTTP_SIGN_BAD);
    c.time = NULL;
    cr_expect_eq(
        http_sign_check(&c, KEY, http_sign_now(), &s, &q, why, sizeof(why)),
        HTTP_SIGN_BAD);
}
