/*
 * client.c - the outgoing HTTP client of client.h: one libcurl multi handle
 * on the socket API, its sockets in the caller's epoll.
 *
 * libcurl tells us what to watch through sock_cb (CURLMOPT_SOCKETFUNCTION)
 * and when to call it back through timer_cb (CURLMOPT_TIMERFUNCTION); we
 * answer with curl_multi_socket_action() from on_event/on_timeout, then
 * collect finished transfers with curl_multi_info_read() and run their done
 * callbacks, outside every libcurl callback, so done may start or cancel
 * requests.  A socket we registered is marked with curl_multi_assign(), so a
 * number libcurl closed and reused is added afresh.
 *
 * Each request is a struct client_call with its own easy handle; finished
 * calls go to a small free list and their easy handles are reused: as the
 * last call left them when the next is of the same kind (client_shape),
 * else reset.  The header list and the URL are built in the call's own
 * buffers, kept from call to call.  Connections live in the multi handle's
 * cache, not in the easy handles, so reuse works across calls.
 *
 * A stream (http_client_stream) is a call whose 2xx body goes to its
 * on_chunk from inside libcurl's write callback, where libcurl allows no
 * call that adds or removes a handle.  So a cancel made there (of that
 * stream or any other) only marks the call: the write callback refuses the
 * marked call's bytes, and client_action detaches every marked call once
 * curl_multi_socket_action() has returned, before it reaps.
 *
 * Single-threaded, no locking.  Errors: 0 or -errno.
 */
#include "http/client.h"

#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "http/node_call.h"
#include "http/sign.h"
#include "shm/log.h"

/* Finished calls kept for reuse, with their easy handles. */
#define CLIENT_FREE_MAX 32

/* One header line of a call: libcurl reads the list as long as the call
 * runs, so its nodes and bytes are the call's own, kept from call to call
 * rather than allocated line by line (curl_slist_append). */
struct client_line {
    struct curl_slist node;
    size_t at; /* where its bytes start in the call's text */
};

struct client_call {
    struct client_call *prev, *next; /* pending list, or free list (next) */
    struct http_client *client;
    CURL *easy;
    unsigned shape;             /* the options easy holds from its last call
                          (client_shape); 0: reset before the next */
    unsigned peers_gen;         /* the client's peers_gen when they were set */
    struct curl_slist *headers; /* the call's lines: nodes in lines */
    struct client_line *lines;  /* the list's nodes, kept for reuse */
    size_t nlines, lines_cap;
    struct http_buf text; /* the lines' bytes, kept for reuse */
    struct http_buf url;  /* the URL of a call to a node, likewise */
    struct http_buf body;
    size_t max_body; /* answer bytes kept at most */
    int fail;        /* -errno the write callback stopped the transfer with:
                        -EMSGSIZE past max_body, or on_chunk's error */
    http_client_done_fn *done;
    http_client_chunk_fn *chunk; /* a stream's on_chunk; NULL: a request */
    int answer;    /* a stream's answer: 0 not yet seen, 2 a 2xx (to
                      chunk), 1 another status (kept in body) */
    int cancelled; /* dropped while in on_chunk: detach it after the
                      action (client_sweep) */
    void *arg;
    int to_node; /* a call to a node: signed, reset when given up */
    char errbuf[CURL_ERROR_SIZE];
};

struct http_client {
    CURLM *multi;
    int epfd;
    uint64_t tag_base;
    int timer_armed;
    uint64_t timer_due_ns;      /* CLOCK_MONOTONIC */
    struct client_call pending; /* list head */
    unsigned npending;
    struct client_call *free_calls;
    unsigned nfree;
    int in_chunk;        /* inside an on_chunk: detaching is deferred */
    unsigned ncancelled; /* calls marked cancelled, not yet detached */
    /* calls to nodes (http_client_set_peers) */
    char *secret, *ca_file, *cert_file, *key_file; /* NULL: none */
    int client_https, cluster_https;
    http_client_identify_fn *identify;
    void *identify_arg;
    uint64_t sender;    /* this client's half of every nonce (sign.h) */
    uint64_t seq;       /* and the count of the last call */
    unsigned peers_gen; /* counts http_client_set_peers: TLS files may
                           have changed, so no handle keeps its options */
};

