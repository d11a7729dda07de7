/*
 * rpc.c - POST /api/v1/ephemeral/request (SPEC §9).
 *
 * One call, one inbox: the worker mints an inbox name that carries this
 * node's id (shm/inbox.h), makes the inbox by popping it once (so a reply
 * that comes before we wait finds it), pushes the payload with the inbox
 * as its replyTo, and waits on the inbox as a parked pop waits
 * (worker_pop_wait): a reply pushed there, by an ack entry with "reply" or
 * a plain push, wakes it.  However the wait ends, the inbox is deleted at
 * once, so a late reply finds nothing (shm_push never makes an inbox) and
 * nothing waits for idle collection; a request that ends without a reply
 * is withdrawn (dropped at once if nobody read it yet: shm/inbox.h).
 *
 * Before anything is stored, a partition nobody listens on (no pop parked
 * there, no group active within responders_idle_ms) answers 503
 * no_responders at once.
 *
 * In a cluster the inbox is always minted here, on the node that holds the
 * requester's connection; a partition another node owns gets only the
 * request's store from there: one forward of the request with "replyTo"
 * (a member only nodes may send: a signed call, marked X-Mayfly-Forwarded,
 * http/node_call.h), answered 201
 * {"id"} at once, bounded by the request's timeout.  The wait stays here,
 * and so does the withdrawal's decision: a request that ends without a
 * reply is withdrawn at its owner by a forwarded call with
 * X-Mayfly-Withdraw (best effort; a late reply is dropped anyway).
 *
 * The store's forward waits FORWARD_MS at most: no answer within the
 * request's own timeout is 504, past FORWARD_MS 503
 * ephemeral_forward_failed, and the owner's refusal is relayed as it came.
 * X-Mayfly-Withdraw names the stored id, or the inbox when the store's
 * answer never came (shm_withdraw_reply finds the request by its replyTo).
 * An owner that reads a store whose sender has closed the connection
 * meanwhile (its worker stalled past the timeout) stores nothing.
 */
#include "worker/rpc.h"

#include <sys/socket.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/errors.h"
#include "http/ids.h"
#include "http/parse_rpc.h"
#include "http/peer_answer.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/inbox.h"
#include "shm/log.h"
#include "shm/queue_admin.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/pop_inbox.h"
#include "worker/view.h"
#include "worker/worker_int.h"

#define DEFAULT_TIMEOUT_MS 5000
#define INBOX_MAX          (AUTH_TENANT_MAX + 1 + SHM_INBOX_PREFIX_LEN + 64 + 96)
#define WITHDRAW_HEADER    HTTP_NODE_WITHDRAW

/* One request waiting for its reply. */
struct rpc_call {
    struct worker *w;
    uint64_t start_us;
    uint64_t seq; /* the request's sequence in its partition */
    uint32_t timeout_ms;
    char *names; /* queue and partition, copied */
    struct shm_name queue, part;
    struct http_request *req;
    struct http_buf body; /* the store sent to the owner */
    char *id;    /* stored at another node: the id it gave; else NULL */
    int pending; /* the store at the owner has not answered yet */
    int owner;   /* 1: stored at owner_id (owner_addr) */
    char owner_id[SHM_BOARD_ID_MAX];
    char owner_addr[SHM_BOARD_ADDR_MAX];
    size_t inbox_len;
    char inbox[INBOX_MAX];
    uint32_t gather_max;   /* request-many: replies to wait for; 0: one */
    uint32_t gather_quiet; /* ms after the last reply; 0: none */
};

/* mint - a name no other request of any node or incarnation ever had:
 * the process id sets apart a worker respawned into the same slot, whose
 * serial starts again at 0 (a late reply to its predecessor's request must
 * find nothing).  64 random bits end it: the rest can be guessed from ids
 * any client sees, and a reply pushed by hand needs only the request
 * permission of the tenant, so a guessed name would let another requester
 * of the tenant answer in its place. */
static void
mint(struct rpc_call *c)
{
    static uint64_t serial;
    static pid_t pid; /* a worker never forks: asked once, not per request */
    uint64_t secret;

    if (pid == 0)
        pid = getpid();
    arc4random_buf(&secret, sizeof(secret));
    size_t t = worker_tenant_prefix(c->w, c->inbox); /* the requester's */
    int n = snprintf(c->inbox + t, sizeof(c->inbox) - t,
                     SHM_INBOX_PREFIX "%s/%" PRIx64 ".%d.%x.%" PRIx64
                                      ".%016" PRIx64,
                     c->w->set.node_id, c->w->incarnation, c->w->set.slot,
                     (unsigned)pid, ++serial, secret);

    c->inbox_len = (size_t)n < sizeof(c->inbox) - t ? t + (size_t)n : 0;
}

