/*
 * cluster.c - start, stop and query a three-node cluster for tests.
 */
#include "test/cluster/cluster.h"

#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/owner.h"
#include "test/integration/certs.h"

void
cl_init(struct cl *c)
{
    char dir[200];
    FILE *f;

    memset(c, 0, sizeof(*c));
    itest_test_dir(dir, sizeof(dir)); /* removed once the test passes */
    snprintf(c->secret_file, sizeof(c->secret_file), "%s/secret", dir);
    f = fopen(c->secret_file, "w");
    cr_assert(f);
    fprintf(f, "test-secret-%d\n", (int)getpid());
    fclose(f);
    for (int i = 0; i < CL_NODES; i++) {
        struct itest_node *n = &c->node[i];
        snprintf(c->addr[i], sizeof(c->addr[i]), "127.0.0.%d", i + 1);
        /* free on 127.0.0.1, .2 and .3, and reserved: never picked twice
         * (itest_free_port) */
        n->port = itest_free_port();
        c->cport[i] = itest_free_port();
        snprintf(n->base, sizeof(n->base), "http://127.0.0.%d:%d", i + 1,
                 n->port);
        snprintf(n->dir, sizeof(n->dir), "%s/n%d", dir, i);
        cr_assert(mkdir(n->dir, 0700) == 0);
        snprintf(n->log, sizeof(n->log), "%s/n%d/mayflyd.log", dir, i);
        n->cluster_port = c->cport[i];
        size_t used = strlen(c->peers);
        snprintf(c->peers + used, sizeof(c->peers) - used, "%s127.0.0.%d:%d",
                 i ? "," : "", i + 1, c->cport[i]);
    }
}

void
cl_init_tls(struct cl *c, char *dir, size_t dir_len, char *opts,
            size_t opts_len)
{
    char *slash;

    cl_init(c);
    snprintf(dir, dir_len, "%s", c->secret_file);
    slash = strrchr(dir, '/');
    cr_assert(slash);
    *slash = '\0';
    itest_make_ca(dir, "ca");
    itest_make_cert(dir, "ca", "node", "127.0.0.1,127.0.0.2,127.0.0.3");
    snprintf(itest_ca_file, sizeof(itest_ca_file), "%s/ca.pem", dir);
    for (int i = 0; i < CL_NODES; i++) {
        char addr[sizeof(c->addr[i])]; /* a copy: both are in *c */
        memcpy(addr, c->addr[i], sizeof(addr));
        snprintf(c->node[i].base, sizeof(c->node[i].base), "https://%s:%d",
                 addr, c->node[i].port);
    }
    snprintf(opts, opts_len,
             "tls_cert_file=%s/node.pem tls_key_file=%s/node.key "
             "cluster_tls_cert_file=%s/node.pem "
             "cluster_tls_key_file=%s/node.key cluster_tls_ca_file=%s/ca.pem",
             dir, dir, dir, dir, dir);
}

/* spawn - fork and exec mayflyd for node i. */
static pid_t
spawn(struct cl *c, int i, const char *opts)
{
    char o[7][400];
    const char *own[7] = {o[0], o[1], o[2], o[3], o[4], o[5], o[6]};
    struct itest_node *n = &c->node[i];

    snprintf(o[0], sizeof(o[0]), "listen=%s:%d", c->addr[i], n->port);
    snprintf(o[1], sizeof(o[1]), "cluster_listen=%s:%d", c->addr[i],
             c->cport[i]);
    snprintf(o[2], sizeof(o[2]), "data_dir=%s", n->dir);
    snprintf(o[3], sizeof(o[3]), "peers=%s", c->peers);
    snprintf(o[4], sizeof(o[4]), "cluster_secret_file=%s", c->secret_file);
    snprintf(o[5], sizeof(o[5]), "node_id=n%d", i);
    snprintf(o[6], sizeof(o[6]), "workers=1");
    return itest_spawn(own, 7, opts, n->log);
}

void
cl_spawn(struct cl *c, int i, const char *opts)
{
    c->node[i].pid = spawn(c, i, opts);
}

