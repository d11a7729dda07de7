/*
 * pop_window.h - a long poll on a queue declared with windowBuffer
 * (pop_window.c): it holds what came until window_count messages, or
 * window_ms after the first, or its own timeout, then answers them all.
 */
#ifndef MAYFLY_WORKER_POP_WINDOW_H
#define MAYFLY_WORKER_POP_WINDOW_H

#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct http_request;
struct pop_call;

/* pop_window_new - a windowed call popping r for req (pop_call.h), with
 * the queue's window_ms and window_count (either may be 0: none).  NULL
 * without memory. */
struct pop_call *pop_window_new(struct worker *w, struct http_request *req,
                                const struct shm_pop_req *r, uint32_t window_ms,
                                uint32_t window_count);

#endif
