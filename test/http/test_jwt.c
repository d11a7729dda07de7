/*
 * test_jwt.c - http/jwt.c: signed tokens (SPEC §11) verified as a node
 * does, on tokens minted here with libjwt itself, as an application's
 * backend would mint them: a good one, an expired one, one without exp,
 * a tampered one, alg none, another secret, another algorithm; the claims
 * mapped onto the auth file's permissions and tenant; the secret's file.
 */
#include <errno.h>
#include <jwt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "http/auth.h"
#include "http/jwt.h"

#define JW_SECRET "0123456789abcdef0123456789abcdef-test-secret"

static struct http_jwt_key jw_key;
static char jw_why[256];
static char jw_path[64];

/* jw_setup - the key every test verifies with. */
static void
jw_setup(void)
{
    jw_key.len = strlen(JW_SECRET);
    memcpy(jw_key.bytes, JW_SECRET, jw_key.len);
}

/* jw_remove - the secret file a test wrote, if any. */
static void
jw_remove(void)
{
    if (jw_path[0] != '\0')
        unlink(jw_path);
    jw_path[0] = '\0';
}

TestSuite(jwt, .init = jw_setup, .fini = jw_remove, .timeout = 30);

/* jw_mint - a token of claims (a JSON object) signed with alg and secret
 * (NULL with JWT_ALG_NONE); malloc'd, as libjwt encodes it. */
static char *
jw_mint(jwt_alg_t alg, const char *secret, const char *claims)
{
    jwt_t *j = NULL;
    char *out;

    cr_assert_eq(jwt_new(&j), 0);
    cr_assert_eq(jwt_add_grants_json(j, claims), 0, "%s", claims);
    cr_assert_eq(jwt_set_alg(j, alg, (const unsigned char *)secret,
                             secret ? (int)strlen(secret) : 0),
                 0);
    out = jwt_encode_str(j);
    cr_assert_not_null(out);
    jwt_free(j);
    return out;
}

/* jw_claims - a claims object with exp at now + exp_in and rest after it
 * (",..." or ""). */
static const char *
jw_claims(long exp_in, const char *rest)
{
    static char buf[1024];

    snprintf(buf, sizeof(buf), "{\"exp\": %lld%s}",
             (long long)time(NULL) + exp_in, rest);
    return buf;
}

/* jw_verify - http_jwt_verify() of tok with the suite's key, now. */
static int
jw_verify(const char *tok, struct auth_token *out)
{
    jw_why[0] = '\0';
    return http_jwt_verify(&jw_key, tok, strlen(tok), (int64_t)time(NULL), out,
                           jw_why, sizeof(jw_why));
}

/* jw_refused - tok is refused with rc, the sentence holding want. */
static void
jw_refused(const char *tok, int rc, const char *want)
{
    struct auth_token t;

    cr_assert_eq(jw_verify(tok, &t), rc, "%s: %s", tok, jw_why);
    cr_assert_not_null(strstr(jw_why, want), "'%s' lacks '%s'", jw_why, want);
    cr_assert_null(t.sub, "a refused token leaves nothing behind");
    for (int v = 0; v < AUTH_NVERBS; v++)
        cr_assert_null(t.globs[v]);
}

Test(jwt, a_good_token_gives_its_exp_sub_tenant_and_permissions)
{
    struct auth_token t;
    long long exp = (long long)time(NULL) + 300;
    char claims[512];
    char *tok;

    snprintf(claims, sizeof(claims),
             "{\"exp\": %lld, \"sub\": \"ada\", \"tenant\": \"shop\", "
             "\"push\": [\"orders.*\", \"audit\"], \"subscribe\": "
             "[\"room.*\"]}",
             exp);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET, claims);
    cr_assert(http_jwt_shaped(tok, strlen(tok)));
    cr_assert_eq(jw_verify(tok, &t), 0, "%s", jw_why);
    cr_assert_eq(t.exp, exp);
    cr_assert_str_eq(t.sub, "ada");
    cr_assert_str_eq(t.tenant, "shop");
    cr_assert_eq(t.line, 0);
    cr_assert(auth_allows(&t, AUTH_PUSH, "orders.eu"));
    cr_assert(auth_allows(&t, AUTH_PUSH, "audit"));
    cr_assert_not(auth_allows(&t, AUTH_PUSH, "audit2"));
    cr_assert(auth_allows(&t, AUTH_SUBSCRIBE, "room.7"));
    cr_assert_not(auth_allows(&t, AUTH_POP, "orders.eu"),
                  "a permission left out is not granted");
    cr_assert_null(t.globs[AUTH_ADMIN]);
    auth_token_clear(&t);
    cr_assert_null(t.sub);
    free(tok);
}

Test(jwt, an_expired_token_is_refused_as_expired)
{
    char *tok =
        jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(-5, ", \"push\": [\"*\"]"));

    jw_refused(tok, -EKEYEXPIRED, "expired");
    free(tok);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(0, ""));
    jw_refused(tok, -EKEYEXPIRED, "expired"); /* exp == now: over */
    free(tok);
}

