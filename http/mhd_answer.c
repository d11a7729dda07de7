/*
 * mhd_answer.c - see mhd_answer.h.  MHD_queue_response is defined here,
 * in the program, and exported (the Makefile links with
 * --export-dynamic-symbol), so that libmicrohttpd's own call binds to it;
 * the library's function is found once with dlsym(RTLD_NEXT).
 */
#include "http/mhd_answer.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "shm/log.h"

typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned int,
                                    struct MHD_Response *);

static int mhd_running;   /* inside http_server_run's MHD_run */
static int mhd_on_chunks; /* MHD's last error was about a chunked body */

/* real_queue - libmicrohttpd's MHD_queue_response, or NULL. */
static queue_fn
real_queue(void)
{
    static queue_fn fn;

    if (fn == NULL)
        *(void **)&fn = dlsym(RTLD_NEXT, "MHD_queue_response");
    return fn;
}

/* http_mhd_running - see mhd_answer.h. */
void
http_mhd_running(int running)
{
    mhd_running = running;
}

/* http_mhd_said_error - see mhd_answer.h.  MHD logs "Error processing
 * request (HTTP response code is N ('<its page>'))" just before it queues
 * the page; the page on a chunked body names "chunk". */
void
http_mhd_said_error(const char *line)
{
    static const char err[] = "Error processing request";

    if (strncmp(line, err, sizeof(err) - 1) == 0)
        mhd_on_chunks = strstr(line, "chunk") != NULL;
}

/* http_mhd_queue - see mhd_answer.h. */
enum MHD_Result
http_mhd_queue(struct MHD_Connection *conn, unsigned status,
               struct MHD_Response *resp)
{
    queue_fn fn = real_queue();

    return fn != NULL ? fn(conn, status, resp) : MHD_NO;
}

/* sentence_for - what our answer to MHD's own error status says. */
static const char *
sentence_for(unsigned status)
{
    switch (status) {
    case MHD_HTTP_BAD_REQUEST:
        return mhd_on_chunks ? "the chunked body is malformed (a chunk size "
                               "that is not hexadecimal, or a chunk not "
                               "ended by CRLF)"
                             : "the request is not well-formed HTTP/1.1";
    case MHD_HTTP_CONTENT_TOO_LARGE:
        return mhd_on_chunks ? "a chunk size of the body is too large"
                             : "the request is too large";
    case MHD_HTTP_URI_TOO_LONG:
        return "the request line is longer than this server holds";
    case MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE:
        return "the request head (line and headers) is larger than this "
               "server holds (64 KiB with its records)";
    case MHD_HTTP_HTTP_VERSION_NOT_SUPPORTED:
        return "the HTTP version is not supported: use HTTP/1.1 or HTTP/1.0";
    default:
        return "the request was refused by the HTTP layer";
    }
}

/*
 * MHD_queue_response - libmicrohttpd's, for every caller; while our
 * server runs MHD, a response queued by MHD itself (ours go through
 * http_mhd_queue) is one of its HTML error pages: a JSON body with the
 * same status goes instead.  MHD frees its page (it drops its reference
 * once queued) and, the request being an error, closes the connection
 * after the answer ("Connection: close").
 */
enum MHD_Result
MHD_queue_response(struct MHD_Connection *conn, unsigned int status,
                   struct MHD_Response *resp)
{
    queue_fn fn = real_queue();
    struct MHD_Response *json;
    enum MHD_Result ret;
    char body[320];
    int n;

    if (fn == NULL)
        return MHD_NO;
    if (!mhd_running || status < 400)
        return fn(conn, status, resp);
    n = snprintf(body, sizeof(body), "{\"error\": \"%s\", \"code\": \"%s\"}",
                 sentence_for(status),
                 status == MHD_HTTP_CONTENT_TOO_LARGE
                     ? "payload_too_large"
                     : "ephemeral_bad_request");
    json =
        MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
    if (json == NULL)
        return fn(conn, status, resp);
    MHD_add_response_header(json, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "application/json");
    MHD_add_response_header(json, MHD_HTTP_HEADER_CONNECTION, "close");
    log_info(0, "libmicrohttpd answers %u itself: in JSON", status);
    ret = fn(conn, status, json);
    MHD_destroy_response(json);
    return ret;
}
