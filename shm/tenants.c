/*
 * tenants.c - see tenants.h.
 */
#include "shm/tenants.h"

#include <sys/mman.h>

#include <errno.h>
#include <string.h>

#define RELAXED memory_order_relaxed

/* shm_tenants_create - see tenants.h. */
struct shm_tenants *
shm_tenants_create(void)
{
    struct shm_tenants *t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (t == MAP_FAILED)
        return NULL;
    atomic_store(&t->n, 1);
    return t;
}

/* shm_tenants_find - see tenants.h. */
uint32_t
shm_tenants_find(const struct shm_tenants *t, const char *name, size_t len)
{
    uint32_t n;

    if (t == NULL || len == 0 || len >= SHM_TENANT_NAME)
        return 0;
    n = atomic_load_explicit(&((struct shm_tenants *)t)->n,
                             memory_order_acquire);
    for (uint32_t i = 1; i < n && i < SHM_TENANTS_MAX; i++)
        if (memcmp(t->slot[i].name, name, len) == 0 &&
            t->slot[i].name[len] == '\0')
            return i;
    return 0;
}

/* shm_tenants_add - see tenants.h. */
int
shm_tenants_add(struct shm_tenants *t, const char *name)
{
    size_t len = strlen(name);
    uint32_t i = shm_tenants_find(t, name, len);
    uint32_t n = atomic_load(&t->n);

    if (i != 0)
        return (int)i;
    if (n >= SHM_TENANTS_MAX || len == 0 || len >= SHM_TENANT_NAME)
        return -ENOSPC;
    memcpy(t->slot[n].name, name, len + 1);
    atomic_store_explicit(&t->n, n + 1, memory_order_release);
    return (int)n;
}

/* shm_tenants_of_queue - see tenants.h. */
uint32_t
shm_tenants_of_queue(const struct shm_tenants *t, const char *name, size_t len)
{
    const char *sep = memchr(name, SHM_TENANT_SEP, len);

    return sep != NULL ? shm_tenants_find(t, name, (size_t)(sep - name)) : 0;
}

/* shm_tenants_charge - see tenants.h. */
void
shm_tenants_charge(struct shm_tenants *t, uint32_t idx, int64_t delta)
{
    if (t != NULL && idx != 0 && idx < SHM_TENANTS_MAX && delta != 0)
        atomic_fetch_add_explicit(&t->slot[idx].bytes, delta, RELAXED);
}

/* shm_tenants_bytes - see tenants.h. */
uint64_t
shm_tenants_bytes(const struct shm_tenants *t, uint32_t idx)
{
    int64_t b;

    if (t == NULL || idx == 0 || idx >= SHM_TENANTS_MAX)
        return 0;
    b = atomic_load_explicit(&((struct shm_tenants *)t)->slot[idx].bytes,
                             RELAXED);
    return b > 0 ? (uint64_t)b : 0;
}

#define NS_PER_MS 1000000ULL
#define NS_PER_S  1000000000ULL

/* A bucket of rate pushes as one time (GCRA): full_at is when it is full
 * again, each push moves it 1/rate s later, and a push fits while
 * full_at stays within a second of now, or when the bucket is full.  One
 * word changed by CAS, so every worker of the node takes from the same
 * bucket without a lock. */

/* push_ns - the time n pushes take at rate a second. */
static uint64_t
push_ns(uint32_t n, uint32_t rate)
{
    return (uint64_t)n * NS_PER_S / rate;
}

/* shm_tenants_take - see tenants.h. */
int
shm_tenants_take(struct shm_tenants *t, uint32_t idx, uint32_t n, uint32_t rate,
                 uint64_t now, uint64_t *wait_ms)
{
    uint64_t at = now * NS_PER_MS, cost, full_at;
    struct shm_tenant *s;

    *wait_ms = 0;
    if (t == NULL || idx == 0 || idx >= SHM_TENANTS_MAX || rate == 0)
        return 0;
    s = &t->slot[idx];
    cost = push_ns(n, rate);
    full_at = atomic_load_explicit(&s->full_at, RELAXED);
    for (;;) {
        if (full_at > at && full_at + cost > at + NS_PER_S) {
            /* It fits once the bucket holds n again, or is full when n
             * is more than it holds. */
            uint64_t ok =
                full_at + (cost < NS_PER_S ? cost : NS_PER_S) - NS_PER_S;
            *wait_ms = (ok - at + NS_PER_MS - 1) / NS_PER_MS;
            return -EAGAIN;
        }
        if (atomic_compare_exchange_weak_explicit(
                &s->full_at, &full_at, (full_at > at ? full_at : at) + cost,
                RELAXED, RELAXED))
            return 0;
    }
}

/* shm_tenants_untake - see tenants.h.  Giving back moves full_at earlier;
 * one before now is a full bucket (take starts from now). */
void
shm_tenants_untake(struct shm_tenants *t, uint32_t idx, uint32_t n,
                   uint32_t rate)
{
    struct shm_tenant *s;
    uint64_t cost, was;

    if (t == NULL || idx == 0 || idx >= SHM_TENANTS_MAX || rate == 0)
        return;
    s = &t->slot[idx];
    cost = push_ns(n, rate);
    was = atomic_load_explicit(&s->full_at, RELAXED);
    while (!atomic_compare_exchange_weak_explicit(
        &s->full_at, &was, was > cost ? was - cost : 0, RELAXED, RELAXED))
        ;
}
