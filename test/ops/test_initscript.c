/*
 * test_initscript.c - the installed init script driving a real mayflyd:
 * start, status, serve, reload after a log rotation, a second start, a
 * broken configuration, stop within the drain time; and mayflyd -t.
 *
 * Each test installs into its own DESTDIR and points the script there
 * through DAEMON, CONFIG, PIDFILE and DEFAULTS; the node listens on free
 * loopback ports.  Commands run through sh with output to a file: the
 * daemon must not hold a pipe of ours.  The daemon's orphaned processes may
 * never be reaped here (PID 1 of a container need not wait), so a process
 * counts as gone once it is a zombie.  fini stops whatever a failed test
 * left running.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/ops/shell.h"

#define IT_DRAIN_S 20 /* DRAIN_TIMEOUT given to the script */

static char it_root[PATH_MAX - 64]; /* the repository */
static char it_bin[PATH_MAX];       /* the mayflyd make test built */
static char it_dir[64];             /* scratch, removed at fini */
static char it_dest[128];           /* DESTDIR */
static char it_daemon[256], it_init[256], it_conf[256], it_pid[256];
static char it_log[256];
static int it_port, it_cport;
static char it_out[65536]; /* output of the last it_sh() */

/* it_sh - run a shell command (printf-style); its output lands in it_out. */
static int it_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int
it_sh(const char *fmt, ...)
{
    va_list ap;
    int st;

    va_start(ap, fmt);
    st = ops_vsh(it_dir, it_out, sizeof(it_out), fmt, ap);
    va_end(ap);
    return st;
}

/* it_free_port - a loopback port nobody listens on right now. */
static int
it_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    cr_assert_neq(fd, -1);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* it_write_config - the node's configuration, with extra lines appended. */
static void
it_write_config(const char *extra)
{
    FILE *f = fopen(it_conf, "w");
    cr_assert_not_null(f, "%s: %s", it_conf, strerror(errno));
    fprintf(f,
            "# written by test_initscript\n"
            "listen = 127.0.0.1:%d\n"
            "cluster_listen = 127.0.0.1:%d\n"
            "data_dir = %s/var/lib/mayfly\n"
            "log = %s\n"
            "workers = 2\n"
            "max_bytes = 32M\n"
            "%s",
            it_port, it_cport, it_dest, it_log, extra);
    fclose(f);
}

/* it_setup - install into a fresh DESTDIR; point the script at it. */
static void
it_setup(void)
{
    const char *bin = getenv("MAYFLYD");
    char tmp[PATH_MAX];

    cr_assert_not_null(bin, "MAYFLYD is not set (test/run-all.sh sets it)");
    cr_assert_not_null(realpath(bin, it_bin), "%s: %s", bin, strerror(errno));
    snprintf(tmp, sizeof(tmp), "%s", it_bin);
    snprintf(it_root, sizeof(it_root), "%.*s", (int)sizeof(it_root) - 1,
             dirname(dirname(dirname(tmp))));
    snprintf(it_dir, sizeof(it_dir), "/tmp/mayfly-init-XXXXXX");
    cr_assert_not_null(mkdtemp(it_dir));
    snprintf(it_dest, sizeof(it_dest), "%s/dest", it_dir);
    snprintf(it_daemon, sizeof(it_daemon), "%s/usr/local/sbin/mayflyd",
             it_dest);
    snprintf(it_init, sizeof(it_init), "%s/etc/init.d/mayflyd", it_dest);
    snprintf(it_conf, sizeof(it_conf), "%s/etc/mayfly/mayfly.conf", it_dest);
    snprintf(it_pid, sizeof(it_pid), "%s/run/mayfly/mayflyd.pid", it_dest);
    snprintf(it_log, sizeof(it_log), "%s/var/log/mayfly/mayflyd.log", it_dest);
    cr_assert_eq(it_sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "
                       "%s install DESTDIR=%s MAYFLYD_BIN=%s",
                       it_root, it_dest, it_bin),
                 0, "make install: %s", it_out);
    it_port = it_free_port();
    do
        it_cport = it_free_port();
    while (it_cport == it_port);
    it_write_config("");
    setenv("DAEMON", it_daemon, 1);
    setenv("CONFIG", it_conf, 1);
    setenv("PIDFILE", it_pid, 1);
    snprintf(tmp, sizeof(tmp), "%s/etc/default/mayflyd", it_dest);
    setenv("DEFAULTS", tmp, 1);
    snprintf(tmp, sizeof(tmp), "%d", IT_DRAIN_S);
    setenv("DRAIN_TIMEOUT", tmp, 1);
    setenv("MAYFLY_USER", "", 1);
    unsetenv("DAEMON_OPTS");
}

