/*
 * authz.c - see authz.h.
 */
#include "worker/authz.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "http/errors.h"
#include "http/jwt.h"
#include "http/names.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/inbox.h"
#include "shm/log.h"
#include "shm/ring.h"
#include "shm/tenants.h"
#include "worker/worker_int.h"

_Static_assert(HTTP_TENANT_SEP == SHM_TENANT_SEP,
               "http/ and shm/ separate tenants from names alike");

/* worker_auth_init - see authz.h.  The table and the secret are the
 * master's, copied into this process by fork: the table is the worker's
 * to free from now on. */
void
worker_auth_init(struct worker *w)
{
    w->auth_on =
        w->set.auth_file[0] != '\0' || w->set.jwt_secret_file[0] != '\0';
    if (w->set.auth_file[0] != '\0' && w->set.auth != NULL)
        w->auth = *w->set.auth;
    w->jwt = w->set.jwt;
}

/* reload_secret - HUP: the secret of signed tokens again; 1 when it
 * changed (the tokens it signed are no longer good). */
static int
reload_secret(struct worker *w)
{
    struct http_jwt_key k;
    char err[1400];
    int changed;

    if (w->set.jwt_secret_file[0] == '\0')
        return 0;
    if (http_jwt_key_load(w->set.jwt_secret_file, &k, err, sizeof(err)) != 0) {
        log_error(0, "reload: %s; keeping the secret loaded before", err);
        return 0;
    }
    changed = k.len != w->jwt.len || memcmp(k.bytes, w->jwt.bytes, k.len) != 0;
    w->jwt = k;
    explicit_bzero(&k, sizeof(k));
    return changed;
}

/* worker_auth_reload - see authz.h. */
int
worker_auth_reload(struct worker *w)
{
    struct auth_table fresh;
    char err[1400];
    int changed = reload_secret(w);

    if (w->set.auth_file[0] == '\0')
        return changed;
    if (auth_load(w->set.auth_file, &fresh, err, sizeof(err)) != 0) {
        log_error(0, "reload: %s; keeping the tokens loaded before", err);
        return changed;
    }
    auth_free(&w->auth);
    w->auth = fresh;
    return 1;
}

/*
 * credential - the token req carries in *tok, *len: Authorization: Bearer,
 * or, on the routes a page calls (auth_query_token_path), the access_token
 * query parameter instead.  1 when there is one; 0 when none (an
 * Authorization of another scheme included); -1 when both are sent.
 */
static int
credential(struct http_request *req, const char **tok, size_t *len)
{
    const char *auth = http_request_header(req, "Authorization");
    const char *q = NULL;
    size_t qlen = 0;

    if (auth_query_token_path(http_request_uri(req)))
        q = http_query_get(http_request_args(req), "access_token", &qlen);
    if (auth != NULL && q != NULL)
        return -1;
    if (q != NULL) {
        *tok = q;
        *len = qlen;
        return qlen > 0;
    }
    return auth_bearer(auth, tok, len) == 0;
}

/*
 * resolve - the token tok[0..len) stands for: with jwt_secret_file set, a
 * token of a JWT's form is verified into *into (signature, exp, claims);
 * any other is looked up in the auth file's table.  NULL when neither
 * takes it, with *rc (-EPERM, -EKEYEXPIRED, -ENOMEM) and a sentence.
 */
static const struct auth_token *
resolve(const struct worker *w, const char *tok, size_t len,
        struct auth_token *into, int *rc, char *why, size_t whylen)
{
    const struct auth_token *found;

    if (w->set.jwt_secret_file[0] != '\0' && http_jwt_shaped(tok, len)) {
        *rc = http_jwt_verify(&w->jwt, tok, len, (int64_t)time(NULL), into, why,
                              whylen);
        return *rc == 0 ? into : NULL;
    }
    *rc = 0;
    if ((found = auth_find(&w->auth, tok, len)) == NULL) {
        *rc = -EPERM;
        snprintf(why, whylen,
                 "the bearer token is not known to this node (unknown or "
                 "revoked)");
    }
    return found;
}

