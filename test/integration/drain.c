/*
 * drain.c - numbered payloads pushed and messages taken back, shared by
 * the suites that count them (see drain.h).
 */
#include "test/integration/drain.h"

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#define POP "/api/v1/ephemeral/pop"

void
itest_push_seq(const struct itest_node *n, const char *queue, const char *part,
               int from, int count)
{
    size_t cap = (size_t)count * 12 + 16, len = 0;
    char *p = malloc(cap);
    struct itest_resp r;

    cr_assert_not_null(p);
    len += (size_t)snprintf(p + len, cap - len, "[");
    for (int k = 0; k < count; k++)
        len += (size_t)snprintf(p + len, cap - len, "%s%d", k ? "," : "",
                                from + k);
    snprintf(p + len, cap - len, "]");
    itest_push_ok(n, &r, queue, part, p, count);
    itest_resp_free(&r);
    free(p);
}

int
itest_pop(const struct itest_node *n, struct itest_resp *r, const char *q)
{
    itest_get(n, r, POP "?%s", q);
    cr_assert_eq(r->status, 200, "pop %s: %ld %s", q, r->status, r->body);
    cr_assert(itest_jlen(r->json, "messages") >= 0, "pop %s: %s", q, r->body);
    return itest_jlen(r->json, "messages");
}

void
itest_pop_until_one(const struct itest_node *n, struct itest_resp *r,
                    const char *q, int ms)
{
    int64_t deadline = itest_now_ms() + ms;

    while (itest_pop(n, r, q) == 0) {
        itest_resp_free(r);
        cr_assert_lt(itest_now_ms(), deadline, "pop %s: nothing in %d ms", q,
                     ms);
        itest_sleep_ms(20);
    }
}

int
itest_pop_post(const struct itest_node *n, struct itest_resp *r,
               const char *queue, const char *part, const char *g, int batch,
               const char *acks)
{
    char body[4096], pj[300] = "";

    if (part != NULL)
        snprintf(pj, sizeof(pj), ",\"partition\":\"%s\"", part);
    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\"%s,\"group\":\"%s\",\"batch\":%d,"
             "\"acks\":[%s]}",
             queue, pj, g, batch, acks);
    itest_req(n, "POST", POP, body, r);
    cr_assert_eq(r->status, 200, "POST pop %s through %s: %ld %s", body,
                 n->base, r->status, r->body);
    cr_assert(itest_jlen(r->json, "messages") >= 0, "%s", r->body);
    cr_assert(itest_jlen(r->json, "results") >= 0, "%s", r->body);
    return itest_jlen(r->json, "messages");
}

void
itest_last_id(const struct itest_resp *r, char *out, size_t len)
{
    char path[64];

    snprintf(path, sizeof(path), "messages.%d.id",
             itest_jlen(r->json, "messages") - 1);
    snprintf(out, len, "%s", itest_jstr(r->json, path));
}

int
itest_mark_payloads(const struct itest_resp *r, char *seen, int64_t max)
{
    int k = itest_jlen(r->json, "messages");

    for (int i = 0; i < k; i++) {
        char path[64];
        snprintf(path, sizeof(path), "messages.%d.payload", i);
        int64_t v = itest_jint(r->json, path);
        cr_assert(v >= 1 && v <= max, "payload %lld", (long long)v);
        cr_assert_eq(seen[v], 0, "message %lld came twice", (long long)v);
        seen[v] = 1;
    }
    return k < 0 ? 0 : k;
}
