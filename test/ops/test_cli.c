/*
 * test_cli.c - mayfly, the command line client, against a real mayflyd:
 * each subcommand's output and exit status, refusals with the server's
 * sentence on stderr, a node that is down and a second URL taken instead,
 * top driven in tmux, and the man page rendered by man.
 *
 * The client is the mayfly built beside $MAYFLYD; commands run through sh
 * (test/ops/shell.c) with "$M" naming it, stdout kept in cl_out and stderr
 * in cl_err.  What a command did is checked through the node's own answers
 * (test/integration/node.c), not through the client.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "http/auth.h"
#include "test/integration/node.h"
#include "test/ops/shell.h"

static char cl_root[PATH_MAX - 64]; /* the repository */
static char cl_bin[PATH_MAX];       /* build/<mode>/mayfly */
static char cl_dir[256];            /* where out and err files go */
static char cl_out[65536];          /* stdout of the last cl_sh() */
static char cl_err[16384];          /* stderr of the last cl_sh() */
static struct itest_node cl_node;

/* cl_setup - find the client beside $MAYFLYD and export it as $M. */
static void
cl_setup(void)
{
    const char *d = getenv("MAYFLYD");
    char tmp[PATH_MAX];

    cr_assert_not_null(d, "MAYFLYD is not set (test/run-all.sh sets it)");
    cr_assert_not_null(realpath(d, tmp), "%s: %s", d, strerror(errno));
    snprintf(cl_bin, sizeof(cl_bin), "%s/mayfly", dirname(tmp));
    cr_assert_eq(access(cl_bin, X_OK), 0, "no client at %s", cl_bin);
    snprintf(cl_root, sizeof(cl_root), "%.*s", (int)sizeof(cl_root) - 1,
             dirname(dirname(tmp)));
    setenv("M", cl_bin, 1);
    unsetenv("MAYFLY_URL");
    unsetenv("MAYFLY_TOKEN");
    itest_test_dir(cl_dir, sizeof(cl_dir));
}

TestSuite(cli, .init = cl_setup, .timeout = 120);

/* cl_shv - ops_vsh() over a format and its arguments. */
static int cl_shv(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int
cl_shv(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    int st;

    va_start(ap, fmt);
    st = ops_vsh(cl_dir, out, cap, fmt, ap);
    va_end(ap);
    return st;
}

/* cl_sh - run the printf-style shell line; stdout into cl_out, stderr into
 * cl_err.  Returns the exit status. */
static int cl_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int
cl_sh(const char *fmt, ...)
{
    char cmd[4096], path[300];
    va_list ap;
    FILE *f;
    size_t n = 0;
    int st;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(path, sizeof(path), "%s/err", cl_dir);
    st = cl_shv(cl_out, sizeof(cl_out), "%s 2>%s", cmd, path);
    if ((f = fopen(path, "r")) != NULL) {
        n = fread(cl_err, 1, sizeof(cl_err) - 1, f);
        fclose(f);
    }
    cl_err[n] = '\0';
    return st;
}

/* cl_start - a node, and MAYFLY_URL pointing the client at it. */
static void
cl_start(void)
{
    itest_node_start(&cl_node, NULL);
    setenv("MAYFLY_URL", cl_node.base, 1);
}

/* cl_lines - how many lines s holds. */
static int
cl_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* cl_dead_url - a loopback URL nothing listens on. */
static void
cl_dead_url(char *out, size_t len)
{
    snprintf(out, len, "http://127.0.0.1:%d", itest_free_port());
}

/* cl_assert_refused - the last command printed nothing on stdout, and on
 * stderr the status and code ("429 queue_full") and, when not NULL, the
 * node's sentence (as the harness got it asking the same). */
static void
cl_assert_refused(const char *code, const char *sentence)
{
    cr_assert_str_eq(cl_out, "", "stdout: %s", cl_out);
    cr_assert(strstr(cl_err, code) != NULL, "stderr lacks %s: %s", code,
              cl_err);
    if (sentence != NULL)
        cr_assert(strstr(cl_err, sentence) != NULL, "stderr lacks '%s': %s",
                  sentence, cl_err);
}

Test(cli, help_lists_every_command_and_usage_errors_exit_2)
{
    static const char *const cmds[] = {
        "push",   "pop",     "sub",      "request", "ack",    "configure",
        "delete", "reset",   "queues",   "depth",   "health", "members",
        "top",    "redrive", "presence", "bench"};

    cr_assert_eq(cl_sh("$M --help"), 0);
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        char word[32];
        snprintf(word, sizeof(word), "  %s ", cmds[i]);
        cr_assert(strstr(cl_out, word) != NULL, "--help lacks %s", cmds[i]);
    }
    cr_assert_eq(cl_sh("$M pop --help"), 0);
    cr_assert(strstr(cl_out, "usage: mayfly [OPTIONS] pop QUEUE") != NULL, "%s",
              cl_out);
    cr_assert_eq(cl_sh("$M"), 2);
    cr_assert(strstr(cl_err, "no command given") != NULL, "%s", cl_err);
    cr_assert_eq(cl_sh("$M frobnicate"), 2);
    cr_assert(strstr(cl_err, "unknown command 'frobnicate'") != NULL);
    cr_assert_eq(cl_sh("$M pop"), 2);
    cr_assert(strstr(cl_err, "usage: mayfly [OPTIONS] pop") != NULL);
    cr_assert_eq(cl_sh("$M pop q --batch 0"), 2);
    cr_assert(strstr(cl_err, "--batch") != NULL, "%s", cl_err);
    cr_assert_eq(cl_sh("$M pop q --ack --auto-ack"), 2);
    cr_assert_eq(cl_sh("$M depth q r"), 2);
    cr_assert(strstr(cl_err, "unexpected argument 'r'") != NULL);
    cr_assert_eq(cl_sh("$M pop q --bogus"), 2);
    cr_assert(strstr(cl_err, "unknown option --bogus") != NULL);
    cr_assert_eq(cl_sh("$M configure q maxLength"), 2);
    cr_assert(strstr(cl_err, "'maxLength' is not KEY=VALUE") != NULL);
    cr_assert_eq(cl_sh("$M sub q --from all"), 2);
    cr_assert(strstr(cl_err, "--from needs --stream") != NULL, "%s", cl_err);
    cr_assert_eq(cl_sh("$M sub q --stream --from now"), 2);
    cr_assert_eq(cl_sh("$M sub q --stream --batch 2"), 2);
    cr_assert_eq(cl_sh("$M sub --stream"), 2);
    cr_assert_eq(cl_sh("$M sub q --stream --subs '[[\"q\"]]'"), 2);
}

