/*
 * configure.h - declare/delete requests on the cluster port (configure.c).
 */
#ifndef MAYFLY_MASTER_CONFIGURE_H
#define MAYFLY_MASTER_CONFIGURE_H

#include <stdint.h>

struct master;
struct http_request;

/* master_configure - POST /cluster/v1/configure: SPEC §2 configure body. */
void master_configure(struct master *m, struct http_request *req);

/* master_undeclare - POST /cluster/v1/delete: {"queue"}. */
void master_undeclare(struct master *m, struct http_request *req);

/* master_configure_tick - move waiting requests along; answer late ones. */
void master_configure_tick(struct master *m, uint64_t now);

/* master_configure_stop - answer every waiting request 503 draining. */
void master_configure_stop(struct master *m);

#endif
