/*
 * test_config.c - master/config.c: defaults, the file/environment/-o chain,
 * value syntax and ranges, every error path, and the SIGHUP reload report.
 *
 * Criterion runs each test in its own process, so setenv() and the files a
 * test writes under /tmp stay with that test.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "master/config.h"

extern char **environ;

static char cfg_err[512];
static char cfg_path[64];   /* the file cfg_file() wrote, removed at fini */
static char cfg_secret[64]; /* the file cfg_secret_file() wrote, likewise */

/* cfg_clean_env - drop MAYFLY_* inherited from whoever runs the tests. */
static void
cfg_clean_env(void)
{
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; *e; e++) {
            if (strncmp(*e, "MAYFLY_", 7) == 0) {
                char name[128];
                snprintf(name, sizeof(name), "%.*s",
                         (int)(strchr(*e, '=') - *e), *e);
                unsetenv(name);
                again = 1;
                break;
            }
        }
    }
}

/* cfg_file_n - write len bytes of text to a fresh temporary file (its path
 * into path, 64 bytes); returns path. */
static const char *
cfg_file_n(char *path, const char *text, size_t len)
{
    snprintf(path, 64, "/tmp/mayfly-test-config-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_neq(fd, -1, "mkstemp: %s", strerror(errno));
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

/* cfg_file - write text to a fresh temporary file; returns its path. */
static const char *
cfg_file(const char *text)
{
    return cfg_file_n(cfg_path, text, strlen(text));
}

/* cfg_secret_file - a cluster secret file holding text; returns its path. */
static const char *
cfg_secret_file(const char *text)
{
    return cfg_file_n(cfg_secret, text, strlen(text));
}

/* cfg_rewrite - replace the contents of path. */
static void
cfg_rewrite(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* cfg_load - config_load over a NULL-terminated argument list. */
static int
cfg_load(struct config *c, int *action, char **argv)
{
    int argc = 0;
    while (argv[argc] != NULL)
        argc++;
    cfg_err[0] = '\0';
    return config_load(c, argc, argv, action, cfg_err, sizeof(cfg_err));
}

/* cfg_set - one config_set on fresh defaults. */
static int
cfg_set(struct config *c, const char *key, const char *value)
{
    config_defaults(c);
    cfg_err[0] = '\0';
    return config_set(c, key, value, "test", cfg_err, sizeof(cfg_err));
}

/* cfg_assert_err - cfg_err holds every one of the NULL-terminated fragments. */
#define cfg_assert_err(...)                                                    \
    do {                                                                       \
        const char *frags[] = {__VA_ARGS__, NULL};                             \
        for (int f_ = 0; frags[f_]; f_++)                                      \
            cr_assert_not_null(strstr(cfg_err, frags[f_]),                     \
                               "error '%s' lacks '%s'", cfg_err, frags[f_]);   \
    } while (0)

/* cfg_remove_file - fini: remove what cfg_file() and cfg_secret_file()
 * wrote. */
static void
cfg_remove_file(void)
{
    if (cfg_path[0] != '\0')
        unlink(cfg_path);
    if (cfg_secret[0] != '\0')
        unlink(cfg_secret);
}

TestSuite(config, .init = cfg_clean_env, .fini = cfg_remove_file);

Test(config, no_arguments_give_the_spec_defaults)
{
    struct config c;
    int action = -1;
    char *argv[] = {"mayflyd", NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_eq(action, 0);
    cr_assert_str_eq(c.listen, "127.0.0.1:6632");
    cr_assert_str_eq(c.cluster_listen, "127.0.0.1:6633");
    cr_assert_str_eq(c.advertise, "127.0.0.1:6632");
    cr_assert_str_eq(c.cluster_advertise, "127.0.0.1:6633");
    cr_assert_str_eq(c.node_id, "127.0.0.1-6632");
    cr_assert_str_eq(c.data_dir, "./mayfly-data");
    cr_assert_eq(c.npeers, 0);
    cr_assert_eq(c.workers, 0);
    cr_assert_eq(c.max_bytes, 256ULL << 20);
    cr_assert_eq(c.queue_max_length, 10000);
    cr_assert_eq(c.queue_max_bytes, 16ULL << 20);
    cr_assert_eq(c.lease_s, 30);
    cr_assert_eq(c.retry_limit, 5);
    cr_assert_eq(c.implicit_idle_s, 300);
    cr_assert_eq(c.member_ttl_ms, 4000);
    cr_assert_eq(c.leave_exclude_s, 30);
    cr_assert_eq(c.max_wait_ms, 60000);
    cr_assert_eq(c.busy_poll_us, 50);
    cr_assert_eq(c.max_body_bytes, 64ULL << 20);
    cr_assert_eq(c.max_connections, 20000);
    cr_assert_eq(c.stream_max, 10000);
    cr_assert_eq(c.stream_max_subs, 256);
    cr_assert_eq(c.stream_buffer_bytes, 1ULL << 20);
    cr_assert_eq(c.stream_keepalive_s, 15);
    cr_assert_eq(c.presence_grace_ms, 15000);
    cr_assert_eq(c.presence_max_members, 10000);
    cr_assert_eq(c.presence_max_data, 1024);
    cr_assert_str_eq(c.log_level, "info");
    cr_assert_str_eq(c.log, "");
    cr_assert_str_eq(c.pidfile, "");
    cr_assert_str_eq(c.config_file, "");
    cr_assert_eq(c.daemonize, 0);
    cr_assert_eq(c.check_only, 0);
}

Test(config, environment_overrides_file_and_flag_overrides_environment)
{
    struct config c;
    int action;
    const char *path = cfg_file("lease_s = 10\nretry_limit = 7\n"
                                "max_wait_ms = 100\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, "-o", "lease_s=30", NULL};
    char *file_only[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&c, &action, file_only), 0, "%s", cfg_err);
    cr_assert_eq(c.lease_s, 10);
    setenv("MAYFLY_LEASE_S", "20", 1);
    setenv("MAYFLY_RETRY_LIMIT", "8", 1);
    cr_assert_eq(cfg_load(&c, &action, file_only), 0, "%s", cfg_err);
    cr_assert_eq(c.lease_s, 20);
    cr_assert_eq(c.retry_limit, 8);
    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_eq(c.lease_s, 30);
    cr_assert_eq(c.retry_limit, 8);
    cr_assert_eq(c.max_wait_ms, 100);
    cr_assert_str_eq(c.config_file, path);
}

Test(config, flags_apply_in_order_wherever_c_stands)
{
    struct config c;
    int action;
    const char *path = cfg_file("lease_s = 10\n");
    char *argv[] = {"mayflyd", "-o",         "lease_s=40", "-olease_s=50",
                    "-c",      (char *)path, NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_eq(c.lease_s, 50);
}

Test(config, file_comments_blank_lines_and_spacing)
{
    struct config c;
    int action;
    const char *path = cfg_file("# mayfly.conf\n"
                                "\n"
                                "   # indented comment\n"
                                "workers=3\n"
                                "  lease_s   =   12   # trailing comment\n"
                                "log = /tmp/a#b.log\r\n"
                                "peers =\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_eq(c.workers, 3);
    cr_assert_eq(c.lease_s, 12);
    cr_assert_str_eq(c.log, "/tmp/a#b.log");
    cr_assert_eq(c.npeers, 0);
}

Test(config, sizes_take_k_m_g_as_powers_of_1024)
{
    struct config c;

    cr_assert_eq(cfg_set(&c, "queue_max_bytes", "1000"), 0, "%s", cfg_err);
    cr_assert_eq(c.queue_max_bytes, 1000);
    cr_assert_eq(cfg_set(&c, "queue_max_bytes", "3K"), 0, "%s", cfg_err);
    cr_assert_eq(c.queue_max_bytes, 3072);
    cr_assert_eq(cfg_set(&c, "queue_max_bytes", "3k"), 0, "%s", cfg_err);
    cr_assert_eq(c.queue_max_bytes, 3072);
    cr_assert_eq(cfg_set(&c, "max_body_bytes", "2M"), 0, "%s", cfg_err);
    cr_assert_eq(c.max_body_bytes, 2ULL << 20);
    cr_assert_eq(cfg_set(&c, "max_bytes", "2G"), 0, "%s", cfg_err);
    cr_assert_eq(c.max_bytes, 2ULL << 30);
}

Test(config, malformed_sizes_are_refused_naming_the_key)
{
    const char *bad[] = {"",
                         "K",
                         "1KB",
                         "1T",
                         "-1",
                         "+1",
                         "1 K",
                         "0x10",
                         "1.5M",
                         "99999999999999999999",
                         "17179869184G"};
    struct config c;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(cfg_set(&c, "queue_max_bytes", bad[i]), -1,
                     "'%s' accepted", bad[i]);
        cfg_assert_err("test", "queue_max_bytes", "invalid value");
    }
}

Test(config, durations_and_counts_are_plain_integers)
{
    struct config c;

    cr_assert_eq(cfg_set(&c, "member_ttl_ms", "1500"), 0, "%s", cfg_err);
    cr_assert_eq(c.member_ttl_ms, 1500);
    cr_assert_eq(cfg_set(&c, "lease_s", "5K"), -1);
    cfg_assert_err("lease_s", "'5K'", "whole number");
    cr_assert_eq(cfg_set(&c, "queue_max_length", "abc"), -1);
    cfg_assert_err("queue_max_length", "'abc'");
    cr_assert_eq(cfg_set(&c, "max_wait_ms", "4294967296"), -1);
    cfg_assert_err("max_wait_ms", "from 1 to 3600000");
}

Test(config, numbers_outside_their_range_are_refused)
{
    struct config c;

    cr_assert_eq(cfg_set(&c, "lease_s", "0"), -1);
    cfg_assert_err("test: lease_s: invalid value '0'", "from 1 to 86400");
    cr_assert_eq(cfg_set(&c, "retry_limit", "0"), -1);
    cfg_assert_err("retry_limit");
    cr_assert_eq(cfg_set(&c, "max_bytes", "1K"), -1);
    cfg_assert_err("max_bytes", "'1K'");
    cr_assert_eq(cfg_set(&c, "member_ttl_ms", "99"), -1);
    cfg_assert_err("member_ttl_ms");
    cr_assert_eq(cfg_set(&c, "max_connections", "0"), -1);
    cfg_assert_err("max_connections");
    cr_assert_eq(cfg_set(&c, "leave_exclude_s", "0"), 0, "%s", cfg_err);
    /* 0 would answer every long poll at once: clients would spin. */
    cr_assert_eq(cfg_set(&c, "max_wait_ms", "0"), -1);
    cfg_assert_err("max_wait_ms", "'0'", "from 1 to 3600000");
    cr_assert_eq(cfg_set(&c, "max_wait_ms", "1"), 0, "%s", cfg_err);
    /* a worker never polls longer than a millisecond before it sleeps */
    cr_assert_eq(cfg_set(&c, "busy_poll_us", "1001"), -1);
    cfg_assert_err("busy_poll_us", "'1001'", "from 0 to 1000");
    cr_assert_eq(cfg_set(&c, "busy_poll_us", "0"), 0, "%s", cfg_err);
    cr_assert_eq(c.busy_poll_us, 0);
}

Test(config, stream_settings_take_their_ranges)
{
    struct config c;

    cr_assert_eq(cfg_set(&c, "stream_max", "0"), 0, "%s", cfg_err);
    cr_assert_eq(c.stream_max, 0);
    cr_assert_eq(cfg_set(&c, "stream_max", "1000001"), -1);
    cfg_assert_err("stream_max", "'1000001'", "from 0 to 1000000");
    /* a cursor holds a nibble a partition in its 512 characters */
    cr_assert_eq(cfg_set(&c, "stream_max_subs", "256"), 0, "%s", cfg_err);
    cr_assert_eq(cfg_set(&c, "stream_max_subs", "257"), -1);
    cfg_assert_err("stream_max_subs", "'257'", "from 1 to 256");
    cr_assert_eq(cfg_set(&c, "stream_max_subs", "0"), -1);
    cr_assert_eq(cfg_set(&c, "stream_buffer_bytes", "64K"), 0, "%s", cfg_err);
    cr_assert_eq(c.stream_buffer_bytes, 65536);
    cr_assert_eq(cfg_set(&c, "stream_buffer_bytes", "1K"), -1);
    cfg_assert_err("stream_buffer_bytes", "'1K'");
    cr_assert_eq(cfg_set(&c, "stream_keepalive_s", "0"), -1);
    cfg_assert_err("stream_keepalive_s", "'0'", "from 1 to 3600");
    cr_assert_eq(cfg_set(&c, "stream_keepalive_s", "3600"), 0, "%s", cfg_err);
    cr_assert_eq(cfg_set(&c, "presence_grace_ms", "0"), 0, "%s", cfg_err);
    cr_assert_eq(cfg_set(&c, "presence_grace_ms", "3600001"), -1);
    cfg_assert_err("presence_grace_ms", "'3600001'");
    cr_assert_eq(cfg_set(&c, "presence_max_members", "0"), -1);
    cfg_assert_err("presence_max_members", "'0'");
    cr_assert_eq(cfg_set(&c, "presence_max_data", "4K"), 0, "%s", cfg_err);
    cr_assert_eq(c.presence_max_data, 4096);
    cr_assert_eq(cfg_set(&c, "presence_max_data", "65K"), -1);
    cfg_assert_err("presence_max_data", "'65K'");
}

Test(config, workers_range_from_0_to_64)
{
    struct config c;

    cr_assert_eq(cfg_set(&c, "workers", "0"), 0, "%s", cfg_err);
    cr_assert_eq(c.workers, 0);
    cr_assert_eq(cfg_set(&c, "workers", "64"), 0, "%s", cfg_err);
    cr_assert_eq(c.workers, 64);
    cr_assert_eq(cfg_set(&c, "workers", "65"), -1);
    cfg_assert_err("workers", "'65'", "from 0 to 64");
    cr_assert_eq(cfg_set(&c, "workers", "-1"), -1);
    cfg_assert_err("workers", "'-1'");
}

Test(config, log_level_is_one_of_four)
{
    const char *ok[] = {"debug", "info", "warn", "error"};
    struct config c;

    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(cfg_set(&c, "log_level", ok[i]), 0, "%s", cfg_err);
        cr_assert_str_eq(c.log_level, ok[i]);
    }
    cr_assert_eq(cfg_set(&c, "log_level", "verbose"), -1);
    cfg_assert_err("log_level", "'verbose'", "debug, info, warn or error");
    cr_assert_eq(cfg_set(&c, "log_level", "INFO"), -1);
}

Test(config, log_accepts_stderr_syslog_or_a_path)
{
    struct config c;

    cr_assert_eq(cfg_set(&c, "log", "syslog"), 0);
    cr_assert_str_eq(c.log, "syslog");
    cr_assert_eq(cfg_set(&c, "log", "/var/log/mayfly/mayflyd.log"), 0);
    cr_assert_str_eq(c.log, "/var/log/mayfly/mayflyd.log");
    cr_assert_eq(cfg_set(&c, "log", "stderr"), 0);
    cr_assert_str_eq(c.log, "");
}

Test(config, addresses_are_host_colon_port)
{
    const char *ok[] = {"localhost:7000", "10.0.0.1:1", "[::1]:6632",
                        "[fe80::1]:65535", "node-1.example.org:6633"};
    const char *bad[] = {"localhost", ":7000",      "::1:7000",  "host:70000",
                         "host:",     "host:12a",   "[::1:7000", "[]:7000",
                         "ho st:1",   "host:000001"};
    struct config c;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        cr_assert_eq(cfg_set(&c, "advertise", ok[i]), 0, "%s", cfg_err);
        cr_assert_str_eq(c.advertise, ok[i]);
        cr_assert_eq(cfg_set(&c, "peers", ok[i]), 0, "%s", cfg_err);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(cfg_set(&c, "cluster_listen", bad[i]), -1, "'%s' accepted",
                     bad[i]);
        cfg_assert_err("cluster_listen", "invalid value");
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(cfg_set(&c, "advertise", bad[i]), -1, "'%s' accepted",
                     bad[i]);
    cr_assert_eq(cfg_set(&c, "listen", "127.0.0.1:0"), 0, "%s", cfg_err);
    cr_assert_eq(cfg_set(&c, "cluster_advertise", "127.0.0.1:0"), -1);
    cfg_assert_err("cluster_advertise", "from 1 to 65535");
    cr_assert_eq(cfg_set(&c, "advertise", ""), 0, "%s", cfg_err);
}

Test(config, listen_addresses_are_numeric)
{
    const char *ok[] = {"0.0.0.0:6632", "127.0.0.1:1", "[::]:6632", "[::1]:0",
                        "[fe80::1]:65535"};
    const char *bad[] = {"localhost:6632", "node-1.example.org:6633",
                         "256.0.0.1:1", "[1.2.3.4]:1", "[fe80::zz]:1"};
    struct config c;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        cr_assert_eq(cfg_set(&c, "listen", ok[i]), 0, "%s", cfg_err);
        cr_assert_str_eq(c.listen, ok[i]);
        cr_assert_eq(cfg_set(&c, "cluster_listen", ok[i]), 0, "%s", cfg_err);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(cfg_set(&c, "listen", bad[i]), -1, "'%s' accepted",
                     bad[i]);
        cfg_assert_err("listen", "invalid value");
    }
    cr_assert_eq(cfg_set(&c, "listen", "localhost:6632"), -1);
    cfg_assert_err("expected an IP address");
}

Test(config, node_id_is_1_to_64_safe_characters)
{
    char long_id[66];
    struct config c;

    memset(long_id, 'a', 65);
    long_id[65] = '\0';
    cr_assert_eq(cfg_set(&c, "node_id", "node-1.rack_2"), 0, "%s", cfg_err);
    cr_assert_str_eq(c.node_id, "node-1.rack_2");
    long_id[64] = '\0';
    cr_assert_eq(cfg_set(&c, "node_id", long_id), 0, "%s", cfg_err);
    long_id[64] = 'a';
    cr_assert_eq(cfg_set(&c, "node_id", long_id), -1);
    cfg_assert_err("node_id");
    cr_assert_eq(cfg_set(&c, "node_id", ""), -1);
    cfg_assert_err("node_id", "1-64 characters");
    cr_assert_eq(cfg_set(&c, "node_id", "a/b"), -1);
    cfg_assert_err("node_id", "'a/b'");
    cr_assert_eq(cfg_set(&c, "node_id", "caf\xc3\xa9"), -1);
}

Test(config, node_id_defaults_to_the_advertise_address)
{
    struct config c;
    int action;
    char *argv[] = {"mayflyd", "-o", "advertise=[::1]:7000", NULL};
    char *named[] = {"mayflyd", "-o", "node_id=n1", NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_str_eq(c.node_id, "---1--7000");
    cr_assert_eq(cfg_load(&c, &action, named), 0, "%s", cfg_err);
    cr_assert_str_eq(c.node_id, "n1");
}

Test(config, peers_split_on_commas)
{
    struct config c;

    cr_assert_eq(cfg_set(&c, "peers", " a:1 ,b:2,[::1]:3 "), 0, "%s", cfg_err);
    cr_assert_eq(c.npeers, 3);
    cr_assert_str_eq(c.peers[0], "a:1");
    cr_assert_str_eq(c.peers[1], "b:2");
    cr_assert_str_eq(c.peers[2], "[::1]:3");
    cr_assert_eq(
        config_set(&c, "peers", "  ", "test", cfg_err, sizeof(cfg_err)), 0);
    cr_assert_eq(c.npeers, 0);
    cr_assert_str_eq(c.peers[0], "");
}

Test(config, malformed_peer_lists_are_refused)
{
    const char *bad[] = {"a:1,,b:2", "a:1,", ",a:1", "a:1,a:1", "a", "a:1,b:0"};
    char many[CONFIG_PEERS_MAX * 16] = "";
    struct config c;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(cfg_set(&c, "peers", bad[i]), -1, "'%s' accepted", bad[i]);
        cfg_assert_err("test: peers: invalid value");
    }
    for (int i = 0; i <= CONFIG_PEERS_MAX; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sh%d:1",
                 i ? "," : "", i);
    cr_assert_eq(cfg_set(&c, "peers", many), -1);
    cfg_assert_err("peers", "more than 16");
}

Test(config, data_dir_cannot_be_empty)
{
    struct config c;

    cr_assert_eq(cfg_set(&c, "data_dir", ""), -1);
    cfg_assert_err("data_dir");
    cr_assert_eq(cfg_set(&c, "data_dir", "/var/lib/mayfly"), 0);
    cr_assert_str_eq(c.data_dir, "/var/lib/mayfly");
}

Test(config, strings_longer_than_their_field_are_refused)
{
    char path[CONFIG_PATH_MAX + 1];
    struct config c;

    memset(path, 'p', sizeof(path) - 1);
    path[sizeof(path) - 1] = '\0';
    cr_assert_eq(cfg_set(&c, "pidfile", path), -1);
    cfg_assert_err("pidfile", "too long");
}

Test(config, unknown_key_in_the_file_names_file_line_and_key)
{
    struct config c;
    int action;
    char want[128];
    const char *path = cfg_file("workers = 2\n\nqueue_max_lenght = 5\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    snprintf(want, sizeof(want), "%s:3: unknown key 'queue_max_lenght'", path);
    cr_assert_str_eq(cfg_err, want);
}

Test(config, invalid_value_in_the_file_names_file_line_and_key)
{
    struct config c;
    int action;
    char want[128];
    const char *path = cfg_file("# c\nlease_s = soon\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    snprintf(want, sizeof(want), "%s:2: lease_s: invalid value 'soon'", path);
    cfg_assert_err(want);
}

Test(config, a_line_without_equals_or_key_is_refused)
{
    struct config c;
    int action;
    const char *path = cfg_file("workers 2\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    cfg_assert_err(path, ":1:", "expected 'key = value'", "workers 2");
    cfg_rewrite(path, "workers = 1\n = 2\n");
    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    cfg_assert_err(":2:", "no key");
}

Test(config, a_missing_file_is_an_error_naming_it)
{
    struct config c;
    int action;
    char *argv[] = {"mayflyd", "-c", "/nonexistent/mayfly.conf", NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    cfg_assert_err("/nonexistent/mayfly.conf", "No such file");
}

Test(config, a_byte_order_mark_starting_the_file_is_skipped)
{
    struct config c;
    int action;
    const char *path = cfg_file("\xEF\xBB\xBFlease_s = 12\nworkers = 3\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_eq(c.lease_s, 12);
    cr_assert_eq(c.workers, 3);
    /* Only at the start of the file: elsewhere it is part of a key. */
    cfg_rewrite(path, "lease_s = 12\n\xEF\xBB\xBFworkers = 3\n");
    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    cfg_assert_err(":2: unknown key");
}

Test(config, a_nul_byte_in_a_line_is_refused_naming_file_and_line)
{
    static const char text[] = "workers = 3\nlease_s = 1\0002\n";
    struct config c;
    int action;
    char want[128];
    const char *path = cfg_file_n(cfg_path, text, sizeof(text) - 1);
    char *argv[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    snprintf(want, sizeof(want), "%s:2: the line holds a NUL byte", path);
    cr_assert_str_eq(cfg_err, want);
}

Test(config, peers_need_a_cluster_secret_file)
{
    struct config c;
    int action;
    char *argv[] = {"mayflyd", "-t", "-o", "peers=127.0.0.1:17399", NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    cfg_assert_err("cluster_secret_file must be set when peers are");
}

Test(config, the_cluster_secret_file_must_hold_a_usable_secret)
{
    struct config c;
    int action;
    char ov[128];
    char *argv[] = {"mayflyd", "-t", "-o", "peers=127.0.0.1:17399",
                    "-o",      ov,   NULL};
    const char *bad[][2] = {{"", "holds no secret"},
                            {" \n\n", "holds no secret"},
                            {"two\nlines\n", "control character"}};

    snprintf(ov, sizeof(ov), "cluster_secret_file=/nonexistent/secret");
    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    cfg_assert_err("cluster_secret_file", "/nonexistent/secret",
                   "No such file");
    snprintf(ov, sizeof(ov), "cluster_secret_file=/tmp");
    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    cfg_assert_err("cluster_secret_file", "/tmp", "Is a directory");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(ov, sizeof(ov), "cluster_secret_file=%s",
                 cfg_secret_file(bad[i][0]));
        cr_assert_eq(cfg_load(&c, &action, argv), -1, "'%s' accepted",
                     bad[i][0]);
        cfg_assert_err("cluster_secret_file", cfg_secret, bad[i][1]);
        unlink(cfg_secret);
    }
    snprintf(ov, sizeof(ov), "cluster_secret_file=%s",
             cfg_secret_file("s3cret\r\n"));
    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
}

Test(config, listen_and_cluster_listen_must_be_two_sockets)
{
    const char *same[][2] = {{"127.0.0.1:7000", "127.0.0.1:7000"},
                             {"0.0.0.0:7000", "127.0.0.1:7000"},
                             {"127.0.0.1:7000", "0.0.0.0:7000"},
                             {"[::]:7000", "127.0.0.1:7000"},
                             {"[::1]:7000", "[::]:7000"}};
    const char *two[][2] = {{"127.0.0.1:7000", "127.0.0.1:7001"},
                            {"127.0.0.1:7000", "127.0.0.2:7000"},
                            {"[::1]:7000", "127.0.0.1:7000"},
                            {"0.0.0.0:7000", "[::1]:7000"},
                            {"127.0.0.1:0", "127.0.0.1:0"}};
    struct config c;
    int action;
    char l[64], cl[64];
    char *argv[] = {"mayflyd", "-t", "-o", l, "-o", cl, NULL};

    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        snprintf(l, sizeof(l), "listen=%s", same[i][0]);
        snprintf(cl, sizeof(cl), "cluster_listen=%s", same[i][1]);
        cr_assert_eq(cfg_load(&c, &action, argv), -1, "%s and %s accepted",
                     same[i][0], same[i][1]);
        cfg_assert_err("listen", "cluster_listen", same[i][0], same[i][1]);
    }
    for (size_t i = 0; i < sizeof(two) / sizeof(two[0]); i++) {
        snprintf(l, sizeof(l), "listen=%s", two[i][0]);
        snprintf(cl, sizeof(cl), "cluster_listen=%s", two[i][1]);
        cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    }
}

Test(config, a_relative_c_path_is_kept_absolute)
{
    struct config c;
    int action;
    char cwd[512], want[600];
    const char *path = cfg_file("workers = 1\n");
    char *argv[] = {"mayflyd", "-c", (char *)path + 5, NULL};

    cr_assert_eq(chdir("/tmp"), 0);
    cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    snprintf(want, sizeof(want), "%s/%s", cwd, path + 5);
    cr_assert_str_eq(c.config_file, want);
}

Test(config, bad_environment_value_names_the_variable_and_key)
{
    struct config c;
    int action;
    char *argv[] = {"mayflyd", NULL};

    setenv("MAYFLY_WORKERS", "many", 1);
    cr_assert_eq(cfg_load(&c, &action, argv), -1);
    cfg_assert_err("environment MAYFLY_WORKERS", "workers", "'many'");
}

Test(config, unknown_mayfly_variables_are_ignored)
{
    struct config c;
    int action;
    char *argv[] = {"mayflyd", NULL};

    setenv("MAYFLY_NOT_A_KEY", "1", 1);
    setenv("MAYFLY_DATA_DIR", "/srv/mayfly", 1);
    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_str_eq(c.data_dir, "/srv/mayfly");
}

Test(config, bad_o_flags_are_refused)
{
    struct config c;
    int action;
    char *noeq[] = {"mayflyd", "-o", "workers", NULL};
    char *nokey[] = {"mayflyd", "-o", "=3", NULL};
    char *unknown[] = {"mayflyd", "-o", "wrokers=3", NULL};
    char *badval[] = {"mayflyd", "-o", "workers=99", NULL};

    cr_assert_eq(cfg_load(&c, &action, noeq), -1);
    cfg_assert_err("-o", "key=value", "'workers'");
    cr_assert_eq(cfg_load(&c, &action, nokey), -1);
    cfg_assert_err("-o", "key=value");
    cr_assert_eq(cfg_load(&c, &action, unknown), -1);
    cr_assert_str_eq(cfg_err, "option -o: unknown key 'wrokers'");
    cr_assert_eq(cfg_load(&c, &action, badval), -1);
    cfg_assert_err("option -o: workers: invalid value '99'");
}

Test(config, bad_command_lines_are_refused)
{
    struct config c;
    int action;
    char *unknown[] = {"mayflyd", "-x", NULL};
    char *noarg[] = {"mayflyd", "-c", NULL};
    char *extra[] = {"mayflyd", "-d", "stray", NULL};

    cr_assert_eq(cfg_load(&c, &action, unknown), -1);
    cfg_assert_err("unknown option -x");
    cr_assert_eq(cfg_load(&c, &action, noarg), -1);
    cfg_assert_err("option -c needs an argument");
    cr_assert_eq(cfg_load(&c, &action, extra), -1);
    cfg_assert_err("unexpected argument 'stray'");
}

Test(config, help_and_version_are_returned_before_reading_the_file)
{
    struct config c;
    int action;
    char *help[] = {"mayflyd", "-c", "/nonexistent", "-h", NULL};
    char *version[] = {"mayflyd", "-v", NULL};

    cr_assert_eq(cfg_load(&c, &action, help), 0, "%s", cfg_err);
    cr_assert_eq(action, 'h');
    cr_assert_eq(cfg_load(&c, &action, version), 0, "%s", cfg_err);
    cr_assert_eq(action, 'v');
}

Test(config, t_sets_check_only)
{
    struct config c;
    int action;
    char *argv[] = {"mayflyd", "-t", NULL};

    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_eq(c.check_only, 1);
    cr_assert_eq(c.daemonize, 0);
}

Test(config, d_makes_paths_absolute_and_defaults_log_and_pidfile)
{
    struct config c;
    int action;
    char *argv[] = {"mayflyd", "-d", NULL};
    char *withlog[] = {"mayflyd",           "-d", "-o", "log=logs/m.log", "-o",
                       "pidfile=run/m.pid", NULL};

    cr_assert_eq(chdir("/tmp"), 0);
    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_eq(c.daemonize, 1);
    cr_assert_str_eq(c.data_dir, "/tmp/mayfly-data");
    cr_assert_str_eq(c.pidfile, "/tmp/mayfly-data/mayflyd.pid");
    cr_assert_str_eq(c.log, "syslog");
    cr_assert_eq(cfg_load(&c, &action, withlog), 0, "%s", cfg_err);
    cr_assert_str_eq(c.log, "/tmp/logs/m.log");
    cr_assert_str_eq(c.pidfile, "/tmp/run/m.pid");
}

Test(config, cors_origins_is_a_list_of_origins_refused_naming_the_key)
{
    struct config c;

    config_defaults(&c);
    cr_assert_str_eq(c.cors_origins, "", "none by default");
    cr_assert_eq(cfg_set(&c, "cors_origins",
                         "https://app.example.com, http://localhost:8080"),
                 0, "%s", cfg_err);
    cr_assert_str_eq(c.cors_origins,
                     "https://app.example.com, http://localhost:8080");
    cr_assert_eq(cfg_set(&c, "cors_origins", "*"), 0, "%s", cfg_err);
    cr_assert_eq(cfg_set(&c, "cors_origins", "https://app.example.com/"), -1);
    cfg_assert_err("test: cors_origins: invalid value "
                   "'https://app.example.com/'",
                   "no trailing /");
    cr_assert_eq(cfg_set(&c, "cors_origins", "app.example.com"), -1);
    cfg_assert_err("cors_origins", "http:// or https://");
    cr_assert_eq(cfg_set(&c, "cors_origins", "https://a.example,,"), -1);
    cfg_assert_err("cors_origins", "empty");
}

Test(config, jwt_secret_file_is_a_path_made_absolute_with_d)
{
    struct config c;
    int action;
    char *argv[] = {"mayflyd", "-d", "-o", "jwt_secret_file=keys/jwt", NULL};

    config_defaults(&c);
    cr_assert_str_eq(c.jwt_secret_file, "", "none by default");
    cr_assert_eq(chdir("/tmp"), 0);
    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_str_eq(c.jwt_secret_file, "/tmp/keys/jwt");
}

Test(config, reload_applies_run_time_keys_and_reports_the_rest)
{
    struct config old, fresh;
    int action;
    char report[1024];
    const char *path = cfg_file("lease_s = 10\nworkers = 2\n");
    char *argv[] = {"mayflyd",         "-c", (char *)path, "-o",
                    "log_level=debug", NULL};

    cr_assert_eq(cfg_load(&old, &action, argv), 0, "%s", cfg_err);
    cfg_rewrite(path, "lease_s = 20\nworkers = 4\nlog_level = warn\n"
                      "max_body_bytes = 1M\n");
    setenv("MAYFLY_MAX_WAIT_MS", "500", 1);
    cr_assert_eq(config_reload(&old, &fresh, report, sizeof(report)), 0, "%s",
                 report);
    cr_assert_eq(fresh.lease_s, 20);
    cr_assert_eq(fresh.max_wait_ms, 60000, "a restart-only key changed");
    cr_assert_eq(fresh.max_body_bytes, 64ULL << 20);
    cr_assert_eq(fresh.workers, 2, "a restart-only key changed at run time");
    cr_assert_str_eq(fresh.log_level, "debug", "-o lost on reload");
    cr_assert_str_eq(fresh.config_file, old.config_file);
    cr_assert_str_eq(report, "workers 2 -> 4 (needs a restart); "
                             "lease_s 10 -> 20; max_wait_ms 60000 -> 500 "
                             "(needs a restart); max_body_bytes 67108864 -> "
                             "1048576 (needs a restart)");
}

Test(config, reload_without_changes_says_so)
{
    struct config old, fresh;
    int action;
    char report[256], ov[128];
    const char *secret = cfg_secret_file("s3cret\n");
    const char *path = cfg_file("peers = a:1,b:2\nlog = /tmp/x.log\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, "-o", ov, NULL};

    snprintf(ov, sizeof(ov), "cluster_secret_file=%s", secret);
    cr_assert_eq(cfg_load(&old, &action, argv), 0, "%s", cfg_err);
    cr_assert_eq(config_reload(&old, &fresh, report, sizeof(report)), 0, "%s",
                 report);
    cr_assert_str_eq(report, "no setting changed");
    cr_assert_eq(memcmp(&old, &fresh, sizeof(old)), 0);
}

Test(config, reload_reports_string_and_list_changes)
{
    struct config old, fresh;
    int action;
    char report[512], ov[128];
    const char *secret = cfg_secret_file("s3cret\n");
    const char *path = cfg_file("peers = a:1\nlog = /tmp/x.log\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, "-o", ov, NULL};

    snprintf(ov, sizeof(ov), "cluster_secret_file=%s", secret);
    cr_assert_eq(cfg_load(&old, &action, argv), 0, "%s", cfg_err);
    cfg_rewrite(path, "peers = a:1,b:2\nlog = /tmp/y.log\n");
    cr_assert_eq(config_reload(&old, &fresh, report, sizeof(report)), 0, "%s",
                 report);
    cr_assert_str_eq(report, "peers a:1 -> a:1,b:2 (needs a restart); "
                             "log '/tmp/x.log' -> '/tmp/y.log' (needs a "
                             "restart)");
    cr_assert_str_eq(fresh.log, "/tmp/x.log", "a restart-only key changed");
    cr_assert_eq(fresh.npeers, 1);
}

Test(config, reload_of_a_broken_file_keeps_the_old_settings)
{
    struct config old, fresh;
    int action;
    char report[256];
    const char *path = cfg_file("lease_s = 10\n");
    char *argv[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&old, &action, argv), 0, "%s", cfg_err);
    cfg_rewrite(path, "lease_s = 20\nbogus = 1\n");
    memset(&fresh, 0x5a, sizeof(fresh));
    cr_assert_eq(config_reload(&old, &fresh, report, sizeof(report)), -1);
    cr_assert_not_null(strstr(report, ":2: unknown key 'bogus'"), "%s", report);
    cr_assert_eq(fresh.lease_s, 0x5a5a5a5a, "fresh was written on error");
}

Test(config, reload_keeps_d_paths_absolute_after_chdir)
{
    struct config old, fresh;
    int action;
    char report[256];
    const char *path = cfg_file("log = m.log\n");
    char *argv[] = {"mayflyd", "-d", "-c", (char *)path, NULL};

    cr_assert_eq(chdir("/tmp"), 0);
    cr_assert_eq(cfg_load(&old, &action, argv), 0, "%s", cfg_err);
    cr_assert_str_eq(old.log, "/tmp/m.log");
    cr_assert_eq(chdir("/"), 0);
    cr_assert_eq(config_reload(&old, &fresh, report, sizeof(report)), 0, "%s",
                 report);
    cr_assert_str_eq(report, "no setting changed");
}

/* Every key SPEC §6 names; the shipped files must document each one. */
static const char *const cfg_spec_keys[] = {"node_id",
                                            "listen",
                                            "cluster_listen",
                                            "advertise",
                                            "cluster_advertise",
                                            "peers",
                                            "data_dir",
                                            "workers",
                                            "max_bytes",
                                            "queue_max_length",
                                            "queue_max_bytes",
                                            "lease_s",
                                            "retry_limit",
                                            "implicit_idle_s",
                                            "member_ttl_ms",
                                            "leave_exclude_s",
                                            "max_wait_ms",
                                            "max_body_bytes",
                                            "max_connections",
                                            "log_level",
                                            "log",
                                            "pidfile",
                                            "cluster_secret_file",
                                            "auth_file",
                                            "metrics_auth",
                                            "jwt_secret_file",
                                            "cors_origins",
                                            "tls_cert_file",
                                            "tls_key_file",
                                            "cluster_tls_cert_file",
                                            "cluster_tls_key_file",
                                            "cluster_tls_ca_file"};
#define CFG_NSPEC (sizeof(cfg_spec_keys) / sizeof(cfg_spec_keys[0]))

/* cfg_slurp - a whole file from the repository root (make test's cwd). */
static char *
cfg_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s (run from the repository root)", path,
                       strerror(errno));
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

Test(config, every_spec_key_is_known)
{
    struct config c;

    for (size_t i = 0; i < CFG_NSPEC; i++) {
        cfg_set(&c, cfg_spec_keys[i], "x");
        cr_assert_null(strstr(cfg_err, "unknown key"), "%s", cfg_err);
    }
}

Test(config, shipped_mayfly_conf_is_valid_and_documents_every_key)
{
    struct config c;
    int action;
    char line[64];
    char *argv[] = {"mayflyd", "-c", "ops/mayfly.conf", NULL};
    const char *text = cfg_slurp("ops/mayfly.conf");

    cr_assert_eq(cfg_load(&c, &action, argv), 0, "%s", cfg_err);
    cr_assert_str_eq(c.data_dir, "/var/lib/mayfly");
    cr_assert_str_eq(c.log, "/var/log/mayfly/mayflyd.log");
    for (size_t i = 0; i < CFG_NSPEC; i++) {
        snprintf(line, sizeof(line), "\n%s = ", cfg_spec_keys[i]);
        int set = strstr(text, line) != NULL;
        snprintf(line, sizeof(line), "\n#%s =", cfg_spec_keys[i]);
        cr_assert(set || strstr(text, line) != NULL,
                  "ops/mayfly.conf does not show '%s'", cfg_spec_keys[i]);
    }
}

Test(config, man_page_documents_every_key)
{
    char want[64];
    const char *text = cfg_slurp("ops/mayflyd.8");

    for (size_t i = 0; i < CFG_NSPEC; i++) {
        snprintf(want, sizeof(want), "\n.BI %s \"", cfg_spec_keys[i]);
        cr_assert_not_null(strstr(text, want), "mayflyd.8 lacks %s",
                           cfg_spec_keys[i]);
    }
}

/* The keys SIGHUP applies (config.c's table); every other key needs a
 * restart, and the shipped files must mark exactly these. */
static const char *const cfg_hup_keys[] = {
    "queue_max_length", "queue_max_bytes", "lease_s",
    "retry_limit",      "implicit_idle_s", "log_level"};

/* cfg_is_hup - whether key is one of cfg_hup_keys. */
static int
cfg_is_hup(const char *key)
{
    for (size_t i = 0; i < sizeof(cfg_hup_keys) / sizeof(cfg_hup_keys[0]); i++)
        if (strcmp(cfg_hup_keys[i], key) == 0)
            return 1;
    return 0;
}

Test(config, hup_keys_are_the_ones_a_reload_applies)
{
    struct config old, fresh;
    int action;
    char report[2048];
    const char *path = cfg_file("");
    char *argv[] = {"mayflyd", "-c", (char *)path, NULL};

    cr_assert_eq(cfg_load(&old, &action, argv), 0, "%s", cfg_err);
    cfg_rewrite(path, "queue_max_length = 7\nqueue_max_bytes = 7K\n"
                      "lease_s = 7\nretry_limit = 7\nimplicit_idle_s = 7\n"
                      "log_level = warn\nlog = /tmp/x.log\n"
                      "max_connections = 7\nmax_wait_ms = 7\n");
    cr_assert_eq(config_reload(&old, &fresh, report, sizeof(report)), 0, "%s",
                 report);
    cr_assert_null(strstr(report, "queue_max_length 10000 -> 7 (needs"));
    cr_assert_null(strstr(report, "log_level 'info' -> 'warn' (needs"));
    cr_assert_not_null(strstr(report, "log '' -> '/tmp/x.log' (needs"), "%s",
                       report);
    cr_assert_not_null(strstr(report, "max_connections 20000 -> 7 (needs"),
                       "%s", report);
    cr_assert_eq(fresh.lease_s, 7);
    cr_assert_str_eq(fresh.log, "");
}

Test(config, man_page_marks_hup_on_exactly_the_keys_a_reload_applies)
{
    char want[64];
    const char *text = cfg_slurp("ops/mayflyd.8");

    for (size_t i = 0; i < CFG_NSPEC; i++) {
        snprintf(want, sizeof(want), "\n.BI %s \"", cfg_spec_keys[i]);
        const char *entry = strstr(text, want);
        cr_assert_not_null(entry, "mayflyd.8 lacks %s", cfg_spec_keys[i]);
        const char *end = strstr(entry + 1, "\n.TP");
        const char *hup = strstr(entry, "\n(HUP)");
        int marked = hup != NULL && (end == NULL || hup < end);
        cr_assert_eq(marked, cfg_is_hup(cfg_spec_keys[i]),
                     "mayflyd.8 %s %s as changed on HUP", cfg_spec_keys[i],
                     marked ? "marks" : "does not mark");
    }
}

Test(config, shipped_files_say_max_connections_is_per_worker)
{
    /* Each file's entry for the key: the man page and README after it, the
     * configuration file in the comment above it. */
    const struct {
        const char *file, *key;
        int before;
    } docs[] = {{"ops/mayflyd.8", "\n.BI max_connections", 0},
                {"README.md", "| `max_connections`", 0},
                {"ops/mayfly.conf", "\n#max_connections =", 1}};
    char entry[300];

    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        const char *text = cfg_slurp(docs[i].file);
        const char *key = strstr(text, docs[i].key);
        cr_assert_not_null(key, "%s lacks max_connections", docs[i].file);
        if (docs[i].before) {
            const char *from = key - text > 200 ? key - 200 : text;
            snprintf(entry, sizeof(entry), "%.*s", (int)(key - from), from);
        } else {
            snprintf(entry, sizeof(entry), "%.299s", key);
        }
        cr_assert_not_null(strstr(entry, "per worker process"),
                           "%s: max_connections is not per worker: %s",
                           docs[i].file, entry);
        cr_assert_null(strstr(entry, "per node"), "%s: %s", docs[i].file,
                       entry);
    }
}
