/*
 * test_sign.c - the signature of calls between nodes (http/sign.h): a
 * call verifies with the key it was signed with, for the node it names;
 * any part altered (method, target, body, any X-Mayfly- header or the
 * Authorization changed, added, dropped or doubled), a body moved from
 * another call, another
 * key, a timestamp outside the window, another node, another incarnation
 * or a malformed header is refused; the order and case of the headers,
 * and headers of other names, do not matter.  The signature is the text
 * sign.h describes (an oracle built here from nettle, with UMAC-128
 * checked against RFC 4418's vectors), and one of mayfly-call-2 or -3 is
 * refused as another build's.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <nettle/hmac.h>
#include <nettle/sha2.h>
#include <nettle/umac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <criterion/criterion.h>

#include "http/sign.h"

#define KEY "cluster-secret"
#define INC UINT64_C(0x1122334455667788)

/* The receiver of most tests: node "n1", incarnation INC, started a
 * minute ago. */
static struct http_sign_self
self_now(void)
{
    return (struct http_sign_self){"n1",
                                   INC,
                                   {"10.0.0.1:6633", "10.0.0.1:6632"},
                                   http_sign_now_ms() - 60000};
}

/* A call as a receiver gets it: its header lines split into names and
 * values. */
struct rx {
    char text[40][300];
    struct http_sign_header h[40];
    struct http_sign_call c;
};

/* add - one "Name: value" line more. */
static void
add(struct rx *x, const char *line)
{
    size_t i = x->c.nh++;
    char *colon;

    cr_assert(i < 40);
    snprintf(x->text[i], sizeof(x->text[i]), "%s", line);
    colon = strchr(x->text[i], ':');
    cr_assert(colon, "%s", line);
    *colon = '\0';
    x->h[i].name = x->text[i];
    x->h[i].value = colon + 1 + strspn(colon + 1, " ");
}

/* received - the call signed as r says, with l's lines after r's own. */
static void
received(struct rx *x, const struct http_sign_req *r,
         const struct http_sign_lines *l)
{
    memset(x, 0, sizeof(*x));
    x->c =
        (struct http_sign_call){r->method, r->target, r->body, r->len, x->h, 0};
    for (size_t i = 0; i < r->nlines; i++)
        add(x, r->lines[i]);
    add(x, l->sig);
    add(x, l->time);
    add(x, l->nonce);
    add(x, l->to);
    if (l->deadline[0])
        add(x, l->deadline);
}

/* header - the value slot of x's header name (which must be there). */
static const char **
header(struct rx *x, const char *name)
{
    for (size_t i = 0; i < x->c.nh; i++)
        if (strcasecmp(x->h[i].name, name) == 0)
            return &x->h[i].value;
    cr_assert_fail("no %s", name);
    return NULL;
}

/* check - the verdict on x for self at now. */
static enum http_sign_verdict
check(struct rx *x, const struct http_sign_self *self, int64_t now,
      struct http_sign_seen *seen, char *why)
{
    return http_sign_check(&x->c, KEY, self, now, seen, why, 300);
}

static const char *const peer_lines[] = {
    "X-Mayfly-Node: n0",
    "X-Mayfly-Client: 10.0.0.9:6632",
    "X-Mayfly-Incarnation: 00000000000000aa",
    "X-Mayfly-State: ready",
    "X-Mayfly-Forwarded: 1",
    "Content-Type: application/json",
};

/* heartbeat - a heartbeat from n0 to n1 (incarnation INC), signed now
 * with a deadline a second away, into l. */
static struct http_sign_req
heartbeat(struct http_sign_lines *l)
{
    int64_t now = http_sign_now_ms();
    struct http_sign_req r = {
        .method = "POST",
        .target = "/cluster/v1/heartbeat",
        .body = "0\n",
        .len = 2,
        .lines = peer_lines,
        .nlines = sizeof(peer_lines) / sizeof(peer_lines[0]),
        .to = {"10.0.0.1:6633", "n1", INC},
        .sender = 0xabcdef,
        .seq = 42,
        .now_ms = now,
        .deadline_ms = now + 1000,
    };

    cr_assert_eq(http_sign_lines(KEY, &r, l), 0);
    return r;
}

