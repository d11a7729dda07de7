/*
 * show.c - see show.h.
 */
#include "ops/cli/show.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cli/cmd.h"
#include "ops/cli/out.h"

/* A listing page; the node allows up to 1000 with scope=cluster. */
#define CLI_QUEUES_PAGE 1000

/* cli_scope_ok - 1 when scope is NULL, "node" or "cluster". */
static int
cli_scope_ok(const char *scope)
{
    return scope == NULL || strcmp(scope, "node") == 0 ||
           strcmp(scope, "cluster") == 0;
}

/*
 * cli_queues_fetch - every page of the listing for prefix into one answer:
 * the first page's object with every page's queues.  Returns the status of
 * the first page that was not 200 (a holds that answer), or 200.
 */
static long
cli_queues_fetch(struct cli_conn *c, const char *prefix, const char *scope,
                 struct cli_answer *a)
{
    char *pre = prefix ? cli_escape(prefix) : NULL;
    char *after = NULL;
    struct json_object *all = NULL;
    long st;

    for (;;) {
        char *path = cli_cmd_path(
            "/api/v1/ephemeral/queues?limit=%d%s%s%s%s%s%s", CLI_QUEUES_PAGE,
            pre ? "&prefix=" : "", pre ? pre : "", after ? "&after=" : "",
            after ? after : "", scope ? "&scope=" : "", scope ? scope : "");
        st = cli_call(c, "GET", path, NULL, 30000, a);
        free(path);
        free(after);
        after = NULL;
        if (st != 200 || a->json == NULL)
            break;
        if (all == NULL) {
            all = json_object_get(a->json);
        } else {
            struct json_object *q = cli_jget(a->json, "queues"),
                               *into = cli_jget(all, "queues");
            for (size_t i = 0; i < json_object_array_length(q); i++)
                json_object_array_add(
                    into, json_object_get(json_object_array_get_idx(q, i)));
        }
        const char *next = cli_jstr(a->json, "next", NULL);
        if (!json_object_get_boolean(cli_jget(a->json, "truncated")) ||
            next == NULL)
            break;
        after = cli_escape(next);
        cli_answer_free(a);
    }
    free(pre);
    if (st == 200 && all != NULL) {
        json_object_object_del(all, "truncated");
        json_object_object_del(all, "next");
        json_object_object_add(
            all, "count",
            json_object_new_int64(
                (int64_t)json_object_array_length(cli_jget(all, "queues"))));
        json_object_put(a->json);
        a->json = all;
    } else if (all != NULL) {
        json_object_put(all);
    }
    return st;
}

/* cli_queues - see show.h. */
int
cli_queues(int argc, char **argv, struct cli_globals *g)
{
    const char *scope = NULL;
    const struct cli_opt opts[] = {{"scope", NULL, &scope}, {NULL, NULL, NULL}};
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;
    int rc;

    rc = cli_cmd_start("queues", argc, argv, opts, g, &ops, 0, 1, &c);
    if (rc >= 0)
        return rc;
    if (!cli_scope_ok(scope)) {
        cli_conn_close(&c);
        return cli_cmd_usage_error("queues", "--scope is node or cluster");
    }
    rc = 0;
    if (cli_queues_fetch(&c, ops.n ? ops.v[0] : NULL, scope, &a) != 200) {
        rc = cli_refused(&c, &a);
    } else if (g->json) {
        printf("%s\n", cli_json_text(a.json));
    } else {
        struct json_object *qs = cli_jget(a.json, "queues");
        struct cli_table t;
        cli_table_init(&t, 9,
                       (const char *[]){"QUEUE", "TIER", "DEPTH", "LEASED",
                                        "WAITING", "BYTES", "PARTITIONS",
                                        "GROUPS", "DROPS"});
        for (size_t i = 0; i < json_object_array_length(qs); i++) {
            struct json_object *q = json_object_array_get_idx(qs, i),
                               *d = cli_jget(q, "drops");
            char drops[96];
            snprintf(drops, sizeof(drops), "%lld",
                     (long long)(cli_jint(d, "bounds", 0) +
                                 cli_jint(d, "ttl", 0) +
                                 cli_jint(d, "retry", 0)));
            cli_table_row(&t, (const char *[]){
                                  cli_jstr(q, "queue", ""), cli_jnum(q, "tier"),
                                  cli_jnum(q, "depth"), cli_jnum(q, "leased"),
                                  cli_jnum(q, "waiting"), cli_jnum(q, "bytes"),
                                  cli_jnum(q, "partitions"),
                                  cli_jnum(q, "groups"), drops});
        }
        cli_table_print(&t, stdout);
    }
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}

/* cli_depth_print - depth's human answer: a summary line, the partitions,
 * and the groups when there are any. */