/* CLOCK_MONOTONIC in ns. */
static uint64_t
client_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * http_client_global_init - curl_global_init once per process.  The flag
 * holds the pid that initialised, so a child forked after its parent
 * initialised (a respawned worker) does not take the parent's flag for its
 * own.  libcurl counts its inits in a global of its own, inherited as well:
 * with it above zero curl_global_init() does nothing, so the child first
 * drops the inherited count (curl_global_cleanup) and then initialises.
 */
int
http_client_global_init(void)
{
    static pid_t inited_by; /* 0: never; else the process that did */
    pid_t self = getpid();
    CURLcode rc;

    if (inited_by == self)
        return 0;
    if (inited_by != 0)
        curl_global_cleanup(); /* the parent's state, copied by fork */
    rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        log_error(0, "curl_global_init() failed: %s", curl_easy_strerror(rc));
        return -EIO;
    }
    inited_by = self;
    return 0;
}

/* ---- libcurl's callbacks ---------------------------------------------- */

/*
 * client_watch - put s in the epoll for the events of what, with our tag.
 * known: we registered s before.  Should our view and the epoll's differ (an
 * fd number closed and reused behind our back), the other op is tried.
 * 0 or -errno.
 */
static int
client_watch(struct http_client *c, curl_socket_t s, int what, int known)
{
    struct epoll_event ev = {0};
    int op = known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;

    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    ev.data.u64 = c->tag_base | (uint32_t)s;
    if (epoll_ctl(c->epfd, op, s, &ev) == 0)
        return 0;
    if (errno != (known ? ENOENT : EEXIST))
        return -errno;
    op = known ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    return epoll_ctl(c->epfd, op, s, &ev) == 0 ? 0 : -errno;
}

/*
 * sock_cb - libcurl wants s watched for what, or no longer (REMOVE, sent
 * before it closes s).  socketp is non-NULL once we registered s.  -1 fails
 * every transfer on the multi handle, so it is kept for epoll failures.
 */
static int
client_sock_cb(CURL *easy, curl_socket_t s, int what, void *userp,
               void *socketp)
{
    struct http_client *c = userp;
    int rc;

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        /* Already closed means already out of the epoll: no error. */
        epoll_ctl(c->epfd, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    rc = client_watch(c, s, what, socketp != NULL);
    if (rc != 0) {
        log_error(-rc, "epoll_ctl(fd %d) for an outgoing request failed", s);
        return -1;
    }
    if (socketp == NULL)
        curl_multi_assign(c->multi, s, c);
    return 0;
}

/* timer_cb - libcurl wants on_timeout in timeout_ms (-1: never).  Only
 * records the deadline: libcurl must not be called from here. */
static int
client_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct http_client *c = userp;

    (void)multi;
    c->timer_armed = timeout_ms >= 0;
    if (c->timer_armed)
        c->timer_due_ns = client_now_ns() + (uint64_t)timeout_ms * 1000000u;
    return 0;
}

/* client_stream_bytes - whether a stream's bytes go to its on_chunk: the
 * answer is a 2xx (its status is known once the body begins). */
static int
client_stream_bytes(struct client_call *call)
{
    long status = 0;

    if (call->answer == 0) {
        curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
        call->answer = status >= 200 && status < 300 ? 2 : 1;
    }
    return call->answer == 2;
}

/* client_chunk - hand a stream's bytes to on_chunk; n, or 0 to stop the
 * transfer when on_chunk failed or cancelled the stream. */
static size_t
client_chunk(struct client_call *call, char *p, size_t n)
{
    int rc;

    call->client->in_chunk++;
    rc = call->chunk(call->arg, p, n);
    call->client->in_chunk--;
    if (call->cancelled)
        return 0;
    if (rc != 0) {
        call->fail = rc < 0 ? rc : -EIO;
        return 0;
    }
    return n;
}

/* client_reserve - an answer's first n bytes came: room for all of it at
 * once when it says its length (a forwarded pop's 26 KB would otherwise
 * grow the buffer, and copy it, several times).  Not past max_body, which
 * the next bytes are checked against anyway. */
static void
client_reserve(struct client_call *call, size_t n)
{
    curl_off_t len = -1;

    if (curl_easy_getinfo(call->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
                          &len) != CURLE_OK ||
        len <= (curl_off_t)n || (uint64_t)len > call->max_body)
        return;
    (void)http_buf_reserve(&call->body, (size_t)len); /* else it grows */
}

/* write_cb - response bytes into the call's buffer, or a stream's on_chunk;
 * 0 (abort) past max_body, on OOM, or for a call cancelled meanwhile. */
