/*
 * jwt.c - signed tokens: the secret's file, the token's shape, and its
 * verification (see jwt.h).
 *
 * libjwt (Debian's libjwt-gnutls, on the GnuTLS the node links) decodes
 * the token and checks its HMAC; with a key given it refuses "alg": "none"
 * itself, and it would verify HS384 and HS512 with the same secret, so the
 * algorithm is checked after.  libjwt checks no claim: exp, nbf and the
 * claims' types are read here from its JSON of the claims (json-c, as the
 * control bodies are).  Errors: 0 or -errno, with a sentence for the 401.
 */
#include "http/jwt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jwt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "http/auth.h"

static int jwt_why(char *why, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* jwt_why - a sentence into why; returns rc, for the caller to return. */
static int
jwt_why(char *why, size_t len, int rc, const char *fmt, ...)
{
    va_list ap;

    if (len == 0)
        return rc;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return rc;
}

/* read_all - up to cap bytes of fd into buf; their count, or -errno.  One
 * byte past cap is read too, so that a longer file is told apart. */
static ssize_t
read_all(int fd, unsigned char *buf, size_t cap)
{
    size_t n = 0;

    while (n <= cap) {
        ssize_t k = read(fd, buf + n, cap + 1 - n);
        if (k == -1 && errno == EINTR)
            continue;
        if (k == -1)
            return -errno;
        if (k == 0)
            break;
        n += (size_t)k;
    }
    return (ssize_t)n;
}

/* http_jwt_key_load - see jwt.h. */
int
http_jwt_key_load(const char *path, struct http_jwt_key *k, char *err,
                  size_t errlen)
{
    unsigned char buf[HTTP_JWT_KEY_MAX + 64]; /* room for trailing blanks */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    int rc = -1;

    if (fd == -1)
        return jwt_why(err, errlen, -1, "jwt_secret_file: cannot read %s: %s",
                       path, strerror(errno));
    n = read_all(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return jwt_why(err, errlen, -1, "jwt_secret_file: cannot read %s: %s",
                       path, strerror((int)-n));
    if ((size_t)n >= sizeof(buf)) {
        jwt_why(err, errlen, -1,
                "jwt_secret_file: %s holds more than %d bytes: an HS256 "
                "secret is 32 to %d bytes",
                path, HTTP_JWT_KEY_MAX, HTTP_JWT_KEY_MAX);
        goto out;
    }
    while (n > 0 && isspace(buf[n - 1]))
        n--;
    if (n == 0)
        jwt_why(err, errlen, -1, "jwt_secret_file: %s holds no secret", path);
    else if (n < HTTP_JWT_KEY_MIN)
        jwt_why(err, errlen, -1,
                "jwt_secret_file: the secret in %s is %zd bytes: HS256 "
                "wants at least %d (RFC 7518 3.2; openssl rand -base64 32 "
                "makes one)",
                path, n, HTTP_JWT_KEY_MIN);
    else if (n > HTTP_JWT_KEY_MAX)
        jwt_why(err, errlen, -1,
                "jwt_secret_file: the secret in %s is %zd bytes: at most "
                "%d are taken",
                path, n, HTTP_JWT_KEY_MAX);
    else {
        memcpy(k->bytes, buf, (size_t)n);
        k->len = (size_t)n;
        rc = 0;
    }
out:
    explicit_bzero(buf, sizeof(buf));
    return rc;
}

/* b64url - a character of base64url (RFC 4648 §5), padding excluded. */
static int
b64url(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_';
}

/* http_jwt_shaped - see jwt.h. */
int
http_jwt_shaped(const char *tok, size_t len)
{
    unsigned dots = 0;
    size_t part = 0;

    for (size_t i = 0; i < len; i++) {
        if (tok[i] == '.') {
            if (part == 0 || ++dots > 2)
                return 0;
            part = 0;
        } else if (!b64url(tok[i])) {
            return 0;
        } else {
            part++;
        }
    }
    return dots == 2; /* the signature may be empty: alg none, refused */
}

/* claim_time - the NumericDate claim name of claims into *out: 1, 0 when
 * absent, -1 when it is not a number. */
static int
claim_time(struct json_object *claims, const char *name, int64_t *out)
{
    struct json_object *v;
    double d;

    if (!json_object_object_get_ex(claims, name, &v))
        return 0;
    if (json_object_is_type(v, json_type_int)) {
        *out = json_object_get_int64(v);
        return 1;
    }
    if (!json_object_is_type(v, json_type_double))
        return -1;
    d = json_object_get_double(v); /* RFC 7519 allows a fraction */
    if (!isfinite(d) || d < -9.2e18 || d > 9.2e18)
        return -1;
    *out = (int64_t)floor(d);
    return 1;
}

/* plain_string - v's text if v is a non-empty string without NUL, else
 * NULL: a glob, a tenant or a member id holds none. */
static const char *
plain_string(struct json_object *v)
{
    const char *s;

    if (!json_object_is_type(v, json_type_string))
        return NULL;
    s = json_object_get_string(v);
    return s[0] != '\0' && strlen(s) == (size_t)json_object_get_string_len(v)
               ? s
               : NULL;
}

/* claim_string - the string claim name into *out (NULL when absent): 0,
 * or -1 when it is not a plain_string(). */
static int
claim_string(struct json_object *claims, const char *name, const char **out)
{
    struct json_object *v;

    *out = NULL;
    if (!json_object_object_get_ex(claims, name, &v))
        return 0;
    *out = plain_string(v);
    return *out != NULL ? 0 : -1;
}

/*
 * claim_globs - the permission claim of verb (an array of globs) into
 * tok->globs[verb], NUL-separated and ended by an empty string, as the
 * auth file's are; an empty array grants nothing.  0, -EPERM (not an array
 * of plain strings) or -ENOMEM.
 */
static int
claim_globs(struct json_object *claims, enum auth_verb verb,
            struct auth_token *tok)
{
    struct json_object *v;
    size_t n, total = 1;
    char *g, *p;

    if (!json_object_object_get_ex(claims, auth_verb_name(verb), &v))
        return 0;
    if (!json_object_is_type(v, json_type_array))
        return -EPERM;
    n = json_object_array_length(v);
    for (size_t i = 0; i < n; i++) {
        const char *s = plain_string(json_object_array_get_idx(v, i));
        if (s == NULL)
            return -EPERM;
        total += strlen(s) + 1;
    }
    if (n == 0)
        return 0;
    if ((g = malloc(total)) == NULL)
        return -ENOMEM;
    p = g;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(v, i));
        size_t k = strlen(s) + 1;
        memcpy(p, s, k);
        p += k;
    }
    *p = '\0';
    tok->globs[verb] = g;
    return 0;
}

