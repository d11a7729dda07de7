/*
 * presence.h - mayfly presence CHANNEL: who is in a presence channel
 * (SPEC §12), every page of the listing; --count the occupancy alone;
 * --watch the channel's events as they come (a stream with
 * presence_events and from=last: the whole set first, as a sync).
 */
#ifndef MAYFLY_CLI_PRESENCE_H
#define MAYFLY_CLI_PRESENCE_H

#include "ops/cli/args.h"

/* cli_presence - the subcommand; returns the exit status. */
int cli_presence(int argc, char **argv, struct cli_globals *g);

#endif
