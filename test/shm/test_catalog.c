/*
 * test_catalog.c - shm/catalog.c: publish and look up declared queues, the
 * limits, and a reader process racing thousands of publishes.
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/broker.h"
#include "shm/catalog.h"

/* Options that encode (version, index), so a mix of two is detectable. */
static struct shm_qopts
opts_of(uint32_t v, uint32_t i)
{
    return (struct shm_qopts){.max_length = v,
                              .policy = (v + i) & 1,
                              .max_bytes = ((uint64_t)v << 32) | i,
                              .ttl_s = v * 7 + i,
                              .lease_s = i,
                              .retry_limit = v ^ i,
                              .window_ms = v + i,
                              .window_count = i * 3};
}

/* Whether o is exactly opts_of(o->max_length, i). */
static int
opts_ok(const struct shm_qopts *o, uint32_t i)
{
    struct shm_qopts want = opts_of(o->max_length, i);

    return memcmp(o, &want, sizeof(want)) == 0;
}

/* names[i] = "queue-<i>" padded with '.' to a length that varies with i. */
struct names {
    char buf[SHM_CATALOG_MAX_ENTRIES][SHM_NAME_MAX];
    size_t len[SHM_CATALOG_MAX_ENTRIES];
};

static struct names *
names_make(uint32_t n, size_t pad_to)
{
    struct names *nm = malloc(sizeof(*nm));

    cr_assert_not_null(nm);
    for (uint32_t i = 0; i < n; i++) {
        size_t len = (size_t)snprintf(nm->buf[i], SHM_NAME_MAX, "queue-%u", i);

        if (pad_to > len) {
            memset(nm->buf[i] + len, '.', pad_to - len);
            len = pad_to;
        }
        nm->len[i] = len;
    }
    return nm;
}

static struct shm_catalog *
catalog_new(size_t bytes)
{
    struct shm_catalog *c = NULL;

    cr_assert_eq(shm_catalog_create(&c, bytes), 0);
    cr_assert_not_null(c);
    return c;
}

/* Publish names[i] for the i in [0, n) with keep(i, v), options of v. */
static int
publish(struct shm_catalog *c, const struct names *nm, uint32_t n, uint32_t v,
        int (*keep)(uint32_t i, uint32_t v))
{
    struct shm_catalog_entry *e = calloc(n ? n : 1, sizeof(*e));
    uint32_t m = 0;
    int rc;

    cr_assert_not_null(e);
    for (uint32_t i = 0; i < n; i++)
        if (keep == NULL || keep(i, v))
            e[m++] = (struct shm_catalog_entry){nm->buf[i], nm->len[i],
                                                opts_of(v, i), NULL};
    rc = shm_catalog_publish(c, e, m);
    free(e);
    return rc;
}

/* Look names[i] up: 1 with options checked against v, or 0. */
static int
lookup(struct shm_catalog *c, const struct names *nm, uint32_t i, uint32_t v)
{
    struct shm_qopts o;
    int found = shm_catalog_lookup(c, nm->buf[i], nm->len[i], &o);

    if (found)
        cr_assert(opts_ok(&o, i) && o.max_length == v,
                  "queue-%u: options of version %u, want %u", i, o.max_length,
                  v);
    return found;
}

Test(shm_catalog, publish_then_lookup_finds_each_entry)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    struct names *nm = names_make(100, 0);

    cr_assert_eq(shm_catalog_generation(c), 0);
    cr_assert_eq(publish(c, nm, 100, 1, NULL), 0);
    cr_assert_eq(shm_catalog_generation(c), 1);
    for (uint32_t i = 0; i < 100; i++)
        cr_assert_eq(lookup(c, nm, i, 1), 1, "queue-%u", i);
    free(nm);
    shm_catalog_destroy(c);
}

/*
 * A name never published still hashes somewhere, almost always to a slot in
 * use (CHD sends about 999 in 1000 absent names of a 1000-name set into
 * [0, n)), so these exercise the stored-name check, not just the range one.
 */
