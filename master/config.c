/*
 * config.c - mayflyd settings: built-in defaults, the -c file, MAYFLY_<KEY>
 * environment variables, then -o key=value flags (SPEC §6).
 *
 * One table describes every key: its type, where it lives in struct config,
 * its range, and whether SIGHUP may change it at run time.  Parsing, the
 * environment walk, the reload comparison and the report all read that table,
 * so a new key is one line.  The -o flags and the start directory are kept in
 * statics for config_reload(); only the master calls this file, before it
 * forks.  Errors: -1 with a sentence that names the key and its source.
 */
#include "master/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/cors.h"
#include "http/number.h"
#include "http/tls.h"
#include "shm/log.h"

enum config_type {
    CONFIG_NODE_ID, /* 1-64 of [A-Za-z0-9._-] */
    CONFIG_LISTEN,  /* IP:port, port 0 allowed */
    CONFIG_ADDR,    /* host:port or "" (derived default) */
    CONFIG_PEERS,   /* comma-separated host:port list */
    CONFIG_PATH,    /* a path, "" allowed */
    CONFIG_DIR,     /* a path, never "" */
    CONFIG_LOG,     /* "", "stderr", "syslog" or a path */
    CONFIG_LEVEL,   /* debug|info|warn|error */
    CONFIG_INT,     /* int, plain decimal */
    CONFIG_U32,     /* uint32_t, plain decimal */
    CONFIG_SIZE,    /* uint64_t, bytes with optional K/M/G */
    CONFIG_SWITCH,  /* "on" or "off" */
    CONFIG_ORIGINS, /* comma-separated origins or "*" (http/cors.h) */
};

struct config_key {
    const char *name;
    enum config_type type;
    size_t off;
    size_t size;
    uint64_t min, max;
    int runtime; /* SIGHUP applies it without a restart */
};

/* One key a line reads as a table: kept out of clang-format. */
/* clang-format off */
#define CONFIG_FIELD(f) offsetof(struct config, f), sizeof(((struct config *)0)->f)
#define CONFIG_KEY(f, t, lo, hi, rt) { #f, t, CONFIG_FIELD(f), lo, hi, rt }
/* clang-format on */
#define CONFIG_KIB 1024ULL
#define CONFIG_MIB (1024ULL * 1024)
#define CONFIG_GIB (1024ULL * 1024 * 1024)

