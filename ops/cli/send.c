/*
 * send.c - see send.h.
 *
 * Payloads are checked before anything is sent: a word that is not JSON is
 * a usage error (exit 2) naming it, unless --text sends it as a string.
 * push reads stdin in batches of CLI_PUSH_BATCH lines, each batch one push
 * (all or nothing on the node), so a long stream never waits whole in
 * memory.  --key K keys the messages for the queue's dedupe window (SPEC
 * §13): the first message K, the next ones K:1, K:2... in order, so the
 * same command run again (a retry) sends the same keys; --delay MS gives
 * each message that delayMs.
 */
#include "ops/cli/send.h"

#include <sys/random.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cli/cmd.h"
#include "ops/cli/out.h"

#define CLI_PUSH_BATCH         1000
#define CLI_REQUEST_TIMEOUT_MS 5000

/* cli_payload - s as a payload into *out (NULL is JSON null): a JSON string
 * with text, else s parsed as strict JSON.  0, or -1 when it is not JSON. */
static int
cli_payload(const char *s, int text, struct json_object **out)
{
    struct json_tokener *tok;
    struct json_object *o;
    size_t len = strlen(s), end;
    int ok;

    *out = NULL;
    if (text)
        return (*out = json_object_new_string(s)) ? 0 : -1;
    if ((tok = json_tokener_new()) == NULL)
        return -1;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    /* The NUL goes in too, so a bare number ends where the word does. */
    o = json_tokener_parse_ex(tok, s, (int)len + 1);
    ok = json_tokener_get_error(tok) == json_tokener_success;
    end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    while (ok && end < len && strchr(" \t\r", s[end]) != NULL)
        end++;
    if (!ok || end < len) {
        json_object_put(o); /* not JSON, or something follows the value */
        return -1;
    }
    *out = o;
    return 0;
}

/* cli_push_send - push the payloads in msgs (an array of {"payload"}) and
 * print the answer; returns the exit status. */
static int
cli_push_send(struct cli_conn *c, const struct cli_globals *g,
              const char *queue, const char *partition,
              struct json_object *msgs)
{
    struct json_object *req = json_object_new_object();
    struct cli_answer a;
    int rc = 0;

    json_object_object_add(req, "queue", json_object_new_string(queue));
    if (partition != NULL)
        json_object_object_add(req, "partition",
                               json_object_new_string(partition));
    json_object_object_add(req, "messages", json_object_get(msgs));
    cli_call(c, "POST", "/api/v1/ephemeral/push", cli_json_text(req), 60000,
             &a);
    json_object_put(req);
    if (!cli_answer_ok(&a)) {
        rc = cli_refused(c, &a);
    } else if (g->json) {
        printf("%s\n", a.body);
    } else {
        struct json_object *ids = cli_jget(a.json, "ids");
        for (size_t i = 0; i < json_object_array_length(ids); i++)
            printf("%s\n",
                   json_object_get_string(json_object_array_get_idx(ids, i)));
        struct json_object *dups = cli_jget(a.json, "duplicates");
        if (dups != NULL && json_object_get_int64(dups) > 0)
            fprintf(stderr,
                    "mayfly: push: %lld duplicates (their ids are "
                    "the first ones')\n",
                    (long long)json_object_get_int64(dups));
    }
    cli_answer_free(&a);
    return rc;
}

/* What --key and --delay add to each message (key NULL, delay -1: none);
 * index counts the messages of the command. */
struct cli_push_extra {
    const char *key;
    long delay;
    long index;
};

/* cli_push_add - append payload p to msgs as {"payload": p}, with the
 * message's key and delayMs from x. */
static void
cli_push_add(struct json_object *msgs, struct json_object *p,
             struct cli_push_extra *x)
{
    struct json_object *m = json_object_new_object();
    json_object_object_add(m, "payload", p);
    if (x->key != NULL) {
        char key[300];
        if (x->index == 0)
            snprintf(key, sizeof(key), "%s", x->key);
        else
            snprintf(key, sizeof(key), "%s:%ld", x->key, x->index);
        json_object_object_add(m, "key", json_object_new_string(key));
    }
    if (x->delay >= 0)
        json_object_object_add(m, "delayMs", json_object_new_int64(x->delay));
    x->index++;
    json_object_array_add(msgs, m);
}

/* cli_push_stdin - push stdin's lines in batches; the exit status. */
static int
cli_push_stdin(struct cli_conn *c, const struct cli_globals *g,
               const char *queue, const char *partition, int text,
               struct cli_push_extra *x)
{
    struct json_object *msgs = json_object_new_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0, sent = 0;
    int rc = 0;

