/*
 * test_includes.c - the include rule of DESIGN's map holds in the tree
 * (test/ops/includes.sh finds no include that goes up or sideways), and
 * the check finds each kind of include against it, naming file and line,
 * in a scratch tree made for it.
 *
 * The repository is found from MAYFLYD (ROOT/build/MODE/mayflyd), as the
 * other ops suites find it.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/ops/shell.h"

static char inc_root[PATH_MAX - 64]; /* the repository */
static char inc_dir[64];             /* scratch, removed at fini */
static char inc_out[65536];          /* output of the last inc_sh() */

/* inc_sh - run a shell command (printf-style); its output in inc_out. */
static int inc_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int
inc_sh(const char *fmt, ...)
{
    va_list ap;
    int st;

    va_start(ap, fmt);
    st = ops_vsh(inc_dir, inc_out, sizeof(inc_out), fmt, ap);
    va_end(ap);
    return st;
}

static void
inc_setup(void)
{
    const char *bin = getenv("MAYFLYD");
    char real[PATH_MAX];

    cr_assert_not_null(bin, "MAYFLYD is not set (test/run-all.sh sets it)");
    cr_assert_not_null(realpath(bin, real), "%s: %s", bin, strerror(errno));
    snprintf(inc_root, sizeof(inc_root), "%.*s", (int)sizeof(inc_root) - 1,
             dirname(dirname(dirname(real))));
    snprintf(inc_dir, sizeof(inc_dir), "/tmp/mayfly-includes-XXXXXX");
    cr_assert_not_null(mkdtemp(inc_dir));
}

static void
inc_teardown(void)
{
    if (inc_dir[0] != '\0' && inc_sh("rm -rf %s", inc_dir) != 0)
        fprintf(stderr, "could not remove %s\n", inc_dir);
}

TestSuite(includes, .init = inc_setup, .fini = inc_teardown, .timeout = 60);

/* put - the file path (under the scratch tree) holding text. */
static void
put(const char *path, const char *text)
{
    char full[PATH_MAX], dir[PATH_MAX];
    FILE *f;

    snprintf(full, sizeof(full), "%s/tree/%s", inc_dir, path);
    snprintf(dir, sizeof(dir), "%s", full);
    cr_assert_eq(inc_sh("mkdir -p %s", dirname(dir)), 0, "%s", inc_out);
    cr_assert_not_null(f = fopen(full, "w"), "%s: %s", full, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

Test(includes, the_tree_keeps_the_rule)
{
    int st = inc_sh("sh %s/test/ops/includes.sh %s", inc_root, inc_root);

    cr_assert_eq(st, 0, "includes against the rule:\n%s", inc_out);
}

Test(includes, every_kind_of_leak_is_named_by_file_and_line)
{
    /* allowed: each layer's own headers and the ones below it */
    put("master/ok.c",
        "#include \"master/m.h\"\n#include \"consensus/raft.h\"\n"
        "#include \"worker/worker.h\"\n#include \"http/buf.h\"\n"
        "#include \"shm/segment.h\"\n#include <stdio.h>\n");
    put("worker/ok.h", "#include \"http/buf.h\"\n#include \"shm/ring.h\"\n");
    put("http/ok.c", "#include \"http/buf.h\"\n#include \"shm/log.h\"\n"
                     "#include \"shm/nonce.h\"\n");
    put("consensus/ok.c", "#include \"consensus/raft.h\"\n"
                          "#include \"shm/log.h\"\n");
    put("shm/ok.c", "#include \"shm/log.h\"\n#include \"local.h\"\n");
    /* against it: up, sideways, and below but not the log */
    put("http/up.c", "/* a comment */\n#include <stdio.h>\n\n"
                     "#include \"master/config.h\"\n");
    put("http/low.c", "#include \"shm/segment.h\"\n");
    put("worker/side.h", "#include \"http/buf.h\"\n"
                         "  #  include \"consensus/raft.h\"\n");
    put("worker/up.c", "#include \"master/master.h\"\n");
    put("consensus/side.c", "#include \"http/buf.h\"\n");
    put("consensus/low.c", "#include \"shm/segment.h\"\n");
    put("shm/up.c", "#include \"http/buf.h\"\n");
    put("master/out.c", "#include \"test/cluster/cluster.h\"\n");

    int st = inc_sh("sh %s/test/ops/includes.sh %s/tree", inc_root, inc_dir);

    cr_assert_eq(st, 1, "exit %d:\n%s", st, inc_out);
    static const char *const named[] = {
        "http/up.c:4: includes \"master/config.h\"",
        "http/low.c:1: includes \"shm/segment.h\"",
        "worker/side.h:2: includes \"consensus/raft.h\"",
        "worker/up.c:1: includes \"master/master.h\"",
        "consensus/side.c:1: includes \"http/buf.h\"",
        "consensus/low.c:1: includes \"shm/segment.h\"",
        "shm/up.c:1: includes \"http/buf.h\"",
        "master/out.c:1: includes \"test/cluster/cluster.h\"",
        "8 include(s) against the rule",
    };
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
        cr_expect(strstr(inc_out, named[i]) != NULL, "'%s' not said in:\n%s",
                  named[i], inc_out);
    cr_expect(strstr(inc_out, "ok.") == NULL, "an allowed include named:\n%s",
              inc_out);
}