Test(shm_catalog, absent_names_are_not_found)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    struct names *nm = names_make(1000, 0);
    struct shm_qopts o, untouched;
    char name[64];

    cr_assert_eq(publish(c, nm, 1000, 1, NULL), 0);
    memset(&untouched, 0xa5, sizeof(untouched));
    for (uint32_t i = 1000; i < 21000; i++) {
        size_t len = (size_t)snprintf(name, sizeof(name), "queue-%u", i);

        o = untouched;
        cr_assert_eq(shm_catalog_lookup(c, name, len, &o), 0, "%s", name);
        cr_assert_eq(memcmp(&o, &untouched, sizeof(o)), 0);
    }
    /* Prefixes, extensions and near misses of names that are there. */
    cr_assert_eq(shm_catalog_lookup(c, "queue-1", 6, &o), 0);
    cr_assert_eq(shm_catalog_lookup(c, "queue-12x", 9, &o), 0);
    cr_assert_eq(shm_catalog_lookup(c, "queue-12\0", 9, &o), 0);
    cr_assert_eq(shm_catalog_lookup(c, "Queue-12", 8, &o), 0);
    cr_assert_eq(shm_catalog_lookup(c, "queue-12", 0, &o), 0);
    cr_assert_eq(shm_catalog_lookup(c, "queue-12", 8, &o), 1);
    free(nm);
    shm_catalog_destroy(c);
}

static int
keep_odd_only(uint32_t i, uint32_t v)
{
    return v == 1 || (i & 1) == 1;
}

Test(shm_catalog, republish_with_removals_forgets_the_removed)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    struct names *nm = names_make(300, 0);

    cr_assert_eq(publish(c, nm, 300, 1, keep_odd_only), 0);
    cr_assert_eq(publish(c, nm, 300, 2, keep_odd_only), 0);
    cr_assert_eq(shm_catalog_generation(c), 2);
    for (uint32_t i = 0; i < 300; i++)
        cr_assert_eq(lookup(c, nm, i, 2), (int)(i & 1), "queue-%u", i);
    /* And back: everything again, with version 3's options. */
    cr_assert_eq(publish(c, nm, 300, 3, NULL), 0);
    for (uint32_t i = 0; i < 300; i++)
        cr_assert_eq(lookup(c, nm, i, 3), 1, "queue-%u", i);
    free(nm);
    shm_catalog_destroy(c);
}

/* Collects what shm_catalog_each() hands over. */
struct listing {
    uint32_t count;
    char last[SHM_NAME_MAX + 1];
    size_t last_len;
    int out_of_order;
    int bad;
};

static void
list_one(void *arg, const char *name, size_t len, const struct shm_qopts *o)
{
    struct listing *l = arg;
    unsigned i;
    size_t min = len < l->last_len ? len : l->last_len;
    int d = memcmp(l->last, name, min);

    if (l->count > 0 && (d > 0 || (d == 0 && l->last_len >= len)))
        l->out_of_order++;
    if (name[len] != '\0' || sscanf(name, "queue-%u", &i) != 1 ||
        !opts_ok(o, i))
        l->bad++;
    memcpy(l->last, name, len);
    l->last_len = len;
    l->count++;
}

Test(shm_catalog, empty_catalog_finds_and_lists_nothing)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    struct names *nm = names_make(10, 0);
    struct listing l = {0};
    struct shm_qopts o;

    cr_assert_eq(shm_catalog_lookup(c, "queue-1", 7, &o), 0);
    cr_assert_eq(shm_catalog_each(c, list_one, &l), 0);
    cr_assert_eq(l.count, 0);
    cr_assert_eq(publish(c, nm, 10, 1, NULL), 0);
    cr_assert_eq(lookup(c, nm, 1, 1), 1);
    cr_assert_eq(publish(c, nm, 0, 2, NULL), 0);
    cr_assert_eq(shm_catalog_generation(c), 2);
    cr_assert_eq(lookup(c, nm, 1, 2), 0);
    cr_assert_eq(shm_catalog_each(c, list_one, &l), 0);
    cr_assert_eq(l.count, 0);
    free(nm);
    shm_catalog_destroy(c);
}

