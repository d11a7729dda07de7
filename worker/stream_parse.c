/*
 * stream_parse.c - a subscribe request's query and headers (SPEC §11):
 * queue and partition?, or subs (a JSON array of [queue] / [queue,
 * partition]); from (new by default for a stream), group?, and the cursor
 * of Last-Event-ID (or lastEventId, for clients that cannot set
 * headers); presence_events, repeated for several channels, each one more
 * subscription within max_subs (presence_stream.h).  Every refusal is a
 * 400 naming the field; nothing else is checked here (permissions, bounds
 * of the node: stream.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/errors.h"
#include "http/json_scan.h"
#include "http/names.h"
#include "http/node_call.h"
#include "http/query.h"
#include "http/request.h"
#include "worker/presence_stream.h"
#include "worker/stream_int.h"

#define BAD "ephemeral_bad_request"

/* parse_from - "new" (the default), "last", "all". */
static int
parse_from(const struct http_query *q, enum shm_from *out,
           struct http_error *err)
{
    const char *v = http_query_get(q, "from", NULL);

    *out = SHM_FROM_NEW;
    if (v == NULL || strcmp(v, "new") == 0)
        return 0;
    if (strcmp(v, "last") == 0)
        *out = SHM_FROM_LAST;
    else if (strcmp(v, "all") == 0)
        *out = SHM_FROM_ALL;
    else {
        http_error_set(err, 400, BAD,
                       "query parameter 'from' must be new, last or all");
        return -EINVAL;
    }
    return 0;
}

/* name_ok - p[0..n) is a name (SPEC §1), else 400 invalid_name naming
 * what. */
static int
name_ok(const char *what, const char *p, size_t n, struct http_error *err)
{
    if (http_name_valid(p, n))
        return 1;
    http_error_set(err, 400, "invalid_name",
                   "%s must be 1-512 bytes of UTF-8 without control "
                   "characters",
                   what);
    return 0;
}

