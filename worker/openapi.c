/*
 * openapi.c - GET /api/v1/openapi.json: the document built into the
 * binary (openapi.h).  Open to anyone, like /health: it describes the
 * routes, not the node's data.  Cache-Control "no-cache": a generator
 * that keeps it asks again, so an upgraded node's routes show at once.
 */
#include "worker/openapi.h"

#include "http/buf.h"
#include "http/reply.h"

/* worker_openapi - see openapi.h. */
void
worker_openapi(struct http_request *req)
{
    struct http_buf b = {0};

    http_buf_append(&b, worker_openapi_json, worker_openapi_json_len);
    http_reply(req, 200, &b);
    http_reply_header(req, "Cache-Control", "no-cache");
}