void
cl_start(struct cl *c, int i, const char *opts)
{
    struct itest_node *n = &c->node[i];
    int64_t deadline = itest_now_ms() + 30000;
    long from = itest_log_size(n->log); /* where this start's lines begin */
    char why[2048];

    n->pid = spawn(c, i, opts);
    for (;;) {
        struct itest_resp r;
        long st = itest_req(n, "GET", "/health", NULL, &r);
        itest_resp_free(&r);
        if (st == 200)
            return;
        int status;
        if (waitpid(n->pid, &status, WNOHANG) == n->pid) {
            n->pid = 0;
            n->exit_status = WIFEXITED(status) ? WEXITSTATUS(status)
                                               : 128 + WTERMSIG(status);
            itest_node_log_tail(n, 30);
            /* in the message too: a runner's output keeps it */
            itest_node_why_exited(n, status, from, 12, why, sizeof(why));
            cr_assert_fail("node %d exited during start: %s", i, why);
        }
        if (itest_now_ms() > deadline) {
            itest_node_log_tail(n, 30);
            cr_assert_fail("node %d did not answer /health within 30 s", i);
        }
        itest_sleep_ms(50);
    }
}

void
cl_addr(const struct cl *c, int i, enum cl_port port, char *out, size_t len)
{
    snprintf(out, len, "%s:%d", c->addr[i],
             port == CL_CLUSTER_PORT ? c->cport[i] : c->node[i].port);
}

void
cl_sign_req(const struct cl *c, struct http_sign_req *r,
            struct http_sign_lines *out)
{
    static uint64_t sender, seq;
    char secret[200] = "";
    FILE *f = fopen(c->secret_file, "r");
    size_t n = 0;

    cr_assert(f, "%s", c->secret_file);
    cr_assert(fgets(secret, sizeof(secret), f));
    fclose(f);
    secret[strcspn(secret, "\r\n")] = '\0';
    while (sender == 0)
        cr_assert_eq(getrandom(&sender, sizeof(sender), 0),
                     (ssize_t)sizeof(sender));
    r->sender = sender;
    r->seq = ++seq;
    if (r->now_ms == 0)
        r->now_ms = http_sign_now_ms();
    if (r->body == NULL)
        r->body = "";
    while (r->lines != NULL && r->nlines == 0 && r->lines[n] != NULL)
        n++;
    if (r->nlines == 0)
        r->nlines = n;
    cr_assert_eq(http_sign_lines(secret, r, out), 0, "cl_sign_req");
}

void
cl_sign(const struct cl *c, int i, enum cl_port port, const char *method,
        const char *path, const char *body, const char *const *lines,
        struct http_sign_lines *out)
{
    char addr[64];
    struct http_sign_req r = {
        .method = method,
        .target = path,
        .body = body,
        .len = body ? strlen(body) : 0,
        .lines = lines,
        .to = {addr, NULL, 0},
    };

    cl_addr(c, i, port, addr, sizeof(addr));
    cl_sign_req(c, &r, out);
}

const char *const *
cl_headers(const char *const *lines, const struct http_sign_lines *l,
           const char **out, size_t cap)
{
    size_t n = 0;

    for (; lines != NULL && lines[n] != NULL; n++) {
        cr_assert(n + 6 < cap, "cl_headers: room for %zu", cap);
        out[n] = lines[n];
    }
    cr_assert(n + 6 <= cap, "cl_headers: room for %zu", cap);
    out[n++] = l->sig;
    out[n++] = l->time;
    out[n++] = l->nonce;
    out[n++] = l->to;
    if (l->deadline[0])
        out[n++] = l->deadline;
    out[n] = NULL;
    return out;
}

/* workers_of - the pids of master's children (its workers), up to max. */
static int
workers_of(pid_t master, pid_t *out, int max)
{
    char path[64];
    FILE *f;
    long pid;
    int k = 0;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)master,
             (int)master);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (k < max && fscanf(f, "%ld", &pid) == 1)
        out[k++] = (pid_t)pid;
    fclose(f);
    return k;
}

/* gone - process pid has exited (absent, or a zombie: its sockets closed). */
static int
gone(pid_t pid)
{
    char path[64], buf[512], *end;
    FILE *f;
    size_t got;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 1;
    got = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[got] = '\0';
    end = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return end == NULL || end[1] != ' ' || end[2] == 'Z' || end[2] == 'X';
}

/*
 * cl_kill also waits for the node's workers: a killed master's workers die
 * after it (PR_SET_PDEATHSIG), 10-25 ms later on a loaded machine, and
 * until then they hold the client port open, listening; a start on that
 * port meanwhile fails "Address already in use".
 */