/* same_name - a and b are one name. */
static int
same_name(struct shm_name a, struct shm_name b)
{
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* overlap - subs i and k read the same messages: one partition twice, or a
 * partition of a queue listed whole too. */
static int
overlap(const struct stream_sub *i, const struct stream_sub *k)
{
    return same_name(i->queue, k->queue) &&
           (i->part.len == 0 || k->part.len == 0 ||
            same_name(i->part, k->part));
}

/* check_overlaps - no message would come twice on one stream. */
static int
check_overlaps(const struct stream_args *a, struct http_error *err)
{
    for (size_t i = 1; i < a->nsubs; i++)
        for (size_t k = 0; k < i; k++)
            if (overlap(&a->subs[i], &a->subs[k])) {
                http_error_set(err, 400, BAD,
                               "query parameter 'subs' lists queue '%.*s' "
                               "twice (entries %zu and %zu read the same "
                               "partition)",
                               (int)a->subs[i].queue.len, a->subs[i].queue.ptr,
                               k, i);
                return -EINVAL;
            }
    return 0;
}

/* sub_string - one string of an entry into *out, unescaped at *mem. */
static int
sub_string(struct http_json *j, char **mem, struct shm_name *out)
{
    size_t n;

    if (http_json_peek(j) != '"' || http_json_string(j, *mem, &n) != 0)
        return -EINVAL;
    *out = (struct shm_name){*mem, n};
    *mem += n;
    return 0;
}

/* sub_entry - one [queue] or [queue, partition] at j into s. */
static int
sub_entry(struct http_json *j, char **mem, struct stream_sub *s)
{
    if (http_json_peek(j) != '[' || http_json_enter(j) != 1 ||
        sub_string(j, mem, &s->queue) != 0)
        return -EINVAL;
    int more = http_json_next(j, ']');
    if (more > 0 && (sub_string(j, mem, &s->part) != 0 ||
                     (more = http_json_next(j, ']')) != 0))
        return -EINVAL;
    return more;
}

/*
 * parse_subs - v[0..n), the subs array, into a->subs: at most max entries,
 * each a valid name or two.  The unescaped names go into mem (n bytes).
 */
static int
parse_subs(const char *v, size_t n, uint32_t max, char *mem, int node,
           struct stream_args *a, struct http_error *err)
{
    struct http_json j;
    int more;

    http_json_init(&j, v, n);
    if (http_json_peek(&j) != '[')
        goto bad;
    more = http_json_enter(&j);
    while (more > 0) {
        if (a->nsubs == max) {
            http_error_set(err, 400, BAD,
                           "query parameter 'subs' lists more than "
                           "stream_max_subs (%u) subscriptions",
                           max);
            return -EINVAL;
        }
        struct stream_sub *s = &a->subs[a->nsubs];
        if (sub_entry(&j, &mem, s) != 0)
            goto bad;
        if (node) /* a watch's presence subscription (presence_stream.h) */
            worker_presence_stream_unmark(s);
        if (!name_ok("each queue of 'subs'", s->queue.ptr, s->queue.len, err) ||
            (s->part.ptr != NULL && !name_ok("each partition of 'subs'",
                                             s->part.ptr, s->part.len, err)))
            return -EINVAL;
        a->nsubs++;
        more = http_json_next(&j, ']');
    }
    http_json_ws(&j);
    if (more == 0 && j.p == j.end && a->nsubs > 0)
        return 0;
bad:
    http_error_set(err, 400, BAD,
                   "query parameter 'subs' must be a JSON array of one or "
                   "more [queue] or [queue, partition] arrays of strings");
    return -EINVAL;
}

/* parse_one - queue and partition? as the one subscription. */
static int
parse_one(const struct http_query *q, struct stream_args *a,
          struct http_error *err)
{
    size_t ql = 0, pl = 0;
    const char *qn = http_query_get(q, "queue", &ql);
    const char *pn = http_query_get(q, "partition", &pl);

    if (qn == NULL && worker_presence_stream_wanted(q))
        return 0; /* presence alone (presence_stream.h) */
    if (qn == NULL) {
        http_error_set(err, 400, BAD,
                       "query parameter 'queue' (or 'subs') is required");
        return -EINVAL;
    }
    if (!name_ok("queue", qn, ql, err) ||
        (pn != NULL && !name_ok("partition", pn, pl, err)))
        return -EINVAL;
    a->subs[0].queue = (struct shm_name){qn, ql};
    if (pn != NULL)
        a->subs[0].part = (struct shm_name){pn, pl};
    a->nsubs = 1;
    return 0;
}

/* parse_cursor - Last-Event-ID, or lastEventId: empty is none. */
static int
parse_cursor(struct http_request *req, struct stream_args *a,
             struct http_error *err)
{
    const char *v = http_request_header(req, "Last-Event-ID");
    const char *field = "the Last-Event-ID header";
    size_t n;

    if (v == NULL) {
        v = http_query_get(http_request_args(req), "lastEventId", &n);
        field = "query parameter 'lastEventId'";
    } else
        n = strlen(v);
    if (v == NULL || n == 0)
        return 0;
    if (http_cursor_decode(v, n, &a->cursor) != 0) {
        http_error_set(err, 400, BAD,
                       "%s is not a cursor this stream gave (an event's id)",
                       field);
        return -EINVAL;
    }
    a->has_cursor = 1;
    return 0;
}

/* stream_parse - see stream_int.h. */
int
stream_parse(struct http_request *req, uint32_t max_subs, struct stream_args *a,
             struct http_error *err)
{
    const struct http_query *q = http_request_args(req);
    size_t sl = 0, gl = 0;
    const char *subs = http_query_get(q, "subs", &sl);
    const char *gn = http_query_get(q, "group", &gl);
    char *mem = NULL;
    int rc;

    memset(a, 0, sizeof(*a));
    if (subs != NULL && http_query_get(q, "queue", NULL) != NULL) {
        http_error_set(err, 400, BAD,
                       "give query parameter 'queue' or 'subs', not both");
        return -EINVAL;
    }
    /* one more than allowed, so the one past the bound is seen */
    a->subs = calloc(subs != NULL ? (size_t)max_subs + 1 : 1, sizeof(*a->subs));
    if (a->subs == NULL || (subs != NULL && (mem = malloc(sl + 1)) == NULL)) {
        free(a->subs);
        http_error_set(err, 500, "internal", "out of memory");
        return -ENOMEM;
    }
    rc = subs != NULL
             ? parse_subs(subs, sl, max_subs, mem,
                          http_request_header(req, HTTP_NODE_FORWARDED) != NULL,
                          a, err)
             : parse_one(q, a, err);
    if (rc == 0)
        rc = check_overlaps(a, err);
    if (rc == 0)
        rc = worker_presence_stream_subs(q, a, max_subs, err);
    if (rc == 0 && gn != NULL && !name_ok("group", gn, gl, err))
        rc = -EINVAL;
    if (rc == 0)
        rc = parse_from(q, &a->from, err);
    if (rc == 0)
        rc = parse_cursor(req, a, err);
    if (rc != 0) {
        free(mem);
        free(a->subs);
        a->subs = NULL;
        return rc;
    }
    a->mem = mem;
    a->grouped = gn != NULL;
    if (gn != NULL)
        a->group = (struct shm_name){gn, gl};
    return 0;
}

/* stream_hash - see stream_int.h.  Each entry is its queue, a 0 byte, its
 * partition (none for a whole queue) and a 1 byte, the group after a 2
 * byte: names hold no control characters, so no two lists meet. */
uint32_t
stream_hash(const struct stream_args *a)
{
    static const unsigned char sep[3] = {0, 1, 2};
    uint32_t h = HTTP_CURSOR_SEED;

    for (size_t i = 0; i < a->nsubs; i++) {
        const struct stream_sub *s = &a->subs[i];
        h = http_cursor_hash(h, s->queue.ptr, s->queue.len);
        h = http_cursor_hash(h, &sep[0], 1);
        h = http_cursor_hash(h, s->part.ptr, s->part.len);
        h = http_cursor_hash(h, &sep[1], 1);
    }
    if (a->grouped) {
        h = http_cursor_hash(h, &sep[2], 1);
        h = http_cursor_hash(h, a->group.ptr, a->group.len);
    }
    return h;
}
