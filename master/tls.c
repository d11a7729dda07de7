/*
 * tls.c - the master's TLS credentials (tls.h).
 */
#include "master/tls.h"

#include "http/tls.h"
#include "master/master.h"
#include "shm/log.h"

void
master_tls_load(struct master *m)
{
    const struct config *c = &m->cfg;
    char err[1024];

    m->ws.peers = (struct http_client_peers){
        .secret = m->ws.secret,
        .client_https = c->tls_cert_file[0] != '\0',
        .cluster_https = c->cluster_tls_cert_file[0] != '\0',
        .ca_file = c->cluster_tls_ca_file,
        .cert_file = c->cluster_tls_cert_file,
        .key_file = c->cluster_tls_key_file,
    };
    if (c->tls_cert_file[0] != '\0' &&
        (m->ws.tls = http_tls_load("tls", c->tls_cert_file, c->tls_key_file,
                                   NULL, err, sizeof(err))) == NULL)
        log_fatal(0, "%s", err);
    if (c->cluster_tls_cert_file[0] != '\0' &&
        (m->cluster_tls = http_tls_load(
             "cluster_tls", c->cluster_tls_cert_file, c->cluster_tls_key_file,
             c->cluster_tls_ca_file, err, sizeof(err))) == NULL)
        log_fatal(0, "%s", err);
}

void
master_tls_reload(struct master *m)
{
    struct http_tls *sets[] = {m->ws.tls, m->cluster_tls};
    char err[1024];

    for (int i = 0; i < 2; i++) {
        if (sets[i] == NULL)
            continue;
        if (http_tls_reload(sets[i], err, sizeof(err)) != 0)
            log_error(0, "reload: %s; keeping the running certificate", err);
        else
            log_info(0, "reload: %s certificate read again",
                     i == 0 ? "client port" : "cluster port");
    }
}

void
master_tls_free(struct master *m)
{
    http_tls_free(m->ws.tls);
    http_tls_free(m->cluster_tls);
    m->ws.tls = m->cluster_tls = NULL;
}
