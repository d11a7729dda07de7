/*
 * test_includes.c - the include rule of DESIGN's map holds in the tree
 * (test/ops/includes.sh finds no include that goes up or sideways), and
 * the check finds each kind of include against it, naming file and line,
 * in a scratch tree made for it.
 */
#include <sys/wait.h>

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "test/ops/shell.h"

static char inc_root[PATH_MAX - 64]; /* the repository */
static char inc_dir[64];             /* scratch, removed at fini */
static char inc_out[65536];          /* output of the last command */

static void
inc_setup(void)
{
    cr_assert_eq(ops_repo_root(inc_root, sizeof(inc_root)), 0,
                 "no repository from MAYFLYD (test/run-all.sh sets it): %s",
                 strerror(errno));
    snprintf(inc_dir, sizeof(inc_dir), "/tmp/mayfly-includes-XXXXXX");
    cr_assert_not_null(mkdtemp(inc_dir));
}

/* run - the shell command cmd (which sends its stderr to stdout too), its
 * output into inc_out; its exit status (-1: it did not run or did not
 * exit). */
static int
run(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    size_t n;
    int st;

    cr_assert_not_null(p, "popen %s: %s", cmd, strerror(errno));
    n = fread(inc_out, 1, sizeof(inc_out) - 1, p);
    inc_out[n] = '\0';
    st = pclose(p);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
inc_teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf %s 2>&1", inc_dir);
    if (inc_dir[0] != '\0' && run(cmd) != 0)
        fprintf(stderr, "could not remove %s: %s\n", inc_dir, inc_out);
}

TestSuite(includes, .init = inc_setup, .fini = inc_teardown, .timeout = 60);

/* check - includes.sh on the tree at root; its exit status. */
static int
check(const char *root)
{
    char cmd[2 * PATH_MAX];

    snprintf(cmd, sizeof(cmd), "sh %s/test/ops/includes.sh %s 2>&1", inc_root,
             root);
    return run(cmd);
}

/* put - the file path (under the scratch tree) holding text. */
static void
put(const char *path, const char *text)
{
    char full[PATH_MAX], dir[PATH_MAX], cmd[PATH_MAX + 32];
    FILE *f;

    snprintf(full, sizeof(full), "%s/tree/%s", inc_dir, path);
    snprintf(dir, sizeof(dir), "%s", full);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s 2>&1", dirname(dir));
    cr_assert_eq(run(cmd), 0, "%s", inc_out);
    cr_assert_not_null(f = fopen(full, "w"), "%s: %s", full, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

Test(includes, the_tree_keeps_the_rule)
{
    int st = check(inc_root);

    cr_assert_eq(st, 0, "includes against the rule:\n%s", inc_out);
}

Test(includes, every_kind_of_leak_is_named_by_file_and_line)
{
    char tree[PATH_MAX];

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

    snprintf(tree, sizeof(tree), "%s/tree", inc_dir);
    int st = check(tree);

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
