/*
 * presence_stream.h - presence on a stream (SPEC §12): the subscribe
 * route's presence=<channel>&member=<id>&data=<JSON> (the member present
 * while the stream is open) and presence_events=<channel> (several
 * allowed: the channel's events as `event: presence`, and with from=last
 * one `sync` of the whole set first).  stream.c, stream_parse.c,
 * stream_read.c and stream_life.c call these at their steps; everything
 * presence keeps for a stream is here.
 *
 * presence_events subscriptions are tail subscriptions of the channel's
 * events queue (worker/presence_events.h), flagged `presence` in struct
 * stream_sub: the read permission on the channel is asked instead of
 * subscribe, and their messages are sent as presence events.  A member
 * stream is one more connection of its member under this worker's key as
 * it opens (before the answer: 403, 413 or 429 refuse it) and one fewer
 * when it ends, which starts the grace when it was the member's last:
 * the worker's count, written to whichever node owns the channel then.
 */
#ifndef MAYFLY_WORKER_PRESENCE_STREAM_H
#define MAYFLY_WORKER_PRESENCE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct stream;
struct stream_args;
struct stream_sub;
struct http_query;
struct http_error;
struct http_request;
struct http_buf;
struct worker_qname;

/* worker_presence_stream_wanted - q asks for presence (then no queue is
 * needed). */
int worker_presence_stream_wanted(const struct http_query *q);

/* worker_presence_stream_subs - append a subscription for each
 * presence_events of q to a (within max_subs); 0 or -EINVAL / -ENOMEM
 * with err set. */
int worker_presence_stream_subs(const struct http_query *q,
                                struct stream_args *a, unsigned max_subs,
                                struct http_error *err);

/* worker_presence_stream_unmark - a signed watch's subscription whose
 * queue is a channel's marked client name (SHM_PRES_MARK first) becomes
 * that channel's presence sub; others are left as they are. */
void worker_presence_stream_unmark(struct stream_sub *s);

/* worker_presence_stream_watched - out, the watch's copy of sub u, is
 * u's channel (flagged, unmarked) when u is a presence sub: the watch's
 * list hashes as its owner's parse of it does. */
void worker_presence_stream_watched(struct stream_sub *out,
                                    const struct stream_sub *u);

/* worker_presence_stream_name - a presence sub's internal name (the read
 * permission on its channel): 1, or 0 with req answered. */
int worker_presence_stream_name(struct worker *w, struct http_request *req,
                                struct shm_name channel,
                                struct worker_qname *out);

/* worker_presence_stream_join - presence= of s's request: the member
 * attached.  1 (also when not asked); 0 with req answered. */
int worker_presence_stream_join(struct stream *s);

/* worker_presence_stream_start - presence subs start at h with from=last
 * (the sync stands for what they hold). */
void worker_presence_stream_start(struct stream *s, unsigned long long h);

/* worker_presence_stream_sync - after the open event: with from=last, one
 * sync event per presence sub into s's out. */
void worker_presence_stream_sync(struct stream *s);

/* worker_presence_stream_event - a presence sub's message as its event. */
void worker_presence_stream_event(struct http_buf *out, const char *id,
                                  const char *payload, size_t len);

/* worker_presence_stream_tick - the worker's loop, each round: every
 * ANNOUNCE_MS, the members of this worker's streams are written again to
 * their channels' owners (this node's table or a peer). */
void worker_presence_stream_tick(struct worker *w, uint64_t now);

/* worker_presence_stream_end - s ends: its member's count one fewer,
 * written to the channel's owner now. */
void worker_presence_stream_end(struct stream *s);

#endif
