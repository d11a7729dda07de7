/*
 * test_segment.c - the segment: header, region placement, published
 * defaults, eventfds, and that untouched memory is never paged in.
 */
#include <sys/wait.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/arena.h"
#include "shm/layout.h"
#include "shm/region.h"
#include "shm/segment.h"
#include "test/shm/fixture.h"

/* rss_kib - this process's resident set (VmRSS), KiB. */
static long
rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");

    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

Test(shm_segment, create_writes_header_and_params)
{
    struct shm_params p = fixture_params(1 << 20, 4, 77);
    struct shm_seg seg;

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    cr_assert_eq(seg.hdr->magic, SHM_MAGIC);
    cr_assert_eq(seg.hdr->version, SHM_VERSION);
    cr_assert_eq(seg.hdr->size, seg.size);
    cr_assert_eq((void *)seg.hdr, (void *)seg.base);
    cr_assert_eq(memcmp(shm_params_of(&seg), &p, sizeof(p)), 0);
    for (uint32_t i = 0; i < SHM_MAX_WORKERS; i++)
        cr_assert_eq(seg.wake_fd[i] >= 0, i < p.workers);
    shm_segment_destroy(&seg);
    cr_assert_null(seg.base);
}

Test(shm_segment, regions_are_aligned_and_disjoint)
{
    struct shm_params p = fixture_params(8 << 20, 4, 77);
    struct shm_seg seg;

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    uint64_t end = sizeof(struct shm_header);
    for (int r = 0; r < SHM_REGION_COUNT; r++) {
        uint64_t off = seg.hdr->region_off[r];
        cr_assert_eq(off % 64, 0, "region %d at %lu", r, (unsigned long)off);
        cr_assert_geq(off, end, "region %d overlaps the one before", r);
        cr_assert_eq((unsigned char *)shm_region(&seg, r), seg.base + off);
        end = off + seg.hdr->region_size[r];
    }
    cr_assert_leq(end, seg.size);
    cr_assert_geq(seg.hdr->region_size[SHM_REGION_ARENA],
                  p.max_bytes + p.max_bytes / 16);
    /* Each cell is one cache line; the last one is writable. */
    cr_assert_eq((uintptr_t)shm_cell(&seg, 1) % 64, 0);
    cr_assert_eq((unsigned char *)shm_cell(&seg, 2) -
                     (unsigned char *)shm_cell(&seg, 1),
                 SHM_CELL_BYTES);
    uint32_t last = (uint32_t)(p.max_bytes / SHM_CELL_BYTES);
    memset(shm_cell(&seg, last), 0xab, SHM_CELL_BYTES);
    shm_segment_destroy(&seg);
}

Test(shm_segment, unusable_params_are_einval)
{
    struct shm_seg seg;
    struct shm_params p = fixture_params(1 << 20, 4, 77);

    p.workers = 0;
    cr_assert_eq(shm_segment_create(&p, &seg), -EINVAL);
    p.workers = SHM_MAX_WORKERS;
    cr_assert_eq(shm_segment_create(&p, &seg), -EINVAL);
    p = fixture_params(32, 4, 77);
    cr_assert_eq(shm_segment_create(&p, &seg), -EINVAL);
}

Test(shm_segment, new_defaults_are_seen_by_a_child)
{
    struct shm_params p = fixture_params(1 << 20, 4, 77);
    struct shm_seg seg;

    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    const struct shm_params *before = shm_params_of(&seg);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        /* Wait (bounded) for the parent's second HUP. */
        for (int i = 0; i < 100000; i++) {
            const struct shm_params *q = shm_params_of(&seg);
            if (q->defaults.lease_s == 90)
                _exit(q->implicit_idle_s == 60 && q->max_bytes == 1 << 20 &&
                              q->incarnation == 77
                          ? 0
                          : 1);
            usleep(100);
        }
        _exit(2);
    }
    struct shm_params n = p;
    n.defaults.lease_s = 45;
    shm_segment_set_defaults(&seg, &n);
    cr_assert_eq(shm_params_of(&seg)->defaults.lease_s, 45);
    cr_assert_neq(shm_params_of(&seg), before);
    n.defaults.lease_s = 90;
    n.implicit_idle_s = 60;
    n.max_bytes = 1;   /* fixed at create: ignored */
    n.incarnation = 1; /* likewise */
    shm_segment_set_defaults(&seg, &n);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child saw %d",
              WEXITSTATUS(st));
    cr_assert_eq(shm_params_of(&seg)->max_bytes, 1 << 20);
    shm_segment_destroy(&seg);
}

Test(shm_segment, large_segment_costs_only_what_is_touched)
{
    struct shm_params p = fixture_params(4ULL << 30, 4, 77);
    struct shm_seg seg;

    long before = rss_kib();
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
    cr_assert_geq(seg.size, 4ULL << 30);
    uint32_t head;
    cr_assert_eq(shm_arena_alloc(&seg, 0, 100, &head), 0);
    shm_arena_write(&seg, head, 0, "x", 1);
    long after = rss_kib();
    cr_assert_lt(after - before, 16 * 1024, "RSS grew by %ld KiB",
                 after - before);
    shm_segment_destroy(&seg);
}

Test(shm_segment, now_ms_is_monotonic)
{
    uint64_t a = shm_now_ms();
    usleep(20000);
    uint64_t b = shm_now_ms();
    cr_assert_geq(b - a, 19);
    cr_assert_lt(b - a, 10000);
}
