/*
 * partition_check.c - see partition_check.h.
 */
#include "test/cluster/partition_check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/cluster/cluster.h"

#define IDS_MAX (1 << 18)
#define BATCH   5
#define GROUP   "g"

struct pc {
    struct nsc *c;
    char queue[64];
    int nparts;
    unsigned through;
    pthread_t pusher[NSC_NODES], consumer[NSC_NODES];
    atomic_int stop;
    atomic_uint next; /* the next payload id */
    /* by payload id: 1 + the node whose push of it answered 201 (0: not
     * accepted); deliveries to "g"; the most attempts delivered; the most
     * attempts of a delivery whose ack answered "acked" (0: none) */
    _Atomic uint8_t *via;
    _Atomic uint16_t *delivered, *max_att, *acked_att;
    atomic_long accepted, push_fail, push_503, acks_stale, acks_other,
        acks_failed; /* acks answered other outcomes; not answered 200 */
    atomic_long push_slow, push_max_ms; /* pushes of 1 s or more; the
                                         * longest */
};

struct pc *
pc_new(struct nsc *c, const char *queue, int nparts)
{
    struct pc *p = calloc(1, sizeof(*p));

    cr_assert(p);
    p->c = c;
    snprintf(p->queue, sizeof(p->queue), "%s", queue);
    p->nparts = nparts;
    p->via = calloc(IDS_MAX, sizeof(*p->via));
    p->delivered = calloc(IDS_MAX, sizeof(*p->delivered));
    p->max_att = calloc(IDS_MAX, sizeof(*p->max_att));
    p->acked_att = calloc(IDS_MAX, sizeof(*p->acked_att));
    cr_assert(p->via && p->delivered && p->max_att && p->acked_att);
    return p;
}

void
pc_declare(struct pc *p, int i)
{
    struct itest_resp r;
    long st = itest_post(&p->c->node[i], &r, "/api/v1/ephemeral/configure",
                         "{\"queue\":\"%s\",\"options\":{\"leaseSeconds\":2,"
                         "\"retryLimit\":1000}}",
                         p->queue);

    cr_assert_eq(st, 201, "configure %s: %ld %s", p->queue, st, r.body);
    itest_resp_free(&r);
}

/* An argument of a load thread: the checker and the node it goes through. */
struct arg {
    struct pc *p;
    int k;
};

static struct arg args[NSC_NODES];

static void *
pusher(void *v)
{
    struct arg *a = v;
    struct pc *p = a->p;
    char body[512];

    while (!atomic_load(&p->stop)) {
        unsigned id0 = atomic_fetch_add(&p->next, BATCH);
        struct itest_resp r;
        int len;

        if (id0 + BATCH > IDS_MAX)
            break;
        len = snprintf(body, sizeof(body),
                       "{\"queue\":\"%s\",\"partition\":\"p%u\","
                       "\"messages\":[",
                       p->queue, (id0 / BATCH) % (unsigned)p->nparts);
        for (unsigned i = id0; i < id0 + BATCH; i++)
            len +=
                snprintf(body + len, sizeof(body) - (size_t)len,
                         "%s{\"payload\":{\"i\":%u}}", i > id0 ? "," : "", i);
        snprintf(body + len, sizeof(body) - (size_t)len, "]}");
        long st = itest_req(&p->c->node[a->k], "POST", "/api/v1/ephemeral/push",
                            body, &r);
        long ms = (long)(r.seconds * 1000), mx = atomic_load(&p->push_max_ms);
        if (ms >= 1000)
            atomic_fetch_add(&p->push_slow, 1);
        while (ms > mx &&
               !atomic_compare_exchange_weak(&p->push_max_ms, &mx, ms))
            ;
        if (st == 201 && itest_jint(r.json, "pushed") == BATCH) {
            for (unsigned i = id0; i < id0 + BATCH; i++)
                atomic_store(&p->via[i], (uint8_t)(1 + a->k));
            atomic_fetch_add(&p->accepted, BATCH);
        } else {
            atomic_fetch_add(&p->push_fail, 1);
            if (st == 503)
                atomic_fetch_add(&p->push_503, 1);
        }
        itest_resp_free(&r);
        itest_sleep_ms(20);
    }
    itest_req_thread_end();
    return NULL;
}

