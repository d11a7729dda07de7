/*
 * edge_socket.h - answers written straight to a client's socket, past
 * libmicrohttpd, for what MHD 0.9.75 cannot answer right itself (edge.h):
 * bytes that cannot begin a request (a TLS ClientHello on the plain port,
 * a NUL, a space), plain HTTP on a TLS port, and a Content-Length MHD
 * refuses, whose answer it garbles (edge_answer.c).  Only where MHD has written nothing of an
 * answer for the connection's current request.  Stateless, no locking.
 */
#ifndef MAYFLY_HTTP_EDGE_SOCKET_H
#define MAYFLY_HTTP_EDGE_SOCKET_H

#include <sys/types.h>

/*
 * http_edge_socket_answer - a JSON error answer (status, code, sentence; the
 * sentence must need no escaping) with "Connection: close" (and a 429 or
 * 503 with "Retry-After: 1", as every answer, reply.h) on socket fd,
 * then its write side shut, so the client reads the answer and its end,
 * and what MHD would send after it fails and closes the connection.  A
 * socket too full to take it whole gets its end only.
 */
void http_edge_socket_answer(int fd, unsigned status, const char *code,
                             const char *sentence);

/*
 * http_edge_socket_first - the first bytes waiting on socket fd, of a plain
 * HTTP port, cannot begin a request (a TLS ClientHello, a NUL, a space:
 * anything but a method's first letter or an empty line): they are read
 * and dropped, answered 400 and the socket shut both ways (so MHD, which
 * holds no request of it, reads its end and closes it).  1 when refused;
 * 0 when they may begin a request, or MHD has read from the socket (what
 * waits is not its first bytes); -1 when nothing waits yet.
 */
int http_edge_socket_first(int fd);

/*
 * http_edge_socket_plain - the inverse, for a TLS port: the bytes waiting on
 * socket fd are not a TLS handshake (plain HTTP): they are read and
 * dropped, answered 400 in plain HTTP, and the socket shut both ways (the
 * handshake MHD attempts then meets its end).  1 when refused, else 0
 * (nothing read, nothing waiting yet, or bytes of the connection already
 * read by MHD: those waiting are not its first).
 */
int http_edge_socket_plain(int fd);

/*
 * http_edge_socket_pull - the read function of a TLS connection's GnuTLS session
 * (gnutls_transport_set_pull_function; ptr is the socket, as MHD sets it):
 * recv, and when what it read is the connection's first bytes and they
 * are plain HTTP, answers them as http_edge_socket_plain does and fails the
 * read (ECONNRESET), so the handshake ends.  This catches the bytes that
 * reach MHD before the worker's watch of the socket sees them (a worker
 * awake when they arrive runs MHD first).
 */
ssize_t http_edge_socket_pull(void *ptr, void *buf, size_t len);

#endif