/* The whole capacity with the longest names, in the default mapping. */
Test(shm_catalog, holds_4096_entries_of_the_longest_names)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    struct names *nm = names_make(SHM_CATALOG_MAX_ENTRIES, SHM_NAME_MAX);
    struct shm_catalog_entry *e;
    struct listing l = {0};

    cr_assert_eq(publish(c, nm, SHM_CATALOG_MAX_ENTRIES, 1, NULL), 0);
    for (uint32_t i = 0; i < SHM_CATALOG_MAX_ENTRIES; i++)
        cr_assert_eq(lookup(c, nm, i, 1), 1, "queue-%u", i);
    cr_assert_eq(shm_catalog_each(c, list_one, &l), 0);
    cr_assert_eq(l.count, SHM_CATALOG_MAX_ENTRIES);
    cr_assert_eq(l.out_of_order, 0);
    cr_assert_eq(l.bad, 0);
    /* One more is refused and changes nothing. */
    e = calloc(SHM_CATALOG_MAX_ENTRIES + 1, sizeof(*e));
    cr_assert_not_null(e);
    for (uint32_t i = 0; i <= SHM_CATALOG_MAX_ENTRIES; i++)
        e[i] = (struct shm_catalog_entry){"x", 1, opts_of(2, i), NULL};
    cr_assert_eq(shm_catalog_publish(c, e, SHM_CATALOG_MAX_ENTRIES + 1),
                 -EOVERFLOW);
    cr_assert_eq(shm_catalog_generation(c), 1);
    cr_assert_eq(lookup(c, nm, 7, 1), 1);
    free(e);
    free(nm);
    shm_catalog_destroy(c);
}

Test(shm_catalog, duplicate_names_keep_the_last)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    struct shm_catalog_entry e[] = {
        {"b", 1, opts_of(1, 0), NULL}, {"a", 1, opts_of(1, 0), NULL},
        {"b", 1, opts_of(2, 0), NULL}, {"b", 1, opts_of(3, 0), NULL},
        {"a", 1, opts_of(4, 0), NULL}, {"c", 1, opts_of(5, 0), NULL},
    };
    struct listing l = {0};
    struct shm_qopts o;

    cr_assert_eq(shm_catalog_publish(c, e, 6), 0);
    cr_assert_eq(shm_catalog_lookup(c, "a", 1, &o), 1);
    cr_assert_eq(o.max_length, 4);
    cr_assert_eq(shm_catalog_lookup(c, "b", 1, &o), 1);
    cr_assert_eq(o.max_length, 3);
    cr_assert_eq(shm_catalog_lookup(c, "c", 1, &o), 1);
    cr_assert_eq(o.max_length, 5);
    cr_assert_eq(shm_catalog_each(c, list_one, &l), 0);
    cr_assert_eq(l.count, 3);
    cr_assert_eq(l.out_of_order, 0);
    shm_catalog_destroy(c);
}

Test(shm_catalog, invalid_names_are_refused_and_change_nothing)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    static char longest[SHM_NAME_MAX + 1];
    struct shm_catalog_entry e[2] = {{"ok", 2, opts_of(1, 0), NULL}};

    memset(longest, 'n', sizeof(longest));
    e[1] = (struct shm_catalog_entry){"", 0, opts_of(1, 1), NULL};
    cr_assert_eq(shm_catalog_publish(c, e, 2), -EINVAL);
    e[1] = (struct shm_catalog_entry){longest, SHM_NAME_MAX + 1, opts_of(1, 1),
                                      NULL};
    cr_assert_eq(shm_catalog_publish(c, e, 2), -EINVAL);
    cr_assert_eq(shm_catalog_generation(c), 0);
    e[1].len = SHM_NAME_MAX;
    cr_assert_eq(shm_catalog_publish(c, e, 2), 0);
    cr_assert_eq(shm_catalog_generation(c), 1);
    shm_catalog_destroy(c);
}

Test(shm_catalog, mapping_too_small_is_refused)
{
    struct shm_catalog *c = NULL;

    cr_assert_eq(shm_catalog_create(&c, 4096), -EINVAL);
    cr_assert_null(c);
}

/* A mapping with room for 8 KiB of names per copy: 15 names of 512 bytes
 * (513 with their NULs) fit, 16 do not. */
