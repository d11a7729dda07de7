/*
 * edge_pool.c - see edge_pool.h.
 */
#include "http/edge_pool.h"

#include <sys/mman.h>

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/edge_head.h"
#include "http/request-t.h"
#include "http/server-t.h"
#include "shm/log.h"

/* The head of 0.9.75's struct MHD_Connection (internal.h) as Linux builds
 * it (EPOLL_SUPPORT: nextE and prevE first), up to the last field read. */
struct mhd_conn_head {
    void *next_e, *prev_e, *next, *prev, *next_x, *prev_x;
    struct MHD_Daemon *daemon;
    void *headers_received, *headers_received_tail;
    struct MHD_Response *response;
    const struct mhd_pool *pool;
    void *client_context;
    void *socket_context;
    const char *method;
};

/* 0.9.75's struct MemoryPool (memorypool.c). */
struct mhd_pool {
    uint8_t *memory;
    size_t size; /* bytes at memory */
    size_t pos;  /* the first byte not allocated */
    size_t end;  /* one past the last byte not allocated */
    uint8_t is_mmap;
};

/* The pool's size: MHD rounds the limit up to twice a pointer's size, and
 * mallocs pools up to 32 KiB (a larger one, mmap'd, is not expected). */
#define POOL_ALIGN (2 * sizeof(void *))
#define POOL_SIZE                                                              \
    ((HTTP_MHD_CONN_MEMORY + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN)
#define PAGES_MAX 16 /* pages a pool spans, at most, for mincore */

_Static_assert(HTTP_MHD_CONN_MEMORY <= 32 * 1024, "MHD mallocs the pool");

/* in - p lies in [lo, lo + n). */
static int
in(const void *p, const void *lo, size_t n)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)lo;

    return a >= b && a - b < n;
}

/* pool_of - req's connection's pool, or NULL when MHD's records do not
 * read as 0.9.75's: the addresses MHD gives for its daemon and socket
 * context must be those fields of the head above, the daemon ours, the
 * method the one MHD handed the access handler, and the pool of our size,
 * holding that method. */
static const struct mhd_pool *
pool_of(const struct http_request *req)
{
    const struct mhd_conn_head *c = (const void *)req->conn;
    const union MHD_ConnectionInfo *d, *x;
    const struct mhd_pool *p;

    d = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_DAEMON);
    x = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if ((const void *)d != (const void *)&c->daemon ||
        (const void *)x != (const void *)&c->socket_context ||
        c->daemon != req->server->daemon || c->method != req->method ||
        req->method == NULL)
        return NULL;
    p = c->pool;
    if (p == NULL || p->size != POOL_SIZE || p->pos > p->end ||
        p->end > p->size || p->is_mmap != 0 ||
        !in(req->method, p->memory, p->size))
        return NULL;
    return p;
}

/* zero - the page at p holds only zero bytes. */
static int
zero(const uint8_t *p, size_t page)
{
    static const uint8_t zeros[256];

    for (size_t i = 0; i < page; i += sizeof(zeros))
        if (memcmp(p + i, zeros, sizeof(zeros)) != 0)
            return 0;
    return 1;
}

/* give_back - madvise the resident pages [from, to) away: their bytes,
 * or 0 when that failed. */
static size_t
give_back(uint8_t *from, uint8_t *to)
{
    if (to == from || madvise(from, (size_t)(to - from), MADV_DONTNEED) != 0)
        return 0;
    return (size_t)(to - from);
}

/* http_edge_pool_trim - see edge_pool.h.  Only resident pages (mincore)
 * are read and given back: one swapped out may hold anything, and one
 * never touched costs nothing. */
ssize_t
http_edge_pool_trim(struct http_request *req)
{
    static int warned;
    static size_t page;
    const struct mhd_pool *p;
    unsigned char core[PAGES_MAX];
    uint8_t *first, *last, *run = NULL;
    size_t n, given = 0;

    if (req->conn == NULL)
        return 0; /* an inner request (inner.h): no connection, no pool */
    p = pool_of(req);
    if (p == NULL) {
        if (!warned++)
            log_warn(0, "libmicrohttpd's connection records are not laid "
                        "out as 0.9.75's: connections keep the zeroed pages "
                        "of their memory");
        return -1;
    }
    if (page == 0)
        page = (size_t)sysconf(_SC_PAGESIZE);
    first = (uint8_t *)(((uintptr_t)p->memory + page - 1) & ~(page - 1));
    last = (uint8_t *)(((uintptr_t)p->memory + p->size) & ~(page - 1));
    if (last <= first)
        return 0;
    n = (size_t)(last - first) / page;
    if (n > PAGES_MAX || mincore(first, n * page, core) != 0)
        return 0;
    for (size_t i = 0; i <= n; i++) {
        uint8_t *at = first + i * page;

        if (i < n && (core[i] & 1) && zero(at, page)) {
            run = run != NULL ? run : at;
            continue;
        }
        if (run != NULL)
            given += give_back(run, at);
        run = NULL;
    }
    return (ssize_t)given;
}
