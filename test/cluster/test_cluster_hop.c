/*
 * test_cluster_hop.c - forwarding under concurrency (SPEC §5), on three real
 * nodes: many client connections at once send a node requests for
 * partitions another node owns, so the node has dozens of forwards to one
 * owner in flight together (what a forwarder that carries several requests
 * in one call between the nodes would batch).  Whatever the transport, each
 * client request must be answered exactly as if it had travelled alone:
 *
 * - pushes: each answer 201 with its own messages' ids, each message popped
 *   once with its payload, each connection's order kept (SPEC §3);
 * - mixed verdicts together (SPEC §10, §2): 201, 403, 401, 400 and 429 side
 *   by side, each the answer the owner gives that very request sent to it
 *   directly, and the refused ones store nothing;
 * - pops and acks, autoAck pops, cumulative acks and pops that carry acks
 *   (SPEC §3, §14): nothing lost, nothing delivered twice;
 * - keyed pushes (SPEC §13): one key pushed at once through the two other
 *   nodes and the owner is stored once, and every answer gives its id;
 * - the owner stops mid-load (SPEC §5): every request is answered, every
 *   push answered 201 is read afterwards, and a 503 stores nothing unless
 *   it says the forward's outcome is unknown.
 *
 * Each client connection is a thread with its own keep-alive connection;
 * they start together (a barrier) and record what they were answered; the
 * test's own thread asserts once they are joined.  The owner of a partition
 * is computed as every node computes it (cl_owner), and checked by where
 * the messages are.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/suite.h"
#include "test/integration/tokens.h"

#define API       "/api/v1/ephemeral"
#define CONNS     32  /* client connections of a load */
#define ROUNDS    256 /* pushes a connection may make */
#define MSGS      10  /* messages a push carries at most */
#define NPARTS    4   /* partitions a load spreads over */
#define SEARCH    64  /* partitions p0..p63 searched for an owner */
#define SETTLE_MS 30000
/* two workers a node, as a node with two CPUs runs: forwards leave from
 * both of node 0's and arrive at both of the owner's */
#define NODE_OPTS "member_ttl_ms=60000 workers=2"

static struct cl c;

CL_SUITE(cluster_hop, &c, NODE_OPTS, CL_SUITE_VIEW, .timeout = 240);

/* ---- client connections: threads started together ---------------------- */

struct crowd {
    pthread_t t[CONNS + 8];
    int n;
};

static pthread_barrier_t go;

/* crowd_start - fn(args + k * size) for each k < n, each on a thread of its
 * own, released together by the barrier go (each calls together() first). */
static void
crowd_start(struct crowd *cw, int n, void *(*fn)(void *), void *args,
            size_t size)
{
    cr_assert_leq(n, (int)(sizeof(cw->t) / sizeof(cw->t[0])));
    cr_assert_eq(pthread_barrier_init(&go, NULL, (unsigned)n), 0);
    cw->n = n;
    for (int k = 0; k < n; k++)
        cr_assert_eq(
            pthread_create(&cw->t[k], NULL, fn, (char *)args + k * size), 0);
}

/* crowd_join - wait for every thread of cw. */
static void
crowd_join(struct crowd *cw)
{
    for (int k = 0; k < cw->n; k++)
        pthread_join(cw->t[k], NULL);
    pthread_barrier_destroy(&go);
}

/* Requests sent and not answered yet, and the most there were at once. */
static _Atomic int in_flight, in_flight_peak;

/* together - a client thread waits here for all the others. */
static void
together(void)
{
    pthread_barrier_wait(&go);
}

/* ---- what each push was answered, and what was read back --------------- */

/*
 * One push of one connection: what it carried and what it was answered.
 * Connection i's push j carries n messages whose payloads are the strings
 * "c<i>-p<j>-m<k>", k < n; seen[k] counts how often message k was read.
 */
struct sent {
    int n; /* messages it carried; 0: not sent */
    long status;
    int curl; /* the transfer's CURLcode (status 0: no answer) */
    char code[40], applied[16], retry_after[64], www_auth[64];
    char *error; /* the answer's sentence (NULL: none) */
    char *body;  /* what was sent (kept where the test replays it) */
    int nids;    /* ids in a 201 answer */
    char *ids[MSGS];
    int seen[MSGS];
};

static struct sent book[CONNS + 8][ROUNDS];
/* the last message of each connection read back (j * MSGS + k), -1 none */
static int last_read[CONNS + 8];

/* record - keep what push s was answered (r). */
static void
record(struct sent *s, const struct itest_resp *r)
{
    struct json_object *applied = itest_jget(r->json, "applied");

    s->status = r->status;
    s->curl = r->curl_code;
    snprintf(s->code, sizeof(s->code), "%s", itest_jstr(r->json, "code"));
    if (applied != NULL)
        snprintf(s->applied, sizeof(s->applied), "%s",
                 json_object_get_string(applied));
    snprintf(s->retry_after, sizeof(s->retry_after), "%s", r->retry_after);
    snprintf(s->www_auth, sizeof(s->www_auth), "%s", r->www_authenticate);
    if (itest_jget(r->json, "error") != NULL)
        s->error = strdup(itest_jstr(r->json, "error"));
    s->nids = itest_jlen(r->json, "ids");
    for (int k = 0; k < s->nids && k < MSGS; k++) {
        char path[24];
        snprintf(path, sizeof(path), "ids.%d", k);
        s->ids[k] = strdup(itest_jstr(r->json, path));
    }
}

/*
 * push_body - connection i's push j of n messages to queue/part into out;
 * bad >= 0 puts a number where message bad would be (a body the owner
 * refuses 400, naming messages[bad]).
 */
static void
push_body(char *out, size_t len, const char *queue, const char *part, int i,
          int j, int n, int bad)
{
    size_t o = (size_t)snprintf(out, len,
                                "{\"queue\":\"%s\",\"partition\":\"%s\","
                                "\"messages\":[",
                                queue, part);

    for (int k = 0; k < n && o < len; k++) {
        const char *sep = k ? "," : "";
        if (k == bad)
            o += (size_t)snprintf(out + o, len - o, "%s5", sep);
        else
            o += (size_t)snprintf(out + o, len - o,
                                  "%s{\"payload\":\"c%d-p%d-m%d\"}", sep, i, j,
                                  k);
    }
    if (o < len)
        snprintf(out + o, len - o, "]}");
}

/* req - method path body on node i with token tok (NULL: none). */
static long
req(int i, const char *tok, const char *method, const char *path,
    const char *body, struct itest_resp *r)
{
    return itest_req_bearer(&c.node[i], tok, method, path, body, r);
}

/* flying - req() counted in in_flight while it is out: what the load
 * threads send. */