Test(shm_catalog, names_beyond_the_mapping_overflow)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_BYTES(8192));
    struct names *nm = names_make(64, SHM_NAME_MAX);

    cr_assert_eq(publish(c, nm, 15, 1, NULL), 0);
    cr_assert_eq(publish(c, nm, 16, 2, NULL), -EOVERFLOW);
    cr_assert_eq(publish(c, nm, 64, 2, NULL), -EOVERFLOW);
    cr_assert_eq(shm_catalog_generation(c), 1);
    cr_assert_eq(lookup(c, nm, 14, 1), 1);
    free(nm);
    shm_catalog_destroy(c);
}

/* ---- a reader process racing the publisher ---------------------------- */

#define RACE_NAMES    64
#define RACE_VERSIONS 3000

/* Entry i is declared in version v unless (i + v) % 3 == 0: every version
 * removes a third of the names and brings back another third. */
static int
race_keep(uint32_t i, uint32_t v)
{
    return (i + v) % 3 != 0;
}

/* Shared between the test and its reader child. */
struct race {
    _Atomic int ready;
    _Atomic int stop;
    _Atomic uint64_t lookups;
    _Atomic uint64_t listings;
    _Atomic uint64_t versions_seen;
    _Atomic uint64_t violations;
    char first_violation[128];
};

/* What one listing of the reader saw. */
struct race_listing {
    uint32_t count;
    uint32_t version;
    int mixed;
};

static void
race_list_one(void *arg, const char *name, size_t len,
              const struct shm_qopts *o)
{
    struct race_listing *l = arg;
    unsigned i;

    (void)len;
    if (l->count++ == 0)
        l->version = o->max_length;
    if (sscanf(name, "queue-%u", &i) != 1 || !opts_ok(o, i) ||
        o->max_length != l->version || !race_keep(i, o->max_length))
        l->mixed++;
}

static void
race_violation(struct race *r, const char *what, uint32_t i, uint32_t v)
{
    if (atomic_fetch_add(&r->violations, 1) == 0)
        snprintf(r->first_violation, sizeof(r->first_violation),
                 "%s (queue-%u, version %u)", what, i, v);
}

/* One listing: a single version, complete, nothing mixed. */
static void
race_check_listing(struct race *r, struct shm_catalog *c, uint32_t *last_v)
{
    struct race_listing l = {0};
    uint32_t want = 0;

    if (shm_catalog_each(c, race_list_one, &l) != 0) {
        race_violation(r, "each failed", 0, 0);
        return;
    }
    atomic_fetch_add(&r->listings, 1);
    if (l.count == 0)
        return; /* generation 0: nothing published yet */
    for (uint32_t i = 0; i < RACE_NAMES; i++)
        want += (uint32_t)race_keep(i, l.version);
    if (l.mixed != 0 || l.count != want)
        race_violation(r, "listing mixes versions", l.count, l.version);
    if (l.version < *last_v)
        race_violation(r, "listing went back in time", 0, l.version);
    *last_v = l.version;
}

/* The reader: look names up until told to stop; check every answer. */
static void
race_reader(struct race *r, struct shm_catalog *c, const struct names *nm)
{
    uint32_t last_v = 0;
    uint64_t n = 0, seen = 0;
    struct shm_qopts o;

    atomic_store(&r->ready, 1);
    while (!atomic_load(&r->stop)) {
        uint32_t i = (uint32_t)(n % RACE_NAMES);

        if (shm_catalog_lookup(c, nm->buf[i], nm->len[i], &o)) {
            if (!opts_ok(&o, i) || !race_keep(i, o.max_length))
                race_violation(r, "torn or stale entry", i, o.max_length);
            if (o.max_length < last_v)
                race_violation(r, "went back in time", i, o.max_length);
            if (o.max_length != last_v)
                seen++;
            last_v = o.max_length;
        }
        if (++n % 256 == 0)
            race_check_listing(r, c, &last_v);
        atomic_store(&r->lookups, n);
    }
    atomic_store(&r->versions_seen, seen);
}

/* Wait up to about ms for the reader to make n more lookups; 0 if it did
 * not (it may have died: the caller's waitpid says). */
