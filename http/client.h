/*
 * client.h - the outgoing HTTP client: libcurl multi, driven by the
 * caller's epoll loop.
 *
 * Workers use it to forward requests to a partition's owner and to hand
 * configure requests to their own master; the master uses it for raft and
 * membership messages to its peers.  One client per process, made after the
 * fork, in the process that runs the loop.
 *
 * The loop contract.  The client registers each socket libcurl opens in the
 * caller's epoll (level-triggered) with data.u64 = tag_base | fd, and takes
 * it out again before libcurl closes it.  The caller's loop must:
 *   - for an event whose (data.u64 & HTTP_CLIENT_TAG_MASK) == tag_base, call
 *     http_client_on_event(c, (int)(uint32_t)data.u64, events);
 *   - sleep no longer than http_client_timeout_ms(c) (-1: no limit from the
 *     client), and call http_client_on_timeout(c) once that time has come;
 *   - read http_client_timeout_ms() again after any call into the client,
 *     http_client_request() included: a new request asks for a 0 ms timer,
 *     and starts when the loop calls http_client_on_timeout().
 * Completions run from inside on_event and on_timeout, never from
 * http_client_request() itself.
 *
 * Connections are kept alive and reused per peer, from a pool of up to
 * HTTP_CLIENT_IDLE_MAX idle ones.  The number of connections to one peer is
 * not capped: a forwarded long poll holds its connection for up to a
 * minute, and a cap would queue pushes behind pops.  Signals are never used
 * (CURLOPT_NOSIGNAL), proxies never (CURLOPT_NOPROXY "*"), only http://
 * and https:// URLs are accepted, and URLs carry numeric addresses:
 * nothing is resolved.
 *
 * Calls to other nodes (SPEC §10) name the port they go to, a node's
 * client port or its cluster port, with its address and the target (path
 * and query): the client makes the URL with the scheme that port speaks
 * (http_client_set_peers), verifies the node's certificate against the
 * cluster's CA, shows a cluster port this node's certificate, and signs
 * every such call with the cluster secret (http/sign.h): for the node
 * there (http_client_peers.identify), with the call's deadline (now plus
 * timeout_ms).  Such a call that is given up (a timeout, a cancel) resets
 * its connection (SO_LINGER 0): nothing of it stays in the kernel's queue
 * to reach the node later, after a partition heals.  A node that refuses
 * the call itself (401 with X-Mayfly-Refused: its signature, destination
 * or nonce) is reported as err -EACCES: the call did not go through.
 *
 * Streams (http_client_stream) are calls whose answer has no end of its
 * own, a peer's Server-Sent Events: their body goes to a callback as it
 * arrives, and they end when the peer closes, when the caller cancels, or
 * when the peer falls silent for longer than the caller allows.
 *
 * Single-threaded, no locking.  Errors: 0 or -errno.
 */
#ifndef MAYFLY_HTTP_CLIENT_H
#define MAYFLY_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "http/buf.h"

/* The bits of an epoll tag that name the client; the low 32 are the fd. */
#define HTTP_CLIENT_TAG_MASK 0xffffffff00000000ULL

/* The longest answer a request takes by default: a pop of the largest
 * batch of the largest messages, with room for its JSON. */
#define HTTP_CLIENT_BODY_MAX ((size_t)64 << 20)

/* Idle connections kept open for reuse (CURLMOPT_MAXCONNECTS). */
#define HTTP_CLIENT_IDLE_MAX 64

struct http_client;
struct http_client_stream;

/* Where a request goes. */
enum http_client_port {
    HTTP_CLIENT_URL,     /* url, as given; not signed */
    HTTP_CLIENT_PEER,    /* a node's client port: addr and target */
    HTTP_CLIENT_CLUSTER, /* a node's cluster port: addr and target */
};

/*
 * Who the node at addr is (port: which of its ports addr is), for the
 * signature of a call to it (http/sign.h): its id copied into id (idlen
 * bytes) and its incarnation.  0, or -ENOENT when this process has not
 * heard of it yet: the call then names the address it dials.
 */
typedef int http_client_identify_fn(void *arg, enum http_client_port port,
                                    const char *addr, char *id, size_t idlen,
                                    uint64_t *incarnation);

