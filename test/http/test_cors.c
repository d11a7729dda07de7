/*
 * test_cors.c - http/cors.c: the cors_origins list (SPEC §11), what it
 * accepts and refuses, and which Origin headers it lets read the answers.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "http/cors.h"

TestSuite(cors, .timeout = 30);

Test(cors, listed_origins_are_allowed_and_no_others)
{
    struct http_cors c;
    const char *why = NULL;

    cr_assert_eq(http_cors_parse(" https://app.example.com , "
                                 "http://localhost:8080,http://[::1]:3000",
                                 &c, &why),
                 0, "%s", why);
    cr_assert_eq(c.n, 3);
    cr_assert_not(c.any);
    cr_assert(http_cors_allows(&c, "https://app.example.com"));
    cr_assert(http_cors_allows(&c, "HTTPS://App.Example.com"), "case aside");
    cr_assert(http_cors_allows(&c, "http://localhost:8080"));
    cr_assert(http_cors_allows(&c, "http://[::1]:3000"));
    cr_assert_not(http_cors_allows(&c, "http://app.example.com"),
                  "another scheme is another origin");
    cr_assert_not(http_cors_allows(&c, "https://app.example.com:8443"));
    cr_assert_not(http_cors_allows(&c, "https://evil.example.com"));
    cr_assert_not(http_cors_allows(&c, "null"));
    cr_assert_not(http_cors_allows(&c, ""));
    cr_assert_not(http_cors_allows(&c, NULL));
}

Test(cors, a_star_allows_every_origin_and_an_empty_list_none)
{
    struct http_cors c;
    const char *why = NULL;

    cr_assert_eq(http_cors_parse("*", &c, &why), 0, "%s", why);
    cr_assert(c.any);
    cr_assert(http_cors_allows(&c, "https://anything.example"));
    cr_assert_eq(http_cors_parse("", &c, &why), 0);
    cr_assert_eq(c.n, 0);
    cr_assert_not(http_cors_allows(&c, "https://app.example.com"));
    cr_assert_eq(http_cors_parse("  ", &c, &why), 0);
    cr_assert_eq(c.n, 0);
    cr_assert_not(http_cors_allows(NULL, "https://app.example.com"));
}

Test(cors, what_is_not_an_origin_is_refused_saying_why)
{
    static const char *const bad[][2] = {
        {"app.example.com", "http:// or https://"},
        {"ftp://app.example.com", "http:// or https://"},
        {"https://app.example.com/", "no trailing /"},
        {"https://app.example.com/path", "no path"},
        {"https://", "http:// or https://"},
        {"https://:80", "scheme://host[:port]"},
        {"https://a.example:0", "scheme://host[:port]"},
        {"https://a.example:65536", "scheme://host[:port]"},
        {"https://a.example:", "scheme://host[:port]"},
        {"https://user@a.example", "scheme://host[:port]"},
        {"https://[zz]:1", "scheme://host[:port]"},
        {"https://a.example,,https://b.example", "empty"},
        {"https://a.example,", "empty"},
        {"**", "http:// or https://"},
    };
    struct http_cors c;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *why = NULL;
        cr_assert_eq(http_cors_parse(bad[i][0], &c, &why), -1, "accepted %s",
                     bad[i][0]);
        cr_assert_not_null(why);
        cr_assert_not_null(strstr(why, bad[i][1]), "%s: '%s' lacks '%s'",
                           bad[i][0], why, bad[i][1]);
        cr_assert_eq(c.n, 0, "a refused list allows nothing");
    }
}
