/*
 * test_raft_msg.c - the raft wire format: round trips, and refusal of
 * every malformed input (truncated, trailing, garbage, out of range).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "consensus/raft_msg.h"

/* an_append - an APPEND with two entries (one empty no-op). */
static struct raft_msg
an_append(void)
{
    static struct raft_entry e[2] = {
        {.term = 4, .type = RAFT_ENTRY_NOOP},
        {.term = 5, .type = RAFT_ENTRY_DATA, .len = 3, .data = "abc"},
    };

    return (struct raft_msg){.type = RAFT_MSG_APPEND,
                             .from = 2,
                             .to = 0,
                             .term = 5,
                             .index = 41,
                             .log_term = 4,
                             .commit = 40,
                             .entries = e,
                             .n_entries = 2};
}

/* encode - m into a fresh buffer of exactly raft_msg_size(m) bytes. */
static unsigned char *
encode(const struct raft_msg *m, size_t *len)
{
    unsigned char *buf;

    *len = raft_msg_size(m);
    cr_assert_not_null(buf = malloc(*len));
    cr_assert_eq(raft_msg_encode(m, buf, *len), 0);
    return buf;
}

Test(raft_msg, append_round_trips_with_entries)
{
    struct raft_msg m = an_append(), d;
    size_t len;
    unsigned char *buf = encode(&m, &len);

    cr_assert_eq(raft_msg_decode(buf, len, &d), 0);
    cr_assert_eq(d.type, RAFT_MSG_APPEND);
    cr_assert_eq(d.from, 2);
    cr_assert_eq(d.to, 0);
    cr_assert_eq(d.term, 5);
    cr_assert_eq(d.index, 41);
    cr_assert_eq(d.log_term, 4);
    cr_assert_eq(d.commit, 40);
    cr_assert_eq(d.n_entries, 2);
    cr_assert_eq(d.entries[0].index, 42);
    cr_assert_eq(d.entries[0].type, RAFT_ENTRY_NOOP);
    cr_assert_eq(d.entries[0].len, 0);
    cr_assert_eq(d.entries[1].index, 43);
    cr_assert_eq(d.entries[1].term, 5);
    cr_assert_eq(d.entries[1].len, 3);
    cr_assert_eq(memcmp(d.entries[1].data, "abc", 3), 0);
    raft_msg_free(&d);
    free(buf);
}

Test(raft_msg, response_and_snapshot_round_trip)
{
    struct raft_msg r = {.type = RAFT_MSG_APPEND_RESP,
                         .from = 1,
                         .to = 31,
                         .term = 9,
                         .index = 7,
                         .log_term = 3,
                         .hint = 5,
                         .reject = true};
    struct raft_msg s = {.type = RAFT_MSG_SNAPSHOT,
                         .from = 0,
                         .to = 1,
                         .term = 9,
                         .index = 100,
                         .log_term = 8,
                         .data = "catalog",
                         .len = 7};
    struct raft_msg d;
    unsigned char *buf;
    size_t len;

    buf = encode(&r, &len);
    cr_assert_eq(raft_msg_decode(buf, len, &d), 0);
    cr_assert(d.reject);
    cr_assert_eq(d.to, 31);
    cr_assert_eq(d.hint, 5);
    cr_assert_eq(d.log_term, 3);
    raft_msg_free(&d);
    free(buf);
    buf = encode(&s, &len);
    cr_assert_eq(raft_msg_decode(buf, len, &d), 0);
    cr_assert_eq(d.len, 7);
    cr_assert_eq(memcmp(d.data, "catalog", 7), 0);
    cr_assert_eq(d.index, 100);
    raft_msg_free(&d);
    free(buf);
}

Test(raft_msg, every_truncation_is_rejected)
{
    struct raft_msg m = an_append(), d;
    size_t len;
    unsigned char *buf = encode(&m, &len);

    for (size_t n = 0; n < len; n++) {
        /* A copy of exactly n bytes, so ASan sees any read past it. */
        unsigned char *cut = malloc(n ? n : 1);

        memcpy(cut, buf, n);
        cr_assert_eq(raft_msg_decode(cut, n, &d), -EBADMSG, "length %zu", n);
        cr_assert_eq(d.n_entries, 0);
        free(cut);
    }
    free(buf);
}

