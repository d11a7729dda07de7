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

#define CONFIG_PATH_MAX 1024
#define CONFIG_ADDR_MAX 256
#define CONFIG_PEERS_MAX 16

struct config {
    char node_id[65];                    /* default: advertise address */
    char listen[CONFIG_ADDR_MAX];        /* "127.0.0.1:6632" */
    char cluster_listen[CONFIG_ADDR_MAX]; /* "127.0.0.1:6633" */
    char advertise[CONFIG_ADDR_MAX];     /* default: listen */
    char cluster_advertise[CONFIG_ADDR_MAX]; /* default: cluster_listen */
    char peers[CONFIG_PEERS_MAX][CONFIG_ADDR_MAX]; /* cluster addresses */
    int npeers;
    char data_dir[CONFIG_PATH_MAX];      /* "./mayfly-data" */
    int workers;                         /* 0 = one per CPU */
    uint64_t max_bytes;                  /* 256M */
    uint32_t queue_max_length;           /* 10000 */
    uint64_t queue_max_bytes;            /* 16M */
    uint32_t lease_s;                    /* 30 */
    uint32_t retry_limit;                /* 5 */
    uint32_t implicit_idle_s;            /* 300 */
    uint32_t member_ttl_ms;              /* 4000 */
    uint32_t leave_exclude_s;            /* 30 */
    uint32_t max_wait_ms;                /* 60000 */
    uint64_t max_body_bytes;             /* 64M */
    uint32_t max_connections;            /* 20000 */
    char log_level[16];                  /* "info" */
    char log[CONFIG_PATH_MAX];           /* "" = stderr, "syslog", or a path */
    char pidfile[CONFIG_PATH_MAX];       /* "" = none (-d defaults one) */
    char cluster_secret_file[CONFIG_PATH_MAX];
    /* command line only */
    char config_file[CONFIG_PATH_MAX];   /* -c */
    int daemonize;                       /* -d */
    int check_only;                      /* -t */
};

/* config_defaults - fill c with the built-in defaults. */
void config_defaults(struct config *c);

/*
 * config_load - defaults, then -c file, then environment, then -o flags.
 * Handles -c -d -t -o; -h and -v are answered by the caller (see main.c),
 * which passes them through as *action ('h', 'v' or 0).
 * Returns 0, or -1 with a sentence naming the key in err.
 */
int config_load(struct config *c, int argc, char **argv, int *action,
                char *err, size_t errlen);

/*
 * config_set - apply one key = value from source ("file:12", "env", "-o").
 * Returns 0, or -1 with a sentence naming the key in err.
 */
int config_set(struct config *c, const char *key, const char *value,
               const char *source, char *err, size_t errlen);

#endif