static size_t
client_write_cb(char *p, size_t size, size_t n, void *userp)
{
    struct client_call *call = userp;

    (void)size; /* always 1 */
    if (call->cancelled)
        return 0;
    if (call->chunk != NULL && client_stream_bytes(call))
        return client_chunk(call, p, n);
    if (n > call->max_body - call->body.len) {
        call->fail = -EMSGSIZE;
        return 0;
    }
    if (call->body.len == 0)
        client_reserve(call, n);
    if (http_buf_append(&call->body, p, n) != 0)
        return 0;
    return n;
}

/* ---- the client ------------------------------------------------------- */

/* http_client_new - a multi handle wired to the caller's epoll. */
struct http_client *
http_client_new(int epoll_fd, uint64_t tag_base)
{
    struct http_client *c;
    CURLMcode rc = CURLM_OK;

    if ((tag_base & ~HTTP_CLIENT_TAG_MASK) != 0) {
        log_error(EINVAL, "http_client_new(tag %#llx)",
                  (unsigned long long)tag_base);
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->multi = curl_multi_init()) == NULL) {
        log_error(ENOMEM, "cannot make an HTTP client");
        free(c);
        return NULL;
    }
    c->epfd = epoll_fd;
    c->tag_base = tag_base;
    c->pending.next = c->pending.prev = &c->pending;
    rc |= curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, client_sock_cb);
    rc |= curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    rc |= curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, client_timer_cb);
    rc |= curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    rc |= curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS,
                            (long)HTTP_CLIENT_IDLE_MAX);
    if (rc != CURLM_OK) {
        log_error(0, "curl_multi_setopt() on a new multi handle failed");
        http_client_free(c);
        return NULL;
    }
    return c;
}

/* dup_or_null - a copy of s, NULL for NULL or "" (*failed set when out of
 * memory). */
static char *
dup_or_null(const char *s, int *failed)
{
    char *d;

    if (s == NULL || s[0] == '\0')
        return NULL;
    if ((d = strdup(s)) == NULL)
        *failed = 1;
    return d;
}

/* http_client_set_peers - see client.h.  The nonce's sender half is
 * random, never 0, and made here: after the fork, one per process. */
int
http_client_set_peers(struct http_client *c, const struct http_client_peers *p)
{
    int failed = 0;

    if (c->secret != NULL)
        explicit_bzero(c->secret, strlen(c->secret));
    free(c->secret);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    c->secret = dup_or_null(p->secret, &failed);
    c->ca_file = dup_or_null(p->ca_file, &failed);
    c->cert_file = dup_or_null(p->cert_file, &failed);
    c->key_file = dup_or_null(p->key_file, &failed);
    c->client_https = p->client_https;
    c->cluster_https = p->cluster_https;
    c->identify = p->identify;
    c->identify_arg = p->identify_arg;
    c->peers_gen++;
    while (c->sender == 0)
        if (getrandom(&c->sender, sizeof(c->sender), 0) !=
            (ssize_t)sizeof(c->sender))
            c->sender = (uint64_t)client_now_ns() ^ (uint64_t)getpid() << 32;
    return failed ? -ENOMEM : 0;
}

/* client_buf_clear - b empty, its memory kept for the next call. */
static void
client_buf_clear(struct http_buf *b)
{
    b->len = 0;
    b->oom = 0;
}

/* client_call_free - a call out of every list, and its handle. */
static void
client_call_free(struct client_call *call)
{
    curl_easy_cleanup(call->easy);
    free(call->lines);
    http_buf_free(&call->text);
    http_buf_free(&call->url);
    free(call);
}

/* client_call_get - a call from the free list (its easy handle as its
 * last call left it: client_setup resets it when needed) or a new one.
 * NULL when out of memory. */
static struct client_call *
client_call_get(struct http_client *c)
{
    struct client_call *call = c->free_calls;

    if (call != NULL) {
        c->free_calls = call->next;
        c->nfree--;
        return call;
    }
    call = calloc(1, sizeof(*call));
    if (call == NULL)
        return NULL;
    call->client = c;
    call->easy = curl_easy_init();
    if (call->easy == NULL) {
        free(call);
        return NULL;
    }
    return call;
}

/* client_call_put - a call that left the multi handle: release what it
 * carried, keep it for reuse or free it. */