/* store_max - *a = max(*a, v). */
static void
store_max(_Atomic uint16_t *a, uint16_t v)
{
    uint16_t cur = atomic_load(a);

    while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
        ;
}

/* consume - one pop of "g" through node k (wait: a long poll of 500 ms)
 * and the ack of what came; how many messages came. */
static int
consume(struct pc *p, int k, int wait)
{
    struct itest_resp r;
    char ack[8192];
    int n, len, ids[64], att[64];

    long st =
        itest_get(&p->c->node[k], &r,
                  "/api/v1/ephemeral/pop?queue=%s&group=" GROUP "&batch=40%s",
                  p->queue, wait ? "&wait=true&timeout=500" : "");
    n = st == 200 ? itest_jlen(r.json, "messages") : 0;
    if (n > 40)
        n = 40;
    len = snprintf(ack, sizeof(ack),
                   "{\"queue\":\"%s\",\"group\":\"" GROUP "\",\"acks\":[",
                   p->queue);
    for (int m = 0; m < n; m++) {
        char path[64];
        snprintf(path, sizeof(path), "messages.%d.payload.i", m);
        int64_t i = itest_jint(r.json, path);
        snprintf(path, sizeof(path), "messages.%d.attempts", m);
        int64_t at = itest_jint(r.json, path);
        snprintf(path, sizeof(path), "messages.%d.id", m);
        ids[m] = i >= 0 && i < IDS_MAX ? (int)i : -1;
        att[m] = at > 0 && at < 65535 ? (int)at : 1;
        if (ids[m] >= 0) {
            atomic_fetch_add(&p->delivered[ids[m]], 1);
            store_max(&p->max_att[ids[m]], (uint16_t)att[m]);
        }
        len += snprintf(ack + len, sizeof(ack) - (size_t)len,
                        "%s{\"id\":\"%s\",\"attempts\":%d}", m ? "," : "",
                        itest_jstr(r.json, path), att[m]);
    }
    snprintf(ack + len, sizeof(ack) - (size_t)len, "]}");
    itest_resp_free(&r);
    if (n == 0)
        return 0;
    st = itest_req(&p->c->node[k], "POST", "/api/v1/ephemeral/ack", ack, &r);
    for (int m = 0; m < n; m++) {
        char path[64];
        snprintf(path, sizeof(path), "results.%d.outcome", m);
        const char *o = st == 200 ? itest_jstr(r.json, path) : "";
        if (strcmp(o, "acked") == 0 && ids[m] >= 0)
            store_max(&p->acked_att[ids[m]], (uint16_t)att[m]);
        else if (strcmp(o, "stale") == 0)
            atomic_fetch_add(&p->acks_stale, 1);
        else if (st != 200)
            atomic_fetch_add(&p->acks_failed, 1);
        else
            atomic_fetch_add(&p->acks_other, 1);
    }
    itest_resp_free(&r);
    return n;
}

static void *
consumer(void *v)
{
    struct arg *a = v;

    while (!atomic_load(&a->p->stop))
        consume(a->p, a->k, 1);
    itest_req_thread_end();
    return NULL;
}

void
pc_load_start(struct pc *p, unsigned through)
{
    p->through = through;
    atomic_store(&p->stop, 0);
    for (int k = 0; k < NSC_NODES; k++) {
        if (!(through & (1u << k)))
            continue;
        args[k] = (struct arg){p, k};
        cr_assert_eq(pthread_create(&p->pusher[k], NULL, pusher, &args[k]), 0);
        cr_assert_eq(pthread_create(&p->consumer[k], NULL, consumer, &args[k]),
                     0);
    }
}

void
pc_load_stop(struct pc *p)
{
    atomic_store(&p->stop, 1);
    for (int k = 0; k < NSC_NODES; k++)
        if (p->through & (1u << k)) {
            pthread_join(p->pusher[k], NULL);
            pthread_join(p->consumer[k], NULL);
        }
    p->through = 0;
}

