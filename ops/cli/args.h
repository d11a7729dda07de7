/*
 * args.h - the command line: the options every subcommand takes (--url,
 * --token, --json) and a small parser for each subcommand's own.
 *
 * Options are "--name value" or "--name=value" (flags take no value) and may
 * come anywhere among the operands; "--" ends them, so an operand may start
 * with '-'.  A lone "-5" is an operand (a JSON number), not an option.
 */
#ifndef MAYFLY_CLI_ARGS_H
#define MAYFLY_CLI_ARGS_H

#define CLI_EXIT_OK      0
#define CLI_EXIT_REFUSED 1
#define CLI_EXIT_USAGE   2

/* What every subcommand shares, set by the global options. */
struct cli_globals {
    const char *url;   /* --url, else $MAYFLY_URL, else the default */
    const char *token; /* --token, else $MAYFLY_TOKEN, or NULL */
    int json;          /* --json: print the server's answers as they are */
};

/* One option of a subcommand: a flag sets *flag to 1, else *value is set. */
struct cli_opt {
    const char *name; /* without the leading "--" */
    int *flag;
    const char **value;
};

/* What a parse left: the operands in order. */
struct cli_operands {
    char **v;
    int n;
};

/*
 * cli_args_parse - parse argv[0..argc) against opts (ended by a {NULL}
 * entry) and the global options into g, the rest into ops (which points
 * into argv).  Returns 0; 1 when --help was asked; -1 after telling stderr
 * which option was wrong.
 */
int cli_args_parse(int argc, char **argv, const struct cli_opt *opts,
                   struct cli_globals *g, struct cli_operands *ops);

/*
 * cli_args_long - s as an integer in [min, max] into *out; 0, or -1 after
 * telling stderr that option name is not such a number.
 */
int cli_args_long(const char *name, const char *s, long min, long max,
                  long *out);

#endif
