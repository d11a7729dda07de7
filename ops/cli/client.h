/*
 * client.h - the command's HTTP calls: one libcurl handle kept alive across
 * calls, a list of node URLs tried in turn when one is down, the bearer
 * token, and the answer parsed with json-c.
 *
 * A node counts as down when the connection cannot be made (nothing was
 * sent, so nothing can have been stored twice), when a read-only call fails
 * in transfer, or when it answers 503 draining (it refused without storing).
 * The URL that answered last is tried first next time.
 */
#ifndef MAYFLY_CLI_CLIENT_H
#define MAYFLY_CLI_CLIENT_H

#include <stddef.h>

#include <curl/curl.h>
#include <json-c/json.h>

#define CLI_URLS_MAX 16

struct cli_conn {
    char *urls[CLI_URLS_MAX]; /* base URLs, no trailing '/' */
    int nurls;
    int current;     /* the URL tried first */
    char auth[4096]; /* "Authorization: Bearer ..." or "" */
    CURL *curl;
    char err[1024]; /* why the last call reached no node */
};

struct cli_answer {
    long status; /* HTTP status; 0 when no node answered */
    char *body;  /* NUL-terminated; "" when none */
    size_t len;
    struct json_object *json; /* the body parsed, or NULL */
};

/*
 * cli_conn_open - a connection to the comma-separated URLs in urls (a bare
 * host:port gets "http://"), sending token when it is not NULL or empty.
 * Returns 0, or -1 with a sentence in c->err when urls holds none.
 */
int cli_conn_open(struct cli_conn *c, const char *urls, const char *token);

/* cli_conn_close - release the handle and the URL list. */
void cli_conn_close(struct cli_conn *c);

/* cli_conn_base - the URL that answered last (or will be tried first). */
const char *cli_conn_base(const struct cli_conn *c);

/*
 * cli_call - send method path (joined to a node's URL) with body (NULL for
 * none; sent as JSON), waiting at most timeout_ms for the answer, trying
 * each URL in turn while nodes are down.  Returns a->status (0 when no node
 * answered; c->err says why).  a must be freed with cli_answer_free().
 */
long cli_call(struct cli_conn *c, const char *method, const char *path,
              const char *body, long timeout_ms, struct cli_answer *a);

/* cli_answer_free - release what a call filled in a. */
void cli_answer_free(struct cli_answer *a);

/* cli_answer_ok - 1 when the answer is a 2xx. */
int cli_answer_ok(const struct cli_answer *a);

/* cli_answer_code - the error answer's "code", or "" when it has none. */
const char *cli_answer_code(const struct cli_answer *a);

/*
 * cli_refused - tell stderr why a call failed: the server's sentence and
 * code, or why no node answered.  Returns 1, the refused exit status.
 */
int cli_refused(const struct cli_conn *c, const struct cli_answer *a);

/* cli_escape - s percent-encoded for a path segment or a query value (a
 * malloc'ed string the caller frees; NULL when out of memory). */
char *cli_escape(const char *s);

#endif
