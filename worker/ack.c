/*
 * ack.c - POST /api/v1/ephemeral/ack and /extend.
 *
 * Every id is checked before anything is applied, so a bad entry changes
 * nothing.  Ids of another incarnation are stale without touching the
 * segment; the rest are grouped by partition so each partition is locked
 * once per request.  Results come back in request order.
 *
 * In a cluster an id names the incarnation of the node that delivered it,
 * and only that node holds the message: the entries naming another live
 * member's incarnation go there (ack_route.c).  Every node answers stale
 * for the ids it did not deliver, so the whole body can go to each node
 * named and every entry takes its outcome from its own node's answer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/ids.h"
#include "http/parse.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/stats.h"
#include "worker/ack_route.h"
#include "worker/forward.h"
#include "worker/worker_int.h"

/* One entry on its way to the segment. */
struct entry {
    struct shm_name part;
    uint32_t index; /* position in the request */
    int stale;      /* another incarnation's id */
};

static int
by_partition(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    size_t n = x->part.len < y->part.len ? x->part.len : y->part.len;
    int c = memcmp(x->part.ptr, y->part.ptr, n);
    if (c != 0)
        return c;
    if (x->part.len != y->part.len)
        return x->part.len < y->part.len ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * resolve - parse every id into ents[] and acks[] (seq, attempts);
 * answers 400 naming the first bad one.  0 or -EINVAL.
 */
static int
resolve(struct worker *w, struct http_request *req, const char *field,
        const struct http_str *ids, size_t stride, uint32_t n,
        struct entry *ents, struct shm_ack *acks, uint64_t *incs)
{
    for (uint32_t i = 0; i < n; i++) {
        const struct http_str *id =
            (const struct http_str *)((const char *)ids + i * stride);
        uint64_t inc, seq;
        const char *part;
        size_t plen;

        if (http_id_parse(id->ptr, id->len, &inc, &part, &plen, &seq) != 0) {
            http_reply_error(req, 400, "ephemeral_bad_request",
                             "field '%s[%u].id' is not a message id", field, i);
            return -EINVAL;
        }
        ents[i] = (struct entry){{part, plen}, i, inc != w->incarnation};
        incs[i] = inc;
        acks[i].seq = seq;
    }
    return 0;
}

/*
 * apply - run acks (or extends) partition by partition.  ents is sorted by
 * partition afterwards; outcomes land in acks[] at request positions.
 */
static void
apply(struct worker *w, struct shm_name queue, struct shm_name group,
      struct entry *ents, struct shm_ack *acks, struct shm_ack *run, uint32_t n,
      int extend)
{
    uint64_t now = shm_now_ms();
    uint32_t i = 1;

    /* A batch popped from one partition comes back in order: one look at
     * each neighbour replaces the sort. */
    while (i < n && by_partition(&ents[i - 1], &ents[i]) < 0)
        i++;
    if (i < n)
        qsort(ents, n, sizeof(*ents), by_partition);
    for (i = 0; i < n;) {
        uint32_t j = i, k = 0;
        /* Handed to its new owner, the partition's messages went under new
         * ids: the old ones are stale here, as after a restart. */
        int moved = !worker_serves_all(w) &&
                    !shm_owner_here(&w->owners, queue, ents[i].part);
        while (j < n && ents[j].part.len == ents[i].part.len &&
               memcmp(ents[j].part.ptr, ents[i].part.ptr, ents[i].part.len) ==
                   0) {
            if (ents[j].stale) {
                acks[ents[j].index].outcome = SHM_OUT_STALE;
                if (!extend)
                    shm_count(w->seg, w->set.slot, SHM_C_ACK_STALE, 1);
            } else {
                run[k] = acks[ents[j].index];
                run[k++].moved = (uint32_t)moved;
            }
            j++;
        }
        if (k > 0 && extend)
            shm_extend(w->seg, w->set.slot, queue, ents[i].part, group, run, k,
                       now);
        else if (k > 0)
            shm_ack(w->seg, w->set.slot, queue, ents[i].part, group, run, k,
                    now);
        for (uint32_t m = i, r = 0; m < j; m++) {
            if (!ents[m].stale)
                acks[ents[m].index].outcome = run[r++].outcome;
        }
        i = j;
    }
}

/* outcome_text - what follows an entry's id: the outcome (and the drop)
 * as JSON text, up to the entry's closing brace (ack_route.c reads them
 * back from other nodes' answers). */
const char *
ack_outcome_text(uint32_t o)
{
    switch (o) {
    case SHM_OUT_ACKED:
        return ",\"outcome\":\"acked\"}";
    case SHM_OUT_ACKED_DROPPED:
        return ",\"outcome\":\"acked\",\"dropped\":true}";
    case SHM_OUT_REDELIVERED:
        return ",\"outcome\":\"redelivered\"}";
    case SHM_OUT_STALE:
        return ",\"outcome\":\"stale\"}";
    case SHM_OUT_EXTENDED:
        return ",\"outcome\":\"extended\"}";
    default:
        return ",\"outcome\":\"unknown\"}";
    }
}

/* The longest outcome_text(). */
#define ACK_OUTCOME_MAX sizeof(",\"outcome\":\"acked\",\"dropped\":true}")

/*
 * ack_reply_results - {"results": [{"id", "outcome", "dropped"?}]}, sized
 * first (each id's escaped length) so the reply is reserved once.
 */
void
ack_reply_results(struct http_request *req, const struct http_str *ids,
                  size_t stride, const struct shm_ack *acks, uint32_t n)
{
    static const char head[] = "{\"results\":[", id_key[] = "{\"id\":\"";
    struct http_buf b = {0};
    size_t need = sizeof(head) + 2;
    char *o;

    for (uint32_t i = 0; i < n; i++) {
        const struct http_str *id =
            (const struct http_str *)((const char *)ids + i * stride);
        need += sizeof(id_key) + 2 + http_json_esc_len(id->ptr, id->len) +
                ACK_OUTCOME_MAX;
    }
    if (http_buf_reserve(&b, need) != 0) {
        http_reply(req, 200, &b); /* oom: answered 500 */
        return;
    }
    o = http_buf_tail(&b);
    memcpy(o, head, sizeof(head) - 1);
    o += sizeof(head) - 1;
    for (uint32_t i = 0; i < n; i++) {
        const struct http_str *id =
            (const struct http_str *)((const char *)ids + i * stride);
        const char *text = ack_outcome_text(acks[i].outcome);
        size_t tlen = strlen(text);

        if (i)
            *o++ = ',';
        memcpy(o, id_key, sizeof(id_key) - 1);
        o = http_put_json_esc(o + sizeof(id_key) - 1, id->ptr, id->len);
        *o++ = '"';
        memcpy(o, text, tlen);
        o += tlen;
    }
    *o++ = ']';
    *o++ = '}';
    http_buf_commit(&b, o);
    http_reply(req, 200, &b);
}

/*
 * settle - the part ack and extend share: names, ids, apply, answer.
 * group is NULL for queue mode (a group given must be a valid name, so
 * not empty); ids[i] is at (char *)ids + i * stride (each entry's id).
 * When entries go to other nodes, the routing takes hold (the parse the
 * ids point into, and acks) and frees it with the request; else it stays
 * the caller's.
 */
static void
settle(struct worker *w, struct http_request *req, struct http_str q,
       const struct http_str *group, const char *field,
       const struct http_str *ids, size_t stride, struct shm_ack *acks,
       uint32_t n, int extend, struct ack_hold *hold)
{
    struct entry *ents = malloc((n ? n : 1) * sizeof(*ents));
    struct shm_ack *run = malloc((n ? n : 1) * sizeof(*run));
    uint64_t *incs = malloc((n ? n : 1) * sizeof(*incs));

    /* Memory first: nothing may be applied unless all of it can be. */
    if (ents == NULL || run == NULL || incs == NULL) {
        http_reply_errno(req, -ENOMEM, field);
    } else if (http_reply_name_ok(req, "queue", q.ptr, q.len) &&
               (group == NULL ||
                http_reply_name_ok(req, "group", group->ptr, group->len)) &&
               resolve(w, req, field, ids, stride, n, ents, acks, incs) == 0) {
        struct ack_routes rt;
        int where = ack_route_plan(w, req, incs, n, &rt);

        if (where == ACK_ROUTE_ONE) {
            worker_forward_to(w, req, rt.m[0].id, rt.m[0].addr, 0);
        } else {
            apply(w, (struct shm_name){q.ptr, q.len},
                  group ? (struct shm_name){group->ptr, group->len}
                        : (struct shm_name){"", 0},
                  ents, acks, run, n, extend);
            if (where == ACK_ROUTE_HERE)
                ack_reply_results(req, ids, stride, acks, n);
            else
                ack_route_fan(w, req, &rt, incs, ids, stride, n, hold);
        }
    }
    free(incs);
    free(run);
    free(ents);
}

/* free_ack, free_extend - a held parse's release. */
static void
free_ack(void *p)
{
    http_ack_free(p);
    free(p);
}

static void
free_extend(void *p)
{
    http_extend_free(p);
    free(p);
}

/* release - what settle left to its caller. */
static void
release(struct ack_hold *h)
{
    if (h->taken)
        return;
    if (h->parse != NULL)
        h->free_parse(h->parse);
    free(h->acks);
}

void
worker_ack(struct worker *w, struct http_request *req)
{
    struct http_ack *a = malloc(sizeof(*a));
    struct http_error err;
    size_t len;
    const char *body = http_request_body(req, &len);
    struct ack_hold h = {.free_parse = free_ack};

    if (a == NULL) {
        http_reply_errno(req, -ENOMEM, "ack");
        return;
    }
    if (http_parse_ack(body, len, a, &err) != 0) {
        free(a);
        http_reply_http_error(req, &err);
        return;
    }
    h.parse = a;
    h.acks = calloc(a->n ? a->n : 1, sizeof(*h.acks));
    if (h.acks == NULL) {
        http_reply_errno(req, -ENOMEM, "ack");
    } else {
        for (uint32_t i = 0; i < a->n; i++) {
            const struct http_ack_entry *e = &a->entries[i];
            h.acks[i].attempts = e->has_attempts ? e->attempts : 0;
            h.acks[i].status = e->status == HTTP_ACK_COMPLETED
                                   ? SHM_ACK_COMPLETED
                               : e->status == HTTP_ACK_RETRY ? SHM_ACK_RETRY
                                                             : SHM_ACK_FAILED;
        }
        settle(w, req, a->queue, a->has_group ? &a->group : NULL, "acks",
               a->n ? &a->entries[0].id : NULL, sizeof(a->entries[0]), h.acks,
               a->n, 0, &h);
    }
    release(&h);
}

void
worker_extend(struct worker *w, struct http_request *req)
{
    struct http_extend *e = malloc(sizeof(*e));
    struct http_error err;
    size_t len;
    const char *body = http_request_body(req, &len);
    struct ack_hold h = {.free_parse = free_extend};

    if (e == NULL) {
        http_reply_errno(req, -ENOMEM, "extend");
        return;
    }
    if (http_parse_extend(body, len, e, &err) != 0) {
        free(e);
        http_reply_http_error(req, &err);
        return;
    }
    h.parse = e;
    h.acks = calloc(e->n ? e->n : 1, sizeof(*h.acks));
    if (h.acks == NULL) {
        http_reply_errno(req, -ENOMEM, "extend");
    } else {
        for (uint32_t i = 0; i < e->n; i++) {
            h.acks[i].attempts =
                e->entries[i].has_attempts ? e->entries[i].attempts : 0;
            h.acks[i].seconds = e->entries[i].seconds;
        }
        settle(w, req, e->queue, e->has_group ? &e->group : NULL, "messages",
               e->n ? &e->entries[0].id : NULL, sizeof(e->entries[0]), h.acks,
               e->n, 1, &h);
    }
    release(&h);
}
