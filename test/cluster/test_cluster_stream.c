/*
 * test_cluster_stream.c - streams across three nodes (SPEC §11): a stream
 * through node 0 on rooms owned by each of the three gets every push made
 * through any node, in order per room; dropped, it resumes through
 * another node from its cursor with nothing missed or repeated; a whole
 * queue streams the partitions of every node; a group stream through one
 * node shares its group's messages with a pop through another; an owner
 * that stops (SIGTERM) ends the stream with retry:, and the resume through
 * any node takes its rooms up where their new owners hold them (the
 * hand-over kept their places), as it does when the owner comes back and
 * takes them again; a client that comes back at once, while the rings
 * are still on their way, is told to retry until they are there, then
 * resumes with nothing missed; one killed (-9) leaves its rooms missed;
 * a watch that carries nothing for longer than its idle bound lives on.
 * member_ttl_ms is long so that membership cannot flap on a busy machine.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/cluster/suite.h"
#include "test/integration/node.h"
#include "test/integration/sse.h"

#define API    "/api/v1/ephemeral"
#define NPARTS 24

static struct cl c;

/* keepalives every second: a quiet watch is seen to live on */
CL_SUITE(cluster_stream, &c, "member_ttl_ms=60000 stream_keepalive_s=1",
         CL_SUITE_VIEW, .timeout = 240);

/* push_n - payloads {"n": from..to-1} to queue/part through node i, one a
 * push. */
static void
push_n(int i, const char *queue, const char *part, int from, int to)
{
    for (int n = from; n < to; n++) {
        struct itest_resp r;
        char p[32];
        snprintf(p, sizeof(p), "[{\"n\":%d}]", n);
        itest_push_ok(&c.node[i], &r, queue, part, p, 1);
        itest_resp_free(&r);
    }
}

/* rooms - partitions of queue owned by nodes 0, 1 and 2, into r[i]. */
static void
rooms(const char *queue, char r[3][16])
{
    for (int i = 0; i < 3; i++)
        cl_part_owned_by(queue, i, NPARTS, r[i], sizeof(r[i]));
}

/* subs_path - a stream on the three rooms of queue, with more. */
static void
subs_path(char *out, size_t len, const char *queue, char r[3][16],
          const char *more)
{
    snprintf(out, len,
             API "/subscribe?subs=[[%%22%s%%22,%%22%s%%22],[%%22%s%%22,%%22%s"
                 "%%22],[%%22%s%%22,%%22%s%%22]]%s",
             queue, r[0], queue, r[1], queue, r[2], more);
}

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

/* open_on - a stream on node i; its open event taken. */
static void
open_on(struct sse_client *s, int i, const char *path,
        const char *const *headers)
{
    sse_open(s, &c.node[i], path, headers);
    cr_assert_geq(sse_wait_events(s, 1, 20000), 1, "%s: status %d", path,
                  s->status);
    cr_assert_eq(s->status, 200);
    if (resuming(path, headers)) {
        /* a resume sends first one recovered (SPEC §11), then open: the
         * open is taken, recovered left first for the test to read */
        cr_assert_str_eq(s->ev[0].event, "recovered");
        cr_assert_geq(sse_wait_events(s, 2, 20000), 2, "%s: no open", path);
        cr_assert_str_eq(s->ev[1].event, "open");
        free(s->ev[1].data);
        memmove(s->ev + 1, s->ev + 2, (s->nev - 2) * sizeof(*s->ev));
        s->nev--;
        return;
    }
    cr_assert_str_eq(s->ev[0].event, "open");
    sse_take(s, 1);
}

/* Per room, the next payload a stream must get. */
struct want {
    struct sse_client *s;
    char (*r)[16];
    int next[3], upto[3];
};

/* in_order - every message of w->s is its room's next (taken); 1 once
 * each room has all up to w->upto. */