static long
flying(int i, const char *tok, const char *method, const char *path,
       const char *body, struct itest_resp *r)
{
    int now = ++in_flight, peak = in_flight_peak;
    long st;

    while (now > peak &&
           !atomic_compare_exchange_weak(&in_flight_peak, &peak, now))
        ;
    st = req(i, tok, method, path, body, r);
    in_flight--;
    return st;
}

/* settled - req again while it answers 503 (the view or raft settling),
 * SETTLE_MS at most; for the test's own set-up and reads. */
static long
settled(int i, const char *tok, const char *method, const char *path,
        const char *body, struct itest_resp *r)
{
    int64_t deadline = itest_now_ms() + SETTLE_MS;

    for (;;) {
        long st = req(i, tok, method, path, body, r);
        if (st != 503 || itest_now_ms() > deadline)
            return st;
        itest_resp_free(r);
        itest_sleep_ms(100);
    }
}

/*
 * read_back - pop partition part of queue through node i (autoAck, every
 * message it holds) until it answers empty, counting each message in the
 * book: its payload names the push and the message; its id must be the one
 * that push was answered with (same_ids), its partition part, and each
 * connection's messages must come in the order it pushed them.  How many
 * messages it read.
 */
static int
read_back(int i, const char *tok, const char *queue, const char *part,
          int same_ids)
{
    char path[256];
    int total = 0;

    snprintf(path, sizeof(path),
             API "/pop?queue=%s&partition=%s&batch=10000&autoAck=true", queue,
             part);
    for (int round = 0;; round++) {
        struct itest_resp r;
        int n;

        cr_assert_lt(round, 100, "%s/%s never answered empty", queue, part);
        cr_assert_eq(settled(i, tok, "GET", path, NULL, &r), 200,
                     "pop %s/%s through node %d: %ld %s", queue, part, i,
                     r.status, r.body);
        n = itest_jlen(r.json, "messages");
        for (int m = 0; m < n; m++) {
            char p[40];
            int ci, j, k;
            struct sent *s;

            snprintf(p, sizeof(p), "messages.%d.payload", m);
            const char *pay = itest_jstr(r.json, p);
            cr_assert_eq(sscanf(pay, "c%d-p%d-m%d", &ci, &j, &k), 3,
                         "a payload nobody pushed: %s", pay);
            cr_assert(ci >= 0 && ci < CONNS + 8 && j >= 0 && j < ROUNDS &&
                          k >= 0 && k < MSGS,
                      "a payload nobody pushed: %s", pay);
            s = &book[ci][j];
            cr_assert_lt(k, s->n, "%s: push c%d-p%d carried %d messages", pay,
                         ci, j, s->n);
            snprintf(p, sizeof(p), "messages.%d.partition", m);
            cr_assert_str_eq(itest_jstr(r.json, p), part, "%s", pay);
            snprintf(p, sizeof(p), "messages.%d.id", m);
            if (same_ids)
                cr_assert(
                    s->ids[k] && !strcmp(itest_jstr(r.json, p), s->ids[k]),
                    "%s was read as %s, its push was answered id %s", pay,
                    itest_jstr(r.json, p), s->ids[k] ? s->ids[k] : "(none)");
            cr_assert_eq(s->seen[k], 0, "%s read twice", pay);
            s->seen[k]++;
            /* SPEC §3: first deliveries leave in push order; a connection
             * sends its next push once the last one was answered */
            cr_assert_gt(j * MSGS + k, last_read[ci],
                         "%s read after c%d's message %d.%d", pay, ci,
                         last_read[ci] / MSGS, last_read[ci] % MSGS);
            last_read[ci] = j * MSGS + k;
        }
        itest_resp_free(&r);
        total += n;
        if (n == 0)
            return total;
    }
}

/*
 * book_check - after read_back: each message of a push answered 201 was
 * read once; of a push refused, never; of a push whose outcome is unknown
 * (503 ephemeral_forward_failed, "applied": "unknown"), at most once.
 * Fails with the first one that was not, and how many.
 */
static void
book_check(int conns)
{
    int wrong = 0;
    char first[200] = "";

    for (int i = 0; i < conns; i++)
        for (int j = 0; j < ROUNDS && book[i][j].n > 0; j++) {
            const struct sent *s = &book[i][j];
            int unknown = s->status == 503 && !strcmp(s->applied, "unknown");
            for (int k = 0; k < s->n; k++) {
                int want = s->status == 201 ? 1 : 0;
                if (s->seen[k] == want || (unknown && s->seen[k] <= 1))
                    continue;
                if (wrong++ == 0)
                    snprintf(first, sizeof(first),
                             "c%d-p%d-m%d (answered %ld %s) read %d times", i,
                             j, k, s->status, s->code, s->seen[k]);
            }
        }
    cr_assert_eq(wrong, 0, "%d messages were not read as answered; first: %s",
                 wrong, first);
}

/* parts_of - the first n partitions p<k> of queue that node o owns while all
 * are live and, when next >= 0, node next owns once o is gone; into out. */
static void
parts_of(const char *queue, int o, int next, int n, char out[][16])
{
    unsigned rest = CL_ALL & ~(1u << o);
    int got = 0;

    for (int k = 0; k < SEARCH && got < n; k++) {
        char p[16];
        snprintf(p, sizeof(p), "p%d", k);
        if (cl_owner(queue, p, CL_ALL) == o &&
            (next < 0 || cl_owner(queue, p, rest) == next))
            snprintf(out[got++], 16, "%s", p);
    }
    cr_assert_eq(got, n, "node %d owns %d of p0..p%d of %s (next owner %d)", o,
                 got, SEARCH - 1, queue, next);
}

/* ---- 1. pushes ---------------------------------------------------------- */

/* stored_by - 1 when id names incarnation inc and partition part. */
static int
stored_by(const char *id, const char *inc, const char *part)
{
    char i[40], p[64], seq[32];

    return itest_id_parse(id, i, sizeof(i), p, sizeof(p), seq, sizeof(seq)) ==
               0 &&
           !strcmp(i, inc) && !strcmp(p, part);
}

#define PUSH_Q      "hop-push"
#define PUSH_ROUNDS 16

/* A pushing connection: through node, to part, rounds pushes. */
struct pusher {
    int i, node, rounds;
    const char *queue, *part, *tok;
};

/* pusher - connection i's pushes of 1..MSGS messages (a count of its own
 * for each), each recorded in the book. */
static void *
pusher(void *arg)
{
    const struct pusher *p = arg;

    together();
    for (int j = 0; j < p->rounds; j++) {
        struct sent *s = &book[p->i][j];
        struct itest_resp r;
        char body[1024];

        s->n = 1 + (p->i + j) % MSGS;
        push_body(body, sizeof(body), p->queue, p->part, p->i, j, s->n, -1);
        flying(p->node, p->tok, "POST", API "/push", body, &r);
        record(s, &r);
        itest_resp_free(&r);
    }
    itest_req_thread_end();
    return NULL;
}

