/*
 * netns.h - network namespaces for tests that cut the links between
 * nodes: each node in a namespace of its own, joined to the test's.
 *
 * netns_switch() moves the test process into a network namespace of its
 * own, the "switch", which routes between the nodes.  netns_node_add(i)
 * makes node i's namespace and a veth pair to the switch: the node is
 * NETNS_ADDR(i) (10.77.<i+1>.2), the switch's side 10.77.<i+1>.1, device
 * "s<i>" there.  A node started between netns_enter(i) and netns_leave()
 * runs in node i's namespace (a child keeps the namespace it was forked
 * in); the test process, in the switch, reaches every node.
 *
 * netns_cut(i) drops every packet the switch would route to or from node
 * i (iptables FORWARD rules in the switch): node i is isolated from the
 * other nodes, not from the test.  netns_heal(i) takes the rules out.
 *
 * The other faults are FORWARD rules too: a link cut both ways
 * (netns_cut_link, for splits), one way (netns_oneway: every packet, or
 * only TCP SYNs, so that established connections and replies still flow),
 * and a flaky link (netns_flaky: random loss with iptables' statistic
 * match, delay with an NFQUEUE delayer, nfq_delay.h, since this kernel has
 * no netem).  netns_heal_all() ends every fault.
 *
 * Nothing outlives the test process: the namespaces are held by it and by
 * its nodes (which die with it: PR_SET_PDEATHSIG), and the links and rules
 * live in them.  Main thread only (setns is per thread, and nodes are
 * spawned there); needs root, ip (iproute2) and iptables.
 */
#ifndef MAYFLY_TEST_CLUSTER_NETNS_H
#define MAYFLY_TEST_CLUSTER_NETNS_H

#include <stddef.h>

#define NETNS_MAX 8

/* NETNS_ADDR - node i's address, as a string literal's format. */
#define NETNS_ADDR_FMT "10.77.%d.2"

/*
 * netns_switch - the test process into a new network namespace, loopback
 * up and routing on.  0, or -errno of unshare(2) (EPERM: this machine
 * forbids namespaces; the caller skips); fails the test when ip or
 * iptables do not work there.
 */
int netns_switch(void);

/* netns_node_add - node i's namespace (loopback up) and its link to the
 * switch; the process stays in the switch.  Fails the test on error. */
void netns_node_add(int i);

/* netns_addr - node i's address into out. */
void netns_addr(int i, char *out, size_t len);

/* netns_enter - the calling thread into node i's namespace (to start the
 * node); netns_leave - back into the switch. */
void netns_enter(int i);
void netns_leave(void);

/* netns_cut, netns_heal - isolate node i from the other nodes, and end
 * that. */
void netns_cut(int i);
void netns_heal(int i);

/* netns_cut_link, netns_heal_link - cut the link between nodes i and j
 * (both ways), and end that. */
void netns_cut_link(int i, int j);
void netns_heal_link(int i, int j);

/* netns_oneway - drop what node from sends to node to: every packet, or
 * (syn_only) the SYNs that open a TCP connection, so that connections to
 * opened before, and the replies on connections to opens, still flow. */
void netns_oneway(int from, int to, int syn_only);

/* netns_flaky - node i's link to the other nodes loses loss_pct % of the
 * packets each way and delays the rest delay_ms each way (0: none). */
void netns_flaky(int i, int loss_pct, int delay_ms);

/* netns_heal_all - end every fault: no rule left, the delayer stopped. */
void netns_heal_all(void);

/* netns_delayed - packets the delayer has held so far (0: none running). */
long netns_delayed(void);

/*
 * netns_orphans - TCP sockets in node i's namespace that its processes
 * closed with something still to send (FIN-WAIT-1 or CLOSING: segments,
 * or the FIN behind them, queued in the kernel) toward one of the nports
 * remote ports: what a partition's heal would deliver late.
 */
int netns_orphans(int i, const int *ports, int nports);

#endif
