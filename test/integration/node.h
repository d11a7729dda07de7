/*
 * node.h - the integration-test harness: real mayflyd processes on loopback
 * and an HTTP client to talk to them.
 *
 * itest_node_start() forks and execs $MAYFLYD (set by test/run-all.sh) with a
 * fresh data dir under /tmp named after the running Criterion test, free
 * loopback ports, and the caller's -o settings; the server dies with the test
 * process (PR_SET_PDEATHSIG), so a failing test leaves nothing running.  A
 * report hook in the test runner prints the tail of each node's log when a
 * test fails and removes the data dirs of tests that pass.
 *
 * Requests go through libcurl.  itest_req() uses a keep-alive handle private
 * to the calling thread; itest_req_on() takes the caller's own handle.
 * Answers come back as struct itest_resp: status (0 when the transfer
 * failed), raw body, body parsed with json-c, and the headers tests check.
 *
 * Nodes must be started from the test's main thread: PR_SET_PDEATHSIG fires
 * when the thread that forked the server ends.  Functions return 0 or -errno
 * unless they say otherwise.
 */
#ifndef MAYFLY_TEST_INTEGRATION_NODE_H
#define MAYFLY_TEST_INTEGRATION_NODE_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <json-c/json.h>

#define ITEST_NODE_MAX_WORKERS 64

struct itest_node {
    pid_t pid;        /* the master; 0 once reaped */
    int port;         /* client port on 127.0.0.1 */
    int cluster_port; /* cluster port on 127.0.0.1 */
    char dir[256];    /* data dir, also holds the log */
    char log[300];    /* stderr and stdout of the node */
    char base[64];    /* "http://127.0.0.1:PORT" */
    int exit_status;  /* once reaped: exit code, or 128 + signal */
};

struct itest_resp {
    long status;               /* HTTP status; 0 when the transfer failed */
    int curl_code;             /* CURLcode of the transfer */
    char *body;                /* NUL-terminated; "" when none */
    size_t len;                /* body length */
    struct json_object *json;  /* parsed body, or NULL */
    char retry_after[64];      /* Retry-After header value, or "" */
    char allow[128];           /* Allow header value, or "" */
    char content_type[128];    /* Content-Type header value, or "" */
    char www_authenticate[64]; /* WWW-Authenticate header value, or "" */
    double seconds;            /* time the request took */
};

/* itest_now_ms - monotonic clock in milliseconds. */
int64_t itest_now_ms(void);

/* itest_sleep_ms - pause between two polls of a condition. */
void itest_sleep_ms(int ms);

/* itest_free_port - a loopback TCP port free on 127.0.0.1-3, reserved for
 * this test (other tests skip it) until the test process exits. */
int itest_free_port(void);

/*
 * itest_raise_nofile - raise this process's RLIMIT_NOFILE soft limit to
 * want (or the hard limit if lower); nodes started later inherit it.
 * Returns the new soft limit.
 */
long itest_raise_nofile(long want);

/*
 * itest_node_start - start a node and wait until GET /health answers 200.
 * opts is a space-separated list of key=value settings passed as -o flags
 * after the harness's own (listen, cluster_listen, data_dir, workers=2), so
 * they can override workers.  Aborts the test with the log tail when the
 * node exits or does not become healthy within 20 s.
 */
void itest_node_start(struct itest_node *n, const char *opts);

/*
 * itest_spawn - fork and exec $MAYFLYD with "-o" and each of the nown
 * settings in own, then each of the space-separated settings in opts (NULL
 * for none, so opts override own), its stdout and stderr appended to log;
 * the node dies with the thread that spawned it.  Returns its pid without
 * waiting for it; aborts the test when MAYFLYD is unset or fork fails.
 */
pid_t itest_spawn(const char *const *own, int nown, const char *opts,
                  const char *log);

/* itest_test_dir - a fresh directory named for the running test: removed
 * after the test passes, kept (with its logs' tails shown) if it fails. */
void itest_test_dir(char *out, size_t len);

/* itest_node_nofile - when > 0, the descriptor limit (soft and hard) the
 * nodes started from now on run under. */
extern long itest_node_nofile;

