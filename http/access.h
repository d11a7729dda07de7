/*
 * access.h - the MHD callbacks that carry connections and their requests
 * (access.c), for http/server.c to register.  Each gets the struct
 * http_server as cls.  Single-threaded, no locking.
 */
#ifndef MAYFLY_HTTP_ACCESS_H
#define MAYFLY_HTTP_ACCESS_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stddef.h>

#include <microhttpd.h>

/* http_access_conn_notify - MHD_OPTION_NOTIFY_CONNECTION: count a new
 * connection fresh; report an ending one to the on_close hook. */
void http_access_conn_notify(void *cls, struct MHD_Connection *conn,
                             void **socket_ctx,
                             enum MHD_ConnectionNotificationCode code);

/* http_access_uri - MHD_OPTION_URI_LOG_CALLBACK: a new request; NULL when
 * out of memory (the access handler then closes the connection). */
void *http_access_uri(void *cls, const char *uri, struct MHD_Connection *conn);

/* http_access_handler - the MHD access handler. */
enum MHD_Result http_access_handler(void *cls, struct MHD_Connection *conn,
                                    const char *url, const char *method,
                                    const char *version,
                                    const char *upload_data,
                                    size_t *upload_data_size, void **req_cls);

/* http_access_cert - MHD_OPTION_HTTPS_CERT_CALLBACK (GnuTLS's retrieve
 * function): the certificate and key the server's credentials hold now
 * (tls.h), so that a reload takes effect at the next handshake. */
int http_access_cert(gnutls_session_t session, const gnutls_datum_t *req_ca_dn,
                     int nreqs, const gnutls_pk_algorithm_t *pk_algos,
                     int pk_algos_length, gnutls_pcert_st **pcert,
                     unsigned int *pcert_length, gnutls_privkey_t *privkey);

/* http_access_completed - MHD_OPTION_NOTIFY_COMPLETED: on_done, then free. */
void http_access_completed(void *cls, struct MHD_Connection *conn,
                           void **req_cls, enum MHD_RequestTerminationCode toe);

/* http_access_route - route req (method and uri set) as a request from
 * MHD is: its route, parameter and query, or its reply (404, 405, 400)
 * set when they are wrong.  1 when the reply must go at once (a
 * connection past max_connections; never for a request without one). */
struct http_request;
int http_access_route(struct http_request *req);

/* http_access_free - free req and everything it owns (no on_done). */
void http_access_free(struct http_request *req);

#endif