long
pc_accepted(struct pc *p)
{
    return atomic_load(&p->accepted);
}

/* stranded - a partition node i holds something of though it does not own
 * it when all are live, into what; 1 when there is one (or node i does not
 * answer), else 0. */
static int
stranded(struct pc *p, int i, char *what, size_t len)
{
    struct itest_resp r;
    long st =
        itest_get(&p->c->node[i], &r,
                  "/api/v1/ephemeral/queues/%s/depth?scope=node", p->queue);
    int bad = st != 200 && st != 404;

    snprintf(what, len, "node %d: depth %ld", i, st);
    for (int k = 0; st == 200 && k < itest_jlen(r.json, "partitions"); k++) {
        char path[64];
        snprintf(path, sizeof(path), "partitions.%d.partition", k);
        const char *part = itest_jstr(r.json, path);
        snprintf(path, sizeof(path), "partitions.%d.pending", k);
        int64_t pending = itest_jint(r.json, path);
        snprintf(path, sizeof(path), "partitions.%d.leased", k);
        int64_t leased = itest_jint(r.json, path);
        if (pending + leased > 0 && cl_owner(p->queue, part, CL_ALL) != i) {
            snprintf(what, len,
                     "node %d holds %lld pending, %lld leased of %s, which "
                     "node %d owns",
                     i, (long long)pending, (long long)leased, part,
                     cl_owner(p->queue, part, CL_ALL));
            bad = 1;
            break;
        }
    }
    itest_resp_free(&r);
    return bad;
}

void
pc_wait_merged(struct pc *p, int64_t heal_ms, int timeout_ms, int64_t *views_ms,
               int64_t *merged_ms)
{
    char what[256] = "";
    int bad;

    nsc_wait_settled(p->c, timeout_ms - (int)(itest_now_ms() - heal_ms));
    *views_ms = itest_now_ms() - heal_ms;
    do {
        bad = 0;
        for (int i = 0; i < NSC_NODES && !bad; i++)
            bad = stranded(p, i, what, sizeof(what));
        if (bad) {
            cr_assert_lt(itest_now_ms() - heal_ms, timeout_ms,
                         "%d ms after the heal: %s", timeout_ms, what);
            itest_sleep_ms(50);
        }
    } while (bad);
    *merged_ms = itest_now_ms() - heal_ms;
}

/* all_delivered - every accepted id has been delivered. */
static int
all_delivered(struct pc *p)
{
    unsigned n = atomic_load(&p->next);

    for (unsigned i = 0; i < n && i < IDS_MAX; i++)
        if (atomic_load(&p->via[i]) && !atomic_load(&p->delivered[i]))
            return 0;
    return 1;
}

/* empty - the cluster holds nothing of the queue, pending or leased. */
static int
empty(struct pc *p)
{
    return itest_listing_int(&p->c->node[0], p->queue, "depth", -1) == 0 &&
           itest_listing_int(&p->c->node[0], p->queue, "leased", -1) == 0;
}

void
pc_drain(struct pc *p, int timeout_ms)
{
    int64_t deadline = itest_now_ms() + timeout_ms;

    /* an ack answered 503 may have been applied (issue 30 item 3): the
     * drain ends on what the cluster holds, not on the acks' answers */
    while (!(all_delivered(p) && empty(p)) && itest_now_ms() < deadline) {
        int got = 0;
        for (int k = 0; k < NSC_NODES; k++)
            got += consume(p, k, 0);
        if (got == 0)
            itest_sleep_ms(100); /* leases of lost acks run out (2 s) */
    }
}

