/*
 * presence.c - see presence.h.
 *
 * The table holds up to max_bytes of member records (each counts its
 * whole record against max_bytes, shm_presence_record_bytes), at most
 * 4 Mi of them, and a channel record for each, at most 64 Ki: the
 * mapping is virtual (MAP_NORESERVE) and costs what is touched.  Expiry
 * runs on the tick: the table keeps its earliest deadline, so a tick with
 * nothing due costs one load; one that is due scans the records (a heap
 * would make that follow the due members only: DESIGN "Presence").
 *
 * A SIGTERM hands the channels over before the node says "leaving"
 * (master_presence_drain): the peers' workers route to it until then, so
 * the next owner has the set before anything is routed there, and emits
 * no event for it.  Its frozen table answers what comes meanwhile 503
 * draining (the peers send it again), so nothing lands here after the
 * export.  A record not taken in PRES_DRAIN_MS leaves its channels to be
 * rebuilt there from the streams' announcements, as after a crash.
 */
#include "master/presence.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "master/cluster_client.h"
#include "master/handover.h"
#include "master/master.h"
#include "master/membership.h"
#include "shm/board.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "shm/presence.h"
#include "shm/presence_move.h"
#include "shm/stats.h"
#include "worker/presence.h"
#include "worker/presence_events.h"

#define RECORDS_MAX  (4u << 20)
#define CHANNELS_MAX (64u << 10)
#define EXPIRE_MAX   1024 /* members a tick lets leave, at most */
/* A drain's presence hand-over, all in all: the node goes on to say
 * "leaving" after it whatever came of it.  Short, as the peers' calls
 * refused meanwhile wait for that (worker/forward.c). */
#define PRES_DRAIN_MS 3000
#define PRES_RETRY_MS 200
/* A start's settle, at most: the live peers' copies come at their scan,
 * a tick after they hear this node ready, or a second on (rescan). */
#define SETTLE_MS 3000

/* master_presence_start - see presence.h. */
void
master_presence_start(struct master *m)
{
    uint64_t rec =
        shm_presence_record_bytes((uint32_t)m->cfg.presence_max_data);
    uint64_t n = m->cfg.max_bytes / rec + 1;
    struct shm_presence_params p = {
        .max_members = m->cfg.presence_max_members,
        .max_data = (uint32_t)m->cfg.presence_max_data,
        .records = n > RECORDS_MAX ? RECORDS_MAX : (uint32_t)n,
    };

    p.channels = p.records > CHANNELS_MAX ? CHANNELS_MAX : p.records;
    if ((m->seg.presence = shm_presence_create(&p)) == NULL)
        log_fatal(errno, "cannot map the presence table (%u members)",
                  p.records);
}

/* A start's settle (shm_presence_settle): the peers whose copies came. */
static struct {
    uint64_t until; /* 0: not begun; UINT64_MAX: until ready, then ... */
    uint64_t heard; /* raft indices, a bit each */
    int done;
} settle;

/*
 * settle_tick - a node with peers settles from its first tick (the
 * members are known by then; nothing is routed here before it is ready,
 * and the peers' copies may come before the tick that sees it ready), and
 * once ready, until every live peer's record came (empty or not: each
 * sends one at the scan that sees this node live), SETTLE_MS at most.
 */
static void
settle_tick(struct master *m, uint64_t now)
{
    struct shm_board_view v;
    int waiting = 0;

    if (settle.done)
        return;
    if (!m->ready) {
        if (settle.until == 0 && m->members.n > 1) {
            settle.until = UINT64_MAX;
            shm_presence_settle(&m->seg, UINT64_MAX);
        }
        return;
    }
    if (settle.until == 0) { /* a node alone */
        settle.done = 1;
        return;
    }
    if (settle.until == UINT64_MAX) {
        settle.until = now + SETTLE_MS;
        shm_presence_settle(&m->seg, settle.until);
    }
    shm_board_read(m->seg.board, &v);
    for (uint32_t i = 0; i < v.nmembers && i < SHM_BOARD_MEMBERS; i++) {
        int k =
            v.members[i].self ? -1 : master_membership_peer(m, v.members[i].id);
        if (k >= 0 && v.members[i].state == SHM_MEMBER_LIVE &&
            !(settle.heard & (1ull << k)))
            waiting++;
    }
    if (waiting == 0 || now >= settle.until) {
        shm_presence_settle(&m->seg, 0);
        settle.done = 1;
        log_info(0, "presence: settled %s",
                 waiting ? "without the copies of every peer (time)"
                         : "with every live peer's copy");
    }
}