Test(sign, a_call_verifies_for_its_node_and_names_its_nonce_and_deadline)
{
    struct http_sign_lines l;
    struct http_sign_req r = heartbeat(&l);
    struct http_sign_self self = self_now();
    struct http_sign_seen seen = {0};
    char why[300] = "", to[80];
    struct rx x;

    snprintf(to, sizeof(to), HTTP_SIGN_TO ": n1/%016" PRIx64, INC);
    cr_expect_str_eq(l.to, to);
    cr_expect(strncmp(l.sig, HTTP_SIGN_HEADER ": v4=", 23) == 0, "%s", l.sig);
    cr_expect_eq(strlen(l.sig), sizeof(HTTP_SIGN_HEADER) + 1 + 3 + 64, "%s",
                 l.sig);
    cr_expect_str_eq(l.nonce, HTTP_SIGN_NONCE ": 0000000000abcdef-42");
    received(&x, &r, &l);
    cr_assert_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_OK, "%s",
                 why);
    cr_expect_eq(seen.sender, 0xabcdef);
    cr_expect_eq(seen.seq, 42);
    cr_expect_eq(seen.deadline_ms, r.deadline_ms);
}

Test(sign, a_changed_added_dropped_or_doubled_header_is_refused)
{
    static const char *const signed_names[] = {
        "X-Mayfly-Node",  "X-Mayfly-Client",    "X-Mayfly-Incarnation",
        "X-Mayfly-State", "X-Mayfly-Forwarded", HTTP_SIGN_TIME,
        HTTP_SIGN_NONCE,  HTTP_SIGN_TO,         HTTP_SIGN_DEADLINE};
    struct http_sign_lines l;
    struct http_sign_req r = heartbeat(&l);
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    char why[300];
    struct rx x;

    for (size_t i = 0; i < sizeof(signed_names) / sizeof(signed_names[0]);
         i++) {
        received(&x, &r, &l);
        *header(&x, signed_names[i]) = "leaving";
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                     "%s changed", signed_names[i]);
        received(&x, &r, &l);
        *header(&x, signed_names[i]) = "";
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                     "%s emptied", signed_names[i]);
        /* dropped: its name made one no X-Mayfly- header has */
        received(&x, &r, &l);
        for (size_t k = 0; k < x.c.nh; k++)
            if (strcasecmp(x.h[k].name, signed_names[i]) == 0)
                x.h[k].name = "X-Other";
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                     "%s dropped", signed_names[i]);
    }
    received(&x, &r, &l);
    add(&x, "X-Mayfly-Withdraw: 12");
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "a header added");
    received(&x, &r, &l);
    add(&x, "X-Mayfly-Client: 10.6.6.6:80");
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "a header doubled");
    received(&x, &r, &l);
    add(&x, l.sig);
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "the signature doubled");
}

Test(sign, method_target_body_and_key_are_signed)
{
    struct http_sign_lines l;
    struct http_sign_req r = heartbeat(&l);
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    char why[300];
    struct rx x;

    received(&x, &r, &l);
    x.c.method = "PUT";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    received(&x, &r, &l);
    x.c.target = "/cluster/v1/delete";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    received(&x, &r, &l);
    x.c.body = "2\n";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    received(&x, &r, &l);
    x.c.body = NULL;
    x.c.len = 0;
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    received(&x, &r, &l);
    cr_expect_eq(http_sign_check(&x.c, "another", &self, r.now_ms, &seen, why,
                                 sizeof(why)),
                 HTTP_SIGN_BAD);
    cr_expect(strstr(why, HTTP_SIGN_HEADER), "%s", why);
}

Test(sign, order_case_and_other_headers_do_not_matter)
{
    struct http_sign_lines l;
    struct http_sign_req r = heartbeat(&l);
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    char why[300];
    struct rx x, y;

    received(&x, &r, &l);
    memset(&y, 0, sizeof(y));
    y.c = x.c;
    y.c.h = y.h;
    y.c.nh = 0;
    for (size_t i = x.c.nh; i-- > 0;) { /* reversed, names upper-cased */
        char line[320], *p;
        snprintf(line, sizeof(line), "%s: %s", x.h[i].name, x.h[i].value);
        for (p = line; *p != ':'; p++)
            *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        add(&y, line);
    }
    add(&y, "Accept: */*");
    add(&y, "X-Mayfly: 1");            /* not of the family: no dash */
    add(&y, "Authorization2: Bearer"); /* not Authorization */
    cr_expect_eq(check(&y, &self, r.now_ms, &seen, why), HTTP_SIGN_OK, "%s",
                 why);
}

