/*
 * inbox.c - request/reply's share of the segment: withdrawing a request
 * nobody read (it is dropped there and then: ring.c unlinks it), and
 * telling whether anybody listens (SPEC §9).
 */
#include "shm/inbox.h"

#include <errno.h>
#include <string.h>

#include "shm/broker_int.h"
#include "shm/dir.h"
#include "shm/lock.h"
#include "shm/ring.h"

/* lock_part - lock (queue, part), creating nothing.  0, or -1 when it
 * is not held here. */
static int
lock_part(struct shm_seg *seg, int worker, struct shm_name queue,
          struct shm_name part, uint64_t now, struct shm_ring_ctx *c)
{
    struct shm_ref qr, pr;

    if (shm_dir_find_queue(seg, worker, queue, 0, now, &qr) != 0 ||
        shm_dir_find_part(seg, worker, qr, part, 0, now, &pr) != 0 ||
        shm_part_lock_ctx(seg, worker, pr, shm_dir_queue(seg, qr.idx), now,
                          c) != 0)
        return -1;
    return 0;
}

/* lock_msg - lock (queue, part) and find message seq in it: its cell
 * (the one before it in *prev, 0: it is the head), or 0 (unlocked again)
 * when it is not held.  A request's partition is short (responders take
 * them as they come), so the walk from the head is too. */
static uint32_t
lock_msg(struct shm_seg *seg, int worker, struct shm_name queue,
         struct shm_name part, uint64_t seq, uint64_t now,
         struct shm_ring_ctx *c, uint32_t *prev)
{
    if (lock_part(seg, worker, queue, part, now, c) != 0)
        return 0;
    *prev = 0;
    for (uint32_t r = c->p->head; r != 0;) {
        struct shm_msg *m = shm_ring_msg(seg, r);
        if (m->seq == seq)
            return r;
        if (m->seq > seq)
            break;
        *prev = r;
        r = m->next;
    }
    shm_ring_unlock(c->p);
    return 0;
}

/* withdraw_locked - request r (after prev) gave up: dropped while no group
 * has read it or owes it (shm_ring_withdraw_locked: unlinked and freed, so
 * it leaves depth, bytes and the bounds at once); one still unread that a
 * lease owes (an adopt's first delivery) is marked as before, one store, and
 * every group passes it over.  1 when it was withdrawn unread. */
static int
withdraw_locked(struct shm_ring_ctx *c, uint32_t prev, uint32_t r)
{
    struct shm_msg *m = shm_ring_msg(c->seg, r);

    if (m->read != 0)
        return 0; /* read: its late reply is dropped with the inbox */
    if (shm_ring_withdraw_locked(c, prev, r))
        return 1;
    m->read = SHM_MSG_WITHDRAWN;
    return 1;
}

/* shm_withdraw - see inbox.h. */
int
shm_withdraw(struct shm_seg *seg, int worker, struct shm_name queue,
             struct shm_name part, uint64_t seq, uint64_t now)
{
    struct shm_ring_ctx c;
    uint32_t prev, r = lock_msg(seg, worker, queue, part, seq, now, &c, &prev);
    int withdrawn;

    if (r == 0)
        return 0;
    /* partition lock: unlinked in ring.c's order, or marked by one store. */
    withdrawn = withdraw_locked(&c, prev, r);
    shm_ring_unlock(c.p);
    return withdrawn;
}

/* shm_withdraw_reply - see inbox.h. */
int
shm_withdraw_reply(struct shm_seg *seg, int worker, struct shm_name queue,
                   struct shm_name part, struct shm_name inbox, uint64_t now)
{
    struct shm_ring_ctx c;
    char name[SHM_NAME_MAX];
    int withdrawn = 0;

    if (inbox.len == 0 || inbox.len > sizeof(name) ||
        lock_part(seg, worker, queue, part, now, &c) != 0)
        return 0;
    /* partition lock: a replyTo is immutable once linked; the request is
     * unlinked or marked as shm_withdraw's. */
    for (uint32_t r = c.p->head, prev = 0; r != 0;) {
        struct shm_msg *m = shm_ring_msg(seg, r);
        if (m->reply_len == inbox.len) {
            shm_arena_read(seg, r, SHM_MSG_HDR, name, inbox.len);
            if (memcmp(name, inbox.ptr, inbox.len) == 0) {
                withdrawn = withdraw_locked(&c, prev, r);
                break;
            }
        }
        prev = r;
        r = m->next;
    }
    shm_ring_unlock(c.p);
    return withdrawn;
}

/* shm_reply_to - see inbox.h. */
int
shm_reply_to(struct shm_seg *seg, int worker, struct shm_name queue,
             struct shm_name part, uint64_t seq, uint64_t now, char *buf,
             size_t cap)
{
    struct shm_ring_ctx c;
    uint32_t prev, r = lock_msg(seg, worker, queue, part, seq, now, &c, &prev);

    if (r == 0)
        return -ENOENT;
    /* partition lock: the replyTo is immutable once linked; copy it. */
    size_t n = shm_ring_msg(seg, r)->reply_len;
    if (n > cap)
        n = 0;
    shm_arena_read(seg, r, SHM_MSG_HDR, buf, n);
    shm_ring_unlock(c.p);
    return (int)n;
}

/* shm_responders - see inbox.h. */
int
shm_responders(struct shm_seg *seg, int worker, struct shm_name queue,
               struct shm_name part, uint64_t now, uint64_t idle_ms)
{
    struct shm_ref qr, pr;

    if (shm_dir_find_queue(seg, worker, queue, 0, now, &qr) != 0)
        return 0;
    /* A pop of the whole queue, parked or recent, serves any partition. */
    if (shm_dir_parked_sum(seg, 0, qr.idx) > 0 ||
        atomic_load(&shm_dir_queue(seg, qr.idx)->any_popped) + idle_ms > now)
        return 1;
    if (shm_dir_find_part(seg, worker, qr, part, 0, now, &pr) != 0)
        return 0;
    return shm_dir_parked_sum(seg, 1, pr.idx) > 0 ||
           atomic_load(&shm_dir_part(seg, pr.idx)->popped) + idle_ms > now;
}
