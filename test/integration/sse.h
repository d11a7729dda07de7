/*
 * sse.h - a Server-Sent Events client for the integration tests (SPEC
 * §11): a GET on a raw non-blocking socket, the answer's head read, its
 * chunked body decoded, and the text/event-stream split into events, as
 * an EventSource would see them (comments and retry kept too).  Many
 * clients are driven from one thread with poll (sse_poll), so a test can
 * hold a thousand streams without a thread each.
 *
 * Events are kept until the test takes them (sse_take), so a long stream
 * costs only what the test has not read yet.  Functions abort the test on
 * what they cannot do (connect, out of memory).
 */
#ifndef MAYFLY_TEST_INTEGRATION_SSE_H
#define MAYFLY_TEST_INTEGRATION_SSE_H

#include <stddef.h>

struct itest_node;

/* One event, or a comment (event ":", the text in data), or a retry field
 * (event "retry", its value in data). */
struct sse_event {
    char event[32]; /* "message" when the stream named none */
    char id[600];   /* "" when the event carried none */
    char *data;     /* its data lines joined with '\n' (malloc'd) */
};

struct sse_client {
    int fd;          /* -1 once closed */
    int status;      /* the answer's status, 0 until its head is in */
    int closed;      /* the server ended the body or the connection */
    char ctype[128]; /* Content-Type */
    char head[8192]; /* the answer's head as it came */
    size_t head_len;
    int chunked, chunk_crlf;
    size_t chunk_left;
    char *raw; /* bytes read, not yet decoded */
    size_t raw_len, raw_cap;
    char *body; /* decoded bytes, not yet split into events */
    size_t body_len, body_cap;
    struct sse_event *ev; /* events not yet taken */
    size_t nev, ev_cap;
    char last_id[600]; /* the last id seen, as an EventSource keeps it */
    size_t bytes;      /* body bytes decoded so far */
};

/* sse_open - connect to n and send GET path with the extra header lines
 * (each "Name: value", NULL-terminated list, or NULL); the answer is read
 * by sse_pump. */
void sse_open(struct sse_client *c, const struct itest_node *n,
              const char *path, const char *const *headers);

/* sse_pump - read what has come on c (without blocking), decode it into
 * events.  Returns 1 when anything came, 0 when nothing did. */
int sse_pump(struct sse_client *c);

/*
 * sse_poll - pump the k clients cs until done(arg) says 1 (checked after
 * each round of reads) or timeout_ms pass; returns done's last word.
 */
int sse_poll(struct sse_client **cs, int k, int timeout_ms,
             int (*done)(void *arg), void *arg);

/* sse_wait_events - pump c alone until it holds n events (or it closed,
 * or timeout_ms passed); returns how many it holds. */
size_t sse_wait_events(struct sse_client *c, size_t n, int timeout_ms);

/* sse_wait_closed - pump c until the server ended it; 1, or 0 after
 * timeout_ms. */
int sse_wait_closed(struct sse_client *c, int timeout_ms);

/* sse_take - drop the first n events c holds (their data freed). */
void sse_take(struct sse_client *c, size_t n);

/* sse_count - how many of c's events are named event. */
size_t sse_count(const struct sse_client *c, const char *event);

/* sse_close - close the connection (a client that goes) and free c. */
void sse_close(struct sse_client *c);

#endif