/* it_read_pid - the pid in the pidfile, or 0. */
static pid_t
it_read_pid(void)
{
    long pid = 0;
    FILE *f = fopen(it_pid, "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    return (pid_t)pid;
}

/* it_teardown - stop anything left running, remove the scratch tree. */
static void
it_teardown(void)
{
    char cmd[128];
    pid_t pid = it_read_pid();

    if (pid > 0 && ops_pid_ours(pid, it_dir))
        kill(pid, SIGKILL);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", it_dir);
    if (it_dir[0] != '\0' && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", it_dir);
}

TestSuite(initscript, .init = it_setup, .fini = it_teardown, .timeout = 180);

/* it_now_ms - monotonic milliseconds. */
static long long
it_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* it_pause - 50 ms between polls. */
static void
it_pause(void)
{
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, NULL);
}

/* it_init_cmd - run the installed init script with one action. */
static int
it_init_cmd(const char *action)
{
    return it_sh("%s %s", it_init, action);
}

/* it_http - curl the node; returns the HTTP status, body in it_out. */
static int
it_http(const char *method, const char *path, const char *body)
{
    char file[128];
    int code = 0;

    snprintf(file, sizeof(file), "%s/status", it_dir);
    it_sh("curl -s -m 10 -o %s/body -w '%%{http_code}' -X %s "
          "-H 'content-type: application/json' %s%s%s "
          "'http://127.0.0.1:%d%s' >%s",
          it_dir, method, body ? "-d '" : "", body ? body : "", body ? "'" : "",
          it_port, path, file);
    FILE *f = fopen(file, "r");
    if (f != NULL) {
        if (fscanf(f, "%d", &code) != 1)
            code = 0;
        fclose(f);
    }
    it_sh("cat %s/body", it_dir);
    return code;
}

/* it_wait_healthy - /health answers 200 within 30 s. */
static void
it_wait_healthy(void)
{
    long long end = it_now_ms() + 30000;
    while (it_http("GET", "/health", NULL) != 200) {
        cr_assert_lt(it_now_ms(), end, "/health never answered 200: %s",
                     it_out);
        it_pause();
    }
}

/* it_push_pop - one message through queue q; the node really serves. */
static void
it_push_pop(const char *q, const char *word)
{
    char body[256], path[256];

    snprintf(body, sizeof(body),
             "{\"queue\":\"%s\",\"messages\":[{\"payload\":\"%s\"}]}", q, word);
    cr_assert_eq(it_http("POST", "/api/v1/ephemeral/push", body), 201,
                 "push: %s", it_out);
    cr_assert_not_null(strstr(it_out, "\"pushed\""), "%s", it_out);
    snprintf(path, sizeof(path),
             "/api/v1/ephemeral/pop?queue=%s&autoAck=true&wait=true"
             "&timeout=5000",
             q);
    cr_assert_eq(it_http("GET", path, NULL), 200, "pop: %s", it_out);
    cr_assert_not_null(strstr(it_out, word), "pop returned %s", it_out);
}

/* it_start - init start succeeds and leaves a serving daemon. */
static pid_t
it_start(void)
{
    cr_assert_eq(it_init_cmd("start"), 0, "start: %s", it_out);
    pid_t pid = it_read_pid();
    cr_assert_gt(pid, 0, "no pidfile after start");
    cr_assert(ops_pid_alive(pid), "pid %d from the pidfile is not running",
              (int)pid);
    it_wait_healthy();
    return pid;
}

/* it_stop - init stop: the master is gone within the drain time. */
static void
it_stop(pid_t pid)
{
    long long t0 = it_now_ms();
    cr_assert_eq(it_init_cmd("stop"), 0, "stop: %s", it_out);
    cr_assert_lt(it_now_ms() - t0, IT_DRAIN_S * 1000LL,
                 "stop took longer than the drain time");
    cr_assert_null(strstr(it_out, "stale"), "stop had to clean up: %s", it_out);
    cr_assert_not(ops_pid_alive(pid), "pid %d still runs after stop", (int)pid);
    cr_assert_eq(access(it_pid, F_OK), -1, "pidfile left after stop");
}

/* it_masters - running processes of the installed binary whose parent is
 * not one: each is a master. */
static int
it_masters(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    cr_assert_not_null(d);
    while ((e = readdir(d)) != NULL) {
        char link[64], exe[PATH_MAX], stat[512];
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || !ops_pid_alive(pid))
            continue;
        snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
        ssize_t len = readlink(link, exe, sizeof(exe) - 1);
        if (len <= 0)
            continue;
        exe[len] = '\0';
        if (strcmp(exe, it_daemon) != 0)
            continue;
        snprintf(link, sizeof(link), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(link, "r");
        if (f == NULL)
            continue;
        size_t r = fread(stat, 1, sizeof(stat) - 1, f);
        fclose(f);
        stat[r] = '\0';
        int ppid = 0;
        const char *s = strrchr(stat, ')');
        if (s == NULL || sscanf(s + 2, "%*c %d", &ppid) != 1)
            continue;
        snprintf(link, sizeof(link), "/proc/%d/exe", ppid);
        len = readlink(link, exe, sizeof(exe) - 1);
        exe[len > 0 ? len : 0] = '\0';
        if (strcmp(exe, it_daemon) != 0)
            n++;
    }
    closedir(d);
    return n;
}

Test(initscript, start_status_serve_stop_status)
{
    cr_assert_eq(it_init_cmd("status"), 3, "status before start: %s", it_out);
    pid_t pid = it_start();
    cr_assert_eq(it_init_cmd("status"), 0, "status: %s", it_out);
    cr_assert_not_null(strstr(it_out, "running"), "%s", it_out);
    it_push_pop("ops-q", "hello-init");
    it_stop(pid);
    cr_assert_eq(it_init_cmd("status"), 3, "status after stop: %s", it_out);
    cr_assert_not_null(strstr(it_out, "not running"), "%s", it_out);
}

Test(initscript, reload_after_rotation_opens_a_new_log_and_keeps_serving)
{
    char rotated[300];
    struct stat st;

    pid_t pid = it_start();
    snprintf(rotated, sizeof(rotated), "%s.1", it_log);
    cr_assert_eq(rename(it_log, rotated), 0, "rename %s: %s", it_log,
                 strerror(errno));
    cr_assert_eq(it_init_cmd("reload"), 0, "reload: %s", it_out);
    long long end = it_now_ms() + 15000;
    while (stat(it_log, &st) != 0 || st.st_size == 0) {
        cr_assert_lt(it_now_ms(), end, "no new log file after reload");
        it_pause();
    }
    cr_assert_eq(it_read_pid(), pid, "reload restarted the daemon");
    it_push_pop("ops-rotated", "after-rotation");
    cr_assert_eq(stat(rotated, &st), 0);
    cr_assert_gt(st.st_size, 0, "the rotated log is empty");
    it_stop(pid);
}

/* it_wait_log - the log file holds text within 15 s. */
static void
it_wait_log(const char *text)
{
    long long end = it_now_ms() + 15000;
    while (it_sh("cat %s", it_log), strstr(it_out, text) == NULL) {
        cr_assert_lt(it_now_ms(), end, "the log never said '%s': %s", text,
                     it_out);
        it_pause();
    }
}

Test(initscript, reload_logs_what_changed_and_what_needs_a_restart)
{
    pid_t pid = it_start();
    it_write_config("lease_s = 45\nworkers = 3\n");
    cr_assert_eq(it_init_cmd("reload"), 0, "reload: %s", it_out);
    it_wait_log("workers 2 -> 3 (needs a restart); lease_s 30 -> 45");
    cr_assert_eq(it_read_pid(), pid, "reload restarted the daemon");
    it_push_pop("ops-reloaded", "reloaded");
    it_stop(pid);
}

Test(initscript, a_second_start_does_not_start_a_second_daemon)
{
    pid_t pid = it_start();
    cr_assert_eq(it_masters(), 1);
    cr_assert_eq(it_init_cmd("start"), 0, "second start: %s", it_out);
    cr_assert_not_null(strstr(it_out, "already running"), "%s", it_out);
    cr_assert_eq(it_read_pid(), pid, "the pidfile changed");
    cr_assert_eq(it_masters(), 1, "a second master runs");
    /* Past the script: mayflyd -d itself refuses a live pidfile. */
    cr_assert_eq(it_sh("%s -d -c %s -o pidfile=%s", it_daemon, it_conf, it_pid),
                 1, "a second mayflyd -d: %s", it_out);
    cr_assert_eq(it_read_pid(), pid, "the pidfile changed");
    cr_assert_eq(it_masters(), 1, "a second master runs");
    it_wait_log("not starting");
    it_push_pop("ops-once", "one-daemon");
    it_stop(pid);
}

Test(initscript, a_broken_config_fails_reload_and_restart_and_keeps_serving)
{
    pid_t pid = it_start();
    it_write_config("queue_max_lenght = 5\n");
    cr_assert_eq(it_init_cmd("reload"), 1, "reload: %s", it_out);
    cr_assert_not_null(strstr(it_out, "queue_max_lenght"), "%s", it_out);
    cr_assert_eq(it_init_cmd("restart"), 1, "restart: %s", it_out);
    cr_assert_eq(it_read_pid(), pid);
    cr_assert(ops_pid_alive(pid));
    it_push_pop("ops-broken", "still-serving");
    /* What only the start used to refuse: peers without a secret file. */
    char peers[64];
    snprintf(peers, sizeof(peers), "peers = 127.0.0.1:%d\n", it_free_port());
    it_write_config(peers);
    cr_assert_eq(it_init_cmd("restart"), 1, "restart: %s", it_out);
    cr_assert_not_null(strstr(it_out, "cluster_secret_file"), "%s", it_out);
    cr_assert_eq(it_read_pid(), pid);
    it_push_pop("ops-broken", "still-serving-2");
    it_write_config("");
    it_stop(pid);
}

Test(initscript, restart_replaces_the_daemon)
{
    pid_t pid = it_start();
    cr_assert_eq(it_init_cmd("restart"), 0, "restart: %s", it_out);
    pid_t again = it_read_pid();
    cr_assert_gt(again, 0);
    cr_assert_neq(again, pid);
    cr_assert_not(ops_pid_alive(pid));
    it_wait_healthy();
    it_push_pop("ops-restart", "restarted");
    it_stop(again);
}

Test(initscript, status_is_1_with_a_stale_pidfile)
{
    cr_assert_eq(
        it_sh("mkdir -p $(dirname %s) && echo 999999 > %s", it_pid, it_pid), 0);
    cr_assert_eq(it_init_cmd("status"), 1, "status: %s", it_out);
    cr_assert_eq(it_init_cmd("stop"), 0, "stop: %s", it_out);
    cr_assert_eq(access(it_pid, F_OK), -1, "stale pidfile kept");
    cr_assert_eq(it_init_cmd("status"), 3, "status: %s", it_out);
    cr_assert_eq(it_init_cmd("reload"), 7, "reload when stopped: %s", it_out);
    cr_assert_eq(it_init_cmd("bogus"), 2);
}

Test(initscript, check_only_accepts_a_valid_config)
{
    cr_assert_eq(it_sh("%s -t -c %s", it_daemon, it_conf), 0, "%s", it_out);
    cr_assert_not_null(strstr(it_out, "valid"), "%s", it_out);
    cr_assert_eq(access(it_pid, F_OK), -1, "-t wrote a pidfile");
}

Test(initscript, check_only_names_the_line_and_key_of_a_broken_config)
{
    char want[300];

    it_write_config("workers = 2\nlease_s = soon\n");
    cr_assert_eq(it_sh("%s -t -c %s", it_daemon, it_conf), 1, "%s", it_out);
    snprintf(want, sizeof(want), "%s:9: lease_s: invalid value 'soon'",
             it_conf);
    cr_assert_not_null(strstr(it_out, want), "%s", it_out);
    it_write_config("no_such_key = 1\n");
    cr_assert_eq(it_sh("%s -t -c %s", it_daemon, it_conf), 1, "%s", it_out);
    snprintf(want, sizeof(want), "%s:8: unknown key 'no_such_key'", it_conf);
    cr_assert_not_null(strstr(it_out, want), "%s", it_out);
    it_write_config("");
    cr_assert_eq(it_sh("%s -t -c %s -o workers=100", it_daemon, it_conf), 1);
    cr_assert_not_null(strstr(it_out, "workers"), "%s", it_out);
}

Test(initscript, check_only_refuses_what_the_start_would_refuse)
{
    char text[512];
    int peer = it_free_port();

    snprintf(text, sizeof(text), "peers = 127.0.0.1:%d\n", peer);
    it_write_config(text);
    cr_assert_eq(it_sh("%s -t -c %s", it_daemon, it_conf), 1, "%s", it_out);
    cr_assert_not_null(
        strstr(it_out, "cluster_secret_file must be set when peers are"), "%s",
        it_out);
    snprintf(text, sizeof(text),
             "peers = 127.0.0.1:%d\ncluster_secret_file = %s/no-secret\n", peer,
             it_dir);
    it_write_config(text);
    cr_assert_eq(it_sh("%s -t -c %s", it_daemon, it_conf), 1, "%s", it_out);
    cr_assert_not_null(strstr(it_out, "no-secret: No such file"), "%s", it_out);
    it_write_config("");
    cr_assert_eq(it_sh("%s -t -c %s -o cluster_listen=127.0.0.1:%d", it_daemon,
                       it_conf, it_port),
                 1, "%s", it_out);
    cr_assert_not_null(strstr(it_out, "are one socket"), "%s", it_out);
}

Test(initscript, a_failed_start_says_why)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    /* Somebody else holds the client port. */
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)it_port);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind: %s",
                 strerror(errno));
    cr_assert_eq(listen(fd, 1), 0);
    cr_assert_eq(it_init_cmd("start"), 1, "start: %s", it_out);
    cr_assert_not_null(strstr(it_out, "Address already in use"),
                       "the script does not say why: %s", it_out);
    cr_assert_eq(it_read_pid(), 0, "a pidfile after a failed start");
    close(fd);
}

