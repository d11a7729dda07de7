/*
 * status_page.c - GET / and GET /index.html: the status page.
 *
 * The document is static (built into the binary), so this is a copy into
 * the reply and three headers.  Cache-Control "no-cache": a browser keeps
 * the page but asks again, so an upgraded node's page shows at once.  The
 * Content-Security-Policy says in the browser what the build checks
 * (embed.sh): nothing but this node's own JSON is fetched; inline style
 * and script are the page itself, and it writes what it reads from the
 * node as text, never as markup.
 */
#include "worker/status_page.h"

#include "http/buf.h"
#include "http/reply.h"

#define STATUS_PAGE_CSP                                                        \
    "default-src 'none'; style-src 'unsafe-inline'; "                          \
    "script-src 'unsafe-inline'; connect-src 'self'; img-src data:; "          \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* worker_status_page - see status_page.h. */
void
worker_status_page(struct http_request *req)
{
    struct http_buf b = {0};

    http_buf_append(&b, worker_status_page_html, worker_status_page_html_len);
    http_reply_text(req, 200, "text/html; charset=utf-8", &b);
    http_reply_header(req, "Cache-Control", "no-cache");
    http_reply_header(req, "Content-Security-Policy", STATUS_PAGE_CSP);
    http_reply_header(req, "X-Content-Type-Options", "nosniff");
}
