/*
 * main.c - mayfly, the command line client of mayflyd: reads the options
 * that come before the subcommand, then hands the rest to the subcommand,
 * whose return is the exit status (0, 1 refused or unreachable, 2 usage).
 *
 * The nodes are --url, else $MAYFLY_URL, else http://127.0.0.1:6632; the
 * token --token, else $MAYFLY_TOKEN.  mayfly(1) has the whole story.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "ops/cli/admin.h"
#include "ops/cli/args.h"
#include "ops/cli/bench.h"
#include "ops/cli/cmd.h"
#include "ops/cli/presence.h"
#include "ops/cli/recv.h"
#include "ops/cli/send.h"
#include "ops/cli/show.h"
#include "ops/cli/top.h"

/* The subcommands by name. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv, struct cli_globals *g);
} cli_commands[] = {
    {"push", cli_push},         {"pop", cli_pop},
    {"sub", cli_sub},           {"request", cli_request},
    {"ack", cli_ack},           {"configure", cli_configure},
    {"delete", cli_delete},     {"reset", cli_reset},
    {"redrive", cli_redrive},   {"queues", cli_queues},
    {"depth", cli_depth},       {"health", cli_health},
    {"members", cli_members},   {"top", cli_top},
    {"presence", cli_presence}, {"bench", cli_bench},
};

int
main(int argc, char **argv)
{
    struct cli_globals g = {.url = getenv("MAYFLY_URL"),
                            .token = getenv("MAYFLY_TOKEN")};
    int i = 1, rc = CLI_EXIT_USAGE;

    if (g.url == NULL || g.url[0] == '\0')
        g.url = CLI_DEFAULT_URL;
    /* The options before the subcommand: each subcommand's parser takes
     * them after it too, so here they are only skipped over. */
    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            cli_usage(NULL, stdout);
            return CLI_EXIT_OK;
        }
        if (strcmp(argv[i], "--url") == 0 || strcmp(argv[i], "--token") == 0)
            i++;
        else if (strcmp(argv[i], "--json") != 0 &&
                 strncmp(argv[i], "--url=", 6) != 0 &&
                 strncmp(argv[i], "--token=", 8) != 0) {
            fprintf(stderr, "mayfly: unknown option %s\n", argv[i]);
            cli_usage(NULL, stderr);
            return CLI_EXIT_USAGE;
        }
        i++;
    }
    if (i >= argc) {
        fputs("mayfly: no command given\n", stderr);
        cli_usage(NULL, stderr);
        return CLI_EXIT_USAGE;
    }
    for (size_t k = 0; k < sizeof(cli_commands) / sizeof(cli_commands[0]); k++)
        if (strcmp(argv[i], cli_commands[k].name) == 0) {
            /* The subcommand parses the leading options with its own. */
            char *cmd = argv[i];
            memmove(argv + 2, argv + 1, sizeof(char *) * (size_t)(i - 1));
            argv[1] = cmd;
            curl_global_init(CURL_GLOBAL_DEFAULT);
            rc = cli_commands[k].run(argc - 2, argv + 2, &g);
            curl_global_cleanup();
            return rc;
        }
    fprintf(stderr, "mayfly: unknown command '%s'\n", argv[i]);
    cli_usage(NULL, stderr);
    return rc;
}