/* Pushes through node 0 to partitions nodes 1 and 2 own, 32 connections at
 * once: each answer is 201 with the ids of its own messages (read back with
 * those ids, those payloads, that partition), each message is stored once,
 * and each connection's messages keep its order.  Read back at the owner for
 * node 1's partitions, through node 0 for node 2's. */
Test(cluster_hop, concurrent_pushes_through_a_non_owner_each_get_their_own_ids)
{
    static struct pusher conn[CONNS];
    char parts[NPARTS][16];
    char inc[CL_NODES][40];
    struct crowd cw;
    int got = 0, want = 0, bad = 0;

    for (int i = 0; i < CL_NODES; i++)
        cl_incarnation(&c, i, inc[i], sizeof(inc[i]));
    parts_of(PUSH_Q, 1, -1, NPARTS / 2, parts);
    parts_of(PUSH_Q, 2, -1, NPARTS / 2, parts + NPARTS / 2);
    memset(last_read, -1, sizeof(last_read));
    for (int i = 0; i < CONNS; i++)
        conn[i] =
            (struct pusher){i, 0, PUSH_ROUNDS, PUSH_Q, parts[i % NPARTS], NULL};
    crowd_start(&cw, CONNS, pusher, conn, sizeof(conn[0]));
    crowd_join(&cw);

    for (int i = 0; i < CONNS; i++)
        for (int j = 0; j < PUSH_ROUNDS; j++) {
            const struct sent *s = &book[i][j];
            const char *part = conn[i].part;
            int ok = s->status == 201 && s->nids == s->n;
            /* each id names the partition and its owner, which stored it */
            for (int k = 0; ok && k < s->n; k++)
                ok = stored_by(s->ids[k], inc[cl_owner(PUSH_Q, part, CL_ALL)],
                               part);
            want += s->n;
            if (!ok && bad++ == 0)
                cr_log_error("c%d push %d of %d messages to %s: %ld (curl "
                             "%d) %s with %d ids, the first %s",
                             i, j, s->n, part, s->status, s->curl, s->code,
                             s->nids, s->nids > 0 ? s->ids[0] : "-");
        }
    cr_assert_eq(bad, 0, "%d of %d pushes not answered 201 with their ids", bad,
                 CONNS * PUSH_ROUNDS);
    for (int k = 0; k < NPARTS; k++) {
        int o = cl_owner(PUSH_Q, parts[k], CL_ALL);
        got += read_back(o == 1 ? 1 : 0, NULL, PUSH_Q, parts[k], 1);
    }
    book_check(CONNS);
    cr_assert_eq(got, want);
    cr_log_info("pushes: %d connections, %d pushes, %d messages, %d in "
                "flight at most",
                CONNS, CONNS * PUSH_ROUNDS, want, (int)in_flight_peak);
}

/* ---- 2. mixed verdicts (a suite with an auth file) ---------------------- */

#define MIX_Q      "hop-mix"
#define MIX_ROUNDS 12

static const char *const mix_tokens[][2] = {
    {"hop-writer", "tenant=acme push=hop-* pop=hop-* read=hop-*"},
    {"hop-reader", "tenant=acme pop=hop-* read=hop-*"},
    {"hop-slow", "tenant=slowco push=hop-* pop=hop-* read=hop-* rate=5"},
};

static void
mix_up(void)
{
    char dir[256], file[300], opts[400];

    itest_test_dir(dir, sizeof(dir));
    itest_token_file(dir, mix_tokens, 3, ~0u, file, sizeof(file));
    snprintf(opts, sizeof(opts), NODE_OPTS " auth_file=%s", file);
    cl_suite_up(&c, opts, CL_SUITE_VIEW, NULL);
}

static void
mix_down(void)
{
    cl_kill_all(&c);
}

TestSuite(cluster_hop_auth, .init = mix_up, .fini = mix_down, .timeout = 240);

/* What a connection of the mix sends, by its number modulo MIX_KINDS. */
enum mix_kind {
    MIX_OK,        /* the writer's push: 201 */
    MIX_FORBIDDEN, /* the reader's push: 403 naming push and the queue */
    MIX_NO_TOKEN,  /* 401 with WWW-Authenticate: Bearer */
    MIX_UNKNOWN,   /* a token nobody issued: 401 */
    MIX_BAD_BODY,  /* the writer's, messages[k] a number: 400 */
    MIX_RATE,      /* slowco's 6 to 10 messages, its bucket in debt: 429 */
    MIX_KINDS
};

static const char *const mix_kind_name[] = {"201 push",     "403 forbidden",
                                            "401 no token", "401 unknown token",
                                            "400 bad body", "429 rate"};

/* A connection of the mix: through node 0, to acme's partition part or
 * slowco's slow_part. */
struct mixer {
    int i;
    enum mix_kind kind;
    const char *part, *slow_part;
};

/* mix_token - the token kind k sends (NULL: none). */
static const char *
mix_token(enum mix_kind k)
{
    switch (k) {
    case MIX_FORBIDDEN:
        return "hop-reader";
    case MIX_NO_TOKEN:
        return NULL;
    case MIX_UNKNOWN:
        return "nobody-issued-this";
    case MIX_RATE:
        return "hop-slow";
    default:
        return "hop-writer";
    }
}

/* mixer - connection i's MIX_ROUNDS requests of its kind; each body kept
 * in the book, for the owner to be asked the same afterwards. */
static void *
mixer(void *arg)
{
    const struct mixer *m = arg;

    together();
    for (int j = 0; j < MIX_ROUNDS; j++) {
        struct sent *s = &book[m->i][j];
        struct itest_resp r;
        char body[1024];
        int bad = -1;

        s->n = 1 + (m->i + j) % 5;
        if (m->kind == MIX_BAD_BODY) {
            s->n = 8;
            bad = (m->i + j) % 8; /* the sentence names which */
        } else if (m->kind == MIX_RATE) {
            s->n = 6 + (m->i + j) % 5; /* past a rate of 5 */
        }
        push_body(body, sizeof(body), MIX_Q,
                  m->kind == MIX_RATE ? m->slow_part : m->part, m->i, j, s->n,
                  bad);
        s->body = strdup(body);
        flying(0, mix_token(m->kind), "POST", API "/push", body, &r);
        record(s, &r);
        itest_resp_free(&r);
    }
    itest_req_thread_end();
    return NULL;
}