/* worker_auth_refuse - see authz.h. */
void
worker_auth_refuse(struct http_request *req, const char *why)
{
    http_reply_header(req, "WWW-Authenticate", "Bearer");
    http_reply_error(req, 401, "unauthorized", "%s", why);
}

/* worker_auth_header - see authz.h. */
int
worker_auth_header(struct http_request *req, char **out)
{
    const char *auth = http_request_header(req, "Authorization");

    *out = NULL;
    if (auth != NULL && asprintf(out, "Authorization: %s", auth) < 0) {
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* open_route - what anyone may ask without a token. */
static int
open_route(const struct worker *w, enum http_route r)
{
    return r == HTTP_ROUTE_HEALTH || r == HTTP_ROUTE_STATUS_PAGE ||
           r == HTTP_ROUTE_OPENAPI ||
           (r == HTTP_ROUTE_METRICS && !w->set.metrics_auth);
}

/* refuse_none - the 401 of a request that carries no token; one that put
 * it in the query of a route that does not take it is told so. */
static void
refuse_none(struct http_request *req)
{
    if (http_request_header(req, "Authorization") != NULL)
        worker_auth_refuse(req, "the Authorization header holds no bearer "
                                "token: send Authorization: Bearer <token>");
    else if (http_query_get(http_request_args(req), "access_token", NULL))
        worker_auth_refuse(req, "this node wants a token: send "
                                "Authorization: Bearer <token> (access_token "
                                "in the query is taken by the subscribe and "
                                "presence routes only)");
    else
        worker_auth_refuse(req, "this node wants a token: send "
                                "Authorization: Bearer <token>");
}

/* worker_auth_caller - see authz.h.  The signed token of the request
 * before is freed first: a caller is good for its dispatch only. */
int
worker_auth_caller(struct worker *w, struct http_request *req,
                   enum http_route r)
{
    char why[HTTP_ERROR_MSG_MAX];
    const char *tok;
    size_t len;
    int rc;

    auth_token_clear(&w->signed_caller);
    w->caller = NULL;
    if (!w->auth_on || open_route(w, r))
        return 1;
    rc = credential(req, &tok, &len);
    if (rc < 0) {
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "send the token once: in the Authorization header "
                         "or as access_token in the query, not both");
        return 0;
    }
    if (rc == 0) {
        refuse_none(req);
        return 0;
    }
    w->caller = resolve(w, tok, len, &w->signed_caller, &rc, why, sizeof(why));
    if (w->caller != NULL)
        return 1;
    if (rc == -ENOMEM)
        http_reply_errno(req, -ENOMEM, "checking the token");
    else
        worker_auth_refuse(req, why);
    return 0;
}

/* worker_tenant - see authz.h. */
const char *
worker_tenant(const struct worker *w)
{
    return w->caller != NULL ? w->caller->tenant : "";
}

/* worker_tenant_prefix - see authz.h. */
size_t
worker_tenant_prefix(const struct worker *w, char *buf)
{
    const char *t = worker_tenant(w);
    size_t n = strlen(t);

    if (n == 0)
        return 0;
    memcpy(buf, t, n);
    buf[n] = HTTP_TENANT_SEP;
    return n + 1;
}

/* allowed - whether the caller may do verb to client (a valid name).  A
 * request's inbox takes only replies (a push), with the request
 * permission on any queue: only its node waits on it, so no token may
 * pop, read, configure, reset or delete one. */
static int
allowed(const struct worker *w, enum auth_verb verb, struct shm_name client)
{
    char name[SHM_NAME_MAX + 1];

    if (w->caller == NULL)
        return !w->auth_on;
    if (shm_inbox_named(client))
        return verb == AUTH_PUSH && w->caller->globs[AUTH_REQUEST] != NULL;
    memcpy(name, client.ptr, client.len); /* fnmatch wants it NUL-ended */
    name[client.len] = '\0';
    return auth_allows(w->caller, verb, name);
}

/* worker_may - see authz.h. */
int
worker_may(struct worker *w, enum auth_verb verb, struct shm_name client)
{
    return client.len <= SHM_NAME_MAX && allowed(w, verb, client);
}

/* worker_authz_any - see authz.h. */
int
worker_authz_any(struct worker *w, struct http_request *req,
                 enum auth_verb verb)
{
    if (!w->auth_on || (w->caller != NULL && w->caller->globs[verb] != NULL))
        return 1;
    http_reply_error(req, 403, "forbidden",
                     "this token may not list queues (it has no %s "
                     "permission)",
                     auth_verb_name(verb));
    return 0;
}

/* The refusals of worker_authz, checked once for both it and
 * worker_authz_quiet. */
enum authz_no { AUTHZ_OK, AUTHZ_INBOX, AUTHZ_LACKS, AUTHZ_TOO_LONG };

/* authz_check - whether the caller may do verb to client, and if not why;
 * n: the tenant prefix's length (prefix). */
static enum authz_no
authz_check(struct worker *w, enum auth_verb verb, struct shm_name client,
            size_t n)
{
    if (w->auth_on && shm_inbox_named(client) && verb != AUTH_PUSH)
        return AUTHZ_INBOX;
    if (!worker_may(w, verb, client))
        return AUTHZ_LACKS;
    if (n + client.len > SHM_NAME_MAX)
        return AUTHZ_TOO_LONG;
    return AUTHZ_OK;
}

/* worker_authz_quiet - see authz.h. */
int
worker_authz_quiet(struct worker *w, enum auth_verb verb,
                   struct shm_name client)
{
    char prefix[AUTH_TENANT_MAX + 2];

    return authz_check(w, verb, client, worker_tenant_prefix(w, prefix)) ==
           AUTHZ_OK;
}

/* worker_authz - see authz.h. */
int
worker_authz(struct worker *w, struct http_request *req, enum auth_verb verb,
             const char *field, struct shm_name client,
             struct worker_qname *out)
{
    static const char *const to[AUTH_NVERBS] = {
        [AUTH_PUSH] = "push to",
        [AUTH_POP] = "pop, ack or extend in",
        [AUTH_REQUEST] = "send requests to or reply on",
        [AUTH_ADMIN] = "configure, reset or delete",
        [AUTH_READ] = "list or read the depth of",
        [AUTH_SUBSCRIBE] = "subscribe to",
        [AUTH_PRESENCE] = "enter or leave the presence of"};
    char prefix[AUTH_TENANT_MAX + 2];
    size_t n = worker_tenant_prefix(w, prefix);
    int cut = client.len > 200 ? 200 : (int)client.len;
    enum auth_verb wanted;

    switch (authz_check(w, verb, client, n)) {
    case AUTHZ_INBOX:
        http_reply_error(req, 403, "forbidden",
                         "this token may not %s queue '%.*s': a request's "
                         "inbox takes only replies (pushed with the request "
                         "permission), and only its node waits on it",
                         to[verb], cut, client.ptr);
        return 0;
    case AUTHZ_LACKS:
        wanted = shm_inbox_named(client) ? AUTH_REQUEST : verb;
        http_reply_error(req, 403, "forbidden",
                         "this token may not %s queue '%.*s' (it lacks the "
                         "%s permission for it)",
                         to[verb], cut, client.ptr, auth_verb_name(wanted));
        return 0;
    case AUTHZ_TOO_LONG:
        http_reply_error(req, 400, "invalid_name",
                         "field '%s' is %zu bytes: in tenant '%s' a name may "
                         "be at most %zu bytes",
                         field, client.len, worker_tenant(w),
                         (size_t)SHM_NAME_MAX - n);
        return 0;
    case AUTHZ_OK:
        break;
    }
    if (n == 0) { /* the empty tenant: the client's name as it is */
        out->name = client;
        return 1;
    }
    memcpy(out->buf, prefix, n);
    memcpy(out->buf + n, client.ptr, client.len);
    out->name = (struct shm_name){out->buf, n + client.len};
    return 1;
}

/* worker_client_name - see authz.h. */
struct shm_name
worker_client_name(struct shm_name internal)
{
    size_t skip = http_tenant_skip(internal.ptr, internal.len);

    return (struct shm_name){internal.ptr + skip, internal.len - skip};
}

/* worker_in_tenant - see authz.h. */
int
worker_in_tenant(const struct worker *w, struct shm_name internal)
{
    char prefix[AUTH_TENANT_MAX + 2];
    size_t n = worker_tenant_prefix(w, prefix);
    size_t skip = http_tenant_skip(internal.ptr, internal.len);
    struct shm_name client = {internal.ptr + skip, internal.len - skip};

    if (skip != n || (n > 0 && memcmp(internal.ptr, prefix, n) != 0))
        return 0;
    return !w->auth_on || allowed(w, AUTH_READ, client);
}

/* worker_auth_valid - see authz.h.  Out of memory is no verdict: the
 * token stays good until it can be checked. */
int
worker_auth_valid(const struct worker *w, struct http_request *req)
{
    struct auth_token t;
    char why[HTTP_ERROR_MSG_MAX];
    const char *tok;
    size_t len;
    int rc, ok;

    if (!w->auth_on)
        return 1;
    if (credential(req, &tok, &len) != 1)
        return 0;
    memset(&t, 0, sizeof(t));
    ok = resolve(w, tok, len, &t, &rc, why, sizeof(why)) != NULL ||
         rc == -ENOMEM;
    auth_token_clear(&t);
    return ok;
}

/* worker_tenant_admit - see authz.h. */
int
worker_tenant_admit(struct worker *w, struct http_request *req,
                    const struct shm_msg_in *msgs, uint32_t n)
{
    const struct auth_token *tok = w->caller;
    uint64_t cost = 0, held, wait_ms;
    uint32_t slot;

    if (tok == NULL || (tok->rate == 0 && tok->max_bytes == 0) || n == 0)
        return 1;
    slot = shm_tenants_find(w->seg->tenants, tok->tenant, strlen(tok->tenant));
    if (slot == 0)
        return 1; /* the empty tenant, or a table full at the start */
    for (uint32_t i = 0; i < n; i++)
        cost += shm_ring_msg_cost(msgs[i].len);
    held = shm_tenants_bytes(w->seg->tenants, slot);
    if (tok->max_bytes != 0 && cost > tok->max_bytes) {
        /* no wait would make room for it: not a 503 to retry */
        http_reply_error(req, 413, "payload_too_large",
                         "tenant '%s' may hold %llu bytes on this node (its "
                         "token's max_bytes): these %u message%s take %llu "
                         "bytes, more than it may ever hold; push them in "
                         "smaller batches",
                         tok->tenant, (unsigned long long)tok->max_bytes, n,
                         n == 1 ? "" : "s", (unsigned long long)cost);
        return 0;
    }
    if (tok->max_bytes != 0 && held + cost > tok->max_bytes) {
        http_reply_header(req, "Retry-After", "1");
        http_reply_error(req, 503, "ephemeral_unavailable",
                         "tenant '%s' holds %llu bytes on this node and its "
                         "share (max_bytes) is %llu: these %llu bytes do not "
                         "fit; retry once its consumers have caught up",
                         tok->tenant, (unsigned long long)held,
                         (unsigned long long)tok->max_bytes,
                         (unsigned long long)cost);
        return 0;
    }
    if (shm_tenants_take(w->seg->tenants, slot, n, tok->rate, shm_now_ms(),
                         &wait_ms) != 0) {
        /* Retry-After: when the bucket holds them (a batch larger than
         * the rate: when it is full), in seconds rounded up; the sentence
         * stays the same while the wait counts down */
        char ra[24];
        snprintf(
            ra, sizeof(ra), "%llu",
            (unsigned long long)(wait_ms > 1000 ? (wait_ms + 999) / 1000 : 1));
        http_reply_header(req, "Retry-After", ra);
        http_reply_error(req, 429, "rate_limited",
                         "tenant '%s' may push %u messages a second on this "
                         "node (its token's rate): these %u fit once the "
                         "pushes before them are paid for, as Retry-After "
                         "says",
                         tok->tenant, tok->rate, n);
        return 0;
    }
    return 1;
}

/* worker_tenant_refund - see authz.h. */
void
worker_tenant_refund(struct worker *w, uint32_t n)
{
    const struct auth_token *tok = w->caller;

    if (tok == NULL || tok->rate == 0 || n == 0)
        return;
    shm_tenants_untake(
        w->seg->tenants,
        shm_tenants_find(w->seg->tenants, tok->tenant, strlen(tok->tenant)), n,
        tok->rate);
}
