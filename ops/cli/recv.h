/*
 * recv.h - the subcommands that take messages out: pop, sub (a long-poll
 * loop, or a stream) and ack.  Each takes the arguments after its name and returns the
 * exit status.
 */
#ifndef MAYFLY_CLI_RECV_H
#define MAYFLY_CLI_RECV_H

#include "ops/cli/args.h"

/* cli_pop - pop QUEUE: prints the messages popped (none: nothing). */
int cli_pop(int argc, char **argv, struct cli_globals *g);

/* cli_sub - sub QUEUE: prints messages as they come and acks each; with
 * --stream, from a subscription (stream.h) instead of long polls. */
int cli_sub(int argc, char **argv, struct cli_globals *g);

/* cli_ack - ack QUEUE ID...: prints each id's outcome. */
int cli_ack(int argc, char **argv, struct cli_globals *g);

#endif
