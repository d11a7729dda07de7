/*
 * view.c - see view.h.  The members marked gone are this process's alone,
 * a small table (one entry a member) in static memory: the worker is
 * single-threaded.
 *
 * Serving in an owner's stead (worker_view_standin).  A one-way fault
 * makes the views differ while membership stays: a node that cannot
 * reach an owner (suspect, forward.c) or has it dead forwards the owner's
 * partitions to the next in its placement, and that one, seeing the owner
 * live, would answer 503 owner_moved for the fault's whole length.  It
 * serves them instead, and this is sound because it is what a split does
 * already, on a smaller scale: two nodes each hold a copy of one
 * partition (the owner's, for the clients of the nodes that reach it;
 * this one's, for the sender's clients).  Each copy is a partition in its
 * own right: a message is stored in one copy, under the ids of the node
 * that stored it, and an ack goes to the node its id names (ack_route.h),
 * so it finds the copy that delivered it; groups ride the beats, so both
 * copies keep a message for every group the cluster knows.  Nothing is
 * left behind: once no forward has been served so for a while (the
 * board's stand-in time) the master's hand-over ships this node's copy to
 * the owner, every group where it was (heal = merge, DESIGN §3), and a
 * shipment that fails is adopted back and shipped again.  What a split
 * gives up is given up here too, for those partitions alone: no order
 * between the two copies, a dedupe window per copy, a message leased from
 * the copy that moves comes again (at least once).  Only the sender's own
 * placement is followed (this node is the owner once the members it names
 * are left out), so there is never a second hop; and a leaving member is
 * never named, so a drain's order holds (the next owner holds a partition
 * once it hears the leave, before it serves it).
 */
#include "worker/view.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "http/node_call.h"
#include "http/request.h"
#include "shm/board.h"
#include "shm/inbox.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "shm/presence.h"
#include "worker/worker_int.h"

/* How often serving in an owner's stead is logged, at most. */
#define STANDIN_LOG_MS 10000

/* worker_serves_all - see view.h. */
int
worker_serves_all(struct worker *w)
{
    const struct shm_owners *o = &w->owners;

    shm_owners_refresh(&w->owners, w->seg->board);
    return o->n == 0 || (o->n == 1 && o->self == 0);
}

/* worker_view_blind - see view.h. */
int
worker_view_blind(struct worker *w)
{
    shm_owners_refresh(&w->owners, w->seg->board);
    return w->owners.n == 0 && w->owners.listed > 1;
}

/* worker_view_read - see view.h. */
const char *
worker_view_read(struct worker *w, struct shm_board_view *v)
{
    const char *own = "";

    shm_board_read(w->seg->board, v);
    for (uint32_t k = 0; k < v->nmembers; k++)
        if (v->members[k].self)
            own = v->members[k].addr;
    return own;
}

/* A member that said it serves no more. */
static struct gone {
    char id[SHM_BOARD_ID_MAX];
    uint64_t inc;   /* the incarnation the board named then */
    uint64_t until; /* shm_now_ms() the mark ends */
} gone[SHM_BOARD_MEMBERS];

/* worker_view_mark_gone - see view.h. */
void
worker_view_mark_gone(struct worker *w, const char *id)
{
    struct shm_board_view v;
    struct gone *g = NULL;
    uint64_t now = shm_now_ms();

    worker_view_read(w, &v);
    for (uint32_t k = 0; k < v.nmembers && g == NULL; k++) {
        if (v.members[k].self || strcmp(v.members[k].id, id) != 0)
            continue;
        /* its entry, or a free or spent one */
        for (size_t i = 0; i < SHM_BOARD_MEMBERS; i++)
            if (strcmp(gone[i].id, id) == 0 ||
                (g == NULL && gone[i].until <= now))
                g = &gone[i];
        if (g == NULL)
            return;
        snprintf(g->id, sizeof(g->id), "%s", id);
        g->inc = v.members[k].incarnation;
        g->until = now + VIEW_GONE_MS;
    }
}

/* worker_view_gone - see view.h. */
int
worker_view_gone(struct worker *w, const char *id, uint64_t inc)
{
    uint64_t now = shm_now_ms();

    (void)w;
    for (size_t i = 0; i < SHM_BOARD_MEMBERS; i++)
        if (gone[i].until > now && gone[i].inc == inc &&
            strcmp(gone[i].id, id) == 0)
            return 1;
    return 0;
}

