/*
 * stray.h - answers written straight to a client's socket, past
 * libmicrohttpd, for what MHD 0.9.75 cannot answer right itself (DESIGN
 * §4): bytes that are not HTTP at all (a TLS ClientHello on the plain
 * port) and a Content-Length MHD refuses, whose answer it garbles
 * (mhd_answer.c).  Only where MHD has written nothing of an answer for the connection's
 * current request.  Stateless, no locking.
 */
#ifndef MAYFLY_HTTP_STRAY_H
#define MAYFLY_HTTP_STRAY_H

/*
 * http_stray_answer - a JSON error answer (status, code, sentence; the
 * sentence must need no escaping) with "Connection: close" on socket fd,
 * then its write side shut, so the client reads the answer and its end,
 * and what MHD would send after it fails and closes the connection.  A
 * socket too full to take it whole gets its end only.
 */
void http_stray_answer(int fd, unsigned status, const char *code,
                       const char *sentence);

/*
 * http_stray_tls - the bytes waiting on socket fd begin a TLS record (a
 * ClientHello on the plain port): they are read and dropped, answered 400
 * and the socket shut both ways (so MHD, which holds no request of it,
 * reads its end and closes it).  1 when refused, else 0 (nothing read).
 */
int http_stray_tls(int fd);

#endif