/* inbox_name - c's inbox as a name. */
static struct shm_name
inbox_name(const struct rpc_call *c)
{
    return (struct shm_name){c->inbox, c->inbox_len};
}

/* ended - count a request that ended with result counter k. */
static void
ended(struct rpc_call *c, enum shm_counter k)
{
    struct worker *w = c->w;

    shm_count(w->seg, w->set.slot, k, 1);
    shm_request_observe(w->seg, w->set.slot, shm_now_us() - c->start_us);
}

/* reply_ok - 200 {"reply", "id", "ms"}. */
static void
reply_ok(struct rpc_call *c, struct http_request *req, const char *reply,
         size_t len)
{
    struct http_buf b = {0};
    size_t esc = http_json_esc_len(c->part.ptr, c->part.len);
    uint64_t ms = (shm_now_us() - c->start_us) / 1000;

    if (c->id != NULL)
        esc = http_json_esc_len(c->id, strlen(c->id)); /* whole, quoted */
    if (http_buf_reserve(&b, len + HTTP_ID_PREFIX_LEN(esc) + HTTP_ID_SEQ_MAX +
                                 HTTP_PUT_U64_MAX + 32) == 0) {
        char *o = http_buf_tail(&b);
        memcpy(o, "{\"reply\":", 9);
        memcpy(o + 9, reply, len);
        o += 9 + len;
        memcpy(o, ",\"id\":", 6);
        if (c->id != NULL) {
            *(o += 6) = '"';
            o = http_put_json_esc(o + 1, c->id, strlen(c->id));
            *o++ = '"';
        } else {
            o = http_id_put_prefix(o + 6, c->w->incarnation, c->part.ptr,
                                   c->part.len);
            o = http_id_put_seq(o, c->seq);
        }
        memcpy(o, ",\"ms\":", 6);
        o = http_put_u64(o + 6, ms);
        *o++ = '}';
        http_buf_commit(&b, o);
    }
    http_reply(req, 200, &b);
}

/* withdrawn - the owner's answer to a withdrawal: nothing waits for it. */
static void
withdrawn(void *arg, struct http_client_resp *r)
{
    if (r->err != 0 || r->status != 200)
        log_info(0, "withdrawing a request at its owner failed: %s (%u)",
                 r->err ? r->error : "refused", r->status);
    free(arg);
}

/* withdraw_at_owner - ask the node that stored c's request to withdraw it,
 * named by the id it gave, or by its replyTo when its answer to the store
 * never came (best effort: a reply that comes anyway is dropped with the
 * inbox). */
static void
withdraw_at_owner(struct rpc_call *c)
{
    struct worker *w = c->w;
    struct http_buf b = {0};
    char *hdr = NULL, *authz = NULL;
    const char *headers[4] = {FORWARD_HEADER ": 1",
                              "Content-Type: application/json"};

    struct shm_name shown = worker_client_name(c->queue);
    /* By its id, or else by its inbox as the client knows it (a header
     * holds no 0x1F): the owner puts the caller's tenant back. */
    struct shm_name shown_inbox = c->id != NULL
                                      ? (struct shm_name){c->id, strlen(c->id)}
                                      : worker_client_name(inbox_name(c));
    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, shown.ptr, shown.len);
    http_buf_append_str(&b, ",\"partition\":");
    http_buf_append_json_str(&b, c->part.ptr, c->part.len);
    http_buf_append_str(&b, ",\"payload\":null}");
    struct http_client_req r = {.method = "POST",
                                .port = HTTP_CLIENT_PEER,
                                .addr = c->owner_addr,
                                .target = "/api/v1/ephemeral/request",
                                .headers = headers,
                                .nheaders = 3,
                                .body = b.data,
                                .body_len = b.len,
                                .timeout_ms = FORWARD_MS};
    if (b.data != NULL && !b.oom &&
        asprintf(&hdr, WITHDRAW_HEADER ": %.*s", (int)shown_inbox.len,
                 shown_inbox.ptr) >= 0 &&
        worker_auth_header(c->req, &authz) == 0) {
        headers[2] = hdr;
        if (authz != NULL) /* the owner checks the caller again */
            headers[r.nheaders++] = authz;
        if (http_client_request(w->client, &r, withdrawn, b.data) == 0)
            b.data = NULL; /* freed by withdrawn */
    }
    free(b.data);
    free(hdr);
    free(authz);
}

