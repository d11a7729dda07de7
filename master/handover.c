/*
 * handover.c - see handover.h.
 *
 * The segment calls here wait for locks within the master's bound
 * (shm/lock.h).  One that a held lock keeps back is done again: a
 * partition not taken is found by a scan RETRY_MS on, a shipment not
 * taken back waits here and is taken back RETRY_MS on, and an adopt
 * refused (503) is sent again by its sender, as any failed shipment is.
 */
#include "master/handover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/names.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "master/cluster_client.h"
#include "master/join.h"
#include "master/master.h"
#include "master/membership.h"
#include "master/presence.h"
#include "shm/catalog.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "shm/part_move.h"
#include "shm/presence.h"
#include "shm/queue_admin.h"
#include "shm/stats.h"

#define SHIP_MS       10000 /* one shipment, answer included */
#define DRAIN_SHIP_MS 15000 /* the whole drain's hand-over */
#define RETRY_MS      200  /* a drain's shipment the owner could not take yet */
#define RESCAN_MS     1000 /* after a change: pushes that raced it */
#define RESCAN2_MS    5000
/* A partition served in its owner's stead (worker_view_standin) is
 * shipped once no call was served so for this long: the sender's
 * suspicion outlives its last failure by SHM_SUSPECT_MS, and a probe of
 * the suspect takes a forward's connect time, so a shorter quiet would
 * ship the copy while the sender still routes around the owner (no loss,
 * but the next call starts another copy). */
#define STANDIN_QUIET_MS (SHM_SUSPECT_MS + 1000)
/* Shipments out at once; the partitions behind them wait in the segment,
 * so a scan over many (a presence queue with a partition per room) does
 * not open a connection and hold a record for each at the same time. */
#define SHIP_INFLIGHT 32

/* One partition on its way to its new owner. */
struct ship {
    struct ship *next;
    int member; /* the owner's raft index */
    int drain;
    uint32_t msgs;
    uint64_t retry_at; /* 0: posted, waiting for the answer */
    int back;          /* refused: to be taken back here at retry_at */
    char *queue, *part;
    size_t qlen, plen;
    char *path; /* /cluster/v1/adopt?queue=..&partition=.. */
    unsigned char *rec;
    size_t len;
    char why[160]; /* why it was refused, while it waits to be taken back */
};

/* A partition a scan found for another member, not taken yet.  Its owner
 * is chosen when it is sent: by then the one the scan saw may be hung,
 * dead or leaving. */
struct want {
    struct want *next;
    int drain;
    size_t qlen, plen;
    char names[]; /* the queue's, then the partition's */
};

static struct {
    struct master *m;
    struct ship *ships; /* out, or waiting to be posted again */
    unsigned nships;
    struct want *wants, **wants_tail; /* FIFO: waiting for a free slot */
    uint64_t members;    /* shm_owners.sig of the live members last seen */
    uint64_t standin;    /* shm_board_standin_at() last seen */
    uint64_t scan_at[4]; /* scans due (0: none); [3]: after a stand-in */
    int drain_started;
    uint64_t drain_deadline;
    uint64_t drain_rescan_at;        /* a drain's partition a held lock kept */
    uint32_t rings, delivered, lost; /* partitions, on a drain */
    uint64_t msgs_delivered, msgs_lost; /* their messages */
} ho;

/* owners_now - the members that own, as this node sees them now: the
 * ones its workers suspect left out (shm/board.h), so that what they
 * served in a suspect's stead is shipped to it once it is reached again
 * (the owners' signature changes, and a scan follows). */
static void
owners_now(struct master *m, struct shm_owners *o)
{
    shm_owners_init(o);
    shm_owners_refresh(o, m->seg.board);
}

/* owner_of - the raft index of the peer that owns (queue, part) among the
 * members o holds; -1 when this node or nobody does. */
static int
owner_of(const struct master *m, const struct shm_owners *o,
         struct shm_name queue, struct shm_name part)
{
    int i = shm_owner_pick(o, queue, part);

    return i < 0 || i == o->self ? -1 : master_membership_peer(m, o->m[i].id);
}

/* member_dead - whether peer i is dead in view v: unheard for
 * member_ttl_ms (crashed, hung, or cut off). */