static const struct config_key config_keys[] = {
    CONFIG_KEY(node_id, CONFIG_NODE_ID, 0, 0, 0),
    CONFIG_KEY(listen, CONFIG_LISTEN, 0, 0, 0),
    CONFIG_KEY(cluster_listen, CONFIG_LISTEN, 0, 0, 0),
    CONFIG_KEY(advertise, CONFIG_ADDR, 0, 0, 0),
    CONFIG_KEY(cluster_advertise, CONFIG_ADDR, 0, 0, 0),
    CONFIG_KEY(peers, CONFIG_PEERS, 0, 0, 0),
    CONFIG_KEY(data_dir, CONFIG_DIR, 0, 0, 0),
    CONFIG_KEY(workers, CONFIG_INT, 0, 64, 0),
    CONFIG_KEY(max_bytes, CONFIG_SIZE, 64 * CONFIG_KIB, 1024 * CONFIG_GIB, 0),
    CONFIG_KEY(queue_max_length, CONFIG_U32, 1, 100000000, 1),
    CONFIG_KEY(queue_max_bytes, CONFIG_SIZE, 1, 1024 * CONFIG_GIB, 1),
    CONFIG_KEY(lease_s, CONFIG_U32, 1, 86400, 1),
    CONFIG_KEY(retry_limit, CONFIG_U32, 1, 10000, 1),
    CONFIG_KEY(implicit_idle_s, CONFIG_U32, 1, 604800, 1),
    CONFIG_KEY(member_ttl_ms, CONFIG_U32, 100, 600000, 0),
    CONFIG_KEY(leave_exclude_s, CONFIG_U32, 0, 86400, 0),
    CONFIG_KEY(max_wait_ms, CONFIG_U32, 1, 3600000, 0), /* 0: pops spin */
    CONFIG_KEY(max_delay_ms, CONFIG_U32, 0, 3600000, 0),
    CONFIG_KEY(responders_idle_ms, CONFIG_U32, 0, 3600000, 0),
    CONFIG_KEY(busy_poll_us, CONFIG_U32, 0, 1000, 0),
    CONFIG_KEY(max_body_bytes, CONFIG_SIZE, 1, 4 * CONFIG_GIB, 0),
    CONFIG_KEY(max_connections, CONFIG_U32, 1, 1000000, 0),
    /* streams (SPEC §11); 256 subscriptions keep a cursor in its 512 bytes */
    CONFIG_KEY(stream_max, CONFIG_U32, 0, 1000000, 0),
    CONFIG_KEY(stream_max_subs, CONFIG_U32, 1, 256, 0),
    CONFIG_KEY(stream_buffer_bytes, CONFIG_SIZE, 4 * CONFIG_KIB, CONFIG_GIB, 0),
    CONFIG_KEY(stream_keepalive_s, CONFIG_U32, 1, 3600, 0),
    /* presence (SPEC §12): the table is sized at start */
    CONFIG_KEY(presence_grace_ms, CONFIG_U32, 0, 3600000, 0),
    CONFIG_KEY(presence_max_members, CONFIG_U32, 1, 1000000, 0),
    CONFIG_KEY(presence_max_data, CONFIG_SIZE, 0, 64 * CONFIG_KIB, 0),
    CONFIG_KEY(log_level, CONFIG_LEVEL, 0, 0, 1),
    CONFIG_KEY(log, CONFIG_LOG, 0, 0, 0),
    CONFIG_KEY(pidfile, CONFIG_PATH, 0, 0, 0),
    CONFIG_KEY(cluster_secret_file, CONFIG_PATH, 0, 0, 0),
    CONFIG_KEY(auth_file, CONFIG_PATH, 0, 0, 0),
    CONFIG_KEY(metrics_auth, CONFIG_SWITCH, 0, 0, 0),
    /* browsers (SPEC §11): the secret's path needs a restart, its
     * contents are read on HUP */
    CONFIG_KEY(jwt_secret_file, CONFIG_PATH, 0, 0, 0),
    CONFIG_KEY(cors_origins, CONFIG_ORIGINS, 0, 0, 0),
    /* TLS: the paths need a restart, their contents are read on HUP */
    CONFIG_KEY(tls_cert_file, CONFIG_PATH, 0, 0, 0),
    CONFIG_KEY(tls_key_file, CONFIG_PATH, 0, 0, 0),
    CONFIG_KEY(cluster_tls_cert_file, CONFIG_PATH, 0, 0, 0),
    CONFIG_KEY(cluster_tls_key_file, CONFIG_PATH, 0, 0, 0),
    CONFIG_KEY(cluster_tls_ca_file, CONFIG_PATH, 0, 0, 0),
};
#define CONFIG_NKEYS (sizeof(config_keys) / sizeof(config_keys[0]))

/* What config_load saw on the command line, for config_reload(). */
static char **config_overrides;
static int config_noverrides;
static char config_base[CONFIG_PATH_MAX]; /* cwd at config_load() */

static int config_fail(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* config_fail - write one sentence into err; returns -1 for the caller. */
static int
config_fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (len == 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

void
config_defaults(struct config *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->listen, sizeof(c->listen), "127.0.0.1:6632");
    snprintf(c->cluster_listen, sizeof(c->cluster_listen), "127.0.0.1:6633");
    snprintf(c->data_dir, sizeof(c->data_dir), "./mayfly-data");
    c->workers = 0;
    c->max_bytes = 256 * CONFIG_MIB;
    c->queue_max_length = 10000;
    c->queue_max_bytes = 16 * CONFIG_MIB;
    c->lease_s = 30;
    c->retry_limit = 5;
    c->implicit_idle_s = 300;
    c->member_ttl_ms = 4000;
    c->leave_exclude_s = 30;
    c->max_wait_ms = 60000;
    c->max_delay_ms = 3600000;
    c->responders_idle_ms = 5000;
    c->busy_poll_us = 50;
    c->max_body_bytes = 64 * CONFIG_MIB;
    c->max_connections = 20000;
    c->stream_max = 10000;
    c->stream_max_subs = 256;
    c->stream_buffer_bytes = CONFIG_MIB;
    c->stream_keepalive_s = 15;
    c->presence_grace_ms = 15000;
    c->presence_max_members = 10000;
    c->presence_max_data = CONFIG_KIB;
    snprintf(c->log_level, sizeof(c->log_level), "info");
    snprintf(c->metrics_auth, sizeof(c->metrics_auth), "off");
}

/* config_find - the table entry for key, or NULL. */
static const struct config_key *
config_find(const char *key)
{
    for (size_t i = 0; i < CONFIG_NKEYS; i++)
        if (strcmp(config_keys[i].name, key) == 0)
            return &config_keys[i];
    return NULL;
}

/*
 * config_check_addr - host:port, where host is a name, an IPv4 address or a
 * bracketed IPv6 address; port 1-65535 (0 too when port0).
 */
static int
config_check_addr(const char *v, int port0, const char **why)
{
    const char *colon = strrchr(v, ':');
    uint64_t port;

    if (colon == NULL || colon == v) {
        *why = "expected host:port";
        return -1;
    }
    if (v[0] == '[') {
        if (colon[-1] != ']' || colon - v < 3) {
            *why = "expected [IPv6]:port";
            return -1;
        }
        for (const char *p = v + 1; p < colon - 1; p++)
            if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.') {
                *why = "bad character in the IPv6 address";
                return -1;
            }
    } else {
        for (const char *p = v; p < colon; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' &&
                *p != '_') {
                *why = *p == ':' ? "an IPv6 host goes in brackets, [::1]:6632"
                                 : "bad character in the host name";
                return -1;
            }
    }
    if (strlen(colon + 1) > 5 ||
        http_parse_number(colon + 1, 0, &port, why) != 0 || port > 65535 ||
        (port == 0 && !port0)) {
        *why = port0 ? "expected a port from 0 to 65535"
                     : "expected a port from 1 to 65535";
        return -1;
    }
    return 0;
}