/* withdraw - c ended without a reply: withdraw its request where it is
 * stored. */
static void
withdraw(struct rpc_call *c, uint64_t now)
{
    if (c->owner)
        withdraw_at_owner(c);
    else
        shm_withdraw(c->w->seg, c->w->set.slot, c->queue, c->part, c->seq, now);
}

/* end - the wait on the inbox is over (pop_inbox.h): answer, withdraw what
 * went unanswered, and delete the inbox. */
static void
end(void *arg, struct http_request *req, const struct shm_popped *m,
    enum pop_wait_end why)
{
    struct rpc_call *c = arg;
    struct worker *w = c->w;
    uint64_t now = shm_now_ms();

    shm_queue_delete(w->seg, w->set.slot, inbox_name(c), now);
    if (why == POP_WAIT_GOT) {
        const char *data = (const char *)(m + 1) + m->part_len;
        ended(c, SHM_C_REQUEST_REPLIED);
        /* a reply pushed by a request of its own would lead with its inbox */
        reply_ok(c, req, data + m->reply_len, m->len - m->reply_len);
        return;
    }
    withdraw(c, now);
    if (why == POP_WAIT_TIMEOUT) {
        ended(c, SHM_C_REQUEST_TIMEOUT);
        http_reply_error(req, 504, "request_timeout",
                         "no reply came within the request's 'timeout' of "
                         "%" PRIu32 " ms",
                         c->timeout_ms);
        return;
    }
    ended(c, SHM_C_REQUEST_WITHDRAWN);
    if (why == POP_WAIT_REVOKED)
        worker_auth_refuse(req, "the bearer token was revoked while this "
                                "request waited");
    else if (why == POP_WAIT_DRAIN)
        http_reply_draining(req);
    else
        http_reply_error(req, 504, "request_timeout",
                         "the requester hung up before a reply came");
}

/* done - the request is over. */
static void
done(void *arg)
{
    struct rpc_call *c = arg;

    free(c->id);
    free(c->body.data);
    free(c->names);
    free(c);
}

/* end_many - a gather's wait is over (SPEC §13): 200 {"replies", "id",
 * "ms"} with what came, also none once the timeout passed; the request is
 * withdrawn (dropped if no group read it yet) and the inbox
 * deleted, so a late reply is dropped as a single request's is. */
static void
end_many(void *arg, struct http_request *req, const struct shm_sink *sink,
         enum pop_wait_end why)
{
    struct rpc_call *c = arg;
    struct worker *w = c->w;
    uint64_t now = shm_now_ms();
    struct http_buf b = {0};
    const struct shm_popped *m = NULL;

    shm_queue_delete(w->seg, w->set.slot, inbox_name(c), now);
    withdraw(c, now);
    if (why != POP_WAIT_GOT && why != POP_WAIT_TIMEOUT) {
        end(arg, req, NULL, why);
        return;
    }
    ended(c, sink->count > 0 ? SHM_C_REQUEST_REPLIED : SHM_C_REQUEST_TIMEOUT);
    http_buf_append_str(&b, "{\"replies\":[");
    for (int k = 0; (m = shm_popped_next(sink, m)) != NULL; k++) {
        const char *data = (const char *)(m + 1) + m->part_len;
        if (k > 0)
            http_buf_append_str(&b, ",");
        http_buf_append(&b, data + m->reply_len, m->len - m->reply_len);
    }
    http_buf_append_str(&b, "],\"id\":");
    if (c->id != NULL) {
        http_buf_append_json_str(&b, c->id, strlen(c->id));
    } else {
        size_t esc = http_json_esc_len(c->part.ptr, c->part.len);
        if (http_buf_reserve(&b, HTTP_ID_PREFIX_LEN(esc) + HTTP_ID_SEQ_MAX) ==
            0) {
            char *o = http_id_put_prefix(http_buf_tail(&b), w->incarnation,
                                         c->part.ptr, c->part.len);
            http_buf_commit(&b, http_id_put_seq(o, c->seq));
        }
    }
    http_buf_printf(&b, ",\"ms\":%llu}",
                    (unsigned long long)((shm_now_us() - c->start_us) / 1000));
    http_reply(req, 200, &b);
}