/* str_eq - two optional strings are equal (NULL equals NULL alone). */
static int
str_eq(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* pending_of - pending of queue on node i (scope=node) as tok reads it; 0
 * when it answers 404 (no such queue there). */
static int64_t
pending_of(int i, const char *tok, const char *queue)
{
    struct itest_resp r;
    char path[200];
    int64_t v = 0;

    snprintf(path, sizeof(path), API "/queues/%s/depth?scope=node", queue);
    long st = settled(i, tok, "GET", path, NULL, &r);
    cr_assert(st == 200 || st == 404, "depth of %s on node %d: %ld %s", queue,
              i, st, r.body);
    if (st == 200)
        v = itest_jint(r.json, "pending");
    itest_resp_free(&r);
    return v;
}

/* in_debt - put slowco's bucket on node 2 in debt for far longer than
 * the test: 10000 messages at 5 a second are 2000 s of pushes, taken at
 * once by the full bucket (a batch larger than the rate goes into debt,
 * SPEC §10), into a queue of its own on a partition node 2 owns; every
 * slowco push there is then refused, 429 with Retry-After. */
static void
in_debt(void)
{
    size_t cap = 128 + 10000 * 16, o;
    char *body = malloc(cap), prime[1][16];
    struct itest_resp r;

    cr_assert(body);
    parts_of("slowco\x1f"
             "hop-prime",
             2, -1, 1, prime);
    o = (size_t)snprintf(body, cap,
                         "{\"queue\":\"hop-prime\",\"partition\":\"%s\","
                         "\"messages\":[",
                         prime[0]);
    for (int k = 0; k < 10000; k++)
        o += (size_t)snprintf(body + o, cap - o, "%s{\"payload\":1}",
                              k ? "," : "");
    snprintf(body + o, cap - o, "]}");
    cr_assert_eq(settled(2, "hop-slow", "POST", API "/push", body, &r), 201,
                 "10000 into a full bucket of 5: %s", r.body);
    itest_resp_free(&r);
    free(body);
}

/* same_wait - two Retry-After values a second apart at most: answers of
 * one bucket in debt, read at two moments. */
static int
same_wait(const char *a, const char *b)
{
    long x = atol(a), y = atol(b);

    return x >= 1 && y >= 1 && x - y <= 1 && y - x <= 1;
}

/*
 * Pushes of six kinds in flight together through node 0 to partitions
 * node 2 owns: the writer's (201), the reader's (403), none's and an
 * unknown token's (401), bodies the owner parses and refuses (400) and a
 * tenant past its rate (429).  Each answer is its request's: a 201 has its
 * own messages' ids, each refusal is what the owner answers that same
 * request sent to it directly (status, code, sentence, Retry-After,
 * WWW-Authenticate), the 400s name each its own bad message, the 429s each
 * its own count.  Only the 201s are stored.
 */
Test(cluster_hop_auth, mixed_verdicts_in_flight_are_each_their_requests_own)
{
    static struct mixer conn[CONNS];
    char part[1][16], slow_part[1][16];
    struct crowd cw;
    int wrong = 0, stored = 0, got;

    /* the owner hashes the tenant's name of the queue */
    parts_of("acme\x1f" MIX_Q, 2, -1, 1, part);
    parts_of("slowco\x1f" MIX_Q, 2, -1, 1, slow_part);
    memset(last_read, -1, sizeof(last_read));
    in_debt();
    for (int i = 0; i < CONNS; i++)
        conn[i] = (struct mixer){i, (enum mix_kind)(i % MIX_KINDS), part[0],
                                 slow_part[0]};
    crowd_start(&cw, CONNS, mixer, conn, sizeof(conn[0]));
    crowd_join(&cw);

    /* the refused stored nothing: acme holds what was answered 201 */
    for (int i = 0; i < CONNS; i++)
        for (int j = 0; j < MIX_ROUNDS; j++)
            if (conn[i].kind == MIX_OK && book[i][j].status == 201)
                stored += book[i][j].n;
    cr_assert_eq(pending_of(2, "hop-writer", MIX_Q), stored,
                 "acme's %s at its owner", MIX_Q);
    for (int i = 0; i < CL_NODES; i++)
        cr_assert_eq(pending_of(i, "hop-slow", MIX_Q), 0,
                     "slowco's %s on node %d", MIX_Q, i);

    /* each answer against the owner's to the same request */
    for (int i = 0; i < CONNS; i++)
        for (int j = 0; j < MIX_ROUNDS; j++) {
            struct sent *s = &book[i][j];
            struct sent own = {0};
            struct itest_resp r;
            enum mix_kind k = conn[i].kind;
            static const long want[] = {201, 403, 401, 401, 400, 429};
            int ok;

            if (k == MIX_OK) {
                ok = s->status == 201 && s->nids == s->n;
            } else {
                req(2, mix_token(k), "POST", API "/push", s->body, &r);
                record(&own, &r);
                itest_resp_free(&r);
                /* the rate's Retry-After counts down between the two */
                ok = s->status == want[k] && own.status == want[k] &&
                     !strcmp(s->code, own.code) &&
                     str_eq(s->error, own.error) &&
                     (k == MIX_RATE
                          ? same_wait(s->retry_after, own.retry_after)
                          : !strcmp(s->retry_after, own.retry_after)) &&
                     !strcmp(s->www_auth, own.www_auth);
                free(own.error);
            }
            if (!ok && wrong++ == 0)
                cr_log_error("c%d (%s) request %d: through node 0 %ld %s "
                             "\"%s\" (Retry-After '%s', WWW-Authenticate "
                             "'%s'); at the owner %ld %s \"%s\" ('%s', '%s')",
                             i, mix_kind_name[k], j, s->status, s->code,
                             s->error ? s->error : "", s->retry_after,
                             s->www_auth, own.status, own.code,
                             own.error ? own.error : "", own.retry_after,
                             own.www_auth);
        }
    cr_assert_eq(wrong, 0, "%d of %d answers were not their request's", wrong,
                 CONNS * MIX_ROUNDS);
    /* what the SPEC says of each, on one of each kind */
    for (int i = 0; i < MIX_KINDS; i++) {
        const struct sent *s = &book[i][0];
        if (i == MIX_FORBIDDEN)
            cr_assert(s->error && strstr(s->error, "push") &&
                          strstr(s->error, MIX_Q),
                      "a 403 that names not the verb and queue: %s", s->error);
        if (i == MIX_NO_TOKEN || i == MIX_UNKNOWN)
            cr_assert_str_eq(s->www_auth, "Bearer", "%s", mix_kind_name[i]);
        if (i == MIX_BAD_BODY)
            cr_assert_str_eq(s->code, "ephemeral_bad_request");
        if (i == MIX_RATE)
            cr_assert(!strcmp(s->code, "rate_limited") && s->retry_after[0],
                      "%s, Retry-After '%s'", s->code, s->retry_after);
    }
    cr_log_info("mix: %d requests, %d in flight at most", CONNS * MIX_ROUNDS,
                (int)in_flight_peak);
    for (int i = 0; i < MIX_KINDS; i++)
        cr_log_info("mix, %s: %ld %s \"%s\"", mix_kind_name[i],
                    book[i][0].status, book[i][0].code,
                    book[i][0].error ? book[i][0].error : "");
    /* and the stored are the 201s' messages, under their ids */
    got = read_back(2, "hop-writer", MIX_Q, part[0], 1);
    cr_assert_eq(got, stored);
    book_check(CONNS);
}

/* ---- 3. pops and acks --------------------------------------------------- */

#define DRAIN_MSGS  500 /* messages in each partition */
#define DRAIN_CONNS 16

/* How a draining connection reads. */
enum drain_how {
    BY_ACK,  /* GET pop, then an ack of every id (queue hop-ack) */
    BY_AUTO, /* GET pop with autoAck (queue hop-auto) */
    BY_POST, /* POST pop carrying the last batch's acks (hop-cum) */
    BY_UPTO, /* GET pop, then a cumulative ack or every id (hop-cum) */
};

#define DRAIN_QUEUES 3 /* hop-ack, hop-auto, hop-cum */

static const char *const drain_queue[DRAIN_QUEUES] = {"hop-ack", "hop-auto",
                                                      "hop-cum"};
static char drain_parts[DRAIN_QUEUES][NPARTS][16];
/* how often each message (payload = partition * DRAIN_MSGS + k) was read */
static _Atomic int drain_seen[DRAIN_QUEUES][NPARTS * DRAIN_MSGS];

/* A draining connection: through node 0; its partition when it reads one
 * alone (BY_POST, BY_UPTO).  What went wrong first, for the report. */
struct drainer {
    int i;
    enum drain_how how;
    int part;
    int pops, wrong;
    char first[400];
};

/* drain_wrong - count a wrong answer of d, keeping the first. */
static void
drain_wrong(struct drainer *d, const char *what, const struct itest_resp *r)
{
    if (d->wrong++ == 0)
        snprintf(d->first, sizeof(d->first),
                 "connection %d: %s: %ld (curl %d) %.250s", d->i, what,
                 r->status, r->curl_code, r->body);
}

/* drain_queue_of - the queue a drainer reads. */
static int
drain_queue_of(enum drain_how how)
{
    return how == BY_UPTO ? BY_POST : (int)how;
}

/*
 * take - the messages of pop answer r from queue q's partition p: each
 * counted as read; a reader alone on its partition (next != NULL) must get
 * them in order, the one after *next first.  Their ids, as a JSON array of
 * strings (objects: the messages as popped) into ids (size len); the last
 * id into last.  How many.
 */
static int
take(struct drainer *d, int q, int p, struct itest_resp *r, int *next,
     int objects, char *ids, size_t len, char *last, size_t lastlen)
{
    int n = itest_jlen(r->json, "messages");
    size_t o = 0;

    ids[0] = '\0';
    for (int m = 0; m < n; m++) {
        struct json_object *msg =
            json_object_array_get_idx(itest_jget(r->json, "messages"), m);
        int64_t pay = itest_jint(msg, "payload");

        if (pay < p * DRAIN_MSGS || pay >= (p + 1) * DRAIN_MSGS ||
            strcmp(itest_jstr(msg, "partition"), drain_parts[q][p])) {
            drain_wrong(d, "a message of another partition", r);
            continue;
        }
        drain_seen[q][pay]++;
        if (next != NULL && pay != p * DRAIN_MSGS + (*next)++)
            drain_wrong(d, "out of order", r);
        snprintf(last, lastlen, "%s", itest_jstr(msg, "id"));
        if (objects)
            o += (size_t)snprintf(
                ids + o, len - o, "%s%s", m ? "," : "",
                json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN));
        else
            o += (size_t)snprintf(ids + o, len - o, "%s\"%s\"", m ? "," : "",
                                  last);
        if (o >= len)
            cr_assert_fail("ids overflow"); /* never: batches <= 100 */
    }
    return n;
}