static void rehome_tick(struct master *m, uint64_t now);

/* publish - a leave to the channel's events queue, from the master's
 * slot (worker/presence_events.h). */
static void
publish(void *arg, const struct shm_pres_event *ev)
{
    struct master *m = arg;

    worker_presence_publish(&m->seg, SHM_STATS_MASTER, ev);
}

/* Slots whose connections are still to drop (a bit each). */
static uint64_t gone;

/* drop_gone - drop what the slots in gone held; those the lock kept back
 * stay for the next tick. */
static void
drop_gone(struct master *m, uint64_t now)
{
    char key[SHM_PRES_NODE_ID];

    for (int slot = 0; slot < 64 && gone != 0; slot++) {
        if (!(gone & (1ull << slot)))
            continue;
        snprintf(key, sizeof(key), "%s/%d", m->ws.node_id, slot);
        if (shm_presence_drop_node(&m->seg, key, m->cfg.presence_grace_ms,
                                   now) >= 0)
            gone &= ~(1ull << slot);
    }
}

/* master_presence_worker_gone - see presence.h. */
void
master_presence_worker_gone(struct master *m, int slot)
{
    if (slot >= 0 && slot < 64)
        gone |= 1ull << slot;
    drop_gone(m, shm_now_ms());
}

/* The members' states at the last tick, by id: a member that turns dead
 * or leaving has its streams' connections dropped (their graces start;
 * clients that reconnect elsewhere within it are no event). */
static struct {
    char id[SHM_BOARD_ID_MAX];
    uint8_t state;
    uint8_t dropped;
} seen[SHM_BOARD_MEMBERS];

/* drop_gone_nodes - the connections of members that are no longer live. */
static void
drop_gone_nodes(struct master *m, uint64_t now)
{
    struct shm_board_view v;
    char key[SHM_BOARD_ID_MAX + 2];

    shm_board_read(m->seg.board, &v);
    for (uint32_t i = 0; i < v.nmembers && i < SHM_BOARD_MEMBERS; i++) {
        const struct shm_member *x = &v.members[i];
        int out = !x->self && (x->state == SHM_MEMBER_DEAD ||
                               x->state == SHM_MEMBER_LEAVING);
        if (strcmp(seen[i].id, x->id) != 0) {
            snprintf(seen[i].id, sizeof(seen[i].id), "%s", x->id);
            seen[i].dropped = 0;
        }
        if (!out)
            seen[i].dropped = 0;
        else if (!seen[i].dropped) {
            snprintf(key, sizeof(key), "%s/", x->id);
            seen[i].dropped =
                shm_presence_drop_node(&m->seg, key, m->cfg.presence_grace_ms,
                                       now) >= 0;
        }
        seen[i].state = x->state;
    }
}

/* master_presence_tick - see presence.h. */
void
master_presence_tick(struct master *m, uint64_t now)
{
    int rc;

    drop_gone(m, now);
    drop_gone_nodes(m, now);
    settle_tick(m, now);
    rehome_tick(m, now);
    rc = shm_presence_expire(&m->seg, now, EXPIRE_MAX, publish, m);

    if (rc < 0 && rc != -ETIMEDOUT)
        log_error(-rc, "presence: the members due could not leave");
}

/* A drain's record for one peer. */
struct pres_ship {
    struct shm_pm_rec rec;
    int member;        /* the peer's raft index */
    int state;         /* 0: none, 1: out, 2: waits to go again, 3: done */
    uint64_t retry_at; /* state 2 */
    char why[160];     /* the last failure */
};

