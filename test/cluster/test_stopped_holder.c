/*
 * test_stopped_holder.c - a worker stopped (SIGSTOP) while it holds a
 * segment lock -- the due heap's, the dir's, a partition's -- on a node of
 * three real nodes (127.0.0.1-3).
 *
 * The master's watchdog is what kills such a worker, and the master's
 * upkeep needs those locks: it must not wait behind the worker for them.
 * Each test gets the master to need the held lock during the stop (the
 * due heap at every tick; the dir lock for a queue gone idle; the
 * partition lock for a lease running out), then checks, while the worker
 * is stopped: the node answers /health 200 through its other worker, both
 * peers count it live, and the master says it met a lock held past its
 * bound; and after: the watchdog killed the worker within its bound (15 s
 * after its last beat), the lock was repaired (mayfly_lock_repairs_total
 * rose, the segment checks sound) and the partition serves pushes and
 * pops again.
 *
 * A real worker is stopped inside a real lock by gdb in batch mode: it
 * attaches with a breakpoint on shm_lock() called with that lock's repair
 * function (so for that lock alone), a request on a connection that
 * worker holds runs into it, gdb lets shm_lock() return with the lock
 * taken, sends the worker SIGSTOP and detaches, leaving it stopped with
 * the lock held, as an operator's SIGSTOP landing there would.  (Not a
 * breakpoint on a function inlined under the lock: the compiler may hoist
 * its first instructions above the lock.)
 */
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/cluster/cluster.h"

#define WATCHDOG_MS 15000 /* master/workers.c */
#define KILL_SLACK  4000  /* a beat a second, a tick, a loaded machine */
#define OPTS        "lease_s=2 implicit_idle_s=1"

static struct cl c;

static void
up(void)
{
    cl_init(&c);
    cl_start(&c, 0, "workers=2 " OPTS);
    cl_start(&c, 1, OPTS);
    cl_start(&c, 2, OPTS);
    cl_wait_view(&c, CL_ALL);
}

static void
down(void)
{
    cl_kill_all(&c); /* the stopped worker dies with its master */
}

TestSuite(stopped_holder, .init = up, .fini = down, .timeout = 240);

/* Node 0's two workers: a is stopped, b serves; a connection on each. */
struct wedge {
    pid_t a, b;
    CURL *ha, *hb;
    char queue[32], part[16]; /* a partition node 0 owns */
    double repairs;           /* mayfly_lock_repairs_total before */
    pid_t gdb;
    char gdb_out[320];
    const char *func;
    pthread_t trigger;
    const char *method;
    char path[200], body[200];
};

/* wedge_open - node 0's workers and a connection held by each, a
 * partition of queue node 0 owns, the repairs counted so far. */
static void
wedge_open(struct wedge *w, const char *queue)
{
    pid_t pids[ITEST_NODE_MAX_WORKERS];

    memset(w, 0, sizeof(*w));
    cr_assert_eq(itest_node_workers(&c.node[0], pids, ITEST_NODE_MAX_WORKERS),
                 2);
    w->a = pids[0];
    w->b = pids[1];
    w->ha = itest_handle_on_worker(&c.node[0], w->a, &w->a);
    w->hb = itest_handle_on_worker(&c.node[0], w->b, &w->b);
    snprintf(w->queue, sizeof(w->queue), "%s", queue);
    cl_part_owned_by(queue, 0, 200, w->part, sizeof(w->part));
    if (itest_metric(&c.node[0], "mayfly_lock_repairs_total", &w->repairs) != 0)
        w->repairs = 0;
}

/* on_b - method path (body) through worker b; the status. */
static long
on_b(struct wedge *w, const char *method, const char *path, const char *body,
     struct itest_resp *r)
{
    return itest_req_on(w->hb, &c.node[0], method, path, body, r);
}