/*
 * acked_ok - results of acks as SPEC §2 and §14 answer them: of n ids (the
 * last one last), n results in request order, each acked; of a cumulative
 * ack of last, one result that counts the n it completed.
 */
static int
acked_ok(struct json_object *results, int n, int upto, const char *last)
{
    struct json_object *e;
    int len;

    if (!json_object_is_type(results, json_type_array))
        return 0;
    len = (int)json_object_array_length(results);
    if (len != (upto ? 1 : n) || len == 0)
        return 0;
    for (int k = 0; k < len; k++)
        if (strcmp(itest_jstr(json_object_array_get_idx(results, k), "outcome"),
                   "acked"))
            return 0;
    e = json_object_array_get_idx(results, len - 1);
    return !strcmp(itest_jstr(e, "id"), last) &&
           (!upto || itest_jint(e, "count") == n);
}

/* ack - the acks (a JSON array's inside) of queue q through node 0; 1 when
 * answered as acked_ok says. */
static int
ack(struct drainer *d, int q, const char *acks, int n, int upto,
    const char *last)
{
    struct itest_resp r;
    char *body = malloc(strlen(acks) + 128);
    int ok;

    cr_assert(body);
    sprintf(body, "{\"queue\":\"%s\",\"acks\":[%s]}", drain_queue[q], acks);
    flying(0, NULL, "POST", API "/ack", body, &r);
    ok = r.status == 200 &&
         acked_ok(itest_jget(r.json, "results"), n, upto, last);
    if (!ok)
        drain_wrong(d, "ack", &r);
    itest_resp_free(&r);
    free(body);
    return ok;
}

/* drain_shared - BY_ACK and BY_AUTO: pop the queue's partitions in turn,
 * competing with the other connections, until a turn over every partition
 * found nothing. */
static void
drain_shared(struct drainer *d)
{
    int q = drain_queue_of(d->how), empty = 0;
    static const size_t len = 100 * 160;
    char *ids = malloc(len), last[160];

    cr_assert(ids);
    for (int round = 0; empty < NPARTS && round < 2000; round++) {
        int p = (d->i + round) % NPARTS;
        int batch = 10 + (d->i * 37 + round * 11) % 91;
        char path[256];
        struct itest_resp r;
        int n;

        snprintf(path, sizeof(path),
                 API "/pop?queue=%s&partition=%s&batch=%d&wait=false%s",
                 drain_queue[q], drain_parts[q][p], batch,
                 d->how == BY_AUTO ? "&autoAck=true" : "");
        flying(0, NULL, "GET", path, NULL, &r);
        d->pops++;
        if (r.status != 200) {
            drain_wrong(d, "pop", &r);
            itest_resp_free(&r);
            break;
        }
        /* every other batch acked by its messages sent back as popped */
        n = take(d, q, p, &r, NULL, round % 2, ids, len, last, sizeof(last));
        if (n > batch)
            drain_wrong(d, "more than the batch", &r);
        itest_resp_free(&r);
        empty = n == 0 ? empty + 1 : 0;
        if (n > 0 && d->how == BY_ACK && !ack(d, q, ids, n, 0, last))
            break;
    }
    free(ids);
}

