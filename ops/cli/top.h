/*
 * top.h - mayfly top: a full-screen view of one node's cluster, refreshed
 * each second: the node and its counters, the members and their states,
 * the queues by depth with how fast each depth moves.  q quits.
 */
#ifndef MAYFLY_CLI_TOP_H
#define MAYFLY_CLI_TOP_H

#include "ops/cli/args.h"

/* cli_top - top: runs until q (or an interrupt); returns the exit status. */
int cli_top(int argc, char **argv, struct cli_globals *g);

#endif
