/*
 * board.c - publish and read the master's board (a seqlock latch).
 */
#include "shm/board.h"

#include <sys/mman.h>

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "shm/segment.h"

_Static_assert(offsetof(struct shm_board, beat) == 8, "shm_status layout");
_Static_assert(offsetof(struct shm_board, stale_ms) == 16, "shm_status layout");
_Static_assert(offsetof(struct shm_board, view) == 24, "shm_status layout");

struct shm_board *
shm_board_create(void)
{
    void *p = mmap(NULL, sizeof(struct shm_board), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* A latch (two copies): seq odd, readers take copy 1 while copy 0 is
 * written; seq even, copy 0 while copy 1 is.  A master stopped anywhere
 * in here leaves one whole copy to read. */
void
shm_board_publish(struct shm_board *s, const struct shm_board_view *v)
{
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);

    atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(&s->view[0], v, sizeof(*v));
    atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
    atomic_thread_fence(memory_order_release);
    memcpy(&s->view[1], v, sizeof(*v));
}

void
shm_board_read(const struct shm_board *s, struct shm_board_view *v)
{
    struct shm_board *m = (struct shm_board *)s;

    for (;;) {
        uint64_t a = atomic_load_explicit(&m->seq, memory_order_acquire);
        memcpy(v, &s->view[a & 1], sizeof(*v));
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&m->seq, memory_order_relaxed) == a)
            return;
    }
}

int
shm_board_stopping(const struct shm_board *s)
{
    struct shm_board *m = (struct shm_board *)s;
    uint64_t a = atomic_load_explicit(&m->seq, memory_order_acquire);

    return __atomic_load_n(&s->view[a & 1].stopping, __ATOMIC_RELAXED) != 0;
}

void
shm_board_beat(struct shm_board *s, uint64_t now, uint64_t stale_ms)
{
    atomic_store_explicit(&s->stale_ms, stale_ms, memory_order_relaxed);
    atomic_store_explicit(&s->beat, now, memory_order_relaxed);
}

int
shm_board_stale(const struct shm_board *s)
{
    struct shm_board *m = (struct shm_board *)s;
    uint64_t bound = atomic_load_explicit(&m->stale_ms, memory_order_relaxed);

    if (bound == 0)
        return 0;
    /* Read beat after the clock: a beat stored in between only makes the
     * difference negative, i.e. fresh. */
    uint64_t now = shm_now_ms();
    uint64_t beat = atomic_load_explicit(&m->beat, memory_order_relaxed);
    return now > beat && now - beat > bound;
}

_Static_assert(SHM_BOARD_MEMBERS <= 64, "a member a bit of suspects");

void
shm_board_suspect(struct shm_board *s, uint32_t i, uint64_t now)
{
    if (i >= SHM_BOARD_MEMBERS)
        return;
    atomic_store_explicit(&s->suspect[i], now + SHM_SUSPECT_MS,
                          memory_order_relaxed);
    atomic_fetch_or_explicit(&s->suspects, (uint64_t)1 << i,
                             memory_order_release);
}

void
shm_board_unsuspect(struct shm_board *s, uint32_t i)
{
    if (i >= SHM_BOARD_MEMBERS)
        return;
    /* The mask's bit stays: the word says 0, which is no suspicion, and
     * a later mark needs the bit again (no race between two workers). */
    atomic_store_explicit(&s->suspect[i], 0, memory_order_relaxed);
}

uint64_t
shm_board_suspects(const struct shm_board *s)
{
    struct shm_board *m = (struct shm_board *)s;
    uint64_t set = atomic_load_explicit(&m->suspects, memory_order_acquire);
    uint64_t on = 0, now = set != 0 ? shm_now_ms() : 0;

    for (uint32_t i = 0; set != 0 && i < SHM_BOARD_MEMBERS; i++, set >>= 1)
        if ((set & 1) &&
            atomic_load_explicit(&m->suspect[i], memory_order_relaxed) > now)
            on |= (uint64_t)1 << i;
    return on;
}

void
shm_board_standin(struct shm_board *s, uint64_t now)
{
    /* Stored only when it moves: a stand-in per request writes the line
     * once a millisecond at most. */
    if (atomic_load_explicit(&s->standin, memory_order_relaxed) < now)
        atomic_store_explicit(&s->standin, now, memory_order_relaxed);
}

uint64_t
shm_board_standin_at(const struct shm_board *s)
{
    return atomic_load_explicit(&((struct shm_board *)s)->standin,
                                memory_order_relaxed);
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
