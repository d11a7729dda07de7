/*
 * listen.c - bind the client (and cluster) listening sockets.
 *
 * Errors: -errno with a sentence in err naming the address.
 *
 * The client socket is made once and shared: the master keeps a copy to
 * fork workers with, and each worker holds one (MHD_OPTION_LISTEN_SOCKET).
 * Its accept queue lives as long as the last copy, so a stop has every
 * process close its own (master_listen_stop here, the workers' drain).
 */
#include "master/listen.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shm/log.h"

/* split_addr - "host:port" or "[v6]:port" into host and port strings. */
static int
split_addr(const char *addr, char *host, size_t hostlen, const char **port)
{
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon[1] == '\0')
        return -EINVAL;
    const char *h = addr;
    size_t n = (size_t)(colon - addr);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n == 0 || n >= hostlen)
        return -EINVAL;
    memcpy(host, h, n);
    host[n] = '\0';
    *port = colon + 1;
    return 0;
}

int
master_listen(const char *addr, char *err, size_t errlen)
{
    char host[256];
    const char *port;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags =
                                 AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *res;
    int fd, rc, one = 1;

    if (split_addr(addr, host, sizeof(host), &port) != 0) {
        snprintf(err, errlen, "address '%s' is not host:port", addr);
        return -EINVAL;
    }
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "address '%s': %s", addr, gai_strerror(rc));
        return -EINVAL;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        rc = -errno;
        snprintf(err, errlen, "socket() for '%s' failed: %s", addr,
                 strerror(-rc));
        goto out;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) == -1 ||
        listen(fd, 4096) == -1) {
        rc = -errno;
        snprintf(err, errlen, "cannot listen on '%s': %s", addr, strerror(-rc));
        close(fd);
        goto out;
    }
    rc = fd;
out:
    freeaddrinfo(res);
    return rc;
}

void
master_listen_stop(int *fd)
{
    if (*fd < 0)
        return;
    if (close(*fd) == -1)
        log_warn(errno, "close(client listening socket %d) failed", *fd);
    *fd = -1;
}

int
master_listen_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
        return -errno;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int
master_listen_dial(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN];

    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == -1)
        return -errno;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        if (a->sin_addr.s_addr == htonl(INADDR_ANY))
            a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, ntohs(a->sin_port));
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
            a->sin6_addr = in6addr_loopback;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%d", host, ntohs(a->sin6_port));
    }
    return 0;
}
