/*
 * test_lifecycle.c - the node as an operator and a first-time user meet it:
 * the two curl lines of SPEC §2 (and the depth line of the reference) run
 * through the curl binary as written, and SIGTERM on one node answers parked
 * pops and in-flight requests and exits 0 within a bounded time, refusing
 * new connections from the moment it begins (its port closes then) and
 * answering 503 draining on the connections opened before.
 */
#include <sys/socket.h>
#include <sys/time.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

/* Run a shell command; its stdout parsed as JSON (NULL if it is not). */
static struct json_object *
run(const char *cmd, int *status, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    size_t k;

    cr_assert(p, "popen %s", cmd);
    k = fread(out, 1, len - 1, p);
    out[k] = '\0';
    *status = pclose(p);
    return json_tokener_parse(out);
}

Test(curl, spec_lines_work_as_written, .timeout = 60)
{
    struct itest_node n;
    struct json_object *j, *want;
    char cmd[1024], out[8192];
    int st;

    itest_node_start(&n, NULL);
    snprintf(cmd, sizeof(cmd),
             "curl -X POST localhost:%d/api/v1/ephemeral/push -H "
             "'content-type: application/json' \\\n  -d "
             "'{\"queue\":\"presence\",\"partition\":\"room-7\",\"messages\":"
             "[{\"payload\":{\"user\":\"ada\",\"typing\":true}}]}' "
             "2>/dev/null",
             n.port);
    j = run(cmd, &st, out, sizeof(out));
    cr_assert_eq(st, 0, "curl exited %d: %s", st, out);
    cr_assert(j, "the push answer is not JSON: %s", out);
    cr_assert_eq(itest_jint(j, "pushed"), 1, "%s", out);
    cr_assert_eq(itest_jlen(j, "ids"), 1, "%s", out);
    json_object_put(j);
    snprintf(cmd, sizeof(cmd),
             "curl 'localhost:%d/api/v1/ephemeral/pop?queue=presence&"
             "partition=room-7&group=ui-1&wait=true&timeout=5000' 2>/dev/null",
             n.port);
    j = run(cmd, &st, out, sizeof(out));
    cr_assert_eq(st, 0, "curl exited %d: %s", st, out);
    cr_assert(j, "the pop answer is not JSON: %s", out);
    cr_assert_str_eq(itest_jstr(j, "queue"), "presence", "%s", out);
    cr_assert_eq(itest_jlen(j, "messages"), 1, "%s", out);
    cr_assert_str_eq(itest_jstr(j, "messages.0.partition"), "room-7", "%s",
                     out);
    cr_assert_eq(itest_jint(j, "messages.0.attempts"), 1, "%s", out);
    cr_assert(*itest_jstr(j, "messages.0.id"), "%s", out);
    want = json_tokener_parse("{\"user\":\"ada\",\"typing\":true}");
    cr_assert(json_object_equal(itest_jget(j, "messages.0.payload"), want),
              "%s", out);
    json_object_put(want);
    json_object_put(j);
    snprintf(cmd, sizeof(cmd),
             "curl -s http://127.0.0.1:%d/api/v1/ephemeral/queues/presence/"
             "depth",
             n.port);
    j = run(cmd, &st, out, sizeof(out));
    cr_assert_eq(st, 0, "curl exited %d: %s", st, out);
    cr_assert_str_eq(itest_jstr(j, "partitions.0.partition"), "room-7", "%s",
                     out);
    json_object_put(j);
}

