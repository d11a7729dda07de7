/*
 * fuzz_handover.c - the hand-over record (shm/part_move.c) as a peer's
 * master posts it to /cluster/v1/adopt: shm_part_adopt() on a real segment
 * checks the record whole and adopts it or changes nothing.  What it adopts
 * is taken back out (emptying the partition for the next input; at most
 * as many messages: the queue conflates, so a keyed one may have given
 * way), and that record adopts again with as many messages.
 */
#include "shm/part_move.h"
#include "shm/queue_admin.h"
#include "shm/segment.h"
#include "shm/stats.h"
#include "test/fuzz/fuzz.h"

#define NOW 1000000ULL /* ms: a "now" far from zero */
#define W   SHM_STATS_MASTER

static struct shm_seg seg;
static unsigned char rec[4 << 20];

/* name - a shm_name of a literal. */
static struct shm_name
name(const char *s)
{
    return (struct shm_name){s, strlen(s)};
}

/* take - empty (q, "p") into rec; the messages taken.  A record with no
 * message and no group adopts nothing and makes no partition: when
 * adopted is 0 and this process never made (q, "p"), there is none. */
static int
take(const char *q, int adopted, size_t *len)
{
    struct shm_ho_sink out = {.buf = rec, .cap = sizeof(rec)};
    int rc = shm_part_take(&seg, W, name(q), name("p"), NOW, &out);

    *len = out.used;
    if (rc == -ENOENT && adopted == 0)
        return 0;
    FUZZ_CHECK(rc >= 0, "take: %d", rc);
    return rc;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct shm_params p = {
        .max_bytes = 32 << 20,
        .workers = 2,
        .implicit_idle_s = 300,
        .incarnation = 77,
        .defaults = {.max_length = 10000,
                     .max_bytes = 16 << 20,
                     .lease_s = 30,
                     .retry_limit = 5},
        .queue_max_bytes = 16 << 20,
        .queue_max_length = 10000,
    };

    struct shm_qopts conflating = p.defaults;

    (void)argc;
    (void)argv;
    FUZZ_CHECK(shm_segment_create(&p, &seg) == 0, "segment");
    /* q conflates (SPEC §13): keyed messages give way to later ones as
     * they are adopted; q2, implicit, keeps every one it is given. */
    conflating.flags = SHM_QOPT_CONFLATE;
    FUZZ_CHECK(shm_queue_declare(&seg, W, name("q"), &conflating) == 0,
               "declare");
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int n = shm_part_adopt(&seg, W, name("q"), name("p"), data, size, NOW);
    int taken, again;
    size_t len;

    if (n < 0) {
        FUZZ_CHECK(n == -EBADMSG || n == -ENOBUFS || n == -EOVERFLOW,
                   "adopt: %d", n);
        return 0;
    }
    taken = take("q", n, &len);
    FUZZ_CHECK(taken <= n, "adopted %d, took %d", n, taken);
    if (len == 0)
        return 0; /* no partition was made: nothing to adopt back */
    again = shm_part_adopt(&seg, W, name("q2"), name("p"), rec, len, NOW);
    FUZZ_CHECK(again == taken, "took %d, adopted back %d", taken, again);
    take("q2", again, &len);
    return 0;
}
