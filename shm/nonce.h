/*
 * nonce.h - the nonces of the signed calls a node has taken (http/sign.h),
 * shared by its master (cluster port) and workers (client port), so that a
 * call replayed to any of them is refused.
 *
 * A nonce is a sender -- one process of some node, 64 random bits, never
 * 0 -- and a count that sender raises with every call.  Per sender the
 * table keeps the highest count taken and which of the SHM_NONCE_WINDOW
 * counts up to it were taken: a count in that window is taken once, one
 * below it is refused (too old to tell; calls on different connections
 * arrive a little out of order: a large body read while thousands of small
 * calls from the same sender pass it, at most).  A sender that took
 * nothing for SHM_NONCE_IDLE_MS gives its slot up: every call it signed
 * is outside the timestamp window by then (twice HTTP_SIGN_WINDOW_S, as
 * two nodes' clocks may differ by one window, plus a margin).  Memory is
 * bounded whatever the call rate: SHM_NONCE_SENDERS live senders at most
 * (17 nodes of 65 processes fit; 4.3 MB, touched as senders come).
 *
 * A separate shared mapping made by the master before it forks, under one
 * robust lock (a holder that dies mid-change leaves the slot it changed
 * refusing every count in its window: rather refuse a call than take a
 * replay).  Errors: 0 or -errno.
 */
#ifndef MAYFLY_SHM_NONCE_H
#define MAYFLY_SHM_NONCE_H

#include <stdint.h>

#define SHM_NONCE_SENDERS 2048
#define SHM_NONCE_WINDOW  16384 /* counts per sender */
#define SHM_NONCE_IDLE_MS 65000

struct shm_nonces;
struct shm_seg;

/* shm_nonces_create - the table, empty, in a shared mapping of its own
 * that lives as long as the process (the master's, inherited by its
 * workers); NULL with errno on failure. */
struct shm_nonces *shm_nonces_create(void);

/*
 * shm_nonce_take - take count seq of sender at now_ms (shm_now_ms): 0,
 * -EALREADY (taken before: a replay), -ERANGE (below the sender's window),
 * -EINVAL (sender 0), -ENOSPC (every slot held by a live sender),
 * -ETIMEDOUT (the master's wait for the lock reached its bound, lock.h:
 * a worker holds it, stopped or spinning; the call is refused and its
 * sender sends it again).  seg is for the repair count only (may be NULL).
 */
int shm_nonce_take(struct shm_seg *seg, struct shm_nonces *t, uint64_t sender,
                   uint64_t seq, uint64_t now_ms);

#endif
