/*
 * presence.c - see presence.h.
 *
 * Answers: enter {"channel", "member", "action": "enter"|"update"|
 * "renew"}; leave {"channel", "member", "left"}; list {"channel",
 * "count", "members": [{"member", "data", "since", "connections"}],
 * "truncated", "next"?}, count=true {"channel", "count"}.  Errors: 429
 * presence_full (the channel holds presence_max_members), 413
 * presence_data_too_large (data over presence_max_data), 503
 * ephemeral_unavailable (the node's memory), each naming the field or the
 * bound.
 */
#include "worker/presence.h"

#include <errno.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/names.h"
#include "http/parse_presence.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/presence.h"
#include "shm/segment.h"
#include "worker/forward.h"
#include "worker/presence_events.h"
#include "worker/worker_int.h"

/* worker_presence_name - see presence.h. */
int
worker_presence_name(struct worker *w, struct http_request *req,
                     enum auth_verb verb, const char *field,
                     struct shm_name channel, struct worker_qname *out)
{
    struct worker_qname in;
    struct shm_name shown;
    size_t pre;

    if (!http_reply_name_ok(req, field, channel.ptr, channel.len) ||
        !worker_authz(w, req, verb, field, channel, &in))
        return 0;
    shown = worker_client_name(in.name);
    pre = in.name.len - shown.len;
    if (in.name.len + 1 > SHM_NAME_MAX) {
        http_reply_error(req, 400, "invalid_name",
                         "field '%s': the channel's name and its tenant take "
                         "more than %d bytes",
                         field, SHM_NAME_MAX - 1);
        return 0;
    }
    memcpy(out->buf, in.name.ptr, pre);
    out->buf[pre] = SHM_PRES_MARK;
    memcpy(out->buf + pre + 1, shown.ptr, shown.len);
    out->name = (struct shm_name){out->buf, in.name.len + 1};
    return 1;
}

/* worker_presence_shown - see presence.h. */
struct shm_name
worker_presence_shown(struct shm_name pres)
{
    struct shm_name s = worker_client_name(pres);

    if (s.len > 0 && s.ptr[0] == SHM_PRES_MARK)
        s = (struct shm_name){s.ptr + 1, s.len - 1};
    return s;
}

/* head - {"channel":..,"member":.. into b. */
static void
head(struct http_buf *b, struct shm_name pres, struct http_str member)
{
    struct shm_name shown = worker_presence_shown(pres);

    http_buf_append_str(b, "{\"channel\":");
    http_buf_append_json_str(b, shown.ptr, shown.len);
    http_buf_append_str(b, ",\"member\":");
    http_buf_append_json_str(b, member.ptr, member.len);
}

/* worker_presence_refused - see presence.h. */
void
worker_presence_refused(struct worker *w, struct http_request *req, int rc,
                        size_t data_len)
{
    struct shm_pres_totals t;

    shm_presence_totals(w->seg, &t);
    switch (rc) {
    case -ENOSPC:
        http_reply_header(req, "Retry-After", "1");
        http_reply_error(req, 429, "presence_full",
                         "the channel holds presence_max_members (%u) "
                         "members already",
                         t.max_members);
        break;
    case -E2BIG:
        http_reply_error(req, 413, "presence_data_too_large",
                         "field 'data' is %zu bytes; presence_max_data is %u",
                         data_len, t.max_data);
        break;
    case -ENOMEM:
        http_reply_header(req, "Retry-After", "1");
        http_reply_error(req, 503, "ephemeral_unavailable",
                         "the node's memory (max_bytes) or its presence "
                         "table is full");
        break;
    case -EPERM:
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "field 'connections' is a node's, not a client's");
        break;
    default:
        http_reply_errno(req, rc, "presence");
    }
}

/* parse - the body of enter or leave, names checked, the channel's
 * presence name in *pn; 0 when req was answered.  p is freed by the
 * caller either way. */
static int
parse(struct worker *w, struct http_request *req, int enter,
      struct http_presence *p, struct worker_qname *pn)
{
    struct http_error err;
    size_t len;
    const char *body = http_request_body(req, &len);

    if (http_parse_presence(body, len, enter, p, &err) != 0) {
        http_reply_http_error(req, &err);
        return 0;
    }
    if (!http_reply_name_ok(req, "member", p->member.ptr, p->member.len) ||
        !worker_presence_name(w, req, AUTH_PRESENCE, "channel",
                              (struct shm_name){p->channel.ptr, p->channel.len},
                              pn))
        return 0;
    return worker_route_member(w, req, pn->name, WORKER_PRES_PART);
}

