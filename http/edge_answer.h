/*
 * edge_answer.h - libmicrohttpd 0.9.75's own error answers (a request line
 * with an HTTP version other than 1.x: 505; a malformed chunked body: 400;
 * a head that outgrows its memory per connection: 431 or 414; a request
 * line it cannot parse: 400; a Content-Length that is not a number: 400,
 * or too large: 413) given the JSON error body every answer
 * carries.  MHD has no hook for them, but it queues each through its
 * exported MHD_queue_response, called through its PLT: mayflyd defines
 * that function (the dynamic linker binds MHD's call to it), and while
 * our server runs MHD, a response that MHD queues itself is swapped for a
 * JSON one with the same status.  MHD then closes the connection after it,
 * as it would have after its HTML page (edge.h, D12); a refused
 * Content-Length is answered on the socket itself (edge_socket.h), since MHD
 * garbles any answer it queues for one.  Single-threaded (the
 * worker's loop), no locking.
 */
#ifndef MAYFLY_HTTP_EDGE_ANSWER_H
#define MAYFLY_HTTP_EDGE_ANSWER_H

#include <microhttpd.h>

/* http_edge_answer_running - MHD is running (1) for our server or not (0): only
 * then is a response MHD queues itself replaced. */
void http_edge_answer_running(int running);

/* http_edge_answer_log - a line of MHD's log: when it says MHD is about to
 * answer an error itself, what it says chooses our sentence. */
void http_edge_answer_log(const char *line);

/* http_edge_answer_queue - our own response queued, as MHD_queue_response but
 * never replaced. */
enum MHD_Result http_edge_answer_queue(struct MHD_Connection *conn,
                                       unsigned status,
                                       struct MHD_Response *resp);

#endif
