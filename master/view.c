/*
 * view.c - when this node may serve: ready after a start, and fresh while
 * the master runs (view.h).
 *
 * Ready.  A restarted node's catalog holds only the raft snapshot until a
 * leader tells it the commit index; saying ready before that made peers
 * place partitions on it while its declared queues were missing or read
 * as implicit (a push met the default bounds).  So with peers it waits
 * for the core's caught_up (consensus/raft.h) and a beat from every live
 * peer since the start (the groups they know: groups.h), READY_CAP_MS at
 * most; or for an election timeout with no leader heard: a live leader
 * appends every 100 ms, so none heard by then means none is reachable,
 * and a node restarted alone must still serve.
 *
 * Fresh.  The master alone keeps the members' view; the workers serve from
 * the copy it publishes.  A stopped master (SIGSTOP, a stall) leaves that
 * copy as it was while its peers count the node dead and serve its
 * partitions: two owners.  The master beats the board every tick;
 * workers refuse what needs the view once the beat is older than
 * stale_ms().  After a stall the beat is held until the peers are heard
 * again: until then the master's own view counts them dead (unheard for
 * the length of the stall) and would make this node own everything.
 */
#include "master/view.h"

#include "master/join.h"
#include "master/master.h"
#include "master/membership.h"
#include "master/notify.h"
#include "shm/board.h"
#include "shm/log.h"

/* Below three ticks the beat itself (one a tick) would read as stale now
 * and then: with member_ttl_ms under 600 the check is off (said at start). */
#define STALE_MIN_MS (3 * MASTER_TICK_MS)

/* A leader heard but the log not caught up (a snapshot lost on its way is
 * sent again only an election timeout later): ready by then all the same. */
#define READY_CAP_MS (5 * MASTER_RAFT_ELECTION_MS)

/*
 * stale_ms - how old the view may get before the workers stop serving; 0
 * for a node alone (nobody to disagree with).
 *
 * Peers count this node dead member_ttl_ms (ttl) after they last heard
 * it, and then serve its partitions.  A master stopped at time T beat the
 * board at T at the latest, and heartbeated its peers at T - H at
 * the earliest, H = min(ttl / 4, 500 ms) (master/membership.c; raft appends
 * only come more often).  So the peers take over at T - H + ttl >=
 * T + 3/4 ttl at the earliest, and the workers must stop before that:
 * ttl / 2 leaves a quarter of ttl (1 s by default) for the peers' own
 * tick and publishing lag, and still lets the master stall for 2 s (20
 * ticks: a slow fsync, a big hand-over) before its workers refuse
 * anything.
 */
static uint64_t
stale_ms(const struct master *m)
{
    uint64_t bound = m->cfg.member_ttl_ms / 2;

    return m->members.n > 1 && bound >= STALE_MIN_MS ? bound : 0;
}

/* become_ready - say so on /health and to the peers at once: both read
 * m->ready, and the peers place partitions here only once they hear it. */
static void
become_ready(struct master *m, uint64_t now)
{
    /* The join's window opens before anyone routes a push here. */
    master_join_start(m, now);
    m->ready = 1;
    master_membership_publish(m);
    master_membership_heartbeat(m, now, 1);
    master_notify_ready(m); /* systemd: after /health says so */
}

void
master_view_start(struct master *m, uint64_t now)
{
    if (m->members.n < 2) {
        become_ready(m, now);
        return;
    }
    if (stale_ms(m) == 0)
        log_warn(0,
                 "member_ttl_ms %u is below %d: the workers cannot tell a "
                 "stopped master from a slow tick, and keep serving if it "
                 "stops",
                 (unsigned)m->cfg.member_ttl_ms, 2 * STALE_MIN_MS);
    m->ready_since = now;
    master_view_check_ready(m, now);
}

void
master_view_check_ready(struct master *m, uint64_t now)
{
    const struct raft_status *st = &m->raft.st;

    if (m->ready || m->ready_since == 0 || m->state != MASTER_RUNNING)
        return;
    if (st->caught_up) {
        /* and the groups every live peer knows are known here (groups.h),
         * before a push here is read by one group and freed for all */
        if (!master_membership_groups_heard(m, m->ready_since, now) &&
            now < m->ready_since + READY_CAP_MS)
            return;
        log_info(0,
                 "ready: the raft log is applied up to %llu, the "
                 "leader's commit index",
                 (unsigned long long)st->applied);
    } else if (st->leader == RAFT_NO_NODE &&
               now >= m->ready_since + MASTER_RAFT_ELECTION_MS) {
        log_warn(0,
                 "ready: no raft leader heard within %d ms; serving the "
                 "declared queues the log holds (applied up to %llu)",
                 MASTER_RAFT_ELECTION_MS, (unsigned long long)st->applied);
    } else if (now >= m->ready_since + READY_CAP_MS) {
        log_warn(0,
                 "ready: the raft log has not caught up with the leader's "
                 "within %d ms; serving the declared queues applied so far "
                 "(up to %llu)",
                 READY_CAP_MS, (unsigned long long)st->applied);
    } else {
        return;
    }
    become_ready(m, now);
}

/*
 * peers_back - after a stall: every peer that was live when the master
 * stopped has been heard since it resumed (a peer unheard for ttl after
 * the resume is dead in every view, this one's too), and a heartbeat
 * period has passed, so the peers have heard this node again and
 * published it before it claims its partitions back.
 */
static int
peers_back(const struct master *m, uint64_t now)
{
    const struct master_members *r = &m->members;
    uint64_t ttl = m->cfg.member_ttl_ms;

    if (now - m->resumed_at >= ttl)
        return 1;
    if (now - m->resumed_at < master_membership_beat_ms(m))
        return 0;
    for (int i = 0; i < r->n; i++) {
        int was_live = r->heard[i] != 0 && r->heard[i] + ttl > m->stalled_at;
        if (i != r->self && was_live && r->heard[i] < m->resumed_at)
            return 0;
    }
    return 1;
}

void
master_view_woke(struct master *m, uint64_t now)
{
    uint64_t gap = now - m->woke_at, bound = stale_ms(m);

    if (m->woke_at != 0 && bound != 0 && gap > bound &&
        m->state == MASTER_RUNNING) {
        log_warn(0,
                 "the master did not run for %llu ms: its view of the "
                 "cluster is stale; requests are refused until the peers "
                 "are heard again",
                 (unsigned long long)gap);
        m->stalled_at = m->woke_at;
        m->resumed_at = now;
    }
    m->woke_at = now;
}

int
master_view_serving(const struct master *m)
{
    return m->ready && m->resumed_at == 0;
}

void
master_view_beat(struct master *m, uint64_t now)
{
    if (m->resumed_at != 0) {
        if (!peers_back(m, now))
            return;
        log_info(0, "the peers are heard again after %llu ms; serving",
                 (unsigned long long)(now - m->resumed_at));
        m->resumed_at = m->stalled_at = 0;
    }
    shm_board_beat(m->seg.board, now, stale_ms(m));
}
