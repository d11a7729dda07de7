/*
 * edge.h - the edge between libmicrohttpd 0.9.75 and mayfly: each defect
 * of that version we work around, what we do instead, and the test that
 * shows it.  The workarounds lean on how 0.9.75 works inside (its call of
 * MHD_queue_response through its PLT, its log lines, its in-place parse
 * of the head), so http_server_start() refuses to run on another version
 * (http_edge_version_check): an upgrade fails loudly, and whoever makes it
 * goes through this list again.
 *
 * The files: edge.c (the version gate), edge_head.c (the request head),
 * edge_answer.c (MHD's own answers), edge_socket.c (answers written on the
 * socket, first bytes), edge_conn.c (per connection: first bytes,
 * hang-ups, the connection limit), edge_wait.c (connections that owe a
 * request head: how long, and which make room), edge_pool.c (the pages
 * of a connection's memory that hold nothing).  access.c and server.c
 * call them; D1, D2 and D18 shape access.c itself.  Tests are
 * test/integration/test_http_edge.c unless named.
 *
 * D1  A response queued in the access handler's first call for a request
 *     makes MHD close the connection (keepalive_possible()): throughput
 *     falls sevenfold.  access.c queues on a later call, even for a GET;
 *     only an answer that closes anyway (a bad head, a refusal past
 *     max_connections, an early 413) goes at once.
 *     test/http/test_server.c keep_alive_reuses_one_connection_for_100_requests.
 * D2  No response can be queued while a body still arrives.  A chunked
 *     body past max_body_bytes is read on and dropped, then answered 413;
 *     past twice the limit the connection closes (access.c body_chunk).
 *     test_server chunked_body_is_accumulated_and_bounded.
 * D3  Of two Content-Lengths the first wins; one beside Transfer-Encoding
 *     is ignored; a Transfer-Encoding other than chunked waits for ever
 *     for its body.  edge_head: 400.
 *     two_content_lengths_are_refused_and_nothing_is_stored,
 *     transfer_encodings_other_than_chunked_are_refused.
 * D4  An HTTP/1.1 request without Host is served (refused only in strict
 *     mode, and in HTML).  edge_head: 400.
 *     http11_without_host_is_refused_http10_is_served.
 * D5  A NUL in the request line cuts it there.  edge_head: 400.
 *     a_nul_in_the_request_line_is_refused.
 * D6  Whitespace before a header's colon stays in the name (its check runs
 *     only when strict_for_client is -1 or less, the test inverted):
 *     "Content-Length : 5" is no Content-Length, and the body runs as a
 *     second request.  edge_head: a name must be a token, else 400.
 *     whitespace_before_a_header_colon_is_refused_not_smuggled.
 * D7  A folded line (obs-fold) is joined to the *name* of the header
 *     above it (process_broken_line extends connection->last): a folded
 *     Content-Length is lost the same way.  edge_head: 400.
 *     an_obs_folded_header_is_refused_not_smuggled.
 * D8  A header value is cut at a NUL byte, and the rest of the line
 *     dropped ("Bearer <token>\0junk" passes; a Content-Length can hide
 *     behind it).  edge_head walks MHD's records against the head as it
 *     was read, in place, and refuses bytes they do not account for
 *     (400), and a control character in a value.  A NUL just before a
 *     bare LF looks there like CRLF and passes: the value MHD keeps is
 *     then every byte before it.  a_nul_in_a_header_value_is_refused.
 * D9  Of two Authorization headers (or Host) the first wins: a valid
 *     token then a wrong one is accepted.  edge_head: 400.
 *     two_authorization_headers_are_refused.
 * D10 Past its memory per connection MHD answers 414 or 431 in HTML, and
 *     it zeroes all of that memory after every request.  Our limits sit
 *     below its own, 24 KiB (edge_head.h: a URI of 8 KiB, 8 KiB of
 *     headers), and answer in JSON; that memory is sized to them.  The
 *     subscribe route's URI may be 16 KiB (its subs list): with it, a
 *     few KiB of headers fit, more are MHD's 431 (D12, in JSON).
 *     long_uris_large_headers_and_many_parameters_are_answered.
 * D11 It splits the query into a record per parameter in that memory:
 *     some 460 parameters ran it out, and the connection went silent.
 *     edge_head cuts its parse short; the query is ours (query.c).
 *     the same test (3000 parameters).
 * D12 Its own error answers (505, a malformed chunked body, 414 and 431
 *     past its memory, a Content-Length not a number or too large) are
 *     HTML pages, with no hook.  It queues them through its exported
 *     MHD_queue_response, called through its PLT: mayflyd defines that
 *     function (the Makefile exports it) and swaps each for a JSON error
 *     with the same status, its sentence chosen by MHD's log line just
 *     before (edge_answer.c).
 *     an_http_version_other_than_1x_is_answered_505_in_json,
 *     a_bad_chunk_size_is_answered_400_in_json,
 *     a_head_that_outgrows_the_connection_memory_is_answered_431.
 * D13 Its answer to a Content-Length it refuses is garbled (it builds the
 *     head, overwrites its state and builds it again): ours goes straight
 *     on the socket and MHD is told its queueing failed, so it closes.
 *     a_content_length_that_is_not_a_number_is_refused_in_json.
 * D14 Bytes that cannot begin a request: after a TLS ClientHello on the
 *     plain port MHD waits for a line end until the connection times out;
 *     a line that begins with a NUL it takes for an empty one, and waits
 *     on; one that begins with a space it closes without a word.  The
 *     first bytes of a connection are peeked as it opens and as they come
 *     (edge_conn, edge_socket): a byte other than a method's first or an
 *     empty line's is answered 400 at once.  A new connection has
 *     HTTP_HEAD_TIMEOUT_S to send its head (D20), which bounds what the
 *     peek missed (bytes a settling round of MHD read first); a later
 *     request on a kept-alive connection is not peeked at, and MHD's
 *     behaviour stands for it.
 *     a_tls_client_hello_on_the_plain_port_is_answered_400,
 *     a_request_starting_with_a_nul_byte_is_answered_400_at_once,
 *     a_request_line_with_a_leading_space_is_answered_400.
 * D15 Plain HTTP on a TLS port: the handshake fails without a word.  It
 *     is answered 400 in plain HTTP, from a peek and from the GnuTLS
 *     session's read function.
 *     test_tls.c plain_http_to_the_tls_port_is_refused_at_once.
 * D16 With edge-triggered epoll MHD takes a short read as the end of what
 *     came, and misses a FIN that came with the last bytes of half a
 *     request: the connection waits for its idle timeout.  On a hang-up
 *     nothing of ours waits on (the worker watches every socket), the
 *     socket's read side is shut after MHD's round, which wakes MHD to
 *     read it and see the end (edge_conn).
 *     half_a_request_then_a_write_shutdown_is_closed_at_once.
 * D17 At its connection limit MHD stops accepting (clients wait unanswered
 *     in the listen queue), and it puts the listening socket back in its
 *     epoll only at the start of a later round after a close.  Its limit
 *     is a reserve above max_connections (edge_conn), past which a new
 *     connection makes room (D20) or access.c answers 503 and serves
 *     /health; server.c runs a round after every round in which a
 *     connection closed.
 *     past_max_connections_a_request_gets_503_and_health_passes;
 *     test_conn_limit.c a_full_worker_accepts_again_once_its_connections_close.
 * D18 The certificate callback is told the GnuTLS session only: MHD makes
 *     the connection that session's pointer (new_connection_prepare_), and
 *     access.c reads it to find the server's current credentials.
 *     test_tls hup_serves_the_new_certificate_and_keeps_a_parked_pop.
 * D19 Suspended connections never time out nor see their client leave:
 *     the worker keeps their deadlines and watches their sockets
 *     (worker/park.c, worker/conn.c).
 *     test_longpoll.c parked_pop_whose_client_closed_leases_nothing.
 * D20 Its timeout is an idle one, restarted by every byte: a head trickled
 *     a byte at a time (slowloris) holds its connection for ever; and
 *     connections that send nothing, or trickle, fill its limit (D17) and
 *     leave every new client, /health included, unanswered.  edge_wait: a
 *     head has 30 s from the accept or the request line, however it
 *     trickles (then 408), a connection between requests its idle timeout
 *     from the last one's end; past max_connections the connection that
 *     has owed a head the longest (a second at least) is cut for the new
 *     one (503 with Retry-After), at MHD's limit before each round too.
 *     test_conn_limit.c connections_that_send_nothing_are_cut_for_new_clients,
 *     a_trickled_request_head_is_cut_after_30_s.
 * D21 It zeroes a connection's whole memory (D10) after every request,
 *     and the free part of its read buffer (half of that memory, 12 KiB,
 *     on a first request) when an answer starts, and keeps those pages of
 *     zeros resident for the connection's life: an idle stream held 12
 *     KiB of them.  It has no call that names that memory: edge_pool
 *     reads its connection record at 0.9.75's offsets, checked against
 *     what its public calls say, and a stream whose body waits gives
 *     back the whole pages of it that are all zero (madvise).
 *     test/http/test_server.c a_waiting_body_gives_back_its_zeroed_pages.
 * D22 A request whose body is in and that has no response queued (nor is
 *     suspended) is handed to the access handler again in every round,
 *     and MHD's timeout meanwhile is 0 (it polls, it does not sleep).
 *     http_request_hold relies on both: a held reply (a push that woke a
 *     pop parked in its own worker) is queued only when the handler is
 *     asked again after the round that took the woken pop up (access.c),
 *     so the pop's answer goes first.  Should a later MHD stop asking
 *     again, the held push would hang; should it sleep, it would wait.
 *     test_longpoll.c pop_woken_in_its_worker_is_answered_before_the_push.
 *
 * Single-threaded (the loop that runs MHD); no locking.
 */
#ifndef MAYFLY_HTTP_EDGE_H
#define MAYFLY_HTTP_EDGE_H

#include <stddef.h>

/* The libmicrohttpd this edge was built and tested for: every defect
 * above is that version's. */
#define HTTP_EDGE_MHD_VERSION     "0.9.75"
#define HTTP_EDGE_MHD_VERSION_HEX 0x00097500

/*
 * http_edge_version_check - whether running (MHD_get_version()) is the
 * libmicrohttpd the edge was built and tested for: 0, or -1 with why
 * (len bytes) filled with the refusal to log.
 */
int http_edge_version_check(const char *running, char *why, size_t len);

#endif