static struct {
    int started, done;
    uint64_t deadline;
    struct master *m;
    struct pres_ship ship[RAFT_MAX_NODES];
} hand;

static void ship_post(struct master *m, struct pres_ship *s);

/* shipped - a peer's answer to a record. */
static void
shipped(void *arg, struct http_client_resp *r)
{
    struct pres_ship *s = arg;
    struct master *m = hand.m;

    if (r == NULL || s->state != 1) /* freed at stop */
        return;
    if (r->err == 0 && r->status == 200) {
        s->state = 3;
        log_info(0,
                 "handed presence over to node %s: %u channels, %llu "
                 "members",
                 m->members.id[s->member], s->rec.nchan,
                 (unsigned long long)s->rec.members);
        return;
    }
    if (r->err != 0)
        snprintf(s->why, sizeof(s->why), "%s", r->error);
    else
        snprintf(s->why, sizeof(s->why), "status %u: %.100s", r->status,
                 r->body.data ? r->body.data : "");
    s->state = 2;
    s->retry_at = shm_now_ms() + PRES_RETRY_MS;
    log_debug(0, "presence hand-over to node %s: %s; sent again",
              m->members.id[s->member], s->why);
}

static void
ship_post(struct master *m, struct pres_ship *s)
{
    uint64_t now = shm_now_ms();

    s->state = 1;
    master_cluster_client_post(
        m, m->members.addr[s->member], CLUSTER_PATH_ADOPT "?presence=1",
        s->rec.buf, s->rec.len, hand.deadline > now ? hand.deadline - now : 1,
        shipped, s);
}

/* owners_now - the members that own as the membership places them: the
 * board's live members, those this node's workers suspect counted in.  A
 * channel is never served in another's stead (worker/forward.h,
 * worker_route_member): what is this node's and where a copy goes follow
 * the membership alone, not a suspicion that comes and goes. */
static void
owners_now(struct master *m, struct shm_owners *o)
{
    struct shm_board_view v;

    shm_board_read(m->seg.board, &v);
    shm_owners_from_view(o, &v);
}

/* next_owners - the members that own once this node is out: the board's,
 * this node's state read as leaving. */
static void
next_owners(struct master *m, struct shm_owners *o)
{
    struct shm_board_view v;

    shm_board_read(m->seg.board, &v);
    for (uint32_t k = 0; k < v.nmembers && k < SHM_BOARD_MEMBERS; k++)
        if (v.members[k].self)
            v.members[k].state = SHM_MEMBER_LEAVING;
    shm_owners_from_view(o, &v);
}

/* take_all - each channel this node owns into its next owner's record:
 * the channels taken.  This node's own connections are left out (its
 * streams end with it: their graces start). */
static uint32_t
take_all(struct master *m, uint64_t now)
{
    struct shm_owners here, next;
    struct shm_pres_names names;
    char drop[SHM_PRES_NODE_ID];
    uint32_t taken = 0;
    int rc;

    owners_now(m, &here);
    next_owners(m, &next);
    if (next.n == 0 || here.self < 0)
        return 0; /* nobody to take them, or none is this node's */
    if ((rc = shm_presence_channels(&m->seg, &names)) != 0) {
        log_error(-rc, "presence: cannot list the channels to hand over");
        return 0;
    }
    snprintf(drop, sizeof(drop), "%.64s/", m->ws.node_id);
    for (uint32_t i = 0; i < names.n; i++) {
        int o, member;
        if (!shm_owner_here(&here, names.name[i], WORKER_PRES_PART) ||
            (o = shm_owner_pick(&next, names.name[i], WORKER_PRES_PART)) < 0 ||
            (member = master_membership_peer(m, next.m[o].id)) < 0)
            continue; /* another's (an old copy), or nobody's */
        rc = shm_presence_take(&m->seg, names.name[i], drop,
                               m->cfg.presence_grace_ms, now,
                               &hand.ship[member].rec);
        if (rc < 0)
            log_error(-rc,
                      "presence: cannot take a channel for its hand-over; "
                      "node %s rebuilds it from the streams",
                      next.m[o].id);
        else if (rc > 0)
            taken++;
        hand.ship[member].member = member;
    }
    shm_presence_names_free(&names);
    return taken;
}

