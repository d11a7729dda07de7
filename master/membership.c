/*
 * membership.c - who the members are and which are live (membership.h).
 *
 * Members are the node's own cluster address and its peers', sorted, so
 * every node numbers them alike (raft numbers them so too).  Membership is
 * static: what changes is what each member last said of itself and when
 * it was last heard.  The board gets the members' states whenever
 * the master publishes it (every tick: liveness ages with the clock).
 */
#include "master/membership.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/node_call.h"
#include "http/sign.h"
#include "master/cluster_client.h"
#include "master/groups.h"
#include "master/handover.h"
#include "master/master.h"
#include "shm/board.h"
#include "shm/log.h"

#define HEARTBEAT_MS 500 /* a quarter of the default member_ttl_ms at most */

static int
addr_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* copy_id - a node's id and incarnation for a signature; 0, or -ENOENT
 * when either is unknown. */
static int
copy_id(const char *from, uint64_t from_inc, char *id, size_t idlen,
        uint64_t *inc)
{
    if (from[0] == '\0' || from_inc == 0 || strlen(from) >= idlen)
        return -ENOENT;
    memcpy(id, from, strlen(from) + 1);
    *inc = from_inc;
    return 0;
}

/*
 * identify - who is at addr, for the signature of a call there
 * (http_client_identify_fn).  It runs in the master, whose members are
 * current, and in the workers, each with the copy of m it was forked
 * with: a worker calls only its own master's cluster port (this node,
 * whose id and incarnation never change) and peers' client ports, which
 * the board names with their incarnations as the master last heard
 * them.
 */
static int
identify(void *arg, enum http_client_port port, const char *addr, char *id,
         size_t idlen, uint64_t *inc)
{
    const struct master *m = arg;
    const struct master_members *r = &m->members;
    struct shm_board_view v;

    if (port == HTTP_CLIENT_CLUSTER) {
        if (strcmp(addr, m->ws.cluster_addr) == 0)
            return copy_id(m->cfg.node_id, m->incarnation, id, idlen, inc);
        for (int i = 0; i < r->n; i++)
            if (strcmp(addr, r->addr[i]) == 0)
                return i == r->self
                           ? copy_id(m->cfg.node_id, m->incarnation, id, idlen,
                                     inc)
                           : copy_id(r->id[i], r->inc[i], id, idlen, inc);
        return -ENOENT;
    }
    shm_board_read(m->seg.board, &v);
    for (uint32_t i = 0; i < v.nmembers && i < SHM_BOARD_MEMBERS; i++)
        if (strcmp(addr, v.members[i].addr) == 0)
            return copy_id(v.members[i].id, v.members[i].incarnation, id, idlen,
                           inc);
    return -ENOENT;
}

int
master_membership_start(struct master *m)
{
    struct master_members *r = &m->members;
    const char *self = m->cfg.cluster_advertise[0] ? m->cfg.cluster_advertise
                                                   : m->cfg.cluster_listen;

    r->n = 0;
    snprintf(r->addr[r->n++], sizeof(r->addr[0]), "%s", self);
    for (int i = 0; i < m->cfg.npeers && r->n < RAFT_MAX_NODES; i++) {
        if (strcmp(m->cfg.peers[i], self) != 0)
            snprintf(r->addr[r->n++], sizeof(r->addr[0]), "%s",
                     m->cfg.peers[i]);
    }
    qsort(r->addr, (size_t)r->n, sizeof(r->addr[0]), addr_cmp);
    for (int i = 0; i < r->n; i++) {
        if (strcmp(r->addr[i], self) == 0)
            r->self = i;
        if (i > 0 && strcmp(r->addr[i - 1], r->addr[i]) == 0) {
            log_error(0, "peers: a cluster address is listed twice");
            return -EINVAL;
        }
    }
    snprintf(r->id[r->self], sizeof(r->id[0]), "%s", m->cfg.node_id);
    http_node_call_self(&(struct http_sign_self){
        m->cfg.node_id,
        m->incarnation,
        {r->addr[r->self], m->cfg.advertise},
        http_sign_now_ms(),
    });
    m->ws.peers.identify = identify;
    m->ws.peers.identify_arg = m;
    return 0;
}

