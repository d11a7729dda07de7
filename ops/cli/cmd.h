/*
 * cmd.h - what every subcommand begins with: its usage text, its options
 * and operands checked, and its connection to the nodes opened.
 */
#ifndef MAYFLY_CLI_CMD_H
#define MAYFLY_CLI_CMD_H

#include <stdio.h>

#include "ops/cli/args.h"
#include "ops/cli/client.h"

#define CLI_DEFAULT_URL "http://127.0.0.1:6632"

/* cli_usage - print the usage of subcommand name (NULL: of the command,
 * listing every subcommand) to f. */
void cli_usage(const char *name, FILE *f);

/*
 * cli_cmd_start - parse subcommand name's argv against opts and the global
 * options, check it has min to max operands (max -1: any number), and open
 * c to the nodes.  Returns -1 when the subcommand should go on; otherwise
 * the exit status it should end with (0 after --help, 2 after a usage
 * error, which it has printed).
 */
int cli_cmd_start(const char *name, int argc, char **argv,
                  const struct cli_opt *opts, struct cli_globals *g,
                  struct cli_operands *ops, int min, int max,
                  struct cli_conn *c);

/* cli_cmd_usage_error - print "mayfly: NAME: sentence" and the usage of
 * subcommand name to stderr; returns the usage exit status. */
int cli_cmd_usage_error(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* cli_cmd_path - printf a request path into a malloc'ed string (exits when
 * memory runs out). */
char *cli_cmd_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cli_cmd_now_ms - the monotonic clock in milliseconds (never the wall
 * clock: timeouts and rates must not jump when it is set). */
long cli_cmd_now_ms(void);

#endif
