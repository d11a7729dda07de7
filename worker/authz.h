/*
 * authz.h - SPEC §10 inside a worker: who sent a request (its bearer
 * token), whether that token may do a verb to a queue, and the queue's
 * name inside the token's tenant.
 *
 * With no auth_file and no jwt_secret_file every request is served and
 * every name is the client's.  With either, dispatch (worker.c) asks
 * worker_auth_caller() before any handler runs: /health, the status page
 * and (unless metrics_auth = on) /metrics are open, anything else without
 * a known token is 401.  The token is the Authorization header's bearer
 * token, or on the routes a page calls (auth_query_token_path) the
 * access_token query parameter (both: 400).  With jwt_secret_file a token
 * of a JWT's form is a signed token (http/jwt.h), verified and mapped onto
 * the same struct auth_token as the auth file's, so every check below
 * treats both alike; w->caller->exp and ->sub are what it signed (a
 * stream ends at exp; presence's member is sub).  A handler then asks
 * worker_authz() once it has parsed the queue's name and before it
 * changes anything: 403 names the verb and the queue.  The token found is
 * valid for the dispatch only (a reload frees the table, the next dispatch
 * the signed token): what a handler keeps for later is the internal name,
 * and the exp it needs.
 *
 * Internal names (http/names.h) put the tenant before the client's name;
 * the empty tenant leaves names as they are.  A request's inbox is its
 * requester's tenant's queue too (the reply of another tenant cannot
 * reach it); with tokens on it takes only a reply pushed by hand, which
 * wants the request permission (on any queue) instead of push, and no
 * other verb.  From a handler on, the segment, the owners' hash, hand-over
 * and the raft catalog see only internal names; answers show the client's
 * part.  A call passed to another node (a forward, a gather, ack routing,
 * a reply, a withdrawal) carries the client's Authorization and names, and
 * the node that serves it checks and prefixes again; configure's body is
 * the one a worker rewrites (declare.c).  On HUP each worker reloads the
 * file and the secret, and the parked calls of a token no longer valid
 * end 401 (worker_parked_revoked).  Process memory only.
 */
#ifndef MAYFLY_WORKER_AUTHZ_H
#define MAYFLY_WORKER_AUTHZ_H

#include "http/auth.h"
#include "http/route.h"
#include "shm/broker.h"

struct worker;
struct http_request;

/* A queue's internal name, built in the caller's storage (or, for the
 * empty tenant, the client's name where it lies). */
struct worker_qname {
    struct shm_name name; /* what the segment and the owners know */
    char buf[SHM_NAME_MAX];
};

/* worker_auth_init - take the table the master loaded (settings). */
void worker_auth_init(struct worker *w);

/* worker_auth_reload - HUP: read the auth file and the secret of signed
 * tokens again; a file that no longer loads is logged and what was loaded
 * kept.  1 when the table was replaced or the secret changed. */
int worker_auth_reload(struct worker *w);

/* worker_auth_caller - find req's token for route r.  1: go on (auth off,
 * an open route, or a known token); 0: answered 401 unauthorized. */
int worker_auth_caller(struct worker *w, struct http_request *req,
                       enum http_route r);

/*
 * worker_authz - may the caller do verb to the queue the client named
 * (field names it in errors)?  1 with the internal name in *out; 0 when
 * req was answered: 403 forbidden naming the verb and the queue, or 400
 * invalid_name when the tenant and the name do not fit SHM_NAME_MAX.
 */
int worker_authz(struct worker *w, struct http_request *req,
                 enum auth_verb verb, const char *field, struct shm_name client,
                 struct worker_qname *out);

/* worker_authz_quiet - whether worker_authz would let the caller do verb
 * to client, answering nothing (its refusals, the same conditions). */
int worker_authz_quiet(struct worker *w, enum auth_verb verb,
                       struct shm_name client);

/* worker_authz_any - may the caller do verb to some queue (a listing
 * shows what it may read)?  1, or 0 with req answered 403 naming the
 * verb. */
int worker_authz_any(struct worker *w, struct http_request *req,
                     enum auth_verb verb);

/* worker_may - the same check for the caller, answering nothing: 1 when
 * verb on client is allowed (auth off: always). */
int worker_may(struct worker *w, enum auth_verb verb, struct shm_name client);

/* worker_tenant - the caller's tenant ("" when none or auth off). */
const char *worker_tenant(const struct worker *w);

/* worker_tenant_prefix - the caller's tenant with the separator into
 * buf (at least AUTH_TENANT_MAX + 2 bytes); its length (0: none). */
size_t worker_tenant_prefix(const struct worker *w, char *buf);

/* worker_client_name - the name a client knows for an internal name. */
struct shm_name worker_client_name(struct shm_name internal);

/* worker_in_tenant - whether the internal name is in the caller's
 * tenant, and its client name may be read by the caller (listing). */
int worker_in_tenant(const struct worker *w, struct shm_name internal);

/*
 * worker_tenant_admit - the caller's tenant may store these n messages
 * here now: under its token's rate (a bucket of rate pushes refilled at
 * rate a second, taken from here when they fit; a batch larger than the
 * rate fits a full bucket and leaves it in debt, shm/tenants.h) and its
 * share of this node's memory (max_bytes).  1, or 0 with req answered
 * 429 rate_limited or 503 ephemeral_unavailable, each with Retry-After
 * (the rate's says when they fit), or 413 payload_too_large when they take
 * more than the whole share.  Both bounds are per node.
 */
int worker_tenant_admit(struct worker *w, struct http_request *req,
                        const struct shm_msg_in *msgs, uint32_t n);

/* worker_tenant_refund - the n messages worker_tenant_admit() let in
 * were refused after all (the queue's bounds, the node's memory): they
 * no longer count toward the caller's rate. */
void worker_tenant_refund(struct worker *w, uint32_t n);

/* worker_auth_valid - whether req's token is still good (always with
 * auth off): in the table, or signed with the current secret and not
 * expired; a reload may have revoked it. */
int worker_auth_valid(const struct worker *w, struct http_request *req);

/* worker_auth_refuse - answer req 401 unauthorized, WWW-Authenticate. */
void worker_auth_refuse(struct http_request *req, const char *why);

/* worker_auth_header - the "Authorization: ..." line that carries req's
 * credentials on to another node, which answers for the same caller
 * (malloc'd, in *out; NULL when req has none).  0, or -ENOMEM. */
int worker_auth_header(struct http_request *req, char **out);

#endif