/* push_body - the body of a push of one payload to (queue, part). */
static const char *
push_body(char *body, size_t len, const char *queue, const char *part,
          const char *payload)
{
    snprintf(body, len,
             "{\"queue\":\"%s\",\"partition\":\"%s\",\"messages\":"
             "[{\"payload\":%s}]}",
             queue, part, payload);
    return body;
}

/* push_b - one payload to (queue, part) through worker b. */
static void
push_b(struct wedge *w, const char *queue, const char *part,
       const char *payload)
{
    char body[300];
    struct itest_resp r;

    push_body(body, sizeof(body), queue, part, payload);
    cr_assert_eq(on_b(w, "POST", "/api/v1/ephemeral/push", body, &r), 201, "%s",
                 r.body);
    itest_resp_free(&r);
}

/* pop_b - one pop of (queue, part) through worker b (autoAck or leased);
 * the messages it got. */
static int
pop_b(struct wedge *w, const char *queue, const char *part, int auto_ack)
{
    char path[300];
    struct itest_resp r;

    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s&partition=%s&autoAck=%s", queue,
             part, auto_ack ? "true" : "false");
    cr_assert_eq(on_b(w, "GET", path, NULL, &r), 200, "%s", r.body);
    int n = itest_jlen(r.json, "messages");
    itest_resp_free(&r);
    return n;
}

/* file_has - whether the file at path holds needle. */
static int
file_has(const char *path, const char *needle)
{
    char buf[16384];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* proc_state - the state letter of process pid ('?' when it is gone). */
static char
proc_state(pid_t pid)
{
    char path[64], line[256];
    char st = '?';
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return st;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "State: %c", &st) == 1)
            break;
    fclose(f);
    return st;
}

/* gdb_arm - gdb attached to worker pid, a breakpoint on shm_lock() with
 * repair as its repair function (the third argument: rdx on entry): when
 * it is hit, return from shm_lock(), SIGSTOP the worker and detach.  Its
 * output goes to out; returns once the breakpoint is set. */
static pid_t
gdb_arm(pid_t pid, const char *repair, const char *out)
{
    char p[16], brk[96], stop[64];
    int64_t deadline = itest_now_ms() + 60000;

    snprintf(p, sizeof(p), "%d", (int)pid);
    snprintf(brk, sizeof(brk), "break *shm_lock if $rdx == (long)%s", repair);
    snprintf(stop, sizeof(stop), "shell kill -STOP %d", (int)pid);
    pid_t g = fork();
    cr_assert_neq(g, -1);
    if (g == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execlp("gdb", "gdb", "-nx", "-batch", "-p", p, "-ex",
               "set pagination off", "-ex",
               "handle SIGPIPE SIGHUP SIGUSR1 SIGTERM SIGCHLD SIGALRM nostop "
               "noprint pass",
               "-ex", brk, "-ex", "echo ARMED\\n", "-ex", "continue", "-ex",
               "finish", "-ex", stop, "-ex", "detach", "-ex", "quit",
               (char *)NULL);
        _exit(127);
    }
    while (!file_has(out, "ARMED")) {
        int st;
        if (waitpid(g, &st, WNOHANG) == g)
            cr_assert_fail("gdb ended before setting its breakpoint "
                           "(status %d); its output is in %s",
                           st, out);
        cr_assert_lt(itest_now_ms(), deadline,
                     "gdb did not set its breakpoint within 60 s");
        itest_sleep_ms(50);
    }
    return g;
}

/* trigger_run - the request that runs worker a into the breakpoint; it
 * ends when a is killed. */
static void *
trigger_run(void *arg)
{
    struct wedge *w = arg;
    struct itest_resp r;

    itest_req_on(w->ha, &c.node[0], w->method, w->path,
                 w->body[0] ? w->body : NULL, &r);
    itest_resp_free(&r);
    return NULL;
}

/* arm - gdb on worker a, to stop it holding the lock whose repair
 * function is repair (before what makes the master need the lock: gdb
 * takes a second or two to attach). */
