/*
 * test_log.c - shm/log.c: no line written holds the value of a URL's
 * access_token (a browser's bearer token, SPEC §11), whoever logs the URL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/log.h"

static char lg_path[64];

/* lg_remove - the log file a test wrote. */
static void
lg_remove(void)
{
    if (lg_path[0] != '\0')
        unlink(lg_path);
}

TestSuite(log, .fini = lg_remove, .timeout = 30);

/* lg_open - log to a fresh file. */
static void
lg_open(void)
{
    int fd;

    snprintf(lg_path, sizeof(lg_path), "/tmp/mayfly-test-log-XXXXXX");
    fd = mkstemp(lg_path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(log_open(lg_path), 0);
}

/* lg_read - the whole file (static). */
static const char *
lg_read(void)
{
    static char buf[1 << 18];
    FILE *f = fopen(lg_path, "r");
    size_t n;

    cr_assert_not_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

Test(log, an_access_token_in_a_logged_url_is_redacted)
{
    const char *text;

    lg_open();
    log_info(0, "refused GET /api/v1/presence/x?a=1&access_token=SECRET1&b=2");
    log_info(0, "curl(http://h/s?access_token=eyJ.SECRET2.sig): failed");
    log_info(0, "odd spelling /s?ACCESS%%5FTOKEN=SECRET3 'x'");
    log_info(0, "last /s?access_token=SECRET4");
    log_info(0, "empty /s?access_token=&q=1");
    text = lg_read();
    cr_assert_null(strstr(text, "SECRET"), "%s", text);
    cr_assert_not_null(strstr(text, "x?a=1&access_token=[redacted]&b=2\n"),
                       "%s", text);
    cr_assert_not_null(strstr(text, "access_token=[redacted]): failed\n"), "%s",
                       text);
    cr_assert_not_null(strstr(text, "ACCESS%5FTOKEN=[redacted] 'x'\n"), "%s",
                       text);
    cr_assert_not_null(strstr(text, "access_token=[redacted]\n"), "%s", text);
    cr_assert_not_null(strstr(text, "access_token=&q=1\n"), "%s", text);
}

Test(log, a_line_filled_to_its_end_stays_whole_when_redacted)
{
    char big[3000];
    const char *text;

    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    lg_open();
    log_info(0, "x?access_token=S%.2000s", big); /* cut at the buffer */
    /* a short value near the end: "[redacted]" is longer, and is cut */
    for (int k = 1950; k < 2010; k++)
        log_info(0, "%.*saccess_token=S", k, big);
    log_info(0, "next");
    text = lg_read();
    cr_assert_null(strstr(text, "access_token=S"), "%.100s", text);
    cr_assert_not_null(strstr(text, "info: next\n"));
    cr_assert_eq(strchr(text, '\n') != NULL, 1);
    for (const char *p = text; (p = strchr(p, '\n')) != NULL; p++)
        cr_assert(p[1] == '\0' || p[1] == '2', "one line a line");
}
