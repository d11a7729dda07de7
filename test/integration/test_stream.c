/*
 * test_stream.c - streams on one node (SPEC §11): a thousand tails of one
 * partition each get every push once and in order; a group stream and a
 * pop of its group share the messages; from=last starts from each
 * partition's newest; a dropped stream resumes from its cursor with
 * nothing missed or repeated, and a cursor of a node's previous life is
 * answered `recovered` with its partition missed; a reader that never
 * reads ends in `overflow` and the worker's memory comes back; 256
 * subscriptions work (of ordinary names too, in the URI) and 257 are
 * refused; tokens are checked before
 * anything opens; a whole queue, keepalives, stream_max, a drain.
 * Every stream here is a raw socket read by sse.c, many at once with poll.
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <jwt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"
#include "test/integration/sse.h"
#include "test/integration/tokens.h"

#define API    "/api/v1/ephemeral"
#define SECRET "stream-test-secret-0123456789abcdef-0123456789"

/* data_json - an event's data parsed (put it), or fail. */
static struct json_object *
data_json(const struct sse_event *e)
{
    struct json_object *o = json_tokener_parse(e->data);

    cr_assert_not_null(o, "event %s: data is not JSON: %s", e->event, e->data);
    return o;
}

/* payload_n - the number a message event's payload {"n": N} holds. */
static int64_t
payload_n(const struct sse_event *e)
{
    struct json_object *o = data_json(e);
    int64_t n = itest_jint(o, "payload.n");

    json_object_put(o);
    return n;
}

/* push_range - push payloads {"n": from} .. {"n": to - 1} to queue/part,
 * batch a request. */
static void
push_range(const struct itest_node *n, const char *queue, const char *part,
           int from, int to, int batch)
{
    struct itest_resp r;
    char *body = malloc((size_t)batch * 32 + 16);

    cr_assert_not_null(body);
    for (int i = from; i < to; i += batch) {
        int k = 0, len = snprintf(body, 16, "[");
        for (; k < batch && i + k < to; k++)
            len += sprintf(body + len, "%s{\"n\":%d}", k ? "," : "", i + k);
        snprintf(body + len, 4, "]");
        itest_push_ok(n, &r, queue, part, body, k);
        itest_resp_free(&r);
    }
    free(body);
}

/* open_stream - sse_open and wait for its open event (taken). */
/* resuming - whether a subscribe carries a cursor (Last-Event-ID, or
 * lastEventId in the query). */
static int
resuming(const char *path, const char *const *headers)
{
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        if (strncasecmp(headers[i], "Last-Event-ID:", 14) == 0)
            return 1;
    return strstr(path, "lastEventId=") != NULL;
}

static void
open_stream(struct sse_client *c, const struct itest_node *n, const char *path,
            const char *const *headers)
{
    sse_open(c, n, path, headers);
    cr_assert_geq(sse_wait_events(c, 1, 10000), 1, "%s: no open event (%d)",
                  path, c->status);
    cr_assert_eq(c->status, 200, "%s: %d", path, c->status);
    cr_assert_str_eq(c->ctype, "text/event-stream");
    if (resuming(path, headers)) {
        /* a resume sends first one recovered (SPEC §11), then open: the
         * open is taken, recovered left first for the test to read */
        cr_assert_str_eq(c->ev[0].event, "recovered");
        cr_assert_geq(sse_wait_events(c, 2, 10000), 2, "%s: no open", path);
        cr_assert_str_eq(c->ev[1].event, "open");
        cr_assert_neq(c->ev[1].id[0], '\0', "the open event has an id");
        free(c->ev[1].data);
        memmove(c->ev + 1, c->ev + 2, (c->nev - 2) * sizeof(*c->ev));
        c->nev--;
        return;
    }
    cr_assert_str_eq(c->ev[0].event, "open");
    cr_assert_neq(c->ev[0].id[0], '\0', "the open event has an id");
    sse_take(c, 1);
}

/* metric - a series of /metrics, or -1. */
static double
metric(const struct itest_node *n, const char *series)
{
    double v = -1;

    return itest_metric(n, series, &v) == 0 ? v : -1;
}

/* wait_metric - until series reads want (10 s). */
static void
wait_metric(const struct itest_node *n, const char *series, double want)
{
    int64_t end = itest_now_ms() + 10000;

    while (metric(n, series) != want && itest_now_ms() < end)
        itest_sleep_ms(10);
    cr_assert_eq(metric(n, series), want, "%s: %g, not %g", series,
                 metric(n, series), want);
}

/* ---- fan-out: 1,000 tails of one partition --------------------------- */

#define FAN_STREAMS 1000
#define FAN_PUSHES  1000

struct fan {
    struct sse_client **cs;
    int *next; /* each stream's next payload */
};

/* fan_opened - every stream has its open event (taken). */
static int
fan_opened(void *arg)
{
    struct fan *f = arg;

    for (int i = 0; i < FAN_STREAMS; i++)
        if (f->cs[i]->nev == 0)
            return 0;
    return 1;
}

/* fan_done - each stream's messages so far are the next pushes, in order;
 * 1 once all have all of them. */
