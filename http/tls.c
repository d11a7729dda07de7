/*
 * tls.c - a TLS server's credentials (tls.h): PEM files read with GnuTLS
 * (the library libmicrohttpd's TLS is built on), swapped on reload.
 *
 * A set is the certificate chain as GnuTLS "pcerts", the private key and,
 * for a port that asks its clients for certificates, a trust list of the
 * CA file.  A handshake under way holds pointers into the set it was
 * given, so a swapped-out set is kept TLS_RETIRE_MS before a later reload
 * frees it (the handshake timeout is far shorter).
 */
#include "http/tls.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#define TLS_CHAIN_MAX 16      /* certificates in cert_file, at most */
#define TLS_RETIRE_MS 120000u /* a swapped-out set is kept this long */
#define TLS_PATH_MAX  1024

/* One generation of credentials. */
struct tls_set {
    gnutls_pcert_st certs[TLS_CHAIN_MAX];
    unsigned ncerts;
    gnutls_privkey_t key;
    gnutls_x509_trust_list_t trust; /* NULL: no client certificates */
    char *ca_pem;                   /* the CA file's text, or NULL */
    uint64_t retired_ms;            /* when swapped out (now_ms) */
    struct tls_set *next;           /* retired list */
};

struct http_tls {
    char what[32];
    char cert_file[TLS_PATH_MAX], key_file[TLS_PATH_MAX], ca_file[TLS_PATH_MAX];
    struct tls_set *cur;
    struct tls_set *retired;
};

static int tls_fail(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* now_ms - CLOCK_MONOTONIC in ms. */
static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* tls_fail - one sentence into err; -1 for the caller. */
static int
tls_fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (len > 0) {
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* http_tls_supported - see tls.h. */
int
http_tls_supported(char *err, size_t errlen)
{
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES &&
        MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) == MHD_YES)
        return 1;
    tls_fail(err, errlen,
             "this libmicrohttpd is built without TLS (or without its "
             "certificate callback): install one built with GnuTLS, as "
             "Debian's libmicrohttpd12 is");
    return 0;
}

/* set_free - one generation. */
static void
set_free(struct tls_set *s)
{
    if (s == NULL)
        return;
    for (unsigned i = 0; i < s->ncerts; i++)
        gnutls_pcert_deinit(&s->certs[i]);
    if (s->key != NULL)
        gnutls_privkey_deinit(s->key);
    if (s->trust != NULL)
        gnutls_x509_trust_list_deinit(s->trust, 1);
    free(s->ca_pem);
    free(s);
}

/* load_file - a whole file into d (gnutls_free it); the key named in
 * errors is key, the file path. */
static int
load_file(const char *key, const char *path, gnutls_datum_t *d, char *err,
          size_t errlen)
{
    int rc = gnutls_load_file(path, d);

    if (rc < 0)
        return tls_fail(err, errlen, "%s: cannot read %s: %s", key, path,
                        gnutls_strerror(rc));
    return 0;
}