/* The CPU time (user + system, clock ticks) the node's workers used. */
static long
workers_cpu_ticks(const struct itest_node *n)
{
    pid_t w[ITEST_NODE_MAX_WORKERS];
    int k = itest_node_workers(n, w, ITEST_NODE_MAX_WORKERS);
    long sum = 0;

    cr_assert_gt(k, 0, "no worker found");
    for (int i = 0; i < k; i++) {
        char path[64], stat[1024], *p;
        unsigned long ut = 0, st = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)w[i]);
        cr_assert_not_null(f = fopen(path, "r"), "%s", path);
        p = fgets(stat, sizeof(stat), f) ? strrchr(stat, ')') : NULL;
        fclose(f);
        /* after ") ": state, ppid, pgrp, session, tty, tpgid, flags,
         * minflt, cminflt, majflt, cmajflt, utime, stime */
        cr_assert(p && sscanf(p,
                              ") %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                              "%*u %lu %lu",
                              &ut, &st) == 2,
                  "%s", path);
        sum += (long)(ut + st);
    }
    return sum;
}

/* A worker polls busy_poll_us (50) after each event before it sleeps: after
 * a burst of requests a node left alone must go back to sleep, not poll on.
 * Two seconds idle may cost the heartbeats' polls, far below a tenth of
 * the time (a worker that never slept would use all of it). */
Test(idle, workers_sleep_once_the_requests_stop, .timeout = 60)
{
    struct itest_node n;
    struct itest_resp r;
    long hz = sysconf(_SC_CLK_TCK), t0, used;

    itest_node_start(&n, "workers=2");
    for (int i = 0; i < 200; i++) {
        itest_push_ok(&n, &r, "idle-q", NULL, "[1]", 1);
        itest_resp_free(&r);
        cr_assert_eq(
            itest_get(&n, &r,
                      "/api/v1/ephemeral/pop?queue=idle-q&autoAck=true"),
            200);
        itest_resp_free(&r);
    }
    t0 = workers_cpu_ticks(&n);
    itest_sleep_ms(2000);
    used = workers_cpu_ticks(&n) - t0;
    cr_log_info("idle: the workers used %ld ms of CPU in 2 s idle",
                used * 1000 / hz);
    cr_assert_lt(used * 10, 2 * hz, "the workers used %ld ticks of %ld in 2 s",
                 used, 2 * hz);
    itest_node_stop(&n, 20000);
}

Test(term, idle_node_exits_0, .timeout = 60)
{
    struct itest_node n;
    int64_t t0;
    int st;

    itest_node_start(&n, NULL);
    t0 = itest_now_ms();
    st = itest_node_stop(&n, 20000);
    cr_assert_eq(st, 0, "SIGTERM: exit status %d (-%d is a timeout)", st,
                 ETIMEDOUT);
    cr_log_info("term: an idle node exited in %lld ms",
                (long long)(itest_now_ms() - t0));
}

Test(term, parked_pops_are_answered_and_the_node_exits_0, .timeout = 90)
{
    enum { PARKED = 20, INFLIGHT = 30 };
    struct itest_node n;
    struct itest_multi *m = itest_multi_new();
    int64_t deadline, t0;
    int st;

    itest_node_start(&n, NULL);
    for (int i = 0; i < PARKED; i++)
        itest_multi_add(m, &n, "GET",
                        "/api/v1/ephemeral/pop?queue=tq&wait=true"
                        "&timeout=60000",
                        NULL);
    deadline = itest_now_ms() + 20000;
    for (int parked = 0; parked < PARKED;) {
        int fds[PARKED];

        itest_multi_run(m, 20);
        for (int i = 0; i < PARKED; i++) {
            cr_assert(!itest_multi_done(m, i), "pop %d answered: %s", i,
                      itest_multi_resp(m, i)->body);
            fds[i] = itest_multi_fd(m, i);
        }
        parked = itest_conns_consumed(&n, fds, PARKED, NULL);
        cr_assert(parked == PARKED || itest_now_ms() < deadline,
                  "%d of %d pops parked", parked, PARKED);
    }
    for (int i = 0; i < INFLIGHT; i++)
        itest_multi_add(m, &n, "POST", "/api/v1/ephemeral/push",
                        "{\"queue\":\"other\",\"messages\":[{\"payload\":1}]}");
    itest_multi_run(m, 0);
    t0 = itest_now_ms();
    cr_assert_eq(kill(n.pid, SIGTERM), 0);
    cr_assert_eq(itest_multi_run(m, 20000), 0,
                 "requests unanswered 20 s after SIGTERM");
    st = itest_node_wait_exit(&n, 20000);
    cr_assert_eq(st, 0,
                 "exit status %d after SIGTERM (-%d: still running "
                 "after 20 s)",
                 st, ETIMEDOUT);
    for (int i = 0; i < PARKED; i++) {
        struct itest_resp *r = itest_multi_resp(m, i);

        cr_assert(r->status == 200 && itest_jlen(r->json, "messages") == 0,
                  "parked pop %d after SIGTERM: status %ld (curl %d) %s", i,
                  r->status, r->curl_code, r->body);
    }
    for (int i = PARKED; i < PARKED + INFLIGHT; i++) {
        struct itest_resp *r = itest_multi_resp(m, i);

        cr_assert(r->status == 201 || r->status == 0 ||
                      (r->status == 503 &&
                       strcmp(itest_jstr(r->json, "code"), "draining") == 0),
                  "push in flight at SIGTERM: %ld %s", r->status, r->body);
    }
    cr_log_info("term: exited %lld ms after SIGTERM with %d parked pops",
                (long long)(itest_now_ms() - t0), PARKED);
    itest_multi_free(m);
}