static const struct pop_waiter waiter = {end, done, end_many};

/* wait_replies - c's request is stored: wait on its inbox for what time
 * it has left, for one reply or a gather's. */
static void
wait_replies(struct rpc_call *c, uint32_t left)
{
    if (c->gather_max > 0)
        worker_pop_gather(c->w, c->req, inbox_name(c), left, c->gather_max,
                          c->gather_quiet, &waiter, c);
    else
        worker_pop_wait(c->w, c->req, inbox_name(c), left, &waiter, c);
}

/* copy_names - c keeps its own copies of queue and partition. */
static int
copy_names(struct rpc_call *c, struct shm_name q, struct shm_name p)
{
    if ((c->names = malloc(q.len + p.len + 2)) == NULL)
        return -ENOMEM;
    memcpy(c->names, q.ptr, q.len);
    memcpy(c->names + q.len + 1, p.ptr, p.len);
    c->queue = (struct shm_name){c->names, q.len};
    c->part = (struct shm_name){c->names + q.len + 1, p.len};
    return 0;
}

/* make_inbox - the inbox exists before the request is stored: pop it
 * once (it is empty), which makes it. */
static int
make_inbox(struct rpc_call *c)
{
    unsigned char buf[256];
    struct shm_sink sink = {.buf = buf, .cap = sizeof(buf)};
    struct shm_pop_req r = {.queue = inbox_name(c),
                            .part = {"Default", 7},
                            .batch = 1,
                            .auto_ack = 1};
    int rc = shm_pop(c->w->seg, c->w->set.slot, &r, shm_now_ms(), &sink);

    return rc < 0 ? rc : 0;
}

/* store_request - push payload to (queue, part) led by inbox, its
 * replyTo; the request's sequence in *seq. */
static int
store_request(struct worker *w, struct shm_name queue, struct shm_name part,
              struct shm_name inbox, struct http_str payload, uint64_t *seq)
{
    size_t n = inbox.len + payload.len;
    char *data = malloc(n);
    int rc;

    if (data == NULL)
        return -ENOMEM;
    memcpy(data, inbox.ptr, inbox.len);
    memcpy(data + inbox.len, payload.ptr, payload.len);
    struct shm_msg_in m = {data, (uint32_t)n};
    rc = shm_push_request(w->seg, w->set.slot, queue, part, &m,
                          (uint32_t)inbox.len, shm_now_ms(), seq);
    free(data);
    return rc;
}

/* admit - the caller's tenant may store a request of payload led by an
 * inbox name of inbox.len bytes (worker_tenant_admit: its rate and its
 * share of the node); 0 when req was answered 429 or 503. */
static int
admit(struct worker *w, struct http_request *req, struct shm_name inbox,
      struct http_str payload)
{
    struct shm_msg_in m = {NULL, (uint32_t)(inbox.len + payload.len)};

    return worker_tenant_admit(w, req, &m, 1);
}

/* no_responders - 503 no_responders for (queue, part). */
static void
no_responders(struct worker *w, struct http_request *req, struct shm_name queue,
              struct shm_name part)
{
    struct shm_name shown = worker_client_name(queue);

    http_reply_error(req, 503, "no_responders",
                     "nobody listens on partition '%.*s' of queue "
                     "'%.*s': no pop is waiting there and none came "
                     "within %" PRIu32 " ms",
                     (int)part.len, part.ptr, (int)shown.len, shown.ptr,
                     w->set.responders_idle_ms);
}

/* take_id - the id in the owner's 201 {"id"} into c->id.  0 or -1. */
static int
take_id(struct rpc_call *c, const struct http_client_resp *r)
{
    c->id = http_peer_id(r->body.data, r->body.len);
    return c->id != NULL ? 0 : -1;
}