/* itest_ca_file - when not "", the CA file requests verify HTTPS nodes
 * with.  A node started with tls_cert_file among its options is asked on
 * https:// (its base). */
extern char itest_ca_file[512];

/*
 * itest_node_stop - SIGTERM the node and wait up to timeout_ms for it to
 * exit.  Returns its exit status (exit code, or 128 + the killing signal),
 * or -ETIMEDOUT after which the node has been SIGKILLed and reaped.
 */
int itest_node_stop(struct itest_node *n, int timeout_ms);

/*
 * itest_node_wait_exit - wait up to timeout_ms for a node that was signalled
 * to exit; returns as itest_node_stop() does (without killing on timeout).
 */
int itest_node_wait_exit(struct itest_node *n, int timeout_ms);

/* itest_node_log_tail - print the last lines of the node's log to stderr. */
void itest_node_log_tail(const struct itest_node *n, int lines);

/* itest_log_size - the bytes in the file at path (0 when absent). */
long itest_log_size(const char *path);

/*
 * itest_node_why_exited - why node n, whose wait status is status, exited
 * during a start: "exit 1" or "signal 9 (Killed)", then the last lines (at
 * most lines) its log gained from byte from on (its size before the start),
 * or why there is no log, into out; for the assertion's message, which a
 * runner's output keeps when a tail printed to stderr earlier is cut.
 */
void itest_node_why_exited(const struct itest_node *n, int status, long from,
                           int lines, char *out, size_t len);

/* itest_node_log_contains - 1 if the node's log holds needle, else 0. */
int itest_node_log_contains(const struct itest_node *n, const char *needle);

/* itest_check_segment - run `$MAYFLYD --check-segment` on the running node
 * (the live segment check, shm/check.h): its exit status (0 sound, 1
 * broken, 2 unable), its output in out. */
int itest_check_segment(const struct itest_node *n, char *out, size_t len);

/*
 * itest_node_workers - pids of the master's child processes (its workers),
 * sorted; returns how many (at most max).
 */
int itest_node_workers(const struct itest_node *n, pid_t *out, int max);

/*
 * itest_worker_conns - how many client connections of the node's client
 * port worker w holds.
 */
int itest_worker_conns(const struct itest_node *n, pid_t w);

/*
 * itest_conn_worker - the process of the node that holds the server side of
 * the loopback connection whose client end is bound to client_port; 0 when
 * no worker holds it (yet).
 */
pid_t itest_conn_worker(const struct itest_node *n, int client_port);

/*
 * itest_workers_listening - how many of the node's workers hold its client
 * listening socket (a draining worker closes its copy once it has stopped
 * accepting); 0 also when the socket is gone.
 */
int itest_workers_listening(const struct itest_node *n);

/*
 * itest_port_listening - whether any process still holds the node's client
 * listening socket (its master or a worker): once none does, the kernel
 * refuses new connections to the port.
 */
int itest_port_listening(const struct itest_node *n);

/*
 * itest_conn_consumed - 1 when the request written on client socket fd has
 * reached the node (the node's kernel acknowledged bytes) and a worker has
 * accepted the connection and read everything on it (its receive queue is
 * empty): the request is being served or is parked.  0 otherwise.
 */
int itest_conn_consumed(const struct itest_node *n, int fd);

/*
 * itest_conns_consumed - itest_conn_consumed() for the k client sockets in
 * fds (-1 entries are skipped) from one look at /proc; sets consumed[i] to
 * 0 or 1 when consumed is not NULL and returns how many are consumed.
 */
int itest_conns_consumed(const struct itest_node *n, const int *fds, int k,
                         char *consumed);

/* itest_handle - a new curl handle (keep-alive across its requests). */
CURL *itest_handle(void);

/*
 * itest_handle_on_worker - a new keep-alive curl handle whose connection is
 * held by worker want (0: any worker), found by opening connections (GET
 * /health) until one lands there; *got receives the worker.  Aborts the test
 * when 200 connections never reach it.
 */
CURL *itest_handle_on_worker(const struct itest_node *n, pid_t want,
                             pid_t *got);

