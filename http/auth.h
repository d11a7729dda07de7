/*
 * auth.h - the tokens of SPEC §10: the auth file, the lookup of a bearer
 * token, and what a token may do to which queue.
 *
 * The file holds one token a line, by its SHA-256 hash, never in clear:
 *
 *   sha256:<64 hex> tenant=<name> push=<glob>[,<glob>...] pop=... \
 *       request=... subscribe=... presence=... admin=... read=... \
 *       [rate=<msg/s>] [max_bytes=<size>]
 *
 * '#' starts a comment; blank lines are skipped.  A permission left out is
 * not granted; a token without tenant= has the empty tenant (queue names
 * as a node without auth has them, and no rate or max_bytes: those bound a
 * tenant).  Globs are fnmatch(3) patterns over the queue name ('*'
 * matches '/' too).  A table is immutable once loaded: a reload builds a new
 * one and frees the old.  A signed token (http/jwt.h) becomes a struct
 * auth_token of its own, checked by the same auth_allows().  A page's
 * EventSource cannot send headers, so the routes SPEC §11 names take the
 * token from the query (access_token) too: auth_query_token_path().  No
 * state beyond the table; no locking.
 */
#ifndef MAYFLY_HTTP_AUTH_H
#define MAYFLY_HTTP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define AUTH_HASH_SIZE  32                           /* SHA-256 */
#define AUTH_HASH_TEXT  (7 + 2 * AUTH_HASH_SIZE + 1) /* "sha256:" hex NUL */
#define AUTH_TENANT_MAX 64
#define AUTH_TOKEN_MAX  4096 /* longest bearer token looked up */

/* What a request does to a queue; each is one permission of the file. */
enum auth_verb {
    AUTH_PUSH,      /* push */
    AUTH_POP,       /* pop, ack, extend */
    AUTH_REQUEST,   /* the request verb, and replying to a request */
    AUTH_ADMIN,     /* configure, delete, reset */
    AUTH_READ,      /* listing, depth */
    AUTH_SUBSCRIBE, /* a stream (SPEC §11) */
    AUTH_PRESENCE,  /* presence enter and leave (SPEC §12) */
    AUTH_NVERBS
};

struct auth_token {
    uint8_t hash[AUTH_HASH_SIZE];
    char tenant[AUTH_TENANT_MAX + 1]; /* "": the empty tenant */
    char *globs[AUTH_NVERBS]; /* NUL-separated, ends with an empty string;
                                 NULL when the permission is not granted */
    uint32_t rate;            /* pushes a second; 0: no limit */
    uint64_t max_bytes;       /* the tenant's share; 0: no share */
    unsigned line;            /* where it was read, for messages; 0 for a
                                 signed token */
    int64_t exp;              /* a signed token's expiry, seconds since
                                 the epoch (a stream ends then); 0: none */
    char *sub;                /* a signed token's sub (presence's member
                                 id), or NULL */
};

struct auth_table {
    struct auth_token *tokens;
    size_t ntokens;
};

/*
 * auth_load - read the auth file at path into t (empty on entry).  Returns
 * 0, or -1 with a sentence naming the file, the line and the field in err;
 * t then holds nothing.
 */
int auth_load(const char *path, struct auth_table *t, char *err, size_t errlen);

/* auth_free - release what auth_load() put in t; t is then empty. */
void auth_free(struct auth_table *t);

/* auth_token_clear - free what tok owns (globs, sub) and zero it. */
void auth_token_clear(struct auth_token *tok);

/* auth_tenant_valid - 1 if v is a tenant name: 1 to AUTH_TENANT_MAX of
 * [A-Za-z0-9._-] (it prefixes queue names). */
int auth_tenant_valid(const char *v);

/*
 * auth_find - the token whose hash is SHA-256(token[0..len)), or NULL.
 * Every entry is compared, in constant time each, whether or not one
 * matched before: the time taken says nothing of which token is close.
 */
const struct auth_token *auth_find(const struct auth_table *t,
                                   const char *token, size_t len);

/*
 * auth_bearer - the token of an Authorization header value ("Bearer
 * <token>", the scheme in any case).  Returns 0 with *token, *len pointing
 * into value, or -1 when value is NULL, of another scheme, or empty.
 */
int auth_bearer(const char *value, const char **token, size_t *len);

/*
 * auth_query_token_path - 1 if the request URI uri (path, then the query)
 * is one of the routes that take the token as the access_token query
 * parameter: GET /api/v1/ephemeral/subscribe and /api/v1/presence/...
 * (SPEC §11; the paths a page's EventSource or fetch uses).  Elsewhere
 * access_token is not a credential.
 */
int auth_query_token_path(const char *uri);

/* auth_allows - 1 if tok may do verb to the queue named name (NUL-ended). */
int auth_allows(const struct auth_token *tok, enum auth_verb verb,
                const char *name);

/* auth_verb_name - "push", "pop", "request", "admin", "read",
 * "subscribe" or "presence". */
const char *auth_verb_name(enum auth_verb verb);

/* auth_hash_text - "sha256:<64 hex>" of token[0..len) into out. */
void auth_hash_text(const char *token, size_t len, char out[AUTH_HASH_TEXT]);

#endif
