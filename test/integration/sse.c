/*
 * sse.c - see sse.h: an SSE client on a raw socket.  The head is read up
 * to its blank line; a chunked body is decoded chunk by chunk as bytes
 * come, any other is taken as it comes (to its Content-Length, if any);
 * the decoded text is split into blocks at blank lines, each block one
 * event, comment or retry.
 */
#include "test/integration/sse.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

/* grow - room for n more bytes at *p (len, cap). */
static void
grow(char **p, size_t len, size_t *cap, size_t n)
{
    if (len + n + 1 <= *cap)
        return;
    size_t c = *cap ? *cap : 4096;
    while (c < len + n + 1)
        c *= 2;
    *p = realloc(*p, c);
    cr_assert_not_null(*p, "out of memory");
    *cap = c;
}

/* dial - a blocking connection to n's client port, on the address its
 * base URL names (a cluster's nodes listen on 127.0.0.N). */
static int
dial(const struct itest_node *n)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)n->port)};
    char host[64] = "127.0.0.1";
    const char *h = strstr(n->base, "://");
    int fd;

    if (h != NULL)
        sscanf(h + 3, "%63[^:/]", host);
    cr_assert_eq(inet_pton(AF_INET, host, &a.sin_addr), 1, "%s", n->base);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0,
                 "connect %s: %s", n->base, strerror(errno));
    return fd;
}

/* sse_open - see sse.h. */
void
sse_open(struct sse_client *c, const struct itest_node *n, const char *path,
         const char *const *headers)
{
    char req[16384];
    int len;

    memset(c, 0, sizeof(*c));
    c->fd = dial(n);
    len = snprintf(req, sizeof(req),
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Accept: text/event-stream\r\n",
                   path);
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        len += snprintf(req + len, sizeof(req) - (size_t)len, "%s\r\n",
                        headers[i]);
    len += snprintf(req + len, sizeof(req) - (size_t)len, "\r\n");
    cr_assert(len < (int)sizeof(req), "request too long");
    cr_assert_eq(itest_raw_send(c->fd, req), 0);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
}

/* field - the value of header name in the head, into out. */
static void
field(const struct sse_client *c, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    const char *p = c->head;

    out[0] = '\0';
    while ((p = strstr(p, "\r\n")) != NULL) {
        p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1, *e = strstr(v, "\r\n");
            while (*v == ' ')
                v++;
            snprintf(out, cap, "%.*s", (int)(e ? e - v : (long)strlen(v)), v);
            return;
        }
    }
}

/* add_event - one block of text: its fields into an event. */
static void
add_event(struct sse_client *c, const char *b, size_t n)
{
    struct sse_event e = {.event = "message"};
    char *data = NULL;
    size_t dl = 0, dcap = 0;
    int has_data = 0, comment = 0, retry = 0;

    while (n > 0) {
        const char *nl = memchr(b, '\n', n);
        size_t ll = nl ? (size_t)(nl - b) : n;
        const char *v = memchr(b, ':', ll);
        size_t kl = v ? (size_t)(v - b) : ll, vl = 0;
        if (v != NULL) {
            v++;
            if ((size_t)(v - b) < ll && *v == ' ')
                v++;
            vl = ll - (size_t)(v - b);
        }
        if (kl == 0) { /* a comment */
            comment = 1;
            grow(&data, dl, &dcap, vl);
            memcpy(data + dl, v, vl);
            dl += vl;
        } else if (kl == 4 && memcmp(b, "data", 4) == 0) {
            grow(&data, dl, &dcap, vl + 1);
            if (has_data)
                data[dl++] = '\n';
            memcpy(data + dl, v, vl);
            dl += vl;
            has_data = 1;
        } else if (kl == 5 && memcmp(b, "event", 5) == 0)
            snprintf(e.event, sizeof(e.event), "%.*s", (int)vl, v);
        else if (kl == 2 && memcmp(b, "id", 2) == 0) {
            snprintf(e.id, sizeof(e.id), "%.*s", (int)vl, v);
            snprintf(c->last_id, sizeof(c->last_id), "%s", e.id);
        } else if (kl == 5 && memcmp(b, "retry", 5) == 0) {
            retry = 1;
            grow(&data, dl, &dcap, vl);
            memcpy(data + dl, v, vl);
            dl += vl;
        }
        b += ll + (nl != NULL);
        n -= ll + (nl != NULL);
    }
    if (!has_data && (comment || retry))
        snprintf(e.event, sizeof(e.event), "%s", comment ? ":" : "retry");
    else if (!has_data) {
        free(data);
        return;
    }
    grow(&data, dl, &dcap, 0);
    data[dl] = '\0';
    e.data = data;
    if (c->nev == c->ev_cap) {
        c->ev_cap = c->ev_cap ? c->ev_cap * 2 : 64;
        c->ev = realloc(c->ev, c->ev_cap * sizeof(*c->ev));
        cr_assert_not_null(c->ev, "out of memory");
    }
    c->ev[c->nev++] = e;
}

/* split - the whole blocks of the decoded body into events. */
static void
split(struct sse_client *c)
{
    size_t start = 0;
    const char *e;

    if (c->body_len == 0)
        return;
    while ((e = memmem(c->body + start, c->body_len - start, "\n\n", 2)) !=
           NULL) {
        size_t end = (size_t)(e - c->body);
        add_event(c, c->body + start, end - start);
        start = end + 2;
    }
    memmove(c->body, c->body + start, c->body_len - start);
    c->body_len -= start;
}

