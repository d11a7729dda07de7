/*
 * tenants.h - what each tenant of SPEC §10 holds on this node and how
 * fast it pushes, shared by the node's processes: the counters behind a
 * token's max_bytes (its tenant's share of the node's memory) and rate
 * (pushes a second).  Both are per node: a tenant may hold its share on
 * every node of a cluster.
 *
 * The table is a mapping of its own, made by the master before the first
 * fork (as the board is) and filled by the master with the tenants
 * the auth file names.  A slot once published keeps its name for the life
 * of the node (a HUP only appends), so the slot index a queue record
 * keeps (shm_queue.tenant, 0: none) stays good.  The counters change
 * atomically; nothing here takes a lock, so ring.c may charge a tenant
 * under a partition lock.
 */
#ifndef MAYFLY_SHM_TENANTS_H
#define MAYFLY_SHM_TENANTS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_TENANTS_MAX 1024
#define SHM_TENANT_NAME 72 /* 64 bytes and a NUL, padded */

/* What separates a tenant from the client's name in an internal queue
 * name: the same byte as http/names.h's HTTP_TENANT_SEP (worker/authz.c
 * checks that they agree). */
#define SHM_TENANT_SEP '\x1f'

/*
 * struct shm_tenant - one tenant's slot, 128 bytes.
 *   off  size  field    written by                        protected by
 *     0    72  name     the master, before n counts it    immutable once
 *                                                           published
 *    72     8  bytes    ring.c, as its partitions' bytes  atomic add
 *                         change (signed: a worker killed
 *                         between the two stores leaves it
 *                         off by that change: a batch, or
 *                         a wiped partition, until restart)
 *    80     8  full_at  the pushes that take from or give  atomic (CAS)
 *                         back to its rate's bucket: when
 *                         the bucket is full again, in ns
 *                         on shm_now_ms()'s clock (0: full)
 *    88    40  pad
 */
struct shm_tenant {
    char name[SHM_TENANT_NAME];
    _Atomic int64_t bytes;
    _Atomic uint64_t full_at;
    uint64_t pad[5];
};
_Static_assert(sizeof(struct shm_tenant) == 128, "shm_tenant layout");

/*
 * struct shm_tenants - the table.
 *   off  size  field  written by    protected by
 *     0     4  n      the master    release store, once the slot n - 1
 *                                     is written (slot 0 stays unused:
 *                                     tenant 0 is none)
 *    64  128K  slot   as above
 */
struct shm_tenants {
    _Atomic uint32_t n;
    uint32_t pad[15];
    struct shm_tenant slot[SHM_TENANTS_MAX];
};

/* shm_tenants_create - the zeroed table (n = 1); NULL with errno. */
struct shm_tenants *shm_tenants_create(void);

/* shm_tenants_add - master only: the slot of tenant name (1-64 bytes),
 * published now if it is new.  Its index, or -ENOSPC when full. */
int shm_tenants_add(struct shm_tenants *t, const char *name);

/* shm_tenants_find - the slot of the tenant name[0..len), or 0. */
uint32_t shm_tenants_find(const struct shm_tenants *t, const char *name,
                          size_t len);

/* shm_tenants_of_queue - the slot of the tenant an internal queue name
 * belongs to (t NULL, no tenant, or one not in the table: 0). */
uint32_t shm_tenants_of_queue(const struct shm_tenants *t, const char *name,
                              size_t len);

/* shm_tenants_charge - add delta bytes to slot idx (t NULL or idx 0:
 * nothing). */
void shm_tenants_charge(struct shm_tenants *t, uint32_t idx, int64_t delta);

/* shm_tenants_bytes - what slot idx holds on this node (0 for none). */
uint64_t shm_tenants_bytes(const struct shm_tenants *t, uint32_t idx);

/*
 * shm_tenants_take - take n pushes of slot idx from its rate's bucket at
 * time now (ms): a bucket of rate pushes, refilled at rate a second.  0
 * when they fit (taken); a batch larger than the bucket fits a full one
 * and leaves it in debt, so pushes after it wait until the debt is paid
 * back (a batch of any size can be pushed, at the rate on average).
 * -EAGAIN when they do not fit now (nothing taken), with *wait_ms the
 * time until they would.  rate 0 or idx 0: always 0.
 */
int shm_tenants_take(struct shm_tenants *t, uint32_t idx, uint32_t n,
                     uint32_t rate, uint64_t now, uint64_t *wait_ms);

/*
 * shm_tenants_untake - give back n pushes shm_tenants_take() took that
 * were refused after all (the queue was full): a refusal changes nothing.
 * Given back as soon as the refusal is known, the bucket is as if they
 * had never come.
 */
void shm_tenants_untake(struct shm_tenants *t, uint32_t idx, uint32_t n,
                        uint32_t rate);

#endif
