/*
 * recv.c - see recv.h.
 *
 * Acks send each popped message's id and attempts back, so they are
 * fenced: a message that went out again meanwhile answers stale and its
 * newer delivery is left alone (SPEC section 3).  sub drains in one
 * exchange a batch (SPEC section 14): each POST pop carries the acks of
 * the batch before it; with --upto, one cumulative entry a partition,
 * which also completes what other consumers of the group hold leased
 * there (for a sole consumer).
 */
#include "ops/cli/recv.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/cli/cmd.h"
#include "ops/cli/out.h"
#include "ops/cli/stream.h"

/* The long poll sub keeps parked; the node clamps it to its max_wait_ms. */
#define CLI_SUB_WAIT_MS 30000
/* How long to wait past a pop's own timeout before calling the node hung. */
#define CLI_POP_SLACK_MS 10000

/* What pop and sub ask for. */
struct cli_pop_args {
    const char *queue, *group, *partition;
    long batch, timeout_ms;
    int wait, auto_ack;
};

/* cli_pop_path - the pop request for p (malloc'ed). */
static char *
cli_pop_path(const struct cli_pop_args *p)
{
    char *q = cli_escape(p->queue);
    char *gr = p->group ? cli_escape(p->group) : NULL;
    char *pa = p->partition ? cli_escape(p->partition) : NULL;
    char *path = cli_cmd_path(
        "/api/v1/ephemeral/pop?queue=%s&batch=%ld&wait=%s&timeout=%ld"
        "&autoAck=%s%s%s%s%s",
        q, p->batch, p->wait ? "true" : "false", p->timeout_ms,
        p->auto_ack ? "true" : "false", gr ? "&group=" : "", gr ? gr : "",
        pa ? "&partition=" : "", pa ? pa : "");
    free(q);
    free(gr);
    free(pa);
    return path;
}

/* cli_pop_call - one pop; returns the status, the answer in a. */
static long
cli_pop_call(struct cli_conn *c, const struct cli_pop_args *p,
             struct cli_answer *a)
{
    char *path = cli_pop_path(p);
    long st = cli_call(c, "GET", path, NULL,
                       (p->wait ? p->timeout_ms : 0) + CLI_POP_SLACK_MS, a);
    free(path);
    return st;
}

/* cli_pop_post - one POST pop for p carrying acks (an array); returns the
 * status, the answer in a. */
static long
cli_pop_post(struct cli_conn *c, const struct cli_pop_args *p,
             struct json_object *acks, struct cli_answer *a)
{
    struct json_object *req = json_object_new_object();
    long st;

    json_object_object_add(req, "queue", json_object_new_string(p->queue));
    if (p->group != NULL)
        json_object_object_add(req, "group", json_object_new_string(p->group));
    if (p->partition != NULL)
        json_object_object_add(req, "partition",
                               json_object_new_string(p->partition));
    json_object_object_add(req, "batch", json_object_new_int64(p->batch));
    json_object_object_add(req, "wait", json_object_new_boolean(p->wait));
    json_object_object_add(req, "timeout",
                           json_object_new_int64(p->timeout_ms));
    json_object_object_add(req, "acks", json_object_get(acks));
    st = cli_call(c, "POST", "/api/v1/ephemeral/pop", cli_json_text(req),
                  (p->wait ? p->timeout_ms : 0) + CLI_POP_SLACK_MS, a);
    json_object_put(req);
    return st;
}

/* cli_id_partition - the partition part of a message id
 * "e:<incarnation>:<partition>:<sequence>" (from both ends) into
 * out[0..*n); 0, or -1 for an id of another shape. */
static int
cli_id_partition(const char *id, const char **out, size_t *n)
{
    const char *first = strchr(id, ':'), *second, *last = strrchr(id, ':');

    if (first == NULL || (second = strchr(first + 1, ':')) == NULL ||
        second >= last)
        return -1;
    *out = second + 1;
    *n = (size_t)(last - *out);
    return 0;
}

/* cli_acks_of - what acks msgs (a pop's "messages"): each id with its
 * attempts, or with upto the last message of each partition, cumulative
 * (a batch holds each partition's messages in rising order). */