/* config_trim - strip leading and trailing white space in place. */
static char *
config_trim(char *s)
{
    size_t len;

    while (isspace((unsigned char)*s))
        s++;
    len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1]))
        s[--len] = '\0';
    return s;
}

/*
 * config_check_listen - host:port with a numeric host (0.0.0.0, 127.0.0.1,
 * [::]): the listening sockets bind without resolving names.
 */
static int
config_check_listen(const char *v, const char **why)
{
    char host[CONFIG_ADDR_MAX];
    unsigned char buf[sizeof(struct in6_addr)];
    const char *colon = strrchr(v, ':');

    if (config_check_addr(v, 1, why) != 0)
        return -1;
    int bracket = v[0] == '[';
    snprintf(host, sizeof(host), "%.*s", (int)(colon - v) - 2 * bracket,
             v + bracket);
    if (inet_pton(bracket ? AF_INET6 : AF_INET, host, buf) != 1) {
        *why = "expected an IP address, like 0.0.0.0:6632 or [::1]:6632";
        return -1;
    }
    return 0;
}

/*
 * config_set_peers - split a comma-separated list into c->peers; white space
 * around entries is dropped, an empty entry is an error, "" means none.
 */
static int
config_set_peers(struct config *c, const char *v, const char **why)
{
    char buf[CONFIG_PEERS_MAX * CONFIG_ADDR_MAX];
    char peers[CONFIG_PEERS_MAX][CONFIG_ADDR_MAX];
    char *rest, *tok;
    int n = 0;

    if (strlen(v) >= sizeof(buf)) {
        *why = "too long";
        return -1;
    }
    snprintf(buf, sizeof(buf), "%s", v);
    rest = config_trim(buf);
    if (*rest == '\0')
        rest = NULL;
    while ((tok = strsep(&rest, ",")) != NULL) {
        tok = config_trim(tok);
        if (*tok == '\0') {
            *why = "an entry of the list is empty";
            return -1;
        }
        if (n == CONFIG_PEERS_MAX) {
            *why = "more than 16 peers";
            return -1;
        }
        if (strlen(tok) >= CONFIG_ADDR_MAX) {
            *why = "a peer address is too long";
            return -1;
        }
        if (config_check_addr(tok, 0, why) != 0)
            return -1;
        for (int i = 0; i < n; i++)
            if (strcmp(peers[i], tok) == 0) {
                *why = "a peer is listed twice";
                return -1;
            }
        snprintf(peers[n++], CONFIG_ADDR_MAX, "%s", tok);
    }
    memset(c->peers, 0, sizeof(c->peers));
    memcpy(c->peers, peers, (size_t)n * sizeof(peers[0]));
    c->npeers = n;
    return 0;
}

