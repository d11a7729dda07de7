/*
 * groups.c - the cluster's groups and the hand-overs announced, on the
 * heartbeats (groups.h).
 *
 * Each beat walks a stretch of the queue table (shm_groups_each) and
 * lists every group it finds with its idle time; a peer makes each known
 * to its queue of that name (shm_group_learn), keeping the later activity,
 * so a group active anywhere stays known everywhere and one idle
 * everywhere for implicit_idle_s is forgotten by each node's own upkeep.
 * A queue this node does not hold is made for a group only when the same
 * peer has named it in two beats: one beat built just before a DELETE
 * reached the peer must not bring the deleted queue back here.  A queue
 * whose lock is held past the master's bound (shm/lock.h) is left out of
 * a walk, and a group or hold it keeps from being learned waits for the
 * next beat, which names it again: a beat never waits for a worker.
 */
#include "master/groups.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http/buf.h"
#include "http/names.h"
#include "master/join.h"
#include "master/master.h"
#include "shm/dir.h"
#include "shm/group_share.h"
#include "shm/log.h"
#include "shm/part_move.h"
#include "shm/stats.h"

/* Queue records one step of the walk visits; a beat takes four at most. */
#define WALK_RECORDS (1u << 14)
#define BEAT_BYTES   (1u << 20) /* group lines one beat carries at most */
#define SEEN_SLOTS   (1u << 14) /* groups of queues not held here, by peer */

/* A group a peer named for a queue this node does not hold, and when. */
struct seen {
    uint64_t key; /* 0: free */
    uint64_t at;
};

static struct {
    uint32_t next; /* where the walk goes on */
    struct seen seen[SEEN_SLOTS];
} gr;

/* What a walk appends to. */
struct beat {
    struct http_buf *b;
    uint64_t now, idle_ms;
};

/* One group into the beat, unless it is as good as forgotten. */
static void
beat_line(void *arg, struct shm_name queue, struct shm_name group,
          enum shm_from from, uint64_t last_active)
{
    struct beat *bt = arg;
    uint64_t idle = bt->now > last_active ? bt->now - last_active : 0;

    if (idle >= bt->idle_ms || bt->b->len >= BEAT_BYTES)
        return;
    http_buf_printf(bt->b, "g %d %llu %.*s\t%.*s\n", (int)from,
                    (unsigned long long)idle, (int)queue.len, queue.ptr,
                    (int)group.len, group.ptr);
}

void
master_groups_beat(struct master *m, struct http_buf *b, uint64_t now)
{
    struct beat bt = {b, now, (uint64_t)m->cfg.implicit_idle_s * 1000};
    uint32_t visited = 0, from = gr.next;

    if (m->members.n < 2)
        return;
    /* Once round the table at most, and up to BEAT_BYTES of lines. */
    do {
        shm_groups_each(&m->seg, &gr.next, WALK_RECORDS, beat_line, &bt);
        visited += WALK_RECORDS;
    } while (gr.next != 0 && gr.next != from && b->len < BEAT_BYTES &&
             visited < 4 * WALK_RECORDS);
}

/* FNV-1a over the peer, the queue and the group: the key of a sighting. */
static uint64_t
seen_key(int peer, struct shm_name queue, struct shm_name group)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)peer;
    const struct shm_name part[2] = {queue, group};

    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < part[k].len; i++)
            h = (h ^ (unsigned char)part[k].ptr[i]) * 1099511628211ULL;
        h = (h ^ 0xff) * 1099511628211ULL;
    }
    return h | 1;
}

/* Has peer named this group of a queue not held here in an earlier beat
 * (at least half a beat ago, within the last 30)?  Notes this sighting. */
static int
seen_before(uint64_t beat, int peer, struct shm_name queue,
            struct shm_name group, uint64_t now)
{
    uint64_t key = seen_key(peer, queue, group);
    struct seen *s = &gr.seen[key % SEEN_SLOTS];

    if (s->key == key && s->at + beat / 2 <= now && now < s->at + beat * 30)
        return 1;
    if (s->key != key || now >= s->at + beat * 30) {
        s->key = key;
        s->at = now;
    }
    return 0;
}

/* A decimal field of a line, ending at a space before end: its value in
 * *out and a pointer past the space, or NULL.  Not strtoull: that skips
 * leading blanks, newlines among them, and reads past the line's end. */
static const char *
field_u64(const char *p, const char *end, uint64_t *out)
{
    const char *start = p;
    uint64_t v = 0;

    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return NULL;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (p == start || p == end || *p != ' ')
        return NULL;
    *out = v;
    return p + 1;
}

