/*
 * config.h - mayflyd settings: defaults, then the file (-c), then MAYFLY_<KEY>
 * environment variables, then -o key=value flags, each overriding the one
 * before (SPEC §6).
 *
 * Sizes take plain bytes or a K/M/G suffix (powers of 1024); durations are in
 * the unit their key names (_s, _ms).  An unknown key or invalid value is an
 * error whose message names the key and where it came from.
 */
#ifndef MAYFLY_MASTER_CONFIG_H
#define MAYFLY_MASTER_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "http/cors.h"

#define CONFIG_PATH_MAX          1024
#define CONFIG_ADDR_MAX          256
#define CONFIG_PEERS_MAX         16
#define CONFIG_SECRET_SIZE       129 /* the secret's first 128 bytes count */
#define CONFIG_ACTION_HASH_TOKEN 'H' /* --hash-token, for config_load */

struct config {
    char node_id[65];                              /* default: from advertise */
    char listen[CONFIG_ADDR_MAX];                  /* "127.0.0.1:6632" */
    char cluster_listen[CONFIG_ADDR_MAX];          /* "127.0.0.1:6633" */
    char advertise[CONFIG_ADDR_MAX];               /* default: listen */
    char cluster_advertise[CONFIG_ADDR_MAX];       /* default: cluster_listen */
    char peers[CONFIG_PEERS_MAX][CONFIG_ADDR_MAX]; /* cluster addresses */
    int npeers;
    char data_dir[CONFIG_PATH_MAX]; /* "./mayfly-data" */
    int workers;                    /* 0 = one per CPU */
    uint64_t max_bytes;             /* 256M */
    uint32_t queue_max_length;      /* 10000 */
    uint64_t queue_max_bytes;       /* 16M */
    uint32_t lease_s;               /* 30 */
    uint32_t retry_limit;           /* 5 */
    uint32_t implicit_idle_s;       /* 300 */
    uint32_t member_ttl_ms;         /* 4000 */
    uint32_t leave_exclude_s;       /* 30 */
    uint32_t max_wait_ms;           /* 60000 */
    uint32_t max_delay_ms;          /* 3600000: a message's delayMs */
    uint32_t responders_idle_ms;    /* 5000: a request's no-responders */
    uint32_t busy_poll_us;          /* 50: polled before a worker sleeps */
    uint64_t max_body_bytes;        /* 64M */
    uint32_t max_connections;       /* 20000 */
    uint32_t stream_max;            /* 10000 streams a node (SPEC §11) */
    uint32_t stream_max_subs;       /* 256 subscriptions a stream */
    uint64_t stream_buffer_bytes;   /* 1M: a stream's unsent events */
    uint32_t stream_keepalive_s;    /* 15: a comment on an idle stream */
    uint32_t presence_grace_ms;     /* 15000: a member's grace (SPEC §12) */
    uint32_t presence_max_members;  /* 10000 a channel */
    uint64_t presence_max_data;     /* 1K: a member's data */
    char log_level[16];             /* "info" */
    char log[CONFIG_PATH_MAX];      /* "" (or "stderr"), "syslog", a path */
    char pidfile[CONFIG_PATH_MAX];  /* "" = none (-d defaults one) */
    char cluster_secret_file[CONFIG_PATH_MAX];
    char auth_file[CONFIG_PATH_MAX];       /* "": no client authentication */
    char metrics_auth[4];                  /* "on": /metrics wants a token */
    char jwt_secret_file[CONFIG_PATH_MAX]; /* "": no signed tokens */
    char cors_origins[HTTP_CORS_BYTES];    /* "": no page of another
                                              origin (http/cors.h) */
    /* TLS (SPEC §10): PEM files, read at start and -t, again on HUP */
    char tls_cert_file[CONFIG_PATH_MAX]; /* with tls_key_file: HTTPS */
    char tls_key_file[CONFIG_PATH_MAX];
    char cluster_tls_cert_file[CONFIG_PATH_MAX]; /* all three, or none */
    char cluster_tls_key_file[CONFIG_PATH_MAX];
    char cluster_tls_ca_file[CONFIG_PATH_MAX];
    /* command line only */
    char config_file[CONFIG_PATH_MAX]; /* -c */
    int daemonize;                     /* -d */
    int check_only;                    /* -t */
};

/* config_defaults - fill c with the built-in defaults. */
void config_defaults(struct config *c);

/*
 * config_load - defaults, then -c file, then environment, then -o flags.
 * Handles -c -d -t -o; -h, -v and --hash-token are answered by the caller
 * (see main.c), which gets them as *action ('h', 'v',
 * CONFIG_ACTION_HASH_TOKEN or 0); with one of them nothing else is read.  Then derived defaults: advertise = listen, cluster_advertise
 * = cluster_listen, node_id = advertise with every character outside
 * [A-Za-z0-9._-] turned into '-'.  With -d (the daemon will chdir("/")):
 * data_dir, log, pidfile and cluster_secret_file become absolute against the
 * start directory, log "" becomes "syslog" and pidfile "" becomes
 * data_dir/mayflyd.pid.  The -c path is always made absolute, for SIGHUP.
 * Last, what the start would refuse of the keys together: peers without a
 * cluster_secret_file, a secret file config_read_secret() refuses, listen
 * and cluster_listen on one socket, TLS files given in part or that
 * http_tls_load() refuses (so -t refuses them too).
 * Returns 0, or -1 with a sentence naming the key and its source in err:
 * "/etc/mayfly/mayfly.conf:12: unknown key 'x'",
 * "environment MAYFLY_WORKERS: workers: invalid value 'x': expected ...",
 * "option -o: lease_s: invalid value '0': expected a number from 1 to 86400".
 */
int config_load(struct config *c, int argc, char **argv, int *action, char *err,
                size_t errlen);

/*
 * config_set - apply one key = value from source ("file:12", "env", "-o").
 * Returns 0, or -1 with a sentence naming the key in err.
 */
int config_set(struct config *c, const char *key, const char *value,
               const char *source, char *err, size_t errlen);

/*
 * config_read_lines - apply every "key = value" line of the configuration
 * file open as f (named path in errors: "path:line: ...").  '#' at the
 * start of a line or after white space begins a comment; blank lines are
 * skipped; a UTF-8 byte order mark at the start is skipped; a line that
 * holds a NUL byte is refused.  Returns 0, or -1 with the sentence in err.
 */
int config_read_lines(struct config *c, FILE *f, const char *path, char *err,
                      size_t errlen);

/*
 * config_read_secret - the cluster secret in path into buf (len bytes, at
 * most len - 1 of the file count), trailing white space dropped.  Returns 0,
 * or -1 with a sentence in err naming cluster_secret_file and path when the
 * file cannot be read, holds no secret, or the secret holds a control
 * character (it is sent in an HTTP header).
 */
int config_read_secret(const char *path, char *buf, size_t len, char *err,
                       size_t errlen);

/*
 * config_reload - for SIGHUP: read the file and the environment again, apply
 * the -o flags config_load saw, and compare with old.  fresh receives old
 * with the keys that can change at run time updated (log_level,
 * implicit_idle_s, lease_s, retry_limit, queue_max_length, queue_max_bytes);
 * any other key keeps its old value.
 * report gets one sentence listing what changed, old -> new, marking the keys
 * that need a restart ("no setting changed" when nothing did).
 * Returns 0, or -1 with the error in report and fresh untouched.
 */
int config_reload(const struct config *old, struct config *fresh, char *report,
                  size_t len);

#endif
