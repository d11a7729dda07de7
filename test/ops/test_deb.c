/*
 * test_deb.c - the Debian package, end to end on this machine: make deb,
 * lintian, dpkg -i, the files in place (the unit through systemd-analyze
 * verify, the bash completion run against the installed client, the
 * Grafana dashboard), the service started by the init script (or by systemd
 * when it runs the machine), a push and a pop with the packaged mayfly client,
 * stop, dpkg --purge, and nothing left behind: no file, no directory, no
 * user, no group, no process.
 *
 * It installs into the running system, so it needs root (CI runs as root
 * on a fresh machine) and skips otherwise, saying so; it refuses to start
 * when a mayfly package, user or directory is already there, since the
 * purge would take them.  The daemon listens on free ports the test picks,
 * given through /etc/default/mayflyd (DAEMON_OPTS, read by the init
 * script and the unit alike), which the test writes before the install
 * and removes after the purge.  Teardown purges whatever a failure left.
 */
#include <sys/stat.h>

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"
#include "test/ops/shell.h"

#define DEFAULTS "/etc/default/mayflyd"

static char deb_root[PATH_MAX - 64]; /* the repository */
static char deb_dir[64];             /* scratch, removed at fini */
static char deb_out[65536];          /* output of the last deb_sh() */
static int deb_installed;            /* dpkg -i ran: fini purges */
static int deb_wrote_defaults;       /* fini removes DEFAULTS */
static int deb_systemd;              /* systemd runs this machine */

/* deb_sh - run a shell command (printf-style); output lands in deb_out. */
static int deb_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int
deb_sh(const char *fmt, ...)
{
    va_list ap;
    int st;

    va_start(ap, fmt);
    st = ops_vsh(deb_dir, deb_out, sizeof(deb_out), fmt, ap);
    va_end(ap);
    return st;
}

/* deb_exists - path is there (any type, a dangling link included). */
static int
deb_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* deb_setup - the repository from MAYFLYD (ROOT/build/MODE/mayflyd). */
static void
deb_setup(void)
{
    const char *bin = getenv("MAYFLYD");
    char real[PATH_MAX];

    cr_assert_not_null(bin, "MAYFLYD is not set (test/run-all.sh sets it)");
    cr_assert_not_null(realpath(bin, real), "%s: %s", bin, strerror(errno));
    snprintf(deb_root, sizeof(deb_root), "%.*s", (int)sizeof(deb_root) - 1,
             dirname(dirname(dirname(real))));
    snprintf(deb_dir, sizeof(deb_dir), "/tmp/mayfly-deb-XXXXXX");
    cr_assert_not_null(mkdtemp(deb_dir));
    deb_systemd = deb_exists("/run/systemd/system");
}

/* deb_service - start or stop the installed service as its init system
 * would; the command's exit status. */
static int
deb_service(const char *action)
{
    if (deb_systemd)
        return deb_sh("systemctl %s mayflyd.service", action);
    return deb_sh("/etc/init.d/mayflyd %s", action);
}

/* deb_teardown - purge what a failed run left, then the scratch. */
static void
deb_teardown(void)
{
    if (deb_installed) {
        if (deb_sh("dpkg-query -W -f='${Status}' mayfly 2>/dev/null | "
                   "grep -qv not-installed") == 0) {
            deb_service("stop");
            if (deb_sh("dpkg --purge mayfly") != 0)
                fprintf(stderr, "test_deb: dpkg --purge mayfly: %s\n", deb_out);
        }
    }
    if (deb_wrote_defaults)
        unlink(DEFAULTS);
    if (deb_dir[0] != '\0' && deb_sh("rm -rf %s", deb_dir) != 0)
        fprintf(stderr, "could not remove %s\n", deb_dir);
}

TestSuite(deb, .init = deb_setup, .fini = deb_teardown, .timeout = 900);

/* Where the package's own things must be before the install and after
 * the purge: absent. */