static void
client_call_put(struct http_client *c, struct client_call *call)
{
    call->headers = NULL;
    client_buf_clear(&call->text);
    client_buf_clear(&call->url);
    http_buf_free(&call->body);
    call->done = NULL;
    call->chunk = NULL;
    call->arg = NULL;
    if (c->nfree < CLIENT_FREE_MAX) {
        call->next = c->free_calls;
        c->free_calls = call;
        c->nfree++;
        return;
    }
    client_call_free(call);
}

/* client_append - one header line more, into the call's text (linked
 * into a list by client_link once every line is in: the text may move
 * while it grows).  -ENOMEM. */
static int
client_append(struct client_call *call, const char *line)
{
    if (call->nlines == call->lines_cap) {
        size_t cap = call->lines_cap ? 2 * call->lines_cap : 16;
        struct client_line *l = realloc(call->lines, cap * sizeof(*l));

        if (l == NULL)
            return -ENOMEM;
        call->lines = l;
        call->lines_cap = cap;
    }
    call->lines[call->nlines++].at = call->text.len;
    return http_buf_append(&call->text, line, strlen(line) + 1) == 0 ? 0
                                                                     : -ENOMEM;
}

/* client_link - the lines appended, as the list libcurl reads. */
static void
client_link(struct client_call *call)
{
    for (size_t i = 0; i < call->nlines; i++) {
        struct client_line *l = &call->lines[i];

        l->node.data = call->text.data + l->at;
        l->node.next = i + 1 < call->nlines ? &call->lines[i + 1].node : NULL;
    }
    call->headers = call->nlines > 0 ? &call->lines[0].node : NULL;
}

/* client_sign - a call to a node gets its signature lines (sign.h): for
 * the node at r->addr, as identify names it, with r's deadline.  0,
 * -EINVAL (lines that cannot be signed) or -ENOMEM. */
static int
client_sign(struct client_call *call, const struct http_client_req *r)
{
    struct http_client *c = call->client;
    struct http_sign_lines l;
    char id[80] = "";
    uint64_t inc = 0;
    int64_t now = http_sign_now_ms();
    struct http_sign_req s = {
        .method = r->method,
        .target = r->target,
        .body = r->body,
        .len = r->body_len,
        .lines = r->headers,
        .nlines = r->nheaders,
        .to = {r->addr, id, 0},
        .sender = c->sender,
        .seq = ++c->seq,
        .now_ms = now,
        .deadline_ms = r->timeout_ms ? now + (int64_t)r->timeout_ms : 0,
    };
    int rc;

    if (r->port == HTTP_CLIENT_URL || c->secret == NULL)
        return 0;
    if (c->identify != NULL && c->identify(c->identify_arg, r->port, r->addr,
                                           id, sizeof(id), &inc) == 0)
        s.to.incarnation = inc;
    if ((rc = http_sign_lines(c->secret, &s, &l)) != 0)
        return rc;
    if (client_append(call, l.sig) != 0 || client_append(call, l.time) != 0 ||
        client_append(call, l.nonce) != 0 || client_append(call, l.to) != 0 ||
        (l.deadline[0] && client_append(call, l.deadline) != 0))
        return -ENOMEM;
    return 0;
}

/*
 * client_headers - the caller's header lines, the signature of a call to
 * a node, an empty Expect so a large body goes at once instead of waiting
 * for 100-continue, and an empty Accept instead of libcurl's "any type",
 * which says nothing to a node: every byte of a request's head costs ~110
 * instructions in libcurl 7.88's printf, which writes it a byte at a time
 * (hop2 measured ~45 k for a ~410-byte head; an empty line is never sent).  0, -EINVAL (client_sign) or -ENOMEM.
 */
static int
client_headers(struct client_call *call, const struct http_client_req *r)
{
    int rc;

    call->nlines = 0;
    client_buf_clear(&call->text);
    if ((rc = client_sign(call, r)) != 0)
        return rc;
    for (size_t i = 0; i < r->nheaders; i++)
        if (client_append(call, r->headers[i]) != 0)
            return -ENOMEM;
    if (client_append(call, "Expect:") != 0 ||
        client_append(call, "Accept:") != 0)
        return -ENOMEM;
    client_link(call);
    return 0;
}

/*
 * client_sockopt - a connection to a node closes with a reset (SO_LINGER
 * 0): a call given up while a partition holds its segments in this
 * kernel's queue must not reach the node once the partition heals, and a
 * plain close would send them (then FIN) for as long as TCP retries.  Its
 * connections close only when a call is given up or an idle one is
 * dropped: nothing owed is ever cut.
 */
