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
 */
#include "master/presence.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "master/master.h"
#include "shm/board.h"
#include "shm/log.h"
#include "shm/presence.h"
#include "shm/stats.h"
#include "worker/presence_events.h"

#define RECORDS_MAX  (4u << 20)
#define CHANNELS_MAX (64u << 10)
#define EXPIRE_MAX   1024 /* members a tick lets leave, at most */

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
    rc = shm_presence_expire(&m->seg, now, EXPIRE_MAX, publish, m);

    if (rc < 0 && rc != -ETIMEDOUT)
        log_error(-rc, "presence: the members due could not leave");
}
