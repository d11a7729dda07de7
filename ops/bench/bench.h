/*
 * bench.h - mayfly-bench: the load generator behind `make bench`.
 *
 * One process drives mayfly (HTTP/1.1 keep-alive over epoll), Redis (RESP
 * through hiredis' reader, same epoll engine) and NATS (libnats) with the
 * same workloads, and prints one table. Not part of mayflyd.
 * Locking: a run's loops are threads that share only atomics in struct
 * bench_run and the read-only scenario data behind conn->ud.
 * Errors: 0 or -errno; a failed scenario becomes a row with a note.
 */
#ifndef MAYFLY_OPS_BENCH_H
#define MAYFLY_OPS_BENCH_H

#include <sys/types.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct redisReply;

/* Latency histogram: log-linear, 64 sub-buckets per power of two (values
 * below 128 ns exact, above that within 1.6 %). */
#define BENCH_HIST_SUB   64
#define BENCH_HIST_SLOTS (59 * BENCH_HIST_SUB)

struct bench_hist {
    uint64_t count;
    uint64_t max;
    uint64_t slot[BENCH_HIST_SLOTS];
};

/* Growable byte buffer; off is where the unread or unsent part starts. */
struct bench_buf {
    char *p;
    size_t len;
    size_t cap;
    size_t off;
};

/* One complete answer: HTTP status and body, or one RESP reply. */
struct bench_reply {
    int status;
    const char *body;
    size_t len;
    struct redisReply *rr;
};

/* BENCH_HTTPS: HTTP over TLS (GnuTLS, the server's certificate not
 * verified: the bench's own node on loopback). */
enum bench_proto { BENCH_HTTP, BENCH_RESP, BENCH_HTTPS };

struct bench_conn;

/* What a connection does. start() queues the first request; reply() sees
 * each answer and queues the next one. Both return 0 to go on, 1 when the
 * connection has finished its share, -1 on failure (after bench_fail). */
struct bench_role {
    int (*start)(struct bench_conn *c);
    int (*reply)(struct bench_conn *c, const struct bench_reply *r);
};

#define BENCH_RING 64

struct bench_conn {
    int fd;
    int id;
    int dead;
    int done;
    enum bench_proto proto;
    const struct bench_role *role;
    struct bench_loop *loop;
    void *ud;
    void *reader;
    void *tls;     /* gnutls_session_t of a BENCH_HTTPS connection */
    int tls_again; /* a TLS send waits to be resumed (NULL, 0) */
    struct bench_buf out;
    struct bench_buf in;
    struct bench_buf chunk;
    struct bench_buf w1;
    struct bench_buf w2;
    int state;
    long a;
    long b;
    long seq;
    uint64_t t0;
    uint64_t ring[BENCH_RING];
    unsigned rh;
    unsigned rt;
};

struct bench_loop {
    struct bench_run *run;
    int ep;
    pthread_t th;
    struct bench_conn **conns;
    int n;
    int cap;
    struct bench_hist hist;
    uint64_t ops;
    uint64_t msgs;
    uint64_t errors;
    uint64_t t_last;
    char err[200];
};

/* What the whole machine did, read from /proc at the edges of a measured
 * window: CPU ticks spent outside idle (all processes, all CPUs) and TCP
 * segments sent (loopback: each one is also received). */
struct bench_sys {
    uint64_t busy_ticks;
    uint64_t segs;
    uint64_t ctxt;      /* context switches, all CPUs */
    uint64_t self_us;   /* CPU of this process (the load generator) */
    uint64_t server_ns; /* CPU of mayflyd's processes (--mayfly-pid), 0: none */
};

/* A set of connections spread over threads, measured in [t_begin, t_end]. */
struct bench_run {
    int nloops;
    struct bench_loop *loops;
    int next;
    _Atomic uint64_t t_begin;
    _Atomic uint64_t t_end;
    atomic_int stop;
    atomic_int active;
    _Atomic uint64_t deadline;
    uint64_t t_start;
    struct bench_sys sys_begin;
    struct bench_sys sys_end;
    struct bench_hist hist;
    uint64_t ops;
    uint64_t msgs;
    uint64_t errors;
    uint64_t t_last;
    char err[200];
};