static int
client_sockopt(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    (void)clientp;
    (void)purpose;
    if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == -1)
        log_warn(errno, "setsockopt(fd %d, SO_LINGER 0) failed", (int)fd);
    return CURL_SOCKOPT_OK;
}

/*
 * client_method - method and body.  A body goes with POST, PUT, or any
 * method given one; other methods send none.  HEAD is asked with NOBODY so
 * that libcurl does not wait for a body.
 */
static CURLcode
client_method(CURL *e, const struct http_client_req *r)
{
    CURLcode rc;
    int post = strcasecmp(r->method, "POST") == 0;

    if (r->body_len > 0 || post || strcasecmp(r->method, "PUT") == 0) {
        rc = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                              (curl_off_t)r->body_len);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(e, CURLOPT_POSTFIELDS,
                                  r->body != NULL ? r->body : "");
        if (rc == CURLE_OK && !post)
            rc = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
        return rc;
    }
    if (strcasecmp(r->method, "HEAD") == 0)
        return curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    rc = curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    if (rc == CURLE_OK && strcasecmp(r->method, "GET") != 0)
        rc = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
    return rc;
}

/* client_https - whether r goes over HTTPS. */
static int
client_https(const struct http_client *c, const struct http_client_req *r)
{
    if (r->port == HTTP_CLIENT_PEER)
        return c->client_https;
    if (r->port == HTTP_CLIENT_CLUSTER)
        return c->cluster_https;
    return strncmp(r->url, "https:", 6) == 0;
}

/* client_url - the URL of a call to a node, made into call->url; r's own
 * otherwise.  NULL when out of memory. */
static const char *
client_url(struct client_call *call, const struct http_client_req *r)
{
    struct http_buf *b = &call->url;

    if (r->port == HTTP_CLIENT_URL)
        return r->url;
    client_buf_clear(b);
    http_buf_append_str(b,
                        client_https(call->client, r) ? "https://" : "http://");
    http_buf_append_str(b, r->addr);
    http_buf_append_str(b, r->target);
    return b->oom ? NULL : b->data;
}

/* client_tls - a node's certificate is verified against the cluster's CA
 * (the file read at each handshake, never cached: a HUP'd CA counts from
 * the next connection), and a cluster port is shown ours. */
static CURLcode
client_tls(CURL *e, const struct http_client *c,
           const struct http_client_req *r)
{
    CURLcode rc = CURLE_OK;

    if (!client_https(c, r))
        return CURLE_OK;
    rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    if (r->port != HTTP_CLIENT_URL && c->ca_file != NULL) {
        rc |= curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
        rc |= curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 0L);
    }
    if (r->port == HTTP_CLIENT_CLUSTER && c->cert_file != NULL) {
        rc |= curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file);
        rc |= curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file);
    }
    return rc;
}

/*
 * client_shape - the kind of call r is, for the options it leaves in its
 * easy handle: a POST, or a GET without a body, to one kind of port, over
 * HTTP or HTTPS.  A call of the kind its handle's last call was (and
 * finished well) sets only what differs between calls (client_setup):
 * curl_easy_reset and the twenty options after it are a good part of what
 * libcurl costs a forward.  0: any other call, set up from a reset handle.
 */
static unsigned
client_shape(const struct http_client *c, const struct http_client_req *r)
{
    unsigned m;

    if (strcmp(r->method, "POST") == 0)
        m = 1;
    else if (strcmp(r->method, "GET") == 0 && r->body_len == 0)
        m = 2;
    else
        return 0;
    return m | (unsigned)r->port << 2 | (client_https(c, r) ? 1u << 4 : 0);
}

/* client_fixed - the options every call of a reset handle gets that do
 * not change with the call's kind, and those its kind sets. */
static CURLcode
client_fixed(struct client_call *call, const struct http_client_req *r)
{
    CURL *e = call->easy;
    CURLcode rc = CURLE_OK;

    curl_easy_reset(e);
    rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, call);
    rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->errbuf);
    rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    /* Paths as given: "." and ".." are valid queue names, and libcurl
     * would squash them as dot segments. */
    rc |= curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    rc |=
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, client_write_cb);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, call);
    rc |= client_tls(e, call->client, r);
    rc |= curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION,
                           call->to_node ? client_sockopt : NULL);
    return rc;
}

/* client_setup - every option of one request: those of its kind, unless
 * the handle holds them from its last call (client_shape), then those of
 * this call.  0, -EINVAL (a URL or option libcurl refuses, lines the
 * signature refuses) or -ENOMEM. */