static int
fan_done(void *arg)
{
    struct fan *f = arg;
    int all = 1;

    for (int i = 0; i < FAN_STREAMS; i++) {
        struct sse_client *c = f->cs[i];
        for (size_t k = 0; k < c->nev; k++) {
            if (strcmp(c->ev[k].event, ":") == 0)
                continue; /* a keepalive: pushing takes a while here */
            cr_assert_str_eq(c->ev[k].event, "message", "stream %d: %s %s", i,
                             c->ev[k].event, c->ev[k].data);
            cr_assert_eq(payload_n(&c->ev[k]), f->next[i],
                         "stream %d got %s, expected n %d", i, c->ev[k].data,
                         f->next[i]);
            f->next[i]++;
        }
        sse_take(c, c->nev);
        all &= f->next[i] == FAN_PUSHES;
    }
    return all;
}

Test(stream, thousand_tails_each_get_every_push_once_in_order, .timeout = 300)
{
    struct itest_node n;
    struct fan f;

    itest_raise_nofile(4 * FAN_STREAMS);
    itest_node_start(&n, "workers=2");
    f.cs = calloc(FAN_STREAMS, sizeof(*f.cs));
    f.next = calloc(FAN_STREAMS, sizeof(*f.next));
    cr_assert(f.cs && f.next);
    for (int i = 0; i < FAN_STREAMS; i++) {
        f.cs[i] = calloc(1, sizeof(**f.cs));
        cr_assert_not_null(f.cs[i]);
        sse_open(f.cs[i], &n, API "/subscribe?queue=fan&partition=p", NULL);
    }
    cr_assert(sse_poll(f.cs, FAN_STREAMS, 60000, fan_opened, &f),
              "not every stream opened");
    for (int i = 0; i < FAN_STREAMS; i++) {
        cr_assert_eq(f.cs[i]->status, 200);
        cr_assert_str_eq(f.cs[i]->ev[0].event, "open");
        sse_take(f.cs[i], 1);
    }
    cr_assert_eq(metric(&n, "mayfly_streams"), FAN_STREAMS);
    push_range(&n, "fan", "p", 0, FAN_PUSHES, 1);
    cr_assert(sse_poll(f.cs, FAN_STREAMS, 240000, fan_done, &f),
              "not every stream got every push");
    cr_assert_geq(metric(&n, "mayfly_stream_events_total"),
                  (double)FAN_STREAMS * FAN_PUSHES);
    for (int i = 0; i < FAN_STREAMS; i++) {
        sse_close(f.cs[i]);
        free(f.cs[i]);
    }
    wait_metric(&n, "mayfly_streams", 0);
    free(f.cs);
    free(f.next);
}

/* ---- a group stream beside a pop of its group ------------------------ */

/* take_stream_ns - note the payloads of c's message events in seen (each
 * once), counting them in *k. */
static void
take_stream_ns(struct sse_client *c, char *seen, int max, int *k)
{
    for (size_t i = 0; i < c->nev; i++) {
        int64_t v = payload_n(&c->ev[i]);
        cr_assert(v >= 0 && v < max, "payload %lld", (long long)v);
        cr_assert_eq(seen[v], 0, "message %lld delivered twice", (long long)v);
        seen[v] = 's';
        (*k)++;
    }
    sse_take(c, c->nev);
}

/* pop_ns - one autoAck pop of group g (batch 7): its payloads into seen. */
static int
pop_ns(const struct itest_node *n, char *seen, int max)
{
    struct itest_resp r;
    int got;

    cr_assert_eq(itest_get(n, &r,
                           API "/pop?queue=gq&partition=p&group=g&batch=7"
                               "&autoAck=true"),
                 200);
    got = itest_jlen(r.json, "messages");
    for (int i = 0; i < got; i++) {
        char path[64];
        snprintf(path, sizeof(path), "messages.%d.payload.n", i);
        int64_t v = itest_jint(r.json, path);
        cr_assert(v >= 0 && v < max);
        cr_assert_eq(seen[v], 0, "message %lld delivered twice", (long long)v);
        seen[v] = 'p';
    }
    itest_resp_free(&r);
    return got;
}

Test(stream, group_stream_and_pop_share_messages, .timeout = 120)
{
    enum { N = 210 };
    struct itest_node n;
    struct sse_client c;
    char seen[N] = {0};
    int popped = 0, streamed = 0;

    itest_node_start(&n, "workers=2");
    cr_assert_eq(pop_ns(&n, seen, N), 0); /* the group, at the start */
    push_range(&n, "gq", "p", 0, 10, 10);
    popped += pop_ns(&n, seen, N);
    cr_assert_eq(popped, 7);
    open_stream(&c, &n, API "/subscribe?queue=gq&partition=p&group=g", NULL);
    cr_assert_eq(sse_wait_events(&c, 3, 10000), 3, "the group's other three");
    take_stream_ns(&c, seen, N, &streamed);
    for (int i = 10; i < N; i += 20) {
        push_range(&n, "gq", "p", i, i + 20, 20);
        popped += pop_ns(&n, seen, N);
        sse_pump(&c);
        take_stream_ns(&c, seen, N, &streamed);
    }
    int64_t end = itest_now_ms() + 20000;
    while (popped + streamed < N && itest_now_ms() < end) {
        sse_wait_events(&c, 1, 100);
        take_stream_ns(&c, seen, N, &streamed);
        popped += pop_ns(&n, seen, N);
    }
    cr_assert_eq(popped + streamed, N, "popped %d, streamed %d of %d", popped,
                 streamed, N);
    cr_assert_geq(streamed, 3);
    cr_assert_eq(itest_depth_pending(&n, "gq", "g"), 0);
    sse_close(&c);
}