Test(cli, push_sends_json_text_and_stdin_lines_and_prints_the_ids)
{
    struct itest_resp r;

    cl_start();
    cr_assert_eq(cl_sh("$M push q '{\"a\":1}' 2 '\"s\"' null -5"), 0, "%s",
                 cl_err);
    cr_assert_eq(cl_lines(cl_out), 5, "%s", cl_out);
    cr_assert(strncmp(cl_out, "e:", 2) == 0, "%s", cl_out);
    cr_assert_eq(cl_sh("$M push q --text 'hello world' 3"), 0);
    cr_assert_eq(cl_lines(cl_out), 2);
    cr_assert_eq(cl_sh("printf '[1]\\n{\"b\":2}\\n' | $M push q"), 0);
    cr_assert_eq(cl_lines(cl_out), 2);
    cr_assert_eq(cl_sh("printf 'one\\ntwo\\n' | $M push q --text "
                       "--partition p2"),
                 0);
    cr_assert_eq(itest_depth_pending(&cl_node, "q", NULL), 11);

    cr_assert_eq(itest_get(&cl_node, &r,
                           "/api/v1/ephemeral/pop?queue=q&partition=Default"
                           "&batch=20&autoAck=true"),
                 200);
    cr_assert_eq(itest_jlen(r.json, "messages"), 9);
    cr_assert_str_eq(
        json_object_to_json_string_ext(itest_jget(r.json, "messages.0.payload"),
                                       JSON_C_TO_STRING_PLAIN),
        "{\"a\":1}");
    cr_assert_eq(itest_jint(r.json, "messages.4.payload"), -5);
    cr_assert_str_eq(itest_jstr(r.json, "messages.5.payload"), "hello world");
    cr_assert_str_eq(itest_jstr(r.json, "messages.6.payload"), "3");
    itest_resp_free(&r);
    cr_assert_eq(itest_get(&cl_node, &r,
                           "/api/v1/ephemeral/pop?queue=q&partition=p2"
                           "&batch=20&autoAck=true"),
                 200);
    cr_assert_str_eq(itest_jstr(r.json, "messages.1.payload"), "two");
    itest_resp_free(&r);

    /* A word that is not JSON is a usage error, and nothing is pushed. */
    cr_assert_eq(cl_sh("$M push q 1 notjson"), 2);
    cr_assert(strstr(cl_err, "payload 'notjson' is not JSON") != NULL, "%s",
              cl_err);
    cr_assert_eq(itest_depth_pending(&cl_node, "q", NULL), 0);
}

Test(cli, push_key_and_delay_reach_the_node)
{
    static char first[sizeof(cl_out)];

    cl_start();
    cr_assert_eq(cl_sh("$M configure kq dedupeSeconds=60"), 0, "%s", cl_err);
    cr_assert_eq(cl_sh("$M push kq 1 --key order-1"), 0, "%s", cl_err);
    snprintf(first, sizeof(first), "%s", cl_out);
    cr_assert_eq(cl_sh("$M push kq 1 --key order-1"), 0, "%s", cl_err);
    cr_assert_str_eq(cl_out, first, "a retry prints the first id");
    cr_assert(strstr(cl_err, "1 duplicates") != NULL, "%s", cl_err);
    cr_assert_eq(itest_depth_pending(&cl_node, "kq", NULL), 1);
    cr_assert_eq(cl_sh("$M push kq 2 3 --key batch-1"), 0, "%s", cl_err);
    cr_assert_eq(cl_lines(cl_out), 2, "%s", cl_out);
    cr_assert_eq(itest_depth_pending(&cl_node, "kq", NULL), 3);
    cr_assert_eq(cl_sh("$M push kq 4 --delay 60000"), 0, "%s", cl_err);
    cr_assert_eq(itest_depth_pending(&cl_node, "kq", NULL), 3, "delayed");
    cr_assert_eq(cl_sh("$M push kq 4 --delay soon"), 2);
    cr_assert_eq(cl_sh("$M push kq 4 --key ''"), 2);
}

Test(cli, configure_conflate_and_keyed_pushes_keep_each_keys_newest)
{
    cl_start();
    cr_assert_eq(cl_sh("$M configure sig conflate=true"), 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "conflate           true\n") != NULL, "%s",
              cl_out);
    cr_assert_eq(cl_sh("$M push sig 1 --key a && $M push sig 2 --key a"), 0,
                 "%s", cl_err);
    cr_assert_eq(itest_depth_pending(&cl_node, "sig", NULL), 1);
    cr_assert_eq(cl_sh("$M configure sig conflate=yes"), 1);
    cr_assert(strstr(cl_err, "conflate") != NULL, "%s", cl_err);
}

Test(cli, a_refused_push_exits_1_with_the_servers_sentence)
{
    struct itest_resp r;

    cl_start();
    cr_assert_eq(cl_sh("$M configure full maxLength=1"), 0, "%s", cl_err);
    cr_assert_eq(cl_sh("$M push full 1"), 0);
    cr_assert_eq(cl_sh("$M push full 2"), 1);
    itest_push(&cl_node, &r, "full", NULL, "[3]");
    cr_assert_eq(r.status, 429);
    cl_assert_refused("429 queue_full", itest_jstr(r.json, "error"));
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&cl_node, "full", NULL), 1);
    /* A name the node refuses: its 400 naming the field. */
    cr_assert_eq(cl_sh("$M push \"$(printf 'bad\\001name')\" 1"), 1);
    cl_assert_refused("400 invalid_name", "queue");
}

