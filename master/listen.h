/*
 * listen.h - the listening sockets the master makes before forking, so that
 * every worker accepts on the same queue of connections (no SO_REUSEPORT:
 * a dying worker would take its share of queued connections with it).
 */
#ifndef MAYFLY_MASTER_LISTEN_H
#define MAYFLY_MASTER_LISTEN_H

#include <stddef.h>

/*
 * master_listen - bind and listen on "host:port" (IPv4 or [IPv6]); the
 * socket is non-blocking and close-on-exec.  Returns the fd or -errno, with
 * a reason in err.
 */
int master_listen(const char *addr, char *err, size_t errlen);

/*
 * master_listen_stop - the drain begins: close the master's copy of the
 * client listening socket and set *fd to -1 (a no-op when it is -1).  The
 * socket closes once the last copy does, so the master's goes first, before
 * the workers are told to stop: each worker takes what is queued on it and
 * then closes its own (worker.c), and the kernel then refuses new
 * connections at once instead of holding them in a queue nobody reads.
 */
void master_listen_stop(int *fd);

/* master_listen_port - the port fd is bound to (reads back port 0). */
int master_listen_port(int fd);

/*
 * master_listen_dial - "host:port" a local process connects to for fd: its
 * bound address, with a wildcard address replaced by loopback.  0/-errno.
 */
int master_listen_dial(int fd, char *buf, size_t len);

#endif