/* ---- from=last, a whole queue ---------------------------------------- */

Test(stream, from_last_starts_with_each_partitions_newest)
{
    struct itest_node n;
    struct sse_client c;
    int newest[3] = {0}, got[3] = {0};
    static const char *parts[] = {"a", "b", "c"};

    itest_node_start(&n, "workers=2");
    push_range(&n, "lq", "a", 0, 3, 1);
    push_range(&n, "lq", "b", 10, 12, 1);
    push_range(&n, "lq", "c", 20, 24, 2);
    newest[0] = 2, newest[1] = 11, newest[2] = 23;
    open_stream(&c, &n,
                API "/subscribe?from=last&subs=%5B%5B%22lq%22,%22a%22%5D,"
                    "%5B%22lq%22,%22b%22%5D,%5B%22lq%22,%22c%22%5D%5D",
                NULL);
    cr_assert_eq(sse_wait_events(&c, 3, 10000), 3);
    for (int i = 0; i < 3; i++) {
        struct json_object *o = data_json(&c.ev[i]);
        const char *p = itest_jstr(o, "partition");
        for (int k = 0; k < 3; k++)
            if (strcmp(p, parts[k]) == 0)
                got[k] = (int)itest_jint(o, "payload.n");
        cr_assert_str_eq(itest_jstr(o, "queue"), "lq");
        json_object_put(o);
    }
    for (int k = 0; k < 3; k++)
        cr_assert_eq(got[k], newest[k], "partition %s: %d, not its newest %d",
                     parts[k], got[k], newest[k]);
    sse_take(&c, 3);
    push_range(&n, "lq", "b", 12, 13, 1);
    cr_assert_eq(sse_wait_events(&c, 1, 10000), 1);
    cr_assert_eq(payload_n(&c.ev[0]), 12, "then what comes: %s", c.ev[0].data);
    sse_close(&c);
}