Test(cli, a_token_goes_with_token_or_mayfly_token)
{
    char path[300], opts[400], hash[AUTH_HASH_TEXT];
    FILE *f;

    snprintf(path, sizeof(path), "%s/tokens", cl_dir);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    auth_hash_text("cli-secret", 10, hash);
    fprintf(f, "%s tenant=cli push=* pop=* read=*\n", hash);
    fclose(f);
    snprintf(opts, sizeof(opts), "auth_file=%s", path);
    itest_node_start(&cl_node, opts);
    setenv("MAYFLY_URL", cl_node.base, 1);
    cr_assert_eq(cl_sh("$M push tq 1"), 1);
    cl_assert_refused("401 unauthorized", NULL);
    cr_assert_eq(cl_sh("$M --token cli-secret push tq 1"), 0, "%s", cl_err);
    cr_assert_eq(cl_sh("MAYFLY_TOKEN=cli-secret $M push tq 2"), 0, "%s",
                 cl_err);
    cr_assert_eq(cl_sh("MAYFLY_TOKEN=cli-secret $M --json queues"), 0, "%s",
                 cl_err);
    cr_assert(strstr(cl_out, "\"tq\"") != NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("$M --token cli-secret configure tq maxLength=5"), 1);
    cl_assert_refused("403 forbidden", "admin");
}

Test(cli, pop_prints_a_table_leases_and_acks_on_request)
{
    cl_start();
    cr_assert_eq(cl_sh("$M push q '{\"n\":1}' '{\"n\":2}' '{\"n\":3}'"), 0);
    cr_assert_eq(cl_sh("$M pop q"), 0, "%s", cl_err);
    cr_assert(strncmp(cl_out, "ID ", 3) == 0, "%s", cl_out);
    cr_assert(strstr(cl_out, "{\"n\":1}") != NULL, "%s", cl_out);
    cr_assert_eq(cl_lines(cl_out), 2);
    cr_assert_eq(itest_listing_int(&cl_node, "q", "leased", -1), 1);
    cr_assert_eq(cl_sh("$M pop q --batch 5 --ack"), 0, "%s", cl_err);
    cr_assert_eq(cl_lines(cl_out), 3, "%s", cl_out);
    cr_assert(strstr(cl_out, "{\"n\":3}") != NULL, "%s", cl_out);
    cr_assert_eq(itest_listing_int(&cl_node, "q", "leased", -1), 1,
                 "the acked two hold no lease");
    cr_assert_eq(cl_sh("$M pop q --batch 5"), 0);
    cr_assert_str_eq(cl_out, "", "acked messages came back: %s", cl_out);

    /* Nothing to pop prints nothing and succeeds. */
    cr_assert_eq(cl_sh("$M pop empty"), 0);
    cr_assert_str_eq(cl_out, "");

    /* --json prints the node's answer; --auto-ack leases nothing. */
    cr_assert_eq(cl_sh("$M push g 7 && $M --json pop g --group gr --auto-ack"),
                 0);
    struct json_object *o = json_tokener_parse(strchr(cl_out, '{'));
    cr_assert_not_null(o, "%s", cl_out);
    cr_assert_eq(itest_jint(o, "messages.0.payload"), 7);
    json_object_put(o);
    cr_assert_eq(itest_listing_int(&cl_node, "g", "leased", -1), 0);
}

/* A shell loop that waits (20 s at most, else exits 9) until queue q shows
 * a parked pop. */
#define CL_UNTIL_PARKED(q)                                                     \
    "n=0; until $M --json queues " q " | grep -q '\"waiting\":1'; do "         \
    "n=$((n+1)); [ $n -lt 400 ] || exit 9; sleep 0.05; done; "

Test(cli, pop_wait_returns_a_message_pushed_while_it_waits)
{
    cl_start();
    cr_assert_eq(cl_sh("($M pop w --wait --timeout 20000 --auto-ack & %s "
                       "$M push w '\"late\"' >/dev/null; wait)",
                       CL_UNTIL_PARKED("w")),
                 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "\"late\"") != NULL, "%s", cl_out);
}

Test(cli, sub_prints_messages_as_they_come_and_acks_them)
{
    cl_start();
    cr_assert_eq(cl_sh("$M push s 1 2"), 0);
    cr_assert_eq(cl_sh("($M sub s --group g --count 4 & %s "
                       "$M push s 3 4 >/dev/null; wait)",
                       CL_UNTIL_PARKED("s")),
                 0, "%s", cl_err);
    cr_assert_eq(cl_lines(cl_out), 4, "%s", cl_out);
    cr_assert(strstr(cl_out, " 1\n") && strstr(cl_out, " 4\n"), "%s", cl_out);
    cr_assert_eq(itest_listing_int(&cl_node, "s", "leased", -1), 0);
    cr_assert_eq(itest_depth_pending(&cl_node, "s", "g"), 0);
}

/* --upto acks each batch with one cumulative ack a partition. */
Test(cli, sub_upto_acks_every_batch_with_one_cumulative_ack)
{
    cl_start();
    cr_assert_eq(cl_sh("$M push u 1 2 3"), 0);
    cr_assert_eq(cl_sh("($M sub u --group g --batch 2 --count 5 --upto & %s "
                       "$M push u 4 5 >/dev/null; wait)",
                       CL_UNTIL_PARKED("u")),
                 0, "%s", cl_err);
    cr_assert_eq(cl_lines(cl_out), 5, "%s", cl_out);
    cr_assert(strstr(cl_out, " 1\n") && strstr(cl_out, " 5\n"), "%s", cl_out);
    cr_assert_eq(itest_listing_int(&cl_node, "u", "leased", -1), 0);
    cr_assert_eq(itest_depth_pending(&cl_node, "u", "g"), 0);
}

/* CL_UNTIL_STREAMS - a shell loop until the node counts an open stream. */
#define CL_UNTIL_STREAMS                                                       \
    "n=0; until curl -s $MAYFLY_URL/metrics | grep -q '^mayfly_streams "       \
    "[1-9]'; "                                                                 \
    "do n=$((n+1)); [ $n -lt 400 ] || exit 9; sleep 0.05; done; "

/* CL_SUB - a sub that cannot outlive its test, whatever it waits for. */
#define CL_SUB "timeout 60 $M "

/* cl_in_order - s holds lines ending with each of ends[0..n), in order,
 * and nothing else. */
static void
cl_in_order(const char *s, const char *const *ends, int n)
{
    const char *at = s;

    cr_assert_eq(cl_lines(s), n, "%s", s);
    for (int i = 0; i < n; i++) {
        const char *nl = strchr(at, '\n');
        size_t len = strlen(ends[i]);

        cr_assert(nl != NULL && (size_t)(nl - at) >= len &&
                      memcmp(nl - len, ends[i], len) == 0,
                  "line %d is not '...%s': %s", i + 1, ends[i], s);
        at = nl + 1;
    }
}

/* A tail stream: the held messages first (--from all), then one pushed
 * while it is open, printed as sub prints them; --count ends it. */