/*
 * drain_alone - BY_POST and BY_UPTO: the connection reads its partition
 * alone, in order, and completes each batch with the next call: every
 * other time by one cumulative ack of its last id (upTo), else by every id
 * (objects as popped).  BY_POST sends those acks in the next POST pop,
 * BY_UPTO on the ack route before its next GET pop.  Until a pop finds
 * nothing.
 */
static void
drain_alone(struct drainer *d)
{
    int q = BY_POST, p = d->part, next = 0, prev_n = 0, prev_upto = 0;
    static const size_t len = 100 * 300;
    char *ids = malloc(len), *acks = malloc(len + 200);
    char last[160] = "", path[256];

    cr_assert(ids && acks);
    ids[0] = '\0';
    for (int round = 0; round < 2000; round++) {
        int batch = 10 + (d->i * 37 + round * 11) % 91;
        int upto = round % 2;
        struct itest_resp r;
        int n;

        if (prev_n > 0 && prev_upto)
            snprintf(acks, len + 200, "{\"id\":\"%s\",\"upTo\":true}", last);
        else
            snprintf(acks, len + 200, "%s", ids);
        if (d->how == BY_POST) {
            char *body = malloc(len + 400);
            cr_assert(body);
            snprintf(body, len + 400,
                     "{\"queue\":\"%s\",\"partition\":\"%s\",\"batch\":%d,"
                     "\"wait\":false%s%s%s}",
                     drain_queue[q], drain_parts[q][p], batch,
                     prev_n ? ",\"acks\":[" : "", prev_n ? acks : "",
                     prev_n ? "]" : "");
            flying(0, NULL, "POST", API "/pop", body, &r);
            free(body);
            if (r.status == 200 && prev_n > 0 &&
                !acked_ok(itest_jget(r.json, "results"), prev_n, prev_upto,
                          last))
                drain_wrong(d, "the acks a pop carried", &r);
        } else {
            if (prev_n > 0 && !ack(d, q, acks, prev_n, prev_upto, last))
                break;
            snprintf(path, sizeof(path),
                     API "/pop?queue=%s&partition=%s&batch=%d", drain_queue[q],
                     drain_parts[q][p], batch);
            flying(0, NULL, "GET", path, NULL, &r);
        }
        d->pops++;
        if (r.status != 200) {
            drain_wrong(d, "pop", &r);
            itest_resp_free(&r);
            break;
        }
        n = take(d, q, p, &r, &next, !upto, ids, len, last, sizeof(last));
        itest_resp_free(&r);
        if (n == 0)
            break;
        prev_n = n;
        prev_upto = upto;
    }
    free(ids);
    free(acks);
}

static void *
drainer(void *arg)
{
    struct drainer *d = arg;

    together();
    if (d->how == BY_ACK || d->how == BY_AUTO)
        drain_shared(d);
    else
        drain_alone(d);
    itest_req_thread_end();
    return NULL;
}

/* fill - DRAIN_MSGS messages into each partition of each drained queue, at
 * its owner. */
static void
fill(void)
{
    for (int q = 0; q < DRAIN_QUEUES; q++) {
        parts_of(drain_queue[q], 1, -1, NPARTS / 2, drain_parts[q]);
        parts_of(drain_queue[q], 2, -1, NPARTS / 2,
                 drain_parts[q] + NPARTS / 2);
        for (int p = 0; p < NPARTS; p++) {
            int o = cl_owner(drain_queue[q], drain_parts[q][p], CL_ALL);
            for (int k = 0; k < DRAIN_MSGS; k += 100) {
                char pays[1024];
                size_t off = 0;
                struct itest_resp r;
                for (int m = 0; m < 100; m++)
                    off +=
                        (size_t)snprintf(pays + off, sizeof(pays) - off, "%s%d",
                                         m ? "," : "[", p * DRAIN_MSGS + k + m);
                snprintf(pays + off, sizeof(pays) - off, "]");
                itest_push_ok(&c.node[o], &r, drain_queue[q], drain_parts[q][p],
                              pays, 100);
                itest_resp_free(&r);
            }
        }
    }
}

/*
 * Three queues filled at their owners (nodes 1 and 2), drained by 16
 * connections at once through node 0: eight pop (batches of 10 to 100, no
 * wait) and ack every id, four pop with autoAck, two pop with POST and
 * carry the last batch's acks (every id, or one cumulative upTo), two pop
 * with GET and ack on the ack route (likewise).  Every ack is answered
 * acked in request order, a cumulative one with its count; every message
 * is read exactly once; nothing is left pending or leased at the owners.
 */
Test(cluster_hop, concurrent_pops_and_acks_through_a_non_owner_lose_nothing)
{
    static struct drainer conn[DRAIN_CONNS];
    struct crowd cw;
    int wrong = 0, first = -1, pops = 0;

    fill();
    for (int i = 0; i < DRAIN_CONNS; i++) {
        enum drain_how how = i < 8    ? BY_ACK
                             : i < 12 ? BY_AUTO
                             : i < 14 ? BY_POST
                                      : BY_UPTO;
        conn[i] = (struct drainer){.i = i, .how = how, .part = i % NPARTS};
    }
    crowd_start(&cw, DRAIN_CONNS, drainer, conn, sizeof(conn[0]));
    crowd_join(&cw);

    for (int i = 0; i < DRAIN_CONNS; i++)
        if (conn[i].wrong > 0 && first < 0)
            first = i;
    cr_assert_lt(first, 0, "%s", first < 0 ? "" : conn[first].first);
    for (int i = 0; i < DRAIN_CONNS; i++)
        pops += conn[i].pops;
    cr_log_info("drain: %d messages in 3 queues, %d pops by %d "
                "connections, %d calls in flight at most",
                DRAIN_QUEUES * NPARTS * DRAIN_MSGS, pops, DRAIN_CONNS,
                (int)in_flight_peak);
    for (int q = 0; q < DRAIN_QUEUES; q++)
        for (int m = 0; m < NPARTS * DRAIN_MSGS; m++)
            if (drain_seen[q][m] != 1 && wrong++ == 0)
                cr_log_error("%s: message %d read %d times", drain_queue[q], m,
                             (int)drain_seen[q][m]);
    cr_assert_eq(wrong, 0, "%d messages not read exactly once", wrong);
    for (int q = 0; q < DRAIN_QUEUES; q++)
        for (int p = 0; p < NPARTS; p++) {
            int o = cl_owner(drain_queue[q], drain_parts[q][p], CL_ALL);
            cr_assert_eq(cl_part_depth(&c, o, drain_queue[q], drain_parts[q][p],
                                       "pending"),
                         0, "%s/%s", drain_queue[q], drain_parts[q][p]);
            cr_assert_eq(cl_part_depth(&c, o, drain_queue[q], drain_parts[q][p],
                                       "leased"),
                         0, "%s/%s", drain_queue[q], drain_parts[q][p]);
        }
}