/* claims_times - exp (required, in the future) and nbf (if given, past). */
static int
claims_times(struct json_object *claims, int64_t now, struct auth_token *tok,
             char *why, size_t len)
{
    int64_t exp = 0, nbf = 0;
    int has = claim_time(claims, "exp", &exp);

    if (has < 0)
        return jwt_why(why, len, -EPERM,
                       "the signed token's exp is not a number of seconds");
    if (has == 0)
        return jwt_why(why, len, -EPERM,
                       "the signed token has no exp: this node takes only "
                       "tokens that expire");
    if (exp <= now)
        return jwt_why(why, len, -EKEYEXPIRED,
                       "the signed token expired %lld s ago",
                       (long long)(now - exp));
    has = claim_time(claims, "nbf", &nbf);
    if (has < 0)
        return jwt_why(why, len, -EPERM,
                       "the signed token's nbf is not a number of seconds");
    if (has > 0 && nbf > now)
        return jwt_why(why, len, -EKEYEXPIRED,
                       "the signed token is not valid for %lld s more (nbf)",
                       (long long)(nbf - now));
    tok->exp = exp;
    return 0;
}

/* claims_fill - tok from the verified claims, read as SPEC §11 says. */
static int
claims_fill(struct json_object *claims, int64_t now, struct auth_token *tok,
            char *why, size_t len)
{
    const char *tenant, *sub;
    int rc;

    if ((rc = claims_times(claims, now, tok, why, len)) != 0)
        return rc;
    if (claim_string(claims, "tenant", &tenant) != 0 ||
        (tenant != NULL && !auth_tenant_valid(tenant)))
        return jwt_why(why, len, -EPERM,
                       "the signed token's tenant is not 1 to %d letters, "
                       "digits, '.', '_' or '-'",
                       AUTH_TENANT_MAX);
    if (tenant != NULL)
        memcpy(tok->tenant, tenant, strlen(tenant) + 1);
    if (claim_string(claims, "sub", &sub) != 0)
        return jwt_why(why, len, -EPERM,
                       "the signed token's sub is not a non-empty string");
    if (sub != NULL && (tok->sub = strdup(sub)) == NULL)
        return -ENOMEM;
    for (int v = 0; v < AUTH_NVERBS; v++) {
        rc = claim_globs(claims, (enum auth_verb)v, tok);
        if (rc == -EPERM)
            return jwt_why(why, len, rc,
                           "the signed token's %s is not an array of "
                           "queue patterns (non-empty strings)",
                           auth_verb_name((enum auth_verb)v));
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* decode - libjwt's verdict on the NUL-ended token with k: the decoded
 * token in *out (HS256, its signature good), or -EPERM / -ENOMEM. */
static int
decode(const struct http_jwt_key *k, const char *token, jwt_t **out, char *why,
       size_t len)
{
    jwt_t *j = NULL;
    int rc = jwt_decode(&j, token, k->bytes, (int)k->len);

    *out = NULL;
    if (rc == ENOMEM)
        return -ENOMEM;
    if (rc != 0 || j == NULL)
        return jwt_why(why, len, -EPERM,
                       "the signed token does not verify: it must be a JWT "
                       "signed (HS256) with this node's jwt_secret_file");
    if (jwt_get_alg(j) != JWT_ALG_HS256) {
        rc = jwt_why(why, len, -EPERM,
                     "the signed token uses %s: this node takes HS256 only",
                     jwt_alg_str(jwt_get_alg(j)));
        jwt_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

/* http_jwt_verify - see jwt.h. */
int
http_jwt_verify(const struct http_jwt_key *k, const char *tok, size_t len,
                int64_t now, struct auth_token *out, char *why, size_t whylen)
{
    struct json_object *claims = NULL;
    char *token, *text = NULL;
    jwt_t *j = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if (k->len == 0) /* never verify with an empty key: anyone has it */
        return jwt_why(why, whylen, -EPERM,
                       "this node has no secret to verify signed tokens");
    if (len > AUTH_TOKEN_MAX)
        return jwt_why(why, whylen, -EPERM,
                       "the signed token is longer than %d bytes",
                       AUTH_TOKEN_MAX);
    if ((token = strndup(tok, len)) == NULL)
        return -ENOMEM;
    rc = decode(k, token, &j, why, whylen);
    free(token);
    if (rc != 0)
        return rc;
    text = jwt_get_grants_json(j, NULL);
    if (text == NULL) {
        rc = errno == ENOMEM ? -ENOMEM : -EPERM;
        jwt_why(why, whylen, rc, "the signed token holds no claims");
        goto out;
    }
    claims = json_tokener_parse(text);
    if (!json_object_is_type(claims, json_type_object)) {
        rc = jwt_why(why, whylen, -EPERM,
                     "the signed token's claims are not a JSON object");
        goto out;
    }
    rc = claims_fill(claims, now, out, why, whylen);
out:
    if (rc != 0)
        auth_token_clear(out);
    json_object_put(claims);
    free(text);
    jwt_free(j);
    return rc;
}