/* push_begun - a connection that sent a push's head and the first 10
 * bytes of body, once a worker has read them: the push is in flight until
 * the rest comes. */
static int
push_begun(const struct itest_node *n, const char *body)
{
    char head[256];
    int fd = itest_raw_connect(n);
    int64_t deadline = itest_now_ms() + 10000;

    cr_assert(fd >= 0);
    snprintf(head, sizeof(head),
             "POST /api/v1/ephemeral/push HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n"
             "%.10s",
             strlen(body), body);
    cr_assert_eq(itest_raw_send(fd, head), 0);
    while (!itest_conn_consumed(n, fd)) {
        cr_assert(itest_now_ms() < deadline, "the push head was never read");
        itest_sleep_ms(5);
    }
    return fd;
}

/*
 * While a push is still being received, SIGTERM starts the drain and waits
 * for it: meanwhile a keep-alive connection is answered 503 (health says
 * draining, other calls answer code draining with Retry-After), the push in
 * flight is answered when its body completes, and the node exits 0.
 */
Test(term, drain_answers_503_draining_and_waits_for_a_request_in_flight,
     .timeout = 90)
{
    static const char body[] = "{\"queue\":\"slow\",\"messages\":"
                               "[{\"payload\":1}]}";
    struct itest_node n;
    struct itest_resp r;
    CURL *h = itest_handle();
    int fd, st;
    int64_t deadline;

    itest_node_start(&n, NULL);
    itest_req_on(h, &n, "GET", "/health", NULL, &r);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    itest_resp_free(&r);
    fd = push_begun(&n, body);
    cr_assert_eq(kill(n.pid, SIGTERM), 0);
    deadline = itest_now_ms() + 10000;
    for (;;) {
        itest_req_on(h, &n, "GET", "/health", NULL, &r);
        if (r.status == 503)
            break;
        cr_assert_eq(r.status, 200, "/health during the drain: %ld (curl %d)",
                     r.status, r.curl_code);
        itest_resp_free(&r);
        cr_assert(itest_now_ms() < deadline, "/health never said draining");
        itest_sleep_ms(10);
    }
    cr_assert_eq(itest_jbool(r.json, "ready"), 0, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "status"), "draining", "%s", r.body);
    itest_resp_free(&r);
    itest_req_on(h, &n, "GET", "/api/v1/ephemeral/pop?queue=slow", NULL, &r);
    itest_assert_error(&r, 503, "draining", NULL, "a pop during the drain");
    cr_assert(*r.retry_after, "503 draining without Retry-After");
    itest_resp_free(&r);
    cr_assert_eq(itest_raw_send(fd, body + 10), 0);
    itest_raw_response(fd, &r);
    cr_assert(r.status == 201 ||
                  (r.status == 503 &&
                   strcmp(itest_jstr(r.json, "code"), "draining") == 0),
              "the push in flight at SIGTERM: %ld %s", r.status, r.body);
    itest_resp_free(&r);
    close(fd);
    st = itest_node_wait_exit(&n, 20000);
    cr_assert_eq(st, 0, "exit status %d after SIGTERM", st);
    curl_easy_cleanup(h);
}