Test(cli, sub_stream_prints_held_then_new_messages)
{
    static const char *const want[] = {" 1", " 2", " \"three\""};

    cl_start();
    cr_assert_eq(cl_sh("$M push st 1 2 >/dev/null"), 0, "%s", cl_err);
    cr_assert_eq(cl_sh("(" CL_SUB "sub st --stream --from all --count 3 & %s "
                       "$M push st '\"three\"' >/dev/null; wait)",
                       CL_UNTIL_STREAMS),
                 0, "%s", cl_err);
    cl_in_order(cl_out, want, 3);
    cr_assert_eq(cl_sh(CL_SUB "--json sub st --stream --from last --count 1"),
                 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "\"payload\":\"three\"") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "\"queue\":\"st\"") != NULL, "%s", cl_out);
}

/* --subs takes several partitions on one stream; --partition one. */
Test(cli, sub_stream_takes_partitions)
{
    static const char *const one[] = {" \"b\""};

    cl_start();
    cr_assert_eq(cl_sh("$M push sp --partition a '\"a\"' >/dev/null && "
                       "$M push sp --partition b '\"b\"' >/dev/null && "
                       "$M push sp --partition c '\"c\"' >/dev/null"),
                 0, "%s", cl_err);
    cr_assert_eq(cl_sh(CL_SUB "sub --stream --subs '[[\"sp\",\"a\"],"
                              "[\"sp\",\"b\"]]' --from all --count 2"),
                 0, "%s", cl_err);
    cr_assert_eq(cl_lines(cl_out), 2, "%s", cl_out);
    cr_assert(strstr(cl_out, " \"a\"\n") && strstr(cl_out, " \"b\"\n"), "%s",
              cl_out);
    cr_assert_eq(
        cl_sh(CL_SUB "sub sp --partition b --stream --from all --count 1"), 0,
        "%s", cl_err);
    cl_in_order(cl_out, one, 1);
}

/* A group stream consumes: what it printed no pop of the group gets (the
 * group made first by a pop: it holds what is pushed after). */
Test(cli, sub_stream_with_a_group_consumes)
{
    cl_start();
    cr_assert_eq(cl_sh("$M pop sg --group g --auto-ack && "
                       "$M push sg 1 2 >/dev/null"),
                 0, "%s", cl_err);
    cr_assert_eq(cl_sh(CL_SUB "sub sg --stream --group g --count 2"), 0, "%s",
                 cl_err);
    cr_assert_eq(cl_lines(cl_out), 2, "%s", cl_out);
    cr_assert_eq(cl_sh("$M pop sg --group g --auto-ack"), 0, "%s", cl_err);
    cr_assert_str_eq(cl_out, "");
}

/* A proxy for the first URL that passes one stream until its first
 * message event has gone through, then cuts it and stops listening, so
 * that the client's next try goes to the node itself. */
struct cl_cut {
    int lfd, port;
    int cut; /* the stream was cut after a message */
    pthread_t t;
};

/* cl_cut_relay - the request from c to n, then n's answer back up to the
 * end of its first message event; 1 when cut there. */
