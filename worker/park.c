/*
 * park.c - see park.h: a deadline heap, a handle hash and a walk list over
 * parked calls.
 */
#include "worker/park.h"

#include <errno.h>
#include <stdlib.h>

#define PARK_BUCKETS 4096 /* power of two */

int
park_set_init(struct park_set *s)
{
    *s = (struct park_set){0};
    s->nbuckets = PARK_BUCKETS;
    s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
    return s->buckets ? 0 : -ENOMEM;
}

static size_t
bucket_of(const struct park_set *s, uint64_t handle)
{
    /* Fibonacci hashing spreads the index and generation bits. */
    return (size_t)((handle * 0x9e3779b97f4a7c15ULL) >> 40) & (s->nbuckets - 1);
}

static void
heap_swap(struct park_set *s, size_t a, size_t b)
{
    struct park *t = s->heap[a];
    s->heap[a] = s->heap[b];
    s->heap[b] = t;
    s->heap[a]->heap_idx = a;
    s->heap[b]->heap_idx = b;
}

static void
heap_up(struct park_set *s, size_t i)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (s->heap[parent]->deadline <= s->heap[i]->deadline)
            break;
        heap_swap(s, i, parent);
        i = parent;
    }
}

static void
heap_down(struct park_set *s, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->len && s->heap[l]->deadline < s->heap[m]->deadline)
            m = l;
        if (r < s->len && s->heap[r]->deadline < s->heap[m]->deadline)
            m = r;
        if (m == i)
            return;
        heap_swap(s, i, m);
        i = m;
    }
}

/* chain_add - put q at the head of its handle's bucket. */
static void
chain_add(struct park_set *s, struct park_wait *q)
{
    size_t b = bucket_of(s, q->handle);

    q->prev = NULL;
    q->next = s->buckets[b];
    if (q->next)
        q->next->prev = q;
    s->buckets[b] = q;
}

/* chain_remove - take q out of its handle's bucket. */
static void
chain_remove(struct park_set *s, struct park_wait *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        s->buckets[bucket_of(s, q->handle)] = q->next;
    if (q->next)
        q->next->prev = q->prev;
    q->prev = q->next = NULL;
}

int
park_add(struct park_set *s, struct park *p)
{
    if (s->len == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        struct park **h = realloc(s->heap, cap * sizeof(*h));
        if (h == NULL)
            return -ENOMEM;
        s->heap = h;
        s->cap = cap;
    }
    p->heap_idx = s->len;
    s->heap[s->len++] = p;
    heap_up(s, p->heap_idx);
    for (size_t i = 0; i < p->nwaits; i++) {
        p->waits[i].park = p;
        chain_add(s, &p->waits[i]);
    }
    p->parked = 1;
    return 0;
}

/* walk_unlink - take p off the walk list. */
static void
walk_unlink(struct park_set *s, struct park *p)
{
    if (p->walk_prev)
        p->walk_prev->walk_next = p->walk_next;
    else
        s->walk_head = p->walk_next;
    if (p->walk_next)
        p->walk_next->walk_prev = p->walk_prev;
    else
        s->walk_tail = p->walk_prev;
    p->walk_prev = p->walk_next = NULL;
    p->on_walk = 0;
}

void
park_remove(struct park_set *s, struct park *p)
{
    size_t i = p->heap_idx;

    s->len--;
    if (i != s->len) {
        heap_swap(s, i, s->len);
        heap_down(s, i);
        heap_up(s, i);
    }
    for (size_t k = 0; k < p->nwaits; k++)
        chain_remove(s, &p->waits[k]);
    if (p->on_walk)
        walk_unlink(s, p);
    if (s->walk_empty == p)
        s->walk_empty = NULL;
    p->parked = 0;
}

struct park *
park_first(const struct park_set *s)
{
    return s->len ? s->heap[0] : NULL;
}

struct park *
park_at(const struct park_set *s, size_t i)
{
    return s->heap[i];
}

struct park_wait *
park_chain(const struct park_set *s, uint64_t handle)
{
    struct park_wait *q = s->buckets[bucket_of(s, handle)];
    while (q && q->handle != handle)
        q = q->next;
    return q;
}

struct park_wait *
park_chain_next(const struct park_wait *q)
{
    struct park_wait *n = q->next;
    while (n && n->handle != q->handle)
        n = n->next;
    return n;
}

void
park_update_deadline(struct park_set *s, struct park *p, uint64_t when)
{
    p->deadline = when;
    heap_down(s, p->heap_idx);
    heap_up(s, p->heap_idx);
}

size_t
park_count(const struct park_set *s)
{
    return s->len;
}

void
park_walk_add(struct park_set *s, struct park *p)
{
    if (p->on_walk)
        return;
    p->on_walk = 1;
    p->walk_next = NULL;
    p->walk_prev = s->walk_tail;
    if (s->walk_tail)
        s->walk_tail->walk_next = p;
    else
        s->walk_head = p;
    s->walk_tail = p;
}

struct park *
park_walk_next(struct park_set *s)
{
    struct park *p = s->walk_head;

    if (p != NULL)
        walk_unlink(s, p);
    return p;
}