/* relay - the owner did not store the request: say why, as it said. */
static void
relay(struct rpc_call *c, struct http_client_resp *r)
{
    struct http_request *req = c->req;

    if (r->err != 0 || r->status == 201) /* it may be stored all the same */
        withdraw_at_owner(c);
    if (r->err == -ETIMEDOUT && c->timeout_ms <= FORWARD_MS) {
        ended(c, SHM_C_REQUEST_TIMEOUT);
        http_reply_error(req, 504, "request_timeout",
                         "the partition's owner, node '%s', did not store the "
                         "request within its 'timeout' of %" PRIu32 " ms",
                         c->owner_id, c->timeout_ms);
    } else if (r->err != 0 || r->status == 201) {
        /* unreachable, slow (FORWARD_MS), or stored under an id we cannot
         * read (a 201 {"id"} is no answer to the requester) */
        shm_count(c->w->seg, c->w->set.slot, SHM_C_FORWARD_FAILED, 1);
        http_reply_error(req, 503, "ephemeral_forward_failed",
                         "the partition's owner, node '%s', did not "
                         "store the request (%s); retry",
                         c->owner_id, r->err ? r->error : "unreadable id");
    } else {
        if (r->status == 503 &&
            http_peer_error_is(r->body.data, r->body.len, "no_responders"))
            ended(c, SHM_C_REQUEST_NO_RESPONDERS);
        worker_forward_relay_headers(req, r);
        http_reply(req, r->status, &r->body);
    }
}

/* stored - the owner's answer to the store: 201, and the request waits
 * here on its inbox for what time it has left; else it is answered as the
 * owner said. */
static void
stored(void *arg, struct http_client_resp *r)
{
    struct rpc_call *c = arg;
    struct http_request *req = c->req;

    c->pending = 0;
    if (r->err == 0 && r->status == 201 && take_id(c, r) == 0) {
        uint64_t spent = (shm_now_us() - c->start_us) / 1000;
        uint32_t left =
            spent < c->timeout_ms ? c->timeout_ms - (uint32_t)spent : 0;
        /* the wait's own done frees c from now on */
        http_request_on_done(req, NULL, NULL);
        wait_replies(c, left);
        return;
    }
    shm_queue_delete(c->w->seg, c->w->set.slot, inbox_name(c), shm_now_ms());
    relay(c, r);
    http_request_resume(req);
}

/* store_over - the requester's call ended while the store was out: drop
 * the call and the inbox. */
static void
store_over(void *arg, int sent_ok)
{
    struct rpc_call *c = arg;

    (void)sent_ok;
    if (c->pending) {
        http_client_cancel(c->w->client, c);
        shm_queue_delete(c->w->seg, c->w->set.slot, inbox_name(c),
                         shm_now_ms());
        withdraw_at_owner(c); /* in case the owner stored it already */
    }
    done(c);
}

/* store_at_owner - the partition is another node's: send it the request
 * with c's inbox as replyTo, bounded by the request's timeout.  0, or a
 * negative errno (nothing sent). */
static int
store_at_owner(struct rpc_call *c, const struct http_rpc *p)
{
    struct worker *w = c->w;
    struct http_buf *b = &c->body;
    char *authz = NULL;
    const char *headers[3] = {FORWARD_HEADER ": 1",
                              "Content-Type: application/json"};
    int m = shm_owner_pick(&w->owners, c->queue, c->part), rc = -EHOSTUNREACH;

    if (m < 0 || worker_addr_unusable(w->owners.m[m].addr, w->owners.self_addr))
        return rc;
    snprintf(c->owner_id, sizeof(c->owner_id), "%s", w->owners.m[m].id);
    snprintf(c->owner_addr, sizeof(c->owner_addr), "%s", w->owners.m[m].addr);
    struct shm_name shown = worker_client_name(c->queue); /* the owner
                                                  prefixes the tenant again */
    http_buf_append_str(b, "{\"queue\":");
    http_buf_append_json_str(b, shown.ptr, shown.len);
    http_buf_append_str(b, ",\"partition\":");
    http_buf_append_json_str(b, c->part.ptr, c->part.len);
    struct shm_name to = worker_client_name(inbox_name(c));
    http_buf_append_str(b, ",\"replyTo\":");
    http_buf_append_json_str(b, to.ptr, to.len);
    http_buf_append_str(b, ",\"payload\":");
    http_buf_append(b, p->payload.ptr, p->payload.len);
    http_buf_append_str(b, "}");
    struct http_client_req r = {
        .method = "POST",
        .port = HTTP_CLIENT_PEER,
        .addr = c->owner_addr,
        .target = "/api/v1/ephemeral/request",
        .headers = headers,
        .nheaders = 2,
        .body = b->data,
        .body_len = b->len,
        /* FORWARD_MS at most: a draining worker still hears the answer
         * before it exits (and answers 503 draining then) */
        .timeout_ms = c->timeout_ms == 0           ? 1
                      : c->timeout_ms < FORWARD_MS ? c->timeout_ms
                                                   : FORWARD_MS,
    };
    rc = -ENOMEM;
    if (!b->oom && worker_auth_header(c->req, &authz) == 0) {
        if (authz != NULL)
            headers[r.nheaders++] = authz;
        rc = http_client_request(w->client, &r, stored, c);
    }
    free(authz);
    if (rc != 0)
        return rc;
    c->owner = 1;
    c->pending = 1;
    http_request_on_done(c->req, store_over, c);
    http_request_suspend(c->req);
    return 0;
}