static struct json_object *
cli_acks_of(struct json_object *msgs, int upto)
{
    struct json_object *acks = json_object_new_array();
    size_t n = json_object_array_length(msgs);

    for (size_t i = 0; i < n; i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i);
        const char *id = cli_jstr(m, "id", ""), *part, *other;
        struct json_object *e = json_object_new_object();
        size_t len, olen;
        int later = 0;

        for (size_t k = i + 1; upto && k < n && !later; k++)
            later = cli_id_partition(id, &part, &len) == 0 &&
                    cli_id_partition(
                        cli_jstr(json_object_array_get_idx(msgs, k), "id", ""),
                        &other, &olen) == 0 &&
                    len == olen && memcmp(part, other, len) == 0;
        if (later) {
            json_object_put(e);
            continue;
        }
        json_object_object_add(e, "id", json_object_new_string(id));
        if (upto)
            json_object_object_add(e, "upTo", json_object_new_boolean(1));
        else
            json_object_object_add(e, "attempts",
                                   json_object_get(cli_jget(m, "attempts")));
        json_object_array_add(acks, e);
    }
    return acks;
}

/* cli_ack_send - ack entries (an array) on queue for group; the answer in a.
 * Returns the status. */
static long
cli_ack_send(struct cli_conn *c, const char *queue, const char *group,
             struct json_object *entries, struct cli_answer *a)
{
    struct json_object *req = json_object_new_object();
    long st;

    json_object_object_add(req, "queue", json_object_new_string(queue));
    if (group != NULL)
        json_object_object_add(req, "group", json_object_new_string(group));
    json_object_object_add(req, "acks", json_object_get(entries));
    st = cli_call(c, "POST", "/api/v1/ephemeral/ack", cli_json_text(req), 30000,
                  a);
    json_object_put(req);
    return st;
}

/* cli_ack_popped - ack the messages a pop answered; the exit status. */
static int
cli_ack_popped(struct cli_conn *c, const struct cli_pop_args *p,
               struct json_object *msgs)
{
    struct cli_answer a;
    int rc = 0;

    if (json_object_array_length(msgs) == 0)
        return 0;
    if (cli_ack_send(c, p->queue, p->group, msgs, &a) / 100 != 2)
        rc = cli_refused(c, &a);
    cli_answer_free(&a);
    return rc;
}

/* cli_pop_opts - check pop's and sub's numbers into p; 0 or usage error. */
static int
cli_pop_opts(struct cli_pop_args *p, const char *batch, const char *timeout)
{
    p->batch = 1;
    if (batch != NULL && cli_args_long("batch", batch, 1, 10000, &p->batch))
        return -1;
    if (timeout != NULL &&
        cli_args_long("timeout", timeout, 0, 3600000, &p->timeout_ms))
        return -1;
    return 0;
}

/* cli_pop - see recv.h. */
int
cli_pop(int argc, char **argv, struct cli_globals *g)
{
    struct cli_pop_args p = {.timeout_ms = CLI_SUB_WAIT_MS};
    const char *batch = NULL, *timeout = NULL;
    int ack = 0, rc;
    const struct cli_opt opts[] = {
        {"group", NULL, &p.group},       {"partition", NULL, &p.partition},
        {"batch", NULL, &batch},         {"timeout", NULL, &timeout},
        {"wait", &p.wait, NULL},         {"ack", &ack, NULL},
        {"auto-ack", &p.auto_ack, NULL}, {NULL, NULL, NULL}};
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;

    rc = cli_cmd_start("pop", argc, argv, opts, g, &ops, 1, 1, &c);
    if (rc >= 0)
        return rc;
    p.queue = ops.v[0];
    if (cli_pop_opts(&p, batch, timeout) != 0 || (ack && p.auto_ack)) {
        cli_conn_close(&c);
        return ack && p.auto_ack
                   ? cli_cmd_usage_error("pop", "--ack and --auto-ack "
                                                "exclude each other")
                   : CLI_EXIT_USAGE;
    }
    rc = 0;
    if (cli_pop_call(&c, &p, &a) / 100 != 2) {
        rc = cli_refused(&c, &a);
    } else if (g->json) {
        printf("%s\n", a.body);
    } else {
        struct json_object *msgs = cli_jget(a.json, "messages");
        struct cli_table t;
        cli_table_init(
            &t, 4, (const char *[]){"ID", "ATTEMPTS", "REPLYTO", "PAYLOAD"});
        for (size_t i = 0; i < json_object_array_length(msgs); i++) {
            struct json_object *m = json_object_array_get_idx(msgs, i);
            cli_table_row(
                &t,
                (const char *[]){cli_jstr(m, "id", ""), cli_jnum(m, "attempts"),
                                 cli_jstr(m, "replyTo", "-"),
                                 cli_json_text(cli_jget(m, "payload"))});
        }
        if (t.nrows > 1)
            cli_table_print(&t, stdout);
        else
            cli_table_free(&t);
    }
    fflush(stdout);
    if (rc == 0 && ack)
        rc = cli_ack_popped(&c, &p, cli_jget(a.json, "messages"));
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}

