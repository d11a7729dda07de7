/*
 * test_auth.c - http/auth.c: the auth file of SPEC §10 (what it accepts,
 * each refusal naming its line and field), finding a bearer token by its
 * hash, what a token's patterns grant; and `mayflyd --hash-token`, whose
 * output is what a file line starts with.
 */
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "http/auth.h"

static char au_path[64];
static char au_err[512];

/* au_remove - the file a test wrote, if any. */
static void
au_remove(void)
{
    if (au_path[0] != '\0')
        unlink(au_path);
    au_path[0] = '\0';
}

TestSuite(auth, .fini = au_remove, .timeout = 30);

/* au_write - text into a fresh temporary file; its path in au_path. */
static void
au_write(const char *text)
{
    int fd;

    snprintf(au_path, sizeof(au_path), "/tmp/mayfly-test-auth-XXXXXX");
    fd = mkstemp(au_path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* au_line - "sha256:<hash of token> rest\n" into buf. */
static const char *
au_line(char *buf, size_t len, const char *token, const char *rest)
{
    char h[AUTH_HASH_TEXT];

    auth_hash_text(token, strlen(token), h);
    snprintf(buf, len, "%s %s\n", h, rest);
    return buf;
}

/* au_refused - load text; assert it is refused with err holding want. */
static void
au_refused(const char *text, const char *want)
{
    struct auth_table t;

    au_write(text);
    cr_assert_eq(auth_load(au_path, &t, au_err, sizeof(au_err)), -1,
                 "accepted: %s", text);
    cr_assert_eq(t.ntokens, 0);
    cr_assert_not_null(strstr(au_err, want), "'%s' lacks '%s'", au_err, want);
    au_remove();
}

Test(auth, the_hash_is_sha256_in_hex)
{
    char h[AUTH_HASH_TEXT];

    auth_hash_text("abc", 3, h);
    cr_assert_str_eq(h, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396"
                        "177a9cb410ff61f20015ad");
}

Test(auth, a_file_of_tokens_loads_and_each_is_found_by_its_token)
{
    char a[200], b[200], text[600];
    struct auth_table t;
    const struct auth_token *tok;

    snprintf(text, sizeof(text), "# tokens of the shop\n\n%s  %s",
             au_line(a, sizeof(a), "alpha-token",
                     "tenant=shop push=orders.*,audit pop=orders.* rate=500 "
                     "max_bytes=8M # the web tier"),
             au_line(b, sizeof(b), "beta-token", "tenant=ops read=* admin=*"));
    au_write(text);
    cr_assert_eq(auth_load(au_path, &t, au_err, sizeof(au_err)), 0, "%s",
                 au_err);
    cr_assert_eq(t.ntokens, 2);

    tok = auth_find(&t, "alpha-token", 11);
    cr_assert_not_null(tok);
    cr_assert_str_eq(tok->tenant, "shop");
    cr_assert_eq(tok->rate, 500);
    cr_assert_eq(tok->max_bytes, 8ULL << 20);
    cr_assert_eq(tok->line, 3);
    tok = auth_find(&t, "beta-token", 10);
    cr_assert_not_null(tok);
    cr_assert_str_eq(tok->tenant, "ops");
    cr_assert_eq(tok->rate, 0);
    cr_assert_eq(tok->max_bytes, 0);

    cr_assert_null(auth_find(&t, "gamma-token", 11));
    cr_assert_null(auth_find(&t, "alpha-toke", 10), "a prefix is no token");
    cr_assert_null(auth_find(&t, "", 0));
    auth_free(&t);
    cr_assert_eq(t.ntokens, 0);
}

Test(auth, patterns_grant_only_their_verb_and_their_queues)
{
    char a[200];
    struct auth_table t;
    const struct auth_token *tok;

    au_write(au_line(a, sizeof(a), "tok",
                     "tenant=shop push=orders.*,audit pop=rpc/*"));
    cr_assert_eq(auth_load(au_path, &t, au_err, sizeof(au_err)), 0, "%s",
                 au_err);
    tok = auth_find(&t, "tok", 3);
    cr_assert_not_null(tok);
    cr_assert(auth_allows(tok, AUTH_PUSH, "orders.eu"));
    cr_assert(auth_allows(tok, AUTH_PUSH, "audit"));
    cr_assert_not(auth_allows(tok, AUTH_PUSH, "audit2"));
    cr_assert_not(auth_allows(tok, AUTH_PUSH, "orders"));
    cr_assert(auth_allows(tok, AUTH_POP, "rpc/a/b"), "'*' crosses '/'");
    cr_assert_not(auth_allows(tok, AUTH_POP, "orders.eu"));
    cr_assert_not(auth_allows(tok, AUTH_REQUEST, "orders.eu"),
                  "a permission left out is not granted");
    cr_assert_not(auth_allows(tok, AUTH_ADMIN, "audit"));
    cr_assert_not(auth_allows(tok, AUTH_READ, "audit"));
    cr_assert_str_eq(auth_verb_name(AUTH_REQUEST), "request");
    auth_free(&t);
}

Test(auth, subscribe_and_presence_are_permissions_of_a_line)
{
    char a[200];
    struct auth_table t;
    const struct auth_token *tok;

    au_write(au_line(a, sizeof(a), "page",
                     "tenant=shop subscribe=room.* presence=room.7"));
    cr_assert_eq(auth_load(au_path, &t, au_err, sizeof(au_err)), 0, "%s",
                 au_err);
    tok = auth_find(&t, "page", 4);
    cr_assert_not_null(tok);
    cr_assert(auth_allows(tok, AUTH_SUBSCRIBE, "room.1"));
    cr_assert_not(auth_allows(tok, AUTH_SUBSCRIBE, "lobby"));
    cr_assert(auth_allows(tok, AUTH_PRESENCE, "room.7"));
    cr_assert_not(auth_allows(tok, AUTH_PRESENCE, "room.8"));
    cr_assert_not(auth_allows(tok, AUTH_PUSH, "room.1"));
    cr_assert_not(auth_allows(tok, AUTH_READ, "room.1"));
    cr_assert_eq(tok->exp, 0, "a file's token never expires");
    cr_assert_null(tok->sub);
    cr_assert_str_eq(auth_verb_name(AUTH_SUBSCRIBE), "subscribe");
    cr_assert_str_eq(auth_verb_name(AUTH_PRESENCE), "presence");
    auth_free(&t);
    au_remove();
    au_refused(au_line(a, sizeof(a), "x", "subscribe="), "subscribe");
    au_refused(au_line(a, sizeof(a), "x", "presence=a presence=b"),
               "presence: given twice");
}

Test(auth, access_token_is_taken_on_the_subscribe_and_presence_paths_only)
{
    static const char *const yes[] = {
        "/api/v1/ephemeral/subscribe",
        "/api/v1/ephemeral/subscribe?queue=q&access_token=t",
        "/api/v1/presence/enter",
        "/api/v1/presence/room%207?count=true",
    };
    static const char *const no[] = {
        "/api/v1/ephemeral/pop?queue=q&access_token=t",
        "/api/v1/ephemeral/push",
        "/api/v1/ephemeral/subscribers",
        "/api/v1/ephemeral/subscribe/x",
        "/api/v1/presence",
        "/api/v1/presence/",
        "/api/v1/presence?x=/api/v1/presence/a",
        "/health?access_token=t",
        "/",
    };

    for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
        cr_assert(auth_query_token_path(yes[i]), "%s", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
        cr_assert_not(auth_query_token_path(no[i]), "%s", no[i]);
}

Test(auth, each_mistake_is_refused_naming_its_line_and_field)
{
    char a[300], b[300], text[700];

    au_refused("sha256:abc tenant=x\n", ":1: a token line starts with");
    au_refused("# c\nsha256:" /* 63 digits and a 'g' */
               "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f2001"
               "5ag tenant=x\n",
               ":2: the token hash holds a character that is not a hex");
    au_refused(au_line(a, sizeof(a), "t", "tenant=a/b"),
               "tenant: 'a/b' is not 1 to 64");
    au_refused(au_line(a, sizeof(a), "t", "tenant=x pop=a,,b"),
               "pop: an empty queue pattern");
    au_refused(au_line(a, sizeof(a), "t", "tenant=x push="),
               "push: an empty queue pattern");
    au_refused(au_line(a, sizeof(a), "t", "tenant=x read=a read=b"),
               "read: given twice");
    au_refused(au_line(a, sizeof(a), "t", "tenant=x rate=0"),
               "rate: '0' is not a number");
    au_refused(au_line(a, sizeof(a), "t", "tenant=x max_bytes=12Q"),
               "max_bytes: '12Q'");
    au_refused(au_line(a, sizeof(a), "t", "tenant=x consume=*"),
               "unknown field 'consume'");
    au_refused(au_line(a, sizeof(a), "t", "tenant=x push"),
               "'push' is not key=value");
    /* rate and max_bytes bound a tenant's counters: a token without a
     * tenant has none to bound, and must not look bounded */
    au_refused(au_line(a, sizeof(a), "t", "push=* rate=5"),
               "rate and max_bytes bound a tenant");
    au_refused(au_line(a, sizeof(a), "t", "push=* max_bytes=1M"),
               "rate and max_bytes bound a tenant");
    au_refused(au_line(a, sizeof(a), "t", "tenant=x tenant=y"),
               "tenant: given twice");
    snprintf(text, sizeof(text), "%s%s", au_line(a, sizeof(a), "t", "tenant=x"),
             au_line(b, sizeof(b), "t", "tenant=y"));
    au_refused(text, ":2: the same token as on line 1");
}

Test(auth, a_token_without_a_tenant_has_the_empty_one)
{
    char a[200];
    struct auth_table t;
    const struct auth_token *tok;

    au_write(au_line(a, sizeof(a), "plain", "push=* read=jobs"));
    cr_assert_eq(auth_load(au_path, &t, au_err, sizeof(au_err)), 0, "%s",
                 au_err);
    tok = auth_find(&t, "plain", 5);
    cr_assert_not_null(tok);
    cr_assert_str_eq(tok->tenant, "");
    cr_assert(auth_allows(tok, AUTH_PUSH, "anything"));
    cr_assert(!auth_allows(tok, AUTH_POP, "jobs"));
    auth_free(&t);
}

Test(auth, a_missing_file_is_refused_naming_it)
{
    struct auth_table t;

    cr_assert_eq(
        auth_load("/nonexistent/mayfly-auth", &t, au_err, sizeof(au_err)), -1);
    cr_assert_not_null(strstr(au_err, "/nonexistent/mayfly-auth"), "%s",
                       au_err);
    cr_assert_not_null(strstr(au_err, "cannot read"), "%s", au_err);
}

Test(auth, the_bearer_scheme_is_read_in_any_case)
{
    const char *tok;
    size_t n;

    cr_assert_eq(auth_bearer("Bearer abc", &tok, &n), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(strncmp(tok, "abc", 3), 0);
    cr_assert_eq(auth_bearer("bearer   xyz  ", &tok, &n), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(strncmp(tok, "xyz", 3), 0);
    cr_assert_eq(auth_bearer("Basic YWxhZGRpbjpvcGVuc2VzYW1l", &tok, &n), -1);
    cr_assert_eq(auth_bearer("Bearer ", &tok, &n), -1);
    cr_assert_eq(auth_bearer("Bearer", &tok, &n), -1);
    cr_assert_eq(auth_bearer(NULL, &tok, &n), -1);
}

/* au_hash_cli - mayflyd --hash-token with input on stdin; its exit status,
 * stdout and stderr (2>&1) in out. */
static int
au_hash_cli(const char *input, char *out, size_t cap)
{
    const char *bin = getenv("MAYFLYD");
    char cmd[1024];
    FILE *p;
    size_t n;

    cr_assert_not_null(bin, "MAYFLYD names the server binary");
    au_write(input);
    snprintf(cmd, sizeof(cmd), "'%s' --hash-token < '%s' 2>&1", bin, au_path);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return WEXITSTATUS(pclose(p));
}

Test(auth, mayflyd_hash_token_prints_what_a_file_line_starts_with)
{
    char out[512], line[200];
    struct auth_table t;

    cr_assert_eq(au_hash_cli("s3cret-token\n", out, sizeof(out)), 0, "%s", out);
    au_line(line, sizeof(line), "s3cret-token", "");
    cr_assert_eq(strncmp(out, line, AUTH_HASH_TEXT - 1), 0, "%s", out);
    cr_assert_eq(out[AUTH_HASH_TEXT - 1], '\n');

    /* What it printed, as a line of a file, finds the token. */
    out[AUTH_HASH_TEXT - 1] = '\0';
    strcat(out, " tenant=t push=*\n");
    au_write(out);
    cr_assert_eq(auth_load(au_path, &t, au_err, sizeof(au_err)), 0, "%s",
                 au_err);
    cr_assert_not_null(auth_find(&t, "s3cret-token", 12));
    auth_free(&t);

    cr_assert_eq(au_hash_cli("\n", out, sizeof(out)), 1);
    cr_assert_not_null(strstr(out, "no token on standard input"), "%s", out);
}
