/*
 * cmd.c - see cmd.h.
 */
#include "ops/cli/cmd.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Each subcommand's synopsis and what it does, in the order --help lists. */
static const struct {
    const char *name, *synopsis, *summary;
} cli_subcommands[] = {
    {"push",
     "QUEUE [PAYLOAD...] [--partition P] [--text] [--key K] [--delay MS]\n"
     "    Payloads are JSON (or strings with --text); with none, one a line\n"
     "    from stdin.  Prints the ids.  --key K keys them for the queue's\n"
     "    dedupeSeconds (K, then K:1, K:2...); --delay MS hides them that\n"
     "    long.",
     "push messages"},
    {"pop",
     "QUEUE [--group G] [--partition P] [--batch N] [--wait] [--timeout MS]\n"
     "    [--ack | --auto-ack]\n"
     "    --ack acks what was printed; --auto-ack pops at most once.",
     "pop messages"},
    {"sub",
     "QUEUE [--group G] [--partition P] [--batch N] [--count N] [--upto]\n"
     "    Long-polls, printing messages as they come and acking each one\n"
     "    with the next poll; --upto acks a batch with one cumulative ack\n"
     "    a partition (it completes what other consumers of the group\n"
     "    hold there too).\n"
     "  sub QUEUE|--subs JSON --stream [--partition P] [--group G]\n"
     "    [--from new|last|all] [--count N]\n"
     "    Holds a stream open instead (SSE), resuming it after a drop;\n"
     "    --subs '[[\"q\",\"p1\"],[\"q\",\"p2\"]]' takes several "
     "partitions.",
     "print messages as they come"},
    {"request",
     "QUEUE PAYLOAD [--partition P] [--timeout MS] [--text]\n"
     "    [--gather N [--quiet MS]]\n"
     "    Sends PAYLOAD and prints the reply; with --gather, every group\n"
     "    of the queue gets it and up to N replies print, one a line, once\n"
     "    N came, MS passed after the last, or the timeout.",
     "send a request, wait for its reply"},
    {"ack",
     "QUEUE ID... [--group G] [--status completed|failed|retry]\n"
     "    With no ID, one a line from stdin; an ID may be a popped message "
     "(JSON).",
     "acknowledge messages"},
    {"configure",
     "QUEUE KEY=VALUE...\n"
     "    e.g. maxLength=100 policy=dropOldest windowBuffer.ms=50\n"
     "    deadLetter=jobs.dead deadLetterExpired=true",
     "declare a queue with its options"},
    {"delete", "QUEUE", "drop a queue's messages and declaration"},
    {"reset", "QUEUE", "drop a queue's messages, keep its declaration"},
    {"redrive", "QUEUE [--max N]",
     "push a dead-letter queue's dead letters back to their queues"},
    {"queues", "[PREFIX] [--scope node|cluster]", "list queues"},
    {"depth", "QUEUE [--group G] [--scope node|cluster]",
     "a queue's depth by partition and group"},
    {"health", "", "the node's health (exit 1 while it is not ready)"},
    {"members", "", "the cluster's members and their states"},
    {"top", "", "live view of queues and members (q quits)"},
    {"presence",
     "CHANNEL [--count | --watch]\n"
     "    Lists the channel's members; --count the occupancy alone; --watch\n"
     "    prints its events as they come (the whole set first, as a sync).",
     "who is in a presence channel"},
    {"bench",
     "push|pop|request|stream [--conns N] [--size B] [--batch N]\n"
     "    [--duration S] [--queue Q]\n"
     "    Loads the node with N connections for S seconds (4, 256 B, batch\n"
     "    100 (16 for request), 5 s, queue mayfly-bench) and prints rates\n"
     "    and latency percentiles; stream: N streams on one partition, one\n"
     "    push at a time, timed until all have it.  The queues it used\n"
     "    are deleted after.",
     "measure a node: rates and latency percentiles"},
};

#define CLI_NSUB (sizeof(cli_subcommands) / sizeof(cli_subcommands[0]))

/* cli_usage - see cmd.h. */
void
cli_usage(const char *name, FILE *f)
{
    for (size_t i = 0; name != NULL && i < CLI_NSUB; i++)
        if (strcmp(name, cli_subcommands[i].name) == 0) {
            fprintf(f, "usage: mayfly [OPTIONS] %s %s\n", name,
                    cli_subcommands[i].synopsis);
            return;
        }
    fputs("usage: mayfly [--url URL[,URL...]] [--token TOKEN] [--json] "
          "COMMAND [ARGS]\n\n",
          f);
    for (size_t i = 0; i < CLI_NSUB; i++)
        fprintf(f, "  %-10s %s\n", cli_subcommands[i].name,
                cli_subcommands[i].summary);
    fputs("\n  --url URL    nodes to try in turn, comma-separated "
          "($MAYFLY_URL; " CLI_DEFAULT_URL ")\n"
          "  --token T    sent as Authorization: Bearer ($MAYFLY_TOKEN)\n"
          "  --json       print the server's answers as they are\n\n"
          "mayfly COMMAND --help shows a command's usage.  Exit status: 0, "
          "1 refused\nor no node answered, 2 usage.\n",
          f);
}

/* cli_cmd_usage_error - see cmd.h. */
int
cli_cmd_usage_error(const char *name, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "mayfly: %s: ", name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    cli_usage(name, stderr);
    return CLI_EXIT_USAGE;
}

/* cli_cmd_start - see cmd.h. */
int
cli_cmd_start(const char *name, int argc, char **argv,
              const struct cli_opt *opts, struct cli_globals *g,
              struct cli_operands *ops, int min, int max, struct cli_conn *c)
{
    int rc = cli_args_parse(argc, argv, opts, g, ops);

    if (rc == 1) {
        cli_usage(name, stdout);
        return CLI_EXIT_OK;
    }
    if (rc != 0) {
        cli_usage(name, stderr);
        return CLI_EXIT_USAGE;
    }
    if (ops->n < min)
        return cli_cmd_usage_error(name, "too few arguments");
    if (max >= 0 && ops->n > max)
        return cli_cmd_usage_error(name, "unexpected argument '%s'",
                                   ops->v[max]);
    if (cli_conn_open(c, g->url, g->token) != 0) {
        rc = cli_cmd_usage_error(name, "%s", c->err);
        cli_conn_close(c);
        return rc;
    }
    return -1;
}

/* cli_cmd_path - see cmd.h. */
char *
cli_cmd_path(const char *fmt, ...)
{
    va_list ap;
    char *s;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fputs("mayfly: out of memory\n", stderr);
        exit(1);
    }
    return s;
}

/* cli_cmd_now_ms - see cmd.h. */
long
cli_cmd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