static int
client_setup(struct client_call *call, const struct http_client_req *r)
{
    struct http_client *c = call->client;
    CURL *e = call->easy;
    unsigned connect_ms =
        r->connect_timeout_ms ? r->connect_timeout_ms : r->timeout_ms;
    unsigned shape = client_shape(c, r);
    int keep =
        shape != 0 && shape == call->shape && call->peers_gen == c->peers_gen;
    CURLcode rc = CURLE_OK;
    const char *url;
    int hrc = client_headers(call, r);

    if (hrc != 0)
        return hrc;
    call->shape = 0; /* until every option below is set */
    call->errbuf[0] = '\0';
    call->to_node = r->port != HTTP_CLIENT_URL;
    if (!keep && client_fixed(call, r) != CURLE_OK)
        return -ENOMEM;
    rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)r->timeout_ms);
    rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    /* libcurl's low-speed check: under a byte a second, averaged over its
     * last few seconds, for idle_s seconds (0: off). */
    rc |= curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, r->idle_s > 0 ? 1L : 0L);
    rc |= curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)r->idle_s);
    rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->headers);
    if (rc != CURLE_OK)
        return -ENOMEM;
    if ((url = client_url(call, r)) == NULL)
        return -ENOMEM;
    rc = curl_easy_setopt(e, CURLOPT_URL, url);
    if (rc == CURLE_OK && (!keep || (shape & 3) == 1))
        rc = client_method(e, r); /* a kept GET is one still */
    if (rc == CURLE_OUT_OF_MEMORY)
        return -ENOMEM;
    if (rc != CURLE_OK)
        return -EINVAL;
    call->shape = shape;
    call->peers_gen = c->peers_gen;
    return 0;
}

/* client_start - set a call up (a stream when chunk is not NULL) and hand
 * it to the multi handle, which asks for a 0 ms timer to start it.  The
 * call in *out; 0 or -errno as http_client_request() says. */
static int
client_start(struct http_client *c, const struct http_client_req *r,
             http_client_chunk_fn *chunk, http_client_done_fn *done, void *arg,
             struct client_call **out)
{
    struct client_call *call;
    CURLMcode mrc;
    int rc;

    if (r->method == NULL || done == NULL ||
        (r->port == HTTP_CLIENT_URL ? r->url == NULL
                                    : r->addr == NULL || r->target == NULL) ||
        (r->body == NULL && r->body_len > 0))
        return -EINVAL;
    call = client_call_get(c);
    if (call == NULL)
        return -ENOMEM;
    rc = client_setup(call, r);
    if (rc != 0) {
        client_call_put(c, call);
        return rc;
    }
    call->done = done;
    call->chunk = chunk;
    call->arg = arg;
    call->max_body = r->max_body ? r->max_body : HTTP_CLIENT_BODY_MAX;
    call->fail = 0;
    call->answer = 0;
    call->cancelled = 0;
    mrc = curl_multi_add_handle(c->multi, call->easy);
    if (mrc != CURLM_OK) {
        log_error(0, "curl_multi_add_handle(%s) failed: %s",
                  r->port == HTTP_CLIENT_URL ? r->url : r->target,
                  curl_multi_strerror(mrc));
        client_call_put(c, call);
        return mrc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
    }
    call->next = &c->pending;
    call->prev = c->pending.prev;
    c->pending.prev->next = call;
    c->pending.prev = call;
    c->npending++;
    *out = call;
    return 0;
}

/* http_client_request - a call whose answer is gathered for done. */
int
http_client_request(struct http_client *c, const struct http_client_req *r,
                    http_client_done_fn *done, void *arg)
{
    struct client_call *call;

    return client_start(c, r, NULL, done, arg, &call);
}

/*
 * The handle of a stream is its call: client.h keeps the type opaque, so
 * the pointer only changes its name.
 */
static struct http_client_stream *
client_stream_of(struct client_call *call)
{
    return (struct http_client_stream *)(void *)call;
}

static struct client_call *
client_call_of(struct http_client_stream *s)
{
    return (struct client_call *)(void *)s;
}

/* http_client_stream - a call whose 2xx body goes to on_chunk. */
int
http_client_stream(struct http_client *c, const struct http_client_req *r,
                   http_client_chunk_fn *on_chunk, http_client_done_fn *on_end,
                   void *arg, struct http_client_stream **out)
{
    struct client_call *call;
    int rc;

    if (on_chunk == NULL || out == NULL)
        return -EINVAL;
    rc = client_start(c, r, on_chunk, on_end, arg, &call);
    if (rc == 0)
        *out = client_stream_of(call);
    return rc;
}

