/*
 * tls.h - a TLS server's certificate, key and (for the cluster port) the
 * CA its clients' certificates must chain to (SPEC §10), read from PEM
 * files and read again on SIGHUP.
 *
 * libmicrohttpd asks for the certificate in each handshake (its
 * MHD_OPTION_HTTPS_CERT_CALLBACK, GnuTLS's retrieve function), so a reload
 * swaps what the next handshakes present while the connections already
 * open, parked long polls included, keep theirs.  A set swapped out stays
 * allocated a while (TLS_RETIRE_MS), past the handshakes that may still
 * hold it, and is freed at a later reload or at http_tls_free().
 *
 * One struct per port of a process; a worker inherits the master's over
 * fork and reloads its own copy.  Single-threaded, no locking.  Errors:
 * NULL or -1 with a sentence naming the file in err.
 */
#ifndef MAYFLY_HTTP_TLS_H
#define MAYFLY_HTTP_TLS_H

#include <stddef.h>

struct http_tls;

/*
 * http_tls_supported - whether this libmicrohttpd speaks TLS and takes a
 * certificate callback (Debian's 0.9.75 is built with GnuTLS).  1, or 0
 * with a sentence in err.
 */
int http_tls_supported(char *err, size_t errlen);

/*
 * http_tls_load - read cert_file (the certificate, then its chain) and
 * key_file (its private key, unencrypted) and, when ca_file is neither
 * NULL nor "", the CA certificates a client's certificate must chain to.
 * The key must match the certificate.  what names the keys in errors
 * ("tls", "cluster_tls").
 */
struct http_tls *http_tls_load(const char *what, const char *cert_file,
                               const char *key_file, const char *ca_file,
                               char *err, size_t errlen);

/* http_tls_check - http_tls_load() then free: what -t checks. */
int http_tls_check(const char *what, const char *cert_file,
                   const char *key_file, const char *ca_file, char *err,
                   size_t errlen);

/* http_tls_reload - read the files again; on failure the running set
 * stays in use.  0 or -1. */
int http_tls_reload(struct http_tls *t, char *err, size_t errlen);

/* http_tls_free - everything; NULL is a no-op. */
void http_tls_free(struct http_tls *t);

/* http_tls_ca_pem - the CA file's PEM text (NUL-terminated), or NULL when
 * clients are not asked for a certificate. */
const char *http_tls_ca_pem(const struct http_tls *t);

/*
 * http_tls_current - the certificate chain and key the next handshake
 * presents: *certs (a gnutls_pcert_st array of *ncerts) and *key (a
 * gnutls_privkey_t), as void pointers so that callers need no GnuTLS
 * header.
 */
void http_tls_current(const struct http_tls *t, void **certs, unsigned *ncerts,
                      void **key);

/*
 * http_tls_peer_ok - whether the client of the TLS session (a
 * gnutls_session_t) showed a certificate that chains to t's CA and is
 * valid now.  1, or 0 with a sentence in err.
 */
int http_tls_peer_ok(const struct http_tls *t, void *session, char *err,
                     size_t errlen);

#endif