static const char *const deb_own_paths[] = {
    "/usr/sbin/mayflyd",   "/etc/mayfly",
    "/etc/init.d/mayflyd", "/etc/logrotate.d/mayflyd",
    "/var/lib/mayfly",     "/var/log/mayfly",
    "/run/mayfly",         "/lib/systemd/system/mayflyd.service",
    "/usr/share/mayfly",   "/usr/share/bash-completion/completions/mayfly",
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* deb_find_named - every path under the system's trees whose name holds
 * "mayfly", sorted, into file: not /tmp or /var/tmp, where tests keep
 * their scratch, nor wherever the checkout is. */
static void
deb_find_named(const char *file)
{
    cr_assert_eq(deb_sh("find /etc /lib /usr /var /run /opt /srv -xdev "
                        "-path /var/tmp -prune -o -name '*mayfly*' -print "
                        "2>/dev/null | sort > %s/%s",
                        deb_dir, file),
                 0, "%s", deb_out);
}

/* deb_wait_health - until GET /health on port answers 200 (30 s). */
static void
deb_wait_health(int port)
{
    int64_t deadline = itest_now_ms() + 30000;

    while (deb_sh("curl -sf http://127.0.0.1:%d/health", port) != 0) {
        cr_assert(itest_now_ms() < deadline,
                  "the installed mayflyd did not answer on port %d within "
                  "30 s; its log:\n%s",
                  port,
                  (deb_sh("tail -20 /var/log/mayfly/mayflyd.log"), deb_out));
        itest_sleep_ms(100);
    }
}

Test(deb, builds_passes_lintian_installs_serves_and_purges_clean)
{
    char deb[PATH_MAX + 256], version[64], arch[32], files[PATH_MAX],
        line[PATH_MAX];
    struct passwd *pw;
    struct stat st;
    FILE *f;
    int port, cport, pid;

    if (geteuid() != 0)
        cr_skip_test("the package test installs into this machine with "
                     "dpkg, which takes root (CI runs as root)");
    cr_assert_neq(deb_sh("dpkg-query -W -f='${Status}' mayfly 2>/dev/null | "
                         "grep -qv not-installed"),
                  0,
                  "a mayfly package is installed here: the test's purge "
                  "would remove it");
    cr_assert_null(getpwnam("mayfly"), "a mayfly user exists already: the "
                                       "test's purge would remove it");
    for (size_t i = 0; i < N(deb_own_paths); i++)
        cr_assert(!deb_exists(deb_own_paths[i]),
                  "%s exists already: the test's purge would remove it",
                  deb_own_paths[i]);
    cr_assert(!deb_exists(DEFAULTS), "%s exists already", DEFAULTS);
    deb_find_named("before");

    /* make deb: build/mayfly_<version>_<arch>.deb, of the version the
     * daemon says it is. */
    cr_assert_eq(deb_sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "
                        "%s deb",
                        deb_root),
                 0, "make deb failed:\n%s", deb_out);
    cr_assert_eq(deb_sh("%s -v", getenv("MAYFLYD")), 0, "%s", deb_out);
    cr_assert_eq(sscanf(deb_out, "mayflyd %63s", version), 1, "%s", deb_out);
    cr_assert_eq(deb_sh("dpkg --print-architecture"), 0);
    cr_assert_eq(sscanf(deb_out, "%31s", arch), 1);
    snprintf(deb, sizeof(deb), "%s/build/mayfly_%s_%s.deb", deb_root, version,
             arch);
    cr_assert(deb_exists(deb), "make deb made no %s", deb);

    /* lintian: no error (warnings and notes are shown, not fatal). */
    cr_assert_eq(deb_sh("lintian --fail-on error %s", deb), 0,
                 "lintian reports errors:\n%s", deb_out);
    cr_assert_null(strstr(deb_out, "\nE: "), "%s", deb_out);
    cr_assert(strncmp(deb_out, "E: ", 3) != 0, "%s", deb_out);

    /* Free ports for the installed daemon, before the install starts it. */
    port = itest_free_port();
    cport = itest_free_port();
    f = fopen(DEFAULTS, "w");
    cr_assert_not_null(f, "%s: %s", DEFAULTS, strerror(errno));
    deb_wrote_defaults = 1;
    fprintf(f,
            "# written by test/ops/test_deb.c, removed after the purge\n"
            "DAEMON_OPTS=\"-o listen=127.0.0.1:%d "
            "-o cluster_listen=127.0.0.1:%d\"\n",
            port, cport);
    fclose(f);

    deb_installed = 1;
    cr_assert_eq(deb_sh("DEBIAN_FRONTEND=noninteractive dpkg -i %s", deb), 0,
                 "dpkg -i failed:\n%s", deb_out);
    snprintf(files, sizeof(files), "%s/files", deb_dir);
    cr_assert_eq(deb_sh("dpkg -L mayfly > %s", files), 0, "%s", deb_out);

    /* What the package put in place. */
    cr_assert_eq(deb_sh("test -x /usr/sbin/mayflyd && "
                        "test -f /usr/share/man/man8/mayflyd.8.gz && "
                        "test -x /etc/init.d/mayflyd && "
                        "test -f /lib/systemd/system/mayflyd.service && "
                        "test -f /etc/logrotate.d/mayflyd"),
                 0, "a file is missing; the package holds:\n%s",
                 (deb_sh("cat %s", files), deb_out));
    cr_assert_eq(deb_sh("test -f /usr/share/bash-completion/completions/mayfly "
                        "&& test -f /usr/share/mayfly/grafana/mayfly.json"),
                 0, "no completion or dashboard; the package holds:\n%s",
                 (deb_sh("cat %s", files), deb_out));
    /* The installed completion completes with the installed client. */
    cr_assert_eq(deb_sh("bash --norc -c 'source "
                        "/usr/share/bash-completion/completions/mayfly; "
                        "COMP_WORDS=(mayfly qu); COMP_CWORD=1; _mayfly; "
                        "echo \"${COMPREPLY[@]}\"'"),
                 0, "%s", deb_out);
    cr_assert_str_eq(deb_out, "queues\n");
    /* The installed unit, as systemd reads it (other units' complaints,
     * if this machine has any, are not the package's).  --man=no: the man
     * page is checked above, and man would leave a cat page in
     * /var/cache/man that the purge rightly does not remove. */
    if (deb_sh("command -v systemd-analyze") == 0) {
        int rc = deb_sh("systemd-analyze verify --man=no "
                        "/lib/systemd/system/mayflyd.service");
        cr_assert(rc == 0 && strstr(deb_out, "mayflyd") == NULL,
                  "systemd-analyze verify: %s", deb_out);
    }
    cr_assert_eq(deb_sh("dpkg-query -W -f='${Conffiles}' mayfly"), 0);
    cr_assert(strstr(deb_out, "/etc/mayfly/mayfly.conf "),
              "mayfly.conf is not a conffile: %s", deb_out);
    pw = getpwnam("mayfly");
    cr_assert_not_null(pw, "postinst made no mayfly user");
    cr_assert_lt(pw->pw_uid, 1000, "mayfly is not a system user");
    for (int i = 0; i < 2; i++) {
        const char *d = i ? "/var/log/mayfly" : "/var/lib/mayfly";
        cr_assert_eq(stat(d, &st), 0, "postinst made no %s", d);
        cr_assert(st.st_uid == pw->pw_uid && (st.st_mode & 0777) == 0750,
                  "%s: uid %d mode %o", d, (int)st.st_uid,
                  (unsigned)(st.st_mode & 0777));
    }

    /* The service: started by the install or now, serving as mayfly. */
    cr_assert_eq(deb_service("start"), 0, "start failed:\n%s", deb_out);
    deb_wait_health(port);
    /* The init script and the unit both give it this pidfile. */
    cr_assert_eq(deb_sh("cat /run/mayfly/mayflyd.pid"), 0, "%s", deb_out);
    pid = atoi(deb_out);
    cr_assert_gt(pid, 0);
    cr_assert_eq(deb_sh("stat -c %%U /proc/%d", pid), 0);
    cr_assert_str_eq(deb_out, "mayfly\n", "the daemon runs as %s", deb_out);
    /* A push and a pop with the packaged client, as an operator would. */
    cr_assert_eq(deb_sh("/usr/bin/mayfly --url http://127.0.0.1:%d push "
                        "deb-check '{\"from\":\"the package\"}'",
                        port),
                 0, "push failed: %s", deb_out);
    cr_assert(strncmp(deb_out, "e:", 2) == 0, "no id: %s", deb_out);
    cr_assert_eq(deb_sh("/usr/bin/mayfly --url http://127.0.0.1:%d --json "
                        "pop deb-check --auto-ack",
                        port),
                 0, "pop failed: %s", deb_out);
    cr_assert(strstr(deb_out, "\"payload\":{\"from\":\"the package\"}"), "%s",
              deb_out);
    cr_assert_eq(deb_sh("curl -sf http://127.0.0.1:%d/", port), 0);
    cr_assert(strstr(deb_out, "<title>mayfly</title>"),
              "no status page: %.200s", deb_out);
    cr_assert(deb_exists("/var/log/mayfly/mayflyd.log"),
              "the daemon does not log where mayfly.conf says");

    /* Stop: the port closes. */
    cr_assert_eq(deb_service("stop"), 0, "stop failed:\n%s", deb_out);
    cr_assert_neq(deb_sh("curl -s http://127.0.0.1:%d/health", port), 0,
                  "still answering after stop: %s", deb_out);
    cr_assert(!ops_pid_alive(pid), "mayflyd (pid %d) still runs after stop",
              pid);

    /* Purge: every file the package held, its directories, its user and
     * group, and anything else named for it are gone. */
    cr_assert_eq(deb_sh("dpkg --purge mayfly"), 0, "purge failed:\n%s",
                 deb_out);
    deb_installed = 0;
    cr_assert_eq(deb_sh("dpkg-query -W -f='${Status}' mayfly 2>/dev/null | "
                        "grep -qv not-installed"),
                 1, "dpkg still lists mayfly");
    f = fopen(files, "r");
    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] != '/' || (stat(line, &st) == 0 && S_ISDIR(st.st_mode) &&
                               strstr(line, "mayfly") == NULL))
            continue; /* a shared directory: /etc, /usr/sbin, ... */
        cr_assert(!deb_exists(line), "the purge left %s", line);
    }
    fclose(f);
    for (size_t i = 0; i < N(deb_own_paths); i++)
        cr_assert(!deb_exists(deb_own_paths[i]), "the purge left %s",
                  deb_own_paths[i]);
    cr_assert_null(getpwnam("mayfly"), "the purge left the mayfly user");
    cr_assert_neq(deb_sh("getent group mayfly"), 0,
                  "the purge left the mayfly group: %s", deb_out);
    cr_assert_neq(deb_sh("pgrep -a -f '^/usr/sbin/mayflyd '"), 0,
                  "a mayflyd from /usr/sbin still runs: %s", deb_out);
    unlink(DEFAULTS);
    deb_wrote_defaults = 0;
    deb_find_named("after");
    cr_assert_eq(deb_sh("comm -13 %s/before %s/after", deb_dir, deb_dir), 0);
    cr_assert_str_eq(deb_out, "", "the purge left:\n%s", deb_out);
}
