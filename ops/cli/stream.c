/*
 * stream.c - see stream.h.
 *
 * One connection at a time, through the command's libcurl handle: its
 * write callback feeds the reader of sse.h, which hands each event to
 * cli_stream_event.  An answer other than 200 is gathered instead, to be
 * told as any refusal is.  A stream silent for CLI_STREAM_IDLE_S seconds
 * (the node sends a keepalive every stream_keepalive_s, 15 by default) is
 * taken for lost.
 */
#include "ops/cli/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/cli/cmd.h"
#include "ops/cli/out.h"
#include "ops/cli/sse.h"

/* The delay before reconnecting when the node gave no retry field. */
#define CLI_STREAM_RETRY_MS 1000
/* A stream this long without a byte counts as lost. */
#define CLI_STREAM_IDLE_S 45
/* The most of a refusal's body kept. */
#define CLI_STREAM_REFUSAL_MAX ((size_t)1 << 20)
/* How long a connection may take before the node counts as down. */
#define CLI_STREAM_CONNECT_MS 3000

/* One subscription's state across its connections. */
struct cli_stream {
    struct cli_conn *c;
    const struct cli_globals *g;
    const struct cli_stream_args *a;
    struct cli_sse sse;
    long got; /* messages printed */
    int done; /* stop now, with rc */
    int rc;
    long status;         /* this connection's status; 0: none yet */
    struct cli_answer r; /* a refusal's answer */
};

/* cli_stream_path - the subscribe request (malloc'ed). */
static char *
cli_stream_path(const struct cli_stream_args *a)
{
    const char *key[5] = {a->subs ? "subs" : "queue", "partition", "group",
                          "from", "presence_events"};
    const char *val[5] = {a->subs ? a->subs : a->queue, a->partition, a->group,
                          a->from, a->presence_events};
    char *path = cli_cmd_path("/api/v1/ephemeral/subscribe");
    int first = 1;

    for (int i = 0; i < 5; i++) {
        char *e, *longer;

        if (val[i] == NULL)
            continue;
        e = cli_escape(val[i]);
        longer = cli_cmd_path("%s%c%s=%s", path, first ? '?' : '&', key[i],
                              e ? e : "");
        first = 0;
        free(e);
        free(path);
        path = longer;
    }
    return path;
}

/* cli_stream_message - print one message event's data as sub prints a
 * popped message. */
static void
cli_stream_message(struct cli_stream *s, const char *data)
{
    struct json_object *m = json_tokener_parse(data);

    if (s->g->json)
        printf("%s\n", m != NULL ? cli_json_text(m) : data);
    else
        printf("%s %s\n", cli_jstr(m, "id", ""),
               cli_json_text(cli_jget(m, "payload")));
    fflush(stdout);
    json_object_put(m);
}

/* cli_stream_event - one event of the stream; 1 stops the transfer. */
static int
cli_stream_event(void *arg, const char *event, const char *data, size_t len)
{
    struct cli_stream *s = arg;

    (void)len;
    if (strcmp(event, "message") == 0) {
        cli_stream_message(s, data);
        if (++s->got == s->a->count) {
            s->done = 1;
            s->rc = 0;
            return 1;
        }
    } else if (strcmp(event, "presence") == 0) {
        printf("%s\n", data); /* presence --watch: the event as it came */
        fflush(stdout);
    } else if (strcmp(event, "recovered") == 0) {
        fprintf(stderr, "mayfly: recovered %s\n", data);
    } else if (strcmp(event, "overflow") == 0) {
        fprintf(stderr, "mayfly: the stream fell behind (overflow)\n");
    } else if (strcmp(event, "error") == 0) {
        fprintf(stderr, "mayfly: the node ended the stream: %s\n", data);
        s->done = 1;
        s->rc = 1;
        return 1;
    }
    return 0;
}

/* cli_stream_write - libcurl's write callback: a 200's bytes to the
 * reader, any other answer's into s->r. */
static size_t
cli_stream_write(char *p, size_t size, size_t n, void *arg)
{
    struct cli_stream *s = arg;
    char *grown;

    (void)size; /* always 1 */
    if (s->status == 0)
        curl_easy_getinfo(s->c->curl, CURLINFO_RESPONSE_CODE, &s->status);
    if (s->status == 200)
        return cli_sse_feed(&s->sse, p, n, cli_stream_event, s) == 0 ? n : 0;
    if (n > CLI_STREAM_REFUSAL_MAX - s->r.len ||
        (grown = realloc(s->r.body, s->r.len + n + 1)) == NULL)
        return 0;
    memcpy(grown + s->r.len, p, n);
    s->r.body = grown;
    s->r.len += n;
    s->r.body[s->r.len] = '\0';
    return n;
}