/* worker_view_around - see view.h. */
const char *
worker_view_around(struct worker *w)
{
    static struct {
        int made, any;
        uint64_t seq, suspects;
        char line[sizeof(HTTP_NODE_AROUND) + 2 +
                  SHM_BOARD_MEMBERS * SHM_BOARD_ID_MAX];
    } c;
    const struct shm_owners *o = &w->owners;
    struct shm_board_view v;

    shm_owners_refresh(&w->owners, w->seg->board);
    if (o->n == o->listed)
        return NULL; /* every member listed owns */
    if (!c.made || c.seq != o->seq || c.suspects != o->suspects) {
        size_t used =
            (size_t)snprintf(c.line, sizeof(c.line), "%s: ", HTTP_NODE_AROUND);
        c.any = 0;
        worker_view_read(w, &v);
        for (uint32_t k = 0; k < v.nmembers && k < SHM_BOARD_MEMBERS; k++) {
            const struct shm_member *mb = &v.members[k];
            /* Not a leaving member: see the opening comment. */
            if (mb->self ||
                !(mb->state == SHM_MEMBER_DEAD ||
                  (mb->state == SHM_MEMBER_LIVE && (o->suspects >> k & 1))) ||
                used >= sizeof(c.line))
                continue;
            used += (size_t)snprintf(c.line + used, sizeof(c.line) - used,
                                     "%s%s", c.any ? "," : "", mb->id);
            c.any = 1;
        }
        c.made = 1;
        c.seq = o->seq;
        c.suspects = o->suspects;
    }
    return c.any ? c.line : NULL;
}

/* worker_view_members - see view.h. */
const struct shm_owners *
worker_view_members(struct worker *w)
{
    static struct shm_owners all;
    static int made;
    struct shm_board_view v;

    shm_owners_refresh(&w->owners, w->seg->board);
    if (w->owners.suspects == 0)
        return &w->owners;
    if (!made || all.seq != w->owners.seq) {
        shm_board_read(w->seg->board, &v);
        shm_owners_from_view(&all, &v);
        all.seq = w->owners.seq; /* the view may be newer: read again then */
        made = 1;
    }
    return &all;
}

/* worker_view_suspect - see view.h. */
int
worker_view_suspect(struct worker *w, const char *id)
{
    if (w->owners.suspects == 0)
        return 0;
    for (int i = 0; i < w->owners.n; i++)
        if (strcmp(w->owners.m[i].id, id) == 0)
            return 0;
    return 1; /* a live member that w->owners leaves out */
}

/* named - whether id is one of list's comma-separated ids. */
static int
named(const char *list, const char *id)
{
    size_t n = strlen(id);

    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, id, n) == 0)
            return 1;
        if (e == NULL)
            return 0;
        p = e + 1;
    }
}

/* worker_view_standin - see view.h. */
int
worker_view_standin(struct worker *w, struct http_request *req,
                    struct shm_name queue, struct shm_name part)
{
    static uint64_t logged;
    const char *around = http_request_header(req, HTTP_NODE_AROUND);
    const struct shm_owners *all = &w->owners;
    struct shm_owners o;
    uint64_t now;
    int i;

    if (around == NULL || shm_inbox_named(queue) ||
        memchr(queue.ptr, SHM_PRES_MARK, queue.len) != NULL)
        return 0;
    shm_owners_refresh(&w->owners, w->seg->board);
    if (all->self < 0)
        return 0;
    o.n = 0;
    o.self = -1;
    for (i = 0; i < all->n; i++) {
        if (i != all->self && named(around, all->m[i].id))
            continue;
        if (i == all->self)
            o.self = o.n;
        o.m[o.n++] = all->m[i];
    }
    if (o.n == all->n)
        return 0; /* it names no owner of this node's: the views agree */
    i = shm_owner_pick(&o, queue, part);
    if (i < 0 || i != o.self)
        return 0;
    now = shm_now_ms();
    shm_board_standin(w->seg->board, now);
    if (now >= logged + STANDIN_LOG_MS) {
        logged = now;
        log_info(0,
                 "serving partitions in their owners' stead for a peer "
                 "that routes around %s (e.g. partition '%.*s'); they go "
                 "to their owners once its calls stop",
                 around, (int)part.len, part.ptr);
    }
    return 1;
}

/* worker_addr_unusable - see view.h. */
int
worker_addr_unusable(const char *addr, const char *own)
{
    struct in6_addr a6;
    struct in_addr a4;
    char host[SHM_BOARD_ADDR_MAX];
    const char *colon = strrchr(addr, ':');
    size_t n = colon ? (size_t)(colon - addr) : 0;

    if (addr[0] == '\0' || strcmp(addr, own) == 0 || n == 0 ||
        n >= sizeof(host))
        return 1;
    if (addr[0] == '[' && n >= 2 && addr[n - 1] == ']') {
        memcpy(host, addr + 1, n - 2);
        host[n - 2] = '\0';
        return inet_pton(AF_INET6, host, &a6) == 1 &&
               (IN6_IS_ADDR_UNSPECIFIED(&a6) ||
                (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr32[3] == 0));
    }
    memcpy(host, addr, n);
    host[n] = '\0';
    return inet_pton(AF_INET, host, &a4) == 1 && a4.s_addr == INADDR_ANY;
}