/* take_body - n decoded bytes at p. */
static void
take_body(struct sse_client *c, const char *p, size_t n)
{
    grow(&c->body, c->body_len, &c->body_cap, n);
    memcpy(c->body + c->body_len, p, n);
    c->body_len += n;
    c->bytes += n;
}

/* decode - the raw bytes into the body: the head first, then chunks. */
static void
decode(struct sse_client *c)
{
    size_t at = 0;

    if (c->status == 0) {
        char *e = memmem(c->raw, c->raw_len, "\r\n\r\n", 4);
        char te[64];
        if (e == NULL)
            return;
        c->head_len = (size_t)(e - c->raw) + 4;
        cr_assert(c->head_len < sizeof(c->head), "head too long");
        memcpy(c->head, c->raw, c->head_len);
        c->head[c->head_len] = '\0';
        c->status = atoi(c->head + 9);
        field(c, "Content-Type", c->ctype, sizeof(c->ctype));
        field(c, "Transfer-Encoding", te, sizeof(te));
        c->chunked = strcasecmp(te, "chunked") == 0;
        at = c->head_len;
    }
    while (at < c->raw_len && !c->closed) {
        if (!c->chunked) {
            take_body(c, c->raw + at, c->raw_len - at);
            at = c->raw_len;
        } else if (c->chunk_crlf) {
            if (c->raw_len - at < 2)
                break;
            at += 2;
            c->chunk_crlf = 0;
        } else if (c->chunk_left == 0) {
            char *e = memmem(c->raw + at, c->raw_len - at, "\r\n", 2);
            if (e == NULL)
                break;
            c->chunk_left = strtoul(c->raw + at, NULL, 16);
            at = (size_t)(e - c->raw) + 2;
            if (c->chunk_left == 0)
                c->closed = 1; /* the last chunk */
        } else {
            size_t n = c->raw_len - at < c->chunk_left ? c->raw_len - at
                                                       : c->chunk_left;
            take_body(c, c->raw + at, n);
            at += n;
            c->chunk_left -= n;
            c->chunk_crlf = c->chunk_left == 0;
        }
    }
    memmove(c->raw, c->raw + at, c->raw_len - at);
    c->raw_len -= at;
    split(c);
}

/* sse_pump - see sse.h. */
int
sse_pump(struct sse_client *c)
{
    int any = 0;

    while (c->fd >= 0) {
        grow(&c->raw, c->raw_len, &c->raw_cap, 65536);
        ssize_t n = read(c->fd, c->raw + c->raw_len, 65536);
        if (n > 0) {
            c->raw_len += (size_t)n;
            any = 1;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            close(c->fd);
            c->fd = -1;
            c->closed = 1;
            any = 1;
        }
        break;
    }
    if (any)
        decode(c);
    return any;
}

/* sse_poll - see sse.h. */
int
sse_poll(struct sse_client **cs, int k, int timeout_ms, int (*done)(void *arg),
         void *arg)
{
    int64_t end = itest_now_ms() + timeout_ms;
    struct pollfd *p = calloc((size_t)k, sizeof(*p));
    int ok = 0;

    cr_assert_not_null(p);
    while (!(ok = done(arg)) && itest_now_ms() < end) {
        for (int i = 0; i < k; i++)
            p[i] = (struct pollfd){.fd = cs[i]->fd, .events = POLLIN};
        if (poll(p, (nfds_t)k, 50) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < k; i++)
            if (p[i].revents != 0)
                sse_pump(cs[i]);
    }
    free(p);
    return ok;
}

/* The condition of sse_wait_events. */
struct wait_n {
    struct sse_client *c;
    size_t n;
};

static int
has_n(void *arg)
{
    struct wait_n *w = arg;

    return w->c->nev >= w->n || w->c->closed;
}

/* sse_wait_events - see sse.h. */
size_t
sse_wait_events(struct sse_client *c, size_t n, int timeout_ms)
{
    struct wait_n w = {c, n};

    sse_pump(c);
    sse_poll(&c, 1, timeout_ms, has_n, &w);
    return c->nev;
}

static int
is_closed(void *arg)
{
    struct sse_client *c = arg;

    return c->closed;
}

/* sse_wait_closed - see sse.h. */
int
sse_wait_closed(struct sse_client *c, int timeout_ms)
{
    sse_pump(c);
    return sse_poll(&c, 1, timeout_ms, is_closed, c);
}

/* sse_take - see sse.h. */
void
sse_take(struct sse_client *c, size_t n)
{
    n = n < c->nev ? n : c->nev;
    if (n == 0)
        return; /* ev may be NULL: a client that got no event */
    for (size_t i = 0; i < n; i++)
        free(c->ev[i].data);
    memmove(c->ev, c->ev + n, (c->nev - n) * sizeof(*c->ev));
    c->nev -= n;
}

/* sse_count - see sse.h. */
size_t
sse_count(const struct sse_client *c, const char *event)
{
    size_t k = 0;

    for (size_t i = 0; i < c->nev; i++)
        k += strcmp(c->ev[i].event, event) == 0;
    return k;
}

/* sse_close - see sse.h. */
void
sse_close(struct sse_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    sse_take(c, c->nev);
    free(c->ev);
    free(c->raw);
    free(c->body);
    c->ev = NULL;
    c->raw = c->body = NULL;
}