/* How this node calls the others (strings copied). */
struct http_client_peers {
    const char *secret;    /* signs every call to a node; NULL: unsigned */
    int client_https;      /* nodes' client ports speak HTTPS */
    int cluster_https;     /* cluster ports speak HTTPS and want a client
                              certificate: cert_file and key_file */
    const char *ca_file;   /* verifies the nodes' certificates; NULL or
                              "": the system's CA store */
    const char *cert_file; /* this node's cluster certificate (PEM) */
    const char *key_file;  /* and its key */
    http_client_identify_fn *identify; /* NULL: calls name addresses */
    void *identify_arg;
};

/* One request.  Everything is copied by http_client_request() except the
 * body, which must stay valid until done runs or the request is
 * cancelled. */
struct http_client_req {
    const char *method;         /* "GET", "POST", "PUT", "DELETE", "HEAD" */
    const char *url;            /* "http://10.0.0.2:6633/raft/append" */
    enum http_client_port port; /* HTTP_CLIENT_URL: url; else the next: */
    const char *addr;           /* a node's "host:port" */
    const char *target;         /* "/path?query", as it is to arrive */
    const char *const *headers; /* "Name: value" lines, or NULL */
    size_t nheaders;
    const void *body; /* sent when body_len > 0, or for POST and PUT */
    size_t body_len;
    unsigned timeout_ms; /* the whole exchange; 0 = none */
    size_t max_body;     /* a longer answer fails with -EMSGSIZE; 0 = the
                            default, HTTP_CLIENT_BODY_MAX */
    unsigned connect_timeout_ms; /* connecting only; 0 = as timeout_ms */
    unsigned idle_s; /* fail with -ETIMEDOUT once the answer came slower
                        than a byte a second (libcurl's average over its
                        last few seconds) for idle_s seconds; 0 = never.
                        For a stream whose peer sends a keepalive every k
                        seconds, idle_s > k. */
};

/* The outcome, as done sees it.  Pointers are valid during done only. */
struct http_client_resp {
    int err;                  /* 0 when a response came, whatever its status;
                                 else -ETIMEDOUT, -ECONNREFUSED, -ECONNRESET,
                                 -ENOMEM, -EINVAL (bad URL), -EMSGSIZE (an
                                 answer over max_body), -EACCES (a node
                                 refused the call's signature), -EIO, ... */
    int curl_code;            /* the CURLcode behind err (0: CURLE_OK) */
    const char *error;        /* libcurl's sentence for it; "" when err == 0 */
    unsigned status;          /* HTTP status; 0 when no response came */
    struct http_buf body;     /* the response body: done may take the bytes
                                 (http_reply() does) or leave them */
    const char *content_type; /* Content-Type, or NULL */
    long retry_after_s;       /* Retry-After in seconds; 0 when absent */
    int sent;                 /* the connection was made and the request
                                 began to go out: a failure after it may
                                 have been applied; 0 when it failed before
                                 (refused, or no connection in time) */
};

/* Called once per request that was not cancelled. */
typedef void http_client_done_fn(void *arg, struct http_client_resp *resp);

/* A stream's next len > 0 bytes, valid during the call only.  Returns 0 to
 * go on, or -errno to end the stream: its connection is closed and on_end
 * runs with that err. */
typedef int http_client_chunk_fn(void *arg, const char *p, size_t len);

/*
 * http_client_global_init - initialise libcurl for this process.  Call it
 * before the first http_client_new() of a process: in a worker after the
 * fork, and in the master only after it forked its first workers, never
 * before (libcurl's global state is not to be made once and shared by
 * every child).  Once per process is enough; later calls in the same
 * process return at once, while the first call in a child forked after its
 * parent's init drops the copy it inherited and initialises its own.
 * 0, or -EIO (logged).
 */
int http_client_global_init(void);

/*
 * http_client_new - a client that registers its sockets in epoll_fd with
 * tags tag_base | fd.  tag_base's low 32 bits must be zero (and distinct
 * from the loop's other tags).  NULL on failure (logged).
 */
struct http_client *http_client_new(int epoll_fd, uint64_t tag_base);

/* http_client_set_peers - how calls to other nodes go from now on (the
 * process's settings; the files are read at each new connection, so a
 * certificate replaced on disk is used by the connections after). */
int http_client_set_peers(struct http_client *c,
                          const struct http_client_peers *p);