Test(stream, a_whole_queue_streams_every_partition)
{
    struct itest_node n;
    struct sse_client c;
    int seen[3] = {0};

    itest_node_start(&n, "workers=2");
    push_range(&n, "wq", "old", 100, 101, 1);
    open_stream(&c, &n, API "/subscribe?queue=wq", NULL);
    push_range(&n, "wq", "p0", 0, 1, 1);
    push_range(&n, "wq", "p1", 1, 2, 1);
    push_range(&n, "wq", "old", 2, 3, 1);
    cr_assert_eq(sse_wait_events(&c, 3, 10000), 3);
    for (int i = 0; i < 3; i++) {
        int64_t v = payload_n(&c.ev[i]);
        cr_assert(v >= 0 && v < 3, "%s", c.ev[i].data);
        seen[v]++;
    }
    cr_assert(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
    sse_close(&c);
}

/* Messages of a whole queue's partitions, each p<k> carrying k * 1000 +
 * its index in the partition: in order per partition, each once. */
struct wide {
    struct sse_client *c;
    int next[256];
    int got, want;
};

static int
wide_in_order(void *arg)
{
    struct wide *w = arg;

    for (size_t i = 0; i < w->c->nev; i++) {
        cr_assert_str_eq(w->c->ev[i].event, "message", "%s", w->c->ev[i].data);
        int64_t v = payload_n(&w->c->ev[i]);
        int k = (int)(v / 1000);
        cr_assert(k >= 0 && k < 256, "%s", w->c->ev[i].data);
        cr_assert_eq(v % 1000, w->next[k], "partition p%d: %s", k,
                     w->c->ev[i].data);
        w->next[k]++;
        w->got++;
    }
    sse_take(w->c, w->c->nev);
    return w->got >= w->want;
}

/* A whole queue of many deep partitions: everything held comes once, in
 * order per partition, and then each push alone (a round reads only the
 * partitions pushed to since the last). */
Test(stream, a_whole_queue_of_many_partitions_reads_what_moved)
{
    enum { P = 200, DEPTH = 10 };
    struct itest_node n;
    struct sse_client c, *one[] = {&c};
    struct wide w = {.c = &c};
    char part[16];

    itest_node_start(&n, "workers=2");
    for (int k = 0; k < P; k++) {
        snprintf(part, sizeof(part), "p%d", k);
        push_range(&n, "wide", part, k * 1000, k * 1000 + DEPTH, DEPTH);
    }
    open_stream(&c, &n, API "/subscribe?queue=wide&from=all", NULL);
    w.want = P * DEPTH;
    cr_assert(sse_poll(one, 1, 30000, wide_in_order, &w), "%d of %d", w.got,
              w.want);
    for (int round = 0; round < 20; round++) {
        int k = (round * 37) % P;
        snprintf(part, sizeof(part), "p%d", k);
        push_range(&n, "wide", part, k * 1000 + w.next[k],
                   k * 1000 + w.next[k] + 1, 1);
        w.want++;
        cr_assert(sse_poll(one, 1, 10000, wide_in_order, &w), "push %d", round);
    }
    cr_assert_eq(sse_wait_events(&c, 1, 300), 0, "nothing again");
    sse_close(&c);
}

/* ---- recovery ---------------------------------------------------------- */

/* ns_in_order - c's events are messages from..to-1, in order (taken). */
static void
ns_in_order(struct sse_client *c, int from, int to)
{
    cr_assert_eq(sse_wait_events(c, (size_t)(to - from), 10000),
                 (size_t)(to - from));
    for (int i = from; i < to; i++) {
        const struct sse_event *e = &c->ev[i - from];
        cr_assert_str_eq(e->event, "message");
        cr_assert_eq(payload_n(e), i, "got %s, expected n %d", e->data, i);
    }
    sse_take(c, (size_t)(to - from));
}

Test(stream, a_dropped_stream_resumes_from_its_last_event_id)
{
    struct itest_node n;
    struct sse_client c;
    char last[600], hdr[700];
    const char *hdrs[] = {hdr, NULL};

    itest_node_start(&n, "workers=2");
    open_stream(&c, &n, API "/subscribe?queue=rq&partition=p", NULL);
    push_range(&n, "rq", "p", 0, 5, 2);
    ns_in_order(&c, 0, 5);
    snprintf(last, sizeof(last), "%s", c.last_id);
    sse_close(&c);
    push_range(&n, "rq", "p", 5, 10, 1);
    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", last);
    open_stream(&c, &n, API "/subscribe?queue=rq&partition=p", hdrs);
    cr_assert_geq(sse_wait_events(&c, 1, 10000), 1);
    cr_assert_str_eq(c.ev[0].event, "recovered");
    cr_assert_str_eq(c.ev[0].data, "{\"partitions\":1,\"missed\":[]}");
    sse_take(&c, 1);
    ns_in_order(&c, 5, 10);
    push_range(&n, "rq", "p", 10, 11, 1);
    ns_in_order(&c, 10, 11); /* and nothing again before it */
    snprintf(last, sizeof(last), "%s", c.last_id);
    sse_close(&c);
    /* lastEventId in the query, for a client that cannot set headers */
    push_range(&n, "rq", "p", 11, 13, 1);
    char path[900];
    snprintf(path, sizeof(path),
             API "/subscribe?queue=rq&partition=p&lastEventId=%s", last);
    open_stream(&c, &n, path, NULL);
    cr_assert_geq(sse_wait_events(&c, 1, 10000), 1);
    cr_assert_str_eq(c.ev[0].event, "recovered");
    sse_take(&c, 1);
    ns_in_order(&c, 11, 13);
    sse_close(&c);
}

Test(stream, a_cursor_of_a_previous_incarnation_is_missed)
{
    struct itest_node n, m;
    struct sse_client c;
    char hdr[700];
    const char *hdrs[] = {hdr, NULL};

    itest_node_start(&n, "workers=2");
    open_stream(&c, &n, API "/subscribe?queue=iq&partition=p", NULL);
    push_range(&n, "iq", "p", 0, 2, 2);
    ns_in_order(&c, 0, 2);
    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", c.last_id);
    cr_assert_eq(kill(n.pid, SIGKILL), 0);
    itest_node_wait_exit(&n, 10000);
    sse_close(&c);
    itest_node_start(&m, "workers=2");
    open_stream(&c, &m, API "/subscribe?queue=iq&partition=p", hdrs);
    cr_assert_geq(sse_wait_events(&c, 1, 10000), 1);
    cr_assert_str_eq(c.ev[0].event, "recovered");
    cr_assert_str_eq(c.ev[0].data, "{\"partitions\":0,\"missed\":[{\"queue\":"
                                   "\"iq\",\"partition\":\"p\"}]}");
    sse_take(&c, 1);
    push_range(&m, "iq", "p", 2, 3, 1);
    ns_in_order(&c, 2, 3);
    sse_close(&c);
}

Test(stream, a_whole_queue_resumed_elsewhere_names_the_partitions_held_there)
{
    struct itest_node n, m;
    struct sse_client c;
    char hdr[700];
    const char *hdrs[] = {hdr, NULL};

    itest_node_start(&n, "workers=1");
    open_stream(&c, &n, API "/subscribe?queue=wi", NULL);
    push_range(&n, "wi", "p", 0, 1, 1);
    ns_in_order(&c, 0, 1);
    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", c.last_id);
    sse_close(&c);
    itest_node_start(&m, "workers=1"); /* another incarnation */
    push_range(&m, "wi", "a", 5, 6, 1);
    push_range(&m, "wi", "b", 6, 7, 1);
    open_stream(&c, &m, API "/subscribe?queue=wi", hdrs);
    cr_assert_geq(sse_wait_events(&c, 1, 10000), 1);
    cr_assert_str_eq(c.ev[0].event, "recovered");
    struct json_object *o = data_json(&c.ev[0]);
    cr_assert_eq(itest_jint(o, "partitions"), 0, "%s", c.ev[0].data);
    cr_assert_eq(itest_jlen(o, "missed"), 2, "%s", c.ev[0].data);
    json_object_put(o);
    sse_take(&c, 1);
    push_range(&m, "wi", "a", 7, 8, 1);
    ns_in_order(&c, 7, 8); /* what comes next, nothing held before */
    sse_close(&c);
}

/* ---- a reader that never reads ------------------------------------------ */

/* rss_anon_kib - RssAnon of process pid, KiB (-1: unknown). */
static long
rss_anon_kib(pid_t pid)
{
    char path[64], line[256];
    long kib = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

Test(stream, a_reader_that_never_reads_overflows_and_memory_returns,
     .timeout = 180)
{
    enum { BIG = 16384, MSGS = 1000, BATCH = 10 };
    struct itest_node n;
    struct sse_client c;
    pid_t worker;
    long base, peak = 0, now;
    char *body = malloc(BATCH * (BIG + 16) + 16);
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];

    /* freed memory goes back at once, not into ASan's quarantine */
    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=0", asan ? asan : "",
             asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    itest_node_start(&n, "workers=1 stream_buffer_bytes=4M "
                         "queue_max_bytes=64M max_bytes=256M");
    cr_assert_eq(itest_node_workers(&n, &worker, 1), 1);
    sse_open(&c, &n, API "/subscribe?queue=ov&partition=p", NULL);
    wait_metric(&n, "mayfly_streams", 1);
    base = rss_anon_kib(worker);
    cr_assert(body);
    for (int i = 0; i < MSGS && metric(&n, "mayfly_stream_overflows_total") < 1;
         i += BATCH) {
        int len = sprintf(body, "[");
        for (int k = 0; k < BATCH; k++) {
            len += sprintf(body + len, "%s\"", k ? "," : "");
            memset(body + len, 'x', BIG);
            len += BIG;
            len += sprintf(body + len, "\"");
        }
        sprintf(body + len, "]");
        struct itest_resp r;
        itest_push_ok(&n, &r, "ov", "p", body, BATCH);
        itest_resp_free(&r);
        if ((now = rss_anon_kib(worker)) > peak)
            peak = now;
    }
    free(body);
    wait_metric(&n, "mayfly_stream_overflows_total", 1);
    cr_assert_gt(peak, base + 2048, "the unsent events never grew: %ld -> %ld",
                 base, peak);
    int64_t end = itest_now_ms() + 10000;
    while ((now = rss_anon_kib(worker)) > base + 1024 && itest_now_ms() < end)
        itest_sleep_ms(20);
    cr_assert_leq(now, base + 1024,
                  "RssAnon %ld KiB before, %ld at the peak, %ld after", base,
                  peak, now);
    /* read now: what the socket held, then overflow, the last event */
    cr_assert(sse_wait_closed(&c, 60000), "the stream did not end");
    cr_assert_gt(c.nev, 1);
    cr_assert_str_eq(c.ev[c.nev - 1].event, "overflow");
    cr_assert_str_eq(c.ev[0].event, "open");
    for (size_t i = 1; i + 1 < c.nev; i++)
        cr_assert_str_eq(c.ev[i].event, "message", "%zu: %s", i, c.ev[i].event);
    sse_close(&c);
    wait_metric(&n, "mayfly_streams", 0);
}

/* ---- bounds ------------------------------------------------------------- */

/* subs_path - the path of a stream on k partitions "0".."k-1" of queue s,
 * its quotes encoded as enc says (%22, or a raw '"' for the raw socket). */
static char *
subs_path(int k, int pct)
{
    char *p = malloc((size_t)k * 40 + 128);
    int len = sprintf(p, API "/subscribe?subs=%s", pct ? "%5B" : "[");

    cr_assert_not_null(p);
    for (int i = 0; i < k; i++)
        len += sprintf(p + len,
                       pct ? "%s%%5B%%22s%%22,%%22%d%%22%%5D"
                           : "%s[%%22s%%22,%%22%d%%22]",
                       i ? "," : "", i);
    sprintf(p + len, "%s", pct ? "%5D" : "]");
    return p;
}

Test(stream, two_hundred_fifty_six_subscriptions_work_and_one_more_is_400)
{
    struct itest_node n;
    struct sse_client c;
    struct itest_resp r;
    char *p = subs_path(256, 0);

    itest_node_start(&n, "workers=2");
    sse_open(&c, &n, p, NULL);
    cr_assert_eq(sse_wait_events(&c, 1, 10000), 1, "status %d", c.status);
    cr_assert_str_eq(c.ev[0].event, "open");
    cr_assert_str_eq(c.ev[0].data, "{\"subs\":256}");
    sse_take(&c, 1);
    push_range(&n, "s", "0", 0, 1, 1);
    push_range(&n, "s", "255", 1, 2, 1);
    push_range(&n, "s", "128", 2, 3, 1);
    ns_in_order(&c, 0, 3);
    cr_assert_leq(strlen(c.last_id), 512);
    sse_close(&c);
    free(p);
    p = subs_path(257, 1);
    cr_assert_eq(itest_get(&n, &r, "%s", p), 400);
    itest_assert_error(&r, 400, "ephemeral_bad_request", "subs",
                       "257 subscriptions");
    cr_assert(strstr(itest_jstr(r.json, "error"), "stream_max_subs (256)"),
              "%s", r.body);
    itest_resp_free(&r);
    free(p);
    wait_metric(&n, "mayfly_streams", 0);
}

/* README's own way, encodeURIComponent(JSON.stringify(subs)), with
 * ordinary names: 256 pairs ["presence","room-1000"] .. "room-1255" are
 * some 10.5 KB of query, past the 8 KiB URI of other routes: the
 * subscribe route takes 16 KiB (http/edge_head.h), and past that its 414
 * says so. */
Test(stream, stream_max_subs_of_ordinary_names_fit_the_uri)
{
    struct itest_node n;
    struct sse_client c;
    struct itest_resp r;
    size_t cap = 20000, len;
    char *p = malloc(cap);

    cr_assert_not_null(p);
    len = (size_t)snprintf(p, cap, API "/subscribe?from=new&subs=%%5B");
    for (int i = 0; i < 256; i++)
        len += (size_t)snprintf(p + len, cap - len,
                                "%s%%5B%%22presence%%22%%2C%%22room-%d%%22%%5D",
                                i ? "%2C" : "", 1000 + i);
    len += (size_t)snprintf(p + len, cap - len, "%%5D");
    cr_assert_gt(len, 8192, "the list is not past the other routes' URI");
    itest_node_start(&n, "workers=2");
    sse_open(&c, &n, p, NULL);
    cr_assert_eq(sse_wait_events(&c, 1, 10000), 1, "status %d", c.status);
    cr_assert_eq(c.status, 200);
    cr_assert_str_eq(c.ev[0].event, "open");
    cr_assert_str_eq(c.ev[0].data, "{\"subs\":256}");
    sse_take(&c, 1);
    push_range(&n, "presence", "room-1000", 0, 1, 1);
    push_range(&n, "presence", "room-1255", 1, 2, 1);
    ns_in_order(&c, 0, 2);
    sse_close(&c);

    /* past 16 KiB: 414, naming the subscribe route's limit (a raw
     * request: the test's own URL buffer stops at 16 KiB) */
    len = (size_t)snprintf(p, cap, "GET " API "/subscribe?queue=q&x=");
    memset(p + len, 'a', 17000 - len);
    snprintf(p + 17000, cap - 17000, " HTTP/1.1\r\nHost: x\r\n\r\n");
    int fd = itest_raw_connect(&n);
    cr_assert_eq(itest_raw_send(fd, p), 0);
    cr_assert_eq(itest_raw_response(fd, &r), 414, "%s", r.body);
    close(fd);
    itest_assert_error(&r, 414, "ephemeral_bad_request", "16384 bytes",
                       "the subscribe route's URI limit");
    itest_resp_free(&r);
    /* other routes keep 8 KiB */
    len = (size_t)snprintf(p, cap, API "/pop?queue=q&x=");
    memset(p + len, 'a', 9000 - len);
    p[9000] = '\0';
    cr_assert_eq(itest_req(&n, "GET", p, NULL, &r), 414, "%s", r.body);
    itest_assert_error(&r, 414, "ephemeral_bad_request", "8192 bytes",
                       "the URI limit");
    itest_resp_free(&r);
    free(p);
    wait_metric(&n, "mayfly_streams", 0);
}

Test(stream, bad_requests_are_400_and_open_nothing)
{
    static const char *const bad[][2] = {
        {API "/subscribe", "queue"},
        {API "/subscribe?queue=q&from=soon", "from"},
        {API "/subscribe?subs=%5B%5D", "subs"},
        {API "/subscribe?subs=%5B%22q%22%5D", "subs"},
        {API "/subscribe?subs=%5B%5B1%5D%5D", "subs"},
        {API "/subscribe?queue=q&subs=%5B%5B%22q%22%5D%5D", "subs"},
        {API "/subscribe?subs=%5B%5B%22q%22%5D,%5B%22q%22,%22p%22%5D%5D",
         "subs"},
        {API "/subscribe?queue=q&lastEventId=1zz", "lastEventId"},
    };
    struct itest_node n;
    struct itest_resp r;

    itest_node_start(&n, "workers=1");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(itest_get(&n, &r, "%s", bad[i][0]), 400, "%s: %ld %s",
                     bad[i][0], r.status, r.body);
        itest_assert_error(&r, 400, "ephemeral_bad_request", bad[i][1],
                           bad[i][0]);
        itest_resp_free(&r);
    }
    cr_assert_eq(itest_get(&n, &r, API "/subscribe?queue=q&partition=%%01"),
                 400);
    itest_assert_error(&r, 400, "invalid_name", "partition", "a bad name");
    itest_resp_free(&r);
    wait_metric(&n, "mayfly_streams", 0);
}

