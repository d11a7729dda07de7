/*
 * catalog.h - the declared-queue catalog: every declared queue's name and
 * options, published by the master into a shared mapping of its own and read
 * by workers without a lock.
 *
 * The master is the only writer.  After applying a committed declare or
 * delete it publishes the whole list again: shm_catalog_publish() builds the
 * spare of two copies (the entries, their names, and a minimal perfect hash
 * over the names packed by libcmph), then bumps the generation, as LMDB flips
 * between its two metas.  Readers take the copy the generation names; a
 * sequence word per copy (odd while the master rewrites it) tells a reader
 * whose copy changed under it to retry, so no reader ever returns a torn or
 * mixed entry, and a reader never waits for the master.
 *
 * The handle is process memory, like struct shm_seg: created by the master
 * before forking and inherited by every worker.  It keeps this process's
 * private copy of the current hash function: libcmph's packed search trusts
 * its input, so it must never run on bytes the master may be rewriting.
 *
 * Locking: none.  One handle serves one thread; any number of processes.
 * Errors: 0 or -errno.
 */
#ifndef MAYFLY_SHM_CATALOG_H
#define MAYFLY_SHM_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "shm/broker.h"
#include "shm/segment.h"

/* Declared queues a catalog holds at most. */
#define SHM_CATALOG_MAX_ENTRIES 4096

/* The mapping size whose two copies hold names_bytes of names each (a name
 * takes its length plus one); the fixed part is pinned in catalog.c. */
#define SHM_CATALOG_BYTES(names_bytes)                                         \
    ((size_t)622848 + 2 * (size_t)(names_bytes))

/* Room for SHM_CATALOG_MAX_ENTRIES names of the longest length, each with
 * a deadLetter name of the longest length (8.9 MiB).  Pages of the memfd
 * that are never touched cost nothing. */
#define SHM_CATALOG_DEFAULT_BYTES                                              \
    SHM_CATALOG_BYTES(SHM_CATALOG_MAX_ENTRIES * 2 * (SHM_NAME_MAX + 1))

struct shm_catalog;

/* One declared queue, as the master hands it to shm_catalog_publish(). */
struct shm_catalog_entry {
    const char *name; /* 1..SHM_NAME_MAX bytes, any bytes */
    size_t len;
    struct shm_qopts opts;
    const char *dl; /* its deadLetter queue's name, of
                       SHM_QOPT_DL_LEN(opts.flags) bytes (0: none) */
};

/*
 * shm_catalog_create - map a catalog of max_bytes (a memfd, MAP_SHARED)
 * holding the empty catalog at generation 0.  Master only, before forking.
 * Returns 0 and *out, or -EINVAL (max_bytes below
 * SHM_CATALOG_BYTES(SHM_NAME_MAX + 1) or above 4 GiB), -ENOMEM, or the
 * errno of memfd_create/ftruncate/mmap (logged).
 */
int shm_catalog_create(struct shm_catalog **out, size_t max_bytes);

/* shm_catalog_destroy - unmap and free; master only, after the workers
 * exit.  NULL is a no-op. */
void shm_catalog_destroy(struct shm_catalog *c);

/*
 * shm_catalog_publish - make entries[0..n) the catalog, under the next
 * generation.  When a name appears more than once, the last entry wins.
 * Master only (the one writer).  Readers keep seeing the previous
 * generation until this returns 0; on error nothing changed.
 * Errors: -EINVAL (a name of length 0 or over SHM_NAME_MAX), -EOVERFLOW
 * (more than SHM_CATALOG_MAX_ENTRIES names, or the names do not fit in
 * max_bytes), -ENOMEM, -EIO (libcmph could not build the hash; logged).
 */
int shm_catalog_publish(struct shm_catalog *c,
                        const struct shm_catalog_entry *entries, uint32_t n);

/*
 * shm_catalog_lookup - the options of declared queue name[0..len) into *out.
 * Returns 1 when declared, 0 when not (*out untouched).  Lock-free, O(1),
 * never fails and never blocks; safe against a concurrent publish.  Takes a
 * non-const handle because it refreshes this process's copy of the hash
 * function when the generation moved.
 */
int shm_catalog_lookup(struct shm_catalog *c, const char *name, size_t len,
                       struct shm_qopts *out);

/*
 * shm_catalog_dead_letter - the deadLetter queue of declared queue
 * name[0..len) into out (SHM_NAME_MAX bytes, not NUL-terminated).  Returns
 * its length, or 0 when the queue is not declared or has none.  Lock-free,
 * as shm_catalog_lookup.
 */
size_t shm_catalog_dead_letter(struct shm_catalog *c, const char *name,
                               size_t len, char *out);

/* shm_catalog_generation - the published generation: 0 at create, +1 per
 * publish.  A reader that saw it unchanged can keep what it derived. */
uint64_t shm_catalog_generation(const struct shm_catalog *c);

/*
 * shm_catalog_each - call fn once per declared queue of one generation, in
 * name order (bytes, shorter first), after copying that generation out:
 * fn never sees a mix of two.  name is NUL-terminated and valid only during
 * the call.  fn may call the lookups.  Returns 0 or -ENOMEM.
 */
int shm_catalog_each(const struct shm_catalog *c,
                     void (*fn)(void *arg, const char *name, size_t len,
                                const struct shm_qopts *o),
                     void *arg);

#endif
