/*
 * owner.c - see owner.h.
 */
#include "shm/owner.h"

#include <stdatomic.h>
#include <string.h>

#include <xxhash.h>

#include "shm/inbox.h"

void
shm_owners_init(struct shm_owners *o)
{
    memset(o, 0, sizeof(*o));
    o->seq = UINT64_MAX; /* never a published sequence: it is even */
    o->self = -1;
}

uint64_t
shm_owner_seed(const char *id)
{
    return XXH3_64bits(id, strlen(id));
}

/* from_view - shm_owners_from_view(), the members in mask (by index in
 * the view) left out as if dead; this node never is. */
static void
from_view(struct shm_owners *o, const struct shm_board_view *v, uint64_t mask)
{
    o->n = 0;
    o->suspects = mask;
    o->self = -1;
    o->listed =
        v->nmembers < SHM_BOARD_MEMBERS ? (int)v->nmembers : SHM_BOARD_MEMBERS;
    for (uint32_t i = 0; i < v->nmembers && i < SHM_BOARD_MEMBERS; i++) {
        const struct shm_member *mb = &v->members[i];
        struct shm_owner *w;

        if (mb->self) {
            memcpy(o->self_addr, mb->addr, sizeof(o->self_addr));
            o->self_addr[sizeof(o->self_addr) - 1] = '\0';
        }
        if (mb->state != SHM_MEMBER_LIVE || (!mb->self && (mask >> i & 1) != 0))
            continue;
        w = &o->m[o->n];
        memcpy(w->id, mb->id, sizeof(w->id));
        w->id[sizeof(w->id) - 1] = '\0';
        memcpy(w->addr, mb->addr, sizeof(w->addr));
        w->addr[sizeof(w->addr) - 1] = '\0';
        w->seed = shm_owner_seed(w->id);
        if (mb->self)
            o->self = o->n;
        o->n++;
    }
    o->sig = XXH3_64bits_withSeed(&o->self, sizeof(o->self), (uint64_t)o->n);
    for (int i = 0; i < o->n; i++)
        o->sig = XXH3_64bits_withSeed(o->m[i].id, strlen(o->m[i].id), o->sig);
}

void
shm_owners_from_view(struct shm_owners *o, const struct shm_board_view *v)
{
    from_view(o, v, 0);
}

int
shm_owners_refresh(struct shm_owners *o, const struct shm_board *s)
{
    struct shm_board_view v;
    uint64_t seq = atomic_load_explicit(&((struct shm_board *)s)->seq,
                                        memory_order_acquire);
    uint64_t mask = shm_board_suspects(s);

    if (seq == o->seq && mask == o->suspects)
        return 0;
    shm_board_read(s, &v);
    from_view(o, &v, mask);
    /* The copy may be newer than seq (published meanwhile): then the next
     * call reads it again, which is harmless. */
    o->seq = seq;
    return 1;
}

int
shm_owner_pick(const struct shm_owners *o, struct shm_name queue,
               struct shm_name part)
{
    int best = -1;
    uint64_t top = 0;
    struct shm_name node;

    /* A request's inbox lives where its name says, or nowhere. */
    if (shm_inbox_node(queue, &node)) {
        for (int i = 0; i < o->n; i++)
            if (strlen(o->m[i].id) == node.len &&
                memcmp(o->m[i].id, node.ptr, node.len) == 0)
                return i;
        return -1;
    }

    for (int i = 0; i < o->n; i++) {
        uint64_t s = XXH3_64bits_withSeed(
            part.ptr, part.len,
            XXH3_64bits_withSeed(queue.ptr, queue.len, o->m[i].seed));
        if (best < 0 || s > top ||
            (s == top && strcmp(o->m[i].id, o->m[best].id) < 0)) {
            best = i;
            top = s;
        }
    }
    return best;
}
