/*
 * edge_conn.c - see edge_conn.h.
 */
#include "http/edge_conn.h"

#include <sys/socket.h>

#include <gnutls/gnutls.h>
#include <stdlib.h>

#include <microhttpd.h>

#include "http/edge_socket.h"
#include "http/server-t.h"

/* http_edge_conn_limit - see edge_conn.h.  At its own limit MHD stops
 * accepting, and a client waits unanswered in the listen queue; below it,
 * a connection past max_connections makes room (edge_wait.c), or access.c
 * answers its requests 503 and closes it, and serves its /health.  Parked
 * long polls count, so a node full of them still says so. */
unsigned
http_edge_conn_limit(unsigned max_connections)
{
    return max_connections + max_connections / 8 + 16;
}

/* first_look - c's first bytes, if they have come, judged before MHD
 * reads them: 1 when refused (edge_socket.h). */
static int
first_look(struct http_conn *c)
{
    int rc = http_edge_socket_first(c->fd);

    c->looked = rc >= 0;
    return rc == 1;
}

/* http_edge_conn_started - see edge_conn.h.  Bytes there already are
 * judged now: MHD reads a new connection in the round that accepts it. */
int
http_edge_conn_started(struct MHD_Connection *conn, struct http_conn *c)
{
    const union MHD_ConnectionInfo *ci;

    if (c->tls == NULL)
        return first_look(c);
    /* plain HTTP already there on a TLS port is refused (the handshake
     * meets its end); else its first bytes are watched */
    if (http_edge_socket_plain(c->fd))
        return 1;
    /* and the bytes MHD reads before the watch sees them */
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (ci != NULL && ci->tls_session != NULL)
        gnutls_transport_set_pull_function((gnutls_session_t)ci->tls_session,
                                           http_edge_socket_pull);
    return 0;
}

/* http_conn_first_bytes - see server.h: on a TLS port, bytes that are not
 * a TLS record are plain HTTP, and are answered in it. */
int
http_conn_first_bytes(struct http_conn *c)
{
    if (!c->fresh || c->looked)
        return 0;
    return c->tls != NULL ? http_edge_socket_plain(c->fd) : first_look(c);
}

/* http_conn_hangup - see server.h.  With edge-triggered epoll MHD 0.9.75
 * takes a short read as the end of what came, and misses a FIN that came
 * with the last bytes of half a request (D16): the connection would wait
 * for its idle timeout.  Once per connection: a shut socket reports its
 * end again, and would be poked for ever. */
void
http_conn_hangup(struct http_conn *c)
{
    struct http_server *s = c->server;

    if (c->poked)
        return;
    if (s->npokes == s->pokes_cap) {
        size_t n = s->pokes_cap ? 2 * s->pokes_cap : 64;
        struct http_conn **p = realloc(s->pokes, n * sizeof(*p));
        if (p == NULL)
            return; /* MHD's idle timeout closes it */
        s->pokes = p;
        s->pokes_cap = n;
    }
    c->poked = 1;
    s->pokes[s->npokes++] = c;
}

/* http_edge_conn_closed - see edge_conn.h. */
void
http_edge_conn_closed(struct http_conn *c)
{
    struct http_server *s = c->server;

    if (!c->poked)
        return;
    for (size_t i = 0; i < s->npokes; i++)
        if (s->pokes[i] == c)
            s->pokes[i] = NULL;
}

/* http_edge_conn_poke - see edge_conn.h.  A shut read side wakes MHD to
 * read again: it sees the end and closes (a request it holds whole is
 * answered first). */
void
http_edge_conn_poke(struct http_server *s)
{
    for (size_t i = 0; i < s->npokes; i++)
        if (s->pokes[i] != NULL)
            shutdown(s->pokes[i]->fd, SHUT_RD);
    s->npokes = 0;
}
