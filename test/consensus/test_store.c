/*
 * test_store.c - the LMDB raft log store: what it keeps across a reopen.
 *
 * Each test works in its own mkdtemp directory, removed at the end.  The
 * stores here are opened synchronously, as production does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "consensus/raft_msg.h"
#include "consensus/store.h"

static char dir[128];
static struct raft_store *st;

static void
setup(void)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, sizeof(dir), "%s/mayfly-store-XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(raft_store_open(dir, 0, &st), 0);
}

static void
teardown(void)
{
    char path[200];

    raft_store_close(st);
    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/lock.mdb", dir);
    unlink(path);
    rmdir(dir);
}

static void
reopen(void)
{
    raft_store_close(st);
    st = NULL;
    cr_assert_eq(raft_store_open(dir, 0, &st), 0);
}

/* append - entries first..last with term t and data "e<index>". */
static void
append(uint64_t first, uint64_t last, uint64_t t)
{
    for (uint64_t i = first; i <= last; i++) {
        char buf[32];
        struct raft_entry e = {.index = i, .term = t, .type = RAFT_ENTRY_DATA};

        e.len =
            (size_t)snprintf(buf, sizeof(buf), "e%llu", (unsigned long long)i);
        e.data = buf;
        cr_assert_eq(raft_store_append(st, &e, 1), 0, "append %llu",
                     (unsigned long long)i);
    }
}

struct seen {
    uint64_t index[64];
    uint64_t term[64];
    size_t n;
};

static int
collect(void *arg, const struct raft_entry *e)
{
    struct seen *s = arg;
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "e%llu", (unsigned long long)e->index);

    cr_assert_eq(e->len, (size_t)len);
    cr_assert_eq(memcmp(e->data, buf, e->len), 0);
    s->index[s->n] = e->index;
    s->term[s->n++] = e->term;
    return 0;
}

static struct seen
load(void)
{
    struct seen s = {.n = 0};

    cr_assert_eq(raft_store_load(st, collect, &s), 0);
    return s;
}

TestSuite(raft_store, .init = setup, .fini = teardown);

Test(raft_store, new_store_has_no_vote_log_or_snapshot)
{
    uint64_t term = 9, index = 9;
    int vote = 9;
    void *blob;
    size_t len;

    cr_assert_eq(raft_store_get_vote(st, &term, &vote), 0);
    cr_assert_eq(term, 0);
    cr_assert_eq(vote, RAFT_VOTE_NONE);
    cr_assert_eq(load().n, 0);
    cr_assert_eq(raft_store_snapshot_meta(st, &index, &term), 0);
    cr_assert_eq(index, 0);
    cr_assert_eq(raft_store_snapshot_read(st, &blob, &len), -ENOENT);
}

Test(raft_store, term_and_vote_survive_reopen)
{
    uint64_t term;
    int vote;

    cr_assert_eq(raft_store_set_vote(st, 7, 2), 0);
    reopen();
    cr_assert_eq(raft_store_get_vote(st, &term, &vote), 0);
    cr_assert_eq(term, 7);
    cr_assert_eq(vote, 2);
    cr_assert_eq(raft_store_set_vote(st, 8, RAFT_VOTE_NONE), 0);
    reopen();
    cr_assert_eq(raft_store_get_vote(st, &term, &vote), 0);
    cr_assert_eq(term, 8);
    cr_assert_eq(vote, RAFT_VOTE_NONE);
}

Test(raft_store, entries_survive_reopen_in_index_order)
{
    struct seen s;

    append(1, 3, 1);
    append(4, 10, 2);
    reopen();
    s = load();
    cr_assert_eq(s.n, 10);
    for (size_t i = 0; i < s.n; i++) {
        cr_assert_eq(s.index[i], i + 1);
        cr_assert_eq(s.term[i], i < 3 ? 1 : 2);
    }
}

Test(raft_store, append_at_or_below_last_index_fails_with_eexist)
{
    struct raft_entry e = {.index = 3, .term = 1, .type = RAFT_ENTRY_NOOP};

    append(1, 5, 1);
    cr_assert_eq(raft_store_append(st, &e, 1), -EEXIST);
    cr_assert_eq(load().n, 5, "the failed transaction left no trace");
}

Test(raft_store, truncate_deletes_the_suffix_from_an_index)
{
    struct seen s;

    append(1, 10, 1);
    cr_assert_eq(raft_store_truncate(st, 6), 0);
    append(6, 7, 2);
    reopen();
    s = load();
    cr_assert_eq(s.n, 7);
    cr_assert_eq(s.index[6], 7);
    cr_assert_eq(s.term[5], 2);
    cr_assert_eq(s.term[4], 1);
}

Test(raft_store, snapshot_compacts_the_prefix_and_survives_reopen)
{
    uint64_t index, term;
    struct seen s;
    void *blob;
    size_t len;

    append(1, 10, 3);
    cr_assert_eq(raft_store_save_snapshot(st, 6, 3, "state", 5, false), 0);
    reopen();
    cr_assert_eq(raft_store_snapshot_meta(st, &index, &term), 0);
    cr_assert_eq(index, 6);
    cr_assert_eq(term, 3);
    cr_assert_eq(raft_store_snapshot_read(st, &blob, &len), 0);
    cr_assert_eq(len, 5);
    cr_assert_eq(memcmp(blob, "state", 5), 0);
    free(blob);
    s = load();
    cr_assert_eq(s.n, 4);
    cr_assert_eq(s.index[0], 7);
}

Test(raft_store, snapshot_that_conflicts_discards_the_whole_log)
{
    uint64_t index, term;

    append(1, 10, 1);
    cr_assert_eq(raft_store_save_snapshot(st, 20, 4, "", 0, true), 0);
    cr_assert_eq(load().n, 0);
    cr_assert_eq(raft_store_snapshot_meta(st, &index, &term), 0);
    cr_assert_eq(index, 20);
    append(21, 22, 4);
    cr_assert_eq(load().n, 2);
}

Test(raft_store, wipe_returns_to_a_new_store)
{
    uint64_t index, term;
    int vote;

    append(1, 4, 1);
    cr_assert_eq(raft_store_set_vote(st, 3, 1), 0);
    cr_assert_eq(raft_store_save_snapshot(st, 2, 1, "x", 1, false), 0);
    cr_assert_eq(raft_store_wipe(st), 0);
    reopen();
    cr_assert_eq(load().n, 0);
    cr_assert_eq(raft_store_get_vote(st, &term, &vote), 0);
    cr_assert_eq(term, 0);
    cr_assert_eq(raft_store_snapshot_meta(st, &index, &term), 0);
    cr_assert_eq(index, 0);
    append(1, 1, 1);
}

Test(raft_store, open_creates_a_missing_directory)
{
    struct raft_store *s2;
    char sub[200];

    snprintf(sub, sizeof(sub), "%s/sub", dir);
    cr_assert_eq(raft_store_open(sub, 0, &s2), 0);
    raft_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/sub/data.mdb", dir);
    unlink(sub);
    snprintf(sub, sizeof(sub), "%s/sub/lock.mdb", dir);
    unlink(sub);
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    cr_assert_eq(rmdir(sub), 0);
}

Test(raft_store, open_fails_where_a_directory_cannot_be)
{
    struct raft_store *s2 = NULL;
    char path[200];
    FILE *f;

    snprintf(path, sizeof(path), "%s/file", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fclose(f);
    cr_assert_lt(raft_store_open(path, 0, &s2), 0);
    cr_assert_null(s2);
    unlink(path);
}