void
cl_kill(struct cl *c, int i)
{
    struct itest_node *n = &c->node[i];
    pid_t w[64];
    int nw;

    if (n->pid > 0) {
        nw = workers_of(n->pid, w, (int)(sizeof(w) / sizeof(w[0])));
        kill(n->pid, SIGKILL);
        waitpid(n->pid, NULL, 0);
        n->pid = 0;
        int64_t deadline = itest_now_ms() + 10000;
        for (int k = 0; k < nw; k++)
            while (!gone(w[k]) && itest_now_ms() < deadline)
                itest_sleep_ms(2);
    }
}

void
cl_part_owned_by(const char *queue, int o, int max, char *out, size_t len)
{
    for (int k = 0; k < max; k++) {
        snprintf(out, len, "p%d", k);
        if (cl_owner(queue, out, CL_ALL) == o)
            return;
    }
    cr_assert_fail("node %d owns none of p0..p%d of %s", o, max - 1, queue);
}

void
cl_start_all(struct cl *c, const char *opts)
{
    for (int i = 0; i < CL_NODES; i++)
        cl_start(c, i, opts);
}

void
cl_kill_all(struct cl *c)
{
    for (int i = 0; i < CL_NODES; i++)
        cl_kill(c, i); /* SIGKILL ends a stopped master too */
}

void
cl_up(struct cl *c, const char *opts)
{
    cl_init(c);
    cl_start_all(c, opts);
}

int64_t
cl_declared_length(struct cl *c, int i, const char *queue)
{
    struct json_object *q = itest_listing_find(&c->node[i], queue);
    int64_t v = -1;

    if (q && strcmp(itest_jstr(q, "tier"), "declared") == 0)
        v = itest_jint(q, "options.maxLength");
    if (q)
        json_object_put(q);
    return v;
}

void
cl_member_state(struct cl *c, int i, const char *id, char *out, size_t len)
{
    struct itest_resp r;

    out[0] = '\0';
    itest_req(&c->node[i], "GET", "/health", NULL, &r);
    for (int m = 0; r.json && m < itest_jlen(r.json, "members"); m++) {
        char path[40];
        snprintf(path, sizeof(path), "members.%d.node", m);
        if (strcmp(itest_jstr(r.json, path), id) != 0)
            continue;
        snprintf(path, sizeof(path), "members.%d.state", m);
        snprintf(out, len, "%s", itest_jstr(r.json, path));
    }
    itest_resp_free(&r);
}

int
cl_stop(struct cl *c, int i, int timeout_ms)
{
    struct itest_node *n = &c->node[i];
    int64_t deadline = itest_now_ms() + timeout_ms;
    int status;

    if (n->pid <= 0)
        return -1;
    kill(n->pid, SIGTERM);
    while (itest_now_ms() < deadline) {
        if (waitpid(n->pid, &status, WNOHANG) == n->pid) {
            n->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
        }
        itest_sleep_ms(20);
    }
    return -1;
}

int
cl_alive(const struct cl *c, int i)
{
    return c->node[i].pid > 0;
}

/* leader_of - the "leader" node id node i reports, as an index, or -1. */
static int
leader_of(struct cl *c, int i)
{
    struct itest_resp r;
    int l = -1;

    if (itest_req(&c->node[i], "GET", "/health", NULL, &r) == 200) {
        const char *id = itest_jstr(r.json, "leader");
        if (id && id[0] == 'n' && id[1] >= '0' && id[1] < '0' + CL_NODES &&
            id[2] == '\0')
            l = id[1] - '0';
    }
    itest_resp_free(&r);
    return l;
}

int
cl_leader(struct cl *c, int timeout_ms)
{
    int64_t deadline = itest_now_ms() + timeout_ms;

    do {
        int agreed = -2;
        for (int i = 0; i < CL_NODES && agreed != -1; i++) {
            if (!cl_alive(c, i))
                continue;
            int l = leader_of(c, i);
            if (l < 0 || !cl_alive(c, l) || (agreed >= 0 && l != agreed))
                agreed = -1;
            else
                agreed = l;
        }
        if (agreed >= 0)
            return agreed;
        itest_sleep_ms(50);
    } while (itest_now_ms() < deadline);
    return -1;
}