/* ---- 4. keyed pushes ---------------------------------------------------- */

#define KEY_Q       "hop-key"
#define KEY_CONNS   36 /* a third through each node */
#define KEY_BATCHES 8
#define KEY_PER     5 /* keys a push carries */
#define KEYS        (KEY_BATCHES * KEY_PER)

/* A keyed pusher: through node, every batch of keys once, from batch
 * start on; what each batch was answered. */
struct keyer {
    int i, node, start;
    const char *part;
    long status[KEY_BATCHES];
    int64_t pushed[KEY_BATCHES], dups[KEY_BATCHES];
    int nids[KEY_BATCHES];
    char ids[KEY_BATCHES][KEY_PER][96];
    char first[300]; /* the first answer that was not 201, for the report */
};

/* keyer - batch b holds keys "k<b * KEY_PER + m>", each message's payload
 * "c<i>-k<key>". */
static void *
keyer(void *arg)
{
    struct keyer *kp = arg;

    together();
    for (int t = 0; t < KEY_BATCHES; t++) {
        int b = (kp->start + t) % KEY_BATCHES;
        char body[1024];
        size_t o;
        struct itest_resp r;

        o = (size_t)snprintf(body, sizeof(body),
                             "{\"queue\":\"" KEY_Q "\",\"partition\":\"%s\","
                             "\"messages\":[",
                             kp->part);
        for (int m = 0; m < KEY_PER; m++) {
            int key = b * KEY_PER + m;
            o += (size_t)snprintf(body + o, sizeof(body) - o,
                                  "%s{\"payload\":\"c%d-k%d\",\"key\":\"k%d\"}",
                                  m ? "," : "", kp->i, key, key);
        }
        snprintf(body + o, sizeof(body) - o, "]}");
        flying(kp->node, NULL, "POST", API "/push", body, &r);
        kp->status[b] = r.status;
        kp->pushed[b] = itest_jint(r.json, "pushed");
        kp->dups[b] = itest_jint(r.json, "duplicates");
        kp->nids[b] = itest_jlen(r.json, "ids");
        for (int m = 0; m < KEY_PER && m < kp->nids[b]; m++) {
            char path[16];
            snprintf(path, sizeof(path), "ids.%d", m);
            snprintf(kp->ids[b][m], sizeof(kp->ids[b][m]), "%s",
                     itest_jstr(r.json, path));
        }
        if (r.status != 201 && kp->first[0] == '\0')
            snprintf(kp->first, sizeof(kp->first), "%ld (curl %d) %.200s",
                     r.status, r.curl_code, r.body);
        itest_resp_free(&r);
    }
    itest_req_thread_end();
    return NULL;
}

/* declare_dedupe - KEY_Q with a dedupe window, until every node lists it. */
static void
declare_dedupe(void)
{
    struct itest_resp r;
    int64_t deadline = itest_now_ms() + SETTLE_MS;

    cr_assert_eq(settled(0, NULL, "POST", API "/configure",
                         "{\"queue\":\"" KEY_Q "\",\"options\":"
                         "{\"dedupeSeconds\":600}}",
                         &r),
                 201, "%s", r.body);
    itest_resp_free(&r);
    for (int i = 0; i < CL_NODES; i++)
        while (itest_listing_int(&c.node[i], KEY_Q, "options.dedupeSeconds",
                                 -1) != 600) {
            cr_assert_lt(itest_now_ms(), deadline, "node %d", i);
            itest_sleep_ms(100);
        }
}

/*
 * SPEC §13: 36 connections, twelve through each of nodes 0 and 1 and
 * twelve to node 2, the owner, push the same 40 keys (five a push) at
 * once, half of them starting halfway through the list.  Each answer is
 * 201 with an id for each of its messages, stored or duplicate
 * ("pushed" + "duplicates" = 5), and every answer gives a key the same id;
 * no more than 40 were stored in all, and the partition holds each key
 * once, under that id.
 */
