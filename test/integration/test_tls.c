/*
 * test_tls.c - the client port over HTTPS (SPEC §10): a client that trusts
 * the node's CA is served, one that does not fails verification; plain
 * HTTP sent to the TLS port is answered 400 at once, in plain HTTP; SIGHUP
 * with a new certificate on disk serves the new one to new connections
 * while a long poll parked across it is still answered; -t and the start
 * refuse certificates that cannot serve.  The certificates are made here
 * with the openssl command.
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "test/integration/certs.h"
#include "test/integration/node.h"

#define ANSWER_MS 20000 /* generous: the machine is shared */

static char dir[300];
static char opts[1400];
static struct itest_node node;

/* make_material - a CA, and a certificate for 127.0.0.1 (and a second one,
 * "next", for the reload), in a test directory. */
static void
make_material(void)
{
    itest_test_dir(dir, sizeof(dir));
    itest_make_ca(dir, "ca");
    itest_make_cert(dir, "ca", "node", "127.0.0.1");
    itest_make_cert(dir, "ca", "next", "127.0.0.1");
    snprintf(itest_ca_file, sizeof(itest_ca_file), "%s/ca.pem", dir);
    snprintf(opts, sizeof(opts),
             "tls_cert_file=%s/node.pem tls_key_file=%s/node.key", dir, dir);
}

static void
setup(void)
{
    make_material();
    itest_node_start(&node, opts);
}

static void
teardown(void)
{
    itest_node_stop(&node, 20000);
    itest_ca_file[0] = '\0';
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 120);

Test(tls, a_client_that_trusts_the_ca_is_served_over_https)
{
    struct itest_resp r;

    cr_assert_eq(strncmp(node.base, "https://", 8), 0, "%s", node.base);
    cr_assert_eq(itest_push(&node, &r, "tls-q", "p0", "[\"over tls\"]"), 201,
                 "%s", r.body);
    itest_resp_free(&r);
    cr_assert_eq(
        itest_get(&node, &r, "/api/v1/ephemeral/pop?queue=tls-q&partition=p0"),
        200, "%s", r.body);
    cr_expect_str_eq(itest_jstr(r.json, "messages.0.payload"), "over tls", "%s",
                     r.body);
    itest_resp_free(&r);
}

Test(tls, a_client_that_does_not_trust_the_ca_fails_verification)
{
    struct itest_resp r;
    char keep[sizeof(itest_ca_file)];

    memcpy(keep, itest_ca_file, sizeof(keep));
    itest_ca_file[0] = '\0'; /* the system's CA store: not ours */
    itest_req(&node, "GET", "/health", NULL, &r);
    memcpy(itest_ca_file, keep, sizeof(keep));
    cr_expect_eq(r.status, 0, "answered %ld without verification", r.status);
    cr_expect_eq(r.curl_code, CURLE_PEER_FAILED_VERIFICATION, "curl: %s",
                 curl_easy_strerror((CURLcode)r.curl_code));
    itest_resp_free(&r);
    /* and the node still serves those who trust it */
    cr_expect_eq(itest_req(&node, "GET", "/health", NULL, &r), 200);
    itest_resp_free(&r);
}

Test(tls, plain_http_to_the_tls_port_is_refused_at_once)
{
    for (int i = 0; i < 10; i++) {
        struct itest_resp r;
        struct timeval tv = {.tv_sec = ANSWER_MS / 1000};
        int fd = itest_raw_connect(&node);
        int64_t t0 = itest_now_ms();

        cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (i % 2) /* the bytes come with the connection, or after it */
            itest_sleep_ms(50);
        cr_assert_eq(itest_raw_send(fd, "GET /health HTTP/1.1\r\n"
                                        "Host: 127.0.0.1\r\n\r\n"),
                     0);
        itest_raw_response(fd, &r);
        close(fd);
        cr_expect_eq(r.status, 400, "try %d: %ld %s", i, r.status, r.body);
        cr_expect(strstr(r.body, "HTTPS") != NULL, "try %d: %s", i, r.body);
        cr_expect_lt(itest_now_ms() - t0, ANSWER_MS, "try %d took too long", i);
        itest_resp_free(&r);
    }
    struct itest_resp r;
    cr_expect_eq(itest_req(&node, "GET", "/health", NULL, &r), 200);
    itest_resp_free(&r);
}

/* A long poll on its own handle, in a thread. */
struct parked {
    long status;
    char payload[64];
};

static void *
park(void *arg)
{
    struct parked *p = arg;
    struct itest_resp r;
    CURL *h = itest_handle();

    p->status = itest_req_on(h, &node, "GET",
                             "/api/v1/ephemeral/pop?queue=tls-hup"
                             "&partition=p0&wait=true&timeout=30000",
                             NULL, &r);
    if (itest_jstr(r.json, "messages.0.payload"))
        snprintf(p->payload, sizeof(p->payload), "%s",
                 itest_jstr(r.json, "messages.0.payload"));
    itest_resp_free(&r);
    curl_easy_cleanup(h);
    return NULL;
}

/* served_is - whether count handshakes in a row present fingerprint fp. */
static int
served_is(const char *fp, int count)
{
    char got[200];

    for (int i = 0; i < count; i++) {
        itest_served_fingerprint("127.0.0.1", node.port, got, sizeof(got));
        if (strcmp(got, fp) != 0)
            return 0;
    }
    return 1;
}