/* client_detach - take a call out of the multi handle and the pending
 * list.  An unfinished transfer loses its connection. */
static void
client_detach(struct http_client *c, struct client_call *call)
{
    curl_multi_remove_handle(c->multi, call->easy);
    call->prev->next = call->next;
    call->next->prev = call->prev;
    call->next = call->prev = NULL;
    c->npending--;
    if (call->cancelled)
        c->ncancelled--;
}

/* client_drop - a cancel: detach and recycle the call, no done; inside an
 * on_chunk only mark it, for client_sweep.  Marking twice is harmless. */
static void
client_drop(struct http_client *c, struct client_call *call)
{
    if (c->in_chunk > 0) {
        if (!call->cancelled)
            c->ncancelled++;
        call->cancelled = 1;
        return;
    }
    client_detach(c, call);
    call->shape = 0;
    client_call_put(c, call);
}

/* client_sweep - detach and recycle the calls cancelled from inside an
 * on_chunk, now that libcurl's callbacks are over. */
static void
client_sweep(struct http_client *c)
{
    struct client_call *call = c->pending.next, *next;

    for (; c->ncancelled > 0 && call != &c->pending; call = next) {
        next = call->next;
        if (call->cancelled) {
            client_detach(c, call);
            call->shape = 0;
            client_call_put(c, call);
        }
    }
}

/* client_errno - the -errno for a transfer's CURLcode: the socket's own
 * errno when libcurl kept one, else the nearest meaning. */
static int
client_errno(CURL *e, CURLcode code)
{
    long os_errno = 0;

    switch (code) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_OUT_OF_MEMORY:
    case CURLE_WRITE_ERROR: /* client_write_cb's OOM (or too_big) */
        return -ENOMEM;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -EINVAL;
    default:
        break;
    }
    curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &os_errno);
    if (os_errno > 0)
        return -(int)os_errno;
    switch (code) {
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        return -ECONNRESET;
    default:
        return -EIO;
    }
}

/* client_refused - a node answered that it refused the call itself
 * (node_call.h): resp says -EACCES then, for the caller to treat as a
 * call that did not go through, not to relay as a client's 401. */
static void
client_refused(struct client_call *call, struct http_client_resp *resp)
{
    struct curl_header *h;

    if (!call->to_node || resp->status != 401 ||
        curl_easy_header(call->easy, HTTP_NODE_REFUSED, 0, CURLH_HEADER, -1,
                         &h) != CURLHE_OK)
        return;
    resp->err = -EACCES;
    resp->error = "the node refused the call (its signature, destination "
                  "or nonce)";
    resp->status = 0;
}

/*
 * client_finish - a transfer is over: gather the response, detach the
 * call, run done, recycle.  done may start or cancel other requests; the
 * strings resp points to live in the easy handle until the recycle.  A
 * stream's status, type and Retry-After are kept even when the transfer
 * broke after them: on_end tells how a stream that was answered ended.
 */
static void
client_finish(struct http_client *c, struct client_call *call, CURLcode code)
{
    struct http_client_resp resp = {0};
    long status = 0;
    char *ct = NULL;
    curl_off_t retry = 0, pretransfer = 0;
    int answered;

    curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(call->easy, CURLINFO_CONTENT_TYPE, &ct);
    curl_easy_getinfo(call->easy, CURLINFO_RETRY_AFTER, &retry);
    curl_easy_getinfo(call->easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
    answered = code == CURLE_OK || (call->chunk != NULL && status > 0);
    if (code != CURLE_OK)
        call->shape = 0; /* its next call starts from a reset handle */

    client_detach(c, call);
    resp.curl_code = (int)code;
    resp.err = call->fail != 0 ? call->fail : client_errno(call->easy, code);
    resp.error = code == CURLE_OK  ? ""
                 : call->errbuf[0] ? call->errbuf
                                   : curl_easy_strerror(code);
    resp.status = answered && status > 0 ? (unsigned)status : 0;
    resp.content_type = answered ? ct : NULL;
    resp.retry_after_s = answered ? (long)retry : 0;
    resp.sent = answered || pretransfer > 0;
    client_refused(call, &resp);
    resp.body = call->body;
    http_buf_init(&call->body);
    call->done(call->arg, &resp);
    http_buf_free(&resp.body);
    client_call_put(c, call);
}

/* client_reap - finish every transfer libcurl reports done.  One message
 * at a time: a done that cancels another call also drops its message. */
static void
client_reap(struct http_client *c)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
        struct client_call *call = NULL;

        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &call);
        client_finish(c, call, msg->data.result);
    }
}

