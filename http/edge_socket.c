/*
 * edge_socket.c - see edge_socket.h.
 */
#include "http/edge_socket.h"

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <microhttpd.h>

#include "http/edge_head.h"
#include "http/errors.h"

/* The first byte of every TLS record of a handshake: content type 22. */
#define TLS_HANDSHAKE 0x16

/* The content types of TLS records, change_cipher_spec (20) to
 * application_data (23): what follows a handshake.  No HTTP method
 * begins with one. */
#define TLS_TYPE_FIRST 0x14
#define TLS_TYPE_LAST  0x17

/* What plain HTTP on the TLS port is answered. */
#define PLAIN_ON_TLS                                                           \
    "this port speaks HTTPS (TLS), not plain HTTP: use https://"

/*
 * untouched - nothing but the taken bytes just read has been read from
 * socket fd: every other byte it received still waits in it.  The bytes
 * a peek sees are the connection's first only then: once MHD has read
 * some (a ClientHello, and handshaken), what waits is the middle of the
 * stream, not to be judged.
 */
static int
untouched(int fd, size_t taken)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int queued = 0;

    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) +
                  sizeof(ti.tcpi_bytes_received) ||
        ioctl(fd, FIONREAD, &queued) != 0)
        return 0;
    return ti.tcpi_bytes_received == (uint64_t)taken + (uint64_t)queued;
}

/* tls_first_byte - a byte a TLS client's stream may begin with: a record's
 * type, or, for an SSL 2 style hello, one with its top bit set.  An HTTP
 * request's first byte is a letter of its method. */
static int
tls_first_byte(unsigned char c)
{
    return (c >= TLS_TYPE_FIRST && c <= TLS_TYPE_LAST) || c >= 0x80;
}

/* http_edge_socket_answer - see edge_socket.h. */
void
http_edge_socket_answer(int fd, unsigned status, const char *code,
                        const char *sentence)
{
    char body[256], msg[512];
    int bn = snprintf(body, sizeof(body),
                      "{\"error\": \"%s\", \"code\": \"%s\"}", sentence, code);
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n%sConnection: close\r\n\r\n%s",
                     status, MHD_get_reason_phrase_for(status), bn,
                     http_status_retryable(status) ? "Retry-After: 1\r\n" : "",
                     body);

    if (bn > 0 && (size_t)bn < sizeof(body) && n > 0 && (size_t)n < sizeof(msg))
        (void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
}

/* drop_answer - read and drop what waits on fd (64 KiB at most: a
 * TLS record is at most 16 KiB, a request head 8), answer 400 with
 * sentence and shut the socket both ways. */
static void
drop_answer(int fd, const char *sentence)
{
    unsigned char sink[4096];

    for (int i = 0; i < 16; i++)
        if (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
            break;
    http_edge_socket_answer(fd, 400, "ephemeral_bad_request", sentence);
    shutdown(fd, SHUT_RD);
}

/* http_edge_socket_plain - see edge_socket.h.  Every TLS record begins with a byte
 * tls_first_byte accepts, the first one included.  Judged only before MHD
 * has read anything of the connection (untouched): a connection is watched
 * until its first request line is in, and by then the handshake may be
 * done. */
int
http_edge_socket_plain(int fd)
{
    unsigned char head;

    if (recv(fd, &head, 1, MSG_PEEK | MSG_DONTWAIT) != 1 ||
        tls_first_byte(head) || !untouched(fd, 0))
        return 0;
    drop_answer(fd, PLAIN_ON_TLS);
    return 1;
}

/* http_edge_socket_pull - see edge_socket.h.  Only a read that starts with a byte no
 * TLS stream begins with and holds the connection's first bytes is plain
 * HTTP; untouched's two system calls are paid only for such reads. */
ssize_t
http_edge_socket_pull(void *ptr, void *buf, size_t len)
{
    int fd = (int)(intptr_t)ptr;
    ssize_t n = recv(fd, buf, len, 0);

    if (n <= 0 || tls_first_byte(*(unsigned char *)buf) ||
        !untouched(fd, (size_t)n))
        return n;
    drop_answer(fd, PLAIN_ON_TLS);
    errno = ECONNRESET;
    return -1;
}

/* http_edge_socket_first - see edge_socket.h.  A request line begins
 * with its method, a token; empty lines before it are allowed (RFC 9112
 * §2.2).  Judged only before MHD has read anything of the connection. */
int
http_edge_socket_first(int fd)
{
    unsigned char c;
    char sentence[96] = "this port speaks plain HTTP, not TLS";

    if (recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 1)
        return -1;
    if (http_edge_token_char(c) || c == '\r' || c == '\n' || !untouched(fd, 0))
        return 0;
    if (c != TLS_HANDSHAKE)
        snprintf(sentence, sizeof(sentence),
                 "a request line begins with its method, not with byte 0x%02x",
                 c);
    drop_answer(fd, sentence);
    return 1;
}
