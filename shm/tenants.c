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

/* shm_tenants_take - see tenants.h.  A second is a window of its own: the
 * first push of a new second resets the count (a push racing with the
 * reset may go uncounted: the bound is a rate, not an exact sum). */
int
shm_tenants_take(struct shm_tenants *t, uint32_t idx, uint32_t n, uint32_t rate,
                 uint64_t now)
{
    struct shm_tenant *s;
    uint64_t sec = now / 1000, was;

    if (t == NULL || idx == 0 || idx >= SHM_TENANTS_MAX || rate == 0)
        return 0;
    s = &t->slot[idx];
    was = atomic_load_explicit(&s->second, RELAXED);
    if (was != sec && atomic_compare_exchange_strong(&s->second, &was, sec))
        atomic_store_explicit(&s->pushed, 0, RELAXED);
    if (atomic_fetch_add_explicit(&s->pushed, n, RELAXED) + n > rate) {
        atomic_fetch_sub_explicit(&s->pushed, n, RELAXED);
        return -EAGAIN;
    }
    return 0;
}

/* shm_tenants_untake - see tenants.h.  The count never goes below 0: a
 * new second's reset may have come between take and untake. */
void
shm_tenants_untake(struct shm_tenants *t, uint32_t idx, uint32_t n,
                   uint32_t rate, uint64_t now)
{
    struct shm_tenant *s;
    uint64_t was;

    if (t == NULL || idx == 0 || idx >= SHM_TENANTS_MAX || rate == 0)
        return;
    s = &t->slot[idx];
    if (atomic_load_explicit(&s->second, RELAXED) != now / 1000)
        return;
    was = atomic_load_explicit(&s->pushed, RELAXED);
    while (
        !atomic_compare_exchange_weak(&s->pushed, &was, was > n ? was - n : 0))
        ;
}
