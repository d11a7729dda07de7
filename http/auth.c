/*
 * auth.c - the tokens of SPEC §10: reading the auth file, finding a bearer
 * token by its hash, and matching a queue name against a permission.
 *
 * SHA-256 and the constant-time comparison are nettle's (the library
 * GnuTLS, and so libmicrohttpd's TLS, is built on).  A token is looked up
 * by hashing what the client sent and comparing the hash with every entry:
 * the file never holds a usable secret, and no entry's comparison stops
 * early.
 */
#include "http/auth.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/number.h"

static const char *const auth_verbs[AUTH_NVERBS] = {
    [AUTH_PUSH] = "push",         [AUTH_POP] = "pop",
    [AUTH_REQUEST] = "request",   [AUTH_ADMIN] = "admin",
    [AUTH_READ] = "read",         [AUTH_SUBSCRIBE] = "subscribe",
    [AUTH_PRESENCE] = "presence",
};

/* The routes a page calls, which take access_token (SPEC §11): a path
 * ending in '/' covers the paths below it. */
static const char *const auth_query_paths[] = {
    "/api/v1/ephemeral/subscribe",
    "/api/v1/presence/",
};

/* auth_reader - where auth_load() is, for its error sentences. */
struct auth_reader {
    const char *path;
    unsigned line;
    char *err;
    size_t errlen;
};