static int
member_dead(const struct master *m, const struct shm_board_view *v, int i)
{
    for (uint32_t k = 0; k < v->nmembers && k < SHM_BOARD_MEMBERS; k++)
        if (strcmp(v->members[k].id, m->members.id[i]) == 0)
            return v->members[k].state == SHM_MEMBER_DEAD;
    return 0;
}

static void
ship_free(struct ship *s)
{
    free(s->queue);
    free(s->part);
    free(s->path);
    free(s->rec);
    free(s);
}

static void ship_post(struct master *m, struct ship *s);
static void pump(struct master *m);

/* unlink - take s off the list. */
static void
unlink_ship(struct ship *s)
{
    for (struct ship **p = &ho.ships; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            ho.nships--;
            return;
        }
}

/* rescan_soon - a partition a held lock kept from its shipment: a scan
 * RETRY_MS on finds it again (a drain's once its wants are out). */
static void
rescan_soon(uint64_t now)
{
    uint64_t at = now + RETRY_MS;

    if (ho.drain_started)
        ho.drain_rescan_at = at;
    else if (ho.scan_at[1] == 0 || ho.scan_at[1] > at)
        ho.scan_at[1] = at;
}

/* keep_here - a shipment that failed outside a drain (why): adopt it back,
 * to be shipped again by the next scan.  -ETIMEDOUT when a held lock kept
 * it out (nothing adopted): s must wait to be taken back. */
static int
keep_here(struct master *m, struct ship *s, const char *why)
{
    int rc = shm_part_adopt(
        &m->seg, SHM_STATS_MASTER, (struct shm_name){s->queue, s->qlen},
        (struct shm_name){s->part, s->plen}, s->rec, s->len, shm_now_ms());

    if (rc == -ETIMEDOUT)
        return rc;
    if (rc >= 0) {
        log_warn(0,
                 "hand-over of partition '%.*s' of queue '%.*s' to node %s "
                 "failed (%s); kept here, to be shipped again",
                 (int)s->plen, s->part, (int)s->qlen, s->queue,
                 m->members.id[s->member], why);
        ho.scan_at[1] = shm_now_ms() + RESCAN_MS;
        return 0;
    }
    shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_WIPES, 1);
    log_error(-rc,
              "hand-over failed; the partition's contents are dropped: "
              "queue '%.*s' partition '%.*s' (%u messages; node %s: %s, and "
              "taking them back failed)",
              (int)s->qlen, s->queue, (int)s->plen, s->part, s->msgs,
              m->members.id[s->member], why);
    return 0;
}

/* take_back - keep_here, for a shipment on the list: done, it goes; kept
 * out by a held lock, it waits RETRY_MS to be tried again. */
static void
take_back(struct master *m, struct ship *s, const char *why)
{
    if (why != s->why)
        snprintf(s->why, sizeof(s->why), "%s", why);
    if (keep_here(m, s, s->why) == -ETIMEDOUT) {
        s->back = 1;
        s->retry_at = shm_now_ms() + RETRY_MS;
        return;
    }
    unlink_ship(s);
    ship_free(s);
}

/* dropped - a drain's shipment that cannot be delivered. */
static void
dropped(struct master *m, struct ship *s, const char *why)
{
    shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_WIPES, 1);
    log_error(0,
              "hand-over failed; the partition's contents are dropped: "
              "queue '%.*s' partition '%.*s' (%u messages; node %s: %s)",
              (int)s->qlen, s->queue, (int)s->plen, s->part, s->msgs,
              m->members.id[s->member], why);
    ho.lost++;
    ho.msgs_lost += s->msgs;
}

/* repick - a drain's shipment that failed: its owner as the members are
 * seen now (the one tried may have died or be leaving too).  0 when no
 * live member is left to try. */
static int
repick(struct master *m, struct ship *s)
{
    struct shm_owners o;
    int member;

    owners_now(m, &o);
    member = owner_of(m, &o, (struct shm_name){s->queue, s->qlen},
                      (struct shm_name){s->part, s->plen});
    if (member < 0)
        return 0;
    s->member = member;
    return 1;
}