/* client_action - curl_multi_socket_action(), then reap. */
static void
client_action(struct http_client *c, curl_socket_t s, int mask)
{
    int running;
    CURLMcode rc = curl_multi_socket_action(c->multi, s, mask, &running);

    if (rc != CURLM_OK)
        log_error(0, "curl_multi_socket_action(fd %d) failed: %s", (int)s,
                  curl_multi_strerror(rc));
    client_sweep(c);
    client_reap(c);
}

/* http_client_on_event - epoll bits to libcurl's; a hang-up or error is
 * reported readable too, so libcurl reads and sees what happened. */
void
http_client_on_event(struct http_client *c, int fd, uint32_t events)
{
    int mask = 0;

    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        mask |= CURL_CSELECT_IN;
    if (events & EPOLLOUT)
        mask |= CURL_CSELECT_OUT;
    if (events & (EPOLLHUP | EPOLLERR))
        mask |= CURL_CSELECT_ERR;
    client_action(c, fd, mask);
}

/*
 * http_client_on_timeout - let libcurl run its due timers.  libcurl calls
 * timer_cb only when its earliest deadline changes, so ours is dropped
 * only once due (a due timer leaves libcurl's tree, and timer_cb then
 * reports the next one or -1); an early call leaves it armed.
 */
void
http_client_on_timeout(struct http_client *c)
{
    if (c->timer_armed && client_now_ns() >= c->timer_due_ns)
        c->timer_armed = 0;
    client_action(c, CURL_SOCKET_TIMEOUT, 0);
}

/* http_client_timeout_ms - the armed deadline, in whole ms rounded up so a
 * loop never wakes just before it and spins. */
int
http_client_timeout_ms(const struct http_client *c)
{
    uint64_t now, left;

    if (!c->timer_armed)
        return -1;
    now = client_now_ns();
    if (now >= c->timer_due_ns)
        return 0;
    left = (c->timer_due_ns - now + 999999u) / 1000000u;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

/* http_client_pending - started, not done, not cancelled. */
unsigned
http_client_pending(const struct http_client *c)
{
    return c->npending;
}

/* http_client_cancel - drop every pending call with arg (not yet marked
 * cancelled: a mark already counted once). */
unsigned
http_client_cancel(struct http_client *c, void *arg)
{
    struct client_call *call = c->pending.next, *next;
    unsigned n = 0;

    for (; call != &c->pending; call = next) {
        next = call->next;
        if (call->arg != arg || call->cancelled)
            continue;
        client_drop(c, call);
        n++;
    }
    return n;
}

/* http_client_stream_cancel - drop one stream. */
void
http_client_stream_cancel(struct http_client_stream *s)
{
    struct client_call *call = client_call_of(s);

    if (call->next == NULL) /* detached: its on_end is running */
        return;
    client_drop(call->client, call);
}

/* http_client_cancel_all - drop every pending call. */
void
http_client_cancel_all(struct http_client *c)
{
    struct client_call *call = c->pending.next, *next;

    for (; call != &c->pending; call = next) {
        next = call->next;
        client_drop(c, call);
    }
}

/* http_client_free - cancel all, free the calls, then the multi handle,
 * whose cleanup closes the cached connections through sock_cb. */
void
http_client_free(struct http_client *c)
{
    if (c == NULL)
        return;
    http_client_cancel_all(c);
    while (c->free_calls != NULL) {
        struct client_call *call = c->free_calls;

        c->free_calls = call->next;
        client_call_free(call);
    }
    if (c->multi != NULL)
        curl_multi_cleanup(c->multi);
    if (c->secret != NULL)
        explicit_bzero(c->secret, strlen(c->secret));
    free(c->secret);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c);
}

/* http_client_escape - see client.h. */
char *
http_client_escape(const char *s, size_t len)
{
    /* The handle is ignored since libcurl 7.82, and the result must be
     * freed with curl_free(): copy it into malloc'd memory. */
    char *e, *out;

    if (len == 0) /* libcurl would take strlen(s) */
        return strdup("");
    if (len > INT_MAX || (e = curl_easy_escape(NULL, s, (int)len)) == NULL)
        return NULL;
    out = strdup(e);
    curl_free(e);
    return out;
}