/* master_presence_drain - see presence.h. */
int
master_presence_drain(struct master *m, uint64_t now)
{
    int out = 0;

    hand.m = m;
    if (hand.done)
        return 0;
    if (!hand.started) {
        hand.started = 1;
        if (m->members.n < 2) {
            hand.done = 1;
            return 0; /* a node alone: its channels end with it */
        }
        shm_presence_freeze(&m->seg, 1);
        hand.deadline = now + PRES_DRAIN_MS;
        take_all(m, now);
        for (int i = 0; i < RAFT_MAX_NODES; i++)
            if (hand.ship[i].rec.len > 0)
                ship_post(m, &hand.ship[i]);
    }
    for (int i = 0; i < RAFT_MAX_NODES; i++) {
        struct pres_ship *s = &hand.ship[i];
        if (s->state == 2 && s->retry_at <= now && now < hand.deadline)
            ship_post(m, s);
        out += s->state == 1 || s->state == 2;
    }
    if (out > 0 && now < hand.deadline)
        return 1;
    for (int i = 0; i < RAFT_MAX_NODES; i++) {
        struct pres_ship *s = &hand.ship[i];
        if (s->state == 1 || s->state == 2) {
            master_cluster_client_cancel(s);
            log_warn(0,
                     "presence hand-over to node %s failed (%s): it rebuilds "
                     "%u channels from the streams' announcements, their "
                     "call members with their next enter",
                     m->members.id[s->member], s->why[0] ? s->why : "no answer",
                     s->rec.nchan);
        }
        shm_pm_rec_free(&s->rec);
        s->state = 0;
    }
    hand.done = 1;
    return 0;
}

/* A join's hand-over (master_presence_rehome): one record a peer, out
 * (state 1) until answered; a scan builds records for peers with none
 * out.  A record with channels that was not taken is sent again after a
 * backoff (retry_at, backoff: PRES_RETRY_MS doubling to REHOME_BACK_MS)
 * for as long as that peer owns channels held here. */
static struct {
    struct master *m;
    struct pres_ship ship[RAFT_MAX_NODES];
    uint64_t backoff[RAFT_MAX_NODES];
    uint32_t held; /* channels the last scan found another's: copies */
    uint64_t sig;  /* the owners (shm_owners.sig) the last scan saw */
    uint64_t drained_at[RAFT_MAX_NODES]; /* a peer's drain's set came */
    uint8_t silent[RAFT_MAX_NODES];      /* unheard for SILENT_MS */
} away;

/* A peer unheard this long (two beats) is stopped, hung or cut off: a
 * record not taken waits no longer for its backoff once it is heard
 * again.  A peer back from a stall (master/view.c) takes the record while
 * its workers still refuse what needs the members' view, so the streams'
 * announcements held meanwhile find the copy's members there. */
#define SILENT_MS 1000

/* A peer whose drain's set came here says "leaving" once this node
 * answered (master_presence_drain): a scan meanwhile would find its
 * channels another's, and send them back to a node that refuses them.
 * Its channels wait this long before they count as copies. */
#define DRAIN_HOLD_MS 500

#define REHOME_MS      5000 /* one record, answer included */
#define REHOME_BACK_MS 5000 /* the longest wait between two tries */

/* owned_here - keep: channel is this node's (again) by now. */
static int
owned_here(void *arg, struct shm_name channel)
{
    struct master *m = arg;
    struct shm_owners o;

    owners_now(m, &o);
    return o.self >= 0 && shm_owner_here(&o, channel, WORKER_PRES_PART);
}

/* try_later - s's channels were not taken: sent again after the backoff
 * (the first wait PRES_RETRY_MS, each next one twice the last, at most
 * REHOME_BACK_MS), until taken or no longer another's (rehome_scan). */