/* cli_stream_once - one connection to url, for as long as it lasts. */
static CURLcode
cli_stream_once(struct cli_stream *s, const char *url)
{
    struct curl_slist *hdrs = NULL;
    CURL *h = s->c->curl;
    char last[CLI_SSE_ID_MAX + 32];
    CURLcode rc;

    cli_answer_free(&s->r);
    cli_sse_restart(&s->sse);
    s->status = 0;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CLI_STREAM_CONNECT_MS);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)CLI_STREAM_IDLE_S);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_stream_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "mayfly-cli");
    hdrs = curl_slist_append(hdrs, "Accept: text/event-stream");
    if (s->sse.last_id[0] != '\0') {
        snprintf(last, sizeof(last), "Last-Event-ID: %s", s->sse.last_id);
        hdrs = curl_slist_append(hdrs, last);
    }
    if (s->c->auth[0] != '\0')
        hdrs = curl_slist_append(hdrs, s->c->auth);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    rc = curl_easy_perform(h);
    if (s->status == 0)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->status);
    curl_slist_free_all(hdrs);
    return rc;
}

/* cli_stream_round - connect to the nodes in turn, from the one that
 * answered last, until one answers; that connection's outcome.  c->err
 * says why none did (s->status 0). */
static CURLcode
cli_stream_round(struct cli_stream *s, const char *path)
{
    struct cli_conn *c = s->c;
    size_t used = 0;
    CURLcode rc = CURLE_COULDNT_CONNECT;

    c->err[0] = '\0';
    for (int i = 0; i < c->nurls && !s->done; i++) {
        int at = (c->current + i) % c->nurls;
        char url[8192];

        snprintf(url, sizeof(url), "%s%s", c->urls[at], path);
        rc = cli_stream_once(s, url);
        if (s->status != 0) {
            c->current = at;
            return rc;
        }
        used += (size_t)snprintf(c->err + used, sizeof(c->err) - used,
                                 "%s%s: %s", used ? "; " : "", c->urls[at],
                                 curl_easy_strerror(rc));
        used = used < sizeof(c->err) ? used : sizeof(c->err) - 1;
    }
    return rc;
}

/* cli_stream_sleep - wait ms milliseconds. */
static void
cli_stream_sleep(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* cli_stream_sub - see stream.h. */
int
cli_stream_sub(struct cli_conn *c, const struct cli_globals *g,
               const struct cli_stream_args *a)
{
    struct cli_stream s = {.c = c, .g = g, .a = a};
    char *path = cli_stream_path(a);
    int opened = 0;

    cli_sse_init(&s.sse);
    while (!s.done) {
        CURLcode rc = cli_stream_round(&s, path);
        long wait = s.sse.retry_ms >= 0 ? s.sse.retry_ms : CLI_STREAM_RETRY_MS;

        if (s.done)
            break;
        if (s.status == 200) {
            opened = 1;
            fprintf(stderr, "mayfly: stream lost (%s); resuming in %ld ms\n",
                    rc == CURLE_OK ? "the node ended it"
                                   : curl_easy_strerror(rc),
                    wait);
            /* A node that ends a stream itself (its SIGTERM, an overflow)
             * means the client to come back elsewhere if it can. */
            if (rc == CURLE_OK)
                c->current = (c->current + 1) % c->nurls;
        } else if (s.status == 503 || (s.status == 0 && opened)) {
            /* A node refusing for now, or none answering after the stream
             * had been open: try again, the next node first. */
            fprintf(stderr, "mayfly: %s; trying again in %ld ms\n",
                    s.status ? "the node is unavailable (503)" : c->err, wait);
            c->current = (c->current + 1) % c->nurls;
        } else {
            s.r.status = s.status;
            s.r.json = s.r.len ? json_tokener_parse(s.r.body) : NULL;
            s.rc = cli_refused(c, &s.r);
            break;
        }
        cli_stream_sleep(wait);
    }
    cli_answer_free(&s.r);
    cli_sse_free(&s.sse);
    free(path);
    return s.rc;
}
