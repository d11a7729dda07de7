/*
 * ns_cluster.c - see ns_cluster.h.
 */
#include "test/cluster/ns_cluster.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* spawn - node i in its namespace. */
static void
spawn(struct nsc *c, int i)
{
    char o[7][400], addr[32];
    const char *own[7] = {o[0], o[1], o[2], o[3], o[4], o[5], o[6]};
    struct itest_node *n = &c->node[i];

    netns_addr(i, addr, sizeof(addr));
    n->port = 6632;
    n->cluster_port = 6633;
    snprintf(n->base, sizeof(n->base), "http://%s:6632", addr);
    snprintf(o[0], sizeof(o[0]), "listen=%s:6632", addr);
    snprintf(o[1], sizeof(o[1]), "cluster_listen=%s:6633", addr);
    snprintf(o[2], sizeof(o[2]), "data_dir=%s", n->dir);
    snprintf(o[3], sizeof(o[3]), "peers=%s", c->peers);
    snprintf(o[4], sizeof(o[4]), "cluster_secret_file=%s", c->secret_file);
    snprintf(o[5], sizeof(o[5]), "node_id=n%d", i);
    snprintf(o[6], sizeof(o[6]), "workers=1");
    netns_enter(i);
    n->pid = itest_spawn(own, 7, c->opts[0] ? c->opts : NULL, n->log);
    netns_leave();
}

int
nsc_start(struct nsc *c, const char *opts)
{
    char dir[200];
    FILE *f;
    int rc;

    memset(c, 0, sizeof(*c));
    snprintf(c->opts, sizeof(c->opts), "%s", opts ? opts : "");
    rc = netns_switch();
    if (rc != 0)
        return rc;
    itest_test_dir(dir, sizeof(dir));
    snprintf(c->secret_file, sizeof(c->secret_file), "%s/secret", dir);
    f = fopen(c->secret_file, "w");
    cr_assert(f);
    fprintf(f, "partition-secret-%d\n", (int)getpid());
    fclose(f);
    for (int i = 0; i < NSC_NODES; i++) {
        size_t used = strlen(c->peers);
        netns_node_add(i);
        snprintf(c->peers + used, sizeof(c->peers) - used,
                 "%s" NETNS_ADDR_FMT ":6633", i ? "," : "", i + 1);
        snprintf(c->node[i].dir, sizeof(c->node[i].dir), "%s/n%d", dir, i);
        cr_assert(mkdir(c->node[i].dir, 0700) == 0);
        snprintf(c->node[i].log, sizeof(c->node[i].log), "%s/n%d/mayflyd.log",
                 dir, i);
    }
    for (int i = 0; i < NSC_NODES; i++)
        spawn(c, i);
    return 0;
}

void
nsc_stop_all(struct nsc *c)
{
    for (int i = 0; i < NSC_NODES; i++)
        if (c->node[i].pid > 0) {
            kill(c->node[i].pid, SIGKILL);
            waitpid(c->node[i].pid, NULL, 0);
            c->node[i].pid = 0;
        }
}

/* view - node i's /health: the mask of the members it shows live and the
 * leader's index (-1: none); 0 when it answers 200, 1 when 503 (not ready:
 * still an answer with members), -1 otherwise. */
static int
view(struct nsc *c, int i, unsigned *live, int *leader)
{
    struct itest_resp r;
    long st = itest_get(&c->node[i], &r, "/health");

    *live = 0;
    *leader = -1;
    if (st == 200 || st == 503) {
        const char *l = itest_jstr(r.json, "leader");
        if (l[0] == 'n' && l[1] >= '0' && l[1] < '0' + NSC_NODES && !l[2])
            *leader = l[1] - '0';
        for (int k = 0; k < itest_jlen(r.json, "members"); k++) {
            char path[40], idp[40];
            snprintf(path, sizeof(path), "members.%d.state", k);
            snprintf(idp, sizeof(idp), "members.%d.node", k);
            const char *id = itest_jstr(r.json, idp);
            if (strcmp(itest_jstr(r.json, path), "live") == 0 && id[0] == 'n' &&
                id[1] >= '0' && id[1] < '0' + NSC_NODES)
                *live |= 1u << (id[1] - '0');
        }
    }
    itest_resp_free(&r);
    return st == 200 ? 0 : st == 503 ? 1 : -1;
}

int
nsc_sees(struct nsc *c, int i, unsigned live)
{
    unsigned got;
    int l;

    return view(c, i, &got, &l) >= 0 && got == live;
}

int
nsc_leader(struct nsc *c, int i)
{
    unsigned got;
    int l;

    return view(c, i, &got, &l) >= 0 ? l : -1;
}

int
nsc_settled(struct nsc *c)
{
    int leader = -1;

    for (int i = 0; i < NSC_NODES; i++) {
        unsigned live;
        int l;
        if (view(c, i, &live, &l) != 0 || live != NSC_ALL || l < 0 ||
            (leader >= 0 && l != leader))
            return -1;
        leader = l;
    }
    return leader;
}

/* exited - fail the test when a node has exited. */
static void
exited(struct nsc *c)
{
    for (int i = 0; i < NSC_NODES; i++) {
        int st;
        if (c->node[i].pid > 0 &&
            waitpid(c->node[i].pid, &st, WNOHANG) == c->node[i].pid) {
            c->node[i].pid = 0;
            itest_node_log_tail(&c->node[i], 30);
            cr_assert_fail("node %d exited", i);
        }
    }
}

int
nsc_wait_settled(struct nsc *c, int timeout_ms)
{
    int64_t deadline = itest_now_ms() + timeout_ms;
    int l;

    while ((l = nsc_settled(c)) < 0) {
        exited(c);
        cr_assert_lt(itest_now_ms(), deadline,
                     "the cluster did not settle in %d ms", timeout_ms);
        itest_sleep_ms(50);
    }
    return l;
}

int64_t
nsc_wait_sees(struct nsc *c, int i, unsigned live, int timeout_ms)
{
    int64_t t0 = itest_now_ms();

    while (!nsc_sees(c, i, live)) {
        exited(c);
        cr_assert_lt(itest_now_ms() - t0, timeout_ms,
                     "node %d does not see the members %#x live in %d ms", i,
                     live, timeout_ms);
        itest_sleep_ms(50);
    }
    return itest_now_ms() - t0;
}