/*
 * itest_req_on - send method path (joined to the node's base URL) with body
 * (NULL for none; sent as application/json) on handle h and fill r.
 * Returns r->status.  r must be freed with itest_resp_free().
 */
long itest_req_on(CURL *h, const struct itest_node *n, const char *method,
                  const char *path, const char *body, struct itest_resp *r);

/* itest_req - itest_req_on() with this thread's keep-alive handle. */
long itest_req(const struct itest_node *n, const char *method, const char *path,
               const char *body, struct itest_resp *r);

/*
 * itest_req_with - itest_req() that also sends headers, a NULL-terminated
 * list of "Name: value" lines (NULL for none).
 */
long itest_req_with(const struct itest_node *n, const char *method,
                    const char *path, const char *body,
                    const char *const *headers, struct itest_resp *r);

/* itest_req_thread_end - release this thread's keep-alive handle (what
 * itest_req and itest_req_with use), before a thread of a test ends. */
void itest_req_thread_end(void);

/* itest_get - GET of a printf-formatted path. */
long itest_get(const struct itest_node *n, struct itest_resp *r,
               const char *pathfmt, ...) __attribute__((format(printf, 3, 4)));

/* itest_post - POST of a printf-formatted JSON body to path. */
long itest_post(const struct itest_node *n, struct itest_resp *r,
                const char *path, const char *bodyfmt, ...)
    __attribute__((format(printf, 4, 5)));

/* itest_resp_free - release what a request filled in r. */
void itest_resp_free(struct itest_resp *r);

/* itest_resp_from_body - fill r from a raw body (for answers read apart). */
void itest_resp_from_body(struct itest_resp *r, long status, const char *body,
                          size_t len);

/*
 * itest_esc - percent-encode s into out (size len) for a query or a path
 * segment; returns out.
 */
char *itest_esc(const char *s, char *out, size_t len);

/*
 * itest_jget - the member at a dotted path ("messages.0.id": numbers index
 * arrays) of o, or NULL.
 */
struct json_object *itest_jget(struct json_object *o, const char *path);

/* itest_jstr - the string at path, or "" when absent or not a string. */
const char *itest_jstr(struct json_object *o, const char *path);

/* itest_jint - the integer at path, or INT64_MIN when absent or not one. */
int64_t itest_jint(struct json_object *o, const char *path);

/* itest_jlen - the length of the array at path, or -1. */
int itest_jlen(struct json_object *o, const char *path);

/* itest_jbool - 1 or 0 for a boolean at path, -1 when absent or not one. */
int itest_jbool(struct json_object *o, const char *path);

/*
 * itest_metric - sum of the samples of /metrics that match series: a metric
 * name, optionally with labels that must all be present ("mayfly_push_total"
 * or "mayfly_dropped_total{reason=\"ttl\"}").  Returns 0 with *out set, or
 * -ENOENT when no sample matches, -EIO when /metrics did not answer 200.
 */
int itest_metric(const struct itest_node *n, const char *series, double *out);

/*
 * itest_metrics_match - the same sum over an already fetched exposition
 * text; returns how many samples matched (0: *out untouched).
 */
int itest_metrics_match(const char *text, const char *series, double *out);

/*
 * itest_push - push payloads (a JSON array of payload values, e.g.
 * "[1,{\"a\":2}]") to queue/partition (partition NULL for the default).
 * Returns the status; r holds the answer.
 */
long itest_push(const struct itest_node *n, struct itest_resp *r,
                const char *queue, const char *partition, const char *payloads);

/* itest_push_ok - itest_push() that aborts the test unless the answer is
 * 201 with "pushed" == count. */
void itest_push_ok(const struct itest_node *n, struct itest_resp *r,
                   const char *queue, const char *partition,
                   const char *payloads, int count);

/*
 * itest_depth_pending - "pending" of GET depth?scope=node for queue (the
 * node's own share; group NULL for none), or -1 when depth does not answer
 * 200.
 */
int64_t itest_depth_pending(const struct itest_node *n, const char *queue,
                            const char *group);

/*
 * itest_listing_find - the entry of the queue listing for queue (a new
 * reference the caller puts), or NULL when the listing does not show it.
 */