Test(jwt, a_token_without_exp_is_refused)
{
    char *tok = jw_mint(JWT_ALG_HS256, JW_SECRET,
                        "{\"sub\": \"ada\", \"push\": [\"*\"]}");

    jw_refused(tok, -EPERM, "no exp");
    free(tok);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET, "{\"exp\": \"tomorrow\"}");
    jw_refused(tok, -EPERM, "exp is not a number");
    free(tok);
}

Test(jwt, a_fractional_exp_counts_as_its_whole_seconds)
{
    struct auth_token t;
    char claims[128];
    long long exp = (long long)time(NULL) + 100;
    char *tok;

    snprintf(claims, sizeof(claims), "{\"exp\": %lld.75}", exp);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET, claims);
    cr_assert_eq(jw_verify(tok, &t), 0, "%s", jw_why);
    cr_assert_eq(t.exp, exp);
    auth_token_clear(&t);
    free(tok);
}

Test(jwt, a_tampered_token_does_not_verify)
{
    char *good = jw_mint(JWT_ALG_HS256, JW_SECRET,
                         jw_claims(300, ", \"push\": [\"jobs\"]"));
    char *more = jw_mint(JWT_ALG_HS256, "another-secret-of-32-bytes-or-more!!",
                         jw_claims(300, ", \"push\": [\"*\"]"));
    char forged[2048], *sig;
    const char *payload = strchr(more, '.') + 1;
    size_t plen = (size_t)(strchr(payload, '.') - payload);

    /* good's header and signature around more's claims (push everything) */
    sig = strrchr(good, '.');
    snprintf(forged, sizeof(forged), "%.*s.%.*s%s",
             (int)(strchr(good, '.') - good), good, (int)plen, payload, sig);
    cr_assert(http_jwt_shaped(forged, strlen(forged)));
    jw_refused(forged, -EPERM, "does not verify");
    /* one character of the signature changed */
    snprintf(forged, sizeof(forged), "%s", good);
    sig = strrchr(forged, '.') + 1;
    sig[3] = sig[3] == 'A' ? 'B' : 'A';
    jw_refused(forged, -EPERM, "does not verify");
    /* the signature cut off */
    snprintf(forged, sizeof(forged), "%s", good);
    strrchr(forged, '.')[1] = '\0';
    jw_refused(forged, -EPERM, "does not verify");
    free(good);
    free(more);
}

Test(jwt, alg_none_is_refused)
{
    char *tok =
        jw_mint(JWT_ALG_NONE, NULL, jw_claims(300, ", \"admin\": [\"*\"]"));

    cr_assert(http_jwt_shaped(tok, strlen(tok)), "%s", tok);
    jw_refused(tok, -EPERM, "does not verify");
    free(tok);
}

Test(jwt, a_token_signed_with_another_secret_is_refused)
{
    char *tok = jw_mint(JWT_ALG_HS256, "not-the-node-secret-but-long-enough",
                        jw_claims(300, ", \"push\": [\"*\"]"));

    jw_refused(tok, -EPERM, "does not verify");
    free(tok);
}

Test(jwt, hs384_and_hs512_are_refused_even_with_the_secret)
{
    char *tok = jw_mint(JWT_ALG_HS512, JW_SECRET, jw_claims(300, ""));

    jw_refused(tok, -EPERM, "HS256 only");
    free(tok);
    tok = jw_mint(JWT_ALG_HS384, JW_SECRET, jw_claims(300, ""));
    jw_refused(tok, -EPERM, "HS256 only");
    free(tok);
}

Test(jwt, every_permission_claim_maps_onto_its_verb)
{
    struct auth_token t;
    char *tok =
        jw_mint(JWT_ALG_HS256, JW_SECRET,
                jw_claims(300, ", \"push\": [\"p\"], \"pop\": [\"o\"], "
                               "\"request\": [\"q\"], \"subscribe\": "
                               "[\"s\"], \"presence\": [\"e\"], "
                               "\"read\": [\"r\"], \"admin\": [\"a\"]"));
    const char *names[AUTH_NVERBS] = {
        [AUTH_PUSH] = "p",      [AUTH_POP] = "o",      [AUTH_REQUEST] = "q",
        [AUTH_SUBSCRIBE] = "s", [AUTH_PRESENCE] = "e", [AUTH_READ] = "r",
        [AUTH_ADMIN] = "a",
    };

    cr_assert_eq(jw_verify(tok, &t), 0, "%s", jw_why);
    for (int v = 0; v < AUTH_NVERBS; v++)
        for (int u = 0; u < AUTH_NVERBS; u++)
            cr_assert_eq(auth_allows(&t, (enum auth_verb)v, names[u]), v == u,
                         "%s on '%s'", auth_verb_name((enum auth_verb)v),
                         names[u]);
    auth_token_clear(&t);
    free(tok);
}