/*
 * it_log_holders - of the master pid and its children (the workers), how
 * many hold a descriptor open on path; *all receives how many processes
 * were looked at.
 */
static int
it_log_holders(pid_t master, const char *path, int *all)
{
    char cmd[512];
    int n = 0;

    *all = 0;
    snprintf(cmd, sizeof(cmd),
             "for p in %d $(cat /proc/%d/task/*/children 2>/dev/null); do "
             "echo \"p $p\"; ls -l /proc/$p/fd 2>/dev/null | "
             "sed -n 's/.* -> //p'; done",
             (int)master, (int)master);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char line[PATH_MAX + 8];
    int counted = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "p ", 2) == 0) {
            counted = 0;
            (*all)++;
        } else if (!counted && strcmp(line, path) == 0) {
            counted = 1;
            n++;
        }
    }
    pclose(f);
    return n;
}

/*
 * it_wait_reopened - within 15 s, the log file holds "SIGUSR1: log
 * reopened" and every process of the node (master and both workers) has
 * the log path open and none the rotated file.
 */
static void
it_wait_reopened(pid_t pid, const char *rotated)
{
    long long end = it_now_ms() + 15000;
    int all, on_new, on_old;

    it_wait_log("SIGUSR1: log reopened");
    for (;;) {
        on_new = it_log_holders(pid, it_log, &all);
        on_old = it_log_holders(pid, rotated, &all);
        if (all == 3 && on_new == 3 && on_old == 0)
            break;
        cr_assert_lt(it_now_ms(), end,
                     "%d of %d processes hold the new log, %d the rotated one",
                     on_new, all, on_old);
        it_pause();
    }
}