/*
 * http_client_request - start r; done(arg, resp) runs once it completes or
 * fails, from a later on_event/on_timeout call.  Returns 0, or -EINVAL (no
 * method, url (or addr and target) or done; body_len without a body; a
 * call to a node whose X-Mayfly- lines cannot be signed),
 * -ENOMEM, -EIO; done is not called then.  May be called from done.
 */
int http_client_request(struct http_client *c, const struct http_client_req *r,
                        http_client_done_fn *done, void *arg);

/*
 * http_client_stream - start r as a stream: the body of a 2xx answer goes
 * to on_chunk(arg, ...) as it arrives, and on_end(arg, resp) runs once when
 * the stream is over, unless it was cancelled: err 0 when the peer ended
 * the body properly, else how it broke (-ECONNRESET for a peer gone
 * mid-stream, -ETIMEDOUT past r->idle_s or r->timeout_ms, on_chunk's
 * -errno, ...).  resp->status is the answer's status whenever one came,
 * also when the stream broke after it (0: no answer).  The body of any
 * other status is not streamed: it is gathered (up to r->max_body) into
 * resp->body, as for a request.
 *
 * A stream has no end of its own, so r->timeout_ms is usually 0 (no
 * deadline in a node call's signature either); r->connect_timeout_ms
 * bounds connecting and r->idle_s a silent peer.  A call to a node is
 * signed as any other, and one cancelled resets its connection.
 *
 * The handle goes to *out; it is valid until on_end has begun or the
 * stream is cancelled.  Returns 0, or the errors of http_client_request()
 * (-EINVAL also for no on_chunk or out); on_end is not called then.
 *
 * From inside on_chunk only the cancels (http_client_stream_cancel,
 * http_client_cancel, http_client_cancel_all) may be called: libcurl is
 * in its write callback, so they mark the calls and the client detaches
 * them once libcurl returns.  A stream counts in http_client_pending()
 * and is dropped by http_client_cancel() with its arg.
 */
int http_client_stream(struct http_client *c, const struct http_client_req *r,
                       http_client_chunk_fn *on_chunk,
                       http_client_done_fn *on_end, void *arg,
                       struct http_client_stream **out);

/* http_client_stream_cancel - drop stream s: its connection is closed (a
 * node's reset) at once, or, from inside an on_chunk, once libcurl
 * returns; no more on_chunk runs for it and on_end never does.  A no-op
 * from inside its own on_end; never after that. */
void http_client_stream_cancel(struct http_client_stream *s);

/* http_client_escape - s[0..len) percent-encoded for a URL's path or query
 * (libcurl's encoder: everything but RFC 3986 unreserved characters), to be
 * freed with free(); NULL when out of memory. */
char *http_client_escape(const char *s, size_t len);

/* http_client_on_event - epoll reported events on our fd: let libcurl
 * read and write, then run the done callbacks of what completed. */
void http_client_on_event(struct http_client *c, int fd, uint32_t events);

/* http_client_on_timeout - libcurl's timer is due: run it and the done
 * callbacks of what completed.  Calling it early is harmless. */
void http_client_on_timeout(struct http_client *c);

/* http_client_timeout_ms - ms until on_timeout is due (rounded up, 0: now),
 * or -1 when no timer is pending. */
int http_client_timeout_ms(const struct http_client *c);

/* http_client_pending - requests started and neither done nor cancelled.
 * Only tests ask: the count shows what cancel and completion released. */
unsigned http_client_pending(const struct http_client *c);

/*
 * http_client_cancel - drop every pending request (and stream) started
 * with arg: its connection is closed (the peer sees the client go away)
 * and its done is never called.  Returns how many were dropped.  May be
 * called from done, and from on_chunk (see http_client_stream).
 */
unsigned http_client_cancel(struct http_client *c, void *arg);

/* http_client_cancel_all - http_client_cancel() for every pending
 * request. */
void http_client_cancel_all(struct http_client *c);

/*
 * http_client_free - cancel what is pending (no done runs), close every
 * connection, take our fds out of the epoll, free c.  Never from done or
 * on_chunk.
 * NULL is a no-op.  A forked child must not free (or use) a client it
 * inherited: it shares the parent's epoll instance.
 */
void http_client_free(struct http_client *c);

#endif
