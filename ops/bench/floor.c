/*
 * floor.c - the least a libmicrohttpd server can do for the rpc scenario.
 *
 * The rpc target compares mayfly's round trips with Redis's and NATS's,
 * and each of mayfly's round trips is three to four HTTP requests. This
 * server answers exactly those requests (push, long-poll pop, ack) with
 * the HTTP library mayfly uses (libmicrohttpd) and nothing else: no JSON
 * parser (it finds the few fields the bench sends), one process,
 * libmicrohttpd's own pool of two epoll threads, queues in a hash table under
 * one mutex, a parked pop suspended and resumed by the push that feeds it. No
 * groups, leases, bounds, ids that survive anything, shared memory or cluster.
 * Its rpc row is the floor under mayfly's: what the protocol costs on this
 * machine with this HTTP library before a broker does any work.
 *
 * It parses what the bench sends and answers 400 to anything else.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "ops/bench/bench.h"

#define FLOOR_BUCKETS  4096
#define FLOOR_BODY_MAX (1 << 20)

struct floor_msg {
    struct floor_msg *next;
    unsigned long id;
    char *payload; /* the payload's JSON text */
};

struct floor_req;

/* A queue: its messages and its parked pops, both FIFO. */
struct floor_queue {
    struct floor_queue *next; /* hash chain */
    struct floor_msg *head, **tail;
    struct floor_req *wait_head, **wait_tail;
    char name[];
};

/* One request: its body as it arrives; a parked pop's queue, batch and
 * deadline, and the answer the push that resumes it leaves. */
struct floor_req {
    struct floor_req *wait_next;
    struct MHD_Connection *conn;
    char *body;
    size_t len;
    int parked;
    int batch;
    uint64_t deadline_ns;
    char *answer; /* set by whoever resumes it (NULL: answer empty) */
    int resumed;
};

static pthread_mutex_t floor_lock = PTHREAD_MUTEX_INITIALIZER;
static struct floor_queue *floor_table[FLOOR_BUCKETS];
static unsigned long floor_next_id;
static int floor_stopping; /* expire(1) ran: a pop no longer parks */

static unsigned
floor_hash(const char *s)
{
    unsigned h = 2166136261u;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h % FLOOR_BUCKETS;
}

/* The queue named name, made when make is set; under floor_lock. */
static struct floor_queue *
floor_queue(const char *name, int make)
{
    struct floor_queue **pp = &floor_table[floor_hash(name)], *q;
    size_t n = strlen(name);

    for (q = *pp; q != NULL; q = q->next)
        if (strcmp(q->name, name) == 0)
            return q;
    if (!make || (q = calloc(1, sizeof(*q) + n + 1)) == NULL)
        return NULL;
    memcpy(q->name, name, n + 1);
    q->tail = &q->head;
    q->wait_tail = &q->wait_head;
    q->next = *pp;
    *pp = q;
    return q;
}

/* Forget q once it holds nothing and nobody waits on it, as mayfly
 * collects an inbox; under floor_lock. */
static void
floor_queue_drop_idle(struct floor_queue *q)
{
    struct floor_queue **pp = &floor_table[floor_hash(q->name)];

    if (q->head != NULL || q->wait_head != NULL)
        return;
    while (*pp != q)
        pp = &(*pp)->next;
    *pp = q->next;
    free(q);
}

/* Take up to batch messages of q into a pop's answer; under floor_lock. */
static char *
floor_take(struct floor_queue *q, int batch)
{
    struct bench_buf b = {0};
    struct floor_msg *m;

    bench_buf_printf(&b, "{\"queue\":\"%s\",\"messages\":[", q->name);
    for (int i = 0; i < batch && (m = q->head) != NULL; i++) {
        q->head = m->next;
        if (q->head == NULL)
            q->tail = &q->head;
        bench_buf_printf(&b,
                         "%s{\"id\":\"f:%lu\",\"partition\":\"Default\","
                         "\"payload\":%s,\"attempts\":1}",
                         i ? "," : "", m->id, m->payload);
        free(m->payload);
        free(m);
    }
    bench_buf_str(&b, "]}");
    return b.p;
}