/* withdraw_here - a node asks to withdraw the request it stored here
 * (X-Mayfly-Withdraw: its id, or its replyTo); 200 {"withdrawn"}. */
static void
withdraw_here(struct worker *w, struct http_request *req, struct shm_name queue,
              struct shm_name part, const char *wd)
{
    struct shm_name inbox = {wd, strlen(wd)};
    uint64_t inc, seq, now = shm_now_ms();
    char full[INBOX_MAX];
    const char *ip;
    size_t il, t;
    int n = 0;

    if (shm_inbox_named(inbox) &&
        (t = worker_tenant_prefix(w, full)) + inbox.len < sizeof(full)) {
        memcpy(full + t, inbox.ptr, inbox.len); /* the caller's tenant's */
        inbox = (struct shm_name){full, t + inbox.len};
        n = shm_withdraw_reply(w->seg, w->set.slot, queue, part, inbox, now);
    } else if (http_id_parse(wd, inbox.len, &inc, &ip, &il, &seq) == 0 &&
               inc == w->incarnation && il == part.len &&
               memcmp(ip, part.ptr, il) == 0) {
        n = shm_withdraw(w->seg, w->set.slot, queue, part, seq, now);
    }
    struct http_buf b = {0};
    http_buf_append_str(&b, n > 0 ? "{\"withdrawn\":true}"
                                  : "{\"withdrawn\":false}");
    http_reply(req, 200, &b);
}

/* sender_gone - the node that passed this store on has closed its
 * connection: it gave up on the store (its timeout), so nothing waits for
 * the request and it is not stored. */