/* set_keypair - certificate chain and key into s, checked to match. */
static int
set_keypair(const struct http_tls *t, struct tls_set *s, char *err,
            size_t errlen)
{
    gnutls_datum_t cert = {0}, key = {0};
    gnutls_certificate_credentials_t probe = NULL;
    char ck[64], kk[64];
    int rc = -1, g;

    snprintf(ck, sizeof(ck), "%s_cert_file", t->what);
    snprintf(kk, sizeof(kk), "%s_key_file", t->what);
    if (load_file(ck, t->cert_file, &cert, err, errlen) != 0 ||
        load_file(kk, t->key_file, &key, err, errlen) != 0)
        goto out;
    s->ncerts = TLS_CHAIN_MAX;
    g = gnutls_pcert_list_import_x509_raw(s->certs, &s->ncerts, &cert,
                                          GNUTLS_X509_FMT_PEM, 0);
    if (g < 0 || s->ncerts == 0) {
        s->ncerts = 0;
        tls_fail(
            err, errlen, "%s_cert_file: %s holds no usable PEM certificate: %s",
            t->what, t->cert_file, g < 0 ? gnutls_strerror(g) : "none found");
        goto out;
    }
    if ((g = gnutls_privkey_init(&s->key)) < 0 ||
        (g = gnutls_privkey_import_x509_raw(s->key, &key, GNUTLS_X509_FMT_PEM,
                                            NULL, 0)) < 0) {
        tls_fail(err, errlen,
                 "%s_key_file: %s holds no usable unencrypted PEM private "
                 "key: %s",
                 t->what, t->key_file, gnutls_strerror(g));
        goto out;
    }
    /* GnuTLS's own check that the key is the certificate's. */
    if ((g = gnutls_certificate_allocate_credentials(&probe)) < 0 ||
        (g = gnutls_certificate_set_x509_key_mem(probe, &cert, &key,
                                                 GNUTLS_X509_FMT_PEM)) < 0) {
        tls_fail(err, errlen, "%s_key_file: %s does not go with %s: %s",
                 t->what, t->key_file, t->cert_file, gnutls_strerror(g));
        goto out;
    }
    rc = 0;
out:
    if (probe != NULL)
        gnutls_certificate_free_credentials(probe);
    if (key.data != NULL) {
        explicit_bzero(key.data, key.size);
        gnutls_free(key.data);
    }
    gnutls_free(cert.data);
    return rc;
}

/* set_trust - the CA file into s's trust list and PEM text. */
static int
set_trust(const struct http_tls *t, struct tls_set *s, char *err, size_t errlen)
{
    gnutls_datum_t ca = {0};
    int g, rc = -1;

    if (load_file("cluster_tls_ca_file", t->ca_file, &ca, err, errlen) != 0)
        return -1;
    if ((g = gnutls_x509_trust_list_init(&s->trust, 0)) < 0) {
        s->trust = NULL;
        tls_fail(err, errlen, "cluster_tls_ca_file: %s", gnutls_strerror(g));
        goto out;
    }
    g = gnutls_x509_trust_list_add_trust_mem(s->trust, &ca, NULL,
                                             GNUTLS_X509_FMT_PEM, 0, 0);
    if (g <= 0) {
        tls_fail(err, errlen,
                 "cluster_tls_ca_file: %s holds no usable PEM certificate%s%s",
                 t->ca_file, g < 0 ? ": " : "",
                 g < 0 ? gnutls_strerror(g) : "");
        goto out;
    }
    if ((s->ca_pem = malloc(ca.size + 1)) == NULL) {
        tls_fail(err, errlen, "cluster_tls_ca_file: out of memory");
        goto out;
    }
    memcpy(s->ca_pem, ca.data, ca.size);
    s->ca_pem[ca.size] = '\0';
    rc = 0;
out:
    gnutls_free(ca.data);
    return rc;
}

/* set_read - a new generation from t's files; NULL on failure. */
static struct tls_set *
set_read(const struct http_tls *t, char *err, size_t errlen)
{
    struct tls_set *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        tls_fail(err, errlen, "%s: out of memory", t->what);
        return NULL;
    }
    if (set_keypair(t, s, err, errlen) != 0 ||
        (t->ca_file[0] != '\0' && set_trust(t, s, err, errlen) != 0)) {
        set_free(s);
        return NULL;
    }
    return s;
}

/* http_tls_load - see tls.h. */
struct http_tls *
http_tls_load(const char *what, const char *cert_file, const char *key_file,
              const char *ca_file, char *err, size_t errlen)
{
    struct http_tls *t;

    if (!http_tls_supported(err, errlen))
        return NULL;
    if ((t = calloc(1, sizeof(*t))) == NULL) {
        tls_fail(err, errlen, "%s: out of memory", what);
        return NULL;
    }
    snprintf(t->what, sizeof(t->what), "%s", what);
    snprintf(t->cert_file, sizeof(t->cert_file), "%s", cert_file);
    snprintf(t->key_file, sizeof(t->key_file), "%s", key_file);
    snprintf(t->ca_file, sizeof(t->ca_file), "%s", ca_file ? ca_file : "");
    if ((t->cur = set_read(t, err, errlen)) == NULL) {
        free(t);
        return NULL;
    }
    return t;
}