static void
arm(struct wedge *w, const char *repair)
{
    snprintf(w->gdb_out, sizeof(w->gdb_out), "%s/gdb.out", c.node[0].dir);
    w->func = repair;
    w->gdb = gdb_arm(w->a, repair, w->gdb_out);
}

/* stop - run worker a into its breakpoint with method path (body) on its
 * connection; the time it stopped there. */
static int64_t
stop(struct wedge *w, const char *method, const char *path, const char *body)
{
    const char *out = w->gdb_out, *func = w->func;
    pid_t g = w->gdb;
    int st;

    w->method = method;
    snprintf(w->path, sizeof(w->path), "%s", path);
    snprintf(w->body, sizeof(w->body), "%s", body ? body : "");
    cr_assert_eq(pthread_create(&w->trigger, NULL, trigger_run, w), 0);
    for (int64_t deadline = itest_now_ms() + 60000;;) {
        if (waitpid(g, &st, WNOHANG) == g)
            break;
        if (itest_now_ms() > deadline) {
            kill(g, SIGKILL);
            waitpid(g, &st, 0);
            cr_assert_fail("worker %d did not reach shm_lock(%s) within 60 s",
                           (int)w->a, func);
        }
        itest_sleep_ms(20);
    }
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gdb: status %d", st);
    cr_assert(file_has(out, "Breakpoint 1, shm_lock"),
              "gdb never stopped in shm_lock(%s)", func);
    cr_assert(file_has(out, "Value returned is $1 = 0"),
              "shm_lock(%s) did not take the lock", func);
    for (int64_t deadline = itest_now_ms() + 5000; proc_state(w->a) != 'T';) {
        cr_assert_lt(itest_now_ms(), deadline,
                     "worker %d is not stopped (state %c)", (int)w->a,
                     proc_state(w->a));
        itest_sleep_ms(10);
    }
    return itest_now_ms();
}

/* wedged_view - until worker a is gone: node 0 answers /health 200
 * through worker b, and both peers count it live.  Returns the ms from
 * the stop to a's end. */
static int64_t
wedged_view(struct wedge *w, int64_t stopped)
{
    int looks = 0;

    for (;;) {
        int64_t t = itest_now_ms() - stopped;
        struct itest_resp r;
        char st[16];

        if (kill(w->a, 0) != 0 && errno == ESRCH)
            break; /* killed and reaped by its master */
        cr_assert_lt(t, WATCHDOG_MS + KILL_SLACK,
                     "worker %d, stopped with a lock held, still runs %lld "
                     "ms on",
                     (int)w->a, (long long)t);
        cr_assert_eq(on_b(w, "GET", "/health", NULL, &r), 200,
                     "%lld ms into the stop, node 0 answers /health %ld: %s",
                     (long long)t, r.status, r.body);
        itest_resp_free(&r);
        for (int i = 1; i < CL_NODES; i++) {
            cl_member_state(&c, i, "n0", st, sizeof(st));
            cr_assert_str_eq(st, "live",
                             "%lld ms into the stop, node %d counts node 0 "
                             "'%s'",
                             (long long)t, i, st);
        }
        looks++;
        itest_sleep_ms(250);
    }
    cr_assert_gt(looks, 10, "the stop was looked at %d times", looks);
    return itest_now_ms() - stopped;
}

/* wedge_close - after the stop at stopped: the view held, the watchdog
 * killed a within its bound, the master met the lock and went on, the
 * lock was repaired and the partition serves again. */
