/*
 * edge_wait.c - see edge_wait.h.  Each queue is in the order connections
 * joined it, and all in one queue have the same window, so the first is
 * always the next to run out of time.
 */
#include "http/edge_wait.h"

#include <sys/socket.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "http/edge_conn.h"
#include "http/edge_socket.h"
#include "http/server-t.h"

/* How long a connection has owed a head before it may be cut to make room:
 * a client that sends its request as it connects is not cut for one that
 * came after it, and connections that send nothing go within a second. */
#define ROOM_GRACE_MS 1000

/* now_ms - a monotonic clock, in ms. */
static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* take - c out of its queue, if in one. */
static void
take(struct http_conn *c)
{
    struct http_conn_queue *q = c->queue;

    if (q == NULL)
        return;
    *(c->prev != NULL ? &c->prev->next : &q->first) = c->next;
    *(c->next != NULL ? &c->next->prev : &q->last) = c->prev;
    c->queue = NULL;
    c->prev = c->next = NULL;
}

/* put - c at the end of q, from now. */
static void
put(struct http_conn_queue *q, struct http_conn *c, uint64_t now)
{
    take(c);
    c->queue = q;
    c->since_ms = now;
    c->prev = q->last;
    c->next = NULL;
    *(q->last != NULL ? &q->last->next : &q->first) = c;
    q->last = c;
}

/* http_edge_wait_init - see edge_wait.h: a head has HTTP_HEAD_TIMEOUT_S,
 * or the connection timeout where that is shorter; a connection between
 * requests, the connection timeout. */
void
http_edge_wait_init(struct http_server *s)
{
    unsigned t = s->opts.connection_timeout_s;

    s->heads.window_s =
        t != 0 && t < HTTP_HEAD_TIMEOUT_S ? t : HTTP_HEAD_TIMEOUT_S;
    s->idles.window_s = t;
}

/* cut - c has owed its head too long (late), or makes room: answered if
 * it owes a head on a plain port (nothing of an answer is under way
 * there), then shut both ways, so that MHD reads its end and closes it. */
static void
cut(struct http_conn *c, int late)
{
    struct http_server *s = c->server;
    int head = c->queue == &s->heads;
    char why[128];

    take(c);
    c->cut = 1;
    s->cutting++;
    if (head && c->tls == NULL && late) {
        snprintf(why, sizeof(why), "the request head did not come within %u s",
                 s->heads.window_s);
        http_edge_socket_answer(c->fd, 408, "ephemeral_bad_request", why);
    } else if (head && c->tls == NULL) {
        snprintf(why, sizeof(why),
                 "this worker is at max_connections (%u): retry later",
                 s->opts.max_connections);
        http_edge_socket_answer(c->fd, 503, "ephemeral_unavailable", why);
    }
    if (head && !late && s->opts.on_refused != NULL)
        s->opts.on_refused(s->ctx);
    shutdown(c->fd, SHUT_RDWR);
}

/* oldest - of the first connection of s->heads (or the second, when the
 * first is except) and the first of s->idles, the one that joined its
 * queue earlier, or NULL. */
static struct http_conn *
oldest(const struct http_server *s, const struct http_conn *except)
{
    struct http_conn *h = s->heads.first, *i = s->idles.first;

    if (h != NULL && h == except)
        h = h->next;
    if (h == NULL || (i != NULL && i->since_ms < h->since_ms))
        return i;
    return h;
}

/* room - cut the connection that has owed a head the longest, if it has
 * owed it ROOM_GRACE_MS at least, but for except: 1 when one was. */
static int
room(struct http_server *s, const struct http_conn *except, uint64_t now)
{
    struct http_conn *c = oldest(s, except);

    if (c == NULL || c->since_ms + ROOM_GRACE_MS > now)
        return 0;
    cut(c, 0);
    return 1;
}

/* full - s is at libmicrohttpd's own connection limit, but for the
 * connections cut and not yet closed: it accepts nothing more. */
static int
full(const struct http_server *s)
{
    return s->open - s->cutting >=
           http_edge_conn_limit(s->opts.max_connections);
}

/* http_edge_wait_opened - see edge_wait.h.  The oldest of both queues
 * goes, c excepted: a flood of connections that send nothing cycles
 * through the places past max_connections, and a client that sends its
 * request at once is served. */
int
http_edge_wait_opened(struct http_conn *c)
{
    struct http_server *s = c->server;
    uint64_t now = now_ms();

    put(&s->heads, c, now);
    return s->open - s->cutting > s->opts.max_connections && !room(s, c, now);
}

/* http_edge_wait_line - see edge_wait.h. */
void
http_edge_wait_line(struct http_conn *c)
{
    if (c->queue == &c->server->idles)
        put(&c->server->heads, c, now_ms());
}

/* http_edge_wait_done - see edge_wait.h. */
void
http_edge_wait_done(struct http_conn *c)
{
    take(c);
}

/* http_edge_wait_idle - see edge_wait.h. */
void
http_edge_wait_idle(struct http_conn *c)
{
    put(&c->server->idles, c, now_ms());
}

/* http_edge_wait_closed - see edge_wait.h. */
void
http_edge_wait_closed(struct http_conn *c)
{
    take(c);
    if (c->cut)
        c->server->cutting--;
}

/* due - when q's first connection runs out of time, or UINT64_MAX. */
static uint64_t
due(const struct http_conn_queue *q)
{
    if (q->first == NULL || q->window_s == 0)
        return UINT64_MAX;
    return q->first->since_ms + (uint64_t)q->window_s * 1000;
}

/* http_edge_wait_expire - see edge_wait.h.  At libmicrohttpd's own limit
 * no connection comes in to make room: a place is made here. */
void
http_edge_wait_expire(struct http_server *s)
{
    uint64_t now = now_ms();

    while (due(&s->heads) <= now)
        cut(s->heads.first, 1);
    while (due(&s->idles) <= now)
        cut(s->idles.first, 1);
    while (full(s) && room(s, NULL, now))
        ;
}

/* http_edge_wait_next_ms - see edge_wait.h: at libmicrohttpd's limit, the
 * oldest connection owing a head may be cut once its grace is over. */
int
http_edge_wait_next_ms(const struct http_server *s)
{
    uint64_t h = due(&s->heads), i = due(&s->idles), t = h < i ? h : i;
    const struct http_conn *c = full(s) ? oldest(s, NULL) : NULL;
    uint64_t now = now_ms();

    if (c != NULL && c->since_ms + ROOM_GRACE_MS < t)
        t = c->since_ms + ROOM_GRACE_MS;

    if (t == UINT64_MAX)
        return -1;
    return t <= now ? 0 : t - now > INT_MAX ? INT_MAX : (int)(t - now);
}