/* shipped - the owner's answer to an adopt. */
static void
shipped(void *arg, struct http_client_resp *r)
{
    struct ship *s = arg;
    struct master *m = ho.m;
    char why[160];

    if (r == NULL) /* freed at stop */
        return;
    if (r->err == 0 && r->status == 200) {
        shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_HANDOVER_OUT_OK, 1);
        log_debug(0,
                  "handed partition '%.*s' of queue '%.*s' over to node %s "
                  "(%u messages)",
                  (int)s->plen, s->part, (int)s->qlen, s->queue,
                  m->members.id[s->member], s->msgs);
        if (s->drain) {
            ho.delivered++;
            ho.msgs_delivered += s->msgs;
        }
        unlink_ship(s);
        ship_free(s);
        pump(m);
        return;
    }
    if (r->err != 0)
        snprintf(why, sizeof(why), "%s", r->error);
    else
        snprintf(why, sizeof(why), "status %u: %.100s", r->status,
                 r->body.data ? r->body.data : "");
    if (s->drain && shm_now_ms() + RETRY_MS < ho.drain_deadline &&
        repick(m, s)) {
        log_info(0,
                 "hand-over of partition '%.*s' of queue '%.*s': %s; trying "
                 "node %s",
                 (int)s->plen, s->part, (int)s->qlen, s->queue, why,
                 m->members.id[s->member]);
        s->retry_at = shm_now_ms() + RETRY_MS;
        return;
    }
    shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_HANDOVER_OUT_FAILED, 1);
    if (s->drain) {
        unlink_ship(s);
        dropped(m, s, why);
        ship_free(s);
    } else {
        take_back(m, s, why);
    }
    pump(m);
}

static void
ship_post(struct master *m, struct ship *s)
{
    s->retry_at = 0;
    master_cluster_client_post(m, m->members.addr[s->member], s->path, s->rec,
                               s->len, SHIP_MS, shipped, s);
}

/* ship - take (queue, part) out of the segment and send it to member. */
static void
ship(struct master *m, struct shm_name queue, struct shm_name part, int member,
     int drain)
{
    struct shm_ho_sink out = {0};
    struct ship *s = calloc(1, sizeof(*s));
    char *qe = http_client_escape(queue.ptr, queue.len);
    char *pe = http_client_escape(part.ptr, part.len);
    int n = -ENOMEM;

    if (s != NULL && qe != NULL && pe != NULL &&
        asprintf(&s->path, CLUSTER_PATH_ADOPT "?queue=%s&partition=%s", qe,
                 pe) < 0)
        s->path = NULL;
    if (s != NULL && s->path != NULL &&
        (s->queue = malloc(queue.len)) != NULL &&
        (s->part = malloc(part.len)) != NULL) {
        for (out.cap = 4096;; out.cap = out.need) {
            unsigned char *b = realloc(out.buf, out.cap);
            if (b == NULL) {
                n = -ENOMEM;
                break;
            }
            out.buf = b;
            n = shm_part_take(&m->seg, SHM_STATS_MASTER, queue, part,
                              shm_now_ms(), &out);
            if (n != -ENOMEM)
                break;
        }
    }
    free(qe);
    free(pe);
    /* No message left to ship may still carry group positions (every one
     * held was completed) or a dedupe window (shm_part_each lists one with
     * a live key): those go too, or the groups start over there and a
     * retried push there is stored twice. */
    if (n < 0 || (n == 0 && out.used <= sizeof(struct shm_ho_hdr))) {
        if (n == -ETIMEDOUT)
            rescan_soon(shm_now_ms()); /* stays here meanwhile */
        else if (n < 0 && n != -ENOENT)
            log_error(-n,
                      "cannot take partition '%.*s' of queue '%.*s' for "
                      "its hand-over; it stays here",
                      (int)part.len, part.ptr, (int)queue.len, queue.ptr);
        free(out.buf);
        if (s != NULL) {
            s->rec = NULL;
            ship_free(s);
        }
        return;
    }
    memcpy(s->queue, queue.ptr, queue.len);
    memcpy(s->part, part.ptr, part.len);
    s->qlen = queue.len;
    s->plen = part.len;
    s->rec = out.buf;
    s->len = out.used;
    s->msgs = (uint32_t)n;
    s->member = member;
    s->drain = drain;
    s->next = ho.ships;
    ho.ships = s;
    ho.nships++;
    if (drain)
        ho.rings++;
    ship_post(m, s);
}

