/*
 * edge_pool.h - the pages of a connection's libmicrohttpd 0.9.75 memory
 * (its pool, HTTP_MHD_CONN_MEMORY) that hold nothing, given back to the
 * kernel while the connection waits (edge.h, D21).
 *
 * MHD zeroes the unused part of the read buffer when an answer starts
 * (12 KiB of a first request's 24 KiB pool), and the whole pool after
 * every request, and keeps those zeroed pages resident for the
 * connection's life: an idle stream held 12 KiB of zeros.  MHD has no
 * call that names its pool, so its connection record is read at 0.9.75's
 * offsets (internal.h, struct MHD_Connection and struct MemoryPool), each
 * checked against what MHD's public calls say first; on any mismatch
 * nothing is read further and nothing given back.
 *
 * Only whole resident pages inside the pool whose every byte is zero are
 * given back (madvise MADV_DONTNEED: private anonymous memory reads as
 * zero afterwards), so their contents stay what they were whoever uses
 * them; and only from the thread that runs MHD, which alone writes the
 * pool.
 * Single-threaded, no locking.
 */
#ifndef MAYFLY_HTTP_EDGE_POOL_H
#define MAYFLY_HTTP_EDGE_POOL_H

#include <sys/types.h>

struct http_request;

/*
 * http_edge_pool_trim - give back the resident all-zero pages of req's
 * connection's pool (once req's answer has started, MHD has zeroed the
 * read buffer's free part).  Returns the bytes given back (0 or more), or
 * -1 when MHD's records are not laid out as 0.9.75's (logged once).
 * 0 for a request with no connection (an inner one, inner.h).
 */
ssize_t http_edge_pool_trim(struct http_request *req);

#endif