static int
sender_gone(struct http_request *req)
{
    int fd = http_request_fd(req);
    char byte;
    ssize_t n;

    if (fd < 0)
        return 0;
    n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 ||
           (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* serve_node - a node passed on the store of a request whose inbox it
 * minted (replyTo), or its withdrawal: done here, answered at once. */
static void
serve_node(struct worker *w, struct http_request *req, const struct http_rpc *p,
           struct shm_name queue, struct shm_name part, const char *wd)
{
    struct shm_name inbox = {p->reply_to.ptr, p->reply_to.len};
    struct worker_qname in;
    uint64_t seq;
    int rc;

    if (!worker_route(w, req, queue, part, 0))
        return; /* 503 owner_moved: never a second hop */
    if (wd != NULL) {
        withdraw_here(w, req, queue, part, wd);
        return;
    }
    if (!http_reply_name_ok(req, "replyTo", inbox.ptr, inbox.len))
        return; /* answered 400 invalid_name */
    if (!shm_inbox_named(inbox)) {
        http_reply_error(req, 400, "invalid_name",
                         "field 'replyTo' does not name a request's inbox");
        return;
    }
    if (!worker_authz(w, req, AUTH_REQUEST, "replyTo", inbox, &in))
        return; /* the requester's tenant's inbox */
    inbox = in.name;
    if (!shm_responders(w->seg, w->set.slot, queue, part, shm_now_ms(),
                        w->set.responders_idle_ms)) {
        no_responders(w, req, queue, part);
        return;
    }
    if (sender_gone(req)) { /* e.g. this worker was stalled past its timeout */
        http_reply_error(req, 504, "request_timeout",
                         "the forwarding node gave up on the request");
        return;
    }
    if (!admit(w, req, inbox, p->payload))
        return; /* 429 rate_limited, 503 ephemeral_unavailable */
    if ((rc = store_request(w, queue, part, inbox, p->payload, &seq)) != 0) {
        worker_tenant_refund(w, 1); /* a refusal changes nothing */
        http_reply_errno(req, rc, "request");
        return;
    }
    struct http_buf b = {0};
    size_t esc = http_json_esc_len(part.ptr, part.len);
    if (http_buf_reserve(&b, HTTP_ID_PREFIX_LEN(esc) + HTTP_ID_SEQ_MAX + 8) ==
        0) {
        char *o = http_buf_tail(&b);
        memcpy(o, "{\"id\":", 6);
        o = http_id_put_prefix(o + 6, w->incarnation, part.ptr, part.len);
        o = http_id_put_seq(o, seq);
        *o++ = '}';
        http_buf_commit(&b, o);
    }
    http_reply(req, 201, &b);
}

/* worker_request_verb - see rpc.h. */
void
worker_request_verb(struct worker *w, struct http_request *req)
{
    struct http_rpc p;
    struct http_error err;
    size_t len;
    const char *body = http_request_body(req, &len);
    struct rpc_call *c = NULL;
    struct worker_qname in;
    int rc, from_node = http_request_header(req, FORWARD_HEADER) != NULL;
    const char *wd =
        from_node ? http_request_header(req, WITHDRAW_HEADER) : NULL;

    uint64_t start = shm_now_us();
    if (http_parse_rpc(body, len, &p, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    struct shm_name queue = {p.queue.ptr, p.queue.len};
    struct shm_name part = {"Default", 7};
    if (p.has_partition)
        part = (struct shm_name){p.partition.ptr, p.partition.len};
    if (!http_reply_name_ok(req, "queue", queue.ptr, queue.len) ||
        !http_reply_name_ok(req, "partition", part.ptr, part.len))
        goto out;
    if (shm_inbox_named(queue)) {
        http_reply_error(req, 400, "invalid_name",
                         "field 'queue' names a request's inbox");
        goto out;
    }
    if (!worker_authz(w, req, AUTH_REQUEST, "queue", queue, &in))
        goto out;
    queue = in.name;
    if (from_node && (p.has_reply_to || wd != NULL)) {
        serve_node(w, req, &p, queue, part, wd);
        goto out;
    }
    uint64_t timeout = p.has_timeout ? p.timeout_ms : DEFAULT_TIMEOUT_MS;
    if (timeout > w->set.max_wait_ms)
        timeout = w->set.max_wait_ms;
    int here = worker_serves_all(w) || shm_owner_here(&w->owners, queue, part);
    if (!here && from_node) {
        if (!worker_route(w, req, queue, part, 0))
            goto out; /* 503 owner_moved */
        here = 1;     /* in its owner's stead (worker_view_standin) */
    }
    if (here && !shm_responders(w->seg, w->set.slot, queue, part, shm_now_ms(),
                                w->set.responders_idle_ms)) {
        shm_count(w->seg, w->set.slot, SHM_C_REQUEST_NO_RESPONDERS, 1);
        shm_request_observe(w->seg, w->set.slot, shm_now_us() - start);
        no_responders(w, req, queue, part);
        goto out;
    }
    /* stored here: the tenant's rate and share bound it as they bound a
     * push (its inbox's name is not minted yet: counted at its longest) */
    if (here && !admit(w, req, (struct shm_name){NULL, INBOX_MAX}, p.payload))
        goto out; /* 429 rate_limited, 503 ephemeral_unavailable */
    if ((c = calloc(1, sizeof(*c))) == NULL ||
        copy_names(c, queue, part) != 0) {
        free(c);
        http_reply_errno(req, -ENOMEM, "request");
        goto out;
    }
    c->w = w;
    c->req = req;
    c->start_us = start;
    c->timeout_ms = (uint32_t)timeout;
    if (p.has_gather) {
        c->gather_max = (uint32_t)p.gather_max;
        c->gather_quiet =
            p.gather_quiet > UINT32_MAX ? UINT32_MAX : (uint32_t)p.gather_quiet;
    }
    mint(c);
    if ((rc = make_inbox(c)) == 0) {
        if (!here) {
            rc = store_at_owner(c, &p);
            if (rc == 0)
                goto out; /* stored() goes on */
        } else {
            rc = store_request(w, c->queue, c->part, inbox_name(c), p.payload,
                               &c->seq);
        }
    }
    if (rc != 0) {
        if (here)
            worker_tenant_refund(w, 1); /* a refusal changes nothing */
        shm_queue_delete(w->seg, w->set.slot, inbox_name(c), shm_now_ms());
        done(c);
        if (rc == -EHOSTUNREACH)
            http_reply_error(req, 503, "ephemeral_forward_failed",
                             "the partition's owner cannot be reached; "
                             "retry");
        else
            http_reply_errno(req, rc, "request");
        goto out;
    }
    wait_replies(c, c->timeout_ms);
out:
    http_rpc_free(&p);
}