static int auth_fail(struct auth_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* auth_fail - "path:line: sentence" into r->err; returns -1. */
static int
auth_fail(struct auth_reader *r, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (r->errlen == 0)
        return -1;
    n = snprintf(r->err, r->errlen, "auth_file %s:%u: ", r->path, r->line);
    if (n < 0 || (size_t)n >= r->errlen)
        return -1;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

const char *
auth_verb_name(enum auth_verb verb)
{
    return verb < AUTH_NVERBS ? auth_verbs[verb] : "?";
}

/* auth_digest - SHA-256 of token[0..len) into out. */
static void
auth_digest(const char *token, size_t len, uint8_t out[AUTH_HASH_SIZE])
{
    struct sha256_ctx ctx;

    sha256_init(&ctx);
    sha256_update(&ctx, len, (const uint8_t *)token);
    sha256_digest(&ctx, AUTH_HASH_SIZE, out);
}

void
auth_hash_text(const char *token, size_t len, char out[AUTH_HASH_TEXT])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t h[AUTH_HASH_SIZE];

    auth_digest(token, len, h);
    memcpy(out, "sha256:", 7);
    for (size_t i = 0; i < AUTH_HASH_SIZE; i++) {
        out[7 + 2 * i] = hex[h[i] >> 4];
        out[8 + 2 * i] = hex[h[i] & 15];
    }
    out[AUTH_HASH_TEXT - 1] = '\0';
}

/* hex_value - the value of one hex digit, or -1. */
static int
hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* parse_hash - "sha256:<64 hex>" into tok->hash. */
static int
parse_hash(struct auth_reader *r, const char *word, struct auth_token *tok)
{
    if (strncmp(word, "sha256:", 7) != 0 ||
        strlen(word + 7) != 2 * AUTH_HASH_SIZE)
        return auth_fail(r, "a token line starts with sha256: and 64 hex "
                            "digits (make one with mayflyd --hash-token)");
    for (size_t i = 0; i < AUTH_HASH_SIZE; i++) {
        int hi = hex_value(word[7 + 2 * i]), lo = hex_value(word[8 + 2 * i]);
        if (hi < 0 || lo < 0)
            return auth_fail(r, "the token hash holds a character that is "
                                "not a hex digit");
        tok->hash[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* auth_tenant_valid - see auth.h. */
int
auth_tenant_valid(const char *v)
{
    size_t n = strlen(v);

    return n > 0 && n <= AUTH_TENANT_MAX &&
           strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789._-") == n;
}

/* parse_tenant - 1-64 of [A-Za-z0-9._-]: it prefixes queue names. */
static int
parse_tenant(struct auth_reader *r, const char *v, struct auth_token *tok)
{
    size_t n = strlen(v);

    if (tok->tenant[0] != '\0')
        return auth_fail(r, "tenant: given twice");
    if (!auth_tenant_valid(v))
        return auth_fail(r,
                         "tenant: '%s' is not 1 to %d letters, digits, "
                         "'.', '_' or '-'",
                         v, AUTH_TENANT_MAX);
    memcpy(tok->tenant, v, n + 1);
    return 0;
}

/*
 * parse_globs - "a*,b" into "a*\0b\0\0" for one verb.  An empty pattern
 * would match nothing a client can name, so it is refused as a likely typo.
 */
static int
parse_globs(struct auth_reader *r, enum auth_verb verb, const char *v,
            struct auth_token *tok)
{
    size_t n = strlen(v);
    char *g;

    if (tok->globs[verb] != NULL)
        return auth_fail(r, "%s: given twice", auth_verbs[verb]);
    if (n == 0 || v[0] == ',' || v[n - 1] == ',' || strstr(v, ",,"))
        return auth_fail(r,
                         "%s: an empty queue pattern (patterns are "
                         "separated by single commas)",
                         auth_verbs[verb]);
    if ((g = malloc(n + 2)) == NULL)
        return auth_fail(r, "out of memory");
    memcpy(g, v, n + 1);
    for (char *p = g; *p != '\0'; p++)
        if (*p == ',')
            *p = '\0';
    g[n + 1] = '\0';
    tok->globs[verb] = g;
    return 0;
}

/* parse_field - one key=value word of a token line. */
static int
parse_field(struct auth_reader *r, char *word, struct auth_token *tok)
{
    char *eq = strchr(word, '=');
    const char *why = NULL;
    uint64_t n;

    if (eq == NULL)
        return auth_fail(r, "'%s' is not key=value", word);
    *eq = '\0';
    const char *v = eq + 1;
    if (strcmp(word, "tenant") == 0)
        return parse_tenant(r, v, tok);
    for (int i = 0; i < AUTH_NVERBS; i++)
        if (strcmp(word, auth_verbs[i]) == 0)
            return parse_globs(r, (enum auth_verb)i, v, tok);
    if (strcmp(word, "rate") == 0) {
        if (http_parse_number(v, 0, &n, &why) != 0 || n == 0 || n > UINT32_MAX)
            return auth_fail(r,
                             "rate: '%s' is not a number of messages a "
                             "second from 1 to %u",
                             v, UINT32_MAX);
        tok->rate = (uint32_t)n;
        return 0;
    }
    if (strcmp(word, "max_bytes") == 0) {
        if (http_parse_number(v, 1, &n, &why) != 0 || n == 0)
            return auth_fail(r, "max_bytes: '%s': %s", v,
                             why ? why : "must be above 0");
        tok->max_bytes = n;
        return 0;
    }
    return auth_fail(r,
                     "unknown field '%s' (tenant, push, pop, request, "
                     "subscribe, presence, admin, read, rate, max_bytes)",
                     word);
}

/* auth_token_clear - see auth.h. */
void
auth_token_clear(struct auth_token *tok)
{
    for (int i = 0; i < AUTH_NVERBS; i++)
        free(tok->globs[i]);
    free(tok->sub);
    memset(tok, 0, sizeof(*tok));
}

/* parse_line - one line into tok; 0 with tok->line 0 for a blank line. */
static int
parse_line(struct auth_reader *r, char *line, struct auth_token *tok)
{
    char *save = NULL, *word;
    char *hash = strchr(line, '#');

    if (hash != NULL)
        *hash = '\0';
    memset(tok, 0, sizeof(*tok));
    if ((word = strtok_r(line, " \t\r\n", &save)) == NULL)
        return 0;
    tok->line = r->line;
    if (parse_hash(r, word, tok) != 0)
        return -1;
    while ((word = strtok_r(NULL, " \t\r\n", &save)) != NULL)
        if (parse_field(r, word, tok) != 0) {
            auth_token_clear(tok);
            return -1;
        }
    if (tok->tenant[0] == '\0' && (tok->rate != 0 || tok->max_bytes != 0)) {
        /* the counters are a tenant's (shm/tenants.h): without one the
         * bound would be silently ignored */
        auth_token_clear(tok);
        return auth_fail(r, "rate and max_bytes bound a tenant: give this "
                            "token a tenant= or drop them");
    }
    return 0; /* no tenant: the empty one, names as without auth */
}

/* same_hash_before - the line of an earlier entry with tok's hash, or 0. */
static unsigned
same_hash_before(const struct auth_table *t, const struct auth_token *tok)
{
    for (size_t i = 0; i < t->ntokens; i++)
        if (memcmp(t->tokens[i].hash, tok->hash, AUTH_HASH_SIZE) == 0)
            return t->tokens[i].line;
    return 0;
}

/* table_add - append tok (taking what it owns) to t. */
static int
table_add(struct auth_reader *r, struct auth_table *t, struct auth_token *tok)
{
    struct auth_token *grown;
    unsigned twin = same_hash_before(t, tok);

    if (twin != 0) {
        auth_token_clear(tok);
        return auth_fail(r, "the same token as on line %u", twin);
    }
    grown = realloc(t->tokens, (t->ntokens + 1) * sizeof(*grown));
    if (grown == NULL) {
        auth_token_clear(tok);
        return auth_fail(r, "out of memory");
    }
    t->tokens = grown;
    t->tokens[t->ntokens++] = *tok;
    return 0;
}

int
auth_load(const char *path, struct auth_table *t, char *err, size_t errlen)
{
    struct auth_reader r = {path, 0, err, errlen};
    FILE *f = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;

    t->tokens = NULL;
    t->ntokens = 0;
    if (f == NULL)
        return auth_fail(&r, "cannot read: %s", strerror(errno));
    while (rc == 0 && getline(&line, &cap, f) != -1) {
        struct auth_token tok;
        r.line++;
        if ((rc = parse_line(&r, line, &tok)) == 0 && tok.line != 0)
            rc = table_add(&r, t, &tok);
    }
    if (rc == 0 && ferror(f))
        rc = auth_fail(&r, "cannot read: %s", strerror(errno));
    free(line);
    fclose(f);
    if (rc != 0)
        auth_free(t);
    return rc;
}

void
auth_free(struct auth_table *t)
{
    for (size_t i = 0; i < t->ntokens; i++)
        auth_token_clear(&t->tokens[i]);
    free(t->tokens);
    t->tokens = NULL;
    t->ntokens = 0;
}

const struct auth_token *
auth_find(const struct auth_table *t, const char *token, size_t len)
{
    const struct auth_token *found = NULL;
    uint8_t h[AUTH_HASH_SIZE];

    if (len == 0 || len > AUTH_TOKEN_MAX)
        return NULL;
    auth_digest(token, len, h);
    for (size_t i = 0; i < t->ntokens; i++)
        if (memeql_sec(t->tokens[i].hash, h, AUTH_HASH_SIZE))
            found = &t->tokens[i];
    return found;
}

int
auth_bearer(const char *value, const char **token, size_t *len)
{
    size_t n;

    if (value == NULL || strncasecmp(value, "Bearer ", 7) != 0)
        return -1;
    value += 7;
    while (*value == ' ')
        value++;
    n = strlen(value);
    while (n > 0 && value[n - 1] == ' ')
        n--;
    if (n == 0)
        return -1;
    *token = value;
    *len = n;
    return 0;
}

/* auth_query_token_path - see auth.h. */
int
auth_query_token_path(const char *uri)
{
    size_t n = strcspn(uri, "?");

    for (size_t i = 0; i < sizeof(auth_query_paths) / sizeof(*auth_query_paths);
         i++) {
        const char *p = auth_query_paths[i];
        size_t k = strlen(p);
        if (p[k - 1] == '/' ? n > k && strncmp(uri, p, k) == 0
                            : n == k && strncmp(uri, p, k) == 0)
            return 1;
    }
    return 0;
}

int
auth_allows(const struct auth_token *tok, enum auth_verb verb, const char *name)
{
    if (verb >= AUTH_NVERBS || tok->globs[verb] == NULL)
        return 0;
    for (const char *g = tok->globs[verb]; *g != '\0'; g += strlen(g) + 1)
        if (fnmatch(g, name, 0) == 0)
            return 1;
    return 0;
}
