/*
 * engine.c - the epoll engine of mayfly-bench: histograms, buffers, an
 * HTTP/1.1 response parser, a blocking HTTP client, and runs of keep-alive
 * connections (HTTP or RESP) spread over a few threads.
 *
 * Each loop thread owns its connections; threads share only the atomics of
 * struct bench_run. Latencies go to the loop's own histogram and are merged
 * after the threads are joined.
 * Errors: 0 or -errno; a connection that fails is closed and counted.
 */
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#ifndef BENCH_NO_RESP /* mayfly bench (ops/cli): HTTP only, no hiredis */
#include <hiredis/hiredis.h>
#endif
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ops/bench/bench.h"

/* Monotonic time in nanoseconds. */
uint64_t
bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep ns nanoseconds (restarts after signals). */
void
bench_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull),
                          (long)(ns % 1000000000ull)};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* Slot of a value: exact below 128, then 64 slots per power of two. */
static unsigned
hist_slot(uint64_t v)
{
    unsigned e;

    if (v < 2 * BENCH_HIST_SUB)
        return (unsigned)v;
    e = 63u - (unsigned)__builtin_clzll(v);
    return (e - 5u) * BENCH_HIST_SUB +
           (unsigned)((v >> (e - 6u)) - BENCH_HIST_SUB);
}

/* Middle of the values a slot holds. */
static uint64_t
hist_value(unsigned i)
{
    unsigned e;
    uint64_t lo;

    if (i < 2 * BENCH_HIST_SUB)
        return i;
    e = i / BENCH_HIST_SUB + 5u;
    lo = (uint64_t)(i % BENCH_HIST_SUB + BENCH_HIST_SUB) << (e - 6u);
    return lo + ((1ull << (e - 6u)) >> 1);
}

/* Count one latency in ns. Cannot fail. */
void
bench_hist_add(struct bench_hist *h, uint64_t ns)
{
    h->slot[hist_slot(ns)]++;
    h->count++;
    if (ns > h->max)
        h->max = ns;
}

/* Add src's counts to dst. */
void
bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src)
{
    for (unsigned i = 0; i < BENCH_HIST_SLOTS; i++)
        dst->slot[i] += src->slot[i];
    dst->count += src->count;
    if (src->max > dst->max)
        dst->max = src->max;
}

/* The pct-th percentile in microseconds; 0 for an empty histogram. */
double
bench_hist_pct_us(const struct bench_hist *h, double pct)
{
    uint64_t want, seen = 0;

    if (h->count == 0)
        return 0;
    if (pct >= 100)
        return (double)h->max / 1000.0;
    want = (uint64_t)((double)h->count * pct / 100.0);
    if (want == 0)
        want = 1;
    for (unsigned i = 0; i < BENCH_HIST_SLOTS; i++) {
        seen += h->slot[i];
        if (seen >= want)
            return (double)hist_value(i) / 1000.0;
    }
    return (double)h->max / 1000.0;
}

/* Make room for more bytes after len; exits on out of memory. */
void
bench_buf_reserve(struct bench_buf *b, size_t more)
{
    size_t cap = b->cap ? b->cap : 4096;

    if (b->len + more + 1 <= b->cap)
        return;
    while (cap < b->len + more + 1)
        cap *= 2;
    b->p = realloc(b->p, cap);
    if (b->p == NULL) {
        fprintf(stderr, "mayfly-bench: out of memory\n");
        exit(1);
    }
    b->cap = cap;
}