Test(sign, fields_cannot_pass_for_one_another)
{
    /* "a: bc" and "ab: c" hash to different texts (each field carries its
     * length), so do a value moved from one header into the next. */
    struct http_sign_header one[] = {{"X-Mayfly-A", "bc"},
                                     {"X-Mayfly-D", ""},
                                     {HTTP_SIGN_NONCE, "0000000000000001-1"}};
    struct http_sign_header two[] = {{"X-Mayfly-A", "b"},
                                     {"X-Mayfly-D", "c"},
                                     {HTTP_SIGN_NONCE, "0000000000000001-1"}};
    struct http_sign_call a = {"POST", "/x", "", 0, one, 3};
    struct http_sign_call b = {"POST", "/x", "", 0, two, 3};
    struct http_sign_call t1 = {"POST", "/x?", "", 0, one + 2, 1};
    struct http_sign_call t2 = {"POST", "/x", "?", 1, one + 2, 1};
    char sa[HTTP_SIGN_VALUE_MAX], sb[HTTP_SIGN_VALUE_MAX];

    cr_assert_eq(http_sign(KEY, &a, sa), 0);
    cr_assert_eq(http_sign(KEY, &b, sb), 0);
    cr_expect_str_neq(sa, sb);
    cr_assert_eq(http_sign(KEY, &t1, sa), 0);
    cr_assert_eq(http_sign(KEY, &t2, sb), 0);
    cr_expect_str_neq(sa, sb);
}

Test(sign, a_call_for_another_node_or_incarnation_is_elsewhere)
{
    struct http_sign_lines l;
    struct http_sign_req r = heartbeat(&l);
    struct http_sign_self self = self_now(), other;
    struct http_sign_seen seen;
    char why[300];
    struct rx x;

    received(&x, &r, &l);
    other = self;
    other.node_id = "n2";
    cr_expect_eq(check(&x, &other, r.now_ms, &seen, why), HTTP_SIGN_ELSEWHERE);
    cr_expect(strstr(why, "'n1'"), "%s", why);
    other = self;
    other.incarnation = INC + 1; /* restarted since */
    cr_expect_eq(check(&x, &other, r.now_ms, &seen, why), HTTP_SIGN_ELSEWHERE);
    cr_expect(strstr(why, "incarnation"), "%s", why);
    other = self;
    other.node_id = "n"; /* a prefix of the id is not the id */
    cr_expect_eq(check(&x, &other, r.now_ms, &seen, why), HTTP_SIGN_ELSEWHERE);
}

Test(sign, a_call_by_address_is_for_this_incarnation_only_once_started)
{
    struct http_sign_lines l;
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    int64_t now = http_sign_now_ms();
    char why[300];
    struct rx x;
    struct http_sign_req r = {
        .method = "POST",
        .target = "/cluster/v1/raft",
        .body = "x",
        .len = 1,
        .to = {"10.0.0.1:6633", NULL, 0}, /* not heard yet */
        .sender = 9,
        .seq = 1,
        .now_ms = now,
    };

    cr_assert_eq(http_sign_lines(KEY, &r, &l), 0);
    cr_expect_str_eq(l.to, HTTP_SIGN_TO ": 10.0.0.1:6633");
    cr_expect_str_eq(l.deadline, "");
    received(&x, &r, &l);
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_OK, "%s", why);
    cr_expect_eq(seen.deadline_ms, 0);
    /* the node restarted after the call was made: a replay to it */
    self.since_ms = now + 1;
    cr_expect_eq(check(&x, &self, now + 5, &seen, why), HTTP_SIGN_ELSEWHERE);
    self = self_now();
    self.addr[0] = "10.0.0.2:6633";
    self.addr[1] = NULL;
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_ELSEWHERE);
    cr_expect(strstr(why, "10.0.0.1:6633"), "%s", why);
}

Test(sign, a_timestamp_outside_the_window_is_stale)
{
    struct http_sign_lines l;
    struct http_sign_req r = heartbeat(&l);
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    char why[300];
    struct rx x;

    received(&x, &r, &l);
    cr_expect_eq(
        check(&x, &self, r.now_ms + HTTP_SIGN_WINDOW_MS - 2, &seen, why),
        HTTP_SIGN_OK, "%s", why);
    cr_expect_eq(
        check(&x, &self, r.now_ms + HTTP_SIGN_WINDOW_MS + 5, &seen, why),
        HTTP_SIGN_STALE);
    cr_expect(strstr(why, HTTP_SIGN_TIME), "%s", why);
    cr_expect_eq(
        check(&x, &self, r.now_ms - HTTP_SIGN_WINDOW_MS - 5, &seen, why),
        HTTP_SIGN_STALE);
}

/* signed_as - a call carrying exactly headers h (n of them) and a valid
 * signature of them: what a holder of the key could send; 0.  -EINVAL
 * when they cannot be signed (no nonce that parses: the body's MAC takes
 * it), and then a made-up signature. */
