/*
 * test_edge.c - the version gate of the libmicrohttpd edge (http/edge.h):
 * the library this binary runs with passes, any other version is refused
 * with a sentence that names both versions, and http_server_start() logs
 * that sentence and starts nothing when MHD_get_version() says another
 * version (this binary's own MHD_get_version stands in for the library's,
 * as a newer libmicrohttpd.so.12 would).
 */
#include <sys/socket.h>

#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <microhttpd.h>

#include "http/edge.h"
#include "http/server.h"

/* What MHD_get_version() says; NULL: the library's own answer. */
static const char *pretend;

/* MHD_get_version - the library's, unless a test pretends otherwise. */
const char *
MHD_get_version(void)
{
    static const char *(*real)(void);

    if (pretend != NULL)
        return pretend;
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "MHD_get_version");
    return real();
}

Test(http_edge_version, the_running_libmicrohttpd_passes)
{
    char why[256] = "";

    cr_assert_eq(http_edge_version_check(MHD_get_version(), why, sizeof(why)),
                 0, "%s: %s", MHD_get_version(), why);
    cr_assert_str_eq(MHD_get_version(), HTTP_EDGE_MHD_VERSION);
}

Test(http_edge_version, another_version_is_refused_naming_both)
{
    static const char *const other[] = {"0.9.76",  "1.0.1",  "0.9.7",
                                        "0.9.750", "0.9.74", ""};
    char why[256];

    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        memset(why, 0, sizeof(why));
        cr_assert_eq(http_edge_version_check(other[i], why, sizeof(why)), -1,
                     "%s passed", other[i]);
        cr_assert(*other[i] == '\0' || strstr(why, other[i]) != NULL, "%s",
                  why);
        cr_assert(strstr(why, "is not 0.9.75, the version this mayflyd was "
                              "built and tested for") != NULL,
                  "%s", why);
        cr_assert(strstr(why, "refuses to serve HTTP") != NULL, "%s", why);
    }
    cr_assert_eq(http_edge_version_check(NULL, why, sizeof(why)), -1);
    cr_assert(strstr(why, "(unknown)") != NULL, "%s", why);
}

/* handler - never called: the server does not start. */
static void
handler(void *ctx, struct http_request *req)
{
    (void)ctx;
    (void)req;
    cr_assert_fail("a request was handled");
}

/* listening - a socket listening on a free loopback port. */
static int
listening(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    cr_assert_neq(fd, -1);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(fd, 16), 0);
    return fd;
}

Test(http_edge_version, a_server_on_another_version_logs_why_and_starts_not)
{
    struct http_server_opts o = {.max_connections = 16,
                                 .max_body_bytes = 1024,
                                 .connection_timeout_s = 30};
    char path[] = "/tmp/test_edge_logXXXXXX", log[1024] = "";
    int logfd = mkstemp(path), saved = dup(2), fd = listening();
    struct http_server *s;
    ssize_t n;

    cr_assert_neq(logfd, -1);
    unlink(path);
    pretend = "1.0.1";
    dup2(logfd, 2);
    s = http_server_start(fd, &o, handler, NULL);
    dup2(saved, 2);
    pretend = NULL;
    cr_assert_null(s, "a server started on libmicrohttpd 1.0.1");
    n = pread(logfd, log, sizeof(log) - 1, 0);
    cr_assert_gt(n, 0, "nothing logged");
    cr_assert(strstr(log, "libmicrohttpd 1.0.1 is not 0.9.75") != NULL, "%s",
              log);
    /* the same socket serves once the version is the right one */
    s = http_server_start(fd, &o, handler, NULL);
    cr_assert_not_null(s);
    http_server_stop(s);
}