/* config_check_string - validate a string key's value by type. */
static int
config_check_string(const struct config_key *k, const char *v, const char **why)
{
    size_t len = strlen(v);
    enum log_level level;

    if (len >= k->size) {
        *why = "too long";
        return -1;
    }
    switch (k->type) {
    case CONFIG_NODE_ID:
        if (len == 0 || len > 64 ||
            strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "abcdefghijklmnopqrstuvwxyz"
                      "0123456789._-") != len) {
            *why = "expected 1-64 characters of A-Z a-z 0-9 . _ -";
            return -1;
        }
        return 0;
    case CONFIG_LISTEN:
        return config_check_listen(v, why);
    case CONFIG_ADDR:
        return len == 0 ? 0 : config_check_addr(v, 0, why);
    case CONFIG_DIR:
        if (len == 0) {
            *why = "expected a directory";
            return -1;
        }
        return 0;
    case CONFIG_LEVEL:
        if (log_parse_level(v, &level) != 0) {
            *why = "expected debug, info, warn or error";
            return -1;
        }
        return 0;
    case CONFIG_SWITCH:
        if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) {
            *why = "expected on or off";
            return -1;
        }
        return 0;
    case CONFIG_ORIGINS: {
        struct http_cors c;
        return http_cors_parse(v, &c, why);
    }
    default:
        return 0;
    }
}

int
config_set(struct config *c, const char *key, const char *value,
           const char *source, char *err, size_t errlen)
{
    const struct config_key *k = config_find(key);
    const char *why = NULL;
    uint64_t n;
    char *field;

    if (k == NULL)
        return config_fail(err, errlen, "%s: unknown key '%s'", source, key);
    field = (char *)c + k->off;
    switch (k->type) {
    case CONFIG_PEERS:
        if (config_set_peers(c, value, &why) != 0)
            goto bad;
        return 0;
    case CONFIG_INT:
    case CONFIG_U32:
    case CONFIG_SIZE:
        if (http_parse_number(value, k->type == CONFIG_SIZE, &n, &why) != 0)
            goto bad;
        if (n < k->min || n > k->max)
            return config_fail(err, errlen,
                               "%s: %s: invalid value '%s': expected %s from "
                               "%llu to %llu",
                               source, key, value,
                               k->type == CONFIG_SIZE ? "bytes" : "a number",
                               (unsigned long long)k->min,
                               (unsigned long long)k->max);
        if (k->type == CONFIG_INT)
            *(int *)(void *)field = (int)n;
        else if (k->type == CONFIG_U32)
            *(uint32_t *)(void *)field = (uint32_t)n;
        else
            *(uint64_t *)(void *)field = n;
        return 0;
    default:
        if (config_check_string(k, value, &why) != 0)
            goto bad;
        /* "stderr" is the readable spelling of the default log target. */
        if (k->type == CONFIG_LOG && strcmp(value, "stderr") == 0)
            value = "";
        snprintf(field, k->size, "%s", value);
        return 0;
    }
bad:
    /* Quote at most 80 bytes of the value: the reason must fit after it. */
    return config_fail(err, errlen, "%s: %s: invalid value '%.80s%s': %s",
                       source, key, value, strlen(value) > 80 ? "..." : "",
                       why);
}

/*
 * config_parse_line - one "key = value" line; '#' at the start of the line
 * or after white space begins a comment.  Blank lines are skipped.
 */
static int
config_parse_line(struct config *c, char *line, const char *source, char *err,
                  size_t errlen)
{
    for (char *p = line; *p; p++)
        if (*p == '#' && (p == line || isspace((unsigned char)p[-1]))) {
            *p = '\0';
            break;
        }
    line = config_trim(line);
    if (*line == '\0')
        return 0;
    char *eq = strchr(line, '=');
    if (eq == NULL)
        return config_fail(err, errlen, "%s: expected 'key = value', got '%s'",
                           source, line);
    *eq = '\0';
    char *key = config_trim(line);
    if (*key == '\0')
        return config_fail(err, errlen, "%s: a line has a value but no key",
                           source);
    return config_set(c, key, config_trim(eq + 1), source, err, errlen);
}

/* config_read_lines - see config.h. */
int
config_read_lines(struct config *c, FILE *f, const char *path, char *err,
                  size_t errlen)
{
    char source[CONFIG_PATH_MAX + 16];
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    unsigned lineno = 0;
    int rc = 0;

    while (rc == 0 && (got = getline(&line, &cap, f)) != -1) {
        char *text = line;
        snprintf(source, sizeof(source), "%s:%u", path, ++lineno);
        /* A UTF-8 byte order mark, as some editors write, is not text. */
        if (lineno == 1 && got >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
            text += 3;
            got -= 3;
        }
        /* Text past a NUL would be dropped without a word: refuse it. */
        if (memchr(text, '\0', (size_t)got) != NULL)
            rc = config_fail(err, errlen, "%s: the line holds a NUL byte",
                             source);
        else
            rc = config_parse_line(c, text, source, err, errlen);
    }
    if (rc == 0 && ferror(f))
        rc = config_fail(err, errlen, "cannot read configuration file %s: %s",
                         path, strerror(errno));
    free(line);
    return rc;
}