static int
cl_cut_relay(int c, int n)
{
    static char buf[1 << 16];
    size_t len = 0;
    const char *ev, *end = NULL;
    ssize_t k;

    while (memmem(buf, len, "\r\n\r\n", 4) == NULL &&
           (k = recv(c, buf + len, sizeof(buf) - 1 - len, 0)) > 0)
        len += (size_t)k; /* a GET: its head is all of it */
    if (send(n, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
        return 0;
    len = 0;
    while (end == NULL && len < sizeof(buf) - 1 &&
           (k = recv(n, buf + len, sizeof(buf) - 1 - len, 0)) > 0) {
        len += (size_t)k;
        buf[len] = '\0';
        if ((ev = strstr(buf, "event: message\n")) != NULL)
            end = strstr(ev, "\n\n");
    }
    if (end == NULL)
        return 0;
    len = (size_t)(end + 2 - buf);
    return send(c, buf, len, MSG_NOSIGNAL) == (ssize_t)len;
}

static void *
cl_cut_run(void *arg)
{
    struct cl_cut *x = arg;
    int c = accept(x->lfd, NULL, NULL), n;

    close(x->lfd);
    if (c == -1)
        return NULL;
    n = itest_raw_connect(&cl_node);
    x->cut = n != -1 && cl_cut_relay(c, n);
    close(c);
    if (n != -1)
        close(n);
    return NULL;
}

static void
cl_cut_start(struct cl_cut *x)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);

    memset(x, 0, sizeof(*x));
    x->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(x->lfd != -1 &&
              bind(x->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              listen(x->lfd, 4) == 0 &&
              getsockname(x->lfd, (struct sockaddr *)&sa, &len) == 0);
    x->port = ntohs(sa.sin_port);
    cr_assert_eq(pthread_create(&x->t, NULL, cl_cut_run, x), 0);
}

/* A stream cut after its first message resumes on the next URL from the
 * last event id: every message once, in order, and notices on stderr. */
Test(cli, sub_stream_resumes_after_a_drop_with_nothing_lost_or_repeated)
{
    static const char *const want[] = {" 1", " 2", " 3", " 4"};
    struct cl_cut x;

    cl_start();
    cr_assert_eq(cl_sh("$M push sr 1 2 3 >/dev/null"), 0, "%s", cl_err);
    cl_cut_start(&x);
    cr_assert_eq(cl_sh("(" CL_SUB
                       "--url http://127.0.0.1:%d,%s sub sr --stream "
                       "--from all --count 4 & %s $M push sr 4 >/dev/null; "
                       "wait)",
                       x.port, cl_node.base, CL_UNTIL_STREAMS),
                 0, "%s", cl_err);
    pthread_join(x.t, NULL);
    cr_assert(x.cut, "the proxy never cut the stream");
    cl_in_order(cl_out, want, 4);
    cr_assert(strstr(cl_err, "mayfly: stream lost (") != NULL, "%s", cl_err);
}

/* A responder: one parked pop on "rpc", whose message it answers into the
 * replyTo the message carries (beside the payload with the request verb,
 * inside it with the inbox pattern) with {"squared": n * n}. */
static void *
cl_responder(void *arg)
{
    CURL *h = itest_handle(); /* its own: a thread's default one would leak */
    struct itest_resp r, p = {0};
    const char *to;
    char body[1024];

    (void)arg;
    itest_req_on(h, &cl_node, "GET",
                 "/api/v1/ephemeral/pop?queue=rpc&wait=true&timeout=20000"
                 "&autoAck=true",
                 NULL, &r);
    to = itest_jstr(r.json, "messages.0.replyTo");
    if (to[0] == '\0')
        to = itest_jstr(r.json, "messages.0.payload.replyTo");
    snprintf(
        body, sizeof(body),
        "{\"queue\":\"%s\",\"messages\":[{\"payload\":{\"squared\":%lld}}]}",
        to,
        (long long)(itest_jint(r.json, "messages.0.payload.n") *
                    itest_jint(r.json, "messages.0.payload.n")));
    if (to[0] != '\0')
        itest_req_on(h, &cl_node, "POST", "/api/v1/ephemeral/push", body, &p);
    itest_resp_free(&p);
    itest_resp_free(&r);
    curl_easy_cleanup(h);
    return NULL;
}

/* cl_parked - wait until queue shows a parked pop. */
static void
cl_parked(const char *queue)
{
    int64_t deadline = itest_now_ms() + 20000;
    while (itest_listing_int(&cl_node, queue, "waiting", 0) < 1) {
        cr_assert(itest_now_ms() < deadline, "no pop parked on %s", queue);
        itest_sleep_ms(20);
    }
}

Test(cli, request_gather_prints_one_reply_a_line)
{
    pthread_t t;

    cl_start();
    cr_assert_eq(pthread_create(&t, NULL, cl_responder, NULL), 0);
    cl_parked("rpc");
    cr_assert_eq(cl_sh("$M request rpc '{\"n\":7}' --gather 1 --quiet 100 "
                       "--timeout 15000"),
                 0, "%s", cl_err);
    pthread_join(t, NULL);
    cr_assert_str_eq(cl_out, "{\"squared\":49}\n");
    cr_assert_eq(cl_sh("$M request rpc 1 --gather 0"), 2);
}

Test(cli, request_prints_the_reply)
{
    pthread_t t;

    cl_start();
    for (int json = 0; json < 2; json++) {
        cr_assert_eq(pthread_create(&t, NULL, cl_responder, NULL), 0);
        cl_parked("rpc");
        cr_assert_eq(cl_sh("$M %s request rpc '{\"n\":7}' --timeout 15000",
                           json ? "--json" : ""),
                     0, "%s", cl_err);
        pthread_join(t, NULL);
        if (!json) {
            cr_assert_str_eq(cl_out, "{\"squared\":49}\n");
            continue;
        }
        struct json_object *o = json_tokener_parse(cl_out);
        cr_assert_not_null(o, "%s", cl_out);
        cr_assert_eq(itest_jint(o, "reply.squared"), 49);
        cr_assert(strncmp(itest_jstr(o, "id"), "e:", 2) == 0, "%s", cl_out);
        cr_assert_neq(itest_jint(o, "ms"), INT64_MIN);
        json_object_put(o);
    }
}

Test(cli, a_request_nobody_answers_exits_1)
{
    cl_start();
    cr_assert_eq(cl_sh("$M request lonely '{\"n\":1}' --timeout 300"), 1);
    cr_assert_str_eq(cl_out, "");
    cr_assert(strstr(cl_err, "no reply") != NULL ||
                  strstr(cl_err, "no_responders") != NULL ||
                  strstr(cl_err, "request_timeout") != NULL,
              "%s", cl_err);
    cr_assert_eq(cl_sh("$M request lonely notjson"), 2);
}

Test(cli, ack_prints_each_outcome)
{
    struct itest_resp r;
    char id[128];

    cl_start();
    itest_push_ok(&cl_node, &r, "a", NULL, "[1,2]", 2);
    itest_resp_free(&r);
    cr_assert_eq(
        itest_get(&cl_node, &r, "/api/v1/ephemeral/pop?queue=a&batch=2"), 200);
    snprintf(id, sizeof(id), "%s", itest_jstr(r.json, "messages.0.id"));
    cr_assert_eq(cl_sh("$M ack a %s", id), 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "OUTCOME") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "acked") != NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("$M ack a %s", id), 0);
    cr_assert(strstr(cl_out, "unknown") != NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("echo %s | $M ack a --status retry",
                       itest_jstr(r.json, "messages.1.id")),
                 0);
    cr_assert(strstr(cl_out, "redelivered") != NULL, "%s", cl_out);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&cl_node, "a", NULL), 1);
}

Test(cli, configure_prints_the_options_and_refusals_name_the_option)
{
    struct itest_resp r;

    cl_start();
    cr_assert_eq(cl_sh("$M configure c maxLength=5 policy=dropOldest "
                       "windowBuffer.ms=20 windowBuffer.count=3"),
                 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "queue c declared") != NULL, "%s", cl_out);
    /* the column is as wide as the longest option, deadLetterExpired */
    cr_assert(strstr(cl_out, "maxLength          5\n") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "policy             dropOldest\n") != NULL);
    cr_assert(strstr(cl_out, "{\"ms\":20,\"count\":3}") != NULL, "%s", cl_out);
    cr_assert_eq(itest_listing_int(&cl_node, "c", "options.maxLength", -1), 5);

    cr_assert_eq(cl_sh("$M configure c maxLenght=5"), 1);
    cr_assert_eq(itest_post(&cl_node, &r, "/api/v1/ephemeral/configure",
                            "{\"queue\":\"c\",\"options\":{\"maxLenght\":5}}"),
                 400);
    cl_assert_refused("400 unknown_option", itest_jstr(r.json, "error"));
    cr_assert(strstr(cl_err, "maxLenght") != NULL, "%s", cl_err);
    itest_resp_free(&r);
    cr_assert_eq(itest_listing_int(&cl_node, "c", "options.maxLength", -1), 5);
}

Test(cli, reset_and_delete_say_what_they_did)
{
    cl_start();
    cr_assert_eq(cl_sh("$M configure d maxLength=9 && $M push d 1 2 3"), 0);
    cr_assert_eq(cl_sh("$M reset d"), 0);
    cr_assert_str_eq(cl_out, "queue d reset: 3 messages dropped\n");
    cr_assert_eq(itest_depth_pending(&cl_node, "d", NULL), 0);
    cr_assert_eq(cl_sh("$M delete d"), 0);
    cr_assert_str_eq(cl_out, "queue d deleted with its declaration\n");
    cr_assert_eq(cl_sh("$M delete d"), 0);
    cr_assert_str_eq(cl_out, "queue d: nothing to delete\n");
    cr_assert_eq(cl_sh("$M --json reset d"), 0);
    cr_assert(strstr(cl_out, "\"dropped\":0") != NULL, "%s", cl_out);
}

