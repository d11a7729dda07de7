/*
 * edge_wait.h - the connections that owe a request head: how long they
 * may take, and which of them make room when the worker is full.
 *
 * libmicrohttpd 0.9.75's timeout is an idle one, restarted by every byte:
 * a client trickling its head (slowloris) holds its connection for ever;
 * and at its own connection limit MHD stops accepting, so connections
 * that send nothing, or trickle, leave every new client -- /health
 * included -- unanswered in the listen queue (edge.h, D20).  Here a
 * connection owes a head from its accept, or from the end of its last
 * request (kept alive), until its first access-handler call; it gets
 * HTTP_HEAD_TIMEOUT_S from its accept or request line, and
 * connection_timeout_s while it waits between requests, after which it is
 * cut whatever it sent; and a connection accepted past max_connections
 * makes room by cutting the one that has owed a head the longest, for a
 * second at least (and at MHD's own limit, where none is accepted, the
 * same is done before each MHD round).  A cut
 * connection owing its head is answered (408 when late, 503 with
 * Retry-After when it makes room; plain HTTP only), one idle between
 * requests just closed; MHD reads the end and closes it.  A parked or
 * answering request owes nothing, and is never cut here.
 *
 * Single-threaded (the loop that runs MHD), no locking.
 */
#ifndef MAYFLY_HTTP_EDGE_WAIT_H
#define MAYFLY_HTTP_EDGE_WAIT_H

struct http_conn;
struct http_server;

/* The seconds a connection has to send a request head, from its accept or
 * (kept alive) its request line; at most the server's connection timeout. */
#define HTTP_HEAD_TIMEOUT_S 30u

/* http_edge_wait_init - s's queues, empty, with their windows from its
 * options. */
void http_edge_wait_init(struct http_server *s);

/* http_edge_wait_opened - c was accepted and owes its first head.  Past
 * max_connections the connection that has owed one the longest (a second
 * at least) is cut to make room: 1 when c is over, past max_connections
 * with no connection to cut; else 0. */
int http_edge_wait_opened(struct http_conn *c);

/* http_edge_wait_line - c's request line is in: a connection that waited
 * between requests has HTTP_HEAD_TIMEOUT_S from now for the rest. */
void http_edge_wait_line(struct http_conn *c);

/* http_edge_wait_done - c's head is in (the access handler's first call):
 * it owes nothing until its request ends. */
void http_edge_wait_done(struct http_conn *c);

/* http_edge_wait_idle - c's request ended and c stays open: it owes the
 * next head within connection_timeout_s. */
void http_edge_wait_idle(struct http_conn *c);

/* http_edge_wait_closed - c closes: it owes nothing. */
void http_edge_wait_closed(struct http_conn *c);

/* http_edge_wait_expire - before an MHD round: the connections past their
 * time are cut. */
void http_edge_wait_expire(struct http_server *s);

/* http_edge_wait_next_ms - the ms until the next connection's time is up,
 * or -1 when none has a time. */
int http_edge_wait_next_ms(const struct http_server *s);

#endif