static uint64_t
try_later(struct pres_ship *s, uint64_t now)
{
    uint64_t *b = &away.backoff[s->member];

    *b = *b == 0 ? PRES_RETRY_MS
                 : (*b * 2 > REHOME_BACK_MS ? REHOME_BACK_MS : *b * 2);
    s->retry_at = now + *b;
    return *b;
}

/* unmark - keep (drop nothing) of a record a peer answered "draining":
 * that peer hands its own set to its next owner (shm_presence_import,
 * which replaces what is here), so the record's channels are no copies to
 * send it, nor to distrust once they are this node's: a drain's set that
 * came here just before the peer said "leaving" (a scan between the two
 * sent it back) is the newest there is. */
static int
unmark(void *arg, struct shm_name channel)
{
    struct master *m = arg;

    shm_presence_mark_copy(&m->seg, channel, 0);
    return 1;
}

/* rehomed - a peer's answer to a join's record: taken, the channels go
 * from here; else they are sent again after a backoff. */
static void
rehomed(void *arg, struct http_client_resp *r)
{
    struct pres_ship *s = arg;
    struct master *m = away.m;
    uint64_t now = shm_now_ms();
    int rc;

    if (r == NULL || s->state != 1) /* freed at stop */
        return;
    if (s->rec.nchan == 0) {
        /* nothing of the peer's was here: said so, for its settle (a
         * failure is not sent again: the settle ends by time) */
    } else if (r->err == 0 &&
               (r->status == 200 || (r->status >= 400 && r->status < 500))) {
        /* taken; or refused for good (a record of another build): its
         * owner rebuilds those channels from the streams' announcements,
         * as after a crash, and a copy kept here would hold this node's
         * workers' counts back for ever (worker/presence_stream.c) */
        rc = shm_presence_drop_moved(&m->seg, s->rec.buf, s->rec.len,
                                     owned_here, m);
        if (r->status == 200)
            log_info(rc < 0 ? -rc : 0,
                     "moved presence to its owner, node %s: %u channels, "
                     "%llu members%s",
                     m->members.id[s->member], s->rec.nchan,
                     (unsigned long long)s->rec.members,
                     rc < 0 ? "; the copy here is sent again" : "");
        else
            log_warn(0,
                     "presence: node %s refused %u channels it owns (status "
                     "%u: %.100s); dropped here, it rebuilds them from the "
                     "streams' announcements",
                     m->members.id[s->member], s->rec.nchan, r->status,
                     r->body.data ? r->body.data : "");
        away.backoff[s->member] = 0;
        s->retry_at = rc < 0 ? now + PRES_RETRY_MS : 0;
    } else if (r->err == 0 && r->status == 503 && r->body.data != NULL &&
               strstr(r->body.data, "draining") != NULL) {
        shm_presence_drop_moved(&m->seg, s->rec.buf, s->rec.len, unmark, m);
        away.backoff[s->member] = 0;
        s->retry_at = 0;
    } else {
        uint64_t wait = try_later(s, now);
        (wait < REHOME_BACK_MS ? log_info : log_debug)(
            0,
            "presence: node %s did not take %u channels it owns (%s); sent "
            "again in %llu ms",
            m->members.id[s->member], s->rec.nchan,
            r->err != 0 ? r->error : "refused", (unsigned long long)wait);
    }
    shm_pm_rec_free(&s->rec);
    s->state = 0;
}

/*
 * rehome_scan - each channel this table holds: another member's (HRW over
 * the live members) is marked a copy (shm_presence_mark_copy) and goes
 * into its owner's record unless one is out to it, or (retry) its backoff
 * runs; this node's again, a copy is distrusted (shm_presence_distrust:
 * its connections are older than the streams' next announcements).  With
 * empties, every live peer with no record gets an empty one (its settle
 * awaits one from each).  Records are posted at once, never waited for.
 */
