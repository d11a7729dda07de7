/*
 * send.h - the subcommands that put messages in: push, and request (the
 * request verb of SPEC section 9, or the inbox pattern on a node without
 * it).  Each takes the arguments after its name and returns the exit status.
 */
#ifndef MAYFLY_CLI_SEND_H
#define MAYFLY_CLI_SEND_H

#include "ops/cli/args.h"

/* cli_push - push QUEUE [PAYLOAD...]: prints the ids, one a line. */
int cli_push(int argc, char **argv, struct cli_globals *g);

/* cli_request - request QUEUE PAYLOAD: prints the reply. */
int cli_request(int argc, char **argv, struct cli_globals *g);

#endif