Test(cluster_hop, one_key_pushed_through_every_node_at_once_is_stored_once)
{
    static struct keyer conn[KEY_CONNS];
    char part[1][16];
    const char *key_id[KEYS] = {0};
    int seen[KEYS] = {0}, first = -1, wrong = 0;
    int64_t stored = 0;
    struct crowd cw;
    char path[200];
    struct itest_resp r;

    declare_dedupe();
    parts_of(KEY_Q, 2, -1, 1, part);
    for (int i = 0; i < KEY_CONNS; i++)
        conn[i] = (struct keyer){.i = i,
                                 .node = i % CL_NODES,
                                 .start = (i / CL_NODES) % 2 * KEY_BATCHES / 2,
                                 .part = part[0]};
    crowd_start(&cw, KEY_CONNS, keyer, conn, sizeof(conn[0]));
    crowd_join(&cw);

    for (int i = 0; i < KEY_CONNS && first < 0; i++)
        if (conn[i].first[0] != '\0')
            first = i;
    cr_assert_lt(first, 0, "connection %d through node %d: %s", first,
                 first < 0 ? 0 : conn[first].node,
                 first < 0 ? "" : conn[first].first);
    for (int i = 0; i < KEY_CONNS; i++)
        for (int b = 0; b < KEY_BATCHES; b++) {
            const struct keyer *kp = &conn[i];
            cr_assert(kp->nids[b] == KEY_PER && kp->pushed[b] >= 0 &&
                          kp->dups[b] >= 0 &&
                          kp->pushed[b] + kp->dups[b] == KEY_PER,
                      "connection %d (node %d), batch %d: %d ids, pushed "
                      "%ld, duplicates %ld",
                      i, kp->node, b, kp->nids[b], (long)kp->pushed[b],
                      (long)kp->dups[b]);
            stored += kp->pushed[b];
            for (int m = 0; m < KEY_PER; m++) {
                int key = b * KEY_PER + m;
                if (key_id[key] == NULL)
                    key_id[key] = kp->ids[b][m];
                if (strcmp(key_id[key], kp->ids[b][m]) && wrong++ == 0)
                    cr_log_error("key k%d answered %s to connection %d (node "
                                 "%d), %s before",
                                 key, kp->ids[b][m], i, kp->node, key_id[key]);
            }
        }
    cr_assert_eq(wrong, 0, "%d answers gave a key another id", wrong);
    /* a forward that timed out is sent again, and its first try may have
     * stored the key: then no answer says it was stored (SPEC §13) */
    cr_assert_leq(stored, KEYS, "answers say %ld were stored", (long)stored);
    cr_log_info("keys: %d pushes of %d keys each, %ld stored by the answers, "
                "%d in flight at most",
                KEY_CONNS * KEY_BATCHES, KEY_PER, (long)stored,
                (int)in_flight_peak);

    snprintf(path, sizeof(path),
             API "/pop?queue=" KEY_Q "&partition=%s&batch=10000&autoAck=true",
             part[0]);
    cr_assert_eq(settled(2, NULL, "GET", path, NULL, &r), 200, "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "messages"), KEYS, "%s", r.body);
    for (int m = 0; m < KEYS; m++) {
        char p[40];
        int ci, key;
        snprintf(p, sizeof(p), "messages.%d.payload", m);
        cr_assert_eq(sscanf(itest_jstr(r.json, p), "c%d-k%d", &ci, &key), 2,
                     "%s", r.body);
        cr_assert(key >= 0 && key < KEYS, "%s", r.body);
        snprintf(p, sizeof(p), "messages.%d.id", m);
        cr_assert_str_eq(itest_jstr(r.json, p), key_id[key],
                         "key k%d stored under another id than answered", key);
        cr_assert_eq(seen[key]++, 0, "key k%d stored twice", key);
    }
    itest_resp_free(&r);
}

/* ---- 5. the owner stops ------------------------------------------------- */

#define STOP_Q      "hop-stop"
#define STOP_BEFORE 800 /* answers before the owner's SIGTERM */
#define STOP_AFTER  800 /* answers after it exited */
/* pushes a connection makes at most: their 1 or 2 messages stay below
 * what the queue holds on a node by default (10000) */
#define STOP_ROUNDS 200

static _Atomic int stop_load;     /* the pushers end */
static _Atomic int stop_answered; /* pushes answered (or failed) so far */

/* stop_pusher - connection i's pushes of 1 or 2 messages until told to
 * end (or STOP_ROUNDS), each recorded in the book. */
static void *
stop_pusher(void *arg)
{
    const struct pusher *p = arg;

    together();
    for (int j = 0; j < STOP_ROUNDS && !stop_load; j++) {
        struct sent *s = &book[p->i][j];
        struct itest_resp r;
        char body[512];

        s->n = 1 + (p->i + j) % 2;
        push_body(body, sizeof(body), p->queue, p->part, p->i, j, s->n, -1);
        flying(p->node, NULL, "POST", API "/push", body, &r);
        record(s, &r);
        itest_resp_free(&r);
        stop_answered++;
    }
    itest_req_thread_end();
    return NULL;
}

/* answers_reach - until n pushes were answered (30 s at most); 1 if they
 * were. */
static int
answers_reach(int n)
{
    int64_t deadline = itest_now_ms() + 30000;

    while (stop_answered < n && itest_now_ms() < deadline)
        itest_sleep_ms(10);
    return stop_answered >= n;
}

/* answer_allowed - a push answer the owner's stop allows (SPEC §5, §2):
 * 201 with its ids, or a retryable 503 that says why, with Retry-After. */
static int
answer_allowed(const struct sent *s)
{
    if (s->status == 201)
        return s->nids == s->n;
    if (s->status != 503 || s->retry_after[0] == '\0')
        return 0;
    if (!strcmp(s->code, "ephemeral_forward_failed"))
        return !strcmp(s->applied, "unknown") || !strcmp(s->applied, "false");
    return !strcmp(s->code, "draining") || !strcmp(s->code, "owner_moved");
}

/*
 * 32 connections push through node 0 to four partitions of node 2, which
 * gets SIGTERM mid-load and hands them to node 1 (chosen so that node 0
 * still forwards after the move).  Every push is answered -- no hang, no
 * connection closed without a status -- with 201, or a 503 saying
 * ephemeral_forward_failed, draining or owner_moved; node 2 exits 0.  Then
 * everything is read back through node 0: each message of a push answered
 * 201 once, in its connection's order (a graceful move keeps order); of a
 * push refused, none; of one whose forward's outcome is unknown, at most
 * once.
 */
Test(cluster_hop, an_owner_stopping_mid_load_leaves_every_push_answered)
{
    static struct pusher conn[CONNS];
    char parts[NPARTS][16];
    struct crowd cw;
    int x = 2, exit_status, at_exit, got_after, wrong = 0, ok = 0, refused = 0;
    int unknown = 0;

    parts_of(STOP_Q, x, 1, NPARTS, parts);
    memset(last_read, -1, sizeof(last_read));
    for (int i = 0; i < CONNS; i++)
        conn[i] =
            (struct pusher){i, 0, ROUNDS, STOP_Q, parts[i % NPARTS], NULL};
    crowd_start(&cw, CONNS, stop_pusher, conn, sizeof(conn[0]));
    if (!answers_reach(STOP_BEFORE)) {
        stop_load = 1;
        crowd_join(&cw);
        cr_assert_fail("the load never started: %d answers",
                       (int)stop_answered);
    }
    exit_status = cl_stop(&c, x, 60000);
    at_exit = stop_answered;
    got_after = answers_reach(at_exit + STOP_AFTER);
    stop_load = 1;
    crowd_join(&cw);
    cr_assert_eq(exit_status, 0, "node %d's graceful stop", x);
    cr_assert(got_after,
              "pushes stopped after the owner left: %d answered "
              "at its exit, %d in all",
              at_exit, (int)stop_answered);

    for (int i = 0; i < CONNS; i++)
        for (int j = 0; j < ROUNDS && book[i][j].n > 0; j++) {
            const struct sent *s = &book[i][j];
            if (!answer_allowed(s) && wrong++ == 0)
                cr_log_error("c%d push %d: %ld (curl %d) %s applied '%s' "
                             "Retry-After '%s': %s",
                             i, j, s->status, s->curl, s->code, s->applied,
                             s->retry_after, s->error ? s->error : "");
            ok += s->status == 201;
            unknown += s->status == 503 && !strcmp(s->applied, "unknown");
            refused += s->status == 503 && strcmp(s->applied, "unknown");
        }
    cr_log_info("owner stop: %d pushes answered (%d at its exit): %d 201, %d "
                "503 refused, %d 503 outcome unknown; %d in flight at most",
                (int)stop_answered, at_exit, ok, refused, unknown,
                (int)in_flight_peak);
    cr_assert_eq(wrong, 0,
                 "%d of %d pushes answered as the stop does not "
                 "allow",
                 wrong, (int)stop_answered);

    cl_wait_view(&c, CL_ALL & ~(1u << x));
    for (int k = 0; k < NPARTS; k++)
        read_back(0, NULL, STOP_Q, parts[k], 0);
    book_check(CONNS);
}
