/*
 * drain_port.h - the master answers the client port while the node drains.
 *
 * From SIGTERM/SIGINT until it exits, the master serves the client
 * listening socket itself: GET /health answers 503 with the node's status
 * ("draining", not ready), every other routed request 503 draining with
 * Retry-After.  The workers have stopped accepting by then; connections
 * they already hold stay theirs.  Single-threaded (the master's loop).
 */
#ifndef MAYFLY_MASTER_DRAIN_PORT_H
#define MAYFLY_MASTER_DRAIN_PORT_H

struct master;

/*
 * master_drain_port_start - serve m->ws.listen_fd inside epoll ep (the
 * server owns the socket from then on).  0 or -errno (logged); on failure
 * the drain goes on without it.
 */
int master_drain_port_start(struct master *m, int ep);

/* master_drain_port_run - let MHD do its due work (each loop turn); a
 * no-op when the port is not started. */
void master_drain_port_run(struct master *m);

/* master_drain_port_timeout_ms - how long the loop may sleep for it (-1:
 * no timer, or not started). */
int master_drain_port_timeout_ms(struct master *m);

/*
 * master_drain_port_finish - the last round before the socket closes: the
 * kernel opens no new connection on it (a client's connect is refused once
 * the master exits), and the master accepts and answers those already
 * queued (50 ms, longer while one waits to be accepted, has not sent its
 * request or is being answered; 1 s at most).
 * Blocks the master for that long; a no-op when the port is not started.
 */
void master_drain_port_finish(struct master *m);

/* master_drain_port_stop - close its connections and the listening
 * socket, free it.  A no-op when it was not started. */
void master_drain_port_stop(struct master *m);

#endif