/* The most samples a row keeps: a compared scenario runs its rows once a
 * pair (main.c). */
#define BENCH_PAIRS_MAX 8

/* One measurement of a row. */
struct bench_sample {
    double rate;
    double p50_us;
    double p99_us;
};

/* A row of the output table. Peer rows name the mayfly row they compare
 * with in ref; by_p50 compares p50 latency instead of rate.  A row added
 * again under its key becomes one more sample of it (rate and
 * percentiles: the samples' medians). */
struct bench_row {
    char key[24];
    char scenario[16];
    char system[16];
    char variant[72];
    double rate;
    char unit[12];
    double p50_us;
    double p99_us;
    char ref[24];
    /* a mayfly row compared the other way: ratio = this row / the best of
     * these rows (keys, comma-separated), sample by sample ("" for none) */
    char vs[56];
    int by_p50;
    int ok;
    double cpu_us;    /* machine CPU per operation, 0: not measured */
    double client_us; /* of it, the load generator's (this process) */
    double segs;      /* TCP segments per operation */
    char note[240];
    int nsamples;
    struct bench_sample sample[BENCH_PAIRS_MAX];
};

/* A port on 127.0.0.(1+k) where the engine takes a port (every node of
 * the cluster rows listens on its own address). */
#define BENCH_AT(k, port) ((int)(((unsigned)(k) << 16) | (unsigned)(port)))

#define BENCH_NODES 3

struct bench_opts {
    int quick;
    double warm;
    double secs;
    int threads;
    int mport;
    int rport;
    int nport;
    int okport;
    int tport; /* the same mayflyd build with tls_cert_file and auth_file,
                  for the TLS + auth rows (0: none) */
    const char *ttoken; /* the bearer token every request to tport carries
                           (NULL: none) */
    pid_t mpid;
    const char *mayflyd; /* the binary run.sh starts, for the nodes of the
                            memory rows (node.c; NULL: those rows fail) */
    const char *rundir;  /* where their data and logs go (build/bench/run) */
    long inboxes;
    int parked;
    int pipeline; /* rpc clients of mayfly and Redis pipeline their steps */
    int cluster[BENCH_NODES]; /* HTTP ports of nodes n0-n2, 127.0.0.1-3 */
    const char *json;
    const char *md;
    const char *only;
    const char *label;
};

extern struct bench_opts bench_opt;

/* engine.c; bench_host: the IPv4 address (network order) every connection
 * goes to instead of 127.0.0.(1+k) (0: those); bench_token: the bearer
 * token a request built without one carries (NULL: none).  Both set
 * before a run by `mayfly bench` (ops/cli/bench.c), which links engine.c
 * and roles.c built with BENCH_NO_RESP (no hiredis). */