Test(tls, hup_serves_the_new_certificate_and_keeps_a_parked_pop)
{
    char first[200], next[200], cmd[1600];
    struct parked p = {0};
    struct itest_resp r;
    double parked = 0;
    pthread_t t;
    int64_t deadline;

    snprintf(cmd, sizeof(cmd), "%s/node.pem", dir);
    itest_cert_fingerprint(cmd, first, sizeof(first));
    snprintf(cmd, sizeof(cmd), "%s/next.pem", dir);
    itest_cert_fingerprint(cmd, next, sizeof(next));
    cr_assert(first[0] && next[0] && strcmp(first, next) != 0);
    cr_assert(served_is(first, 3), "the node does not serve its certificate");

    cr_assert_eq(pthread_create(&t, NULL, park, &p), 0);
    /* parked before the HUP: the parked pop is what must be kept */
    deadline = itest_now_ms() + ANSWER_MS;
    while (itest_metric(&node, "mayfly_parked_pops", &parked) != 0 ||
           parked < 1) {
        cr_assert_lt(itest_now_ms(), deadline, "the pop never parked");
        itest_sleep_ms(20);
    }
    snprintf(cmd, sizeof(cmd),
             "cp '%s/next.pem' '%s/node.pem' && cp '%s/next.key' "
             "'%s/node.key'",
             dir, dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(kill(node.pid, SIGHUP), 0);
    deadline = itest_now_ms() + ANSWER_MS;
    while (!served_is(next, 4) && itest_now_ms() < deadline)
        itest_sleep_ms(100);
    cr_expect(served_is(next, 4), "still not serving the new certificate");

    cr_assert_eq(itest_push(&node, &r, "tls-hup", "p0", "[\"after hup\"]"), 201,
                 "%s", r.body);
    itest_resp_free(&r);
    pthread_join(t, NULL);
    cr_expect_eq(p.status, 200);
    cr_expect_str_eq(p.payload, "after hup");
    cr_expect(itest_node_log_contains(&node, "certificate read again"));
}

Test(tls, a_hup_with_a_broken_certificate_keeps_the_running_one)
{
    char first[200], path[400], cmd[1200];
    struct itest_resp r;

    snprintf(path, sizeof(path), "%s/node.pem", dir);
    itest_cert_fingerprint(path, first, sizeof(first));
    snprintf(cmd, sizeof(cmd), "echo not a certificate > '%s'", path);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(kill(node.pid, SIGHUP), 0);
    int64_t deadline = itest_now_ms() + ANSWER_MS;
    while (!itest_node_log_contains(&node, "keeping the running certificate") &&
           itest_now_ms() < deadline)
        itest_sleep_ms(50);
    cr_expect(
        itest_node_log_contains(&node, "keeping the running certificate"));
    cr_expect(served_is(first, 3));
    cr_expect_eq(itest_req(&node, "GET", "/health", NULL, &r), 200);
    itest_resp_free(&r);
}

/* check_config - mayflyd -t with settings; its exit status, and its
 * output into out. */
static int
check_config(const char *settings, char *out, size_t len)
{
    char cmd[3000];
    FILE *f;
    size_t n;
    int st;

    snprintf(cmd, sizeof(cmd), "'%s' -t -o listen=127.0.0.1:1 %s 2>&1",
             getenv("MAYFLYD"), settings);
    f = popen(cmd, "r");
    cr_assert(f);
    n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(tls_check, t_loads_the_certificates_as_the_start_would, .timeout = 120)
{
    char out[2048], s[1600];

    make_material();
    snprintf(s, sizeof(s),
             "-o tls_cert_file=%s/node.pem -o tls_key_file=%s/node.key", dir,
             dir);
    cr_expect_eq(check_config(s, out, sizeof(out)), 0, "%s", out);

    /* a key that is not the certificate's */
    snprintf(s, sizeof(s),
             "-o tls_cert_file=%s/node.pem -o tls_key_file=%s/next.key", dir,
             dir);
    cr_expect_eq(check_config(s, out, sizeof(out)), 1, "%s", out);
    cr_expect(strstr(out, "tls_key_file") && strstr(out, "does not go with"),
              "%s", out);

    /* half a pair */
    snprintf(s, sizeof(s), "-o tls_cert_file=%s/node.pem", dir);
    cr_expect_eq(check_config(s, out, sizeof(out)), 1, "%s", out);
    cr_expect(strstr(out, "tls_key_file"), "%s", out);

    /* a file that is not PEM */
    snprintf(s, sizeof(s),
             "-o tls_cert_file=%s/openssl.log -o tls_key_file=%s/node.key", dir,
             dir);
    cr_expect_eq(check_config(s, out, sizeof(out)), 1, "%s", out);
    cr_expect(strstr(out, "tls_cert_file"), "%s", out);

    /* the cluster's three go together */
    snprintf(s, sizeof(s),
             "-o cluster_tls_cert_file=%s/node.pem "
             "-o cluster_tls_key_file=%s/node.key",
             dir, dir);
    cr_expect_eq(check_config(s, out, sizeof(out)), 1, "%s", out);
    cr_expect(strstr(out, "cluster_tls_ca_file"), "%s", out);
    snprintf(s, sizeof(s),
             "-o cluster_tls_cert_file=%s/node.pem "
             "-o cluster_tls_key_file=%s/node.key "
             "-o cluster_tls_ca_file=%s/ca.pem",
             dir, dir, dir);
    cr_expect_eq(check_config(s, out, sizeof(out)), 0, "%s", out);
}