int
master_membership_heard(struct master *m, int i,
                        const struct master_peer_word *pw)
{
    struct master_members *r = &m->members;
    uint64_t now = shm_now_ms();
    int64_t ts = 0;
    char *end;

    if (pw->timestamp != NULL) {
        long long t = strtoll(pw->timestamp, &end, 10);
        if (*end == '\0' && end != pw->timestamp && t > 0)
            ts = t;
    }
    /* A beat's worth of slack: raft messages and beats travel on
     * connections of their own, and may cross. */
    if (ts > 0 && (ts + (int64_t)master_membership_beat_ms(m) < r->sent[i] ||
                   http_sign_now_ms() - ts >= (int64_t)m->cfg.member_ttl_ms)) {
        log_debug(0,
                  "a message of member %s sent at %lld is older than what "
                  "this node knows of it: ignored",
                  r->id[i], (long long)ts);
        return 0;
    }
    if (ts > r->sent[i])
        r->sent[i] = ts;

    if (pw->node_id != NULL)
        snprintf(r->id[i], sizeof(r->id[0]), "%s", pw->node_id);
    if (pw->client != NULL && strlen(pw->client) < sizeof(r->client[0]))
        memcpy(r->client[i], pw->client, strlen(pw->client) + 1);
    if (pw->incarnation != NULL) {
        uint64_t inc = strtoull(pw->incarnation, &end, 16);
        if (*end == '\0' && end != pw->incarnation)
            r->inc[i] = inc;
    }
    if (pw->state != NULL) {
        r->said[i] = strcmp(pw->state, "ready") == 0     ? SHM_MEMBER_LIVE
                     : strcmp(pw->state, "leaving") == 0 ? SHM_MEMBER_LEAVING
                                                         : SHM_MEMBER_STARTING;
        if (r->said[i] == SHM_MEMBER_LEAVING && r->left_inc[i] != r->inc[i]) {
            r->left_inc[i] = r->inc[i];
            r->left_until[i] = now + (uint64_t)m->cfg.leave_exclude_s * 1000;
            log_info(0, "member %s is leaving", r->id[i]);
        }
    }
    r->heard[i] = now;
    return 1;
}

/*
 * A peer is STARTING until it says it is ready (a peer that names no state,
 * an older build, counts as ready), LEAVING while its announced leave
 * holds for the incarnation it named, DEAD after member_ttl_ms unheard,
 * leave or not: a node that left and is gone holds nothing, and acks of
 * its ids must not be sent after it for the rest of leave_exclude_s.
 */
/* master_membership_peer - see membership.h. */
int
master_membership_peer(const struct master *m, const char *id)
{
    for (int i = 0; i < m->members.n; i++)
        if (i != m->members.self && strcmp(m->members.id[i], id) == 0)
            return i;
    return -1;
}

enum shm_member_state
master_membership_state(const struct master *m, int i, uint64_t now)
{
    const struct master_members *r = &m->members;

    if (i == r->self)
        return m->state != MASTER_RUNNING ? SHM_MEMBER_LEAVING
               : !m->ready                ? SHM_MEMBER_STARTING
                                          : SHM_MEMBER_LIVE;
    if (r->heard[i] == 0 || now - r->heard[i] >= m->cfg.member_ttl_ms)
        return SHM_MEMBER_DEAD;
    if (r->left_until[i] > now && r->inc[i] == r->left_inc[i])
        return SHM_MEMBER_LEAVING;
    return r->said[i] == SHM_MEMBER_LEAVING    ? SHM_MEMBER_LEAVING
           : r->said[i] == SHM_MEMBER_STARTING ? SHM_MEMBER_STARTING
                                               : SHM_MEMBER_LIVE;
}

int
master_membership_groups_heard(const struct master *m, uint64_t since,
                               uint64_t now)
{
    const struct master_members *r = &m->members;

    for (int i = 0; i < r->n; i++)
        if (i != r->self && r->heard[i] != 0 &&
            now - r->heard[i] < m->cfg.member_ttl_ms && r->beat[i] < since)
            return 0;
    return 1;
}

