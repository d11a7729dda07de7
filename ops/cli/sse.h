/*
 * sse.h - the command's own reader of Server-Sent Events, for sub --stream
 * (the command shares no code with mayflyd, whose http/sse_parse.c reads
 * the same format for nodes).
 *
 * The WHATWG rules a browser's EventSource follows: a line ends at CR LF,
 * LF or CR; a line starting with ':' is a comment; "field:value" drops one
 * space after the colon, a line without a colon is a field with value "";
 * data lines are joined with LF; a blank line dispatches the event, if it
 * has data, and makes the id read before it the stream's last event id
 * (an id holding a NUL is ignored); retry, ASCII digits only, sets the
 * reconnection delay.  mayflyd sends no byte order mark, so none is looked
 * for.  Bounded: a line or an event's data past CLI_SSE_MAX fails the feed.
 */
#ifndef MAYFLY_CLI_SSE_H
#define MAYFLY_CLI_SSE_H

#include <stddef.h>

/* The longest line or event data taken (a message's JSON fits). */
#define CLI_SSE_MAX ((size_t)64 << 20)

/* The longest id kept: cursors are at most 512 bytes (SPEC section 11); a
 * longer id is ignored as a NUL-holding one is. */
#define CLI_SSE_ID_MAX 1024

struct cli_sse {
    char *line; /* a line begun in an earlier feed */
    size_t len, cap;
    char *data; /* the data buffer, each value LF-ended */
    size_t dlen, dcap;
    char event[32]; /* the event type; "?" for one too long to be ours */
    char id[CLI_SSE_ID_MAX + 1];      /* an id field's value */
    int id_set;                       /* id waits for its blank line */
    char last_id[CLI_SSE_ID_MAX + 1]; /* the stream's last event id */
    long retry_ms;                    /* -1: no retry field yet */
    int cr;                           /* the last line ended with CR */
};

/* An event: its type ("message" when none was given) and data (len bytes,
 * NUL-terminated).  A non-zero return stops the feed, which returns it. */
typedef int cli_sse_fn(void *arg, const char *event, const char *data,
                       size_t len);

/* cli_sse_init - an empty reader. */
void cli_sse_init(struct cli_sse *p);

/* cli_sse_restart - a new connection: drop its partial line and event,
 * keep the last event id and the retry delay (as a browser does). */
void cli_sse_restart(struct cli_sse *p);

/* cli_sse_feed - the stream's next n bytes; fn runs for each event they
 * complete.  0, -1 for a line or data over CLI_SSE_MAX or out of memory,
 * or what fn returned. */
int cli_sse_feed(struct cli_sse *p, const char *buf, size_t n, cli_sse_fn *fn,
                 void *arg);

/* cli_sse_free - release what p holds. */
void cli_sse_free(struct cli_sse *p);

#endif