Test(stream, past_stream_max_is_503_with_retry_after)
{
    struct itest_node n;
    struct sse_client a, b, c;
    struct itest_resp r;

    itest_node_start(&n, "workers=2 stream_max=2");
    open_stream(&a, &n, API "/subscribe?queue=m", NULL);
    open_stream(&b, &n, API "/subscribe?queue=m", NULL);
    cr_assert_eq(itest_get(&n, &r, API "/subscribe?queue=m"), 503);
    cr_assert_neq(r.retry_after[0], '\0', "Retry-After");
    cr_assert(strstr(r.body, "stream_max"), "%s", r.body);
    itest_resp_free(&r);
    sse_close(&a);
    wait_metric(&n, "mayfly_streams", 1);
    open_stream(&c, &n, API "/subscribe?queue=m", NULL);
    sse_close(&b);
    sse_close(&c);
}

/* Presence member streams refused after the token check (400, 403, 413),
 * stream_max + 1 of each kind: each gives its slot back, so the node
 * still takes stream_max good streams and the gauge reads them. */
Test(stream, refused_presence_streams_give_their_slot_back)
{
    static const char *const toks[][2] = {
        {"all", "tenant=a subscribe=* presence=* read=*"},
        {"nopres", "tenant=a subscribe=* read=*"},
    };
    static const char *const bad[][3] = {
        {"presence=r&member=a&data=notjson", "all", "400"},
        {"presence=r", "all", "400"},
        {"presence=%01&member=a", "all", "400"},
        {"presence=r&member=a", "nopres", "403"},
        {"presence=r&member=a&data=", "all", "413"}, /* + "big" */
    };
    enum { MAX = 2 };
    struct itest_node n;
    struct itest_resp r;
    struct sse_client good[MAX];
    char dir[256], file[300], opts[400], path[1600], big[1100 + 1];

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    itest_test_dir(dir, sizeof(dir));
    itest_token_file(dir, toks, 2, ~0u, file, sizeof(file));
    snprintf(opts, sizeof(opts), "workers=1 stream_max=%d auth_file=%s", MAX,
             file);
    itest_node_start(&n, opts);
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        for (int i = 0; i <= MAX; i++) {
            snprintf(path, sizeof(path),
                     API "/subscribe?%s%s%s%s&access_token=%s", bad[k][0],
                     k == 4 ? "%22" : "", k == 4 ? big : "",
                     k == 4 ? "%22" : "", bad[k][1]);
            cr_assert_eq(itest_get(&n, &r, "%s", path), atol(bad[k][2]),
                         "%s: %ld %s", bad[k][0], r.status, r.body);
            itest_resp_free(&r);
        }
    wait_metric(&n, "mayfly_streams", 0);
    for (int i = 0; i < MAX; i++) {
        snprintf(path, sizeof(path),
                 API "/subscribe?presence=r&member=m%d&access_token=all", i);
        open_stream(&good[i], &n, path, NULL);
    }
    cr_assert_eq(metric(&n, "mayfly_streams"), MAX);
    for (int i = 0; i < MAX; i++)
        sse_close(&good[i]);
    wait_metric(&n, "mayfly_streams", 0);
}