/* worker_presence_enter - see presence.h. */
void
worker_presence_enter(struct worker *w, struct http_request *req)
{
    static const char *const said[] = {"renew", "enter", "leave", "update"};
    struct http_presence p;
    struct worker_qname pn;
    struct http_buf b = {0};
    int rc;

    if (parse(w, req, 1, &p, &pn)) {
        struct shm_name data = {p.data.ptr, p.data.len};
        struct shm_name mn = {p.member.ptr, p.member.len};
        if (p.has_connections &&
            http_request_header(req, FORWARD_HEADER) != NULL)
            rc = shm_presence_set(
                w->seg, pn.name, mn, p.has_data ? &data : NULL, p.node.ptr,
                p.connections, w->set.presence_grace_ms, shm_now_ms(),
                worker_presence_event, w); /* a node's streams */
        else if (p.has_connections)
            rc = -EPERM;
        else
            rc = shm_presence_enter(w->seg, pn.name, mn,
                                    p.has_data ? &data : NULL,
                                    (uint64_t)p.ttl_s * 1000, shm_now_ms(),
                                    worker_presence_event, w);
        if (rc < 0) {
            worker_presence_refused(w, req, rc, p.data.len);
        } else {
            head(&b, pn.name, p.member);
            http_buf_printf(&b, ",\"action\":\"%s\"}", said[rc]);
            http_reply(req, 200, &b);
        }
    }
    http_presence_free(&p);
}

/* worker_presence_leave - see presence.h. */
void
worker_presence_leave(struct worker *w, struct http_request *req)
{
    struct http_presence p;
    struct worker_qname pn;
    struct http_buf b = {0};
    int rc;

    if (parse(w, req, 0, &p, &pn)) {
        rc = shm_presence_leave(w->seg, pn.name,
                                (struct shm_name){p.member.ptr, p.member.len},
                                shm_now_ms(), worker_presence_event, w);
        if (rc < 0) {
            worker_presence_refused(w, req, rc, 0);
        } else {
            head(&b, pn.name, p.member);
            http_buf_printf(&b, ",\"left\":%s}", rc ? "true" : "false");
            http_reply(req, 200, &b);
        }
    }
    http_presence_free(&p);
}

/* worker_presence_members_json - see presence.h. */
void
worker_presence_members_json(struct http_buf *b, const struct shm_pres_list *l)
{
    http_buf_append_str(b, ",\"members\":[");
    for (uint32_t i = 0; i < l->n; i++) {
        const struct shm_pres_info *m = &l->m[i];
        http_buf_append_str(b, i ? ",{\"member\":" : "{\"member\":");
        http_buf_append_json_str(b, m->member.ptr, m->member.len);
        http_buf_append_str(b, ",\"data\":");
        if (m->data.len > 0)
            http_buf_append(b, m->data.ptr, m->data.len);
        else
            http_buf_append_str(b, "null");
        http_buf_printf(b, ",\"since\":%llu,\"connections\":%u}",
                        (unsigned long long)m->since, m->connections);
    }
    http_buf_append_str(b, "]");
}

/* list_json - the members of l and where the page ends, into b. */
static void
list_json(struct http_buf *b, const struct shm_pres_list *l)
{
    worker_presence_members_json(b, l);
    http_buf_append_str(b, ",\"truncated\":");
    if (l->truncated && l->n > 0) {
        http_buf_append_str(b, "true,\"next\":");
        http_buf_append_json_str(b, l->m[l->n - 1].member.ptr,
                                 l->m[l->n - 1].member.len);
    } else {
        http_buf_append_str(b, "false");
    }
}

/* worker_presence_list - see presence.h. */
void
worker_presence_list(struct worker *w, struct http_request *req)
{
    const struct http_query *q = http_request_args(req);
    struct http_error err;
    struct worker_qname pn;
    struct http_buf b = {0};
    struct shm_pres_list l;
    size_t len, alen = 0;
    const char *name = http_request_param(req, &len);
    const char *after = http_query_get(q, "after", &alen);
    struct shm_name an = {after, alen};
    uint32_t limit;
    int count, rc;

    if (http_query_u32(q, "limit", 1000, 1, 100000, &limit, &err) != 0 ||
        http_query_bool(q, "count", 0, &count, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if ((after && !http_reply_name_ok(req, "after", after, alen)) ||
        !worker_presence_name(w, req, AUTH_READ, "channel",
                              (struct shm_name){name, len}, &pn) ||
        !worker_route_member(w, req, pn.name, WORKER_PRES_PART))
        return;
    http_buf_append_str(&b, "{\"channel\":");
    http_buf_append_json_str(&b, name, len);
    if (count) {
        http_buf_printf(&b, ",\"count\":%u}",
                        shm_presence_count(w->seg, pn.name));
        http_reply(req, 200, &b);
        return;
    }
    rc = shm_presence_list(w->seg, pn.name, after ? &an : NULL, limit, &l);
    if (rc != 0) {
        http_buf_free(&b);
        http_reply_errno(req, rc, "presence listing");
        return;
    }
    http_buf_printf(&b, ",\"count\":%u", l.count);
    list_json(&b, &l);
    http_buf_append_str(&b, "}");
    shm_presence_list_free(&l);
    http_reply(req, 200, &b);
}
