/*
 * status.c - publish and read the node status page (a seqlock).
 */
#include "shm/status.h"

#include <sys/mman.h>

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "shm/segment.h"

_Static_assert(offsetof(struct shm_status, beat) == 8, "shm_status layout");
_Static_assert(offsetof(struct shm_status, stale_ms) == 16,
               "shm_status layout");
_Static_assert(offsetof(struct shm_status, view) == 24, "shm_status layout");

struct shm_status *
shm_status_create(void)
{
    void *p = mmap(NULL, sizeof(struct shm_status), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void
shm_status_publish(struct shm_status *s, const struct shm_status_view *v)
{
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);

    atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(&s->view, v, sizeof(*v));
    atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

void
shm_status_read(const struct shm_status *s, struct shm_status_view *v)
{
    struct shm_status *m = (struct shm_status *)s;

    for (;;) {
        uint64_t a = atomic_load_explicit(&m->seq, memory_order_acquire);
        if (a & 1)
            continue;
        memcpy(v, &s->view, sizeof(*v));
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&m->seq, memory_order_relaxed) == a)
            return;
    }
}

int
shm_status_stopping(const struct shm_status *s)
{
    return __atomic_load_n(&s->view.stopping, __ATOMIC_RELAXED) != 0;
}

void
shm_status_beat(struct shm_status *s, uint64_t now, uint64_t stale_ms)
{
    atomic_store_explicit(&s->stale_ms, stale_ms, memory_order_relaxed);
    atomic_store_explicit(&s->beat, now, memory_order_relaxed);
}

int
shm_status_stale(const struct shm_status *s)
{
    struct shm_status *m = (struct shm_status *)s;
    uint64_t bound = atomic_load_explicit(&m->stale_ms, memory_order_relaxed);

    if (bound == 0)
        return 0;
    /* Read beat after the clock: a beat stored in between only makes the
     * difference negative, i.e. fresh. */
    uint64_t now = shm_now_ms();
    uint64_t beat = atomic_load_explicit(&m->beat, memory_order_relaxed);
    return now > beat && now - beat > bound;
}

const char *
shm_role_name(uint32_t role)
{
    switch (role) {
    case SHM_ROLE_LEADER:
        return "leader";
    case SHM_ROLE_CANDIDATE:
        return "candidate";
    default:
        return "follower";
    }
}
