/*
 * certs.h - TLS material for tests, made with the openssl command: a CA,
 * certificates it signs for loopback addresses, and the fingerprint of
 * the certificate a server presents.
 */
#ifndef MAYFLY_TEST_INTEGRATION_CERTS_H
#define MAYFLY_TEST_INTEGRATION_CERTS_H

#include <stddef.h>

/* itest_make_ca - dir/<name>.pem and dir/<name>.key: a self-signed CA. */
void itest_make_ca(const char *dir, const char *name);

/*
 * itest_make_cert - dir/<name>.pem and dir/<name>.key: a certificate for
 * the IP addresses ips ("127.0.0.1,127.0.0.2"), for servers and clients,
 * signed by the CA dir/<ca>.pem.
 */
void itest_make_cert(const char *dir, const char *ca, const char *name,
                     const char *ips);

/* itest_cert_fingerprint - the SHA-256 fingerprint of the PEM certificate
 * file path, as openssl prints it, into out. */
void itest_cert_fingerprint(const char *path, char *out, size_t len);

/*
 * itest_served_fingerprint - the SHA-256 fingerprint of the certificate
 * the TLS server at host:port presents, into out ("" when no handshake
 * completed).
 */
void itest_served_fingerprint(const char *host, int port, char *out,
                              size_t len);

#endif