static void
rehome_scan(struct master *m, uint64_t now, int empties)
{
    struct shm_owners here;
    struct shm_pres_names names;
    char drop[SHM_PRES_NODE_ID];
    int found[RAFT_MAX_NODES] = {0};
    int rc;

    away.m = m;
    if (hand.started || m->state != MASTER_RUNNING)
        return; /* a drain hands over what it owns itself */
    owners_now(m, &here);
    if (here.self < 0)
        return; /* starting or leaving: nothing to compare */
    away.sig = here.sig;
    if ((rc = shm_presence_channels(&m->seg, &names)) != 0) {
        log_error(-rc, "presence: cannot list the channels to move");
        for (int i = 0; i < RAFT_MAX_NODES; i++)
            if (away.ship[i].state != 1 && away.backoff[i] != 0)
                away.ship[i].retry_at = now + PRES_RETRY_MS;
        return;
    }
    away.held = 0;
    /* this node's own connections stay out, as a drain's do: its workers
     * write their counts to the owner themselves (worker/presence_stream.c),
     * and a stream that ends meanwhile is said there, not in this copy */
    snprintf(drop, sizeof(drop), "%.64s/", m->ws.node_id);
    for (uint32_t i = 0; i < names.n; i++) {
        int o, member;
        if (shm_owner_here(&here, names.name[i], WORKER_PRES_PART)) {
            if (shm_presence_distrust(&m->seg, names.name[i], now) == 1)
                log_info(0, "presence: a channel is this node's again before "
                            "its copy moved; its connections are what the "
                            "streams say from now on");
            continue;
        }
        if ((o = shm_owner_pick(&here, names.name[i], WORKER_PRES_PART)) < 0 ||
            (member = master_membership_peer(m, here.m[o].id)) < 0)
            continue; /* nobody's */
        found[member] = 1;
        away.held++;
        if (now < away.drained_at[member] + DRAIN_HOLD_MS) {
            if (away.ship[member].retry_at == 0)
                away.ship[member].retry_at =
                    away.drained_at[member] + DRAIN_HOLD_MS;
            continue; /* its drain's set: it says "leaving" next */
        }
        shm_presence_mark_copy(
            &m->seg, names.name[i],
            m->cfg.presence_grace_ms ? m->cfg.presence_grace_ms : 1);
        if (away.ship[member].state == 1 ||
            (!empties && away.ship[member].retry_at > now))
            continue; /* a record to it is out, or waits its turn */
        rc = shm_presence_take(&m->seg, names.name[i], drop,
                               m->cfg.presence_grace_ms, now,
                               &away.ship[member].rec);
        if (rc < 0) {
            log_error(-rc, "presence: cannot take a channel to move to its "
                           "owner; tried again");
            away.ship[member].retry_at = now + PRES_RETRY_MS;
        }
        away.ship[member].member = member;
    }
    shm_presence_names_free(&names);
    for (int i = 0; i < RAFT_MAX_NODES; i++)
        if (!found[i] && away.ship[i].state != 1) {
            away.ship[i].retry_at = 0; /* nothing of its here: done */
            away.backoff[i] = 0;
        }
    /* every live peer gets one, empty or not: a node that starts settles
     * until it heard from each (shm_presence_settle) */
    for (int o = 0; empties && o < here.n; o++) {
        int member =
            o == here.self ? -1 : master_membership_peer(m, here.m[o].id);
        if (member >= 0 && away.ship[member].state != 1 &&
            shm_pm_rec_start(&away.ship[member].rec) == 0)
            away.ship[member].member = member;
    }
    for (int i = 0; i < RAFT_MAX_NODES; i++) {
        struct pres_ship *s = &away.ship[i];
        if (s->state == 1 || s->rec.len == 0)
            continue;
        s->state = 1;
        master_cluster_client_post(m, m->members.addr[s->member],
                                   CLUSTER_PATH_ADOPT "?presence=1&merge=1",
                                   s->rec.buf, s->rec.len, REHOME_MS, rehomed,
                                   s);
    }
}

/* master_presence_rehome - see presence.h. */
void
master_presence_rehome(struct master *m, uint64_t now)
{
    if (m->members.n >= 2)
        rehome_scan(m, now, 1);
}

