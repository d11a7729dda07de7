/*
 * openapi.h - GET /api/v1/openapi.json: the OpenAPI 3.1 description of
 * the client API, compiled into mayflyd.
 *
 * The source is worker/openapi/openapi.json; the build turns it into the
 * array below (worker/openapi/embed.sh, into
 * build/MODE/worker/openapi_data.c).
 */
#ifndef MAYFLY_WORKER_OPENAPI_H
#define MAYFLY_WORKER_OPENAPI_H

#include <stddef.h>

struct http_request;

/* The document, generated at build time; not NUL-terminated. */
extern const unsigned char worker_openapi_json[];
extern const size_t worker_openapi_json_len;

/* worker_openapi - answer 200 with the document as application/json. */
void worker_openapi(struct http_request *req);

#endif