    while (rc == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
        struct json_object *p;
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!text && strspn(line, " \t") == (size_t)n)
            continue; /* a blank line holds no JSON value: skipped */
        if (cli_payload(line, text, &p) != 0) {
            rc = cli_cmd_usage_error("push",
                                     "line %ld of stdin is not JSON (--text "
                                     "sends lines as strings): %.80s; %ld "
                                     "messages before it were pushed",
                                     lineno, line, sent);
            break;
        }
        cli_push_add(msgs, p, x);
        if (json_object_array_length(msgs) == CLI_PUSH_BATCH) {
            rc = cli_push_send(c, g, queue, partition, msgs);
            sent += CLI_PUSH_BATCH;
            json_object_put(msgs);
            msgs = json_object_new_array();
        }
    }
    if (rc == 0 && json_object_array_length(msgs) > 0)
        rc = cli_push_send(c, g, queue, partition, msgs);
    json_object_put(msgs);
    free(line);
    return rc;
}

/* cli_push - see send.h. */
int
cli_push(int argc, char **argv, struct cli_globals *g)
{
    const char *partition = NULL, *key = NULL, *delay = NULL;
    struct cli_push_extra x = {.delay = -1};
    int text = 0, rc;
    const struct cli_opt opts[] = {{"partition", NULL, &partition},
                                   {"text", &text, NULL},
                                   {"key", NULL, &key},
                                   {"delay", NULL, &delay},
                                   {NULL, NULL, NULL}};
    struct cli_operands ops;
    struct cli_conn c;

    rc = cli_cmd_start("push", argc, argv, opts, g, &ops, 1, -1, &c);
    if (rc >= 0)
        return rc;
    if (key != NULL && (key[0] == '\0' || strlen(key) > 240)) {
        cli_conn_close(&c);
        return cli_cmd_usage_error("push", "--key takes 1 to 240 bytes");
    }
    if (delay != NULL && cli_args_long("delay", delay, 0, 3600000, &x.delay)) {
        cli_conn_close(&c);
        return 2;
    }
    x.key = key;
    if (ops.n == 1) {
        rc = cli_push_stdin(&c, g, ops.v[0], partition, text, &x);
    } else {
        struct json_object *msgs = json_object_new_array();
        for (int i = 1; i < ops.n && rc < 0; i++) {
            struct json_object *p;
            if (cli_payload(ops.v[i], text, &p) != 0)
                rc = cli_cmd_usage_error("push",
                                         "payload '%s' is not JSON (--text "
                                         "sends it as a string)",
                                         ops.v[i]);
            else
                cli_push_add(msgs, p, &x);
        }
        if (rc < 0)
            rc = cli_push_send(&c, g, ops.v[0], partition, msgs);
        json_object_put(msgs);
    }
    cli_conn_close(&c);
    return rc;
}

/* cli_request_print - print a reply as the request verb answers it. */
static void
cli_request_print(const struct cli_globals *g, struct json_object *answer)
{
    struct json_object *replies = cli_jget(answer, "replies");

    if (g->json)
        printf("%s\n", cli_json_text(answer));
    else if (replies != NULL) /* --gather: one reply a line */
        for (size_t i = 0; i < json_object_array_length(replies); i++)
            printf("%s\n",
                   cli_json_text(json_object_array_get_idx(replies, i)));
    else
        printf("%s\n", cli_json_text(cli_jget(answer, "reply")));
}

/*
 * cli_request_inbox - the request over the inbox pattern: push payload
 * (an object) with "replyTo" naming a fresh inbox, then long-poll the inbox
 * for the reply until timeout_ms.  Returns the exit status.
 */
static int
cli_request_inbox(struct cli_conn *c, const struct cli_globals *g,
                  const char *queue, const char *partition,
                  struct json_object *payload, long timeout_ms)
{
    long start = cli_cmd_now_ms(), left;
    unsigned long long nonce = 0;
    char inbox[64], *path, *esc;
    struct json_object *req, *msg, *msgs;
    struct cli_answer a;
    int rc = 0;

    if (!json_object_is_type(payload, json_type_object)) {
        fputs("mayfly: this node has no request verb, and the inbox pattern "
              "needs a JSON object payload to carry replyTo\n",
              stderr);
        return CLI_EXIT_REFUSED;
    }
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
        nonce ^= (unsigned long long)start * 0x9e3779b97f4a7c15ULL;
    snprintf(inbox, sizeof(inbox), "mayfly-inbox-%016llx", nonce);
    json_object_object_add(payload, "replyTo", json_object_new_string(inbox));
    req = json_object_new_object();
    msg = json_object_new_object();
    msgs = json_object_new_array();
    json_object_object_add(msg, "payload", json_object_get(payload));
    json_object_array_add(msgs, msg);
    json_object_object_add(req, "queue", json_object_new_string(queue));
    if (partition != NULL)
        json_object_object_add(req, "partition",
                               json_object_new_string(partition));
    json_object_object_add(req, "messages", msgs);
    cli_call(c, "POST", "/api/v1/ephemeral/push", cli_json_text(req), 30000,
             &a);
    json_object_put(req);
    if (!cli_answer_ok(&a)) {
        rc = cli_refused(c, &a);
        cli_answer_free(&a);
        return rc;
    }
    struct json_object *id =
        json_object_get(json_object_array_get_idx(cli_jget(a.json, "ids"), 0));
    cli_answer_free(&a);

