/*
 * join.c - the joining node's side of a join's order (join.h); the peers'
 * side is master_handover_joins (handover.h).
 *
 * Why order holds.  Take a partition p this node owns once live, that
 * peer P held before, and a push b stored here after this node became
 * p's owner.  The window opens before this node says it is live, to its
 * own workers (the board) or to a peer (a beat), so b finds it open or
 * already closed.  P ships p only once it sees this node live, and from
 * then on names, in every beat for a while, each partition it holds, has
 * on its way or waits to ship that this node owns in the view it ships
 * by, then "that is all" (J line first, H lines, the beat's end).
 *   - Open: under p's lock b holds p if no hold is on (ring.h), taking
 *     SHM_HOLD_SEQS numbers below its own; pops read nothing of p.  The
 *     close ends that hold only if no peer named p or p was adopted
 *     already, and it comes only after P said all, which names p unless
 *     P shipped it and it was adopted here before P's list was made.  So
 *     the hold lasts until p's adopt, which links what P held at the kept
 *     numbers before b (part_move.c: no group can have read b), or until
 *     MASTER_HOLD_MS after P named it (a shipment that failed and was
 *     adopted back there, shipped again later), or the window's end when
 *     a peer never said.
 *   - Closed: every peer that may own had said (a live one, or one not
 *     heard yet since this process started, all_said), so P named p
 *     (held here from then, and b is numbered after the kept block) or p
 *     was adopted here before: either way what P held goes before b.
 * A stream reads in number order below the horizon, which a hold keeps
 * below its numbers (horizon.c): what P held, then b.  A push P took
 * after it made its list (one its workers let in as its view changed) is
 * shipped by a later scan and comes after: it raced the change.  Holds
 * move nothing and drop nothing; they only pick numbers and delay reads,
 * never past MASTER_HOLD_MS from a naming or JOIN_WINDOW_MS from the
 * start, and one nobody ships ends as soon as every peer has said.
 *
 * Names seen in the window are kept here (named, adopted) until it closes.
 */
#include "master/join.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "master/groups.h"
#include "master/master.h"
#include "master/membership.h"
#include "shm/log.h"
#include "shm/part_move.h"
#include "shm/queue_admin.h"
#include "shm/stats.h"

#define BUCKETS 1024

/* A partition named or adopted in the window: queue TAB partition. */
struct jname {
    struct jname *next;
    int named, adopted;
    size_t len;
    char key[];
};

static struct {
    int open;
    uint64_t start, until;
    uint64_t said; /* bit i: member i said what it ships */
    struct jname *b[BUCKETS];
} jw;

/* find - the entry of (queue, part), made when make is set; NULL when
 * there is none (or no memory: then the partition is treated as never
 * named, and its hold ends at the close or its own end). */
static struct jname *
find(struct shm_name queue, struct shm_name part, int make)
{
    size_t len = queue.len + 1 + part.len;
    uint64_t h = 1469598103934665603ull;
    struct jname *e;

    for (size_t i = 0; i < queue.len; i++)
        h = (h ^ (unsigned char)queue.ptr[i]) * 1099511628211ull;
    h = (h ^ '\t') * 1099511628211ull;
    for (size_t i = 0; i < part.len; i++)
        h = (h ^ (unsigned char)part.ptr[i]) * 1099511628211ull;
    for (e = jw.b[h % BUCKETS]; e != NULL; e = e->next)
        if (e->len == len && memcmp(e->key, queue.ptr, queue.len) == 0 &&
            e->key[queue.len] == '\t' &&
            memcmp(e->key + queue.len + 1, part.ptr, part.len) == 0)
            return e;
    if (!make || (e = calloc(1, sizeof(*e) + len)) == NULL)
        return NULL;
    e->len = len;
    memcpy(e->key, queue.ptr, queue.len);
    e->key[queue.len] = '\t';
    memcpy(e->key + queue.len + 1, part.ptr, part.len);
    e->next = jw.b[h % BUCKETS];
    jw.b[h % BUCKETS] = e;
    return e;
}

