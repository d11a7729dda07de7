/*
 * presence_events.h - a channel's enter, leave and update events as
 * messages of its events queue (shm/presence.h: the channel's presence
 * name, partition "Default"), which streams with presence_events= read as
 * a tail (worker/presence_stream.h): fan-out, cursor, resume and the
 * cluster's relay are the streams' own.  The message's payload is the
 * event's data as SPEC §12 shows it: {"channel", "action", "member",
 * "data"}.  Both a worker (enter, leave, a stream's attach) and the master
 * (expiry) publish, each from its own slot.
 */
#ifndef MAYFLY_WORKER_PRESENCE_EVENTS_H
#define MAYFLY_WORKER_PRESENCE_EVENTS_H

#include "http/buf.h"
#include "shm/presence.h"

/* worker_presence_event_json - ev's payload into b. */
void worker_presence_event_json(struct http_buf *b,
                                const struct shm_pres_event *ev);

/* worker_presence_publish - push ev to its channel's events queue from
 * slot (a refusal is counted by the push and otherwise dropped: an event
 * is a tail's, at most once).  0 or -errno. */
int worker_presence_publish(struct shm_seg *seg, int slot,
                            const struct shm_pres_event *ev);

/* worker_presence_event - a shm_pres_event_fn for a worker's calls (arg:
 * the struct worker). */
void worker_presence_event(void *arg, const struct shm_pres_event *ev);

#endif