static int
in_order(void *arg)
{
    struct want *w = arg;

    for (size_t k = 0; k < w->s->nev; k++) {
        const struct sse_event *e = &w->s->ev[k];
        if (strcmp(e->event, ":") == 0 || strcmp(e->event, "retry") == 0)
            continue; /* a keepalive; the end of a stream */
        cr_assert_str_eq(e->event, "message", "%s: %s", e->event, e->data);
        struct json_object *o = json_tokener_parse(e->data);
        cr_assert_not_null(o, "%s", e->data);
        const char *p = itest_jstr(o, "partition");
        int room = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(p, w->r[i]) == 0)
                room = i;
        cr_assert_geq(room, 0, "a message of another partition: %s", e->data);
        cr_assert_eq(itest_jint(o, "payload.n"), w->next[room],
                     "room %s: %s, expected n %d", p, e->data, w->next[room]);
        w->next[room]++;
        json_object_put(o);
    }
    sse_take(w->s, w->s->nev);
    return w->next[0] >= w->upto[0] && w->next[1] >= w->upto[1] &&
           w->next[2] >= w->upto[2];
}

/* wait_rooms - w's stream gets room i's messages up to upto[i]. */
static void
wait_rooms(struct want *w, int a, int b, int d)
{
    w->upto[0] = a, w->upto[1] = b, w->upto[2] = d;
    cr_assert(sse_poll(&w->s, 1, 30000, in_order, w),
              "rooms at %d, %d, %d of %d, %d, %d", w->next[0], w->next[1],
              w->next[2], a, b, d);
}

/* wait_upto - w's stream gets each room's messages up to upto. */
static void
wait_upto(struct want *w, int upto)
{
    wait_rooms(w, upto, upto, upto);
}

Test(cluster_stream, rooms_of_three_owners_through_one_node_resume_anywhere)
{
    char r[3][16], path[1024], hdr[700], last[600];
    const char *hdrs[] = {hdr, NULL};
    struct sse_client s;
    struct want w = {.s = &s};

    rooms("cs", r);
    w.r = r;
    subs_path(path, sizeof(path), "cs", r, "");
    open_on(&s, 0, path, NULL);
    for (int i = 0; i < 3; i++)
        push_n((i + 1) % 3, "cs", r[i], 0, 5);
    wait_upto(&w, 5);
    snprintf(last, sizeof(last), "%s", s.last_id);
    sse_close(&s);
    for (int i = 0; i < 3; i++)
        push_n((i + 2) % 3, "cs", r[i], 5, 9);
    /* the browser's reconnect, through another node */
    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", last);
    open_on(&s, 1, path, hdrs);
    cr_assert_geq(sse_wait_events(&s, 1, 20000), 1);
    cr_assert_str_eq(s.ev[0].event, "recovered", "%s", s.ev[0].data);
    cr_assert_str_eq(s.ev[0].data, "{\"partitions\":3,\"missed\":[]}");
    sse_take(&s, 1);
    wait_upto(&w, 9);
    for (int i = 0; i < 3; i++)
        push_n(i, "cs", r[i], 9, 10);
    wait_upto(&w, 10); /* and nothing again before them */
    sse_close(&s);
}

Test(cluster_stream, a_whole_queue_streams_every_nodes_partitions)
{
    char r[3][16];
    struct sse_client s;
    struct want w = {.s = &s};

    rooms("cw", r);
    w.r = r;
    open_on(&s, 2, API "/subscribe?queue=cw", NULL);
    for (int i = 0; i < 3; i++)
        push_n(i, "cw", r[i], 0, 3);
    wait_upto(&w, 3);
    sse_close(&s);
}

