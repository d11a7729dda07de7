/*
 * pop_window.h - a long poll on a queue declared with windowBuffer
 * (pop_window.c): it holds what came until window_count messages, or
 * window_ms after the first, or its own timeout, then answers them all.
 * A pop with no partition in a cluster keeps the window too, on the node
 * where its first messages are (pop_cluster.h), with the terms below.
 */
#ifndef MAYFLY_WORKER_POP_WINDOW_H
#define MAYFLY_WORKER_POP_WINDOW_H

#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct http_request;
struct pop_call;

/* A window's terms for one pop. */
struct pop_win {
    uint32_t target;   /* answer once it holds this many */
    uint32_t ms;       /* ... or this long after the first came (0: never) */
    int ack_on_answer; /* autoAck: taken leased, completed as it answers */
};

/* pop_win_terms - the terms of a window of window_ms and window_count
 * (either may be 0: none) for pop r, whose autoAck it takes over: what
 * the pop holds is leased until it answers, so a client that leaves
 * gives it back. */
void pop_win_terms(struct pop_win *win, struct shm_pop_req *r,
                   uint32_t window_ms, uint32_t window_count);

/* pop_win_until - c holds messages and waits for more: until when
 * (UINT64_MAX: its own deadline); 0 when it answers what it holds now
 * (pop_kind.window). */
uint64_t pop_win_until(const struct pop_win *win, const struct pop_call *c,
                       uint64_t now);

/* pop_win_complete - with autoAck, complete what c holds, as it is about
 * to be answered. */
void pop_win_complete(const struct pop_win *win, struct pop_call *c);

/* pop_window_new - a windowed call popping r for req (pop_call.h), with
 * the queue's window_ms and window_count (either may be 0: none).  NULL
 * without memory. */
struct pop_call *pop_window_new(struct worker *w, struct http_request *req,
                                const struct shm_pop_req *r, uint32_t window_ms,
                                uint32_t window_count);

#endif
