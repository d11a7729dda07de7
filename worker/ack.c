/*
 * ack.c - POST /api/v1/ephemeral/ack and /extend.
 *
 * An entry whose id is not a mayfly id answers unknown and the rest apply
 * (Queen's behaviour); a malformed body changes nothing.  Ids of another incarnation are stale without touching the
 * segment; the rest are grouped by partition so each partition is locked
 * once per request.  Results come back in request order.
 *
 * In a cluster an id names the incarnation of the node that delivered it,
 * and only that node holds the message: the entries naming another live
 * member's incarnation go there (ack_route.c).  Every node answers stale
 * for the ids it did not deliver, so the whole body can go to each node
 * named and every entry takes its outcome from its own node's answer.
 */
#include "worker/ack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/ids.h"
#include "http/parse.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/dir.h"
#include "shm/stats.h"
#include "worker/ack_reply.h"
#include "worker/ack_results.h"
#include "worker/ack_route.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/worker_int.h"

/* One entry on its way to the segment. */
struct entry {
    struct shm_name part;
    uint32_t index; /* position in the request */
    int stale;      /* another incarnation's id */
    int unknown;    /* not a mayfly id: nothing is held under it */
};

/* by_partition - qsort order: by partition, then request position. */
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
 * resolve - parse every id into ents[] and acks[] (seq, attempts).  A
 * string that is not a mayfly id is that entry's unknown, answered here
 * (its incarnation is this node's), as Queen answers it.
 */
static void
resolve(struct worker *w, const struct http_str *ids, size_t stride, uint32_t n,
        struct entry *ents, struct shm_ack *acks, uint64_t *incs)
{
    for (uint32_t i = 0; i < n; i++) {
        const struct http_str *id =
            (const struct http_str *)((const char *)ids + i * stride);
        uint64_t inc, seq;
        const char *part;
        size_t plen;

        if (http_id_parse(id->ptr, id->len, &inc, &part, &plen, &seq) != 0) {
            ents[i] = (struct entry){{"", 0}, i, 0, 1};
            incs[i] = w->incarnation;
            acks[i].seq = 0;
            continue;
        }
        ents[i] = (struct entry){{part, plen}, i, inc != w->incarnation, 0};
        incs[i] = inc;
        acks[i].seq = seq;
    }
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
    int held = -1; /* this node holds the queue: asked when it matters */

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
        /* But a queue this node does not hold at all (none such, or one
         * collected since, long after its leases ran out) holds nothing
         * under any id: unknown, as on one node, never stale. */
        if (moved && held < 0) {
            struct shm_ref qr;
            held = shm_dir_find_queue(w->seg, w->set.slot, queue, 0, now,
                                      &qr) == 0;
        }
        moved = moved && held;
        while (j < n && ents[j].part.len == ents[i].part.len &&
               memcmp(ents[j].part.ptr, ents[i].part.ptr, ents[i].part.len) ==
                   0) {
            if (ents[j].unknown) {
                acks[ents[j].index].outcome = SHM_OUT_UNKNOWN;
                if (!extend)
                    shm_count(w->seg, w->set.slot, SHM_C_ACK_UNKNOWN, 1);
            } else if (ents[j].stale) {
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
            if (ents[m].stale || ents[m].unknown)
                continue;
            acks[ents[m].index].outcome = run[r].outcome;
            acks[ents[m].index].count = run[r++].count;
        }
        i = j;
    }
}

/* What an ack or an extend names, whichever it was. */
struct ack_body {
    struct http_str queue;
    const struct http_str *group; /* NULL: queue mode (a group given must
                                     be a valid name, so not empty) */
    const struct http_str *ids;   /* ids[i] at (char *)ids + i * stride */
    size_t stride;
    uint32_t n;
};

/* What differs between an ack and an extend. */
struct ack_kind {
    const char *name;  /* "ack", "extend" */
    const char *field; /* the entries' array, named in a 400 */
    int extend;
    size_t size; /* of its parse */
    /* parse - body into parse (size bytes), described in b: 0, or -EINVAL
     * with err set. */
    int (*parse)(const char *body, size_t len, void *parse, struct ack_body *b,
                 struct http_error *err);
    /* fill - each entry's attempts, and its status or seconds, into acks. */
    void (*fill)(const void *parse, struct shm_ack *acks);
    void (*free_parse)(void *parse); /* what parse holds, and parse */
    /* replies - read the replyTos of the entries that carry a reply into
     * to[] (malloc'd array) before they apply; NULL, or what each entry's
     * result adds (malloc'd array). */
    const char **(*replies)(struct worker *w, const void *parse,
                            const struct ack_body *b, const struct entry *ents,
                            const struct shm_ack *acks, struct shm_name **to);
    /* deliver - after they applied: the replies of the entries that ended
     * the delivery they name go to to[], the others say why not. */
    void (*deliver)(struct worker *w, const void *parse,
                    const struct shm_ack *acks, const struct shm_name *to,
                    const char **extra, struct ack_reply_out **out);
};

/* An ack whose replies went to other nodes' inboxes: answered once those
 * took them (ack_reply_send). */
struct later {
    struct worker *w;
    struct ack_then then;
    int where; /* ACK_ROUTE_HERE or _FAN */
    struct ack_routes rt;
    uint64_t *incs;
    const char **extra;
    const struct http_str *ids;
    size_t stride;
    uint32_t n;
    struct ack_hold hold;
};

/* answer_later - the replies are where they go: answer (req NULL: its
 * client left) and free what the ack held. */
static void
answer_later(void *arg, struct http_request *req)
{
    struct later *l = arg;

    if (req == NULL)
        l->then.fn(l->then.arg, NULL, NULL, 0, NULL, 0, NULL);
    else if (l->where == ACK_ROUTE_HERE)
        l->then.fn(l->then.arg, req, l->ids, l->stride, l->hold.acks, l->n,
                   (const char *const *)l->extra);
    else
        ack_route_fan(l->w, req, &l->rt, l->incs, l->ids, l->stride, l->n,
                      &l->hold, (const char *const *)l->extra, &l->then);
    if (!l->hold.taken) {
        l->hold.free_parse(l->hold.parse);
        free(l->hold.acks);
    }
    free(l->extra);
    free(l->incs);
    free(l);
}

/* answer_after - the replies in out go to their nodes first: the answer
 * waits for them (takes hold, incs and extra).  0, or -ENOMEM. */
static int
answer_after(struct worker *w, struct http_request *req, int where,
             const struct ack_routes *rt, uint64_t **incs, const char ***extra,
             const struct ack_body *b, struct ack_hold *hold,
             struct ack_reply_out *out, const struct ack_then *then)
{
    struct later *l = malloc(sizeof(*l));

    if (l == NULL)
        return -ENOMEM;
    *l = (struct later){w,      *then,  where,     *rt,  *incs,
                        *extra, b->ids, b->stride, b->n, *hold};
    hold->taken = 1;
    *incs = NULL;
    *extra = NULL;
    ack_reply_send(w, req, out, l->extra, answer_later, l);
    return 0;
}

/* any_reply - whether an ack's entries carry a reply (an extend's never
 * do): replying takes the request permission besides pop. */
static int
any_reply(const struct ack_kind *k, const void *parse)
{
    const struct http_ack *a = parse;

    for (uint32_t i = 0; k->replies != NULL && i < a->n; i++)
        if (a->entries[i].has_reply)
            return 1;
    return 0;
}

/* permitted - the caller may pop in b's queue and, when an entry carries
 * a reply, send replies on it; the whole batch is refused (403) if not,
 * before any entry applies.  1 with the queue's internal name in *in. */
static int
permitted(struct worker *w, struct http_request *req, const struct ack_kind *k,
          const struct ack_body *b, const void *parse, struct worker_qname *in)
{
    struct shm_name q = {b->queue.ptr, b->queue.len};

    return worker_authz(w, req, AUTH_POP, "queue", q, in) &&
           (!any_reply(k, parse) ||
            worker_authz(w, req, AUTH_REQUEST, "queue", q, in));
}

/*
 * settle - the part ack and extend share: names, ids, apply, then (which
 * answers, or pops next).  hold->acks holds each entry's attempts and
 * status or seconds.  When entries go to other nodes, the routing takes
 * hold (the parse the ids point into, and acks) and frees it with the
 * request; else it stays the caller's.  An ack of one other node's ids
 * goes there whole, unless then->target says its body is a pop's.
 */
static void
settle(struct worker *w, struct http_request *req, const struct ack_kind *k,
       const struct ack_body *given, struct ack_hold *hold,
       const struct ack_then *then)
{
    struct worker_qname in;
    struct ack_body inside = *given; /* the queue by its internal name */
    const struct ack_body *b = &inside;
    uint32_t n = b->n;
    struct shm_ack *acks = hold->acks;
    struct entry *ents = malloc((n ? n : 1) * sizeof(*ents));
    struct shm_ack *run = malloc((n ? n : 1) * sizeof(*run));
    uint64_t *incs = malloc((n ? n : 1) * sizeof(*incs));
    const char **extra = NULL;        /* each entry's "replied", if any */
    struct shm_name *to = NULL;       /* each reply's inbox */
    struct ack_reply_out *out = NULL; /* replies for other nodes */

    /* Memory first: nothing may be applied unless all of it can be. */
    if (ents == NULL || run == NULL || incs == NULL) {
        http_reply_errno(req, -ENOMEM, k->field);
        then->fn(then->arg, NULL, NULL, 0, NULL, 0, NULL);
    } else if (http_reply_name_ok(req, "queue", b->queue.ptr, b->queue.len) &&
               (b->group == NULL ||
                http_reply_name_ok(req, "group", b->group->ptr,
                                   b->group->len)) &&
               permitted(w, req, k, given, hold->parse, &in)) {
        struct ack_routes rt;

        inside.queue = (struct http_str){in.name.ptr, in.name.len};

        resolve(w, b->ids, b->stride, n, ents, acks, incs);
        int where = ack_route_plan(w, req, incs, n, &rt);

        if (where == ACK_ROUTE_ONE && then->target == NULL) {
            worker_forward_to(w, req, rt.m[0].id, rt.m[0].addr, 0);
            then->fn(then->arg, NULL, NULL, 0, NULL, 0, NULL);
        } else {
            /* replyTos are read before the entries apply (which frees
             * them); the replies go after, for the entries that ended the
             * delivery they name (a stale one never replies) */
            if (k->replies != NULL)
                extra = k->replies(w, hold->parse, b, ents, acks, &to);
            apply(w, (struct shm_name){b->queue.ptr, b->queue.len},
                  b->group ? (struct shm_name){b->group->ptr, b->group->len}
                           : (struct shm_name){"", 0},
                  ents, acks, run, n, k->extend);
            if (to != NULL)
                k->deliver(w, hold->parse, acks, to, extra, &out);
            if (out != NULL && answer_after(w, req, where, &rt, &incs, &extra,
                                            b, hold, out, then) == 0)
                out = NULL;
            else if (where == ACK_ROUTE_HERE)
                then->fn(then->arg, req, b->ids, b->stride, acks, n,
                         (const char *const *)extra);
            else
                ack_route_fan(w, req, &rt, incs, b->ids, b->stride, n, hold,
                              (const char *const *)extra, then);
        }
    } else {
        then->fn(then->arg, NULL, NULL, 0, NULL, 0, NULL); /* answered */
    }
    ack_reply_free(out); /* not sent: no memory to wait for them */
    for (uint32_t i = 0; to != NULL && i < n; i++)
        free((char *)to[i].ptr);
    free(to);
    free(extra);
    free(incs);
    free(run);
    free(ents);
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

/* answer - the ack route's then: each entry's outcome, in request
 * order. */
static void
answer(void *arg, struct http_request *req, const struct http_str *ids,
       size_t stride, const struct shm_ack *acks, uint32_t n,
       const char *const *extra)
{
    (void)arg;
    if (req == NULL)
        return;
    ack_results_reply(req, ids, stride, acks, n, extra);
    http_request_resume(req); /* suspended when it waited on others */
}

/* ack_or_extend - parse req's body as k says, give each entry its
 * attempts and status or seconds, and settle. */
static void
ack_or_extend(struct worker *w, struct http_request *req,
              const struct ack_kind *k)
{
    void *parse = malloc(k->size);
    struct http_error err;
    struct ack_body b;
    size_t len;
    const char *body = http_request_body(req, &len);
    struct ack_hold h = {.free_parse = k->free_parse};
    static const struct ack_then then = {answer, NULL, NULL};

    if (parse == NULL) {
        http_reply_errno(req, -ENOMEM, k->name);
        return;
    }
    if (k->parse(body, len, parse, &b, &err) != 0) {
        free(parse); /* a failed parse holds nothing else */
        http_reply_http_error(req, &err);
        return;
    }
    h.parse = parse;
    h.acks = calloc(b.n ? b.n : 1, sizeof(*h.acks));
    if (h.acks == NULL) {
        http_reply_errno(req, -ENOMEM, k->name);
    } else {
        k->fill(parse, h.acks);
        settle(w, req, k, &b, &h, &then);
    }
    release(&h);
}

/* replies_ack - the replyTos of an ack's entries that carry "reply"
 * (ack_reply.c), in request order, before any applies; ents are still in
 * request order then. */
static const char **
replies_ack(struct worker *w, const void *parse, const struct ack_body *b,
            const struct entry *ents, const struct shm_ack *acks,
            struct shm_name **to)
{
    const struct http_ack *a = parse;
    const char **extra = NULL;

    for (uint32_t i = 0; i < a->n; i++) {
        if (!a->entries[i].has_reply)
            continue;
        if (extra == NULL && ((extra = calloc(a->n, sizeof(*extra))) == NULL ||
                              (*to = calloc(a->n, sizeof(**to))) == NULL)) {
            free(extra);
            return NULL; /* the entries say nothing of a reply */
        }
        extra[i] = ents[i].stale
                       ? ",\"replied\":false,\"reason\":\"the message "
                         "was delivered by another incarnation\""
                       : ack_reply_read(
                             w, (struct shm_name){b->queue.ptr, b->queue.len},
                             ents[i].part, acks[i].seq, &(*to)[i]);
    }
    return extra;
}

/* deliver_ack - each reply read goes to its inbox if its entry ended the
 * delivery it names (acked, dropped, or to come back: a reply all the
 * same); a stale or unknown entry's does not. */
static void
deliver_ack(struct worker *w, const void *parse, const struct shm_ack *acks,
            const struct shm_name *to, const char **extra,
            struct ack_reply_out **out)
{
    const struct http_ack *a = parse;

    for (uint32_t i = 0; i < a->n; i++) {
        if (to[i].ptr == NULL)
            continue;
        switch (acks[i].outcome) {
        case SHM_OUT_ACKED:
        case SHM_OUT_ACKED_DROPPED:
        case SHM_OUT_REDELIVERED:
            extra[i] =
                ack_reply_deliver(w, to[i], &a->entries[i].reply, out, i);
            break;
        case SHM_OUT_STALE:
            extra[i] = ",\"replied\":false,\"reason\":\"the ack is stale: "
                       "the message has been delivered again since\"";
            break;
        default:
            extra[i] = ",\"replied\":false,\"reason\":\"the message is not "
                       "held here: already completed or expired\"";
        }
    }
}

/* parse_ack - an ack's body (struct http_ack). */
static int
parse_ack(const char *body, size_t len, void *parse, struct ack_body *b,
          struct http_error *err)
{
    struct http_ack *a = parse;

    if (http_parse_ack(body, len, a, err) != 0)
        return -EINVAL;
    *b = (struct ack_body){a->queue, a->has_group ? &a->group : NULL,
                           a->n ? &a->entries[0].id : NULL,
                           sizeof(a->entries[0]), a->n};
    return 0;
}

/* fill_ack - each ack entry's attempts (0: the current delivery) and
 * status. */
static void
fill_ack(const void *parse, struct shm_ack *acks)
{
    const struct http_ack *a = parse;

    for (uint32_t i = 0; i < a->n; i++) {
        const struct http_ack_entry *e = &a->entries[i];
        acks[i].attempts = e->has_attempts ? e->attempts : 0;
        acks[i].status = e->upto                           ? SHM_ACK_UPTO
                         : e->status == HTTP_ACK_COMPLETED ? SHM_ACK_COMPLETED
                         : e->status == HTTP_ACK_RETRY     ? SHM_ACK_RETRY
                                                           : SHM_ACK_FAILED;
        acks[i].delay_ms = e->has_delay ? e->delay_ms : SHM_ACK_DELAY_QUEUE;
    }
}

/* free_ack - a held ack parse's release. */
static void
free_ack(void *parse)
{
    http_ack_free(parse);
    free(parse);
}

/* parse_extend - an extend's body (struct http_extend). */
static int
parse_extend(const char *body, size_t len, void *parse, struct ack_body *b,
             struct http_error *err)
{
    struct http_extend *e = parse;

    if (http_parse_extend(body, len, e, err) != 0)
        return -EINVAL;
    *b = (struct ack_body){e->queue, e->has_group ? &e->group : NULL,
                           e->n ? &e->entries[0].id : NULL,
                           sizeof(e->entries[0]), e->n};
    return 0;
}

/* fill_extend - each extend entry's attempts (0: the current delivery)
 * and seconds. */
static void
fill_extend(const void *parse, struct shm_ack *acks)
{
    const struct http_extend *e = parse;

    for (uint32_t i = 0; i < e->n; i++) {
        acks[i].attempts =
            e->entries[i].has_attempts ? e->entries[i].attempts : 0;
        acks[i].seconds = e->entries[i].seconds;
    }
}

/* free_extend - a held extend parse's release. */
static void
free_extend(void *parse)
{
    http_extend_free(parse);
    free(parse);
}

static const struct ack_kind ack_kind = {
    .name = "ack",
    .field = "acks",
    .extend = 0,
    .size = sizeof(struct http_ack),
    .parse = parse_ack,
    .fill = fill_ack,
    .free_parse = free_ack,
    .replies = replies_ack,
    .deliver = deliver_ack,
};

static const struct ack_kind extend_kind = {
    .name = "extend",
    .field = "messages",
    .extend = 1,
    .size = sizeof(struct http_extend),
    .parse = parse_extend,
    .fill = fill_extend,
    .free_parse = free_extend,
};

/* worker_ack - see ack.h. */
void
worker_ack(struct worker *w, struct http_request *req)
{
    ack_or_extend(w, req, &ack_kind);
}

/* worker_ack_pop - see ack.h. */
void
worker_ack_pop(struct worker *w, struct http_request *req, struct http_ack *a,
               const struct ack_then *then)
{
    struct ack_hold h = {.free_parse = free_ack, .parse = a};
    struct ack_body b = {a->queue, a->has_group ? &a->group : NULL,
                         a->n ? &a->entries[0].id : NULL, sizeof(a->entries[0]),
                         a->n};

    h.acks = calloc(a->n ? a->n : 1, sizeof(*h.acks));
    if (h.acks == NULL) {
        http_reply_errno(req, -ENOMEM, "acks");
        then->fn(then->arg, NULL, NULL, 0, NULL, 0, NULL);
    } else {
        fill_ack(a, h.acks);
        settle(w, req, &ack_kind, &b, &h, then);
    }
    release(&h);
}

/* worker_extend - see ack.h. */
void
worker_extend(struct worker *w, struct http_request *req)
{
    ack_or_extend(w, req, &extend_kind);
}