Test(cluster_stream, a_group_stream_shares_with_a_pop_through_another_node)
{
    enum { N = 60 };
    char r[3][16], path[256], seen[N] = {0};
    struct sse_client s;
    struct itest_resp resp;
    int got = 0;

    rooms("cg", r);
    snprintf(path, sizeof(path),
             API "/subscribe?queue=cg&partition=%s&group=g&from=all", r[2]);
    open_on(&s, 0, path, NULL);
    push_n(1, "cg", r[2], 0, N);
    int64_t end = itest_now_ms() + 30000;
    while (got < N && itest_now_ms() < end) {
        cr_assert_eq(itest_get(&c.node[1], &resp,
                               API "/pop?queue=cg&partition=%s&group=g"
                                   "&batch=3&autoAck=true",
                               r[2]),
                     200);
        for (int k = 0; k < itest_jlen(resp.json, "messages"); k++) {
            char key[64];
            snprintf(key, sizeof(key), "messages.%d.payload.n", k);
            int64_t n = itest_jint(resp.json, key);
            cr_assert(n >= 0 && n < N && !seen[n], "popped %lld twice",
                      (long long)n);
            seen[n] = 1, got++;
        }
        itest_resp_free(&resp);
        sse_wait_events(&s, 1, 50);
        for (size_t k = 0; k < s.nev; k++) {
            if (strcmp(s.ev[k].event, "message") != 0)
                continue;
            struct json_object *o = json_tokener_parse(s.ev[k].data);
            int64_t n = itest_jint(o, "payload.n");
            cr_assert(n >= 0 && n < N && !seen[n], "streamed %lld twice",
                      (long long)n);
            seen[n] = 1, got++;
            json_object_put(o);
        }
        sse_take(&s, s.nev);
    }
    cr_assert_eq(got, N, "%d of %d delivered", got, N);
    sse_close(&s);
}

Test(cluster_stream,
     an_owner_stopping_ends_the_stream_and_its_rooms_resume_where_they_went)
{
    char r[3][16], path[1024], hdr[700];
    const char *hdrs[] = {hdr, NULL};
    struct sse_client s;
    struct want w = {.s = &s};

    rooms("cx", r);
    w.r = r;
    subs_path(path, sizeof(path), "cx", r, "");
    open_on(&s, 0, path, NULL);
    for (int i = 0; i < 3; i++)
        push_n(0, "cx", r[i], 0, 3);
    wait_upto(&w, 3);
    cr_assert_eq(cl_stop(&c, 2, 30000), 0);
    cr_assert(sse_wait_closed(&s, 30000), "the stream outlived node 2");
    cr_assert_str_eq(s.ev[s.nev - 1].event, "retry");
    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", s.last_id);
    sse_close(&s);
    cl_wait_view(&c, 3);
    open_on(&s, 1, path, hdrs);
    cr_assert_geq(sse_wait_events(&s, 1, 20000), 1);
    cr_assert_str_eq(s.ev[0].event, "recovered");
    cr_assert_str_eq(s.ev[0].data, "{\"partitions\":3,\"missed\":[]}");
    sse_take(&s, 1);
    push_n(1, "cx", r[0], 3, 4);
    push_n(1, "cx", r[1], 3, 4);
    push_n(0, "cx", r[2], 3, 4); /* the moved room goes on where it was */
    wait_rooms(&w, 4, 4, 4);
    sse_close(&s);
}

/* b_rooms - three partitions of queue node 1 owns, the first two of
 * which go to node 0 and node 2 when node 1 leaves. */
static void
b_rooms(const char *queue, char r[3][16])
{
    int set[3] = {0, 0, 0};
    char p[16];

    for (int k = 0; k < 400 && !(set[0] && set[1] && set[2]); k++) {
        snprintf(p, sizeof(p), "p%d", k);
        if (cl_owner(queue, p, CL_ALL) != 1)
            continue;
        int next = cl_owner(queue, p, CL_ALL & ~2u);
        int slot = next == 0 && !set[0] ? 0 : next == 2 && !set[1] ? 1 : 2;
        if (set[slot])
            continue;
        set[slot] = 1;
        snprintf(r[slot], sizeof(r[0]), "%s", p);
    }
    cr_assert(set[0] && set[1] && set[2],
              "node 1 owns too few partitions of %s", queue);
}

/* wait_pending - node i holds n messages of queue's partition part. */
static void
wait_pending(int i, const char *queue, const char *part, int n)
{
    int64_t end = itest_now_ms() + 30000, v = -1;

    while (itest_now_ms() < end) {
        struct itest_resp r;
        long st =
            itest_get(&c.node[i], &r, API "/queues/%s/depth?scope=node", queue);
        struct json_object *parts =
            st == 200 ? itest_jget(r.json, "partitions") : NULL;
        for (int k = 0; parts && k < (int)json_object_array_length(parts);
             k++) {
            struct json_object *e = json_object_array_get_idx(parts, k);
            if (strcmp(itest_jstr(e, "partition"), part) == 0)
                v = itest_jint(e, "pending");
        }
        itest_resp_free(&r);
        if (v == n)
            return;
        itest_sleep_ms(100);
    }
    cr_assert_fail("node %d holds %lld messages of %s, not %d", i, (long long)v,
                   part, n);
}