/* want - queue (queue, part) for shipping to its owner once there is
 * room in flight. */
static void
want(struct shm_name queue, struct shm_name part, int drain)
{
    struct want *w = malloc(sizeof(*w) + queue.len + part.len);

    if (w == NULL)
        return; /* stays here; the next scan finds it again */
    w->next = NULL;
    w->drain = drain;
    w->qlen = queue.len;
    w->plen = part.len;
    memcpy(w->names, queue.ptr, queue.len);
    memcpy(w->names + queue.len, part.ptr, part.len);
    if (ho.wants == NULL)
        ho.wants_tail = &ho.wants;
    *ho.wants_tail = w;
    ho.wants_tail = &w->next;
}

/* want_dropped - a drain's partition that could not be shipped (why): its
 * contents end with this node, as a failed shipment's do. */
static void
want_dropped(struct master *m, const struct want *w, const char *why)
{
    shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_WIPES, 1);
    log_error(0,
              "hand-over failed; the partition's contents are dropped: "
              "queue '%.*s' partition '%.*s' (%s)",
              (int)w->qlen, w->names, (int)w->plen, w->names + w->qlen, why);
    ho.rings++;
    ho.lost++;
}

/* send_want - ship w to its owner among o, the members as they are seen
 * now.  A join's partition that is this node's again (or nobody's) stays
 * here; a drain's with no live member left to take it is dropped, logged
 * and counted, as a shipment's would be. */
static void
send_want(struct master *m, const struct shm_owners *o, const struct want *w)
{
    struct shm_name queue = {w->names, w->qlen};
    struct shm_name part = {w->names + w->qlen, w->plen};
    int member = owner_of(m, o, queue, part);

    if (member >= 0) {
        ship(m, queue, part, member, w->drain);
        return;
    }
    if (w->drain)
        want_dropped(m, w, "no live member left to take it");
}

/* pump - ship what waits while there is room in flight. */
static void
pump(struct master *m)
{
    struct shm_owners o;

    if (ho.wants == NULL || ho.nships >= SHIP_INFLIGHT)
        return;
    owners_now(m, &o);
    while (ho.wants != NULL && ho.nships < SHIP_INFLIGHT) {
        struct want *w = ho.wants;
        ho.wants = w->next;
        send_want(m, &o, w);
        free(w);
    }
}

/* A scan's context. */
struct scan {
    struct master *m;
    struct shm_owners o;
    int drain;
    char **dl; /* outside a drain: the declared deadLetter queues' names */
    size_t *dl_len;
    uint32_t ndl, cap;
};

/* dl_add - a declared queue's deadLetter name into the scan's list (one
 * that does not fit is left out: its partitions move as any queue's). */
static void
dl_add(void *arg, const char *name, size_t len, const struct shm_qopts *o)
{
    struct scan *sc = arg;
    char buf[SHM_NAME_MAX];
    size_t n;

    if (SHM_QOPT_DL_LEN(o->flags) == 0 ||
        (n = shm_catalog_dead_letter(sc->m->seg.catalog, name, len, buf)) == 0)
        return;
    if (sc->ndl == sc->cap) {
        uint32_t cap = sc->cap ? 2 * sc->cap : 8;
        char **dl = realloc(sc->dl, cap * sizeof(*dl));
        if (dl == NULL)
            return;
        sc->dl = dl;
        size_t *dl_len = realloc(sc->dl_len, cap * sizeof(*dl_len));
        if (dl_len == NULL)
            return;
        sc->dl_len = dl_len;
        sc->cap = cap;
    }
    if ((sc->dl[sc->ndl] = malloc(n)) == NULL)
        return;
    memcpy(sc->dl[sc->ndl], buf, n);
    sc->dl_len[sc->ndl++] = n;
}

/* dl_free - what dl_add gathered. */
static void
dl_free(struct scan *sc)
{
    for (uint32_t i = 0; i < sc->ndl; i++)
        free(sc->dl[i]);
    free(sc->dl);
    free(sc->dl_len);
}