/* Hand q's messages to its parked pops, resuming each; under floor_lock. */
static void
floor_feed(struct floor_queue *q)
{
    struct floor_req *r;

    while (q->head != NULL && (r = q->wait_head) != NULL) {
        q->wait_head = r->wait_next;
        if (q->wait_head == NULL)
            q->wait_tail = &q->wait_head;
        r->answer = floor_take(q, r->batch);
        r->resumed = 1;
        MHD_resume_connection(r->conn);
    }
}

static enum MHD_Result
floor_answer(struct MHD_Connection *conn, unsigned status, char *body)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        strlen(body), body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result rc;

    MHD_add_response_header(resp, "Content-Type", "application/json");
    rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result
floor_bad(struct MHD_Connection *conn, const char *why)
{
    struct bench_buf b = {0};

    bench_buf_printf(&b, "{\"error\":\"floor: %s\"}", why);
    return floor_answer(conn, MHD_HTTP_BAD_REQUEST, b.p);
}

/* POST .../push: {"queue", "messages": [{"payload": "..."}...]} -> 201.
 * Payloads are strings, as the bench sends them. */
static enum MHD_Result
floor_push(struct MHD_Connection *conn, struct floor_req *r)
{
    struct bench_buf ans = {0};
    struct floor_queue *q;
    const char *s;
    size_t pos = 0, sl, n = 0;
    char name[256];

    if (r->body == NULL ||
        bench_json_str(r->body, r->len, &pos, "queue", &s, &sl) != 0 ||
        sl == 0 || sl >= sizeof(name))
        return floor_bad(conn, "push wants queue");
    memcpy(name, s, sl);
    name[sl] = '\0';
    bench_buf_str(&ans, "{\"ids\":[");
    pos = 0;
    pthread_mutex_lock(&floor_lock);
    q = floor_queue(name, 1);
    while (q != NULL &&
           bench_json_str(r->body, r->len, &pos, "payload", &s, &sl) == 0) {
        struct floor_msg *m = malloc(sizeof(*m));

        if (m == NULL || (m->payload = malloc(sl + 3)) == NULL) {
            free(m);
            break;
        }
        m->payload[0] = '"';
        memcpy(m->payload + 1, s, sl);
        memcpy(m->payload + 1 + sl, "\"", 2);
        m->id = ++floor_next_id;
        m->next = NULL;
        *q->tail = m;
        q->tail = &m->next;
        bench_buf_printf(&ans, "%s\"f:%lu\"", n++ ? "," : "", m->id);
    }
    if (q != NULL) {
        floor_feed(q);
        floor_queue_drop_idle(q);
    }
    pthread_mutex_unlock(&floor_lock);
    bench_buf_printf(&ans, "],\"pushed\":%zu}", n);
    return floor_answer(conn, MHD_HTTP_CREATED, ans.p);
}

/* GET .../pop?queue=&batch=&wait=&timeout= -> 200, parked when empty. */
static enum MHD_Result
floor_pop(struct MHD_Connection *conn, struct floor_req *r)
{
    const char *name, *v;
    struct floor_queue *q;
    char *ans = NULL;
    int wait;
    long timeout;

    if (r->parked) {
        /* Resumed: by a push (answer set) or by the deadline. */
        if (!r->resumed)
            return MHD_YES;
        ans = r->answer;
        r->answer = NULL;
        if (ans == NULL) {
            struct bench_buf b = {0};

            bench_buf_str(&b, "{\"messages\":[]}");
            ans = b.p;
        }
        return floor_answer(conn, MHD_HTTP_OK, ans);
    }
    name = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "queue");
    if (name == NULL || *name == '\0')
        return floor_bad(conn, "pop wants queue");
    v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "batch");
    r->batch = v ? atoi(v) : 1;
    if (r->batch < 1)
        r->batch = 1;
    v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "wait");
    wait = v != NULL && strcmp(v, "true") == 0;
    v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "timeout");
    timeout = v ? atol(v) : 30000;
    pthread_mutex_lock(&floor_lock);
    q = floor_queue(name, wait);
    if (q != NULL && q->head != NULL) {
        ans = floor_take(q, r->batch);
        floor_queue_drop_idle(q);
    } else if (q != NULL && wait && !floor_stopping) {
        r->parked = 1;
        r->conn = conn;
        r->deadline_ns = bench_now_ns() + (uint64_t)timeout * 1000000u;
        *q->wait_tail = r;
        q->wait_tail = &r->wait_next;
        MHD_suspend_connection(conn);
    }
    pthread_mutex_unlock(&floor_lock);
    if (r->parked)
        return MHD_YES;
    if (ans == NULL) {
        struct bench_buf b = {0};

        bench_buf_printf(&b, "{\"queue\":\"%s\",\"messages\":[]}", name);
        ans = b.p;
    }
    return floor_answer(conn, MHD_HTTP_OK, ans);
}

