/*
 * edge_conn.h - what libmicrohttpd 0.9.75 gets wrong about a connection as
 * a whole (edge.h, D14-D17): bytes that are not HTTP, or plain HTTP on a
 * TLS port, before a request line (answered at once, where MHD waits or
 * fails the handshake without a word); how long a new connection may take
 * to send its request line; a hang-up it misses; the reserve between
 * max_connections and its own connection limit.  For access.c and
 * server.c; the worker reaches the first bytes and the hang-ups through
 * http_conn_first_bytes() and http_conn_hangup() (server.h).
 * Single-threaded (the loop that runs MHD), no locking.
 */
#ifndef MAYFLY_HTTP_EDGE_CONN_H
#define MAYFLY_HTTP_EDGE_CONN_H

struct MHD_Connection;
struct http_conn;
struct http_server;

/* http_edge_conn_limit - MHD's connection limit for max_connections: a
 * reserve above it (D17). */
unsigned http_edge_conn_limit(unsigned max_connections);

/*
 * http_edge_conn_started - MHD accepted conn, whose record c is filled:
 * bytes already waiting that cannot begin a request (plain port), or
 * plain HTTP (TLS port), are answered 400 and the socket shut (1); on a
 * TLS port the GnuTLS session reads through http_edge_socket_pull for
 * what comes later.  0 when it is served.
 */
int http_edge_conn_started(struct MHD_Connection *conn, struct http_conn *c);

/* http_edge_conn_closed - MHD closes c: a hang-up of it waiting to be
 * shown to MHD is dropped (its number may come back with another). */
void http_edge_conn_closed(struct http_conn *c);

/* http_edge_conn_poke - after an MHD round: the hang-ups http_conn_hangup
 * recorded are shown to MHD (the sockets' read sides shut), which wakes
 * it to read them again. */
void http_edge_conn_poke(struct http_server *s);

#endif