/* it_file_has - whether path holds text. */
static int
it_file_has(const char *path, const char *text)
{
    it_sh("cat %s", path);
    return strstr(it_out, text) != NULL;
}

Test(initscript, usr1_reopens_the_log_and_reads_no_configuration)
{
    char rotated[300];

    pid_t pid = it_start();
    snprintf(rotated, sizeof(rotated), "%s.1", it_log);
    cr_assert_eq(rename(it_log, rotated), 0, "rename %s: %s", it_log,
                 strerror(errno));
    /* A configuration HUP would refuse, and say so in the log. */
    it_write_config("lease_s = 45\nqueue_max_lenght = 5\n");
    cr_assert_eq(kill(pid, SIGUSR1), 0);
    it_wait_reopened(pid, rotated);
    it_push_pop("ops-usr1", "after-usr1");
    it_write_config("");
    it_stop(pid);
    /* The stop was logged after the USR1: in the new file only. */
    cr_assert(it_file_has(it_log, "stopped"), "%s", it_out);
    cr_assert_not(it_file_has(rotated, "stopped"), "%s", it_out);
    cr_assert_not(it_file_has(it_log, "reload"), "USR1 read the config: %s",
                  it_out);
    cr_assert_not(it_file_has(rotated, "reload"), "%s", it_out);
}

