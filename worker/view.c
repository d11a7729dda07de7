/*
 * view.c - see view.h.  The members marked gone are this process's alone,
 * a small table (one entry a member) in static memory: the worker is
 * single-threaded.
 */
#include "worker/view.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "shm/board.h"
#include "shm/owner.h"
#include "worker/worker_int.h"

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