Test(cli, redrive_says_how_many_came_back)
{
    cl_start();
    cr_assert_eq(cl_sh("$M configure j retryLimit=1 deadLetter=j.dead"), 0,
                 "%s", cl_err);
    cr_assert_eq(cl_sh("$M push j 1 2 3"), 0);
    /* Fail each at the limit: they land in j.dead. */
    struct itest_resp r;
    cr_assert_eq(itest_get(&cl_node, &r,
                           "/api/v1/ephemeral/pop?queue=j&group=g&batch=3"),
                 200);
    cr_assert_eq(cl_sh("$M ack j %s %s %s --group g --status failed",
                       itest_jstr(r.json, "messages.0.id"),
                       itest_jstr(r.json, "messages.1.id"),
                       itest_jstr(r.json, "messages.2.id")),
                 0, "%s", cl_err);
    itest_resp_free(&r);
    cr_assert_eq(itest_depth_pending(&cl_node, "j.dead", NULL), 3);
    cr_assert_eq(cl_sh("$M redrive j.dead --max 2"), 0, "%s", cl_err);
    cr_assert_str_eq(cl_out, "queue j.dead: 2 dead letters redriven\n");
    cr_assert_eq(cl_sh("$M --json redrive j.dead"), 0);
    cr_assert(strstr(cl_out, "\"redriven\":1") != NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("$M redrive j.dead --max 0"), 2);
}

Test(cli, queues_lists_by_prefix)
{
    cl_start();
    cr_assert_eq(cl_sh("$M push room-1 1 2 && $M push room-2 1 && "
                       "$M push other 1"),
                 0);
    cr_assert_eq(cl_sh("$M queues room-"), 0, "%s", cl_err);
    cr_assert_eq(cl_lines(cl_out), 3, "%s", cl_out);
    cr_assert(strncmp(cl_out, "QUEUE ", 6) == 0, "%s", cl_out);
    cr_assert(strstr(cl_out, "\nroom-1  implicit  2 ") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "\nroom-2  implicit  1 ") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "other") == NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("$M --json queues"), 0);
    struct json_object *o = json_tokener_parse(cl_out);
    cr_assert_eq(itest_jint(o, "count"), 3, "%s", cl_out);
    json_object_put(o);
    cr_assert_eq(cl_sh("$M queues --scope everywhere"), 2);
}

Test(cli, depth_shows_partitions_and_an_unknown_queue_is_refused)
{
    struct itest_resp r;

    cl_start();
    cr_assert_eq(cl_sh("$M push dq --partition p1 1 2 && "
                       "$M push dq --partition p2 3"),
                 0);
    cr_assert_eq(cl_sh("$M depth dq"), 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "queue dq: 3 pending") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "\np1         2 ") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "\np2         1 ") != NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("$M --json depth dq"), 0);
    struct json_object *o = json_tokener_parse(cl_out);
    cr_assert_eq(itest_jint(o, "pending"), 3, "%s", cl_out);
    json_object_put(o);

    cr_assert_eq(cl_sh("$M depth nosuch"), 1);
    itest_get(&cl_node, &r, "/api/v1/ephemeral/queues/nosuch/depth");
    cl_assert_refused("404 ephemeral_queue_not_found",
                      itest_jstr(r.json, "error"));
    itest_resp_free(&r);
}

Test(cli, presence_lists_counts_and_watches_a_channel)
{
    cl_start();
    cr_assert_eq(cl_sh("curl -s -X POST $MAYFLY_URL/api/v1/presence/enter -d "
                       "'{\"channel\":\"room\",\"member\":\"ada\","
                       "\"data\":{\"x\":1},\"ttlSeconds\":60}' >/dev/null"),
                 0, "%s", cl_err);
    cr_assert_eq(cl_sh("$M presence room"), 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "channel room: 1 members") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "\nada ") != NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("$M presence room --count"), 0, "%s", cl_err);
    cr_assert_str_eq(cl_out, "1\n");
    cr_assert_eq(cl_sh("$M --json presence room"), 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "\"member\":\"ada\"") != NULL, "%s", cl_out);
    /* --watch: the set first, then an enter as it comes (timeout ends it) */
    cl_sh("(timeout 5 $M presence room --watch & %s "
          "curl -s -X POST $MAYFLY_URL/api/v1/presence/enter -d "
          "'{\"channel\":\"room\",\"member\":\"bob\",\"ttlSeconds\":60}' "
          ">/dev/null; wait)",
          CL_UNTIL_STREAMS);
    cr_assert(strstr(cl_out, "\"action\":\"sync\"") != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "\"action\":\"enter\",\"member\":\"bob\"") != NULL,
              "%s", cl_out);
}

Test(cli, health_and_members_show_the_node)
{
    struct itest_resp r;
    char line[256];

    cl_start();
    itest_get(&cl_node, &r, "/health");
    cr_assert_eq(cl_sh("$M health"), 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "status       ok\n") != NULL, "%s", cl_out);
    snprintf(line, sizeof(line), "node         %s\n",
             itest_jstr(r.json, "node"));
    cr_assert(strstr(cl_out, line) != NULL, "%s", cl_out);
    cr_assert(strstr(cl_out, "role         leader\n") != NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("$M members"), 0, "%s", cl_err);
    snprintf(line, sizeof(line), "\n%s  live   leader (self)\n",
             itest_jstr(r.json, "node"));
    cr_assert(strstr(cl_out, line) != NULL, "%s", cl_out);
    cr_assert_eq(cl_sh("$M --json members"), 0);
    struct json_object *o = json_tokener_parse(cl_out);
    cr_assert_str_eq(itest_jstr(o, "0.state"), "live", "%s", cl_out);
    json_object_put(o);
    itest_resp_free(&r);
}

/* cl_bench_row - run bench MODE with small numbers for about a second and
 * check its table: a positive rate and ordered, positive percentiles. */
