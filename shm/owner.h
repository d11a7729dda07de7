/*
 * owner.h - who owns a (queue, partition): the highest-random-weight pick
 * over the live members of the board (SPEC §5).
 *
 * The master publishes the members and their states into the board
 * (shm/board.h); every node computes the same owner from the same members,
 * so nothing else is exchanged.  A reader keeps a struct shm_owners, its
 * private copy of the members that own (LIVE ones), rebuilt only when the
 * board's sequence moved: a request costs one atomic load and, with n
 * members, n hashes of the key.
 *
 * Score of member m for (queue, part): XXH3-64 of part seeded with XXH3-64
 * of queue seeded with m's seed, the XXH3-64 of its node id.  The highest
 * score owns; equal scores go to the smaller node id.
 */
#ifndef MAYFLY_SHM_OWNER_H
#define MAYFLY_SHM_OWNER_H

#include <stdint.h>

#include "shm/board.h"
#include "shm/broker.h"

struct shm_owner {
    uint64_t seed;
    char id[SHM_BOARD_ID_MAX];
    char addr[SHM_BOARD_ADDR_MAX]; /* its client address */
};

struct shm_owners {
    uint64_t seq;      /* the board's sequence this copy was made at */
    int n;             /* members that own */
    int listed;        /* members the board lists, this node too, whatever their
                     state: 1 for a node alone */
    int self;          /* this node's index among them; -1: it owns nothing */
    uint64_t sig;      /* of the owners' ids and self: changes when they do */
    uint64_t suspects; /* members left out as suspect (shm_board_suspects) */
    struct shm_owner m[SHM_BOARD_MEMBERS];
    char self_addr[SHM_BOARD_ADDR_MAX]; /* this node's, whatever its state */
};

/* shm_owners_init - an empty copy that the first refresh fills. */
void shm_owners_init(struct shm_owners *o);

/* shm_owners_refresh - rebuild o from the board if it changed since, or
 * the members it suspects did (they own nothing here while suspect);
 * returns 1 when it did. */
int shm_owners_refresh(struct shm_owners *o, const struct shm_board *s);

/* shm_owners_from_view - build o from a view (tests, and the master, which
 * holds the view it publishes). */
void shm_owners_from_view(struct shm_owners *o, const struct shm_board_view *v);

/* shm_owner_pick - index in o->m of the owner of (queue, part); -1 when no
 * member owns anything (a node alone, starting or draining).  A request's
 * inbox (shm/inbox.h) is owned by the node its name carries: -1 when that
 * one is not a live member (it is gone, or it is this node, draining). */
int shm_owner_pick(const struct shm_owners *o, struct shm_name queue,
                   struct shm_name part);

/* shm_owner_here - whether this node serves (queue, part) itself: it owns
 * it, or nobody does. */
static inline int
shm_owner_here(const struct shm_owners *o, struct shm_name queue,
               struct shm_name part)
{
    int i;

    if (o->n == 0 || (o->n == 1 && o->self == 0))
        return 1;
    i = shm_owner_pick(o, queue, part);
    return i < 0 || i == o->self;
}

/* shm_owner_seed - a member's seed: XXH3-64 of its node id. */
uint64_t shm_owner_seed(const char *id);

#endif