/* cli_sub_retryable - 1 for an answer a client should simply ask again. */
static int
cli_sub_retryable(const struct cli_answer *a)
{
    const char *code = cli_answer_code(a);
    return a->status == 503 && (strcmp(code, "owner_moved") == 0 ||
                                strcmp(code, "ephemeral_forward_failed") == 0 ||
                                strcmp(code, "draining") == 0);
}

/* cli_sub_check - sub's options that go together, or a usage error's
 * sentence. */
static const char *
cli_sub_check(int stream, int upto, const struct cli_stream_args *s,
              const char *batch, int nops)
{
    if (!stream && (s->from != NULL || s->subs != NULL))
        return s->from != NULL ? "--from needs --stream"
                               : "--subs needs --stream";
    if (stream && batch != NULL)
        return "--batch is for the long poll, not --stream";
    if (stream && upto)
        return "--upto is for the long poll, not --stream";
    if (s->from != NULL && strcmp(s->from, "new") != 0 &&
        strcmp(s->from, "last") != 0 && strcmp(s->from, "all") != 0)
        return "--from takes new, last or all";
    if (s->subs != NULL && (nops > 0 || s->partition != NULL))
        return "--subs names the queues: no QUEUE or --partition beside it";
    if (s->subs == NULL && nops == 0)
        return "too few arguments";
    return NULL;
}

/* cli_sub - see recv.h. */
int
cli_sub(int argc, char **argv, struct cli_globals *g)
{
    struct cli_pop_args p = {.timeout_ms = CLI_SUB_WAIT_MS, .wait = 1};
    struct cli_stream_args sa = {0};
    const char *batch = NULL, *count = NULL, *bad;
    long want = 0, got = 0;
    int rc, stream = 0, upto = 0;
    const struct cli_opt opts[] = {
        {"group", NULL, &p.group}, {"partition", NULL, &p.partition},
        {"batch", NULL, &batch},   {"count", NULL, &count},
        {"stream", &stream, NULL}, {"from", NULL, &sa.from},
        {"subs", NULL, &sa.subs},  {"upto", &upto, NULL},
        {NULL, NULL, NULL}};
    struct cli_operands ops;
    struct cli_conn c;
    struct json_object *acks; /* the batch before, acked by the next pop */

    rc = cli_cmd_start("sub", argc, argv, opts, g, &ops, 0, 1, &c);
    if (rc >= 0)
        return rc;
    sa.partition = p.partition;
    if ((bad = cli_sub_check(stream, upto, &sa, batch, ops.n)) != NULL) {
        cli_conn_close(&c);
        return cli_cmd_usage_error("sub", "%s", bad);
    }
    p.queue = sa.queue = ops.n > 0 ? ops.v[0] : NULL;
    if (cli_pop_opts(&p, batch, NULL) != 0 ||
        (count != NULL && cli_args_long("count", count, 1, LONG_MAX, &want))) {
        cli_conn_close(&c);
        return CLI_EXIT_USAGE;
    }
    if (stream) {
        sa.group = p.group;
        sa.count = want;
        rc = cli_stream_sub(&c, g, &sa);
        cli_conn_close(&c);
        return rc;
    }
    rc = 0;
    acks = json_object_new_array();
    while (rc == 0 && (want == 0 || got < want)) {
        struct cli_answer a;
        struct json_object *msgs;

        if (want > 0 && p.batch > want - got)
            p.batch = want - got;
        /* acks that may not have applied go again: an ack applied twice
         * answers unknown the second time */
        if (cli_pop_post(&c, &p, acks, &a) / 100 != 2) {
            if (cli_sub_retryable(&a))
                sleep(1);
            else
                rc = cli_refused(&c, &a);
            cli_answer_free(&a);
            continue;
        }
        msgs = cli_jget(a.json, "messages");
        for (size_t i = 0; i < json_object_array_length(msgs); i++) {
            struct json_object *m = json_object_array_get_idx(msgs, i);
            if (g->json)
                printf("%s\n", cli_json_text(m));
            else
                printf("%s %s\n", cli_jstr(m, "id", ""),
                       cli_json_text(cli_jget(m, "payload")));
            got++;
        }
        fflush(stdout);
        json_object_put(acks);
        acks = cli_acks_of(msgs, upto);
        cli_answer_free(&a);
    }
    if (rc == 0)
        rc = cli_ack_popped(&c, &p, acks); /* the last batch */
    json_object_put(acks);
    cli_conn_close(&c);
    return rc;
}

