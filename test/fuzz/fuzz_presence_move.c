/*
 * fuzz_presence_move.c - the presence hand-over record
 * (shm/presence_move.c) as a draining peer's master posts it to
 * /cluster/v1/adopt?presence=1: shm_presence_adopt() on a real table
 * checks the record whole and adopts it or changes nothing.  What it
 * adopts is taken back out, every channel into one record, which adopts
 * again with as many members; a join's merge of it (adopt_merge) makes
 * as many, again none, and the channels it names drop whole
 * (drop_moved); the table's derived structures agree with its records
 * throughout, and the channels are emptied for the next input.
 */
#include "shm/presence.h"
#include "shm/presence_move.h"
#include "shm/segment.h"
#include "test/fuzz/fuzz.h"

#define NOW   1000000ULL /* ms: a "now" far from zero */
#define GRACE 15000

static struct shm_seg seg;

/* consistent - the table's check passes. */
static void
consistent(const char *when)
{
    const char *why = NULL;

    FUZZ_CHECK(shm_presence_check(&seg, &why) == 0, "%s: %s", when,
               why ? why : "?");
}

/* take_all - every channel of the table into rec; the members taken. */
static uint64_t
take_all(struct shm_pm_rec *rec)
{
    struct shm_pres_names names;
    uint64_t n = 0;

    FUZZ_CHECK(shm_presence_channels(&seg, &names) == 0, "channels");
    for (uint32_t i = 0; i < names.n; i++) {
        int rc = shm_presence_take(&seg, names.name[i], NULL, GRACE, NOW, rec);
        FUZZ_CHECK(rc > 0, "take: %d", rc);
        n += (uint64_t)rc;
    }
    shm_presence_names_free(&names);
    return n;
}

/* empty - every channel emptied (an import of nothing). */
static void
empty(void)
{
    struct shm_pres_names names;
    struct shm_pres_totals t;

    FUZZ_CHECK(shm_presence_channels(&seg, &names) == 0, "channels");
    for (uint32_t i = 0; i < names.n; i++)
        FUZZ_CHECK(
            shm_presence_import(&seg, names.name[i], NULL, 0, GRACE, NOW) == 0,
            "emptied");
    shm_presence_names_free(&names);
    shm_presence_totals(&seg, &t);
    FUZZ_CHECK(t.members == 0 && t.channels == 0, "%u members left", t.members);
}

/* merged - a join's hand-over of the same record (adopted whole, so
 * checked) into the empty table (this node's keys left out), then merged
 * again: that makes no member; dropped as moved it leaves the table
 * empty; the table agrees with its records throughout. */
static void
merged(const uint8_t *data, size_t size)
{
    struct shm_pres_totals t;
    uint32_t members = 0;
    int n;

    for (int round = 0; round < 2; round++) {
        n = shm_presence_adopt_merge(&seg, data, size, "n1/", GRACE, NOW);
        FUZZ_CHECK(n >= 0, "merge %d: %d", round, n);
        consistent(round ? "merged again" : "merged");
        shm_presence_totals(&seg, &t);
        FUZZ_CHECK(round == 0 || t.members == members,
                   "merged again: %u members, were %u", t.members, members);
        members = t.members;
    }
    n = shm_presence_drop_moved(&seg, data, size, NULL, NULL);
    FUZZ_CHECK(n >= 0 && (uint32_t)n == members, "dropped %d of %u", n,
               members);
    shm_presence_totals(&seg, &t);
    FUZZ_CHECK(t.members == 0, "%u members left after the drop", t.members);
    empty();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct shm_params p = {
        .max_bytes = 64 << 20,
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
    struct shm_presence_params pp = {
        .max_members = 1000,
        .max_data = 1024,
        .records = 4096,
        .channels = 256,
    };

    (void)argc;
    (void)argv;
    FUZZ_CHECK(shm_segment_create(&p, &seg) == 0, "segment");
    seg.presence = shm_presence_create(&pp);
    FUZZ_CHECK(seg.presence != NULL, "presence table");
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct shm_pm_rec rec = {0};
    struct shm_pres_totals t;
    int n = shm_presence_adopt(&seg, data, size, GRACE, NOW), again;
    uint64_t taken;

    if (n < 0) {
        FUZZ_CHECK(n == -EBADMSG, "adopt: %d", n);
        shm_presence_totals(&seg, &t);
        FUZZ_CHECK(t.members == 0, "a refused record left %u members",
                   t.members);
        return 0;
    }
    consistent("adopted");
    shm_presence_totals(&seg, &t);
    taken = take_all(&rec);
    FUZZ_CHECK(taken == t.members, "%u members, took %llu", t.members,
               (unsigned long long)taken);
    empty();
    if (rec.len > 0) {
        again = shm_presence_adopt(&seg, rec.buf, rec.len, GRACE, NOW);
        FUZZ_CHECK(again >= 0 && (uint64_t)again == taken,
                   "took %llu, adopted back %d", (unsigned long long)taken,
                   again);
        consistent("adopted back");
        empty();
    }
    shm_pm_rec_free(&rec);
    merged(data, size);
    return 0;
}