/* resume_on - a stream on node i resumed from cursor last: nothing
 * missed, then each room's messages from w->next on. */
static void
resume_on(struct sse_client *s, int i, const char *path, const char *last)
{
    char hdr[700];
    const char *hdrs[] = {hdr, NULL};

    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", last);
    open_on(s, i, path, hdrs);
    cr_assert_geq(sse_wait_events(s, 1, 20000), 1);
    cr_assert_str_eq(s->ev[0].event, "recovered", "%s", s->ev[0].data);
    cr_assert_str_eq(s->ev[0].data, "{\"partitions\":3,\"missed\":[]}",
                     "through node %d with %s", i, last);
    sse_take(s, 1);
}

Test(cluster_stream, a_hand_over_keeps_the_places_of_a_dropped_stream)
{
    char r[3][16], path[1024], last[600];
    struct sse_client s;
    struct want w = {.s = &s};

    b_rooms("ch", r);
    w.r = r;
    subs_path(path, sizeof(path), "ch", r, "");
    open_on(&s, 0, path, NULL);
    for (int i = 0; i < 3; i++)
        push_n(i, "ch", r[i], 0, 5);
    wait_upto(&w, 5);
    snprintf(last, sizeof(last), "%s", s.last_id);
    sse_close(&s);
    for (int i = 0; i < 3; i++) /* while the client is away */
        push_n((i + 1) % 3, "ch", r[i], 5, 8);
    cr_assert_eq(cl_stop(&c, 1, 30000), 0);
    cl_wait_view(&c, CL_ALL & ~2u);
    for (int i = 0; i < 3; i++)
        wait_pending(cl_owner("ch", r[i], CL_ALL & ~2u), "ch", r[i], 8);
    for (int i = 0; i < 3; i++)
        push_n(i % 2 ? 2 : 0, "ch", r[i], 8, 10);
    /* back through the node it used, then through another */
    for (int via = 0, top = 10; via < 3; via += 2, top++) {
        struct want v = {.s = &s, .r = r, .next = {5, 5, 5}};
        resume_on(&s, via, path, last);
        wait_upto(&v, top);
        for (int i = 0; i < 3; i++)
            push_n(2 - via, "ch", r[i], top, top + 1);
        wait_upto(&v, top + 1); /* and nothing again before them */
        sse_close(&s);
    }
}

Test(cluster_stream, a_stream_follows_its_rooms_away_and_back_to_a_restart)
{
    char r[3][16], path[1024], last[600];
    struct sse_client s;
    struct want w = {.s = &s};

    b_rooms("cb", r);
    w.r = r;
    subs_path(path, sizeof(path), "cb", r, "");
    open_on(&s, 0, path, NULL);
    for (int i = 0; i < 3; i++)
        push_n(i, "cb", r[i], 0, 4);
    wait_upto(&w, 4);
    /* node 1 stops: the stream ends with retry:, and resumes at once */
    cr_assert_eq(cl_stop(&c, 1, 30000), 0);
    cr_assert(sse_wait_closed(&s, 30000), "the stream outlived node 1");
    snprintf(last, sizeof(last), "%s", s.last_id);
    sse_close(&s);
    cl_wait_view(&c, CL_ALL & ~2u);
    resume_on(&s, 0, path, last);
    for (int i = 0; i < 3; i++)
        push_n(i == 1 ? 2 : i, "cb", r[i], 4, 6);
    wait_upto(&w, 6);
    /* it comes back and takes its rooms again: the same */
    cl_start(&c, 1, "member_ttl_ms=60000 stream_keepalive_s=1");
    cr_assert(sse_wait_closed(&s, 30000), "the stream outlived the move");
    snprintf(last, sizeof(last), "%s", s.last_id);
    sse_close(&s);
    cl_wait_view(&c, CL_ALL);
    for (int i = 0; i < 3; i++)
        wait_pending(1, "cb", r[i], 6);
    for (int i = 0; i < 3; i++)
        push_n(2 - i, "cb", r[i], 6, 8);
    resume_on(&s, 2, path, last);
    wait_upto(&w, 8);
    for (int i = 0; i < 3; i++)
        push_n(1, "cb", r[i], 8, 9);
    wait_upto(&w, 9);
    sse_close(&s);
}