/* Every client's answer head is in. */
static int
all_answered(void *arg)
{
    struct sse_client *cs = arg;

    for (int i = 0; i < 16; i++)
        if (cs[i].status == 0)
            return 0;
    return 1;
}

/* Many streams at once on two workers: exactly stream_max open, whichever
 * worker takes each; the others 503 with Retry-After. */
Test(stream, stream_max_is_exact_across_workers)
{
    enum { N = 16, MAX = 3 };
    struct itest_node n;
    struct sse_client cs[N], *p[N];
    int ok = 0, full = 0;

    itest_node_start(&n, "workers=2 stream_max=3");
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            p[i] = &cs[i];
            sse_open(&cs[i], &n, API "/subscribe?queue=x", NULL);
        }
        cr_assert(sse_poll(p, N, 20000, all_answered, cs), "answers");
        ok = full = 0;
        for (int i = 0; i < N; i++) {
            ok += cs[i].status == 200;
            if (cs[i].status == 503) {
                full++;
                cr_assert(strcasestr(cs[i].head, "Retry-After:") != NULL, "%s",
                          cs[i].head);
            }
        }
        cr_assert_eq(ok, MAX, "%d streams open of stream_max %d", ok, MAX);
        cr_assert_eq(full, N - MAX);
        cr_assert_eq(metric(&n, "mayfly_streams"), MAX);
        for (int i = 0; i < N; i++)
            sse_close(&cs[i]);
        wait_metric(&n, "mayfly_streams", 0);
    }
}