Test(initscript, the_logrotate_snippet_rotates_with_usr1)
{
    char conf[256], state[256], rotated[300];

    if (system("command -v logrotate >/dev/null 2>&1") != 0)
        cr_skip_test("logrotate is not installed");
    pid_t pid = it_start();
    /* The installed snippet, pointed at this DESTDIR. */
    snprintf(conf, sizeof(conf), "%s/logrotate.conf", it_dir);
    snprintf(state, sizeof(state), "%s/logrotate.state", it_dir);
    cr_assert_eq(it_sh("sed -e 's|/var/log/mayfly|%s/var/log/mayfly|' "
                       "-e 's|/run/mayfly/mayflyd.pid|%s|' "
                       "%s/etc/logrotate.d/mayflyd >%s",
                       it_dest, it_pid, it_dest, conf),
                 0, "%s", it_out);
    it_write_config("queue_max_lenght = 5\n");
    cr_assert_eq(it_sh("logrotate -f -s %s %s", state, conf), 0,
                 "logrotate: %s", it_out);
    snprintf(rotated, sizeof(rotated), "%s.1", it_log);
    cr_assert_eq(access(rotated, F_OK), 0, "logrotate did not rotate");
    it_wait_reopened(pid, rotated);
    it_write_config("");
    it_stop(pid);
    cr_assert_not(it_file_has(it_log, "reload"), "%s", it_out);
}