/* health_on - GET /health on the open raw connection fd, as keep-alive. */
static void
health_on(int fd, struct itest_resp *r)
{
    cr_assert_eq(itest_raw_send(fd, "GET /health HTTP/1.1\r\nHost: t\r\n\r\n"),
                 0);
    itest_raw_response(fd, r);
}

/*
 * The client port closes the moment the drain begins (issue 30 item 5):
 * while a worker still waits for the body of a push begun before SIGTERM,
 * no process of the node holds the listening socket any more, so a new
 * connection is refused at once (a bounded connect), not held; a
 * connection opened before the drain is still served: its GET /health
 * answers 503 with the node's status (draining), a push on it 503 draining
 * with Retry-After, which closes it; and the push in flight is refused
 * when its body is in.
 */
Test(term, new_connections_during_the_drain_are_refused_at_once, .timeout = 90)
{
    enum { PAYLOAD = 64 * 1024 };
    struct itest_resp r;
    char *body = malloc(PAYLOAD + 64), node[80], inc[40], one;
    struct timeval tv = {2, 0};
    int fd, kfd, st, k, port, rc;
    int64_t deadline, took;
    pid_t holder;
    struct itest_node n;

    cr_assert(body);
    k = snprintf(body, 64, "{\"queue\":\"slow\",\"messages\":[{\"payload\":\"");
    memset(body + k, 'x', PAYLOAD);
    strcpy(body + k + PAYLOAD, "\"}]}");
    itest_node_start(&n, NULL);
    /* A connection opened before the drain, kept alive. */
    kfd = itest_raw_connect(&n);
    cr_assert(kfd >= 0, "connect: %s", strerror(-kfd));
    health_on(kfd, &r);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    snprintf(node, sizeof(node), "%s", itest_jstr(r.json, "node"));
    snprintf(inc, sizeof(inc), "%s", itest_jstr(r.json, "incarnation"));
    itest_resp_free(&r);
    /* A push whose head and first bytes are in: its worker's drain waits
     * for the rest (5 s at most). */
    fd = push_begun(&n, body);
    port = itest_local_port(fd);
    holder = itest_conn_worker(&n, port);
    cr_assert(holder > 0, "no worker holds the push in flight");
    cr_assert_eq(kill(n.pid, SIGTERM), 0);
    /* Every process of the node lets go of the listening socket. */
    deadline = itest_now_ms() + 10000;
    while (itest_port_listening(&n)) {
        cr_assert(itest_now_ms() < deadline,
                  "the client port is still open 10 s after SIGTERM");
        itest_sleep_ms(2);
    }
    cr_assert_eq(itest_conn_worker(&n, port), holder,
                 "the worker holding the push in flight is gone already");
    rc = itest_connect_within("127.0.0.1", n.port, 2000, &took);
    cr_assert_eq(rc, -ECONNREFUSED,
                 "a new connection during the drain: %s after %lld ms",
                 rc == 0 ? "opened" : strerror(-rc), (long long)took);
    cr_assert_lt(took, 1000, "the connect was refused only after %lld ms",
                 (long long)took);
    /* The connection opened before is still served. */
    health_on(kfd, &r);
    cr_assert_eq(r.status, 503, "/health during the drain: %ld %s", r.status,
                 r.body);
    cr_assert_str_eq(itest_jstr(r.json, "status"), "draining", "%s", r.body);
    cr_assert_eq(itest_jbool(r.json, "ready"), 0, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "node"), node, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "incarnation"), inc, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "role"), "leader", "%s", r.body);
    cr_assert_eq(itest_jlen(r.json, "members"), 1, "%s", r.body);
    cr_assert_str_eq(itest_jstr(r.json, "members.0.state"), "leaving", "%s",
                     r.body);
    itest_resp_free(&r);
    cr_assert_eq(itest_raw_send(kfd, "POST /api/v1/ephemeral/push HTTP/1.1\r\n"
                                     "Host: t\r\nContent-Length: 43\r\n\r\n"
                                     "{\"queue\":\"late\",\"messages\":"
                                     "[{\"payload\":1}]}"),
                 0);
    itest_raw_response(kfd, &r);
    itest_assert_error(&r, 503, "draining", NULL,
                       "a push on a connection opened before the drain");
    cr_assert(*r.retry_after, "503 draining without Retry-After");
    itest_resp_free(&r);
    /* Its answer closed it: the client's next request goes elsewhere. */
    setsockopt(kfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    cr_assert_eq(recv(kfd, &one, 1, 0), 0,
                 "the connection stayed open after 503 draining");
    close(kfd);
    /* The push in flight arrived during the drain: refused, nothing kept. */
    cr_assert_eq(itest_raw_send(fd, body + 10), 0);
    itest_raw_response(fd, &r);
    itest_assert_error(&r, 503, "draining", NULL, "the push in flight");
    itest_resp_free(&r);
    close(fd);
    st = itest_node_wait_exit(&n, 30000);
    cr_assert_eq(st, 0, "exit status %d after SIGTERM", st);
    cr_assert(itest_node_log_contains(&n, "Terminated: draining"));
    cr_assert(itest_node_log_contains(&n, "info: stopped"));
    cr_log_info("drain: a new connection refused in %lld ms", (long long)took);
    free(body);
}

