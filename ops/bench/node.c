/*
 * node.c - a mayflyd of the bench's own for one measurement, and what the
 * memory rows read off a node.
 *
 * A memory row reads the server's proportional set size before and after
 * its items are made.  On the node that ran the other rows that figure
 * moves with what they left: heap they freed that glibc gives back while
 * the items are made shrinks it (the parked pops read below zero there),
 * and freed memory taken again is not seen at all.  So each memory row
 * starts a mayflyd of its own (bench_node_start: the binary and options
 * run.sh starts its main node with, a spare port, SIGQUIT after) that has
 * answered nothing but GET /health before it.  PSS is summed over the
 * master and its workers (/proc/PID/smaps_rollup), so the pages of the
 * shared segment count once; the accounted figure is the node's
 * mayfly_memory_used_bytes.
 *
 * Called from the main thread only, between runs.  Errors: a node that
 * cannot be started is -errno with why in err; the row then fails with it.
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/bench/bench.h"

/* bench_free_port - see bench.h. */
int
bench_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

    if (fd == -1)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) == -1)
        port = -errno;
    else
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* bench_node_main - see bench.h. */
struct bench_node
bench_node_main(void)
{
    return (struct bench_node){.port = bench_opt.mport, .pid = bench_opt.mpid};
}

/* exited - whether the node's master has exited (reaped here). */
static int
exited(struct bench_node *n)
{
    int st;

    if (n->pid <= 0)
        return 1;
    if (waitpid(n->pid, &st, WNOHANG) == n->pid) {
        n->pid = 0;
        return 1;
    }
    return 0;
}

/* bench_node_start - see bench.h. */
int
bench_node_start(struct bench_node *n, const char *name, char *err,
                 size_t errlen)
{
    char dir[256], logpath[272], o_listen[64], o_cluster[64], o_data[272];
    const char *rundir =
        bench_opt.rundir ? bench_opt.rundir : "build/bench/run";
    int cport, status = 0;
    uint64_t until;
    pid_t pid;

    *n = (struct bench_node){0};
    if (bench_opt.mayflyd == NULL) {
        snprintf(err, errlen, "no --mayflyd: no node of its own to measure");
        return -ENOENT;
    }
    n->port = bench_free_port();
    do
        cport = bench_free_port();
    while (cport == n->port && cport > 0);
    if (n->port <= 0 || cport <= 0) {
        snprintf(err, errlen, "no spare port: %s",
                 strerror(n->port <= 0 ? -n->port : -cport));
        n->port = 0;
        return -EADDRINUSE;
    }
    snprintf(dir, sizeof(dir), "%s/%s", rundir, name);
    snprintf(logpath, sizeof(logpath), "%s.log", dir);
    if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
        snprintf(err, errlen, "mkdir(%s): %s", dir, strerror(errno));
        return -errno;
    }
    /* the options run.sh starts its main node with */
    snprintf(o_listen, sizeof(o_listen), "listen=127.0.0.1:%d", n->port);
    snprintf(o_cluster, sizeof(o_cluster), "cluster_listen=127.0.0.1:%d",
             cport);
    snprintf(o_data, sizeof(o_data), "data_dir=%s", dir);
    char *argv[] = {(char *)bench_opt.mayflyd,
                    "-o",
                    o_listen,
                    "-o",
                    o_cluster,
                    "-o",
                    "workers=2",
                    "-o",
                    o_data,
                    "-o",
                    "max_connections=30000",
                    "-o",
                    "max_wait_ms=120000",
                    NULL};
    pid_t parent = getpid();

    pid = fork();
    if (pid == -1) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -errno;
    }
    if (pid == 0) {
        /* the node goes with the bench, however the bench ends */
        int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        signal(SIGPIPE, SIG_DFL); /* as a shell would start it */
        execv(bench_opt.mayflyd, argv);
        _exit(127);
    }
    n->pid = pid;
    until = bench_now_ns() + 30000000000ull;
    while (bench_now_ns() < until && !exited(n)) {
        if (bench_call(n->port, "GET", "/health", NULL, &status) == 0 &&
            status == 200)
            return 0;
        bench_sleep_ns(50000000);
    }
    snprintf(err, errlen, "%s %s: %s (its log: %s)", bench_opt.mayflyd, name,
             n->pid ? "no 200 to GET /health in 30 s" : "exited at start",
             logpath);
    bench_node_stop(n);
    return -ETIMEDOUT;
}

/* bench_node_stop - see bench.h: SIGQUIT (mayflyd stops at once, without
 * the drain a SIGTERM makes), SIGKILL 15 s later if it is still there. */