static void
cl_bench_row(const char *mode)
{
    char got[16];
    long conns, size, batch;
    double secs, reqs, msgs, p50, p90, p99, max;

    cr_assert_eq(cl_sh("$M bench %s --conns 2 --size 32 --batch 10 "
                       "--duration 1 --queue cb-%s",
                       mode, mode),
                 0, "bench %s: %s", mode, cl_err);
    cr_assert_eq(cl_lines(cl_out), 2, "%s", cl_out);
    cr_assert(strstr(cl_out, "p50 ms") && strstr(cl_out, "p90 ms") &&
                  strstr(cl_out, "p99 ms"),
              "%s", cl_out);
    cr_assert_eq(sscanf(strchr(cl_out, '\n') + 1,
                        "%15s %ld %ld %ld %lf %lf %lf %lf %lf %lf %lf", got,
                        &conns, &size, &batch, &secs, &reqs, &msgs, &p50, &p90,
                        &p99, &max),
                 11, "%s", cl_out);
    cr_assert_str_eq(got, mode);
    cr_assert(conns == 2 && size == 32 && batch == 10, "%s", cl_out);
    cr_assert(secs > 0 && secs <= 1.5, "%s", cl_out);
    cr_assert(reqs > 0 && msgs >= reqs, "%s", cl_out);
    cr_assert(p50 > 0 && p50 <= p90 && p90 <= p99 && p99 <= max, "%s", cl_out);
}

Test(cli, bench_push_pop_and_request_print_rates_and_percentiles)
{
    cl_start();
    cl_bench_row("push");
    cl_bench_row("pop");
    cl_bench_row("request");
    /* what the runs used is deleted after them */
    cr_assert_eq(cl_sh("$M queues cb-"), 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "cb-") == NULL, "left behind:\n%s", cl_out);
    cr_assert_eq(cl_sh("$M --json bench push --conns 1 --batch 5 --duration "
                       "0.3"),
                 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "\"mode\":\"push\"") != NULL &&
                  strstr(cl_out, "\"messagesPerSec\":") != NULL &&
                  strstr(cl_out, "\"p99\":") != NULL,
              "%s", cl_out);
}

Test(cli, bench_stream_times_one_push_to_every_stream)
{
    char got[16];
    long conns, size, rounds;
    double secs, p50, p99, all, worst;

    cl_start();
    cr_assert_eq(cl_sh("$M bench stream --conns 20 --size 32 --duration 1 "
                       "--queue cb-stream"),
                 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "p50 ms") && strstr(cl_out, "p99 ms") &&
                  strstr(cl_out, "all ms"),
              "%s", cl_out);
    cr_assert_eq(sscanf(strchr(cl_out, '\n') + 1,
                        "%15s %ld %ld %ld %lf %lf %lf %lf %lf", got, &conns,
                        &size, &rounds, &secs, &p50, &p99, &all, &worst),
                 9, "%s", cl_out);
    cr_assert_str_eq(got, "stream");
    cr_assert(conns == 20 && size == 32 && rounds > 0, "%s", cl_out);
    cr_assert(p50 > 0 && p50 <= p99 && all > 0 && all <= worst, "%s", cl_out);
    /* the streams are closed and the queue deleted after */
    cr_assert_eq(cl_sh("$M queues cb-"), 0, "%s", cl_err);
    cr_assert(strstr(cl_out, "cb-") == NULL, "left behind:\n%s", cl_out);
    cr_assert_eq(cl_sh("$M --json bench stream --conns 2 --duration 0.2"), 0,
                 "%s", cl_err);
    cr_assert(strstr(cl_out, "\"mode\":\"stream\"") != NULL &&
                  strstr(cl_out, "\"all\":") != NULL,
              "%s", cl_out);
}

Test(cli, bench_sends_the_token_and_a_refusal_exits_1)
{
    char path[300], opts[400], hash[AUTH_HASH_TEXT];
    FILE *f;

    snprintf(path, sizeof(path), "%s/tokens", cl_dir);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    auth_hash_text("bench-secret", 12, hash);
    fprintf(f,
            "%s tenant=b push=* pop=* request=* admin=* read=* "
            "subscribe=*\n",
            hash);
    auth_hash_text("bench-nosub", 11, hash);
    fprintf(f, "%s tenant=b push=* pop=* admin=*\n", hash);
    fclose(f);
    snprintf(opts, sizeof(opts), "auth_file=%s", path);
    itest_node_start(&cl_node, opts);
    setenv("MAYFLY_URL", cl_node.base, 1);
    cr_assert_eq(cl_sh("$M bench push --conns 1 --duration 0.2"), 1);
    cr_assert(strstr(cl_err, "401") != NULL, "%s", cl_err);
    cr_assert_eq(cl_sh("$M --token bench-secret bench pop --conns 2 "
                       "--batch 50 --duration 0.3"),
                 0, "%s", cl_err);
    cr_assert_eq(cl_sh("MAYFLY_TOKEN=bench-secret $M bench request --conns 1 "
                       "--duration 0.3"),
                 0, "%s", cl_err);
    /* a token that may not subscribe: said at once, not waited out */
    int64_t t0 = itest_now_ms();
    cr_assert_eq(cl_sh("MAYFLY_TOKEN=bench-nosub $M bench stream --conns 2 "
                       "--duration 0.3"),
                 1);
    cr_assert(strstr(cl_err, "subscribe answered 403") != NULL &&
                  strstr(cl_err, "forbidden") != NULL,
              "%s", cl_err);
    cr_assert(itest_now_ms() - t0 < 4000, "the refusal took %lld ms",
              (long long)(itest_now_ms() - t0));
}