Test(raft_msg, trailing_bytes_are_rejected)
{
    struct raft_msg m = an_append(), d;
    size_t len;
    unsigned char *buf = encode(&m, &len), *more = calloc(1, len + 1);

    memcpy(more, buf, len);
    cr_assert_eq(raft_msg_decode(more, len + 1, &d), -EBADMSG);
    free(more);
    free(buf);
}

Test(raft_msg, another_version_is_eproto)
{
    struct raft_msg m = {.type = RAFT_MSG_VOTE, .from = 1, .to = 2}, d;
    size_t len;
    unsigned char *buf = encode(&m, &len);

    buf[0] = RAFT_MSG_VERSION + 1;
    cr_assert_eq(raft_msg_decode(buf, len, &d), -EPROTO);
    free(buf);
}

Test(raft_msg, bad_type_flags_node_or_entry_type_are_rejected)
{
    struct raft_msg m = an_append(), d;
    size_t len;
    unsigned char *buf = encode(&m, &len);
    /* offset, bad byte: type, type, from, to, a flag bit, entry type */
    static const size_t off[] = {1, 1, 2, 3, 7, 52 + 8};
    static const unsigned char bad[] = {0, 9, RAFT_MAX_NODES, 255, 2, 7};

    for (size_t k = 0; k < sizeof(off) / sizeof(off[0]); k++) {
        unsigned char save = buf[off[k]];

        buf[off[k]] = bad[k];
        cr_assert_eq(raft_msg_decode(buf, len, &d), -EBADMSG, "case %zu", k);
        buf[off[k]] = save;
    }
    cr_assert_eq(raft_msg_decode(buf, len, &d), 0);
    raft_msg_free(&d);
    free(buf);
}

Test(raft_msg, huge_counts_and_lengths_are_rejected_before_allocating)
{
    struct raft_msg m = an_append(), v = {.type = RAFT_MSG_VOTE}, d;
    size_t len, vlen;
    unsigned char *buf = encode(&m, &len), *vb = encode(&v, &vlen);

    memset(buf + 48, 0xff, 4); /* entry count 4 G */
    cr_assert_eq(raft_msg_decode(buf, len, &d), -EBADMSG);
    free(buf);
    buf = encode(&m, &len);
    memset(buf + 52 + 9, 0xff, 4); /* first entry 4 GiB long */
    cr_assert_eq(raft_msg_decode(buf, len, &d), -EBADMSG);
    vb[51] = 1; /* a VOTE with a body count */
    cr_assert_eq(raft_msg_decode(vb, vlen, &d), -EBADMSG);
    free(vb);
    free(buf);
}

Test(raft_msg, random_garbage_never_decodes_into_nonsense)
{
    unsigned char buf[256];
    struct raft_msg d;
    uint64_t x = 88172645463325252ull;

    for (int round = 0; round < 20000; round++) {
        size_t len = (size_t)(x % sizeof(buf));

        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (unsigned char)x;
        }
        if (len > 0)
            buf[0] = RAFT_MSG_VERSION; /* get past the first check */
        if (raft_msg_decode(buf, len, &d) == 0) {
            cr_assert(d.type >= RAFT_MSG_PREVOTE &&
                      d.type <= RAFT_MSG_TIMEOUT_NOW);
            cr_assert(d.from < RAFT_MAX_NODES && d.to < RAFT_MAX_NODES);
            cr_assert_eq(raft_msg_size(&d), len);
            raft_msg_free(&d);
        }
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    }
}

Test(raft_msg, encode_refuses_small_buffers_and_invalid_messages)
{
    struct raft_msg m = an_append(), bad = {.type = RAFT_MSG_VOTE, .to = 40};
    unsigned char buf[64];

    cr_assert_eq(raft_msg_encode(&m, buf, raft_msg_size(&m) - 1), -ENOBUFS);
    cr_assert_eq(raft_msg_encode(&bad, buf, sizeof(buf)), -EINVAL);
}