/* catalog - node i's declared queues with their options, as one string. */
static void
catalog(struct pc *p, int i, char *out, size_t len)
{
    struct itest_resp r;
    long st =
        itest_get(&p->c->node[i], &r, "/api/v1/ephemeral/queues?scope=node");
    size_t used = 0;

    out[0] = 0;
    if (st != 200)
        snprintf(out, len, "(listing answered %ld)", st);
    for (int k = 0; st == 200 && k < itest_jlen(r.json, "queues"); k++) {
        struct json_object *q =
            json_object_array_get_idx(itest_jget(r.json, "queues"), k);
        if (strcmp(itest_jstr(q, "tier"), "declared") != 0)
            continue;
        used += (size_t)snprintf(
            out + used, used < len ? len - used : 0, "%s=%s;",
            itest_jstr(q, "queue"),
            json_object_to_json_string_ext(itest_jget(q, "options"),
                                           JSON_C_TO_STRING_PLAIN));
    }
    itest_resp_free(&r);
}

void
pc_check(struct pc *p, const char *name)
{
    unsigned n = atomic_load(&p->next);
    long lost = 0, rereads = 0, delivered = 0, extra = 0, redelivered = 0,
         unacked = 0;
    char cat[NSC_NODES][4096], out[4096];

    for (unsigned i = 0; i < n && i < IDS_MAX; i++) {
        int via = atomic_load(&p->via[i]), d = atomic_load(&p->delivered[i]);
        int ack = atomic_load(&p->acked_att[i]),
            mx = atomic_load(&p->max_att[i]);
        delivered += d > 0;
        extra += d > 0 && !via;
        redelivered += d > 1;
        unacked += d > 0 && ack == 0;
        if (via && d == 0) {
            if (lost < 10)
                fprintf(stderr,
                        "%s: id %u (partition p%u, accepted through node %d) "
                        "never delivered\n",
                        name, i, (i / BATCH) % (unsigned)p->nparts, via - 1);
            lost++;
        }
        if (ack > 0 && mx > ack) {
            if (rereads < 10)
                fprintf(stderr,
                        "%s: id %u delivered with attempts %d after its ack "
                        "of attempts %d answered acked\n",
                        name, i, mx, ack);
            rereads++;
        }
    }
    fprintf(stderr,
            "%s: accepted %ld, delivered %ld (of them not accepted: %ld, "
            "more than once: %ld), lost %ld, re-read %ld; pushes failed %ld "
            "(503: %ld), took 1 s or more %ld (the longest %ld ms); acks "
            "stale %ld, other outcomes %ld, not answered 200 %ld; left "
            "unacked %ld\n",
            name, atomic_load(&p->accepted), delivered, extra, redelivered,
            lost, rereads, atomic_load(&p->push_fail),
            atomic_load(&p->push_503), atomic_load(&p->push_slow),
            atomic_load(&p->push_max_ms), atomic_load(&p->acks_stale),
            atomic_load(&p->acks_other), atomic_load(&p->acks_failed), unacked);
    cr_expect_gt(atomic_load(&p->accepted), 0, "%s: nothing was accepted",
                 name);
    cr_expect_eq(lost, 0, "%s: %ld accepted messages never delivered", name,
                 lost);
    cr_expect_eq(rereads, 0, "%s: %ld messages re-read after acked", name,
                 rereads);
    cr_expect(empty(p), "%s: the drain left messages in the cluster", name);

    int64_t deadline = itest_now_ms() + 15000;
    for (;;) {
        int same = 1;
        for (int i = 0; i < NSC_NODES; i++) {
            catalog(p, i, cat[i], sizeof(cat[i]));
            same = same && strcmp(cat[i], cat[0]) == 0;
        }
        if (same)
            break;
        if (itest_now_ms() > deadline) {
            for (int i = 0; i < NSC_NODES; i++)
                fprintf(stderr, "%s: node %d declares %s\n", name, i, cat[i]);
            cr_expect_fail("%s: the nodes declare different queues", name);
            break;
        }
        itest_sleep_ms(100);
    }
    cr_expect(strstr(cat[0], p->queue) != NULL, "%s: %s is not declared", name,
              p->queue);

    for (int i = 0; i < NSC_NODES; i++) {
        int rc = itest_check_segment(&p->c->node[i], out, sizeof(out));
        cr_expect_eq(rc, 0, "%s: node %d's segment: %s", name, i, out);
    }
}

void
pc_free(struct pc *p)
{
    free(p->via);
    free(p->delivered);
    free(p->max_att);
    free(p->acked_att);
    free(p);
}