void
bench_node_stop(struct bench_node *n)
{
    uint64_t until = bench_now_ns() + 15000000000ull;

    if (n->pid <= 0)
        return;
    kill(n->pid, SIGQUIT);
    while (!exited(n) && bench_now_ns() < until)
        bench_sleep_ns(20000000);
    if (n->pid > 0) {
        kill(n->pid, SIGKILL);
        waitpid(n->pid, NULL, 0);
        n->pid = 0;
    }
}

/* ---- memory --------------------------------------------------------- */

/* Proportional set size of pid and all its descendants, in bytes; 0 when
 * /proc cannot tell. */
static double
pss_tree(pid_t pid)
{
    char path[96], line[256];
    double kb = 0;
    FILE *f;
    long child;

    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "Pss:", 4) == 0)
            kb += strtod(line + 4, NULL);
    fclose(f);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
             (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return kb * 1024;
    while (fscanf(f, "%ld", &child) == 1)
        kb += pss_tree((pid_t)child) / 1024;
    fclose(f);
    return kb * 1024;
}

/* bench_mem_sample - see bench.h. */
void
bench_mem_sample(const struct bench_node *n, struct bench_mem *m)
{
    m->acct_ok =
        bench_metric(n->port, "mayfly_memory_used_bytes", &m->acct) == 0;
    m->pss = n->pid > 0 ? pss_tree(n->pid) : 0;
}

/* bench_mem_settle - see bench.h. */
void
bench_mem_settle(const struct bench_node *n, struct bench_mem *m)
{
    double last;

    bench_mem_sample(n, m);
    for (int i = 0; i < 20; i++) {
        last = m->pss;
        bench_sleep_ns(250000000);
        bench_mem_sample(n, m);
        if (m->pss <= last * 1.002 && m->pss >= last * 0.998)
            break;
    }
}

/* mem_row_init - the fields every memory row shares. */
static void
mem_row_init(struct bench_row *row, const char *key, const char *variant)
{
    snprintf(row->key, sizeof(row->key), "%s", key);
    snprintf(row->scenario, sizeof(row->scenario), "memory");
    snprintf(row->system, sizeof(row->system), "mayfly");
    snprintf(row->variant, sizeof(row->variant), "%s", variant);
    snprintf(row->unit, sizeof(row->unit), "B/item");
}

/* bench_mem_row_pss - see bench.h. */
void
bench_mem_row_pss(const char *key, const char *variant,
                  const struct bench_mem *m0, const struct bench_mem *m1,
                  double n, const char *target)
{
    struct bench_row row = {0};

    mem_row_init(&row, key, variant);
    row.ok = m0->pss > 0 && m1->pss > 0 && n > 0;
    row.rate = row.ok ? (m1->pss - m0->pss) / n : 0;
    if (m0->acct_ok && m1->acct_ok)
        snprintf(row.note, sizeof(row.note),
                 "kernel PSS of a fresh mayflyd%s%s; accounted "
                 "(mayfly_memory_used_bytes): %.0f B/item",
                 target ? ", target " : "", target ? target : "",
                 (m1->acct - m0->acct) / n);
    else
        snprintf(row.note, sizeof(row.note),
                 "kernel PSS of a fresh mayflyd%s%s", target ? ", target " : "",
                 target ? target : "");
    if (!row.ok)
        snprintf(row.note, sizeof(row.note), "no PSS of the node in /proc");
    bench_row_add(&row);
}

/* bench_mem_row_acct - see bench.h. */
void
bench_mem_row_acct(const char *key, const char *variant,
                   const struct bench_mem *m0, const struct bench_mem *m1,
                   double n, double payload_bytes)
{
    struct bench_row row = {0};
    double pss = (m1->pss - m0->pss) / n - payload_bytes;

    mem_row_init(&row, key, variant);
    row.ok = m0->acct_ok && m1->acct_ok;
    row.rate = row.ok ? (m1->acct - m0->acct) / n - payload_bytes : 0;
    snprintf(row.note, sizeof(row.note),
             "%s; kernel PSS of a fresh mayflyd: %.0f B/item%s",
             row.ok ? "accounted (mayfly_memory_used_bytes)"
                    : "mayfly_memory_used_bytes not served",
             pss, payload_bytes > 0 ? " (both beyond the 256 B payload)" : "");
    if (!row.ok && m0->pss > 0 && m1->pss > 0) {
        row.ok = 1;
        row.rate = pss;
    }
    bench_row_add(&row);
}