Test(stream, an_idle_stream_gets_keepalive_comments)
{
    struct itest_node n;
    struct sse_client c;

    itest_node_start(&n, "workers=1 stream_keepalive_s=1");
    open_stream(&c, &n, API "/subscribe?queue=k", NULL);
    cr_assert_eq(sse_wait_events(&c, 1, 10000), 1);
    cr_assert_str_eq(c.ev[0].event, ":");
    cr_assert_str_eq(c.ev[0].data, "keepalive");
    sse_close(&c);
}

Test(stream, a_drain_ends_streams_with_retry)
{
    struct itest_node n;
    struct sse_client c;

    itest_node_start(&n, "workers=2");
    open_stream(&c, &n, API "/subscribe?queue=d&partition=p", NULL);
    cr_assert_eq(kill(n.pid, SIGTERM), 0);
    cr_assert(sse_wait_closed(&c, 20000), "the stream outlived the drain");
    cr_assert_geq(c.nev, 1);
    cr_assert_str_eq(c.ev[c.nev - 1].event, "retry");
    cr_assert_str_eq(c.ev[c.nev - 1].data, "1000");
    cr_assert_eq(itest_node_wait_exit(&n, 20000), 0);
    sse_close(&c);
}

/* ---- tokens --------------------------------------------------------------- */

