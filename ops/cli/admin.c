/*
 * admin.c - see admin.h.
 *
 * configure reads each VALUE as JSON when it is JSON (maxLength=100,
 * windowBuffer={"ms":50,"count":10}) and as a string otherwise
 * (policy=dropOldest); a dotted KEY sets a member of an object option
 * (windowBuffer.ms=50).  The node checks names and values: an unknown
 * option is its 400 naming it.
 */
#include "ops/cli/admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cli/cmd.h"
#include "ops/cli/out.h"

/* cli_configure_set - put KEY=VALUE into options; -1 when arg has no '='
 * or names an empty key. */
static int
cli_configure_set(struct json_object *options, char *arg)
{
    char *eq = strchr(arg, '='), *dot;
    struct json_object *value, *at = options;

    if (eq == NULL || eq == arg)
        return -1;
    *eq = '\0';
    value = json_tokener_parse(eq + 1);
    if (value == NULL && strcmp(eq + 1, "null") != 0)
        value = json_object_new_string(eq + 1);
    while ((dot = strchr(arg, '.')) != NULL && dot != arg && dot[1] != '\0') {
        struct json_object *inner = NULL;
        *dot = '\0';
        if (!json_object_object_get_ex(at, arg, &inner) ||
            !json_object_is_type(inner, json_type_object)) {
            inner = json_object_new_object();
            json_object_object_add(at, arg, inner);
        }
        at = inner;
        arg = dot + 1;
    }
    json_object_object_add(at, arg, value);
    return 0;
}

/* cli_configure - see admin.h. */
int
cli_configure(int argc, char **argv, struct cli_globals *g)
{
    const struct cli_opt opts[] = {{NULL, NULL, NULL}};
    struct json_object *req, *options;
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;
    int rc;

    rc = cli_cmd_start("configure", argc, argv, opts, g, &ops, 1, -1, &c);
    if (rc >= 0)
        return rc;
    options = json_object_new_object();
    for (int i = 1; i < ops.n; i++) {
        char word[1024];
        snprintf(word, sizeof(word), "%s", ops.v[i]);
        if (cli_configure_set(options, ops.v[i]) != 0) {
            json_object_put(options);
            cli_conn_close(&c);
            return cli_cmd_usage_error("configure", "'%s' is not KEY=VALUE",
                                       word);
        }
    }
    req = json_object_new_object();
    json_object_object_add(req, "queue", json_object_new_string(ops.v[0]));
    json_object_object_add(req, "options", options);
    cli_call(&c, "POST", "/api/v1/ephemeral/configure", cli_json_text(req),
             30000, &a);
    json_object_put(req);
    rc = 0;
    if (!cli_answer_ok(&a)) {
        rc = cli_refused(&c, &a);
    } else if (g->json) {
        printf("%s\n", a.body);
    } else {
        struct cli_table t;
        cli_table_init(&t, 2, (const char *[]){"OPTION", "VALUE"});
        struct json_object *o = cli_jget(a.json, "options");
        if (o != NULL) {
            json_object_object_foreach(o, k, v)
            {
                (void)v;
                cli_table_row(&t, (const char *[]){k, cli_jnum(o, k)});
            }
        }
        printf("queue %s declared\n", cli_jstr(a.json, "queue", ops.v[0]));
        cli_table_print(&t, stdout);
    }
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}

/*
 * cli_queue_call - the shared body of delete and reset: send method path
 * (with body) and print the answer through say (human) or raw (--json).
 */
static int
cli_queue_call(const char *name, int argc, char **argv, struct cli_globals *g,
               const char *method, int reset,
               void (*say)(const char *queue, struct json_object *answer))
{
    const struct cli_opt opts[] = {{NULL, NULL, NULL}};
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;
    char *path, *body = NULL;
    int rc;

    rc = cli_cmd_start(name, argc, argv, opts, g, &ops, 1, 1, &c);
    if (rc >= 0)
        return rc;
    if (reset) {
        struct json_object *req = json_object_new_object();
        json_object_object_add(req, "queue", json_object_new_string(ops.v[0]));
        body = strdup(cli_json_text(req));
        json_object_put(req);
        path = cli_cmd_path("/api/v1/ephemeral/reset");
    } else {
        char *q = cli_escape(ops.v[0]);
        path = cli_cmd_path("/api/v1/ephemeral/queue/%s", q);
        free(q);
    }
    cli_call(&c, method, path, body, 30000, &a);
    rc = 0;
    if (!cli_answer_ok(&a))
        rc = cli_refused(&c, &a);
    else if (g->json)
        printf("%s\n", a.body);
    else
        say(ops.v[0], a.json);
    free(path);
    free(body);
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}

/* cli_delete_say - the human answer of delete. */
static void
cli_delete_say(const char *queue, struct json_object *answer)
{
    int deleted = json_object_get_boolean(cli_jget(answer, "deleted"));
    int declared = json_object_get_boolean(cli_jget(answer, "declared"));
    if (deleted)
        printf("queue %s deleted%s\n", queue,
               declared ? " with its declaration" : "");
    else
        printf("queue %s: nothing to delete\n", queue);
}

/* cli_delete - see admin.h. */
int
cli_delete(int argc, char **argv, struct cli_globals *g)
{
    return cli_queue_call("delete", argc, argv, g, "DELETE", 0, cli_delete_say);
}

/* cli_reset_say - the human answer of reset. */
static void
cli_reset_say(const char *queue, struct json_object *answer)
{
    printf("queue %s reset: %lld messages dropped\n", queue,
           (long long)cli_jint(answer, "dropped", 0));
}

/* cli_reset - see admin.h. */
int
cli_reset(int argc, char **argv, struct cli_globals *g)
{
    return cli_queue_call("reset", argc, argv, g, "POST", 1, cli_reset_say);
}

/* cli_redrive - see admin.h. */
int
cli_redrive(int argc, char **argv, struct cli_globals *g)
{
    const char *max = NULL;
    const struct cli_opt opts[] = {{"max", NULL, &max}, {NULL, NULL, NULL}};
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;
    struct json_object *req;
    char *path, *body, *end = NULL;
    long long n = 0;
    int rc;

    rc = cli_cmd_start("redrive", argc, argv, opts, g, &ops, 1, 1, &c);
    if (rc >= 0)
        return rc;
    if (max != NULL && ((n = strtoll(max, &end, 10)) <= 0 || *end != '\0')) {
        fprintf(stderr, "mayfly redrive: --max must be a positive number\n");
        cli_conn_close(&c);
        return CLI_EXIT_USAGE;
    }
    req = json_object_new_object();
    json_object_object_add(req, "queue", json_object_new_string(ops.v[0]));
    if (max != NULL)
        json_object_object_add(req, "max", json_object_new_int64(n));
    body = strdup(cli_json_text(req));
    json_object_put(req);
    path = cli_cmd_path("/api/v1/ephemeral/redrive");
    cli_call(&c, "POST", path, body, 30000, &a);
    rc = 0;
    if (!cli_answer_ok(&a))
        rc = cli_refused(&c, &a);
    else if (g->json)
        printf("%s\n", a.body);
    else
        printf("queue %s: %lld dead letters redriven\n", ops.v[0],
               (long long)cli_jint(a.json, "redriven", 0));
    free(path);
    free(body);
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}