/* is_dl - whether queue is one of the scan's deadLetter queues. */
static int
is_dl(const struct scan *sc, struct shm_name queue)
{
    for (uint32_t i = 0; i < sc->ndl; i++)
        if (sc->dl_len[i] == queue.len &&
            memcmp(sc->dl[i], queue.ptr, queue.len) == 0)
            return 1;
    return 0;
}

/* scan_one - ship (queue, part) if another member owns it now.  Outside a
 * drain a dead-letter queue's partitions stay where their messages were
 * dropped (redrive asks every member for its share): moving them would
 * hand a reader's leased dead letters to it again under new ids. */
static void
scan_one(void *arg, struct shm_name queue, struct shm_name part)
{
    struct scan *sc = arg;

    if (!sc->drain && is_dl(sc, queue))
        return;
    if (owner_of(sc->m, &sc->o, queue, part) >= 0)
        want(queue, part, sc->drain);
}

void
master_handover_tick(struct master *m, uint64_t now)
{
    struct scan sc = {.m = m};
    int due = 0;

    ho.m = m;
    master_join_tick(m, now);
    owners_now(m, &sc.o);
    if (sc.o.self < 0)
        return; /* starting or leaving: nothing here to compare */
    if (sc.o.sig != ho.members) {
        ho.members = sc.o.sig;
        ho.scan_at[0] = now;
        ho.scan_at[1] = now + RESCAN_MS;
        ho.scan_at[2] = now + RESCAN2_MS;
    }
    /* What workers served in a suspect owner's stead for a peer: shipped
     * to the owner once those calls stop (view.c says why this is sound). */
    uint64_t standin = shm_board_standin_at(m->seg.board);
    if (standin != ho.standin) {
        ho.standin = standin;
        ho.scan_at[3] = standin + STANDIN_QUIET_MS;
    }
    for (int k = 0; k < 4; k++)
        if (ho.scan_at[k] != 0 && ho.scan_at[k] <= now) {
            ho.scan_at[k] = 0;
            due = 1;
        }
    if (due && sc.o.n > 1) {
        if (m->seg.catalog != NULL)
            shm_catalog_each(m->seg.catalog, dl_add, &sc);
        shm_part_each(&m->seg, scan_one, &sc);
        dl_free(&sc);
        master_presence_rehome(m, now); /* presence channels, likewise */
    }
    for (struct ship *s = ho.ships, *next; s; s = next) {
        next = s->next; /* taken back, s is freed */
        if (s->back && s->retry_at <= now)
            take_back(m, s, s->why);
    }
    pump(m);
}

/*
 * let_go_dead - a drain's shipments out to a member the view has since
 * declared dead (unheard for member_ttl_ms: hung, or gone without a word)
 * wait no longer for its answer, which would come at SHIP_MS at best and
 * leave too little of the drain for another try: each is cancelled and
 * sent to its owner as the members are seen now.  Should the hung member
 * resume and adopt it as well, the messages are on two nodes: duplicates,
 * which at-least-once allows; waiting would drop them.
 */
static void
let_go_dead(struct master *m)
{
    struct shm_board_view v;

    shm_board_read(m->seg.board, &v);
    for (struct ship *s = ho.ships, *next; s; s = next) {
        int dead = s->member;

        next = s->next; /* a post that fails at once frees s */
        if (s->retry_at != 0 || !member_dead(m, &v, dead))
            continue;
        master_cluster_client_cancel(s);
        if (!repick(m, s)) {
            shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_HANDOVER_OUT_FAILED, 1);
            unlink_ship(s);
            dropped(m, s,
                    "declared dead before answering, and no live "
                    "member is left to take it");
            ship_free(s);
            continue;
        }
        log_warn(0,
                 "hand-over of partition '%.*s' of queue '%.*s': node %s is "
                 "dead (unheard for %u ms) and did not answer; shipping it "
                 "to node %s instead (duplicates if node %s adopts it after "
                 "all)",
                 (int)s->plen, s->part, (int)s->qlen, s->queue,
                 m->members.id[dead], m->cfg.member_ttl_ms,
                 m->members.id[s->member], m->members.id[dead]);
        ship_post(m, s);
    }
}