extern uint32_t bench_host;
extern const char *bench_token;
uint64_t bench_now_ns(void);
void bench_sleep_ns(uint64_t ns);
void bench_hist_add(struct bench_hist *h, uint64_t ns);
void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src);
double bench_hist_pct_us(const struct bench_hist *h, double pct);
void bench_buf_reserve(struct bench_buf *b, size_t more);
void bench_buf_add(struct bench_buf *b, const void *d, size_t n);
void bench_buf_str(struct bench_buf *b, const char *s);
void bench_buf_printf(struct bench_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void bench_buf_free(struct bench_buf *b);
int bench_tcp_connect(int port);
int bench_wait_port(int port, double secs);
long bench_http_parse(const char *p, size_t len, struct bench_buf *chunk,
                      struct bench_reply *r);
void bench_http_request(struct bench_buf *out, const char *method,
                        const char *path, const char *body, size_t blen);
void bench_http_request_auth(struct bench_buf *out, const char *token,
                             const char *method, const char *path,
                             const char *body, size_t blen);
int bench_http_call(int fd, struct bench_buf *in, struct bench_buf *chunk,
                    const char *method, const char *path, const char *body,
                    struct bench_reply *r);
int bench_http_recv(int fd, struct bench_buf *in, struct bench_buf *chunk,
                    struct bench_reply *r);
int bench_json_str(const char *body, size_t len, size_t *pos, const char *key,
                   const char **s, size_t *slen);
long bench_json_count(const char *body, size_t len, const char *key);
struct bench_run *bench_run_new(int threads);
struct bench_conn *bench_run_add(struct bench_run *run, enum bench_proto proto,
                                 int port, const struct bench_role *role,
                                 void *ud);
/* bench_run_add_fd - bench_run_add with fd, a connection to port already
 * made (a negative errno: the connect failed, NULL with run->err set). */
struct bench_conn *bench_run_add_fd(struct bench_run *run, int fd,
                                    enum bench_proto proto, int port,
                                    const struct bench_role *role, void *ud);
int bench_run_start(struct bench_run *run);
void bench_run_join(struct bench_run *run);
void bench_run_timed(struct bench_run *run, double warm, double secs);
/* bench_run_secs - the measured window of a timed run, in seconds. */
double bench_run_secs(const struct bench_run *run);
void bench_sys_read(struct bench_sys *s);

/* bench_server_ns - CPU time mayflyd (bench_opt.mpid and its children, the
 * workers) has used, ns, from /proc/PID/schedstat; 0 without --mayfly-pid.
 * Its difference over a phase, per message, is the server's own cost,
 * which other loads on the machine change far less than a rate. */
uint64_t bench_server_ns(void);
void bench_run_free(struct bench_run *run);
void bench_send(struct bench_conn *c, const void *d, size_t n);
void bench_record(struct bench_conn *c, uint64_t t0, uint64_t msgs);
void bench_fail(struct bench_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* main.c */
void bench_row_add(const struct bench_row *r);
/* bench_row_find - the row added with key, or NULL. */
const struct bench_row *bench_row_find(const char *key);

void bench_row_from_run(struct bench_row *row, const struct bench_run *run,
                        double secs, const char *unit);
void bench_row_cost(struct bench_row *row, const struct bench_sys *begin,
                    const struct bench_sys *end, double secs, const char *per);
void bench_row_fail(const char *key, const char *scenario, const char *system,
                    const char *variant, const char *note);
int bench_want(const char *scenario);

/* roles.c: the request sequences mayfly.c and cluster.c share, and what
 * they send */
#define BENCH_PAYLOAD 256 /* bytes a message's payload holds */
#define BENCH_BATCH   100 /* messages a push carries and a pop asks for */
#define BENCH_PARTS   8   /* partitions a push row spreads over */
#define BENCH_RPC_PAD 64  /* bytes of padding a request and a reply carry */

extern char bench_payload[BENCH_PAYLOAD + 1];
extern char bench_rpc_pad[BENCH_RPC_PAD + 1];
extern struct bench_buf bench_msgs100; /* [{"payload": ...}] x BENCH_BATCH */
extern struct bench_buf bench_msgs1;   /* one of them */
/* the same with a "key" each, whose first 16 characters the keyed push
 * role makes new for every push (bench_push_sc.keyed) */
extern struct bench_buf bench_msgs100_keyed;

/* bench_payload_init - fill the payloads and the message arrays (once). */
void bench_payload_init(void);

/* bench_push_req - append to out a push of msgs to queue, partition part
 * (NULL: none named), with token (NULL: none) as its bearer token. */
void bench_push_req(struct bench_buf *out, const char *token, const char *queue,
                    const char *part, const struct bench_buf *msgs);

/* Pushes of BENCH_BATCH messages, connection i sending req[i % PARTS]; a
 * reset follows every 20th push (of all connections), keeping the queue
 * under its 10,000 messages as DEL bounds Redis's lists in the peer
 * workload.  A push that still finds the queue full (429: a reset was slow
 * to land) is counted in full and also followed by a reset. */
struct bench_push_sc {
    struct bench_buf req[BENCH_PARTS];
    struct bench_buf reset;
    int reset_every; /* pushes between resets (0: 20) */
    int batch;       /* messages each req carries (0: BENCH_BATCH) */
    int keyed;       /* req carries bench_msgs100_keyed: each push's keys new */
    atomic_long pushed;
    atomic_long full;
};
extern const struct bench_role bench_role_push;

/* Fill pushes of BENCH_BATCH messages: item k goes to queue name[k / per_q]
 * (name set), or prefix and k / per_q (per_q > 0), or prefix alone; and to
 * partition p(k % parts), none when parts is 0. */
struct bench_fill_sc {
    char prefix[40];
    char (*name)[64];
    int per_q;
    int parts;
    long total;
    const struct bench_buf *msgs; /* what a push carries (NULL: msgs100) */
    int batch;                    /* messages in msgs (0: BENCH_BATCH) */
    atomic_long next;
};
extern const struct bench_role bench_role_fill;

/* bench_fill_run - the fill to its end with conns connections to port (60 s
 * at most); 0, or -EIO with why in err. */
int bench_fill_run(struct bench_fill_sc *sc, int port, int conns, char *err,
                   size_t errlen);

/* Drain: connection i empties queues i, i + step, ... (of nq: name[k], or
 * prefix and k) with pops of BENCH_BATCH, pop_arg (NULL: nothing) added to
 * each pop's query, and unless autoack one ack a pop; with one, no ack
 * request: each pop is a POST that acks the batch before with one
 * cumulative entry (SPEC §14; pop_arg unused). */
struct bench_drain_sc {
    char prefix[40];
    char (*name)[64];
    const char *pop_arg;
    int nq;
    int step;
    int autoack;
    int one;
    int batch; /* messages a pop asks for (0: BENCH_BATCH) */
};
extern const struct bench_role bench_role_drain;

/* Request/reply by inbox: a requester (bench_role_rpcq) mints an inbox,
 * pushes a request to queue naming it ("<inbox>|<pad>"), and long-polls
 * the inbox; a responder (bench_role_rpcs) long-polls queue in group
 * workers, pushes each request's reply to its inbox and acks the batch.
 * inbox, when set, picks the inbox's name from a base name unique to the
 * request; pop_arg (NULL: nothing) is added to every pop's query.  Counts,
 * over the whole run: round trips, and the HTTP requests made for them. */
struct bench_rpc_sc {
    char queue[64];
    int tag;
    const char *pop_arg;
    void (*inbox)(char *out, size_t len, const char *base);
    const char *pad; /* request and reply payload (NULL: bench_rpc_pad) */
    int batch;       /* requests a responder's pop asks for (0: 16) */
    _Atomic long trips;
    _Atomic long requests;
};
extern const struct bench_role bench_role_rpcq;
extern const struct bench_role bench_role_rpcs;

/* Request/reply by the request verb (SPEC §9), over a bench_rpc_sc: a
 * requester (bench_role_reqv) sends POST /request with pad and waits for
 * the reply (a 503 no_responders before the responders park is asked
 * again); a responder (bench_role_reqvs) long-polls queue in group workers
 * and answers each request inside its ack. */
extern const struct bench_role bench_role_reqv;
extern const struct bench_role bench_role_reqvs;

/* bench_rpc_request - queue one request of an rpc connection, counted in
 * its bench_rpc_sc; to the TLS + auth node (the only HTTPS one) with its
 * token. */
void bench_rpc_request(struct bench_conn *c, const char *method,
                       const char *path, const char *body, size_t len);

/* bench_rpcs_start - a responder's long poll of the request queue (the
 * start of bench_role_rpcs, for responders of other kinds). */
int bench_rpcs_start(struct bench_conn *c);

/* mayfly.c: bench_mayfly_compared - the mayfly rows a peer compares with
 * in scenario (as bench_redis_compared names them), one sample each;
 * bench_mayfly_all - every other mayfly row but the memory rows;
 * bench_mayfly_mem_msg, _inbox, _parked - the memory a held message, an
 * idle inbox, a parked pop costs, each on a node of its own (node.c) */
void bench_mayfly_compared(const char *scenario);
void bench_mayfly_all(void);
void bench_mayfly_mem_msg(void);
void bench_mayfly_mem_inbox(void);
void bench_mayfly_mem_parked(void);
void bench_mayfly_http(const char *key, int port, const char *path,
                       const char *label);
int bench_metric(int port, const char *name, double *val);
/* bench_call - one request on a fresh connection, its status in *status;
 * 0 or -errno. */
int bench_call(int port, const char *method, const char *path, const char *body,
               int *status);

/* node.c: a mayflyd of the bench's own for one measurement (its client
 * port and master's pid), and the memory rows' readings of a node. */
struct bench_node {
    int port;
    pid_t pid; /* 0: none (or stopped) */
};
/* bench_free_port - a port of 127.0.0.1 nothing listens on; -errno. */
int bench_free_port(void);
/* bench_node_main - the node run.sh started (--mayfly, --mayfly-pid). */
struct bench_node bench_node_main(void);
/* bench_node_start - start bench_opt.mayflyd as run.sh starts its main
 * node, on spare ports, its data and log under bench_opt.rundir/name;
 * 0 once it answers GET /health, else -errno with why in err (nothing
 * left running). */
int bench_node_start(struct bench_node *n, const char *name, char *err,
                     size_t errlen);
/* bench_node_stop - stop the node and reap it (none: nothing). */
void bench_node_stop(struct bench_node *n);

/* Memory as the server accounts it (mayfly_memory_used_bytes) and as the
 * kernel sees it (PSS of the node's master and its children; 0 without a
 * pid). */
struct bench_mem {
    double acct;
    double pss;
    int acct_ok;
};
void bench_mem_sample(const struct bench_node *n, struct bench_mem *m);
/* bench_mem_settle - a sample once the node's PSS holds still (within
 * 0.2 % over 250 ms, 5 s at most). */
void bench_mem_settle(const struct bench_node *n, struct bench_mem *m);
/* bench_mem_row_pss - a memory row: the node's PSS from m0 to m1 over n
 * items (the rate), the accounted figure in its note, with target (NULL:
 * none) beside it. */
void bench_mem_row_pss(const char *key, const char *variant,
                       const struct bench_mem *m0, const struct bench_mem *m1,
                       double n, const char *target);
/* bench_mem_row_acct - a memory row: the accounted bytes from m0 to m1
 * over n items less payload_bytes each (the rate; PSS when the node does
 * not serve the metric), the PSS beside it in its note. */
void bench_mem_row_acct(const char *key, const char *variant,
                        const struct bench_mem *m0, const struct bench_mem *m1,
                        double n, double payload_bytes);

/* rset.c: a reader set (see there) */
#define BENCH_RSET_CARRY   16
#define BENCH_RSET_CHUNK   (64u << 10)
#define BENCH_RSET_THREADS 2

/* One socket of a reader set. */
struct bench_sconn {
    int fd;
    int ready;                    /* its ready marker came */
    char carry[BENCH_RSET_CARRY]; /* the tail of the last read (markers */
    size_t ncarry;                /* split across reads) */
    _Atomic long seen;            /* markers counted after ready */
    int ended;                    /* closed, or an overflow event came */
};

struct bench_rset;

/* One reader thread: its epoll over its share of the sockets. */
struct bench_rthread {
    struct bench_rset *set;
    pthread_t th;
    int ep;
    struct bench_hist hist; /* this round's arrivals */
    char buf[BENCH_RSET_CHUNK + BENCH_RSET_CARRY];
};

/* A reader set: n sockets to one server. */
struct bench_rset {
    int n;
    struct bench_sconn *c;
    struct bench_rthread t[BENCH_RSET_THREADS];
    const char *ready;  /* marker: the stream or subscription is set */
    const char *marker; /* marker: one message */
    const char *ping;   /* a server ping to answer with pong (NULL) */
    const char *pong;
    atomic_int stop;
    atomic_int nready;
    atomic_long events;      /* markers counted, all sockets */
    atomic_long overflows;   /* "event: overflow" seen */
    _Atomic uint64_t t0;     /* when this round's message went out */
    _Atomic long round;      /* markers each socket must reach */
    atomic_long arrived;     /* sockets that reached it */
    _Atomic uint64_t t_last; /* the latest arrival */
};

/* One round's figures. */
struct bench_round {
    double ms_all; /* to the last arrival; 0: not all arrived */
    double p50, p99;
    long arrived;
};

/* bench_rset_open - n sockets to port, each sent req (reqlen bytes), read
 * by the threads; with err set when a socket cannot be had (s->n: those
 * that could). */
struct bench_rset *bench_rset_open(int n, int port, const char *req,
                                   size_t reqlen, char *err, size_t errlen);
/* bench_rset_open_each - bench_rset_open with socket i sent
 * reqs[i % nreqs] (lens[i % nreqs] bytes): a subscription of its own. */
struct bench_rset *bench_rset_open_each(int n, int port,
                                        const char *const *reqs,
                                        const size_t *lens, int nreqs,
                                        char *err, size_t errlen);
/* bench_rset_start - the reader threads (ready and marker set); 0 or
 * -errno. */
int bench_rset_start(struct bench_rset *s);
/* bench_rset_wait_ready - until every socket is ready, at most secs; how
 * many are. */
int bench_rset_wait_ready(struct bench_rset *s, double secs);
/* bench_rset_close - stop the threads, close every socket (NULL: none). */
void bench_rset_close(struct bench_rset *s);
/* bench_rset_round - send (fn, with arg) one message all sockets should
 * get, wait until every ready socket has it (at most secs); its figures. */
struct bench_round bench_rset_round(struct bench_rset *s, int (*fn)(void *),
                                    void *arg, double secs);

/* stream.c: bench_stream_fanout - one sample of the fan-out row, mayfly's
 * (nats 0) or NATS's (its set opened, its rounds, closed);
 * bench_stream_all - the stream rows not compared (throughput);
 * bench_stream_mem - the memory per idle stream, on a node of its own */
void bench_stream_fanout(int nats);
void bench_stream_all(void);
void bench_stream_mem(void);

/* presence.c: bench_presence_churn - one sample of the churn row,
 * mayfly's (nats 0: enters and leaves by call, each channel's events to a
 * stream) or NATS's (the same events published, a subscriber a subject);
 * bench_presence_all - the rows not compared (listing and counting a full
 * channel), before the compared pairs; bench_presence_mem - the memory
 * per member, on a node of its own (node.c) */
void bench_presence_churn(int nats);
void bench_presence_all(void);
void bench_presence_mem(void);

/* cluster.c */
void bench_cluster_all(void);

/* floor.c: the rpc floor server, under BENCH_FLOOR_PREFIX of serve-ok */
#define BENCH_FLOOR_PREFIX "/api/v1/ephemeral/"
struct MHD_Connection;
int bench_floor_handler(struct MHD_Connection *conn, const char *url,
                        const char *upload, size_t *upload_size,
                        void **req_cls);
void bench_floor_completed(void **req_cls);
void bench_floor_expire(int all);

/* peers.c: a compared scenario's peer rows, one sample each ("push",
 * "drain", "rpc1", "rpc32", "wake"; a scenario a peer lacks adds none) */
void bench_redis_compared(const char *scenario);
void bench_nats_compared(const char *scenario);
/* bench_nats_close - once the NATS rows are done. */
void bench_nats_close(void);

#endif