/* config_load_file - apply every line of path (config_read_lines). */
static int
config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    int rc;

    if (f == NULL)
        return config_fail(err, errlen, "cannot read configuration file %s: %s",
                           path, strerror(errno));
    rc = config_read_lines(c, f, path, err, errlen);
    fclose(f);
    return rc;
}

/*
 * config_load_env - MAYFLY_<KEY> for every known key.  Other MAYFLY_*
 * variables are left alone: the environment is shared with other programs.
 */
static int
config_load_env(struct config *c, char *err, size_t errlen)
{
    char name[64], source[96];

    for (size_t i = 0; i < CONFIG_NKEYS; i++) {
        size_t n = (size_t)snprintf(name, sizeof(name), "MAYFLY_");
        for (const char *p = config_keys[i].name; *p && n < sizeof(name) - 1;
             p++)
            name[n++] = (char)toupper((unsigned char)*p);
        name[n] = '\0';
        const char *v = getenv(name);
        if (v == NULL)
            continue;
        snprintf(source, sizeof(source), "environment %s", name);
        if (config_set(c, config_keys[i].name, v, source, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* config_apply_override - one -o key=value. */
static int
config_apply_override(struct config *c, const char *kv, char *err,
                      size_t errlen)
{
    const char *eq = strchr(kv, '=');
    char key[64];

    if (eq == NULL || eq == kv)
        return config_fail(err, errlen,
                           "option -o: expected key=value, got '%s'", kv);
    snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
    return config_set(c, key, eq + 1, "option -o", err, errlen);
}

/* config_absolute - prefix a relative path with config_base. */
static int
config_absolute(char *path, size_t size, const char *key, char *err,
                size_t errlen)
{
    char buf[CONFIG_PATH_MAX];

    if (path[0] == '\0' || path[0] == '/')
        return 0;
    const char *rel = strncmp(path, "./", 2) == 0 ? path + 2 : path;
    int n = snprintf(buf, sizeof(buf), "%s/%s", config_base, rel);
    if (n < 0 || (size_t)n >= size || (size_t)n >= sizeof(buf))
        return config_fail(
            err, errlen, "%s: '%s' is too long once made absolute", key, path);
    memcpy(path, buf, (size_t)n + 1);
    return 0;
}

int
config_read_secret(const char *path, char *buf, size_t len, char *err,
                   size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    int e;

    if (fd == -1)
        return config_fail(err, errlen,
                           "cluster_secret_file: cannot read %s: %s", path,
                           strerror(errno));
    n = read(fd, buf, len - 1);
    e = errno;
    close(fd);
    if (n == -1)
        return config_fail(err, errlen,
                           "cluster_secret_file: cannot read %s: %s", path,
                           strerror(e));
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        n--;
    buf[n] = '\0';
    if (n == 0)
        return config_fail(err, errlen,
                           "cluster_secret_file: %s holds no secret", path);
    for (ssize_t i = 0; i < n; i++)
        if (iscntrl((unsigned char)buf[i]))
            return config_fail(err, errlen,
                               "cluster_secret_file: the secret in %s holds "
                               "a control character (it travels in an HTTP "
                               "header)",
                               path);
    return 0;
}

/* config_socket - the address and port of a checked listen value. */
static void
config_socket(const char *v, int *family, unsigned char *addr, int *any,
              unsigned *port)
{
    char host[CONFIG_ADDR_MAX];
    const char *colon = strrchr(v, ':');
    int bracket = v[0] == '[';
    size_t size = bracket ? 16 : 4;

    snprintf(host, sizeof(host), "%.*s", (int)(colon - v) - 2 * bracket,
             v + bracket);
    *family = bracket ? AF_INET6 : AF_INET;
    memset(addr, 0, 16);
    if (inet_pton(*family, host, addr) != 1)
        *family = AF_UNSPEC; /* not reached: config_check_listen passed */
    *any = 1;
    for (size_t i = 0; i < size; i++)
        *any &= addr[i] == 0;
    *port = (unsigned)strtoul(colon + 1, NULL, 10);
}

/*
 * config_same_socket - whether binding a and then b must fail: one port
 * (not 0, which picks a free one) on one address, or on a wildcard that
 * covers the other address ([::] covers IPv4 too, as net.ipv6.bindv6only
 * is 0 by default).
 */
static int
config_same_socket(const char *a, const char *b)
{
    unsigned char aa[16], ba[16];
    int af, bf, aany, bany;
    unsigned ap, bp;

    config_socket(a, &af, aa, &aany, &ap);
    config_socket(b, &bf, ba, &bany, &bp);
    if (ap != bp || ap == 0 || af == AF_UNSPEC || bf == AF_UNSPEC)
        return 0;
    if (af == bf)
        return aany || bany || memcmp(aa, ba, 16) == 0;
    return (af == AF_INET6 && aany) || (bf == AF_INET6 && bany);
}

/*
 * config_check_tls - the TLS keys together: the client port's pair given
 * whole or not at all, the cluster port's three likewise, and every file
 * loaded as the start loads it (http_tls_load: readable PEM, the key the
 * certificate's, the CA usable).
 */
static int
config_check_tls(const struct config *c, char *err, size_t errlen)
{
    int client = !!c->tls_cert_file[0] + !!c->tls_key_file[0];
    int cluster = !!c->cluster_tls_cert_file[0] + !!c->cluster_tls_key_file[0] +
                  !!c->cluster_tls_ca_file[0];

    if (client == 1)
        return config_fail(err, errlen,
                           "tls_cert_file and tls_key_file go together: set "
                           "both (HTTPS on the client port) or neither");
    if (cluster != 0 && cluster != 3)
        return config_fail(err, errlen,
                           "cluster_tls_cert_file, cluster_tls_key_file and "
                           "cluster_tls_ca_file go together: set all three "
                           "(HTTPS between nodes) or none");
    if (client == 2 && http_tls_check("tls", c->tls_cert_file, c->tls_key_file,
                                      NULL, err, errlen) != 0)
        return -1;
    if (cluster == 3 &&
        http_tls_check("cluster_tls", c->cluster_tls_cert_file,
                       c->cluster_tls_key_file, c->cluster_tls_ca_file, err,
                       errlen) != 0)
        return -1;
    return 0;
}

/* config_tls_paths - with -d, the TLS files' paths made absolute. */
static int
config_tls_paths(struct config *c, char *err, size_t errlen)
{
    static const char *const keys[] = {
        "tls_cert_file",        "tls_key_file",        "cluster_tls_cert_file",
        "cluster_tls_key_file", "cluster_tls_ca_file",
    };

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const struct config_key *k = config_find(keys[i]);
        if (config_absolute((char *)c + k->off, k->size, k->name, err,
                            errlen) != 0)
            return -1;
    }
    return 0;
}

/*
 * config_check_node - what the start would refuse once the keys are read
 * together, so that -t refuses it as well: peers without a
 * cluster_secret_file, a secret file that cannot be read or holds no
 * usable secret, and listen and cluster_listen on one socket.  Reads the
 * secret file; binds nothing.
 */
static int
config_check_node(const struct config *c, char *err, size_t errlen)
{
    char secret[CONFIG_SECRET_SIZE];
    int rc;

    if (c->npeers > 0 && c->cluster_secret_file[0] == '\0')
        return config_fail(err, errlen,
                           "cluster_secret_file must be set when peers are: "
                           "masters authenticate each other with it");
    if (c->cluster_secret_file[0] != '\0') {
        rc = config_read_secret(c->cluster_secret_file, secret, sizeof(secret),
                                err, errlen);
        explicit_bzero(secret, sizeof(secret));
        if (rc != 0)
            return -1;
    }
    if (config_same_socket(c->listen, c->cluster_listen))
        return config_fail(err, errlen,
                           "listen %s and cluster_listen %s are one socket: "
                           "the client and cluster ports must differ",
                           c->listen, c->cluster_listen);
    return config_check_tls(c, err, errlen);
}

/*
 * config_daemon_paths - with -d the process will chdir("/"): relative
 * paths are made absolute against the start directory, the log defaults to
 * syslog and the pidfile to data_dir/mayflyd.pid.
 */
static int
config_daemon_paths(struct config *c, char *err, size_t errlen)
{
    if (c->log[0] == '\0')
        snprintf(c->log, sizeof(c->log), "syslog");
    if (config_absolute(c->data_dir, sizeof(c->data_dir), "data_dir", err,
                        errlen) != 0)
        return -1;
    if (c->pidfile[0] == '\0' &&
        snprintf(c->pidfile, sizeof(c->pidfile), "%s/mayflyd.pid",
                 c->data_dir) >= (int)sizeof(c->pidfile))
        return config_fail(err, errlen, "pidfile: data_dir is too long");
    if (strcmp(c->log, "syslog") != 0 &&
        config_absolute(c->log, sizeof(c->log), "log", err, errlen) != 0)
        return -1;
    if (config_absolute(c->pidfile, sizeof(c->pidfile), "pidfile", err,
                        errlen) != 0)
        return -1;
    if (config_absolute(c->auth_file, sizeof(c->auth_file), "auth_file", err,
                        errlen) != 0)
        return -1;
    if (config_absolute(c->jwt_secret_file, sizeof(c->jwt_secret_file),
                        "jwt_secret_file", err, errlen) != 0)
        return -1;
    if (config_tls_paths(c, err, errlen) != 0)
        return -1;
    return config_absolute(c->cluster_secret_file,
                           sizeof(c->cluster_secret_file),
                           "cluster_secret_file", err, errlen);
}

/*
 * config_finalize - derived defaults: advertise addresses from the listen
 * ones, node_id from advertise (characters a node id cannot hold become
 * '-'); the -d paths; then the checks across keys.
 */
static int
config_finalize(struct config *c, char *err, size_t errlen)
{
    if (c->advertise[0] == '\0')
        memcpy(c->advertise, c->listen, sizeof(c->advertise));
    if (c->cluster_advertise[0] == '\0')
        memcpy(c->cluster_advertise, c->cluster_listen,
               sizeof(c->cluster_advertise));
    if (c->node_id[0] == '\0') {
        snprintf(c->node_id, sizeof(c->node_id), "%.64s", c->advertise);
        for (char *p = c->node_id; *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
                *p = '-';
    }
    if (c->daemonize && config_daemon_paths(c, err, errlen) != 0)
        return -1;
    return config_check_node(c, err, errlen);
}

/* config_forget - drop the remembered -o flags. */
static void
config_forget(void)
{
    for (int i = 0; i < config_noverrides; i++)
        free(config_overrides[i]);
    free(config_overrides);
    config_overrides = NULL;
    config_noverrides = 0;
}

/* config_remember - keep copies of the -o flags for config_reload(). */
static int
config_remember(const char **ov, int n, char *err, size_t errlen)
{
    config_forget();
    if (n == 0)
        return 0;
    config_overrides = calloc((size_t)n, sizeof(*config_overrides));
    if (config_overrides == NULL)
        return config_fail(err, errlen, "out of memory");
    for (; config_noverrides < n; config_noverrides++) {
        config_overrides[config_noverrides] = strdup(ov[config_noverrides]);
        if (config_overrides[config_noverrides] == NULL)
            return config_fail(err, errlen, "out of memory");
    }
    return 0;
}

/*
 * config_parse_flags - getopt over -c -d -t -o -h -v --hash-token (the
 * last three answered by the caller, through *action).  The -o arguments are
 * collected in ov (room for argc entries), in order, to apply last.
 */
static int
config_parse_flags(struct config *c, int argc, char **argv, int *action,
                   const char **ov, int *nov, char *err, size_t errlen)
{
    static const struct option longopts[] = {
        {"hash-token", no_argument, NULL, CONFIG_ACTION_HASH_TOKEN},
        {NULL, 0, NULL, 0},
    };
    int opt;

    opterr = 0;
    optind = 0; /* glibc: start over, so config_load() can run again */
    while ((opt = getopt_long(argc, argv, "+:c:dto:hv", longopts, NULL)) !=
           -1) {
        switch (opt) {
        case 'c':
            if (strlen(optarg) >= sizeof(c->config_file))
                return config_fail(err, errlen, "option -c: path too long");
            snprintf(c->config_file, sizeof(c->config_file), "%s", optarg);
            break;
        case 'd':
            c->daemonize = 1;
            break;
        case 't':
            c->check_only = 1;
            break;
        case 'o':
            ov[(*nov)++] = optarg;
            break;
        case 'h':
        case 'v':
        case CONFIG_ACTION_HASH_TOKEN:
            *action = opt;
            break;
        case ':':
            return config_fail(err, errlen, "option -%c needs an argument",
                               optopt);
        default:
            if (optopt == 0) /* a long option getopt_long does not know */
                return config_fail(err, errlen, "unknown option %s (try -h)",
                                   argv[optind - 1]);
            return config_fail(err, errlen, "unknown option -%c (try -h)",
                               optopt);
        }
    }
    if (optind < argc)
        return config_fail(err, errlen, "unexpected argument '%s' (try -h)",
                           argv[optind]);
    return 0;
}

int
config_load(struct config *c, int argc, char **argv, int *action, char *err,
            size_t errlen)
{
    const char **ov = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*ov));
    int nov = 0, rc = -1;

    config_defaults(c);
    *action = 0;
    if (ov == NULL)
        return config_fail(err, errlen, "out of memory");
    if (config_parse_flags(c, argc, argv, action, ov, &nov, err, errlen) != 0)
        goto out;
    if (*action != 0) {
        rc = 0;
        goto out;
    }
    if (getcwd(config_base, sizeof(config_base)) == NULL) {
        config_fail(err, errlen, "getcwd() failed: %s", strerror(errno));
        goto out;
    }
    if (config_absolute(c->config_file, sizeof(c->config_file), "-c", err,
                        errlen) != 0)
        goto out;
    if (c->config_file[0] != '\0' &&
        config_load_file(c, c->config_file, err, errlen) != 0)
        goto out;
    if (config_load_env(c, err, errlen) != 0)
        goto out;
    for (int i = 0; i < nov; i++)
        if (config_apply_override(c, ov[i], err, errlen) != 0)
            goto out;
    if (config_finalize(c, err, errlen) != 0)
        goto out;
    rc = config_remember(ov, nov, err, errlen);
out:
    free(ov);
    return rc;
}

/* config_format - the value of key k in c, as a string for the report. */
static void
config_format(const struct config *c, const struct config_key *k, char *buf,
              size_t len)
{
    const char *field = (const char *)c + k->off;
    size_t n = 0;

    switch (k->type) {
    case CONFIG_PEERS:
        buf[0] = '\0';
        for (int i = 0; i < c->npeers && n < len; i++)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "",
                                  c->peers[i]);
        return;
    case CONFIG_INT:
        snprintf(buf, len, "%d", *(const int *)(const void *)field);
        return;
    case CONFIG_U32:
        snprintf(buf, len, "%u", *(const uint32_t *)(const void *)field);
        return;
    case CONFIG_SIZE:
        snprintf(buf, len, "%llu",
                 (unsigned long long)*(const uint64_t *)(const void *)field);
        return;
    default:
        snprintf(buf, len, "'%s'", field);
        return;
    }
}

/* config_read_again - the whole chain again, with old's command line. */
static int
config_read_again(const struct config *old, struct config *next, char *err,
                  size_t errlen)
{
    config_defaults(next);
    memcpy(next->config_file, old->config_file, sizeof(next->config_file));
    next->daemonize = old->daemonize;
    next->check_only = old->check_only;
    if (next->config_file[0] != '\0' &&
        config_load_file(next, next->config_file, err, errlen) != 0)
        return -1;
    if (config_load_env(next, err, errlen) != 0)
        return -1;
    for (int i = 0; i < config_noverrides; i++)
        if (config_apply_override(next, config_overrides[i], err, errlen) != 0)
            return -1;
    return config_finalize(next, err, errlen);
}

int
config_reload(const struct config *old, struct config *fresh, char *report,
              size_t len)
{
    struct config next, out = *old;
    char a[CONFIG_PEERS_MAX * CONFIG_ADDR_MAX], b[sizeof(a)];
    size_t n = 0;

    if (config_read_again(old, &next, report, len) != 0)
        return -1;
    for (size_t i = 0; i < CONFIG_NKEYS; i++) {
        const struct config_key *k = &config_keys[i];
        config_format(old, k, a, sizeof(a));
        config_format(&next, k, b, sizeof(b));
        if (strcmp(a, b) == 0)
            continue;
        if (k->runtime)
            memcpy((char *)&out + k->off, (const char *)&next + k->off,
                   k->size);
        if (n < len)
            n += (size_t)snprintf(report + n, len - n, "%s%s %s -> %s%s",
                                  n ? "; " : "", k->name, a, b,
                                  k->runtime ? "" : " (needs a restart)");
    }
    if (n == 0 && len > 0)
        snprintf(report, len, "no setting changed");
    *fresh = out;
    return 0;
}
