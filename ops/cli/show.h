/*
 * show.h - the subcommands that only look: queues, depth, health and
 * members.  Each takes the arguments after its name and returns the exit
 * status.
 */
#ifndef MAYFLY_CLI_SHOW_H
#define MAYFLY_CLI_SHOW_H

#include "ops/cli/args.h"

/* cli_queues - queues [PREFIX]: a table of the queues, every page. */
int cli_queues(int argc, char **argv, struct cli_globals *g);

/* cli_depth - depth QUEUE: pending by partition and group. */
int cli_depth(int argc, char **argv, struct cli_globals *g);

/* cli_health - health: the node's status (exit 1 while not ready). */
int cli_health(int argc, char **argv, struct cli_globals *g);

/* cli_members - members: the members, their states and the leader. */
int cli_members(int argc, char **argv, struct cli_globals *g);

#endif
