/*
 * presence.c - see presence.h.
 */
#include "ops/cli/presence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cli/cmd.h"
#include "ops/cli/out.h"
#include "ops/cli/stream.h"

#define CLI_PRESENCE_PAGE 1000

/* cli_presence_list - every page of the listing: a table (or, --json, the
 * members as one array); the exit status. */
static int
cli_presence_list(struct cli_conn *c, const struct cli_globals *g,
                  const char *channel)
{
    struct json_object *all = json_object_new_array();
    char *ch = cli_escape(channel), *after = NULL;
    struct cli_answer a;
    int64_t count = 0;
    int rc = 0;

    for (;;) {
        char *path = cli_cmd_path("/api/v1/presence/%s?limit=%d%s%s", ch,
                                  CLI_PRESENCE_PAGE, after ? "&after=" : "",
                                  after ? after : "");
        cli_call(c, "GET", path, NULL, 30000, &a);
        free(path);
        free(after);
        after = NULL;
        if (!cli_answer_ok(&a)) {
            rc = cli_refused(c, &a);
            cli_answer_free(&a);
            break;
        }
        struct json_object *m = cli_jget(a.json, "members");
        count = json_object_get_int64(cli_jget(a.json, "count"));
        for (size_t i = 0; i < json_object_array_length(m); i++)
            json_object_array_add(
                all, json_object_get(json_object_array_get_idx(m, i)));
        const char *next = cli_jstr(a.json, "next", NULL);
        if (json_object_get_boolean(cli_jget(a.json, "truncated")) && next)
            after = cli_escape(next);
        cli_answer_free(&a);
        if (after == NULL)
            break;
    }
    if (rc == 0 && g->json) {
        printf("%s\n", cli_json_text(all));
    } else if (rc == 0) {
        struct cli_table t;
        printf("channel %s: %lld members\n", channel, (long long)count);
        cli_table_init(
            &t, 4,
            (const char *[]){"MEMBER", "CONNECTIONS", "SINCE_MS", "DATA"});
        for (size_t i = 0; i < json_object_array_length(all); i++) {
            struct json_object *m = json_object_array_get_idx(all, i);
            cli_table_row(&t,
                          (const char *[]){cli_jstr(m, "member", ""),
                                           cli_jnum(m, "connections"),
                                           cli_jnum(m, "since"),
                                           cli_json_text(cli_jget(m, "data"))});
        }
        if (t.nrows > 1)
            cli_table_print(&t, stdout);
        else
            cli_table_free(&t);
    }
    json_object_put(all);
    free(ch);
    return rc;
}

/* cli_presence - see presence.h. */
int
cli_presence(int argc, char **argv, struct cli_globals *g)
{
    int watch = 0, count = 0, rc;
    const struct cli_opt opts[] = {
        {"watch", &watch, NULL}, {"count", &count, NULL}, {NULL, NULL, NULL}};
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;

    rc = cli_cmd_start("presence", argc, argv, opts, g, &ops, 1, 1, &c);
    if (rc >= 0)
        return rc;
    if (watch) {
        struct cli_stream_args sa = {.presence_events = ops.v[0],
                                     .from = "last"};
        rc = cli_stream_sub(&c, g, &sa);
    } else if (count) {
        char *ch = cli_escape(ops.v[0]);
        char *path = cli_cmd_path("/api/v1/presence/%s?count=true", ch);
        cli_call(&c, "GET", path, NULL, 30000, &a);
        rc = 0;
        if (!cli_answer_ok(&a))
            rc = cli_refused(&c, &a);
        else if (g->json)
            printf("%s\n", a.body);
        else
            printf("%s\n", cli_jnum(a.json, "count"));
        cli_answer_free(&a);
        free(path);
        free(ch);
    } else {
        rc = cli_presence_list(&c, g, ops.v[0]);
    }
    cli_conn_close(&c);
    return rc;
}