/* Append n bytes, keeping a NUL after them. */
void
bench_buf_add(struct bench_buf *b, const void *d, size_t n)
{
    bench_buf_reserve(b, n);
    memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Append a C string. */
void
bench_buf_str(struct bench_buf *b, const char *s)
{
    bench_buf_add(b, s, strlen(s));
}

/* Append formatted text. */
void
bench_buf_printf(struct bench_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    bench_buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Release a buffer's memory. */
void
bench_buf_free(struct bench_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

uint32_t bench_host;
const char *bench_token;

/* Blocking TCP connection to 127.0.0.1:port (or, for BENCH_AT(k, port),
 * 127.0.0.(1+k):port; bench_host when set) with TCP_NODELAY; fd or
 * -errno. */
int
bench_tcp_connect(int port)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET,
        .sin_port = htons((uint16_t)(port & 0xffff)),
        .sin_addr.s_addr =
            bench_host ? bench_host
                       : htonl(INADDR_LOOPBACK + ((unsigned)port >> 16))};
    int fd, one = 1, rc;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
        rc = -errno;
        close(fd);
        return rc;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* Wait until something accepts on port, at most secs; 0 or -ETIMEDOUT. */
int
bench_wait_port(int port, double secs)
{
    uint64_t until = bench_now_ns() + (uint64_t)(secs * 1e9);
    int fd;

    while ((fd = bench_tcp_connect(port)) < 0) {
        if (bench_now_ns() > until)
            return -ETIMEDOUT;
        bench_sleep_ns(20000000);
    }
    close(fd);
    return 0;
}

/* Headers of one response: status, Content-Length, chunked or not. */
static int
http_head(const char *p, size_t hl, struct bench_reply *r, long *cl,
          int *chunked)
{
    const char *line, *eol, *end = p + hl;

    if (hl < 12 || memcmp(p, "HTTP/1.", 7) != 0)
        return -1;
    r->status = atoi(p + 9);
    *cl = -1;
    *chunked = 0;
    line = memchr(p, '\n', hl) + 1;
    while (line < end - 2) {
        eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL)
            return -1;
        if (strncasecmp(line, "content-length:", 15) == 0)
            *cl = strtol(line + 15, NULL, 10);
        else if (strncasecmp(line, "transfer-encoding:", 18) == 0 &&
                 memmem(line, (size_t)(eol - line), "chunked", 7) != NULL)
            *chunked = 1;
        line = eol + 1;
    }
    return 0;
}

/* Body of a chunked response into chunk; bytes used from p, 0 if
 * incomplete. */
static long
http_chunked(const char *p, size_t len, size_t pos, struct bench_buf *chunk)
{
    const char *e;
    size_t n;

    chunk->len = 0;
    for (;;) {
        e = memmem(p + pos, len - pos, "\r\n", 2);
        if (e == NULL)
            return 0;
        n = strtoul(p + pos, NULL, 16);
        pos = (size_t)(e - p) + 2;
        if (n == 0)
            break;
        if (len < pos + n + 2)
            return 0;
        bench_buf_add(chunk, p + pos, n);
        pos += n + 2;
    }
    if (len >= pos + 2 && memcmp(p + pos, "\r\n", 2) == 0)
        return (long)pos + 2;
    e = memmem(p + pos - 2, len - pos + 2, "\r\n\r\n", 4);
    return e == NULL ? 0 : (long)(e - p) + 4;
}

/* Parse one HTTP/1.1 response at p. Returns the bytes it spans, 0 when
 * more bytes are needed, -1 when it is malformed. r->body points into p
 * (or into chunk for a chunked body). */
long
bench_http_parse(const char *p, size_t len, struct bench_buf *chunk,
                 struct bench_reply *r)
{
    const char *end = memmem(p, len, "\r\n\r\n", 4);
    size_t hl;
    long cl, n;
    int chunked;

    if (end == NULL)
        return len > 65536 ? -1 : 0;
    hl = (size_t)(end - p) + 4;
    if (http_head(p, hl, r, &cl, &chunked) != 0)
        return -1;
    if (chunked) {
        n = http_chunked(p, len, hl, chunk);
        r->body = chunk->p;
        r->len = chunk->len;
        return n;
    }
    if (cl < 0)
        cl = 0;
    if (len < hl + (size_t)cl)
        return 0;
    r->body = p + hl;
    r->len = (size_t)cl;
    return (long)(hl + (size_t)cl);
}

/* Append one HTTP/1.1 keep-alive request to out; with token (not NULL, or
 * else bench_token) it carries Authorization: Bearer token, for a node
 * with auth_file. */
void
bench_http_request_auth(struct bench_buf *out, const char *token,
                        const char *method, const char *path, const char *body,
                        size_t blen)
{
    if (token == NULL)
        token = bench_token;
    bench_buf_printf(out, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method,
                     path);
    if (token != NULL)
        bench_buf_printf(out, "Authorization: Bearer %s\r\n", token);
    if (body == NULL) {
        bench_buf_str(out, "\r\n");
        return;
    }
    bench_buf_printf(out,
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     blen);
    bench_buf_add(out, body, blen);
}

/* Append one HTTP/1.1 keep-alive request to out, without a token. */
void
bench_http_request(struct bench_buf *out, const char *method, const char *path,
                   const char *body, size_t blen)
{
    bench_http_request_auth(out, NULL, method, path, body, blen);
}

/* Read one whole response from a blocking fd into in; 0 or -errno
 * (-EPROTO for a malformed one). r stays valid until in is reused. */
int
bench_http_recv(int fd, struct bench_buf *in, struct bench_buf *chunk,
                struct bench_reply *r)
{
    long n;
    ssize_t got;

    in->len = 0;
    for (;;) {
        if (in->len > 0) {
            n = bench_http_parse(in->p, in->len, chunk, r);
            if (n < 0)
                return -EPROTO;
            if (n > 0)
                return 0;
        }
        bench_buf_reserve(in, 65536);
        got = read(fd, in->p + in->len, in->cap - in->len - 1);
        if (got == 0)
            return -ECONNRESET;
        if (got == -1) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        in->len += (size_t)got;
        in->p[in->len] = '\0';
    }
}

/* Write all of n bytes to a blocking fd; 0 or -errno. */
static int
write_all(int fd, const char *p, size_t n)
{
    ssize_t w;

    while (n > 0) {
        w = write(fd, p, n);
        if (w == -1) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One request and its response on a blocking keep-alive fd; body is a
 * C string or NULL. 0 or -errno. */
int
bench_http_call(int fd, struct bench_buf *in, struct bench_buf *chunk,
                const char *method, const char *path, const char *body,
                struct bench_reply *r)
{
    struct bench_buf out = {0};
    int rc;

    bench_http_request(&out, method, path, body, body ? strlen(body) : 0);
    rc = write_all(fd, out.p, out.len);
    bench_buf_free(&out);
    if (rc != 0)
        return rc;
    return bench_http_recv(fd, in, chunk, r);
}

/* Find "key" in a JSON text from *pos on and return its string value (not
 * unescaped); *pos moves past it. 0, or -ENOENT when there is none.  The
 * needle is the key with its quotes: memmem skips a whole payload in long
 * strides instead of stopping at each pair of its letters that spell the
 * key (the client's scan must not cost more than the server's work). */
int
bench_json_str(const char *body, size_t len, size_t *pos, const char *key,
               const char **s, size_t *slen)
{
    char needle[64];
    size_t kl = strlen(key);
    const char *p = body + *pos, *end = body + len, *q;

    if (kl + 2 > sizeof(needle))
        return -ENOENT;
    needle[0] = '"';
    memcpy(needle + 1, key, kl);
    needle[kl + 1] = '"';
    kl += 2;
    while (p < end) {
        q = memmem(p, (size_t)(end - p), needle, kl);
        if (q == NULL)
            break;
        p = q + kl;
        while (p < end && (*p == ' ' || *p == ':'))
            p++;
        if (p >= end || *p != '"')
            continue;
        q = ++p;
        while (p < end && *p != '"')
            p += *p == '\\' ? 2 : 1;
        if (p >= end)
            break;
        *s = q;
        *slen = (size_t)(p - q);
        *pos = (size_t)(p + 1 - body);
        return 0;
    }
    return -ENOENT;
}

/* How many string values "key" has in a JSON text. */
long
bench_json_count(const char *body, size_t len, const char *key)
{
    size_t pos = 0, sl;
    const char *s;
    long n = 0;

    while (bench_json_str(body, len, &pos, key, &s, &sl) == 0)
        n++;
    return n;
}

/* A run with threads loops (at least one). Exits on failure. */
struct bench_run *
bench_run_new(int threads)
{
    struct bench_run *run = calloc(1, sizeof(*run));

    if (threads < 1)
        threads = 1;
    if (run == NULL)
        exit(1);
    run->nloops = threads;
    run->loops = calloc((size_t)threads, sizeof(*run->loops));
    if (run->loops == NULL)
        exit(1);
    for (int i = 0; i < threads; i++) {
        run->loops[i].run = run;
        run->loops[i].ep = epoll_create1(EPOLL_CLOEXEC);
        if (run->loops[i].ep == -1) {
            perror("mayfly-bench: epoll_create1");
            exit(1);
        }
    }
    atomic_store(&run->t_end, UINT64_MAX);
    atomic_store(&run->deadline, UINT64_MAX);
    return run;
}

/* tls_open - a TLS session over the connected blocking socket fd, its
 * handshake done; NULL on failure.  No certificate is verified. */
static void *
tls_open(int fd)
{
    static gnutls_certificate_credentials_t cred;
    gnutls_session_t s;
    int rc;

    if (cred == NULL && gnutls_certificate_allocate_credentials(&cred) < 0)
        return NULL;
    if (gnutls_init(&s, GNUTLS_CLIENT) < 0)
        return NULL;
    if (gnutls_set_default_priority(s) < 0 ||
        gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred) < 0) {
        gnutls_deinit(s);
        return NULL;
    }
    gnutls_transport_set_int(s, fd);
    do
        rc = gnutls_handshake(s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    if (rc < 0) {
        gnutls_deinit(s);
        return NULL;
    }
    return s;
}

/* Connect one connection to 127.0.0.1:port and give it to the next loop.
 * NULL (with run->err set) when the connection cannot be made. */
struct bench_conn *
bench_run_add(struct bench_run *run, enum bench_proto proto, int port,
              const struct bench_role *role, void *ud)
{
    return bench_run_add_fd(run, bench_tcp_connect(port), proto, port, role,
                            ud);
}

/* bench_run_add_fd - see bench.h. */
struct bench_conn *
bench_run_add_fd(struct bench_run *run, int fd, enum bench_proto proto,
                 int port, const struct bench_role *role, void *ud)
{
    struct bench_loop *l = &run->loops[run->next % run->nloops];
    struct epoll_event ev = {.events = EPOLLIN};
    struct bench_conn *c;

    if (fd < 0) {
        snprintf(run->err, sizeof(run->err), "connect to 127.0.0.%d:%d: %s",
                 1 + (port >> 16), port & 0xffff, strerror(-fd));
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        exit(1);
    if (proto == BENCH_HTTPS && (c->tls = tls_open(fd)) == NULL) {
        snprintf(run->err, sizeof(run->err),
                 "TLS handshake with port %d failed", port & 0xffff);
        close(fd);
        free(c);
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    c->id = run->next++;
    c->proto = proto;
    c->role = role;
    c->loop = l;
    c->ud = ud;
#ifndef BENCH_NO_RESP
    if (proto == BENCH_RESP)
        c->reader = redisReaderCreate();
#endif
    ev.data.ptr = c;
    epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->conns = realloc(l->conns, (size_t)l->cap * sizeof(*l->conns));
        if (l->conns == NULL)
            exit(1);
    }
    l->conns[l->n++] = c;
    return c;
}

/* Note a connection's failure, close it and count it out. */
void
bench_fail(struct bench_conn *c, const char *fmt, ...)
{
    struct bench_loop *l = c->loop;
    va_list ap;

    if (c->dead)
        return;
    if (l->err[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(l->err, sizeof(l->err), fmt, ap);
        va_end(ap);
    }
    c->dead = 1;
    l->errors++;
    epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (!c->done)
        atomic_fetch_sub(&l->run->active, 1);
}

/* Queue bytes to send; the engine writes them after the callback. */
void
bench_send(struct bench_conn *c, const void *d, size_t n)
{
    bench_buf_add(&c->out, d, n);
}

/* Count one operation that started at t0 and carried msgs messages, if it
 * ends inside the measured window. */
void
bench_record(struct bench_conn *c, uint64_t t0, uint64_t msgs)
{
    struct bench_loop *l = c->loop;
    uint64_t now = bench_now_ns();

    if (now < atomic_load(&l->run->t_begin) ||
        now > atomic_load(&l->run->t_end))
        return;
    bench_hist_add(&l->hist, now - t0);
    l->ops++;
    l->msgs += msgs;
    l->t_last = now;
}

/* conn_write - write(2), or a TLS record send (a send that would block is
 * resumed with NULL, 0, as GnuTLS asks); errno EAGAIN when it would block. */
static ssize_t
conn_write(struct bench_conn *c, const char *p, size_t n)
{
    ssize_t w;

    if (c->tls == NULL)
        return write(c->fd, p, n);
    w = c->tls_again ? gnutls_record_send(c->tls, NULL, 0)
                     : gnutls_record_send(c->tls, p, n);
    if (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED) {
        c->tls_again = 1;
        errno = EAGAIN;
        return -1;
    }
    c->tls_again = 0;
    if (w < 0) {
        errno = EIO;
        return -1;
    }
    return w;
}

/* conn_recv - read(2), or a TLS record receive; errno EAGAIN when nothing
 * is there. */
static ssize_t
conn_recv(struct bench_conn *c, char *p, size_t n)
{
    ssize_t got;

    if (c->tls == NULL)
        return read(c->fd, p, n);
    got = gnutls_record_recv(c->tls, p, n);
    if (got == GNUTLS_E_AGAIN || got == GNUTLS_E_INTERRUPTED) {
        errno = EAGAIN;
        return -1;
    }
    if (got < 0) {
        errno = EIO;
        return -1;
    }
    return got;
}

/* Write what is queued; arm EPOLLOUT while some remains. */
static void
conn_flush(struct bench_conn *c)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    ssize_t w;
    int was_blocked = c->out.off > 0;

    while (c->out.off < c->out.len) {
        w = conn_write(c, c->out.p + c->out.off, c->out.len - c->out.off);
        if (w == -1) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            bench_fail(c, "write: %s", strerror(errno));
            return;
        }
        c->out.off += (size_t)w;
    }
    if (c->out.off == c->out.len) {
        c->out.off = c->out.len = 0;
        if (was_blocked)
            epoll_ctl(c->loop->ep, EPOLL_CTL_MOD, c->fd, &ev);
        return;
    }
    if (!was_blocked) {
        ev.events = EPOLLIN | EPOLLOUT;
        epoll_ctl(c->loop->ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
}

/* Hand one reply to the role and act on its verdict; -1 once c is dead. */
static int
conn_deliver(struct bench_conn *c, const struct bench_reply *r)
{
    int rc;

    if (c->done)
        return 0;
    rc = c->role->reply(c, r);
    if (rc < 0) {
        bench_fail(c, "role failed");
        return -1;
    }
    if (rc > 0) {
        c->done = 1;
        atomic_fetch_sub(&c->loop->run->active, 1);
    }
    return 0;
}

/* Split the bytes read so far into HTTP responses. */
static void
conn_parse_http(struct bench_conn *c)
{
    struct bench_reply r;
    long n;

    while (c->in.off < c->in.len) {
        memset(&r, 0, sizeof(r));
        n = bench_http_parse(c->in.p + c->in.off, c->in.len - c->in.off,
                             &c->chunk, &r);
        if (n < 0) {
            bench_fail(c, "malformed HTTP response");
            return;
        }
        if (n == 0)
            break;
        c->in.off += (size_t)n;
        if (conn_deliver(c, &r) != 0)
            return;
    }
    if (c->in.off == c->in.len) {
        c->in.off = c->in.len = 0;
    } else if (c->in.off > 0) {
        memmove(c->in.p, c->in.p + c->in.off, c->in.len - c->in.off);
        c->in.len -= c->in.off;
        c->in.off = 0;
    }
}

#ifndef BENCH_NO_RESP
/* Feed bytes to the RESP reader and deliver every complete reply. */
static void
conn_parse_resp(struct bench_conn *c, const char *p, size_t n)
{
    struct bench_reply r;
    void *reply;

    if (redisReaderFeed(c->reader, p, n) != REDIS_OK) {
        bench_fail(c, "RESP reader failed");
        return;
    }
    for (;;) {
        reply = NULL;
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            bench_fail(c, "malformed RESP reply");
            return;
        }
        if (reply == NULL)
            return;
        memset(&r, 0, sizeof(r));
        r.rr = reply;
        if (conn_deliver(c, &r) != 0) {
            freeReplyObject(reply);
            return;
        }
        freeReplyObject(reply);
    }
}
#else
/* Built without hiredis: no RESP connection is ever made. */
static void
conn_parse_resp(struct bench_conn *c, const char *p, size_t n)
{
    (void)p;
    (void)n;
    bench_fail(c, "RESP not built in");
}
#endif

/* Read what has arrived and deliver complete answers. */
static void
conn_read(struct bench_conn *c)
{
    ssize_t got;

    for (;;) {
        bench_buf_reserve(&c->in, 65536);
        got = conn_recv(c, c->in.p + c->in.len, c->in.cap - c->in.len - 1);
        if (got == 0) {
            bench_fail(c, "connection closed by the server");
            return;
        }
        if (got == -1) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                bench_fail(c, "read: %s", strerror(errno));
            return;
        }
        if (c->proto == BENCH_RESP) {
            conn_parse_resp(c, c->in.p, (size_t)got);
        } else {
            c->in.len += (size_t)got;
            conn_parse_http(c);
        }
        /* TLS: records already decrypted wait in GnuTLS, not the socket */
        if (c->dead ||
            (c->tls != NULL && gnutls_record_check_pending(c->tls) == 0) ||
            (c->tls == NULL && (size_t)got < 65536))
            return;
    }
}

/* Start every connection of the loop. */
static void
loop_begin(struct bench_loop *l)
{
    struct bench_conn *c;
    int rc;

    for (int i = 0; i < l->n; i++) {
        c = l->conns[i];
        rc = c->role->start(c);
        if (rc < 0) {
            bench_fail(c, "start failed");
            continue;
        }
        if (rc > 0) {
            c->done = 1;
            atomic_fetch_sub(&l->run->active, 1);
        }
        conn_flush(c);
    }
}

/* Loop thread: serve events until stopped, finished or past the deadline.
 */
static void *
loop_main(void *arg)
{
    struct bench_loop *l = arg;
    struct bench_run *run = l->run;
    struct epoll_event ev[256];
    struct bench_conn *c;
    int n;

    loop_begin(l);
    while (!atomic_load(&run->stop) && atomic_load(&run->active) > 0) {
        if (bench_now_ns() > atomic_load(&run->deadline)) {
            if (l->err[0] == '\0')
                snprintf(l->err, sizeof(l->err), "deadline passed");
            l->errors++;
            break;
        }
        n = epoll_wait(l->ep, ev, 256, 5);
        for (int i = 0; i < n; i++) {
            c = ev[i].data.ptr;
            if (c->dead)
                continue;
            if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_read(c);
            if (!c->dead && c->out.off < c->out.len)
                conn_flush(c);
        }
    }
    return NULL;
}

/* Start the loop threads. 0 or -errno. */
int
bench_run_start(struct bench_run *run)
{
    int active = 0, rc;

    for (int i = 0; i < run->nloops; i++)
        active += run->loops[i].n;
    atomic_store(&run->active, active);
    run->t_start = bench_now_ns();
    for (int i = 0; i < run->nloops; i++) {
        rc = pthread_create(&run->loops[i].th, NULL, loop_main, &run->loops[i]);
        if (rc != 0)
            return -rc;
    }
    return 0;
}

/* Wait for the loops and merge what they counted. */
void
bench_run_join(struct bench_run *run)
{
    struct bench_loop *l;

    for (int i = 0; i < run->nloops; i++) {
        l = &run->loops[i];
        pthread_join(l->th, NULL);
        bench_hist_merge(&run->hist, &l->hist);
        run->ops += l->ops;
        run->msgs += l->msgs;
        run->errors += l->errors;
        if (l->t_last > run->t_last)
            run->t_last = l->t_last;
        if (run->err[0] == '\0' && l->err[0] != '\0')
            memcpy(run->err, l->err, sizeof(run->err));
    }
}

/* Run for warm seconds unmeasured, then secs measured, then stop and join.
 */
void
bench_run_timed(struct bench_run *run, double warm, double secs)
{
    atomic_store(&run->t_begin, UINT64_MAX);
    if (bench_run_start(run) != 0) {
        atomic_store(&run->stop, 1);
        bench_run_join(run);
        return;
    }
    bench_sleep_ns((uint64_t)(warm * 1e9));
    atomic_store(&run->t_end, UINT64_MAX);
    bench_sys_read(&run->sys_begin);
    atomic_store(&run->t_begin, bench_now_ns());
    bench_sleep_ns((uint64_t)(secs * 1e9));
    atomic_store(&run->t_end, bench_now_ns());
    bench_sys_read(&run->sys_end);
    atomic_store(&run->stop, 1);
    bench_run_join(run);
}

/* bench_run_secs - see bench.h. */
double
bench_run_secs(const struct bench_run *run)
{
    return (double)(atomic_load(&run->t_end) - atomic_load(&run->t_begin)) /
           1e9;
}

/* task_ns - the run time /proc/PID/schedstat gives pid, ns; 0 if none. */
static uint64_t
task_ns(long pid)
{
    char path[64];
    unsigned long long ns = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/schedstat", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fscanf(f, "%llu", &ns) != 1)
        ns = 0;
    fclose(f);
    return ns;
}

/* bench_server_ns - see bench.h. */
uint64_t
bench_server_ns(void)
{
    char path[80];
    long child;
    uint64_t ns;
    FILE *f;

    if (bench_opt.mpid <= 0)
        return 0;
    ns = task_ns(bench_opt.mpid);
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children",
             (long)bench_opt.mpid, (long)bench_opt.mpid);
    if ((f = fopen(path, "r")) != NULL) {
        while (fscanf(f, "%ld", &child) == 1)
            ns += task_ns(child);
        fclose(f);
    }
    return ns;
}

/* bench_sys_read - see bench.h; zeros where /proc cannot be read. */
void
bench_sys_read(struct bench_sys *s)
{
    char line[512], head[512];
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    struct rusage ru;

    memset(s, 0, sizeof(*s));
    s->server_ns = bench_server_ns();
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        s->self_us =
            (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
            (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    if (f != NULL) {
        /* cpu user nice system idle iowait irq softirq steal */
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8)
            s->busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6];
        while (fgets(line, sizeof(line), f) != NULL)
            if (sscanf(line, "ctxt %" SCNu64, &s->ctxt) == 1)
                break;
        fclose(f);
    }
    /* /proc/net/snmp: a "Tcp:" line of names, then one of values. */
    f = fopen("/proc/net/snmp", "r");
    if (f == NULL)
        return;
    head[0] = '\0';
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "Tcp:", 4) != 0)
            continue;
        if (head[0] == '\0') {
            memcpy(head, line, sizeof(head));
            continue;
        }
        char *hs, *vs, *h = strtok_r(head, " \n", &hs),
                       *x = strtok_r(line, " \n", &vs);
        for (; h != NULL && x != NULL;
             h = strtok_r(NULL, " \n", &hs), x = strtok_r(NULL, " \n", &vs))
            if (strcmp(h, "OutSegs") == 0)
                s->segs = strtoull(x, NULL, 10);
        break;
    }
    fclose(f);
}

/* Close every connection and free the run. */
void
bench_run_free(struct bench_run *run)
{
    struct bench_conn *c;

    for (int i = 0; i < run->nloops; i++) {
        for (int j = 0; j < run->loops[i].n; j++) {
            c = run->loops[i].conns[j];
            if (!c->dead)
                close(c->fd);
#ifndef BENCH_NO_RESP
            if (c->reader)
                redisReaderFree(c->reader);
#endif
            if (c->tls)
                gnutls_deinit(c->tls);
            bench_buf_free(&c->out);
            bench_buf_free(&c->in);
            bench_buf_free(&c->chunk);
            bench_buf_free(&c->w1);
            bench_buf_free(&c->w2);
            free(c);
        }
        free(run->loops[i].conns);
        close(run->loops[i].ep);
    }
    free(run->loops);
    free(run);
}
