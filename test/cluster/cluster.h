/*
 * cluster.h - three real mayflyd nodes on 127.0.0.1, 127.0.0.2, 127.0.0.3,
 * for tests of the raft log and the cluster port.
 *
 * Each node keeps its ports and data directory across restarts (raft
 * membership is the list of cluster addresses), shares one cluster secret,
 * and dies with the test process (PR_SET_PDEATHSIG).  HTTP goes through the
 * integration harness (test/integration/node.h).
 */
#ifndef MAYFLY_TEST_CLUSTER_H
#define MAYFLY_TEST_CLUSTER_H

#include "http/sign.h"
#include "test/integration/node.h"

#define CL_NODES 3

struct cl {
    struct itest_node node[CL_NODES];
    char addr[CL_NODES][32]; /* "127.0.0.N" */
    int cport[CL_NODES];     /* cluster ports */
    char secret_file[300];
    char peers[CL_NODES * 40];
};

/* cl_init - pick addresses, ports and directories; start nothing. */
void cl_init(struct cl *c);

/*
 * cl_init_tls - cl_init, then the cluster's CA ("ca") and one certificate
 * for 127.0.0.1-3 ("node": each node's two ports, and a client's) in the
 * cluster's directory, whose path goes into dir; the harness trusts that
 * CA (itest_ca_file: clear it in the suite's fini) and asks every node on
 * https://.  The options that give both ports that certificate go into
 * opts, for the suite to start the nodes with (after its own).
 */
void cl_init_tls(struct cl *c, char *dir, size_t dir_len, char *opts,
                 size_t opts_len);

/* cl_start - start node i (again) with extra "-o" options; waits for
 * /health 200. */
void cl_start(struct cl *c, int i, const char *opts);

/* cl_spawn - start node i (again) with extra "-o" options and return at
 * once, for a test that watches its start itself. */
void cl_spawn(struct cl *c, int i, const char *opts);

/* cl_held_push - a push to node i whose head and first bytes are sent and
 * read by a worker: in flight, so the node's drain (and its hand-over,
 * which follows its workers' exit) waits for the rest, up to 5 s.  The
 * client socket. */
int cl_held_push(struct cl *c, int i, const char *body);

/* cl_kill - SIGKILL node i, reap it, and wait (10 s at most) until its
 * workers are gone too: they hold its client port until then. */
void cl_kill(struct cl *c, int i);

/* cl_stop - SIGTERM node i; its exit status, or -1 past timeout_ms. */
int cl_stop(struct cl *c, int i, int timeout_ms);

/* cl_leader - the index of the node all live nodes agree leads, waiting up
 * to timeout_ms; -1 if none. */
int cl_leader(struct cl *c, int timeout_ms);

/* cl_alive - node i is running. */
int cl_alive(const struct cl *c, int i);

/* cl_incarnation - node i's incarnation as its /health gives it, into out
 * (asserting it answers one). */
void cl_incarnation(struct cl *c, int i, char *out, size_t len);

/*
 * cl_owner - the index of the node that owns (queue, part) when the nodes
 * in live (a bit mask: bit i is node i, whose id is "n<i>") are the live
 * members, as every node computes it (shm/owner.h); -1 when live is 0.
 */
int cl_owner(const char *queue, const char *part, unsigned live);

#define CL_ALL ((1u << CL_NODES) - 1)

/* cl_part_owned_by - the first partition "p<k>" (k < max) of queue that
 * node o owns while all are live (so whenever o is: the highest score wins
 * any subset), into out; fails the test if none. */
void cl_part_owned_by(const char *queue, int o, int max, char *out, size_t len);

/* Which port of a node a call goes to. */
enum cl_port {
    CL_CLIENT_PORT,
    CL_CLUSTER_PORT,
};

/* cl_addr - node i's address for port, "127.0.0.N:port", into out. */
void cl_addr(const struct cl *c, int i, enum cl_port port, char *out,
             size_t len);

/*
 * cl_sign_req - the signature lines a node sends with call r
 * (http/sign.h), signed with the cluster's secret under a nonce of this
 * test process never used before (r's sender and seq are set), at r's
 * now_ms (0: the clock's now).
 */
void cl_sign_req(const struct cl *c, struct http_sign_req *r,
                 struct http_sign_lines *out);

/*
 * cl_sign - cl_sign_req for method, path (path and query as sent) and
 * body (NULL: none) to node i's port, addressed as a sender that has not
 * heard that node yet addresses it (its address), with no deadline; lines
 * are the call's own X-Mayfly- header lines (NULL-terminated, or NULL),
 * which are signed with it.
 */
void cl_sign(const struct cl *c, int i, enum cl_port port, const char *method,
             const char *path, const char *body, const char *const *lines,
             struct http_sign_lines *out);

/* cl_headers - lines (NULL-terminated, or NULL) then l's, as a
 * NULL-terminated list in out (cap entries at least 8 more than lines). */
const char *const *cl_headers(const char *const *lines,
                              const struct http_sign_lines *l, const char **out,
                              size_t cap);

/* cl_start_all, cl_kill_all - every node, as cl_start and cl_kill do. */
void cl_start_all(struct cl *c, const char *opts);
void cl_kill_all(struct cl *c);

/* cl_up - cl_init, then cl_start_all with opts: the cluster a suite's
 * tests start from. */
void cl_up(struct cl *c, const char *opts);

/* cl_declared_length - the maxLength node i lists for queue, -1 when it
 * does not list it as declared. */
int64_t cl_declared_length(struct cl *c, int i, const char *queue);

/* cl_member_state - the state ("live", "dead"...) node i's /health gives
 * member id, whatever its status; "" when it does not answer or does not
 * list it. */
void cl_member_state(struct cl *c, int i, const char *id, char *out,
                     size_t len);

/* cl_wait_view - until every node in alive (a mask, as for cl_owner) sees
 * exactly those members live (30 s at most). */
void cl_wait_view(struct cl *c, unsigned alive);

/*
 * cl_call - method path body (NULL: none) on node i, sent again every
 * pause_ms while it answers 503 (a view or raft settling: owner_moved,
 * ephemeral_forward_failed, a configure not committed yet) until wait_ms
 * have passed; its status, with r filled as itest_req fills it.
 */
long cl_call(struct cl *c, int i, const char *method, const char *path,
             const char *body, int wait_ms, int pause_ms, struct itest_resp *r);

/* cl_part_depth - the integer field ("pending", "bytes", "delayed"...) of
 * partition part in queue's scope=node depth on node i; 0 when the node
 * holds none of the queue or of the partition (404, or not listed). */
int64_t cl_part_depth(struct cl *c, int i, const char *queue, const char *part,
                      const char *field);

#endif
