/*
 * nfq_delay.c - see nfq_delay.h.  The netlink messages are those of
 * linux/netfilter/nfnetlink_queue.h: a config message binds the queue and
 * sets the copy mode, the kernel sends one packet message per packet, and
 * a verdict message names the packet's id.
 */
#include "test/cluster/nfq_delay.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#define HELD_MAX 16384 /* above the queue's length: nothing overflows */

struct held {
    uint32_t id;
    int64_t due_ms;
};

struct nfq_delay {
    int fd, num, delay_ms;
    pthread_t thread;
    atomic_int stop;
    atomic_long count;
    struct held held[HELD_MAX]; /* a ring, oldest first */
    unsigned head, n;
};

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* attr - append a netlink attribute to the message in buf. */
static void
attr(struct nlmsghdr *h, int type, const void *data, size_t len)
{
    struct nlattr *a = (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));

    a->nla_type = (uint16_t)type;
    a->nla_len = (uint16_t)(NLA_HDRLEN + len);
    memcpy((char *)a + NLA_HDRLEN, data, len);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* msg - a queue message of type to queue num, in buf. */
static struct nlmsghdr *
msg(char *buf, int type, int num, int flags)
{
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    struct nfgenmsg *g = NLMSG_DATA(h);

    memset(buf, 0, NLMSG_SPACE(sizeof(*g)));
    h->nlmsg_len = NLMSG_LENGTH(sizeof(*g));
    h->nlmsg_type = (uint16_t)((NFNL_SUBSYS_QUEUE << 8) | type);
    h->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons((uint16_t)num);
    return h;
}

/* request - send a config message and read the kernel's ack: 0 or
 * -errno. */
static int
request(int fd, struct nlmsghdr *h)
{
    char ans[4096];
    ssize_t got;

    if (send(fd, h, h->nlmsg_len, 0) != (ssize_t)h->nlmsg_len)
        return -errno;
    got = recv(fd, ans, sizeof(ans), 0);
    if (got < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
        return -EIO;
    struct nlmsghdr *a = (struct nlmsghdr *)ans;
    if (a->nlmsg_type != NLMSG_ERROR)
        return -EIO;
    return ((struct nlmsgerr *)NLMSG_DATA(a))->error;
}

static void
verdict(struct nfq_delay *d, uint32_t id)
{
    char buf[256];
    struct nlmsghdr *h = msg(buf, NFQNL_MSG_VERDICT, d->num, 0);
    struct nfqnl_msg_verdict_hdr v = {htonl(NF_ACCEPT), htonl(id)};

    attr(h, NFQA_VERDICT_HDR, &v, sizeof(v));
    (void)send(d->fd, h, h->nlmsg_len, 0);
}

/* take - the packet messages in buf into the ring. */
static void
take(struct nfq_delay *d, char *buf, size_t len)
{
    int64_t due = now_ms() + d->delay_ms;

    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
         h = NLMSG_NEXT(h, len)) {
        if ((h->nlmsg_type & 0xff) != NFQNL_MSG_PACKET)
            continue;
        int alen = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(struct nfgenmsg));
        struct nlattr *a =
            (struct nlattr *)((char *)NLMSG_DATA(h) +
                              NLMSG_ALIGN(sizeof(struct nfgenmsg)));
        for (; alen >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
               a->nla_len <= alen;
             alen -= NLA_ALIGN(a->nla_len),
             a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len))) {
            if ((a->nla_type & NLA_TYPE_MASK) != NFQA_PACKET_HDR)
                continue;
            struct nfqnl_msg_packet_hdr ph;
            memcpy(&ph, (char *)a + NLA_HDRLEN, sizeof(ph));
            if (d->n == HELD_MAX) /* cannot be: the queue is shorter */
                verdict(d, ntohl(ph.packet_id));
            else
                d->held[(d->head + d->n++) % HELD_MAX] =
                    (struct held){ntohl(ph.packet_id), due};
            atomic_fetch_add(&d->count, 1);
        }
    }
}

/* release - accept the held packets due by now (all with now < 0). */
static void
release(struct nfq_delay *d, int64_t now)
{
    while (d->n > 0 && (now < 0 || d->held[d->head].due_ms <= now)) {
        verdict(d, d->held[d->head].id);
        d->head = (d->head + 1) % HELD_MAX;
        d->n--;
    }
}

static void *
run(void *arg)
{
    struct nfq_delay *d = arg;
    static char buf[1 << 16];

    while (!atomic_load(&d->stop)) {
        int64_t now = now_ms();
        int wait = d->n ? (int)(d->held[d->head].due_ms - now) : 50;
        struct pollfd p = {d->fd, POLLIN, 0};

        if (wait > 50)
            wait = 50; /* to see stop */
        if (poll(&p, 1, wait < 0 ? 0 : wait) == 1) {
            ssize_t got = recv(d->fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (got > 0)
                take(d, buf, (size_t)got);
        }
        release(d, now_ms());
    }
    release(d, -1);
    return NULL;
}

struct nfq_delay *
nfq_delay_start(int num, int delay_ms)
{
    struct nfq_delay *d = calloc(1, sizeof(*d));
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    char buf[256];
    struct nlmsghdr *h;
    int rc, rcvbuf = 4 << 20;

    cr_assert(d);
    d->num = num;
    d->delay_ms = delay_ms;
    d->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    cr_assert(d->fd >= 0, "netlink socket: %s", strerror(errno));
    cr_assert(bind(d->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
              "netlink bind: %s", strerror(errno));
    (void)setsockopt(d->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
                     sizeof(rcvbuf));

    h = msg(buf, NFQNL_MSG_CONFIG, num, NLM_F_ACK);
    struct nfqnl_msg_config_cmd cmd = {NFQNL_CFG_CMD_BIND, 0, htons(AF_INET)};
    attr(h, NFQA_CFG_CMD, &cmd, sizeof(cmd));
    rc = request(d->fd, h);
    cr_assert_eq(rc, 0, "NFQUEUE %d bind: %s", num, strerror(-rc));

    h = msg(buf, NFQNL_MSG_CONFIG, num, NLM_F_ACK);
    struct nfqnl_msg_config_params params = {htonl(0), NFQNL_COPY_META};
    uint32_t maxlen = htonl(8192);
    attr(h, NFQA_CFG_PARAMS, &params, sizeof(params));
    attr(h, NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof(maxlen));
    rc = request(d->fd, h);
    cr_assert_eq(rc, 0, "NFQUEUE %d params: %s", num, strerror(-rc));

    cr_assert_eq(pthread_create(&d->thread, NULL, run, d), 0);
    return d;
}

void
nfq_delay_stop(struct nfq_delay *d)
{
    if (d == NULL)
        return;
    atomic_store(&d->stop, 1);
    pthread_join(d->thread, NULL);
    close(d->fd);
    free(d);
}

long
nfq_delay_count(struct nfq_delay *d)
{
    return atomic_load(&d->count);
}
