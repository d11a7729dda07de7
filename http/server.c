/*
 * server.c - the libmicrohttpd daemon of a worker: its options, the loop
 * hooks (epoll fd, run, timeout), drain (quiesce) and stop.  What MHD calls
 * back as connections and requests come and go is in access.c, which this
 * file registers and which never calls back here.
 *
 * Every worker serves the one listening socket the master made and they
 * inherit (MHD_OPTION_LISTEN_SOCKET), not SO_REUSEPORT, whose queued
 * connections die with the worker that held them.  Suspended (parked)
 * connections count against MHD's connection limit, so the limit is set
 * (edge_conn.h) and the master raises RLIMIT_NOFILE to fit.  After a
 * resume MHD calls the handler again, which queues the reply then;
 * http_server_stop resumes every parked connection before MHD_stop_daemon.
 *
 * Single-threaded (MHD runs inside http_server_run()).  Errors are logged
 * through shm/log.h; MHD's own messages too.
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/access.h"
#include "http/edge.h"
#include "http/edge_answer.h"
#include "http/edge_conn.h"
#include "http/edge_head.h"
#include "http/edge_wait.h"
#include "http/inner.h"
#include "http/request.h"
#include "http/server-t.h"
#include "http/tls.h"
#include "shm/log.h"

/* mhd_log - MHD's error log into ours, without its trailing newline; at
 * info, since an aborted request is reported as an application error.
 * A line saying MHD is about to answer a request itself chooses what
 * edge_answer.c answers instead. */
static void __attribute__((format(printf, 2, 0)))
mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    size_t n;

    (void)cls;
    vsnprintf(line, sizeof(line), fmt, ap);
    n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    log_info(0, "libmicrohttpd: %s", line);
    http_edge_answer_log(line);
}

/* tls_options - MHD's TLS options for credentials t (none when NULL):
 * the certificate asked for in each handshake (access.c), and the CA a
 * port that wants client certificates names. */
static void
tls_options(const struct http_tls *t, struct MHD_OptionItem items[3])
{
    int n = 0;

    if (t != NULL) {
        items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
                                             (void *)http_access_cert};
        if (http_tls_ca_pem(t) != NULL)
            items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0,
                                                 (void *)http_tls_ca_pem(t)};
    }
    items[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
}

/* http_server_start - one daemon on the inherited listening socket, if
 * the libmicrohttpd running is the one the edge was built and tested for
 * (edge.h).  MHD's memory per connection is set above our limits on the
 * head (edge_head.h) so that ours answer first, in JSON, where its own
 * would be an HTML page. */
struct http_server *
http_server_start(int listen_fd, const struct http_server_opts *o,
                  http_handler_fn *handler, void *ctx)
{
    struct http_server *s;
    struct MHD_OptionItem tls[3];
    char why[256];
    int fl;

    if (http_edge_version_check(MHD_get_version(), why, sizeof(why)) != 0) {
        log_error(0, "%s", why);
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        log_error(ENOMEM, "http_server_start");
        return NULL;
    }
    fl = fcntl(listen_fd, F_GETFL);
    if (fl == -1 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) == -1) {
        log_error(errno, "fcntl(%d, O_NONBLOCK) failed", listen_fd);
        free(s);
        return NULL;
    }
    s->listen_fd = listen_fd;
    s->opts = *o;
    http_edge_wait_init(s);
    s->handler = handler;
    s->ctx = ctx;
    tls_options(o->tls, tls);
    s->daemon = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
            (o->tls != NULL ? MHD_USE_TLS : 0),
        0, NULL, NULL, http_access_handler, s, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, s, MHD_OPTION_ARRAY, tls, MHD_OPTION_LISTEN_SOCKET, listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, http_edge_conn_limit(o->max_connections),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MHD_CONN_MEMORY,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->connection_timeout_s,
        MHD_OPTION_URI_LOG_CALLBACK, http_access_uri, s,
        MHD_OPTION_NOTIFY_COMPLETED, http_access_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, http_access_conn_notify, s,
        MHD_OPTION_END);
    if (s->daemon == NULL) {
        log_error(0, "MHD_start_daemon(listen fd %d) failed", listen_fd);
        free(s);
        return NULL;
    }
    return s;
}

/* http_server_fd - MHD's epoll fd. */
int
http_server_fd(const struct http_server *s)
{
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);

    return di != NULL ? di->epoll_fd : -1;
}

/*
 * http_server_run - one non-blocking MHD round.
 *
 * At its connection limit, or when accept() fails for want of descriptors
 * (EMFILE, ENFILE), MHD takes the listening socket out of its epoll set and
 * puts it back only at the start of a later round, once a connection has
 * closed (edge.h, D17).  Connections close inside a round, so a round must
 * follow every round in which one closed, or nothing wakes MHD to accept
 * again and the node stays deaf: closed asks http_server_timeout_ms() for
 * it.  Connections late with their request heads are cut before the
 * round (edge_wait.h), and hang-ups MHD missed shown to it after
 * (edge_conn.h).
 */