/* mint - an HS256 token: exp in exp_in seconds, then the claims rest. */
static char *
mint(const char *secret, long exp_in, const char *rest)
{
    char claims[1024];
    jwt_t *j = NULL;
    char *out;

    snprintf(claims, sizeof(claims), "{\"exp\": %lld%s}",
             (long long)time(NULL) + exp_in, rest);
    cr_assert_eq(jwt_new(&j), 0);
    cr_assert_eq(jwt_add_grants_json(j, claims), 0, "%s", claims);
    cr_assert_eq(jwt_set_alg(j, JWT_ALG_HS256, (const unsigned char *)secret,
                             (int)strlen(secret)),
                 0);
    out = jwt_encode_str(j);
    cr_assert_not_null(out);
    jwt_free(j);
    return out;
}

/* jwt_node - a node with jwt_secret_file holding SECRET. */
static void
jwt_node(struct itest_node *n)
{
    char dir[256], path[300], opts[400];
    FILE *f;

    itest_test_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/jwt.secret", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fprintf(f, "%s\n", SECRET);
    fclose(f);
    snprintf(opts, sizeof(opts), "workers=2 jwt_secret_file=%s", path);
    itest_node_start(n, opts);
}

/* get_with - GET path with Authorization: Bearer tok (NULL: none). */
static long
get_with(const struct itest_node *n, const char *tok, const char *path,
         struct itest_resp *r)
{
    char h[4200];
    const char *hdrs[] = {h, NULL};

    snprintf(h, sizeof(h), "Authorization: Bearer %s", tok ? tok : "");
    return itest_req_with(n, "GET", path, NULL, tok ? hdrs : NULL, r);
}

#define TWO_ROOMS                                                              \
    API "/subscribe?subs=%5B%5B%22room-1%22%5D,%5B%22room-2%22%5D%5D"

Test(stream, tokens_are_checked_before_anything_opens, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    struct sse_client c;
    char *good = mint(SECRET, 600, ", \"subscribe\": [\"room-*\"]");
    char *one = mint(SECRET, 600, ", \"subscribe\": [\"room-1\"]");
    char *old = mint(SECRET, -10, ", \"subscribe\": [\"room-*\"]");
    char *bad = strdup(good), path[4400], h[4200];
    const char *hdrs[] = {h, NULL};

    bad[strlen(bad) - 2] ^= 1; /* the signature's last bytes */
    jwt_node(&n);
    cr_assert_eq(get_with(&n, NULL, TWO_ROOMS, &r), 401);
    cr_assert_neq(r.www_authenticate[0], '\0');
    itest_resp_free(&r);
    cr_assert_eq(get_with(&n, old, TWO_ROOMS, &r), 401, "expired: %s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(get_with(&n, bad, TWO_ROOMS, &r), 401, "tampered: %s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(get_with(&n, one, TWO_ROOMS, &r), 403, "%s", r.body);
    itest_assert_error(&r, 403, "forbidden", "room-2", "subscribe on room-2");
    cr_assert(strstr(r.body, "subscribe"), "%s", r.body);
    itest_resp_free(&r);
    /* with a group, pop too */
    cr_assert_eq(get_with(&n, good, API "/subscribe?queue=room-1&group=g", &r),
                 403, "%s", r.body);
    itest_resp_free(&r);
    wait_metric(&n, "mayfly_streams", 0);
    /* access_token, as an EventSource sends it */
    snprintf(path, sizeof(path), "%s&access_token=%s", TWO_ROOMS, good);
    open_stream(&c, &n, path, NULL);
    sse_close(&c);
    /* both ways at once */
    snprintf(h, sizeof(h), "Authorization: Bearer %s", good);
    cr_assert_eq(itest_req_with(&n, "GET", path, NULL, hdrs, &r), 400, "%s",
                 r.body);
    itest_resp_free(&r);
    free(good);
    free(one);
    free(old);
    free(bad);
}

Test(stream, a_stream_ends_when_its_token_expires, .timeout = 60)
{
    struct itest_node n;
    struct sse_client c;
    char *tok = mint(SECRET, 2, ", \"subscribe\": [\"room-*\"]");
    char h[4200];
    const char *hdrs[] = {h, NULL};

    jwt_node(&n);
    snprintf(h, sizeof(h), "Authorization: Bearer %s", tok);
    open_stream(&c, &n, API "/subscribe?queue=room-1", hdrs);
    cr_assert(sse_wait_closed(&c, 20000), "the stream outlived its token");
    cr_assert_geq(c.nev, 1);
    cr_assert_str_eq(c.ev[c.nev - 1].event, "error");
    cr_assert_str_eq(c.ev[c.nev - 1].data, "{\"code\":\"token_expired\"}");
    sse_close(&c);
    free(tok);
}
