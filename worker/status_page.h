/*
 * status_page.h - GET / (and /index.html): the node's status page, one
 * HTML document with its CSS and JavaScript inline, compiled into mayflyd.
 *
 * The sources are worker/status_page/{index.html,page.css,page.js}; the
 * build turns them into the array below (worker/status_page/embed.sh, into
 * build/MODE/worker/status_page_data.c).  The page reads /health,
 * /api/v1/ephemeral/queues and /metrics from the node that served it.
 */
#ifndef MAYFLY_WORKER_STATUS_PAGE_H
#define MAYFLY_WORKER_STATUS_PAGE_H

#include <stddef.h>

struct http_request;

/* The document, generated at build time; not NUL-terminated. */
extern const unsigned char worker_status_page_html[];
extern const size_t worker_status_page_html_len;

/* worker_status_page - answer 200 with the document as text/html, with
 * headers that keep it from loading anything but this node's JSON. */
void worker_status_page(struct http_request *req);

#endif
