/*
 * stream.h - sub --stream: one Server-Sent Events subscription (SPEC
 * section 11) held open, its messages printed as they come, resumed from
 * its last event id after every drop.
 */
#ifndef MAYFLY_CLI_STREAM_H
#define MAYFLY_CLI_STREAM_H

#include "ops/cli/args.h"
#include "ops/cli/client.h"

/* What sub --stream subscribes to. */
struct cli_stream_args {
    const char *queue, *partition; /* one partition, or a whole queue */
    const char *subs;  /* or a JSON array of [queue] / [queue, partition] */
    const char *group; /* a group stream; NULL: a tail */
    const char *from;  /* new, last or all; NULL: the node's default */
    const char *presence_events; /* a channel's events (SPEC §12) */
    long count;                  /* stop after this many messages; 0: never */
};

/*
 * cli_stream_sub - subscribe on c's nodes and print each message as sub
 * prints it, until count messages or the node ends the stream with an
 * error event; a stream lost (a drop, a node's end, an overflow, a 503)
 * is opened again with Last-Event-ID after the delay the node's retry
 * field gave, trying the nodes in turn, with a notice on stderr, and so
 * are the recovered events.  Returns the exit status: 0 after count
 * messages; 1 for a refusal, an error event, or no node answering the
 * first time.
 */
int cli_stream_sub(struct cli_conn *c, const struct cli_globals *g,
                   const struct cli_stream_args *a);

#endif