static void
forget_all(void)
{
    for (int i = 0; i < BUCKETS; i++)
        while (jw.b[i] != NULL) {
            struct jname *e = jw.b[i];
            jw.b[i] = e->next;
            free(e);
        }
}

void
master_join_start(struct master *m, uint64_t now)
{
    if (m->members.n < 2 || m->state != MASTER_RUNNING)
        return;
    forget_all();
    jw.open = 1;
    jw.start = now;
    jw.until = now + JOIN_WINDOW_MS;
    jw.said = 0;
    shm_part_join_window(&m->seg, jw.until);
}

int
master_join_from(const struct master *m, uint64_t inc)
{
    return jw.open && inc != 0 && inc == m->incarnation;
}

void
master_join_named(struct master *m, struct shm_name queue, struct shm_name part,
                  uint64_t now)
{
    struct jname *e;
    int rc;

    if (!jw.open || (e = find(queue, part, 1)) == NULL || e->adopted ||
        e->named)
        return;
    rc = shm_part_hold(&m->seg, SHM_STATS_MASTER, queue, part, now,
                       MASTER_HOLD_MS);
    /* A lock held past the bound (shm/lock.h): the peer's next beat names
     * it again while the window is open. */
    if (rc == -ETIMEDOUT)
        return;
    e->named = 1;
    if (rc != 0)
        log_warn(-rc,
                 "cannot hold partition '%.*s' of queue '%.*s' for its "
                 "hand-over: pushes before it may be read first",
                 (int)part.len, part.ptr, (int)queue.len, queue.ptr);
}

void
master_join_said(struct master *m, int peer)
{
    if (jw.open && peer >= 0 && peer < m->members.n && peer < 64) {
        jw.said |= 1ull << peer;
        master_join_tick(m, shm_now_ms()); /* the last word closes it */
    }
}

void
master_join_adopted(struct shm_name queue, struct shm_name part)
{
    struct jname *e;

    if (jw.open && (e = find(queue, part, 1)) != NULL)
        e->adopted = 1;
}

/* release_one - at the close: end the hold of a partition nobody named,
 * or whose adopt came (a push after it held it again); a named one still
 * on its way keeps its hold. */
static void
release_one(void *arg, struct shm_name queue, struct shm_name part)
{
    struct master *m = arg;
    struct jname *e = find(queue, part, 0);

    if (e != NULL && e->named && !e->adopted)
        return;
    /* A lock held past the bound: the hold ends at its own end. */
    (void)shm_part_unhold(&m->seg, SHM_STATS_MASTER, queue, part, jw.until,
                          shm_now_ms());
}

/*
 * all_said - whether every peer that may ship here said what it ships: one
 * live now, and one not heard at all since this process started, for two
 * beat periods from the window's start (a node restarted at once becomes
 * ready before every peer's beat reached it, and such a peer owned its
 * partitions meanwhile).  Starting, leaving and dead peers own nothing.
 */
static int
all_said(const struct master *m, uint64_t now)
{
    uint64_t unheard_until = jw.start + 2 * master_membership_beat_ms(m);

    for (int i = 0; i < m->members.n; i++) {
        if (i == m->members.self || (i < 64 && (jw.said & (1ull << i))))
            continue;
        if (master_membership_state(m, i, now) == SHM_MEMBER_LIVE ||
            (m->members.heard[i] == 0 && now < unheard_until))
            return 0;
    }
    return 1;
}

void
master_join_tick(struct master *m, uint64_t now)
{
    if (!jw.open || (now < jw.until && !all_said(m, now)))
        return;
    /* Closed first: a push that takes a partition's lock after this sees
     * it closed, and one that held it before has its hold found below
     * (ring.c, shm_ring_join_hold_locked). */
    jw.open = 0;
    shm_part_join_window(&m->seg, 0);
    shm_part_each(&m->seg, release_one, m);
    log_debug(0, "join: %s; holds of partitions nobody ships ended",
              now < jw.until ? "every live peer said what it ships"
                             : "the window ran out");
    forget_all();
}

void
master_join_stop(void)
{
    jw.open = 0;
    forget_all();
}
