/*
 * test_declared.c - the declared-queue state machine the raft log drives.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "master/declared.h"

static struct decl_cmd
declare(const char *name, uint32_t max_length)
{
    return (struct decl_cmd){DECL_DECLARE,
                             name,
                             strlen(name),
                             {.max_length = max_length,
                              .max_bytes = 5ULL << 32,
                              .policy = SHM_POLICY_DROP_OLDEST,
                              .ttl_s = 7,
                              .lease_s = 9,
                              .retry_limit = 3,
                              .window_ms = 11,
                              .window_count = 13},
                             NULL};
}

/* roundtrip - encode then decode c. */
static struct decl_cmd
roundtrip(const struct decl_cmd *c, void **buf)
{
    size_t len;
    struct decl_cmd out;
    cr_assert_eq(decl_encode(c, buf, &len), 0);
    cr_assert_eq(decl_decode(*buf, len, &out), 0);
    return out;
}

Test(decl, declare_roundtrips_every_option)
{
    struct decl_cmd c = declare("presence", 1000), d;
    void *buf;

    d = roundtrip(&c, &buf);
    cr_assert_eq(d.op, DECL_DECLARE);
    cr_assert_eq(d.len, 8);
    cr_assert_arr_eq(d.name, "presence", 8);
    cr_assert_eq(memcmp(&d.opts, &c.opts, sizeof(c.opts)), 0);
    free(buf);
}

Test(decl, decode_rejects_truncated_and_garbage_commands)
{
    struct decl_cmd c = declare("q", 1), d;
    void *buf;
    size_t len;

    cr_assert_eq(decl_encode(&c, &buf, &len), 0);
    for (size_t n = 0; n < len; n++)
        cr_assert_eq(decl_decode(buf, n, &d), -EINVAL, "length %zu", n);
    ((unsigned char *)buf)[0] = 9; /* unknown version */
    cr_assert_eq(decl_decode(buf, len, &d), -EINVAL);
    ((unsigned char *)buf)[0] = 2;
    ((unsigned char *)buf)[1] = 9; /* unknown op */
    cr_assert_eq(decl_decode(buf, len, &d), -EINVAL);
    free(buf);
}

Test(decl, apply_keeps_names_sorted_and_reports_changes)
{
    struct decl_set s = {0};
    const char *names[] = {"m", "a", "z", "ab", "a\xc3\xa9"};
    int changed;

    for (size_t i = 0; i < 5; i++) {
        struct decl_cmd c = declare(names[i], 10);
        cr_assert_eq(decl_apply(&s, &c, &changed), 0);
        cr_assert_eq(changed, 1);
    }
    struct decl_cmd same = declare("m", 10), other = declare("m", 20);
    decl_apply(&s, &same, &changed);
    cr_assert_eq(changed, 0, "same options change nothing");
    decl_apply(&s, &other, &changed);
    cr_assert_eq(changed, 1);
    cr_assert_eq(decl_find(&s, "m", 1)->opts.max_length, 20);
    for (size_t i = 1; i < s.n; i++)
        cr_assert(memcmp(s.q[i - 1].name, s.q[i].name,
                         s.q[i - 1].len < s.q[i].len ? s.q[i - 1].len
                                                     : s.q[i].len) <= 0);
    struct decl_cmd del = {DECL_DELETE, "a", 1, {0}, NULL};
    decl_apply(&s, &del, &changed);
    cr_assert_eq(changed, 1);
    cr_assert_null(decl_find(&s, "a", 1));
    cr_assert_not_null(decl_find(&s, "ab", 2));
    decl_apply(&s, &del, &changed);
    cr_assert_eq(changed, 0, "deleting an absent queue changes nothing");
    cr_assert_eq(s.n, 4);
    decl_free(&s);
}

Test(decl, snapshot_restores_the_same_set)
{
    struct decl_set s = {0}, r = {0};
    void *buf;
    size_t len;
    int changed;
    char name[24];

    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof(name), "queue-%03d", i);
        struct decl_cmd c = declare(name, (uint32_t)i + 1);
        decl_apply(&s, &c, &changed);
    }
    cr_assert_eq(decl_snapshot(&s, &buf, &len), 0);
    cr_assert_eq(decl_restore(&r, buf, len), 0);
    cr_assert_eq(r.n, 300);
    for (size_t i = 0; i < r.n; i++) {
        cr_assert_eq(r.q[i].len, s.q[i].len);
        cr_assert_arr_eq(r.q[i].name, s.q[i].name, s.q[i].len);
        cr_assert_eq(r.q[i].opts.max_length, s.q[i].opts.max_length);
    }
    cr_assert_eq(decl_restore(&r, buf, len - 1), -EINVAL);
    cr_assert_eq(r.n, 300, "a bad snapshot leaves the set as it was");
    free(buf);
    decl_free(&s);
    decl_free(&r);
}

Test(decl, dead_letter_roundtrips_and_old_entries_still_decode)
{
    struct decl_cmd c = declare("q", 1), d;
    struct decl_set s = {0};
    void *buf, *snap;
    size_t len, slen;
    int changed;

    c.opts.flags = 3 | SHM_QOPT_DL_EXPIRED;
    c.opts.dedupe_s = 300;
    c.opts.retry_delay_ms = 2500;
    c.dl = "dlq";
    cr_assert_eq(decl_encode(&c, &buf, &len), 0);
    cr_assert_eq(decl_decode(buf, len, &d), 0);
    cr_assert_eq(memcmp(&d.opts, &c.opts, sizeof(c.opts)), 0);
    cr_assert(memcmp(d.dl, "dlq", 3) == 0);
    cr_assert_eq(decl_decode(buf, len - 1, &d), -EINVAL);
    /* A version 1 entry (deadletter's, before dedupe_s and retry_delay_ms):
     * 36 option bytes, then the flags and the name. */
    unsigned char *v1 = buf;
    memmove(v1 + 4 + 1 + 36, v1 + 4 + 1 + 44, 4 + 3);
    v1[0] = 1;
    cr_assert_eq(decl_decode(v1, len - 8, &d), 0);
    cr_assert_eq(d.opts.flags, c.opts.flags);
    cr_assert_eq(d.opts.dedupe_s, 0);
    cr_assert_eq(d.opts.retry_delay_ms, 0);
    cr_assert_eq(d.opts.window_count, c.opts.window_count);
    cr_assert(memcmp(d.dl, "dlq", 3) == 0);
    free(buf);
    cr_assert_eq(decl_encode(&c, &buf, &len), 0);
    cr_assert_eq(decl_decode(buf, len, &d), 0);
    cr_assert_eq(decl_apply(&s, &d, &changed), 0);
    free(buf);
    cr_assert_eq(decl_snapshot(&s, &snap, &slen), 0);
    decl_free(&s);
    cr_assert_eq(decl_restore(&s, snap, slen), 0);
    cr_assert_eq(s.n, 1);
    cr_assert(memcmp(s.q[0].dl, "dlq", 3) == 0);
    /* Another deadLetter of the same length is a change. */
    c.dl = "dlr";
    cr_assert_eq(decl_apply(&s, &c, &changed), 0);
    cr_assert_eq(changed, 1);
    free(snap);
    decl_free(&s);
}