int
cl_owner(const char *queue, const char *part, unsigned live)
{
    struct shm_board_view v;
    struct shm_owners o;
    int idx[CL_NODES], m;

    memset(&v, 0, sizeof(v));
    for (int i = 0; i < CL_NODES; i++) {
        if (!(live & (1u << i)))
            continue;
        struct shm_member *mb = &v.members[v.nmembers];
        snprintf(mb->id, sizeof(mb->id), "n%d", i);
        mb->state = SHM_MEMBER_LIVE;
        idx[v.nmembers++] = i;
    }
    shm_owners_init(&o);
    shm_owners_from_view(&o, &v);
    m = shm_owner_pick(&o, (struct shm_name){queue, strlen(queue)},
                       (struct shm_name){part, strlen(part)});
    /* the owners are the live members in the view's order */
    return m < 0 ? -1 : idx[m];
}

/* sees - node i's /health shows exactly the members in alive as live. */
static int
sees(struct cl *c, int i, unsigned alive)
{
    struct itest_resp r;
    int ok = 0;

    if (itest_get(&c->node[i], &r, "/health") == 200 &&
        itest_jlen(r.json, "members") == CL_NODES) {
        ok = 1;
        for (int k = 0; k < CL_NODES; k++) {
            char path[40];
            snprintf(path, sizeof(path), "members.%d.node", k);
            const char *id = itest_jstr(r.json, path);
            snprintf(path, sizeof(path), "members.%d.state", k);
            int live = strcmp(itest_jstr(r.json, path), "live") == 0;
            /* a peer not heard yet is named by its address */
            if (id[0] != 'n' || id[1] < '0' || id[1] >= '0' + CL_NODES) {
                ok = 0;
                break;
            }
            ok &= live == ((alive & (1u << (id[1] - '0'))) != 0);
        }
    }
    itest_resp_free(&r);
    return ok;
}

void
cl_wait_view(struct cl *c, unsigned alive)
{
    int64_t deadline = itest_now_ms() + 30000;

    for (int i = 0; i < CL_NODES; i++)
        if (alive & (1u << i))
            while (!sees(c, i, alive)) {
                cr_assert_lt(itest_now_ms(), deadline,
                             "node %d does not see live members %#x", i, alive);
                itest_sleep_ms(100);
            }
}

long
cl_call(struct cl *c, int i, const char *method, const char *path,
        const char *body, int wait_ms, int pause_ms, struct itest_resp *r)
{
    int64_t deadline = itest_now_ms() + wait_ms;

    for (;;) {
        long st = itest_req(&c->node[i], method, path, body, r);
        if (st != 503 || itest_now_ms() > deadline)
            return st;
        itest_resp_free(r);
        itest_sleep_ms(pause_ms);
    }
}

int64_t
cl_part_depth(struct cl *c, int i, const char *queue, const char *part,
              const char *field)
{
    struct itest_resp r;
    long st = itest_get(&c->node[i], &r,
                        "/api/v1/ephemeral/queues/%s/depth?scope=node", queue);
    int64_t v = 0;

    cr_assert(st == 200 || st == 404, "depth on node %d: %ld %s", i, st,
              r.body);
    for (int k = 0; st == 200 && k < itest_jlen(r.json, "partitions"); k++) {
        struct json_object *e =
            json_object_array_get_idx(itest_jget(r.json, "partitions"), k);
        if (strcmp(itest_jstr(e, "partition"), part) == 0)
            v = itest_jint(e, field);
    }
    itest_resp_free(&r);
    return v;
}

/* cl_incarnation - see cluster.h. */
void
cl_incarnation(struct cl *c, int i, char *out, size_t len)
{
    struct itest_resp r;

    cr_assert_eq(itest_get(&c->node[i], &r, "/health"), 200, "%s", r.body);
    snprintf(out, len, "%s", itest_jstr(r.json, "incarnation"));
    cr_assert(out[0] != '\0', "%s", r.body);
    itest_resp_free(&r);
}

/* cl_held_push - see cluster.h. */
int
cl_held_push(struct cl *c, int i, const char *body)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)c->node[i].port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char head[256];
    int64_t end = itest_now_ms() + 10000;

    cr_assert(fd >= 0);
    cr_assert_eq(inet_pton(AF_INET, c->addr[i], &a.sin_addr), 1);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s",
                 strerror(errno));
    snprintf(head, sizeof(head),
             "POST /api/v1/ephemeral/push HTTP/1.1\r\nHost: t\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n"
             "%.10s",
             strlen(body), body);
    cr_assert_eq(itest_raw_send(fd, head), 0);
    while (!itest_conn_consumed(&c->node[i], fd)) {
        cr_assert_lt(itest_now_ms(), end, "the push head was never read");
        itest_sleep_ms(5);
    }
    return fd;
}