/* POST .../ack: {"queue", "acks": ["id"...]} -> 200 with a result for
 * each (acks are bare id strings, as the bench sends them). */
static enum MHD_Result
floor_ack(struct MHD_Connection *conn, struct floor_req *r)
{
    const char *p = r->body ? strstr(r->body, "\"acks\"") : NULL, *e;
    struct bench_buf ans = {0};
    int n = 0;

    if (p == NULL || (p = strchr(p + 6, '[')) == NULL)
        return floor_bad(conn, "ack wants acks");
    bench_buf_str(&ans, "{\"results\":[");
    while ((p = strpbrk(p + 1, "\"]")) != NULL && *p == '"' &&
           (e = strchr(p + 1, '"')) != NULL) {
        bench_buf_printf(&ans, "%s{\"id\":%.*s,\"outcome\":\"completed\"}",
                         n++ ? "," : "", (int)(e - p + 1), p);
        p = e;
    }
    bench_buf_str(&ans, "]}");
    return floor_answer(conn, MHD_HTTP_OK, ans.p);
}

/* Answer a request under /api/v1/ephemeral/ once its body is in; a
 * libmicrohttpd access handler's result. */
int
bench_floor_handler(struct MHD_Connection *conn, const char *url,
                    const char *upload, size_t *upload_size, void **req_cls)
{
    struct floor_req *r = *req_cls;
    const char *op = url + strlen(BENCH_FLOOR_PREFIX);

    if (r == NULL) {
        if ((r = calloc(1, sizeof(*r))) == NULL)
            return MHD_NO;
        *req_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        char *nb;

        if (r->len + *upload_size > FLOOR_BODY_MAX ||
            (nb = realloc(r->body, r->len + *upload_size + 1)) == NULL)
            return MHD_NO;
        memcpy(nb + r->len, upload, *upload_size);
        r->body = nb;
        r->len += *upload_size;
        r->body[r->len] = '\0';
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(op, "push") == 0)
        return floor_push(conn, r);
    if (strcmp(op, "pop") == 0)
        return floor_pop(conn, r);
    if (strcmp(op, "ack") == 0)
        return floor_ack(conn, r);
    return floor_bad(conn, "no such route");
}

/* Free a request's state once libmicrohttpd is done with it. */
void
bench_floor_completed(void **req_cls)
{
    struct floor_req *r = *req_cls;

    if (r == NULL)
        return;
    free(r->body);
    free(r->answer);
    free(r);
    *req_cls = NULL;
}

/* Resume every parked pop whose deadline passed (all of them when all is
 * set, before the daemon stops: libmicrohttpd aborts when it is stopped
 * with a connection suspended, so no pop parks after that), answering it
 * empty. */
void
bench_floor_expire(int all)
{
    uint64_t now = bench_now_ns();

    pthread_mutex_lock(&floor_lock);
    floor_stopping |= all;
    for (int b = 0; b < FLOOR_BUCKETS; b++) {
        struct floor_queue *q = floor_table[b], *next;

        for (; q != NULL; q = next) {
            struct floor_req **pp = &q->wait_head, *r;

            next = q->next;
            q->wait_tail = &q->wait_head;
            while ((r = *pp) != NULL) {
                if (all || r->deadline_ns <= now) {
                    *pp = r->wait_next;
                    r->resumed = 1;
                    MHD_resume_connection(r->conn);
                    continue;
                }
                pp = &r->wait_next;
                q->wait_tail = pp;
            }
            floor_queue_drop_idle(q);
        }
    }
    pthread_mutex_unlock(&floor_lock);
}