/* push_each - payload n to each room of queue, through nodes 0 and 2 (a
 * push refused while the owners change is sent again). */
static void
push_each(const char *queue, char r[3][16], int n)
{
    for (int i = 0; i < 3; i++) {
        struct itest_resp x;
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"queue\":\"%s\",\"partition\":\"%s\",\"messages\":[{"
                 "\"payload\":{\"n\":%d}}]}",
                 queue, r[i], n);
        cr_assert_eq(cl_call(&c, i % 2 ? 2 : 0, "POST", API "/push", body,
                             20000, 50, &x),
                     201, "%s", x.body);
        itest_resp_free(&x);
    }
}

/*
 * The stream is on its rooms' owner, which stops (SIGTERM) under pushes;
 * the client comes back at once through another node, and again at once
 * each time it is told retry:, while the rings are still on their way
 * (a push in flight keeps the node's workers, and so its hand-over,
 * back).  It is not resumed before they are there: then nothing missed,
 * and every room goes on after the last message it had, once each.
 */
Test(cluster_stream, a_resume_while_the_rings_are_on_their_way_waits_for_them)
{
    char r[3][16], path[1024], last[600], hdr[700];
    const char *hdrs[] = {hdr, NULL};
    const char *slow = "{\"queue\":\"cw-slow\",\"messages\":[{\"payload\":1}]}";
    struct sse_client s;
    struct want w = {.s = &s};
    int n = 4, retries = 0, fd = -1;

    b_rooms("cw", r);
    w.r = r;
    subs_path(path, sizeof(path), "cw", r, "");
    open_on(&s, 1, path, NULL);
    for (int i = 0; i < 3; i++)
        push_n(i, "cw", r[i], 0, n);
    wait_upto(&w, n);
    fd = cl_held_push(&c, 1, slow);
    int64_t t_term = itest_now_ms();
    kill(c.node[1].pid, SIGTERM);
    cr_assert(sse_wait_closed(&s, 30000), "the stream outlived SIGTERM");
    snprintf(last, sizeof(last), "%s", s.last_id);
    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", last);
    sse_close(&s);
    for (;;) {
        cr_assert_lt(itest_now_ms(), t_term + 30000, "never resumed");
        /* under pushes, once the others route node 1's rooms elsewhere */
        if (n < 20 && itest_node_log_contains(&c.node[0], "is leaving") &&
            itest_node_log_contains(&c.node[2], "is leaving"))
            push_each("cw", r, n++);
        if (fd >= 0 && itest_now_ms() >= t_term + 1500) {
            /* the rest of the push: node 1's drain goes on */
            struct itest_resp x;
            cr_assert_eq(itest_raw_send(fd, slow + 10), 0);
            /* answered (stored, or refused as draining): done with */
            cr_assert_neq(itest_raw_response(fd, &x), 0);
            itest_resp_free(&x);
            close(fd);
            fd = -1;
        }
        sse_open(&s, &c.node[0], path, hdrs);
        size_t got = sse_wait_events(&s, 1, 20000);
        cr_assert_eq(s.status, 200);
        /* retry: as a whole answer (nothing opened: no event here), or
         * as the end of a stream a watch of which ended */
        if (got > 0 && strcmp(s.ev[0].event, "retry") != 0)
            break;
        cr_assert(got > 0 || s.closed, "nothing came");
        retries++;
        sse_close(&s);
        itest_sleep_ms(10);
    }
    cr_assert_str_eq(s.ev[0].event, "recovered", "%s", s.ev[0].data);
    cr_assert_str_eq(s.ev[0].data, "{\"partitions\":3,\"missed\":[]}",
                     "after %d retries, %lld ms after SIGTERM", retries,
                     (long long)(itest_now_ms() - t_term));
    cr_assert_geq(sse_wait_events(&s, 2, 20000), 2, "no open");
    cr_assert_str_eq(s.ev[1].event, "open");
    sse_take(&s, 2);
    cr_assert_eq(fd, -1, "resumed while node 1's rings were held back");
    struct want v = {.s = &s, .r = r, .next = {4, 4, 4}};
    push_each("cw", r, n++);
    wait_upto(&v, n);
    cr_assert_eq(cl_stop(&c, 1, 30000), 0);
    sse_close(&s);
}

