/*
 * segment.c - create, lay out and map the shared segment (segment.h).
 *
 * The master calls shm_segment_create() once before forking: memfd_create,
 * ftruncate, one mmap(MAP_SHARED) that is never resized nor unmapped while
 * workers live, then each region owner initialises its part of the zeroed
 * mapping.  Pages are allocated on first touch only, so a large arena costs
 * nothing until used.  Locking: none here; the params copies are published
 * with a generation word (layout.h).  Errors: 0 or -errno.
 */
#include "shm/segment.h"

#include <sys/eventfd.h>
#include <sys/mman.h>

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shm/due.h"
#include "shm/layout.h"
#include "shm/log.h"
#include "shm/region.h"

#define SHM_ALIGN(x) (((x) + 63) & ~(size_t)63)

/* segment_params_valid - can a segment be sized from p? */
static int
segment_params_valid(const struct shm_params *p)
{
    uint64_t cells = p->max_bytes / 64;

    return p->workers >= 1 && p->workers < SHM_MAX_WORKERS && cells >= 1 &&
           cells < UINT32_MAX - 1;
}

/* segment_layout - place the regions after the header; returns total size. */
static size_t
segment_layout(const struct shm_params *p, uint64_t *off, uint64_t *size)
{
    size_t at = SHM_ALIGN(sizeof(struct shm_header));

    size[SHM_REGION_SLOTS] = SHM_ALIGN(shm_slots_region_size(p));
    size[SHM_REGION_DIR] = SHM_ALIGN(shm_dir_region_size(p));
    size[SHM_REGION_ARENA] = SHM_ALIGN(shm_arena_region_size(p));
    for (int i = 0; i < SHM_REGION_COUNT; i++) {
        off[i] = at;
        at += size[i];
    }
    long page = sysconf(_SC_PAGESIZE);
    return (at + (size_t)page - 1) & ~((size_t)page - 1);
}

/* segment_clear - nothing mapped, no descriptors (status and catalog are
 * the master's own mappings: left alone). */
static void
segment_clear(struct shm_seg *seg)
{
    seg->base = NULL;
    seg->size = 0;
    seg->hdr = NULL;
    seg->cells = NULL;
    seg->memfd = -1;
    for (int i = 0; i < SHM_MAX_WORKERS; i++)
        seg->wake_fd[i] = -1;
}

/* segment_close - release whatever of seg is set; leaves seg empty. */
static void
segment_close(struct shm_seg *seg)
{
    if (seg->base != NULL && munmap(seg->base, seg->size) == -1)
        log_warn(errno, "munmap(%zu) failed", seg->size);
    if (seg->memfd >= 0)
        close(seg->memfd);
    for (int i = 0; i < SHM_MAX_WORKERS; i++)
        if (seg->wake_fd[i] >= 0)
            close(seg->wake_fd[i]);
    segment_clear(seg);
}

/* segment_map - memfd, size, map: the zeroed mapping in seg. */
static int
segment_map(struct shm_seg *seg, size_t size)
{
    seg->memfd = memfd_create("mayfly", MFD_CLOEXEC);
    if (seg->memfd == -1) {
        log_error(errno, "memfd_create(mayfly) failed");
        return -errno;
    }
    if (ftruncate(seg->memfd, (off_t)size) == -1) {
        log_error(errno, "ftruncate(memfd, %zu) failed", size);
        return -errno;
    }
    void *base =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg->memfd, 0);
    if (base == MAP_FAILED) {
        log_error(errno, "mmap(MAP_SHARED, %zu) failed", size);
        return -errno;
    }
    seg->base = base;
    seg->size = size;
    seg->hdr = base;
    return 0;
}

/* segment_init_regions - each owner initialises its region. */
static int
segment_init_regions(struct shm_seg *seg, const struct shm_params *p)
{
    int rc;

    if ((rc = shm_slots_region_init(seg, p)) != 0 ||
        (rc = shm_dir_region_init(seg, p)) != 0 ||
        (rc = shm_arena_region_init(seg, p)) != 0)
        log_error(-rc, "segment region init failed");
    return rc;
}

/* shm_segment_create - see segment.h.  -EINVAL for unusable params. */
int
shm_segment_create(const struct shm_params *p, struct shm_seg *out)
{
    uint64_t off[SHM_REGION_COUNT], size[SHM_REGION_COUNT];
    int rc;

    segment_clear(out);
    if (!segment_params_valid(p))
        return -EINVAL;
    size_t total = segment_layout(p, off, size);
    if ((rc = segment_map(out, total)) != 0)
        goto fail;
    struct shm_header *h = out->hdr;
    h->version = SHM_VERSION;
    h->size = total;
    memcpy(h->region_off, off, sizeof(off));
    memcpy(h->region_size, size, sizeof(size));
    h->params[0] = *p;
    for (uint32_t i = 0; i < p->workers; i++) {
        out->wake_fd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (out->wake_fd[i] == -1) {
            rc = -errno;
            log_error(errno, "eventfd(worker %u) failed", i);
            goto fail;
        }
    }
    if ((rc = segment_init_regions(out, p)) != 0)
        goto fail;
    h->magic = SHM_MAGIC;
    return 0;
fail:
    segment_close(out);
    return rc;
}

/* shm_segment_destroy - see segment.h. */
void
shm_segment_destroy(struct shm_seg *seg)
{
    segment_close(seg);
}

/*
 * shm_segment_set_defaults - see segment.h.  What a HUP may change: the
 * implicit-queue defaults, the declaration ceilings and implicit_idle_s.  The
 * segment's size and worker count were fixed at create and stay.
 */
void
shm_segment_set_defaults(struct shm_seg *seg, const struct shm_params *p)
{
    struct shm_header *h = seg->hdr;
    uint32_t gen = atomic_load_explicit(&h->params_gen, memory_order_relaxed);
    struct shm_params *spare = &h->params[(gen + 1) & 1];

    *spare = h->params[gen & 1];
    /* A shorter idle time makes queues due before their heap entries say. */
    int sooner = p->implicit_idle_s < spare->implicit_idle_s;
    spare->defaults = p->defaults;
    spare->implicit_idle_s = p->implicit_idle_s;
    spare->queue_max_bytes = p->queue_max_bytes;
    spare->queue_max_length = p->queue_max_length;
    atomic_store_explicit(&h->params_gen, gen + 1, memory_order_release);
    if (sooner)
        shm_due_all(seg);
}
