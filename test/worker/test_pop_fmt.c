/*
 * test_pop_fmt.c - the answer a pop writes as it takes (worker/pop_format.h)
 * against an oracle: the same JSON written plainly, entry by entry, from
 * the sink's records (each message's data where it lies while its lease
 * holds it).  The cases are the ones its shortcuts could get wrong: names
 * that escape (a quote, a backslash, DEL, bytes that are not UTF-8), a
 * replyTo in a tenant, attempts of two digits, a sequence whose digits
 * roll over (999 to 1000), and several partitions in one any-partition pop.
 * The oracle escapes with http_put_json_esc (http/buf.h, tested on its
 * own); what it checks is the runs, the copied heads and counted digits.
 * (It stands where pop_format(), the answer from a sink with data, was:
 * no pop used that any more.)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/buf.h"
#include "http/names.h"
#include "shm/segment.h"
#include "test/shm/fixture.h"
#include "worker/authz.h"
#include "worker/pop_format.h"

#define T0  1000000ULL
#define INC 0x0123456789abcdefULL

static struct shm_seg seg;
static unsigned char sinkbuf[1 << 16];
static char want[1 << 16];

static void
setup(void)
{
    struct shm_params p = fixture_params(16 << 20, 4, INC);

    p.defaults.retry_limit = 100; /* attempts past ten */
    cr_assert_eq(shm_segment_create(&p, &seg), 0);
}

static void
teardown(void)
{
    shm_segment_destroy(&seg);
}

TestSuite(pop_fmt, .init = setup, .fini = teardown);

/* esc - s[0..n) escaped into o; returns the end. */
static char *
esc(char *o, const char *s, size_t n)
{
    return http_put_json_esc(o, s, n);
}

/* oracle - the answer for what sink holds, popped from queue. */
static size_t
oracle(const struct shm_sink *k, struct shm_name queue)
{
    struct shm_name shown = worker_client_name(queue);
    char *o = want;
    int first = 1;

    o += sprintf(o, "{\"queue\":\"");
    o = esc(o, shown.ptr, shown.len);
    o += sprintf(o, "\",\"messages\":[");
    for (const struct shm_popped *r = shm_popped_next(k, NULL); r != NULL;
         r = shm_popped_next(k, r)) {
        const char *part = (const char *)(r + 1), *d = shm_popped_data(r);

        o += sprintf(o, "%s{\"id\":\"e:%016" PRIx64 ":", first ? "" : ",",
                     (uint64_t)INC);
        o = esc(o, part, r->part_len);
        o += sprintf(o, ":%" PRIu64 "\",\"partition\":\"", r->seq);
        o = esc(o, part, r->part_len);
        o += sprintf(o, "\",\"payload\":");
        memcpy(o, d + r->reply_len, r->len - r->reply_len);
        o += r->len - r->reply_len;
        if (r->reply_len > 0) {
            struct shm_name to =
                worker_client_name((struct shm_name){d, r->reply_len});
            o += sprintf(o, ",\"replyTo\":\"");
            o = esc(o, to.ptr, to.len);
            *o++ = '"';
        }
        o += sprintf(o, ",\"attempts\":%u}", r->attempts);
        first = 0;
    }
    o += sprintf(o, "]}");
    return (size_t)(o - want);
}

/* check - pop batch from queue's part (any: "") as the pop does, written
 * as it takes, and compare with the oracle; returns how many it took. */
static int
check(const char *queue, struct shm_name part, uint32_t batch, uint64_t now)
{
    struct shm_name q = nm(queue);
    struct shm_pop_req r = {q, part, nm(""), batch, 0, SHM_FROM_ALL, 0};
    struct pop_fmt f;
    struct shm_sink k = {.buf = sinkbuf, .cap = sizeof(sinkbuf)};
    struct http_buf b = {0};
    size_t n;
    int rc;

    pop_fmt_init(&f, INC, 1 << 20);
    k.fmt = &f.hook;
    cr_assert_eq(pop_fmt_begin(&f, q, 1 << 18, 2), 0);
    rc = shm_pop(&seg, 0, &r, now, &k);
    cr_assert(rc > 0, "pop: %d", rc);
    pop_fmt_finish(&f, q, &b);
    n = oracle(&k, q);
    cr_assert_eq(b.len, n, "got %.*s\nwant %.*s", (int)b.len, b.data, (int)n,
                 want);
    cr_assert_eq(memcmp(b.data, want, n), 0, "got %.*s\nwant %.*s", (int)b.len,
                 b.data, (int)n, want);
    http_buf_free(&b);
    return rc;
}

