/*
 * stream_int.h - what the files of a stream share (SPEC §11, DESIGN.md §4):
 * the stream, its subscriptions, the worker's set of them, and the calls
 * between stream.c (the route, the life of a stream: its parked-call
 * events, its body, its end), stream_parse.c (the request) and
 * stream_read.c (its rounds: what it reads and emits).
 *
 * In a cluster the subscriptions another node owns are read there: one
 * watch per owner (stream_watch.c), a signed call to the owner's own
 * subscribe route marked forwarded, which serves its local partitions
 * only and whose events are relayed here with this stream's cursor: one
 * watermark per owner incarnation, each owner's from its own events.
 *
 * A stream is a parked call (parked.h) for its whole life: it waits on
 * one handle per subscription (a partition, or a queue for all of its
 * partitions), its deadline is its next keepalive, token expiry or retry,
 * and its events go to an out buffer that MHD reads as the socket takes
 * them (http/stream_body.h).  A wake only marks subscriptions dirty and
 * puts the stream on the set's due list; the rounds run once the worker
 * has drained its wake queue (worker_streams_after_drain), against the
 * horizon taken before that drain, so that one number per owner stays a
 * position (DESIGN.md §4).  Process memory only.
 */
#ifndef MAYFLY_WORKER_STREAM_INT_H
#define MAYFLY_WORKER_STREAM_INT_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "http/buf.h"
#include "http/cursor.h"
#include "http/sse_parse.h"
#include "shm/board.h"
#include "shm/broker.h"
#include "shm/tail.h"
#include "worker/park.h"

struct worker;
struct http_request;
struct http_error;
struct http_client_stream;

#define STREAM_RETRY_MS 1000 /* what retry: tells a client to wait */

/* Where a whole queue's reads stopped in its partitions: shm_tail_pos
 * by partition handle, open addressing (handle 0: free), at most
 * STREAM_QPOS_MAX (past it, a partition is read from its head). */
struct stream_qpos {
    size_t cap, n;
    struct shm_tail_pos *v;
};

#define STREAM_QPOS_MAX 4096

/* The owner entries of a cursor (http/cursor.h) a watch's events name:
 * an incarnation and its watermark each, the owner's own first. */
struct stream_ents {
    unsigned n;
    uint64_t inc[HTTP_CURSOR_OWNERS];
    uint64_t w[HTTP_CURSOR_OWNERS];
};

/*
 * One subscription: a partition, or every partition of a queue.
 *
 * A partition read here starts after `after` (this node's numbers).  A
 * resume may start partitions at different places (one at this node's
 * watermark in the cursor, one handed over from another incarnation at
 * the place shm_tail_map gives): until the stream's watermark W passes
 * `after`, nothing of it was sent, and the cursor names it as the client's
 * cursor did (name_inc, name_w); from then on by (this node, W).
 */
struct stream_sub {
    struct shm_name queue;    /* internal name (in the stream's names) */
    struct shm_name part;     /* len 0: the whole queue */
    struct shm_tail_pos pos;  /* a partition's last read (tail.h) */
    struct stream_qpos *qpos; /* a whole queue's, NULL until read */
    uint64_t after;           /* no round reads at or below this */
    uint64_t name_inc;        /* its cursor entry while W < after */
    uint64_t name_w;
    uint8_t dirty;     /* read it at the next round */
    uint8_t missed;    /* a resume could not take it up (recovered) */
    uint8_t went;      /* a watched partition: its entry in its watch's
                         cur (HTTP_CURSOR_NONE: none known) */
    uint8_t went_open; /* and in its open */
    int16_t watch;     /* a partition read by watches[watch]; -1:
                          here (a whole queue: here and by every
                          watch) */
    uint8_t presence;  /* a channel's events (presence_stream.h) */
};

/* A watch (stream_watch.c): the subscriptions one other node owns, read
 * there by a forwarded stream, its events relayed. */
struct stream_watch {
    struct stream *s;
    char id[SHM_BOARD_ID_MAX];       /* the owner's node id */
    char addr[SHM_BOARD_ADDR_MAX];   /* and client address */
    struct stream_ents cur;          /* where its last event (or the
                                        client's cursor) stood */
    struct stream_ents open;         /* where its open event stood */
    int reported;                    /* its open (a resume: recovered) came */
    int opened, recovered;           /* which of the two came, either order */
    char *target;                    /* its subscribe's path and query */
    char *cursor;                    /* its Last-Event-ID, or NULL */
    struct http_client_stream *call; /* NULL: not (or no longer) out */
    struct http_sse_parser parser;
};

