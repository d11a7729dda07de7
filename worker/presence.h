/*
 * presence.h - SPEC §12's routes in a worker: POST /api/v1/presence/enter
 * and /leave, GET /api/v1/presence/{channel} (paged, or ?count=true).
 *
 * A channel is kept under its *presence name*: the internal name (the
 * tenant's prefix, http/names.h) with SHM_PRES_MARK before the client's
 * channel, a byte no client name may hold (names exclude control
 * characters), so the presence name never meets a queue's.  Its owner is
 * the owner of (presence name, "Default") (shm/owner.h), and a call
 * another node owns is forwarded there (worker/forward.h) as a partition's
 * is; the owner keeps the members in shm/presence.h.
 */
#ifndef MAYFLY_WORKER_PRESENCE_H
#define MAYFLY_WORKER_PRESENCE_H

#include "http/auth.h"
#include "shm/presence.h"
#include "worker/authz.h"

struct worker;
struct http_request;
struct http_buf;

/* The partition a channel's owner is picked by. */
#define WORKER_PRES_PART ((struct shm_name){"Default", 7})

/*
 * worker_presence_name - may the caller do verb to channel (the client's
 * name, field names it in errors)?  1 with the presence name in *out; 0
 * when req was answered (400 invalid_name, 403 forbidden).
 */
int worker_presence_name(struct worker *w, struct http_request *req,
                         enum auth_verb verb, const char *field,
                         struct shm_name channel, struct worker_qname *out);

/* worker_presence_shown - the channel's client name for a presence name. */
struct shm_name worker_presence_shown(struct shm_name pres);

/* worker_presence_refused - answer what the table refused (rc < 0 of
 * shm/presence.h: 429 presence_full, 413, 503), data_len the data's. */
void worker_presence_refused(struct worker *w, struct http_request *req, int rc,
                             size_t data_len);

/* worker_presence_members_json - ,"members":[...] of l into b. */
void worker_presence_members_json(struct http_buf *b,
                                  const struct shm_pres_list *l);

void worker_presence_enter(struct worker *w, struct http_request *req);
void worker_presence_leave(struct worker *w, struct http_request *req);
void worker_presence_list(struct worker *w, struct http_request *req);

#endif
