/*
 * stray.c - see stray.h.
 */
#include "http/stray.h"

#include <sys/socket.h>

#include <stdio.h>

#include <microhttpd.h>

/* The first two bytes of every TLS record of a handshake: content type 22
 * (handshake), then the major version, 3 from SSL 3.0 to TLS 1.3. */
#define TLS_HANDSHAKE 0x16
#define TLS_MAJOR     0x03

/* http_stray_answer - see stray.h. */
void
http_stray_answer(int fd, unsigned status, const char *code,
                  const char *sentence)
{
    char body[256], msg[512];
    int bn = snprintf(body, sizeof(body),
                      "{\"error\": \"%s\", \"code\": \"%s\"}", sentence, code);
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                     status, MHD_get_reason_phrase_for(status), bn, body);

    if (bn > 0 && (size_t)bn < sizeof(body) && n > 0 && (size_t)n < sizeof(msg))
        (void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
}

/* http_stray_tls - see stray.h. */
int
http_stray_tls(int fd)
{
    unsigned char head[2], sink[4096];

    if (recv(fd, head, sizeof(head), MSG_PEEK | MSG_DONTWAIT) != 2 ||
        head[0] != TLS_HANDSHAKE || head[1] != TLS_MAJOR)
        return 0;
    for (int i = 0; i < 16; i++) /* 64 KiB: a record is at most 16 KiB */
        if (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
            break;
    http_stray_answer(fd, 400, "ephemeral_bad_request",
                      "this port speaks plain HTTP, not TLS");
    shutdown(fd, SHUT_RD);
    return 1;
}