uint64_t
master_membership_beat_ms(const struct master *m)
{
    uint64_t every = m->cfg.member_ttl_ms / 4;

    return every < HEARTBEAT_MS ? every : HEARTBEAT_MS;
}

void
master_membership_heartbeat(struct master *m, uint64_t now, int now_or_never)
{
    static uint64_t last;
    static int holds_sent;
    const struct master_members *r = &m->members;
    uint64_t every = master_membership_beat_ms(m);
    struct http_buf groups = {0}, body[RAFT_MAX_NODES] = {0};
    uint64_t tell = 0;

    if (!now_or_never && now < last + every)
        return;
    /* Every peer gets the groups; the beat that first says "leaving" also
     * tells each peer what it is about to be handed, before the others
     * route pushes to it. */
    if (m->state == MASTER_RUNNING)
        master_groups_beat(m, &groups, now);
    for (int i = 0; i < r->n; i++) {
        if (i == r->self)
            continue;
        http_buf_printf(&body[i], "%d\n", r->self);
        if (groups.len > 0)
            http_buf_append(&body[i], groups.data, groups.len);
    }
    http_buf_free(&groups);
    if (m->state != MASTER_RUNNING && !holds_sent) {
        holds_sent = 1;
        master_handover_holds(m, body);
    }
    /* A joiner's first word goes whatever beat is still out to it: its
     * pops wait for it. */
    if (m->state == MASTER_RUNNING)
        tell = master_handover_joins(m, body, now);
    if (master_cluster_client_heartbeat(m, every * 2, body,
                                        now_or_never ? tell : 0))
        last = now;
    for (int i = 0; i < r->n; i++)
        http_buf_free(&body[i]);
}

_Static_assert(SHM_BOARD_MEMBERS >= CONFIG_PEERS_MAX + 1,
               "the board lists the node and every peer");
_Static_assert(SHM_BOARD_ADDR_MAX >= CONFIG_ADDR_MAX,
               "the board holds any advertise address");

void
master_membership_publish(struct master *m)
{
    struct master_members *r = &m->members;
    const struct raft_status *st = &m->raft.st;
    struct shm_board_view v = {0};
    uint64_t now = shm_now_ms();

    enum log_level lvl = LOG_LEVEL_INFO;

    log_parse_level(m->cfg.log_level, &lvl);
    v.log_level = lvl;
    v.ready = m->state == MASTER_RUNNING && m->ready;
    v.stopping = m->state != MASTER_RUNNING;
    v.role = st->role == RAFT_LEADER     ? SHM_ROLE_LEADER
             : st->role == RAFT_FOLLOWER ? SHM_ROLE_FOLLOWER
                                         : SHM_ROLE_CANDIDATE;
    v.term = st->term;
    v.commit = st->commit;
    if (st->leader >= 0 && st->leader < r->n)
        snprintf(v.leader, sizeof(v.leader), "%s",
                 r->id[st->leader][0] ? r->id[st->leader]
                                      : r->addr[st->leader]);
    for (int i = 0; i < r->n && i < SHM_BOARD_MEMBERS; i++) {
        struct shm_member *mb = &v.members[v.nmembers++];
        snprintf(mb->id, sizeof(mb->id), "%s",
                 r->id[i][0] ? r->id[i] : r->addr[i]);
        mb->self = i == r->self;
        snprintf(mb->addr, sizeof(mb->addr), "%s",
                 mb->self ? m->cfg.advertise : r->client[i]);
        mb->state = (uint8_t)master_membership_state(m, i, now);
        mb->incarnation = mb->self ? m->incarnation : r->inc[i];
    }
    shm_board_publish(m->seg.board, &v);
    /* A peer live as a new incarnation is told at once, now that the
     * workers route to it, what this node ships it (handover.h): its
     * pops wait for that word. */
    if (m->state == MASTER_RUNNING && master_handover_join_news(m, now))
        master_membership_heartbeat(m, now, 1);
}
