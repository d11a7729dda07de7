/*
 * certs.c - see certs.h.  The openssl command does the work; its output
 * goes to dir/openssl.log, shown when a step fails.
 */
#include "test/integration/certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

/* run - one shell command; the test fails with it when it does. */
static void
run(const char *cmd)
{
    int rc = system(cmd);

    cr_assert_eq(rc, 0, "failed (%d): %s", rc, cmd);
}

void
itest_make_ca(const char *dir, const char *name)
{
    char cmd[2048];

    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
             "-subj '/CN=mayfly test CA %s' -keyout %s.key -out %s.pem "
             "-addext basicConstraints=critical,CA:TRUE "
             "-addext keyUsage=critical,keyCertSign,cRLSign "
             ">>openssl.log 2>&1",
             dir, name, name, name);
    run(cmd);
}

void
itest_make_cert(const char *dir, const char *ca, const char *name,
                const char *ips)
{
    char cmd[4096], san[512] = "", *p;
    size_t n = 0;
    char copy[256];

    snprintf(copy, sizeof(copy), "%s", ips);
    for (char *ip = strtok_r(copy, ",", &p); ip; ip = strtok_r(NULL, ",", &p))
        n += (size_t)snprintf(san + n, sizeof(san) - n, "%sIP:%s", n ? "," : "",
                              ip);
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && printf 'subjectAltName=%s\\n"
             "extendedKeyUsage=serverAuth,clientAuth\\n' > %s.ext && "
             "openssl req -newkey rsa:2048 -nodes -subj '/CN=%s' "
             "-keyout %s.key -out %s.csr >>openssl.log 2>&1 && "
             "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key "
             "-CAcreateserial -days 2 -extfile %s.ext -out %s.pem "
             ">>openssl.log 2>&1",
             dir, san, name, name, name, name, name, ca, ca, name, name);
    run(cmd);
}

/* fingerprint_of - the fingerprint openssl prints for the certificate
 * that cmd writes to its standard output. */
static void
fingerprint_of(const char *cmd, char *out, size_t len)
{
    char line[512] = "", *eq;
    FILE *f = popen(cmd, "r");

    out[0] = '\0';
    cr_assert(f, "popen(%s)", cmd);
    if (fgets(line, sizeof(line), f) != NULL && (eq = strchr(line, '=')))
        snprintf(out, len, "%.*s", (int)strcspn(eq + 1, "\r\n"), eq + 1);
    pclose(f);
}

void
itest_cert_fingerprint(const char *path, char *out, size_t len)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd),
             "openssl x509 -noout -fingerprint -sha256 -in '%s' 2>/dev/null",
             path);
    fingerprint_of(cmd, out, len);
}

void
itest_served_fingerprint(const char *host, int port, char *out, size_t len)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd),
             "timeout 20 openssl s_client -connect %s:%d </dev/null "
             "2>/dev/null | openssl x509 -noout -fingerprint -sha256 "
             "2>/dev/null",
             host, port);
    fingerprint_of(cmd, out, len);
}