static int
signed_as(struct rx *x, const char *const *lines, size_t n)
{
    char sig[HTTP_SIGN_VALUE_MAX], line[100];
    int rc;

    memset(x, 0, sizeof(*x));
    x->c = (struct http_sign_call){"GET", "/", NULL, 0, x->h, 0};
    for (size_t i = 0; i < n; i++)
        add(x, lines[i]);
    if ((rc = http_sign(KEY, &x->c, sig)) != 0)
        snprintf(sig, sizeof(sig), "v4=%064d", 0);
    snprintf(line, sizeof(line), HTTP_SIGN_HEADER ": %s", sig);
    add(x, line);
    return rc;
}

Test(sign, missing_or_malformed_headers)
{
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    int64_t now = http_sign_now_ms();
    char why[300], ts[60], to[80];
    const char *nonce = HTTP_SIGN_NONCE ": 0000000000000007-1";
    const char *nonces[] = {"7-1", "000000000000000g-1", "0000000000000007-",
                            "0000000000000007-x", "0000000000000007-1x"};
    struct rx x;

    snprintf(ts, sizeof(ts), HTTP_SIGN_TIME ": %" PRId64, now);
    snprintf(to, sizeof(to), HTTP_SIGN_TO ": n1/%016" PRIx64, INC);
    const char *good[] = {ts, nonce, to};
    cr_assert_eq(signed_as(&x, good, 3), 0);
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_OK, "%s", why);
    x.c.nh--; /* the signature */
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_ABSENT);
    for (int drop = 0; drop < 3; drop++) {
        const char *two[2];
        for (int k = 0, j = 0; k < 3; k++)
            if (k != drop)
                two[j++] = good[k];
        /* without a nonce no signature can be made */
        cr_expect_eq(signed_as(&x, two, 2), drop == 1 ? -EINVAL : 0);
        cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_BAD,
                     "without %s", good[drop]);
        cr_expect(strstr(why, HTTP_SIGN_NONCE), "%s", why);
    }
    for (size_t i = 0; i < sizeof(nonces) / sizeof(nonces[0]); i++) {
        char n[80];
        snprintf(n, sizeof(n), HTTP_SIGN_NONCE ": %s", nonces[i]);
        const char *h[] = {ts, n, to};
        cr_expect_eq(signed_as(&x, h, 3), -EINVAL, "%s", nonces[i]);
        cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_BAD, "%s",
                     nonces[i]);
        cr_expect(strstr(why, HTTP_SIGN_NONCE), "%s: %s", nonces[i], why);
    }
    const char *bad_time[] = {HTTP_SIGN_TIME ": 12a", nonce, to};
    cr_assert_eq(signed_as(&x, bad_time, 3), 0);
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_BAD);
    const char *bad_deadline[] = {ts, nonce, to, HTTP_SIGN_DEADLINE ": -1"};
    cr_assert_eq(signed_as(&x, bad_deadline, 4), 0);
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_BAD);
    const char *bad_inc[] = {ts, nonce, HTTP_SIGN_TO ": n1/1122"};
    cr_assert_eq(signed_as(&x, bad_inc, 3), 0);
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_ELSEWHERE);
}

Test(sign, what_cannot_be_signed_is_refused)
{
    struct http_sign_lines l;
    struct http_sign_header twice[] = {{HTTP_SIGN_NONCE, "0000000000000001-1"},
                                       {"X-Mayfly-A", "1"},
                                       {"x-mayfly-a", "2"}};
    struct http_sign_call c = {"GET", "/", NULL, 0, twice, 3};
    struct http_sign_header many[HTTP_SIGN_HEADERS_MAX + 1];
    char names[HTTP_SIGN_HEADERS_MAX + 1][32], sig[HTTP_SIGN_VALUE_MAX];
    const char *own[] = {HTTP_SIGN_TO ": n9/0000000000000001"};
    const char *no_colon[] = {"X-Mayfly-Node n0"};
    struct http_sign_req r = {.method = "GET",
                              .target = "/",
                              .to = {"10.0.0.1:1", NULL, 0},
                              .now_ms = 1};

    cr_expect_eq(http_sign(KEY, &c, sig), -EINVAL, "a name twice");
    for (int i = 0; i <= HTTP_SIGN_HEADERS_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), "X-Mayfly-H%d", i);
        many[i] = (struct http_sign_header){names[i], "v"};
    }
    many[0] = (struct http_sign_header){HTTP_SIGN_NONCE, "0000000000000001-1"};
    c = (struct http_sign_call){"GET", "/",  NULL,
                                0,     many, HTTP_SIGN_HEADERS_MAX};
    cr_expect_eq(http_sign(KEY, &c, sig), 0);
    c.nh++;
    cr_expect_eq(http_sign(KEY, &c, sig), -EINVAL, "too many");
    c.nh = 3; /* no nonce among them */
    c.h = many + 1;
    cr_expect_eq(http_sign(KEY, &c, sig), -EINVAL, "no nonce");
    r.lines = own;
    r.nlines = 1;
    cr_expect_eq(http_sign_lines(KEY, &r, &l), -EINVAL, "the signer's own");
    r.lines = no_colon;
    cr_expect_eq(http_sign_lines(KEY, &r, &l), -EINVAL, "no colon");
    r.lines = NULL;
    r.nlines = 0;
    r.to.addr = NULL;
    cr_expect_eq(http_sign_lines(KEY, &r, &l), -EINVAL, "nowhere");
}