struct json_object *itest_listing_find(const struct itest_node *n,
                                       const char *queue);

/*
 * itest_listing_int - the integer at path (as itest_jint() reads it) in
 * queue's entry of the queue listing; absent when the listing does not show
 * the queue.
 */
int64_t itest_listing_int(const struct itest_node *n, const char *queue,
                          const char *path, int64_t absent);

/*
 * itest_raw_connect - a plain TCP connection to the node's client port
 * (blocking, CLOEXEC); returns the fd or -errno.
 */
int itest_raw_connect(const struct itest_node *n);

/* itest_raw_send - write all of s to fd; 0 or -errno. */
int itest_raw_send(int fd, const char *s);

/* itest_raw_complete - 1 once buf (NUL-terminated) holds a whole answer:
 * head, then Content-Length bytes. */
int itest_raw_complete(const char *buf, size_t len);

/*
 * itest_raw_response - read one answer from fd (until its Content-Length is
 * complete, or the server closes) into r (status 0 when no status line
 * came).  Returns r->status.
 */
long itest_raw_response(int fd, struct itest_resp *r);

/*
 * itest_connect_within - open a new TCP connection to ip:port (IPv4),
 * waiting bound_ms at most: 0 when it opened (closed again), -ECONNREFUSED
 * when it was refused, -ETIMEDOUT when it was neither (held: no SYN-ACK,
 * no reset).  *took_ms is how long it took.
 */
int itest_connect_within(const char *ip, int port, int bound_ms,
                         int64_t *took_ms);

/* itest_local_port - the local port an fd is bound to, or -errno. */
int itest_local_port(int fd);

/*
 * struct itest_multi - many requests in flight at once from one thread (curl
 * multi), each on its own connection.  Requests are numbered from 0 in the
 * order they were added.
 */
struct itest_multi;

/* itest_multi_new - an empty set; aborts the test when out of memory. */
struct itest_multi *itest_multi_new(void);

/*
 * itest_multi_add - start method path (body NULL for none) on a fresh
 * connection; returns the request's number.  Nothing is sent until
 * itest_multi_run() drives the set.
 */
int itest_multi_add(struct itest_multi *m, const struct itest_node *n,
                    const char *method, const char *path, const char *body);

/*
 * itest_multi_run - drive every request for up to timeout_ms (returning
 * early once none is left running); returns how many are still running.
 */
int itest_multi_run(struct itest_multi *m, int timeout_ms);

/* itest_multi_done - 1 once request i has an answer (or failed). */
int itest_multi_done(const struct itest_multi *m, int i);

/* itest_multi_resp - the answer to request i (valid once done). */
struct itest_resp *itest_multi_resp(struct itest_multi *m, int i);

/*
 * itest_multi_local_port - the client-side port of request i's connection,
 * or -1 when it has none open.
 */
int itest_multi_local_port(const struct itest_multi *m, int i);

/* itest_multi_fd - the client socket of request i, or -1 when none. */
int itest_multi_fd(const struct itest_multi *m, int i);

/*
 * itest_multi_until_parked - drive m until each of its requests has been read
 * by a worker and none has been answered (the pops are parked); fails after
 * ms milliseconds, or at once if one is answered.
 */
void itest_multi_until_parked(const struct itest_node *n, struct itest_multi *m,
                              int ms);

/* itest_multi_count - how many requests were added. */
int itest_multi_count(const struct itest_multi *m);

/* itest_multi_free - abort what still runs and free everything. */
void itest_multi_free(struct itest_multi *m);

/*
 * itest_assert_error - abort the test unless r is the error answer status
 * {"error": sentence, "code": code} and, when field is not NULL, the
 * sentence names field (or one of the '|'-separated alternatives in it).
 * what says which request it was.
 */
void itest_assert_error(const struct itest_resp *r, long status,
                        const char *code, const char *field, const char *what);

/*
 * itest_id_parse - split a message id "e:<incarnation hex>:<partition>:<seq>"
 * (the partition may hold ':'); 0, or -EINVAL when id has another shape.
 */
int itest_id_parse(const char *id, char *inc, size_t inclen, char *part,
                   size_t partlen, char *seq, size_t seqlen);

#endif
