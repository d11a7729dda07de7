/*
 * presence_move.h - presence channels moved between nodes (SPEC §12: a
 * SIGTERM hands the set over): shm_presence_take appends a channel's
 * members (shm_presence_export) to a binary record, and the next owner's
 * shm_presence_adopt checks the record whole, then makes each channel's
 * set what the record says (shm_presence_import), with no event.  The
 * master's drain carries the record over the cluster port
 * (master/presence.h); shm/ knows nothing of that.
 *
 * The record is native byte order (both ends run the same build), 8-byte
 * aligned throughout, and self-describing: magic and version first, then
 * counts, each checked by the decoder against the bytes that follow.
 * Deadlines travel as what is left of them (ms), never as clock readings.
 *
 *   struct shm_pm_hdr                          24 B
 *   nchan x  struct shm_pm_chan + name          8 B + name_len, padded to 8
 *            nmembers x struct shm_pm_member   48 B
 *                       + nconns x struct shm_pm_conn   80 B each
 *                       + key, padded to 8; data, padded to 8
 */
#ifndef MAYFLY_SHM_PRESENCE_MOVE_H
#define MAYFLY_SHM_PRESENCE_MOVE_H

#include <stddef.h>
#include <stdint.h>

#include "shm/broker.h"
#include "shm/presence.h"

struct shm_seg;

#define SHM_PM_MAGIC     0x4d50594du /* "MYPM" */
#define SHM_PM_VERSION   1
#define SHM_PM_DATA_MAX  (64u << 10) /* presence_max_data's own bound */
#define SHM_PM_TTL_MAX   86400000ull /* ttlSeconds' bound, in ms */
#define SHM_PM_GRACE_MAX 3600000ull  /* presence_grace_ms' bound */

/*
 * struct shm_pm_hdr - the record's head.
 *   off  size  field
 *     0     4  magic    SHM_PM_MAGIC
 *     4     4  version  SHM_PM_VERSION
 *     8     4  nchan    channels that follow
 *    12     4  pad      0
 *    16     8  size     bytes of the whole record, this header included
 */
struct shm_pm_hdr {
    uint32_t magic;
    uint32_t version;
    uint32_t nchan;
    uint32_t pad;
    uint64_t size;
};
_Static_assert(sizeof(struct shm_pm_hdr) == 24, "shm_pm_hdr layout");

/*
 * struct shm_pm_chan - one channel; its presence name (name_len bytes,
 * 1..SHM_NAME_MAX) follows, zero-padded to 8, then its members.
 *   off  size  field
 *     0     4  name_len
 *     4     4  nmembers
 */
struct shm_pm_chan {
    uint32_t name_len;
    uint32_t nmembers;
};
_Static_assert(sizeof(struct shm_pm_chan) == 8, "shm_pm_chan layout");

/*
 * struct shm_pm_member - one member; nconns struct shm_pm_conn follow,
 * then its key (1..SHM_PRES_MEMBER_MAX bytes) and data (0..SHM_PM_DATA_MAX,
 * 0: none), each zero-padded to 8.
 *   off  size  field
 *     0     4  key_len
 *     4     4  data_len
 *     8     4  nconns     <= SHM_PRES_NODES
 *    12     4  pad        0
 *    16     8  since      wall clock ms of its enter (shown only)
 *    24     8  version    bumped on each change of its data
 *    32     8  ttl_ms     a call member's ttl left (<= SHM_PM_TTL_MAX)
 *    40     8  grace_ms   its grace's time left (<= SHM_PM_GRACE_MAX)
 */
struct shm_pm_member {
    uint32_t key_len;
    uint32_t data_len;
    uint32_t nconns;
    uint32_t pad;
    uint64_t since;
    uint64_t version;
    uint64_t ttl_ms;
    uint64_t grace_ms;
};
_Static_assert(sizeof(struct shm_pm_member) == 48, "shm_pm_member layout");

/*
 * struct shm_pm_conn - a member's connections under one key ("<node
 * id>/<worker slot>").
 *   off  size  field
 *     0     4  n        connections (>= 1)
 *     4     4  key_len  1..SHM_PRES_NODE_ID - 1
 *     8    72  key      the key, NUL-terminated at key_len
 */
struct shm_pm_conn {
    uint32_t n;
    uint32_t key_len;
    char key[SHM_PRES_NODE_ID];
};
_Static_assert(sizeof(struct shm_pm_conn) == 80, "shm_pm_conn layout");

/* A record being built: malloc'd, grown as channels are appended. */
struct shm_pm_rec {
    unsigned char *buf;
    size_t len, cap;
    uint32_t nchan;   /* channels in it */
    uint64_t members; /* members in it */
};

/*
 * shm_presence_take - append channel's members to rec (started on the
 * first call), as shm_presence_export gives them (drop, grace_ms: its
 * words).  The table is left as it is (frozen by the caller).  The
 * members appended (0: none, nothing appended), or -ENOMEM, -ETIMEDOUT.
 */
int shm_presence_take(struct shm_seg *seg, struct shm_name channel,
                      const char *drop, uint64_t grace_ms, uint64_t now,
                      struct shm_pm_rec *rec);

/* shm_pm_rec_start - rec's header if it has none yet (a record of no
 * channel: a join's hand-over says "nothing of yours here" with it).
 * 0, or -ENOMEM. */
int shm_pm_rec_start(struct shm_pm_rec *rec);

/* shm_pm_rec_free - free what rec holds. */
void shm_pm_rec_free(struct shm_pm_rec *rec);

/*
 * shm_presence_adopt - check the record (rec, len) whole, then import
 * each of its channels (shm_presence_import, grace_ms its word): the
 * members the channels hold after, summed; -EBADMSG for a malformed or
 * truncated record (nothing changed); -ENOMEM; -ESHUTDOWN (this table is
 * frozen: it is handed over itself) or -ETIMEDOUT before the first
 * channel (nothing changed) or at a later one (those before it adopted).
 */
int shm_presence_adopt(struct shm_seg *seg, const void *rec, size_t len,
                       uint64_t grace_ms, uint64_t now);

/*
 * shm_presence_adopt_merge - as shm_presence_adopt, each channel merged
 * into what this node holds (shm_presence_merge, self its word) instead of
 * replacing it: a join's hand-over, from a node that held channels this
 * node owns now.
 */
int shm_presence_adopt_merge(struct shm_seg *seg, const void *rec, size_t len,
                             const char *self, uint64_t grace_ms, uint64_t now);

/*
 * shm_presence_drop_moved - the channels of a record (rec, len) that their
 * owner took go from this table (shm_presence_drop_channel), but those
 * keep (may be NULL) says 1 of (ownership came back meanwhile).  The
 * members dropped; -EBADMSG (nothing dropped), -ETIMEDOUT (those before
 * dropped).
 */
int shm_presence_drop_moved(struct shm_seg *seg, const void *rec, size_t len,
                            int (*keep)(void *arg, struct shm_name channel),
                            void *arg);

#endif