static void
cli_depth_print(struct json_object *d)
{
    struct json_object *parts = cli_jget(d, "partitions"),
                       *groups = cli_jget(d, "groups");
    struct cli_table t;

    printf("queue %s: %s pending, %s bytes (%s)\n", cli_jstr(d, "queue", ""),
           cli_jnum(d, "pending"), cli_jnum(d, "bytes"), cli_jnum(d, "tier"));
    cli_table_init(&t, 6,
                   (const char *[]){"PARTITION", "PENDING", "LEASED", "WAITING",
                                    "BYTES", "OLDEST_MS"});
    for (size_t i = 0; i < json_object_array_length(parts); i++) {
        struct json_object *p = json_object_array_get_idx(parts, i);
        cli_table_row(
            &t, (const char *[]){cli_jstr(p, "partition", ""),
                                 cli_jnum(p, "pending"), cli_jnum(p, "leased"),
                                 cli_jnum(p, "waiting"), cli_jnum(p, "bytes"),
                                 cli_jnum(p, "oldestAgeMs")});
    }
    if (t.nrows > 1)
        cli_table_print(&t, stdout);
    else
        cli_table_free(&t);
    if (json_object_array_length(groups) == 0)
        return;
    cli_table_init(&t, 3, (const char *[]){"GROUP", "PENDING", "SKIPPED"});
    for (size_t i = 0; i < json_object_array_length(groups); i++) {
        struct json_object *gr = json_object_array_get_idx(groups, i);
        const char *name = cli_jstr(gr, "group", "");
        /* Queue mode reads as the group with the empty name. */
        cli_table_row(&t, (const char *[]){name[0] ? name : "(queue mode)",
                                           cli_jnum(gr, "pending"),
                                           cli_jnum(gr, "skipped")});
    }
    cli_table_print(&t, stdout);
}

/* cli_depth - see show.h. */
int
cli_depth(int argc, char **argv, struct cli_globals *g)
{
    const char *group = NULL, *scope = NULL;
    const struct cli_opt opts[] = {
        {"group", NULL, &group}, {"scope", NULL, &scope}, {NULL, NULL, NULL}};
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;
    char *q, *gr, *path;
    int rc;

    rc = cli_cmd_start("depth", argc, argv, opts, g, &ops, 1, 1, &c);
    if (rc >= 0)
        return rc;
    if (!cli_scope_ok(scope)) {
        cli_conn_close(&c);
        return cli_cmd_usage_error("depth", "--scope is node or cluster");
    }
    q = cli_escape(ops.v[0]);
    gr = group ? cli_escape(group) : NULL;
    path = cli_cmd_path("/api/v1/ephemeral/queues/%s/depth%s%s%s%s", q,
                        gr ? "?group=" : "", gr ? gr : "",
                        scope ? (gr ? "&scope=" : "?scope=") : "",
                        scope ? scope : "");
    cli_call(&c, "GET", path, NULL, 30000, &a);
    rc = 0;
    if (!cli_answer_ok(&a))
        rc = cli_refused(&c, &a);
    else if (g->json)
        printf("%s\n", a.body);
    else
        cli_depth_print(a.json);
    free(q);
    free(gr);
    free(path);
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}

/* cli_health_get - GET /health into a after the common start of health
 * and members; returns -1 to go on, else the exit status. */
static int
cli_health_get(const char *name, int argc, char **argv, struct cli_globals *g,
               struct cli_conn *c, struct cli_answer *a)
{
    const struct cli_opt opts[] = {{NULL, NULL, NULL}};
    struct cli_operands ops;
    int rc = cli_cmd_start(name, argc, argv, opts, g, &ops, 0, 0, c);

    if (rc >= 0)
        return rc;
    /* A node not ready answers 503 with its health, not an error. */
    if (cli_call(c, "GET", "/health", NULL, 30000, a) == 0 ||
        cli_jget(a->json, "status") == NULL) {
        rc = cli_refused(c, a);
        cli_answer_free(a);
        cli_conn_close(c);
        return rc;
    }
    return -1;
}

/* cli_health - see show.h. */
int
cli_health(int argc, char **argv, struct cli_globals *g)
{
    static const char *const keys[] = {"status", "node", "incarnation", "ready",
                                       "role",   "term", "leader"};
    struct cli_answer a;
    struct cli_conn c;
    int rc = cli_health_get("health", argc, argv, g, &c, &a);

    if (rc >= 0)
        return rc;
    if (g->json) {
        printf("%s\n", a.body);
    } else {
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            printf("%-12s %s\n", keys[i], cli_jnum(a.json, keys[i]));
        printf("%-12s %zu\n", "members",
               json_object_array_length(cli_jget(a.json, "members")));
    }
    rc = 0;
    if (a.status != 200) {
        fprintf(stderr, "mayfly: %s is not ready (%s)\n", cli_conn_base(&c),
                cli_jstr(a.json, "status", "?"));
        rc = CLI_EXIT_REFUSED;
    }
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}

/* cli_members - see show.h. */
int
cli_members(int argc, char **argv, struct cli_globals *g)
{
    struct cli_answer a;
    struct cli_conn c;
    int rc = cli_health_get("members", argc, argv, g, &c, &a);

    if (rc >= 0)
        return rc;
    struct json_object *ms = cli_jget(a.json, "members");
    const char *leader = cli_jstr(a.json, "leader", "");
    if (g->json) {
        printf("%s\n", cli_json_text(ms));
    } else {
        struct cli_table t;
        cli_table_init(&t, 3, (const char *[]){"NODE", "STATE", "ROLE"});
        for (size_t i = 0; i < json_object_array_length(ms); i++) {
            struct json_object *m = json_object_array_get_idx(ms, i);
            const char *node = cli_jstr(m, "node", "");
            char role[64];
            snprintf(role, sizeof(role), "%s%s",
                     strcmp(node, leader) == 0 ? "leader" : "-",
                     json_object_get_boolean(cli_jget(m, "self")) ? " (self)"
                                                                  : "");
            cli_table_row(
                &t, (const char *[]){node, cli_jstr(m, "state", ""), role});
        }
        cli_table_print(&t, stdout);
    }
    cli_answer_free(&a);
    cli_conn_close(&c);
    return 0;
}
