/*
 * segment.h - the shared segment: one memfd mapping created by the master
 * before the first fork and inherited by every worker at the same address.
 *
 * Structures inside refer to each other by offset (or cell index), never by
 * pointer.  The segment is never resized or unmapped while workers live.
 *
 * Regions, in order (each 64-byte aligned; offsets recorded in the header,
 * region.h):
 *   header     magic, version, sizes, node settings, region offsets
 *   slots      SHM_MAX_WORKERS per-worker slots (pid, heartbeat, counters,
 *              arena cache, wake queue), 64-byte padded (slot.h)
 *   dir        queue and partition tables, the name index, parked-pop
 *              counts and the due heap (dir.h, due.h)
 *   arena      the cell arena: payloads, names, groups, leases (cells of
 *              SHM_CELL_BYTES) plus one tag word per cell (arena.h)
 * Untouched table slots and cells cost no memory: a memfd page is allocated
 * on first touch.
 */
#ifndef MAYFLY_SHM_SEGMENT_H
#define MAYFLY_SHM_SEGMENT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct shm_board;
struct shm_catalog;
struct shm_tenants;
struct shm_presence;

#define SHM_MAX_WORKERS 64
#define SHM_MAGIC       0x4d41594655594d31ULL /* "MAYFLYM1" */
#define SHM_VERSION     1

/* The bounds a queue runs with: node defaults or a declaration. */
struct shm_qopts {
    uint32_t max_length;     /* messages held on this node */
    uint32_t policy;         /* SHM_POLICY_REJECT or SHM_POLICY_DROP_OLDEST */
    uint64_t max_bytes;      /* accounted bytes held on this node */
    uint32_t ttl_s;          /* 0 = none */
    uint32_t lease_s;        /* lease length */
    uint32_t retry_limit;    /* attempts before a drop */
    uint32_t window_ms;      /* windowBuffer; 0 = off */
    uint32_t window_count;   /* windowBuffer; 0 = off */
    uint32_t dedupe_s;       /* dedupeSeconds (SPEC §13); 0 = off */
    uint32_t retry_delay_ms; /* retryDelayMs: a retry ack's default delay */
    uint32_t flags;          /* SHM_QOPT_*: the dead-letter queue's name length
                                (its bytes are the catalog's), and bits */
};

/* shm_qopts.flags: bits 0-9 the length of the deadLetter queue's name (0:
 * none; the name itself sits in the catalog beside the queue's, catalog.h),
 * then one bit per boolean option. */
#define SHM_QOPT_DL_LEN(f)  ((f)&0x3ffu)
#define SHM_QOPT_DL_EXPIRED (1u << 16) /* deadLetterExpired */
#define SHM_QOPT_CONFLATE   (1u << 17) /* conflate (SPEC §13) */

#define SHM_POLICY_REJECT      0
#define SHM_POLICY_DROP_OLDEST 1

/* What the master sizes the segment from (master/config.c fills it). */
struct shm_params {
    uint64_t max_bytes;        /* node cap on accounted bytes */
    uint32_t workers;          /* worker slots in use, <= SHM_MAX_WORKERS */
    uint32_t implicit_idle_s;  /* idle time before collection */
    uint64_t incarnation;      /* this node's incarnation (ids carry it) */
    struct shm_qopts defaults; /* what an implicit queue gets */
    uint64_t queue_max_bytes;  /* ceilings a declaration may not exceed */
    uint32_t queue_max_length;
};

/*
 * struct shm_seg - a process's handle on the segment (process memory, not
 * shared).  Every process has one, filled by shm_segment_create() in the
 * master and inherited over fork().
 */
struct shm_seg {
    unsigned char *base;    /* start of the mapping */
    size_t size;            /* bytes mapped */
    struct shm_header *hdr; /* == base */
    unsigned char *cells;   /* arena cell 0 (set by the arena's init) */
    int memfd;
    int wake_fd[SHM_MAX_WORKERS]; /* eventfd per worker slot, made by master */
    /* Mappings of their own, made by the master before forking (NULL until
     * then): the node's board, the declared-queue catalog and the
     * tenants' counters, the nonces of the signed calls taken. */
    struct shm_board *board;
    struct shm_catalog *catalog;
    struct shm_tenants *tenants;   /* per-tenant counters (tenants.h); NULL:
                                    no auth_file, nothing counted */
    struct shm_nonces *nonces;     /* signed calls taken (nonce.h) */
    struct shm_presence *presence; /* presence channels (presence.h) */
};

/*
 * shm_segment_create - size, create, map and initialise the segment, and one
 * eventfd per worker slot.  Master only, before forking.  Returns 0 or -errno.
 */
int shm_segment_create(const struct shm_params *p, struct shm_seg *out);

/* shm_segment_destroy - unmap and close; master only, after workers exit. */
void shm_segment_destroy(struct shm_seg *seg);

/* shm_segment_set_defaults - publish new node defaults (HUP).  Master only. */
void shm_segment_set_defaults(struct shm_seg *seg, const struct shm_params *p);

/* shm_now_ms - CLOCK_MONOTONIC in ms: every time stored in the segment. */
static inline uint64_t
shm_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* shm_now_us - the same clock in microseconds (vDSO: no system call). */
static inline uint64_t
shm_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#endif
