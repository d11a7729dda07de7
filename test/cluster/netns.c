/*
 * netns.c - see netns.h.
 */
#include "test/cluster/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/cluster/nfq_delay.h"

static int switch_fd = -1;
static int node_fd[NETNS_MAX] = {-1, -1, -1, -1, -1, -1, -1, -1};

static void run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* run - a shell command in the calling thread's namespace; fails the test
 * unless it exits 0. */
static void
run(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    int rc;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    rc = system(cmd);
    cr_assert_eq(rc, 0, "netns: `%s` failed (%d)", cmd, rc);
}

/* enter - the calling thread into the namespace of fd. */
static void
enter(int fd)
{
    cr_assert(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "setns: %s",
              strerror(errno));
}

int
netns_switch(void)
{
    int fd;

    if (unshare(CLONE_NEWNET) == -1)
        return -errno;
    switch_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    cr_assert(switch_fd >= 0, "open /proc/self/ns/net: %s", strerror(errno));
    run("ip link set lo up");
    fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
    cr_assert(fd >= 0 && write(fd, "1\n", 2) == 2, "ip_forward: %s",
              strerror(errno));
    close(fd);
    run("iptables -w -L FORWARD -n >/dev/null");
    return 0;
}

void
netns_addr(int i, char *out, size_t len)
{
    snprintf(out, len, NETNS_ADDR_FMT, i + 1);
}

void
netns_node_add(int i)
{
    cr_assert(i >= 0 && i < NETNS_MAX && switch_fd >= 0 && node_fd[i] < 0);
    cr_assert(unshare(CLONE_NEWNET) == 0, "unshare: %s", strerror(errno));
    node_fd[i] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    cr_assert(node_fd[i] >= 0);
    run("ip link set lo up");
    enter(switch_fd);
    /* iproute2 opens a netns argument that holds a '/' as a path */
    run("ip link add s%d type veth peer name eth0 netns /proc/%d/fd/%d", i,
        (int)getpid(), node_fd[i]);
    run("ip addr add 10.77.%d.1/24 dev s%d && ip link set s%d up", i + 1, i, i);
    enter(node_fd[i]);
    run("ip addr add " NETNS_ADDR_FMT "/24 dev eth0 && ip link set eth0 up "
        "&& ip route add default via 10.77.%d.1",
        i + 1, i + 1);
    enter(switch_fd);
}

void
netns_enter(int i)
{
    enter(node_fd[i]);
}

void
netns_leave(void)
{
    enter(switch_fd);
}

void
netns_cut(int i)
{
    run("iptables -w -I FORWARD -i s%d -j DROP && "
        "iptables -w -I FORWARD -o s%d -j DROP",
        i, i);
}

void
netns_heal(int i)
{
    run("iptables -w -D FORWARD -i s%d -j DROP && "
        "iptables -w -D FORWARD -o s%d -j DROP",
        i, i);
}

void
netns_cut_link(int i, int j)
{
    run("iptables -w -I FORWARD -i s%d -o s%d -j DROP && "
        "iptables -w -I FORWARD -i s%d -o s%d -j DROP",
        i, j, j, i);
}

void
netns_heal_link(int i, int j)
{
    run("iptables -w -D FORWARD -i s%d -o s%d -j DROP && "
        "iptables -w -D FORWARD -i s%d -o s%d -j DROP",
        i, j, j, i);
}

void
netns_oneway(int from, int to, int syn_only)
{
    run("iptables -w -I FORWARD -i s%d -o s%d %s -j DROP", from, to,
        syn_only ? "-p tcp --syn" : "");
}

static struct nfq_delay *delayer;

#define NETNS_QUEUE 7

void
netns_flaky(int i, int loss_pct, int delay_ms)
{
    /* -I puts each rule first: the loss rules end up before the queue */
    if (delay_ms > 0) {
        if (delayer == NULL)
            delayer = nfq_delay_start(NETNS_QUEUE, delay_ms);
        run("iptables -w -I FORWARD -i s%d -j NFQUEUE --queue-num %d "
            "--queue-bypass && iptables -w -I FORWARD -o s%d -j NFQUEUE "
            "--queue-num %d --queue-bypass",
            i, NETNS_QUEUE, i, NETNS_QUEUE);
    }
    if (loss_pct > 0)
        run("iptables -w -I FORWARD -i s%d -m statistic --mode random "
            "--probability %.3f -j DROP && iptables -w -I FORWARD -o s%d "
            "-m statistic --mode random --probability %.3f -j DROP",
            i, loss_pct / 100.0, i, loss_pct / 100.0);
}

void
netns_heal_all(void)
{
    run("iptables -w -F FORWARD");
    nfq_delay_stop(delayer); /* after the rules: nothing more comes */
    delayer = NULL;
}

long
netns_delayed(void)
{
    return delayer ? nfq_delay_count(delayer) : 0;
}

int
netns_orphans(int i, const int *ports, int nports)
{
    char line[512];
    FILE *f;
    int n = 0;

    netns_enter(i); /* /proc/self/net shows the reader's namespace */
    f = fopen("/proc/self/net/tcp", "r");
    if (f == NULL)
        netns_leave();
    cr_assert(f, "/proc/self/net/tcp: %s", strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned rport, st;

        /* "sl local rem st": rem is ADDR:PORT in hex */
        if (sscanf(line, " %*d: %*x:%*x %*x:%x %x", &rport, &st) != 2)
            continue;
        if (st != 0x04 && st != 0x0b) /* FIN_WAIT1, CLOSING */
            continue;
        for (int k = 0; k < nports; k++)
            if ((int)rport == ports[k])
                n++;
    }
    fclose(f);
    netns_leave();
    return n;
}