static void
wedge_close(struct wedge *w, int64_t stopped, const char *what)
{
    char needle[64], out[2048];
    double repairs = 0;
    int found = 0;

    int64_t gone = wedged_view(w, stopped);
    fprintf(stderr,
            "stopped_holder: worker stopped holding %s was killed %lld ms "
            "after SIGSTOP\n",
            what, (long long)gone);
    pthread_join(w->trigger, NULL);
    snprintf(needle, sizeof(needle), "(pid %d) made no progress", (int)w->a);
    cr_assert(itest_node_log_contains(&c.node[0], needle),
              "the watchdog killed worker %d", (int)w->a);
    cr_assert(itest_node_log_contains(&c.node[0], "segment lock waits reached "
                                                  "their bound"),
              "the master met the %s held (and went on)", what);
    /* The lock was repaired, and left a sound segment. */
    for (int64_t deadline = itest_now_ms() + 10000;; itest_sleep_ms(50)) {
        if (itest_metric(&c.node[0], "mayfly_lock_repairs_total", &repairs) ==
                0 &&
            repairs > w->repairs)
            break;
        cr_assert_lt(itest_now_ms(), deadline,
                     "the %s was repaired (repairs %.0f, before %.0f)", what,
                     repairs, w->repairs);
    }
    cr_assert_eq(itest_check_segment(&c.node[0], out, sizeof(out)), 0, "%s",
                 out);
    /* The partition takes a push and gives it back on a pop. */
    for (int64_t deadline = itest_now_ms() + 10000; !found;) {
        struct itest_resp r;
        char path[300];

        itest_push_ok(&c.node[0], &r, w->queue, w->part, "[{\"after\":1}]", 1);
        itest_resp_free(&r);
        snprintf(path, sizeof(path),
                 "/api/v1/ephemeral/pop?queue=%s&partition=%s&autoAck=true&"
                 "batch=1000",
                 w->queue, w->part);
        cr_assert_eq(itest_req(&c.node[0], "GET", path, NULL, &r), 200, "%s",
                     r.body);
        found = strstr(r.body, "\"after\"") != NULL;
        itest_resp_free(&r);
        cr_assert(found || itest_now_ms() < deadline,
                  "a pop of %s/%s gave back what was pushed", w->queue,
                  w->part);
    }
    curl_easy_cleanup(w->ha);
    curl_easy_cleanup(w->hb);
}

/* The due heap's lock, taken by a pop to schedule its lease's end (under
 * its partition's lock): the master takes from the heap at every tick. */
Test(stopped_holder, the_due_heap_lock)
{
    struct wedge w;
    char path[200];

    wedge_open(&w, "wedge-due");
    arm(&w, "due_rebuild");
    push_b(&w, w.queue, w.part, "1");
    snprintf(path, sizeof(path), "/api/v1/ephemeral/pop?queue=%s&partition=%s",
             w.queue, w.part);
    int64_t stopped = stop(&w, "GET", path, NULL);
    wedge_close(&w, stopped, "the due heap's lock");
}

/* The dir lock, taken by a push to look its queue up: the master needs it
 * for a queue gone idle (implicit_idle_s=1) a second on. */
Test(stopped_holder, the_dir_lock)
{
    struct wedge w;
    char idle[16], body[200];

    wedge_open(&w, "wedge-dir");
    arm(&w, "dir_repair");
    cl_part_owned_by("wedge-idle", 0, 200, idle, sizeof(idle));
    push_b(&w, "wedge-idle", idle, "1");
    cr_assert_eq(pop_b(&w, "wedge-idle", idle, 1), 1);
    int64_t stopped = stop(&w, "POST", "/api/v1/ephemeral/push",
                           push_body(body, sizeof(body), w.queue, w.part, "2"));
    wedge_close(&w, stopped, "the dir lock");
}

/* A partition's lock, taken by a push: the master needs it when the lease
 * of a message popped before runs out (2 s). */
Test(stopped_holder, a_partition_lock)
{
    struct wedge w;
    char body[200];

    wedge_open(&w, "wedge-part");
    arm(&w, "shm_ring_repair");
    push_b(&w, w.queue, w.part, "1");
    cr_assert_eq(pop_b(&w, w.queue, w.part, 0), 1);
    int64_t stopped = stop(&w, "POST", "/api/v1/ephemeral/push",
                           push_body(body, sizeof(body), w.queue, w.part, "2"));
    wedge_close(&w, stopped, "a partition's lock");
}