Test(jwt, an_empty_array_grants_nothing_and_other_shapes_are_refused)
{
    struct auth_token t;
    char *tok =
        jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(300, ", \"pop\": []"));

    cr_assert_eq(jw_verify(tok, &t), 0, "%s", jw_why);
    cr_assert_null(t.globs[AUTH_POP]);
    auth_token_clear(&t);
    free(tok);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(300, ", \"pop\": \"*\""));
    jw_refused(tok, -EPERM, "pop is not an array");
    free(tok);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET,
                  jw_claims(300, ", \"read\": [\"a\", 7]"));
    jw_refused(tok, -EPERM, "read is not an array");
    free(tok);
    tok =
        jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(300, ", \"push\": [\"\"]"));
    jw_refused(tok, -EPERM, "push is not an array");
    free(tok);
}

Test(jwt, the_tenant_claim_is_a_tenant_name_or_absent)
{
    struct auth_token t;
    char *tok = jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(300, ""));

    cr_assert_eq(jw_verify(tok, &t), 0, "%s", jw_why);
    cr_assert_str_eq(t.tenant, "", "no tenant: names as they are");
    cr_assert_null(t.sub);
    auth_token_clear(&t);
    free(tok);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET,
                  jw_claims(300, ", \"tenant\": \"a b\""));
    jw_refused(tok, -EPERM, "tenant");
    free(tok);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(300, ", \"tenant\": 7"));
    jw_refused(tok, -EPERM, "tenant");
    free(tok);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(300, ", \"sub\": 7"));
    jw_refused(tok, -EPERM, "sub");
    free(tok);
}

Test(jwt, a_token_before_its_nbf_is_refused)
{
    char claims[128];
    char *tok;

    snprintf(claims, sizeof(claims), "{\"exp\": %lld, \"nbf\": %lld}",
             (long long)time(NULL) + 300, (long long)time(NULL) + 100);
    tok = jw_mint(JWT_ALG_HS256, JW_SECRET, claims);
    jw_refused(tok, -EKEYEXPIRED, "nbf");
    free(tok);
}

Test(jwt, no_key_verifies_nothing)
{
    struct http_jwt_key none = {0};
    struct auth_token t;
    char *tok = jw_mint(JWT_ALG_HS256, JW_SECRET, jw_claims(300, ""));

    cr_assert_eq(http_jwt_verify(&none, tok, strlen(tok), (int64_t)time(NULL),
                                 &t, jw_why, sizeof(jw_why)),
                 -EPERM);
    free(tok);
}

Test(jwt, the_shape_is_three_base64url_parts)
{
    static const char *const yes[] = {"a.b.c", "eyJ.eyJ.", "A-_.0.z9-_"};
    static const char *const no[] = {
        "abc",    "a.b",    "a.b.c.d", ".b.c", "a..c",
        "a.b+.c", "a.b.c=", "a b.c.d", "",
    };

    for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
        cr_assert(http_jwt_shaped(yes[i], strlen(yes[i])), "%s", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
        cr_assert_not(http_jwt_shaped(no[i], strlen(no[i])), "%s", no[i]);
}

/* jw_file - text into a fresh temporary file; its path in jw_path. */
static const char *
jw_file(const char *text, size_t len)
{
    int fd;

    jw_remove();
    snprintf(jw_path, sizeof(jw_path), "/tmp/mayfly-test-jwt-XXXXXX");
    fd = mkstemp(jw_path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return jw_path;
}

Test(jwt, the_secret_file_is_read_whole_without_its_trailing_newline)
{
    struct http_jwt_key k = {0};
    char err[512], big[HTTP_JWT_KEY_MAX + 100];
    const char *bad[][2] = {{"", "holds no secret"},
                            {"\n \n", "holds no secret"},
                            {"short-secret\n", "at least 32"}};

    cr_assert_eq(
        http_jwt_key_load(jw_file(JW_SECRET "\r\n", strlen(JW_SECRET) + 2), &k,
                          err, sizeof(err)),
        0, "%s", err);
    cr_assert_eq(k.len, strlen(JW_SECRET));
    cr_assert_eq(memcmp(k.bytes, JW_SECRET, k.len), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct http_jwt_key before = k;
        cr_assert_eq(http_jwt_key_load(jw_file(bad[i][0], strlen(bad[i][0])),
                                       &k, err, sizeof(err)),
                     -1, "'%s' accepted", bad[i][0]);
        cr_assert_not_null(strstr(err, bad[i][1]), "%s", err);
        cr_assert_not_null(strstr(err, "jwt_secret_file"), "%s", err);
        cr_assert_eq(memcmp(&k, &before, sizeof(k)), 0, "k untouched");
    }
    memset(big, 'x', sizeof(big));
    cr_assert_eq(
        http_jwt_key_load(jw_file(big, sizeof(big)), &k, err, sizeof(err)), -1);
    cr_assert_not_null(strstr(err, "more than"), "%s", err);
    cr_assert_eq(http_jwt_key_load("/nonexistent/jwt", &k, err, sizeof(err)),
                 -1);
    cr_assert_not_null(strstr(err, "jwt_secret_file: cannot read "
                                   "/nonexistent/jwt"),
                       "%s", err);
}