/*
 * rehome_tick - while copies are held here for other owners: a scan when
 * a record's backoff ran out (or its peer is heard again after a
 * silence: SILENT_MS), or when the owners changed (one that comes
 * back to this node with no change scan: a node left alone has none,
 * handover.c).  A tick with no copy held costs nothing.
 */
static void
rehome_tick(struct master *m, uint64_t now)
{
    struct shm_owners o;
    int due = 0;

    if (away.held == 0 || m->members.n < 2)
        return;
    for (int i = 0; i < m->members.n && i < RAFT_MAX_NODES; i++) {
        struct pres_ship *s = &away.ship[i];
        uint64_t heard = m->members.heard[i];
        if (i == m->members.self)
            continue;
        if (heard != 0 && now > heard + SILENT_MS) {
            away.silent[i] = 1;
        } else if (away.silent[i] && s->state != 1) {
            away.silent[i] = 0; /* heard again */
            if (s->retry_at > now)
                s->retry_at = now;
        }
    }
    for (int i = 0; i < RAFT_MAX_NODES && !due; i++)
        due = away.ship[i].state != 1 && away.ship[i].retry_at != 0 &&
              away.ship[i].retry_at <= now;
    if (!due) {
        owners_now(m, &o);
        due = o.self >= 0 && o.sig != away.sig;
    }
    if (due)
        rehome_scan(m, now, 0);
}

/* master_presence_in - see presence.h. */
void
master_presence_in(struct master *m, struct http_request *req)
{
    size_t len;
    const char *body = http_request_body(req, &len);
    const char *from = http_request_header(req, CLUSTER_NODE_HEADER);
    struct http_buf b = {0};
    int merge = http_query_get(http_request_args(req), "merge", NULL) != NULL;
    char self[SHM_PRES_NODE_ID];
    int rc;

    if (m->state != MASTER_RUNNING || !m->ready) {
        http_reply_error(req, 503, m->ready ? "draining" : "starting",
                         "this node is %s; hand the presence to another",
                         m->ready ? "draining" : "starting");
        return;
    }
    if (merge) {
        snprintf(self, sizeof(self), "%.64s/", m->ws.node_id);
        rc = shm_presence_adopt_merge(&m->seg, body, len, self,
                                      m->cfg.presence_grace_ms, shm_now_ms());
    } else {
        rc = shm_presence_adopt(&m->seg, body, len, m->cfg.presence_grace_ms,
                                shm_now_ms());
    }
    if (rc < 0) {
        (rc == -ETIMEDOUT ? log_debug : log_warn)(
            -rc, "cannot adopt the presence channels of node %s",
            from ? from : "a peer");
        if (rc == -EBADMSG)
            http_reply_error(req, 400, "ephemeral_bad_request",
                             "body is not a presence hand-over record of "
                             "this version");
        else if (rc == -ETIMEDOUT)
            http_reply_error(req, 503, "ephemeral_unavailable",
                             "this node's presence table is busy; retry");
        else
            http_reply_errno(req, rc, "presence adopt");
        return;
    }
    if (merge && from != NULL && master_membership_peer(m, from) >= 0)
        settle.heard |= 1ull << master_membership_peer(m, from);
    if (!merge && from != NULL && master_membership_peer(m, from) >= 0)
        away.drained_at[master_membership_peer(m, from)] = shm_now_ms();
    if (!merge || rc > 0)
        log_info(0, "%s the presence channels of node %s (%d members)",
                 merge ? "merged" : "adopted", from ? from : "a peer", rc);
    http_buf_printf(&b, "{\"adopted\":%d}", rc);
    http_reply(req, 200, &b);
}

/* master_presence_stop - see presence.h. */
void
master_presence_stop(void)
{
    for (int i = 0; i < RAFT_MAX_NODES; i++) {
        shm_pm_rec_free(&hand.ship[i].rec);
        shm_pm_rec_free(&away.ship[i].rec);
        away.ship[i].state = 0;
        away.ship[i].retry_at = 0;
    }
    away.held = 0;
}