/* shutdown_line - SPEC §5's line at the drain's end.  What was never
 * shipped (nobody to take it, or no time) is still in the segment and
 * ends with the node: its messages count as lost too. */
static void
shutdown_line(struct master *m, uint64_t now)
{
    struct shm_gauges g;

    shm_gauges_read(&m->seg, now, &g);
    ho.msgs_lost += g.messages;
    (ho.lost ? log_warn : log_info)(
        0,
        "shutdown: ephemeral rings handed over rings=%u "
        "delivered=%u lost=%u (messages delivered=%llu lost=%llu)",
        ho.rings, ho.delivered, ho.lost, (unsigned long long)ho.msgs_delivered,
        (unsigned long long)ho.msgs_lost);
}

int
master_handover_drain(struct master *m, uint64_t now)
{
    ho.m = m;
    if (m->members.n < 2) {
        /* A node alone: its queues end with it, nothing is handed over,
         * and the line says so (every partition it holds is lost). */
        if (!ho.drain_started) {
            uint32_t held = shm_part_each(&m->seg, NULL, NULL);

            ho.drain_started = 1;
            ho.rings += held;
            ho.lost += held;
            shutdown_line(m, now);
        }
        return 0;
    }
    if (!ho.drain_started) {
        struct scan sc = {.m = m, .drain = 1};

        ho.drain_started = 1;
        ho.drain_deadline = now + DRAIN_SHIP_MS;
        /* A join's shipment still out is the drain's now: nothing to
         * take it back into. */
        for (struct ship *s = ho.ships; s; s = s->next)
            if (!s->drain) {
                s->drain = 1; /* one waiting to be taken back: sent again */
                s->back = 0;
                ho.rings++;
            }
        for (struct want *w = ho.wants; w; w = w->next)
            w->drain = 1;
        owners_now(m, &sc.o);
        if (sc.o.n > 0) {
            shm_part_each(&m->seg, scan_one, &sc);
        } else {
            uint32_t held = shm_part_each(&m->seg, NULL, NULL);
            if (held > 0)
                log_warn(0,
                         "no live member to hand partitions over to: %u "
                         "partitions' contents end with this node",
                         held);
            ho.rings += held;
            ho.lost += held;
        }
    }
    if (ho.drain_rescan_at != 0 && ho.drain_rescan_at <= now &&
        ho.wants == NULL && now < ho.drain_deadline) {
        struct scan sc = {.m = m, .drain = 1};

        ho.drain_rescan_at = 0;
        owners_now(m, &sc.o);
        if (sc.o.n > 0)
            shm_part_each(&m->seg, scan_one, &sc);
    }
    let_go_dead(m);
    for (struct ship *s = ho.ships, *next; s; s = next) {
        next = s->next; /* a post that fails at once frees s */
        if (s->retry_at != 0 && s->retry_at <= now)
            ship_post(m, s);
    }
    pump(m);
    if ((ho.ships != NULL || ho.wants != NULL) && now < ho.drain_deadline)
        return 1;
    while (ho.wants != NULL) {
        struct want *w = ho.wants;
        ho.wants = w->next;
        want_dropped(m, w, "not shipped before the drain's deadline");
        free(w);
    }
    while (ho.ships != NULL) {
        struct ship *s = ho.ships;
        ho.ships = s->next;
        master_cluster_client_cancel(s);
        dropped(m, s, "no answer before the drain's deadline");
        ship_free(s);
    }
    shutdown_line(m, now);
    return 0;
}

/* adopt_queue_ok - a queue's internal name as a peer ships it: a
 * client's (http_qname_valid), or a presence channel's events queue, whose
 * name holds SHM_PRES_MARK before the channel (worker/presence.h). */
static int
adopt_queue_ok(const char *q, size_t len)
{
    char buf[SHM_NAME_MAX];
    const char *mark;

    if (http_qname_valid(q, len))
        return 1;
    if (len < 2 || len > sizeof(buf) ||
        !shm_presence_named((struct shm_name){q, len}) ||
        (mark = memchr(q, SHM_PRES_MARK, len)) == NULL)
        return 0;
    memcpy(buf, q, (size_t)(mark - q));
    memcpy(buf + (mark - q), mark + 1, len - (size_t)(mark - q) - 1);
    return http_qname_valid(buf, len - 1);
}