Test(cli, bench_bad_flags_exit_2_with_a_clear_message)
{
    static const struct {
        const char *args, *says;
    } bad[] = {
        {"", "usage: mayfly [OPTIONS] bench"},
        {"frob", "unknown mode 'frob'"},
        {"push --conns 0", "--conns"},
        {"push --size x", "--size"},
        {"pop --batch 0", "--batch"},
        {"push --duration 0", "--duration takes seconds"},
        {"push --duration soon", "--duration takes seconds"},
        {"push --queue 'a b'", "--queue takes"},
        {"push --bogus 1", "unknown option --bogus"},
        {"push --url https://127.0.0.1:1", "only plain http://"},
        {"stream --batch 2", "--batch does not apply to stream"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(cl_sh("$M bench %s", bad[i].args), 2, "bench %s",
                     bad[i].args);
        cr_assert(strstr(cl_err, bad[i].says) != NULL,
                  "bench %s: stderr lacks '%s': %s", bad[i].args, bad[i].says,
                  cl_err);
        cr_assert_str_eq(cl_out, "", "bench %s", bad[i].args);
    }
}

Test(cli, a_node_down_exits_1_and_the_next_url_is_taken)
{
    char dead[64], dead2[64];

    cl_dead_url(dead, sizeof(dead));
    cl_dead_url(dead2, sizeof(dead2));
    cr_assert_eq(cl_sh("$M --url %s health", dead), 1);
    cr_assert_str_eq(cl_out, "");
    cr_assert(strstr(cl_err, "no node answered") != NULL, "%s", cl_err);
    cr_assert(strstr(cl_err, dead) != NULL, "%s", cl_err);
    cr_assert_eq(cl_sh("MAYFLY_URL=%s $M push q 1", dead), 1);

    cl_start();
    cr_assert_eq(cl_sh("$M --url %s,%s health", dead, cl_node.base), 0, "%s",
                 cl_err);
    cr_assert(strstr(cl_out, "status       ok") != NULL, "%s", cl_out);
    cr_assert_eq(
        cl_sh("MAYFLY_URL=%s,%s,%s $M push q 1 2", dead, dead2, cl_node.base),
        0, "%s", cl_err);
    cr_assert_eq(itest_depth_pending(&cl_node, "q", NULL), 2);
    cr_assert_eq(cl_sh("MAYFLY_URL=%s,%s $M pop q --auto-ack --batch 2", dead,
                       cl_node.base),
                 0, "%s", cl_err);
    cr_assert_eq(cl_lines(cl_out), 3, "%s", cl_out);
}

/* cl_tmux - run a tmux command on the test's private server into out. */
static int
cl_tmux(char *out, size_t cap, const char *args)
{
    return cl_shv(out, cap, "TERM=xterm tmux -S %s/tmux.sock %s", cl_dir, args);
}

/* cl_pane_row - the row of the captured pane that starts with " name ". */
static const char *
cl_pane_row(const char *pane, const char *name, char *row, size_t len)
{
    char key[64];
    snprintf(key, sizeof(key), "\n %s ", name);
    const char *at = strstr(pane, key);
    if (at == NULL)
        return NULL;
    snprintf(row, len, "%.*s", (int)strcspn(at + 1, "\n"), at + 1);
    return row;
}

/* cl_top_wait - capture the pane until the queue's row shows depth. */
static void
cl_top_wait(const char *queue, long depth)
{
    int64_t deadline = itest_now_ms() + 30000;
    char pane[16384], row[256];
    char name[64];
    long got = -1;

    for (;;) {
        cl_tmux(pane, sizeof(pane), "capture-pane -p -t top");
        if (cl_pane_row(pane, queue, row, sizeof(row)) != NULL &&
            sscanf(row, "%63s %ld", name, &got) == 2 && got == depth)
            return;
        cr_assert(itest_now_ms() < deadline,
                  "top never showed %s at depth %ld; the pane:\n%s", queue,
                  depth, pane);
        itest_sleep_ms(100);
    }
}

Test(cli, top_shows_a_queues_depth_change_and_quits_on_q)
{
    char out[16384], cmd[PATH_MAX + 256], name[32];
    struct itest_resp r;
    int64_t deadline;

    if (cl_sh("command -v tmux") != 0)
        cr_skip_test("tmux is not installed (ops/install-deps.sh test)");
    cl_start();
    itest_push_ok(&cl_node, &r, "topq", NULL, "[1,2]", 2);
    itest_resp_free(&r);
    /* More queues than one listing page (1000): top counts every page. */
    for (int i = 0; i < 1005; i++) {
        snprintf(name, sizeof(name), "page-%04d", i);
        itest_push_ok(&cl_node, &r, name, NULL, "[1]", 1);
        itest_resp_free(&r);
    }
    snprintf(cmd, sizeof(cmd),
             "new-session -d -s top -x 120 -y 30 "
             "'MAYFLY_URL=%s TERM=xterm %s top'",
             cl_node.base, cl_bin);
    cr_assert_eq(cl_tmux(out, sizeof(out), cmd), 0, "%s", out);
    cl_top_wait("topq", 2);
    cl_tmux(out, sizeof(out), "capture-pane -p -t top");
    cr_assert(strstr(out, "mayfly top") != NULL, "%s", out);
    cr_assert(strstr(out, " live ") != NULL, "no member shown:\n%s", out);
    cr_assert(strstr(out, "queues 1006") != NULL,
              "the header does not count all 1006 queues:\n%s", out);

    itest_push_ok(&cl_node, &r, "topq", NULL, "[3,4,5]", 3);
    itest_resp_free(&r);
    cl_top_wait("topq", 5);

    /* A smaller window is redrawn at its size. */
    cl_tmux(out, sizeof(out), "resize-window -t top -x 90 -y 20");
    cl_top_wait("topq", 5);

    cl_tmux(out, sizeof(out), "send-keys -t top q");
    deadline = itest_now_ms() + 20000;
    while (cl_tmux(out, sizeof(out), "has-session -t top") == 0) {
        cr_assert(itest_now_ms() < deadline, "top did not quit on q");
        itest_sleep_ms(50);
    }
    cl_tmux(out, sizeof(out), "kill-server");
}

Test(cli, man_page_renders_without_warnings_and_names_every_command)
{
    static const char *const cmds[] = {
        "push",   "pop",     "sub",      "request", "ack",    "configure",
        "delete", "reset",   "queues",   "depth",   "health", "members",
        "top",    "redrive", "presence", "bench"};
    char page[PATH_MAX], text[65536];

    snprintf(page, sizeof(page), "%s/ops/mayfly.1", cl_root);
    cr_assert_eq(cl_shv(text, sizeof(text),
                        "MANWIDTH=80 man --warnings -l %s 2>&1 >/dev/null",
                        page),
                 0);
    cr_assert_str_eq(text, "", "man printed warnings");
    cr_assert_eq(cl_shv(text, sizeof(text), "MANWIDTH=80 man -l %s", page), 0);
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        char word[32];
        snprintf(word, sizeof(word), "\n       %s", cmds[i]);
        const char *at = strstr(text, word);
        while (at != NULL && at[strlen(word)] != ' ' &&
               at[strlen(word)] != '\n')
            at = strstr(at + 1, word);
        cr_assert(at != NULL, "mayfly.1 lacks %s", cmds[i]);
    }
}