/* A client of test drain_end: one request a connection, until refused. */
struct knocker {
    const struct itest_node *n;
    const _Atomic int *gone; /* the node has exited */
    int dawdle;              /* waits up to 150 ms before sending */
    _Atomic int answered;    /* complete responses */
    int broken; /* connections reset or closed without a whole answer */
    _Atomic int refused; /* ended on ECONNREFUSED */
    char why[200];
};

static void *
knock(void *arg)
{
    static const char req[] =
        "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    struct knocker *k = arg;
    int64_t until = itest_now_ms() + 45000;
    unsigned seed = (unsigned)getpid();

    while (itest_now_ms() < until && !k->refused && !*k->gone) {
        struct timeval tv = {10, 0};
        char buf[4096];
        size_t got = 0;
        ssize_t r = 0;
        int fd = itest_raw_connect(k->n);

        if (fd == -ECONNREFUSED) {
            k->refused = 1;
            break;
        }
        if (fd < 0) {
            k->broken++;
            snprintf(k->why, sizeof(k->why), "connect: %s", strerror(-fd));
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (k->dawdle)
            itest_sleep_ms(rand_r(&seed) % 150);
        if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) !=
            (ssize_t)sizeof(req) - 1) {
            k->broken++;
            snprintf(k->why, sizeof(k->why), "send: %s", strerror(errno));
            close(fd);
            continue;
        }
        while (got < sizeof(buf) - 1 &&
               (r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
            got += (size_t)r;
        buf[got] = '\0';
        if (r == 0 && strncmp(buf, "HTTP/1.1 ", 9) == 0 &&
            itest_raw_complete(buf, got)) {
            k->answered++;
        } else {
            k->broken++;
            snprintf(k->why, sizeof(k->why), "%s after %zu bytes: %.60s",
                     r < 0 ? strerror(errno) : "closed", got, buf);
        }
        close(fd);
    }
    return NULL;
}

/*
 * The end of a drain: clients that open a connection per request while the
 * node stops are all either answered whole (200 before the drain, 503 on a
 * connection it took as the drain began) or refused at connect once its
 * port has closed; none has a request swallowed by a reset (closing a
 * listening socket resets its accept queue: 1-10 connections a drain once),
 * not even the one that takes up to 150 ms between connecting and sending.
 */
Test(term, clients_at_the_end_of_a_drain_are_answered_or_refused,
     .timeout = 120)
{
    enum { CLIENTS = 3 };
    struct knocker k[CLIENTS];
    pthread_t t[CLIENTS];
    struct itest_node n;
    _Atomic int gone = 0;
    int answered = 0, refused = 0, st;

    itest_node_start(&n, NULL);
    for (int i = 0; i < CLIENTS; i++) {
        k[i] = (struct knocker){.n = &n, .gone = &gone, .dawdle = i == 0};
        cr_assert_eq(pthread_create(&t[i], NULL, knock, &k[i]), 0);
    }
    /* every client knocking, answered once at least, before the drain */
    for (int64_t end = itest_now_ms() + 20000;;) {
        int all = 1;
        for (int i = 0; i < CLIENTS; i++)
            all &= k[i].answered > 0;
        if (all)
            break;
        cr_assert_lt(itest_now_ms(), end, "the clients are not answered");
        itest_sleep_ms(20);
    }
    cr_assert_eq(kill(n.pid, SIGTERM), 0);
    st = itest_node_wait_exit(&n, 30000);
    /* A client in its connect's SYN retry meets the closed port then;
     * after that the port is free for anyone, so stop knocking as soon as
     * one was refused (20 s at most: a loaded machine is slow to run the
     * clients). */
    for (int64_t end = itest_now_ms() + 20000; itest_now_ms() < end;) {
        int any = 0;
        for (int i = 0; i < CLIENTS; i++)
            any |= k[i].refused;
        if (any)
            break;
        itest_sleep_ms(20);
    }
    gone = 1;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(k[i].broken, 0,
                     "client %d: %d of %d connections lost their request "
                     "(last: %s)",
                     i, k[i].broken, k[i].broken + k[i].answered, k[i].why);
        answered += k[i].answered;
        refused += k[i].refused;
    }
    cr_assert_eq(st, 0, "exit status %d after SIGTERM", st);
    cr_assert(refused > 0, "no client was refused once the node had gone");
    cr_log_info("drain end: %d connections answered, then %d of %d clients "
                "refused",
                answered, refused, CLIENTS);
}