void
http_server_run(struct http_server *s)
{
    s->resume_pending = 0;
    s->closed = 0;
    s->round++;
    http_edge_wait_expire(s);
    /* first: a batch whose last inner request is answered now is resumed
     * before MHD takes up resumed connections */
    http_inner_poll(s);
    http_edge_answer_running(1);
    if (MHD_run(s->daemon) != MHD_YES)
        log_warn(0, "MHD_run failed");
    http_edge_answer_running(0);
    http_edge_conn_poke(s);
}

/* http_server_resume_pending - see server.h. */
int
http_server_resume_pending(const struct http_server *s)
{
    return s->resume_pending;
}

/* http_server_on_close - see server.h. */
void
http_server_on_close(struct http_server *s, void (*fn)(void *ctx, int fd),
                     void *ctx)
{
    s->on_close = fn;
    s->on_close_ctx = ctx;
}

/* http_server_on_open - see server.h. */
void
http_server_on_open(struct http_server *s,
                    void (*fn)(void *ctx, int fd, struct http_conn *c),
                    void *ctx)
{
    s->on_open = fn;
    s->on_open_ctx = ctx;
}

/* http_server_timeout_ms - 0 while a resumed request waits for a run,
 * the listening socket for the round after a close, or a hang-up for the
 * round after which it is shown to MHD (http_server_run); else MHD's
 * next timeout or the next connection's time to send its head is up
 * (edge_wait.h), whichever is first. */
int
http_server_timeout_ms(struct http_server *s)
{
    MHD_UNSIGNED_LONG_LONG t;
    int w = http_edge_wait_next_ms(s);

    if (s->resume_pending || s->closed || s->npokes != 0)
        return 0;
    if (MHD_get_timeout(s->daemon, &t) != MHD_YES)
        return w;
    return w >= 0 && (MHD_UNSIGNED_LONG_LONG)w < t ? w
           : t > INT_MAX                           ? INT_MAX
                                                   : (int)t;
}

/* http_server_quiesce - stop accepting; close our copy of the socket. */
void
http_server_quiesce(struct http_server *s)
{
    MHD_socket fd;

    if (s->listen_fd == -1)
        return;
    fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET && close(fd) == -1)
        log_warn(errno, "close(listen fd %d) failed", fd);
    s->listen_fd = -1;
}

/* http_server_refuse_new - see server.h.  A classic socket filter on the
 * listening socket drops every segment that opens a connection (SYN without
 * ACK; the filter sees the TCP header at offset 0): the kernel completes no
 * new handshake, while one already under way (its ACK, its first data)
 * still lands in the accept queue and is accepted.  The filtered client
 * sends its SYN again a second later and is refused once the socket has
 * closed: a refusal says plainly that nothing was sent, where a reset of
 * a connection whose request was queued does not. */
int
http_server_refuse_new(struct http_server *s)
{
    static struct sock_filter drop_syn[] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),          /* TCP flags */
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x12),       /* SYN, ACK */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x02, 0, 1), /* SYN alone? */
        BPF_STMT(BPF_RET | BPF_K, 0),                    /* drop */
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),          /* keep */
    };
    struct sock_fprog prog = {.len = sizeof(drop_syn) / sizeof(drop_syn[0]),
                              .filter = drop_syn};

    if (s->listen_fd == -1)
        return -EBADF;
    if (setsockopt(s->listen_fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
                   sizeof(prog)) == -1) {
        int e = errno;
        log_warn(e, "setsockopt(listen fd %d, SO_ATTACH_FILTER) failed",
                 s->listen_fd);
        return -e;
    }
    return 0;
}

/* http_server_busy - see server.h. */
unsigned
http_server_busy(const struct http_server *s)
{
    return s->requests + s->fresh;
}

/* http_server_accept_pending - see server.h. */
int
http_server_accept_pending(const struct http_server *s)
{
    struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};

    return s->listen_fd != -1 && poll(&p, 1, 0) == 1;
}

/* http_server_connections - MHD's count, parked ones included. */
unsigned
http_server_connections(struct http_server *s)
{
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

    return di != NULL ? di->num_connections : 0;
}

/* http_server_stop - resume the parked (they end unsent), then stop. */
void
http_server_stop(struct http_server *s)
{
    if (s == NULL)
        return;
    while (s->suspended != NULL)
        http_request_abort(s->suspended);
    MHD_stop_daemon(s->daemon);
    free(s->pokes);
    free(s);
}
