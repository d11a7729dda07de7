/*
 * admin.h - the subcommands that change a queue's standing: configure,
 * delete and reset.  Each takes the arguments after its name and returns
 * the exit status.
 */
#ifndef MAYFLY_CLI_ADMIN_H
#define MAYFLY_CLI_ADMIN_H

#include "ops/cli/args.h"

/* cli_configure - configure QUEUE KEY=VALUE...: prints the options. */
int cli_configure(int argc, char **argv, struct cli_globals *g);

/* cli_delete - delete QUEUE: says whether there was something to delete. */
int cli_delete(int argc, char **argv, struct cli_globals *g);

/* cli_reset - reset QUEUE: says how many messages were dropped. */
int cli_reset(int argc, char **argv, struct cli_globals *g);

/* cli_redrive - redrive QUEUE [--max N]: a dead-letter queue's dead letters
 * back to their queues; says how many. */
int cli_redrive(int argc, char **argv, struct cli_globals *g);

#endif