/* Big enough for a forwarded push of 100 x 256 B, in UMAC's 1 KiB blocks. */
#define BIG 27000

/* big_body - BIG bytes, not all alike. */
static const char *
big_body(void)
{
    static char b[BIG + 1];

    for (size_t i = 0; i < BIG; i++)
        b[i] = (char)('a' + (i * 7 + i / 251) % 26);
    return b;
}

/* push_to_n1 - a forwarded push of body (len bytes) from n0's sender 0x5e
 * with count seq, made at now, into l. */
static struct http_sign_req
push_to_n1(const void *body, size_t len, uint64_t seq, int64_t now,
           struct http_sign_lines *l)
{
    struct http_sign_req r = {
        .method = "POST",
        .target = "/api/v1/ephemeral/push",
        .body = body,
        .len = len,
        .lines = peer_lines,
        .nlines = sizeof(peer_lines) / sizeof(peer_lines[0]),
        .to = {"10.0.0.1:6632", "n1", INC},
        .sender = 0x5e,
        .seq = seq,
        .now_ms = now,
        .deadline_ms = now + 1000,
    };

    cr_assert_eq(http_sign_lines(KEY, &r, l), 0);
    return r;
}

/* forwarded_with - a forwarded push from n0 (sender 0x5e, count 9) that
 * carries the client's Authorization line authz, signed now into l. */
static struct http_sign_req
forwarded_with(struct http_sign_lines *l, const char *authz)
{
    static const char *lines[8];
    size_t n = sizeof(peer_lines) / sizeof(peer_lines[0]);
    int64_t now = http_sign_now_ms();
    struct http_sign_req r = {
        .method = "POST",
        .target = "/api/v1/ephemeral/push?queue=secret-q&partition=x17",
        .body = "[{\"card\":\"4111\"}]",
        .len = 17,
        .lines = lines,
        .nlines = n + 1,
        .to = {"10.0.0.1:6632", "n1", INC},
        .sender = 0x5e,
        .seq = 9,
        .now_ms = now,
        .deadline_ms = now + 1000,
    };

    memcpy(lines, peer_lines, n * sizeof(lines[0]));
    lines[n] = authz;
    cr_assert_eq(http_sign_lines(KEY, &r, l), 0);
    return r;
}

/* The owner authorizes a forwarded call by its Authorization (tenant,
 * permissions): the token swapped, emptied, dropped, added or doubled on
 * the way is an altered call; its case and the spaces around the value
 * are not, and a JWT longer than a header line of the signer's scratch
 * signs as well. */
Test(sign, the_authorization_is_signed)
{
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    struct http_sign_lines l;
    char why[300], jwt[4200], line[4300];
    struct http_sign_req r = forwarded_with(&l, "Authorization: Bearer tok-A");
    struct rx x;

    received(&x, &r, &l);
    cr_assert_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_OK, "%s",
                 why);
    *header(&x, "Authorization") = "Bearer tok-B";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "another tenant's token");
    cr_expect(strstr(why, "does not match"), "%s", why);
    *header(&x, "Authorization") = "";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "emptied");
    received(&x, &r, &l);
    *header(&x, "Authorization") = "  Bearer tok-A\t";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_OK,
                 "spaces around: %s", why);
    received(&x, &r, &l);
    for (size_t k = 0; k < x.c.nh; k++)
        if (strcasecmp(x.h[k].name, "Authorization") == 0)
            x.h[k].name = "AUTHORIZATION";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_OK,
                 "the name's case: %s", why);
    received(&x, &r, &l);
    add(&x, "Authorization: Bearer tok-B");
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "a second one");
    received(&x, &r, &l);
    for (size_t k = 0; k < x.c.nh; k++)
        if (strcasecmp(x.h[k].name, "Authorization") == 0)
            x.h[k].name = "X-Other";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "dropped");
    /* a call signed without one, one added */
    r = heartbeat(&l);
    received(&x, &r, &l);
    add(&x, "Authorization: Bearer tok-B");
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "added");
    /* a JWT-sized token, past the signer's 512-byte lines */
    memset(jwt, 'j', sizeof(jwt) - 1);
    jwt[sizeof(jwt) - 1] = '\0';
    snprintf(line, sizeof(line), "Authorization: Bearer %s", jwt);
    r = forwarded_with(&l, line);
    received(&x, &r, &l);
    *header(&x, "Authorization") = r.lines[r.nlines - 1] + 15;
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_OK, "%s",
                 why);
    jwt[100] = 'k';
    snprintf(line, sizeof(line), "Bearer %s", jwt);
    *header(&x, "Authorization") = line;
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                 "a JWT's byte changed");
}

