/*
 * park.c - a deadline heap and a handle hash over parked pops.
 *
 * Both indexes are intrusive (heap_idx, prev/next live in struct park), so
 * parking allocates only when an index must grow.  Errors: -ENOMEM.
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

    size_t b = bucket_of(s, p->handle);
    p->prev = NULL;
    p->next = s->buckets[b];
    if (p->next)
        p->next->prev = p;
    s->buckets[b] = p;
    return 0;
}

int
park_remove(struct park_set *s, struct park *p)
{
    size_t i = p->heap_idx;
    size_t b = bucket_of(s, p->handle);

    s->len--;
    if (i != s->len) {
        heap_swap(s, i, s->len);
        heap_down(s, i);
        heap_up(s, i);
    }
    if (p->prev)
        p->prev->next = p->next;
    else
        s->buckets[b] = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    return park_chain(s, p->handle) == NULL;
}

struct park *
park_first(const struct park_set *s)
{
    return s->len ? s->heap[0] : NULL;
}

struct park *
park_chain(const struct park_set *s, uint64_t handle)
{
    struct park *p = s->buckets[bucket_of(s, handle)];
    while (p && p->handle != handle)
        p = p->next;
    return p;
}

struct park *
park_chain_next(const struct park *p)
{
    struct park *q = p->next;
    while (q && q->handle != p->handle)
        q = q->next;
    return q;
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