/* http_tls_check - see tls.h. */
int
http_tls_check(const char *what, const char *cert_file, const char *key_file,
               const char *ca_file, char *err, size_t errlen)
{
    struct http_tls *t =
        http_tls_load(what, cert_file, key_file, ca_file, err, errlen);

    http_tls_free(t);
    return t != NULL ? 0 : -1;
}

/* http_tls_reload - see tls.h: the new set in, the old one retired, and
 * the sets retired long enough freed. */
int
http_tls_reload(struct http_tls *t, char *err, size_t errlen)
{
    struct tls_set *s = set_read(t, err, errlen), **pp;
    uint64_t now = now_ms();

    if (s == NULL)
        return -1;
    t->cur->retired_ms = now;
    t->cur->next = t->retired;
    t->retired = t->cur;
    t->cur = s;
    for (pp = &t->retired; *pp != NULL;) {
        struct tls_set *old = *pp;
        if (now - old->retired_ms < TLS_RETIRE_MS) {
            pp = &old->next;
            continue;
        }
        *pp = old->next;
        set_free(old);
    }
    return 0;
}

/* http_tls_free - see tls.h. */
void
http_tls_free(struct http_tls *t)
{
    if (t == NULL)
        return;
    set_free(t->cur);
    while (t->retired != NULL) {
        struct tls_set *s = t->retired;
        t->retired = s->next;
        set_free(s);
    }
    free(t);
}

/* http_tls_ca_pem - see tls.h. */
const char *
http_tls_ca_pem(const struct http_tls *t)
{
    return t->cur->ca_pem;
}

/* http_tls_current - see tls.h. */
void
http_tls_current(const struct http_tls *t, void **certs, unsigned *ncerts,
                 void **key)
{
    *certs = t->cur->certs;
    *ncerts = t->cur->ncerts;
    *key = t->cur->key;
}

/* http_tls_peer_ok - see tls.h.  The handshake proved the client holds the
 * key of the certificate it showed; here its chain is checked against the
 * CA file as last read. */
int
http_tls_peer_ok(const struct http_tls *t, void *session, char *err,
                 size_t errlen)
{
    gnutls_x509_crt_t crts[TLS_CHAIN_MAX];
    const gnutls_datum_t *der;
    unsigned n = 0, k = 0, verdict = 0;
    int ok = 0;

    if (t->cur->trust == NULL)
        return 1;
    der = gnutls_certificate_get_peers((gnutls_session_t)session, &n);
    if (der == NULL || n == 0) {
        tls_fail(err, errlen, "the client showed no certificate");
        return 0;
    }
    if (n > TLS_CHAIN_MAX)
        n = TLS_CHAIN_MAX;
    for (; k < n; k++) {
        if (gnutls_x509_crt_init(&crts[k]) < 0)
            break;
        if (gnutls_x509_crt_import(crts[k], &der[k], GNUTLS_X509_FMT_DER) < 0) {
            gnutls_x509_crt_deinit(crts[k]);
            break;
        }
    }
    if (k == n &&
        gnutls_x509_trust_list_verify_crt(t->cur->trust, crts, n, 0, &verdict,
                                          NULL) >= 0 &&
        verdict == 0)
        ok = 1;
    for (unsigned i = 0; i < k; i++)
        gnutls_x509_crt_deinit(crts[i]);
    if (!ok)
        tls_fail(err, errlen,
                 "the client certificate is not signed by "
                 "cluster_tls_ca_file, or is not valid now");
    return ok;
}