Test(cluster_stream, an_owner_killed_leaves_its_rooms_missed)
{
    char r[3][16], path[1024], last[600], hdr[700], want[300];
    const char *hdrs[] = {hdr, NULL};
    struct sse_client s;
    struct want w = {.s = &s};

    b_rooms("ck", r);
    w.r = r;
    subs_path(path, sizeof(path), "ck", r, "");
    open_on(&s, 0, path, NULL);
    for (int i = 0; i < 3; i++)
        push_n(0, "ck", r[i], 0, 2);
    wait_upto(&w, 2);
    snprintf(last, sizeof(last), "%s", s.last_id);
    sse_close(&s);
    /* killed and back at once (a dead member is seen late here): its
     * rooms' messages are gone with its incarnation */
    cl_kill(&c, 1);
    cl_start(&c, 1, "member_ttl_ms=60000 stream_keepalive_s=1");
    cl_wait_view(&c, CL_ALL);
    snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", last);
    open_on(&s, 0, path, hdrs);
    cr_assert_geq(sse_wait_events(&s, 1, 20000), 1);
    cr_assert_str_eq(s.ev[0].event, "recovered", "%s", s.ev[0].data);
    cr_assert(strstr(s.ev[0].data, "\"partitions\":0,") != NULL, "%s",
              s.ev[0].data);
    for (int i = 0; i < 3; i++) {
        snprintf(want, sizeof(want), "{\"queue\":\"ck\",\"partition\":\"%s\"}",
                 r[i]);
        cr_assert(strstr(s.ev[0].data, want) != NULL, "%s", s.ev[0].data);
    }
    sse_close(&s);
}

/* Keepalives a stream has shown, counted as they are taken. */
struct quiet {
    struct sse_client *s;
    int comments, want;
};

static int
quiet_for(void *arg)
{
    struct quiet *q = arg;

    for (size_t k = 0; k < q->s->nev; k++) {
        cr_assert_str_eq(q->s->ev[k].event, ":", "%s: %s", q->s->ev[k].event,
                         q->s->ev[k].data);
        q->comments++;
    }
    sse_take(q->s, q->s->nev);
    return q->comments >= q->want;
}

Test(cluster_stream, a_quiet_watch_outlives_its_idle_bound)
{
    char r[3][16], path[256];
    struct sse_client s, *one[] = {&s};
    struct quiet q = {.s = &s, .want = 12}; /* 12 s: past 2 x 1 + 5 */
    struct want w = {.s = &s, .r = r, .next = {0, 7, 0}};

    rooms("cq", r);
    snprintf(path, sizeof(path), API "/subscribe?queue=cq&partition=%s", r[1]);
    open_on(&s, 0, path, NULL);
    cr_assert(sse_poll(one, 1, 60000, quiet_for, &q), "%d keepalives",
              q.comments);
    push_n(2, "cq", r[1], 7, 8);
    wait_rooms(&w, 0, 8, 0);
    sse_close(&s);
}

/* stream_events - mayfly_stream_events_total summed over the nodes. */
static double
stream_events(void)
{
    double sum = 0;

    for (int i = 0; i < CL_NODES; i++) {
        double v;
        cr_assert_eq(itest_metric(&c.node[i], "mayfly_stream_events_total", &v),
                     0, "node %d", i);
        sum += v;
    }
    return sum;
}

Test(cluster_stream, a_relayed_event_is_counted_once)
{
    char r[3][16], path[1024];
    struct sse_client s;
    struct want w = {.s = &s};

    rooms("cm", r);
    w.r = r;
    subs_path(path, sizeof(path), "cm", r, "");
    open_on(&s, 0, path, NULL);
    for (int i = 0; i < 3; i++)
        push_n((i + 1) % 3, "cm", r[i], 0, 4);
    wait_upto(&w, 4);
    cr_assert_eq(stream_events(), 12, "12 events sent to the client");
    sse_close(&s);
}
