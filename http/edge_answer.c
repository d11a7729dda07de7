/*
 * edge_answer.c - see edge_answer.h.  MHD_queue_response is defined here,
 * in the program, and exported (the Makefile links with
 * --export-dynamic-symbol), so that libmicrohttpd's own call binds to it;
 * the library's function is found once with dlsym(RTLD_NEXT).
 */
#include "http/edge_answer.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "http/edge_socket.h"
#include "shm/log.h"

typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned int,
                                    struct MHD_Response *);

/* What MHD's last error line was about: it chooses our answer. */
enum mhd_error_about { MHD_ABOUT_OTHER, MHD_ABOUT_CHUNKS, MHD_ABOUT_LENGTH };

static int mhd_running; /* inside http_server_run's MHD_run */
static enum mhd_error_about mhd_about;

/* real_queue - libmicrohttpd's MHD_queue_response, or NULL. */
static queue_fn
real_queue(void)
{
    static queue_fn fn;

    if (fn == NULL)
        *(void **)&fn = dlsym(RTLD_NEXT, "MHD_queue_response");
    return fn;
}

/* http_edge_answer_running - see edge_answer.h. */
void
http_edge_answer_running(int running)
{
    mhd_running = running;
}

/* http_edge_answer_log - see edge_answer.h.  MHD logs "Error processing
 * request (HTTP response code is N ('<its page>'))" just before it queues
 * the page; the page on a chunked body names "chunk", the one on a
 * Content-Length it refuses names "Content-Length". */
void
http_edge_answer_log(const char *line)
{
    static const char err[] = "Error processing request";

    if (strncmp(line, err, sizeof(err) - 1) != 0)
        return;
    mhd_about = strstr(line, "Content-Length") != NULL ? MHD_ABOUT_LENGTH
                : strstr(line, "chunk") != NULL        ? MHD_ABOUT_CHUNKS
                                                       : MHD_ABOUT_OTHER;
}

/* http_edge_answer_queue - see edge_answer.h. */
enum MHD_Result
http_edge_answer_queue(struct MHD_Connection *conn, unsigned status,
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
        return mhd_about == MHD_ABOUT_CHUNKS
                   ? "the chunked body is malformed (a chunk size "
                     "that is not hexadecimal, or a chunk not "
                     "ended by CRLF)"
                   : "the request is not well-formed HTTP/1.1";
    case MHD_HTTP_CONTENT_TOO_LARGE:
        return mhd_about == MHD_ABOUT_CHUNKS
                   ? "a chunk size of the body is too large"
                   : "the request is too large";
    case MHD_HTTP_URI_TOO_LONG:
        return "the request line is longer than this server holds";
    case MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE:
        return "the request head (line and headers) is larger than this "
               "server holds (24 KiB with its records)";
    case MHD_HTTP_HTTP_VERSION_NOT_SUPPORTED:
        return "the HTTP version is not supported: use HTTP/1.1 or HTTP/1.0";
    default:
        return "the request was refused by the HTTP layer";
    }
}

/*
 * refuse_length - MHD refuses conn's Content-Length (not a number: 400,
 * too large: 413).  MHD 0.9.75 would garble any answer it queues for it
 * (it builds the head, then overwrites its state and builds it again),
 * so ours goes straight on the socket, nothing of an answer having been
 * written (on a plain connection), and MHD is told its queueing failed: it
 * closes the connection.
 */
static enum MHD_Result
refuse_length(struct MHD_Connection *conn, unsigned int status)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

    mhd_about = MHD_ABOUT_OTHER;
    /* Over TLS the socket carries records, never our plain bytes: the
     * connection just closes. */
    if (ci == NULL ||
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION))
        return MHD_NO;
    log_info(0, "libmicrohttpd refuses a Content-Length: %u in JSON", status);
    if (status == MHD_HTTP_CONTENT_TOO_LARGE)
        http_edge_socket_answer(ci->connect_fd, status, "payload_too_large",
                                "the Content-Length header is too large");
    else
        http_edge_socket_answer(
            ci->connect_fd, status, "ephemeral_bad_request",
            "the Content-Length header is not a decimal number");
    return MHD_NO;
}

/*
 * MHD_queue_response - libmicrohttpd's, for every caller; while our
 * server runs MHD, a response queued by MHD itself (ours go through
 * http_edge_answer_queue) is one of its HTML error pages: a JSON body with the
 * same status goes instead.  MHD frees its page (it drops its reference
 * once queued) and, the request being an error, closes the connection
 * after the answer ("Connection: close").  A refused Content-Length is
 * answered apart (refuse_length).
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
    if (mhd_about == MHD_ABOUT_LENGTH)
        return refuse_length(conn, status);
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