/* cli_ack_entry - one ID argument as an ack entry: a popped message (JSON
 * object) as it is, else the id; with status set on it when given. */
static struct json_object *
cli_ack_entry(const char *arg, const char *status)
{
    struct json_object *e = arg[0] == '{' ? json_tokener_parse(arg) : NULL;

    if (!json_object_is_type(e, json_type_object)) {
        json_object_put(e);
        e = json_object_new_object();
        json_object_object_add(e, "id", json_object_new_string(arg));
    }
    if (status != NULL)
        json_object_object_add(e, "status", json_object_new_string(status));
    return e;
}

/* cli_ack - see recv.h. */
int
cli_ack(int argc, char **argv, struct cli_globals *g)
{
    const char *group = NULL, *status = NULL;
    const struct cli_opt opts[] = {
        {"group", NULL, &group}, {"status", NULL, &status}, {NULL, NULL, NULL}};
    struct json_object *entries;
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;
    int rc;

    rc = cli_cmd_start("ack", argc, argv, opts, g, &ops, 1, -1, &c);
    if (rc >= 0)
        return rc;
    entries = json_object_new_array();
    for (int i = 1; i < ops.n; i++)
        json_object_array_add(entries, cli_ack_entry(ops.v[i], status));
    if (ops.n == 1) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, stdin)) >= 0) {
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                line[--n] = '\0';
            if (n > 0)
                json_object_array_add(entries, cli_ack_entry(line, status));
        }
        free(line);
    }
    rc = 0;
    if (cli_ack_send(&c, ops.v[0], group, entries, &a) / 100 != 2) {
        rc = cli_refused(&c, &a);
    } else if (g->json) {
        printf("%s\n", a.body);
    } else {
        struct json_object *res = cli_jget(a.json, "results");
        struct cli_table t;
        cli_table_init(&t, 2, (const char *[]){"ID", "OUTCOME"});
        for (size_t i = 0; i < json_object_array_length(res); i++) {
            struct json_object *r = json_object_array_get_idx(res, i);
            char outcome[128];
            snprintf(
                outcome, sizeof(outcome), "%s%s%s", cli_jstr(r, "outcome", "?"),
                json_object_get_boolean(cli_jget(r, "dropped")) ? " (dropped)"
                                                                : "",
                json_object_get_boolean(cli_jget(r, "replied")) ? " (replied)"
                                                                : "");
            cli_table_row(&t, (const char *[]){cli_jstr(r, "id", ""), outcome});
        }
        cli_table_print(&t, stdout);
    }
    json_object_put(entries);
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}