void
master_handover_in(struct master *m, struct http_request *req)
{
    const struct http_query *q = http_request_args(req);
    size_t qlen = 0, plen = 0, len;
    const char *queue = http_query_get(q, "queue", &qlen);
    const char *part = http_query_get(q, "partition", &plen);
    const char *body = http_request_body(req, &len);
    struct http_buf b = {0};
    int rc;

    if (http_query_get(q, "presence", NULL) != NULL) {
        master_presence_in(m, req); /* a drain's presence channels */
        return;
    }
    if (queue == NULL || part == NULL || !adopt_queue_ok(queue, qlen) ||
        !http_name_valid(part, plen)) {
        http_reply_error(req, 400, "invalid_name",
                         "query parameters 'queue' and 'partition' must be "
                         "valid names");
        return;
    }
    if (m->state != MASTER_RUNNING || !m->ready) {
        http_reply_error(req, 503, m->ready ? "draining" : "starting",
                         "this node is %s; hand the partition to another",
                         m->ready ? "draining" : "starting");
        return;
    }
    rc = shm_part_adopt(&m->seg, SHM_STATS_MASTER,
                        (struct shm_name){queue, qlen},
                        (struct shm_name){part, plen}, body, len, shm_now_ms());
    if (rc < 0) {
        shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_HANDOVER_IN_FAILED, 1);
        /* A held lock (shm/lock.h) is warned of once a while by main.c. */
        (rc == -ETIMEDOUT ? log_debug : log_warn)(
            -rc, "cannot adopt partition '%.*s' of queue '%.*s' from %s",
            (int)plen, part, (int)qlen, queue,
            http_request_header(req, CLUSTER_NODE_HEADER)
                ? http_request_header(req, CLUSTER_NODE_HEADER)
                : "a peer");
        if (rc == -ETIMEDOUT)
            http_reply_error(req, 503, "ephemeral_unavailable",
                             "this node's segment is busy; retry");
        else if (rc == -EBADMSG)
            http_reply_error(req, 400, "ephemeral_bad_request",
                             "body is not a hand-over record of this version");
        else
            http_reply_errno(req, rc, "adopt");
        return;
    }
    shm_count(&m->seg, SHM_STATS_MASTER, SHM_C_HANDOVER_IN_OK, 1);
    master_join_adopted((struct shm_name){queue, qlen},
                        (struct shm_name){part, plen});
    {
        /* The sender saw the members otherwise: pass it on, if it is not
         * ours, at the next scan rather than keep it where nobody looks. */
        struct shm_owners o;
        owners_now(m, &o);
        if (!shm_owner_here(&o, (struct shm_name){queue, qlen},
                            (struct shm_name){part, plen}))
            ho.scan_at[1] = shm_now_ms() + RESCAN_MS;
    }
    http_buf_printf(&b, "{\"adopted\":%d}", rc);
    http_reply(req, 200, &b);
}

/* What a scan for the holds appends to. */
struct holds {
    struct master *m;
    struct shm_owners o;
    struct http_buf *body;
};

/* hold_one - an "h" line for (queue, part) to its next owner. */
static void
hold_one(void *arg, struct shm_name queue, struct shm_name part)
{
    struct holds *h = arg;
    int member = owner_of(h->m, &h->o, queue, part);

    if (member >= 0)
        http_buf_printf(&h->body[member], "h %.*s\t%.*s\n", (int)queue.len,
                        queue.ptr, (int)part.len, part.ptr);
}

void
master_handover_holds(struct master *m, struct http_buf *body)
{
    struct holds h = {.m = m, .body = body};

    owners_now(m, &h.o);
    if (h.o.n > 0 && m->members.n > 1)
        shm_part_each(&m->seg, hold_one, &h);
}