/* A call's lines with two Authorization lines cannot be signed. */
Test(sign, two_authorization_lines_cannot_be_signed)
{
    const char *lines[] = {"Authorization: Bearer a", "X-Mayfly-Node: n0",
                           "authorization: Bearer b"};
    struct http_sign_req r = {.method = "GET",
                              .target = "/",
                              .lines = lines,
                              .nlines = 3,
                              .to = {"10.0.0.1:1", NULL, 0},
                              .now_ms = 1};
    struct http_sign_lines l;

    cr_expect_eq(http_sign_lines(KEY, &r, &l), -EINVAL);
    r.nlines = 2;
    cr_expect_eq(http_sign_lines(KEY, &r, &l), 0);
}

Test(sign, a_changed_body_byte_or_length_is_refused)
{
    static const size_t lens[] = {0, 1, 1023, 1024, 1025, 2048, BIG};
    static char body[BIG + 1];
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    struct http_sign_lines l;
    char why[300];
    struct rx x;

    memcpy(body, big_body(), BIG + 1);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t n = lens[i];
        struct http_sign_req r =
            push_to_n1(body, n, 7 + i, http_sign_now_ms(), &l);

        received(&x, &r, &l);
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_OK,
                     "%zu bytes: %s", n, why);
        x.c.len = n + 1; /* one byte more */
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                     "%zu bytes and one", n);
        if (n == 0)
            continue;
        x.c.len = n - 1; /* one byte less */
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                     "%zu bytes less one", n);
        x.c.len = n;
        for (size_t at = 0; at < n; at += n / 3 + 1) { /* first, middle */
            body[at] ^= 1;
            cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                         "%zu bytes, byte %zu changed", n, at);
            body[at] ^= 1;
        }
        body[n - 1] ^= 0x80; /* the last */
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                     "%zu bytes, the last changed", n);
        body[n - 1] ^= 0x80;
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_OK,
                     "%zu bytes restored: %s", n, why);
    }
}

Test(sign, a_changed_nonce_is_refused)
{
    static const char *const others[] = {
        "000000000000005e-8",  /* the next count */
        "000000000000005f-7",  /* another sender */
        "000000000000005e-70", /* digits added */
    };
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    struct http_sign_lines l;
    char why[300];
    struct rx x;
    struct http_sign_req r =
        push_to_n1(big_body(), BIG, 7, http_sign_now_ms(), &l);

    cr_expect_str_eq(l.nonce, HTTP_SIGN_NONCE ": 000000000000005e-7");
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        received(&x, &r, &l);
        *header(&x, HTTP_SIGN_NONCE) = others[i];
        cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD,
                     "%s", others[i]);
        cr_expect(strstr(why, "does not match"), "%s: %s", others[i], why);
    }
}

Test(sign, a_body_moved_between_two_calls_is_refused)
{
    /* two calls alike but for their count and body, made the same ms:
     * each one's headers with the other's body are refused */
    static char a[BIG + 1], b[BIG + 1];
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    struct http_sign_lines la, lb;
    int64_t now = http_sign_now_ms();
    char why[300];
    struct rx x;

    memcpy(a, big_body(), BIG + 1);
    memcpy(b, a, BIG + 1);
    b[BIG / 2] = '!';
    struct http_sign_req ra = push_to_n1(a, BIG, 100, now, &la);
    struct http_sign_req rb = push_to_n1(b, BIG, 101, now, &lb);

    received(&x, &ra, &la);
    cr_assert_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_OK, "%s", why);
    x.c.body = b;
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_BAD, "b in a");
    received(&x, &rb, &lb);
    cr_assert_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_OK, "%s", why);
    x.c.body = a;
    cr_expect_eq(check(&x, &self, now, &seen, why), HTTP_SIGN_BAD, "a in b");
    /* one body under two nonces: two body MACs, two signatures */
    rb = push_to_n1(a, BIG, 101, now, &lb);
    cr_expect_str_neq(la.sig, lb.sig);
}

