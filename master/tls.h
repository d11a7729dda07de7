/*
 * tls.h - the master's TLS credentials (SPEC §10): the client port's
 * (served by the workers, which inherit them, and by the master during a
 * drain) and the cluster port's, read at start and again on SIGHUP.
 */
#ifndef MAYFLY_MASTER_TLS_H
#define MAYFLY_MASTER_TLS_H

struct master;

/* master_tls_load - read the certificates the configuration names into
 * m->ws.tls and m->cluster_tls (NULL when not configured), and say in
 * m->ws.peers how calls to other nodes go.  After the secret is read,
 * before the workers fork.  Exits with the reason on failure. */
void master_tls_load(struct master *m);

/* master_tls_reload - HUP: read them again; one that fails to load keeps
 * the running set (logged). */
void master_tls_reload(struct master *m);

/* master_tls_free - at exit. */
void master_tls_free(struct master *m);

#endif