static int
race_wait_lookups(struct race *r, pid_t pid, uint64_t n, int ms)
{
    struct timespec ts = {0, 1000000};
    uint64_t want = atomic_load(&r->lookups) + n;

    for (int i = 0; i < ms && atomic_load(&r->lookups) < want; i++) {
        siginfo_t si = {0};

        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == pid)
            return 0;
        nanosleep(&ts, NULL);
    }
    return atomic_load(&r->lookups) >= want;
}

Test(shm_catalog, forked_reader_never_sees_a_torn_entry, .timeout = 120)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    struct names *nm = names_make(RACE_NAMES, 0);
    struct race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pid;
    int status, lively;

    cr_assert_neq(r, MAP_FAILED);
    /* Vary the name lengths so that names move between slots. */
    for (uint32_t i = 0; i < RACE_NAMES; i += 5)
        nm->len[i] +=
            (size_t)snprintf(nm->buf[i] + nm->len[i], 16, "-%u", i * 7919);
    /* The child must not touch Criterion: with --full-stats even a passing
     * assertion talks to the runner over a socket it shares with us. */
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        race_reader(r, c, nm);
        _exit(0);
    }
    cr_assert_neq(pid, -1);
    while (!atomic_load(&r->ready))
        sched_yield();
    for (uint32_t v = 1; v <= RACE_VERSIONS; v++)
        cr_assert_eq(publish(c, nm, RACE_NAMES, v, race_keep), 0);
    /* Let the reader see the last version, then stop it. */
    lively = race_wait_lookups(r, pid, 1000, 30000);
    atomic_store(&r->stop, 1);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the reader died (status %#x)", status);
    cr_assert(lively, "the reader stopped making progress");
    cr_assert_eq(atomic_load(&r->violations), 0, "%s", r->first_violation);
    cr_assert_gt(atomic_load(&r->listings), 0);
    cr_assert_gt(atomic_load(&r->versions_seen), 1,
                 "the reader never saw a publish happen");
    free(nm);
    shm_catalog_destroy(c);
}

/* A deadLetter name sits after its queue's name: the lookup gives it, the
 * queues without one give none, the listing still sees every name whole,
 * and the longest of both fit the default size. */
Test(shm_catalog, dead_letter_names_ride_beside_the_queue_names)
{
    struct shm_catalog *c = catalog_new(SHM_CATALOG_DEFAULT_BYTES);
    static char longq[SHM_NAME_MAX], longd[SHM_NAME_MAX];
    struct shm_qopts with = opts_of(1, 0), without = opts_of(1, 1), o;
    char out[SHM_NAME_MAX];

    memset(longq, 'q', sizeof(longq));
    memset(longd, 'd', sizeof(longd));
    with.flags = 8 | SHM_QOPT_DL_EXPIRED;
    struct shm_catalog_entry e[3] = {
        {"jobs", 4, with, "jobs.dlq"},
        {"plain", 5, without, NULL},
        {longq, SHM_NAME_MAX, opts_of(2, 0), longd},
    };
    e[2].opts.flags = SHM_NAME_MAX;
    cr_assert_eq(shm_catalog_publish(c, e, 3), 0);
    cr_assert_eq(shm_catalog_dead_letter(c, "jobs", 4, out), 8);
    cr_assert(memcmp(out, "jobs.dlq", 8) == 0);
    cr_assert_eq(shm_catalog_lookup(c, "jobs", 4, &o), 1);
    cr_assert_eq(o.flags, with.flags);
    cr_assert_eq(shm_catalog_dead_letter(c, "plain", 5, out), 0);
    cr_assert_eq(shm_catalog_dead_letter(c, "nope", 4, out), 0);
    cr_assert_eq(shm_catalog_dead_letter(c, longq, SHM_NAME_MAX, out),
                 SHM_NAME_MAX);
    cr_assert(memcmp(out, longd, SHM_NAME_MAX) == 0);
    /* A length with no name is refused, and nothing changes. */
    e[1].opts.flags = 3;
    cr_assert_eq(shm_catalog_publish(c, e, 3), -EINVAL);
    cr_assert_eq(shm_catalog_generation(c), 1);
    shm_catalog_destroy(c);
}