/* push - n payloads "<tag><i>" to (queue, part), in 64s. */
static void
push(const char *queue, struct shm_name part, int n)
{
    char bufs[64][32];
    struct shm_msg_in in[64];
    uint64_t s;

    for (int at = 0; at < n; at += 64) {
        int m = n - at < 64 ? n - at : 64;
        for (int i = 0; i < m; i++) {
            int len = snprintf(bufs[i], sizeof(bufs[i]), "\"m%d\"", at + i);
            in[i] = (struct shm_msg_in){bufs[i], (uint32_t)len};
        }
        cr_assert_eq(
            shm_push(&seg, 0, nm(queue), part, in, (uint32_t)m, T0, &s), 0);
    }
}

Test(pop_fmt, names_that_escape_in_one_any_partition_pop)
{
    static const char *const parts[] = {"qu\"ote", "back\\slash", "del\x7f",
                                        "bad\xff\xfeutf8", "plain"};
    int taken = 0;

    for (int i = 0; i < 5; i++)
        push("esc", nm(parts[i]), 3);
    while (taken < 15)
        taken += check("esc", nm(""), 7, T0);
    cr_assert_eq(taken, 15);
}

Test(pop_fmt, a_reply_to_in_a_tenant_and_a_queue_in_one)
{
    char queue[] = "acme\x1fjobs", inbox[] = "acme\x1finbox-1";
    char msg[64];
    uint64_t s;
    int n = snprintf(msg, sizeof(msg), "%s{\"q\":1}", inbox);

    for (int i = 0; i < 3; i++)
        cr_assert_eq(shm_push_request(&seg, 0, nm(queue), nm("p"),
                                      &(struct shm_msg_in){msg, (uint32_t)n},
                                      (uint32_t)strlen(inbox), T0, &s),
                     0);
    push(queue, nm("p"), 2); /* plain ones after: the run goes on */
    cr_assert_eq(check(queue, nm("p"), 10, T0), 5);
}

Test(pop_fmt, attempts_of_two_digits)
{
    struct shm_pop_req r = {nm("att"), nm("p"), nm(""), 2, 0, SHM_FROM_ALL, 0};
    struct shm_sink k;
    uint64_t now = T0;

    push("att", nm("p"), 2);
    for (int i = 0; i < 11; i++) { /* each lease runs out */
        k = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
        cr_assert_eq(shm_pop(&seg, 0, &r, now, &k), 2);
        now += 31 * 1000;
    }
    cr_assert_eq(check("att", nm("p"), 2, now), 2);
    cr_assert(strstr(want, "\"attempts\":12}") != NULL, "%s", want);
}

Test(pop_fmt, a_sequence_rolling_over_999_to_1000)
{
    struct shm_pop_req r = {nm("roll"), nm("p"),      nm(""), 100,
                            1,          SHM_FROM_ALL, 0};
    struct shm_sink k;
    int gone = 0;

    push("roll", nm("p"), 1010);
    while (gone < 995) { /* acked at once: the first sequences go */
        r.batch = 995 - gone < 100 ? (uint32_t)(995 - gone) : 100;
        k = (struct shm_sink){.buf = sinkbuf, .cap = sizeof(sinkbuf)};
        int rc = shm_pop(&seg, 0, &r, T0, &k);
        cr_assert(rc > 0);
        gone += rc;
    }
    cr_assert_eq(check("roll", nm("p"), 10, T0), 10);
    cr_assert(strstr(want, ":999\"") != NULL && strstr(want, ":1000\"") != NULL,
              "%s", want);
}
