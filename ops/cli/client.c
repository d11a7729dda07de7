/*
 * client.c - see client.h.
 */
#include "ops/cli/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest a connection may take before the node counts as down. */
#define CLI_CONNECT_MS 3000

/* cli_url_add - append one trimmed URL of the list; -1 when there are too
 * many or memory runs out. */
static int
cli_url_add(struct cli_conn *c, const char *s, size_t n)
{
    while (n > 0 && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '/'))
        n--;
    if (n == 0)
        return 0;
    if (c->nurls == CLI_URLS_MAX)
        return -1;
    int scheme = memmem(s, n, "://", 3) != NULL;
    char *u = malloc(n + sizeof("http://"));
    if (u == NULL)
        return -1;
    snprintf(u, n + sizeof("http://"), "%s%.*s", scheme ? "" : "http://",
             (int)n, s);
    c->urls[c->nurls++] = u;
    return 0;
}

/* cli_conn_open - see client.h. */
int
cli_conn_open(struct cli_conn *c, const char *urls, const char *token)
{
    memset(c, 0, sizeof(*c));
    for (const char *p = urls; *p != '\0';) {
        size_t n = strcspn(p, ",");
        if (cli_url_add(c, p, n) != 0) {
            snprintf(c->err, sizeof(c->err), "--url lists more than %d URLs",
                     CLI_URLS_MAX);
            return -1;
        }
        p += n + (p[n] == ',');
    }
    if (c->nurls == 0) {
        snprintf(c->err, sizeof(c->err), "--url names no URL");
        return -1;
    }
    if (token != NULL && token[0] != '\0')
        snprintf(c->auth, sizeof(c->auth), "Authorization: Bearer %s", token);
    if ((c->curl = curl_easy_init()) == NULL) {
        snprintf(c->err, sizeof(c->err), "libcurl could not start");
        return -1;
    }
    return 0;
}

/* cli_conn_close - see client.h. */
void
cli_conn_close(struct cli_conn *c)
{
    for (int i = 0; i < c->nurls; i++)
        free(c->urls[i]);
    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    memset(c, 0, sizeof(*c));
}

/* cli_conn_base - see client.h. */
const char *
cli_conn_base(const struct cli_conn *c)
{
    return c->urls[c->current];
}

/* cli_collect - libcurl's write callback: append to the answer's body. */
static size_t
cli_collect(char *data, size_t size, size_t nmemb, void *arg)
{
    struct cli_answer *a = arg;
    size_t n = size * nmemb;
    char *grown = realloc(a->body, a->len + n + 1);
    if (grown == NULL)
        return 0;
    memcpy(grown + a->len, data, n);
    a->body = grown;
    a->len += n;
    a->body[a->len] = '\0';
    return n;
}

/* cli_once - one attempt at url; returns the CURLcode, a filled on success. */
static CURLcode
cli_once(struct cli_conn *c, const char *url, const char *method,
         const char *body, long timeout_ms, struct cli_answer *a)
{
    struct curl_slist *hdrs = NULL;
    CURL *h = c->curl;
    CURLcode rc;

    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CLI_CONNECT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "mayfly-cli");
    if (body != NULL) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (c->auth[0] != '\0')
        hdrs = curl_slist_append(hdrs, c->auth);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(hdrs);
    return rc;
}

/* cli_unsent - 1 when a failed transfer surely sent nothing. */
static int
cli_unsent(CURLcode rc)
{
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
           rc == CURLE_COULDNT_RESOLVE_PROXY ||
           rc == CURLE_UNSUPPORTED_PROTOCOL;
}

/* cli_call - see client.h. */
long
cli_call(struct cli_conn *c, const char *method, const char *path,
         const char *body, long timeout_ms, struct cli_answer *a)
{
    int readonly = strcmp(method, "GET") == 0 && strstr(path, "/pop") == NULL;
    size_t used = 0;

    memset(a, 0, sizeof(*a));
    c->err[0] = '\0';
    for (int i = 0; i < c->nurls; i++) {
        int at = (c->current + i) % c->nurls;
        char url[8192];
        CURLcode rc;

        snprintf(url, sizeof(url), "%s%s", c->urls[at], path);
        cli_answer_free(a);
        rc = cli_once(c, url, method, body, timeout_ms, a);
        if (rc != CURLE_OK) {
            used += (size_t)snprintf(c->err + used, sizeof(c->err) - used,
                                     "%s%s: %s", used ? "; " : "", c->urls[at],
                                     curl_easy_strerror(rc));
            used = used < sizeof(c->err) ? used : sizeof(c->err) - 1;
            a->status = 0;
            if (cli_unsent(rc) || readonly)
                continue;
            break; /* it may have been taken: trying elsewhere could repeat it */
        }
        if (a->body == NULL && (a->body = calloc(1, 1)) == NULL)
            a->status = 0;
        a->json = a->len ? json_tokener_parse(a->body) : NULL;
        c->current = at;
        if (a->status == 503 && strcmp(cli_answer_code(a), "draining") == 0 &&
            i + 1 < c->nurls)
            continue;
        return a->status;
    }
    return 0;
}

/* cli_answer_free - see client.h. */
void
cli_answer_free(struct cli_answer *a)
{
    free(a->body);
    if (a->json != NULL)
        json_object_put(a->json);
    memset(a, 0, sizeof(*a));
}

/* cli_answer_ok - see client.h. */
int
cli_answer_ok(const struct cli_answer *a)
{
    return a->status >= 200 && a->status < 300;
}

/* cli_answer_code - see client.h. */
const char *
cli_answer_code(const struct cli_answer *a)
{
    struct json_object *v;
    if (a->json != NULL && json_object_object_get_ex(a->json, "code", &v) &&
        json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return "";
}

/* cli_refused - see client.h. */
int
cli_refused(const struct cli_conn *c, const struct cli_answer *a)
{
    struct json_object *v;

    if (a->status == 0)
        fprintf(stderr, "mayfly: no node answered: %s\n", c->err);
    else if (a->json != NULL &&
             json_object_object_get_ex(a->json, "error", &v) &&
             json_object_is_type(v, json_type_string))
        fprintf(stderr, "mayfly: %s (%ld %s)\n", json_object_get_string(v),
                a->status, cli_answer_code(a));
    else
        fprintf(stderr, "mayfly: %s answered %ld: %.200s\n", cli_conn_base(c),
                a->status, a->body ? a->body : "");
    return 1;
}

/* cli_escape - see client.h. */
char *
cli_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    char *copy = e ? strdup(e) : NULL;
    curl_free(e);
    return copy;
}