/*
 * A join's list (join.h).  A peer that this node sees live as a new
 * incarnation is told, in each beat for JOIN_TELL_MS, every partition
 * this node ships it: held here and its owner's in the view shipments go
 * by (but a dead-letter queue's, which stay: scan_one), on its way, or
 * waiting for a slot; then that this is all.  What went and was answered already is adopted
 * there.  Told again and again because a beat can be skipped or lost;
 * the joiner takes the first that reaches it while its window is open.
 */
#define JOIN_TELL_MS JOIN_WINDOW_MS

static struct {
    uint64_t inc, at; /* the incarnation last seen live, since when */
} told[RAFT_MAX_NODES];

/* join_peer - the member index of o->m[k], another member that owns, and
 * whether it is a new incarnation (noted at now); -1 for this node. */
static int
join_peer(struct master *m, const struct shm_owners *o, int k, uint64_t now,
          int *fresh)
{
    int i = k == o->self ? -1 : master_membership_peer(m, o->m[k].id);

    *fresh = 0;
    if (i < 0 || i >= RAFT_MAX_NODES || m->members.inc[i] == 0)
        return -1;
    if (told[i].inc != m->members.inc[i]) {
        told[i].inc = m->members.inc[i];
        told[i].at = now;
        *fresh = 1;
    }
    return i;
}

int
master_handover_join_news(struct master *m, uint64_t now)
{
    struct shm_owners o;
    int news = 0, fresh;

    owners_now(m, &o);
    if (o.self < 0 || m->state != MASTER_RUNNING)
        return 0;
    for (int k = 0; k < o.n; k++)
        if (join_peer(m, &o, k, now, &fresh) >= 0 && fresh)
            news = 1;
    return news;
}

/* What a join's list appends to. */
struct joins {
    struct scan sc;
    struct http_buf *body;
    uint64_t tell; /* bit i: peer i is told */
};

static void
join_line(struct joins *j, int member, struct shm_name queue,
          struct shm_name part)
{
    if (member >= 0 && member < 64 && (j->tell & (1ull << member)))
        http_buf_printf(&j->body[member], "H %.*s\t%.*s\n", (int)queue.len,
                        queue.ptr, (int)part.len, part.ptr);
}

/* join_one - a partition held here, for the list of its owner. */
static void
join_one(void *arg, struct shm_name queue, struct shm_name part)
{
    struct joins *j = arg;

    if (!is_dl(&j->sc, queue))
        join_line(j, owner_of(j->sc.m, &j->sc.o, queue, part), queue, part);
}

uint64_t
master_handover_joins(struct master *m, struct http_buf *body, uint64_t now)
{
    struct joins j = {.sc = {.m = m}, .body = body};
    int fresh;

    owners_now(m, &j.sc.o);
    if (j.sc.o.self < 0 || m->state != MASTER_RUNNING)
        return 0;
    for (int k = 0; k < j.sc.o.n; k++) {
        int i = join_peer(m, &j.sc.o, k, now, &fresh);
        if (i >= 0 && i < 64 && now - told[i].at < JOIN_TELL_MS) {
            j.tell |= 1ull << i;
            http_buf_printf(&body[i], "J %llu\n",
                            (unsigned long long)told[i].inc);
        }
    }
    if (j.tell == 0)
        return 0;
    if (m->seg.catalog != NULL)
        shm_catalog_each(m->seg.catalog, dl_add, &j.sc);
    shm_part_each(&m->seg, join_one, &j);
    dl_free(&j.sc);
    for (struct ship *s = ho.ships; s; s = s->next)
        join_line(&j, s->member, (struct shm_name){s->queue, s->qlen},
                  (struct shm_name){s->part, s->plen});
    for (struct want *w = ho.wants; w; w = w->next) {
        struct shm_name queue = {w->names, w->qlen};
        struct shm_name part = {w->names + w->qlen, w->plen};
        join_line(&j, owner_of(m, &j.sc.o, queue, part), queue, part);
    }
    return j.tell;
}
void
master_handover_stop(void)
{
    master_join_stop();
    while (ho.ships != NULL) {
        struct ship *s = ho.ships;
        ho.ships = s->next;
        ship_free(s);
    }
    ho.nships = 0;
    while (ho.wants != NULL) {
        struct want *w = ho.wants;
        ho.wants = w->next;
        free(w);
    }
}