struct stream {
    struct park park; /* its events (stream.c); its waits: one a sub */
    struct worker *w;
    struct http_request *req;
    struct stream_sub *subs;
    struct park_wait *waits; /* waits[i]: subs[i]'s handle */
    size_t nsubs;
    char *names;           /* the subscriptions' and the group's names */
    struct shm_name group; /* a group stream's group (grouped) */
    int grouped;
    enum shm_from from;
    int started;         /* the first round has run */
    uint64_t wmark;      /* W: this incarnation's watermark (tails) */
    uint64_t round_h;    /* the horizon of its last round */
    int woken;           /* a wake came since that round */
    uint32_t hash;       /* of the subscription list (the cursor's) */
    uint64_t exp_at;     /* shm_now_ms() its token expires (0: never) */
    uint64_t written_at; /* when bytes last went into out */
    struct http_buf out; /* events not yet given to MHD from sent on */
    size_t sent;         /* out's bytes MHD has taken */
    int end;             /* no more events: the body ends once sent */
    int paused;          /* a group stream stopped popping: out is full */
    int due;             /* on the set's due list */
    int due_later;       /* due before it was parked (its first round) */
    struct stream *due_prev, *due_next;
    int forwarded; /* a peer's watch: its partitions only */
    uint64_t plan; /* who served its subscriptions (plan_hash) */
    struct stream_watch *watches;
    size_t nwatches;
    size_t starting;         /* watches that have not said where they start
                             (open; a resume: recovered): the open event
                             and the first round wait for them */
    int resume;              /* it resumes from the client's cursor */
    uint64_t h0;             /* the horizon when it opened */
    struct http_buf pending; /* what they relayed meanwhile */
    size_t resumed;          /* the recovered event's partitions, */
    struct http_buf missed;  /* and its missed entries, gathered */
    char *authz;             /* the caller's credentials, for watches */
    /* its presence member (presence_stream.c), or NULL */
    struct stream_pres *pres;
};

/* The worker's streams (w->streams): the due list, and the scratch a
 * round reads into (one round runs at a time). */
struct stream_set {
    size_t open;          /* streams open in this worker */
    uint64_t horizon;     /* the highest horizon seen (shm/horizon.h) */
    struct stream *due;   /* streams with a round to run */
    struct shm_sink sink; /* records read by a round */
    struct stream_rec *recs;
    size_t nrecs, recs_cap;
    struct stream_part *parts; /* a whole queue's partitions, one read */
    size_t nparts, parts_cap;
};

/* One record a round read (at off in the round's sink), and the
 * subscription it came for. */
struct stream_rec {
    uint64_t seq;
    size_t off;
    uint32_t sub;
    uint32_t drop; /* a gap ended its partition's resume: not emitted */
};

/* A partition's name, copied out of the segment for a whole-queue read,
 * and its handle. */
struct stream_part {
    char name[SHM_NAME_MAX];
    size_t len;
    uint64_t handle;
};

/* What a request asks (stream_parse.c). */
struct stream_args {
    size_t nsubs;
    struct stream_sub *subs; /* client names, into the request or mem */
    char *mem;               /* the names subs unescaped (free both) */
    struct shm_name group;   /* len 0 and grouped 0: none */
    int grouped;
    enum shm_from from;
    int has_cursor;
    struct http_cursor cursor; /* Last-Event-ID / lastEventId, decoded */
};

/*
 * stream_parse - req's query and headers into a (at most max_subs
 * subscriptions).  0; or -EINVAL / -ENOMEM with err set (400 naming the
 * field, or 500), nothing kept.  The names point into req.
 */
int stream_parse(struct http_request *req, uint32_t max_subs,
                 struct stream_args *a, struct http_error *err);

/* stream_hash - the cursor's hash of a's subscription list, client names
 * (the same list through any node, in any tenant, hashes alike). */
uint32_t stream_hash(const struct stream_args *a);

/* ---- stream_life.c ------------------------------------------------- */

/* How a stream ends (stream_finish). */
enum stream_end {
    STREAM_END_RETRY,   /* retry: 1000: the client reconnects (drain) */
    STREAM_END_EXPIRED, /* error token_expired */
    STREAM_END_REVOKED, /* error unauthorized */
};