/* hexs - n bytes as lowercase hex into out. */
static void
hexs(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

Test(sign, nettle_umac128_gives_rfc_4418_vectors)
{
    /* RFC 4418 appendix, key "abcdefghijklmnop", nonce "bcdefghi": the
     * UMAC-96 column, which UMAC-128's first 12 bytes are (the same four
     * UHASH iterations less one, the same pad), and UMAC-128 of "" in
     * full (as python-nettle's tests give it) */
    static const struct {
        size_t n;
        const char *want;
    } v[] = {
        {0, "32fedb100c79ad58f07ff7643cc60465"},
        {3, "185e4fe905cba7bd85e4c2dc"},
        {1024, "7a54abe04af82d60fb298c3c"},
        {32768, "7b136bd911e4b734286ef2be"},
    };
    static char msg[32768];
    struct umac128_ctx u;
    uint8_t tag[UMAC128_DIGEST_SIZE];
    char got[2 * UMAC128_DIGEST_SIZE + 1];

    memset(msg, 'a', sizeof(msg));
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        umac128_set_key(&u, (const uint8_t *)"abcdefghijklmnop");
        umac128_set_nonce(&u, 8, (const uint8_t *)"bcdefghi");
        umac128_update(&u, v[i].n, (const uint8_t *)msg);
        umac128_digest(&u, sizeof(tag), tag);
        hexs(tag, sizeof(tag), got);
        got[strlen(v[i].want)] = '\0';
        cr_expect_str_eq(got, v[i].want, "'a' x %zu", v[i].n);
    }
}

/* A header as the oracle signs it. */
struct field {
    char name[64];
    const char *value;
};

static int
field_cmp(const void *a, const void *b)
{
    return strcmp(((const struct field *)a)->name,
                  ((const struct field *)b)->name);
}

/* oracle_field - F(s) of sign.h into the HMAC. */
static void
oracle_field(struct hmac_sha256_ctx *m, const char *s, size_t n)
{
    char len[32];

    snprintf(len, sizeof(len), "%zu:", n);
    hmac_sha256_update(m, strlen(len), (const uint8_t *)len);
    hmac_sha256_update(m, n, (const uint8_t *)s);
    hmac_sha256_update(m, 1, (const uint8_t *)"\n");
}

/* oracle - the signature value of call c as sign.h describes it, version
 * 4 (UMAC-128 of the body under the nonce sender, seq, and Authorization
 * signed: "v4=<hex>"), 3 (as 4, Authorization not signed: "v3=<hex>") or
 * 2 (SHA-256 of the body: "<hex>"), as the builds before made them,
 * written from sign.h's text and nettle, not from sign.c. */