Test(term, a_node_alone_logs_what_its_stop_lost, .timeout = 60)
{
    enum { N = 300 };
    struct itest_node n;
    struct itest_resp r;
    char msgs[N * 16] = "", want[160];
    int st;

    itest_node_start(&n, NULL);
    for (int k = 0; k < N; k++)
        strcat(msgs, k ? ",{\"payload\":1}" : "{\"payload\":1}");
    for (int p = 0; p < 3; p++) {
        cr_assert_eq(itest_post(&n, &r, "/api/v1/ephemeral/push",
                                "{\"queue\":\"alone\",\"partition\":\"p%d\","
                                "\"messages\":[%s]}",
                                p, msgs),
                     201, "%s", r.body);
        itest_resp_free(&r);
    }
    st = itest_node_stop(&n, 20000);
    cr_assert_eq(st, 0, "SIGTERM: exit status %d", st);
    /* SPEC §5: a graceful stop logs the line; with no peer nothing is
     * handed over, and what it held is lost */
    snprintf(want, sizeof(want),
             "shutdown: ephemeral rings handed over rings=3 delivered=0 "
             "lost=3 (messages delivered=0 lost=%d)",
             3 * N);
    if (!itest_node_log_contains(&n, want))
        itest_node_log_tail(&n, 20);
    cr_expect(itest_node_log_contains(&n, want), "no '%s' in the log", want);
}