/* stream_emitted - bytes went into s->out: send them (and end the stream
 * with overflow past stream_buffer_bytes). */
void stream_emitted(struct stream *s);

/* stream_overflow - the stream's unsent events outgrew its buffer: what
 * is unsent goes (but the event MHD took a part of), `overflow` is the
 * last event, and the memory is given back. */
void stream_overflow(struct stream *s);

/* stream_finish - no more events: the last one says why, then the body
 * ends once MHD has taken what is in out. */
void stream_finish(struct stream *s, enum stream_end why);

/* stream_rehandle - subs[i] waits on handle now (its record was made
 * again): the index follows. */
void stream_rehandle(struct stream *s, size_t i, uint64_t handle);

/* stream_due - put s on its set's due list (once). */
void stream_due(struct stream *s);

/* stream_park - park s, opened and answered (its first round run), until
 * it ends; a client gone already ends it at once. */
void stream_park(struct stream *s);

/* stream_body_read - its answer's body source (http/stream_body.h). */
ssize_t stream_body_read(void *arg, char *buf, size_t max);

/* stream_done - its request ended (http_request_on_done): freed. */
void stream_done(void *arg, int sent_ok);

/* stream_release - free s and what it holds (its watches cancelled): one
 * never opened, or one whose request ended. */
void stream_release(struct stream *s);

/* stream_cursor - the cursor of s with watermark wmark, into out (room for
 * HTTP_CURSOR_MAX + 1); its watches where their last events stood (at
 * their open events, with open). */
void stream_cursor(const struct stream *s, uint64_t wmark, int open, char *out);

/* stream_open_event - the first event: its id gives a browser a
 * Last-Event-ID before any message (its watches at the watermarks their
 * own open events named). */
void stream_open_event(struct stream *s);

/* stream_missed_add - an entry of the recovered event: queue (internal)
 * and partition (NULL: the whole queue); a presence_events channel's
 * queue is named {"channel"} instead. */
void stream_missed_add(struct stream *s, struct shm_name queue,
                       const char *part, size_t plen);

/* ---- stream_watch.c ------------------------------------------------- */

/*
 * stream_plan - who serves s's subscriptions now: each partition here or
 * by the owner's watch (subs[i].watch, watches made: ids and addresses),
 * a whole queue here and by every other owner (a forwarded stream: here
 * only).  Returns the plan's hash (stream_plan_hash), or 0 with nothing
 * made when a forwarded stream is asked for a partition this node does
 * not own, -1 when out of memory.
 */
int64_t stream_plan(struct stream *s);

/* stream_plan_hash - the hash of who serves s's subscriptions as the
 * owners say now (a change of it ends the stream with retry:). */
uint64_t stream_plan_hash(const struct stream *s);

/*
 * stream_watch_prepare - each watch's target (its subscriptions with the
 * client's names, from, group) and, resuming with client cursor c (NULL:
 * none), its slice of c.  0 or -ENOMEM.
 */
int stream_watch_prepare(struct stream *s, const struct http_cursor *c);

/* stream_watch_start - the watches go out.  0, or -errno (a peer that
 * cannot be called: nothing of the stream opened yet). */
int stream_watch_start(struct stream *s);

/* stream_watch_stop - the watches still out are dropped, and their
 * parsers freed. */
void stream_watch_stop(struct stream *s);

/* ---- stream_read.c ------------------------------------------------- */

/*
 * stream_first_round - at the open, before any event (or once the
 * watches of a resume have said what they resumed): the first read of
 * every subscription here up to horizon h (from, or a resume's
 * positions), setting the waiter bits.  Appends `recovered` (a resume:
 * with what s gathered from its watches; SPEC §11: first), `open` and
 * the presence sync, what the watches relayed meanwhile, and the
 * messages.  0 or -errno (the stream is not opened).
 */
int stream_first_round(struct stream *s, uint64_t h, int resume);

/* stream_round - the next round of s, once the wake queue was drained
 * after horizon h was taken: its dirty subscriptions read and emitted. */
void stream_round(struct stream *s, uint64_t h);

/* stream_qpos_free - a whole queue subscription's positions. */
void stream_qpos_free(struct stream_sub *u);

/* stream_set_free - the set's scratch. */
void stream_set_free(struct stream_set *set);

#endif