/* A "g" line's fields after "g ": learn the group. */
static void
learn(struct master *m, int peer, const char *p, const char *end, uint64_t now,
      uint64_t beat)
{
    uint64_t from, idle;
    const char *tab;

    if ((p = field_u64(p, end, &from)) == NULL || from > SHM_FROM_LAST ||
        (p = field_u64(p, end, &idle)) == NULL)
        return;
    if ((tab = memchr(p, '\t', (size_t)(end - p))) == NULL)
        return;
    struct shm_name queue = {p, (size_t)(tab - p)};
    struct shm_name group = {tab + 1, (size_t)(end - tab - 1)};
    if (!http_name_valid(queue.ptr, queue.len) ||
        (group.len != 0 && !http_name_valid(group.ptr, group.len)) ||
        idle >= (uint64_t)m->cfg.implicit_idle_s * 1000 || idle > now)
        return;
    /* A node still starting has seen no DELETE: it learns everything. */
    int rc = shm_group_learn(&m->seg, SHM_STATS_MASTER, queue, group,
                             (enum shm_from)from, now - idle, now,
                             seen_before(beat, peer, queue, group, now) ||
                                 !m->ready);
    if (rc != 0 && rc != -ENOENT)
        log_debug(-rc, "cannot learn group '%.*s' of queue '%.*s'",
                  (int)group.len, group.ptr, (int)queue.len, queue.ptr);
}

/* An "h" line's names after "h ": hold the partition for its hand-over. */
static void
hold(struct master *m, const char *p, const char *end, uint64_t now)
{
    const char *tab = memchr(p, '\t', (size_t)(end - p));

    if (tab == NULL)
        return;
    struct shm_name queue = {p, (size_t)(tab - p)};
    struct shm_name part = {tab + 1, (size_t)(end - tab - 1)};
    if (!http_name_valid(queue.ptr, queue.len) ||
        !http_name_valid(part.ptr, part.len))
        return;
    int rc = shm_part_hold(&m->seg, SHM_STATS_MASTER, queue, part, now,
                           MASTER_HOLD_MS);
    /* A lock held past the bound (shm/lock.h): the next beat holds it. */
    if (rc != 0 && rc != -ETIMEDOUT)
        log_warn(-rc,
                 "cannot hold partition '%.*s' of queue '%.*s' for its "
                 "hand-over: pushes before it may be read first",
                 (int)part.len, part.ptr, (int)queue.len, queue.ptr);
}

/* A "J" line's incarnation after "J ": whether the "H" lines after it
 * name what the peer ships to this node's join (join.h). */
static int
join_from(struct master *m, const char *p, const char *end)
{
    uint64_t inc = 0;

    for (; p < end && *p >= '0' && *p <= '9' && inc < UINT64_MAX / 10; p++)
        inc = inc * 10 + (uint64_t)(*p - '0');
    return p == end && master_join_from(m, inc);
}

/* An "H" line's names after "H ": a partition coming to this node's join. */
static void
join_named(struct master *m, const char *p, const char *end, uint64_t now)
{
    const char *tab = memchr(p, '\t', (size_t)(end - p));

    if (tab == NULL)
        return;
    struct shm_name queue = {p, (size_t)(tab - p)};
    struct shm_name part = {tab + 1, (size_t)(end - tab - 1)};
    if (http_name_valid(queue.ptr, queue.len) &&
        http_name_valid(part.ptr, part.len))
        master_join_named(m, queue, part, now);
}

void
master_groups_in(struct master *m, int peer, const char *lines, size_t len,
                 uint64_t now, uint64_t beat_ms)
{
    const char *p = lines, *end = lines + len;
    int join = 0;

    if (m->state != MASTER_RUNNING)
        return; /* leaving: what this node holds ends with it */
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        if (eol - p > 2 && p[0] == 'g' && p[1] == ' ')
            learn(m, peer, p + 2, eol, now, beat_ms);
        else if (eol - p > 2 && p[0] == 'h' && p[1] == ' ' && m->ready)
            hold(m, p + 2, eol, now);
        else if (eol - p > 2 && p[0] == 'J' && p[1] == ' ')
            join = join_from(m, p + 2, eol);
        else if (eol - p > 2 && p[0] == 'H' && p[1] == ' ' && join)
            join_named(m, p + 2, eol, now);
        p = eol + 1;
    }
    /* The list is whole only with the beat's end: the peer said all. */
    if (join)
        master_join_said(m, peer);
}