static void
oracle(int version, const struct http_sign_call *c, uint64_t sender,
       uint64_t seq, char *out)
{
    struct hmac_sha256_ctx m;
    struct field f[40];
    uint8_t d[SHA256_DIGEST_SIZE];
    char body[2 * SHA256_DIGEST_SIZE + 1];
    size_t nf = 0;

    if (version >= 3) {
        struct umac128_ctx u;
        uint8_t nonce[16], tag[UMAC128_DIGEST_SIZE];

        hmac_sha256_set_key(&m, strlen(KEY), (const uint8_t *)KEY);
        hmac_sha256_update(&m, 16, (const uint8_t *)"mayfly body umac");
        hmac_sha256_digest(&m, sizeof(d), d);
        umac128_set_key(&u, d); /* the first 16 bytes */
        for (int i = 0; i < 8; i++) {
            nonce[i] = (uint8_t)(sender >> (56 - 8 * i));
            nonce[8 + i] = (uint8_t)(seq >> (56 - 8 * i));
        }
        umac128_set_nonce(&u, sizeof(nonce), nonce);
        umac128_update(&u, c->len, c->body);
        umac128_digest(&u, sizeof(tag), tag);
        hexs(tag, sizeof(tag), body);
    } else {
        struct sha256_ctx h;

        sha256_init(&h);
        sha256_update(&h, c->len, c->body);
        sha256_digest(&h, sizeof(d), d);
        hexs(d, sizeof(d), body);
    }
    for (size_t i = 0; i < c->nh; i++) {
        int authz = strcasecmp(c->h[i].name, "authorization") == 0;
        if ((strncasecmp(c->h[i].name, "x-mayfly-", 9) != 0 &&
             !(version == 4 && authz)) ||
            strcasecmp(c->h[i].name, HTTP_SIGN_HEADER) == 0)
            continue;
        cr_assert(nf < 40 && strlen(c->h[i].name) < 64);
        for (size_t k = 0; k <= strlen(c->h[i].name); k++)
            f[nf].name[k] = (char)tolower((unsigned char)c->h[i].name[k]);
        f[nf++].value = c->h[i].value;
    }
    qsort(f, nf, sizeof(f[0]), field_cmp);
    hmac_sha256_set_key(&m, strlen(KEY), (const uint8_t *)KEY);
    snprintf(out, 16, "mayfly-call-%d\n", version);
    hmac_sha256_update(&m, 14, (const uint8_t *)out);
    oracle_field(&m, c->method, strlen(c->method));
    oracle_field(&m, c->target, strlen(c->target));
    oracle_field(&m, body, strlen(body));
    for (size_t i = 0; i < nf; i++) {
        oracle_field(&m, f[i].name, strlen(f[i].name));
        oracle_field(&m, f[i].value, strlen(f[i].value));
    }
    hmac_sha256_digest(&m, sizeof(d), d);
    if (version >= 3)
        sprintf(out, "v%d=", version);
    else
        out[0] = '\0';
    hexs(d, sizeof(d), out + strlen(out));
}

Test(sign, the_signature_is_the_text_sign_h_describes)
{
    struct http_sign_lines l;
    struct http_sign_req r =
        push_to_n1(big_body(), BIG, 7, http_sign_now_ms(), &l);
    char want[HTTP_SIGN_VALUE_MAX + 8];
    struct rx x;

    received(&x, &r, &l);
    oracle(4, &x.c, 0x5e, 7, want);
    cr_expect_str_eq(*header(&x, HTTP_SIGN_HEADER), want);
    r = heartbeat(&l);
    received(&x, &r, &l);
    oracle(4, &x.c, 0xabcdef, 42, want);
    cr_expect_str_eq(*header(&x, HTTP_SIGN_HEADER), want);
    r = forwarded_with(&l, "Authorization: Bearer tok-alice");
    received(&x, &r, &l);
    oracle(4, &x.c, 0x5e, 9, want);
    cr_expect_str_eq(*header(&x, HTTP_SIGN_HEADER), want);
}

Test(sign, a_call_signed_by_another_build_is_refused_saying_so)
{
    struct http_sign_lines l;
    struct http_sign_req r = heartbeat(&l);
    struct http_sign_self self = self_now();
    struct http_sign_seen seen;
    char why[300], v2[HTTP_SIGN_VALUE_MAX + 8], v3[HTTP_SIGN_VALUE_MAX + 8],
        v4[2 * HTTP_SIGN_VALUE_MAX];
    struct rx x;

    /* as the build of mayfly-call-2 signed it */
    received(&x, &r, &l);
    oracle(2, &x.c, 0xabcdef, 42, v2);
    *header(&x, HTTP_SIGN_HEADER) = v2;
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    cr_expect(strstr(why, "another build") && strstr(why, "mayfly-call-2"),
              "%s", why);
    /* as the build of mayfly-call-3 signed it (Authorization unsigned) */
    oracle(3, &x.c, 0xabcdef, 42, v3);
    *header(&x, HTTP_SIGN_HEADER) = v3;
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    cr_expect(strstr(why, "another build") && strstr(why, "mayfly-call-3"),
              "%s", why);
    /* a later build's */
    snprintf(v4, sizeof(v4), "v5=%s", v2);
    *header(&x, HTTP_SIGN_HEADER) = v4;
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    cr_expect(strstr(why, "another build") && strstr(why, "mayfly-call-5"),
              "%s", why);
    /* this build's form, but not the call's: altered */
    snprintf(v4, sizeof(v4), "v4=%s", v2);
    *header(&x, HTTP_SIGN_HEADER) = v4;
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    cr_expect(strstr(why, "does not match"), "%s", why);
    *header(&x, HTTP_SIGN_HEADER) = "whatever";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    cr_expect(strstr(why, "does not match"), "%s", why);
    *header(&x, HTTP_SIGN_HEADER) = "";
    cr_expect_eq(check(&x, &self, r.now_ms, &seen, why), HTTP_SIGN_BAD);
    cr_expect(strstr(why, "does not match"), "%s", why);
}