    left = timeout_ms - (cli_cmd_now_ms() - start);
    esc = cli_escape(inbox);
    path = cli_cmd_path("/api/v1/ephemeral/pop?queue=%s&wait=true&timeout=%ld"
                        "&autoAck=true",
                        esc, left > 0 ? left : 0);
    cli_call(c, "GET", path, NULL, (left > 0 ? left : 0) + 10000, &a);
    free(path);
    free(esc);
    struct json_object *got =
        json_object_array_get_idx(cli_jget(a.json, "messages"), 0);
    if (!cli_answer_ok(&a)) {
        rc = cli_refused(c, &a);
    } else if (got == NULL) {
        fprintf(stderr, "mayfly: no reply came to %s within %ld ms\n", inbox,
                timeout_ms);
        rc = CLI_EXIT_REFUSED;
    } else {
        struct json_object *answer = json_object_new_object();
        json_object_object_add(answer, "reply",
                               json_object_get(cli_jget(got, "payload")));
        json_object_object_add(answer, "id", json_object_get(id));
        json_object_object_add(answer, "ms",
                               json_object_new_int64(cli_cmd_now_ms() - start));
        cli_request_print(g, answer);
        json_object_put(answer);
    }
    json_object_put(id);
    cli_answer_free(&a);
    return rc;
}

/* cli_request - see send.h. */
int
cli_request(int argc, char **argv, struct cli_globals *g)
{
    const char *partition = NULL, *timeout = NULL, *gather = NULL,
               *quiet = NULL;
    long timeout_ms = CLI_REQUEST_TIMEOUT_MS, gather_n = 0, quiet_ms = 0;
    int text = 0, rc;
    const struct cli_opt opts[] = {
        {"partition", NULL, &partition}, {"timeout", NULL, &timeout},
        {"gather", NULL, &gather},       {"quiet", NULL, &quiet},
        {"text", &text, NULL},           {NULL, NULL, NULL}};
    struct json_object *payload, *req;
    struct cli_operands ops;
    struct cli_answer a;
    struct cli_conn c;

    rc = cli_cmd_start("request", argc, argv, opts, g, &ops, 2, 2, &c);
    if (rc >= 0)
        return rc;
    if ((timeout != NULL &&
         cli_args_long("timeout", timeout, 0, 3600000, &timeout_ms) != 0) ||
        (gather != NULL &&
         cli_args_long("gather", gather, 1, 10000, &gather_n) != 0) ||
        (quiet != NULL &&
         cli_args_long("quiet", quiet, 0, 3600000, &quiet_ms) != 0)) {
        cli_conn_close(&c);
        return CLI_EXIT_USAGE;
    }
    if (cli_payload(ops.v[1], text, &payload) != 0) {
        cli_conn_close(&c);
        return cli_cmd_usage_error(
            "request", "payload '%s' is not JSON (--text sends it as a string)",
            ops.v[1]);
    }
    req = json_object_new_object();
    json_object_object_add(req, "queue", json_object_new_string(ops.v[0]));
    if (partition != NULL)
        json_object_object_add(req, "partition",
                               json_object_new_string(partition));
    json_object_object_add(req, "payload", json_object_get(payload));
    json_object_object_add(req, "timeout", json_object_new_int64(timeout_ms));
    if (gather != NULL) {
        struct json_object *gt = json_object_new_object();
        json_object_object_add(gt, "max", json_object_new_int64(gather_n));
        if (quiet != NULL)
            json_object_object_add(gt, "quietMs",
                                   json_object_new_int64(quiet_ms));
        json_object_object_add(req, "gather", gt);
    }
    cli_call(&c, "POST", "/api/v1/ephemeral/request", cli_json_text(req),
             timeout_ms + 10000, &a);
    json_object_put(req);
    if (a.status == 404 && strcmp(cli_answer_code(&a), "not_found") == 0 &&
        gather == NULL)
        rc = cli_request_inbox(&c, g, ops.v[0], partition, payload, timeout_ms);
    else if (!cli_answer_ok(&a))
        rc = cli_refused(&c, &a);
    else
        cli_request_print(g, a.json);
    cli_answer_free(&a);
    json_object_put(payload);
    cli_conn_close(&c);
    return rc < 0 ? 0 : rc;
}
