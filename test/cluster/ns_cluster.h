/*
 * ns_cluster.h - three real mayflyd nodes, each in a network namespace of
 * its own (netns.h), for tests that cut the network between them.
 *
 * Node i is "n<i>" (so cl_owner() computes who owns what), listens on
 * 10.77.<i+1>.2 ports 6632 (clients) and 6633 (cluster), one worker unless
 * the test's options say otherwise.  The test process, in the switch,
 * reaches every node whatever the faults between them.  Main thread only.
 */
#ifndef MAYFLY_TEST_CLUSTER_NS_CLUSTER_H
#define MAYFLY_TEST_CLUSTER_NS_CLUSTER_H

#include "test/cluster/netns.h"
#include "test/integration/node.h"

#define NSC_NODES 3
#define NSC_ALL   ((1u << NSC_NODES) - 1)

struct nsc {
    struct itest_node node[NSC_NODES];
    char secret_file[300], peers[200], opts[400];
};

/*
 * nsc_start - the namespaces and the three nodes, each started with the
 * space-separated settings opts (NULL: none) after its own; returns at
 * once.  0, or -errno when the machine refuses a network namespace (the
 * caller skips: NSC_SKIP_UNLESS).
 */
int nsc_start(struct nsc *c, const char *opts);

/* NSC_SKIP_UNLESS - skip the test, saying why, when nsc_start's rc says
 * namespaces are forbidden here; fail it on any other error. */
#define NSC_SKIP_UNLESS(rc)                                                    \
    do {                                                                       \
        if ((rc) == -EPERM || (rc) == -EACCES || (rc) == -ENOSYS ||            \
            (rc) == -EINVAL)                                                   \
            cr_skip_test("this machine refuses a network namespace "           \
                         "(unshare: %s): the partition test cannot run here",  \
                         strerror(-(rc)));                                     \
        cr_assert_eq((rc), 0, "unshare: %s", strerror(-(rc)));                 \
    } while (0)

/* nsc_stop_all - SIGKILL and reap every node. */
void nsc_stop_all(struct nsc *c);

/* nsc_sees - node i's /health (200, or 503 while not ready) shows exactly
 * the members in live (bit k: node k) as live. */
int nsc_sees(struct nsc *c, int i, unsigned live);

/* nsc_leader - the index of the leader node i's /health names, -1 when
 * none. */
int nsc_leader(struct nsc *c, int i);

/* nsc_settled - the leader's index when every node is ready, sees every
 * member live and names the same leader; -1 otherwise. */
int nsc_settled(struct nsc *c);

/* nsc_wait_settled - nsc_settled() within timeout_ms (fails the test past
 * it, or when a node exits). */
int nsc_wait_settled(struct nsc *c, int timeout_ms);

/* nsc_wait_sees - until node i sees exactly live as live (fails the test
 * past timeout_ms); how long it took. */
int64_t nsc_wait_sees(struct nsc *c, int i, unsigned live, int timeout_ms);

#endif
