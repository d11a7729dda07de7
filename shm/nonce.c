/*
 * nonce.c - the table of nonces taken (nonce.h).
 */
#include "shm/nonce.h"

#include <sys/mman.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "shm/lock.h"

#define WORDS (SHM_NONCE_WINDOW / 64)

/*
 * struct shm_nonce_slot - one sender (2080 bytes):
 *   off  size  field    protected by
 *     0     8  sender   the table lock; 0: free
 *     8     8  top      lock: the highest count taken
 *    16     8  last_ms  lock: when it last took one (shm_now_ms)
 *    24     8  pad
 *    32  2048  bits     lock: bit c % SHM_NONCE_WINDOW set when count c,
 *                       top - WINDOW < c <= top, was taken
 */
struct shm_nonce_slot {
    uint64_t sender;
    uint64_t top;
    uint64_t last_ms;
    uint64_t pad;
    uint64_t bits[WORDS];
};

/*
 * struct shm_nonces - the table (its own mapping):
 *   off  size  field    protected by
 *     0    40  lock     robust, pshared
 *    64     4  editing  lock: 1 + the slot being changed, 0 when none
 *                       (what the repair of a dead holder resets)
 *    72     -  slot[]   lock
 */
struct shm_nonces {
    pthread_mutex_t lock;
    unsigned char pad0[64 - sizeof(pthread_mutex_t)];
    uint32_t editing;
    uint32_t pad1;
    struct shm_nonce_slot slot[SHM_NONCE_SENDERS];
};
_Static_assert(offsetof(struct shm_nonces, editing) == 64, "shm_nonces");
_Static_assert(offsetof(struct shm_nonces, slot) == 72, "shm_nonces");
_Static_assert(sizeof(struct shm_nonce_slot) == 2080, "shm_nonce_slot");

struct shm_nonces *
shm_nonces_create(void)
{
    struct shm_nonces *t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int rc;

    if (t == MAP_FAILED)
        return NULL;
    if ((rc = shm_lock_init(&t->lock)) != 0) {
        munmap(t, sizeof(*t));
        errno = -rc;
        return NULL;
    }
    return t;
}

/* repair - a holder died changing a slot: it refuses every count up to
 * its top from now on, and counts above it as before. */
static void
repair(struct shm_seg *seg, void *arg)
{
    struct shm_nonces *t = arg;

    (void)seg;
    if (t->editing > 0 && t->editing <= SHM_NONCE_SENDERS)
        memset(t->slot[t->editing - 1].bits, 0xff, sizeof(t->slot[0].bits));
    t->editing = 0;
}

/* bit_test_set - count c's bit: was it set?  It is now. */
static int
bit_test_set(struct shm_nonce_slot *s, uint64_t c)
{
    uint64_t i = c % SHM_NONCE_WINDOW, m = 1ull << (i % 64);
    int was = (s->bits[i / 64] & m) != 0;

    s->bits[i / 64] |= m;
    return was;
}

/* slot_take - count seq in a held slot. */
static int
slot_take(struct shm_nonce_slot *s, uint64_t seq)
{
    if (seq > s->top) {
        if (seq - s->top >= SHM_NONCE_WINDOW)
            memset(s->bits, 0, sizeof(s->bits));
        else
            for (uint64_t c = s->top + 1; c < seq; c++)
                s->bits[(c % SHM_NONCE_WINDOW) / 64] &=
                    ~(1ull << (c % SHM_NONCE_WINDOW % 64));
        s->top = seq;
        bit_test_set(s, seq);
        return 0;
    }
    if (s->top - seq >= SHM_NONCE_WINDOW)
        return -ERANGE;
    return bit_test_set(s, seq) ? -EALREADY : 0;
}

/* find - sender's slot, or a free or idle one to give it; -1 when none. */
static int
find(struct shm_nonces *t, uint64_t sender, uint64_t now_ms, int *fresh)
{
    int spare = -1;

    for (int k = 0; k < SHM_NONCE_SENDERS; k++) {
        int i = (int)((sender + (uint64_t)k) % SHM_NONCE_SENDERS);
        struct shm_nonce_slot *s = &t->slot[i];
        if (s->sender == sender) {
            *fresh = 0;
            return i;
        }
        if (spare < 0 &&
            (s->sender == 0 || now_ms - s->last_ms > SHM_NONCE_IDLE_MS))
            spare = i;
        if (s->sender == 0)
            break; /* slots are never emptied: sender is not further on */
    }
    *fresh = 1;
    return spare;
}

int
shm_nonce_take(struct shm_seg *seg, struct shm_nonces *t, uint64_t sender,
               uint64_t seq, uint64_t now_ms)
{
    int rc, i, fresh;

    if (sender == 0)
        return -EINVAL;
    if ((rc = shm_lock(seg, &t->lock, repair, t)) != 0)
        return rc;
    i = find(t, sender, now_ms, &fresh);
    if (i < 0) {
        shm_unlock(&t->lock);
        return -ENOSPC;
    }
    struct shm_nonce_slot *s = &t->slot[i];
    t->editing = (uint32_t)i + 1;
    if (fresh) {
        memset(s, 0, sizeof(*s));
        s->sender = sender;
        s->top = seq;
        bit_test_set(s, seq);
        rc = 0;
    } else {
        rc = slot_take(s, seq);
    }
    if (rc == 0)
        s->last_ms = now_ms;
    t->editing = 0;
    shm_unlock(&t->lock);
    return rc;
}
